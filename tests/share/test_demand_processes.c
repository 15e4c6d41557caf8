/*
 * Demand-aware division (SPEC §6b) with real replicas: four `tokentriage serve` processes with
 * `division: demand`, on the fleet harness of test_fleet.c (network namespaces on a bridge, or
 * loopback ports), with load for one key paced at chosen rates over the decision sockets. The
 * reports and leases ride membership's sealed APP datagrams between the processes. Every wait
 * polls the replicas' `fleet` answers with a deadline; no blind sleep stands in for a state.
 * Scenarios: one loaded replica, splits of 1.2x the cap (90/10, 50/50, even over four), the
 * owner of the hot key SIGKILLed, and the load moving from one replica to another. Counts are
 * over the decisions due in a window (drive()), so a stall of this process, the load generator,
 * does not move decisions across a window's edge.
 */
#include <criterion/criterion.h>
#include <signal.h>
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
#define PERIOD_US (PERIOD_MS * 1000)
#define CAP_PER_S (AMOUNT * 1000 / PERIOD_MS) /* 100/s */
#define COLD 0.05                             /* cold_share, the default */
#define INTERVAL_US 500000                    /* demand_interval */
#define BURST 20
/* drive() makes up at most this much of a stalled generator; longer stalls are skipped load. */
#define MAKEUP_US 1000000
/* The split tests' burst. GCRA's tolerance is period / amount x burst whatever the share, so
 * with 100 it is 1 s, as long as drive()'s make-up: a decision the generator (this process,
 * single-threaded, on a loaded 2-core machine) made late by up to 1 s is admitted as if it had
 * come on time. With burst 20 (200 ms) a stall of the generator alone, not the fleet, loses
 * the admissions due during it beyond 200 ms. A larger tolerance could also carry unspent
 * credit across the window's edges; full_edge() makes sure it does not. */
#define SPLIT_BURST 100

/* governance.limits for one rpm limit per team of AMOUNT per 2 s with the given burst. */
static const char *limits_yaml(int burst)
{
    static char y[512];
    snprintf(y, sizeof(y),
             "    - id: " LIMIT "\n"
             "      attach: { level: team }\n"
             "      type: rpm\n"
             "      amount: %d\n"
             "      period: 2s\n"
             "      burst: %d\n"
             "      store: share\n"
             "      posture: { mode: \"on\", enforce: hard, fail: closed }\n",
             AMOUNT, burst);
    return y;
}

static fleet_t fleet;

