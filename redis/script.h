/*
 * rds script: the two Lua assets (redis/lua/), the batched commands that run them and the
 * checking of what Redis answers. Pure: no I/O, no allocation; the async store (store.h) and the
 * vector runner (tests/redis/) share it, so both speak to Redis through exactly the same bytes.
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
#define RDS_SHA_LEN 40

/* A batch: the operations one script call carries, at most RDS_BATCH_MAX and at most
 * RDS_BATCH_KEY_BYTES of keys (so it always holds one key of RDS_KEY_MAX). */
#define RDS_BATCH_MAX 32
#define RDS_BATCH_KEY_BYTES 2048

/* What one call does. now_ns is used when has_now (tests, the vectors), else Redis' TIME. */
typedef struct rds_op {
    bool settle; /* false: a step of `cost`; true: settle `reserved` against `actual` (gcra,
                    envoy_window) */
    bool has_now;
    int64_t now_ns;
    int64_t cost;
    int64_t reserved, actual;
} rds_op_t;

/* One operation of a batch, kept as numbers until the command is written. */
typedef struct rds_item {
    uint16_t key_off, key_len; /* in the batch's keys */
    uint8_t verb; /* step, settle (gcra), fixed, sliding, envoy, envoy-settle (window) */
    bool has_now;
    int64_t p1, p2; /* gcra: T, tau; window: amount, w */
    int64_t now_ns;
    int64_t x, y; /* step: cost; settle: reserved, actual */
} rds_item_t;

/*
 * Operations for one script, in order, on keys of one node (and of one slot in a cluster: the
 * caller's to group). Self-contained: it holds copies of the keys and every argument, so the
 * command can be written again (a redirect, NOSCRIPT) long after the callers' data is gone.
 */
typedef struct rds_batch {
    rds_script_id_t script;
    uint32_t n;
    uint32_t key_bytes;
    rds_item_t item[RDS_BATCH_MAX];
    char keys[RDS_BATCH_KEY_BYTES];
} rds_batch_t;

void rds_batch_init(rds_batch_t *b, rds_script_id_t script);

/*
 * Appends `op` on `key` for limiter `l` as the batch's next operation. Returns 0; RDS_EARG for
 * an op with no script form (no redis form, a key longer than RDS_KEY_MAX, a settle on a window
 * limiter); RDS_EFULL when this batch cannot take it (full by count or by key bytes, or `l`
 * runs the other script): nothing is added then.
 */
int rds_batch_add(rds_batch_t *b, const ra_limiter_t *l, const char *key, size_t keylen,
                  const rds_op_t *op);

/* The most bytes rds_batch_format writes for this batch. */
size_t rds_batch_bound(const rds_batch_t *b, bool eval);

/*
 * Writes the batch's command in RESP into out (rds_batch_bound bytes at least): EVALSHA <sha>
 * <n> <keys...> <arguments...>, or with eval the equivalent EVAL <script body> (which also puts
 * the script back into Redis' cache: the answer to NOSCRIPT). Returns its length. Writing it
 * once for the whole batch is what spares hiredis' per-argument formatting.
 */
size_t rds_batch_format(const rds_batch_t *b, const char *sha, bool eval, char *out);

/*
 * The counter key of a limit for one subject id: "tokentriage:{<identity, 16 hex>:<id>}". A new
 * identity (a limit whose counting changed on reload) is a new key; the old one expires by TTL.
 * The braces are a Redis Cluster hash tag that starts at our own '{': the slot hashes the
 * identity and as much of the id as precedes a '}' in it, so an id cannot pick its slot.
 * Returns the length, or RDS_EARG when it does not fit RDS_KEY_MAX.
 */
int rds_key(char *buf, uint64_t identity, const char *id, size_t idlen);

/*
 * Checks a batch's reply as a whole: 0 when it is an array of n, whose element i is then read
 * by rds_reply_read for operation i. Otherwise the code every operation of the batch gets, err
 * (may be NULL) saying why: RDS_ECONN for a NULL reply (connection gone), RDS_EREDIS for an
 * error reply (RDS_ENOSCRIPT for NOSCRIPT), RDS_EREPLY for any other shape.
 */
int rds_batch_reply(const redisReply *reply, uint32_t n, tt_err_t *err);

/*
 * Checks one operation's reply and reads it into *out. Every field is checked for type and
 * range; an error reply is RDS_EREDIS (this operation's alone within a batch), anything
 * misshapen RDS_EREPLY. err (may be NULL) gets a bounded, specific message. A NULL reply is
 * RDS_ECONN.
 */
int rds_reply_read(const redisReply *reply, ra_result_t *out, tt_err_t *err);

/* Checks a SCRIPT LOAD reply: a 40-hex SHA1, copied with its NUL into sha[41]. */
/* +OK (AUTH's answer): 0; an error reply RDS_EREDIS with its text, else RDS_EREPLY. */
int rds_reply_ok(const redisReply *reply, tt_err_t *err);

int rds_reply_sha(const redisReply *reply, char *sha, tt_err_t *err);

#endif
