/*
 * HTTP's libuv shell: the TCP listener (server.http), connections, timeouts and the connection
 * budget. Parsing is hreq's (libhttp-parser), routes and the answers' bytes are hdoor's, the
 * decisions the engine's, reached through the door (door.h) every way in shares; this file moves
 * bytes and fires timers.
 *
 * HTTP/1.1 as clients expect it: keep-alive, and pipelined requests answered in order, one
 * at a time: a request is answered before the next is parsed, so order needs no queue. A
 * decision the engine answers later (a redis limit) holds the connection's later requests
 * until it is written.
 * Answers gather in `fill` while a read is processed and go out in one write; a client whose
 * unsent answers pass OUT_LIMIT is not read until they drain.
 *
 * Nothing a client does can keep the probes out (issue 23). Connections are kept in order of
 * their last completed request (or their accept); when the listener is at its budget
 * (server.max_connections), a new connection closes the one that has gone longest without
 * completing a request. A kubelet probe connects, asks and is answered within milliseconds,
 * so a client holding every slot idle, or dripping a request head, loses its oldest slots to
 * the probe instead of starving it. On top, a request must arrive whole within REQUEST_MS of
 * its first byte (408) and an idle keep-alive connection is closed after IDLE_MS. Each
 * connection closed so, or for bytes that are not HTTP, and each request refused before any route
 * (hreq's 400, 413, 414, 431, and the 408), is counted and logged (refused.h).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "door.h"
#include "engine.h"
#include "hdoor.h"
#include "hreq.h"
#include "mb.h" /* membership/: the one numeric ip:port reader */
#include "refused.h"
#include "tt_log.h"
#include "srv_int.h"
#include "status.h"
#include "tt_clock.h"

#define REQUEST_MS 10000  /* from a request's first byte to its last */
#define IDLE_MS 60000     /* a keep-alive connection with nothing to do */
#define OUT_LIMIT 1048576 /* unsent answer bytes before a connection stops being read */
#define KEEP_CAP 16384    /* answer buffers larger than this are freed once written */
#define LINGER_MS 2000    /* after the last answer, how long the client's leftovers are read */
#define LINGER_BYTES (1024 * 1024)

/* A decision or settle through the door: the engine writes req.result, and keeps it when it
 * answers later, until on_decided. */
typedef struct hpend {
    struct http_conn *c; /* NULL once the connection has closed: freed on completion */
    hdoor_frame_t f;
    int deny_status;
    door_req_t req; /* req.op: PROTO_OP_DECIDE or PROTO_OP_SETTLE */
} hpend_t;

struct srv_http {
    uv_tcp_t listener;
    bool listening; /* the listener handle exists (server.http is set) */
    bool listener_closed;
    bool stopped; /* freed once the listener and every connection have closed */
    srv_t *srv;
    unsigned nconns, max_conns;
    tt_queue_t conns; /* http_conn_t.age, oldest first: by last completed request, see above */
    hdoor_map_t map;
    bool decide_tcp;         /* /v1/decide on the TCP listener (server.http_decide) */
    hdoor_call_t call;       /* the request being routed (one at a time) */
    hpend_t *spare;          /* the result the next decision is written into */
    uint8_t rbuf[64 * 1024]; /* every read lands here first */
};

typedef struct http_conn {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_tcp_t tcp;   /* the TCP listener's */
        uv_pipe_t pipe; /* the socket's, handed over by srv.c */
    } h;
    uv_timer_t timer;
    struct srv_http *http;
    tt_queue_t age; /* on the listener's conns */
    int open_handles;
    bool closed;
    bool held;      /* not read: answers to drain first (in/in_len hold what was read) */
    bool last;      /* no request after the current one: close once written */
    bool eof;       /* the client has sent all it will */
    bool lingering; /* answered and shut down for writing: reading to the client's end */
    size_t lingered;
    uv_shutdown_t sd;
    bool request_timing; /* the timer runs the REQUEST_MS deadline of a request under way */
    bool decide;         /* /v1/decide is served on this connection */
    door_caller_t who;   /* TCP, or the socket's peer as srv.c read it */
    hpend_t *waiting;    /* a decision the engine has not answered yet */
    hreq_reader_t rd;
    uint8_t *in; /* read but not parsed yet, while the connection is held back */
    size_t in_len;
    tt_buf_t fill, flight;
    uv_write_t wr;
    bool writing;
} http_conn_t;

