/* Internals shared by srv.c (connections, bytes) and dispatch.c (requests to the engine). */
#ifndef TT_SERVER_SRV_INT_H
#define TT_SERVER_SRV_INT_H

#include <stdint.h>

#include "proto.h"
#include "srv.h"

typedef struct srv_conn srv_conn_t;

/*
 * An answer that cannot be written yet: one the engine will complete later (GOV_PENDING), or
 * any answer queued behind such a one. Slots keep a connection's answers in request order.
 * A pending slot belongs to the engine until it completes; if its connection closes first the
 * slot is orphaned (conn = NULL) and freed on completion.
 */
typedef struct srv_slot {
    struct srv_slot *prev, *next;
    srv_conn_t *conn;
    bool ready;
    proto_out_t bytes; /* the encoded answer, once ready */
    uint64_t seq;
    proto_op_t op;
    uint64_t start_ns; /* uv_hrtime when the request was read, for the latency histogram */
} srv_slot_t; /* always the first member of what is allocated for it: free(slot) frees it all */

struct srv_conn {
    uv_pipe_t pipe;
    srv_t *srv;
    uint64_t id;             /* the engine's lease owner tag; never reused */
    srv_conn_t *prev, *next; /* the server's list of open connections */
    uint8_t *in;             /* bytes read but not yet processed (NULL when none) */
    size_t in_len;
    proto_out_t fill;   /* answers gathered for the next write */
    proto_out_t flight; /* answers being written */
    uv_write_t wr;
    bool writing;
    bool paused;      /* not reading: back-pressure */
    bool draining;    /* no more requests: close once every answer is written */
    bool closed;      /* uv_close called */
    bool sniffed;     /* the first byte was read: msgpack, or HTTP handed to http.c */
    srv_slot_t *head; /* answers waiting in order, see srv_slot_t */
    srv_slot_t *tail;
    unsigned nslots;
};

struct srv {
    uv_loop_t *loop;
    uv_pipe_t listener;
    bool listening;
    char *path;
    char *node;
    char *version;
    unsigned max_connections;
    size_t out_limit;
    uint32_t allow_uids[SRV_ALLOW_MAX], allow_gids[SRV_ALLOW_MAX]; /* srv_options_t's allow lists */
    size_t n_allow_uids, n_allow_gids;
    struct gov_engine *engine;
    srv_metrics_t *metrics;
    struct srv_http *http;
    srv_ready_fn ready;
    void *ready_ud;
    srv_members_fn members; /* membership's member list; NULL: self alone */
    void *members_ud;
    srv_doubt_fn doubt; /* NULL: N is never in doubt */
    void *doubt_ud;
    srv_conn_t *conns;
    unsigned nconns;
    uint64_t next_conn_id;
    struct pending *spare; /* dispatch.c: the slot and result the next engine call gets */
    /* The clocks, read once per batch of requests (one read callback's worth): a decision's
     * `now`, and the start its latency is measured from. */
    int64_t batch_wall_ns;
    uint64_t batch_mono_ns;
    uint64_t batch_decisions; /* answered within the batch, observed at its end */
    bool stopping;
    uint8_t rbuf[64 * 1024]; /* where idle connections read into; see srv.c */
};

/* Where the next answer of c goes: the write buffer, or a new ready slot when answers are
 * waiting ahead of it. NULL when out of memory. */
proto_out_t *srv__answer_buf(srv_conn_t *c);
/* Appends a pending slot (owned by the caller: the first member of its allocation) to c's
 * queue, and takes it out again (only the tail, when the engine answered at once after all). */
void srv__slot_link(srv_conn_t *c, srv_slot_t *s, uint64_t seq, proto_op_t op, uint64_t start_ns);
void srv__slot_unlink(srv_conn_t *c, srv_slot_t *s);
/* The engine answered: s->bytes holds the answer. Writes every answer now in order, or frees
 * the slot of a connection that has gone. */
void srv__slot_ready(srv_slot_t *s);
/* Out of memory for c's answers: close it. */
void srv__fail(srv_conn_t *c);
/* Answers with an error, in order. */
void srv__error(srv_conn_t *c, uint64_t seq, const char *code, const char *message);

/* dispatch.c: answer one decoded request (possibly later, through a pending slot). */
void srv__dispatch(srv_conn_t *c, const proto_request_t *req);
/* dispatch.c: counts a finished engine answer on /metrics (errors, decisions by verdict,
 * latency from start_ns; 0: within the current batch, observed at its end). */
struct gov_result;
void srv__count(srv_t *s, proto_op_t op, uint64_t start_ns, const struct gov_result *r);
/* dispatch.c: the connection is closing: release what the engine holds for it. */
void srv__conn_released(srv_conn_t *c);
void srv__dispatch_free(srv_t *s);

/* http.c */
struct srv_http;
/* Readies the HTTP side (always: the socket may carry HTTP) and listens on opt->http when it
 * is set. */
int srv__http_start(srv_t *s, const srv_options_t *opt, char *err, size_t err_size);
void srv__http_stop(srv_t *s);
/* A socket connection that spoke HTTP: http.c takes over fd (a duplicate: the caller closes its
 * own), with data[0, len) already read from it. -1 when it cannot (fd is then the caller's). */
int srv__http_adopt(srv_t *s, int fd, const uint8_t *data, size_t len);

#endif
