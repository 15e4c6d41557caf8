/*
 * Counters across restarts, the engine's side (persist.c): what gov_engine_restore puts back.
 * A snapshot is checked whole by its decoder, but a value the algorithm could never have reached
 * (crafted, or written by a bug) must not come back: a gcra TAT past what ra_settle keeps makes
 * every later cost "unfittable" (never retry), a window count above the amount denies a whole
 * window (issue 34 item 7).
 */
#include "helpers.h"

static gov_result_t decide_team(gov_engine_t *e, int64_t now)
{
    gov_subject_t s;
    return decide(e, subj(&s, "team", "t-1", NULL), GOV_NO_TOKENS, now);
}

static cfg_limit_t window(ra_algorithm_t alg, int64_t amount)
{
    return mk_limit("w", "team", CFG_TYPE_RPM, alg, amount, 60 * S, 0);
}

Test(persist, a_gcra_state_past_what_settle_keeps_is_refused_and_the_key_stays_fresh)
{
    cfg_limit_t l = rpm("hourly", "team", 10, 3600 * S, 0);
    gov_engine_t *e = mk_engine(&l, 1, true);
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, INT64_MAX, T0), GOV_ERANGE);
    int64_t ceiling = INT64_MAX - l.limiter.tolerance_ns;
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, ceiling + 1, T0), GOV_ERANGE);
    gov_result_t r = decide_team(e, T0);
    cr_assert(r.admit, "a refused state was put back: verdict %d", (int)r.verdict);
    cr_assert_eq(r.remaining, 9);
    gov_engine_destroy(e);
}

/* Every state ra_settle can make is restored: its ceiling, and an overrun's far TAT. */
Test(persist, a_gcra_state_settle_can_reach_is_restored_and_denies_with_a_retry)
{
    cfg_limit_t l = tpm("tokens", "team", 100000, 60 * S, 0);
    gov_engine_t *e = mk_engine(&l, 1, true);
    int64_t far = ra_settle(&l.limiter, T0, T0, 0, INT64_C(1) << 40);
    int64_t ceiling = ra_settle(&l.limiter, far, T0, 0, INT64_MAX);
    cr_assert_eq(ceiling, INT64_MAX - l.limiter.tolerance_ns);
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, far, T0), 0);
    cr_assert_eq(gov_engine_restore(e, 0, "t-2", 3, ceiling, T0), 0);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t-2", NULL), 1000, T0);
    cr_assert(!r.admit && r.verdict == GOV_DENY, "the ceiling's key must be denied with a retry");
    cr_assert_gt(r.retry_after_s, 0);
    gov_engine_destroy(e);
}

/* [index: 32][prev: 16][curr: 16] */
static int64_t pack(int64_t now, int64_t period, int64_t prev, int64_t curr)
{
    uint64_t index = (uint64_t)(now / period) & 0xffffffffu;
    return (int64_t)((index << 32) | ((uint64_t)prev << 16) | (uint64_t)curr);
}

Test(persist, a_window_count_above_the_amount_is_refused)
{
    static const ra_algorithm_t algs[] = {RA_FIXED_WINDOW, RA_SLIDING_WINDOW};
    for (size_t i = 0; i < 2; i++) {
        cfg_limit_t l = window(algs[i], 10);
        gov_engine_t *e = mk_engine(&l, 1, true);
        int64_t w = 60 * S;
        cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, pack(T0, w, 0, 11), T0), GOV_ERANGE);
        cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, pack(T0, w, 11, 0), T0), GOV_ERANGE);
        cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, pack(T0, w, 0xffff, 0xffff), T0),
                     GOV_ERANGE);
        gov_result_t r = decide_team(e, T0);
        cr_assert(r.admit, "%s: a refused state was put back", ra_algorithm_name(algs[i]));
        /* at the amount, both counts are reachable: the window is spent */
        cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, pack(T0, w, 10, 10), T0), 0);
        r = decide_team(e, T0);
        cr_assert(!r.admit, "%s: a spent window admitted", ra_algorithm_name(algs[i]));
        gov_engine_destroy(e);
    }
}

Test(persist, a_share_state_is_checked_as_a_local_one)
{
    cfg_limit_t l = rpm("fleet", "team", 10, 3600 * S, 0);
    l.store = CFG_STORE_SHARE;
    gov_engine_t *e = mk_engine(&l, 1, true);
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, INT64_MAX, T0), GOV_ERANGE);
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, T0 + 3600 * S, T0), 0);
    gov_engine_destroy(e);
}
