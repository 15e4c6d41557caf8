/*
 * The config watch in-process (server/watch.c): a real loop, real inotify, files laid out as the
 * kubelet lays out a ConfigMap or a Secret. A test waits for the watch's next check, never for
 * time; the poll is an hour unless the test is about it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "watch.h"

static char dir[64];
static uv_loop_t loop;
static srv_watch_t *w;
static int calls;
static char last[512];
static void *last_ctx;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/tt-watch-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    uv_loop_init(&loop);
    calls = 0;
    w = NULL;
}

static void teardown(void)
{
    srv_watch_close(w);
    uv_run(&loop, UV_RUN_DEFAULT);
    srv_watch_free(w);
    uv_loop_close(&loop);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(watch, .init = setup, .fini = teardown, .timeout = 30);

static void changed(void *ctx, const char *path)
{
    calls++;
    last_ctx = ctx;
    snprintf(last, sizeof last, "%s", path);
}

static void new_watch(int64_t poll_ms)
{
    srv_watch_options_t o = {.poll_ns = poll_ms * 1000000, .debounce_ns = 50 * 1000000};
    cr_assert_eq(srv_watch_new(&w, &loop, &o), 0);
}

/* The path of `name` in the test's directory (one of four rotating buffers). */
static const char *at(const char *name)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, 256, "%s/%s", dir, name);
    return p;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* One version of a ConfigMap volume holding config.yaml (and keys when not NULL), swapped in as
 * the kubelet does: a new ..vN, ..data renamed to it, the old version removed. */
static void publish(int version, const char *config, const char *keys)
{
    char vdir[128], path[160], link[32];
    snprintf(vdir, sizeof vdir, "%s/..v%d", dir, version);
    cr_assert_eq(mkdir(vdir, 0755), 0);
    snprintf(path, sizeof path, "%s/config.yaml", vdir);
    put(path, config);
    if (keys) {
        snprintf(path, sizeof path, "%s/gossip.keys", vdir);
        put(path, keys);
    }
    snprintf(link, sizeof link, "..v%d", version);
    cr_assert_eq(symlink(link, at("..data_tmp")), 0);
    cr_assert_eq(rename(at("..data_tmp"), at("..data")), 0);
    if (version > 1) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/..v%d'", dir, version - 1);
        cr_assert_eq(system(cmd), 0);
    } else {
        cr_assert_eq(symlink("..data/config.yaml", at("config.yaml")), 0);
        if (keys)
            cr_assert_eq(symlink("..data/gossip.keys", at("gossip.keys")), 0);
    }
}

static void on_deadline(uv_timer_t *t)
{
    *(bool *)t->data = true;
}

/* Runs the loop until the watch has made `checks` checks in all (or 10 s have passed). */
static void run_until_checks(uint64_t checks)
{
    bool late = false;
    uv_timer_t deadline;
    uv_timer_init(&loop, &deadline);
    deadline.data = &late;
    uv_timer_start(&deadline, on_deadline, 10000, 0);
    while (srv_watch_stats(w).checks < checks && !late)
        uv_run(&loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_geq(srv_watch_stats(w).checks, checks, "no check %llu within 10 s",
                  (unsigned long long)checks);
}

Test(watch, a_configmap_swap_calls_back_once_with_the_path)
{
    publish(1, "v1", NULL);
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, &calls), 0);
    cr_assert(srv_watch_inotify(w));
    publish(2, "v2", NULL);
    run_until_checks(1);
    cr_assert_eq(calls, 1);
    cr_assert_str_eq(last, at("config.yaml"));
    cr_assert_eq(last_ctx, &calls);
    publish(3, "v3", NULL); /* the watch follows the new version's directory */
    run_until_checks(2);
    cr_assert_eq(calls, 2);
}

Test(watch, a_swap_to_the_same_content_calls_nothing)
{
    publish(1, "same", NULL);
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, NULL), 0);
    publish(2, "same", NULL);
    run_until_checks(1);
    cr_assert_eq(calls, 0, "no change, but a callback");
}

/* A reload read the file (SIGHUP): the watch takes that as seen and does not reload again. */
Test(watch, what_a_sync_took_as_seen_calls_nothing)
{
    publish(1, "v1", NULL);
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, NULL), 0);
    publish(2, "v2", NULL);
    srv_watch_sync(w);
    run_until_checks(1);
    cr_assert_eq(calls, 0);
}

/* The baseline the caller read before its own read: a change in between is still a change. */
Test(watch, a_change_between_the_baseline_and_the_add_is_seen)
{
    publish(1, "v1", NULL);
    uint64_t before = srv_watch_fingerprint(at("config.yaml"), false);
    publish(2, "v2", NULL);
    new_watch(100);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, &before, changed, NULL), 0);
    run_until_checks(1); /* the poll sees it */
    cr_assert_eq(calls, 1);
}

