/* The client subcommands, run as a user runs them, against a real daemon. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* Runs `BINARY ARGS` (stdout captured into `out`); returns the exit status. */
static int run_binary(const char *binary, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s 2>/dev/null", binary, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `tokentriage ARGS`, as run_binary. */
static int run(const char *args)
{
    return run_binary(TT_BINARY_DIR "/cmd/tokentriage", args);
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
    /* one table per store, without the columns it has no use for (issue 30 item 8) */
    cr_assert(strstr(out, "\nlocal limits\nID        TYPE  ALGORITHM"), "%s", out);
    cr_assert(strstr(out, "team_rpm  rpm   gcra"), "%s", out);
    cr_assert_null(strstr(out, "DIVISOR_MIN"), "%s", out);
    cr_assert_eq(runf("fleet -s %s --wide", d.socket), 0);
    cr_assert(strstr(out, "team_rpm  rpm   local  gcra"), "%s", out);
    cr_assert(strstr(out, "DIVISOR_MIN"), "%s", out);
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

/*
 * tokentriage acquire: a concurrency lease held while a command runs. key_one admits one lease
 * per key at a time, so a second acquire while the first runs is the proof that it holds.
 */
#define ONE_AT_A_TIME                                                                              \
    LIMITS "    - id: key_one\n      attach: { level: key }\n      type: concurrency\n"            \
           "      amount: 1\n"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"

Test(cli, acquire_holds_the_lease_while_the_command_runs_and_exits_with_its_status)
{
    cr_assert_eq(tt_daemon_start(&d, ONE_AT_A_TIME, NULL), 0);
    char args[1024];
    /* inside the first lease, a second acquire on the same key is denied and runs nothing */
    snprintf(args, sizeof(args),
             "acquire -s %s --subject key=k -- sh -c '%s acquire -s %s --subject key=k -- echo "
             "ran; echo inner=$?; exit 7'",
             d.socket, BIN, d.socket);
    cr_assert_eq(run(args), 7, "acquire exits with its command's status: %s", out);
    cr_assert_str_eq(out, "inner=75\n", "denied: exit 75 (EX_TEMPFAIL), the command not run");
    /* once the command is done the lease is released: the next one goes */
    cr_assert_eq(runf("acquire -s %s --subject key=k -- echo ran", d.socket), 0);
    cr_assert_str_eq(out, "ran\n");
    cr_assert_eq(runf("acquire -s %s --subject key=k -- /nonexistent/cmd", d.socket), 127);
    cr_assert_eq(runf("acquire -s %s --subject key=k -- sh -c 'kill -TERM $$'", d.socket),
                 128 + SIGTERM, "a command killed by a signal: 128 + its number, as a shell says");
    cr_assert_eq(runf("acquire -s %s --subject key=k", d.socket), 64, "no command");
    cr_assert_eq(runf("acquire -s %s --subject key=k -- sh -c 'exit 3' -s /nonexistent", d.socket),
                 3, "options after -- are the command's (acquire would exit 69 on that socket)");
}

/* Starts `tokentriage acquire ... -- sh -c 'touch READY; exec sleep 60'` in a process group of
 * its own, and waits (deadline 10 s) until its command runs: it holds the lease from then on.
 * (Polling with other acquires instead would race it for the one slot.) */
static pid_t acquire_in_background(void)
{
    char ready[320], script[400];
    snprintf(ready, sizeof(ready), "%s/ready", d.dir);
    snprintf(script, sizeof(script), "touch '%s'; exec sleep 60", ready);
    unlink(ready);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        setpgid(0, 0);
        execl(BIN, BIN, "acquire", "-s", d.socket, "--subject", "key=k", "--", "sh", "-c", script,
              (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    for (long long end = tt_now_ms() + 10000; access(ready, F_OK) != 0;) {
        cr_assert(tt_now_ms() < end, "the background acquire never ran its command");
        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the background acquire exited");
        nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
    }
    return pid;
}

/* Polls (deadline 10 s) until `acquire -- true` on key k exits with `want`. */
static bool acquire_exits(int want)
{
    for (long long end = tt_now_ms() + 10000; tt_now_ms() < end;) {
        if (runf("acquire -s %s --subject key=k -- true", d.socket) == want)
            return true;
        nanosleep(&(struct timespec){0, 20 * 1000000}, NULL);
    }
    return false;
}

Test(cli, the_lease_dies_with_the_acquire_process)
{
    cr_assert_eq(tt_daemon_start(&d, ONE_AT_A_TIME, NULL), 0);
    pid_t pid = acquire_in_background();
    cr_assert(acquire_exits(75), "the background acquire does not hold the lease");
    kill(pid, SIGKILL); /* no release sent: only the connection's end frees the slot */
    int st;
    waitpid(pid, &st, 0);
    cr_assert(acquire_exits(0), "the lease outlived its acquire process");
    kill(-pid, SIGKILL); /* the orphaned sleep */
}

Test(cli, acquire_hands_a_termination_to_its_command)
{
    cr_assert_eq(tt_daemon_start(&d, ONE_AT_A_TIME, NULL), 0);
    pid_t pid = acquire_in_background();
    cr_assert(acquire_exits(75), "the background acquire does not hold the lease");
    kill(pid, SIGTERM);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM,
              "sleep got the SIGTERM and acquire said so: status %d", st);
    cr_assert_eq(kill(-pid, 0), -1, "nothing of the group is left running");
    cr_assert(acquire_exits(0));
}

/* A stop that reaches acquire as COMMAND starts, before acquire holds COMMAND's pid, is handed
 * to COMMAND all the same (the fault binary sends acquire SIGTERM the moment fork returns). */
Test(cli, a_termination_as_the_command_starts_is_handed_to_it)
{
    cr_assert_eq(tt_daemon_start(&d, ONE_AT_A_TIME, NULL), 0);
    char args[512];
    snprintf(args, sizeof(args), "acquire -s %s --subject key=k -- sleep 5", d.socket);
    cr_assert_eq(setenv("TT_FAULT", "sigterm_after_fork", 1), 0);
    long long start = tt_now_ms();
    int status = run_binary(TT_BINARY_DIR "/tests/integration/tt_fault_cli", args);
    unsetenv("TT_FAULT");
    cr_assert_eq(status, 128 + SIGTERM, "the SIGTERM was lost: acquire exited %d after %lld ms",
                 status, tt_now_ms() - start);
    cr_assert(acquire_exits(0), "the lease outlived its acquire process");
}

/* Who reaches a concurrency limit: acquire only. serve says so at start, fleet lists them. */
Test(cli, serve_and_fleet_name_the_limits_only_acquire_reaches)
{
    cr_assert_eq(tt_daemon_start(&d, ONE_AT_A_TIME, NULL), 0);
    cr_assert(tt_daemon_log_has(&d, "limits=key_one", 5000));
    cr_assert(tt_daemon_log_has(&d, "reached only by acquire", 1000));
    cr_assert_eq(runf("fleet -s %s", d.socket), 0);
    cr_assert(strstr(out, "key_one"), "%s", out);
    cr_assert(strstr(out, "only acquire"), "%s", out);
    cr_assert_eq(runf("fleet -s %s --json", d.socket), 0);
    cr_assert(strstr(out, "\"acquire_only\":[\"key_one\"]"), "%s", out);
}
