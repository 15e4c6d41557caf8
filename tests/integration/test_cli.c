/* The client subcommands, run as a user runs them, against a real daemon. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon.h"

#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n      burst: 60\n"                                                          \
    "    - id: team_tpm\n      attach: { level: team }\n      type: tpm\n"                         \
    "      amount: 100000\n      period: 1m\n      burst: 20000\n"

static tt_daemon_t d;
static char out[1 << 16];

static void stop(void)
{
    tt_daemon_stop(&d);
}

TestSuite(cli, .fini = stop, .timeout = 60);

/* Runs `tokentriage ARGS` (stdout captured into `out`); returns the exit status. */
static int run(const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s/cmd/tokentriage %s 2>/dev/null", TT_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int runf(const char *fmt, const char *sock)
{
    char args[768];
    snprintf(args, sizeof(args), fmt, sock);
    return run(args);
}

Test(cli, decide_prints_the_verdict_and_the_headers)
{
    cr_assert_eq(tt_daemon_start(&d, LIMITS, NULL), 0);
    cr_assert_eq(runf("decide -s %s --subject team=t --tokens 100", d.socket), 0);
    cr_assert(strstr(out, "verdict      admit\n"), "%s", out);
    cr_assert(strstr(out, "X-Ratelimit-Remaining-Requests: 59\n"), "%s", out);
    cr_assert(strstr(out, "X-Ratelimit-Remaining-Tokens: 19900\n"), "%s", out);
    cr_assert_eq(runf("decide -s %s --subject team=t --tokens 100 --json", d.socket), 0);
    cr_assert(strncmp(out, "{\"seq\":1,\"admit\":true,\"verdict\":\"admit\"", 38) == 0, "%s", out);
}

/* The reservation `decide` printed, as the argument a user would copy. */
static const char *printed_reservation(char *buf, size_t size)
{
    const char *at = strstr(out, "reservation  ");
    cr_assert_not_null(at, "%s", out);
    unsigned long long id = strtoull(at + strlen("reservation  "), NULL, 10);
    cr_assert_neq(id, 0);
    snprintf(buf, size, "%llu", id);
    return buf;
}

Test(cli, settle_corrects_a_reservation_once_and_charge_counts_tokens)
{
    cr_assert_eq(tt_daemon_start(&d, LIMITS, NULL), 0);
    char id[32], args[256];
    cr_assert_eq(runf("decide -s %s --subject team=t --tokens 16384", d.socket), 0);
    printed_reservation(id, sizeof(id));
    snprintf(args, sizeof(args), "settle -s %%s --reservation %s --actual 900", id);
    cr_assert_eq(runf(args, d.socket), 0);
    cr_assert_str_eq(out, "settled 1 tpm limit (actual 900)\n");
    cr_assert_eq(runf(args, d.socket), 0);
    cr_assert_str_eq(out, "already settled: nothing changed\n");
    cr_assert_eq(runf("decide -s %s --subject team=t --tokens 5", d.socket), 0);
    printed_reservation(id, sizeof(id));
    snprintf(args, sizeof(args), "settle -s %%s --reservation %s --actual 2 --json", id);
    cr_assert_eq(runf(args, d.socket), 0);
    cr_assert_str_eq(out, "{\"seq\":1,\"settled\":1,\"already_settled\":false}\n");
    cr_assert_eq(runf("settle -s %s --reservation 12345 --actual 2", d.socket), 65,
                 "an unknown reservation is the daemon's error: EX_DATAERR");
    cr_assert_eq(runf("charge -s %s --subject team=t --tokens 100", d.socket), 0);
    cr_assert_str_eq(out, "charged 1 tpm limit (tokens 100)\n");
    cr_assert_eq(runf("charge -s %s --subject team=t --tokens 100 --json", d.socket), 0);
    cr_assert_str_eq(out, "{\"seq\":1,\"charged\":1}\n");
}

Test(cli, fleet_and_members_print_tables)
{
    cr_assert_eq(tt_daemon_start(&d, LIMITS, NULL), 0);
    cr_assert_eq(runf("fleet -s %s", d.socket), 0);
    cr_assert(strstr(out, "sees 1 replica\n"), "%s", out);
    cr_assert(strstr(out, "team_rpm  rpm   local  gcra"), "%s", out);
    cr_assert_eq(runf("members -s %s", d.socket), 0);
    cr_assert(strstr(out, "alive"), "%s", out);
    cr_assert_eq(runf("members -s %s --json", d.socket), 0);
    cr_assert(strstr(out, "\"live\":1"), "%s", out);
}

Test(cli, bench_prints_its_figures)
{
    cr_assert_eq(tt_daemon_start(&d, LIMITS, NULL), 0);
    cr_assert_eq(
        runf("bench -s %s -c 2 -p 16 -k 10 -n 2000 --level team --tokens 1 --json", d.socket), 0);
    cr_assert(strstr(out, "\"decisions\":2000,"), "%s", out);
    cr_assert(strstr(out, "\"errors\":0,"), "%s", out);
}

Test(cli, usage_errors_exit_64_and_no_daemon_exits_69)
{
    cr_assert_eq(run("decide"), 64);
    cr_assert_eq(run("decide --subject team"), 64);
    cr_assert_eq(run("settle --subject team=t --reserved 5 --actual 1"), 64, "the old form");
    cr_assert_eq(run("settle --reservation 12x --actual 1"), 64);
    cr_assert_eq(run("settle --reservation 5"), 64);
    cr_assert_eq(run("charge --subject team=t"), 64);
    cr_assert_eq(run("decide -s /nonexistent/tt.sock --subject team=t"), 69);
    cr_assert_eq(run("fleet -s /nonexistent/tt.sock"), 69);
}

/* decide --exit-status: 0 admit, 1 deny, 2 unfittable, as grep -q and diff answer; without it
 * the verdict is the output and the exit is 0. */
Test(cli, decide_exit_status_says_the_verdict)
{
    cr_assert_eq(tt_daemon_start(&d, LIMITS, NULL), 0);
    cr_assert_eq(runf("decide -s %s --subject team=a --tokens 100 --exit-status", d.socket), 0);
    cr_assert(strstr(out, "verdict      admit\n"), "%s", out);
    cr_assert_eq(runf("decide -s %s --subject team=a --tokens 30000 --exit-status", d.socket), 2,
                 "30000 tokens never fit a burst of 20000");
    cr_assert(strstr(out, "verdict      unfittable\n"), "%s", out);
    cr_assert_eq(runf("decide -s %s --subject team=a --tokens 30000", d.socket), 0,
                 "without --exit-status the verdict is output, not status");
    /* spend team b's burst of 60 requests, then one more is denied */
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    tt_pair_t b = {.level = "team", .id = "b"};
    static tt_response_t r;
    for (int i = 0; i < 60; i++) {
        cr_assert_eq(tt_decide(c, &b, 1, 1, &r), 0);
        cr_assert(r.admit, "decision %d", i);
    }
    tt_close(c);
    cr_assert_eq(runf("decide -s %s --subject team=b --tokens 1 --exit-status", d.socket), 1);
    cr_assert(strstr(out, "verdict      deny\n"), "%s", out);
    cr_assert_eq(runf("decide -s %s --subject team=b --tokens 1 --exit-status --json", d.socket),
                 1);
    cr_assert(strstr(out, "\"verdict\":\"deny\""), "%s", out);
    cr_assert_eq(runf("decide -s /nonexistent/tt.sock --subject team=b --exit-status", d.socket),
                 69, "an error keeps its own code");
}
