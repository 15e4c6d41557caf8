/*
 * Concurrency leases: a gauge per (limit, key) counts leases in flight; acquire takes one slot
 * of every concurrency limit that applies, all or none. The pool of leases and their owners is
 * lease.c; this file ties it to the gauges in the counter table.
 */
#include "engine_int.h"

static void gauge_put(void *ctx, const gov_gauge_ref_t *g)
{
    gov_table_t *t = ctx;
    if (!gov__handle_live(t, (gov_handle_t){.index = g->ident, .gen = g->ident_gen}))
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
    gov__result_init(out);
    int rc = gov__prepare(e->set, s, TYPE_BIT(CFG_TYPE_CONCURRENCY), p, &n, out);
    if (rc < 0 || (rc = gov__reserve(e, n, now, out)) < 0)
        return rc;
    const probe_t *deny = NULL, *tight = NULL;
    for (size_t i = 0; i < n; i++) {
        probe_t *q = &p[i];
        if (gov__local_slot(e, q, true) < 0) {
            gov__store_failed(e, q);
        } else {
            int64_t held = e->table.slots[q->slot].state, amount = q->l->cfg.amount;
            q->evaluated = true;
            q->r.admit = held < amount;
            q->r.remaining = q->r.admit ? amount - held - 1 : 0;
            q->r.retry_after_s = q->r.admit ? 0 : 1; /* a gauge cannot know: poll again */
            q->outcome = q->r.admit ? GOV_OUT_ADMIT : GOV_OUT_DENY;
        }
        if (!q->r.admit && !q->l->cfg.posture.enforce_hard) {
            gov__add_soft(out, q->l);
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
            return gov__fail(out, GOV_ELEASES, "", "acquire: the lease cap (%zu) is reached",
                             e->leases.max);
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
        gov__fill_from(out, deny);
    else if (tight)
        gov__fill_from(out, tight);
    if (!deny)
        out->lease = gov_leases_add(&e->leases, owner, refs, n_refs);
    gov_table_reclaim(&e->table, now, RECLAIM_PER_OP);
    return 0;
}

int gov_release(gov_engine_t *e, uint64_t owner, uint64_t lease)
{
    if (gov_leases_end(&e->leases, lease, owner, gauge_put, &e->table) < 0)
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
