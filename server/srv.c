/*
 * The decision socket: listening, accepting, and the libuv side of each connection. What the
 * bytes mean (reassembly, framing, answers in order, back-pressure) is the connection's stream
 * (stream.c, no libuv in it); what a request does is the handler's. This file reads into the
 * buffer the stream names, hands the bytes over, writes what the stream has to write, and
 * stops or resumes reading as the stream says.
 *
 * Reading. An idle connection owns no buffer: libuv reads into one 64 KiB buffer shared by the
 * whole server, and only the tail of a message cut by the read is kept by the stream (at most
 * STREAM_IN_CAP). Ten thousand idle connections therefore cost their libuv handle and this
 * struct, nothing more.
 *
 * Writing. After each read callback (or completion) the whole of the stream's `fill` goes out
 * in one uv_write (libuv tries the write at once, so there is one syscall per batch of
 * answers, not per answer). While it is in flight, new answers gather in the other buffer.
 *
 * Back-pressure. A stream over its limits pauses; its connection stops being read until a
 * completed write lets the stream resume. A client that never reads thus costs at most about
 * two out_limits and STREAM_IN_CAP, however much it sends.
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

#include "door.h"
#include "refused.h"
#include "tt_log.h"
#include "srv_int.h"
#include "tt_clock.h"
#include "tt_path.h"
#include "tt_peer.h"

/* The path of a socket error: the option it comes from (server.socket, or -s in its place). */
#define SOCKET_FIELD "server.socket"

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void flush(srv_conn_t *c);

static void on_conn_closed(uv_handle_t *h)
{
    srv_conn_t *c = h->data;
    srv_t *s = c->srv;
    tt_queue_remove(&c->node);
    s->nconns--;
    srv_metrics_connections(s->metrics, -1);
    /* after the handle: a write cancelled by the close still had the stream's buffer */
    stream_free(&c->st); /* the handler releases what it holds for the connection */
    free(c);
}

static void conn_close(srv_conn_t *c)
{
    if (c->closed)
        return;
    c->closed = true;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* After the stream took bytes or answers: close it when it failed or is done, write what it
 * has, and stop reading while it is paused or draining. */
static void settle(srv_conn_t *c)
{
    if (c->closed)
        return;
    if (c->st.failed) {
        conn_close(c);
        return;
    }
    if (c->st.paused || c->st.draining)
        uv_read_stop((uv_stream_t *)&c->pipe);
    flush(c);
    if (!c->closed && stream_finished(&c->st))
        conn_close(c);
}

/* Reads again once the stream can take requests again. */
static void maybe_resume(srv_conn_t *c)
{
    if (c->closed || !c->st.paused)
        return;
    bool go = stream_resume(&c->st, tt_wall_ns(), uv_hrtime());
    settle(c);
    if (go && !c->closed && uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0)
        conn_close(c);
}

/* The stream's wake: a completion left answers to write. */
static void on_wake(stream_t *st)
{
    srv_conn_t *c = st->shell;
    settle(c);
    maybe_resume(c);
}

static void on_write(uv_write_t *req, int status)
{
    srv_conn_t *c = req->data;
    stream_flush_end(&c->st);
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    settle(c);
    maybe_resume(c);
}

static void flush(srv_conn_t *c)
{
    const uint8_t *data;
    size_t len;
    if (c->closed || !stream_flush_begin(&c->st, &data, &len))
        return;
    uv_buf_t b = uv_buf_init((char *)data, (unsigned)len);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_write) != 0) {
        stream_flush_end(&c->st);
        conn_close(c);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    srv_conn_t *c = h->data;
    uint8_t *p;
    size_t cap;
    stream_read_buf(&c->st, c->srv->rbuf, sizeof(c->srv->rbuf), &p, &cap);
    *buf = uv_buf_init((char *)p, (unsigned)cap);
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
    if (dup_fd >= 0 && srv__http_adopt(c->srv, dup_fd, data, len, &c->st) != 0)
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
        stream_end(&c->st);
        settle(c);
        return;
    }
    if (nread < 0) {
        conn_close(c);
        return;
    }
    stream_feed(&c->st, (const uint8_t *)buf->base, (size_t)nread, tt_wall_ns(), uv_hrtime());
    settle(c);
}

/* Answers an error the stream did not meet (refused at accept), then closes. The stream's
 * handler counts it (door="socket"); it is logged as every door's refusals are (refused.h). */
