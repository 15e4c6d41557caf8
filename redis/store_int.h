/*
 * The redis store's insides, shared by its three files: redis_store.c (calls: the waiting
 * list, the deadline, replies, redirects), topology.c (which node serves a key: the cluster's
 * slot map and its refresh, Sentinel's primary) and node.c (one connection each: connect,
 * handshake, backoff, drop). Each calls only down, in that order (scripts/check_includes.py
 * fails on a circle of calls): what a node has to tell comes up through rds_node_events_t,
 * what topology.c needs of the store through rds_topology_hooks_t, both tables the store hands
 * down. Not installed, not for other modules.
 */
#ifndef TT_REDIS_STORE_INT_H
#define TT_REDIS_STORE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "conn.h"
#include "redis_store.h"
#include "slots.h"
#include "tt_arena.h"
#include "tt_queue.h"

/* Buckets of the open batches' index (a power of two). */
#define RDS_OPEN_BUCKETS 256

/* Connections one store holds at most: the primaries, plus the seeds or Sentinels asked. */
#define RDS_CONNS_MAX (RDS_NODES_MAX + RDS_SEEDS_MAX)

typedef enum rds_mode {
    RDS_MODE_SINGLE,   /* one address */
    RDS_MODE_CLUSTER,  /* slots routed to primaries */
    RDS_MODE_SENTINEL, /* one primary, found and followed through Sentinel */
} rds_mode_t;

typedef enum rds_call_kind {
    RDS_CALL_DECIDE,       /* a caller's script call */
    RDS_CALL_SLOTS,        /* CLUSTER SLOTS, for the map */
    RDS_CALL_AUTH,         /* handshake: AUTH [user] password, first when configured */
    RDS_CALL_SCRIPT_LOAD,  /* handshake: one asset */
    RDS_CALL_ROLE,         /* handshake (Sentinel mode): is this the primary? */
    RDS_CALL_SENTINEL_ADDR /* handshake of a Sentinel: where is the primary? */
} rds_call_kind_t;

/* The most commands one handshake sends: AUTH, two SCRIPT LOADs, ROLE. */
#define RDS_HANDSHAKE_MAX 4

typedef struct rds_node rds_node_t;

/* Where a connection's reader builds its replies (reply.c). */
typedef struct rds_replies {
    tt_arena_t arena;
    size_t used;      /* bytes of the reply being built */
    char refused[96]; /* why the reader was failed, or "" */
} rds_replies_t;

/* What a node tells the store it belongs to, through the table the store hands it (as
 * server/'s stream_handler_t): node.c calls nothing of the layers above by name. */
typedef struct rds_node_events {
    /* the handshake is done: calls may go */
    void (*ready)(rds_node_t *n);
    /* the connection went, failed or was refused, for `why` (NULL: dropped on purpose); a
     * reconnect is scheduled after this when the node is still wanted */
    void (*lost)(rds_node_t *n, const char *why);
    /* a Sentinel's answer to get-master-addr-by-name: 0, or negative with err (dropped) */
    int (*primary)(rds_node_t *n, const redisReply *reply, tt_err_t *err);
    /* a message on a Sentinel's subscription (+switch-master) */
    void (*message)(rds_node_t *n, const redisReply *reply);
} rds_node_events_t;

/* What topology.c asks of the store it routes for, through the table the store hands it:
 * topology.c calls nothing of redis_store.c by name. (Its errors go back to the store as
 * return values; a new map's effect on the store's readiness the store checks itself.) */
typedef struct rds_topology_hooks {
    /* sends a command of the store's own (CLUSTER SLOTS) on n as a call: on the waiting list,
     * under the deadline; its reply comes back through rds__on_slots, its failure through
     * rds__refresh_failed. 0 or -1 */
    int (*send)(rds_node_t *n, rds_call_kind_t kind, int argc, const char **argv,
                const size_t *argvlen);
} rds_topology_hooks_t;

typedef struct rds_call rds_call_t;

/* A caller of a batch: answered once, then done is NULL. */
typedef struct rds_caller {
    rds_done_fn *done;
    void *arg;
} rds_caller_t;

