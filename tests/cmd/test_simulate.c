/*
 * `tokentriage simulate`, end to end through the real binary: the vector tables replayed
 * sequence by sequence, the seed's two window stories and gcra's burst examples, and the
 * error contract (exit 65 naming the line, exit 78 with the arming message).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vecfile.h"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"
#define VEC_DIR TT_SOURCE_DIR "/tests/vectors"
#define MS INT64_C(1000000)
#define T0_MS INT64_C(1700000000000) /* an 8 s window boundary: 212500000 x 8 s */
#define MAX_OUT 8192

typedef struct out_line {
    int64_t t_ms, cost, remaining, retry_after, reset_after, state;
    bool admit, unfittable;
} out_line_t;

typedef struct run {
    int exit_code;
    size_t n;
    out_line_t out[MAX_OUT];
    char err[2048];
} run_t;

static run_t run_buf;

static void slurp(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, size - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* Runs `tokentriage simulate ARGS < input`; parses every stdout line as the JSON contract
 * says it must look. */
static run_t *simulate(const char *args, const char *input)
{
    char in[] = "/tmp/tt_sim_in_XXXXXX", out[] = "/tmp/tt_sim_out_XXXXXX",
         err[] = "/tmp/tt_sim_err_XXXXXX";
    int fds[3] = {mkstemp(in), mkstemp(out), mkstemp(err)};
    cr_assert(fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    FILE *f = fopen(in, "w");
    fputs(input, f);
    fclose(f);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s simulate %s < %s > %s 2> %s", BIN, args, in, out, err);
    int status = system(cmd);
    cr_assert(WIFEXITED(status), "%s did not exit", cmd);
    run_t *r = &run_buf;
    memset(r, 0, sizeof(*r));
    r->exit_code = WEXITSTATUS(status);
    slurp(err, r->err, sizeof(r->err));
    FILE *o = fopen(out, "r");
    char line[512];
    while (o && fgets(line, sizeof(line), o) && r->n < MAX_OUT) {
        out_line_t *l = &r->out[r->n];
        char admit[8], unfit[8];
        int got = sscanf(line,
                         "{\"t_ms\":%" SCNd64 ",\"cost\":%" SCNd64 ",\"admit\":%7[a-z],"
                         "\"unfittable\":%7[a-z],\"remaining\":%" SCNd64 ",\"retry_after\":%" SCNd64
                         ",\"reset_after\":%" SCNd64 ",\"state\":%" SCNd64 "}",
                         &l->t_ms, &l->cost, admit, unfit, &l->remaining, &l->retry_after,
                         &l->reset_after, &l->state);
        cr_assert_eq(got, 8, "output line %zu does not follow the contract: %s", r->n + 1, line);
        l->admit = strcmp(admit, "true") == 0;
        l->unfittable = strcmp(unfit, "true") == 0;
        r->n++;
    }
    if (o)
        fclose(o);
    unlink(in);
    unlink(out);
    unlink(err);
    return r;
}

/* The simulate flags for a sequence's limiter, or false when the binary cannot express the
 * sequence (a first state other than 0, sub-millisecond times, a period in nanoseconds, a
 * negative cost, which simulate rejects as a bad line). */
static bool sequence_args(const vec_step_t *s, size_t n, char *args, size_t size)
{
    if (s[0].state_before != 0 || s[0].period_ns % MS != 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i].now % MS != 0 || (i > 0 && s[i].now < s[i - 1].now) || s[i].cost < 0)
            return false;
    int len = snprintf(args, size, "--algorithm %s --amount %" PRId64 " --period %" PRId64 "ms",
                       s->algorithm, s->amount, s->period_ns / MS);
    if (strcmp(s->algorithm, "gcra") == 0 || strcmp(s->algorithm, "token_bucket") == 0)
        len += snprintf(args + len, size - len, " --burst %" PRId64, s->burst);
    if (s->unit == RA_RESERVE_CAP)
        len += snprintf(args + len, size - len, " --type tpm");
    else if (s->unit != 1)
        return false;
    if (s->share_num != 1 || s->share_den != 1 || s->unit != 1)
        snprintf(args + len, size - len, " --share %" PRId64 "/%" PRId64, s->share_num,
                 s->share_den);
    return true;
}

static void replay_sequence(const char *path, const vec_step_t *s, size_t n, size_t *replayed)
{
    char args[256];
    if (!sequence_args(s, n, args, sizeof(args)))
        return;
    char input[8192];
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += snprintf(input + len, sizeof(input) - len, "%" PRId64 " %" PRId64 "\n",
                        s[i].now / MS, s[i].cost);
    run_t *r = simulate(args, input);
    cr_assert_eq(r->exit_code, 0, "%s:%d: simulate %s: exit %d: %s", path, s->line, args,
                 r->exit_code, r->err);
    cr_assert_eq(r->n, n, "%s:%d: %zu output lines for %zu arrivals", path, s->line, r->n, n);
    for (size_t i = 0; i < n; i++) {
        const out_line_t *o = &r->out[i];
        cr_expect(o->t_ms == s[i].now / MS && o->cost == s[i].cost && o->admit == s[i].admit &&
                      o->unfittable == s[i].unfittable && o->remaining == s[i].remaining &&
                      o->retry_after == s[i].retry_after_s &&
                      o->reset_after == s[i].reset_after_s && o->state == s[i].state_after,
                  "%s:%d: simulate %s disagrees with the table", path, s[i].line, args);
    }
    (*replayed)++;
}

Test(simulate, replays_every_expressible_vector_sequence)
{
    static char paths[64][512];
    size_t nfiles = vec_list(VEC_DIR, paths, 64), replayed = 0;
    cr_assert_gt(nfiles, 0);
    for (size_t i = 0; i < nfiles; i++) {
        vec_file_t f;
        char err[600];
        cr_assert_eq(vec_load(paths[i], &f, err, sizeof(err)), 0, "%s", err);
        for (size_t a = 0, b; a < f.n; a = b) {
            for (b = a + 1; b < f.n && !f.steps[b].opens_sequence; b++)
                ;
            replay_sequence(paths[i], &f.steps[a], b - a, &replayed);
        }
        vec_free(&f);
    }
    cr_log_info("%zu vector sequences replayed through the binary", replayed);
    cr_expect_geq(replayed, 40, "only %zu sequences were expressible", replayed);
}

/* Sums the admitted cost of arrivals with t in [from_ms, to_ms]. */
static int64_t admitted(const run_t *r, int64_t from_ms, int64_t to_ms)
{
    int64_t sum = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->out[i].admit && r->out[i].t_ms >= from_ms && r->out[i].t_ms <= to_ms)
            sum += r->out[i].cost;
    return sum;
}

