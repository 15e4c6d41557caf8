/* See httpc.h. */
#include "httpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* What was read past the last response, for the next httpc_read. */
static char pend[HTTPC_MAX];
static size_t pend_len;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int httpc_tcp(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int httpc_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int httpc_send(int fd, const char *s, size_t len)
{
    while (len) {
        ssize_t n = write(fd, s, len);
        if (n <= 0)
            return -1;
        s += n;
        len -= (size_t)n;
    }
    return 0;
}

void httpc_reset(void)
{
    pend_len = 0;
}

/* Content-Length of a head, or -1. */
static long content_length(const char *head)
{
    for (const char *p = head; (p = strchr(p, '\n')); p++)
        if (strncasecmp(p + 1, "Content-Length:", 15) == 0)
            return strtol(p + 16, NULL, 10);
    return -1;
}

int httpc_read(int fd, httpc_response_t *r, int timeout_ms)
{
    r->status = 0;
    r->head = r->body = NULL;
    r->body_len = 0;
    size_t len = pend_len;
    memcpy(r->raw, pend, pend_len);
    pend_len = 0;
    long long deadline = now_ms() + timeout_ms;
    for (;;) {
        r->raw[len] = 0;
        char *end = strstr(r->raw, "\r\n\r\n");
        if (end) {
            long cl = content_length(r->raw);
            size_t head_len = (size_t)(end - r->raw) + 4;
            if (cl >= 0 && len >= head_len + (size_t)cl) {
                size_t total = head_len + (size_t)cl;
                pend_len = len - total;
                memcpy(pend, r->raw + total, pend_len);
                sscanf(r->raw, "HTTP/1.%*d %d", &r->status);
                r->body_len = (size_t)cl;
                memmove(r->raw + head_len + 1, r->raw + head_len, r->body_len);
                r->raw[head_len] = 0;
                r->head = r->raw;
                r->body = r->raw + head_len + 1;
                r->body[r->body_len] = 0;
                return 0;
            }
        }
        int left = (int)(deadline - now_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0 || len == HTTPC_MAX)
            return -1;
        ssize_t n = read(fd, r->raw + len, HTTPC_MAX - len);
        if (n <= 0)
            return -1;
        len += (size_t)n;
    }
}

const char *httpc_header(const httpc_response_t *r, const char *name, char *buf, size_t size)
{
    size_t n = strlen(name);
    for (const char *p = r->head ? r->head : ""; (p = strchr(p, '\n')); p++) {
        if (strncasecmp(p + 1, name, n) == 0 && p[1 + n] == ':') {
            const char *v = p + 2 + n;
            while (*v == ' ')
                v++;
            size_t vl = strcspn(v, "\r\n");
            snprintf(buf, size, "%.*s", (int)vl, v);
            return buf;
        }
    }
    return NULL;
}

bool httpc_closed(int fd, int timeout_ms)
{
    long long deadline = now_ms() + timeout_ms;
    char b[4096];
    for (;;) {
        int left = (int)(deadline - now_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return false;
        ssize_t n = read(fd, b, sizeof(b));
        if (n <= 0)
            return true;
    }
}

int httpc_get(int port, const char *target, httpc_response_t *r)
{
    r->status = 0;
    int fd = httpc_tcp(port);
    if (fd < 0)
        return 0;
    char req[4200];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                     target);
    httpc_reset();
    if (httpc_send(fd, req, (size_t)n) == 0)
        httpc_read(fd, r, 5000);
    httpc_reset();
    close(fd);
    return r->status;
}

long long httpc_metric(int port, const char *series)
{
    httpc_response_t *r = malloc(sizeof(*r));
    if (!r)
        return -1;
    long long v = -1;
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", series);
    if (httpc_get(port, "/metrics", r) == 200 && r->body) {
        const char *at = strstr(r->body, want);
        if (at)
            v = strtoll(at + strlen(want), NULL, 10);
    }
    free(r);
    return v;
}

long long httpc_metric_reaching(int port, const char *series, long long want, int timeout_ms)
{
    long long v = -1;
    for (long long until = now_ms() + timeout_ms; now_ms() < until; usleep(20000))
        if ((v = httpc_metric(port, series)) >= want)
            break;
    return v;
}
