/* The schema of the governance section: keys and limits (attach, period, algorithm, burst,
 * store, posture), and the checks across limits (unique ids, disclosable numbers). */
#include "schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- limits ---- */

static const char *const limit_keys[] = {
    "id",       "attach",    "type",    "amount",     "period",          "algorithm",
    "burst",    "store",     "posture", "domain",     "descriptor",      "name",
    "replaces", "unlimited", "allow",   "quota_mode", "detailed_metric", NULL};
/* What a rule that counts nothing (unlimited, allow) does not take. */
static const char *const counting_keys[] = {"type",  "amount", "period",  "algorithm",
                                            "burst", "store",  "posture", NULL};
static const char *const type_names[] = {
    "rpm", "tpm", "concurrency", "budget_usd", "quota_tokens", "quota_requests", NULL};
static const char *const algorithm_names[] = {"gcra",         "fixed_window", "sliding_window",
                                              "token_bucket", "envoy_window", NULL};
static const char *const attach_keys[] = {"level", "levels", NULL};
static const char *const posture_keys[] = {"mode", "enforce", "fail", NULL};
static const char *const mode_names[] = {"off", "on", NULL};
static const char *const enforce_names[] = {"soft", "hard", NULL};
static const char *const fail_names[] = {"closed", "open", NULL};

/* Why a type takes no algorithm, period or burst: the seed's table. */
static const char *no_rate_reason(cfg_type_t t)
{
    return t == CFG_TYPE_CONCURRENCY ? "a live gauge, not a windowed rate"
                                     : "folded from ledger rows";
}

static void load_posture(struct cfg__ctx *c, const cfg_node_t *n, const char *base,
                         cfg_posture_t *p)
{
    char path[PATH_SIZE];
    const cfg_node_t *m = cfg__want_map(c, n, base, posture_keys), *v;
    int i;
    if ((v = cfg__at(m, "mode")) &&
        cfg__get_enum(c, v, cfg__join(path, base, "mode"), "mode", mode_names, &i) == 0)
        p->on = (uint8_t)i;
    if ((v = cfg__at(m, "enforce")) &&
        cfg__get_enum(c, v, cfg__join(path, base, "enforce"), "enforce", enforce_names, &i) == 0)
        p->enforce_hard = (uint8_t)i;
    if ((v = cfg__at(m, "fail")) &&
        cfg__get_enum(c, v, cfg__join(path, base, "fail"), "fail", fail_names, &i) == 0)
        p->fail_open = (uint8_t)i;
}

/* The period of a limit. Rate-class: a required duration. Ledger types: a duration or a
 * calendar period, checked but not compiled (this daemon does not fold ledgers). */
static void load_period(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                        bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = cfg__at(m, "period");
    cfg__join(path, base, "period");
    if (!type_ok)
        return;
    if (cfg_type_is_rate(l->type)) {
        if (!v) {
            cfg__err(c, path, m,
                     "missing; a rate-class limit (%s) needs a period, written as a duration (1s, "
                     "1m, 1h)",
                     cfg_type_name(l->type));
            return;
        }
        const char *s = v->kind == CFG_NODE_SCALAR && !v->null && !v->failed ? v->text : NULL;
        int64_t ns;
        if (s && cfg_duration_parse(s, &ns) == CFG_DURATION_ECALENDAR) {
            cfg__err(c, path, v,
                     "\"%s\" is a calendar period, which does not compile for a rate-class limit; "
                     "write a duration (ms, s, m, h), e.g. 24h",
                     s);
            return;
        }
        cfg__get_duration(c, v, path, 1, CFG_PERIOD_MAX_NS, &l->period_ns);
    } else if (v && l->type == CFG_TYPE_CONCURRENCY) {
        cfg__err(c, path, v, "concurrency takes no period (%s)", no_rate_reason(l->type));
    } else if (v) {
        const char *s = cfg__want_scalar(c, v, path);
        int64_t ns;
        if (s && cfg_duration_parse(s, &ns) != CFG_DURATION_ECALENDAR)
            cfg__get_duration(c, v, path, 1, CFG_PERIOD_MAX_NS, &ns);
    }
}

