/*
 * A rolling restart of a share fleet under load, with real replicas (tests/share/roll.h): the
 * fleet's admissions in every sliding 10 s and 60 s window stay within the bound its converged
 * replicas disclose, and no two replicas of disjoint views both report converged.
 *
 * roll/ (the suite): ten replicas with three static seeds, restarted one a second, each down
 * 3 s: the three seeds are down together, which split the fleet in two on main before issue 35.
 * roll_scale/ (ctest -L scale, with -DTT_SCALE_TESTS=ON): the same at 32 replicas, 10%
 * unavailable at most, the set-up; about two minutes of wall time and 32 daemons.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "roll.h"

static void check(const roll_options_t *o, const roll_result_t *r)
{
    cr_assert_str_eq(r->failed, "", "%s", r->failed);
    cr_assert_gt(r->admitted, 0, "nothing admitted");
    cr_expect_eq(r->island_rounds, 0,
                 "%lld poll rounds with two converged replicas of disjoint views (%.1fs to %.1fs)",
                 (long long)r->island_rounds, (double)r->island_first_ms / 1000,
                 (double)r->island_last_ms / 1000);
    for (int k = 0; k < 2; k++)
        cr_expect_eq(r->win[k].violations, 0,
                     "%lld windows of %llds above the disclosed bound; the worst %lld admitted "
                     "against %.1f, ending at %.1fs",
                     (long long)r->win[k].violations, (long long)r->win[k].e_ms / 1000,
                     (long long)r->win[k].count, r->win[k].bound, (double)r->win[k].at_ms / 1000);
    cr_expect_geq(r->converged_ms, 0, "the fleet did not converge again after the roll");
    (void)o;
}

static void run(roll_options_t *o)
{
    o->verbose = getenv("TT_ROLL_VERBOSE") != NULL;
    roll_result_t r;
    roll_run(o, &r);
    roll_report("roll", o, &r);
    check(o, &r);
}

#ifndef TT_ROLL_SCALE
#define SUITE roll
#define NAME ten_replicas_restarted_one_a_second_with_three_static_seeds_stay_one_fleet
#define REPLICAS 10
#define STEADY_MS 10000
#else
#define SUITE roll_scale
#define NAME thirty_two_replicas_restarted_one_a_second_with_three_static_seeds_stay_one_fleet
#define REPLICAS 32
#define STEADY_MS 15000
#endif

Test(SUITE, NAME, .timeout = 600)
{
    roll_options_t o = {.n = REPLICAS,
                        .seeds = 3,
                        .step_ms = 1000,
                        .down_ms = 3000,
                        .steady_ms = STEADY_MS,
                        .settle_ms = STEADY_MS,
                        .poll_ms = 500,
                        .ask = 4.8};
    run(&o);
}
