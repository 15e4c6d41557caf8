/*
 * The decision engine.
 *
 * A decision walks the config's limits in order and keeps those that apply: mode on, a type
 * the operation reads (decide: rpm and tpm; settle: tpm; acquire: concurrency) and a level the
 * subject names ("global" always applies, with the empty id as its one key). Each applicable
 * limit is then probed without committing anything: ra_step returns the state to store on
 * admission instead of storing it. Only when no hard limit denies is anything written, and
 * then every admitted probe is written at once. So a denial in one limit consumes nothing in
 * any other: probing is reading.
 *
 * Verdicts. An unfittable hard limit makes the verdict unfittable (the caller must not retry
 * that cost, whatever else said); otherwise a hard denial makes it deny, naming the denying
 * limit with the largest retry; otherwise admit, naming the tightest limit (lowest remaining
 * over depth). A soft limit never blocks: its would-be denial is reported in soft_denied and
 * nothing is committed for it. When a limit's store cannot answer (the counter cap reached, a
 * share store not armed, redis unavailable), posture.fail decides: open skips the limit for
 * this request (redis: the local fallback limiter built from the same config decides); closed
 * denies with a retry of 1 s.
 *
 * Redis makes a decision asynchronous. The local and share limits are probed first; if one of
 * them denies hard, redis is never asked. Otherwise one operation per redis limit is submitted
 * (the Lua script checks and commits atomically on its side) and gov_decide answers
 * GOV_PENDING. When the last reply arrives the whole decision runs again at the reply's time
 * with the redis answers in hand, and commits the local side only if everything admits. Best
 * effort, as SPEC §5 allows: a redis limit that admitted has consumed there even if a local
 * limit denies on the second pass.
 *
 * Configs are swapped by reload while asynchronous decisions may still hold the old one: a
 * config set is reference counted. Counters live in one table keyed by the limit's identity
 * (its table index), so a kept limit in the new set simply reuses the old index.
 */
#include "engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "disclose.h"
#include "lease.h"
#include "store.h"
#include "table.h"

#define RECLAIM_PER_OP 4    /* slots examined after every operation (decide: per counter added) */
#define RECLAIM_AT_CAP 1024 /* slots examined before an operation at the cap */
#define RECLAIM_TICK_MIN 16384 /* slots examined per tick, at least (else capacity / 64) */
#define LEVEL_GLOBAL UINT16_MAX

typedef struct gov_limit {
    cfg_limit_t cfg;
    int ident;      /* counter identity index in the table; -1 for the ledger types */
    uint16_t level; /* index into gov_set_t.levels, or LEVEL_GLOBAL */
    bool fallback;  /* redis: the last answer was "unavailable" and the fallback decided */
    uint64_t outcomes[GOV_OUT_COUNT];
    uint64_t store_errors;
} gov_limit_t;

typedef struct gov_level {
    char name[CFG_LEVEL_MAX + 1];
    size_t len;
} gov_level_t;

/* One config generation: its limits and the distinct levels they attach to. */
typedef struct gov_set {
    unsigned refs;
    bool disclose;
    size_t n, n_levels;
    gov_level_t levels[GOV_LIMITS_MAX];
    gov_limit_t limits[];
} gov_set_t;

struct gov_engine {
    gov_set_t *set;
    gov_table_t table;
    gov_leases_t leases;
    gov_metrics_t m;
    size_t pending; /* asynchronous requests in flight */
    gov_share_ops_t share;
    void *share_ctx;
    gov_redis_ops_t redis;
    void *redis_ctx;
    gov_members_fn members;
    void *members_ctx;
};

/* One applicable limit in one decision. */
typedef struct probe {
    gov_limit_t *l;
    int pair; /* the subject pair holding the key; -1 for a global limit */
    const char *key;
    size_t key_len;
    size_t slot; /* the local counter, GOV_SLOT_NONE when none was read */
    ra_limiter_t lim;
    int64_t state;
    ra_result_t r;
    gov_outcome_t outcome;
    bool evaluated; /* r holds an answer or a posture.fail verdict */
    bool observed;  /* r came from a local counter that may be disclosed */
} probe_t;

static const uint8_t no_key[1] = {0};

/* ---- errors and results ------------------------------------------------------------------ */

static int fail(gov_result_t *out, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(gov_result_t *out, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof(out->error), fmt, ap);
    va_end(ap);
    out->status = code;
    out->admit = false;
    return code;
}

static void result_init(gov_result_t *out)
{
    out->status = 0;
    out->error[0] = '\0';
    out->admit = true;
    out->verdict = GOV_ADMIT;
    out->limit[0] = '\0';
    out->remaining = -1;
    out->retry_after_s = 0;
    out->reset_after_s = 0;
    out->code = NULL;
    out->n_soft_denied = 0;
    out->soft_truncated = false;
    out->n_headers = 0;
    out->settled = 0;
    out->lease = 0;
}

static void set_limit_id(gov_result_t *out, const gov_limit_t *l)
{
    memcpy(out->limit, l->cfg.id, sizeof(out->limit));
}

const char *gov_strcode(int err)
{
    switch (err) {
    case 0:
        return "ok";
    case GOV_EINVAL:
        return "bad_request";
    case GOV_ESUBJECT:
        return "bad_subject";
    case GOV_ETOKENS:
        return "tokens_required";
    case GOV_ERANGE:
        return "out_of_range";
    case GOV_ENOTPM:
        return "no_tpm_limit";
    case GOV_ENOLEASE:
        return "unknown_lease";
    case GOV_ENOMEM:
        return "out_of_memory";
    case GOV_ELIMITS:
        return "bad_limits";
    case GOV_ELEASES:
        return "lease_cap";
    default:
        return "unknown_error";
    }
}

const char *gov_verdict_name(gov_verdict_t v)
{
    static const char *const names[] = {"admit", "deny", "unfittable"};
    return (unsigned)v < 3 ? names[v] : "unknown";
}

