/*
 * The client library: one non-blocking unix socket driven by poll(2).
 *
 * Requests are encoded into an output buffer and written by tt_flush(); answers are read into
 * an input buffer and framed one at a time by tt_recv(). While flushing, the client also reads:
 * the daemon stops reading from a connection whose answers pile up unread (back-pressure), so a
 * client that only wrote could wait for ever on a full socket. Answers read early wait in the
 * input buffer, which is thereby bounded by what this client itself asked for.
 */
#include "tokentriage.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <fcntl.h>

#include "proto.h"

#define READ_CHUNK (64 * 1024)
#define AUTOFLUSH (256 * 1024) /* queued bytes that trigger a write without waiting for flush */

struct tt_client {
    int fd;
    int timeout_ms;
    bool broken; /* a transport or framing error: every later call fails with TT_EIO */
    uint64_t next_seq;
    size_t outstanding;
    tt_buf_t out; /* queued requests; out_sent bytes of it are already written */
    size_t out_sent;
    uint8_t *in; /* read answers: [in_pos, in_len) unconsumed */
    size_t in_len, in_pos, in_cap;
    size_t last_len; /* the answer tt_recv returned last, consumed on the next call */
};

const char *tt_strerror(int err)
{
    switch (err) {
    case TT_OK:
        return "ok";
    case TT_EARG:
        return "invalid argument";
    case TT_ECONNECT:
        return "cannot connect to the tokentriage socket";
    case TT_EIO:
        return "connection to the daemon lost";
    case TT_ETIMEDOUT:
        return "timed out waiting for the daemon";
    case TT_EPROTO:
        return "unreadable answer from the daemon";
    case TT_ESERVER:
        return "the daemon answered with an error";
    case TT_EBUSY:
        return "pipelined answers are still outstanding";
    case TT_ENOMEM:
        return "out of memory";
    default:
        return "unknown error";
    }
}

int tt_connect(tt_client_t **out, const char *path)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    *out = NULL;
    if (!path) {
        if (tt_socket_path(buf, sizeof(buf), NULL, NULL, 0))
            return TT_EARG;
        path = buf;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return TT_EARG;
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return TT_ECONNECT;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return TT_ECONNECT;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    tt_client_t *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return TT_ENOMEM;
    }
    c->fd = fd;
    c->timeout_ms = -1;
    *out = c;
    return 0;
}

void tt_close(tt_client_t *c)
{
    if (!c)
        return;
    close(c->fd);
    tt_buf_free(&c->out);
    free(c->in);
    free(c);
}

void tt_set_timeout(tt_client_t *c, int timeout_ms)
{
    c->timeout_ms = timeout_ms;
}

size_t tt_outstanding(const tt_client_t *c)
{
    return c->outstanding;
}

static int broken(tt_client_t *c, int err)
{
    c->broken = true;
    return err;
}