/*
 * One command to Redis. A caller's (RDS_CALL_DECIDE) is a batch: the operations of one loop turn
 * bound for one node, one slot and one script, with their callers. It is *open* (taking more
 * operations, on the store's open list) until the turn's flush sends it, then held by its
 * connection until its reply function runs.
 */
struct rds_call {
    rds_store_t *store;
    rds_node_t *node;       /* where the command goes, or was last sent */
    const rds_conn_t *conn; /* ... on which connection of it */
    tt_queue_t wait;        /* on the store's waiting list while sent (tt_queue_linked) */
    rds_call_t *next_free;  /* on the free list */
    uint64_t deadline_ms;
    uint64_t sent_ns; /* for the node's latency */
    rds_call_kind_t kind;
    bool retried;                        /* NOSCRIPT already answered with an EVAL */
    uint8_t redirects;                   /* MOVED/ASK followed so far */
    int script;                          /* RDS_CALL_SCRIPT_LOAD: the asset */
    int slot;                            /* a batch: the slot of its keys (cluster), else -1 */
    uint32_t bucket_hash;                /* an open batch: its bucket in store->bucket */
    uint32_t unanswered;                 /* a batch: callers not answered yet */
    rds_call_t *open_next, *bucket_next; /* an open batch: the open list, its bucket's chain */
    rds_caller_t caller[RDS_BATCH_MAX];
    rds_batch_t batch;
};

/* One connection. A node object lives until the store is freed (its timer is a loop handle);
 * a node no longer wanted is disconnected and may be re-pointed at another endpoint. */
struct rds_node {
    rds_store_t *store;
    const rds_node_events_t *events; /* the store's */
    uint32_t index;                  /* in store->nodes */
    bool sentinel;                   /* a Sentinel, not a Redis that runs scripts */
    bool wanted;      /* connect and reconnect it (a primary in the map, a seed asked) */
    bool ready;       /* connected and the handshake done */
    bool stalled;     /* marked by the deadline sweep, dropped after it */
    rds_conn_t *conn; /* NULL while disconnected */
    /* the reconnect's backoff while disconnected, the handshake's deadline while connecting */
    uv_timer_t reconnect;
    rds_endpoint_t at;
    uint64_t backoff_ms;
    uint64_t last_read_ms; /* when a reply last arrived on this connection */
    uint32_t pending;      /* callers' operations hiredis holds on this connection */
    uint32_t queued;       /* ... and in open batches, not sent yet */
    int handshake_left;
    rds_call_kind_t steps[RDS_HANDSHAKE_MAX]; /* the handshake's commands, in order */
    int step_next, n_steps;
    bool told_up;  /* RDS_EVENT_NODE_UP told, no NODE_DOWN since */
    char told[96]; /* the last NODE_DOWN's detail (the first 95 bytes), not told twice */
    rds_node_stats_t stats;
};

struct rds_store {
    uv_loop_t *loop;
    rds_mode_t mode;
    uv_timer_t deadline; /* armed for the head of the waiting list */
    uv_timer_t refresh;  /* the next CLUSTER SLOTS */
    uint64_t timeout_ms, backoff_min_ms, backoff_max_ms;
    uint32_t max_in_flight, live; /* per node; call slots in use */
    tt_queue_t waiting;           /* calls sent (rds_call_t.wait), oldest first */
    rds_call_t *free_slots;
    /* open batches: in the order they opened, and by (node, slot, script) for the one that
     * takes the next operation; the idle handle flushes them once per loop turn */
    rds_call_t *open_head, *open_tail;
    rds_call_t *bucket[RDS_OPEN_BUCKETS];
    uv_idle_t flush;
    char *out; /* a command being written for hiredis, which copies it */
    size_t out_cap;
    bool closing;
    bool told_ready; /* the last RDS_EVENT_UP/DOWN told */
    rds_event_fn *on_event;
    int handles_open;
    uint64_t jitter;
    void *data;
    char sha[RDS_SCRIPT_COUNT][RDS_SHA_LEN + 1];
    rds_credentials_t cred; /* sent by every handshake; wiped when the store is freed */
    rds_tls_t *tls;         /* new connections', when shared_state.redis.tls; a reference */
    uint64_t handshake_ms;  /* a connection's handshake (connect, TLS, AUTH, loads) within this */
    const rds_node_events_t *node_events;
    const rds_topology_hooks_t *topology_hooks;
    rds_stats_t stats;