const char *gov_outcome_name(gov_outcome_t o)
{
    static const char *const names[] = {"admit",     "deny",      "unfittable",
                                        "soft_deny", "fail_open", "fail_closed"};
    return (unsigned)o < GOV_OUT_COUNT ? names[o] : "unknown";
}

const char *gov_reload_action_name(gov_reload_action_t a)
{
    static const char *const names[] = {"kept", "reset", "added", "removed"};
    return (unsigned)a < 4 ? names[a] : "unknown";
}

/* ---- config sets ------------------------------------------------------------------------- */

static bool counts(const cfg_limit_t *l)
{
    return cfg_type_is_rate(l->type) || l->type == CFG_TYPE_CONCURRENCY;
}

static void set_unref(gov_set_t *set)
{
    if (set && --set->refs == 0)
        free(set);
}

static const gov_limit_t *set_find(const gov_set_t *set, const char *id)
{
    for (size_t i = 0; set && i < set->n; i++)
        if (strcmp(set->limits[i].cfg.id, id) == 0)
            return &set->limits[i];
    return NULL;
}

/* Copies and checks the limits; identities are bound by set_bind. */
static gov_set_t *set_build(const cfg_limit_t *limits, size_t n, bool disclose, char *err,
                            size_t err_size)
{
    if (n > GOV_LIMITS_MAX) {
        snprintf(err, err_size, "governance.limits: %zu limits, at most %d", n, GOV_LIMITS_MAX);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const cfg_limit_t *l = &limits[i];
        size_t id_len = strnlen(l->id, sizeof(l->id)), lv_len = strnlen(l->level, sizeof(l->level));
        if (id_len == 0 || id_len > CFG_ID_MAX || lv_len == 0 || lv_len > CFG_LEVEL_MAX) {
            snprintf(err, err_size, "governance.limits[%zu]: id or level empty or too long", i);
            return NULL;
        }
        if (cfg_type_is_rate(l->type) && (l->limiter.amount <= 0 || l->limiter.period_ns <= 0)) {
            snprintf(err, err_size, "governance.limits[%zu] (\"%s\"): not armed", i, l->id);
            return NULL;
        }
        if (l->type == CFG_TYPE_CONCURRENCY && l->amount <= 0) {
            snprintf(err, err_size, "governance.limits[%zu] (\"%s\"): amount must be positive", i,
                     l->id);
            return NULL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(limits[j].id, l->id) == 0) {
                snprintf(err, err_size, "governance.limits[%zu]: duplicate id \"%s\"", i, l->id);
                return NULL;
            }
        }
    }
    gov_set_t *set = calloc(1, sizeof(*set) + n * sizeof(gov_limit_t));
    if (!set) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    set->refs = 1;
    set->disclose = disclose;
    set->n = n;
    for (size_t i = 0; i < n; i++) {
        gov_limit_t *l = &set->limits[i];
        l->cfg = limits[i];
        l->ident = -1;
        if (strcmp(l->cfg.level, "global") == 0) {
            l->level = LEVEL_GLOBAL;
            continue;
        }
        size_t k = 0;
        while (k < set->n_levels && strcmp(set->levels[k].name, l->cfg.level) != 0)
            k++;
        if (k == set->n_levels) {
            memcpy(set->levels[k].name, l->cfg.level, sizeof(set->levels[k].name));
            set->levels[k].len = strlen(l->cfg.level);
            set->n_levels++;
        }
        l->level = (uint16_t)k;
    }
    return set;
}

/*
 * Binds every counting limit of `set` to a table identity: the old one when `old` has the same
 * id with the same identity (kept), a fresh one otherwise. All or nothing: on failure the
 * fresh identities are released and -1 returned.
 */
static int set_bind(gov_engine_t *e, gov_set_t *set, const gov_set_t *old,
                    gov_reload_action_t *actions, char *err, size_t err_size)
{
    for (size_t i = 0; i < set->n; i++) {
        gov_limit_t *l = &set->limits[i];
        const gov_limit_t *was = set_find(old, l->cfg.id);
        bool same = was && was->cfg.identity == l->cfg.identity;
        actions[i] = !was ? GOV_RELOAD_ADDED : same ? GOV_RELOAD_KEPT : GOV_RELOAD_RESET;
        if (was) { /* Prometheus counters never go backwards: a limit keeps its counts */
            memcpy(l->outcomes, was->outcomes, sizeof(l->outcomes));
            l->store_errors = was->store_errors;
        }
        if (!counts(&l->cfg))
            continue;
        if (same && was->ident >= 0) {
            l->ident = was->ident;
            continue;
        }
        l->ident = gov_table_ident_add(&e->table, l->cfg.identity, &l->cfg.limiter,
                                       l->cfg.type == CFG_TYPE_CONCURRENCY);
        if (l->ident < 0) {
            for (size_t j = 0; j < i; j++)
                if (actions[j] != GOV_RELOAD_KEPT && set->limits[j].ident >= 0)
                    gov_table_ident_drop(&e->table, set->limits[j].ident);
            snprintf(err, err_size,
                     "too many counter identities alive (%d): the counters of earlier reloads "
                     "are still being reclaimed; retry the reload shortly",
                     GOV_IDENTS_MAX);
            return -1;
        }
    }
    return 0;
}

/* ---- the engine -------------------------------------------------------------------------- */

int gov_engine_create(gov_engine_t **out, const gov_options_t *opt, const cfg_limit_t *limits,
                      size_t n, bool disclose, char *err, size_t err_size)
{
    *out = NULL;
    gov_options_t o = opt ? *opt : (gov_options_t){0};
    if (!o.max_counters)
        o.max_counters = GOV_DEFAULT_MAX_COUNTERS;
    if (!o.max_leases)
        o.max_leases = GOV_DEFAULT_MAX_LEASES;
    gov_engine_t *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(err, err_size, "out of memory");
        return GOV_ENOMEM;
    }
    if (gov_table_init(&e->table, o.initial_counters, o.max_counters, o.hash_seed) < 0 ||
        gov_leases_init(&e->leases, o.max_leases) < 0) {
        snprintf(err, err_size, "out of memory");
        gov_engine_destroy(e);
        return GOV_ENOMEM;
    }
    e->m.counters_max = o.max_counters;
    gov_reload_action_t actions[GOV_LIMITS_MAX];
    e->set = set_build(limits, n, disclose, err, err_size);
    if (!e->set || set_bind(e, e->set, NULL, actions, err, err_size) < 0) {
        gov_engine_destroy(e);
        return GOV_ELIMITS;
    }
    *out = e;
    return 0;
}

