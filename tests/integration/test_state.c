/*
 * Counters across restarts (SPEC §11) on the real daemon: stopped cleanly, killed, restarted on
 * a changed config, and started on bad state.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "httpc.h"
#include "snap.h"

/* The report in issue 18: 10 an hour, so nothing refills while a test runs. */
#define HOURLY(id)                                                                                 \
    "    - id: " id "\n      attach: { level: team }\n      type: rpm\n      amount: 10\n"         \
    "      period: 1h\n"

static tt_daemon_t d;
static char state_root[64]; /* the test's own directory; state_dir is state_root/state */
static char extra[256];
static bool mounted; /* a small tmpfs is mounted on state_root/state */

static void setup(void)
{
    snprintf(state_root, sizeof(state_root), "/tmp/tt-state-XXXXXX");
    cr_assert_not_null(mkdtemp(state_root));
}

static void teardown(void)
{
    tt_daemon_stop(&d);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s/state", state_root);
    if (mounted && umount2(cmd, MNT_DETACH) != 0)
        fprintf(stderr, "could not unmount %s: %s\n", cmd, strerror(errno));
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
        if (st_dec_header(buf, n, &h, NULL) == 0 && h.written_ns > after)
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

/* ---- bad state never blocks a start ---------------------------------------------------------- */

static char snap_path[128];

/* A real snapshot of 4 spent (a clean stop), read into memory; the daemon is stopped. */
static size_t spent_snapshot(uint8_t *buf, size_t cap)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("0s")), 0);
    cr_assert_eq(admits(4), 4);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    snprintf(snap_path, sizeof(snap_path), "%s/state/counters.snap", state_root);
    FILE *f = fopen(snap_path, "rb");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    cr_assert_gt(n, ST_HEADER_SIZE);
    return n;
}

