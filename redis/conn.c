/*
 * One RESP connection on libuv, plain or TLS (conn.h).
 *
 * Bytes in: libuv reads into the connection's buffer; with TLS they go into the session's
 * memory BIO and come out of SSL_read as plaintext. Either way they feed hiredis' reader, whose
 * objects are built in the connection's arena (reply.c); each complete reply goes to the oldest
 * command waiting (a FIFO of functions: Redis answers in order) or, on a subscribed connection,
 * to the handler as a message. The arena is reset after each reply is handled.
 *
 * Bytes out: commands are appended to `out`; when no write is in flight, `out` (encrypted by
 * SSL_write into the other memory BIO, with TLS) becomes the buffer of one uv_write, and what is
 * sent meanwhile gathers for the next one. So the commands of one loop turn go out together, as
 * hiredis' did, and at most one write is in flight.
 *
 * Connecting: a unix socket path is connected as it is. A name is resolved off the loop, and
 * each address it resolves to is tried in getaddrinfo's order (RFC 6724's, as the system sorts
 * them: `localhost` may give ::1 before 127.0.0.1, a managed Redis' name several A records)
 * until one connects: a refusal moves on at once, and an address that does not answer is left
 * when its share of connect_ms ends (what is left of it divided by the addresses left; the last
 * one has the rest, and the caller's own deadline ends it). Each address gets a fresh socket (the
 * next may be of another family), so the handle is closed and made again between two. The
 * connection's name (the host as configured) is what TLS checks and SNI carries, never the
 * address reached. The addresses that failed are in the connection's words: the failure names
 * each and why, and rds_conn_route says where a connection went when the first did not answer.
 *
 * Closing never frees at once: the handles are closed through libuv, a name lookup still running
 * is cancelled, and the memory goes when all are done. A reply function may therefore close
 * the connection it was called from: the commands still waiting are answered NULL right away,
 * the reader stops, and nothing is read after.
 */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "conn.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "store_int.h"

#define DEFAULT_MAX 67108864 /* 64 MiB */
#define READ_BUF 65536
#define TRIED_MAX 384 /* the words on the addresses that failed; a name of many is cut */

typedef struct buf {
    char *data;
    size_t len, cap;
} buf_t;

typedef struct waiting {
    rds_conn_reply_fn *fn;
    void *arg;
} waiting_t;

struct rds_conn {
    uv_loop_t *loop;
    union {
        uv_tcp_t tcp;
        uv_pipe_t pipe;
        uv_handle_t handle;
        uv_stream_t stream;
    } h;
    uv_getaddrinfo_t gai;
    uv_timer_t attempt; /* the address tried's share of connect_ms, while others are left */
    uv_connect_t connect_req;
    uv_write_t write_req;
    const rds_conn_handler_t *handler;
    void *ctx;
    char name[RDS_NODE_NAME_MAX];
    char host[RDS_HOST_MAX + 1];
    int port;
    size_t max_out, max_in;
    /* the name's addresses (NULL until resolved), the one tried now, and those that failed */
    struct addrinfo *addrs, *trying;
    uint64_t connect_ms, connect_by; /* the budget for all of them; when it ends (loop time) */
    char tried[TRIED_MAX];           /* "[::1]:6379: connection refused; ...", or "" */
    char route[TRIED_MAX + 96];      /* rds_conn_route's words ("<at>, after <tried>"), or "" */
    /* TLS: the session between two memory BIOs (rbio: bytes read, wbio: bytes to write) */
    rds_tls_t *tls; /* a reference of the connection's own */
    SSL *ssl;
    BIO *rbio, *wbio;
    bool transport_up; /* the socket connected */
    bool up;           /* ... and the TLS handshake done: commands flow */
    bool writing;      /* a uv_write of wbuf is in flight */
    bool closing;
    bool resolving; /* a name lookup in libuv's threadpool */
    int handles;    /* libuv handles not closed yet (the stream, the attempt's timer) */
    bool subscribed;
    bool wipe; /* a secret went out: wbuf is wiped after its write */
    redisReader *reader;
    rds_replies_t replies;
    waiting_t *q; /* a ring of the commands waiting for their replies */
    size_t q_head, q_len, q_cap;
    buf_t out, wbuf;
    char rbuf[READ_BUF];
};

/* Zeroes what may have held a secret (an AUTH command); NULL or empty is fine. */
static void wipe(void *p, size_t n)
{
    if (p != NULL && n > 0)
        explicit_bzero(p, n);
}