/* Reads what the socket has into the input buffer. Returns 0 (maybe nothing read) or TT_EIO. */
static int read_some(tt_client_t *c)
{
    if (c->in_pos > 0 && c->last_len == 0) { /* compact: nothing handed out points in here */
        memmove(c->in, c->in + c->in_pos, c->in_len - c->in_pos);
        c->in_len -= c->in_pos;
        c->in_pos = 0;
    }
    if (c->in_cap - c->in_len < READ_CHUNK) {
        size_t cap = c->in_cap ? c->in_cap * 2 : 2 * READ_CHUNK;
        uint8_t *p = realloc(c->in, cap);
        if (!p)
            return broken(c, TT_ENOMEM);
        c->in = p;
        c->in_cap = cap;
    }
    ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
    if (n > 0) {
        c->in_len += (size_t)n;
        return 0;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return 0;
    return broken(c, TT_EIO);
}

static int wait_for(tt_client_t *c, short events, short *revents)
{
    struct pollfd p = {.fd = c->fd, .events = events};
    int n;
    do
        n = poll(&p, 1, c->timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0)
        return TT_ETIMEDOUT;
    if (n < 0)
        return broken(c, TT_EIO);
    *revents = p.revents;
    return 0;
}

int tt_flush(tt_client_t *c)
{
    if (c->broken)
        return TT_EIO;
    while (c->out_sent < c->out.len) {
        ssize_t n = send(c->fd, c->out.data + c->out_sent, c->out.len - c->out_sent, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return broken(c, TT_EIO);
        short rev;
        int rc = wait_for(c, POLLIN | POLLOUT, &rev);
        if (rc)
            return rc;
        if ((rev & (POLLIN | POLLHUP | POLLERR)) && (rc = read_some(c)))
            return rc;
    }
    c->out.len = c->out_sent = 0;
    return 0;
}

/* Copies a wire string into a fixed array, truncating, always NUL-terminated. */
static void copy(char *dst, size_t size, proto_str_t s)
{
    size_t n = s.len < size - 1 ? s.len : size - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = 0;
}

static int read_error(wire_reader_t *rd, tt_response_t *r)
{
    uint32_t n;
    if (wire_read_map(rd, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, v;
        if (wire_read_str(rd, &k))
            return -1;
        if (wire_read_str(rd, &v) == 0) {
            if (wire_str_eq(k, "code"))
                copy(r->error_code, sizeof(r->error_code), v);
            else if (wire_str_eq(k, "message"))
                copy(r->error_message, sizeof(r->error_message), v);
        } else if (wire_skip(rd)) {
            return -1;
        }
    }
    return 0;
}

static int read_soft(wire_reader_t *rd, tt_response_t *r)
{
    uint32_t n;
    if (wire_read_array(rd, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t s;
        if (wire_read_str(rd, &s))
            return -1;
        if (r->nsoft < TT_MAX_SOFT)
            copy(r->soft_denied[r->nsoft++], sizeof(r->soft_denied[0]), s);
    }
    return 0;
}

static int read_headers(wire_reader_t *rd, tt_response_t *r)
{
    uint32_t n;
    if (wire_read_map(rd, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, v;
        if (wire_read_str(rd, &k) || wire_read_str(rd, &v))
            return -1;
        if (r->nheaders < TT_MAX_HEADERS) {
            tt_header_t *h = &r->headers[r->nheaders++];
            copy(h->name, sizeof(h->name), k);
            copy(h->value, sizeof(h->value), v);
        }
    }
    return 0;
}

/* [q, r, reset_ms] */
static int read_trio(wire_reader_t *rd, tt_trio_t *t)
{
    uint32_t n;
    if (wire_read_array(rd, &n) || n != 3)
        return -1;
    return wire_read_int(rd, &t->quota) || wire_read_int(rd, &t->remaining) ||
                   wire_read_int(rd, &t->reset_ms)
               ? -1
               : 0;
}

/* [id, "rpm"|"tpm", period_ms, quota, remaining, t_s] */
static int read_policy(wire_reader_t *rd, tt_disclosed_t *d)
{
    uint32_t n;
    proto_str_t id, type;
    if (wire_read_array(rd, &n) || n != 6 || wire_read_str(rd, &id) || wire_read_str(rd, &type))
        return -1;
    copy(d->policy_id, sizeof(d->policy_id), id);
    d->policy_tpm = wire_str_eq(type, "tpm");
    return wire_read_int(rd, &d->period_ms) || wire_read_int(rd, &d->quota) ||
                   wire_read_int(rd, &d->remaining) || wire_read_int(rd, &d->t_s)
               ? -1
               : 0;
}

unsigned tt_render_headers(const tt_disclosed_t *d, tt_header_t *out, unsigned cap)
{
    proto_disclosed_t p = {
        .has_policy = d->has_policy,
        .policy_tpm = d->policy_tpm,
        .has_requests = d->has_requests,
        .has_tokens = d->has_tokens,
        .period_ms = d->period_ms,
        .quota = d->quota,
        .remaining = d->remaining,
        .t_s = d->t_s,
        .requests = {d->requests.quota, d->requests.remaining, d->requests.reset_ms},
        .tokens = {d->tokens.quota, d->tokens.remaining, d->tokens.reset_ms},
        .retry_s = d->retry_s,
    };
    proto_rate_header_t h[PROTO_RATE_HEADERS_MAX];
    copy(p.policy_id, sizeof(p.policy_id),
         (proto_str_t){d->policy_id, (uint32_t)strnlen(d->policy_id, sizeof(d->policy_id))});
    unsigned n = proto_render_headers(&p, h);
    for (unsigned i = 0; i < n && i < cap; i++) {
        snprintf(out[i].name, sizeof(out[i].name), "%s", h[i].name);
        snprintf(out[i].value, sizeof(out[i].value), "%s", h[i].value);
    }
    return n;
}

/* Reads one answer map from the start of msg[0, len) into r and sets *used to its length.
 * Unknown keys are skipped: newer daemons may say more. TT_EPROTO when the bytes are not a
 * whole answer (cut short, or malformed). */
static int decode_response(const uint8_t *msg, size_t len, tt_response_t *r, size_t *used)
{
    wire_reader_t rd = {.pos = msg, .end = msg + len};
    uint32_t n;
    r->seq = 0;
    r->kind = TT_KIND_ERROR;
    r->error_code[0] = r->error_message[0] = 0;
    r->admit = 0;
    r->verdict[0] = r->limit[0] = r->code[0] = 0;
    r->remaining = -1;
    r->retry_after = r->reset_after = 0;
    r->nsoft = r->nheaders = 0;
    r->lease = 0;
    r->reservation = 0;
    r->settled = 0;
    r->already_settled = 0;
    r->charged = 0;
    r->released = 0;
    r->raw = msg;
    r->raw_len = len;
    memset(&r->disclosed, 0, sizeof(r->disclosed));
    r->disclosed.retry_s = -1;
    bool is_error = false, has_map = false;
    int kind = -1;
    if (wire_read_map(&rd, &n))
        return TT_EPROTO;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, s;
        bool b = false;
        int rc = 0;
        if (wire_read_str(&rd, &k))
            return TT_EPROTO;
        if (wire_str_eq(k, "seq")) {
            rc = wire_read_uint(&rd, &r->seq);
        } else if (wire_str_eq(k, "error")) {
            is_error = true;
            rc = read_error(&rd, r);
        } else if (wire_str_eq(k, "admit")) {
            rc = wire_read_bool(&rd, &b);
            r->admit = b;
        } else if (wire_str_eq(k, "verdict")) {
            kind = TT_KIND_DECISION;
            if (!(rc = wire_read_str(&rd, &s)))
                copy(r->verdict, sizeof(r->verdict), s);
        } else if (wire_str_eq(k, "limit")) {
            if (!(rc = wire_read_str(&rd, &s)))
                copy(r->limit, sizeof(r->limit), s);
        } else if (wire_str_eq(k, "code")) {
            if (!(rc = wire_read_str(&rd, &s)))
                copy(r->code, sizeof(r->code), s);
        } else if (wire_str_eq(k, "remaining")) {
            rc = wire_read_int(&rd, &r->remaining);
        } else if (wire_str_eq(k, "retry_after")) {
            rc = wire_read_int(&rd, &r->retry_after);
        } else if (wire_str_eq(k, "reset_after")) {
            rc = wire_read_int(&rd, &r->reset_after);
        } else if (wire_str_eq(k, "soft_denied")) {
            rc = read_soft(&rd, r);
        } else if (wire_str_eq(k, "headers")) {
            has_map = true;
            rc = read_headers(&rd, r);
        } else if (wire_str_eq(k, "policy")) {
            r->disclosed.has_policy = 1;
            rc = read_policy(&rd, &r->disclosed);
        } else if (wire_str_eq(k, "requests")) {
            r->disclosed.has_requests = 1;
            rc = read_trio(&rd, &r->disclosed.requests);
        } else if (wire_str_eq(k, "tokens")) {
            r->disclosed.has_tokens = 1;
            rc = read_trio(&rd, &r->disclosed.tokens);
        } else if (wire_str_eq(k, "retry")) {
            rc = wire_read_int(&rd, &r->disclosed.retry_s);
        } else if (wire_str_eq(k, "lease")) {
            rc = wire_read_uint(&rd, &r->lease);
        } else if (wire_str_eq(k, "reservation")) {
            rc = wire_read_uint(&rd, &r->reservation);
        } else if (wire_str_eq(k, "settled")) {
            kind = TT_KIND_SETTLED;
            rc = wire_read_int(&rd, &r->settled);
        } else if (wire_str_eq(k, "already_settled")) {
            rc = wire_read_bool(&rd, &b);
            r->already_settled = b;
        } else if (wire_str_eq(k, "charged")) {
            kind = TT_KIND_CHARGED;
            rc = wire_read_int(&rd, &r->charged);
        } else if (wire_str_eq(k, "released")) {
            kind = TT_KIND_RELEASED;
            rc = wire_read_bool(&rd, &b);
            r->released = b;
        } else if (wire_str_eq(k, "pong")) {
            kind = TT_KIND_PONG;
            rc = wire_skip(&rd);
        } else if (wire_str_eq(k, "limits")) {
            kind = TT_KIND_FLEET;
            rc = wire_skip(&rd);
        } else if (wire_str_eq(k, "members")) {
            kind = TT_KIND_MEMBERS;
            rc = wire_skip(&rd);
        } else {
            rc = wire_skip(&rd);
        }
        if (rc)
            return TT_EPROTO;
    }
    *used = (size_t)(rd.pos - msg);
    r->raw_len = *used;
    if (is_error)
        return TT_ESERVER;
    if (kind < 0)
        return TT_EPROTO;
    r->kind = (tt_kind_t)kind;
    if (kind == TT_KIND_DECISION && !has_map) { /* protocol 2: the numbers, rendered here */
        unsigned nh = tt_render_headers(&r->disclosed, r->headers, TT_MAX_HEADERS);
        r->nheaders = nh < TT_MAX_HEADERS ? nh : TT_MAX_HEADERS;
    }
    return 0;
}

int tt_recv(tt_client_t *c, tt_response_t *r)
{
    if (c->outstanding == 0)
        return TT_EARG;
    int rc = tt_flush(c);
    if (rc)
        return rc;
    c->in_pos += c->last_len;
    c->last_len = 0;
    for (;;) {
        /* decode straight away (one pass); only a failure asks the framer whether the answer
         * is merely incomplete */
        const uint8_t *p = c->in + c->in_pos;
        size_t avail = c->in_len - c->in_pos, n;
        bool deep;
        rc = decode_response(p, avail, r, &n);
        if (rc != TT_EPROTO) {
            c->last_len = n;
            c->outstanding--;
            return rc;
        }
        if (proto_frame(p, avail, &n, &deep) != PROTO_EMORE)
            return broken(c, TT_EPROTO);
        short rev;
        if ((rc = wait_for(c, POLLIN, &rev)) || (rc = read_some(c)))
            return rc;
    }
}

static int check_subject(const tt_pair_t *subject, size_t n, proto_request_t *req)
{
    if (n > TT_MAX_LEVELS || (n > 0 && !subject))
        return TT_EARG;
    for (size_t i = 0; i < n; i++) {
        if (!subject[i].level || !subject[i].id)
            return TT_EARG;
        size_t ll = strlen(subject[i].level), il = strlen(subject[i].id);
        if (ll > PROTO_MAX_LEVEL_NAME || il > TT_MAX_ID)
            return TT_EARG;
        req->subject[i] =
            (proto_pair_t){{subject[i].level, (uint32_t)ll}, {subject[i].id, (uint32_t)il}};
    }
    req->nsubject = (uint32_t)n;
    return 0;
}

/* Encodes and queues one request, giving it the next seq. */
static int queue(tt_client_t *c, proto_request_t *req, uint64_t *seq)
{
    if (c->broken)
        return TT_EIO;
    req->seq = ++c->next_seq;
    req->version = PROTO_V2; /* decisions come back as numbers; the headers are rendered here */
    if (proto_enc_request(&c->out, req))
        return TT_ENOMEM;
    c->outstanding++;
    if (seq)
        *seq = req->seq;
    if (c->out.len - c->out_sent > AUTOFLUSH)
        return tt_flush(c);
    return 0;
}

int tt_send_decide(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                   uint64_t *seq)
{
    proto_request_t req = {.op = PROTO_OP_DECIDE, .has_tokens = tokens >= 0, .tokens = tokens};
    int rc = check_subject(subject, n, &req);
    return rc ? rc : queue(c, &req, seq);
}

int tt_send_settle(tt_client_t *c, uint64_t reservation, int64_t actual, uint64_t *seq)
{
    proto_request_t req = {.op = PROTO_OP_SETTLE, .reservation = reservation, .actual = actual};
    return queue(c, &req, seq);
}

int tt_send_charge(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                   uint64_t *seq)
{
    proto_request_t req = {.op = PROTO_OP_CHARGE, .has_tokens = true, .tokens = tokens};
    int rc = check_subject(subject, n, &req);
    return rc ? rc : queue(c, &req, seq);
}

int tt_send_acquire(tt_client_t *c, const tt_pair_t *subject, size_t n, uint64_t *seq)
{
    proto_request_t req = {.op = PROTO_OP_ACQUIRE};
    int rc = check_subject(subject, n, &req);
    return rc ? rc : queue(c, &req, seq);
}

int tt_send_release(tt_client_t *c, uint64_t lease, uint64_t *seq)
{
    proto_request_t req = {.op = PROTO_OP_RELEASE, .lease = lease};
    return queue(c, &req, seq);
}

static int send_bare(tt_client_t *c, proto_op_t op, uint64_t *seq)
{
    proto_request_t req = {.op = op};
    return queue(c, &req, seq);
}

int tt_send_ping(tt_client_t *c, uint64_t *seq)
{
    return send_bare(c, PROTO_OP_PING, seq);
}

int tt_send_fleet(tt_client_t *c, uint64_t *seq)
{
    return send_bare(c, PROTO_OP_FLEET, seq);
}

int tt_send_members(tt_client_t *c, uint64_t *seq)
{
    return send_bare(c, PROTO_OP_MEMBERS, seq);
}

/* The blocking calls: refuse while pipelined answers are due, else send then receive. */
#define BLOCKING(c, r, send_call)                                                                  \
    do {                                                                                           \
        if ((c)->outstanding)                                                                      \
            return TT_EBUSY;                                                                       \
        int rc_ = (send_call);                                                                     \
        return rc_ ? rc_ : tt_recv((c), (r));                                                      \
    } while (0)

int tt_decide(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_decide(c, subject, n, tokens, NULL));
}

int tt_settle(tt_client_t *c, uint64_t reservation, int64_t actual, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_settle(c, reservation, actual, NULL));
}

int tt_charge(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_charge(c, subject, n, tokens, NULL));
}

int tt_acquire(tt_client_t *c, const tt_pair_t *subject, size_t n, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_acquire(c, subject, n, NULL));
}

int tt_release(tt_client_t *c, uint64_t lease, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_release(c, lease, NULL));
}

int tt_ping(tt_client_t *c, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_ping(c, NULL));
}

int tt_fleet(tt_client_t *c, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_fleet(c, NULL));
}

int tt_members(tt_client_t *c, tt_response_t *r)
{
    BLOCKING(c, r, tt_send_members(c, NULL));
}

const char *tt_header(const tt_response_t *r, const char *name)
{
    for (unsigned i = 0; i < r->nheaders; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}
