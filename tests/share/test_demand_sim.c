/*
 * Four replicas in one process exchanging demand reports and grants through a fake network with
 * a virtual clock, every arrival stepping real gcra with the share it was given (SPEC §6b and
 * issue 11's scenarios). Limit: 1000 per second, burst 100, c = 0.05, demand_interval 500 ms.
 * The figures are logged (--verbose) for docs/share.md.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "demand_fleet.h"
#include "ratealg.h"

#define S (1000 * DF_MS)
#define DEN DEMAND_SHARE_DEN
#define INTERVAL (500 * DF_MS)
#define AMOUNT 1000
#define BURST 100

static dfleet_t f;
static cfg_limit_t lim;

static void setup(void)
{
    df_init(&f, 4, NULL);
    lim = df_limit(AMOUNT, S, BURST);
}

static void teardown(void)
{
    df_free(&f);
}

TestSuite(demand_sim, .init = setup, .fini = teardown);

static uint32_t share_of(int i, const char *key)
{
    return demand_share(f.core[i], &lim, key, strlen(key), f.now);
}

static uint64_t fleet_admitted(const df_load_t *ld)
{
    uint64_t s = 0;
    for (int i = 0; i < f.n; i++)
        s += ld->admitted[i];
    return s;
}

Test(demand_sim, saturating_load_at_one_replica_gets_the_amount_less_three_cold_shares)
{
    char key[16];
    df_load_t ld;
    df_load_hot(&f, &ld, &lim, 2, key, sizeof(key), 2 * AMOUNT);
    df_drive(&f, &ld, 1, DF_T0 + 2 * S, NULL, NULL);
    uint32_t a = DEN - 3 * demand_cold_num(52429, 4); /* amount x (1 - c x 3/4) */
    cr_assert_eq(share_of(0, key), a, "within 2 s the replica holds the lease");
    double floor_per_period = 0.95 * AMOUNT * (double)a / DEN;
    for (int p = 0; p < 3; p++) {
        uint64_t before = ld.admitted[0];
        df_drive(&f, &ld, 1, f.now + S, NULL, NULL);
        uint64_t got = ld.admitted[0] - before;
        cr_log_info("one replica, period %d: admitted %lu (bound x 0.95 = %.0f)", p,
                    (unsigned long)got, floor_per_period);
        cr_expect_geq((double)got, floor_per_period, "period %d", p);
    }
    for (int i = 1; i < 4; i++)
        cr_expect_eq(ld.admitted[i], 0);
}

Test(demand_sim, a_lossy_network_rarely_lets_a_lease_lapse)
{
    f.loss_permille = 200; /* one datagram in five lost */
    char key[16];
    df_load_t ld;
    df_load_hot(&f, &ld, &lim, 2, key, sizeof(key), 2 * AMOUNT);
    df_drive(&f, &ld, 1, DF_T0 + 2 * S, NULL, NULL);
    uint64_t before = ld.admitted[0];
    df_drive(&f, &ld, 1, f.now + 10 * S, NULL, NULL);
    uint64_t got = ld.admitted[0] - before;
    double a = AMOUNT * (1 - 0.05 * 3 / 4);
    cr_log_info("20%% loss (%lu datagrams lost): admitted %lu in 10 s, %.1f%% of A",
                (unsigned long)f.lost, (unsigned long)got, 100.0 * (double)got / (10 * a));
    cr_expect_gt(f.lost, 0);
    cr_expect_geq((double)got, 0.95 * 10 * a);
}

/* Offers `r0`/s at replica 0 and `r1`/s at replica 1; returns the fleet's admissions over
 * three periods after two of warm-up. */
