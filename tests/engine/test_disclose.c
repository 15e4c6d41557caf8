/* The rate headers, formatted directly from observations. */
#include <stdio.h>

#include "helpers.h"

Test(disclose, go_durations_read_like_go)
{
    char b[32];
    const struct {
        int64_t s;
        const char *want;
    } cases[] = {{0, "0s"},     {1, "1s"},         {59, "59s"},      {60, "1m0s"},
                 {360, "6m0s"}, {3599, "59m59s"},  {3600, "1h0m0s"}, {3661, "1h1m1s"},
                 {-5, "0s"},    {90000, "25h0m0s"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gov_go_duration(b, sizeof(b), cases[i].s);
        cr_assert_str_eq(b, cases[i].want, "%lld s", (long long)cases[i].s);
    }
}

Test(disclose, tighter_compares_remaining_over_depth_exactly)
{
    cfg_limit_t l = rpm("a", "team", 1, 60 * S, 1);
    gov_obs_t none = {0};
    gov_obs_t a = {.limit = &l, .remaining = 59, .depth = 60};
    gov_obs_t b = {.limit = &l, .remaining = 299, .depth = 300};
    gov_obs_t c = {.limit = &l, .remaining = 1, .depth = 2};
    cr_assert(gov_obs_tighter(&a, &none));
    cr_assert_not(gov_obs_tighter(&none, &a));
    cr_assert(gov_obs_tighter(&a, &b), "59/60 < 299/300");
    cr_assert_not(gov_obs_tighter(&b, &a));
    cr_assert(gov_obs_tighter(&c, &a));
    cr_assert_not(gov_obs_tighter(&a, &a), "ties keep the first");
    gov_obs_t huge = {.limit = &l, .remaining = INT64_MAX - 1, .depth = INT64_MAX};
    gov_obs_t huge2 = {.limit = &l, .remaining = INT64_MAX - 2, .depth = INT64_MAX};
    cr_assert(gov_obs_tighter(&huge2, &huge), "no overflow in the cross products");
}

Test(disclose, headers_come_in_a_fixed_order_and_the_widest_values_fit)
{
    char id[CFG_ID_MAX + 1];
    memset(id, 'a', CFG_ID_MAX); /* the longest id */
    id[CFG_ID_MAX] = '\0';
    cfg_limit_t r = rpm("team_rpm", "team", 300, 60 * S, 60);
    cfg_limit_t t = tpm(id, "team", INT64_C(1) << 40, 3600 * S, INT64_C(1) << 40);
    gov_obs_t ro = {.limit = &r, .remaining = 59, .reset_s = 1, .depth = 60};
    gov_obs_t to = {.limit = &t, .remaining = INT64_MAX, .reset_s = INT64_MAX, .depth = 1};
    gov_result_t out = {.n_headers = 0};
    gov_disclose(&out, &to, &ro, &to, 7);
    cr_assert_eq(out.n_headers, 9);
    const char *names[] = {"Ratelimit-Policy",
                           "RateLimit",
                           "X-Ratelimit-Limit-Requests",
                           "X-Ratelimit-Remaining-Requests",
                           "X-Ratelimit-Reset-Requests",
                           "X-Ratelimit-Limit-Tokens",
                           "X-Ratelimit-Remaining-Tokens",
                           "X-Ratelimit-Reset-Tokens",
                           "Retry-After"};
    for (int i = 0; i < 9; i++)
        cr_assert_str_eq(out.headers[i].name, names[i]);
    char want[GOV_HEADER_VALUE_MAX];
    snprintf(want, sizeof(want), "\"%s\";q=1099511627776;w=3600", id);
    cr_assert_str_eq(out.headers[0].value, want);
    snprintf(want, sizeof(want), "\"%s\";r=9223372036854775807;t=9223372036854775807", id);
    cr_assert_str_eq(out.headers[1].value, want);
    cr_assert_str_eq(out.headers[4].value, "1s");
    cr_assert_str_eq(out.headers[7].value, "2562047788015215h30m7s");
    cr_assert_str_eq(out.headers[8].value, "7");
}

Test(disclose, nothing_observed_writes_only_what_the_verdict_needs)
{
    gov_result_t out = {.n_headers = 0};
    gov_disclose(&out, NULL, NULL, NULL, -1);
    cr_assert_eq(out.n_headers, 0);
    gov_disclose(&out, NULL, NULL, NULL, 0);
    cr_assert_eq(out.n_headers, 1);
    cr_assert_str_eq(out.headers[0].value, "0");
}

/* The engine reads a committed limit's headroom from its own step instead of probing again:
 * that is only right if the two always agree. */
Test(disclose, an_admitted_steps_remaining_equals_the_unit_probe_on_its_new_state)
{
    uint64_t x = 0x9e3779b97f4a7c15u;
    const ra_algorithm_t algs[] = {RA_GCRA, RA_FIXED_WINDOW, RA_SLIDING_WINDOW, RA_TOKEN_BUCKET};
    int checked = 0;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ra_limiter_t l;
        int64_t amount = 1 + (int64_t)(x % 500), burst = 1 + (int64_t)((x >> 9) % 600);
        int64_t period = S * (1 + (int64_t)((x >> 19) % 120));
        if (ra_limiter_init(&l, algs[(x >> 27) % 4], amount, period, burst) < 0)
            continue;
        int64_t now = T0 + (int64_t)((x >> 29) % (uint64_t)(200 * S));
        int64_t state = l.algorithm == RA_GCRA || l.algorithm == RA_TOKEN_BUCKET
                            ? now - 100 * S + (int64_t)((x >> 33) % (uint64_t)(200 * S))
                            : (int64_t)(x >> 1);
        ra_result_t r = ra_step(&l, state, now, (int64_t)((x >> 45) % 8));
        if (!r.admit)
            continue;
        cr_assert_eq(r.remaining, ra_observe_remaining(&l, r.next_state, now), "step %d", i);
        checked++;
    }
    cr_assert_gt(checked, 10000);
}
