/*
 * rls_srv: the gRPC front door's libuv shell. It listens on server.grpc (host:port, or a unix
 * socket path), moves bytes between each connection's socket and its rls_conn (h2.h) one turn
 * of work at a time, reads the clock, fires the timers of grpc-timeout deadlines and of each
 * connection's own (preface, idle), and keeps the connection budget. Nothing is decided here.
 */
#ifndef TT_RLS_LISTEN_H
#define TT_RLS_LISTEN_H

#include <uv.h>

#include "h2.h"
#include "tt_err.h"

typedef struct rls_srv rls_srv_t;

typedef struct rls_srv_options {
    const char *addr;         /* host:port, or an absolute unix socket path */
    unsigned socket_mode;     /* a unix socket's permission bits (0: 0660) */
    unsigned max_connections; /* at it, a new one closes the one longest without a call */
    rls_conn_config_t conn;   /* the door, the config and who is told what the door refuses
                                 (its events: also the connections evicted), borrowed */
} rls_srv_options_t;

/* Binds and listens. Returns 0, or TT_ERR_LISTEN / TT_ERR_NOMEM described in *err (path
 * "server.grpc"; then rls_srv_stop still frees). */
int rls_srv_start(rls_srv_t **out, uv_loop_t *loop, const rls_srv_options_t *opt, tt_err_t *err);

/* What it listens on: the unix path, or host:port with the port the kernel gave. */
const char *rls_srv_address(const rls_srv_t *s);

/* Closes the listener and every connection; the memory goes once the loop has run their closes.
 * NULL is a no-op. */
void rls_srv_stop(rls_srv_t *s);

#endif
