/*
 * The two-phase decision.
 *
 * A decision walks the generation's limits in order and keeps those that apply (probe.c). Each
 * is then probed without committing anything: ra_step returns the state to store on admission
 * instead of storing it. Only when no hard limit denies is anything written, and then every
 * admitted probe is written at once. So a denial in one limit consumes nothing in any other:
 * probing is reading.
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
 * GOV_PENDING (pending.c). When the last reply arrives the whole decision runs again at the
 * reply's time against the generation it started under, with the redis answers in hand, and
 * commits the local side only if everything admits and only into counters whose handles are
 * still live. Best effort, as SPEC section 5 allows: a redis limit that admitted has consumed
 * there even if a local limit denies on the second pass.
 */
#include <string.h>

#include "engine_int.h"

bool gov__blocks(const probe_t *p)
{
    return p->evaluated && !p->r.admit && p->l->cfg.posture.enforce_hard;
}

/*
 * What a non-committing unit probe reads on the state after the decision. When the probe's
 * own step was committed, its `remaining` already is that reading (a unit probe on the new
 * state admits iff one more unit fits, and then reads the same level), so the second step is
 * skipped. So it is when nothing was committed and the step was of one unit on this very state:
 * it was the unit probe (ra_observe_remaining is that step, its remaining plus the unit, 0 when
 * denied) -- the usual rpm denial.
 */
gov_obs_t gov__observe(const probe_t *p, bool committed, int64_t now)
{
    int64_t state = committed ? p->r.next_state : p->state;
    gov_obs_t o = {.limit = &p->l->cfg};
    if (committed)
        o.remaining = p->r.remaining;
    else if (p->unit_step)
        o.remaining = ra_observe_of(p->r);
    else
        o.remaining = ra_observe_remaining(&p->lim, state, now);
    gov_obs_fill(&o, &p->lim, state, now);
    return o;
}

void gov__add_soft(gov_result_t *out, const gov_limit_t *l)
{
    if (out->n_soft_denied == GOV_SOFT_MAX) {
        out->soft_truncated = true;
        return;
    }
    memcpy(out->soft_denied[out->n_soft_denied++], l->cfg.id, CFG_ID_MAX + 1);
}

void gov__fill_from(gov_result_t *out, const probe_t *p)
{
    memcpy(out->limit, p->l->cfg.id, sizeof(out->limit));
    out->remaining = p->r.remaining;
    out->retry_after_s = p->r.retry_after_s;
    out->reset_after_s = p->r.reset_after_s;
    /* the limit as written (envoy_window keeps its plain amount in burst: a share's or a
     * descriptor's own limit is told as the amount the limiter was given) */
    out->limit_amount = p->lim.algorithm == RA_ENVOY_WINDOW ? p->lim.burst : p->l->cfg.amount;
    out->limit_period_ns = p->l->cfg.period_ns;
}

/* The result's limit, remaining and reset from the state an admitted probe left in place, its
 * step undone (a denial elsewhere kept nothing): what a unit probe reads there, not the step. */
static void fill_kept(gov_result_t *out, const probe_t *p, int64_t now)
{
    gov__fill_from(out, p);
    if (!p->observed)
        return;
    gov_obs_t o = gov__observe(p, false, now);
    out->remaining = o.remaining;
    out->reset_after_s = (o.reset_ms + 999) / 1000; /* ceil_s: reset_ms is rounded up */
}

/* An admitted decision's reservation: the tpm limits it charged (counted, not failed open nor
 * soft-denied), as bits over the subject's tpm limits in config order. */
static void reserve_charged(gov_engine_t *e, const gov_client_t *who, gov_set_t *set,
                            const gov_subject_t *s, const probe_t *p, size_t n, int64_t tokens,
                            int64_t now, gov_result_t *out)
{
    gov_probe_set_t charged = {{0}}, local = {{0}};
    size_t k = 0;
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        const probe_t *q = &p[i];
        if (q->l->cfg.type != CFG_TYPE_TPM)
            continue;
        if (q->evaluated && q->r.admit && q->outcome == GOV_OUT_ADMIT) {
            gov__probe_set_add(&charged, k);
            if (q->l->cfg.store == CFG_STORE_REDIS && q->slot != GOV_SLOT_NONE)
                gov__probe_set_add(&local, k); /* the fallback limiter counted it */
            any = true;
        }
        k++;
    }
    if (any)
        out->reservation = gov__reservation_open(e, who, set, s, tokens, &charged, &local, now);
}

/* gov_obs_tighter's rule on two admitted probes' own readings (remaining over depth), the
 * depths worked out only when there are two to compare. */
