/*
 * Counters across restarts (SPEC §11): the two calls the state directory needs, reading every
 * counter a snapshot keeps and putting one back. The snapshot format and the files are state/'s.
 */
#include <string.h>

#include "engine_int.h"

bool gov_limit_persists(const cfg_limit_t *l)
{
    return cfg_type_is_rate(l->type) && l->store != CFG_STORE_REDIS;
}

typedef struct each_ctx {
    const gov_table_t *t;
    int64_t now;
    int16_t limit[GOV_IDENTS_MAX]; /* table ident -> config index, -1: not kept */
    gov_counter_fn fn;
    void *ctx;
} each_ctx_t;

static void each_slot(void *ctx, int ident, const char *key, size_t len, int64_t state)
{
    each_ctx_t *c = ctx;
    if (c->limit[ident] >= 0 && !ra_state_is_idle(&c->t->idents[ident].limiter, state, c->now))
        c->fn(c->ctx, (size_t)c->limit[ident], key, len, state);
}

void gov_engine_each_counter(gov_engine_t *e, int64_t now, gov_counter_fn fn, void *ctx)
{
    each_ctx_t c = {.t = &e->table, .now = now, .fn = fn, .ctx = ctx};
    memset(c.limit, 0xff, sizeof(c.limit));
    for (size_t i = 0; i < e->set->n; i++)
        if (e->set->limits[i].ident.index >= 0 && gov_limit_persists(&e->set->limits[i].cfg))
            c.limit[e->set->limits[i].ident.index] = (int16_t)i;
    gov_table_each(&e->table, each_slot, &c);
}

size_t gov_engine_regions(const gov_engine_t *e, void **addr, size_t *len, size_t cap)
{
    return gov_table_regions(&e->table, addr, len, cap);
}

int gov_engine_restore(gov_engine_t *e, size_t limit, const char *key, size_t key_len,
                       int64_t state, int64_t now)
{
    return gov_engine_restore_at(e, limit, key, key_len, state, now, now);
}

/*
 * A share counter resumes the debt it had when its snapshot was taken (issue 35): the replica's
 * peers counted it out while it was down (a leave at once, a death within detect_within) and
 * divided the amount by one fewer, so they spent its share of the downtime; a bucket refilled
 * for the downtime would spend it again (burst / N more per restart, above the bound the fleet
 * discloses). So a TAT ahead of the snapshot's time comes back as far ahead of now. A bucket
 * full at the snapshot stays full. What that gives up: after a crash the dead replica's share
 * went unused until detection, and this does not hand it back (the fleet under-admits, never
 * over). docs/share.md, "A restart's counters".
 */
static int64_t share_resumed(const cfg_limit_t *l, int64_t state, int64_t written_ns, int64_t now)
{
    int64_t resumed;
    if (l->store != CFG_STORE_SHARE || l->limiter.algorithm != RA_GCRA || state <= written_ns ||
        now <= written_ns || __builtin_add_overflow(state, now - written_ns, &resumed) ||
        !ra_state_reachable(&l->limiter, resumed))
        return state;
    return resumed;
}

int gov_engine_restore_at(gov_engine_t *e, size_t limit, const char *key, size_t key_len,
                          int64_t state, int64_t written_ns, int64_t now)
{
    if (limit >= e->set->n || e->set->limits[limit].ident.index < 0 ||
        !gov_limit_persists(&e->set->limits[limit].cfg))
        return GOV_EINVAL;
    if (key_len > GOV_ID_MAX)
        return GOV_ESUBJECT;
    const gov_limit_t *l = &e->set->limits[limit];
    /* A value this limit could never have stored (crafted, or a writer's bug) says nothing true
     * about what was spent: a gcra TAT of INT64_MAX would make every later cost unfittable
     * ("never retry"), a window count above the amount would deny the whole window. It is
     * refused, not clamped: the nearest reachable TAT, INT64_MAX - tau, would still deny the
     * key for centuries. A share limit steps in the effective form (T_s, tau_s >= tau); its
     * state is checked against the plain limiter, which its divisor cannot be known before
     * membership has joined. */
    if (!ra_state_reachable(&l->cfg.limiter, state))
        return GOV_ERANGE;
    state = share_resumed(&l->cfg, state, written_ns, now);
    if (ra_state_is_idle(&l->cfg.limiter, state, now))
        return 1;
    gov_table_t *t = &e->table;
    size_t slot;
    if (gov_table_reserve(t, 1) < 0)
        return GOV_ENOMEM;
    int ix = l->ident.index;
    int rc = gov_table_get(t, ix, gov_table_hash(t, ix, key, key_len), key, key_len, &slot);
    if (rc < 0)
        return rc == -1 ? GOV_ELIMITS : GOV_ENOMEM;
    t->slots[slot].state = state;
    return 0;
}