    rds_node_t *nodes[RDS_CONNS_MAX];
    uint32_t n_nodes;
    rds_node_t *primary; /* single and Sentinel modes: the one Redis; NULL until known */
    rds_node_t *watcher; /* Sentinel mode: the Sentinel asked and subscribed to */
    /* cluster: slot -> index in nodes (RDS_MAP_NONE: unknown); the map's coverage */
    uint8_t route[RDS_SLOTS];
    uint32_t covered;
    rds_map_t *scratch; /* a CLUSTER SLOTS reply being read */
    bool refresh_in_flight, refresh_wanted;
    uint64_t last_refresh_ms;
    uint32_t refresh_cursor;
    /* seeds (cluster) or Sentinels (sentinel mode), and the master's name */
    rds_endpoint_t seeds[RDS_SEEDS_MAX];
    uint32_t n_seeds, seed_cursor;
    char master[RDS_MASTER_MAX + 1];
};

/* node.c */
rds_node_t *rds__node_get(rds_store_t *s, const rds_endpoint_t *at, bool sentinel);
void rds__node_connect(rds_node_t *n);
void rds__node_drop(rds_node_t *n, const char *why);
void rds__node_handshake_done(rds_node_t *n, rds_call_t *c, const redisReply *reply);
bool rds__node_usable(const rds_node_t *n);
/* "host:port", or the socket path: how every message names the node. */
void rds__node_name(const rds_node_t *n, char *out, size_t size);

int rds__node_send(rds_node_t *n, rds_call_kind_t kind, int script, int argc, const char **argv,
                   const size_t *argvlen);

/* reply.c: the reader's replies built in r->arena (instead of malloc'd object by object), each
 * valid until rds__replies_done. An array header longer than RDS_REPLY_ELEMENTS_MAX, or a reply
 * of more than RDS_REPLY_BYTES_MAX bytes of objects, fails the reader, which drops the
 * connection; r->refused says why. (A reply that no command awaits is conn.c's to refuse.) */
#define RDS_REPLY_ELEMENTS_MAX RDS_SLOTS /* CLUSTER SLOTS, the largest: a range per slot */
#define RDS_REPLY_BYTES_MAX (16 * 1024 * 1024)
void rds__replies_attach(rds_replies_t *r, redisReader *reader);
/* After a reply was handled: its objects are done with. */
void rds__replies_done(rds_replies_t *r);

/* conn.c: bytes handed to a connection's reader as if read from its socket (plaintext), for the
 * fuzz target (tests/fuzz/fuzz_redis_conn.c), which has no server. */
void rds__conn_feed(rds_conn_t *c, const char *data, size_t len);

/* topology.c */
int rds__topology_parse(rds_store_t *s, const rds_options_t *o, tt_err_t *err);
void rds__topology_start(rds_store_t *s);
void rds__refresh_soon(rds_store_t *s);
/* A CLUSTER SLOTS that got no answer (timed out, its connection gone): asked again soon. */
void rds__refresh_failed(rds_store_t *s);
/* a node's events, as the topology sees them (the store's table calls these) */
void rds__topology_node_ready(rds_node_t *n);
void rds__topology_node_lost(rds_node_t *n);
int rds__topology_primary(rds_node_t *n, const redisReply *reply, tt_err_t *err);
/* A Sentinel's message: 0 (used, or not ours), or RDS_EMAP with err (a misshapen one). */
int rds__topology_message(rds_node_t *n, const redisReply *reply, tt_err_t *err);
/* A CLUSTER SLOTS reply: 0 when its map became the route, or negative with err (asked again
 * after REFRESH_RETRY_MS). */
int rds__on_slots(rds_call_t *c, const redisReply *reply, tt_err_t *err);
void rds__moved(rds_store_t *s, int slot, rds_node_t *to);
/* The node for a key of `slot` (cluster: rds_key_slot; elsewhere -1, unused). */
rds_node_t *rds__route(rds_store_t *s, int slot);
bool rds__topology_ready(const rds_store_t *s);

#endif