/* The algorithm knob, per the seed's table. Returns 0 when l->algorithm is usable. */
static int load_algorithm(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                          bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = cfg__at(m, "algorithm");
    ra_algorithm_t alg;
    l->algorithm = RA_GCRA; /* the empty value, filled in before the identity is computed */
    if (!v || !type_ok)
        return type_ok ? 0 : -1;
    cfg__join(path, base, "algorithm");
    if (!cfg_type_is_rate(l->type)) {
        cfg__err(c, path, v, "type %s takes no algorithm (%s)", cfg_type_name(l->type),
                 no_rate_reason(l->type));
        return -1;
    }
    const char *name = cfg__want_scalar(c, v, path);
    if (!name)
        return -1;
    if (ra_algorithm_parse(name, &alg) < 0) {
        const char *guess = cfg_suggest(name, algorithm_names);
        char all[128];
        if (guess)
            cfg__err(c, path, v, "unregistered algorithm \"%s\"; did you mean \"%s\"?", name,
                     guess);
        else
            cfg__err(c, path, v, "unregistered algorithm \"%s\"; registered: %s", name,
                     cfg__list(all, sizeof(all), algorithm_names));
        return -1;
    }
    tt_err_t why;
    if (cfg_type_algorithm_check(l->type, alg, &why) < 0) {
        cfg__err(c, path, v, "%s", why.message);
        return -1;
    }
    l->algorithm = alg;
    return 0;
}

static void load_burst(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                       bool type_ok, bool alg_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = cfg__at(m, "burst");
    cfg__join(path, base, "burst");
    if (!type_ok) {
        int64_t ignored;
        if (v)
            cfg__get_int(c, v, path, 1, INT64_MAX, &ignored);
        return;
    }
    if (!cfg_type_is_rate(l->type)) {
        if (v)
            cfg__err(c, path, v, "type %s takes no burst (%s)", cfg_type_name(l->type),
                     no_rate_reason(l->type));
        return;
    }
    l->burst = l->amount; /* the default */
    if (!v || cfg__get_int(c, v, path, 1, INT64_MAX, &l->burst) < 0)
        return;
    if (alg_ok && (l->algorithm == RA_FIXED_WINDOW || l->algorithm == RA_SLIDING_WINDOW ||
                   l->algorithm == RA_ENVOY_WINDOW))
        cfg__warn(c, path, v,
                  "%s does not read burst; this value has no effect (and is not part of "
                  "the counter identity)",
                  ra_algorithm_name(l->algorithm));
}

int cfg__check_store_declared(struct cfg__ctx *c, const char *path, const cfg_node_t *at,
                              cfg_store_t store)
{
    if (store == CFG_STORE_SHARE && !c->cfg->share.present)
        cfg__err(c, path, at, "store \"share\" needs shared_state.share, which is not declared");
    else if (store == CFG_STORE_REDIS && !c->cfg->redis.present)
        cfg__err(c, path, at, "store \"redis\" needs shared_state.redis, which is not declared");
    else
        return 0;
    return -1;
}

static void load_store(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                       bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = cfg__at(m, "store");
    int store;
    if (!v ||
        cfg__get_enum(c, v, cfg__join(path, base, "store"), "store", cfg__store_names, &store) < 0)
        return;
    l->store = (cfg_store_t)store;
    if (type_ok && l->type == CFG_TYPE_CONCURRENCY && l->store != CFG_STORE_LOCAL)
        cfg__err(c, path, v,
                 "concurrency is a live gauge per key on this replica: store \"local\" "
                 "only, not \"%s\"",
                 cfg__store_names[store]);
    else if (cfg__check_store_declared(c, path, v, l->store) < 0)
        return;
    else if (l->store == CFG_STORE_REDIS && strchr(l->level, ','))
        cfg__err(c, path, v,
                 "store \"redis\" counts one level per key; attach.levels combinations are "
                 "counted by store \"local\" or \"share\"");
}