/* The seed's fixed_window story, as a user would type it. */
Test(simulate, fixed_window_admits_eighteen_inside_ten_seconds_against_ten_a_window)
{
    char input[512];
    int64_t at[] = {0, 1000, 2000, 4000, 8000, 9000, 10000};
    size_t len = 0;
    for (size_t i = 0; i < 7; i++)
        len += snprintf(input + len, sizeof(input) - len, "%" PRId64 " 3\n", T0_MS + at[i]);
    run_t *r = simulate("--algorithm fixed_window --amount 10 --period 8s", input);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_assert_eq(r->n, 7);
    cr_expect_not(r->out[3].admit, "the cost-3 arrival at t = 4 s is turned away");
    cr_expect_eq(r->out[2].state & 0xffff, 9, "the counter holds 9 by t = 2 s");
    cr_expect_eq(admitted(r, T0_MS, T0_MS + 10000), 18);
}

/* The seed's sliding_window story: prev 6, curr 6, elapsed 6 s, cost 3. */
Test(simulate, sliding_window_turns_away_the_cost_three_a_fixed_window_admits)
{
    char input[256];
    snprintf(input, sizeof(input), "%" PRId64 " 6\n%" PRId64 " 6\n%" PRId64 " 3\n", T0_MS,
             T0_MS + 12000, T0_MS + 14000);
    run_t *r = simulate("--algorithm sliding_window --amount 10 --period 8s", input);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_assert_eq(r->n, 3);
    cr_expect(r->out[1].admit);
    cr_expect_eq(r->out[1].state & 0xffffffff, (6 << 16) | 6, "prev 6, curr 6");
    cr_expect_not(r->out[2].admit, "6 x 2/8 + 6 + 3 = 10.5 > 10");
    r = simulate("--algorithm fixed_window --amount 10 --period 8s", input);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_expect(r->out[2].admit, "the fixed window admits it: 6 + 3 <= 10");
}

/* `burst_at_t0` arrivals at T0, then one every 10 ms through T0 + 60 s. */
static run_t *drained_minute(const char *args, int burst_at_t0)
{
    static char input[128 * 1024];
    size_t len = 0;
    for (int i = 0; i < burst_at_t0; i++)
        len += snprintf(input + len, sizeof(input) - len, "%" PRId64 " 1\n", T0_MS);
    for (int64_t t = 10; t <= 60000; t += 10)
        len += snprintf(input + len, sizeof(input) - len, "%" PRId64 " 1\n", T0_MS + t);
    return simulate(args, input);
}

/* 300/1m burst 60: 60 at once, then one per 200 ms: 60 + 300 through the end of the minute. */
Test(simulate, gcra_burst_60_admits_sixty_at_once_then_one_per_200ms)
{
    run_t *r = drained_minute("--algorithm gcra --amount 300 --period 1m --burst 60", 100);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_expect_eq(admitted(r, T0_MS, T0_MS), 60);
    cr_expect_eq(admitted(r, T0_MS + 1, T0_MS + 60000), 300);
    for (size_t i = 100; i < r->n; i++)
        cr_expect_eq(r->out[i].admit, (r->out[i].t_ms - T0_MS) % 200 == 0, "t = +%" PRId64 " ms",
                     r->out[i].t_ms - T0_MS);
}