static void put_file(const uint8_t *buf, size_t len)
{
    FILE *f = fopen(snap_path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

/* Starts on the file as it is now: the daemon serves a full budget, and its log names the file
 * and the reason. */
static void starts_empty_naming(const char *reason)
{
    cr_assert_eq(tt_daemon_spawn(&d, true), 0, "a bad snapshot (%s) blocked the start", reason);
    char want[256];
    snprintf(want, sizeof(want), "file=%s reason=%s", snap_path, reason);
    cr_assert(tt_daemon_log_has(&d, want, 5000), "no log line with %s", want);
    int got = admits(20);
    cr_assert_eq(got, 10, "%d admitted: the snapshot should not have been restored", got);
}

Test(state, a_corrupt_snapshot_is_named_and_the_daemon_serves_empty)
{
    uint8_t buf[4096];
    size_t n = spent_snapshot(buf, sizeof(buf));
    buf[n - 3] ^= 0x40; /* inside the last counter's key */
    put_file(buf, n);
    starts_empty_naming("corrupt");
}

Test(state, a_truncated_snapshot_is_named_and_the_daemon_serves_empty)
{
    uint8_t buf[4096];
    size_t n = spent_snapshot(buf, sizeof(buf));
    put_file(buf, n - 5);
    starts_empty_naming("truncated");
}

/* Sets a header field and the header's checksum, as another build would have written them. */
static void set_header_u32(uint8_t *buf, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        buf[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    uint32_t crc = st_crc32c(0, buf, 60);
    for (int i = 0; i < 4; i++)
        buf[60 + i] = (uint8_t)(crc >> (8 * i));
}

Test(state, a_snapshot_of_another_version_is_named_and_the_daemon_serves_empty)
{
    uint8_t buf[4096];
    size_t n = spent_snapshot(buf, sizeof(buf));
    set_header_u32(buf, 8, ST_VERSION + 1);
    put_file(buf, n);
    starts_empty_naming("wrong_version");
    /* the decoder's path and message, as "path: message" */
    cr_assert(tt_daemon_log_has(&d, "header.version: 2, this build reads 1", 5000), "no detail");
}

Test(state, a_file_that_is_no_snapshot_is_named_and_the_daemon_serves_empty)
{
    uint8_t buf[4096];
    spent_snapshot(buf, sizeof(buf));
    put_file((const uint8_t *)"server:\n  socket: /x\n", 21);
    starts_empty_naming("not_a_snapshot");
}

/* The scope is the share store's node id and cluster label: a snapshot written as node a is
 * someone else's counters to node b. */
static const char *server_as(const char *node)
{
    snprintf(extra, sizeof(extra),
             "  state_dir: %s/state\n  snapshot_interval: 0s\nshared_state:\n"
             "  share: { node_id: %s, bind: \"127.0.0.1:0\", join_timeout: 1ms }\n",
             state_root, node);
    return extra;
}

/* ---- a crafted snapshot (issue 34 item 7) ------------------------------------------------- */

static long long metric(const char *series); /* below, with the full file system's tests */

typedef struct recode {
    st_enc_t enc;
    uint8_t out[4096];
    size_t len;
    int64_t state; /* every counter's state becomes this */
} recode_t;

static int recode_sink(void *ctx, const uint8_t *p, size_t len)
{
    recode_t *r = ctx;
    cr_assert_leq(r->len + len, sizeof(r->out));
    memcpy(r->out + r->len, p, len);
    r->len += len;
    return 0;
}

static void recode_scope(void *ctx, const char *scope, size_t len)
{
    st_enc_scope(&((recode_t *)ctx)->enc, scope, len);
}

static void recode_limit(void *ctx, uint32_t i, const st_limit_t *l)
{
    st_enc_limit(&((recode_t *)ctx)->enc, l);
}

static void recode_counter(void *ctx, uint32_t limit, const char *key, size_t len, int64_t state)
{
    recode_t *r = ctx;
    st_enc_counter(&r->enc, limit, key, len, r->state);
}

/* The snapshot in buf as its writer would have written it with every counter's state set to
 * `state`: a whole, checksummed file whose one lie is the value. */
static size_t with_state(const uint8_t *buf, size_t n, int64_t state, uint8_t *out)
{
    static recode_t r;
    static uint8_t work[ST_HEADER_SIZE + 1024];
    r = (recode_t){.state = state};
    st_enc_init(&r.enc, work, sizeof(work), recode_sink, &r);
    st_visit_t v = {.scope = recode_scope, .limit = recode_limit, .counter = recode_counter};
    st_header_t h;
    cr_assert_eq(st_decode(buf, n, &v, &r, &h, NULL), 0);
    uint8_t header[ST_HEADER_SIZE];
    cr_assert_eq(st_enc_finish(&r.enc, h.written_ns, h.fingerprint, header), 0);
    memcpy(r.out, header, sizeof(header));
    memcpy(out, r.out, r.len);
    return r.len;
}

/* A gcra TAT of INT64_MAX made every decision of the key unfittable ("never retry"): a value no
 * admission or settle can reach is not restored, and is counted. */
Test(state, a_state_the_algorithm_cannot_reach_is_not_restored_and_is_counted)
{
    uint8_t buf[4096], crafted[4096];
    size_t n = spent_snapshot(buf, sizeof(buf));
    put_file(crafted, with_state(buf, n, INT64_MAX, crafted));
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    int got = admits(20);
    cr_assert_eq(got, 10, "%d admitted: the crafted state was restored", got);
    cr_assert(tt_daemon_log_has(&d, "out_of_range=1", 5000), "the restore line does not count it");
    cr_assert(tt_daemon_log_has(&d, "limit=hourly counters=1", 1000), "no line names the limit");
    cr_assert_eq(metric("tokentriage_state_restored_counters{outcome=\"out_of_range\"}"), 1);
}

Test(state, a_snapshot_of_another_node_is_foreign_and_not_restored)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server_as("node-a")), 0);
    cr_assert_eq(admits(4), 4);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_rewrite(&d, HOURLY("hourly"), server_as("node-b")), 0);
    snprintf(snap_path, sizeof(snap_path), "%s/state/counters.snap", state_root);
    starts_empty_naming("foreign");
    cr_assert(tt_daemon_log_has(&d, "written for \\\"node=node-a cluster=\\\"", 1000),
              "the log does not say whose snapshot it was");
}

Test(state, an_unusable_directory_is_named_and_the_daemon_serves)
{
    char file[128];
    snprintf(file, sizeof(file), "%s/state", state_root);
    FILE *f = fopen(file, "w"); /* a file where the directory should be */
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("200ms")), 0);
    char want[256];
    snprintf(want, sizeof(want), "dir=%s reason=io", file);
    cr_assert(tt_daemon_log_has(&d, want, 5000), "no log line with %s", want);
    cr_assert_eq(admits(4), 4);
}