static void refuse(srv_conn_t *c, const char *code, const char *message)
{
    if (c->srv->refused)
        srv_refused_logged(c->srv->refused, SRV_DOOR_SOCKET, code);
    stream_error(&c->st, 0, code, message);
    stream_end(&c->st);
    settle(c);
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
    stream_init(&c->st, s->handler, s->out_limit);
    c->st.id = ++s->next_conn_id;
    c->st.shell = c;
    c->st.wake = on_wake;
    uv_pipe_init(s->loop, &c->pipe, 0);
    c->pipe.data = c;
    tt_queue_insert_head(&s->conns, &c->node);
    s->nconns++;
    srv_metrics_connections(s->metrics, 1);
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        conn_close(c);
        return;
    }
    /* who is at the other end, as the kernel says; the door decides who may spend */
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0)
        c->st.peer_cred = tt_peer_cred(fd, &c->st.peer_uid, &c->st.peer_gid);
    door_caller_t who = {.door = SRV_DOOR_SOCKET,
                         .cred = c->st.peer_cred,
                         .uid = c->st.peer_uid,
                         .gid = c->st.peer_gid};
    if (!door_peer_allowed(s->door, &who)) {
        refuse(c, tt_err_name(TT_ERR_PEER), "this uid/gid is not allowed on this socket");
        return;
    }
    if (s->nconns > s->max_connections) {
        refuse(c, "too_many_connections", "the daemon is at max_connections; closing");
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
 * ours, a real directory, and closed to others. Returns 0 or SRV_ELISTEN described in err.
 */
static int make_dir(const char *path, tt_err_t *err)
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
        return tt_err_set(err, SRV_ELISTEN, SOCKET_FIELD,
                          "%s must be a directory of this user closed to others", dir);
    }
    return 0;
}

int srv_socket_check(const char *path, const char *field, bool make_dir, tt_err_t *err)
{
    struct stat st;
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return tt_err_set(err, SRV_ELISTEN, field, "socket path %s is too long", path);
    if (lstat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
        return tt_err_set(err, SRV_ELISTEN, field,
                          "%s exists and is not a socket; not replacing it", path);
    char dir[512], parent[512];
    snprintf(dir, sizeof(dir), "%s", path);
    if (!tt_path_dirname(dir))
        return 0; /* relative to the working directory: bind says */
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return tt_err_set(err, SRV_ELISTEN, field, "%s: %s is not a directory", path, dir);
        if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0)
            return tt_err_set(err, SRV_ELISTEN, field, "%s: cannot make a socket in %s: %s", path,
                              dir, strerror(errno));
        return 0;
    }
    if (errno != ENOENT || !make_dir)
        return tt_err_set(err, SRV_ELISTEN, field, "%s: its directory %s: %s", path, dir,
                          strerror(errno));
    const char *why = tt_path_cannot_make(dir, parent, sizeof(parent));
    if (why)
        return tt_err_set(err, SRV_ELISTEN, field, "%s: cannot make its directory: %s: %s", path,
                          parent, why);
    return 0;
}

static int bind_socket(srv_t *s, unsigned mode, tt_err_t *err)
{
    struct stat st;
    if (srv_socket_check(s->path, SOCKET_FIELD, true, err) != 0)
        return SRV_ELISTEN;
    if (lstat(s->path, &st) == 0) {
        if (alive(s->path))
            return tt_err_set(err, SRV_EINUSE, SOCKET_FIELD,
                              "another tokentriage is already serving on %s", s->path);
        unlink(s->path); /* stale: its daemon is gone */
        tt_log(TT_LOG_INFO, "replaced a stale socket", TT_STR("socket", s->path));
    }
    if (make_dir(s->path, err) != 0)
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
        uv_close((uv_handle_t *)&s->listener, NULL);
        return tt_err_set(err, SRV_ELISTEN, SOCKET_FIELD, "cannot listen on %s: %s", s->path,
                          uv_strerror(rc));
    }
    s->listening = true;
    return 0;
}

int srv_start(srv_t **out, uv_loop_t *loop, const srv_options_t *opt,
              const stream_handler_t *handler, srv_metrics_t *metrics, tt_err_t *err)
{
    *out = NULL;
    /* a client that goes away with answers in flight must cost an EPIPE, not the process */
    signal(SIGPIPE, SIG_IGN);
    srv_t *s = calloc(1, sizeof(*s));
    if (s)
        tt_queue_init(&s->conns);
    if (!s)
        return tt_err_set(err, SRV_ENOMEM, "", "out of memory");
    s->loop = loop;
    s->handler = handler;
    s->door = opt->door;
    s->refused = opt->refused;
    s->metrics = metrics;
    s->max_connections = opt->max_connections ? opt->max_connections : SRV_DEFAULT_MAX_CONNECTIONS;
    s->out_limit = opt->out_limit ? opt->out_limit : SRV_DEFAULT_OUT_LIMIT;
    s->path = strdup(opt->socket_path);
    if (!s->path) {
        srv_free(s);
        return tt_err_set(err, SRV_ENOMEM, "", "out of memory");
    }
    int rc = bind_socket(s, opt->socket_mode ? opt->socket_mode : SRV_DEFAULT_MODE, err);
    if (rc == 0)
        rc = srv__http_start(s, opt, err);
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

void srv_set_status(srv_t *s, srv_status_fn fn, void *ud)
{
    s->status = fn;
    s->status_ud = ud;
}

void srv_set_fleet(srv_t *s, srv_status_fn fn, void *ud)
{
    s->fleet = fn;
    s->fleet_ud = ud;
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
    tt_queue_t *q;
    tt_queue_foreach(q, &s->conns) /* the close is asynchronous: each stays on the list */
        conn_close(tt_queue_data(q, srv_conn_t, node));
}

void srv_free(srv_t *s)
{
    if (!s)
        return;
    free(s->path);
    free(s);
}
