/*
 * The gRPC front door's libuv shell (see listen.h): sockets in, rls_conn, sockets out.
 *
 * Back-pressure: a connection whose unwritten answers pass OUT_HIGH stops being read until
 * they drain below OUT_LOW, so a client that does not read cannot grow the daemon's memory.
 * Deadlines: one timer for the whole listener, running every DEADLINE_MS only while some call
 * waits on a grpc-timeout.
 */
#include "listen.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_clock.h"

#define OUT_HIGH (1u << 20)
#define OUT_LOW (256u << 10)
#define DEADLINE_MS 10
#define READ_BUF (64u << 10)

typedef union handle {
    uv_handle_t h;
    uv_stream_t s;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
} handle_t;

typedef struct conn conn_t;

struct rls_srv {
    uv_loop_t *loop;
    rls_srv_options_t opt;
    char path[CFG_SOCKET_PATH_MAX + 1]; /* a unix socket's path, unlinked at stop */
    char bound[128];                    /* what it listens on (a TCP port 0: the kernel's pick) */
    handle_t listener;
    uv_timer_t timer;
    bool timing, stopped;
    int open_handles; /* the listener, the timer and every connection not yet closed */
    conn_t *conns;
    unsigned nconns;
    uint8_t rbuf[READ_BUF]; /* one read at a time on the loop's thread */
};

struct conn {
    rls_srv_t *s;
    handle_t h;
    rls_conn_t *rc;
    size_t inflight; /* bytes handed to uv_write, not yet written */
    bool paused, closing;
    conn_t *prev, *next;
};

typedef struct wreq {
    uv_write_t req;
    conn_t *c;
    size_t len;
    uint8_t data[];
} wreq_t;

static void maybe_free(rls_srv_t *s)
{
    if (s->stopped && s->open_handles == 0)
        free(s);
}

static void on_handle_closed(uv_handle_t *h)
{
    rls_srv_t *s = h->data;
    s->open_handles--;
    maybe_free(s);
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    rls_srv_t *s = c->s;
    rls_conn_free(c->rc);
    free(c);
    s->open_handles--;
    maybe_free(s);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    rls_srv_t *s = c->s;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    uv_close(&c->h.h, on_conn_closed);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    *buf = uv_buf_init((char *)c->s->rbuf, READ_BUF);
}

static void after_write(conn_t *c)
{
    if (c->closing)
        return;
    if (c->paused && c->inflight < OUT_LOW) {
        c->paused = false;
        uv_read_start(&c->h.s, on_alloc, on_read);
    }
    if (c->inflight == 0 && rls_conn_done(c->rc))
        conn_close(c);
}

static void on_written(uv_write_t *req, int status)
{
    wreq_t *w = (wreq_t *)req;
    conn_t *c = w->c;
    c->inflight -= w->len;
    free(w);
    if (status < 0)
        conn_close(c);
    else
        after_write(c);
}

/* Writes everything the session has queued, in one write. */
static void flush(conn_t *c)
{
    wreq_t *w = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        const uint8_t *p;
        ssize_t n = rls_conn_send(c->rc, &p);
        if (n < 0) {
            free(w);
            conn_close(c);
            return;
        }
        if (n == 0)
            break;
        if (len + (size_t)n > cap) {
            cap = (len + (size_t)n) * 2;
            wreq_t *grown = realloc(w, sizeof(*w) + cap);
            if (!grown) {
                free(w);
                conn_close(c);
                return;
            }
            w = grown;
        }
        memcpy(w->data + len, p, (size_t)n);
        len += (size_t)n;
    }
    if (w) {
        w->c = c;
        w->len = len;
        uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)len);
        c->inflight += len;
        if (uv_write(&w->req, &c->h.s, &b, 1, on_written) < 0) {
            c->inflight -= len;
            free(w);
            conn_close(c);
            return;
        }
    }
    if (!c->paused && c->inflight > OUT_HIGH) {
        c->paused = true;
        uv_read_stop(&c->h.s);
    }
    after_write(c);
}