static bool tighter(const probe_t *a, const probe_t *b)
{
    return gov__tighter(a->r.remaining, gov__depth_of(&a->lim), b->r.remaining,
                        gov__depth_of(&b->lim));
}

void gov__decide_finish(gov_engine_t *e, gov_set_t *set, probe_t *p, size_t n, int64_t now,
                        gov_finish_mode_t mode, gov_result_t *out)
{
    const probe_t *deny = NULL, *unfit = NULL, *tight = NULL, *soft = NULL;
    bool all_closed = true; /* every hard denial is posture.fail closed */
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
        if (!hard) {
            gov__add_soft(out, q->l);
            if (!soft || q->r.retry_after_s > soft->r.retry_after_s)
                soft = q;
        } else if (q->outcome == GOV_OUT_UNFITTABLE)
            unfit = unfit ? unfit : q;
        else if (!deny || q->r.retry_after_s > deny->r.retry_after_s)
            deny = q;
        if (hard && q->outcome != GOV_OUT_FAIL_CLOSED)
            all_closed = false;
    }
    out->verdict = unfit ? GOV_UNFITTABLE : deny ? GOV_DENY : GOV_ADMIT;
    out->admit = out->verdict == GOV_ADMIT;
    out->unavailable = out->verdict == GOV_DENY && all_closed;
    e->m.decisions[out->verdict]++;
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        if (!q->evaluated)
            continue;
        q->l->outcomes[q->outcome]++;
        if (!q->r.admit || q->outcome == GOV_OUT_FAIL_OPEN)
            continue;
        if (mode == GOV_FINISH_COMMIT && out->admit && q->slot != GOV_SLOT_NONE)
            e->table.slots[q->slot].state = q->r.next_state;
        if (!tight || tighter(q, tight))
            tight = q;
    }
    if (unfit) {
        gov__fill_from(out, unfit);
        out->retry_after_s = 0;
        out->code = "quota_cost_unfittable";
    } else if (deny) {
        gov__fill_from(out, deny);
        if (out->unavailable) /* every door says so: the socket's code, HTTP's, gRPC's status */
            out->code = "unavailable";
    } else if (tight && mode == GOV_FINISH_UNDONE) {
        fill_kept(out, tight, now);
    } else if (tight) {
        gov__fill_from(out, tight);
    } else if (soft) { /* only a soft denial: it names itself, remaining 0, its reset */
        gov__fill_from(out, soft);
        out->remaining = 0;
        out->retry_after_s = 0; /* admitted: nothing to wait for */
    }
    int64_t retry = out->verdict == GOV_DENY ? out->retry_after_s : -1;
    if (!set->disclose) {
        gov_disclose(out, NULL, NULL, NULL, retry);
        return;
    }
    bool kept = mode == GOV_FINISH_COMMIT ? out->admit : mode == GOV_FINISH_WRITTEN;
    if (n == 1) { /* one reading: the tightest, the tightest of its type, and the denying one */
        gov_obs_t o = {0};
        if (p->observed)
            o = gov__observe(p, kept && p->r.admit, now);
        bool tpm_limit = p->l->cfg.type == CFG_TYPE_TPM;
        gov_disclose(out, &o, tpm_limit ? NULL : &o, tpm_limit ? &o : NULL, retry);
        return;
    }
    gov_obs_t best = {0}, rpm = {0}, tpm = {0}, denying = {0};
    for (size_t i = 0; i < n; i++) {
        const probe_t *q = &p[i];
        if (!q->observed)
            continue;
        gov_obs_t o = gov__observe(q, kept && q->r.admit, now);
        gov_obs_t *by_type = q->l->cfg.type == CFG_TYPE_TPM ? &tpm : &rpm;
        if (gov_obs_tighter(&o, &best))
            best = o;
        if (gov_obs_tighter(&o, by_type))
            *by_type = o;
        if (q == deny) /* a denial is never kept: this is its uncommitted reading */
            denying = o;
    }
    if (deny && deny->observed) /* RateLimit speaks of the limit Retry-After comes from */
        best = denying;
    gov_disclose(out, &best, &rpm, &tpm, retry);
}

bool gov__redis_answer(gov_engine_t *e, probe_t *q, const gov_redis_reply_t *rep)
{
    q->l->fallback = rep->unavailable;
    if (!rep->unavailable) {
        q->r = rep->r;
        q->r.next_state = 0;
        q->evaluated = true;
        q->outcome = GOV_OUT_ADMIT;
        return true;
    }
    q->l->store_errors++;
    e->m.store_errors++;
    if (q->l->cfg.posture.fail_open)
        return false;
    gov__posture_fail(q);
    return true;
}

