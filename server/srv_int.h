/* Internals shared by srv.c (the decision socket) and http.c (the HTTP listener). */
#ifndef TT_SERVER_SRV_INT_H
#define TT_SERVER_SRV_INT_H

#include <stdint.h>

#include "srv.h"
#include "stream.h"
#include "tt_queue.h"

typedef struct srv_conn srv_conn_t;

/* A decision-socket connection: the libuv handle around its stream. */
struct srv_conn {
    uv_pipe_t pipe;
    srv_t *srv;
    tt_queue_t node; /* on the server's list of open connections */
    uv_write_t wr;
    bool closed;  /* uv_close called */
    bool sniffed; /* the first byte was read: msgpack, or HTTP handed to http.c */
    stream_t st;
};

struct srv {
    uv_loop_t *loop;
    uv_pipe_t listener;
    bool listening;
    char *path;
    unsigned max_connections;
    size_t out_limit;
    const stream_handler_t *handler;
    struct door *door;           /* srv_options_t's: the HTTP front door decides through it */
    struct srv_refused *refused; /* srv_options_t's */
    srv_metrics_t *metrics;
    struct srv_http *http;
    srv_ready_fn ready;
    void *ready_ud;
    srv_status_fn status; /* GET /status; NULL: 404 */
    void *status_ud;
    srv_status_fn fleet; /* GET /v1/fleet; NULL: 404 */
    void *fleet_ud;
    tt_queue_t conns; /* srv_conn_t.node, the newest first */
    unsigned nconns;
    uint64_t next_conn_id;
    bool stopping;
    uint8_t rbuf[64 * 1024]; /* where idle connections read into; see srv.c */
};

/* http.c */
struct srv_http;
/* Readies the HTTP side (always: the socket may carry HTTP) and listens on opt->http when it
 * is set. */
int srv__http_start(srv_t *s, const srv_options_t *opt, tt_err_t *err);
void srv__http_stop(srv_t *s);
/* A socket connection that spoke HTTP: http.c takes over fd (a duplicate: the caller closes its
 * own), with data[0, len) already read from it and the peer `from`'s stream says. -1 when it
 * cannot (fd is then the caller's). */
int srv__http_adopt(srv_t *s, int fd, const uint8_t *data, size_t len, const stream_t *from);

#endif
