/*
 * bench_ratealg: nanoseconds per ratealg step, per algorithm and for gcra's effective form.
 *
 * Each case chains ten million steps through one key (the state an admission returns is the
 * next step's state), with arrivals spaced by a fixed table of pseudo-random gaps around the
 * emission interval so that admissions and denials mix and the branch predictor cannot learn
 * a pattern. The call goes through the static library as the daemon's does (no inlining
 * across it). Seven runs per case, interleaved; the median is reported with the fastest and
 * slowest.
 *
 * Usage: bench_ratealg [steps per run]. Not part of ctest: run it on a quiet machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ratealg.h"

#define RUNS 7
#define GAPS 1024 /* 8 KiB of gaps: stays in L1 */
#define S INT64_C(1000000000)

static int64_t gaps[GAPS];
static volatile int64_t sink; /* keeps the loop's results alive */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Gaps uniform in [0, 2 x mean): about one admission per emission interval on average. */
static void fill_gaps(int64_t mean)
{
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);
    for (int i = 0; i < GAPS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        gaps[i] = (int64_t)(x % (uint64_t)(2 * mean));
    }
}

static double run_once(const ra_limiter_t *l, int64_t cost, long steps)
{
    int64_t state = 0, now = INT64_C(1700000000) * S, admitted = 0;
    double t0 = now_s();
    for (long i = 0; i < steps; i++) {
        now += gaps[i & (GAPS - 1)];
        ra_result_t r = ra_step(l, state, now, cost);
        state = r.next_state;
        admitted += r.admit;
    }
    double t1 = now_s();
    sink = admitted + state;
    return (t1 - t0) * 1e9 / (double)steps;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct bench_case {
    const char *name;
    ra_limiter_t limiter;
    int64_t cost;
    double ns[RUNS];
} bench_case_t;

/* Runs are interleaved across cases (run 1 of every case, then run 2, ...), so that a burst
 * of noise from a shared machine spreads over all cases instead of sinking one. */
static void bench(bench_case_t *cases, int n, long steps)
{
    for (int run = -1; run < RUNS; run++) { /* run -1 warms up */
        for (int c = 0; c < n; c++) {
            const ra_limiter_t *l = &cases[c].limiter;
            int64_t t = l->emission_ns ? l->emission_ns : l->period_ns / l->amount;
            fill_gaps(t * cases[c].cost);
            double ns = run_once(l, cases[c].cost, run < 0 ? steps / 10 : steps);
            if (run >= 0)
                cases[c].ns[run] = ns;
        }
    }
    for (int c = 0; c < n; c++) {
        qsort(cases[c].ns, RUNS, sizeof(double), cmp_double);
        printf("%-34s %8.2f %8.2f %8.2f\n", cases[c].name, cases[c].ns[RUNS / 2], cases[c].ns[0],
               cases[c].ns[RUNS - 1]);
    }
}

int main(int argc, char **argv)
{
    long steps = argc > 1 ? atol(argv[1]) : 10000000;
    if (steps <= 0) {
        fprintf(stderr, "usage: bench_ratealg [steps per run]\n");
        return 64;
    }
    ra_limiter_t gcra, tb, fixed, sliding, share3, tpm3;
    if (ra_limiter_init(&gcra, RA_GCRA, 300, 60 * S, 60) ||
        ra_limiter_init(&tb, RA_TOKEN_BUCKET, 300, 60 * S, 60) ||
        ra_limiter_init(&fixed, RA_FIXED_WINDOW, 300, 60 * S, 300) ||
        ra_limiter_init(&sliding, RA_SLIDING_WINDOW, 300, 60 * S, 300) ||
        ra_limiter_effective(&gcra, 1, 3, 1, &share3)) {
        fprintf(stderr, "bench_ratealg: a limiter did not arm\n");
        return 70;
    }
    ra_limiter_t tpm;
    if (ra_limiter_init(&tpm, RA_GCRA, 100000, 60 * S, 20000) ||
        ra_limiter_effective(&tpm, 1, 3, RA_RESERVE_CAP, &tpm3)) {
        fprintf(stderr, "bench_ratealg: the tpm limiter did not arm\n");
        return 70;
    }
    bench_case_t cases[] = {
        {"gcra 300/1m burst 60", gcra, 1, {0}},
        {"token_bucket 300/1m burst 60", tb, 1, {0}},
        {"fixed_window 300/1m", fixed, 1, {0}},
        {"sliding_window 300/1m", sliding, 1, {0}},
        {"gcra effective, share 1/3", share3, 1, {0}},
        {"gcra effective tpm 1/3, cost 1000", tpm3, 1000, {0}},
    };
    printf("ns per ra_step, %ld steps per run, %d runs\n", steps, RUNS);
    printf("%-34s %8s %8s %8s\n", "case", "median", "min", "max");
    bench(cases, (int)(sizeof(cases) / sizeof(cases[0])), steps);
    return 0;
}
