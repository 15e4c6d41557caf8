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
#include <stdlib.h>
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

/* One request's descriptors as probes: what each met (results[a].met and the rule's fields),
 * and a probe per counting rule (probe_of[a], SIZE_MAX for none) keyed in keys[a]. */
typedef struct collected {
    probe_t p[GOV_ASKS_MAX];
    size_t probe_of[GOV_ASKS_MAX], np, n_redis;
} collected_t;

static int collect(gov_set_t *set, const char *domain, size_t domain_len, const gov_ask_t *asks,
                   size_t n, char (*keys)[GOV_ID_MAX], collected_t *c, gov_result_t *results)
{
    int met[GOV_ASKS_MAX];
    c->np = c->n_redis = 0;
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
    char scratch[RULE_KEY_MAX];
    for (size_t a = 0; a < n; a++) {
        gov_result_t *r = &results[a];
        c->probe_of[a] = SIZE_MAX;
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
        probe_t *q = &c->p[c->np];
        *q = (probe_t){.l = l,
                       .pair = -1,
                       .slot = GOV_SLOT_NONE,
                       .lim = l->cfg.limiter,
                       .cost = asks[a].cost,
                       .amount = override ? asks[a].override_amount : -1,
                       .key = keys[a]};
        if (override) /* the descriptor's own amount, on the counter of its unit */
            q->lim.amount = q->lim.burst = q->amount;
        q->key_len = rule_key(keys[a], scratch, l, domain, domain_len, &asks[a].subject, override);
        c->n_redis += l->cfg.store == CFG_STORE_REDIS;
        c->probe_of[a] = c->np++;
    }
    return 0;
}

/* Redis operations sent and forgotten (refunds, charges): their answers change nothing here. */
typedef struct chore {
    gov_pending_t pd;
    ra_limiter_t lims[GOV_ASKS_MAX];
    char keys[GOV_ASKS_MAX][GOV_ID_MAX];
    gov_redis_op_t ops[GOV_ASKS_MAX];
    gov_redis_reply_t replies[GOV_ASKS_MAX];
} chore_t;

static void chore_finish(gov_pending_t *pd, probe_t *p, size_t n, int64_t now)
{
    (void)pd, (void)p, (void)n, (void)now;
}

static void chore_done(gov_result_t *res, void *ctx)
{
    (void)res, (void)ctx;
}

/* Sends settle(reserved, actual) for each of p[0, n) that `want`s one, on the redis store. */
static void redis_chores(gov_engine_t *e, gov_set_t *set, probe_t *const *p, size_t n, bool refund,
                         int64_t now)
{
    chore_t *ch = n ? calloc(1, sizeof(*ch)) : NULL;
    if (!ch || !e->redis.submit) {
        free(ch);
        return; /* best effort: a refund that cannot be sent leaves the count high until reset */
    }
    gov_pending_t *pd = &ch->pd;
    *pd = (gov_pending_t){.e = e,
                          .set = set,
                          .finish = chore_finish,
                          .done = chore_done,
                          .ops = ch->ops,
                          .replies = ch->replies,
                          .n_ops = (uint32_t)n};
    set->refs++;
    e->pending++;
    pd->outstanding = (uint32_t)n + 1;
    for (size_t i = 0; i < n; i++) {
        ch->lims[i] = p[i]->lim;
        memcpy(ch->keys[i], p[i]->key, p[i]->key_len);
        ch->ops[i] = (gov_redis_op_t){.kind = GOV_REDIS_SETTLE,
                                      .limit = &p[i]->l->cfg,
                                      .limiter = &ch->lims[i],
                                      .key = ch->keys[i],
                                      .key_len = p[i]->key_len,
                                      .now = now,
                                      .reserved = refund ? p[i]->cost : 0,
                                      .actual = refund ? 0 : p[i]->cost,
                                      .engine_private_ = pd,
                                      .index_ = (uint32_t)i};
        if (e->redis.submit(e->redis_ctx, &ch->ops[i]) < 0)
            pd->outstanding--;
    }
    gov__pending_release(pd, now);
}

/* Whether a probe's counter can take a settle: gcra's and envoy_window's. */
static bool settles(const probe_t *q)
{
    ra_algorithm_t a = q->lim.algorithm;
    return a == RA_GCRA || a == RA_ENVOY_WINDOW;
}

