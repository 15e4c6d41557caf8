/*
 * The decision socket: connections, framing, ordering, back-pressure.
 *
 * Reading. An idle connection owns no buffer: libuv reads into one 64 KiB buffer shared by the
 * whole server, every whole message in it is answered at once, and only the tail of a message
 * cut by the read is copied into a buffer of the connection's own (IN_CAP, enough for a
 * 64 KiB message plus one more read). While a connection has such a tail, it reads straight
 * into that buffer behind it. Ten thousand idle connections therefore cost their libuv handle
 * and this struct, nothing more.
 *
 * Writing. Answers are appended to `fill`; after each read callback the whole of `fill` goes
 * out in one uv_write (libuv tries the write at once, so there is one syscall per batch of
 * answers, not per answer). While it is in flight, new answers gather in the other buffer.
 *
 * Back-pressure. When a connection's unsent answers pass out_limit (or too many answers wait
 * on the engine), it stops being processed and read; what it had already sent waits in its
 * input buffer. A completed write below half the limit resumes it. A client that never reads
 * thus costs at most about two out_limits and IN_CAP, however much it sends.
 *
 * Order. Every answer is either appended to `fill` directly or, when an earlier answer is
 * still pending in the engine (a redis limit), queued in a slot behind it; a completion
 * releases every ready slot from the head of the queue. See srv_int.h.
 *
 * Framing errors. A stream whose message boundaries are lost (not a map, a reserved byte, a
 * message or header beyond 64 KiB) gets one error answer and is closed once it is written.
 * Every other bad request is answered with its error and the stream goes on.
 */
#define _GNU_SOURCE /* struct ucred, SO_PEERCRED */
#include "srv.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "srv_int.h"
#include "tt_clock.h"

#define IN_CAP (2 * PROTO_MAX_MESSAGE)
#define MAX_SLOTS 4096 /* answers waiting behind a pending one, per connection */

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void flush(srv_conn_t *c);

static void on_conn_closed(uv_handle_t *h)
{
    srv_conn_t *c = h->data;
    srv_t *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    srv_metrics_connections(s->metrics, -1);
    free(c->in);
    proto_out_free(&c->fill);
    proto_out_free(&c->flight);
    free(c);
}

static void conn_close(srv_conn_t *c)
{
    if (c->closed)
        return;
    c->closed = true;
    srv__conn_released(c);
    /* answers still owed by the engine are orphaned; the ready ones die with the connection */
    for (srv_slot_t *sl = c->head, *next; sl; sl = next) {
        next = sl->next;
        sl->prev = sl->next = NULL;
        sl->conn = NULL;
        if (sl->ready) {
            proto_out_free(&sl->bytes);
            free(sl);
        }
    }
    c->head = c->tail = NULL;
    c->nslots = 0;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* A draining connection closes once nothing is left to write. */
static void maybe_finish(srv_conn_t *c)
{
    if (c->draining && !c->closed && !c->writing && c->fill.len == 0 && c->head == NULL)
        conn_close(c);
}

proto_out_t *srv__answer_buf(srv_conn_t *c)
{
    if (c->head == NULL)
        return &c->fill;
    srv_slot_t *s = malloc(sizeof(*s));
    if (!s)
        return NULL;
    srv__slot_link(c, s, 0, PROTO_OP_PING, 0);
    s->ready = true;
    return &s->bytes;
}

void srv__slot_link(srv_conn_t *c, srv_slot_t *s, uint64_t seq, proto_op_t op, uint64_t start_ns)
{
    *s = (srv_slot_t){.prev = c->tail, .conn = c, .seq = seq, .op = op, .start_ns = start_ns};
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    c->nslots++;
}

void srv__slot_unlink(srv_conn_t *c, srv_slot_t *s)
{
    if (s->prev)
        s->prev->next = NULL;
    else
        c->head = NULL;
    c->tail = s->prev;
    c->nslots--;
}

void srv__fail(srv_conn_t *c)
{
    conn_close(c);
}

static bool over_limit(const srv_conn_t *c)
{
    return c->fill.len + c->flight.len > c->srv->out_limit || c->nslots >= MAX_SLOTS;
}

static void process_input(srv_conn_t *c);

/* Reads again once answers have drained below half the limit. */
static void maybe_resume(srv_conn_t *c)
{
    if (!c->paused || c->closed || c->draining)
        return;
    if (c->fill.len + c->flight.len > c->srv->out_limit / 2 || c->nslots >= MAX_SLOTS / 2)
        return;
    c->paused = false;
    process_input(c);
    flush(c);
    if (!c->paused && !c->draining && !c->closed) {
        if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0)
            conn_close(c);
    }
}