static void on_timer(uv_timer_t *t)
{
    rls_srv_t *s = t->data;
    int64_t now = tt_wall_ns();
    size_t waiting = 0;
    for (conn_t *c = s->conns, *next; c; c = next) {
        next = c->next;
        waiting += rls_conn_tick(c->rc, now);
        flush(c);
    }
    if (!waiting) {
        uv_timer_stop(&s->timer);
        s->timing = false;
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = stream->data;
    if (nread == 0)
        return;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    int64_t now = tt_wall_ns();
    int rc = rls_conn_recv(c->rc, (const uint8_t *)buf->base, (size_t)nread, now);
    rls_srv_t *s = c->s;
    if (!s->timing && rls_conn_tick(c->rc, now) > 0) {
        s->timing = true;
        uv_timer_start(&s->timer, on_timer, DEADLINE_MS, DEADLINE_MS);
    }
    flush(c); /* also a GOAWAY after a protocol error */
    if (rc < 0)
        conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    rls_srv_t *s = server->data;
    if (status < 0 || s->stopped)
        return;
    conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->s = s;
    c->h.h.data = c;
    if (s->path[0])
        uv_pipe_init(s->loop, &c->h.pipe, 0);
    else
        uv_tcp_init(s->loop, &c->h.tcp);
    s->open_handles++;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    rls_caller_t who = {.tcp = !s->path[0]};
    if (uv_accept(server, &c->h.s) != 0 || s->nconns > s->opt.max_connections ||
        !(c->rc = rls_conn_new(&s->opt.conn, &who))) {
        conn_close(c);
        return;
    }
    if (!s->path[0])
        uv_tcp_nodelay(&c->h.tcp, 1);
    uv_read_start(&c->h.s, on_alloc, on_read);
    flush(c); /* the server's SETTINGS */
}

/* host:port ([v6]:port) through getaddrinfo: names, IPv4 and IPv6 alike. */
static int resolve(const char *addr, struct sockaddr_storage *ss)
{
    char host[CFG_ADDR_MAX + 1];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof(host))
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    char *h = host;
    if (h[0] == '[' && h[strlen(h) - 1] == ']') {
        h[strlen(h) - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE},
                    *res = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static int bind_listener(rls_srv_t *s, const char *addr)
{
    if (addr[0] == '/') {
        struct stat st;
        if (lstat(addr, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(addr); /* a stale socket of an earlier run */
        snprintf(s->path, sizeof(s->path), "%s", addr);
        uv_pipe_init(s->loop, &s->listener.pipe, 0);
        int rc = uv_pipe_bind(&s->listener.pipe, addr);
        if (rc == 0 && chmod(addr, s->opt.socket_mode ? s->opt.socket_mode : 0660) != 0)
            rc = UV_EPERM;
        return rc;
    }
    struct sockaddr_storage ss;
    uv_tcp_init(s->loop, &s->listener.tcp);
    if (resolve(addr, &ss) != 0)
        return UV_EINVAL;
    return uv_tcp_bind(&s->listener.tcp, (struct sockaddr *)&ss, 0);
}

/* The address a TCP listener was given (port 0: the kernel's pick), for the log. */
static void bound_name(rls_srv_t *s, char *out, size_t size)
{
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[64] = "";
    if (s->path[0] || uv_tcp_getsockname(&s->listener.tcp, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(out, size, "%s", s->path[0] ? s->path : s->opt.addr);
        return;
    }
    bool v6 = ss.ss_family == AF_INET6;
    if (v6)
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
    else
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
    int port =
        ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    snprintf(out, size, v6 ? "[%s]:%d" : "%s:%d", ip, port);
}

int rls_srv_start(rls_srv_t **out, uv_loop_t *loop, const rls_srv_options_t *opt, tt_err_t *err)
{
    *out = NULL;
    rls_srv_t *s = calloc(1, sizeof(*s));
    if (!s)
        return tt_err_set(err, TT_ERR_NOMEM, "server.grpc", "out of memory");
    s->loop = loop;
    s->opt = *opt;
    if (!s->opt.max_connections)
        s->opt.max_connections = 1024;
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    s->open_handles = 2; /* the timer and the listener */
    *out = s;
    int rc = bind_listener(s, opt->addr);
    s->listener.h.data = s;
    if (rc == 0)
        rc = uv_listen(&s->listener.s, 1024, on_connection);
    if (rc != 0)
        return tt_err_set(err, TT_ERR_LISTEN, "server.grpc", "cannot listen on %s: %s", opt->addr,
                          uv_strerror(rc));
    bound_name(s, s->bound, sizeof(s->bound));
    return 0;
}

const char *rls_srv_address(const rls_srv_t *s)
{
    return s->bound;
}

void rls_srv_stop(rls_srv_t *s)
{
    if (!s || s->stopped)
        return;
    s->stopped = true;
    while (s->conns)
        conn_close(s->conns);
    if (s->path[0])
        unlink(s->path);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close(&s->listener.h, on_handle_closed);
}
