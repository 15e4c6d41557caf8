/*
 * A tiny HTTP/1.1 responder for the operations endpoints: GET /metrics, /healthz, /readyz.
 * One request per connection (answered with Connection: close), a request head of at most
 * 4 KiB, 10 seconds to send it, at most 64 connections at once: enough for a scraper and a
 * kubelet, and nothing a stranger on the port can grow.
 */
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "srv_int.h"

#define HEAD_MAX 4096
#define MAX_CONNS 64
#define TIMEOUT_MS 10000

struct srv_http {
    uv_tcp_t listener;
    srv_t *srv;
    unsigned nconns;
    struct http_conn *conns;
    bool stopped; /* freed once the listener and every connection have closed */
    bool listener_closed;
};

typedef struct http_conn {
    uv_tcp_t tcp;
    struct http_conn *prev, *next;
    uv_timer_t timer;
    struct srv_http *http;
    int open_handles;
    bool answered;
    bool head_only; /* a HEAD request: the headers of a GET, no body */
    size_t len;
    char head[HEAD_MAX];
    proto_out_t out;
    uv_write_t wr;
} http_conn_t;

static void maybe_free(struct srv_http *h)
{
    if (h->stopped && h->listener_closed && h->nconns == 0)
        free(h);
}

static void on_handle_closed(uv_handle_t *handle)
{
    http_conn_t *c = handle->data;
    if (--c->open_handles > 0)
        return;
    struct srv_http *h = c->http;
    if (c->prev)
        c->prev->next = c->next;
    else
        h->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    h->nconns--;
    proto_out_free(&c->out);
    free(c);
    maybe_free(h);
}

static void http_close(http_conn_t *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&c->timer))
        uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_written(uv_write_t *w, int status)
{
    http_close(w->data);
}

static void respond(http_conn_t *c, int status, const char *reason, const char *type,
                    const proto_out_t *body)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, reason, type, body->len);
    c->answered = true;
    uv_read_stop((uv_stream_t *)&c->tcp);
    proto_out_append(&c->out, head, (size_t)n);
    if (!c->head_only)
        proto_out_append(&c->out, body->data, body->len);
    if (c->out.failed) {
        http_close(c);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)c->out.data, (unsigned)c->out.len);
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0)
        http_close(c);
}

static void respond_text(http_conn_t *c, int status, const char *reason, const char *text)
{
    proto_out_t body = {0};
    proto_out_append(&body, text, strlen(text));
    respond(c, status, reason, "text/plain; charset=utf-8", &body);
    proto_out_free(&body);
}

static void route(http_conn_t *c)
{
    srv_t *s = c->http->srv;
    char method[8], path[128];
    if (sscanf(c->head, "%7s %127s HTTP/1.", method, path) != 2) {
        respond_text(c, 400, "Bad Request", "bad request\n");
        return;
    }
    char *q = strchr(path, '?');
    if (q)
        *q = 0;
    c->head_only = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "GET") != 0 && !c->head_only) {
        respond_text(c, 405, "Method Not Allowed", "only GET\n");
        return;
    }
    if (strcmp(path, "/metrics") == 0) {
        proto_out_t body = {0};
        srv_metrics_render(s->metrics, &body);
        respond(c, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", &body);
        proto_out_free(&body);
    } else if (strcmp(path, "/healthz") == 0) {
        respond_text(c, 200, "OK", "ok\n");
    } else if (strcmp(path, "/readyz") == 0) {
        const char *why = "not ready";
        if (!s->ready || s->ready(s->ready_ud, &why)) {
            respond_text(c, 200, "OK", "ready\n");
        } else {
            char msg[256];
            snprintf(msg, sizeof(msg), "not ready: %s\n", why);
            respond_text(c, 503, "Service Unavailable", msg);
        }
    } else {
        respond_text(c, 404, "Not Found", "not found: try /metrics, /healthz, /readyz\n");
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    http_conn_t *c = h->data;
    *buf = uv_buf_init(c->head + c->len, (unsigned)(HEAD_MAX - 1 - c->len));
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    http_conn_t *c = st->data;
    if (nread < 0) {
        http_close(c);
        return;
    }
    c->len += (size_t)nread;
    c->head[c->len] = 0;
    if (strstr(c->head, "\r\n\r\n") || strstr(c->head, "\n\n"))
        route(c);
    else if (c->len >= HEAD_MAX - 1)
        respond_text(c, 431, "Request Header Fields Too Large", "request head too large\n");
}

static void on_timeout(uv_timer_t *t)
{
    http_close(t->data);
}

static void on_connection(uv_stream_t *server, int status)
{
    struct srv_http *h = server->data;
    if (status < 0)
        return;
    http_conn_t *c = calloc(1, sizeof(*c));
    if (!c)
        return;
    c->http = h;
    h->nconns++;
    c->next = h->conns;
    if (h->conns)
        h->conns->prev = c;
    h->conns = c;
    uv_tcp_init(server->loop, &c->tcp);
    uv_timer_init(server->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0 || h->nconns > MAX_CONNS ||
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        http_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timeout, TIMEOUT_MS, 0);
}

/* Parses "host:port" or "[v6]:port". */
static int parse_addr(const char *addr, struct sockaddr_storage *ss)
{
    char host[128];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof(host))
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || end == colon + 1)
        return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = 0;
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        host[strlen(host) - 1] = 0;
        return uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)ss);
    }
    return uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss);
}

int srv__http_start(srv_t *s, const char *addr, char *err, size_t err_size)
{
    struct sockaddr_storage ss;
    if (parse_addr(addr, &ss) != 0) {
        snprintf(err, err_size, "server.http: \"%s\" is not host:port", addr);
        return SRV_ELISTEN;
    }
    struct srv_http *h = calloc(1, sizeof(*h));
    if (!h)
        return SRV_ENOMEM;
    h->srv = s;
    uv_tcp_init(s->loop, &h->listener);
    h->listener.data = h;
    int rc = uv_tcp_bind(&h->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&h->listener, 64, on_connection);
    s->http = h; /* srv__http_stop closes and frees it, on success or not */
    if (rc != 0) {
        snprintf(err, err_size, "server.http: cannot listen on %s: %s", addr, uv_strerror(rc));
        return SRV_ELISTEN;
    }
    /* the bound address, so that port 0 tells which port the kernel gave */
    char bound[INET6_ADDRSTRLEN + 8] = "";
    int len = sizeof(ss);
    if (uv_tcp_getsockname(&h->listener, (struct sockaddr *)&ss, &len) == 0) {
        char ip[INET6_ADDRSTRLEN] = "";
        bool v6 = ss.ss_family == AF_INET6;
        if (v6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        else
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        int port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                            : ((struct sockaddr_in *)&ss)->sin_port);
        snprintf(bound, sizeof(bound), v6 ? "[%s]:%d" : "%s:%d", ip, port);
    }
    srv_log(SRV_LOG_INFO, "http listening", "address", bound[0] ? bound : addr, NULL);
    return 0;
}

static void on_listener_closed(uv_handle_t *handle)
{
    struct srv_http *h = handle->data;
    h->listener_closed = true;
    maybe_free(h);
}

void srv__http_stop(srv_t *s)
{
    struct srv_http *h = s->http;
    if (!h)
        return;
    h->stopped = true;
    uv_close((uv_handle_t *)&h->listener, on_listener_closed);
    for (http_conn_t *c = h->conns; c; c = c->next)
        http_close(c);
    s->http = NULL;
}