void srv__slot_ready(srv_slot_t *s)
{
    s->ready = true;
    srv_conn_t *c = s->conn;
    if (!c) {
        proto_out_free(&s->bytes);
        free(s);
        return;
    }
    while (c->head && c->head->ready) {
        srv_slot_t *h = c->head;
        c->head = h->next;
        if (c->head)
            c->head->prev = NULL;
        else
            c->tail = NULL;
        c->nslots--;
        proto_out_append(&c->fill, h->bytes.data, h->bytes.len);
        proto_out_free(&h->bytes);
        free(h);
    }
    if (c->fill.failed) {
        conn_close(c);
        return;
    }
    flush(c);
    maybe_resume(c);
}

void srv__error(srv_conn_t *c, uint64_t seq, const char *code, const char *message)
{
    srv_metrics_error(c->srv->metrics, code);
    proto_out_t *out = srv__answer_buf(c);
    if (!out || proto_enc_error(out, seq, code, message))
        conn_close(c);
}

static void on_write(uv_write_t *req, int status)
{
    srv_conn_t *c = req->data;
    c->writing = false;
    c->flight.len = 0;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->closed)
        return;
    flush(c);
    maybe_resume(c);
    maybe_finish(c);
}

static void flush(srv_conn_t *c)
{
    if (c->writing || c->closed || c->fill.len == 0)
        return;
    proto_out_t t = c->flight;
    c->flight = c->fill;
    c->fill = t;
    c->fill.len = 0;
    uv_buf_t b = uv_buf_init((char *)c->flight.data, (unsigned)c->flight.len);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_write) != 0) {
        conn_close(c);
        return;
    }
    c->writing = true;
}

/* The stream cannot be framed any more: answer once, read nothing more, close when written. */
static void fatal(srv_conn_t *c, int code)
{
    static const char *const why[] = {
        [-PROTO_EFRAME] = "the stream is not a sequence of msgpack maps; closing",
        [-PROTO_ETOOBIG] = "a message longer than 65536 bytes, or announcing more elements "
                           "than that can hold; closing",
    };
    srv__error(c, 0, tt_err_name(code), why[-code]);
    c->draining = true;
    c->in_len = 0;
    uv_read_stop((uv_stream_t *)&c->pipe);
}

/* A framed message the fast path refused: answer its specific error (or, rarely, a request
 * the fast path could not take whole). */
static void handle_framed(srv_conn_t *c, const uint8_t *msg, size_t len, bool deep)
{
    proto_request_t req;
    proto_error_t err;
    int rc = proto_decode_request(msg, len, &req, &err);
    if (deep) {
        char m[64];
        snprintf(m, sizeof(m), "nesting deeper than %d levels", PROTO_MAX_DEPTH);
        srv__error(c, req.seq, tt_err_name(PROTO_EDEEP), m);
        return;
    }
    if (rc) {
        srv__error(c, req.seq, tt_err_name(rc), err.message);
        return;
    }
    srv_metrics_request(c->srv->metrics, req.op);
    srv__dispatch(c, &req);
}

/* Answers every whole message in data[0, len) until the connection must pause. Returns the
 * bytes consumed. */
static size_t process(srv_conn_t *c, const uint8_t *data, size_t len)
{
    size_t off = 0;
    c->srv->batch_wall_ns = tt_wall_ns();
    c->srv->batch_mono_ns = uv_hrtime();
    while (off < len && !c->closed && !c->draining) {
        if (over_limit(c)) {
            c->paused = true;
            break;
        }
        size_t n;
        bool deep;
        proto_request_t req;
        proto_error_t err;
        if (proto_decode_first(data + off, len - off, &n, &req, &err) == 0) {
            srv_metrics_request(c->srv->metrics, req.op);
            srv__dispatch(c, &req);
            off += n;
            continue;
        }
        int rc = proto_frame(data + off, len - off, &n, &deep);
        if (rc == PROTO_EMORE)
            break;
        if (rc < 0) {
            fatal(c, rc);
            return len;
        }
        handle_framed(c, data + off, n, deep);
        off += n;
    }
    srv_t *s = c->srv;
    if (s->batch_decisions) {
        srv_metrics_latency(s->metrics, uv_hrtime() - s->batch_mono_ns, s->batch_decisions);
        s->batch_decisions = 0;
    }
    return off;
}

/* Keeps data[0, len) as the connection's unprocessed input. */
static int keep(srv_conn_t *c, const uint8_t *data, size_t len)
{
    if (len == 0) {
        free(c->in);
        c->in = NULL;
        c->in_len = 0;
        return 0;
    }
    if (!c->in && !(c->in = malloc(IN_CAP)))
        return -1;
    memmove(c->in, data, len);
    c->in_len = len;
    return 0;
}

