/*
 * Settling tokens: a tpm limit's TAT corrected by (actual - reserved) x T of the limiter in
 * force (ra_settle): a refund never below now, an overrun always charged.
 */
#include "engine_int.h"

static void local_settle_probe(gov_engine_t *e, probe_t *p, int64_t now, int64_t reserved,
                               int64_t actual, int64_t *settled)
{
    /* a refund on a fresh key changes nothing (a full bucket stays full): no counter needed */
    if (gov__local_slot(e, p, actual > reserved) < 0) {
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

/* The end of a settle that waited for redis (pending.c). */
static void settle_resume(gov_pending_t *pd, probe_t *p, size_t n, int64_t now)
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
        if (q.l->cfg.posture.fail_open && gov__reserve(e, 1, now, pd->out) == 0)
            local_settle_probe(e, &q, now, pd->reserved, pd->actual, &settled);
    }
    pd->out->settled = settled;
}

int gov_settle(gov_engine_t *e, const gov_subject_t *s, int64_t reserved, int64_t actual,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0, n_redis = 0;
    gov__result_init(out);
    int rc = gov__prepare(e->set, s, TYPE_BIT(CFG_TYPE_TPM), p, &n, out);
    if (rc < 0)
        return rc;
    if (reserved < 0 || reserved > GOV_TOKENS_MAX)
        return gov__fail(out, GOV_ERANGE, "reserved: %lld is outside 0..2^40", (long long)reserved);
    if (actual < 0 || actual > GOV_TOKENS_MAX)
        return gov__fail(out, GOV_ERANGE, "actual: %lld is outside 0..2^40", (long long)actual);
    if (n == 0)
        return gov__fail(out, GOV_ENOTPM,
                         "subject: no tpm limit applies (settle corrects tpm limits)");
    if ((rc = gov__reserve(e, n, now, out)) < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        n_redis += p[i].l->cfg.store == CFG_STORE_REDIS;
    gov_pending_t *pd = NULL; /* allocated before anything changes: all or nothing */
    if (n_redis) {
        gov_pending_t tmpl = {.types = TYPE_BIT(CFG_TYPE_TPM),
                              .finish = settle_resume,
                              .reserved = reserved,
                              .actual = actual,
                              .done = done,
                              .ctx = ctx};
        if (!(pd = gov__pending_new(e, s, n_redis, &tmpl, out)))
            return gov__fail(out, GOV_ENOMEM, "out of memory starting a redis operation");
    }
    int64_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i].l->cfg.store == CFG_STORE_REDIS)
            continue;
        /* unarmed or unanswered: the replica's own state is settled anyway (plain limiter) */
        (void)gov__limiter_in_force(e, &p[i], 0, now);
        local_settle_probe(e, &p[i], now, reserved, actual, &settled);
    }
    e->m.settles++;
    out->settled = settled;
    if (pd) {
        pd->settled = settled;
        rc = gov__pending_start(pd, GOV_REDIS_SETTLE, p, n, now);
    }
    gov_table_reclaim(&e->table, now, RECLAIM_PER_OP);
    return rc;
}