/*
 * attach: { level: L } or attach: { levels: [a, b, ...] } (a counter per combination of ids,
 * as Envoy's nested descriptors count). The levels are stored joined by ',' in order.
 */
static void load_attach(struct cfg__ctx *c, const cfg_node_t *n, const char *path, cfg_limit_t *l)
{
    char p[PATH_SIZE + 32]; /* room for "[i]" after a full path */
    const cfg_node_t *a = cfg__want_map(c, n, path, attach_keys), *v, *vs;
    if (!a)
        return;
    v = cfg__at(a, "level");
    vs = cfg__at(a, "levels");
    if (v && vs) {
        cfg__err(c, path, a, "level and levels both given; write one");
        return;
    }
    if (v) {
        cfg__get_string(c, v, cfg__join(p, path, "level"), l->level, CFG_LEVEL_MAX, false,
                        cfg__level_char, "a level name (letters, digits, _ - .)");
        return;
    }
    if (!vs) {
        cfg__err(c, cfg__join(p, path, "level"), a,
                 "missing; name a subject level (or \"global\")");
        return;
    }
    cfg__join(p, path, "levels");
    if (vs->kind != CFG_NODE_SEQ) {
        cfg__err(c, p, vs, "expected a sequence of level names, got %s",
                 vs->null ? "an empty value" : cfg__kind_name(vs));
        return;
    }
    if (vs->n == 0 || vs->n > CFG_ATTACH_LEVELS_MAX) {
        cfg__err(c, p, vs, "%zu levels; a combination names 1 to %d", vs->n, CFG_ATTACH_LEVELS_MAX);
        return;
    }
    char names[CFG_ATTACH_LEVELS_MAX][CFG_LEVEL_MAX + 1];
    size_t len = 0;
    for (size_t i = 0; i < vs->n; i++) {
        snprintf(p, sizeof(p), "%.*s.levels[%zu]", PATH_SIZE, path, i);
        if (cfg__get_string(c, vs->items[i], p, names[i], CFG_LEVEL_MAX, false, cfg__level_char,
                            "a level name (letters, digits, _ - .)") < 0)
            return;
        if (strcmp(names[i], "global") == 0) {
            cfg__err(c, p, vs->items[i], "\"global\" cannot be part of a combination");
            return;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0) {
                cfg__err(c, p, vs->items[i], "level \"%s\" given twice", names[i]);
                return;
            }
        }
        len += (size_t)snprintf(l->level + len, sizeof(l->level) - len, "%s%s", i ? "," : "",
                                names[i]);
    }
}

/* The decimal digits of v, in a static buffer (for one message at a time). */
static const char *u128_str(unsigned __int128 v)
{
    static char buf[40];
    char *p = buf + sizeof(buf) - 1;
    *p = '\0';
    do
        *--p = (char)('0' + (int)(v % 10));
    while ((v /= 10));
    return p;
}

/*
 * A disclosed limit's headers carry its amount (q, times the window's scale: cfg_policy_window)
 * and its remaining (r, at most burst for gcra and token_bucket, amount for the windows) as
 * Structured Field Integers, which have at most 15 digits: a limit they cannot carry is refused
 * here rather than disclosed as a header every parser rejects. Redis limits are never disclosed.
 */