static void process_input(srv_conn_t *c)
{
    if (c->in_len == 0)
        return;
    size_t used = process(c, c->in, c->in_len);
    if (!c->closed && keep(c, c->in + used, c->in_len - used))
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    srv_conn_t *c = h->data;
    if (c->in_len > 0)
        *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(IN_CAP - c->in_len));
    else
        *buf = uv_buf_init((char *)c->srv->rbuf, sizeof(c->srv->rbuf));
}

/*
 * The socket speaks HTTP too (SPEC §12): a connection whose first byte is an uppercase letter
 * (an HTTP method; no msgpack map starts with one: they are positive fixints) is handed to
 * http.c, which serves it from then on through a duplicate of its descriptor.
 */
static bool handed_to_http(srv_conn_t *c, const uint8_t *data, size_t len)
{
    if (c->sniffed)
        return false;
    c->sniffed = true;
    if (data[0] < 'A' || data[0] > 'Z')
        return false;
    uv_os_fd_t fd;
    int dup_fd = uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
    conn_close(c);
    if (dup_fd >= 0 && srv__http_adopt(c->srv, dup_fd, data, len) != 0)
        close(dup_fd);
    return true;
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    srv_conn_t *c = stream->data;
    if (nread > 0 && handed_to_http(c, (const uint8_t *)buf->base, (size_t)nread))
        return;
    if (nread == UV_EOF) {
        /* the client is done sending: answer what it sent, then close */
        uv_read_stop(stream);
        c->draining = true;
        flush(c);
        maybe_finish(c);
        return;
    }
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    if ((uint8_t *)buf->base == c->srv->rbuf) {
        size_t used = process(c, c->srv->rbuf, (size_t)nread);
        if (!c->closed && keep(c, c->srv->rbuf + used, (size_t)nread - used)) {
            conn_close(c);
            return;
        }
    } else {
        c->in_len += (size_t)nread;
        process_input(c);
    }
    if (c->closed)
        return;
    if (c->paused || c->draining)
        uv_read_stop(stream);
    flush(c);
    maybe_finish(c);
}

/* The allow-list (srv_options_t): true when it is empty, or the peer's credentials as the
 * kernel gives them (SO_PEERCRED: not forgeable by the peer) name an allowed uid or gid. */
static bool peer_allowed(const srv_t *s, uv_pipe_t *pipe)
{
    if (s->n_allow_uids == 0 && s->n_allow_gids == 0)
        return true;
    uv_os_fd_t fd;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (uv_fileno((uv_handle_t *)pipe, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    for (size_t i = 0; i < s->n_allow_uids; i++)
        if (s->allow_uids[i] == cred.uid)
            return true;
    for (size_t i = 0; i < s->n_allow_gids; i++)
        if (s->allow_gids[i] == cred.gid)
            return true;
    return false;
}

static void on_connection(uv_stream_t *server, int status)
{
    srv_t *s = server->data;
    if (status < 0)
        return;
    srv_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = s;
    c->id = ++s->next_conn_id;
    uv_pipe_init(s->loop, &c->pipe, 0);
    c->pipe.data = c;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    srv_metrics_connections(s->metrics, 1);
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        conn_close(c);
        return;
    }
    if (!peer_allowed(s, &c->pipe)) {
        static unsigned long refused;
        if (refused++ % 1000 == 0)
            srv_log(SRV_LOG_WARN, "connection refused: peer not in server.allow_uids/allow_gids",
                    NULL);
        srv__error(c, 0, "peer_not_allowed", "this uid/gid is not allowed on this socket");
        c->draining = true;
        flush(c);
        return;
    }
    if (s->nconns > s->max_connections) {
        static unsigned long refused;
        if (refused++ % 1000 == 0)
            srv_log(SRV_LOG_WARN, "connection refused: max_connections reached", NULL);
        srv__error(c, 0, "too_many_connections", "the daemon is at max_connections; closing");
        c->draining = true;
        flush(c);
        return;
    }
    if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0)
        conn_close(c);
}

