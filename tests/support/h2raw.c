/* See h2raw.h. */
#include "h2raw.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rls.pb-c.h"

#define DEFAULT_WINDOW 65535

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h2raw_put(h2raw_buf_t *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *grown = realloc(b->p, cap);
        if (!grown)
            abort();
        b->p = grown;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, p, n);
    b->len += n;
}

void h2raw_buf_free(h2raw_buf_t *b)
{
    free(b->p);
    *b = (h2raw_buf_t){0};
}

void h2raw_hpack_int(h2raw_buf_t *b, uint8_t first, int prefix, uint64_t v)
{
    uint64_t max = (1u << prefix) - 1;
    if (v < max) {
        uint8_t x = (uint8_t)(first | v);
        h2raw_put(b, &x, 1);
        return;
    }
    uint8_t x = (uint8_t)(first | max);
    h2raw_put(b, &x, 1);
    for (v -= max; v >= 128; v >>= 7) {
        x = (uint8_t)(0x80 | (v & 0x7f));
        h2raw_put(b, &x, 1);
    }
    x = (uint8_t)v;
    h2raw_put(b, &x, 1);
}

void h2raw_hpack_literal(h2raw_buf_t *b, const char *name, const char *value, size_t value_len,
                         bool index)
{
    uint8_t first = index ? 0x40 : 0x00;
    h2raw_put(b, &first, 1); /* index 0: a new name follows */
    h2raw_hpack_int(b, 0, 7, strlen(name));
    h2raw_put(b, name, strlen(name));
    h2raw_hpack_int(b, 0, 7, value_len);
    h2raw_put(b, value, value_len);
}

void h2raw_hpack_indexed(h2raw_buf_t *b, uint32_t index)
{
    h2raw_hpack_int(b, 0x80, 7, index);
}

const char *h2raw_authorization;

size_t h2raw_grpc_nv(nghttp2_nv nv[H2RAW_GRPC_FIELDS], const char *path)
{
    const char *fields[H2RAW_GRPC_FIELDS][2] = {{":method", "POST"},
                                                {":scheme", "http"},
                                                {":path", path},
                                                {":authority", "tt"},
                                                {"content-type", "application/grpc"},
                                                {"te", "trailers"},
                                                {"authorization", h2raw_authorization}};
    size_t n = h2raw_authorization ? H2RAW_GRPC_FIELDS : H2RAW_GRPC_FIELDS - 1;
    for (size_t i = 0; i < n; i++)
        nv[i] = (nghttp2_nv){(uint8_t *)fields[i][0], (uint8_t *)fields[i][1], strlen(fields[i][0]),
                             strlen(fields[i][1]), NGHTTP2_NV_FLAG_NONE};
    return n;
}

void h2raw_grpc_fields(h2raw_buf_t *b, const char *path)
{
    nghttp2_nv nv[H2RAW_GRPC_FIELDS];
    size_t n = h2raw_grpc_nv(nv, path);
    for (size_t i = 0; i < n; i++)
        h2raw_hpack_literal(b, (const char *)nv[i].name, (const char *)nv[i].value, nv[i].valuelen,
                            false);
}

void h2raw_frame(h2raw_buf_t *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
                 size_t len)
{
    uint8_t hd[9] = {(uint8_t)(len >> 16),
                     (uint8_t)(len >> 8),
                     (uint8_t)len,
                     type,
                     flags,
                     (uint8_t)(stream >> 24),
                     (uint8_t)(stream >> 16),
                     (uint8_t)(stream >> 8),
                     (uint8_t)stream};
    h2raw_put(b, hd, sizeof(hd));
    h2raw_put(b, payload, len);
}

void h2raw_headers(h2raw_buf_t *b, uint32_t stream, const h2raw_buf_t *block, bool end_stream)
{
    size_t at = 0;
    do {
        size_t n = block->len - at < H2RAW_FRAME_MAX ? block->len - at : H2RAW_FRAME_MAX;
        uint8_t flags = at + n == block->len ? H2_END_HEADERS : 0;
        if (at == 0 && end_stream)
            flags |= H2_END_STREAM;
        h2raw_frame(b, at == 0 ? H2_HEADERS : H2_CONTINUATION, flags, stream, block->p + at, n);
        at += n;
    } while (at < block->len);
}

