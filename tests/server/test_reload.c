/*
 * Reload is all or nothing (SPEC §4, issue 16 defect 3), on the real daemon: every part a
 * reload changes is built and checked before any of it is put in force, so a part that cannot
 * be applied leaves the old config serving whole, counted and logged as a refused reload.
 * tt_fault_daemon with TT_FAULT=keyring is the daemon with membership made to refuse the keyring
 * a reload brings (fault_daemon.c); everything else in it is the product's. Then the watch: a
 * ConfigMap's update reloads through the same prepare and commit, with no signal.
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

/* A value of /metrics (`series` then a space), or -1. */
static long long metric(int port, const char *series)
{
    static httpc_response_t r;
    char name[160];
    snprintf(name, sizeof name, "\n%s ", series);
    if (httpc_get(port, "/metrics", &r) != 200)
        return -1;
    const char *p = strstr(r.body, name);
    return p ? atoll(p + strlen(name)) : -1;
}

/* tokentriage_reloads_total{result=...} from /metrics, or -1. */
static long long reloads(int port, const char *result)
{
    char name[80];
    snprintf(name, sizeof name, "tokentriage_reloads_total{result=\"%s\"}", result);
    return metric(port, name);
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

/* ---- the config follows its ConfigMap (issue 31 item 2) --------------------------------------
 * The kubelet updates a mounted ConfigMap or Secret with its atomic writer: each version of the
 * volume in a directory of its own (..v1, ..v2), `..data` a symbolic link to the current one,
 * swapped by a rename, and each key a link through it (config.yaml -> ..data/config.yaml).
 * The daemon runs on that path and nobody sends it SIGHUP. */

#define LIMIT(id)                                                                                  \
    "    - id: " id "\n      attach: { level: team }\n      type: rpm\n      amount: 100000\n"     \
    "      period: 1m\n"

static int version;

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* Publishes one version of the volume as the kubelet does: config.yaml (and gossip.keys when
 * keys is not NULL) in a new ..vN, then ..data swapped to it by a rename, the old version
 * removed. */
static void publish(const char *limits, const char *extra, const char *keys)
{
    static char text[8192];
    char vdir[400], path[440], tmp[400], data[400];
    cr_assert_gt(tt_daemon_config_text(&d, limits, extra, text, sizeof text), 0);
    version++;
    snprintf(vdir, sizeof vdir, "%s/..v%d", d.dir, version);
    cr_assert_eq(mkdir(vdir, 0755), 0);
    snprintf(path, sizeof path, "%s/config.yaml", vdir);
    put(path, text);
    if (keys) {
        snprintf(path, sizeof path, "%s/gossip.keys", vdir);
        put(path, keys);
    }
    snprintf(tmp, sizeof tmp, "%s/..data_tmp", d.dir);
    snprintf(data, sizeof data, "%s/..data", d.dir);
    snprintf(path, sizeof path, "..v%d", version);
    cr_assert_eq(symlink(path, tmp), 0);
    cr_assert_eq(rename(tmp, data), 0);
    if (version > 1) {
        char cmd[480];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/..v%d'", d.dir, version - 1);
        cr_assert_eq(system(cmd), 0);
    }
}

/* Starts `binary` on a ConfigMap-style volume in its directory holding these limits (and
 * keys): config.yaml (and gossip.keys) are links through ..data. extra may name the directory
 * as %1$s (it is made first). */
static void start_on_volume(const char *binary, const char *limits, const char *extra_fmt,
                            const char *keys)
{
    static char extra[1024];
    version = 0;
    cr_assert_eq(tt_daemon_prepare(&d, binary), 0);
    snprintf(extra, sizeof extra, extra_fmt, d.dir);
    publish(limits, extra, keys);
    cr_assert_eq(symlink("..data/config.yaml", d.config), 0);
    if (keys) {
        char path[300];
        snprintf(path, sizeof path, "%s/gossip.keys", d.dir);
        cr_assert_eq(symlink("..data/gossip.keys", path), 0);
    }
    cr_assert_eq(tt_daemon_spawn(&d, true), 0, "the daemon did not start on the volume");
}

/* Decides for team t until the answer names limit `id`, every decision admitted and answered
 * (none fails while the config changes under it). Fails past deadline_ms. */
static void decide_until_limit(tt_client_t *c, const char *id, int deadline_ms)
{
    struct timespec pace = {0, 2 * 1000000L};
    long long deadline = tt_now_ms() + deadline_ms;
    for (int n = 0;; n++) {
        tt_response_t r;
        decide_team(c, &r);
        cr_assert(r.kind == TT_KIND_DECISION && r.admit, "decision %d: %s %s", n, r.verdict,
                  r.error_message);
        if (strcmp(r.limit, id) == 0)
            return;
        cr_assert_lt(tt_now_ms(), deadline, "limit %s not in force %d ms after the update (%s)", id,
                     deadline_ms, r.limit);
        nanosleep(&pace, NULL);
    }
}

#define HTTP "  http: 127.0.0.1:0\n"

/* docs/configuration.md states it: with inotify, within the debounce (0.5 s) of the swap, and
 * at worst within config_poll (5 s) + 0.5 s. The deadline adds room for a loaded machine. */
Test(reload, a_configmap_update_applies_its_limits_with_no_decision_failing)
{
    start_on_volume(NULL, LIMIT("team_v1"), HTTP, NULL);
    int port = http_port();
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    decide_until_limit(c, "team_v1", 0);
    publish(LIMIT("team_v2"), HTTP, NULL);
    decide_until_limit(c, "team_v2", 10000);
    cr_assert_eq(reloads(port, "ok"), 1);
    cr_assert_eq(metric(port, "tokentriage_config_watch_changes_total{detected_by=\"inotify\"}"),
                 1);
    cr_assert(tt_daemon_log_has(&d, "reload requested", 0));
    cr_assert(tt_daemon_log_has(&d, "trigger=watch", 0), "the log does not say what asked");
    /* a second update, the same way */
    publish(LIMIT("team_v3"), HTTP, NULL);
    decide_until_limit(c, "team_v3", 10000);
    cr_assert_eq(reloads(port, "ok"), 2);
    tt_close(c);
}

Test(reload, a_bad_configmap_update_changes_nothing_and_is_counted)
{
    start_on_volume(NULL, LIMIT("team_v1"), HTTP, NULL);
    int port = http_port();
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    publish(LIMIT("team_v2") "      brust: 5\n", HTTP, NULL);
    wait_reloads(port, 1);
    cr_assert_eq(reloads(port, "failed"), 1);
    cr_assert(tt_daemon_log_has(&d, "did you mean \\\"burst\\\"", 0), "the log says not why");
    cr_assert(tt_daemon_log_has(&d, "old config still serving", 0));
    decide_until_limit(c, "team_v1", 0); /* the old limit serves */
    /* the same bad file is not tried again and again: one refusal, until it changes */
    publish(LIMIT("team_v3"), HTTP, NULL);
    decide_until_limit(c, "team_v3", 10000);
    cr_assert_eq(reloads(port, "failed"), 1);
    cr_assert_eq(reloads(port, "ok"), 1);
    tt_close(c);
}

/* Key rotation (docs/operators.md) without kubectl exec: the keyring's Secret updated. */
#define KEY2 "IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiI=" /* 32 x 0x22 */
#define SEALED                                                                                     \
    HTTP "shared_state:\n  share:\n    node_id: r0\n    bind: 127.0.0.1:0\n"                       \
         "    join_timeout: 1ms\n    keyring_file: %1$s/gossip.keys\n"

Test(reload, a_keyring_update_is_read_again_without_a_signal)
{
    start_on_volume(NULL, LIMIT("team_v1"), SEALED, KEY "\n");
    int port = http_port();
    char extra[1024];
    snprintf(extra, sizeof extra, SEALED, d.dir);
    publish(LIMIT("team_v1"), extra, KEY2 "\n" KEY "\n");
    wait_reloads(port, 1);
    cr_assert_eq(reloads(port, "ok"), 1);
    cr_assert(tt_daemon_log_has(&d, "keyring reloaded: the first key seals\" keys=2", 5000));
}

/* Where inotify cannot watch (fs.inotify.max_user_watches spent, a file system that sends no
 * events), the poll finds the change: tt_fault_daemon with uv_fs_event_start failing ENOSPC. */
Test(reload, without_inotify_the_poll_finds_the_update)
{
    setenv("TT_FAULT", "inotify", 1);
    start_on_volume(FAULT_DAEMON, LIMIT("team_v1"), HTTP "  config_poll: 1s\n", NULL);
    int port = http_port();
    cr_assert(tt_daemon_log_has(&d, "config watch: no inotify", 5000), "the log says not so");
    cr_assert_eq(metric(port, "tokentriage_config_watch_inotify"), 0);
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    publish(LIMIT("team_v2"), HTTP "  config_poll: 1s\n", NULL);
    decide_until_limit(c, "team_v2", 10000);
    cr_assert_eq(metric(port, "tokentriage_config_watch_changes_total{detected_by=\"poll\"}"), 1);
    tt_close(c);
}

/* config_watch: false (a hash-annotated rolling restart applies configs, docs/operators.md):
 * the file changes, nothing reloads until a signal says so. */
Test(reload, with_the_watch_off_only_a_signal_reloads)
{
    start_on_volume(NULL, LIMIT("team_v1"), HTTP "  config_watch: false\n", NULL);
    int port = http_port();
    cr_assert_eq(metric(port, "tokentriage_config_watch_inotify"), -1, "a watch runs");
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    publish(LIMIT("team_v2"), HTTP "  config_watch: false\n", NULL);
    cr_assert(!tt_daemon_log_has(&d, "reload requested", 2000), "it reloaded unasked");
    kill(d.pid, SIGHUP);
    decide_until_limit(c, "team_v2", 10000);
    tt_close(c);
}
