/*
 * The descriptors of a domain, decided by the rule language (gov_decide_domain, SPEC §12): what
 * envoyproxy/ratelimit's service does with a request, on our counters.
 *
 * envoy ratelimit first looks up each descriptor's limit (GetLimit: the matching tree here,
 * match.c; a descriptor carrying its own limit takes that one), then drops the limits some
 * matched rule `replaces` by name, then counts (DoLimit), then folds the statuses into the
 * overall code: OVER_LIMIT when a rate limit is over, or when every quota-mode limit is. We do
 * the same in that order, with one difference of means: the counting is two-phase, as every
 * decision here is, so a request that will be answered OVER_LIMIT keeps nothing anywhere
 * (envoy ratelimit's STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT); GOV_ASK_CHARGE counts every
 * descriptor met, over or not (its default: INCRBY on every key). A descriptor's counter is keyed
 * by the values of the entries its rule counts per value (key-only entries, and globs whose values
 * do not share one counter); the rule's identity already says which domain and path it counts.
 */
#include <string.h>

#include "engine_int.h"

/* One ask's counter key, composed in `scratch` (RULE_KEY_MAX bytes) and left, folded to at most
 * GOV_ID_MAX bytes, in `out`: the values its rule keys by (l->key_mask), or for a descriptor's
 * own limit the domain and every key and value; each length-prefixed, so no two tuples share a
 * key. */
#define RULE_KEY_MAX                                                                               \
    (2 + CFG_RULE_DOMAIN_MAX + GOV_SUBJECT_MAX * (4 + CFG_RULE_KEY_MAX + GOV_ID_MAX))

static size_t put(char *buf, size_t at, const char *bytes, size_t len)
{
    buf[at++] = (char)(len >> 8);
    buf[at++] = (char)(len & 0xff);
    if (len)
        memcpy(buf + at, bytes, len);
    return at + len;
}

static size_t rule_key(char *out, char *buf, const gov_limit_t *l, const char *domain,
                       size_t domain_len, const gov_subject_t *s, bool override)
{
    size_t at = 0;
    if (override)
        at = put(buf, at, domain, domain_len);
    for (size_t i = 0; i < s->n; i++) {
        if (override)
            at = put(buf, at, s->pairs[i].level, s->pairs[i].level_len);
        if (override || (l->key_mask >> i & 1))
            at = put(buf, at, s->pairs[i].id, s->pairs[i].id_len);
    }
    at = gov__key_fold(buf, at);
    memcpy(out, buf, at);
    return at;
}

/* The descriptor's entries as the tree reads them: keys and values bounded, at least one. */
static int check_ask(const gov_ask_t *a, gov_result_t *out)
{
    const gov_subject_t *s = &a->subject;
    if (s->n == 0 || s->n > GOV_SUBJECT_MAX)
        return gov__fail(out, GOV_ESUBJECT, "entries", "%zu entries, 1 to %d", s->n,
                         GOV_SUBJECT_MAX);
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *p = &s->pairs[i];
        if (!p->level || p->level_len == 0 || p->level_len > CFG_RULE_KEY_MAX)
            return gov__fail(out, GOV_ESUBJECT, "entries", "a key must be 1 to %d bytes",
                             CFG_RULE_KEY_MAX);
        if (p->id_len > GOV_ID_MAX || (!p->id && p->id_len))
            return gov__fail(out, GOV_ESUBJECT, "entries", "a value longer than %d bytes",
                             GOV_ID_MAX);
    }
    if (a->cost < 0 || a->cost > GOV_TOKENS_MAX)
        return gov__fail(out, GOV_ERANGE, "cost", "%lld is outside 0..2^40", (long long)a->cost);
    if (a->override_unit && (a->override_amount < 0 || a->override_amount > RA_ENVOY_CEILING))
        return gov__fail(out, GOV_ERANGE, "limit.requests_per_unit", "%lld is outside 0..2^32-1",
                         (long long)a->override_amount);
    return 0;
}

/* The limit of set that counts a descriptor's own limit of this unit, or -1. */
static int override_limit(const gov_set_t *set, int unit)
{
    const cfg_unit_t *u = cfg_unit_of_number(unit);
    for (size_t i = 0; u && i < set->n; i++) {
        const cfg_limit_t *l = &set->limits[i].cfg;
        if ((l->rule.flags & CFG_RULE_OVERRIDE) && l->period_ns == u->seconds * RA_NS_PER_S)
            return (int)i;
    }
    return -1;
}

/* Whether rule r is named by a `replaces` of any rule met (names[0, n)). */
static bool replaced(const gov_limit_t *l, const char *const *names, const size_t *lens, size_t n)
{
    size_t len = strlen(l->cfg.rule.name);
    for (size_t i = 0; len && i < n; i++)
        if (lens[i] == len && memcmp(names[i], l->cfg.rule.name, len) == 0)
            return true;
    return false;
}