static uint64_t split(int64_t r0, int64_t r1)
{
    df_load_t ld;
    df_load_init(&ld, &lim, "team-a");
    df_load_rate(&f, &ld, 0, r0);
    df_load_rate(&f, &ld, 1, r1);
    df_drive(&f, &ld, 1, DF_T0 + 2 * S, NULL, NULL);
    uint64_t before = fleet_admitted(&ld);
    df_drive(&f, &ld, 1, f.now + 3 * S, NULL, NULL);
    uint64_t got = fleet_admitted(&ld) - before;
    cr_log_info("split %ld/%ld: fleet admitted %lu of %d (%.1f%%); shares %u %u", (long)r0,
                (long)r1, (unsigned long)got, 3 * AMOUNT, 100.0 * (double)got / (3 * AMOUNT),
                share_of(0, "team-a"), share_of(1, "team-a"));
    return got;
}

Test(demand_sim, split_90_10_at_1_2x_the_cap_uses_95_percent_of_it)
{
    cr_expect_geq(split(1080, 120), 0.95 * 3 * AMOUNT);
}

Test(demand_sim, split_50_50_at_1_2x_the_cap_uses_95_percent_of_it)
{
    cr_expect_geq(split(600, 600), 0.95 * 3 * AMOUNT);
}

/* What equal division (share 1/4 at every replica) admits of `per_s` at each of four. */
static uint64_t equal_division(int64_t per_s, int64_t from, int64_t to)
{
    ra_limiter_t eff;
    cr_assert_eq(ra_limiter_effective(&lim.limiter, 1, 4, 1, &eff), 0);
    uint64_t admitted = 0;
    for (int i = 0; i < 4; i++) {
        int64_t state = 0;
        for (int64_t k = 1; DF_T0 + k * S / per_s <= to; k++) {
            int64_t t = DF_T0 + k * S / per_s;
            t -= t % DF_MS; /* the fleet driver's 1 ms steps */
            ra_result_t r = ra_step(&eff, state, t, 1);
            if (r.admit) {
                state = r.next_state;
                admitted += t > from;
            }
        }
    }
    return admitted;
}

Test(demand_sim, even_load_over_four_matches_equal_division_within_one_percent)
{
    df_load_t ld;
    df_load_init(&ld, &lim, "even");
    for (int i = 0; i < 4; i++)
        df_load_rate(&f, &ld, i, 300);
    df_drive(&f, &ld, 1, DF_T0 + 2 * S, NULL, NULL);
    uint64_t before = fleet_admitted(&ld);
    df_drive(&f, &ld, 1, DF_T0 + 5 * S, NULL, NULL);
    uint64_t got = fleet_admitted(&ld) - before;
    uint64_t eq = equal_division(300, DF_T0 + 2 * S, DF_T0 + 5 * S);
    cr_log_info("even over four: demand %lu, equal division %lu", (unsigned long)got,
                (unsigned long)eq);
    cr_expect_leq(labs((long)got - (long)eq), (long)eq / 100);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(share_of(i, "even"), DEN / 4, "r%d", i);
}

Test(demand_sim, shares_follow_demand_that_moves_to_another_replica)
{
    df_load_t ld;
    df_load_init(&ld, &lim, "mover");
    df_load_rate(&f, &ld, 0, 1200);
    df_drive(&f, &ld, 1, DF_T0 + 3 * S + 300 * DF_MS, NULL, NULL);
    uint32_t cold = demand_cold_num(52429, 4), a = DEN - 3 * cold;
    cr_assert_eq(share_of(0, "mover"), a);
    int64_t moved = f.now, leased = 0, full = 0, released = 0;
    df_load_rate(&f, &ld, 0, 0);
    df_load_rate(&f, &ld, 1, 1200);
    while (f.now < moved + 4 * S && !(full && released)) {
        df_drive(&f, &ld, 1, f.now + DF_MS, NULL, NULL);
        if (!leased && share_of(1, "mover") > cold)
            leased = f.now;
        if (!full && share_of(1, "mover") >= 0.95 * a)
            full = f.now;
        if (!released && share_of(0, "mover") == cold)
            released = f.now;
    }
    cr_log_info("move: new site leased after %ld ms, at 95%% of A after %ld ms, old site "
                "released after %ld ms",
                (long)((leased - moved) / DF_MS), (long)((full - moved) / DF_MS),
                (long)((released - moved) / DF_MS));
    cr_assert(leased && full && released);
    /* the new site reports at its first tick and is answered on receipt; the old one releases
     * at its second tick (its first bucket without arrivals) and the owner hands the share on
     * at once: both within two demand intervals, plus the network (1 ms each way here) */
    cr_expect_leq(leased - moved, INTERVAL + 2 * DF_MS);
    cr_expect_leq(released - moved, 2 * INTERVAL);
    cr_expect_leq(full - moved, 2 * INTERVAL + 2 * DF_MS);
}

