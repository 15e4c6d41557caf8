/*
 * The gRPC front door's libuv shell (see listen.h): sockets in, rls_conn, sockets out.
 *
 * Back-pressure: a connection whose unwritten answers pass OUT_HIGH stops being read until
 * they drain below OUT_LOW, so a client that does not read cannot grow the daemon's memory.
 * Deadlines: one timer for the whole listener, running every DEADLINE_MS only while some call
 * waits on a grpc-timeout; one timer per connection for its own deadlines (rls_conn_deadline:
 * the preface, idleness).
 *
 * Turns (issue 34). rls_conn_recv does one turn of work at most and says how much input it
 * took; what is left waits in the connection (`rest`, at most one read) while the connection
 * is not read, and is fed one turn per loop iteration from an idle handle, every busy
 * connection in turn. libuv reads a ready socket up to 32 times in a row; stopping the reads
 * of a busy connection ends that, so between two turns of one connection every other
 * connection, and every other door on the loop, is served.
 *
 * The connection budget (server.max_connections) is kept as the HTTP door keeps it:
 * connections are ordered by their last completed call (or their accept), and at the budget a
 * new connection closes the one that has gone longest without one (after a GOAWAY, written if
 * the socket takes it at once). A client holding every slot idle loses its oldest slots to
 * Envoy's next connection instead of locking it out.
 *
 * A connection the door ends on its own (evicted here; a deadline, idleness or a client that
 * broke the protocol: rls_conn_ended) is told through the options' events when it closes.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include "listen.h"

#include <malloc.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_clock.h"
#include "tt_peer.h"
#include "tt_queue.h"

#define OUT_HIGH (256u << 10)
#define OUT_LOW (64u << 10)
#define DEADLINE_MS 10
#define READ_BUF (64u << 10)
#define TRIM_MS 1000 /* after a connection closes, when the heap's free pages go back */

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
    uv_idle_t turns; /* runs while some connection has input left from its last turn */
    uv_timer_t trim; /* armed when a connection closes: free heap pages back to the kernel */
    bool timing, stopped;
    int open_handles; /* the listener, the timers and every connection not yet closed */
    tt_queue_t conns; /* conn_t.age, oldest first: by last completed call, see above */
    tt_queue_t busy;  /* conn_t.turn: connections with a turn to come, in order */
    unsigned nconns;
    uint8_t rbuf[READ_BUF]; /* one read at a time on the loop's thread */
};

struct conn {
    rls_srv_t *s;
    handle_t h;
    uv_timer_t timer; /* the connection's own deadline */
    int handles;      /* h and timer, until both are closed */
    rls_conn_t *rc;
    size_t inflight; /* bytes handed to uv_write, not yet written */
    bool paused;     /* not read: answers to drain first */
    bool reading, closing;
    bool evicted;  /* closed to make room at max_connections */
    bool more;     /* the last turn stopped short: another is due (busy) */
    uint8_t *rest; /* the input it did not take */
    size_t rest_len, rest_cap;
    uint64_t calls;  /* answered at the last look */
    tt_queue_t age;  /* on s->conns */
    tt_queue_t turn; /* on s->busy while a turn is due (tt_queue_linked) */
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

/* Streams and bodies are small allocations from the heap: freed, they stay the process's (the
 * allocator keeps them for the next ones) unless handed back. A client that held a connection
 * full of them should not leave the daemon that much bigger, so a second after connections
 * close the heap's free pages go back (glibc's malloc_trim; at most once a second). */
static void on_trim(uv_timer_t *t)
{
    (void)t;
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

static void on_conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    rls_srv_t *s = c->s;
    rls_conn_free(c->rc);
    free(c->rest);
    free(c);
    s->open_handles--;
    if (!s->stopped && !uv_is_active((uv_handle_t *)&s->trim))
        uv_timer_start(&s->trim, on_trim, TRIM_MS, 0);
    maybe_free(s);
}

/* The connection longest without a completed call, NULL when none. */
static conn_t *oldest(rls_srv_t *s)
{
    return tt_queue_empty(&s->conns) ? NULL : tt_queue_data(tt_queue_head(&s->conns), conn_t, age);
}

static void unlink_conn(conn_t *c)
{
    tt_queue_remove(&c->age);
}

static void link_newest(conn_t *c)
{
    tt_queue_insert_tail(&c->s->conns, &c->age);
}

static void on_turn(uv_idle_t *h);

static void busy_add(conn_t *c)
{
    rls_srv_t *s = c->s;
    if (tt_queue_linked(&c->turn))
        return;
    tt_queue_insert_tail(&s->busy, &c->turn);
    uv_idle_start(&s->turns, on_turn);
}

static void busy_remove(conn_t *c)
{
    tt_queue_remove(&c->turn);
}

/* A connection the door ended is told, with why (h2.h), once, as it closes. */
static void tell_closed(const conn_t *c)
{
    const rls_events_t *ev = c->s->opt.conn.events;
    const char *why = c->evicted ? "evicted" : c->rc ? rls_conn_ended(c->rc) : NULL;
    if (why && ev && ev->closed && !c->s->stopped)
        ev->closed(ev->ud, why);
}

static void conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    tell_closed(c);
    rls_srv_t *s = c->s;
    unlink_conn(c);
    busy_remove(c);
    s->nconns--;
    uv_close(&c->h.h, on_conn_closed);
    uv_close((uv_handle_t *)&c->timer, on_conn_closed);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    conn_t *c = h->data;
    *buf = uv_buf_init((char *)c->s->rbuf, READ_BUF);
}