/* The decision over collected probes, their redis answers (in order) given when any: local
 * probes stepped and written, the verdict two-phase (quota aware), the local steps undone and
 * the redis admissions refunded when nothing is kept; with `charge` redis denials charged. */
static void decide(gov_engine_t *e, gov_set_t *set, collected_t *c, const gov_ask_t *asks, size_t n,
                   unsigned flags, const gov_redis_reply_t *replies, int64_t now,
                   gov_result_t *results, gov_verdict_t *overall)
{
    int64_t undo[GOV_ASKS_MAX];
    bool charge = flags & GOV_ASK_CHARGE, blocked = false;
    size_t quota = 0, quota_over = 0, ri = 0;
    for (size_t i = 0; i < c->np; i++) {
        probe_t *q = &c->p[i];
        undo[i] = 0;
        if (q->l->cfg.store == CFG_STORE_REDIS) {
            if (!gov__redis_answer(e, q, &replies[ri++]))
                gov__asks_step(e, q, false, now, &undo[i]); /* the fallback, as a local one */
        } else
            gov__asks_step(e, q, charge, now, &undo[i]);
        if (q->l->cfg.rule.flags & CFG_RULE_QUOTA) { /* over only when every quota rule is */
            quota++;
            quota_over += gov__blocks(q);
        } else {
            blocked = blocked || gov__blocks(q);
        }
    }
    blocked = blocked || (quota > 0 && quota_over == quota);
    *overall = blocked ? GOV_DENY : GOV_ADMIT;
    bool keep = charge || !blocked;
    probe_t *later[GOV_ASKS_MAX];
    size_t n_later = 0;
    for (size_t i = c->np; i-- > 0;) {
        probe_t *q = &c->p[i];
        bool in_redis = q->l->cfg.store == CFG_STORE_REDIS && q->slot == GOV_SLOT_NONE;
        if (in_redis && q->evaluated && settles(q) && (keep ? charge && !q->r.admit : q->r.admit)) {
            later[n_later++] = q; /* a refund of what Redis kept, or a charge of what it did not */
            if (!keep) /* the answer is of the count the refund leaves, as a local undo's is */
                q->r.remaining += q->cost;
        } else if (!keep && !in_redis && q->slot != GOV_SLOT_NONE)
            e->table.slots[q->slot].state = undo[i]; /* a local counter, or redis's fallback */
    }
    if (n_later)
        redis_chores(e, set, later, n_later, !keep, now);
    for (size_t a = 0; a < n; a++) {
        gov_result_t *r = &results[a];
        size_t k = c->probe_of[a];
        bool counted = k != SIZE_MAX;
        gov__decide_finish(e, set, counted ? &c->p[k] : NULL, counted, now,
                           keep ? GOV_FINISH_WRITTEN : GOV_FINISH_UNDONE, r);
        if (counted && r->met == GOV_MET_LIMIT)
            gov__detail_count(e, c->p[k].l, &asks[a].subject, c->p[k].outcome);
    }
}

/* A request waiting on Redis: everything it needs to be decided again when the answers come. */
typedef struct domain_wait {
    gov_pending_t pd;
    char domain[CFG_RULE_DOMAIN_MAX + 1];
    size_t domain_len, n;
    unsigned flags;
    gov_result_t *results;
    gov_verdict_t *overall;
    gov_ask_t asks[GOV_ASKS_MAX]; /* their keys and values point into `bytes` */
    ra_limiter_t lims[GOV_ASKS_MAX];
    char keys[GOV_ASKS_MAX][GOV_ID_MAX];
    gov_redis_op_t ops[GOV_ASKS_MAX];
    gov_redis_reply_t replies[GOV_ASKS_MAX];
    char bytes[];
} domain_wait_t;

static void domain_resume(gov_pending_t *pd, probe_t *p, size_t n, int64_t now)
{
    (void)p, (void)n;
    domain_wait_t *w = (domain_wait_t *)pd;
    gov_engine_t *e = pd->e;
    collected_t c;
    char keys[GOV_ASKS_MAX][GOV_ID_MAX];
    size_t held = e->table.count;
    for (size_t a = 0; a < w->n; a++)
        gov__result_init(&w->results[a]);
    /* the same generation, the same asks: the same probes as the first pass (checked there) */
    (void)collect(pd->set, w->domain, w->domain_len, w->asks, w->n, keys, &c, w->results);
    if (gov__reserve(e, gov__counters_needed(e, c.p, c.np), now, &w->results[0]) < 0) {
        *w->overall = GOV_DENY; /* out of memory: results[0] says so */
        return;
    }
    decide(e, pd->set, &c, w->asks, w->n, w->flags, w->replies, now, w->results, w->overall);
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
}