int gov_engine_create_config(gov_engine_t **out, const gov_options_t *opt, const cfg_config_t *cfg,
                             char *err, size_t err_size)
{
    gov_options_t o = opt ? *opt : (gov_options_t){0};
    if (!o.max_counters && cfg->server.max_counters > 0)
        o.max_counters = (size_t)cfg->server.max_counters;
    return gov_engine_create(out, &o, cfg->limits, cfg->n_limits, cfg->disclose_limits, err,
                             err_size);
}

int gov_engine_reload_config(gov_engine_t *e, const cfg_config_t *cfg, gov_reload_fn report,
                             void *ctx, char *err, size_t err_size)
{
    return gov_engine_reload(e, cfg->limits, cfg->n_limits, cfg->disclose_limits, report, ctx, err,
                             err_size);
}

void gov_engine_destroy(gov_engine_t *e)
{
    if (!e)
        return;
    set_unref(e->set);
    gov_table_free(&e->table);
    gov_leases_free(&e->leases);
    free(e);
}

void gov_engine_set_share(gov_engine_t *e, const gov_share_ops_t *ops, void *ctx)
{
    e->share = ops ? *ops : (gov_share_ops_t){0};
    e->share_ctx = ctx;
}

void gov_engine_set_redis(gov_engine_t *e, const gov_redis_ops_t *ops, void *ctx)
{
    e->redis = ops ? *ops : (gov_redis_ops_t){0};
    e->redis_ctx = ctx;
}

void gov_engine_set_members(gov_engine_t *e, gov_members_fn fn, void *ctx)
{
    e->members = fn;
    e->members_ctx = ctx;
}

int gov_engine_reload(gov_engine_t *e, const cfg_limit_t *limits, size_t n, bool disclose,
                      gov_reload_fn report, void *ctx, char *err, size_t err_size)
{
    gov_reload_action_t actions[GOV_LIMITS_MAX];
    gov_set_t *set = set_build(limits, n, disclose, err, err_size);
    if (!set)
        return GOV_ELIMITS;
    if (set_bind(e, set, e->set, actions, err, err_size) < 0) {
        set_unref(set);
        return GOV_ELIMITS;
    }
    gov_set_t *old = e->set;
    for (size_t i = 0; i < set->n; i++)
        if (report)
            report(ctx, set->limits[i].cfg.id, actions[i]);
    for (size_t i = 0; i < old->n; i++) {
        const gov_limit_t *l = &old->limits[i];
        const gov_limit_t *now_l = set_find(set, l->cfg.id);
        if (l->ident >= 0 && (!now_l || now_l->ident != l->ident))
            gov_table_ident_drop(&e->table, l->ident);
        if (!now_l && report)
            report(ctx, l->cfg.id, GOV_RELOAD_REMOVED);
    }
    e->set = set;
    set_unref(old);
    e->m.reloads++;
    return 0;
}

void gov_engine_tick(gov_engine_t *e, int64_t now)
{
    size_t budget = (e->table.mask + 1) / 64;
    gov_table_reclaim(&e->table, now, budget > RECLAIM_TICK_MIN ? budget : RECLAIM_TICK_MIN);
}

/* ---- subjects and probes ----------------------------------------------------------------- */

/* For each subject pair, the config level it names (index into gov_set_t.levels) or -1. */
typedef struct gov_resolved {
    int level[GOV_SUBJECT_MAX];
} gov_resolved_t;

static int resolve(const gov_set_t *set, const gov_subject_t *s, gov_resolved_t *res,
                   gov_result_t *out)
{
    if (s->n > GOV_SUBJECT_MAX)
        return fail(out, GOV_ESUBJECT, "subject: %zu levels, at most %d", s->n, GOV_SUBJECT_MAX);
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *p = &s->pairs[i];
        if (!p->level || p->level_len == 0 || p->level_len > CFG_LEVEL_MAX)
            return fail(out, GOV_ESUBJECT, "subject: a level name must be 1 to %d bytes",
                        CFG_LEVEL_MAX);
        int lv = (int)p->level_len;
        if (p->id_len > GOV_ID_MAX || (!p->id && p->id_len))
            return fail(out, GOV_ESUBJECT, "subject.%.*s: id longer than %d bytes", lv, p->level,
                        GOV_ID_MAX);
        for (size_t j = 0; j < i; j++)
            if (s->pairs[j].level_len == p->level_len &&
                memcmp(s->pairs[j].level, p->level, p->level_len) == 0)
                return fail(out, GOV_ESUBJECT, "subject.%.*s: level given twice", lv, p->level);
        res->level[i] = -1;
        for (size_t k = 0; k < set->n_levels; k++) {
            if (set->levels[k].len == p->level_len &&
                memcmp(set->levels[k].name, p->level, p->level_len) == 0) {
                res->level[i] = (int)k;
                break;
            }
        }
    }
    return 0;
}

#define TYPE_BIT(t) (1u << (t))
#define RATE_TYPES (TYPE_BIT(CFG_TYPE_RPM) | TYPE_BIT(CFG_TYPE_TPM))