/*
 * How many counters this decision may add: n, unless the table is at its cap, where every one
 * already in place is one less. There a decision on keys the table holds (the usual case under
 * load) then skips the cap's 1024-slot reclamation slice, which it does not need: paid by every
 * decision, that slice made each one cost about 12 us instead of under 1 us with the table full
 * (bench/footprint.py reclaim, docs/performance.md) -- and made filling the table a way to
 * slow every client down. Only at the cap are the keys hashed and looked up an extra time.
 */
size_t gov__counters_needed(gov_engine_t *e, const probe_t *p, size_t n)
{
    gov_table_t *t = &e->table;
    if (t->count + n <= t->max)
        return n;
    size_t missing = 0;
    for (size_t i = 0; i < n; i++) {
        int ix = p[i].l->ident.index;
        if (!gov__handle_live(t, p[i].l->ident) ||
            gov_table_find(t, ix, gov_table_hash(t, ix, p[i].key, p[i].key_len), p[i].key,
                           p[i].key_len) == GOV_SLOT_NONE)
            missing++;
    }
    return missing;
}

/*
 * Probes every limit. With `replies` NULL (the first pass) redis limits are left unevaluated
 * and counted in *n_redis; with replies (the second pass) they take their answers in order.
 * Returns GOV_PENDING when redis must be asked, else 0 with the decision finished.
 */
static int decide_run(gov_engine_t *e, const gov_client_t *who, gov_set_t *set,
                      const gov_subject_t *s, probe_t *p, size_t n, int64_t tokens, int64_t now,
                      const gov_redis_reply_t *replies, size_t *n_redis, gov_result_t *out)
{
    int rc = gov_table_has_room(&e->table, n)
                 ? 0
                 : gov__reserve(e, gov__counters_needed(e, p, n), now, out);
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
            if (!gov__redis_answer(e, q, &replies[ri++]))
                gov__local_step(e, q, now, cost); /* open: the local fallback limiter decides */
        } else if (gov__limiter_in_force(e, q, replies ? 0 : cost, now) < 0) {
            gov__store_failed(e, q);
        } else {
            gov__local_step(e, q, now, cost);
        }
        blocked = blocked || gov__blocks(q);
    }
    *n_redis = ri;
    if (ri && !replies && !blocked)
        return GOV_PENDING;
    gov__decide_finish(e, set, p, n, now, GOV_FINISH_COMMIT, out);
    if (out->admit && tokens > 0) /* a 0-token decision is a reading: nothing to settle */
        reserve_charged(e, who, set, s, p, n, tokens, now, out);
    return 0;
}

/* The second pass of a decision that waited for redis (pending.c). */
static void decide_resume(gov_pending_t *pd, probe_t *p, size_t n, int64_t now)
{
    size_t n_redis = 0;
    (void)decide_run(pd->e, &pd->who, pd->set, &pd->subject, p, n, pd->tokens, now, pd->replies,
                     &n_redis, pd->out);
}

int gov_decide(gov_engine_t *e, const gov_client_t *who, const gov_subject_t *s, int64_t tokens,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx)
{
    static const gov_client_t anonymous = {0, 0};
    if (!who)
        who = &anonymous;
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0, n_redis = 0, held = e->table.count;
    gov__result_init(out);
    int rc = gov__prepare(e->set, s, RATE_TYPES, p, &n, out);
    if (rc < 0)
        return rc;
    if (tokens != GOV_NO_TOKENS && (tokens < 0 || tokens > GOV_TOKENS_MAX))
        return gov__fail(out, GOV_ERANGE, "tokens", "%lld is outside 0..2^40", (long long)tokens);
    for (size_t i = 0; i < n && tokens == GOV_NO_TOKENS; i++)
        if (p[i].l->cfg.type == CFG_TYPE_TPM)
            return gov__fail(out, GOV_ETOKENS, "tokens", "required: tpm limit \"%s\" applies",
                             p[i].l->cfg.id);
    rc = decide_run(e, who, e->set, s, p, n, tokens, now, NULL, &n_redis, out);
    if (rc == GOV_PENDING) {
        gov_pending_t tmpl = {.types = RATE_TYPES,
                              .finish = decide_resume,
                              .tokens = tokens,
                              .who = *who,
                              .done = done,
                              .ctx = ctx};
        gov_pending_t *pd = gov__pending_new(e, e->set, s, n_redis, &tmpl, out);
        rc = pd ? gov__pending_start(pd, GOV_REDIS_STEP, p, n, now)
                : gov__fail(out, GOV_ENOMEM, "", "out of memory starting a redis operation");
    }
    /* Reclamation keeps pace with what this decision added. A decision on counters that already
     * exist (most of them, under load) examines nothing here: that was 4-6% of the daemon's CPU
     * at 10k keys (docs/performance.md); the tick's slices sweep for idle keys meanwhile. */
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
    return rc;
}