static void check_disclosable(struct cfg__ctx *c, const cfg_node_t *m, const char *base,
                              const cfg_limit_t *l)
{
    char path[PATH_SIZE];
    if (!c->cfg->disclose_limits || !cfg_type_is_rate(l->type) || l->store == CFG_STORE_REDIS ||
        l->amount <= 0 || l->period_ns <= 0)
        return;
    int64_t w, scale, q;
    cfg_policy_window(l->period_ns, &w, &scale);
    bool reads_burst = l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET;
    if (__builtin_mul_overflow(l->amount, scale, &q) || q > CFG_SF_INT_MAX) {
        char scaled[96] = "";
        if (scale > 1) /* at most 1000 x INT64_MAX: 128 bits hold it */
            snprintf(scaled, sizeof(scaled), " per %lldms is advertised as q=%s per w=%llds,",
                     (long long)(l->period_ns / 1000000),
                     u128_str((unsigned __int128)l->amount * (unsigned __int128)scale),
                     (long long)w);
        cfg__err(
            c, cfg__join(path, base, "amount"), cfg__at(m, "amount"),
            "%lld%s more than a RateLimit-Policy header can carry (q is an RFC 9651 Integer: at "
            "most %lld); lower it, or set governance.keys.disclose_limits: false",
            (long long)l->amount, scale > 1 ? scaled : " is", (long long)CFG_SF_INT_MAX);
    } else if (reads_burst && l->burst > CFG_SF_INT_MAX)
        cfg__err(c, cfg__join(path, base, "burst"), cfg__at(m, "burst"),
                 "%lld is more than a RateLimit header can carry (r, up to burst, is an RFC 9651 "
                 "Integer: at most %lld); lower it, or set governance.keys.disclose_limits: false",
                 (long long)l->burst, (long long)CFG_SF_INT_MAX);
}

static void load_limit(struct cfg__ctx *c, const cfg_node_t *n, const char *base, cfg_limit_t *l)
{
    char path[PATH_SIZE];
    const cfg_node_t *m = cfg__want_map(c, n, base, limit_keys), *v;
    if (!m)
        return;
    l->posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    if (!(v = cfg__at(m, "id")))
        cfg__err(c, cfg__join(path, base, "id"), m,
                 "missing; every limit needs an id ([a-z0-9_]+)");
    else
        cfg__get_string(c, v, cfg__join(path, base, "id"), l->id, CFG_ID_MAX, false, cfg__id_char,
                        "an id ([a-z0-9_]+)");
    int rule = cfg__load_rule(c, m, base, l);
    if (rule != 0 && (v = cfg__at(m, "attach")))
        cfg__err(c, cfg__join(path, base, "attach"), v,
                 "a limit with a domain matches by its descriptor; attach names subject levels, "
                 "for the socket's and HTTP's subjects: give one or the other");
    else if (rule == 0 && !(v = cfg__at(m, "attach")))
        cfg__err(c, cfg__join(path, base, "attach"), m,
                 "missing; write attach: { level: <subject level> } "
                 "(\"global\" for one counter for all)");
    else if (rule == 0)
        load_attach(c, v, cfg__join(path, base, "attach"), l);
    if (rule > 0 && (l->rule.flags & (CFG_RULE_UNLIMITED | CFG_RULE_ALLOW))) {
        const char *what = l->rule.flags & CFG_RULE_UNLIMITED ? "unlimited" : "allow";
        for (size_t k = 0; counting_keys[k]; k++)
            if ((v = cfg__at(m, counting_keys[k])))
                cfg__err(c, cfg__join(path, base, counting_keys[k]), v,
                         "a rule with %s: true counts nothing; %s does not apply", what,
                         counting_keys[k]);
        l->type = CFG_TYPE_RPM;
        return;
    }
    int type = -1;
    if (!(v = cfg__at(m, "type")))
        cfg__err(c, cfg__join(path, base, "type"), m,
                 "missing; one of rpm, tpm, concurrency, budget_usd, "
                 "quota_tokens, quota_requests");
    else if (cfg__get_enum(c, v, cfg__join(path, base, "type"), "type", type_names, &type) == 0)
        l->type = (cfg_type_t)type;
    if (rule != 0 && type >= 0 && !cfg_type_is_rate(l->type)) {
        cfg__err(c, cfg__join(path, base, "type"), v,
                 "a limit with a domain is a rate (rpm or tpm: the descriptor's hits_addend is "
                 "its cost), not %s",
                 type_names[type]);
        type = -1;
    }
    bool type_ok = type >= 0;
    bool amount_ok = false;
    const cfg_node_t *amount_node = cfg__at(m, "amount");
    if (!amount_node)
        cfg__err(c, cfg__join(path, base, "amount"), m,
                 "missing; the units a limit allows are required");
    else /* a rule may be 0: always over the limit (envoy's requests_per_unit: 0) */
        amount_ok = cfg__get_int(c, amount_node, cfg__join(path, base, "amount"), rule != 0 ? 0 : 1,
                                 INT64_MAX, &l->amount) == 0;
    /* burst is still checked when amount failed: only its default needs amount */
    load_period(c, m, base, l, type_ok);
    bool alg_ok = load_algorithm(c, m, base, l, type_ok) == 0;
    if (amount_ok && alg_ok && l->amount == 0 && l->algorithm != RA_ENVOY_WINDOW) {
        cfg__err(c, cfg__join(path, base, "amount"), amount_node,
                 "0 (always over the limit) is a limit of algorithm envoy_window alone; %s needs "
                 "at least 1",
                 ra_algorithm_name(l->algorithm));
        amount_ok = false;
    }
    load_burst(c, m, base, l, type_ok && amount_ok, alg_ok);
    load_store(c, m, base, l, type_ok);
    if ((v = cfg__at(m, "posture")))
        load_posture(c, v, cfg__join(path, base, "posture"), &l->posture);
    check_disclosable(c, m, base, l);
}

