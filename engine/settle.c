/*
 * Reservations, settle and charge (SPEC section 5).
 *
 * A tpm decision presents an estimate R and is charged R on every tpm limit that admits it. When
 * it was admitted and charged at least one, the engine keeps a reservation: the generation it
 * was decided under, the subject, R, and which tpm limits were charged (and which of those were
 * redis limits counted by their local fallback). Its id is a ticket (ticket.h), so it cannot be
 * made up. `settle` presents the id and the actual count A, and every charged limit's TAT moves
 * by (A - R) x T of the limiter in force (ra_settle): a refund never below now, an overrun
 * always charged, never so far that a later decision reads as unfittable. Once: the entry is
 * then marked settled and a repeat is told so, changing nothing. The pool (resv.c) bounds how
 * many reservations are held and for how long; an unsettled one that expires or is evicted to
 * make room simply stays charged, which errs towards admitting less, never more.
 *
 * A reservation is its client's (gov_client_t): a settle by another owner is told the id is
 * unknown, and changes nothing, so a reservation id that leaks lets no other client refund it.
 *
 * A settle corrects the same counters the decision charged, through the handles of the
 * generation it was decided under: a limit a reload kept is corrected, one it reset or removed
 * is not (its counters are gone), and nothing another limit holds now is touched.
 *
 * `charge` is the path for tokens counted after the fact with no reservation: A tokens on every
 * tpm limit that applies now, as a settle of a reservation of 0 would, so it never refunds.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

/* A reservation's record, owned by the pool: the subject follows, packed. */
typedef struct resv_record {
    gov_set_t *set; /* a reference */
    uint64_t owner; /* who may settle it (gov_client_t.owner) */
    int64_t reserved;
    gov_probe_set_t charged, local;
    uint8_t subject[];
} resv_record_t;

uint64_t gov__reservation_open(gov_engine_t *e, const gov_client_t *who, gov_set_t *set,
                               const gov_subject_t *s, int64_t reserved,
                               const gov_probe_set_t *charged, const gov_probe_set_t *local,
                               int64_t now)
{
    size_t bytes = sizeof(resv_record_t) + gov__subject_pack_size(s);
    resv_record_t *r = malloc(bytes);
    if (!r)
        return 0;
    *r = (resv_record_t){.set = set,
                         .owner = who->owner,
                         .reserved = reserved,
                         .charged = *charged,
                         .local = *local};
    set->refs++;
    gov__subject_pack(r->subject, s);
    uint64_t id = gov_resv_add(&e->resv, who->account, r, bytes, now);
    if (!id)
        gov__reservation_drop(r);
    return id;
}

void gov__reservation_drop(void *record)
{
    resv_record_t *r = record;
    gov__set_unref(r->set);
    free(r);
}

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

/* The end of a correction that waited for redis (pending.c). */
static void settle_resume(gov_pending_t *pd, probe_t *p, size_t n, int64_t now)
{
    gov_engine_t *e = pd->e;
    int64_t settled = pd->settled;
    uint32_t k = 0;
    for (size_t i = 0; i < n; i++) {
        probe_t q = p[i];
        if (!gov__via_redis(&q))
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

/*
 * Corrects the tpm probes p[0..n) of `set` by (actual - reserved): the local and share ones now,
 * the redis ones through the store (GOV_PENDING). All or nothing up to the store: an error
 * (out of memory) is returned before anything changed.
 */
static int correct(gov_engine_t *e, gov_set_t *set, const gov_subject_t *s, probe_t *p, size_t n,
                   const gov_pending_t *tmpl, int64_t now, gov_result_t *out)
{
    size_t n_redis = 0;
    int rc = gov__reserve(e, n, now, out);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < n; i++)
        n_redis += gov__via_redis(&p[i]);
    gov_pending_t *pd = NULL; /* allocated before anything changes: all or nothing */
    if (n_redis && !(pd = gov__pending_new(e, set, s, n_redis, tmpl, out)))
        return gov__fail(out, GOV_ENOMEM, "", "out of memory starting a redis operation");
    int64_t settled = 0;
    for (size_t i = 0; i < n; i++) {
        if (gov__via_redis(&p[i]))
            continue;
        /* unarmed or unanswered: the replica's own state is settled anyway (plain limiter) */
        (void)gov__limiter_in_force(e, &p[i], 0, now);
        local_settle_probe(e, &p[i], now, tmpl->reserved, tmpl->actual, &settled);
    }
    out->settled = settled;
    rc = 0;
    if (pd) {
        pd->settled = settled;
        rc = gov__pending_start(pd, GOV_REDIS_SETTLE, p, n, now);
    }
    gov_table_reclaim(&e->table, now, RECLAIM_PER_OP);
    return rc;
}

static int check_count(gov_result_t *out, const char *what, int64_t v)
{
    if (v < 0 || v > GOV_TOKENS_MAX)
        return gov__fail(out, GOV_ERANGE, what, "%lld is outside 0..2^40", (long long)v);
    return 0;
}

int gov_settle(gov_engine_t *e, const gov_client_t *who, uint64_t reservation, int64_t actual,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx)
{
    gov__result_init(out);
    int rc = check_count(out, "actual", actual);
    if (rc < 0)
        return rc;
    void *record = NULL;
    int state = gov_resv_find(&e->resv, reservation, now, &record);
    if (state == GOV_RESV_SETTLED) {
        out->already_settled = true;
        return 0;
    }
    resv_record_t *r = record;
    if (state != GOV_RESV_OPEN || r->owner != (who ? who->owner : 0))
        return gov__fail(out, GOV_ERESERVATION, "reservation",
                         "unknown or expired (never issued, another client's, not settled within "
                         "%lld s of its decision, or evicted from a full pool); it stays charged",
                         (long long)(e->resv.ttl / RA_NS_PER_S));
    gov_subject_t s;
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0;
    gov__subject_unpack(&s, r->subject);
    /* checked when the decision was made, against the same generation: cannot fail now */
    (void)gov__prepare(r->set, &s, TYPE_BIT(CFG_TYPE_TPM), p, &n, out);
    gov__probes_select(p, &n, &r->charged, &r->local);
    gov_pending_t tmpl = {.types = TYPE_BIT(CFG_TYPE_TPM),
                          .finish = settle_resume,
                          .reserved = r->reserved,
                          .actual = actual,
                          .select = true,
                          .keep = r->charged,
                          .local = r->local,
                          .done = done,
                          .ctx = ctx};
    rc = correct(e, r->set, &s, p, n, &tmpl, now, out);
    if (rc >= 0) { /* the record (and `s`, which points into it) goes now */
        gov_resv_settle(&e->resv, reservation);
        e->m.settles++;
    }
    return rc;
}

int gov_charge(gov_engine_t *e, const gov_subject_t *s, int64_t tokens, int64_t now,
               gov_result_t *out, gov_done_fn done, void *ctx)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0;
    gov__result_init(out);
    int rc = gov__prepare(e->set, s, TYPE_BIT(CFG_TYPE_TPM), p, &n, out);
    if (rc < 0 || (rc = check_count(out, "tokens", tokens)) < 0)
        return rc;
    if (n == 0)
        return gov__fail(out, GOV_ENOTPM, "subject",
                         "no tpm limit applies (charge counts tpm limits)");
    gov_pending_t tmpl = {.types = TYPE_BIT(CFG_TYPE_TPM),
                          .finish = settle_resume,
                          .actual = tokens,
                          .done = done,
                          .ctx = ctx};
    rc = correct(e, e->set, s, p, n, &tmpl, now, out);
    if (rc >= 0)
        e->m.charges++;
    return rc;
}
