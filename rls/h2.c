/*
 * One h2c connection of the gRPC front door (see h2.h). nghttp2 owns the HTTP/2 state; the
 * callbacks below keep one `stream_t` per request stream (its user data) and answer it once.
 *
 * Work. A turn's budget (RLS_TURN_WORK) is spent by what costs CPU per decoded byte rather
 * than per received byte: each header field nghttp2 decoded and validated (name + value + 32,
 * RFC 9113's count), each body byte, each stream opened (RLS_STREAM_WORK) and each call decided
 * (RLS_CALL_WORK: the engine, protobuf both ways, the answer's frames). The header and data
 * callbacks return NGHTTP2_ERR_PAUSE once it is spent; a decision cannot pause (it runs in the
 * frame callback) but it is counted, so the next field or chunk pauses. One turn therefore
 * does at most RLS_TURN_WORK plus one field (nghttp2 refuses fields over 64 KiB) plus one
 * decision. The weights were measured (bench/bench_h2turn, docs/reliability.md): a decision
 * costs about what 6 Ki units of header validation do, and a turn is ~60-75 µs here.
 *
 * Flow control. nghttp2's automatic WINDOW_UPDATEs are off: a body's bytes count against the
 * connection's window (RLS_CONN_BODY_MAX) and the stream's (RLS_STREAM_WINDOW) from their
 * arrival until their call is decided or the stream ends (give_back), so a client cannot make
 * the connection hold more than the window however many streams it opens.
 */
#include "h2.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

#include "tt_queue.h"

#define GRPC_PREFIX 5 /* compressed flag (1 byte) + message length (4 bytes, big-endian) */
#define AUTH_KEEP 601 /* bytes of `authorization` kept: one past what the door reads */

typedef struct stream {
    int32_t id;
    int method; /* RLS_METHOD_*, or -1 */
    bool grpc;  /* content-type application/grpc[+proto] */
    bool bad_timeout;
    bool answered;    /* a response (or an error) is queued: later input is ignored */
    bool ended;       /* the client's END_STREAM came: the request is whole */
    rls_call_t *call; /* being decided: its answer waits on Redis */
    struct rls_conn *conn;
    int64_t deadline; /* 0: none */
    int64_t opened;   /* its HEADERS came */
    char *auth;       /* the `authorization` metadata (at most AUTH_KEEP bytes), for the door */
    size_t auth_len;
    uint8_t *in; /* the request body as received (prefix + message), bounded */
    size_t in_len, in_cap;
    size_t held; /* body bytes not yet given back to the flow-control windows */
    size_t list; /* the current field block's size, as RFC 9113 §6.5.2 counts it */
    uint8_t prefix[GRPC_PREFIX];
    uint8_t *body; /* the response message, sent after prefix (malloc'd) */
    size_t body_len;
    size_t sent;     /* bytes of prefix + message written */
    tt_queue_t node; /* on its connection's streams */
} stream_t;

struct rls_conn {
    nghttp2_session *ng;
    rls_conn_config_t cfg;
    rls_caller_t who;
    int64_t now;              /* of the input being read */
    tt_queue_t streams;       /* stream_t.node, the newest first */
    size_t work;              /* done in this turn */
    bool paused;              /* the turn's budget ran out */
    bool greeted;             /* the client's SETTINGS came */
    bool closing;             /* its deadline has passed: nothing more to do */
    int64_t born;             /* accepted */
    int64_t quiet;            /* since when no stream has been open */
    int64_t notice;           /* the GOAWAY notice went at (0: not yet) */
    bool final_goaway;        /* the final GOAWAY is queued */
    bool receiving;           /* inside rls_conn_recv: its caller sends what is queued */
    void (*ready)(void *ctx); /* a late answer is queued (rls_conn_on_ready) */
    void *ready_ctx;
    const char *ended; /* why the door ends the connection (rls_conn_ended), NULL: it does not */
    rls_conn_stats_t st;
};

