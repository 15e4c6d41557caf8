/*
 * h2raw: a raw HTTP/2 (h2c) client for tests and the benches. Frames and HPACK are built
 * by hand so a caller can send what no real client would: one dynamic-table entry referenced
 * thousands of times, bodies that never end, a preface cut short, silence. What comes back is
 * read frame by frame with a deadline; header blocks go through nghttp2's HPACK inflater (the
 * dynamic table must follow every block), and the peer's SETTINGS and WINDOW_UPDATEs are
 * tracked, so a caller can send exactly as much DATA as the server's flow control allows.
 * What a gRPC call is (its fields, the message's prefix, a RateLimitRequest) is written here
 * once, for the hostile clients and for bench_grpc's nghttp2 session alike.
 */
#ifndef TT_TESTS_H2RAW_H
#define TT_TESTS_H2RAW_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define H2RAW_RLS "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define H2RAW_HEALTH "/grpc.health.v1.Health/Check"
#define H2RAW_FRAME_MAX 16384 /* SETTINGS_MAX_FRAME_SIZE's default: what a frame carries */
#define H2RAW_STREAMS 4096    /* stream windows tracked: client stream ids 1 .. 2 * this - 1 */

enum {
    H2_DATA = 0,
    H2_HEADERS = 1,
    H2_RST_STREAM = 3,
    H2_SETTINGS = 4,
    H2_PING = 6,
    H2_GOAWAY = 7,
    H2_WINDOW_UPDATE = 8,
    H2_CONTINUATION = 9
};
enum { H2_END_STREAM = 1, H2_ACK = 1, H2_END_HEADERS = 4 };

/* Bytes being built. */
typedef struct h2raw_buf {
    uint8_t *p;
    size_t len, cap;
} h2raw_buf_t;

void h2raw_put(h2raw_buf_t *b, const void *p, size_t n);
void h2raw_buf_free(h2raw_buf_t *b);

/* HPACK (RFC 7541): an integer with `prefix` bits after the pattern `first` (§5.1); a literal
 * field with a new name, added to the dynamic table when `index` (§6.2.1) or not (§6.2.2); a
 * reference to table entry `index` (§6.1; 62 is the newest dynamic entry). No Huffman. */
void h2raw_hpack_int(h2raw_buf_t *b, uint8_t first, int prefix, uint64_t v);
void h2raw_hpack_literal(h2raw_buf_t *b, const char *name, const char *value, size_t value_len,
                         bool index);
void h2raw_hpack_indexed(h2raw_buf_t *b, uint32_t index);
/* The fields of a gRPC call to `path` (POST, http, tt, application/grpc, te: trailers, and
 * authorization: h2raw_authorization when it is set), as name/value pairs into nv (their
 * strings borrowed): how many. */
#define H2RAW_GRPC_FIELDS 7
size_t h2raw_grpc_nv(nghttp2_nv nv[H2RAW_GRPC_FIELDS], const char *path);
/* The same fields as HPACK literals (not indexed), in that order. */
void h2raw_grpc_fields(h2raw_buf_t *b, const char *path);
/* The `authorization` every call sends ("Bearer <token>": tokentriage's gRPC door on TCP decides
 * only for a bearer token of its server.tokens_file); NULL, the default: none. */
extern const char *h2raw_authorization;

/* One frame; a header block as HEADERS and as many CONTINUATIONs as it takes; the client
 * preface and an empty SETTINGS; a gRPC message (its 5-byte prefix, then msg) as one DATA. */
void h2raw_frame(h2raw_buf_t *b, uint8_t type, uint8_t flags, uint32_t stream, const void *payload,
                 size_t len);
void h2raw_headers(h2raw_buf_t *b, uint32_t stream, const h2raw_buf_t *block, bool end_stream);
void h2raw_preface(h2raw_buf_t *b);
void h2raw_grpc_data(h2raw_buf_t *b, uint32_t stream, const uint8_t *msg, size_t len,
                     bool end_stream);
/* A gRPC message's 5-byte prefix: not compressed, `len` bytes (big-endian). */
#define H2RAW_GRPC_PREFIX 5
void h2raw_grpc_prefix(uint8_t out[H2RAW_GRPC_PREFIX], size_t len);

/* A frame read. The payload is valid until the next h2raw_next. For a header block (HEADERS
 * and its CONTINUATIONs, handed over as one frame of type H2_HEADERS), the fields of interest. */