/* The config and the keyring change in one update, and both reload the same thing: once. */
Test(watch, entries_with_one_callback_changing_together_call_it_once)
{
    publish(1, "v1", "k1");
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, NULL), 0);
    cr_assert_eq(srv_watch_add(w, at("gossip.keys"), false, NULL, changed, NULL), 0);
    publish(2, "v2", "k2");
    run_until_checks(1);
    cr_assert_eq(calls, 1);
    publish(3, "v2", "k3"); /* the keyring alone */
    run_until_checks(2);
    cr_assert_eq(calls, 2);
    cr_assert_str_eq(last, at("gossip.keys"));
}

/* A link to a file elsewhere, edited in place there: the watch on the link's target sees it. */
Test(watch, a_file_edited_in_place_behind_a_link_is_seen)
{
    cr_assert_eq(mkdir(at("elsewhere"), 0755), 0);
    put(at("elsewhere/real.yaml"), "v1");
    cr_assert_eq(symlink("elsewhere/real.yaml", at("config.yaml")), 0);
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, NULL), 0);
    put(at("elsewhere/real.yaml"), "v2 and longer");
    run_until_checks(1);
    cr_assert_eq(calls, 1);
}

/* A directory entry (Envoy rule files): a new file counts, a hidden one does not. */
Test(watch, a_directory_entry_counts_its_files_but_not_hidden_ones)
{
    cr_assert_eq(mkdir(at("rules"), 0755), 0);
    put(at("rules/a.yaml"), "domain: a");
    new_watch(3600000);
    cr_assert_eq(srv_watch_add(w, at("rules"), true, NULL, changed, NULL), 0);
    put(at("rules/.a.yaml.swp"), "editor state");
    run_until_checks(1);
    cr_assert_eq(calls, 0, "a hidden file counted");
    put(at("rules/b.yaml"), "domain: b");
    run_until_checks(2);
    cr_assert_eq(calls, 1);
    cr_assert_str_eq(last, at("rules"));
    cr_assert_eq(unlink(at("rules/a.yaml")), 0);
    run_until_checks(3);
    cr_assert_eq(calls, 2);
}

/* A fifo is named by its type, never opened for reading (which would wait for a writer). */
Test(watch, a_fifo_is_fingerprinted_without_blocking, .timeout = 10)
{
    cr_assert_eq(mkfifo(at("config.yaml"), 0600), 0);
    uint64_t a = srv_watch_fingerprint(at("config.yaml"), false);
    cr_assert_eq(unlink(at("config.yaml")), 0);
    uint64_t gone = srv_watch_fingerprint(at("config.yaml"), false);
    put(at("config.yaml"), "");
    uint64_t empty = srv_watch_fingerprint(at("config.yaml"), false);
    cr_assert(a != gone && gone != empty && a != empty);
}

/* The poll reads a file's bytes only when stat says it may have changed (a config of 1 MiB is
 * about 1.5 ms of FNV-1a on the loop), and a file changed within the last 2 s is read again at
 * each poll (a coarse time stamp could hide a second write of the same size). So: polls of a
 * fresh file read it, and once it is older than that, five polls in a row read nothing. */
Test(watch, the_poll_reads_a_file_only_when_stat_says_it_may_have_changed)
{
    put(at("config.yaml"), "v1");
    new_watch(100);
    cr_assert_eq(srv_watch_add(w, at("config.yaml"), false, NULL, changed, NULL), 0);
    bool late = false;
    uv_timer_t deadline;
    uv_timer_init(&loop, &deadline);
    deadline.data = &late;
    uv_timer_start(&deadline, on_deadline, 10000, 0);
    uint64_t quiet = 0, polls = 0, reads = 0;
    while (quiet < 5 && !late) {
        uv_run(&loop, UV_RUN_ONCE);
        srv_watch_stats_t st = srv_watch_stats(w);
        if (st.polls == polls)
            continue;
        quiet = st.reads == reads ? quiet + st.polls - polls : 0;
        polls = st.polls;
        reads = st.reads;
    }
    uv_close((uv_handle_t *)&deadline, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_geq(quiet, 5, "the poll still reads an unchanged file after %llu polls",
                  (unsigned long long)polls);
    cr_assert_gt(reads, 0, "a file changed within 2 s must be read again");
    /* and a change is still seen: the stat moved */
    put(at("config.yaml"), "v2");
    run_until_checks(srv_watch_stats(w).checks + 1);
    cr_assert_eq(calls, 1);
}
