/*
 * One h2c connection of the gRPC front door (see h2.h). nghttp2 owns the HTTP/2 state; the
 * callbacks below keep one `stream_t` per request stream (its user data) and answer it once.
 */
#include "h2.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#define GRPC_PREFIX 5 /* compressed flag (1 byte) + message length (4 bytes, big-endian) */

typedef struct stream {
    int32_t id;
    int method; /* RLS_METHOD_*, or -1 */
    bool grpc;  /* content-type application/grpc[+proto] */
    bool bad_timeout;
    bool answered;    /* a response (or an error) is queued: later input is ignored */
    int64_t deadline; /* 0: none */
    uint8_t *in;      /* the request body as received (prefix + message), bounded */
    size_t in_len, in_cap;
    uint8_t prefix[GRPC_PREFIX];
    rls_answer_t ans; /* the response message, sent after prefix */
    size_t sent;      /* bytes of prefix + message written */
    struct stream *prev, *next;
} stream_t;

struct rls_conn {
    nghttp2_session *ng;
    rls_conn_config_t cfg;
    rls_caller_t who;
    int64_t now; /* of the input being read */
    stream_t *streams;
};

static void stream_free(stream_t *st)
{
    free(st->in);
    rls_answer_free(&st->ans);
    free(st);
}

/* grpc-message is percent-encoded: bytes outside printable ASCII, and '%'. */
static void percent_encode(char *dst, size_t size, const char *src)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (const unsigned char *s = (const unsigned char *)src; *s && j + 4 < size; s++) {
        if (*s >= 0x20 && *s <= 0x7e && *s != '%') {
            dst[j++] = (char)*s;
        } else {
            dst[j++] = '%';
            dst[j++] = hex[*s >> 4];
            dst[j++] = hex[*s & 15];
        }
    }
    dst[j] = '\0';
}

#define NV(n, v, vlen)                                                                             \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vlen), NGHTTP2_NV_FLAG_NONE                \
    }

/* A trailers-only answer: the status in the response headers, the stream ended. */
static int answer_error(rls_conn_t *c, stream_t *st, int status, const char *message)
{
    char code[16], msg[3 * sizeof(st->ans.message) + 1];
    int code_len = snprintf(code, sizeof(code), "%d", status);
    percent_encode(msg, sizeof(msg), message);
    nghttp2_nv nva[] = {
        NV(":status", "200", 3),
        NV("content-type", "application/grpc", 16),
        NV("grpc-status", code, (size_t)code_len),
        NV("grpc-message", msg, strlen(msg)),
    };
    st->answered = true;
    free(st->in);
    st->in = NULL;
    st->in_len = st->in_cap = 0;
    return nghttp2_submit_response(c->ng, st->id, nva, sizeof(nva) / sizeof(nva[0]), NULL);
}

/* The response message after its prefix, then the trailers. */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    stream_t *st = src->ptr;
    size_t total = GRPC_PREFIX + st->ans.len, n = 0;
    while (n < length && st->sent < total) {
        size_t at = st->sent, chunk;
        if (at < GRPC_PREFIX) {
            chunk = GRPC_PREFIX - at < length - n ? GRPC_PREFIX - at : length - n;
            memcpy(buf + n, st->prefix + at, chunk);
        } else {
            chunk = total - at < length - n ? total - at : length - n;
            memcpy(buf + n, st->ans.body + (at - GRPC_PREFIX), chunk);
        }
        n += chunk;
        st->sent += chunk;
    }
    if (st->sent == total) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv trailers[] = {NV("grpc-status", "0", 1)};
        if (nghttp2_submit_trailer(ng, id, trailers, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

static int answer_ok(rls_conn_t *c, stream_t *st)
{
    uint32_t len = (uint32_t)st->ans.len;
    st->prefix[0] = 0;
    st->prefix[1] = (uint8_t)(len >> 24);
    st->prefix[2] = (uint8_t)(len >> 16);
    st->prefix[3] = (uint8_t)(len >> 8);
    st->prefix[4] = (uint8_t)len;
    st->answered = true;
    nghttp2_nv nva[] = {NV(":status", "200", 3), NV("content-type", "application/grpc", 16)};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
    return nghttp2_submit_response(c->ng, st->id, nva, 2, &prd);
}

/* The request is complete: check the call, decide it, queue the answer. */
static int complete(rls_conn_t *c, stream_t *st)
{
    if (st->method < 0)
        return answer_error(c, st, RLS_UNIMPLEMENTED, "unknown method (:path)");
    if (!st->grpc)
        return answer_error(c, st, RLS_INVALID_ARGUMENT,
                            "content-type must be application/grpc or application/grpc+proto");
    if (st->bad_timeout)
        return answer_error(c, st, RLS_INVALID_ARGUMENT, "grpc-timeout: malformed");
    if (st->deadline && c->now >= st->deadline)
        return answer_error(c, st, RLS_DEADLINE_EXCEEDED, "deadline exceeded before the decision");
    if (st->in_len < GRPC_PREFIX)
        return answer_error(c, st, RLS_INVALID_ARGUMENT, "no request message");
    if (st->in[0] != 0)
        return answer_error(c, st, RLS_UNIMPLEMENTED, "compressed messages are not accepted");
    size_t len =
        (size_t)st->in[1] << 24 | (size_t)st->in[2] << 16 | (size_t)st->in[3] << 8 | st->in[4];
    if (len != st->in_len - GRPC_PREFIX)
        return answer_error(c, st, RLS_INVALID_ARGUMENT,
                            "exactly one length-prefixed request message is expected");
    const uint8_t *msg = st->in + GRPC_PREFIX;
    int status =
        st->method == RLS_METHOD_HEALTH_CHECK
            ? rls_health_check(msg, len, &st->ans)
            : rls_should_rate_limit(c->cfg.door, &c->who, *c->cfg.cfg, msg, len, c->now, &st->ans);
    free(st->in);
    st->in = NULL;
    if (status != RLS_OK)
        return answer_error(c, st, status, st->ans.message);
    return answer_ok(c, st);
}

static stream_t *stream_of(rls_conn_t *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->ng, id);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    rls_conn_t *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream_t *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->id = f->hd.stream_id;
    st->method = -1;
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(ng, st->id, st);
    return 0;
}

/* grpc-timeout: 1 to 8 digits and a unit (H M S m u n). 0 on success. */
static int parse_timeout(const uint8_t *v, size_t len, int64_t *ns)
{
    static const struct {
        char unit;
        int64_t ns;
    } units[] = {{'H', 3600 * RA_NS_PER_S},
                 {'M', 60 * RA_NS_PER_S},
                 {'S', RA_NS_PER_S},
                 {'m', 1000000},
                 {'u', 1000},
                 {'n', 1}};
    if (len < 2 || len > 9)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        n = n * 10 + (v[i] - '0');
    }
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (units[u].unit == (char)v[len - 1]) {
            *ns = n > INT64_MAX / units[u].ns ? INT64_MAX : n * units[u].ns;
            return 0;
        }
    }
    return -1;
}

