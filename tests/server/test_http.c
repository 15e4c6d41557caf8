/* The operations endpoints and the log formats, on the real daemon. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n      burst: 60\n"

static tt_daemon_t d;
static int port;
static char reply[1 << 16];

static void stop(void)
{
    tt_daemon_stop(&d);
}

TestSuite(http, .fini = stop, .timeout = 60);

/* A port nobody listens on right now: bind port 0, read it back, let it go. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

static void start(void)
{
    char extra[128];
    port = free_port();
    snprintf(extra, sizeof(extra), "  http: 127.0.0.1:%d\n", port);
    cr_assert_eq(tt_daemon_start(&d, LIMITS, extra), 0);
}

/* GETs path; returns the status code, the whole reply in `reply`. */
static int get(const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    size_t len = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert_gt(poll(&p, 1, 5000), 0);
        ssize_t got = read(fd, reply + len, sizeof(reply) - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    reply[len] = 0;
    close(fd);
    int status = 0;
    sscanf(reply, "HTTP/1.1 %d", &status);
    return status;
}

Test(http, metrics_healthz_and_readyz_answer)
{
    start();
    tt_client_t *c = tt_daemon_client(&d);
    tt_response_t r;
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t"}}, 1, -1, &r), 0);
    tt_close(c);
    cr_assert_eq(get("/healthz"), 200);
    cr_assert_eq(get("/readyz"), 200);
    cr_assert_eq(get("/metrics"), 200);
    cr_assert(strstr(reply, "Content-Type: text/plain; version=0.0.4"), "%s", reply);
    cr_assert(
        strstr(reply, "tokentriage_decisions_total{limit=\"team_rpm\",verdict=\"admit\"} 1\n"),
        "%s", reply);
    cr_assert(strstr(reply, "tokentriage_decision_latency_seconds_count 1\n"), "%s", reply);
    cr_assert(strstr(reply, "# TYPE tokentriage_decision_latency_seconds histogram\n"));
    cr_assert(strstr(reply, "tokentriage_counters{limit=\"team_rpm\"} 1\n"), "%s", reply);
    cr_assert(strstr(reply, "tokentriage_reloads_total{result=\"ok\"} 0\n"));
    cr_assert(strstr(reply, "\ntokentriage_counter_table_bytes "), "%s", reply);
    cr_assert(strstr(reply, "\ntokentriage_leases 0\n"), "%s", reply);
    cr_assert_eq(get("/nope"), 404);
}

Test(http, logs_are_logfmt_by_default)
{
    start();
    cr_assert(tt_daemon_log_has(&d, "level=info msg=serving socket=", 0));
}
