/* Hand-written checks of ratealg; the table-driven vectors live in tests/vectors/. */
#include <criterion/criterion.h>

#include <string.h>

#include "ratealg.h"

#define S RA_NS_PER_S

Test(gcra, seed_example_leaves_59_after_one_request)
{
    ra_limiter_t l;
    cr_assert_eq(ra_limiter_init(&l, RA_GCRA, 300, 60 * S, 60), 0);
    cr_assert_eq(l.emission_ns, 200000000);
    cr_assert_eq(l.tolerance_ns, 12 * S);
    ra_result_t r = ra_step(&l, 0, 1000 * S, 1);
    cr_assert(r.admit);
    cr_assert_eq(r.remaining, 59);
    cr_assert_eq(ra_observe_remaining(&l, r.next_state, 1000 * S), 59);
}

Test(gcra, rejected_request_consumes_nothing)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 1, S, 1);
    ra_result_t a = ra_step(&l, 0, 5 * S, 1);
    cr_assert(a.admit);
    ra_result_t d = ra_step(&l, a.next_state, 5 * S, 1);
    cr_assert_not(d.admit);
    cr_assert_eq(d.next_state, a.next_state);
    cr_assert_eq(d.retry_after_s, 1);
}

Test(sliding_window, seed_vector_weighted_previous_turns_cost_three_away)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_SLIDING_WINDOW, 10, 8 * S, 10);
    /* window 1 holds prev 6 (from window 0) and curr 6, at elapsed 6 s */
    int64_t state = ((int64_t)1 << 32) | (6 << 16) | 6;
    ra_result_t r = ra_step(&l, state, 14 * S, 3);
    cr_assert_not(r.admit);
    ra_limiter_init(&l, RA_FIXED_WINDOW, 10, 8 * S, 10);
    cr_assert(ra_step(&l, state, 14 * S, 3).admit);
}

Test(limiter, arming_rejects_what_would_not_limit)
{
    ra_limiter_t l;
    int64_t top = INT64_MAX / S; /* the largest burst whose tau fits at T = 1 s */
    cr_expect_eq(ra_limiter_init(&l, RA_GCRA, 1, S, top), 0);
    cr_expect_eq(l.tolerance_ns, top * S);
    cr_expect_eq(ra_limiter_init(&l, RA_GCRA, 1, S, top + 1), RA_ETAU);
    cr_expect_eq(ra_limiter_init(&l, RA_GCRA, 2 * S, S, 1), RA_EEMISSION);
    cr_expect_eq(ra_limiter_init(&l, RA_GCRA, 0, S, 1), RA_EAMOUNT);
    cr_expect_eq(ra_limiter_init(&l, RA_GCRA, 1, 0, 1), RA_EPERIOD);
    cr_expect_eq(ra_limiter_init(&l, RA_TOKEN_BUCKET, 1, S, 0), RA_EBURST);
    cr_expect_eq(ra_limiter_init(&l, RA_SLIDING_WINDOW, 65535, S, 0), 0, "burst is not read");
    cr_expect_eq(ra_limiter_init(&l, RA_FIXED_WINDOW, 65536, S, 1), RA_ECEILING);
    cr_expect_eq(ra_limiter_init(&l, (ra_algorithm_t)9, 1, S, 1), RA_EALGORITHM);
    cr_expect_eq(l.period_ns, 0, "a failed init leaves a zeroed limiter");
}

Test(limiter, an_unarmed_limiter_denies_instead_of_dividing_by_zero)
{
    ra_limiter_t l = {0};
    ra_result_t r = ra_step(&l, 42, 1000 * S, 1);
    cr_expect_not(r.admit);
    cr_expect_eq(r.next_state, 42);
}

Test(effective, only_gcra_with_a_proper_share_has_one)
{
    ra_limiter_t plain, tb, out;
    ra_limiter_init(&plain, RA_GCRA, 300, 60 * S, 60);
    ra_limiter_init(&tb, RA_TOKEN_BUCKET, 300, 60 * S, 60);
    cr_expect_eq(ra_limiter_effective(&tb, 1, 3, 1, &out), RA_ENOEFFECTIVE);
    cr_expect_eq(ra_limiter_effective(&plain, 0, 3, 1, &out), RA_ESHARE);
    cr_expect_eq(ra_limiter_effective(&plain, 4, 3, 1, &out), RA_ESHARE);
    cr_expect_eq(ra_limiter_effective(&plain, 1, 3, 0, &out), RA_ESHARE);
    cr_expect_eq(ra_limiter_effective(&plain, 1, INT64_MAX, 1, &out), RA_ETAU, "T_s overflows");
    cr_expect_eq(ra_limiter_effective(&plain, 5, 5, 1, &out), 0);
    cr_expect_eq(memcmp(&out, &plain, sizeof(out)), 0, "s = 1 is the plain limiter, byte for byte");
}