/* Is a daemon answering on path? Connects and sees. */
static bool alive(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/*
 * Creates the socket's directory when missing (one level, as a runtime directory is). The
 * non-root fallback /tmp/tokentriage-<uid> could have been made first by anyone: it must be
 * ours, a real directory, and closed to others. Returns 0 or -1 with the reason in err.
 */
static int make_dir(const char *path, char *err, size_t err_size)
{
    char dir[512];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    bool shared_tmp = strncmp(dir, "/tmp/tokentriage-", 17) == 0; /* tt_socket_path's fallback */
    mkdir(dir, shared_tmp ? 0700 : 0755);
    struct stat st;
    if (shared_tmp && (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
                       (st.st_mode & 077) != 0)) {
        snprintf(err, err_size, "%s must be a directory of this user closed to others", dir);
        return -1;
    }
    return 0;
}

static int bind_socket(srv_t *s, unsigned mode, char *err, size_t err_size)
{
    struct stat st;
    if (strlen(s->path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(err, err_size, "socket path %s is too long", s->path);
        return SRV_ELISTEN;
    }
    if (lstat(s->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, err_size, "%s exists and is not a socket; not replacing it", s->path);
            return SRV_ELISTEN;
        }
        if (alive(s->path)) {
            snprintf(err, err_size, "another tokentriage is already serving on %s", s->path);
            return SRV_EINUSE;
        }
        unlink(s->path); /* stale: its daemon is gone */
        srv_log(SRV_LOG_INFO, "replaced a stale socket", "socket", s->path, NULL);
    }
    if (make_dir(s->path, err, err_size) != 0)
        return SRV_ELISTEN;
    uv_pipe_init(s->loop, &s->listener, 0);
    s->listener.data = s;
    mode_t old = umask(0777 & ~mode); /* the socket is born with its mode: no window */
    int rc = uv_pipe_bind(&s->listener, s->path);
    umask(old);
    if (rc == 0)
        chmod(s->path, mode);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 1024, on_connection);
    if (rc != 0) {
        snprintf(err, err_size, "cannot listen on %s: %s", s->path, uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        return SRV_ELISTEN;
    }
    s->listening = true;
    return 0;
}

int srv_start(srv_t **out, uv_loop_t *loop, const srv_options_t *opt, struct gov_engine *engine,
              srv_metrics_t *metrics, char *err, size_t err_size)
{
    *out = NULL;
    /* a client that goes away with answers in flight must cost an EPIPE, not the process */
    signal(SIGPIPE, SIG_IGN);
    srv_t *s = calloc(1, sizeof(*s));
    if (!s)
        return SRV_ENOMEM;
    s->loop = loop;
    s->engine = engine;
    s->metrics = metrics;
    s->max_connections = opt->max_connections ? opt->max_connections : SRV_DEFAULT_MAX_CONNECTIONS;
    s->out_limit = opt->out_limit ? opt->out_limit : SRV_DEFAULT_OUT_LIMIT;
    s->n_allow_uids = opt->n_allow_uids;
    s->n_allow_gids = opt->n_allow_gids;
    if (s->n_allow_uids > SRV_ALLOW_MAX || s->n_allow_gids > SRV_ALLOW_MAX) {
        snprintf(err, err_size, "at most %d allowed uids and %d gids", SRV_ALLOW_MAX,
                 SRV_ALLOW_MAX);
        free(s);
        return SRV_ELISTEN;
    }
    if (s->n_allow_uids)
        memcpy(s->allow_uids, opt->allow_uids, s->n_allow_uids * sizeof(uint32_t));
    if (s->n_allow_gids)
        memcpy(s->allow_gids, opt->allow_gids, s->n_allow_gids * sizeof(uint32_t));
    s->path = strdup(opt->socket_path);
    s->node = strdup(opt->node ? opt->node : "localhost");
    s->version = strdup(opt->version ? opt->version : "");
    if (!s->path || !s->node || !s->version) {
        srv_free(s);
        return SRV_ENOMEM;
    }
    int rc = bind_socket(s, opt->socket_mode ? opt->socket_mode : SRV_DEFAULT_MODE, err, err_size);
    if (rc == 0)
        rc = srv__http_start(s, opt, err, err_size);
    if (rc != 0) {
        srv_stop(s);
        /* the listener's close is already queued: the caller runs the loop, then frees */
        *out = s;
        return rc;
    }
    *out = s;
    return 0;
}

void srv_set_ready(srv_t *s, srv_ready_fn fn, void *ud)
{
    s->ready = fn;
    s->ready_ud = ud;
}

void srv_stop(srv_t *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    if (s->listening) {
        uv_close((uv_handle_t *)&s->listener, NULL);
        unlink(s->path);
        s->listening = false;
    }
    srv__http_stop(s);
    for (srv_conn_t *c = s->conns; c; c = c->next)
        conn_close(c);
}

void srv_free(srv_t *s)
{
    if (!s)
        return;
    srv__dispatch_free(s);
    free(s->path);
    free(s->node);
    free(s->version);
    free(s);
}