/* The limits of `types` that apply, in config order. -1 when more than GOV_APPLY_MAX do. */
static int collect(gov_set_t *set, const gov_subject_t *s, const gov_resolved_t *res,
                   unsigned types, probe_t *p, size_t *n_out)
{
    size_t n = 0;
    for (size_t i = 0; i < set->n; i++) {
        gov_limit_t *l = &set->limits[i];
        if (!l->cfg.posture.on || !(types & TYPE_BIT(l->cfg.type)))
            continue;
        int pair = -1;
        if (l->level != LEVEL_GLOBAL) {
            for (size_t k = 0; k < s->n && pair < 0; k++)
                if (res->level[k] == l->level)
                    pair = (int)k;
            if (pair < 0)
                continue;
        }
        if (n == GOV_APPLY_MAX)
            return -1;
        probe_t *q = &p[n++];
        *q = (probe_t){.l = l, .pair = pair, .slot = GOV_SLOT_NONE, .lim = l->cfg.limiter};
        if (pair < 0 || !s->pairs[pair].id_len) {
            q->key = (const char *)no_key;
        } else {
            q->key = s->pairs[pair].id;
            q->key_len = s->pairs[pair].id_len;
        }
    }
    *n_out = n;
    return 0;
}

/* Resolves the subject and collects the limits of `types` that apply. */
static int prepare(gov_set_t *set, const gov_subject_t *s, unsigned types, probe_t *p, size_t *n,
                   gov_result_t *out)
{
    gov_resolved_t res;
    int rc = resolve(set, s, &res, out);
    if (rc < 0)
        return rc;
    if (collect(set, s, &res, types, p, n) < 0)
        return fail(out, GOV_ESUBJECT, "subject: more than %d limits apply", GOV_APPLY_MAX);
    return 0;
}

/* Room for a new counter per limit, so slot numbers stay valid for the whole call; at the cap
 * a larger slice of reclamation runs first. */
static int reserve(gov_engine_t *e, size_t n, int64_t now, gov_result_t *out)
{
    if (e->table.count + n > e->table.max)
        gov_table_reclaim(&e->table, now, RECLAIM_AT_CAP);
    if (gov_table_reserve(&e->table, n) < 0)
        return fail(out, GOV_ENOMEM, "out of memory growing the counter table");
    return 0;
}

/* The limiter in force: the share store's effective one for share limits, per key when the
 * store answers per key (`cost` is the arrival it counts). -1: unarmed or the store could not
 * say. */
static int limiter_in_force(gov_engine_t *e, probe_t *p, int64_t cost, int64_t now)
{
    p->lim = p->l->cfg.limiter;
    if (p->l->cfg.store != CFG_STORE_SHARE || (!e->share.limiter && !e->share.key_limiter))
        return 0; /* local; and share before the share store is wired: plain (N = 1), armed */
    bool armed = false;
    const cfg_limit_t *l = &p->l->cfg;
    int rc = e->share.key_limiter ? e->share.key_limiter(e->share_ctx, l, p->key, p->key_len, cost,
                                                         now, &p->lim, &armed)
                                  : e->share.limiter(e->share_ctx, l, now, &p->lim, &armed);
    if (rc < 0 || !armed) {
        p->lim = p->l->cfg.limiter;
        return -1;
    }
    return 0;
}

/* Finds or creates the local counter. -1 when the table cannot hold it (cap, memory, or an
 * identity a reload dropped while an asynchronous decision was in flight). */
static int local_slot(gov_engine_t *e, probe_t *p, bool create)
{
    gov_table_t *t = &e->table;
    int ix = p->l->ident;
    if (ix < 0 || !t->idents[ix].alive)
        return -1;
    uint64_t h = gov_table_hash(t, ix, p->key, p->key_len);
    if (!create) {
        p->slot = gov_table_find(t, ix, h, p->key, p->key_len);
        return 0;
    }
    int rc = gov_table_get(t, ix, h, p->key, p->key_len, &p->slot);
    if (rc == -1)
        e->m.cap_hits++;
    return rc < 0 ? -1 : 0;
}

/* posture.fail for a limit whose store could not answer. */
static void posture_fail(probe_t *p)
{
    p->evaluated = true;
    p->observed = false;
    p->slot = GOV_SLOT_NONE;
    if (p->l->cfg.posture.fail_open) {
        p->outcome = GOV_OUT_FAIL_OPEN;
        p->r = (ra_result_t){.admit = true, .remaining = -1};
    } else {
        p->outcome = GOV_OUT_FAIL_CLOSED;
        p->r = (ra_result_t){.admit = false, .retry_after_s = 1, .reset_after_s = 1};
    }
}

static void store_failed(gov_engine_t *e, probe_t *p)
{
    p->l->store_errors++;
    e->m.store_errors++;
    posture_fail(p);
}

static void local_step(gov_engine_t *e, probe_t *p, int64_t now, int64_t cost)
{
    if (local_slot(e, p, true) < 0) {
        store_failed(e, p);
        return;
    }
    p->state = e->table.slots[p->slot].state;
    p->r = ra_step(&p->lim, p->state, now, cost);
    p->evaluated = true;
    p->observed = p->l->cfg.store != CFG_STORE_REDIS; /* redis limits are never disclosed */
    p->outcome = GOV_OUT_ADMIT;
}

static bool blocks(const probe_t *p)
{
    return p->evaluated && !p->r.admit && p->l->cfg.posture.enforce_hard;
}

/* ---- decide ------------------------------------------------------------------------------ */

static int64_t depth_of(const ra_limiter_t *lim)
{
    if (lim->algorithm == RA_GCRA || lim->algorithm == RA_TOKEN_BUCKET)
        return lim->tolerance_ns / lim->emission_ns;
    return lim->amount;
}

/*
 * What a non-committing unit probe reads on the state after the decision. When the probe's
 * own step was committed, its `remaining` already is that reading (a unit probe on the new
 * state admits iff one more unit fits, and then reads the same level), so the second step is
 * skipped.
 */
static gov_obs_t observe(const probe_t *p, bool committed, int64_t now)
{
    const ra_limiter_t *lim = &p->lim;
    int64_t state = committed ? p->r.next_state : p->state;
    gov_obs_t o = {.limit = &p->l->cfg, .depth = depth_of(lim)};
    o.remaining = committed ? p->r.remaining : ra_observe_remaining(lim, state, now);
    if (lim->algorithm == RA_GCRA || lim->algorithm == RA_TOKEN_BUCKET) {
        int64_t ahead;
        o.reset_s =
            __builtin_sub_overflow(state, now, &ahead) ? INT64_MAX / RA_NS_PER_S : ra_ceil_s(ahead);
    } else {
        int64_t into = now % lim->period_ns;
        if (into < 0)
            into += lim->period_ns;
        o.reset_s = ra_ceil_s(lim->period_ns - into);
    }
    return o;
}