static bool is(const uint8_t *s, size_t len, const char *lit)
{
    return len == strlen(lit) && memcmp(s, lit, len) == 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)ng;
    (void)flags;
    rls_conn_t *c = user;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    stream_t *st = stream_of(c, f->hd.stream_id);
    if (!st)
        return 0;
    if (is(name, namelen, ":path")) {
        st->method = rls_method((const char *)value, valuelen);
    } else if (is(name, namelen, "content-type")) {
        st->grpc = is(value, valuelen, "application/grpc") ||
                   is(value, valuelen, "application/grpc+proto");
    } else if (is(name, namelen, "grpc-timeout")) {
        int64_t ns;
        if (parse_timeout(value, valuelen, &ns) < 0)
            st->bad_timeout = true;
        else
            st->deadline = ns > INT64_MAX - c->now ? INT64_MAX : c->now + ns;
    }
    return 0;
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    (void)ng;
    (void)flags;
    rls_conn_t *c = user;
    stream_t *st = stream_of(c, id);
    if (!st || st->answered)
        return 0;
    if (st->in_len + len > GRPC_PREFIX + RLS_MESSAGE_MAX) {
        char msg[64];
        snprintf(msg, sizeof(msg), "request message above %d bytes", RLS_MESSAGE_MAX);
        return answer_error(c, st, RLS_RESOURCE_EXHAUSTED, msg) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
    }
    if (st->in_len + len > st->in_cap) {
        size_t cap = st->in_cap ? st->in_cap : 256;
        while (cap < st->in_len + len)
            cap *= 2;
        uint8_t *in = realloc(st->in, cap);
        if (!in)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        st->in = in;
        st->in_cap = cap;
    }
    memcpy(st->in + st->in_len, data, len);
    st->in_len += len;
    return 0;
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    (void)ng;
    rls_conn_t *c = user;
    if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    stream_t *st = stream_of(c, f->hd.stream_id);
    if (!st || st->answered)
        return 0;
    return complete(c, st) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *user)
{
    (void)error_code;
    rls_conn_t *c = user;
    stream_t *st = stream_of(c, id);
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    stream_free(st);
    return 0;
}

rls_conn_t *rls_conn_new(const rls_conn_config_t *cfg, const rls_caller_t *who)
{
    rls_conn_t *c = calloc(1, sizeof(*c));
    nghttp2_session_callbacks *cb = NULL;
    if (!c || nghttp2_session_callbacks_new(&cb) != 0) {
        free(c);
        return NULL;
    }
    c->cfg = *cfg;
    c->who = *who;
    if (!c->cfg.max_streams)
        c->cfg.max_streams = RLS_MAX_STREAMS;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    int rc = nghttp2_session_server_new(&c->ng, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->cfg.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
    };
    if (rc != 0 || nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 2) != 0) {
        rls_conn_free(c);
        return NULL;
    }
    return c;
}

void rls_conn_free(rls_conn_t *c)
{
    if (!c)
        return;
    while (c->streams) { /* detached first, whatever nghttp2_session_del calls back */
        stream_t *st = c->streams;
        c->streams = st->next;
        nghttp2_session_set_stream_user_data(c->ng, st->id, NULL);
        stream_free(st);
    }
    nghttp2_session_del(c->ng);
    free(c);
}

int rls_conn_recv(rls_conn_t *c, const uint8_t *in, size_t len, int64_t now)
{
    c->now = now;
    ssize_t rv = nghttp2_session_mem_recv(c->ng, in, len);
    return rv < 0 || (size_t)rv != len ? -1 : 0;
}

ssize_t rls_conn_send(rls_conn_t *c, const uint8_t **out)
{
    ssize_t n = nghttp2_session_mem_send(c->ng, out);
    return n < 0 ? -1 : n;
}

size_t rls_conn_tick(rls_conn_t *c, int64_t now)
{
    size_t waiting = 0;
    c->now = now;
    for (stream_t *st = c->streams; st; st = st->next) {
        if (st->answered || !st->deadline)
            continue;
        if (now >= st->deadline)
            answer_error(c, st, RLS_DEADLINE_EXCEEDED, "deadline exceeded before the decision");
        else
            waiting++;
    }
    return waiting;
}

bool rls_conn_done(const rls_conn_t *c)
{
    return !nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng);
}