/* docs/state.md: bad state never blocks a start. Opened for reading, a fifo waits for a writer;
 * the daemon must see it is no snapshot without opening it that way. */
Test(state, a_fifo_at_the_snapshot_does_not_block_the_start)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/state", state_root);
    cr_assert_eq(mkdir(path, 0700), 0);
    snprintf(snap_path, sizeof(snap_path), "%s/state/counters.snap", state_root);
    cr_assert_eq(mkfifo(snap_path, 0600), 0);
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("0s")), 0,
                 "a fifo at the snapshot blocked the start");
    char want[256];
    snprintf(want, sizeof(want), "file=%s reason=unsafe", snap_path);
    cr_assert(tt_daemon_log_has(&d, want, 5000), "no log line with %s", want);
    cr_assert_eq(admits(20), 10);
}

Test(state, a_directory_gone_while_running_fails_snapshots_loudly_and_serving_goes_on)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("200ms")), 0);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s/state'", state_root);
    cr_assert_eq(system(cmd), 0);
    cr_assert(tt_daemon_log_has(&d, "state: snapshot failed; the previous one stays", 10000),
              "no failed snapshot logged");
    cr_assert(tt_daemon_log_has(&d, "reason=io detail=\"create:", 1000));
    cr_assert_eq(admits(4), 4);
}

Test(state, a_second_daemon_on_the_same_directory_runs_without_state)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("200ms")), 0);
    tt_daemon_t second = {0}; /* tt_daemon_start reads binary: NULL is the build's */
    cr_assert_eq(tt_daemon_start(&second, HOURLY("hourly"), server("200ms")), 0);
    bool named = tt_daemon_log_has(&second, "reason=locked", 5000);
    tt_daemon_stop(&second);
    cr_assert(named, "the second daemon did not say the directory is locked");
    cr_assert_eq(admits(4), 4);
}

/* ---- a full state directory ---------------------------------------------------------------- */

/* Mounts a 64 KiB tmpfs on the state directory, in a mount namespace of this test's own when it
 * can (so nothing outlives a crashed test); the teardown unmounts it. Needs root (and
 * CAP_SYS_ADMIN): skipped without. */
static void small_state_fs(void)
{
    if (geteuid() != 0)
        cr_skip_test("mounting a small file system needs root");
    if (unshare(CLONE_NEWNS) == 0)
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/state", state_root);
    cr_assert_eq(mkdir(dir, 0700), 0);
    int rc = mount("tt-state", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0700");
    if (rc != 0 && errno == EPERM) /* root in a container without CAP_SYS_ADMIN */
        cr_skip_test("mounting a small file system is not permitted here");
    cr_assert_eq(rc, 0, "mount: %s", strerror(errno));
    mounted = true;
}

/* Writes a file into the state directory until the file system refuses. */
static void fill_state_fs(void)
{
    char path[128];
    static const char block[4096];
    snprintf(path, sizeof(path), "%s/state/filler", state_root);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_geq(fd, 0);
    ssize_t k;
    for (int i = 0; i < 1000 && (k = write(fd, block, sizeof(block))) > 0; i++)
        ;
    cr_assert_eq(errno, ENOSPC, "filling the state directory: %s", strerror(errno));
    close(fd);
}

/* The value of one line of the daemon's /metrics (read over its socket), -1 when absent. */
static long long metric(const char *series)
{
    static httpc_response_t r;
    static const char get[] = "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = httpc_unix(d.socket);
    cr_assert_geq(fd, 0);
    httpc_reset();
    cr_assert_eq(httpc_send(fd, get, sizeof(get) - 1), 0);
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    close(fd);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", series);
    const char *at = strstr(r.body, want);
    return at ? atoll(at + strlen(want)) : -1;
}

Test(state, a_full_state_directory_fails_snapshots_keeps_the_last_one_and_serving_goes_on)
{
    small_state_fs();
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("200ms")), 0);
    cr_assert_eq(admits(4), 4);
    cr_assert(snapshot_after(wall_ns(), 10000), "no snapshot within 10 s");
    fill_state_fs();
    cr_assert_eq(admits(2), 2); /* 6 spent now; the file on disk holds 4 */
    char want[256];
    snprintf(want, sizeof(want),
             "state: snapshot failed; the previous one stays\" file=%s/state/counters.snap "
             "reason=io detail=\"write: No space left on device\"",
             state_root);
    cr_assert(tt_daemon_log_has(&d, want, 10000), "no log line with %s", want);
    cr_assert_geq(metric("tokentriage_state_snapshot_failures_total{reason=\"io\"}"), 1);
    cr_assert_eq(admits(1), 1, "the daemon stopped serving when its disk filled");
    snprintf(want, sizeof(want), "%s/state/counters.snap.tmp", state_root);
    cr_assert_neq(access(want, F_OK), 0, "a failed snapshot left its file behind");
    /* the stop's snapshot fails the same way; the start restores the one written before */
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0, "a full state directory blocked the start");
    cr_assert(tt_daemon_log_has(&d, "restored=1", 5000), "the last snapshot was not restored");
    int got = admits(20);
    cr_assert_eq(got, 6, "%d admitted: the snapshot in place held 4 of 10 spent", got);
}

