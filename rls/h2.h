/*
 * rls_conn: one HTTP/2 (h2c) connection of the gRPC front door, without a socket: bytes in
 * (rls_conn_recv), bytes out (rls_conn_send), the clock as an argument. nghttp2 does the
 * framing, HPACK and flow control; this file maps streams to gRPC calls: the :path names the
 * method, the body is one length-prefixed message (uncompressed, at most RLS_MESSAGE_MAX), the
 * answer is the response message then trailers with grpc-status, or a trailers-only error.
 *
 * A call is decided when its request is complete (END_STREAM) and never before, so a stream the
 * client resets (RST_STREAM) or whose grpc-timeout passes first spends nothing. Deadlines are
 * checked on rls_conn_tick and when the request completes.
 *
 * What one client may cost (issue 34; docs/reliability.md has the figures):
 * - CPU: rls_conn_recv does at most one turn of work (RLS_TURN_WORK: decoded header bytes, body
 *   bytes, streams opened, calls decided; and at most RLS_TURN_INPUT bytes of input) and then
 *   stops, saying how much input it took; the shell feeds the rest on a later loop turn, so
 *   other connections and doors are served in between. nghttp2 validates every decoded field
 *   before we see it, and HPACK lets 1 byte stand for a 4 KB field: the budget counts decoded
 *   bytes, not the bytes that came in.
 * - Header lists: SETTINGS_MAX_HEADER_LIST_SIZE (RLS_HEADER_LIST_MAX) is enforced as RFC 9113
 *   §6.5.2 counts it (name + value + 32 per field, each field block on its own): the stream that
 *   passes it is reset with ENHANCE_YOUR_CALM (gRPC clients read RESOURCE_EXHAUSTED) and the
 *   rest of its block is decoded for the HPACK table only, never validated or seen; the
 *   RLS_REFUSED_MAX-th such stream ends the connection (GOAWAY ENHANCE_YOUR_CALM): a client
 *   that ignores the advertised bound again and again is not one that misjudged it once.
 * - Memory: request bodies are held only until their call is decided, and a connection's
 *   flow-control window is given back only as they are, so what one connection holds is at most
 *   RLS_CONN_BODY_MAX (and RLS_STREAM_WINDOW per stream); streams at most max_streams; closed
 *   streams are not kept (nghttp2's priority history is off).
 * - Time: the preface and first SETTINGS must come within RLS_PREFACE_NS of the accept; a
 *   call's request must be whole within RLS_REQUEST_NS of its HEADERS (else DEADLINE_EXCEEDED,
 *   as the HTTP door answers 408); a connection with no open stream for RLS_IDLE_NS is shut down
 *   gracefully (a GOAWAY notice, then after RLS_GRACE_NS the final GOAWAY: a call sent
 *   meanwhile is still answered). rls_conn_deadline says when rls_conn_tick must next run.
 *
 * What the door refuses on its own is told through rls_events_t (the daemon counts it on
 * /metrics and logs it): each call answered with an error, or stream reset, before the door's
 * decide was asked, by a wire code (RLS_REFUSED_CODES), and why the door ended the connection
 * (rls_conn_ended).
 */
#ifndef TT_RLS_H2_H
#define TT_RLS_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rls.h"

#define RLS_MAX_STREAMS 256       /* concurrent streams per connection (SETTINGS) */
#define RLS_HEADER_LIST_MAX 16384 /* SETTINGS_MAX_HEADER_LIST_SIZE, enforced */
#define RLS_STREAM_WINDOW                                                                          \
    (5 + RLS_MESSAGE_MAX + 1)             /* a stream's window: a message at the bound             \
                                             and its prefix fit, one byte more is seen */
#define RLS_CONN_BODY_MAX (128 * 1024)    /* request body bytes one connection may hold */
#define RLS_TURN_WORK (256 * 1024)        /* work units one rls_conn_recv may do (see h2.c) */
#define RLS_TURN_INPUT (16 * 1024)        /* and bytes it may take */
#define RLS_REFUSED_MAX 4                 /* header lists past the bound before the GOAWAY */
#define RLS_STREAM_WORK 256               /* work units a stream's opening counts for */
#define RLS_CALL_WORK 6144                /* and a call's decision */
#define RLS_PREFACE_NS (5 * RA_NS_PER_S)  /* from the accept to the client's SETTINGS */
#define RLS_IDLE_NS (60 * RA_NS_PER_S)    /* no open stream: shut down gracefully */
#define RLS_REQUEST_NS (10 * RA_NS_PER_S) /* from a call's HEADERS to its END_STREAM */
#define RLS_GRACE_NS RA_NS_PER_S          /* from the GOAWAY notice to the final GOAWAY */

typedef struct rls_conn rls_conn_t;

