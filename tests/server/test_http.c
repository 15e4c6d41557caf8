/* The HTTP listener (the operations endpoints, connections, bad clients) and the log formats,
 * on the real daemon. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "httpc.h"

#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n      burst: 60\n"

static tt_daemon_t d;
static int port;
static httpc_response_t r;

static void stop(void)
{
    tt_daemon_stop(&d);
}

TestSuite(http, .fini = stop, .timeout = 60);

/* Starts the daemon with HTTP on a free port and `more` server lines (or ""). */
static void start_with(const char *more)
{
    char extra[256];
    port = tt_free_port();
    snprintf(extra, sizeof(extra), "  http: 127.0.0.1:%d\n%s", port, more);
    cr_assert_eq(tt_daemon_start(&d, LIMITS, extra), 0);
}

static void start(void)
{
    start_with("");
}

static int get(const char *path)
{
    return httpc_get(port, path, &r);
}

Test(http, metrics_healthz_and_readyz_answer)
{
    start();
    tt_client_t *c = tt_daemon_client(&d);
    tt_response_t tr;
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t"}}, 1, -1, &tr), 0);
    tt_close(c);
    cr_assert_eq(get("/healthz"), 200);
    cr_assert_str_eq(r.body, "ok\n");
    cr_assert_eq(get("/readyz"), 200);
    cr_assert_eq(get("/metrics"), 200);
    char v[128];
    cr_assert_str_eq(httpc_header(&r, "Content-Type", v, sizeof(v)),
                     "text/plain; version=0.0.4; charset=utf-8");
    const char *m = r.body;
    cr_assert(strstr(m, "tokentriage_decisions_total{limit=\"team_rpm\",verdict=\"admit\"} 1\n"),
              "%s", m);
    cr_assert(strstr(m, "tokentriage_decision_latency_seconds_count{door=\"socket\"} 1\n"), "%s",
              m);
    cr_assert(strstr(m, "# TYPE tokentriage_decision_latency_seconds histogram\n"));
    cr_assert(strstr(m, "tokentriage_counters{limit=\"team_rpm\"} 1\n"), "%s", m);
    cr_assert(strstr(m, "tokentriage_reloads_total{result=\"ok\"} 0\n"));
    cr_assert(strstr(m, "\ntokentriage_table_bytes "), "%s", m);
    cr_assert(strstr(m, "\ntokentriage_leases 0\n"), "%s", m);
    cr_assert_eq(get("/nope"), 404);
}

/* GET /status: one self-contained page a person reads at a glance (issue 30 item 7): HTML whose
 * Content-Security-Policy forbids every fetch and script, no script of its own, no outside
 * address; it names this replica and each limit with its recent decisions. */
Test(http, status_is_a_self_contained_html_page)
{
    start();
    tt_client_t *c = tt_daemon_client(&d);
    tt_response_t tr;
    for (int i = 0; i < 3; i++)
        cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t"}}, 1, -1, &tr), 0);
    tt_close(c);
    cr_assert_eq(get("/status"), 200, "%s", r.raw);
    char v[512];
    cr_assert_str_eq(httpc_header(&r, "Content-Type", v, sizeof(v)), "text/html; charset=utf-8");
    cr_assert(httpc_header(&r, "Content-Security-Policy", v, sizeof(v)), "%s", r.head);
    cr_assert(strstr(v, "default-src 'none'"), "%s", v);
    cr_assert_null(strstr(v, "unsafe-inline"), "%s", v);
    cr_assert_str_eq(httpc_header(&r, "X-Content-Type-Options", v, sizeof(v)), "nosniff");
    const char *b = r.body;
    cr_assert_eq(strncmp(b, "<!DOCTYPE html>", 15), 0, "%s", b);
    cr_assert(strstr(b, "</html>"), "%s", b);
    cr_assert(strstr(b, "data-limit=\"team_rpm\""), "%s", b);
    cr_assert(strstr(b, "Configuration</dt><dd>generation 1"), "%s", b);
    cr_assert_null(strstr(b, "<script"), "%s", b);
    cr_assert_null(strstr(b, "http://"), "%s", b);
    cr_assert_null(strstr(b, "https://"), "%s", b);
    cr_assert_null(strstr(b, " src="), "%s", b);
    cr_assert_null(strstr(b, " href="), "%s", b);
    /* only GET and HEAD */
    int fd = httpc_tcp(port);
    const char post[] = "POST /status HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n";
    cr_assert_eq(httpc_send(fd, post, sizeof(post) - 1), 0);
    httpc_reset();
    httpc_read(fd, &r, 5000);
    cr_assert_eq(r.status, 405);
    close(fd);
}