/* The default burst (= amount): 300 at once and 300 more across the minute, about 600. */
Test(simulate, gcra_default_burst_admits_about_six_hundred_in_the_first_minute)
{
    run_t *r = drained_minute("--algorithm gcra --amount 300 --period 1m", 400);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_expect_eq(admitted(r, T0_MS, T0_MS), 300);
    cr_expect_eq(admitted(r, T0_MS, T0_MS + 60000), 600);
}

/* --replicas 3 spaces one replica's admissions 3T = 600 ms apart after a local burst of 20. */
Test(simulate, three_replicas_space_admissions_three_emission_intervals_apart)
{
    run_t *r =
        drained_minute("--algorithm gcra --amount 300 --period 1m --burst 60 --replicas 3", 40);
    cr_assert_eq(r->exit_code, 0, "%s", r->err);
    cr_expect_eq(admitted(r, T0_MS, T0_MS), 20);
    cr_expect_eq(admitted(r, T0_MS + 1, T0_MS + 60000), 100);
}

Test(simulate, a_bad_line_is_named_by_number_and_exits_65)
{
    run_t *r = simulate("--algorithm gcra --amount 10 --period 1s", "1000 1\n# ok\n\n1001 x\n");
    cr_expect_eq(r->exit_code, 65);
    cr_expect(strstr(r->err, "line 4: cost is not a decimal int64") != NULL, "%s", r->err);
    r = simulate("--algorithm gcra --amount 10 --period 1s", "1000 1\n999 1\n");
    cr_expect_eq(r->exit_code, 65);
    cr_expect(strstr(r->err, "line 2: t_ms goes backwards") != NULL, "%s", r->err);
    r = simulate("--algorithm gcra --amount 10 --period 1s", "1000 1 1\n");
    cr_expect_eq(r->exit_code, 65);
    cr_expect(strstr(r->err, "line 1: expected two fields") != NULL, "%s", r->err);
    r = simulate("--algorithm gcra --amount 10 --period 1s", "1000 -1\n");
    cr_expect_eq(r->exit_code, 65);
    cr_expect(strstr(r->err, "line 1: cost must not be negative") != NULL, "%s", r->err);
}

Test(simulate, a_limit_that_does_not_arm_fails_with_the_seed_message_and_exits_78)
{
    run_t *t = simulate("--type tpm --algorithm fixed_window --amount 100000 --period 1m", "");
    cr_expect_eq(t->exit_code, 78);
    cr_expect_str_eq(t->err, "Error: --algorithm: type tpm takes algorithm \"gcra\" only; "
                             "\"fixed_window\" is not available for a token rate\n");
    run_t *r = simulate("--algorithm sliding_window --amount 100000 --period 1m", "");
    cr_expect_eq(r->exit_code, 78);
    cr_expect_str_eq(r->err,
                     "Error: governance: compile limits: govern: limit \"simulate\": "
                     "sliding_window: limit 100000 exceeds the packed window-counter ceiling "
                     "65535; the frozen int64 state holds a 16-bit per-window counter \xe2\x80\x94"
                     " use algorithm \"gcra\" (unbounded) for limits this large\n");
    r = simulate("--algorithm token_bucket --amount 300 --period 1m --replicas 3", "");
    cr_expect_eq(r->exit_code, 78);
    cr_expect(strstr(r->err, "store \"share\" requires an algorithm with a per-step "
                             "effective-rate form (ratealg.EffectiveLimiter); \"token_bucket\" "
                             "has none") != NULL,
              "%s", r->err);
    r = simulate("--algorithm gcra --amount 500 --period 1m --type tpm", "");
    cr_expect_eq(r->exit_code, 78);
    cr_expect(strstr(r->err, "burst 500 is below the reserve cap 16384") != NULL, "%s", r->err);
}

Test(simulate, an_inert_burst_is_warned_about_and_changes_nothing)
{
    run_t *r = simulate("--algorithm sliding_window --amount 10 --period 8s --burst 5",
                        "1700000000000 10\n");
    cr_expect_eq(r->exit_code, 0);
    cr_expect(strstr(r->err, "Warning: --burst: sliding_window does not read burst") != NULL, "%s",
              r->err);
    cr_assert_eq(r->n, 1);
    cr_expect(r->out[0].admit, "10 <= amount 10: burst 5 did not cap it");
}

Test(simulate, malformed_flags_are_usage_errors)
{
    cr_expect_eq(simulate("--algorithm gcra --amount 10", "")->exit_code, 64);
    cr_expect_eq(simulate("--algorithm gcra --amount 10 --period 1d", "")->exit_code, 64);
    cr_expect_eq(simulate("--algorithm nope --amount 10 --period 1s", "")->exit_code, 64);
    cr_expect_eq(simulate("--algorithm gcra --amount 10 --period 1s --share 3/2", "")->exit_code,
                 64);
    cr_expect_eq(simulate("--algorithm gcra --amount 10 --period 1s --replicas 2 --share 1/2", "")
                     ->exit_code,
                 64);
}