/* A call refused before the door's decide was asked: told by its code (h2.h). */
static void refused(const rls_conn_t *c, const char *code)
{
    const rls_events_t *ev = c->cfg.events;
    if (ev && ev->refused)
        ev->refused(ev->ud, code);
}

/* The door ends the connection for `why` (the first reason stands). */
static void end(rls_conn_t *c, const char *why)
{
    if (!c->ended)
        c->ended = why;
}

static void stream_free(stream_t *st)
{
    rls_call_abandon(st->call); /* its answer, when it comes, goes nowhere */
    free(st->auth);
    free(st->in);
    free(st->body);
    free(st);
}

/* The body is dealt with: its buffer goes, and its bytes go back to the connection's window
 * (the stream's is not refilled: a decided or refused request takes no more). */
static void give_back(rls_conn_t *c, stream_t *st)
{
    free(st->in);
    st->in = NULL;
    st->in_len = st->in_cap = 0;
    free(st->auth); /* read by the door when the call was decided, or never needed */
    st->auth = NULL;
    st->auth_len = 0;
    if (st->held) {
        nghttp2_session_consume_connection(c->ng, st->held);
        c->st.body_held -= st->held;
        st->held = 0;
    }
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

/* A trailers-only answer: the status in the response headers, the stream ended. `refusal`: the
 * code it is told as (refused()), NULL when the door has counted the call. */
static int answer_error(rls_conn_t *c, stream_t *st, int status, const char *message,
                        const char *refusal)
{
    if (refusal)
        refused(c, refusal);
    char code[16], msg[3 * sizeof(((rls_answer_t *)0)->message) + 1];
    int code_len = snprintf(code, sizeof(code), "%d", status);
    percent_encode(msg, sizeof(msg), message);
    nghttp2_nv nva[] = {
        NV(":status", "200", 3),
        NV("content-type", "application/grpc", 16),
        NV("grpc-status", code, (size_t)code_len),
        NV("grpc-message", msg, strlen(msg)),
    };
    st->answered = true;
    c->st.calls++;
    give_back(c, st);
    rls_call_abandon(st->call); /* a deadline passed while Redis decided: nobody waits now */
    st->call = NULL;
    return nghttp2_submit_response(c->ng, st->id, nva, sizeof(nva) / sizeof(nva[0]), NULL);
}

/* The response message after its prefix, then the trailers. */
static ssize_t read_body(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)user;
    stream_t *st = src->ptr;
    size_t total = GRPC_PREFIX + st->body_len, n = 0;
    while (n < length && st->sent < total) {
        size_t at = st->sent, chunk;
        if (at < GRPC_PREFIX) {
            chunk = GRPC_PREFIX - at < length - n ? GRPC_PREFIX - at : length - n;
            memcpy(buf + n, st->prefix + at, chunk);
        } else {
            chunk = total - at < length - n ? total - at : length - n;
            memcpy(buf + n, st->body + (at - GRPC_PREFIX), chunk);
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
    uint32_t len = (uint32_t)st->body_len;
    st->prefix[0] = 0;
    st->prefix[1] = (uint8_t)(len >> 24);
    st->prefix[2] = (uint8_t)(len >> 16);
    st->prefix[3] = (uint8_t)(len >> 8);
    st->prefix[4] = (uint8_t)len;
    st->answered = true;
    c->st.calls++;
    nghttp2_nv nva[] = {NV(":status", "200", 3), NV("content-type", "application/grpc", 16)};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = read_body};
    return nghttp2_submit_response(c->ng, st->id, nva, 2, &prd);
}

/* Queues a call's answer: the response message (the stream takes its body), or the error. */
static int answer(rls_conn_t *c, stream_t *st, int status, rls_answer_t *ans)
{
    if (status != RLS_OK) {
        int rc = answer_error(c, st, status, ans->message, ans->refused);
        rls_answer_free(ans);
        return rc;
    }
    st->body = ans->body; /* the stream's now, freed with it */
    st->body_len = ans->len;
    return answer_ok(c, st);
}

/* A call's answer that waited on Redis: queued, and the shell told (unless it is reading this
 * connection now: it sends what is queued when the read is done). */
static void decided(rls_answer_t *ans, void *ctx)
{
    stream_t *st = ctx;
    rls_conn_t *c = st->conn;
    st->call = NULL;
    if (answer(c, st, ans->status, ans) != 0)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    if (!c->receiving && c->ready)
        c->ready(c->ready_ctx);
}

/* The request is complete: check the call, decide it, queue the answer (or start it). */
static int complete(rls_conn_t *c, stream_t *st)
{
    c->work += RLS_CALL_WORK;
    if (st->method < 0)
        return answer_error(c, st, RLS_UNIMPLEMENTED, "unknown method (:path)", "unknown_op");
    if (!st->grpc)
        return answer_error(c, st, RLS_INVALID_ARGUMENT,
                            "content-type must be application/grpc or application/grpc+proto",
                            "bad_frame");
    if (st->bad_timeout)
        return answer_error(c, st, RLS_INVALID_ARGUMENT, "grpc-timeout: malformed", "bad_request");
    if (st->deadline && c->now >= st->deadline)
        return answer_error(c, st, RLS_DEADLINE_EXCEEDED, "deadline exceeded before the decision",
                            "deadline_exceeded");
    if (st->in_len < GRPC_PREFIX)
        return answer_error(c, st, RLS_INVALID_ARGUMENT, "no request message", "bad_frame");
    if (st->in[0] != 0)
        return answer_error(c, st, RLS_UNIMPLEMENTED, "compressed messages are not accepted",
                            "bad_frame");
    size_t len =
        (size_t)st->in[1] << 24 | (size_t)st->in[2] << 16 | (size_t)st->in[3] << 8 | st->in[4];
    if (len != st->in_len - GRPC_PREFIX)
        return answer_error(c, st, RLS_INVALID_ARGUMENT,
                            "exactly one length-prefixed request message is expected", "bad_frame");
    const uint8_t *msg = st->in + GRPC_PREFIX;
    rls_answer_t ans;
    rls_caller_t who = c->who;
    who.authorization = st->auth;
    who.authorization_len = st->auth_len;
    int status = st->method == RLS_METHOD_HEALTH_CHECK
                     ? rls_health_check(msg, len, &ans)
                     : rls_call_start(&st->call, c->cfg.door, &who, c->cfg.cfg, msg, len, c->now,
                                      &ans, decided, st);
    give_back(c, st);
    if (status == RLS_PENDING) /* decided() answers it */
        return 0;
    return answer(c, st, status, &ans);
}

static stream_t *stream_of(rls_conn_t *c, int32_t id)
{
    return nghttp2_session_get_stream_user_data(c->ng, id);
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    rls_conn_t *c = user;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    c->work += RLS_STREAM_WORK;
    if (f->headers.cat != NGHTTP2_HCAT_REQUEST) { /* trailers: a field block of its own */
        stream_t *st = stream_of(c, f->hd.stream_id);
        if (st)
            st->list = 0;
        return 0;
    }
    stream_t *st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->id = f->hd.stream_id;
    st->conn = c;
    st->method = -1;
    st->opened = c->now;
    tt_queue_insert_head(&c->streams, &st->node);
    c->st.streams++;
    nghttp2_session_set_stream_user_data(ng, st->id, st);
    return 0;
}

/* The turn's budget is spent: stop reading input (what was taken is dealt with). */
static int spent(rls_conn_t *c)
{
    if (c->work < RLS_TURN_WORK)
        return 0;
    c->paused = true;
    return NGHTTP2_ERR_PAUSE;
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
    (void)flags;
    rls_conn_t *c = user;
    size_t cost = namelen + valuelen + 32;
    c->work += cost;
    stream_t *st = f->hd.type == NGHTTP2_HEADERS ? stream_of(c, f->hd.stream_id) : NULL;
    if (!st)
        return spent(c);
    st->list += cost;
    if (st->list > RLS_HEADER_LIST_MAX) {
        /* nghttp2 decodes the rest of the block for its HPACK table only, and calls no one */
        st->answered = true;
        give_back(c, st);
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_ENHANCE_YOUR_CALM);
        refused(c, "too_large");
        if (++c->st.refused >= RLS_REFUSED_MAX) { /* nothing more is read */
            end(c, "calm");
            nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
        }
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    if (f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return spent(c);
    if (is(name, namelen, ":path")) {
        st->method = rls_method((const char *)value, valuelen);
    } else if (is(name, namelen, "content-type")) {
        st->grpc = is(value, valuelen, "application/grpc") ||
                   is(value, valuelen, "application/grpc+proto");
    } else if (is(name, namelen, "authorization")) {
        /* kept for the door, which reads "Bearer <token>"; a second one is kept as none valid */
        size_t keep = st->auth ? 0 : valuelen < AUTH_KEEP ? valuelen : AUTH_KEEP;
        char *auth = malloc(keep ? keep : 1);
        if (!auth)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        memcpy(auth, value, keep);
        free(st->auth);
        st->auth = auth;
        st->auth_len = keep;
    } else if (is(name, namelen, "grpc-timeout")) {
        int64_t ns;
        if (parse_timeout(value, valuelen, &ns) < 0)
            st->bad_timeout = true;
        else
            st->deadline = ns > INT64_MAX - c->now ? INT64_MAX : c->now + ns;
    }
    return spent(c);
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
                   void *user)
{
    (void)flags;
    rls_conn_t *c = user;
    c->work += len;
    stream_t *st = stream_of(c, id);
    if (!st || st->answered) { /* nobody reads it: back to the window at once */
        nghttp2_session_consume_connection(ng, len);
        return spent(c);
    }
    st->held += len;
    c->st.body_held += len;
    if (st->in_len + len > GRPC_PREFIX + RLS_MESSAGE_MAX) {
        char msg[64];
        snprintf(msg, sizeof(msg), "request message above %d bytes", RLS_MESSAGE_MAX);
        return answer_error(c, st, RLS_RESOURCE_EXHAUSTED, msg, "too_large")
                   ? NGHTTP2_ERR_CALLBACK_FAILURE
                   : spent(c);
    }
    if (st->in_len + len > st->in_cap) {
        size_t cap = st->in_cap ? st->in_cap : 256;
        while (cap < st->in_len + len)
            cap *= 2;
        if (cap > GRPC_PREFIX + RLS_MESSAGE_MAX) /* the bound, not the next power of two */
            cap = GRPC_PREFIX + RLS_MESSAGE_MAX;
        uint8_t *in = realloc(st->in, cap);
        if (!in)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        st->in = in;
        st->in_cap = cap;
    }
    memcpy(st->in + st->in_len, data, len);
    st->in_len += len;
    return spent(c);
}

static int on_frame(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    (void)ng;
    rls_conn_t *c = user;
    if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK))
        c->greeted = true;
    if (f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS)
        return 0;
    stream_t *st = stream_of(c, f->hd.stream_id);
    if (!st)
        return 0;
    if (f->hd.type == NGHTTP2_HEADERS && st->list > c->st.header_list_max)
        c->st.header_list_max = st->list;
    if (!(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    st->ended = true;
    if (st->answered)
        return 0;
    return complete(c, st) ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

/* What nghttp2 refuses on its own, as a stream reset (RST_STREAM) or the connection's end
 * (GOAWAY), told as the door's refusals are (h2.h); ours (NO_ERROR, ENHANCE_YOUR_CALM) are
 * told where they are made. */
static void told_by_nghttp2(rls_conn_t *c, const nghttp2_frame *f)
{
    if (f->hd.type == NGHTTP2_RST_STREAM) {
        uint32_t e = f->rst_stream.error_code;
        if (e != NGHTTP2_NO_ERROR && e != NGHTTP2_ENHANCE_YOUR_CALM)
            refused(c, e == NGHTTP2_REFUSED_STREAM       ? "refused_stream"
                       : e == NGHTTP2_FLOW_CONTROL_ERROR ? "too_large"
                                                         : "bad_frame");
    } else if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR) {
        uint32_t e = f->goaway.error_code;
        end(c, e == NGHTTP2_ENHANCE_YOUR_CALM    ? "calm"
               : e == NGHTTP2_FLOW_CONTROL_ERROR ? "flow_control"
                                                 : "protocol");
    }
}

/* An answer that went out before the request was whole (an error, a deadline): RST_STREAM
 * NO_ERROR tells the client to stop sending it (RFC 9113 §8.1), and frees the stream. */
static int on_frame_sent(nghttp2_session *ng, const nghttp2_frame *f, void *user)
{
    rls_conn_t *c = user;
    told_by_nghttp2(c, f);
    if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    stream_t *st = stream_of(c, f->hd.stream_id);
    if (st && !st->ended)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *user)
{
    (void)error_code;
    rls_conn_t *c = user;
    stream_t *st = stream_of(c, id);
    if (!st)
        return 0;
    give_back(c, st);
    nghttp2_session_set_stream_user_data(ng, id, NULL);
    tt_queue_remove(&st->node);
    stream_free(st);
    if (--c->st.streams == 0)
        c->quiet = c->now;
    return 0;
}

rls_conn_t *rls_conn_new(const rls_conn_config_t *cfg, const rls_caller_t *who, int64_t now)
{
    rls_conn_t *c = calloc(1, sizeof(*c));
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    if (c)
        tt_queue_init(&c->streams);
    if (!c || nghttp2_session_callbacks_new(&cb) != 0) {
        free(c);
        return NULL;
    }
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cb);
        free(c);
        return NULL;
    }
    c->cfg = *cfg;
    c->who = *who;
    c->born = c->quiet = c->now = now;
    if (!c->cfg.max_streams)
        c->cfg.max_streams = RLS_MAX_STREAMS;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_sent);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
    /* windows given back as bodies are dealt with (give_back), not as they arrive; no history
     * of closed streams (RFC 7540 priorities): a stream's memory goes when it ends. nghttp2's
     * other defaults stand: at most 32 entries in a SETTINGS frame, 1000 queued ACKs (PING,
     * SETTINGS) before a client that does not read is cut off, 8 CONTINUATIONs per block, and
     * a rate limit on incoming RST_STREAM (burst 1000, 33/s). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_no_closed_streams(opt, 1);
    int rc = nghttp2_session_server_new2(&c->ng, cb, c, opt);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->cfg.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, RLS_HEADER_LIST_MAX},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, RLS_STREAM_WINDOW},
    };
    if (rc != 0 || nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
        nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, RLS_CONN_BODY_MAX) !=
            0) {
        rls_conn_free(c);
        return NULL;
    }
    return c;
}

void rls_conn_free(rls_conn_t *c)
{
    if (!c)
        return;
    /* detached first, whatever nghttp2_session_del calls back */
    while (!tt_queue_empty(&c->streams)) {
        stream_t *st = tt_queue_data(tt_queue_head(&c->streams), stream_t, node);
        tt_queue_remove(&st->node);
        nghttp2_session_set_stream_user_data(c->ng, st->id, NULL);
        stream_free(st);
    }
    nghttp2_session_del(c->ng);
    free(c);
}

