/* See peers.h. Non-blocking sockets and one poll() loop: a slow peer costs the others nothing. */
#include "peers.h"

#include <errno.h>
#include <fcntl.h>
#include <http_parser.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

typedef struct fetch {
    peer_t *p;
    int fd;
    bool connected, sent, done;
    char req[256];
    size_t req_len, req_off;
    http_parser hp;
    bool msgpack; /* Content-Type: application/msgpack */
    bool in_type; /* the header being read is Content-Type */
    uint8_t *buf; /* the body so far */
    size_t len;
} fetch_t;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void fail(fetch_t *f, const char *fmt, const char *arg)
{
    if (!f->done) {
        snprintf(f->p->error, sizeof(f->p->error), fmt, arg);
        f->done = true;
    }
    if (f->fd >= 0) {
        close(f->fd);
        f->fd = -1;
    }
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
    fetch_t *f = hp->data;
    f->in_type = len == 12 && strncasecmp(at, "Content-Type", 12) == 0;
    return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
    fetch_t *f = hp->data;
    if (f->in_type)
        f->msgpack = len >= 19 && strncasecmp(at, "application/msgpack", 19) == 0;
    return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
    fetch_t *f = hp->data;
    if (len > PEER_ANSWER_MAX - f->len) {
        fail(f, "an answer longer than %s bytes", "1048576");
        return -1;
    }
    uint8_t *b = realloc(f->buf, f->len + len);
    if (!b) {
        fail(f, "%s", "out of memory");
        return -1;
    }
    memcpy(b + f->len, at, len);
    f->buf = b;
    f->len += len;
    return 0;
}

static int on_complete(http_parser *hp)
{
    fetch_t *f = hp->data;
    char why[96];
    const char *bad = NULL;
    if (hp->status_code != 200) {
        snprintf(why, sizeof(why), "HTTP %u from /v1/fleet (an older tokentriage?)",
                 hp->status_code);
        bad = why;
    } else if (!f->msgpack) {
        bad = "not a fleet answer: its Content-Type is not application/msgpack";
    } else if ((bad = peers_check_answer(f->buf, f->len))) {
        snprintf(why, sizeof(why), "not a fleet answer: %s", bad);
        bad = why;
    }
    if (bad) {
        fail(f, "%s", bad);
        return -1;
    }
    f->p->body = f->buf;
    f->p->len = f->len;
    f->buf = NULL;
    f->done = true;
    close(f->fd);
    f->fd = -1;
    return -1; /* nothing more is read */
}

static const http_parser_settings settings = {.on_header_field = on_header_field,
                                              .on_header_value = on_header_value,
                                              .on_body = on_body,
                                              .on_message_complete = on_complete};

