/*
 * The decision engine: its life (create, destroy, the store hooks, the housekeeping tick), the
 * names of its codes, and its metrics. What a decision does is in decide.c; the other seams
 * are listed in engine_int.h.
 *
 * Ownership: the engine owns the live configuration generation (gen.c), the counter table,
 * the lease pool and every pending request's memory; it borrows the hooks' contexts.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

#define RECLAIM_TICK_MIN 16384    /* slots examined per tick, at least (else capacity / 64) */
#define RESV_EXPIRE_PER_TICK 4096 /* reservations ended per tick, at most (adds end 2 each) */

const char *gov_strcode(int err)
{
    return err == 0 ? "ok" : tt_err_name(err);
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

/* ---- the engine -------------------------------------------------------------------------- */

int gov_engine_create(gov_engine_t **out, const gov_options_t *opt, const cfg_limit_t *limits,
                      size_t n, bool disclose, tt_err_t *err)
{
    *out = NULL;
    if (sodium_init() < 0) /* the folded keys' hash (gov__key_fold); safe to call again */
        return tt_err_set(err, GOV_ENOMEM, "", "libsodium could not be initialised");
    gov_options_t o = opt ? *opt : (gov_options_t){0};
    if (!o.max_counters)
        o.max_counters = GOV_DEFAULT_MAX_COUNTERS;
    if (!o.max_leases)
        o.max_leases = GOV_DEFAULT_MAX_LEASES;
    if (!o.max_reservations)
        o.max_reservations = GOV_DEFAULT_MAX_RESERVATIONS;
    if (!o.reservation_bytes)
        o.reservation_bytes = GOV_DEFAULT_RESERVATION_BYTES;
    if (o.reservation_ttl_ns <= 0)
        o.reservation_ttl_ns = GOV_DEFAULT_RESERVATION_TTL_NS;
    gov_engine_t *e = calloc(1, sizeof(*e));
    if (!e)
        return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
    if (gov_table_init(&e->table, o.initial_counters, o.max_counters, o.hash_seed) < 0 ||
        gov_leases_init(&e->leases, o.max_leases, o.hash_seed) < 0 ||
        gov_resv_init(&e->resv, o.max_reservations, o.reservation_bytes, o.reservation_ttl_ns,
                      o.hash_seed, gov__reservation_drop) < 0) {
        gov_engine_destroy(e);
        return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
    }
    e->m.counters_max = o.max_counters;
    gov_reload_action_t actions[GOV_LIMITS_MAX];
    int rc = gov__set_build(limits, n, disclose, &e->set, err);
    if (rc < 0 || (rc = gov__set_bind(e, e->set, NULL, actions, err)) < 0) {
        gov_engine_destroy(e);
        return rc;
    }
    *out = e;
    return 0;
}

int gov_engine_create_config(gov_engine_t **out, const gov_options_t *opt, const cfg_config_t *cfg,
                             tt_err_t *err)
{
    gov_options_t o = opt ? *opt : (gov_options_t){0};
    if (!o.max_counters && cfg->server.max_counters > 0)
        o.max_counters = (size_t)cfg->server.max_counters;
    return gov_engine_create(out, &o, cfg->limits, cfg->n_limits, cfg->disclose_limits, err);
}

void gov_engine_destroy(gov_engine_t *e)
{
    if (!e)
        return;
    gov__set_unref(e->set);
    gov_table_free(&e->table);
    gov_leases_free(&e->leases);
    gov_resv_free(&e->resv); /* drops the records and their references to generations */
    gov__details_free(e);
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

void gov_engine_tick(gov_engine_t *e, int64_t now)
{
    size_t budget = (e->table.mask + 1) / 64;
    gov_table_reclaim(&e->table, now, budget > RECLAIM_TICK_MIN ? budget : RECLAIM_TICK_MIN);
    gov_resv_expire(&e->resv, now, RESV_EXPIRE_PER_TICK);
}

void gov_engine_metrics(gov_engine_t *e, gov_metrics_t *out)
{
    *out = e->m;
    out->counters = e->table.count;
    out->counters_reclaimed = e->table.reclaimed;
    out->leases = e->leases.heads;
    out->table_bytes = gov_table_bytes(&e->table);
    out->pending = e->pending;
    out->reservations = e->resv.open;
    out->reservations_expired = e->resv.expired;
    out->reservations_evicted = e->resv.evicted;
}

bool gov_level_known(const gov_engine_t *e, const char *level, size_t len)
{
    for (size_t i = 0; i < e->set->n_levels; i++)
        if (e->set->levels[i].len == len && memcmp(e->set->levels[i].name, level, len) == 0)
            return true;
    return false;
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
        m->counters = l->ident.index >= 0 ? e->table.idents[l->ident.index].count : 0;
    }
    return e->set->n;
}