/*
 * The codes a refused call is told by: too_large (a header list past RLS_HEADER_LIST_MAX, reset
 * ENHANCE_YOUR_CALM; a message past RLS_MESSAGE_MAX; a body past its stream's window),
 * bad_frame (not gRPC: its content-type, not one uncompressed length-prefixed message, a
 * RateLimitRequest that is not protobuf, a stream nghttp2 reset for a protocol error),
 * unknown_op (a :path that names no method), bad_request (a malformed grpc-timeout, a request
 * rls.c does not take), deadline_exceeded (its grpc-timeout passed before its answer),
 * request_timeout (not whole within RLS_REQUEST_NS), refused_stream (past
 * SETTINGS_MAX_CONCURRENT_STREAMS). Why a connection ended: preface_timeout, idle, calm (GOAWAY
 * ENHANCE_YOUR_CALM: RLS_REFUSED_MAX header lists past the bound, or nghttp2's flood guards),
 * flow_control (bodies past the connection's window), protocol (any other breach); the shell
 * adds evicted (server.max_connections).
 */
typedef struct rls_events {
    void (*refused)(void *ud, const char *code);  /* a call refused; NULL: not told */
    void (*closed)(void *ud, const char *reason); /* a connection ended; NULL: not told */
    void *ud;
} rls_events_t;

/* What a connection decides with: the door to the engine and the config in force (the daemon
 * swaps the pointer on reload, so it is read through `cfg` at each call). Borrowed. */
typedef struct rls_conn_config {
    const rls_door_t *door;
    cfg_config_t *const *cfg;
    uint32_t max_streams;       /* 0: RLS_MAX_STREAMS */
    const rls_events_t *events; /* NULL: nobody is told */
} rls_conn_config_t;

/* A new connection of `who` (copied), accepted at `now`, with the server's SETTINGS and window
 * queued. NULL when out of memory. */
rls_conn_t *rls_conn_new(const rls_conn_config_t *cfg, const rls_caller_t *who, int64_t now);
void rls_conn_free(rls_conn_t *c);

/* rls_conn_recv's results. */
enum { RLS_RECV_DONE = 0, RLS_RECV_MORE = 1 };

/*
 * Feeds received bytes, one turn of work at most. Returns RLS_RECV_DONE with *used == len, or
 * RLS_RECV_MORE when the turn's budget ran out first: *used bytes were taken, and the caller
 * calls again on a later turn with the rest (even when none is left: a frame is still being
 * finished). -1 when the connection must be closed (a protocol error; a GOAWAY may be queued:
 * send it first).
 */
int rls_conn_recv(rls_conn_t *c, const uint8_t *in, size_t len, int64_t now, size_t *used);

/* A call whose rules live in Redis is answered after rls_conn_recv returned, when Redis has:
 * ready(ctx) then runs (on the loop's thread, never inside rls_conn_recv) and the shell sends
 * what is queued. Until then the stream is open and holds no body; a reset, a passed
 * grpc-timeout or rls_conn_free drops its answer (the decision itself completes). */
void rls_conn_on_ready(rls_conn_t *c, void (*ready)(void *ctx), void *ctx);

/* The next bytes to write, valid until the next call on `c`; 0 when nothing is queued, -1 on a
 * fatal error. */
ssize_t rls_conn_send(rls_conn_t *c, const uint8_t **out);

/* Answers DEADLINE_EXCEEDED to every call whose grpc-timeout has passed by `now`, and acts on
 * the connection's own deadlines (preface, idle, grace). Returns how many calls are still
 * waiting on a deadline. */
size_t rls_conn_tick(rls_conn_t *c, int64_t now);

/* When rls_conn_tick must next run for the connection's own deadlines and its requests'; INT64_MAX
 * for none (calls with a grpc-timeout are the shell's to poll, rls_conn_tick's answer says how
 * many). */
int64_t rls_conn_deadline(const rls_conn_t *c);

/* Queues a final GOAWAY (NO_ERROR) saying why, for a connection the shell is about to close. */
void rls_conn_shutdown(rls_conn_t *c, const char *why);

/* True when neither side wants anything more: close the socket. */
bool rls_conn_done(const rls_conn_t *c);

/* Why the door ended (or is ending) the connection: "preface_timeout", "idle", "calm",
 * "flow_control", "protocol"; NULL when it did not (the client closed, or it is open). */
const char *rls_conn_ended(const rls_conn_t *c);

/* What the connection holds and has done, for the shell and the tests. */
typedef struct rls_conn_stats {
    size_t streams;         /* request streams open */
    size_t body_held;       /* request body bytes held (not yet given back to the window) */
    size_t turn_work;       /* the work the last rls_conn_recv did */
    size_t header_list_max; /* the largest field block accepted, as RFC 9113 counts it */
    uint64_t calls;         /* calls answered (errors included) */
    uint64_t refused;       /* streams reset for a header list past RLS_HEADER_LIST_MAX */
} rls_conn_stats_t;

void rls_conn_stats(const rls_conn_t *c, rls_conn_stats_t *out);

#endif
