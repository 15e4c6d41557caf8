/*
 * Demand-aware division (SPEC §6b) with real replicas: four `tokentriage serve` processes with
 * `division: demand`, on the fleet harness of test_fleet.c (network namespaces on a bridge, or
 * loopback ports), with load for one key paced at chosen rates over the decision sockets. The
 * reports and leases ride membership's sealed APP datagrams between the processes. Every wait
 * polls the replicas' `fleet` answers with a deadline; no blind sleep stands in for a state.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet.h"
#include "tokentriage.h"

#define LIMIT "team_rpm"
#define N 4
#define AMOUNT 200
#define PERIOD_MS 2000
#define CAP_PER_S (AMOUNT * 1000 / PERIOD_MS) /* 100/s */
#define COLD 0.05                             /* cold_share, the default */

static const char *const limits_yaml =
    "    - id: " LIMIT "\n"
    "      attach: { level: team }\n"
    "      type: rpm\n"
    "      amount: 200\n"
    "      period: 2s\n"
    "      burst: 20\n"
    "      store: share\n"
    "      posture: { mode: \"on\", enforce: hard, fail: closed }\n";

static fleet_t fleet;

typedef struct replica_io {
    tt_client_t *c;
    int64_t admitted, sent;
    double rate;    /* decisions per second offered now */
    int64_t due_us; /* when the next decision is due */
} replica_io_t;

static replica_io_t io[N];

