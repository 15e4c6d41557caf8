/*
 * rds script: the two Lua assets (redis/lua/), the commands that run them and the checking of
 * what Redis answers. Pure: no I/O, no allocation; the async store (store.h) and the vector
 * runner (tests/redis/) share it, so both speak to Redis through exactly the same bytes.
 */
#ifndef TT_REDIS_SCRIPT_H
#define TT_REDIS_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "ratealg.h"
#include "tt_err.h"

/* Errors: rows of the one error table (common/tt_err.h). Every one of them means "Redis could
 * not answer this decision": posture.fail decides. */
enum {
    RDS_EUNAVAILABLE =
        TT_ERR_RDS_UNAVAILABLE,          /* not connected (or the script handshake not done) */
    RDS_ETIMEDOUT = TT_ERR_RDS_TIMEDOUT, /* no answer within the timeout */
    RDS_EREDIS =
        TT_ERR_RDS_ERROR, /* Redis answered an error (a key of another type, a bad state) */
    RDS_EREPLY = TT_ERR_RDS_REPLY,     /* the answer had the wrong shape or type */
    RDS_ECONN = TT_ERR_RDS_CONN,       /* the connection went away with the call in flight */
    RDS_EFULL = TT_ERR_RDS_FULL,       /* too many calls in flight: bounded, not queued */
    RDS_EADDRESS = TT_ERR_RDS_ADDRESS, /* shared_state.redis.address is not host:port or a path */
    RDS_EARG = TT_ERR_RDS_ARG,         /* a key too long, an algorithm with no redis form */
    RDS_ECLOSED = TT_ERR_RDS_CLOSED,   /* the store was closed with the call in flight */
    RDS_ENOSCRIPT =
        TT_ERR_RDS_NOSCRIPT, /* Redis does not hold the script (reloaded, retried once) */
};

typedef enum rds_script_id {
    RDS_SCRIPT_GCRA = 0,
    RDS_SCRIPT_WINDOW,
    RDS_SCRIPT_COUNT,
} rds_script_id_t;

/* One embedded asset: the int64.lua prelude followed by the script, as built (static data). */
typedef struct rds_script {
    const char *name;
    const char *body;
    size_t len;
} rds_script_t;

const rds_script_t *rds_script(rds_script_id_t id);

/* The script that runs a limiter's algorithm, or -1 (token_bucket has no redis form). */
int rds_script_for(const ra_limiter_t *l);

/* Bounds: a counter key is a short prefix, the limit identity and a subject id (<= 256 bytes). */
#define RDS_KEY_MAX 320
#define RDS_ARGC_MAX 10
#define RDS_SHA_LEN 40

/* What one call does. now_ns is used when has_now (tests, the vectors), else Redis' TIME. */
typedef struct rds_op {
    bool settle; /* false: a step of `cost`; true: settle `reserved` against `actual` (gcra) */
    bool has_now;
    int64_t now_ns;
    int64_t cost;
    int64_t reserved, actual;
} rds_op_t;

/*
 * One command, self-contained: argv points into `buf` (and at the static script body when it
 * is an EVAL). The caller owns it; it holds no pointer into the caller's key or limiter.
 */
typedef struct rds_command {
    rds_script_id_t script;
    int argc;
    const char *argv[RDS_ARGC_MAX];
    size_t argvlen[RDS_ARGC_MAX];
    char buf[RDS_KEY_MAX + RDS_SHA_LEN + 8 * 24];
} rds_command_t;

/*
 * Builds EVALSHA <sha> 1 <key> <args...> for one op on one limiter. sha is the script's
 * 40-hex SHA1 (from SCRIPT LOAD). Returns 0, or RDS_EARG (no redis form, key too long, a
 * settle on a window limiter).
 */
int rds_command_build(rds_command_t *cmd, const char *sha, const ra_limiter_t *l, const char *key,
                      size_t keylen, const rds_op_t *op);

/* Turns an EVALSHA into the equivalent EVAL (the script body in place of the SHA), which
 * also puts the script back into Redis' cache: the answer to NOSCRIPT. */
void rds_command_to_eval(rds_command_t *cmd);

/*
 * The counter key of a limit for one subject id: "tokentriage:{<identity, 16 hex>:<id>}". A new
 * identity (a limit whose counting changed on reload) is a new key; the old one expires by TTL.
 * The braces are a Redis Cluster hash tag that starts at our own '{': the slot hashes the
 * identity and as much of the id as precedes a '}' in it, so an id cannot pick its slot.
 * Returns the length, or RDS_EARG when it does not fit RDS_KEY_MAX.
 */
int rds_key(char *buf, uint64_t identity, const char *id, size_t idlen);

/*
 * Checks a script's reply and reads it into *out. Every field is checked for type and range;
 * an error reply is RDS_EREDIS (RDS_ENOSCRIPT for NOSCRIPT), anything misshapen RDS_EREPLY.
 * err gets a bounded, specific message. A NULL reply (connection gone) is RDS_ECONN.
 */
int rds_reply_read(const redisReply *reply, ra_result_t *out, char *err, size_t errsz);

/* Checks a SCRIPT LOAD reply: a 40-hex SHA1, copied with its NUL into sha[41]. */
int rds_reply_sha(const redisReply *reply, char *sha, char *err, size_t errsz);

#endif