static void add_soft(gov_result_t *out, const gov_limit_t *l)
{
    if (out->n_soft_denied == GOV_SOFT_MAX) {
        out->soft_truncated = true;
        return;
    }
    memcpy(out->soft_denied[out->n_soft_denied++], l->cfg.id, CFG_ID_MAX + 1);
}

static void fill_from(gov_result_t *out, const probe_t *p)
{
    set_limit_id(out, p->l);
    out->remaining = p->r.remaining;
    out->retry_after_s = p->r.retry_after_s;
    out->reset_after_s = p->r.reset_after_s;
}

/* Verdict, commit, metrics, result and disclosure over the evaluated probes. */
static void decide_finish(gov_engine_t *e, gov_set_t *set, probe_t *p, size_t n, int64_t now,
                          gov_result_t *out)
{
    const probe_t *deny = NULL, *unfit = NULL, *tight = NULL;
    gov_obs_t tight_obs = {0};
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        if (!q->evaluated)
            continue;
        if (q->r.admit)
            continue;
        bool hard = q->l->cfg.posture.enforce_hard;
        if (q->outcome != GOV_OUT_FAIL_CLOSED)
            q->outcome = !hard             ? GOV_OUT_SOFT_DENY
                         : q->r.unfittable ? GOV_OUT_UNFITTABLE
                                           : GOV_OUT_DENY;
        if (!hard)
            add_soft(out, q->l);
        else if (q->outcome == GOV_OUT_UNFITTABLE)
            unfit = unfit ? unfit : q;
        else if (!deny || q->r.retry_after_s > deny->r.retry_after_s)
            deny = q;
    }
    out->verdict = unfit ? GOV_UNFITTABLE : deny ? GOV_DENY : GOV_ADMIT;
    out->admit = out->verdict == GOV_ADMIT;
    e->m.decisions[out->verdict]++;
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        if (!q->evaluated)
            continue;
        q->l->outcomes[q->outcome]++;
        if (!q->r.admit || q->outcome == GOV_OUT_FAIL_OPEN)
            continue;
        if (out->admit && q->slot != GOV_SLOT_NONE)
            e->table.slots[q->slot].state = q->r.next_state;
        gov_obs_t o = {
            .limit = &q->l->cfg, .remaining = q->r.remaining, .depth = depth_of(&q->lim)};
        if (gov_obs_tighter(&o, &tight_obs)) {
            tight_obs = o;
            tight = q;
        }
    }
    if (unfit) {
        fill_from(out, unfit);
        out->retry_after_s = 0;
        out->code = "quota_cost_unfittable";
    } else if (deny) {
        fill_from(out, deny);
    } else if (tight) {
        fill_from(out, tight);
    }
    int64_t retry = out->verdict == GOV_DENY ? out->retry_after_s : -1;
    if (!set->disclose) {
        gov_disclose(out, NULL, NULL, NULL, retry);
        return;
    }
    gov_obs_t best = {0}, rpm = {0}, tpm = {0};
    for (size_t i = 0; i < n; i++) {
        const probe_t *q = &p[i];
        if (!q->observed)
            continue;
        gov_obs_t o = observe(q, out->admit && q->r.admit, now);
        gov_obs_t *by_type = q->l->cfg.type == CFG_TYPE_TPM ? &tpm : &rpm;
        if (gov_obs_tighter(&o, &best))
            best = o;
        if (gov_obs_tighter(&o, by_type))
            *by_type = o;
    }
    gov_disclose(out, &best, &rpm, &tpm, retry);
}

/*
 * Probes every limit. With `replies` NULL (the first pass) redis limits are left unevaluated
 * and counted in *n_redis; with replies (the second pass) they take their answers in order.
 * Returns GOV_PENDING when redis must be asked, else 0 with the decision finished.
 */
/*
 * How many counters this decision may add: n, unless the table is at its cap, where every one
 * already in place is one less. There a decision on keys the table holds (the usual case under
 * load) then skips the cap's 1024-slot reclamation slice, which it does not need: paid by every
 * decision, that slice made each one cost about 12 us instead of under 1 us with the table full
 * (bench/footprint.py reclaim, docs/performance.md) -- and made filling the table a way to
 * slow every client down. Only at the cap are the keys hashed and looked up an extra time.
 */
static size_t counters_needed(gov_engine_t *e, const probe_t *p, size_t n)
{
    gov_table_t *t = &e->table;
    if (t->count + n <= t->max)
        return n;
    size_t missing = 0;
    for (size_t i = 0; i < n; i++) {
        int ix = p[i].l->ident;
        if (ix < 0 || !t->idents[ix].alive ||
            gov_table_find(t, ix, gov_table_hash(t, ix, p[i].key, p[i].key_len), p[i].key,
                           p[i].key_len) == GOV_SLOT_NONE)
            missing++;
    }
    return missing;
}

static int decide_run(gov_engine_t *e, gov_set_t *set, probe_t *p, size_t n, int64_t tokens,
                      int64_t now, const gov_redis_reply_t *replies, size_t *n_redis,
                      gov_result_t *out)
{
    int rc = reserve(e, counters_needed(e, p, n), now, out);
    if (rc < 0)
        return rc;
    size_t ri = 0;
    bool blocked = false;
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        int64_t cost = q->l->cfg.type == CFG_TYPE_TPM ? tokens : 1;
        if (q->l->cfg.store == CFG_STORE_REDIS) {
            if (!replies) {
                ri++;
                continue;
            }
            const gov_redis_reply_t *rep = &replies[ri++];
            q->l->fallback = rep->unavailable;
            if (!rep->unavailable) {
                q->r = rep->r;
                q->r.next_state = 0;
                q->evaluated = true;
                q->outcome = GOV_OUT_ADMIT;
            } else {
                q->l->store_errors++;
                e->m.store_errors++;
                if (q->l->cfg.posture.fail_open) /* the local fallback limiter decides */
                    local_step(e, q, now, cost);
                else
                    posture_fail(q);
            }
        } else if (limiter_in_force(e, q, replies ? 0 : cost, now) < 0) {
            store_failed(e, q);
        } else {
            local_step(e, q, now, cost);
        }
        blocked = blocked || blocks(q);
    }
    *n_redis = ri;
    if (ri && !replies && !blocked)
        return GOV_PENDING;
    decide_finish(e, set, p, n, now, out);
    return 0;
}