Test(http, logs_are_logfmt_by_default)
{
    start();
    cr_assert(tt_daemon_log_has(&d, "level=info msg=serving socket=", 0));
}

/* A TCP connection to the HTTP port that sends `bytes` (may be "") and then nothing more. */
static int idle_conn(const char *bytes)
{
    int fd = httpc_tcp(port);
    cr_assert_geq(fd, 0);
    cr_assert_eq(httpc_send(fd, bytes, strlen(bytes)), 0);
    return fd;
}

/* Issue 23 item 5: a client holding many idle connections (silent, or with a request head left
 * half sent) must not starve the kubelet's probes, below the connection budget or at it. */
static void probes_answered_beside_idle_connections(const char *more, int idle)
{
    static int fds[1000];
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl); /* the daemon inherits it */
    cr_assert_geq(rl.rlim_cur, 1200, "RLIMIT_NOFILE %llu", (unsigned long long)rl.rlim_cur);
    start_with(more);
    long before = tt_daemon_rss_kib(&d);
    for (int i = 0; i < idle; i++)
        fds[i] = idle_conn(i % 2 ? "" : "GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 20; i++)
        cr_assert_eq(get(i % 2 ? "/healthz" : "/readyz"), 200, "probe %d", i);
    /* memory bounded: a half-sent head holds one request buffer (~18 KiB), a silent one none */
    long after = tt_daemon_rss_kib(&d);
    cr_log_info("%d idle HTTP connections: RSS %ld -> %ld KiB", idle, before, after);
    cr_assert_lt(after - before, idle * 20);
    for (int i = 0; i < idle; i++)
        close(fds[i]);
}

Test(http, health_probes_are_answered_while_idle_clients_hold_connections)
{
    probes_answered_beside_idle_connections("", 1000);
}

Test(http, health_probes_are_answered_when_idle_clients_hold_every_slot)
{
    probes_answered_beside_idle_connections("  max_connections: 50\n", 300);
}

Test(http, one_connection_carries_a_thousand_requests)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "request %d", i);
        cr_assert_eq(r.status, 200);
    }
    close(fd);
}

Test(http, pipelined_requests_are_answered_in_order)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    char burst[64 * 64];
    size_t len = 0;
    for (int i = 0; i < 64; i++)
        len +=
            (size_t)snprintf(burst + len, sizeof(burst) - len, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n",
                             i % 3 == 0   ? "/healthz"
                             : i % 3 == 1 ? "/readyz"
                                          : "/nope");
    cr_assert_eq(httpc_send(fd, burst, len), 0);
    for (int i = 0; i < 64; i++) {
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "answer %d", i);
        cr_assert_eq(r.status, i % 3 == 2 ? 404 : 200, "answer %d", i);
        cr_assert_str_eq(r.body, i % 3 == 0 ? "ok\n" : i % 3 == 1 ? "ready\n" : r.body);
    }
    close(fd);
}

Test(http, head_gets_the_head_alone_and_other_methods_405)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    const char req[] =
        "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nPOST /healthz HTTP/1.1\r\n"
        "Host: x\r\nContent-Length: 0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
    /* the HEAD answer announces 3 bytes it does not send: read the head alone */
    char head[512];
    size_t got = 0;
    while (!strstr(head, "\r\n\r\n")) {
        ssize_t n = read(fd, head + got, 1);
        cr_assert_eq(n, 1);
        got++;
        head[got] = 0;
    }
    cr_assert(strstr(head, "HTTP/1.1 200 OK\r\n") == head, "%s", head);
    cr_assert(strstr(head, "Content-Length: 3\r\n"), "%s", head);
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, 405);
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(r.body, "ok\n");
    close(fd);
}

Test(http, a_megabyte_header_is_431_and_others_are_served)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    const char start_line[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ";
    cr_assert_eq(httpc_send(fd, start_line, sizeof(start_line) - 1), 0);
    static char big[1 << 20];
    memset(big, 'a', sizeof(big));
    httpc_send(fd, big, sizeof(big)); /* the daemon may close before taking it all */
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, 431);
    cr_assert(strstr(r.body, "request head longer than 32768 bytes"), "%s", r.body);
    cr_assert(httpc_closed(fd, 5000));
    close(fd);
    cr_assert_eq(get("/healthz"), 200);
}