int gov_decide_domain(gov_engine_t *e, const char *domain, size_t domain_len, const gov_ask_t *asks,
                      size_t n, unsigned flags, int64_t now, gov_result_t *results,
                      gov_verdict_t *overall)
{
    gov_set_t *set = e->set;
    gov_verdict_t v = GOV_ADMIT;
    if (!overall)
        overall = &v;
    *overall = GOV_ADMIT;
    if (!gov_rules_has_domain(set->rules, domain, domain_len)) {
        int rc = gov_decide_asks(e, asks, n, flags | GOV_ASK_EXACT, now, results);
        for (size_t i = 0; rc == 0 && i < n && *overall != GOV_DENY; i++)
            if (results[i].verdict != GOV_ADMIT)
                *overall = results[i].verdict;
        return rc;
    }
    if (n == 0)
        return GOV_EINVAL;
    for (size_t a = 0; a < n; a++)
        gov__result_init(&results[a]);
    if (n > GOV_ASKS_MAX)
        return gov__fail(&results[0], GOV_EINVAL, "asks", "%zu, at most %d", n, GOV_ASKS_MAX);
    int met[GOV_ASKS_MAX];
    for (size_t a = 0; a < n; a++) {
        int rc = check_ask(&asks[a], &results[a]);
        if (rc < 0)
            return rc;
        if (asks[a].override_unit) {
            met[a] = override_limit(set, asks[a].override_unit);
            if (met[a] < 0)
                return gov__fail(&results[a], GOV_EINVAL, "limit.unit",
                                 "%d is not a unit of Envoy's API", asks[a].override_unit);
            continue;
        }
        met[a] = gov_rules_match(set->rules, domain, domain_len, asks[a].subject.pairs,
                                 asks[a].subject.n);
    }
    /* replaces: the names every rule met switches off, then those rules (envoy ratelimit: an
     * unlimited rule is never switched off, and still switches others off) */
    const char *names[GOV_ASKS_MAX * CFG_RULE_REPLACES_MAX];
    size_t lens[GOV_ASKS_MAX * CFG_RULE_REPLACES_MAX], n_names = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t k = 0;
             met[a] >= 0 && !asks[a].override_unit && k < set->limits[met[a]].cfg.rule.n_replaces;
             k++)
            names[n_names] = cfg_rule_replaces(&set->limits[met[a]].cfg.rule, k, &lens[n_names]),
            n_names++;
    probe_t p[GOV_ASKS_MAX];
    int64_t undo[GOV_ASKS_MAX];
    size_t probe_of[GOV_ASKS_MAX], np = 0, held = e->table.count;
    char keys[GOV_ASKS_MAX][GOV_ID_MAX], scratch[RULE_KEY_MAX];
    for (size_t a = 0; a < n; a++) {
        gov_result_t *r = &results[a];
        probe_of[a] = SIZE_MAX;
        if (met[a] < 0)
            continue;
        gov_limit_t *l = &set->limits[met[a]];
        bool override = asks[a].override_unit != 0;
        r->met = override ? GOV_MET_OVERRIDE : GOV_MET_LIMIT;
        if (!override) {
            r->rule_flags = l->cfg.rule.flags & (CFG_RULE_QUOTA | CFG_RULE_DETAILED);
            memcpy(r->rule_name, l->cfg.rule.name, sizeof(r->rule_name));
        }
        if (l->cfg.rule.flags & CFG_RULE_UNLIMITED) {
            r->met = GOV_MET_UNLIMITED;
            continue;
        }
        if (!override && replaced(l, names, lens, n_names)) {
            r->met = GOV_MET_REPLACED;
            continue;
        }
        if (l->cfg.rule.flags & CFG_RULE_ALLOW) {
            r->met = GOV_MET_ALLOW;
            continue;
        }
        if (!l->cfg.posture.on) { /* compiled, never evaluated: as if no rule */
            r->met = GOV_MET_NONE;
            continue;
        }
        if (l->cfg.store == CFG_STORE_REDIS)
            return gov__fail(r, GOV_EINVAL, "",
                             "limit \"%s\": a redis-backed rule is decided alone, not with other "
                             "descriptors",
                             l->cfg.id);
        probe_t *q = &p[np];
        *q = (probe_t){.l = l,
                       .pair = -1,
                       .slot = GOV_SLOT_NONE,
                       .lim = l->cfg.limiter,
                       .cost = asks[a].cost,
                       .amount = override ? asks[a].override_amount : -1,
                       .key = keys[a]};
        q->key_len = rule_key(keys[a], scratch, l, domain, domain_len, &asks[a].subject, override);
        probe_of[a] = np++;
    }
    int rc = gov__reserve(e, gov__counters_needed(e, p, np), now, &results[0]);
    if (rc < 0)
        return rc;
    bool charge = flags & GOV_ASK_CHARGE, blocked = false;
    size_t quota = 0, quota_over = 0;
    for (size_t i = 0; i < np; i++) {
        gov__asks_step(e, &p[i], charge, now, &undo[i]);
        if (p[i].l->cfg.rule.flags & CFG_RULE_QUOTA) { /* over only when every quota rule is */
            quota++;
            quota_over += gov__blocks(&p[i]);
        } else {
            blocked = blocked || gov__blocks(&p[i]);
        }
    }
    blocked = blocked || (quota > 0 && quota_over == quota);
    *overall = blocked ? GOV_DENY : GOV_ADMIT;
    bool keep = charge || !blocked;
    for (size_t i = np; i-- > 0 && !keep;)
        if (p[i].slot != GOV_SLOT_NONE)
            e->table.slots[p[i].slot].state = undo[i];
    for (size_t a = 0; a < n; a++) {
        gov_result_t *r = &results[a];
        bool counted = probe_of[a] != SIZE_MAX;
        gov__decide_finish(e, set, counted ? &p[probe_of[a]] : NULL, counted, now,
                           keep ? GOV_FINISH_WRITTEN : GOV_FINISH_UNDONE, r);
        if (counted && r->met == GOV_MET_LIMIT)
            gov__detail_count(e, p[probe_of[a]].l, &asks[a].subject, p[probe_of[a]].outcome);
        gov_result_render(r); /* the gRPC front door answers with the strings */
    }
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
    return 0;
}
