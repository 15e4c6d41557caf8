/*
 * bench_state: what a snapshot costs at a million counters (docs/state.md, "What a snapshot
 * costs"). Speed is measured here, never asserted in a test.
 *
 *   bench_state [COUNTERS] [SNAPSHOTS] [key-bytes=N] [no-huge-pages]
 *                                                 defaults 1000000, 7, 8 (N: 8 .. 64)
 *
 * An engine is filled with COUNTERS live counters (one key-level gcra limit, N-byte keys), the
 * way the daemon's table holds them. Then, on one thread as in the daemon:
 *   1. the stop snapshot, in-process: time and bytes;
 *   2. decisions on random held keys in a tight loop, with an interval snapshot (the collapse
 *      into huge pages on a worker, then the fork) every 200 ms: the loop's pause for each fork,
 *      how long the collapses took, and the decision latency and the gap between two
 *      consecutive decisions (the stall a caller sees) while nothing runs, while the worker
 *      collapses and while a child writes, as p50 / p99 / p99.9 / max.
 * `no-huge-pages` disables transparent huge pages for the process (prctl PR_SET_THP_DISABLE),
 * as on a kernel without them: the forks then copy 4 KiB page-table entries.
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "state.h"
#include "tt_clock.h"

static st_event_t last;
static int snapshots;
static int64_t pauses[64], cpu[64];

static void on_event(void *ctx, const st_event_t *ev)
{
    if (ev->kind == ST_EV_SNAPSHOT || ev->kind == ST_EV_SNAPSHOT_FAILED) {
        last = *ev;
        if (ev->kind == ST_EV_SNAPSHOT && !ev->at_stop && snapshots < 64) {
            cpu[snapshots] = ev->pause_cpu_ns;
            pauses[snapshots++] = ev->pause_ns;
        }
        if (ev->kind == ST_EV_SNAPSHOT_FAILED)
            fprintf(stderr, "snapshot failed: %s\n", ev->detail);
    }
    if (ev->kind == ST_EV_NO_HUGE_PAGES)
        printf("  no huge pages: %s\n", ev->detail);
}

static int key_bytes = 8;

static bool decide(gov_engine_t *e, uint64_t k, int64_t now)
{
    char key[72];
    snprintf(key, sizeof(key), "%0*llx", key_bytes, (unsigned long long)k);
    gov_subject_t s = {.n = 1};
    s.pairs[0] = (gov_pair_t){"key", 3, key, (size_t)key_bytes};
    gov_result_t r;
    return gov_decide(e, NULL, &s, GOV_NO_TOKENS, now, &r, NULL, NULL) == 0 && r.admit;
}

/* A latency histogram that allocates nothing while it runs (a growing array would grow the
 * address space the fork copies): 10 ns buckets to 100 us, then 10 us buckets to 1 s. */
#define FINE 10000
#define COARSE 100000
typedef struct hist {
    uint64_t fine[FINE], coarse[COARSE], n, over_1ms;
    int64_t max, sum;
} hist_t;

static void hist_add(hist_t *h, int64_t ns)
{
    h->sum += ns;
    h->over_1ms += ns > 1000000;
    if (ns < FINE * 10)
        h->fine[ns / 10]++;
    else
        h->coarse[ns / 10000 < COARSE ? ns / 10000 : COARSE - 1]++;
    h->n++;
    if (ns > h->max)
        h->max = ns;
}