void h2raw_preface(h2raw_buf_t *b)
{
    static const char magic[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    h2raw_put(b, magic, sizeof(magic) - 1);
    h2raw_frame(b, H2_SETTINGS, 0, 0, NULL, 0);
}

void h2raw_grpc_prefix(uint8_t out[H2RAW_GRPC_PREFIX], size_t len)
{
    out[0] = 0;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

void h2raw_grpc_data(h2raw_buf_t *b, uint32_t stream, const uint8_t *msg, size_t len,
                     bool end_stream)
{
    h2raw_buf_t m = {0};
    uint8_t prefix[H2RAW_GRPC_PREFIX];
    h2raw_grpc_prefix(prefix, len);
    h2raw_put(&m, prefix, sizeof(prefix));
    h2raw_put(&m, msg, len);
    h2raw_frame(b, H2_DATA, end_stream ? H2_END_STREAM : 0, stream, m.p, m.len);
    h2raw_buf_free(&m);
}

static int opened(h2raw_conn_t *c, int fd)
{
    *c = (h2raw_conn_t){.fd = fd, .conn_window = DEFAULT_WINDOW, .initial_window = DEFAULT_WINDOW};
    if (fd < 0 || nghttp2_hd_inflate_new(&c->hd) != 0) {
        if (fd >= 0)
            close(fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

int h2raw_open_unix(h2raw_conn_t *c, const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return opened(c, fd);
}

int h2raw_open_tcp(h2raw_conn_t *c, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return opened(c, fd);
}

int h2raw_open(h2raw_conn_t *c, const char *addr)
{
    return strncmp(addr, "tcp:", 4) == 0 ? h2raw_open_tcp(c, atoi(addr + 4))
                                         : h2raw_open_unix(c, addr);
}

int h2raw_open_fd(h2raw_conn_t *c, int fd)
{
    return opened(c, fd);
}

void h2raw_close(h2raw_conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    free(c->in);
    c->in = NULL;
    h2raw_buf_free(&c->block);
    if (c->hd)
        nghttp2_hd_inflate_del(c->hd);
    c->hd = NULL;
}

int h2raw_send(h2raw_conn_t *c, const void *p, size_t n)
{
    const uint8_t *s = p;
    while (n) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Decodes a whole header block into f's fields of interest. -1 when HPACK fails. */
static int decode_block(h2raw_conn_t *c, const uint8_t *in, size_t len, h2raw_frame_t *f)
{
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t n = nghttp2_hd_inflate_hd2(c->hd, &nv, &flags, in, len, 1);
        if (n < 0)
            return -1;
        in += n;
        len -= (size_t)n;
        if (flags & NGHTTP2_HD_INFLATE_EMIT) {
            char v[256];
            snprintf(v, sizeof(v), "%.*s", (int)nv.valuelen, (const char *)nv.value);
            if (nv.namelen == 7 && memcmp(nv.name, ":status", 7) == 0)
                f->status = atoi(v);
            else if (nv.namelen == 11 && memcmp(nv.name, "grpc-status", 11) == 0)
                f->grpc_status = atoi(v);
            else if (nv.namelen == 12 && memcmp(nv.name, "grpc-message", 12) == 0)
                snprintf(f->grpc_message, sizeof(f->grpc_message), "%s", v);
        }
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(c->hd);
            return 0;
        }
        if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && len == 0)
            return 0;
    }
}

/* A header block's fragment: the padding and priority fields taken off. */
static void fragment(uint8_t type, uint8_t flags, const uint8_t **p, size_t *len)
{
    size_t pad = 0;
    if (type == H2_HEADERS && (flags & 0x8) && *len) { /* PADDED */
        pad = (*p)[0];
        (*p)++, (*len)--;
    }
    if (type == H2_HEADERS && (flags & 0x20) && *len >= 5) /* PRIORITY */
        *p += 5, *len -= 5;
    *len = pad <= *len ? *len - pad : 0;
}

/* Acts on what a frame tells the client: SETTINGS (acknowledged), WINDOW_UPDATE, GOAWAY. */
static void apply(h2raw_conn_t *c, const h2raw_frame_t *f)
{
    if (f->type == H2_SETTINGS && !(f->flags & H2_ACK)) {
        for (size_t i = 0; i + 6 <= f->len; i += 6) {
            uint16_t id = (uint16_t)(f->payload[i] << 8 | f->payload[i + 1]);
            uint32_t v = be32(f->payload + i + 2);
            if (id == NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE)
                c->initial_window = v;
            else if (id == NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
                c->max_streams = v;
            else if (id == NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE)
                c->max_header_list = v;
        }
        h2raw_buf_t ack = {0};
        h2raw_frame(&ack, H2_SETTINGS, H2_ACK, 0, NULL, 0);
        h2raw_send(c, ack.p, ack.len);
        h2raw_buf_free(&ack);
    } else if (f->type == H2_WINDOW_UPDATE && f->len == 4) {
        uint32_t inc = be32(f->payload) & 0x7fffffffu;
        if (f->stream == 0)
            c->conn_window += inc;
        else if (f->stream / 2 < H2RAW_STREAMS)
            c->window[f->stream / 2] += inc;
    } else if (f->type == H2_GOAWAY && f->len >= 8) {
        c->goaway = true;
        c->goaway_code = be32(f->payload + 4);
    }
}

/* Drops the frame handed over last time from the input. */
static void drop_consumed(h2raw_conn_t *c)
{
    if (!c->consumed)
        return;
    memmove(c->in, c->in + c->consumed, c->in_len - c->consumed);
    c->in_len -= c->consumed;
    c->consumed = 0;
}

int h2raw_next(h2raw_conn_t *c, h2raw_frame_t *f, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    drop_consumed(c);
    for (;;) {
        size_t len = c->in_len >= 9 ? (size_t)c->in[0] << 16 | (size_t)c->in[1] << 8 | c->in[2] : 0;
        if (c->in_len >= 9 && c->in_len >= 9 + len) {
            *f = (h2raw_frame_t){.type = c->in[3],
                                 .flags = c->in[4],
                                 .stream = be32(c->in + 5) & 0x7fffffffu,
                                 .payload = c->in + 9,
                                 .len = len,
                                 .status = -1,
                                 .grpc_status = -1};
            c->consumed = 9 + len;
            if (f->type == H2_HEADERS || f->type == H2_CONTINUATION) {
                const uint8_t *p = f->payload;
                size_t n = f->len;
                fragment(f->type, f->flags, &p, &n);
                if (f->type == H2_HEADERS)
                    c->block.len = 0;
                h2raw_put(&c->block, p, n);
                if (!(f->flags & H2_END_HEADERS)) { /* CONTINUATIONs follow */
                    drop_consumed(c);
                    continue;
                }
                if (decode_block(c, c->block.p, c->block.len, f) != 0)
                    return -1;
                f->type = H2_HEADERS;
            }
            apply(c, f);
            return 1;
        }
        int left = (int)(deadline - now_ms());
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -1;
        if (c->in_len + 65536 > c->in_cap) {
            size_t cap = c->in_cap ? c->in_cap * 2 : 262144;
            uint8_t *grown = realloc(c->in, cap);
            if (!grown)
                return -1;
            c->in = grown;
            c->in_cap = cap;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n == 0)
            return 0;
        if (n < 0)
            return -1;
        c->in_len += (size_t)n;
    }
}

int64_t h2raw_can_send(const h2raw_conn_t *c, uint32_t id)
{
    int64_t s = c->initial_window + (id / 2 < H2RAW_STREAMS ? c->window[id / 2] : 0);
    return s < c->conn_window ? s : c->conn_window;
}

void h2raw_sent(h2raw_conn_t *c, uint32_t id, size_t n)
{
    c->conn_window -= (int64_t)n;
    if (id / 2 < H2RAW_STREAMS)
        c->window[id / 2] -= (int64_t)n;
}

int h2raw_wait(h2raw_conn_t *c, uint32_t id, int timeout_ms, h2raw_result_t *r)
{
    *r = (h2raw_result_t){.grpc_status = -1};
    h2raw_buf_t body = {0};
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        h2raw_frame_t f;
        int left = (int)(deadline - now_ms());
        if (left <= 0 || h2raw_next(c, &f, left) != 1) {
            h2raw_buf_free(&body);
            return -1;
        }
        if (f.stream != id)
            continue;
        if (f.type == H2_RST_STREAM && f.len == 4) {
            r->reset = true;
            r->rst_code = be32(f.payload);
            break;
        }
        if (f.type == H2_HEADERS && f.grpc_status >= 0) {
            r->grpc_status = f.grpc_status;
            snprintf(r->grpc_message, sizeof(r->grpc_message), "%s", f.grpc_message);
        }
        if (f.type == H2_DATA)
            h2raw_put(&body, f.payload, f.len);
        if ((f.type == H2_HEADERS || f.type == H2_DATA) && (f.flags & H2_END_STREAM))
            break;
    }
    if (body.len > 5) {
        r->message_len = body.len - 5;
        r->message = malloc(r->message_len);
        memcpy(r->message, body.p + 5, r->message_len);
    }
    h2raw_buf_free(&body);
    return 0;
}

int h2raw_call(h2raw_conn_t *c, uint32_t id, const char *path, const uint8_t *msg, size_t len,
               int timeout_ms, h2raw_result_t *r)
{
    h2raw_buf_t out = {0}, block = {0};
    h2raw_grpc_fields(&block, path);
    h2raw_headers(&out, id, &block, false);
    h2raw_grpc_data(&out, id, msg, len, true);
    int rc = h2raw_send(c, out.p, out.len);
    h2raw_buf_free(&out);
    h2raw_buf_free(&block);
    if (rc != 0) {
        *r = (h2raw_result_t){.grpc_status = -1};
        return -1;
    }
    return h2raw_wait(c, id, timeout_ms, r);
}

int h2raw_ping(h2raw_conn_t *c, uint64_t opaque, int timeout_ms)
{
    uint8_t data[8];
    for (int i = 0; i < 8; i++)
        data[i] = (uint8_t)(opaque >> (56 - 8 * i));
    h2raw_buf_t out = {0};
    h2raw_frame(&out, H2_PING, 0, 0, data, 8);
    int rc = h2raw_send(c, out.p, out.len);
    h2raw_buf_free(&out);
    long long deadline = now_ms() + timeout_ms;
    while (rc == 0) {
        h2raw_frame_t f;
        int left = (int)(deadline - now_ms());
        if (left <= 0 || h2raw_next(c, &f, left) != 1)
            return -1;
        if (f.type == H2_PING && (f.flags & H2_ACK) && f.len == 8 && !memcmp(f.payload, data, 8))
            return 0;
    }
    return -1;
}

uint8_t *h2raw_rls_request(const char *domain, const char *key, const char *value, size_t *len)
{
    return h2raw_rls_request_keys(domain, &key, 1, value, len);
}

uint8_t *h2raw_rls_request_keys(const char *domain, const char *const *keys, size_t n,
                                const char *value, size_t *len)
{
    Envoy__Service__Ratelimit__V3__RateLimitDescriptor__Entry e[32], *ep[32];
    Envoy__Service__Ratelimit__V3__RateLimitDescriptor d[32], *dp[32];
    if (n > 32)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        e[i] = (Envoy__Service__Ratelimit__V3__RateLimitDescriptor__Entry)
            ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__ENTRY__INIT;
        e[i].key = (char *)keys[i];
        e[i].value = (char *)value;
        ep[i] = &e[i];
        d[i] = (Envoy__Service__Ratelimit__V3__RateLimitDescriptor)
            ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
        d[i].n_entries = 1;
        d[i].entries = &ep[i];
        dp[i] = &d[i];
    }
    Envoy__Service__Ratelimit__V3__RateLimitRequest r =
        ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_REQUEST__INIT;
    r.domain = (char *)domain;
    r.n_descriptors = n;
    r.descriptors = dp;
    *len = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&r);
    uint8_t *out = malloc(*len ? *len : 1);
    if (out)
        envoy__service__ratelimit__v3__rate_limit_request__pack(&r, out);
    return out;
}

long h2raw_rls_remaining(const uint8_t *msg, size_t len)
{
    Envoy__Service__Ratelimit__V3__RateLimitResponse *r =
        envoy__service__ratelimit__v3__rate_limit_response__unpack(NULL, len, msg);
    if (!r)
        return -1;
    long rem = r->n_statuses ? (long)r->statuses[0]->limit_remaining : -1;
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(r, NULL);
    return rem;
}
