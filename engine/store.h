/*
 * How the stores plug into the engine.
 *
 * - local: built in (the counter table + ratealg). Nothing to plug.
 * - share: the share module answers, per share limit (or per key, in demand mode), the
 *   effective limiter in force now (ra_limiter_effective with its current share and unit
 *   cfg_type_unit(type)) and whether the store is armed. The engine keeps the replica's own state
 * in its counter table, exactly as for local. Until a provider is installed, share limits run the
 * plain limiter (N = 1) and count as armed.
 * - redis: the redis module runs each operation asynchronously and completes it with a result
 *   or "unavailable"; posture.fail then decides (open: the local fallback limiter built from
 *   the same config, in the same counter table; closed: deny, retry 1 s).
 * - members: the live replica count for `fleet` (local bound N x amount); 1 until installed.
 *
 * Hooks are called on the engine's thread from inside gov_* calls; they must not call back
 * into the engine, except gov_redis_complete, which may be called from anywhere on that thread
 * at any later time (also from inside submit, for an immediate answer).
 */
#ifndef TT_ENGINE_STORE_H
#define TT_ENGINE_STORE_H

#include "engine.h"

/* ---- share ------------------------------------------------------------------------------- */

typedef struct gov_share_ops {
    /* The limiter in force for `limit` (a share limit, armed by cfg_limit_arm) at `now`, and
     * whether the store is armed. Returns 0, or negative when it cannot say (counted as a store
     * error; posture.fail decides). */
    int (*limiter)(void *ctx, const cfg_limit_t *limit, int64_t now, ra_limiter_t *out,
                   bool *armed);
    /* Optional, preferred over `limiter` when set: the limiter in force for one key (the subject
     * id for the limit's level, "" for global) of a share limit, for demand-aware division
     * (SPEC §6b), which counts the arrival of `cost` units. Called once per decision per share
     * limit with the decision's cost (rpm: 1, tpm: the tokens); with cost 0 from settle and from
     * the second pass of a decision that waited for redis (already counted). Same returns. */
    int (*key_limiter)(void *ctx, const cfg_limit_t *limit, const char *key, size_t key_len,
                       int64_t cost, int64_t now, ra_limiter_t *out, bool *armed);
    /* Optional: fills the share fields of a fleet entry (n, bounds, state, divisors, ...). */
    void (*fleet)(void *ctx, const cfg_limit_t *limit, int64_t now, gov_fleet_entry_t *out);
} gov_share_ops_t;

void gov_engine_set_share(gov_engine_t *e, const gov_share_ops_t *ops, void *ctx);

/* ---- members ----------------------------------------------------------------------------- */

/* The number of live replicas (alive + suspect, self included). */
typedef int64_t (*gov_members_fn)(void *ctx);

void gov_engine_set_members(gov_engine_t *e, gov_members_fn fn, void *ctx);

/* ---- redis ------------------------------------------------------------------------------- */

typedef enum gov_redis_kind {
    GOV_REDIS_STEP = 0, /* ra_step(cost) and commit on admit, atomically (the Lua script) */
    GOV_REDIS_SETTLE,   /* ra_settle(reserved, actual) */
} gov_redis_kind_t;

/*
 * One operation for the redis store. Owned by the engine and valid until gov_redis_complete
 * is called on it; the redis module must call that exactly once per submitted op.
 */
typedef struct gov_redis_op {
    gov_redis_kind_t kind;
    const cfg_limit_t *limit;    /* id, identity, limiter: what the Lua script needs */
    const ra_limiter_t *limiter; /* the limiter to run when not limit's own (a descriptor's own
                                    limit on an override counter); NULL: limit->limiter */
    const char *key;             /* the subject id for the limit's level ("" for global) */
    size_t key_len;
    int64_t now;
    int64_t cost;             /* STEP */
    int64_t reserved, actual; /* SETTLE */
    void *engine_private_;    /* do not touch */
    uint32_t index_;          /* do not touch */
} gov_redis_op_t;

typedef struct gov_redis_reply {
    bool unavailable; /* redis down, slow (timeout) or the reply was malformed */
    ra_result_t r;    /* STEP: admit, unfittable, remaining, retry_after_s, reset_after_s */
} gov_redis_reply_t;

typedef struct gov_redis_ops {
    /* Starts `op`. Returns 0 when started (gov_redis_complete will follow), or negative when it
     * could not start (then the engine treats the op as unavailable; no completion follows). */
    int (*submit)(void *ctx, gov_redis_op_t *op);
    /* Optional: whether the store can decide now (connected, every key with a ready Redis).
     * fleet says "down" for every redis limit while it cannot; NULL: always "armed". */
    bool (*ready)(void *ctx);
} gov_redis_ops_t;

void gov_engine_set_redis(gov_engine_t *e, const gov_redis_ops_t *ops, void *ctx);

/* Finishes one redis operation. `now` is the time of the reply; when it was the decision's
 * last outstanding operation, the decision completes (and its callback runs) inside this
 * call. */
void gov_redis_complete(gov_redis_op_t *op, const gov_redis_reply_t *reply, int64_t now);

#endif