/* The q-quantile (q in per 100000) in ns. */
static int64_t hist_q(const hist_t *h, uint64_t q)
{
    uint64_t want = h->n * q / 100000, seen = 0;
    for (int i = 0; i < FINE; i++)
        if ((seen += h->fine[i]) > want)
            return (int64_t)i * 10;
    for (int i = 0; i < COARSE; i++)
        if ((seen += h->coarse[i]) > want)
            return (int64_t)i * 10000;
    return h->max;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Percentiles; for the gaps (which add up to the phase's time) also how many went over 1 ms,
 * per second of that phase: the machine's own hiccups show in every phase, a snapshot's in its. */
static void report(const char *what, const hist_t *h, bool gaps)
{
    printf("  %-42s n=%-9llu p50 %7.2f us  p99 %7.2f us  p99.9 %8.2f us  max %9.2f us", what,
           (unsigned long long)h->n, hist_q(h, 50000) / 1e3, hist_q(h, 99000) / 1e3,
           hist_q(h, 99900) / 1e3, h->max / 1e3);
    if (gaps)
        printf("  over 1 ms: %llu in %.2f s (%.1f/s)", (unsigned long long)h->over_1ms,
               h->sum / 1e9, h->sum ? (double)h->over_1ms / (h->sum / 1e9) : 0.0);
    printf("\n");
}

/* The process's resident memory, and how much of it is in huge pages. */
static void memory(void)
{
    char line[256];
    FILE *sm = fopen("/proc/self/smaps_rollup", "r");
    while (sm && fgets(line, sizeof(line), sm))
        if (strncmp(line, "Rss:", 4) == 0 || strncmp(line, "AnonHugePages:", 14) == 0)
            printf("  %s", line);
    if (sm)
        fclose(sm);
}

int main(int argc, char **argv)
{
    size_t counters = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "no-huge-pages") == 0) {
            if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0))
                return perror("prctl"), 1;
        } else if (sscanf(argv[i], "key-bytes=%d", &key_bytes) != 1 || key_bytes < 8 ||
                   key_bytes > 64) {
            return fprintf(stderr, "%s: expected key-bytes=8..64 or no-huge-pages\n", argv[i]), 1;
        }
    }
    if (rounds < 1 || rounds > 32)
        return fprintf(stderr, "SNAPSHOTS: 1 .. 32\n"), 1;
    static const char yaml[] = "governance:\n  limits:\n"
                               "    - { id: per_key, attach: { level: key }, type: rpm, "
                               "amount: 10, period: 1h }\n";
    cfg_report_t rep = {0};
    cfg_config_t *cfg;
    if (cfg_load_string("<bench>", yaml, sizeof(yaml) - 1, &cfg, &rep) || cfg_arm(cfg, &rep))
        return 1;
    gov_engine_t *e;
    tt_err_t err;
    gov_options_t o = {
        .hash_seed = {3, 4}, .max_counters = counters * 2, .initial_counters = counters};
    if (gov_engine_create_config(&e, &o, cfg, &err))
        return fprintf(stderr, "%s\n", err.message), 1;
    int64_t now = tt_wall_ns();
    for (size_t i = 0; i < counters; i++)
        decide(e, i, now);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    char dir[] = "/tmp/tt-bench-state-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    uv_loop_t loop;
    uv_loop_init(&loop);
    st_node_t *n;
    st_options_t so = {.dir = dir, .interval_ns = 200000000};
    if (st_node_open(&n, &loop, &so, on_event, NULL))
        return 1;
    printf("bench_state: %zu counters held (%d-byte keys), table %.1f MB\n", (size_t)m.counters,
           key_bytes, m.table_bytes / 1e6);
    memory();

    /* 1. the stop snapshot, in-process */
    st_node_start(n, e, &cfg);
    for (int r = 0; r < 3; r++) {
        int64_t t0 = tt_mono_ns();
        st_node_snapshot_now(n);
        printf("  in-process snapshot: %.1f ms, %llu counters, %.1f MB (%.1f bytes per counter)\n",
               (tt_mono_ns() - t0) / 1e6, (unsigned long long)last.counters, last.bytes / 1e6,
               (double)last.bytes / (double)last.counters);
    }

    /* 2. decisions all along, a snapshot every 200 ms: collapse on a worker, then the fork */
    static hist_t lat[3], gap[3];
    static const char *const phase_name[3] = {"no snapshot", "worker collapsing", "child writing"};
    int64_t collapses[64], collapse_from = 0;
    int n_collapses = 0;
    uint64_t rng = 88172645463325252ull;
    int base = snapshots;
    st_phase_t was = ST_PHASE_IDLE;
    int64_t prev = tt_mono_ns();
    while (snapshots - base < rounds) {
        uv_run(&loop, UV_RUN_NOWAIT); /* the timers queue the collapse, fork, reap */
        st_phase_t phase = st_node_phase(n);
        if (phase == ST_PHASE_COLLAPSING && was != phase)
            collapse_from = tt_mono_ns();
        if (was == ST_PHASE_COLLAPSING && phase != was && n_collapses < 64)
            collapses[n_collapses++] = tt_mono_ns() - collapse_from;
        was = phase;
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        int64_t t1 = tt_mono_ns();
        decide(e, rng % counters, tt_wall_ns());
        int64_t t2 = tt_mono_ns();
        hist_add(&lat[phase], t2 - t1);
        hist_add(&gap[phase], t2 - prev); /* includes the fork when it ran */
        prev = t2;
    }
    qsort(pauses + base, (size_t)rounds, sizeof(int64_t), cmp);
    qsort(cpu + base, (size_t)rounds, sizeof(int64_t), cmp);
    qsort(collapses, (size_t)n_collapses, sizeof(int64_t), cmp);
    printf("  forked snapshots: %d; the loop's pause for the fork: wall median %.3f ms, max %.3f "
           "ms; CPU (the fork's own cost) median %.3f ms, max %.3f ms; writing took %.1f ms "
           "(the last)\n",
           rounds, pauses[base + rounds / 2] / 1e6, pauses[base + rounds - 1] / 1e6,
           cpu[base + rounds / 2] / 1e6, cpu[base + rounds - 1] / 1e6, last.took_ns / 1e6);
    if (n_collapses)
        printf("  collapses into huge pages (worker, wall): %d, median %.1f ms, max %.1f ms\n",
               n_collapses, collapses[n_collapses / 2] / 1e6, collapses[n_collapses - 1] / 1e6);
    for (int p = 0; p < 3; p++) {
        char what[64];
        snprintf(what, sizeof(what), "decision latency, %s", phase_name[p]);
        if (lat[p].n)
            report(what, &lat[p], false);
    }
    for (int p = 0; p < 3; p++) {
        char what[64];
        snprintf(what, sizeof(what), "gap between decisions, %s", phase_name[p]);
        if (gap[p].n)
            report(what, &gap[p], true);
    }
    memory();
    st_node_stop(n, false, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    st_node_free(n);
    gov_engine_destroy(e);
    cfg_free(cfg);
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) != 0;
}