/* Per-millisecond record of the fleet's admissions and the bound r0 discloses (sustained per
 * period + burst). */
typedef struct trace {
    uint64_t *admitted;
    int64_t *bound;
    size_t n, cap;
} trace_t;

static void observe(void *ctx, const dfleet_t *fl, uint64_t admitted)
{
    trace_t *t = ctx;
    cr_assert_lt(t->n, t->cap);
    demand_disclosure_t d;
    demand_disclose(fl->core[0], &lim, fl->now, &d);
    t->admitted[t->n] = admitted;
    t->bound[t->n++] = d.sustained_bound + d.burst_bound;
}

Test(demand_sim, a_killed_owner_never_lets_the_fleet_pass_the_disclosed_bound)
{
    char key[16];
    df_load_t ld;
    df_load_hot(&f, &ld, &lim, 3, key, sizeof(key), 2 * AMOUNT);
    trace_t t = {.cap = 12000};
    t.admitted = calloc(t.cap, sizeof(uint64_t));
    t.bound = calloc(t.cap, sizeof(int64_t));
    df_drive(&f, &ld, 1, DF_T0 + 3 * S, observe, &t);
    uint32_t cold4 = demand_cold_num(52429, 4);
    cr_assert_eq(share_of(0, key), DEN - 3 * cold4);

    df_kill(&f, 3);
    int64_t killed = f.now, detected = killed + 3 * S; /* membership's detection, scripted */
    df_drive(&f, &ld, 1, killed + 3 * INTERVAL + 2 * DF_MS, observe, &t);
    while (f.now < detected) {
        cr_assert_eq(share_of(0, key), cold4, "the lease lapsed to the cold share");
        df_drive(&f, &ld, 1, f.now + 50 * DF_MS, observe, &t);
    }
    bool live[DF_MAX] = {true, true, true, false};
    for (int i = 0; i < 3; i++)
        df_view(&f, i, live);
    int owner = df_owner(&f, 0, &lim, key);
    cr_assert_neq(owner, 3);
    uint32_t a3 = DEN - 2 * demand_cold_num(52429, 3);
    int64_t taken = 0;
    while (f.now < detected + 3 * S) {
        df_drive(&f, &ld, 1, f.now + DF_MS, observe, &t);
        if (!taken && share_of(0, key) == a3)
            taken = f.now;
    }
    cr_log_info("owner killed: new owner r%d leased after %ld ms", owner,
                (long)((taken - detected) / DF_MS));
    cr_expect(taken && taken - detected <= 2 * INTERVAL + 10 * DF_MS);

    /* every one-period window: admitted <= the largest bound disclosed in it */
    uint64_t in_window = 0, worst = 0;
    for (size_t i = 0; i < t.n; i++) {
        in_window += t.admitted[i];
        if (i >= 1000)
            in_window -= t.admitted[i - 1000];
        int64_t bound = 0;
        for (size_t j = i >= 999 ? i - 999 : 0; j <= i; j++)
            bound = t.bound[j] > bound ? t.bound[j] : bound;
        cr_assert_leq((int64_t)in_window, bound, "window ending at %zu ms", i);
        worst = in_window > worst ? in_window : worst;
    }
    cr_log_info("owner killed: the most any 1 s window admitted: %lu", (unsigned long)worst);
    free(t.admitted);
    free(t.bound);
}