/* ---- asynchronous requests (redis) ------------------------------------------------------- */

typedef struct gov_pending {
    gov_engine_t *e;
    gov_set_t *set;
    bool settle;
    int64_t tokens, reserved, actual;
    int64_t settled; /* settle: limits corrected before redis was asked */
    gov_result_t *out;
    gov_done_fn done;
    void *ctx;
    uint32_t outstanding, n_ops;
    gov_subject_t subject; /* a copy: its bytes follow the replies */
    gov_redis_op_t *ops;
    gov_redis_reply_t *replies;
} gov_pending_t;

/* Allocates an asynchronous request from `tmpl` (its scalar fields), copying the subject. */
static gov_pending_t *pending_new(gov_engine_t *e, const gov_subject_t *s, size_t n_ops,
                                  const gov_pending_t *tmpl, gov_result_t *out)
{
    gov_set_t *set = e->set;
    size_t bytes = 0;
    for (size_t i = 0; i < s->n; i++)
        bytes += s->pairs[i].level_len + s->pairs[i].id_len;
    gov_pending_t *pd = calloc(
        1, sizeof(*pd) + n_ops * (sizeof(gov_redis_op_t) + sizeof(gov_redis_reply_t)) + bytes + 1);
    if (!pd)
        return NULL;
    *pd = *tmpl;
    pd->out = out;
    pd->e = e;
    pd->set = set;
    set->refs++;
    e->pending++;
    pd->n_ops = (uint32_t)n_ops;
    pd->ops = (gov_redis_op_t *)(pd + 1);
    pd->replies = (gov_redis_reply_t *)(pd->ops + n_ops);
    char *b = (char *)(pd->replies + n_ops);
    pd->subject.n = s->n;
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *src = &s->pairs[i];
        gov_pair_t *dst = &pd->subject.pairs[i];
        memcpy(b, src->level, src->level_len);
        dst->level = b;
        dst->level_len = src->level_len;
        b += src->level_len;
        if (src->id_len)
            memcpy(b, src->id, src->id_len);
        dst->id = b;
        dst->id_len = src->id_len;
        b += src->id_len;
    }
    return pd;
}

static void pending_free(gov_pending_t *pd)
{
    pd->e->pending--;
    set_unref(pd->set);
    free(pd);
}

static void settle_redis_done(gov_pending_t *pd, const probe_t *p, size_t n, int64_t now);
static void local_settle_probe(gov_engine_t *e, probe_t *p, int64_t now, int64_t reserved,
                               int64_t actual, int64_t *settled);

/* Runs the end of an asynchronous request once every reply is in. */
static void pending_finish(gov_pending_t *pd, int64_t now)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0, n_redis = 0;
    result_init(pd->out);
    /* checked on the first pass, against the same config: cannot fail now */
    prepare(pd->set, &pd->subject, pd->settle ? TYPE_BIT(CFG_TYPE_TPM) : RATE_TYPES, p, &n,
            pd->out);
    if (pd->settle)
        settle_redis_done(pd, p, n, now);
    else
        decide_run(pd->e, pd->set, p, n, pd->tokens, now, pd->replies, &n_redis, pd->out);
}

/* Submits one op per redis probe. Returns GOV_PENDING, or 0 when every op finished (or failed
 * to start) before this returned: then the request is finished here and no callback runs. */
static int pending_start(gov_pending_t *pd, const probe_t *p, size_t n, int64_t now)
{
    gov_engine_t *e = pd->e;
    uint32_t k = 0;
    pd->outstanding = pd->n_ops + 1; /* +1: no completion inside submit may finish it */
    for (size_t i = 0; i < n; i++) {
        if (p[i].l->cfg.store != CFG_STORE_REDIS)
            continue;
        gov_redis_op_t *op = &pd->ops[k];
        *op = (gov_redis_op_t){
            .kind = pd->settle ? GOV_REDIS_SETTLE : GOV_REDIS_STEP,
            .limit = &p[i].l->cfg,
            .key = p[i].pair >= 0 ? pd->subject.pairs[p[i].pair].id : (const char *)no_key,
            .key_len = p[i].key_len,
            .now = now,
            .cost = p[i].l->cfg.type == CFG_TYPE_TPM ? pd->tokens : 1,
            .reserved = pd->reserved,
            .actual = pd->actual,
            .engine_private_ = pd,
            .index_ = k,
        };
        k++;
        if (!e->redis.submit || e->redis.submit(e->redis_ctx, op) < 0) {
            pd->replies[op->index_] = (gov_redis_reply_t){.unavailable = true};
            pd->outstanding--;
        }
    }
    if (--pd->outstanding > 0)
        return GOV_PENDING;
    pending_finish(pd, now);
    pending_free(pd);
    return 0;
}

void gov_redis_complete(gov_redis_op_t *op, const gov_redis_reply_t *reply, int64_t now)
{
    gov_pending_t *pd = op->engine_private_;
    pd->replies[op->index_] = *reply;
    if (--pd->outstanding > 0)
        return;
    pending_finish(pd, now);
    gov_done_fn done = pd->done;
    gov_result_t *out = pd->out;
    void *ctx = pd->ctx;
    pending_free(pd);
    done(out, ctx);
}