int rls_conn_recv(rls_conn_t *c, const uint8_t *in, size_t len, int64_t now, size_t *used)
{
    c->now = now;
    c->work = 0;
    c->paused = false;
    size_t take = len < RLS_TURN_INPUT ? len : RLS_TURN_INPUT;
    c->receiving = true;
    ssize_t rv = nghttp2_session_mem_recv(c->ng, in, take);
    c->receiving = false;
    c->st.turn_work = c->work;
    *used = rv < 0 ? 0 : (size_t)rv;
    if (rv < 0 || (!c->paused && (size_t)rv != take)) {
        end(c, rv == NGHTTP2_ERR_FLOODED ? "calm" : "protocol");
        return -1;
    }
    return c->paused || take < len ? RLS_RECV_MORE : RLS_RECV_DONE;
}

void rls_conn_on_ready(rls_conn_t *c, void (*ready)(void *ctx), void *ctx)
{
    c->ready = ready;
    c->ready_ctx = ctx;
}

ssize_t rls_conn_send(rls_conn_t *c, const uint8_t **out)
{
    ssize_t n = nghttp2_session_mem_send(c->ng, out);
    return n < 0 ? -1 : n;
}

/* The connection's own next deadline: the preface, idleness, the grace after the notice. */
static int64_t own_deadline(const rls_conn_t *c)
{
    if (c->closing || c->final_goaway)
        return INT64_MAX;
    if (!c->greeted)
        return c->born + RLS_PREFACE_NS;
    if (c->notice)
        return c->notice + RLS_GRACE_NS;
    return c->st.streams ? INT64_MAX : c->quiet + RLS_IDLE_NS;
}