typedef struct h2raw_frame {
    uint8_t type, flags;
    uint32_t stream;
    const uint8_t *payload;
    size_t len;
    int status;      /* :status, or -1 */
    int grpc_status; /* grpc-status, or -1 */
    char grpc_message[256];
} h2raw_frame_t;

typedef struct h2raw_conn {
    int fd;
    uint8_t *in; /* read, not yet handed over */
    size_t in_len, in_cap, consumed;
    h2raw_buf_t block; /* a header block being gathered across CONTINUATIONs */
    nghttp2_hd_inflater *hd;
    int64_t conn_window;           /* DATA bytes the server lets us send on the connection */
    int64_t initial_window;        /* its SETTINGS_INITIAL_WINDOW_SIZE */
    int64_t window[H2RAW_STREAMS]; /* what each stream has beyond the initial window */
    uint32_t max_streams;          /* its SETTINGS_MAX_CONCURRENT_STREAMS, 0 until known */
    uint32_t max_header_list;      /* its SETTINGS_MAX_HEADER_LIST_SIZE, 0 until known */
    bool goaway;                   /* a GOAWAY came */
    uint32_t goaway_code;
} h2raw_conn_t;

/* Connects (blocking socket) to a unix socket path or 127.0.0.1:port. 0 or -1. */
int h2raw_open_unix(h2raw_conn_t *c, const char *path);
int h2raw_open_tcp(h2raw_conn_t *c, int port);
/* One of the two, as the benches name the door: "tcp:PORT" or a unix socket path. */
int h2raw_open(h2raw_conn_t *c, const char *addr);
/* On a descriptor already connected (one end of a socketpair, for a server without a socket). */
int h2raw_open_fd(h2raw_conn_t *c, int fd);
void h2raw_close(h2raw_conn_t *c);

/* Writes all of p (blocking). 0, or -1 when the peer is gone. */
int h2raw_send(h2raw_conn_t *c, const void *p, size_t n);

/* The next frame within timeout_ms: 1 with *f filled, 0 when the peer closed, -1 on a timeout
 * or an error. SETTINGS are acknowledged and applied, WINDOW_UPDATEs added to the windows, a
 * GOAWAY noted, before the frame is handed over. */
int h2raw_next(h2raw_conn_t *c, h2raw_frame_t *f, int timeout_ms);

/* What the server lets stream `id` send now (the smaller of its window and the connection's). */
int64_t h2raw_can_send(const h2raw_conn_t *c, uint32_t id);
/* Counts DATA bytes sent on stream id against the windows. */
void h2raw_sent(h2raw_conn_t *c, uint32_t id, size_t n);

/* How a stream ended. */
typedef struct h2raw_result {
    int grpc_status; /* -1 when there was none (reset, timeout, closed) */
    char grpc_message[256];
    uint32_t rst_code; /* the RST_STREAM's error code, when reset */
    bool reset;
    uint8_t *message; /* the response message without its prefix (malloc'd), or NULL */
    size_t message_len;
} h2raw_result_t;

/* Reads until stream `id` ends (END_STREAM or RST_STREAM) within timeout_ms, dropping other
 * streams' frames. 0, or -1 on a timeout or when the connection ended first. Free r->message. */
int h2raw_wait(h2raw_conn_t *c, uint32_t id, int timeout_ms, h2raw_result_t *r);

/* One unary call on stream id: the fields, msg[0, len) as one message, END_STREAM; then
 * h2raw_wait. */
int h2raw_call(h2raw_conn_t *c, uint32_t id, const char *path, const uint8_t *msg, size_t len,
               int timeout_ms, h2raw_result_t *r);

/* Sends PING with `opaque` and reads until its ACK: every frame the server queued before it has
 * been read by then (windows included). 0, or -1. */
int h2raw_ping(h2raw_conn_t *c, uint64_t opaque, int timeout_ms);

/* A RateLimitRequest of `domain` with one descriptor of one entry key=value (hits_addend 0), packed
 * into a malloc'd buffer (*len bytes). */
uint8_t *h2raw_rls_request(const char *domain, const char *key, const char *value, size_t *len);
/* The same with `n` descriptors (at most 32), the i-th of one entry keys[i]=value. */
uint8_t *h2raw_rls_request_keys(const char *domain, const char *const *keys, size_t n,
                                const char *value, size_t *len);

/* The first status's limit_remaining in a packed RateLimitResponse, or -1. */
long h2raw_rls_remaining(const uint8_t *msg, size_t len);

#endif
