/*
 * rds store: one counter shared through Redis, asynchronously, on the daemon's libuv loop.
 *
 * A call runs one Lua step (or settle) for one counter key and completes later through a
 * callback, with either Redis' decision or a reason it has none (not connected, timed out,
 * an error or a misshapen reply, the connection lost). On a reason, the caller applies
 * posture.fail: this module never decides on Redis' behalf. See docs/redis.md.
 */
#ifndef TT_REDIS_REDIS_STORE_H
#define TT_REDIS_REDIS_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "auth.h"
#include "script.h"
#include "tls.h"

typedef struct rds_store rds_store_t;

#define RDS_NODE_NAME_MAX 272 /* a host (255), ':' and a port */

#define RDS_SEEDS_MAX 16   /* cluster seeds, or Sentinels */
#define RDS_MASTER_MAX 128 /* a Sentinel master name */

/* What the store tells its owner as it happens (a log line each, in the daemon). */
typedef enum rds_event {
    RDS_EVENT_NODE_UP,   /* a connection completed its handshake (node named); detail is "",
                          * or where it went when the name's first address failed:
                          * "127.0.0.1:6379, after [::1]:6379: connection refused" */
    RDS_EVENT_NODE_DOWN, /* a connection failed or was lost, detail says why; a node failing again
                          * for the same reason is not told again until it was up meanwhile */
    RDS_EVENT_UP,        /* the store can decide: every key has a ready Redis (rds_store_ready) */
    RDS_EVENT_DOWN,      /* ... no longer: decisions follow each limit's posture */
} rds_event_t;

/* node: "host:port" (or a socket path), "" for the store's own events; detail may be "". */
typedef void rds_event_fn(void *data, rds_event_t event, const char *node, const char *detail);

/* Exactly one topology: address, or cluster seeds, or sentinels with master. */
typedef struct rds_options {
    /* "host:port", "[v6addr]:port", or a unix socket path ("/path" or "unix:/path"). */
    const char *address;
    const char *cluster[RDS_SEEDS_MAX]; /* Redis Cluster: any nodes, host:port */
    size_t n_cluster;
    const char *sentinels[RDS_SEEDS_MAX]; /* Sentinel: host:port each */
    size_t n_sentinels;
    const char *master;     /* the name the Sentinels monitor the primary by */
    int64_t timeout_ns;     /* a call never waits longer; 0 = 50 ms */
    int64_t backoff_min_ns; /* reconnect backoff, doubling with jitter; 0 = 25 ms */
    int64_t backoff_max_ns; /* 0 = 2 s */
    uint32_t max_in_flight; /* calls held per node (timed-out ones included); 0 = 4096 */
    /* AUTH in every connection's handshake (NULL: none); copied, the caller wipes its own */
    const rds_credentials_t *credentials;
    /* TLS on every connection (NULL: plain): the files are loaded by rds_store_new */
    const rds_tls_options_t *tls;
    rds_event_fn *on_event; /* NULL: told nothing */
    void *data;             /* the owner's, handed back in every outcome and event */
} rds_options_t;

/* Counters for /metrics, and the last error for logs and /readyz. */
typedef struct rds_stats {
    uint64_t calls;       /* operations sent to Redis */
    uint64_t batches;     /* script calls that carried them (one or more each) */
    uint64_t decided;     /* answered with a decision */
    uint64_t errors;      /* error or misshapen replies */
    uint64_t timeouts;    /* no answer within the timeout */
    uint64_t unavailable; /* refused at once: not connected, or max_in_flight reached */
    uint64_t lost;        /* in flight when a connection went */
    uint64_t connects;    /* connections that completed the script handshake */
    uint64_t disconnects; /* connections lost or dropped */
    uint64_t reloads;     /* NOSCRIPT answered by an EVAL that reloads the script */
    uint64_t redirects;   /* MOVED or ASK answers followed */
    uint64_t refreshes;   /* cluster slot maps installed */
    uint64_t switches;    /* primaries changed through Sentinel */
    bool ready;           /* connected and the scripts loaded (cluster: every slot served) */
    char last_error[256];
} rds_stats_t;

/* One connection's counters, for the per-node metrics. */
typedef struct rds_node_stats {
    char node[RDS_NODE_NAME_MAX]; /* host:port, or the socket path */
    bool ready;
    bool sentinel;
    uint64_t calls;      /* script calls sent to it (redirected ones included) */
    uint64_t errors;     /* error or misshapen replies, timeouts, calls lost with it */
    uint64_t redirects;  /* MOVED or ASK it answered */
    uint64_t replies;    /* replies read, and their summed latency: */
    uint64_t latency_ns; /* from the send to the reply */
} rds_node_stats_t;

/* What a call came to. status 0: `result` is Redis' decision (result.next_state is what the
 * key now holds on an admission). status < 0: an RDS_E* reason, error says what in words. */
typedef struct rds_outcome {
    int status;
    ra_result_t result;
    const char *error; /* valid during the callback only */
    void *data;        /* rds_options_t.data */
} rds_outcome_t;

typedef void rds_done_fn(void *arg, const rds_outcome_t *outcome);

/*
 * Creates a store on `loop` and starts connecting (returns before the connection is made).
 * Returns 0, or RDS_EADDRESS with err naming the field (shared_state.redis.address, ...) and
 * what is wrong with it, RDS_ETLS naming the TLS file that cannot be used and why, or
 * TT_ERR_NOMEM. The store belongs to the caller until
 * rds_store_close.
 */
int rds_store_new(uv_loop_t *loop, const rds_options_t *options, rds_store_t **out, tt_err_t *err);

/*
 * Completes every call in flight with RDS_ECLOSED, drops the connection and frees the store
 * once the loop has run its close callbacks. The store must not be used after this call.
 */
void rds_store_close(rds_store_t *s);

/*
 * Runs `op` for limiter `l` on counter `key` (copied). Returns 0 when the call is in flight:
 * `done` then runs exactly once, later, never from inside this call. Returns a negative
 * RDS_E* when Redis cannot take it now (not ready, too many in flight, a bad argument): `done`
 * never runs, and the caller applies the posture at once.
 */
int rds_store_call(rds_store_t *s, const ra_limiter_t *l, const char *key, size_t keylen,
                   const rds_op_t *op, rds_done_fn *done, void *arg);

/* The credentials every connection made from now on sends (a reload's password rotated);
 * connections already authenticated stay as they are. Copied. */
void rds_store_set_credentials(rds_store_t *s, const rds_credentials_t *c);

/* The TLS context every connection made from now on uses (a reload's new files; NULL: plain);
 * the store takes the caller's reference, and connections already made keep theirs. */
void rds_store_set_tls(rds_store_t *s, rds_tls_t *tls);

bool rds_store_ready(const rds_store_t *s);
void rds_store_stats(const rds_store_t *s, rds_stats_t *out);

/* Fills out[0 .. max) with the connections the store wants (primaries, Sentinels) and returns
 * how many there are. */
size_t rds_store_nodes(const rds_store_t *s, rds_node_stats_t *out, size_t max);

/* Parses an address as rds_store_new does: 0 with a unix path or host and port, else
 * RDS_EADDRESS with err's path shared_state.redis.address. */
int rds_address_parse(const char *address, char *host, size_t hostsz, int *port, tt_err_t *err);

#endif