static void flush(http_conn_t *c);

static void maybe_free(struct srv_http *h)
{
    if (h->stopped && (h->listener_closed || !h->listening) && h->nconns == 0) {
        free(h->spare);
        free(h);
    }
}

static void unlink_conn(http_conn_t *c)
{
    tt_queue_remove(&c->age);
}

static void link_newest(http_conn_t *c)
{
    tt_queue_insert_tail(&c->http->conns, &c->age);
}

static void on_handle_closed(uv_handle_t *handle)
{
    http_conn_t *c = handle->data;
    if (--c->open_handles > 0)
        return;
    struct srv_http *h = c->http;
    h->nconns--;
    hreq_free(&c->rd);
    free(c->in);
    tt_buf_free(&c->fill);
    tt_buf_free(&c->flight);
    free(c);
    maybe_free(h);
}

static void conn_close(http_conn_t *c)
{
    if (c->closed)
        return;
    c->closed = true;
    if (c->waiting)
        c->waiting->c = NULL; /* the engine still writes its result */
    unlink_conn(c);
    uv_close(&c->h.handle, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

/* The connection is closed by the door, for `why`. */
static void closed_for(http_conn_t *c, srv_close_t why)
{
    if (c->http->srv->refused)
        srv_refused_conn(c->http->srv->refused, SRV_DOOR_HTTP, why);
}

/* A request answered with an error before any route: counted as `code`, logged (refused.h). */
static void refused_as(http_conn_t *c, const char *code)
{
    if (c->http->srv->refused)
        srv_refused_request(c->http->srv->refused, SRV_DOOR_HTTP, code);
}

static void on_timeout(uv_timer_t *t)
{
    http_conn_t *c = t->data;
    if (!c->lingering) /* a linger's end is the close planned after the last answer */
        closed_for(c, c->request_timing ? SRV_CLOSE_REQUEST_TIMEOUT : SRV_CLOSE_IDLE);
    if (c->lingering || !c->request_timing || c->writing) {
        conn_close(c);
        return;
    }
    /* a request that did not arrive in time: say so, then close */
    refused_as(c, "request_timeout");
    c->last = true;
    c->in_len = 0;
    uv_read_stop(&c->h.stream);
    hdoor_respond_text(&c->fill, 408, "Request Timeout", "the request did not arrive in time\n",
                       (hdoor_frame_t){0});
    flush(c);
}

/* Arms the timer for what the connection is doing now. */
static void arm_timer(http_conn_t *c)
{
    if (c->closed || c->lingering)
        return;
    if (c->waiting) { /* the engine answers within the store's timeout */
        uv_timer_stop(&c->timer);
        return;
    }
    if (!hreq_idle(&c->rd)) {
        if (!c->request_timing) { /* from the request's first byte, not its latest */
            c->request_timing = true;
            uv_timer_start(&c->timer, on_timeout, REQUEST_MS, 0);
        }
        return;
    }
    c->request_timing = false;
    uv_timer_start(&c->timer, on_timeout, IDLE_MS, 0);
}

static void on_write(uv_write_t *w, int status);
static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void on_shutdown(uv_shutdown_t *req, int status)
{
    http_conn_t *c = req->data;
    if (status < 0 && !c->closed)
        conn_close(c);
}

/*
 * The last answer is written. Closing now, with the client still sending (a request cut short
 * by an error, the rest of a megabyte header), would make the kernel reset the connection and
 * the client could lose the answer before reading it. So the write side is shut down and the
 * client's leftovers are read and dropped until it closes, for at most LINGER_MS and
 * LINGER_BYTES (nginx's lingering close).
 */
static void finish(http_conn_t *c)
{
    if (c->eof) {
        conn_close(c);
        return;
    }
    c->lingering = true;
    uv_timer_start(&c->timer, on_timeout, LINGER_MS, 0);
    c->sd.data = c;
    uv_read_stop(&c->h.stream);
    if (uv_shutdown(&c->sd, &c->h.stream, on_shutdown) != 0 ||
        uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        conn_close(c);
}

static void flush(http_conn_t *c)
{
    if (c->writing || c->closed || c->lingering)
        return;
    if (c->fill.len == 0) {
        if (c->last)
            finish(c);
        return;
    }
    tt_buf_t t = c->flight;
    c->flight = c->fill;
    c->fill = t;
    c->fill.len = 0;
    uv_buf_t b = uv_buf_init((char *)c->flight.data, (unsigned)c->flight.len);
    c->wr.data = c;
    if (uv_write(&c->wr, &c->h.stream, &b, 1, on_write) != 0) {
        conn_close(c);
        return;
    }
    c->writing = true;
}

/* /status and /v1/fleet: the body a hook makes, 404 without one, 503 when it fails. */
static void answer_view(tt_buf_t *out, srv_status_fn fn, void *ud, const char *type,
                        const char *extra, hdoor_frame_t f)
{
    tt_buf_t body = {0};
    if (!fn)
        hdoor_respond_text(out, 404, "Not Found", "not served here\n", f);
    else if (fn(ud, &body) != 0 || body.failed)
        hdoor_respond_text(out, 503, "Service Unavailable", "the answer could not be made\n", f);
    else
        hdoor_respond(out, 200, "OK", type, extra, body.data, body.len, f);
    tt_buf_free(&body);
}

static void answer_ops(http_conn_t *c, hdoor_route_t route, hdoor_frame_t f)
{
    srv_t *s = c->http->srv;
    tt_buf_t *out = &c->fill;
    if (route == HDOOR_METRICS) {
        tt_buf_t body = {0};
        srv_metrics_render(s->metrics, &body);
        if (body.failed)
            out->failed = true;
        else
            hdoor_respond(out, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", NULL,
                          body.data, body.len, f);
        tt_buf_free(&body);
    } else if (route == HDOOR_STATUS) {
        answer_view(out, s->status, s->status_ud, "text/html; charset=utf-8", STATUS_HEADERS, f);
    } else if (route == HDOOR_FLEET) {
        answer_view(out, s->fleet, s->fleet_ud, "application/msgpack",
                    "Cache-Control: no-store\r\n", f);
    } else if (route == HDOOR_HEALTHZ) {
        hdoor_respond_text(out, 200, "OK", "ok\n", f);
    } else {
        const char *why = "not ready";
        if (!s->ready || s->ready(s->ready_ud, &why)) {
            hdoor_respond_text(out, 200, "OK", "ready\n", f);
        } else {
            char msg[256];
            snprintf(msg, sizeof(msg), "not ready: %s\n", why);
            hdoor_respond_text(out, 503, "Service Unavailable", msg, f);
        }
    }
}

static void resume(http_conn_t *c);

/* Writes the answer to p's call (the door has counted it); the connection closes when it does
 * not fit. */
static void respond(http_conn_t *c, hpend_t *p)
{
    gov_result_t *r = &p->req.result;
    if (p->req.op == PROTO_OP_DECIDE)
        gov_result_render(r);
    int rc = p->req.op == PROTO_OP_SETTLE
                 ? hdoor_respond_settled(&c->fill, r, p->f)
                 : hdoor_respond_decision(&c->fill, r, p->deny_status, p->f);
    if (rc != 0)
        c->fill.failed = true;
}

static void on_decided(gov_result_t *res, void *ctx)
{
    hpend_t *p = ctx; /* res is &p->req.result */
    (void)res;
    http_conn_t *c = p->c;
    if (!c) {
        free(p);
        return;
    }
    c->waiting = NULL;
    respond(c, p);
    struct srv_http *h = c->http;
    if (!h->spare)
        h->spare = p;
    else
        free(p);
    if (c->fill.failed) {
        conn_close(c);
        return;
    }
    flush(c);
    resume(c);
    arm_timer(c);
}

/* /v1/decide or /v1/settle through the door, answered now or in on_decided. */
static void engine_call(http_conn_t *c, proto_op_t op, hdoor_frame_t f)
{
    struct srv_http *h = c->http;
    if (!h->spare && !(h->spare = malloc(sizeof(*h->spare)))) {
        c->fill.failed = true;
        return;
    }
    hpend_t *p = h->spare;
    p->c = c;
    p->f = f;
    p->deny_status = h->call.deny_status;
    door_caller_t who = c->who;
    who.authorization = h->call.authorization.ptr;
    who.authorization_len = h->call.authorization.len;
    door_args_t a = {.op = op,
                     .subject = &h->call.subject,
                     .tokens = h->call.tokens,
                     .reservation = h->call.reservation,
                     .now = tt_wall_ns(),
                     .start_ns = uv_hrtime()};
    int rc = door_call(h->srv->door, &who, &a, &p->req, on_decided, p);
    if (rc == GOV_PENDING) {
        h->spare = NULL; /* the engine's until on_decided */
        c->waiting = p;
        return;
    }
    respond(c, p);
}

static bool level_known(void *ud, const char *level, size_t len)
{
    return door_level_known(ud, level, len);
}

static void answer(http_conn_t *c, const hreq_request_t *req, hdoor_frame_t f)
{
    struct srv_http *h = c->http;
    hdoor_env_t env = {.map = &h->map,
                       .decide = c->decide &&
                                 h->srv->door, /* a server without a door serves no decision */
                       .known = level_known,
                       .known_ud = h->srv->door};
    hdoor_route_t route = hdoor_route(&env, req, &h->call, &c->fill, f);
    if (route == HDOOR_DECIDE || route == HDOOR_SETTLE)
        engine_call(c, route == HDOOR_SETTLE ? PROTO_OP_SETTLE : PROTO_OP_DECIDE, f);
    else if (route != HDOOR_ANSWERED)
        answer_ops(c, route, f);
}

/* Parses and answers what data[0, len) holds, one request at a time, until the connection
 * must wait. Returns the bytes used. */
static size_t process(http_conn_t *c, const uint8_t *data, size_t len)
{
    size_t off = 0;
    while (off < len && !c->closed && !c->last && !c->waiting &&
           c->fill.len + c->flight.len <= OUT_LIMIT) {
        size_t used;
        const hreq_request_t *req;
        int rc = hreq_feed(&c->rd, data + off, len - off, &used, &req);
        off += used;
        if (rc == 0)
            break;
        if (rc < 0) {
            const char *reason;
            int status = hreq_status(rc, &reason);
            char msg[sizeof(c->rd.message) + 2];
            snprintf(msg, sizeof(msg), "%s\n", c->rd.message);
            hdoor_respond_text(&c->fill, status, reason, msg, (hdoor_frame_t){0});
            c->last = true;
            refused_as(c, hreq_code(rc));
            closed_for(c, SRV_CLOSE_PROTOCOL);
            return len;
        }
        hdoor_frame_t f = {.keep_alive = req->keep_alive, .head_only = req->method == HTTP_HEAD};
        c->last = !req->keep_alive;
        answer(c, req, f);
        hreq_next(&c->rd);
        /* a completed request makes the connection the newest */
        unlink_conn(c);
        link_newest(c);
        if (c->fill.failed) {
            conn_close(c);
            return len;
        }
    }
    return c->last ? len : off;
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    http_conn_t *c = handle->data;
    *buf = uv_buf_init((char *)c->http->rbuf, sizeof(c->http->rbuf));
}

/* Holds data[0, len) back (not read further) until the answers drain. */
static void hold(http_conn_t *c, const uint8_t *data, size_t len)
{
    if (len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_len = 0;
        return;
    }
    uint8_t *in = malloc(len);
    if (!in) {
        conn_close(c);
        return;
    }
    memcpy(in, data, len);
    free(c->in);
    c->in = in;
    c->in_len = len;
    c->held = true;
    uv_read_stop(&c->h.stream);
}

/* Goes on with held bytes, then reads again. */
static void resume(http_conn_t *c)
{
    if (!c->held || c->closed || c->waiting || c->last ||
        c->fill.len + c->flight.len > OUT_LIMIT / 2)
        return;
    c->held = false;
    if (c->in_len) {
        uint8_t *in = c->in;
        size_t len = c->in_len;
        c->in = NULL;
        c->in_len = 0;
        size_t used = process(c, in, len);
        if (!c->closed)
            hold(c, in + used, len - used);
        free(in);
        flush(c);
        arm_timer(c);
        if (c->closed || c->in_len || c->last)
            return;
    }
    if (uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        conn_close(c);
}

static void on_write(uv_write_t *w, int status)
{
    http_conn_t *c = w->data;
    c->writing = false;
    c->flight.len = 0;
    if (status < 0 || c->closed) {
        conn_close(c);
        return;
    }
    if (c->flight.cap > KEEP_CAP) /* a /metrics answer need not stay */
        tt_buf_free(&c->flight);
    flush(c);
    resume(c);
    arm_timer(c);
}

/* Answers what was read, and holds back what must wait. */
static void ingest(http_conn_t *c, const uint8_t *data, size_t len)
{
    size_t used = process(c, data, len);
    if (c->closed)
        return;
    hreq_release(&c->rd); /* between requests a connection holds no buffer */
    if (c->last)
        uv_read_stop(&c->h.stream);
    else if (used < len)
        hold(c, data + used, len - used);
    flush(c);
    arm_timer(c);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    http_conn_t *c = st->data;
    if (c->lingering) {
        if (nread < 0 || (c->lingered += (size_t)nread) > LINGER_BYTES)
            conn_close(c);
        return;
    }
    if (nread < 0) {
        /* the client is done: what it asked is answered; a request cut short is not */
        c->eof = true;
        c->last = true;
        uv_read_stop(st);
        if (nread != UV_EOF)
            conn_close(c);
        else
            flush(c);
        return;
    }
    ingest(c, (const uint8_t *)buf->base, (size_t)nread);
}

/* At the budget: closes the connection longest without a completed request (one waiting on
 * the engine is about to complete one). False when every connection is waiting. */
static bool make_room(struct srv_http *h)
{
    if (h->nconns < h->max_conns)
        return true;
    http_conn_t *c = NULL;
    tt_queue_t *q;
    tt_queue_foreach(q, &h->conns)
    {
        if (!tt_queue_data(q, http_conn_t, age)->waiting) {
            c = tt_queue_data(q, http_conn_t, age);
            break;
        }
    }
    if (!c)
        return false;
    closed_for(c, SRV_CLOSE_EVICTED);
    conn_close(c);
    return true;
}

/* A new connection of `who` in the budget, its timer ready; the caller initialises its stream.
 * NULL when there is no room or memory. */
static http_conn_t *conn_new(struct srv_http *h, bool decide, const door_caller_t *who)
{
    if (!make_room(h))
        return NULL;
    http_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->http = h;
    c->decide = decide;
    c->who = *who;
    h->nconns++;
    link_newest(c);
    uv_timer_init(h->srv->loop, &c->timer);
    c->timer.data = c;
    c->open_handles = 2;
    hreq_init(&c->rd, hdoor_want, &h->map);
    return c;
}

static void free_handle(uv_handle_t *handle)
{
    free(handle);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct srv_http *h = server->data;
    if (status < 0)
        return;
    door_caller_t who = {.door = SRV_DOOR_HTTP, .tcp = true};
    http_conn_t *c = conn_new(h, h->decide_tcp, &who);
    if (!c) { /* take it off the backlog, and close it */
        uv_tcp_t *t = malloc(sizeof(*t));
        if (t && uv_tcp_init(server->loop, t) == 0 && uv_accept(server, (uv_stream_t *)t) == 0)
            uv_close((uv_handle_t *)t, free_handle);
        else
            free(t);
        return;
    }
    uv_tcp_init(server->loop, &c->h.tcp);
    c->h.handle.data = c;
    if (uv_accept(server, &c->h.stream) != 0 ||
        uv_read_start(&c->h.stream, on_alloc, on_read) != 0) {
        conn_close(c);
        return;
    }
    arm_timer(c);
}

int srv__http_adopt(srv_t *s, int fd, const uint8_t *data, size_t len, const stream_t *from)
{
    struct srv_http *h = s->http;
    door_caller_t who = {.door = SRV_DOOR_HTTP,
                         .conn = from->id,
                         .cred = from->peer_cred,
                         .uid = from->peer_uid,
                         .gid = from->peer_gid};
    http_conn_t *c = h && !h->stopped ? conn_new(h, true, &who) : NULL;
    if (!c)
        return -1;
    uv_pipe_init(s->loop, &c->h.pipe, 0);
    c->h.handle.data = c;
    if (uv_pipe_open(&c->h.pipe, fd) != 0) {
        conn_close(c);
        return -1;
    }
    ingest(c, data, len);
    if (!c->closed && !c->last && !c->held && !c->lingering &&
        uv_read_start(&c->h.stream, on_alloc, on_read) != 0)
        conn_close(c);
    return 0;
}

/* Listens on addr; logs the bound address and where /v1/decide is served. */
static int listen_tcp(struct srv_http *h, const char *addr, cfg_http_decide_t decide, tt_err_t *err)
{
    srv_t *s = h->srv;
    struct sockaddr_storage ss;
    if (mb_want_addr(addr, "server.http", &ss, err) != 0) { /* srv_preflight's check */
        if (err)
            err->code = SRV_ELISTEN;
        return SRV_ELISTEN;
    }
    h->decide_tcp = decide == CFG_HTTP_DECIDE_ON; /* each request with its bearer token */
    uv_tcp_init(s->loop, &h->listener);
    h->listener.data = h;
    h->listening = true;
    int rc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->listener, 1024, on_connection);
    if (rc != 0)
        return tt_err_set(err, SRV_ELISTEN, "server.http", "cannot listen on %s: %s", addr,
                          uv_strerror(rc));
    /* the bound address, so that port 0 tells which port the kernel gave */
    char bound[INET6_ADDRSTRLEN + 8] = "";
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len) == 0) {
        char ip[INET6_ADDRSTRLEN] = "";
        bool v6 = ss.ss_family == AF_INET6;
        if (v6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        else
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        int port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                            : ((struct sockaddr_in *)&ss)->sin_port);
        snprintf(bound, sizeof(bound), v6 ? "[%s]:%d" : "%s:%d", ip, port);
    }
    tt_log(
        TT_LOG_INFO, "http listening", TT_STR("address", bound[0] ? bound : addr),
        TT_STR("decide", h->decide_tcp ? "on, with bearer tokens" : "off (the socket serves it)"));
    return 0;
}

int srv__http_start(srv_t *s, const srv_options_t *opt, tt_err_t *err)
{
    struct srv_http *h = calloc(1, sizeof(*h));
    if (!h)
        return tt_err_set(err, SRV_ENOMEM, "", "out of memory");
    h->srv = s;
    tt_queue_init(&h->conns);
    h->max_conns = s->max_connections;
    for (size_t i = 0; i < opt->n_http_subject && i < CFG_HTTP_SUBJECT_MAX; i++)
        h->map.subject[h->map.n_subject++] = opt->http_subject[i];
    snprintf(h->map.tokens, sizeof(h->map.tokens), "%s", opt->http_tokens ? opt->http_tokens : "");
    s->http = h; /* srv__http_stop closes and frees it, on success or not */
    if (!opt->http || !*opt->http)
        return 0;
    return listen_tcp(h, opt->http, opt->http_decide, err);
}

static void on_listener_closed(uv_handle_t *handle)
{
    struct srv_http *h = handle->data;
    h->listener_closed = true;
    maybe_free(h);
}

void srv__http_stop(srv_t *s)
{
    struct srv_http *h = s->http;
    if (!h)
        return;
    h->stopped = true;
    if (h->listening)
        uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    while (!tt_queue_empty(&h->conns))
        conn_close(tt_queue_data(tt_queue_head(&h->conns), http_conn_t, age));
    s->http = NULL;
    maybe_free(h);
}