Test(gcra, observing_remaining_commits_nothing)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 300, 60 * S, 300);
    ra_result_t r = ra_step(&l, 0, 1000 * S, 1);
    cr_expect_eq(ra_observe_remaining(&l, r.next_state, 1000 * S), 299,
                 "the seed: burst 300 reads 299 of 300 after one request");
    cr_expect_eq(ra_observe_remaining(&l, 1000 * S + 60 * S, 1000 * S), 0, "probe denied");
}

Test(gcra, settling_refunds_down_to_now_and_always_charges_an_overrun)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 100000, 60 * S, 20000); /* T = 600 us */
    int64_t now = 1000 * S, tat = now + 6 * S;
    cr_expect_eq(ra_settle(&l, tat, now, 10000, 4000), tat - INT64_C(6000) * 600000,
                 "refund 6000 T");
    cr_expect_eq(ra_settle(&l, tat, now, 20000, 0), now, "never below now");
    cr_expect_eq(ra_settle(&l, now - S, now, 10, 0), now - S, "a full bucket stays full");
    cr_expect_eq(ra_settle(&l, now - S, now, 0, 10), now + INT64_C(10) * 600000,
                 "charged from now");
    cr_expect_eq(ra_settle(&l, tat, now, 0, INT64_MAX), INT64_MAX - l.tolerance_ns,
                 "stops where a fitting cost still adds");
    ra_limiter_t w;
    ra_limiter_init(&w, RA_FIXED_WINDOW, 10, S, 10);
    cr_expect_eq(ra_settle(&w, 77, now, 0, 5), 77, "windows do not settle");
}

Test(gcra, a_huge_overrun_stays_a_deny_whose_retry_says_how_long)
{
    /* issue 23, item 3: tpm 16384/1h, 2^40 tokens charged after the fact. The TAT must not
     * saturate where the next step cannot add its cost: any cost that fits the burst is then a
     * denial with a retry, never "unfittable" (which tells the caller never to retry). */
    ra_limiter_t l;
    cr_assert_eq(ra_limiter_init(&l, RA_GCRA, 16384, 3600 * S, 16384), 0);
    int64_t now = INT64_C(1700000000) * S;
    int64_t tat = ra_settle(&l, 0, now, 0, INT64_C(1) << 40);
    cr_assert_gt(tat, now + 3600 * S, "the overrun is charged");
    for (int64_t cost = 1; cost <= 16384; cost *= 4) {
        ra_result_t r = ra_step(&l, tat, now, cost);
        cr_assert_not(r.unfittable, "cost %lld reads as unfittable", (long long)cost);
        cr_assert_not(r.admit);
        cr_assert_gt(r.retry_after_s, 0);
        cr_assert_eq(r.next_state, tat, "a denial leaves the state as it was");
    }
    /* a second overrun on top never pushes it past where a fitting cost still adds */
    int64_t again = ra_settle(&l, tat, now, 0, INT64_C(1) << 40);
    cr_assert_geq(again, tat);
    cr_assert_not(ra_step(&l, again, now, 16384).unfittable);
}

Test(state, idle_means_a_fresh_key_would_decide_the_same)
{
    ra_limiter_t g, f;
    ra_limiter_init(&g, RA_GCRA, 300, 60 * S, 60);
    ra_limiter_init(&f, RA_FIXED_WINDOW, 10, 8 * S, 10);
    cr_expect(ra_state_is_idle(&g, 5 * S, 6 * S));
    cr_expect_not(ra_state_is_idle(&g, 7 * S, 6 * S));
    cr_expect_not(ra_state_is_idle(&g, -7 * S, -6 * S), "before the epoch, 0 is not drained");
    int64_t one = ra_step(&f, 0, 1700000000 * S, 1).next_state;
    cr_expect_not(ra_state_is_idle(&f, one, 1700000008 * S), "rolled into prev");
    cr_expect(ra_state_is_idle(&f, one, 1700000016 * S), "two windows on");
}

