/*
 * The rate headers: the renderer against the shared vector table (tests/vectors/headers.txt),
 * and what the engine observes for each kind of limit.
 */
#include <stdio.h>
#include <stdlib.h>

#include "hdrvec.h"
#include "helpers.h"

/* The daemon's renderer (gov_result_render: `"headers": true`, protocol 1, the HTTP and gRPC
 * front doors), field by field. The client library's is checked in tests/client. */
Test(disclose, every_case_of_the_header_table_renders_byte_for_byte)
{
    FILE *in = fopen(HDRVEC_PATH, "r");
    cr_assert_not_null(in, "%s", HDRVEC_PATH);
    static hdrvec_case_t c;
    static gov_result_t out;
    char err[128];
    int line = 0, cases = 0, rc;
    while ((rc = hdrvec_next(in, &c, &line, err, sizeof(err))) > 0) {
        out = (gov_result_t){.disclosed = c.d};
        gov_result_render(&out);
        cr_assert_eq(out.n_headers, (uint32_t)c.n_want, "%s (line %d): %u headers, want %d", c.name,
                     c.line, out.n_headers, c.n_want);
        for (int i = 0; i < c.n_want; i++) {
            cr_assert_str_eq(out.headers[i].name, c.want[i][0], "%s (line %d)", c.name, c.line);
            cr_assert_str_eq(out.headers[i].value, c.want[i][1], "%s (line %d): %s", c.name, c.line,
                             c.want[i][0]);
        }
        cases++;
    }
    fclose(in);
    cr_assert_eq(rc, 0, "%s", err);
    cr_assert_geq(cases, 16, "the table was read whole");
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

/*
 * t over random gcra states: with nothing left it is the retry of one unit, exactly; otherwise
 * the remaining does not grow before it ends (t - 1 s) and has grown when it has (unless full).
 */
Test(disclose, t_is_the_one_unit_retry_or_the_time_to_the_next_unit)
{
    uint64_t x = 0x2545f4914f6cdd1du;
    int empty = 0, some = 0;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cfg_limit_t l = {.type = CFG_TYPE_RPM};
        int64_t amount = 1 + (int64_t)(x % 500), burst = 1 + (int64_t)((x >> 9) % 600);
        int64_t period = S / 10 * (1 + (int64_t)((x >> 19) % 1200));
        ra_algorithm_t alg = (x >> 27) % 2 ? RA_GCRA : RA_TOKEN_BUCKET;
        if (ra_limiter_init(&l.limiter, alg, amount, period, burst) < 0)
            continue;
        l.amount = amount;
        /* from idle (behind now) through drained to past tau (a settled overrun); half of
         * them within two units of drained */
        int64_t T = l.limiter.emission_ns, tau = l.limiter.tolerance_ns, now = T0;
        int64_t state = (x >> 63) ? now - T + (int64_t)((x >> 33) % (uint64_t)(tau + 3 * T))
                                  : now + tau - 2 * T + (int64_t)((x >> 33) % (uint64_t)(4 * T));
        gov_obs_t o = {.limit = &l, .remaining = ra_observe_remaining(&l.limiter, state, now)};
        gov_obs_fill(&o, &l.limiter, state, now);
        if (o.remaining == 0) {
            ra_result_t r = ra_step(&l.limiter, state, now, 1);
            cr_assert_not(r.admit);
            cr_assert_eq(o.window_s, r.retry_after_s, "step %d", i);
            empty++;
        } else {
            int64_t before = now + (o.window_s - 1) * S, after = now + o.window_s * S;
            cr_assert_eq(ra_observe_remaining(&l.limiter, state, before), o.remaining, "%d", i);
            if (o.remaining < o.depth)
                cr_assert_gt(ra_observe_remaining(&l.limiter, state, after), o.remaining, "%d", i);
            some++;
        }
    }
    cr_assert_gt(empty, 1000);
    cr_assert_gt(some, 1000);
}

/* ---- what the engine discloses, decision by decision ----------------------------------------- */

/* N replicas, equal division: the share store's effective limiter (SPEC §3, §6). */
static int third_share(void *ctx, const cfg_limit_t *l, int64_t now, ra_limiter_t *out, bool *armed)
{
    (void)ctx, (void)now;
    *armed = true;
    return ra_limiter_effective(&l->limiter, 1, 3, cfg_type_unit(l->type), out);
}

static gov_engine_t *engine_of(cfg_limit_t *l, cfg_store_t store)
{
    l->store = store;
    gov_engine_t *e = mk_engine(l, 1, true);
    static const gov_share_ops_t three = {.limiter = third_share};
    if (store == CFG_STORE_SHARE)
        gov_engine_set_share(e, &three, NULL);
    return e;
}

/* Decides until the first denial (at most 100 tries, all at `now`) and returns it. */
static gov_result_t first_denial(gov_engine_t *e, const gov_subject_t *s, int64_t tokens,
                                 int64_t now)
{
    for (int i = 0; i < 100; i++) {
        gov_result_t r = decide(e, s, tokens, now);
        if (r.verdict == GOV_DENY)
            return r;
    }
    cr_assert_fail("never denied");
    return (gov_result_t){0};
}

