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
 */
#ifndef TT_RLS_H2_H
#define TT_RLS_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rls.h"

#define RLS_MAX_STREAMS 1024 /* concurrent streams per connection (SETTINGS) */

typedef struct rls_conn rls_conn_t;

/* What a connection decides with: the door to the engine and the config in force (the daemon
 * swaps the pointer on reload, so it is read through `cfg` at each call). Borrowed. */
typedef struct rls_conn_config {
    const rls_door_t *door;
    cfg_config_t *const *cfg;
    uint32_t max_streams; /* 0: RLS_MAX_STREAMS */
} rls_conn_config_t;

/* A new connection of `who` (copied) with the server's SETTINGS queued. NULL when out of
 * memory. */
rls_conn_t *rls_conn_new(const rls_conn_config_t *cfg, const rls_caller_t *who);
void rls_conn_free(rls_conn_t *c);

/* Feeds received bytes. Returns 0, or -1 when the connection must be closed (a protocol error;
 * a GOAWAY may be queued: send it first). */
int rls_conn_recv(rls_conn_t *c, const uint8_t *in, size_t len, int64_t now);

/* The next bytes to write, valid until the next call on `c`; 0 when nothing is queued, -1 on a
 * fatal error. */
ssize_t rls_conn_send(rls_conn_t *c, const uint8_t **out);

/* Answers DEADLINE_EXCEEDED to every call whose grpc-timeout has passed by `now`. Returns how
 * many calls are still waiting on a deadline. */
size_t rls_conn_tick(rls_conn_t *c, int64_t now);

/* True when neither side wants anything more: close the socket. */
bool rls_conn_done(const rls_conn_t *c);

#endif
