/*
 * Several asks decided as one (gov_decide_asks): the gRPC front door's descriptors, each with
 * its own subject and cost.
 *
 * Every probe of every ask is stepped in order and its admitted state written at once, so a
 * counter that two asks share sees both costs; the old states are kept and restored, in reverse
 * order, when a hard denial anywhere means nothing is kept. A charge keeps everything: a denied
 * probe is charged its cost as settle charges an overrun (ra_settle), and its verdict still
 * reports the denial, with the remaining, reset and retry of the state charged.
 */
#include "engine_int.h"

void gov__asks_step(gov_engine_t *e, probe_t *q, bool charge, int64_t now, int64_t *undo)
{
    int in_force = gov__limiter_in_force(e, q, q->cost, now);
    if (q->amount >= 0) /* a descriptor's own limit: the counter's limiter with its amount */
        q->lim.amount = q->lim.burst = q->amount;
    if (in_force < 0)
        gov__store_failed(e, q);
    else
        gov__local_step(e, q, now, q->cost);
    if (q->slot == GOV_SLOT_NONE)
        return;
    int64_t *state = &e->table.slots[q->slot].state;
    *undo = *state;
    if (q->r.admit) {
        *state = q->r.next_state;
    } else if (charge) {
        int64_t denied_retry = q->r.retry_after_s; /* when this cost would have fitted */
        *state = ra_settle(&q->lim, q->state, now, 0, q->cost);
        q->state = *state; /* what the denial reports and disclosure observes */
        q->unit_step = false;
        gov_obs_t o = gov__observe(q, false, now);
        q->r.remaining = o.remaining;
        q->r.reset_after_s = (o.reset_ms + 999) / 1000; /* ceil_s: reset_ms is rounded up */
        /* the retry of a unit on the state charged (a charge puts gcra in debt), but never
         * sooner than the denied cost's own: a window keeps what it holds, and may still have
         * room for one unit when this cost was over (a retry of 0 on a denial) */
        int64_t unit_retry = ra_step(&q->lim, q->state, now, 1).retry_after_s;
        q->r.retry_after_s = unit_retry > denied_retry ? unit_retry : denied_retry;
    }
}

int gov_decide_asks(gov_engine_t *e, const gov_ask_t *asks, size_t n_asks, unsigned flags,
                    int64_t now, gov_result_t *results)
{
    probe_t p[GOV_APPLY_MAX];
    int64_t undo[GOV_APPLY_MAX];
    size_t first[GOV_ASKS_MAX + 1], n = 0, held = e->table.count;
    if (n_asks == 0)
        return GOV_EINVAL;
    for (size_t a = 0; a < n_asks; a++)
        gov__result_init(&results[a]);
    if (n_asks > GOV_ASKS_MAX)
        return gov__fail(&results[0], GOV_EINVAL, "asks", "%zu, at most %d", n_asks, GOV_ASKS_MAX);
    for (size_t a = 0; a < n_asks; a++) {
        int64_t cost = asks[a].cost;
        if (cost < 0 || cost > GOV_TOKENS_MAX)
            return gov__fail(&results[a], GOV_ERANGE, "cost", "%lld is outside 0..2^40",
                             (long long)cost);
        first[a] = n;
        int rc = gov__prepare_at(e->set, &asks[a].subject, RATE_TYPES, flags & GOV_ASK_EXACT, p, &n,
                                 &results[a]);
        if (rc < 0)
            return rc;
        for (size_t i = first[a]; i < n; i++) {
            p[i].cost = cost;
            if (p[i].l->cfg.store == CFG_STORE_REDIS)
                return gov__fail(&results[a], GOV_EINVAL, "",
                                 "limit \"%s\": a redis-backed limit is decided alone, not with "
                                 "other asks",
                                 p[i].l->cfg.id);
        }
    }
    first[n_asks] = n;
    int rc = gov__reserve(e, gov__counters_needed(e, p, n), now, &results[0]);
    if (rc < 0)
        return rc;
    bool charge = flags & GOV_ASK_CHARGE, blocked = false;
    for (size_t i = 0; i < n; i++) {
        gov__asks_step(e, &p[i], charge, now, &undo[i]);
        blocked = blocked || gov__blocks(&p[i]);
    }
    bool keep = charge || !blocked;
    for (size_t i = n; i-- > 0 && !keep;)
        if (p[i].slot != GOV_SLOT_NONE)
            e->table.slots[p[i].slot].state = undo[i];
    for (size_t a = 0; a < n_asks; a++)
        gov__decide_finish(e, e->set, p + first[a], first[a + 1] - first[a], now,
                           keep ? GOV_FINISH_WRITTEN : GOV_FINISH_UNDONE, &results[a]);
    if (e->table.count > held)
        gov_table_reclaim(&e->table, now, RECLAIM_PER_OP * (e->table.count - held));
    return 0;
}