/* Reads, waits for its answers to drain, or waits for its next turn, as its state says. */
static void schedule(conn_t *c)
{
    if (c->closing)
        return;
    bool read = !c->paused && !c->more;
    if (c->more && !c->paused)
        busy_add(c);
    else
        busy_remove(c);
    if (read && !c->reading) {
        if (uv_read_start(&c->h.s, on_alloc, on_read) != 0) {
            conn_close(c);
            return;
        }
        c->reading = true;
    } else if (!read && c->reading) {
        uv_read_stop(&c->h.s);
        c->reading = false;
    }
}

static void after_write(conn_t *c)
{
    if (c->closing)
        return;
    if (c->paused && c->inflight < OUT_LOW) {
        c->paused = false;
        schedule(c);
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
        schedule(c);
    }
    after_write(c);
}

static void on_deadline(uv_timer_t *t);

/* The connection's own next deadline, on its timer. */
static void arm_deadline(conn_t *c, int64_t now)
{
    if (c->closing)
        return;
    int64_t at = rls_conn_deadline(c->rc);
    if (at == INT64_MAX) {
        uv_timer_stop(&c->timer);
        return;
    }
    int64_t ms = at > now ? (at - now + 999999) / 1000000 : 0;
    uv_timer_start(&c->timer, on_deadline, (uint64_t)ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    rls_srv_t *s = t->data;
    int64_t now = tt_wall_ns();
    size_t waiting = 0;
    tt_queue_t *q, *tmp;
    tt_queue_foreach_safe(q, tmp, &s->conns)
    {
        conn_t *c = tt_queue_data(q, conn_t, age);
        waiting += rls_conn_tick(c->rc, now);
        flush(c);
    }
    if (!waiting) {
        uv_timer_stop(&s->timer);
        s->timing = false;
    }
}

static void on_deadline(uv_timer_t *t)
{
    conn_t *c = t->data;
    int64_t now = tt_wall_ns();
    rls_conn_tick(c->rc, now);
    flush(c);
    arm_deadline(c, now);
}

/* Keeps in[0, len) for the next turn (in may point into the kept bytes themselves). */
static int keep_rest(conn_t *c, const uint8_t *in, size_t len)
{
    if (len > c->rest_cap) {
        uint8_t *grown = malloc(len);
        if (!grown)
            return -1;
        memcpy(grown, in, len);
        free(c->rest);
        c->rest = grown;
        c->rest_cap = len;
    } else if (len) {
        memmove(c->rest, in, len);
    }
    c->rest_len = len;
    return 0;
}

/* A completed call makes the connection the newest. */
static void note_calls(conn_t *c)
{
    rls_conn_stats_t st;
    rls_conn_stats(c->rc, &st);
    if (st.calls != c->calls) {
        c->calls = st.calls;
        unlink_conn(c);
        link_newest(c);
    }
}

/* A call that waited on Redis is answered: out it goes. */
static void on_ready(void *ctx)
{
    conn_t *c = ctx;
    if (c->closing)
        return;
    note_calls(c);
    flush(c);
    arm_deadline(c, tt_wall_ns());
}

/* One turn of the connection's input: in[0, len) is what was read, or what the last turn left. */
static void feed(conn_t *c, const uint8_t *in, size_t len)
{
    int64_t now = tt_wall_ns();
    size_t used = 0;
    int rc = rls_conn_recv(c->rc, in, len, now, &used);
    c->more = rc == RLS_RECV_MORE;
    if (c->more ? keep_rest(c, in + used, len - used) != 0 : (c->rest_len = 0, 0)) {
        conn_close(c);
        return;
    }
    if (!c->more && c->rest_cap > READ_BUF / 4) { /* a busy spell is over: its buffer goes */
        free(c->rest);
        c->rest = NULL;
        c->rest_cap = 0;
    }
    note_calls(c);
    rls_srv_t *s = c->s;
    if (!s->timing && rls_conn_tick(c->rc, now) > 0) {
        s->timing = true;
        uv_timer_start(&s->timer, on_timer, DEADLINE_MS, DEADLINE_MS);
    }
    flush(c); /* also a GOAWAY after a protocol error */
    if (rc < 0) {
        conn_close(c);
        return;
    }
    arm_deadline(c, now);
    schedule(c);
}

static void on_turn(uv_idle_t *h)
{
    rls_srv_t *s = h->data;
    /* one turn each for the connections busy now, moved aside first: one made busy again (or
     * for the first time) by a turn waits on s->busy for the next; one closed meanwhile leaves
     * the list it is on */
    tt_queue_t now;
    tt_queue_move(&s->busy, &now);
    while (!tt_queue_empty(&now)) {
        conn_t *c = tt_queue_data(tt_queue_head(&now), conn_t, turn);
        busy_remove(c);
        feed(c, c->rest, c->rest_len);
    }
    if (tt_queue_empty(&s->busy))
        uv_idle_stop(&s->turns);
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
    feed(c, (const uint8_t *)buf->base, (size_t)nread);
}

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* At the budget: the connection longest without a completed call goes, told why first. */
static void make_room(rls_srv_t *s)
{
    conn_t *c = oldest(s);
    if (!c || s->nconns < s->opt.max_connections)
        return;
    c->evicted = true;
    rls_conn_shutdown(c->rc, "evicted: server.max_connections reached");
    const uint8_t *p; /* what the socket takes now; the rest is lost with the connection */
    ssize_t n;
    while (!c->inflight && (n = rls_conn_send(c->rc, &p)) > 0) {
        uv_buf_t b = uv_buf_init((char *)p, (unsigned)n);
        if (uv_try_write(&c->h.s, &b, 1) != n)
            break;
    }
    conn_close(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    rls_srv_t *s = server->data;
    if (status < 0 || s->stopped)
        return;
    make_room(s);
    int64_t now = tt_wall_ns();
    conn_t *c = calloc(1, sizeof(*c));
    if (!c) { /* take it off the backlog, and close it */
        handle_t *t = malloc(sizeof(*t));
        int init = !t           ? -1
                   : s->path[0] ? uv_pipe_init(s->loop, &t->pipe, 0)
                                : uv_tcp_init(s->loop, &t->tcp);
        if (init != 0) {
            free(t);
            return;
        }
        uv_accept(server, &t->s);
        uv_close(&t->h, free_handle);
        return;
    }
    c->s = s;
    tt_queue_init(&c->age);
    tt_queue_init(&c->turn);
    c->h.h.data = c;
    c->timer.data = c;
    if (s->path[0])
        uv_pipe_init(s->loop, &c->h.pipe, 0);
    else
        uv_tcp_init(s->loop, &c->h.tcp);
    uv_timer_init(s->loop, &c->timer);
    c->handles = 2;
    s->open_handles++;
    link_newest(c);
    s->nconns++;
    rls_caller_t who = {.tcp = !s->path[0]};
    int rc = uv_accept(server, &c->h.s);
    uv_os_fd_t fd;
    if (rc == 0 && !who.tcp && uv_fileno(&c->h.h, &fd) == 0)
        who.cred = tt_peer_cred(fd, &who.uid, &who.gid); /* the door checks it, call by call */
    if (rc != 0 || !(c->rc = rls_conn_new(&s->opt.conn, &who, now))) {
        conn_close(c);
        return;
    }
    rls_conn_on_ready(c->rc, on_ready, c);
    if (!s->path[0])
        uv_tcp_nodelay(&c->h.tcp, 1);
    schedule(c);
    flush(c); /* the server's SETTINGS */
    arm_deadline(c, now);
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
    tt_queue_init(&s->conns);
    tt_queue_init(&s->busy);
    if (!s->opt.max_connections)
        s->opt.max_connections = 1024;
    uv_timer_init(loop, &s->timer);
    s->timer.data = s;
    uv_idle_init(loop, &s->turns);
    s->turns.data = s;
    uv_timer_init(loop, &s->trim);
    s->trim.data = s;
    s->open_handles = 4; /* the timers, the turns and the listener */
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
    for (conn_t *c; (c = oldest(s)) != NULL;)
        conn_close(c);
    if (s->path[0])
        unlink(s->path);
    uv_close((uv_handle_t *)&s->timer, on_handle_closed);
    uv_close((uv_handle_t *)&s->turns, on_handle_closed);
    uv_close((uv_handle_t *)&s->trim, on_handle_closed);
    uv_close(&s->listener.h, on_handle_closed);
}