/* Sends the redis probes of c and returns GOV_PENDING (or 0 when every answer came at once:
 * then the request is decided already). */
static int wait_redis(gov_engine_t *e, const char *domain, size_t domain_len, const gov_ask_t *asks,
                      size_t n, unsigned flags, collected_t *c, int64_t now, gov_result_t *results,
                      gov_verdict_t *overall, gov_done_fn done, void *ctx)
{
    size_t bytes = 0;
    for (size_t a = 0; a < n; a++)
        bytes += gov__subject_bytes(&asks[a].subject);
    domain_wait_t *w = calloc(1, sizeof(*w) + bytes);
    if (!w)
        return gov__fail(&results[0], GOV_ENOMEM, "", "out of memory starting a redis operation");
    gov_pending_t *pd = &w->pd;
    *pd = (gov_pending_t){.e = e,
                          .set = e->set,
                          .finish = domain_resume,
                          .done = done,
                          .ctx = ctx,
                          .out = results,
                          .ops = w->ops,
                          .replies = w->replies,
                          .n_ops = (uint32_t)c->n_redis};
    e->set->refs++;
    e->pending++;
    memcpy(w->domain, domain, domain_len);
    w->domain_len = domain_len;
    w->n = n;
    w->flags = flags;
    w->results = results;
    w->overall = overall;
    char *at = w->bytes;
    for (size_t a = 0; a < n; a++) {
        w->asks[a] = asks[a];
        gov__subject_copy(&w->asks[a].subject, at, &asks[a].subject);
        at += gov__subject_bytes(&asks[a].subject);
    }
    pd->outstanding = (uint32_t)c->n_redis + 1; /* +1: no answer inside submit finishes it */
    uint32_t k = 0;
    for (size_t i = 0; i < c->np; i++) {
        const probe_t *q = &c->p[i];
        if (q->l->cfg.store != CFG_STORE_REDIS)
            continue;
        w->lims[k] = q->lim;
        memcpy(w->keys[k], q->key, q->key_len);
        gov_redis_op_t *op = &w->ops[k];
        *op = (gov_redis_op_t){.kind = GOV_REDIS_STEP,
                               .limit = &q->l->cfg,
                               .limiter = &w->lims[k],
                               .key = w->keys[k],
                               .key_len = q->key_len,
                               .now = now,
                               .cost = q->cost,
                               .engine_private_ = pd,
                               .index_ = k};
        k++;
        if (!e->redis.submit || e->redis.submit(e->redis_ctx, op) < 0) {
            w->replies[op->index_] = (gov_redis_reply_t){.unavailable = true};
            pd->outstanding--;
        }
    }
    return gov__pending_release(pd, now);
}

int gov_decide_domain(gov_engine_t *e, const char *domain, size_t domain_len, const gov_ask_t *asks,
                      size_t n, unsigned flags, int64_t now, gov_result_t *results,
                      gov_verdict_t *overall, gov_done_fn done, void *ctx)
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
    if (domain_len > CFG_RULE_DOMAIN_MAX) /* no rule has such a domain: not reached */
        return gov__fail(&results[0], GOV_EINVAL, "domain", "longer than %d bytes",
                         CFG_RULE_DOMAIN_MAX);
    collected_t c;
    char keys[GOV_ASKS_MAX][GOV_ID_MAX];
    int rc = collect(set, domain, domain_len, asks, n, keys, &c, results);
    if (rc < 0)
        return rc;
    if (c.n_redis && !done)
        return gov__fail(&results[0], GOV_EINVAL, "store",
                         "a rule of store redis, and this caller cannot wait for its answer");
    if (c.n_redis) /* the local probes are stepped when the answers are in, all at one time */
        return wait_redis(e, domain, domain_len, asks, n, flags, &c, now, results, overall, done,
                          ctx);
    size_t held = e->table.count;
    rc = gov__reserve(e, gov__counters_needed(e, c.p, c.np), now, &results[0]);
    if (rc < 0)
        return rc;
    decide(e, set, &c, asks, n, flags, NULL, now, results, overall);
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
    return 0;
}