int gov_decide(gov_engine_t *e, const gov_subject_t *s, int64_t tokens, int64_t now,
               gov_result_t *out, gov_done_fn done, void *ctx)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0, n_redis = 0, held = e->table.count;
    result_init(out);
    int rc = prepare(e->set, s, RATE_TYPES, p, &n, out);
    if (rc < 0)
        return rc;
    if (tokens != GOV_NO_TOKENS && (tokens < 0 || tokens > GOV_TOKENS_MAX))
        return fail(out, GOV_ERANGE, "tokens: %lld is outside 0..2^40", (long long)tokens);
    for (size_t i = 0; i < n && tokens == GOV_NO_TOKENS; i++)
        if (p[i].l->cfg.type == CFG_TYPE_TPM)
            return fail(out, GOV_ETOKENS, "tokens: required: tpm limit \"%s\" applies",
                        p[i].l->cfg.id);
    rc = decide_run(e, e->set, p, n, tokens, now, NULL, &n_redis, out);
    if (rc == GOV_PENDING) {
        gov_pending_t tmpl = {.tokens = tokens, .done = done, .ctx = ctx};
        gov_pending_t *pd = pending_new(e, s, n_redis, &tmpl, out);
        rc = pd ? pending_start(pd, p, n, now)
                : fail(out, GOV_ENOMEM, "out of memory starting a redis operation");
    }
    /* Reclamation keeps pace with what this decision added. A decision on counters that already
     * exist (most of them, under load) examines nothing here: that was 4-6% of the daemon's CPU
     * at 10k keys (docs/performance.md); the tick's slices sweep for idle keys meanwhile. */
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
    return rc;
}

/* ---- settle ------------------------------------------------------------------------------ */

static void local_settle_probe(gov_engine_t *e, probe_t *p, int64_t now, int64_t reserved,
                               int64_t actual, int64_t *settled)
{
    /* a refund on a fresh key changes nothing (a full bucket stays full): no counter needed */
    if (local_slot(e, p, actual > reserved) < 0) {
        p->l->store_errors++;
        e->m.store_errors++;
        return;
    }
    if (p->slot != GOV_SLOT_NONE) {
        gov_slot_t *sl = &e->table.slots[p->slot];
        sl->state = ra_settle(&p->lim, sl->state, now, reserved, actual);
    }
    (*settled)++;
}

static void settle_redis_done(gov_pending_t *pd, const probe_t *p, size_t n, int64_t now)
{
    gov_engine_t *e = pd->e;
    int64_t settled = pd->settled;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        probe_t q = p[i];
        if (q.l->cfg.store != CFG_STORE_REDIS)
            continue;
        const gov_redis_reply_t *rep = &pd->replies[k++];
        q.l->fallback = rep->unavailable;
        if (!rep->unavailable) {
            settled++;
            continue;
        }
        q.l->store_errors++;
        e->m.store_errors++;
        if (q.l->cfg.posture.fail_open && reserve(e, 1, now, pd->out) == 0)
            local_settle_probe(e, &q, now, pd->reserved, pd->actual, &settled);
    }
    pd->out->settled = settled;
}

int gov_settle(gov_engine_t *e, const gov_subject_t *s, int64_t reserved, int64_t actual,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0, n_redis = 0;
    result_init(out);
    int rc = prepare(e->set, s, TYPE_BIT(CFG_TYPE_TPM), p, &n, out);
    if (rc < 0)
        return rc;
    if (reserved < 0 || reserved > GOV_TOKENS_MAX)
        return fail(out, GOV_ERANGE, "reserved: %lld is outside 0..2^40", (long long)reserved);
    if (actual < 0 || actual > GOV_TOKENS_MAX)
        return fail(out, GOV_ERANGE, "actual: %lld is outside 0..2^40", (long long)actual);
    if (n == 0)
        return fail(out, GOV_ENOTPM, "subject: no tpm limit applies (settle corrects tpm limits)");
    if ((rc = reserve(e, n, now, out)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        n_redis += p[i].l->cfg.store == CFG_STORE_REDIS;
    gov_pending_t *pd = NULL; /* allocated before anything changes: all or nothing */
    if (n_redis) {
        gov_pending_t tmpl = {
            .settle = true, .reserved = reserved, .actual = actual, .done = done, .ctx = ctx};
        if (!(pd = pending_new(e, s, n_redis, &tmpl, out)))
            return fail(out, GOV_ENOMEM, "out of memory starting a redis operation");
    }
    int64_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i].l->cfg.store == CFG_STORE_REDIS)
            continue;
        /* unarmed or unanswered: the replica's own state is settled anyway (plain limiter) */
        (void)limiter_in_force(e, &p[i], 0, now);
        local_settle_probe(e, &p[i], now, reserved, actual, &settled);
    }
    e->m.settles++;
    out->settled = settled;
    if (pd) {
        pd->settled = settled;
        rc = pending_start(pd, p, n, now);
    }
    gov_table_reclaim(&e->table, now, RECLAIM_PER_OP);
    return rc;
}

/* ---- concurrency ------------------------------------------------------------------------- */

static void gauge_put(void *ctx, const gov_gauge_ref_t *g)
{
    gov_table_t *t = ctx;
    const gov_ident_t *id = &t->idents[g->ident];
    if (!id->alive || id->gen != g->ident_gen)
        return; /* the limit was removed or reset by a reload: its gauges are gone */
    size_t i = gov_table_find_ref(t, g->ident, g->hash, g->key, g->len);
    if (i != GOV_SLOT_NONE && t->slots[i].state > 0)
        t->slots[i].state--;
}