/* ---- a changed config ------------------------------------------------------------------------ */

Test(state, a_renamed_limit_starts_fresh_and_its_old_counters_are_counted)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly") HOURLY("other"), server("0s")), 0);
    cr_assert_eq(admits(4), 4); /* 4 spent in each */
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_rewrite(&d, HOURLY("per_hour") HOURLY("other"), server("0s")), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    cr_assert(tt_daemon_log_has(&d, "limit=hourly counters=1", 5000),
              "the dropped counters were not named");
    cr_assert(tt_daemon_log_has(&d, "restored=1 idle=0 dropped=1", 1000));
    int got = admits(20);
    cr_assert_eq(got, 6, "%d admitted: per_hour is fresh, other kept its 4 spent", got);
}

/* ---- disclosure ------------------------------------------------------------------------------ */

/* `tokentriage fleet --json`'s snapshot_age_ms. */
static long long fleet_snapshot_age_ms(void)
{
    char cmd[512], out[8192];
    snprintf(cmd, sizeof(cmd), "%s/cmd/tokentriage fleet --json -s %s", TT_BINARY_DIR, d.socket);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    pclose(p);
    out[n] = 0;
    const char *at = strstr(out, "\"snapshot_age_ms\":");
    cr_assert_not_null(at, "%s", out);
    return atoll(at + strlen("\"snapshot_age_ms\":"));
}

Test(state, fleet_discloses_the_age_of_the_last_snapshot)
{
    cr_assert_eq(tt_daemon_start(&d, HOURLY("hourly"), server("0s")), 0);
    cr_assert_eq(fleet_snapshot_age_ms(), -1, "no snapshot yet: the age is -1");
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    cr_assert_eq(tt_daemon_rewrite(&d, HOURLY("hourly"), server("200ms")), 0);
    cr_assert_eq(tt_daemon_spawn(&d, true), 0);
    long long age = fleet_snapshot_age_ms(); /* the restored one's, or a newer one's */
    cr_assert(age >= 0 && age < 60000, "age %lld ms", age);
}

/* Runs `tokentriage state inspect ARGS`; returns its exit status, its stdout+stderr in out. */
static int inspect(const char *args, char *out, size_t size)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/cmd/tokentriage state inspect %s 2>&1", TT_BINARY_DIR, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(state, inspect_shows_what_a_node_would_restore_and_refuses_what_it_would_not)
{
    uint8_t buf[4096];
    size_t n = spent_snapshot(buf, sizeof(buf));
    char out[4096], args[256];
    snprintf(args, sizeof(args), "--json %s", snap_path);
    cr_assert_eq(inspect(args, out, sizeof(out)), 0, "%s", out);
    cr_assert(strstr(out, "\"version\":1,"), "%s", out);
    cr_assert(strstr(out, "\"scope\":\"node= cluster=\""), "%s", out);
    cr_assert(strstr(out, "\"counters\":1,\"limits\":[{\"id\":\"hourly\","), "%s", out);
    cr_assert(strstr(out, "\"type\":\"rpm\",\"store\":\"local\",\"algorithm\":\"gcra\""), "%s",
              out);
    buf[n - 1] ^= 1;
    put_file(buf, n);
    cr_assert_eq(inspect(snap_path, out, sizeof(out)), 65, "%s", out);
    cr_assert(strstr(out, ": corrupt: body: checksum mismatch"), "%s", out);
}
