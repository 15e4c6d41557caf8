/*
 * Counters across restarts (SPEC §11) on the real daemon: stopped cleanly, killed, restarted on
 * a changed config, and started on bad state.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "snap.h"

/* The report in issue 18: 10 an hour, so nothing refills while a test runs. */
#define HOURLY(id)                                                                                 \
    "    - id: " id "\n      attach: { level: team }\n      type: rpm\n      amount: 10\n"         \
    "      period: 1h\n"

static tt_daemon_t d;
static char state_root[64]; /* the test's own directory; state_dir is state_root/state */
static char extra[256];

static void setup(void)
{
    snprintf(state_root, sizeof(state_root), "/tmp/tt-state-XXXXXX");
    cr_assert_not_null(mkdtemp(state_root));
}

static void teardown(void)
{
    tt_daemon_stop(&d);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_root);
    if (state_root[0] && !getenv("TT_KEEP_TEST_DIRS") && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", state_root);
}

TestSuite(state, .init = setup, .fini = teardown, .timeout = 90);

/* The server lines: the state directory and the interval ("0s": only at stop). */
static const char *server(const char *interval)
{
    snprintf(extra, sizeof(extra), "  state_dir: %s/state\n  snapshot_interval: %s\n", state_root,
             interval);
    return extra;
}

/* Asks `tries` times for team t-1; returns how many were admitted. */
static int admits(int tries)
{
    static const tt_pair_t team[] = {{"team", "t-1"}};
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    int n = 0;
    for (int i = 0; i < tries; i++) {
        tt_response_t r;
        cr_assert_eq(tt_decide(c, team, 1, -1, &r), 0, "%s", r.error_message);
        n += r.admit;
    }
    tt_close(c);
    return n;
}

Test(state, a_clean_restart_admits_exactly_what_was_left)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("0s")), 0);
    cr_assert_eq(admits(4), 4);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    int got = admits(20);
    cr_assert_eq(got, 6, "%d admitted after the restart; 4 of 10 were spent before it", got);
    cr_assert(tt_daemon_log_has(&d, "restored=1", 5000), "no restore logged");
}

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits (bounded) for a snapshot in place that was taken after `after` (wall ns). */
static bool snapshot_after(int64_t after, int timeout_ms)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/state/counters.snap", state_root);
    for (long long deadline = tt_now_ms() + timeout_ms; tt_now_ms() < deadline;) {
        uint8_t buf[ST_HEADER_SIZE];
        st_header_t h;
        FILE *f = fopen(path, "rb");
        size_t n = f ? fread(buf, 1, sizeof(buf), f) : 0;
        if (f)
            fclose(f);
        if (st_dec_header(buf, n, &h, NULL, 0) == 0 && h.written_ns > after)
            return true;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

Test(state, a_kill_after_an_interval_forgets_nothing_the_snapshot_holds)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("200ms")), 0);
    cr_assert_eq(admits(4), 4);
    cr_assert(snapshot_after(wall_ns(), 10000), "no snapshot within 10 s");
    cr_assert_eq(tt_daemon_kill(&d, SIGKILL), -1);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    int got = admits(20);
    cr_assert_eq(got, 6, "%d admitted after the kill; the snapshot held 4 of 10 spent", got);
}

/* No interval snapshot (0s): after a clean stop with 3 spent, a burst of 5 and a kill lose
 * exactly the burst, the admissions since the last snapshot, and nothing more. */
Test(state, a_kill_loses_at_most_the_admissions_since_the_last_snapshot)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("0s")), 0);
    cr_assert_eq(admits(3), 3);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    cr_assert_eq(admits(5), 5);
    cr_assert_eq(tt_daemon_kill(&d, SIGKILL), -1);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    int got = admits(20);
    cr_assert_eq(got, 7, "%d admitted: 3 were in the snapshot, the burst of 5 after it is lost",
                 got);
}