/* ---- life --------------------------------------------------------------------------------- */

static void free_if_done(rds_conn_t *c)
{
    if (!c->closing || c->resolving || c->handles > 0)
        return;
    if (c->addrs)
        uv_freeaddrinfo(c->addrs);
    if (c->reader)
        redisReaderFree(c->reader);
    tt_arena_free(&c->replies.arena);
    SSL_free(c->ssl); /* frees both BIOs */
    rds_tls_free(c->tls);
    wipe(c->out.data, c->out.cap);
    wipe(c->wbuf.data, c->wbuf.cap);
    free(c->out.data);
    free(c->wbuf.data);
    free(c->q);
    free(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    rds_conn_t *c = h->data;
    c->handles--;
    free_if_done(c);
}

/* Ends the connection: the waiting commands answered NULL, then the handler told (when tell),
 * then the handle closed. Idempotent. */
static void shut(rds_conn_t *c, const char *why, bool tell)
{
    if (c->closing)
        return;
    c->closing = true;
    c->up = false;
    while (c->q_len > 0) {
        waiting_t w = c->q[c->q_head];
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        if (w.fn)
            w.fn(w.arg, c, NULL);
    }
    if (tell && c->handler->closed)
        c->handler->closed(c->ctx, c, why);
    if (c->resolving)
        uv_cancel((uv_req_t *)&c->gai);
    if (!uv_is_closing(&c->h.handle)) /* (between two addresses it is, and is counted) */
        uv_close(&c->h.handle, on_handle_closed);
    uv_close((uv_handle_t *)&c->attempt, on_handle_closed);
    free_if_done(c);
}

/* shut() for a failure: "redis: connection to NAME lost: WHAT" (or the prefix given). */
static void fail(rds_conn_t *c, const char *fmt, const char *what)
{
    char why[1024];
    snprintf(why, sizeof(why), fmt, c->name, what);
    shut(c, why, true);
}

void rds_conn_close(rds_conn_t *c)
{
    if (c != NULL)
        shut(c, NULL, false);
}

/* ---- out ---------------------------------------------------------------------------------- */

static int reserve(buf_t *b, size_t more)
{
    if (b->cap - b->len >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < more)
        cap *= 2;
    char *data = malloc(cap);
    if (data == NULL)
        return -1;
    if (b->len)
        memcpy(data, b->data, b->len);
    if (b->data) {
        wipe(b->data, b->cap);
        free(b->data);
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static void pump(rds_conn_t *c);

static void on_write(uv_write_t *req, int status)
{
    rds_conn_t *c = req->data;
    c->writing = false;
    if (c->wipe)
        wipe(c->wbuf.data, c->wbuf.len);
    c->wipe = false;
    c->wbuf.len = 0;
    if (status < 0) {
        if (status != UV_ECANCELED)
            fail(c, "redis: connection to %s lost: %s", uv_strerror(status));
        return;
    }
    pump(c);
}

/* Starts the next write, when none is in flight: the commands gathered in `out` (encrypted,
 * with TLS) and the TLS session's own bytes (its handshake). */
static void pump(rds_conn_t *c)
{
    if (c->writing || !c->transport_up || c->closing)
        return;
    if (c->ssl != NULL) {
        if (c->up && c->out.len > 0) {
            int n = SSL_write(c->ssl, c->out.data, (int)c->out.len); /* a memory BIO takes all */
            explicit_bzero(c->out.data, c->out.len);
            c->out.len = 0;
            if (n <= 0) {
                char why[200];
                ERR_error_string_n(ERR_get_error(), why, sizeof(why));
                ERR_clear_error();
                fail(c, "redis: connection to %s lost: TLS: %s", why);
                return;
            }
        }
        size_t pending = BIO_ctrl_pending(c->wbio);
        if (pending > 0) {
            if (reserve(&c->wbuf, pending) < 0) {
                fail(c, "redis: connection to %s lost: %s", "out of memory");
                return;
            }
            int n = BIO_read(c->wbio, c->wbuf.data + c->wbuf.len, (int)pending);
            c->wbuf.len += n > 0 ? (size_t)n : 0;
        }
    } else if (c->out.len > 0) {
        buf_t t = c->wbuf;
        c->wbuf = c->out;
        c->out = t;
        c->out.len = 0;
    }
    if (c->wbuf.len == 0)
        return;
    uv_buf_t b = uv_buf_init(c->wbuf.data, (unsigned)c->wbuf.len);
    c->write_req.data = c;
    int rc = uv_write(&c->write_req, &c->h.stream, &b, 1, on_write);
    if (rc < 0) {
        c->wbuf.len = 0;
        fail(c, "redis: connection to %s lost: %s", uv_strerror(rc));
        return;
    }
    c->writing = true;
}

int rds_conn_send(rds_conn_t *c, const char *cmd, size_t len, rds_conn_reply_fn *fn, void *arg)
{
    if (c->closing || c->out.len + len > c->max_out || reserve(&c->out, len) < 0)
        return -1;
    if (c->q_len == c->q_cap) {
        size_t cap = c->q_cap ? c->q_cap * 2 : 16;
        waiting_t *q = malloc(cap * sizeof(*q));
        if (q == NULL)
            return -1;
        for (size_t i = 0; i < c->q_len; i++)
            q[i] = c->q[(c->q_head + i) % c->q_cap];
        free(c->q);
        c->q = q;
        c->q_head = 0;
        c->q_cap = cap;
    }
    memcpy(c->out.data + c->out.len, cmd, len);
    c->out.len += len;
    c->q[(c->q_head + c->q_len) % c->q_cap] = (waiting_t){fn, arg};
    c->q_len++;
    if (c->up)
        pump(c);
    return 0;
}

int rds_conn_send_argv(rds_conn_t *c, int argc, const char **argv, const size_t *argvlen,
                       rds_conn_reply_fn *fn, void *arg)
{
    char *cmd = NULL;
    int len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (len < 0)
        return -1;
    int rc = rds_conn_send(c, cmd, (size_t)len, fn, arg);
    explicit_bzero(cmd, (size_t)len);
    free(cmd);
    c->wipe = true; /* it may hold a password: wiped from wbuf once written */
    return rc;
}

const char *rds_conn_route(const rds_conn_t *c)
{
    return c->route;
}

const char *rds_conn_stage(const rds_conn_t *c)
{
    return !c->transport_up ? "connecting"
           : !c->up         ? "in the TLS handshake"
                            : "waiting for the replies";
}

void rds_conn_subscribed(rds_conn_t *c)
{
    c->subscribed = true;
}

/* ---- in ----------------------------------------------------------------------------------- */

/* One complete reply: to the oldest command waiting, or a message, or a reason to drop. */
static void dispatch(rds_conn_t *c, redisReply *reply)
{
    if (c->q_len > 0) {
        waiting_t w = c->q[c->q_head];
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        if (w.fn)
            w.fn(w.arg, c, reply);
    } else if (c->subscribed) {
        if (c->handler->message)
            c->handler->message(c->ctx, c, reply);
    } else if (reply->type == REDIS_REPLY_ERROR) { /* Redis' last word before it closes */
        char what[200];
        snprintf(what, sizeof(what), "%.*s", (int)(reply->len > 150 ? 150 : reply->len),
                 reply->str);
        fail(c, "redis: connection to %s lost: %s", what);
    } else {
        /* hiredis 0.14 would assert here; we drop the connection and say what came */
        char what[64];
        snprintf(what, sizeof(what), "a reply nobody asked for (RESP type %d)", reply->type);
        fail(c, "redis: connection to %s lost: %s", what);
    }
}

static void feed(rds_conn_t *c, const char *data, size_t len)
{
    if (redisReaderFeed(c->reader, data, len) != REDIS_OK) {
        fail(c, "redis: connection to %s lost: %s", "out of memory");
        return;
    }
    while (!c->closing) {
        void *reply = NULL;
        if (redisReaderGetReply(c->reader, &reply) != REDIS_OK) {
            /* reply.c failed the reader on purpose (it says why), or the bytes are not RESP */
            fail(c, "redis: connection to %s lost: %s",
                 c->replies.refused[0] ? c->replies.refused : c->reader->errstr);
            return;
        }
        if (reply == NULL)
            break;
        dispatch(c, reply);
        rds__replies_done(&c->replies);
    }
    if (!c->closing && c->reader->len - c->reader->pos > c->max_in) {
        char what[96];
        snprintf(what, sizeof(what), "a reply of more than %zu bytes", c->max_in);
        fail(c, "redis: connection to %s lost: %s", what);
    }
}

void rds__conn_feed(rds_conn_t *c, const char *data, size_t len)
{
    if (!c->closing)
        feed(c, data, len);
}

static void tls_handshake(rds_conn_t *c);

static void tls_read(rds_conn_t *c)
{
    char plain[16384];
    while (!c->closing) {
        int n = SSL_read(c->ssl, plain, sizeof(plain));
        if (n > 0) {
            feed(c, plain, (size_t)n);
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ)
            break;
        char why[200];
        if (e == SSL_ERROR_ZERO_RETURN)
            snprintf(why, sizeof(why), "closed by the server (TLS close_notify)");
        else
            ERR_error_string_n(ERR_get_error(), why, sizeof(why));
        ERR_clear_error();
        fail(c, "redis: connection to %s lost: TLS: %s", why);
        return;
    }
    explicit_bzero(plain, sizeof(plain));
    pump(c); /* the session may have something to say (a key update) */
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    rds_conn_t *c = h->data;
    *buf = uv_buf_init(c->rbuf, sizeof(c->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    rds_conn_t *c = s->data;
    (void)buf;
    if (c->closing || n == 0)
        return;
    if (n < 0) {
        fail(c,
             n == UV_EOF ? "redis: connection to %s closed by the server%s"
                         : "redis: connection to %s lost: %s",
             n == UV_EOF ? "" : uv_strerror((int)n));
        return;
    }
    if (c->ssl == NULL) {
        feed(c, c->rbuf, (size_t)n);
        return;
    }
    if (BIO_write(c->rbio, c->rbuf, (int)n) != (int)n) {
        fail(c, "redis: connection to %s lost: %s", "out of memory");
        return;
    }
    if (!c->up)
        tls_handshake(c);
    if (c->up && !c->closing)
        tls_read(c);
}

/* ---- connecting --------------------------------------------------------------------------- */

static void now_up(rds_conn_t *c)
{
    c->up = true;
    if (c->handler->connected)
        c->handler->connected(c->ctx, c);
    pump(c);
}

static void tls_handshake(rds_conn_t *c)
{
    int rc = SSL_do_handshake(c->ssl);
    if (rc == 1) {
        now_up(c);
        return;
    }
    int e = SSL_get_error(c->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        pump(c); /* our part of the handshake */
        return;
    }
    char why[300];
    rds_tls_why(c->tls, c->ssl, e, c->host, why, sizeof(why));
    fail(c, "redis: %s: TLS handshake: %s", why);
}

static void attempt_failed(rds_conn_t *c, const char *why);

static void on_connect(uv_connect_t *req, int status)
{
    rds_conn_t *c = req->data;
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0) {
        attempt_failed(c, uv_strerror(status));
        return;
    }
    uv_timer_stop(&c->attempt);
    c->transport_up = true;
    if (c->port != 0) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        uv_tcp_keepalive(&c->h.tcp, 1, 15); /* a Sentinel subscription is quiet for hours */
    }
    int rc = uv_read_start(&c->h.stream, on_alloc, on_read);
    if (rc < 0) {
        fail(c, "redis: connect %s: %s", uv_strerror(rc));
        return;
    }
    if (c->tls == NULL) {
        now_up(c);
        return;
    }
    c->ssl = rds_tls_session(c->tls, c->host);
    c->rbio = BIO_new(BIO_s_mem());
    c->wbio = BIO_new(BIO_s_mem());
    if (c->ssl == NULL || c->rbio == NULL || c->wbio == NULL) {
        BIO_free(c->rbio);
        BIO_free(c->wbio);
        c->rbio = c->wbio = NULL;
        fail(c, "redis: connect %s: %s", "cannot start a TLS session");
        return;
    }
    SSL_set_bio(c->ssl, c->rbio, c->wbio); /* the session owns them now */
    tls_handshake(c);
}

/* "127.0.0.1:6379", "[::1]:6379": an address as the messages name it. */
static void address_name(const struct sockaddr *sa, char *out, size_t size)
{
    char ip[64] = "?";
    uv_ip_name(sa, ip, sizeof(ip));
    bool v6 = sa->sa_family == AF_INET6;
    int port = ntohs(v6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
                        : ((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, size, v6 ? "[%s]:%d" : "%s:%d", ip, port);
}

static void on_attempt_timeout(uv_timer_t *t)
{
    rds_conn_t *c = t->data;
    char why[64];
    snprintf(why, sizeof(why), "connection timed out (its share of %llu ms)",
             (unsigned long long)c->connect_ms);
    attempt_failed(c, why);
}

/* Connects to c->trying. With addresses left after it, it has its share of what is left of
 * connect_ms. */
static void try_address(rds_conn_t *c)
{
    uint64_t left = 0;
    for (const struct addrinfo *a = c->trying; a != NULL; a = a->ai_next)
        left++;
    if (left > 1 && c->connect_ms > 0) {
        uint64_t now = uv_now(c->loop);
        uint64_t share = (c->connect_by > now ? c->connect_by - now : 0) / left;
        uv_timer_start(&c->attempt, on_attempt_timeout, share > 0 ? share : 1, 0);
    }
    c->connect_req.data = c;
    int rc = uv_tcp_connect(&c->connect_req, &c->h.tcp, c->trying->ai_addr, on_connect);
    if (rc < 0)
        attempt_failed(c, uv_strerror(rc));
}

static void on_attempt_closed(uv_handle_t *h)
{
    rds_conn_t *c = h->data;
    if (c->closing) {
        on_handle_closed(h);
        return;
    }
    uv_tcp_init(c->loop, &c->h.tcp); /* without a socket family it cannot fail */
    c->h.handle.data = c;
    try_address(c);
}

/* The address tried failed, for `why`: the next one, on a fresh socket; or, with none left, the
 * connection fails naming each address and why (a unix socket, or a name of one address: only
 * why, as ever). */
static void attempt_failed(rds_conn_t *c, const char *why)
{
    uv_timer_stop(&c->attempt);
    if (c->trying == NULL || (c->trying == c->addrs && c->trying->ai_next == NULL)) {
        fail(c, "redis: connect %s: %s", why);
        return;
    }
    char at[80];
    address_name(c->trying->ai_addr, at, sizeof(at));
    size_t used = strlen(c->tried);
    snprintf(c->tried + used, sizeof(c->tried) - used, "%s%s: %s", used ? "; " : "", at, why);
    if ((c->trying = c->trying->ai_next) == NULL) {
        fail(c, "redis: connect %s: %s", c->tried);
        return;
    }
    address_name(c->trying->ai_addr, at, sizeof(at));
    snprintf(c->route, sizeof(c->route), "%s, after %s", at, c->tried);
    uv_close(&c->h.handle, on_attempt_closed);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    rds_conn_t *c = req->data;
    c->resolving = false;
    if (c->closing) {
        uv_freeaddrinfo(res);
        free_if_done(c);
        return;
    }
    if (status < 0) {
        uv_freeaddrinfo(res);
        fail(c, "redis: connect %s: cannot resolve the host: %s", uv_strerror(status));
        return;
    }
    c->addrs = c->trying = res;
    try_address(c);
}

int rds_conn_open(uv_loop_t *loop, const rds_conn_options_t *o, const rds_conn_handler_t *h,
                  void *ctx, rds_conn_t **out)
{
    *out = NULL;
    rds_conn_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -1;
    c->loop = loop;
    c->handler = h;
    c->ctx = ctx;
    c->tls = rds_tls_ref(o->tls);
    c->port = o->port;
    c->max_out = o->max_out ? o->max_out : DEFAULT_MAX;
    c->max_in = o->max_in ? o->max_in : DEFAULT_MAX;
    c->connect_ms = o->connect_ms;
    c->connect_by = uv_now(loop) + o->connect_ms;
    snprintf(c->host, sizeof(c->host), "%s", o->host);
    snprintf(c->name, sizeof(c->name), "%s", o->name ? o->name : o->host);
    c->reader = redisReaderCreate();
    if (c->reader == NULL) {
        free(c);
        return -1;
    }
    rds__replies_attach(&c->replies, c->reader);
    int rc = c->port ? uv_tcp_init(loop, &c->h.tcp) : uv_pipe_init(loop, &c->h.pipe, 0);
    if (rc < 0) {
        redisReaderFree(c->reader);
        free(c);
        return -1;
    }
    c->h.handle.data = c;
    uv_timer_init(loop, &c->attempt);
    c->attempt.data = c;
    c->handles = 2;
    *out = c;
    if (c->port == 0) {
        c->connect_req.data = c;
        uv_pipe_connect(&c->connect_req, &c->h.pipe, c->host, on_connect);
        return 0;
    }
    char port[8];
    snprintf(port, sizeof(port), "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    c->gai.data = c;
    c->resolving = true;
    rc = uv_getaddrinfo(loop, &c->gai, on_resolved, c->host, port, &hints);
    if (rc < 0) {
        c->resolving = false;
        c->closing = true;
        uv_close(&c->h.handle, on_handle_closed); /* frees it */
        uv_close((uv_handle_t *)&c->attempt, on_handle_closed);
        *out = NULL;
        return -1;
    }
    return 0;
}