Test(http, garbage_is_400_naming_what_was_wrong)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    cr_assert_eq(httpc_send(fd, "\x01\x02 nonsense\r\n\r\n", 15), 0);
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, 400);
    cr_assert(strstr(r.body, "malformed request: invalid HTTP method"), "%s", r.body);
    cr_assert(httpc_closed(fd, 5000));
    close(fd);
    cr_assert_eq(get("/healthz"), 200);
}

#define HTTP_ERRORS "tokentriage_request_errors_total{door=\"http\",code=\""

/* Sends `bytes` on a connection of its own: the daemon answers `status` and closes. */
static void refused_with(const char *bytes, size_t len, int status)
{
    int fd = httpc_tcp(port);
    cr_assert_geq(fd, 0);
    httpc_reset();
    httpc_send(fd, bytes, len); /* the daemon may close before taking it all */
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, status, "%.60s: %d %s", bytes, r.status, r.body);
    cr_assert(httpc_closed(fd, 5000));
    close(fd);
    httpc_reset();
}

/* Each request the parser refuses is counted by code, as the gRPC door's are, and logged at
 * most once per 10 s with the count since. */
Test(http, each_refused_request_is_counted_by_code_and_logged_without_flooding)
{
    start();
    long long t0 = tt_now_ms();
    static const char garbage[] = "\x01\x02 nonsense\r\n\r\n";
    refused_with(garbage, sizeof(garbage) - 1, 400);
    static const char smuggled[] = "POST /v1/decide HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : "
                                   "chunked\r\n\r\n0\r\n\r\n";
    refused_with(smuggled, sizeof(smuggled) - 1, 400);
    static const char body[] =
        "POST /v1/decide HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n";
    refused_with(body, sizeof(body) - 1, 413);
    static char big[48 * 1024];
    int n = snprintf(big, sizeof(big), "GET /%0*d HTTP/1.1\r\nHost: x\r\n\r\n", 5000, 0);
    refused_with(big, (size_t)n, 414);
    n = snprintf(big, sizeof(big), "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %0*d\r\n\r\n", 40000,
                 0);
    refused_with(big, (size_t)n, 431);
    cr_assert_eq(get("/healthz"), 200, "and a request served");

    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "bad_request\"}"), 2, "garbage, a smuggling form");
    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "too_large\"}"), 1);
    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "uri_too_long\"}"), 1);
    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "headers_too_large\"}"), 1);
    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "other\"}"), 0);
    cr_assert_eq(httpc_metric(port, "tokentriage_connections_closed_total{door=\"http\","
                                    "reason=\"protocol\"}"),
                 5);

    const char *refused = "msg=\"requests refused by the door\" door=http";
    cr_assert_eq(tt_daemon_log_lines(&d, refused, "code=bad_request count=1\n"), 1,
                 "the first, at once");
    int lines = tt_daemon_log_lines(&d, refused, "count=");
    cr_assert_leq(lines, 1 + (tt_now_ms() - t0) / 10000, "5 refusals: %d lines", lines);
}

/* One byte per second never makes a request; meanwhile everyone else is served, and the slow
 * client is told 408 once its request has taken longer than the daemon allows (10 s). */
Test(http, a_client_sending_one_byte_per_second_does_not_hold_others, .timeout = 40)
{
    start();
    signal(SIGPIPE, SIG_IGN);
    int slow = httpc_tcp(port);
    const char *req = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaa";
    long long begin = tt_now_ms();
    struct pollfd p = {.fd = slow, .events = POLLIN};
    for (size_t i = 0; req[i] && poll(&p, 1, 0) == 0; i++) {
        cr_assert_eq(httpc_send(slow, req + i, 1), 0);
        cr_assert_eq(get("/healthz"), 200, "beside byte %zu", i);
        poll(&p, 1, 1000); /* a second, or less when the daemon answers the slow client */
    }
    httpc_reset();
    cr_assert_eq(httpc_read(slow, &r, 15000), 0);
    cr_assert_eq(r.status, 408);
    cr_assert_geq(tt_now_ms() - begin, 9000);
    cr_assert(httpc_closed(slow, 5000));
    close(slow);
    cr_assert_eq(httpc_metric(port, HTTP_ERRORS "request_timeout\"}"), 1);
}
