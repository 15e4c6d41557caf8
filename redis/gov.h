/*
 * rds gov: the redis store as the engine's redis hook (engine/store.h). The daemon makes one
 * rds_gov_t per engine, from shared_state.redis, and installs it with rds_gov_attach; every
 * redis-backed limit then decides through Redis, and through posture.fail (applied by the
 * engine) whenever Redis cannot answer in time.
 */
#ifndef TT_REDIS_GOV_H
#define TT_REDIS_GOV_H

#include "config.h"
#include "engine.h"
#include "redis_store.h"

typedef struct rds_gov {
    rds_store_t *store; /* owned */
    gov_engine_t *engine;
    uint64_t fallbacks;   /* unavailable answers on a fail-open limit: the local limiter decided */
    uint64_t fail_closed; /* unavailable answers on a fail-closed limit: denied, retry 1 s */
} rds_gov_t;

/* The store options shared_state.redis asks for; *tls is where out->tls points (when TLS is
 * asked for), so it lives as long as *out. The credentials are read apart (below). */
void rds_options_from_config(const cfg_redis_t *redis, rds_options_t *out, rds_tls_options_t *tls);

/* Reads the credentials shared_state.redis names (password_file, sentinel_password_file) into
 * *out: 0, or RDS_ESECRET with err naming the field and the file (never the secret). At start
 * and again at every reload (the caller wipes *out when done with it). */
int rds_credentials_from_config(const cfg_redis_t *redis, rds_credentials_t *out, tt_err_t *err);

/* The TLS context shared_state.redis.tls asks for, its files read now (a reload's prepare):
 * 0 with *out (NULL when tls is not configured; one reference, the caller's), or RDS_ETLS. */
int rds_tls_from_config(const cfg_redis_t *redis, rds_tls_t **out, tt_err_t *err);

/* A reload's commit: the next connections use `tls` (NULL: plain); takes the reference. */
void rds_gov_set_tls(rds_gov_t *g, rds_tls_t *tls);

/* Whether shared_state.redis.tls can be used as configured: its files load and agree (the
 * store's own loader, rds_tls_new, whose context is then dropped). 0, or RDS_ETLS naming the
 * field and OpenSSL's reason. For validate --arm and serve's checks before it listens. */
int rds_tls_check(const cfg_redis_t *redis, tt_err_t *err);

/* A reload's commit: the next connections authenticate with `c` (copied). */
void rds_gov_set_credentials(rds_gov_t *g, const rds_credentials_t *c);

/*
 * Opens the store on `loop` (rds_store_new) and installs it as `engine`'s redis hook. The
 * caller owns *g (storage it provides) and must call rds_gov_close before destroying the
 * engine. Returns 0 or rds_store_new's code, err saying which field is wrong and how.
 */
int rds_gov_attach(rds_gov_t *g, gov_engine_t *engine, uv_loop_t *loop, const rds_options_t *o,
                   tt_err_t *err);

/* Completes every operation in flight as unavailable, detaches the hook, closes the store. */
void rds_gov_close(rds_gov_t *g);

/* Emits the redis store's counters in Prometheus text format (prefix tokentriage_redis_): the
 * store's families, one per call of emit (HELP, TYPE, sample), then the per-node families
 * (HELP and TYPE in one call, then one call per node's sample). */
void rds_gov_metrics(const rds_gov_t *g, void (*emit)(void *ud, const char *line), void *ud);

#endif