Test(names, every_algorithm_round_trips_through_its_name)
{
    for (int a = RA_GCRA; a <= RA_TOKEN_BUCKET; a++) {
        ra_algorithm_t back;
        cr_expect_eq(ra_algorithm_parse(ra_algorithm_name((ra_algorithm_t)a), &back), 0);
        cr_expect_eq(back, (ra_algorithm_t)a);
    }
    ra_algorithm_t x;
    cr_expect_eq(ra_algorithm_parse("leaky_bucket", &x), RA_EALGORITHM);
}

Test(effective, is_derived_from_the_plain_parameters_and_may_write_in_place)
{
    ra_limiter_t l, once, zero = {0};
    ra_limiter_init(&l, RA_GCRA, 300, 60 * S, 2);
    cr_assert_eq(ra_limiter_effective(&l, 1, 3, 1, &once), 0);
    cr_expect_eq(once.emission_ns, 600000000);
    cr_expect_eq(once.tolerance_ns, 600000000, "the floor: max(tau = 400 ms, T_s x 1)");
    cr_assert_eq(ra_limiter_effective(&once, 1, 1, 1, &l), 0);
    cr_expect_eq(l.tolerance_ns, 400000000, "back to plain: the floor is not carried over");
    cr_assert_eq(ra_limiter_effective(&l, 1, 3, 1, &l), 0);
    cr_expect_eq(memcmp(&l, &once, sizeof(l)), 0, "in place gives the same limiter");
    cr_expect_eq(ra_limiter_effective(&zero, 1, 3, 1, &once), RA_EAMOUNT, "never armed");
}

Test(envoy_window, arms_from_zero_to_the_uint32_ceiling)
{
    ra_limiter_t l;
    cr_expect_eq(ra_limiter_init(&l, RA_ENVOY_WINDOW, 0, S, 0), 0, "0: always over the limit");
    cr_expect_eq(ra_limiter_init(&l, RA_ENVOY_WINDOW, RA_ENVOY_CEILING, S, 0), 0);
    cr_expect_eq(l.burst, RA_ENVOY_CEILING, "the plain amount is kept for the share form");
    cr_expect_eq(ra_limiter_init(&l, RA_ENVOY_WINDOW, RA_ENVOY_CEILING + 1, S, 0), RA_ECEILING);
    cr_expect_eq(ra_limiter_init(&l, RA_ENVOY_WINDOW, -1, S, 0), RA_EAMOUNT);
    cr_expect_eq(ra_limiter_init(&l, RA_FIXED_WINDOW, 0, S, 0), RA_EAMOUNT,
                 "0 is a limit for envoy_window alone");
    ra_algorithm_t a;
    cr_expect_eq(ra_algorithm_parse("envoy_window", &a), 0);
    cr_expect_eq(a, RA_ENVOY_WINDOW);
    cr_expect_str_eq(ra_algorithm_name(RA_ENVOY_WINDOW), "envoy_window");
}

Test(envoy_window, a_charge_counts_past_the_limit_within_the_window_only)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_ENVOY_WINDOW, 2, 60 * S, 0);
    int64_t t = 1700000000 * S, st = ra_step(&l, 0, t, 2).next_state;
    cr_assert_not(ra_step(&l, st, t, 1).admit);
    int64_t over = ra_settle(&l, st, t, 0, 3); /* counted after the fact: 5 of 2 */
    cr_expect_eq((uint32_t)over, 5);
    cr_expect_eq(ra_step(&l, over, t, 0).remaining, 0);
    cr_expect_eq((uint32_t)ra_settle(&l, over, t, 3, 1), 3, "a refund takes the difference back");
    cr_expect_eq((uint32_t)ra_settle(&l, over, t, 9, 0), 0, "never below 0");
    cr_expect_eq((uint32_t)ra_settle(&l, over, t, 0, INT64_MAX), (uint32_t)RA_ENVOY_CEILING,
                 "never past 2^32 - 1");
    cr_expect(ra_step(&l, over, t + 60 * S, 2).admit, "the next window starts from 0");
    cr_expect(ra_state_is_idle(&l, over, t + 60 * S));
    cr_expect_not(ra_state_is_idle(&l, over, t));
}