static const char *const governance_keys[] = {"keys", "limits", NULL};
static const char *const keys_keys[] = {"disclose_limits", NULL};

void cfg__load_governance(struct cfg__ctx *c, const cfg_node_t *n)
{
    const cfg_node_t *m = cfg__want_map(c, n, "governance", governance_keys), *v;
    if ((v = cfg__at(m, "keys"))) {
        const cfg_node_t *k = cfg__want_map(c, v, "governance.keys", keys_keys);
        if ((v = cfg__at(k, "disclose_limits")))
            cfg__get_bool(c, v, "governance.keys.disclose_limits", &c->cfg->disclose_limits);
    }
    const cfg_node_t *ls = cfg__at(m, "limits");
    if (!ls)
        return;
    if (ls->kind != CFG_NODE_SEQ) {
        cfg__err(c, "governance.limits", ls, "expected a sequence of limits, got %s",
                 ls->null ? "an empty value" : cfg__kind_name(ls));
        return;
    }
    if (ls->n > CFG_LIMITS_MAX) {
        cfg__err(c, "governance.limits", ls, "%zu limits; at most %d", ls->n, CFG_LIMITS_MAX);
        return;
    }
    cfg_limit_t *limits = ls->n ? calloc(ls->n, sizeof(*limits)) : NULL;
    if (ls->n && !limits) {
        c->oom = 1;
        return;
    }
    c->cfg->limits = limits;
    c->cfg->n_limits = ls->n;
    for (size_t i = 0; i < ls->n; i++) {
        char base[PATH_SIZE], path[PATH_SIZE];
        snprintf(base, sizeof(base), "governance.limits[%zu]", i);
        load_limit(c, ls->items[i], base, &limits[i]);
        for (size_t j = 0; limits[i].id[0] && j < i; j++) {
            if (strcmp(limits[i].id, limits[j].id) == 0) {
                const cfg_node_t *first = cfg__map_get(ls->items[j], "id");
                cfg__err(c, cfg__join(path, base, "id"), cfg__map_get(ls->items[i], "id"),
                         "duplicate id \"%s\" (first at governance.limits[%zu], line %d)",
                         limits[i].id, j, first->line);
                break;
            }
        }
    }
}
