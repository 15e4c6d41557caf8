/*
 * srv: the daemon's libuv shell. It owns the decision socket (unix stream, msgpack maps per
 * SPEC §5), the HTTP listener (/metrics, /healthz, /readyz) and every connection, and hands
 * each decoded request to the handler it was given (dispatch.c's, in the daemon). It moves
 * bytes; what a connection's bytes mean is stream.c's, what a request does is the handler's.
 */
#ifndef TT_SERVER_SRV_H
#define TT_SERVER_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "metrics.h"
#include "proto.h"
#include "stream.h"

struct door;

#define SRV_DEFAULT_MODE 0660
#define SRV_DEFAULT_MAX_CONNECTIONS 16384
#define SRV_DEFAULT_OUT_LIMIT (1024 * 1024)

/* Errors from srv_start, described in a tt_err_t (the path names the option: server.socket,
 * server.http): rows of the one error table (common/tt_err.h). */
enum {
    SRV_EINUSE = TT_ERR_INUSE,   /* a live daemon already answers on the socket */
    SRV_ELISTEN = TT_ERR_LISTEN, /* cannot create, bind or listen (path, permissions, address) */
    SRV_ENOMEM = TT_ERR_NOMEM,
};

typedef struct srv_options {
    const char *socket_path;
    unsigned socket_mode; /* 0: SRV_DEFAULT_MODE */
    const char *http;     /* "host:port"; NULL or "" turns the TCP listener off */
    /* the HTTP front door (SPEC §12), on the TCP listener and on the socket: where the TCP
     * listener serves /v1/decide, and the request headers that name levels and tokens
     * (copied; NULL/0/NULL: none) */
    cfg_http_decide_t http_decide;
    const cfg_http_level_t *http_subject;
    size_t n_http_subject;
    const char *http_tokens;
    unsigned max_connections; /* 0: SRV_DEFAULT_MAX_CONNECTIONS */
    size_t out_limit;         /* unsent answer bytes before a connection stops being read;
                                 0: SRV_DEFAULT_OUT_LIMIT */
    /* the engine call every request that spends goes through (door.h), the caller's, outliving
     * the server (NULL: HTTP serves no decision). It also says who may connect: a socket peer
     * door_peer_allowed refuses (server.allow_uids/allow_gids) is told "peer_not_allowed" and
     * closed at accept. */
    struct door *door;
    /* where the doors' own refusals are counted and logged (refused.h): HTTP's, the requests it
     * refuses before any route (400/408/413/414/431) and the connections it closes (evicted,
     * timed out, idle, not HTTP); the socket's at accept (peer_not_allowed,
     * too_many_connections), logged here and counted by the handler. The caller's, outliving the
     * server; NULL: nowhere */
    struct srv_refused *refused;
} srv_options_t;

/* /readyz: true when the daemon can decide: its configuration armed, membership joined (or
 * solo after its join timeout) when it gossips, the share store armed when it has one. Sets *why
 * to a short reason otherwise ("membership not joined"). */
typedef bool (*srv_ready_fn)(void *ud, const char **why);

typedef struct srv srv_t;

/*
 * Starts listening on loop. A socket file left by a dead daemon is replaced; one a live
 * daemon answers on is not (SRV_EINUSE). Every connection's requests go to handler. The
 * handler and metrics stay the caller's and must outlive the server. The options' strings are
 * copied. SIGPIPE is ignored from here on (process-wide). Returns 0 or a negative code
 * described in *err; after a failure other than SRV_ENOMEM before the server was made, *out is
 * set and stopped: the caller runs the loop, then srv_free.
 */
int srv_start(srv_t **out, uv_loop_t *loop, const srv_options_t *opt,
              const stream_handler_t *handler, srv_metrics_t *metrics, tt_err_t *err);

void srv_set_ready(srv_t *s, srv_ready_fn fn, void *ud);

/*
 * Whether a unix socket can be made at `path`, changing nothing: the path fits sun_path, no
 * other kind of file holds the name, and its directory is there and writable, or (make_dir,
 * as srv_start makes one level) its parent is. 0, or SRV_ELISTEN described in err with `field`
 * as its path. srv_start runs it first; srv_preflight runs it for server.socket and a unix
 * server.grpc. A live daemon on the socket is not looked for: that is srv_start's SRV_EINUSE.
 */
int srv_socket_check(const char *path, const char *field, bool make_dir, tt_err_t *err);

/* GET /status: appends the page (status.h) to body. 0, or -1 when it could not be made. */
typedef int (*srv_status_fn)(void *ud, tt_buf_t *body);

/* Without one, /status is 404. */
void srv_set_status(srv_t *s, srv_status_fn fn, void *ud);

/* GET /v1/fleet: appends the `fleet` answer (the socket's msgpack map) to body, for `tokentriage
 * fleet --all` on another replica. Same type as the page's hook; without one, 404. */
void srv_set_fleet(srv_t *s, srv_status_fn fn, void *ud);

/* Stops listening, removes the socket file and closes every connection (their leases are
 * released). The handles close on the loop: run it until it is empty, then srv_free(). */
void srv_stop(srv_t *s);
void srv_free(srv_t *s);

#endif
