/* Hand-written checks of ratealg; the table-driven vectors live in tests/vectors/. */
#include <criterion/criterion.h>

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