static int64_t param(const char *v, const char *name)
{
    const char *p = v ? strstr(v, name) : NULL;
    cr_assert_not_null(p, "%s has no %s", v, name);
    return atoll(p + strlen(name));
}

/*
 * The draft's t is the effective window: the time within which the caller can use no more than
 * r. With r = 0 that is when one unit fits again, the same moment a one-unit retry names; the
 * draft asks that Retry-After not point before it. 5/1m burst 3: T = 12 s, tau = 36 s.
 */
Test(disclose, a_denial_tells_t_and_retry_after_alike)
{
    const struct {
        cfg_limit_t l;
        cfg_store_t store;
        int64_t tokens, t, retry;
    } cases[] = {
        {rpm("key_rpm", "key", 5, 60 * S, 3), CFG_STORE_LOCAL, GOV_NO_TOKENS, 12, 12},
        {mk_limit("key_rpm", "key", CFG_TYPE_RPM, RA_TOKEN_BUCKET, 5, 60 * S, 3), CFG_STORE_LOCAL,
         GOV_NO_TOKENS, 12, 12},
        /* N = 3, burst 6: T_s = 36 s, tau_s = 72 s, two at once, the next in 36 s */
        {rpm("key_rpm", "key", 5, 60 * S, 6), CFG_STORE_SHARE, GOV_NO_TOKENS, 36, 36},
        /* 60000/1m (T = 1 ms) burst 16384 drained, 5000 tokens: the next token in 1 ms, the
         * cost fits in 5 s; t = 1 <= Retry-After = 5 */
        {tpm("key_tpm", "key", 60000, 60 * S, 16384), CFG_STORE_LOCAL, 5000, 1, 5},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_limit_t l = cases[i].l;
        gov_engine_t *e = engine_of(&l, cases[i].store);
        gov_subject_t s;
        subj(&s, "key", "k", NULL);
        if (l.type == CFG_TYPE_TPM)
            cr_assert(decide(e, &s, 16384, T0).admit);
        gov_result_t r = first_denial(e, &s, cases[i].tokens, T0);
        const char *rl = hdr(&r, "RateLimit");
        cr_assert_eq(param(rl, ";r="), 0, "case %zu: %s", i, rl);
        cr_assert_eq(param(rl, ";t="), cases[i].t, "case %zu: %s", i, rl);
        cr_assert_eq(atoll(hdr(&r, "Retry-After")), cases[i].retry, "case %zu", i);
        gov_engine_destroy(e);
    }
}

/* With r > 0, t is when r + 1 units are there: within it, no more than r. */
Test(disclose, t_is_the_time_until_remaining_grows)
{
    cfg_limit_t l = rpm("key_rpm", "key", 5, 60 * S, 3);
    gov_engine_t *e = engine_of(&l, CFG_STORE_LOCAL);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    r = decide(e, &s, GOV_NO_TOKENS, T0 + 5 * S); /* TAT = T0 + 24 s: 1 left, a 2nd at T0 + 12 s */
    cr_assert_str_eq(hdr(&r, "RateLimit"), "\"key_rpm\";r=1;t=7");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "19s", "full again at T0 + 24 s");
    gov_engine_destroy(e);
}

/* The draft's default quota unit is requests: a tpm policy must say it counts tokens. */
Test(disclose, a_tpm_policy_names_its_unit)
{
    cfg_limit_t ls[] = {tpm("team_tpm", "team", 1000000, 60 * S, 100000),
                        rpm("team_rpm", "team", 300, 60 * S, 300)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = decide(e, &s, 50000, T0);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"team_tpm\";q=1000000;qu=\"tokens\";w=60");
    r = decide(e, &s, 0, T0 + 3600 * S); /* the rpm limit is the tighter one now */
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"team_rpm\";q=300;w=60");
    gov_engine_destroy(e);
}

/* The draft's w is whole seconds: 3 per 1500 ms is 6 per 3 s, exactly; resets are exact too. */
Test(disclose, periods_that_are_not_whole_seconds_are_advertised_exactly)
{
    cfg_limit_t ls[] = {rpm("sub", "key", 3, 1500 * S / 1000, 3),
                        rpm("quick", "team", 5, 250 * S / 1000, 5)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"sub\";q=6;w=3");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "500ms");
    decide(e, &s, GOV_NO_TOKENS, T0);
    decide(e, &s, GOV_NO_TOKENS, T0);
    r = decide(e, &s, GOV_NO_TOKENS, T0 + 100 * S / 1000);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "1.4s");
    subj(&s, "team", "t", NULL);
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"quick\";q=20;w=1");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "50ms");
    gov_engine_destroy(e);
}

/* A share replica discloses the quota it enforces, on the scale of the remaining it shows. */
Test(disclose, a_share_replica_discloses_its_own_share)
{
    cfg_limit_t l = rpm("fleet_rpm", "team", 300, 60 * S, 60);
    gov_engine_t *e = engine_of(&l, CFG_STORE_SHARE);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    /* N = 3: T_s = 600 ms, 100 a minute here; tau 12 s: 20 units of depth, one spent */
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"fleet_rpm\";q=100;w=60");
    cr_assert_str_eq(hdr(&r, "RateLimit"), "\"fleet_rpm\";r=19;t=1");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Limit-Requests"), "100");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "19");
    gov_engine_destroy(e);
}
