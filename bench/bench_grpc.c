/*
 * ShouldRateLimit calls per second against a running daemon's server.grpc: one HTTP/2
 * connection (nghttp2's client session, blocking socket), CONCURRENCY calls in flight on it
 * (as Envoy multiplexes), each on one of KEYS values N, for SECONDS: DESCRIPTORS descriptors
 * (default 1) [key=k-N], [key1=k-N], [key2=k-N] ... of DOMAIN (default "bench"). Prints calls/s,
 * errors and, per call, p50/p99 latency. bench/bench_grpc.sh runs it beside `tokentriage bench`
 * on the socket.
 *
 * usage: bench_grpc UNIX_PATH|tcp:PORT CONCURRENCY SECONDS KEYS [TOKEN [DESCRIPTORS [DOMAIN]]]
 * (TOKEN: sent as `authorization: Bearer TOKEN`, "" for none; a TCP door decides only for a
 * bearer token)
 *
 * The calls (their fields, the message and its prefix) and the connection are the tests' raw
 * HTTP/2 client's (tests/support/h2raw.h); the framing is nghttp2's client session, which
 * multiplexes as Envoy does.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "h2raw.h"

typedef struct call {
    const uint8_t *msg;
    size_t len, sent;
    double t0;
} call_t;

static int fd;
static uint8_t **msgs;
static size_t *lens;
static long keys, next_key, done, errors, inflight;
static double *lat;
static long nlat, cap_lat;
static double stop_at;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static ssize_t send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *u)
{
    (void)s, (void)flags, (void)u;
    size_t off = 0;
    while (off < len) {
        ssize_t n = write(fd, data + off, len - off);
        if (n <= 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        off += (size_t)n;
    }
    return (ssize_t)len;
}

static ssize_t body_cb(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
                       nghttp2_data_source *src, void *u)
{
    (void)s, (void)id, (void)u;
    call_t *c = src->ptr;
    size_t n = c->len - c->sent < length ? c->len - c->sent : length;
    memcpy(buf, c->msg + c->sent, n);
    c->sent += n;
    if (c->sent == c->len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static char bearer[160]; /* "Bearer TOKEN" (h2raw_authorization), or "" */
static nghttp2_nv fields[H2RAW_GRPC_FIELDS];
static size_t nfields;

static void submit(nghttp2_session *s)
{
    call_t *c = calloc(1, sizeof(*c));
    long k = next_key++ % keys;
    c->msg = msgs[k];
    c->len = lens[k];
    c->t0 = now_s();
    nghttp2_data_provider prd = {.source.ptr = c, .read_callback = body_cb};
    if (nghttp2_submit_request(s, NULL, fields, nfields, &prd, c) < 0) {
        fprintf(stderr, "submit failed\n");
        exit(1);
    }
    inflight++;
}

static int header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
                     const uint8_t *value, size_t vl, uint8_t flags, void *u)
{
    (void)s, (void)f, (void)flags, (void)u;
    if (nl == 11 && memcmp(name, "grpc-status", 11) == 0 && !(vl == 1 && value[0] == '0'))
        errors++;
    return 0;
}

static int close_cb(nghttp2_session *s, int32_t id, uint32_t code, void *u)
{
    (void)u;
    call_t *c = nghttp2_session_get_stream_user_data(s, id);
    if (code)
        errors++;
    if (c) {
        if (nlat < cap_lat)
            lat[nlat++] = now_s() - c->t0;
        free(c);
    }
    done++;
    inflight--;
    if (now_s() < stop_at)
        submit(s);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 8 || (argc > 5 && strlen(argv[5]) >= sizeof(bearer) - 8)) {
        fprintf(stderr, "usage: bench_grpc UNIX_PATH|tcp:PORT CONCURRENCY SECONDS KEYS "
                        "[TOKEN [DESCRIPTORS [DOMAIN]]]\n");
        return 2;
    }
    long conc = atol(argv[2]);
    double secs = atof(argv[3]);
    keys = atol(argv[4]);
    if (argc > 5 && argv[5][0]) {
        snprintf(bearer, sizeof(bearer), "Bearer %s", argv[5]);
        h2raw_authorization = bearer;
    }
    nfields = h2raw_grpc_nv(fields, H2RAW_RLS);
    size_t nd = argc > 6 ? (size_t)atol(argv[6]) : 1;
    char *domain = argc > 7 ? argv[7] : "bench";
    if (nd < 1 || nd > 32) {
        fprintf(stderr, "bench_grpc: DESCRIPTORS must be 1 to 32\n");
        return 2;
    }
    msgs = calloc((size_t)keys, sizeof(*msgs));
    lens = calloc((size_t)keys, sizeof(*lens));
    char names[32][8];
    const char *keynames[32];
    for (size_t j = 0; j < nd; j++) { /* key, key1, key2, ... */
        snprintf(names[j], sizeof(names[j]), j ? "key%zu" : "key", j);
        keynames[j] = names[j];
    }
    for (long i = 0; i < keys; i++) { /* each message with its prefix, as it goes out */
        char id[32];
        snprintf(id, sizeof(id), "k-%ld", i);
        size_t n;
        uint8_t *req = h2raw_rls_request_keys(domain, keynames, nd, id, &n);
        msgs[i] = malloc(H2RAW_GRPC_PREFIX + n);
        if (!req || !msgs[i]) {
            fprintf(stderr, "bench_grpc: out of memory\n");
            return 1;
        }
        h2raw_grpc_prefix(msgs[i], n);
        memcpy(msgs[i] + H2RAW_GRPC_PREFIX, req, n);
        lens[i] = H2RAW_GRPC_PREFIX + n;
        free(req);
    }
    h2raw_conn_t conn;
    if (h2raw_open(&conn, argv[1]) != 0) {
        perror("connect");
        return 1;
    }
    fd = conn.fd;
    if (strncmp(argv[1], "tcp:", 4) == 0) { /* server.grpc on loopback TCP */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, send_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, header_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, close_cb);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, NULL);
    nghttp2_submit_settings(s, 0, NULL, 0);
    cap_lat = 50000000;
    lat = malloc((size_t)cap_lat * sizeof(*lat));
    double t0 = now_s();
    stop_at = t0 + secs;
    for (long i = 0; i < conc; i++)
        submit(s);
    uint8_t buf[65536];
    while (inflight > 0) {
        if (nghttp2_session_send(s) != 0)
            break;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)n) < 0)
            break;
    }
    double el = now_s() - t0;
    qsort(lat, (size_t)nlat, sizeof(*lat), cmp);
    printf(
        "{\"concurrency\":%ld,\"calls\":%ld,\"errors\":%ld,\"seconds\":%.3f,\"calls_per_s\":%.0f,"
        "\"p50_us\":%.1f,\"p99_us\":%.1f}\n",
        conc, done, errors, el, (double)done / el, nlat ? lat[nlat / 2] * 1e6 : 0,
        nlat ? lat[(long)(nlat * 0.99)] * 1e6 : 0);
    nghttp2_session_del(s);
    h2raw_close(&conn);
    return errors ? 1 : 0;
}