/* A non-blocking connect to the peer; fails f when it cannot start. */
static void start(fetch_t *f)
{
    char port[8];
    snprintf(port, sizeof(port), "%d", f->p->port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
    if (getaddrinfo(f->p->host, port, &hints, &ai) != 0) {
        fail(f, "no address to ask (%s)", f->p->host);
        return;
    }
    f->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = f->fd < 0 ? -1 : connect(f->fd, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (rc != 0 && errno != EINPROGRESS) {
        fail(f, "cannot connect: %s", strerror(errno));
        return;
    }
    f->req_len = (size_t)snprintf(f->req, sizeof(f->req),
                                  "GET /v1/fleet HTTP/1.1\r\nHost: %s:%d\r\nAccept: "
                                  "application/msgpack\r\nConnection: close\r\n\r\n",
                                  f->p->host, f->p->port);
    http_parser_init(&f->hp, HTTP_RESPONSE);
    f->hp.data = f;
}

/* The socket is ready: finish the connect, send, or read what came. */
static void step(fetch_t *f, short revents)
{
    if (!f->connected) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(f->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            fail(f, "cannot connect: %s", strerror(err));
            return;
        }
        f->connected = true;
    }
    if (!f->sent) {
        ssize_t k = send(f->fd, f->req + f->req_off, f->req_len - f->req_off, MSG_NOSIGNAL);
        if (k < 0 && errno != EAGAIN) {
            fail(f, "cannot send: %s", strerror(errno));
            return;
        }
        f->req_off += k > 0 ? (size_t)k : 0;
        f->sent = f->req_off == f->req_len;
        return;
    }
    if (!(revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    char buf[16384];
    ssize_t k = recv(f->fd, buf, sizeof(buf), 0);
    if (k < 0 && errno == EAGAIN)
        return;
    if (k < 0) {
        fail(f, "cannot read: %s", strerror(errno));
        return;
    }
    size_t used = http_parser_execute(&f->hp, &settings, buf, (size_t)k);
    if (f->done)
        return;
    if (k == 0) { /* the end of the stream: a body framed by the close is complete now */
        http_parser_execute(&f->hp, &settings, NULL, 0);
        fail(f, "%s", "the connection closed before a whole answer");
        return;
    }
    if (used != (size_t)k || HTTP_PARSER_ERRNO(&f->hp) != HPE_OK)
        fail(f, "not an HTTP answer: %s", http_errno_description(HTTP_PARSER_ERRNO(&f->hp)));
}

int peers_fetch(peer_t *peers, size_t n, int timeout_ms)
{
    fetch_t *fs = calloc(n ? n : 1, sizeof(*fs));
    struct pollfd *pf = calloc(n ? n : 1, sizeof(*pf));
    if (!fs || !pf) {
        free(fs);
        free(pf);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        fs[i] = (fetch_t){.p = &peers[i], .fd = -1};
        peers[i].error[0] = '\0';
        start(&fs[i]);
    }
    int64_t deadline = now_ms() + timeout_ms;
    for (;;) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (!fs[i].done)
                pf[k++] = (struct pollfd){
                    .fd = fs[i].fd, .events = fs[i].connected && fs[i].sent ? POLLIN : POLLOUT};
        int64_t left = deadline - now_ms();
        if (k == 0 || left <= 0)
            break;
        if (poll(pf, k, (int)left) < 0 && errno != EINTR)
            break;
        for (size_t i = 0, j = 0; i < n; i++) {
            if (fs[i].done)
                continue;
            short re = pf[j++].revents;
            if (re)
                step(&fs[i], re);
        }
    }
    char ms[24];
    snprintf(ms, sizeof(ms), "%d", timeout_ms);
    for (size_t i = 0; i < n; i++) {
        fail(&fs[i], "no answer within %s ms", ms);
        free(fs[i].buf);
    }
    free(fs);
    free(pf);
    return 0;
}

const char *peers_check_answer(const uint8_t *body, size_t len)
{
    wire_reader_t rd = {.pos = body, .end = body + len};
    uint32_t n;
    bool node = false, count = false, limits = false;
    if (wire_read_map(&rd, &n))
        return "not a msgpack map";
    for (uint32_t i = 0; i < n; i++) {
        wire_str_t k;
        if (wire_read_str(&rd, &k))
            return "a key that is not a string";
        int rc = 0;
        if (wire_str_eq(k, "node")) {
            wire_str_t v;
            rc = wire_read_str(&rd, &v) || v.len == 0 || v.len > 128;
            node = true;
        } else if (wire_str_eq(k, "n")) {
            int64_t v;
            rc = wire_read_int(&rd, &v) || v < 1;
            count = true;
        } else if (wire_str_eq(k, "limits")) {
            uint32_t rows, fields;
            rc = wire_read_array(&rd, &rows);
            for (uint32_t r = 0; !rc && r < rows; r++) {
                rc = wire_read_map(&rd, &fields);
                for (uint32_t f = 0; !rc && f < fields; f++) {
                    wire_str_t name;
                    rc = wire_read_str(&rd, &name) || wire_skip(&rd);
                }
            }
            limits = true;
        } else {
            rc = wire_skip(&rd);
        }
        if (rc)
            return "a field of the wrong type, or cut short";
    }
    if (rd.pos != rd.end)
        return "bytes after the map";
    if (!node || !count || !limits)
        return "no node, n or limits";
    return NULL;
}

void peers_free(peer_t *peers, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(peers[i].body);
        peers[i].body = NULL;
    }
}