int gov_acquire(gov_engine_t *e, const gov_subject_t *s, uint64_t owner, int64_t now,
                gov_result_t *out)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0;
    result_init(out);
    int rc = prepare(e->set, s, TYPE_BIT(CFG_TYPE_CONCURRENCY), p, &n, out);
    if (rc < 0 || (rc = reserve(e, n, now, out)) < 0)
        return rc;
    const probe_t *deny = NULL, *tight = NULL;
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        if (local_slot(e, q, true) < 0) {
            store_failed(e, q);
        } else {
            int64_t held = e->table.slots[q->slot].state, amount = q->l->cfg.amount;
            q->evaluated = true;
            q->r.admit = held < amount;
            q->r.remaining = q->r.admit ? amount - held - 1 : 0;
            q->r.retry_after_s = q->r.admit ? 0 : 1; /* a gauge cannot know: poll again */
            q->outcome = q->r.admit ? GOV_OUT_ADMIT : GOV_OUT_DENY;
        }
        if (!q->r.admit && !q->l->cfg.posture.enforce_hard) {
            add_soft(out, q->l);
            if (q->outcome == GOV_OUT_DENY)
                q->outcome = GOV_OUT_SOFT_DENY;
        } else if (!q->r.admit && !deny) {
            deny = q;
        } else if (q->r.admit && q->slot != GOV_SLOT_NONE &&
                   (!tight || (__int128)q->r.remaining * tight->l->cfg.amount <
                                  (__int128)tight->r.remaining * q->l->cfg.amount)) {
            tight = q;
        }
    }
    gov_gauge_ref_t refs[GOV_APPLY_MAX];
    size_t n_refs = 0;
    if (!deny) {
        for (size_t i = 0; i < n; i++) {
            if (p[i].slot == GOV_SLOT_NONE)
                continue;
            const gov_slot_t *sl = &e->table.slots[p[i].slot];
            refs[n_refs++] = (gov_gauge_ref_t){.hash = sl->hash,
                                               .key = sl->key,
                                               .ident_gen = e->table.idents[sl->ident].gen,
                                               .ident = sl->ident,
                                               .len = sl->len};
        }
        if (gov_leases_reserve(&e->leases, n_refs) < 0)
            return fail(out, GOV_ELEASES, "acquire: the lease cap (%zu) is reached", e->leases.max);
    }
    for (size_t i = 0; i < n; i++) {
        if (!p[i].evaluated)
            continue;
        p[i].l->outcomes[p[i].outcome]++;
        if (!deny && p[i].slot != GOV_SLOT_NONE)
            e->table.slots[p[i].slot].state++; /* soft-denied ones too: they are in flight */
    }
    e->m.acquires++;
    out->verdict = deny ? GOV_DENY : GOV_ADMIT;
    out->admit = !deny;
    e->m.decisions[out->verdict]++;
    if (deny)
        fill_from(out, deny);
    else if (tight)
        fill_from(out, tight);
    if (!deny)
        out->lease = gov_leases_add(&e->leases, owner, refs, n_refs);
    gov_table_reclaim(&e->table, now, RECLAIM_PER_OP);
    return 0;
}

int gov_release(gov_engine_t *e, uint64_t lease)
{
    if (gov_leases_end(&e->leases, lease, gauge_put, &e->table) < 0)
        return GOV_ENOLEASE;
    e->m.releases++;
    return 0;
}

size_t gov_release_owner(gov_engine_t *e, uint64_t owner)
{
    size_t n = gov_leases_end_owner(&e->leases, owner, gauge_put, &e->table);
    e->m.releases += n;
    return n;
}

/* ---- fleet and metrics ------------------------------------------------------------------- */

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

size_t gov_fleet(gov_engine_t *e, int64_t now, gov_fleet_entry_t *out, size_t cap)
{
    int64_t members = e->members ? e->members(e->members_ctx) : 1;
    if (members < 1)
        members = 1;
    size_t k = 0;
    for (size_t i = 0; i < e->set->n; i++) {
        const gov_limit_t *l = &e->set->limits[i];
        if (!cfg_type_is_rate(l->cfg.type))
            continue;
        if (k < cap) {
            gov_fleet_entry_t *f = &out[k];
            int64_t depth = depth_of(&l->cfg.limiter);
            *f = (gov_fleet_entry_t){.type = l->cfg.type,
                                     .store = l->cfg.store,
                                     .algorithm = l->cfg.algorithm,
                                     .amount = l->cfg.amount,
                                     .period_ns = l->cfg.period_ns,
                                     .burst = l->cfg.burst,
                                     .n = 1,
                                     .local_share = l->cfg.amount,
                                     .sustained_bound = l->cfg.amount,
                                     .burst_bound = depth,
                                     .state = "armed",
                                     .divisor_min = 1,
                                     .divisor_max = 1,
                                     .converged = true};
            memcpy(f->id, l->cfg.id, sizeof(f->id));
            /* local: every replica counts alone; redis: one counter, but while the fallback
             * decides every replica counts alone again */
            bool alone =
                l->cfg.store == CFG_STORE_LOCAL || (l->cfg.store == CFG_STORE_REDIS && l->fallback);
            f->fallback = l->cfg.store == CFG_STORE_REDIS && l->fallback;
            if (alone) {
                f->n = members;
                f->sustained_bound = sat_mul(members, l->cfg.amount);
                f->burst_bound = sat_mul(members, depth);
            } else if (l->cfg.store == CFG_STORE_REDIS) {
                f->n = members;
            } else if (e->share.fleet) {
                e->share.fleet(e->share_ctx, &l->cfg, now, f);
            }
        }
        k++;
    }
    return k;
}

void gov_engine_metrics(gov_engine_t *e, gov_metrics_t *out)
{
    *out = e->m;
    out->counters = e->table.count;
    out->counters_reclaimed = e->table.reclaimed;
    out->leases = e->leases.heads;
    out->table_bytes = gov_table_bytes(&e->table);
    out->pending = e->pending;
}

size_t gov_engine_limit_metrics(gov_engine_t *e, gov_limit_metrics_t *out, size_t cap)
{
    for (size_t i = 0; i < e->set->n && i < cap; i++) {
        const gov_limit_t *l = &e->set->limits[i];
        gov_limit_metrics_t *m = &out[i];
        memcpy(m->id, l->cfg.id, sizeof(m->id));
        m->type = l->cfg.type;
        m->store = l->cfg.store;
        memcpy(m->outcomes, l->outcomes, sizeof(m->outcomes));
        m->store_errors = l->store_errors;
        m->counters = l->ident >= 0 ? e->table.idents[l->ident].count : 0;
    }
    return e->set->n;
}