/* When a request still arriving must be whole by (RLS_REQUEST_NS after its HEADERS). */
static int64_t request_deadline(const stream_t *st)
{
    return st->answered || st->ended ? INT64_MAX : st->opened + RLS_REQUEST_NS;
}

int64_t rls_conn_deadline(const rls_conn_t *c)
{
    int64_t at = c->closing ? INT64_MAX : own_deadline(c);
    const tt_queue_t *q;
    if (!c->closing)
        tt_queue_foreach(q, &c->streams)
        {
            const stream_t *st = tt_queue_data(q, stream_t, node);
            if (request_deadline(st) < at)
                at = request_deadline(st);
        }
    return at;
}

void rls_conn_shutdown(rls_conn_t *c, const char *why)
{
    if (c->final_goaway)
        return;
    c->final_goaway = true;
    nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c->ng),
                          NGHTTP2_NO_ERROR, (const uint8_t *)why, strlen(why));
}

/* The connection's own deadlines: a client that never greeted is dropped; an idle one gets a
 * GOAWAY notice (streams it sends meanwhile are served), then the final GOAWAY. */
static void tick_connection(rls_conn_t *c, int64_t now)
{
    if (now < own_deadline(c))
        return;
    if (!c->greeted) {
        end(c, "preface_timeout");
        c->closing = true;
        return;
    }
    end(c, "idle"); /* from the notice: a client that closes on it closes an idle connection */
    if (c->notice)
        rls_conn_shutdown(c, "idle");
    else if (nghttp2_submit_shutdown_notice(c->ng) == 0)
        c->notice = now;
    else
        rls_conn_shutdown(c, "idle");
}

size_t rls_conn_tick(rls_conn_t *c, int64_t now)
{
    size_t waiting = 0;
    c->now = now;
    tt_queue_t *q;
    tt_queue_foreach(q, &c->streams)
    {
        stream_t *st = tt_queue_data(q, stream_t, node);
        if (now >= request_deadline(st)) { /* dripped, or never ended: as HTTP's 408 */
            answer_error(c, st, RLS_DEADLINE_EXCEEDED, "the request did not arrive whole in time",
                         "request_timeout");
            continue;
        }
        if (st->answered || !st->deadline)
            continue;
        if (now >= st->deadline)
            answer_error(c, st, RLS_DEADLINE_EXCEEDED, "deadline exceeded before the decision",
                         "deadline_exceeded");
        else
            waiting++;
    }
    tick_connection(c, now);
    return waiting;
}

const char *rls_conn_ended(const rls_conn_t *c)
{
    return c->ended;
}

bool rls_conn_done(const rls_conn_t *c)
{
    return c->closing || (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng));
}

void rls_conn_stats(const rls_conn_t *c, rls_conn_stats_t *out)
{
    *out = c->st;
}