typedef struct replica_io {
    tt_client_t *c;
    int64_t admitted, sent;
    double rate;         /* decisions per second offered now */
    int64_t due_us;      /* when the next decision is due */
    int64_t late_max_us; /* the longest a decision was made after it was due: a stall */
    int64_t skipped;     /* decisions dropped, due more than MAKEUP_US before they could be made */
    uint8_t recent;      /* the last 8 outcomes, newest in bit 0, 1 = denied */
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

static void start_fleet(int burst)
{
    cr_assert_eq(fleet_setup(&fleet, N), 0);
    snprintf(fleet.share_extra, sizeof(fleet.share_extra),
             "    division: demand\n    demand_interval: 500ms\n");
    cr_log_info("fleet in %s", fleet.netns ? "network namespaces" : "loopback ports");
    memset(io, 0, sizeof(io));
    for (int i = 0; i < N; i++)
        cr_assert_eq(fleet_start(&fleet, i, limits_yaml(burst)), 0);
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

/* SIGKILLs replica i; the test stops offering it load and asking it questions. */
static void kill_replica(int i)
{
    fleet_signal(&fleet, i, SIGKILL);
    tt_close(io[i].c);
    io[i].c = NULL;
    io[i].rate = 0;
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
    io[i].recent = (uint8_t)(io[i].recent << 1 | (r.admit == 0));
}

/* Drives the offered rates until `until_us`, and returns having made exactly the decisions due
 * before it: a window between two drive() deadlines holds the decisions due in it, however late
 * a stall made them. Decisions are made when due; a stall of the generator (a slow round trip,
 * this process descheduled) is made up afterwards, up to MAKEUP_US of it, so the offered total
 * holds; the stall is recorded in late_max_us, and what is beyond MAKEUP_US in skipped. */
static void drive(int64_t until_us)
{
    for (;;) {
        int64_t t = now_us(), next = until_us;
        for (int i = 0; i < N; i++) {
            if (io[i].rate <= 0)
                continue;
            int64_t step = (int64_t)(1e6 / io[i].rate);
            for (; io[i].due_us < t - MAKEUP_US; io[i].due_us += step)
                io[i].skipped++;
            while (io[i].due_us <= t && io[i].due_us < until_us) {
                int64_t late = now_us() - io[i].due_us;
                if (late > io[i].late_max_us)
                    io[i].late_max_us = late;
                decide_at(i);
                io[i].due_us += step;
            }
            if (io[i].due_us < next)
                next = io[i].due_us;
        }
        if (t >= until_us)
            return;
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

/* The generator's worst stall and skipped decisions over the replicas, since the last reset. */
static void generator_stalls(int64_t *late_max_us, int64_t *skipped, bool reset)
{
    *late_max_us = *skipped = 0;
    for (int i = 0; i < N; i++) {
        if (io[i].late_max_us > *late_max_us)
            *late_max_us = io[i].late_max_us;
        *skipped += io[i].skipped;
        if (reset)
            io[i].late_max_us = io[i].skipped = 0;
    }
}

TestSuite(demand_processes, .fini = teardown, .timeout = 240);

Test(demand_processes, one_loaded_replica_takes_nearly_the_whole_cap_within_two_seconds)
{
    start_fleet(BURST);
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
    /* from 2 s after the load began, three periods (of decisions due in them: drive()) */
    int64_t t1 = t0 + 2000000, t2 = t1 + 3 * PERIOD_US;
    drive(t1);
    int64_t before = io[0].admitted;
    drive(t2);
    int64_t got = io[0].admitted - before;
    double periods = 3;
    double allowed = AMOUNT * (1 - COLD * (N - 1) / N) * periods;
    cr_log_info("replica 0 admitted %lld of %lld in %.2f periods: %.1f%% of amount x (1 - c x 3/4)",
                (long long)got, (long long)(io[0].sent), periods, 100.0 * got / allowed);
    cr_assert_geq(io[0].sent - before, 2 * got, "the load saturated");
    cr_assert_geq((double)got, 0.95 * allowed);
    /* what the fleet admitted stays within what it disclosed, and nobody else admitted */
    fleet_row_t row;
    cr_assert(query(0, &row));
    cr_assert_eq(row.keys_leased, 1);
    double elapsed = (double)(now_us() - t0) / PERIOD_US;
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

/* A window's edge: drives to `t`, then on in 20 ms steps (up to 2 s) until every replica offered
 * more than its fair share has denied one of its last 8 decisions (at 1.2x the cap it denies
 * about one in five). Once a limiter denies and its arrivals come faster than its rate it holds
 * under one unit of credit, so no unspent credit of the larger SPLIT_BURST tolerance crosses the
 * edge and a replica's count between two edges is its rate over the window, up to a unit. A
 * replica offered less than its fair share (the 10 of 90/10) admits what it is offered, whose
 * count the due-time window makes exact. The edge moves only after a stall of the generator
 * near it left a limiter with credit. Returns the edge (a drive() deadline). */
static int64_t full_edge(const int parts[N], int loaded, int64_t t)
{
    for (int64_t until = t + 2000000;; t += 20000) {
        cr_assert_lt(t, until, "the limiters were not full within 2 s of the window's edge");
        drive(t);
        bool full = true;
        for (int i = 0; i < N; i++)
            full &= !(parts[i] * 1.2 * loaded > 100) || io[i].recent != 0;
        if (full)
            return t;
    }
}

/* Offers 1.2 x the cap split by `parts` (percent per replica), lets the leases settle for 4 s
 * (demand is smoothed over 2 s), then asserts that what the fleet admitted of the decisions due
 * in the next `periods` periods (full_edge() to full_edge()) is within [lo, hi] x the cap, and
 * returns it over the cap. */
static double split(const int parts[N], const char *name, int periods, double lo, double hi)
{
    start_fleet(SPLIT_BURST);
    int loaded = 0;
    int64_t late_us, skipped;
    for (int i = 0; i < N; i++) {
        offer(i, parts[i] / 100.0 * 1.2 * CAP_PER_S);
        loaded += parts[i] > 0;
    }
    int64_t t1 = full_edge(parts, loaded, now_us() + 4000000);
    generator_stalls(&late_us, &skipped, true);
    int64_t before = admitted_total();
    int64_t t2 = full_edge(parts, loaded, t1 + periods * PERIOD_US);
    int64_t got = admitted_total() - before;
    double cap = AMOUNT * (double)(t2 - t1) / PERIOD_US;
    generator_stalls(&late_us, &skipped, false);
    cr_log_info("%s at 1.2x the cap: the fleet admitted %lld of a cap of %.1f: %.1f%%; the "
                "generator's longest stall %lld ms (tolerance %d ms), %lld decisions skipped",
                name, (long long)got, cap, 100.0 * got / cap, (long long)late_us / 1000,
                SPLIT_BURST * PERIOD_MS / AMOUNT, (long long)skipped);
    cr_assert_geq((double)got, lo * cap,
                  "%s: %lld of %.1f (the generator's longest stall %lld ms, %lld skipped)", name,
                  (long long)got, cap, (long long)late_us / 1000, (long long)skipped);
    cr_assert_leq((double)got, hi * cap, "%s: %lld of %.1f", name, (long long)got, cap);
    return got / cap;
}

Test(demand_processes, a_90_10_split_at_1_2x_the_cap_uses_95_percent_of_it_fleet_wide)
{
    split((const int[N]){90, 10, 0, 0}, "90/10", 3, 0.95, 1.05);
}

/* Both sites are offered 60% of the cap and granted 48.75% each (A = 97.5% shared evenly). */
Test(demand_processes, a_50_50_split_at_1_2x_the_cap_uses_95_percent_of_it_fleet_wide)
{
    split((const int[N]){50, 50, 0, 0}, "50/50", 3, 0.95, 1.05);
}

Test(demand_processes, even_load_over_all_four_admits_what_equal_division_would_within_1_percent)
{
    /* equal division admits the cap exactly under saturating even load (test_fleet.c). Six
     * periods, not three: each edge is exact to about a unit per replica, 8 units in all, which
     * must stay well inside 1% of the window's cap */
    split((const int[N]){25, 25, 25, 25}, "even over four", 6, 0.99, 1.01);
    /* and the division itself is equal division's: every replica leased amount / 4 */
    for (int i = 0; i < N; i++) {
        fleet_row_t row;
        cr_assert(query(i, &row));
        cr_assert_eq(row.keys_leased, 1, "replica %d", i);
        cr_assert_eq(row.largest_lease, AMOUNT / N, "replica %d leased %lld", i,
                     (long long)row.largest_lease);
    }
}

/* What the replicas still running disclose, polled, and the fleet's count checked against it:
 * in every window between two polls, what the fleet admitted stays within sustained_bound
 * (doubled while `moving`) integrated over the window's periods plus burst_bound, each the
 * largest any running replica discloses (each one's `moving` starts when it sees a change;
 * together they cover the fleet). The window from the first poll is the whole run. */
#define WATCH_MAX 2048

typedef struct watch {
    fleet_row_t row[N];
    bool up[N];
    int n;                     /* polls so far */
    int64_t t[WATCH_MAX];      /* when */
    int64_t used[WATCH_MAX];   /* the fleet's admissions so far */
    double allowed[WATCH_MAX]; /* the sustained bound integrated since the first poll, units */
    int64_t burst[WATCH_MAX], sustained[WATCH_MAX];
    double worst; /* the highest used / bound over windows of at least one period */
} watch_t;

static void watch_poll(watch_t *w)
{
    cr_assert_lt(w->n, WATCH_MAX);
    int64_t sustained = 0, burst = 0;
    for (int i = 0; i < N; i++) {
        w->up[i] = query(i, &w->row[i]);
        if (w->up[i] && w->row[i].sustained_bound > sustained)
            sustained = w->row[i].sustained_bound;
        if (w->up[i] && w->row[i].burst_bound > burst)
            burst = w->row[i].burst_bound;
    }
    int k = w->n++;
    w->t[k] = now_us();
    w->used[k] = admitted_total();
    w->burst[k] = burst;
    w->sustained[k] = sustained;
    w->allowed[k] = 0;
    if (k == 0)
        return;
    /* between two polls (about 100 ms) the larger of the two disclosures */
    int64_t s = sustained > w->sustained[k - 1] ? sustained : w->sustained[k - 1];
    w->allowed[k] = w->allowed[k - 1] + (double)s * (double)(w->t[k] - w->t[k - 1]) / PERIOD_US;
    int64_t b = burst;
    for (int j = k - 1; j >= 0; j--) {
        b = w->burst[j] > b ? w->burst[j] : b;
        double bound = w->allowed[k] - w->allowed[j] + (double)b;
        int64_t used = w->used[k] - w->used[j];
        cr_assert_leq((double)used, bound,
                      "the fleet admitted %lld in the %lld ms before %lld ms, above the %.1f "
                      "disclosed",
                      (long long)used, (long long)(w->t[k] - w->t[j]) / 1000,
                      (long long)(w->t[k] - w->t[0]) / 1000, bound);
        if (w->t[k] - w->t[j] >= PERIOD_US && used / bound > w->worst)
            w->worst = used / bound;
    }
}

/* The replicas disclosing keys_owned == 1: returns how many, and one of them in *owner. */
static int owners(const watch_t *w, int *owner)
{
    int count = 0;
    for (int i = 0; i < N; i++)
        if (w->up[i] && w->row[i].keys_owned == 1) {
            count++;
            *owner = i;
        }
    return count;
}

/* Drives the load and polls every 100 ms until `done` holds; fails after `within_ms`. */
#define DRIVE_UNTIL(w, done, within_ms, ...)                                                       \
    do {                                                                                           \
        int64_t until_ = now_us() + (int64_t)(within_ms)*1000;                                     \
        for (watch_poll(w); !(done); watch_poll(w)) {                                              \
            cr_assert_lt(now_us(), until_, __VA_ARGS__);                                           \
            drive(now_us() + 100000);                                                              \
        }                                                                                          \
    } while (0)

Test(demand_processes,
     a_killed_owner_lets_the_lease_lapse_and_a_survivor_takes_over_within_the_bound)
{
    start_fleet(BURST);
    static watch_t w;
    memset(&w, 0, sizeof(w));
    watch_poll(&w);
    /* saturating load (2x the cap) at replica 0 until it holds a lease; the owner is then the
     * one replica that owns the key. The load must not be at the owner: if replica 0 owns the
     * key, the load moves to replica 1 (ownership follows the key's hash, not the load). */
    int loaded = 0, owner = -1;
    offer(loaded, 2.0 * CAP_PER_S);
    DRIVE_UNTIL(&w, w.row[loaded].keys_leased == 1 && owners(&w, &owner) == 1, 10000,
                "no lease and one owner within 10 s");
    if (owner == loaded) {
        offer(loaded, 0);
        loaded = 1;
        offer(loaded, 2.0 * CAP_PER_S);
        DRIVE_UNTIL(&w, w.row[loaded].keys_leased == 1 && w.row[0].keys_leased == 0, 10000,
                    "the lease did not move to replica 1 within 10 s");
    }
    cr_assert_eq(owners(&w, &owner), 1);
    cr_assert_neq(owner, loaded);
    cr_log_info("the load at replica %d, the key's owner replica %d", loaded, owner);

    /* The owner dies. Its last grant lives 3 intervals (1.5 s) from receipt; the survivors drop
     * the owner only when membership declares it dead (probe timeout, then a suspicion timeout
     * of 4 probe intervals, disclosed as detect_within_s), so the lease lapses seconds before a
     * new owner can grant and the lapse is there to see at 100 ms polls. */
    int64_t detect_s = w.row[loaded].detect_within_s;
    int64_t killed = now_us();
    int dead = owner;
    kill_replica(dead);
    DRIVE_UNTIL(&w, w.row[loaded].keys_leased == 0, 3 * INTERVAL_US / 1000 + 2000,
                "the lease at replica %d did not lapse within 3 intervals + 2 s of the kill",
                loaded);
    int64_t lapsed = now_us();
    cr_assert_eq(owners(&w, &owner), 0, "no survivor owns the key before the owner is dead");
    /* A new owner among the survivors (exactly one), and the loaded replica leased again. Two
     * polls that both find no lease there had none between them (a lease, once granted, lives 3
     * intervals): what it admitted between them ran on the cold share. */
    int64_t leased_again = -1, cold_got = 0, cold_us = 0;
    int64_t until = now_us() + (detect_s + 5) * 1000000;
    int64_t prev_t = now_us(), prev_admitted = io[loaded].admitted;
    bool prev_unleased = true;
    while (!(w.row[loaded].keys_leased == 1 && owners(&w, &owner) == 1)) {
        cr_assert_lt(now_us(), until,
                     "no new owner and lease within detect_within_s (%lld s) + 5 s of the lapse",
                     (long long)detect_s);
        drive(now_us() + 100000);
        watch_poll(&w);
        int64_t t = now_us();
        bool unleased = w.row[loaded].keys_leased == 0;
        if (prev_unleased && unleased) {
            cold_got += io[loaded].admitted - prev_admitted;
            cold_us += t - prev_t;
        }
        if (leased_again < 0 && !unleased)
            leased_again = t;
        prev_unleased = unleased;
        prev_t = t;
        prev_admitted = io[loaded].admitted;
    }
    int64_t taken = now_us(), n = w.row[loaded].n;
    cr_assert(w.up[owner] && owner != dead, "the new owner is a survivor");
    /* on the cold share, c / n of the amount per period: n is 4, then 3 once the survivors
     * re-divide (the larger share counted); GCRA's tolerance at that share is one unit */
    double cold_periods = (double)cold_us / PERIOD_US;
    cr_assert_leq((double)cold_got, AMOUNT * COLD / (N - 1) * cold_periods + 2,
                  "replica %d admitted %lld in %.2f periods without a lease", loaded,
                  (long long)cold_got, cold_periods);

    /* Near the fleet rate again: one period from one interval after the new lease. The rate is
     * amount x (1 - c x (n - 1) / n), ~96/s; 90% of it over one period (GCRA exact to a unit,
     * and up to one interval of the share still rising while the new owner's first grants
     * settle) still tells a lease from the cold share (1.25%) and from equal division (25%). */
    drive(now_us() + INTERVAL_US);
    int64_t before = io[loaded].admitted;
    for (int64_t end = now_us() + PERIOD_US, t = 0; t < end; watch_poll(&w)) {
        t = now_us() + 100000 < end ? now_us() + 100000 : end;
        drive(t);
    }
    int64_t got = io[loaded].admitted - before;
    double rate = AMOUNT * (1 - COLD * (double)(n - 1) / (double)n);
    cr_log_info("owner r%d SIGKILLed: the lease at r%d lapsed after %lld ms; new owner r%d, "
                "leased again %lld ms after the kill, one owner after %lld ms (n = %lld, "
                "detect_within_s %lld); on the cold share %lld admitted in %.2f periods; then "
                "%lld in one period "
                "(%.1f%% of amount x (1 - c x (n-1)/n)), largest lease %lld; in any window of a "
                "period or more the fleet admitted at most %.0f%% of the disclosed bound",
                dead, loaded, (long long)(lapsed - killed) / 1000, owner,
                (long long)(leased_again - killed) / 1000, (long long)(taken - killed) / 1000,
                (long long)n, (long long)detect_s, (long long)cold_got, cold_periods,
                (long long)got, 100.0 * got / rate, (long long)w.row[loaded].largest_lease,
                100 * w.worst);
    cr_assert_leq(lapsed - killed, 3 * INTERVAL_US + 500000,
                  "the lease lapsed %lld ms after the kill: 3 intervals + 500 ms of polling and "
                  "scheduling",
                  (long long)(lapsed - killed) / 1000);
    cr_assert_eq(w.row[loaded].keys_leased, 1);
    cr_assert_geq((double)got, 0.9 * rate, "%lld admitted in the period after the new lease",
                  (long long)got);
}

/* The time from the move until replica b holds 95% of what one reporter is leased and replica a
 * holds no lease. Two demand intervals by design: b reports at its first tick after the move and
 * the owner answers a new reporter on receipt; a releases at its first tick whose bucket the cold
 * share covers (its second at the latest) and the owner hands the share over on receipt. */
#define MOVE_ALLOWANCE_US 300000

Test(demand_processes, shares_follow_demand_that_moves_to_another_replica_within_two_intervals)
{
    start_fleet(BURST);
    const int a = 0, b = 1;
    /* amount x (1 - c x 3/4) per period: one reporter's lease (192.5 units, disclosed as 192) */
    double full = 0.95 * AMOUNT * (1 - COLD * (N - 1) / N);
    fleet_row_t ra, rb;
    offer(a, 1.2 * CAP_PER_S);
    int64_t until = now_us() + 10000000;
    do {
        drive(now_us() + 50000);
        cr_assert(query(a, &ra));
        cr_assert_lt(now_us(), until, "replica %d not at 95%% of A within 10 s", a);
    } while (ra.largest_lease < full);
    /* the load moves from a to b at t0 */
    offer(a, 0);
    offer(b, 1.2 * CAP_PER_S);
    int64_t t0 = now_us(), b_leased = -1, a_released = -1, followed = -1;
    while (followed < 0) {
        drive(now_us() + 20000);
        cr_assert(query(a, &ra) && query(b, &rb));
        int64_t t = now_us() - t0;
        if (b_leased < 0 && rb.keys_leased == 1)
            b_leased = t;
        if (a_released < 0 && ra.keys_leased == 0)
            a_released = t;
        if (rb.largest_lease >= full && ra.keys_leased == 0)
            followed = t;
        cr_assert_lt(t, 5000000, "the shares did not follow within 5 s (b's largest lease %lld)",
                     (long long)rb.largest_lease);
    }
    cr_log_info("demand moved r%d -> r%d: r%d leased after %lld ms, r%d released after %lld ms, "
                "r%d at 95%% of A (largest lease %lld) after %lld ms",
                a, b, b, (long long)b_leased / 1000, a, (long long)a_released / 1000, b,
                (long long)rb.largest_lease, (long long)followed / 1000);
    /* Two intervals, plus: the 20 ms polls and their round trips, the early-grant pass that may
     * wait interval / 8 (62.5 ms) behind the previous one, and three daemons' timers and
     * datagrams on a shared 2-core machine (tens of ms each under load). */
    cr_assert_leq(followed, 2 * INTERVAL_US + MOVE_ALLOWANCE_US,
                  "followed after %lld ms: more than 2 intervals + %d ms",
                  (long long)followed / 1000, MOVE_ALLOWANCE_US / 1000);
    /* and b uses it: over the next period it admits at least 90% of one reporter's lease (it is
     * offered 1.2 x the cap; 90% as in the kill test: one period, GCRA exact to a unit) */
    int64_t before = io[b].admitted, t1 = now_us();
    drive(t1 + PERIOD_US);
    int64_t got = io[b].admitted - before;
    cr_log_info("then r%d admitted %lld in one period (%.1f%% of amount x (1 - c x 3/4))", b,
                (long long)got, 100.0 * 0.95 * got / full);
    cr_assert_geq((double)got, 0.9 * full / 0.95);
}
