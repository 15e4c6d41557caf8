/*
 * Reload is all or nothing (SPEC §4, issue 16 defect 3), on the real daemon: every part a
 * reload changes is built and checked before any of it is put in force, so a part that cannot
 * be applied leaves the old config serving whole, counted and logged as a refused reload.
 * tt_fault_daemon with TT_FAULT=keyring is the daemon with membership made to refuse the keyring
 * a reload brings (fault_daemon.c); everything else in it is the product's.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "httpc.h"

#define KEY "ERERERERERERERERERERERERERERERERERERERERERE=" /* 32 x 0x11 */
#define TEAM_RPM(amount)                                                                           \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: " #amount   \
    "\n      period: 1m\n      burst: 3\n"

#define FAULT_DAEMON TT_BINARY_DIR "/tests/server/tt_fault_daemon"

static tt_daemon_t d;
static char ring[64];

static void cleanup(void)
{
    tt_daemon_stop(&d);
    if (ring[0])
        unlink(ring);
}

TestSuite(reload, .fini = cleanup, .timeout = 60);

/* The HTTP port the daemon logged it listens on. */
static int http_port(void)
{
    cr_assert(tt_daemon_log_has(&d, "http listening", 10000), "no HTTP listener in %s", d.log);
    static char log[1 << 16];
    FILE *f = fopen(d.log, "r");
    cr_assert_not_null(f);
    size_t n = fread(log, 1, sizeof log - 1, f);
    fclose(f);
    log[n] = 0;
    const char *p = strstr(strstr(log, "http listening"), "127.0.0.1:");
    cr_assert_not_null(p);
    return atoi(p + strlen("127.0.0.1:"));
}

/* tokentriage_reloads_total{result=...} from /metrics, or -1. */
static long long reloads(int port, const char *result)
{
    static httpc_response_t r;
    char name[80];
    snprintf(name, sizeof name, "tokentriage_reloads_total{result=\"%s\"} ", result);
    if (httpc_get(port, "/metrics", &r) != 200)
        return -1;
    const char *p = strstr(r.body, name);
    return p ? atoll(p + strlen(name)) : -1;
}

/* Polls /metrics (with a deadline, never a blind sleep) until no reload is in progress: the
 * ok and failed counts add up to `total`. */
static void wait_reloads(int port, long long total)
{
    struct timespec pause = {0, 20 * 1000000L};
    for (long long deadline = tt_now_ms() + 10000; tt_now_ms() < deadline; nanosleep(&pause, NULL))
        if (reloads(port, "ok") + reloads(port, "failed") == total)
            return;
    cr_assert_fail("no reload counted within 10 s");
}

static void decide_team(tt_client_t *c, tt_response_t *r)
{
    static const tt_pair_t team[] = {{"team", "t"}};
    cr_assert_eq(tt_decide(c, team, 1, -1, r), 0, "%s", r->error_message);
}

Test(reload, a_keyring_membership_refuses_leaves_the_old_config_serving_whole)
{
    snprintf(ring, sizeof ring, "/tmp/tt-reload-ring-XXXXXX");
    int fd = mkstemp(ring);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, KEY "\n", strlen(KEY) + 1), (ssize_t)strlen(KEY) + 1);
    close(fd);
    char extra[512];
    snprintf(extra, sizeof extra,
             "  http: 127.0.0.1:0\nshared_state:\n  share:\n    node_id: r0\n"
             "    bind: 127.0.0.1:0\n    keyring_file: %s\n    cluster: rtest\n",
             ring);
    setenv("TT_FAULT", "keyring", 1);
    cr_assert_eq(tt_daemon_start_binary(&d, FAULT_DAEMON, TEAM_RPM(300), extra), 0,
                 "the daemon did not start");
    int port = http_port();
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    tt_response_t r;
    decide_team(c, &r);
    cr_assert_eq(r.remaining, 2);

    /* the new limits arm and the keyring file parses, but membership refuses the keyring */
    cr_assert_eq(tt_daemon_rewrite(&d, TEAM_RPM(600), extra), 0);
    wait_reloads(port, 1);
    cr_assert_eq(reloads(port, "failed"), 1, "a reload half applied was counted a success");
    cr_assert(tt_daemon_log_has(&d, "reload refused", 0), "the log does not say it was refused");
    cr_assert(tt_daemon_log_has(&d, "refused (test fault)", 0), "the log does not say why");
    cr_assert(tt_daemon_log_has(&d, "old config still serving", 0));
    cr_assert(!tt_daemon_log_has(&d, "reload applied", 0));

    /* the old limits serve, and their counter is the one they had */
    decide_team(c, &r);
    cr_assert_str_eq(tt_header(&r, "Ratelimit-Policy"), "\"team_rpm\";q=300;w=60",
                     "the new limits are in force");
    cr_assert_eq(r.remaining, 1, "the counter changed");
    tt_close(c);
}