static void teardown(void)
{
    for (int i = 0; i < N; i++) {
        tt_close(io[i].c);
        io[i].c = NULL;
    }
    fleet_teardown(&fleet);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static bool query(int i, fleet_row_t *out)
{
    return io[i].c && fleet_query(io[i].c, LIMIT, out) == 0;
}

/* Every replica answers LIMIT armed with n = N. */
static bool all_armed(void)
{
    for (int i = 0; i < N; i++) {
        fleet_row_t row;
        if (!query(i, &row) || row.n != N || strcmp(row.state, "armed") != 0 || !row.converged)
            return false;
    }
    return true;
}

static void start_fleet(void)
{
    cr_assert_eq(fleet_setup(&fleet, N), 0);
    snprintf(fleet.share_extra, sizeof(fleet.share_extra),
             "    division: demand\n    demand_interval: 500ms\n");
    cr_log_info("fleet in %s", fleet.netns ? "network namespaces" : "loopback ports");
    memset(io, 0, sizeof(io));
    for (int i = 0; i < N; i++)
        cr_assert_eq(fleet_start(&fleet, i, limits_yaml), 0);
    int64_t deadline = fleet_now_ms() + 30000;
    for (int i = 0; i < N; i++) {
        while (tt_connect(&io[i].c, fleet.r[i].sock) != 0) {
            cr_assert_lt(fleet_now_ms(), deadline, "replica %d never opened its socket", i);
            sleep_us(50000);
        }
        tt_set_timeout(io[i].c, 5000);
    }
    while (!all_armed()) {
        cr_assert_lt(fleet_now_ms(), deadline, "the four did not arm with n = 4");
        sleep_us(100000);
    }
}

/* Sets replica i's offered rate from now on. */
static void offer(int i, double per_s)
{
    io[i].rate = per_s;
    io[i].due_us = now_us();
}

/* One decision for the one key at replica i. */
static void decide_at(int i)
{
    tt_pair_t subject = {.level = "team", .id = "t-hot"};
    tt_response_t r;
    cr_assert_eq(tt_decide(io[i].c, &subject, 1, -1, &r), 0, "replica %d: decide", i);
    io[i].sent++;
    io[i].admitted += r.admit != 0;
}

/* Drives the offered rates until `until_us`: decisions are made when due, and a stall (a slow
 * round trip on a loaded machine) is made up afterwards, up to a second of it, so the offered
 * total holds; GCRA admits a catch-up burst no more than it would the paced arrivals. */
static void drive(int64_t until_us)
{
    for (;;) {
        int64_t t = now_us(), next = until_us;
        if (t >= until_us)
            return;
        for (int i = 0; i < N; i++) {
            if (io[i].rate <= 0)
                continue;
            int64_t step = (int64_t)(1e6 / io[i].rate);
            if (io[i].due_us < t - 1000000)
                io[i].due_us = t - 1000000;
            while (io[i].due_us <= t) {
                decide_at(i);
                io[i].due_us += step;
            }
            if (io[i].due_us < next)
                next = io[i].due_us;
        }
        t = now_us();
        if (next > t)
            sleep_us(next - t < 2000 ? next - t : 2000);
    }
}

static int64_t admitted_total(void)
{
    int64_t s = 0;
    for (int i = 0; i < N; i++)
        s += io[i].admitted;
    return s;
}

TestSuite(demand_processes, .fini = teardown, .timeout = 240);

Test(demand_processes, one_loaded_replica_takes_nearly_the_whole_cap_within_two_seconds)
{
    start_fleet();
    /* saturating load for one key, at replica 0 only: 2.5 x the cap */
    int64_t t0 = now_us();
    offer(0, 2.5 * CAP_PER_S);
    int64_t leased_us = -1;
    while (leased_us < 0) {
        drive(now_us() + 100000);
        fleet_row_t row;
        cr_assert(query(0, &row));
        if (row.keys_leased == 1)
            leased_us = now_us() - t0;
        cr_assert_lt(now_us() - t0, 10000000, "no lease at replica 0 within 10 s");
    }
    cr_log_info("replica 0 holds a lease %lld ms after the load began",
                (long long)leased_us / 1000);
    cr_assert_leq(leased_us, 2000000, "the lease came after %lld ms", (long long)leased_us / 1000);
    /* from 2 s after the load began, three periods */
    drive(t0 + 2000000);
    int64_t before = io[0].admitted, t1 = now_us();
    drive(t1 + 3 * PERIOD_MS * 1000);
    int64_t got = io[0].admitted - before, t2 = now_us();
    double periods = (double)(t2 - t1) / (PERIOD_MS * 1000.0);
    double allowed = AMOUNT * (1 - COLD * (N - 1) / N) * periods;
    cr_log_info("replica 0 admitted %lld of %lld in %.2f periods: %.1f%% of amount x (1 - c x 3/4)",
                (long long)got, (long long)(io[0].sent), periods, 100.0 * got / allowed);
    cr_assert_geq(io[0].sent - before, 2 * got, "the load saturated");
    cr_assert_geq((double)got, 0.95 * allowed);
    /* what the fleet admitted stays within what it disclosed, and nobody else admitted */
    fleet_row_t row;
    cr_assert(query(0, &row));
    cr_assert_eq(row.keys_leased, 1);
    double elapsed = (double)(t2 - t0) / (PERIOD_MS * 1000.0);
    cr_assert_leq((double)admitted_total(), row.sustained_bound * elapsed + row.burst_bound);
    int owners = 0;
    for (int i = 0; i < N; i++) {
        cr_assert(query(i, &row));
        owners += row.keys_owned == 1;
        cr_assert_eq(io[i].admitted, i == 0 ? io[0].admitted : 0);
    }
    cr_assert_eq(owners, 1, "one owner for the key");
    static char metrics[1 << 17];
    cr_assert_eq(fleet_http_get(&fleet, 0, "/metrics", metrics, sizeof(metrics)), 0);
    cr_assert(strstr(metrics, "tokentriage_demand_keys_leased{limit=\"" LIMIT "\"} 1\n"));
}

/* Offers 1.2 x the cap split by `parts` (percent per replica), lets the leases settle for 4 s
 * (demand is smoothed over 2 s), then returns what the fleet admitted in three periods over the
 * cap. */
static double split(const int parts[N], const char *name)
{
    start_fleet();
    int64_t t0 = now_us();
    for (int i = 0; i < N; i++)
        offer(i, parts[i] / 100.0 * 1.2 * CAP_PER_S);
    drive(t0 + 4000000);
    int64_t before = admitted_total(), t1 = now_us();
    drive(t1 + 3 * PERIOD_MS * 1000);
    int64_t got = admitted_total() - before, t2 = now_us();
    double cap = AMOUNT * (double)(t2 - t1) / (PERIOD_MS * 1000.0);
    cr_log_info("%s at 1.2x the cap: the fleet admitted %lld of a cap of %.0f: %.1f%%", name,
                (long long)got, cap, 100.0 * got / cap);
    cr_assert_leq((double)got, 1.05 * cap);
    return got / cap;
}

Test(demand_processes, a_90_10_split_at_1_2x_the_cap_uses_95_percent_of_it_fleet_wide)
{
    cr_assert_geq(split((const int[N]){90, 10, 0, 0}, "90/10"), 0.95);
}

Test(demand_processes, even_load_over_all_four_admits_what_equal_division_would_within_1_percent)
{
    /* equal division admits the cap exactly under saturating even load (test_fleet.c) */
    double got = split((const int[N]){25, 25, 25, 25}, "even over four");
    cr_assert_geq(got, 0.99);
    cr_assert_leq(got, 1.01);
}
