/*
 * Properties of ratealg over seeded random arrival sequences. Each test draws its own seed
 * (from the clock, or TT_PROPERTY_SEED to replay one) and names it in every failure message.
 *
 * What the bound properties check is the guarantee, not the code path: the admitted units
 * are tallied by the test itself (per interval, per aligned window) and compared with what
 * SPEC section 3 promises.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ratealg.h"

#define S INT64_C(1000000000)
#define LIMITERS 150 /* random limiters per property */
#define STEPS 1500   /* arrivals per limiter */

/* splitmix64: small, seedable, good enough to draw test inputs. */
typedef struct rng {
    uint64_t s;
} rng_t;

static uint64_t next_u64(rng_t *r)
{
    uint64_t z = (r->s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi - lo < 2^63). */
static int64_t uniform(rng_t *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(next_u64(r) % (uint64_t)(hi - lo + 1));
}

static bool chance(rng_t *r, int percent)
{
    return (int)(next_u64(r) % 100) < percent;
}

static uint64_t draw_seed(void)
{
    const char *env = getenv("TT_PROPERTY_SEED");
    if (env && *env)
        return strtoull(env, NULL, 10);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
}

/* Prefixes an assertion message with the seed that replays it. */
#define SEEDED(fmt) "[replay: TT_PROPERTY_SEED=%llu] " fmt, (unsigned long long)seed

/* A random armed limiter of the given algorithm. Windows keep amount under the ceiling. */
static ra_limiter_t random_limiter(rng_t *r, ra_algorithm_t alg)
{
    /* 100 h is past 2^48 ns, where the sliding window takes its 128-bit path */
    static const int64_t periods[] = {INT64_C(1000000), S, 8 * S, 60 * S, 3600 * S, 360000 * S};
    for (;;) {
        int64_t period = chance(r, 70) ? periods[next_u64(r) % 6] : uniform(r, 1000, 1000 * S);
        int64_t amount = chance(r, 50) ? uniform(r, 1, 20) : uniform(r, 1, 5000);
        int64_t burst = chance(r, 30) ? amount : uniform(r, 1, 2 * amount);
        ra_limiter_t l;
        if (ra_limiter_init(&l, alg, amount, period, burst) == 0)
            return l;
    }
}

/* A cost drawn around the limiter's depth: mostly 1, sometimes up to depth + 2. */
static int64_t random_cost(rng_t *r, const ra_limiter_t *l)
{
    int64_t depth = l->emission_ns ? l->tolerance_ns / l->emission_ns : l->amount;
    return chance(r, 70) ? 1 : uniform(r, 0, depth + 2);
}

/* The next arrival time: bursts (same instant), gaps around the emission interval or the
 * window, and now and then a long idle. Never backwards. */
static int64_t next_now(rng_t *r, const ra_limiter_t *l, int64_t now)
{
    int64_t t = l->emission_ns ? l->emission_ns : l->period_ns / (l->amount + 1) + 1;
    int64_t gap = chance(r, 40)   ? 0
                  : chance(r, 85) ? uniform(r, 0, 2 * t)
                                  : uniform(r, 0, 3 * l->period_ns);
    int64_t next;
    return __builtin_add_overflow(now, gap, &next) ? now : next; /* after a wild jump */
}

static int64_t random_start(rng_t *r)
{
    /* up to 6e18: 1500 arrivals at most 3 windows of 100 h apart stay inside int64 */
    return chance(r, 20) ? uniform(r, -S * 1000, S * 1000) : uniform(r, 0, INT64_C(6) * S * S);
}

/*
 * gcra admits at most burst + elapsed/T units in any closed interval [a, b], which is the
 * catalogue's burst + amount x elapsed / period with T = floor(period / amount) (exactly that
 * when amount divides the period): in integers, units x T <= tau + (b - a). It suffices to
 * check intervals from one admission to a later one. For each admission j the worst start is
 * the minimum over earlier admissions i of U(i-1) x T - t(i), U the running unit count.
 */
static void check_gcra_bound(uint64_t seed, const ra_limiter_t *l, rng_t *r)
{
    const int64_t t = l->emission_ns, tau = l->tolerance_ns;
    int64_t state = 0, now = random_start(r);
    __int128 units = 0, best_start = 0;
    bool any = false;
    for (int i = 0; i < STEPS; i++) {
        now = next_now(r, l, now);
        int64_t cost = random_cost(r, l);
        ra_result_t res = ra_step(l, state, now, cost);
        if (!res.admit)
            continue;
        state = res.next_state;
        __int128 start = units * t - now; /* U(i-1) x T - t(i) */
        if (!any || start < best_start)
            best_start = start;
        any = true;
        units += cost;
        /* (U(j) - U(i-1)) x T - (t(j) - t(i)) <= tau */
        cr_assert((units * t - now) - best_start <= tau,
                  SEEDED("gcra %lld/%lld ns burst %lld admitted too much by t = %lld"),
                  (long long)l->amount, (long long)l->period_ns, (long long)l->burst,
                  (long long)now);
    }
}

Test(properties, gcra_never_admits_more_than_burst_plus_the_rate_in_any_interval)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++) {
        ra_limiter_t l = random_limiter(&r, RA_GCRA);
        check_gcra_bound(seed, &l, &r);
    }
}

Test(properties, the_effective_form_keeps_the_same_bound_with_its_own_interval)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++) {
        ra_limiter_t plain = random_limiter(&r, RA_GCRA), eff;
        int64_t den = uniform(&r, 1, 12), num = uniform(&r, 1, den);
        int64_t unit = chance(&r, 50) ? 1 : RA_RESERVE_CAP;
        if (ra_limiter_effective(&plain, num, den, unit, &eff) < 0)
            continue;
        cr_assert_geq(eff.tolerance_ns, eff.emission_ns * unit, SEEDED("the unit always fits"));
        check_gcra_bound(seed, &eff, &r);
    }
}

/* Non-decreasing arrivals through a random window limiter. The admitted cost is tallied per
 * aligned window by the test itself (cur: the window of `now`, prev: the one before it) and
 * checked against the algorithm's promise after every admission. */
static void check_window(uint64_t seed, ra_algorithm_t alg, rng_t *r)
{
    ra_limiter_t l = random_limiter(r, alg);
    const int64_t w = l.period_ns;
    int64_t state = 0, now = random_start(r);
    int64_t win = 0, cur = 0, prev = 0; /* win = floor(now / w), tallied counts */
    bool started = false;
    for (int i = 0; i < STEPS; i++) {
        now = next_now(r, &l, now);
        int64_t idx = now / w - (now % w < 0), elapsed = now - idx * w;
        if (!started || idx != win) {
            prev = started && idx == win + 1 ? cur : 0;
            cur = 0;
            win = idx;
            started = true;
        }
        int64_t cost = random_cost(r, &l);
        ra_result_t res = ra_step(&l, state, now, cost);
        if (!res.admit)
            continue;
        state = res.next_state;
        cur += cost;
        if (alg == RA_FIXED_WINDOW)
            cr_assert_leq(cur, l.amount, SEEDED("fixed_window %lld/%lld ns: %lld in window %lld"),
                          (long long)l.amount, (long long)w, (long long)cur, (long long)win);
        else
            cr_assert((__int128)prev * (w - elapsed) + (__int128)cur * w <= (__int128)l.amount * w,
                      SEEDED("sliding_window %lld/%lld ns: prev %lld curr %lld at elapsed %lld"),
                      (long long)l.amount, (long long)w, (long long)prev, (long long)cur,
                      (long long)elapsed);
    }
}

Test(properties, a_fixed_window_never_admits_more_than_amount_inside_an_aligned_window)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++)
        check_window(seed, RA_FIXED_WINDOW, &r);
}

Test(properties, a_sliding_window_never_exceeds_amount_in_its_weighted_estimate)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++)
        check_window(seed, RA_SLIDING_WINDOW, &r);
}

/* Any int64 at all, weighted towards the edges. */
static int64_t wild(rng_t *r)
{
    switch (next_u64(r) % 6) {
    case 0:
        return INT64_MAX - (int64_t)(next_u64(r) % 3 * S);
    case 1:
        return INT64_MIN + (int64_t)(next_u64(r) % 3 * S);
    case 2:
        return 0;
    default:
        return (int64_t)next_u64(r);
    }
}

/* now - d, or now itself where that would leave int64 */
static int64_t back(int64_t now, int64_t d)
{
    int64_t t;
    return __builtin_sub_overflow(now, d, &t) ? now : t;
}

Test(properties, token_bucket_equals_gcra_step_for_step)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++) {
        ra_limiter_t g = random_limiter(&r, RA_GCRA), tb;
        cr_assert_eq(ra_limiter_init(&tb, RA_TOKEN_BUCKET, g.amount, g.period_ns, g.burst), 0);
        int64_t state = chance(&r, 10) ? wild(&r) : 0, now = random_start(&r);
        for (int i = 0; i < STEPS; i++) {
            /* now and then the clock jumps back, or anywhere */
            now = chance(&r, 2)   ? wild(&r)
                  : chance(&r, 5) ? back(now, uniform(&r, 0, g.period_ns))
                                  : next_now(&r, &g, now);
            int64_t cost = chance(&r, 2) ? wild(&r) : random_cost(&r, &g);
            ra_result_t a = ra_step(&g, state, now, cost), b = ra_step(&tb, state, now, cost);
            cr_assert(a.admit == b.admit && a.unfittable == b.unfittable &&
                          a.remaining == b.remaining && a.retry_after_s == b.retry_after_s &&
                          a.reset_after_s == b.reset_after_s && a.next_state == b.next_state,
                      SEEDED("token_bucket and gcra differ at state %lld now %lld cost %lld"),
                      (long long)state, (long long)now, (long long)cost);
            state = a.next_state;
        }
    }
}

Test(properties, a_denied_step_never_changes_state_and_no_answer_is_negative)
{
    static const ra_algorithm_t algs[] = {RA_GCRA, RA_FIXED_WINDOW, RA_SLIDING_WINDOW,
                                          RA_TOKEN_BUCKET};
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++) {
        ra_limiter_t l = random_limiter(&r, algs[k % 4]);
        for (int i = 0; i < STEPS; i++) {
            int64_t state = wild(&r), now = wild(&r);
            int64_t cost = chance(&r, 50) ? random_cost(&r, &l) : wild(&r);
            ra_result_t res = ra_step(&l, state, now, cost);
            cr_assert(res.admit || res.next_state == state,
                      SEEDED("%s: denied step moved state %lld at now %lld cost %lld"),
                      ra_algorithm_name(l.algorithm), (long long)state, (long long)now,
                      (long long)cost);
            cr_assert(!(res.admit && res.unfittable) &&
                          (!res.unfittable || res.retry_after_s == 0) &&
                          (!res.admit || res.retry_after_s == 0),
                      SEEDED("%s: inconsistent verdict"), ra_algorithm_name(l.algorithm));
            cr_assert(res.remaining >= 0 && res.retry_after_s >= 0 && res.reset_after_s >= 0,
                      SEEDED("%s: negative answer at state %lld now %lld cost %lld"),
                      ra_algorithm_name(l.algorithm), (long long)state, (long long)now,
                      (long long)cost);
        }
    }
}

/* What a snapshot's restore trusts (ra_state_reachable): every state a sequence of steps and
 * settles stores is reachable, and from it a cost that fits the burst is never unfittable. */
Test(properties, every_state_steps_and_settles_store_is_reachable)
{
    uint64_t seed = draw_seed();
    rng_t r = {seed};
    for (int k = 0; k < LIMITERS; k++) {
        ra_limiter_t l = random_limiter(&r, (ra_algorithm_t)(k % 4)); /* the four in turn */
        int64_t state = 0, now = random_start(&r);
        for (int i = 0; i < STEPS; i++) {
            now = next_now(&r, &l, now);
            if (chance(&r, 10)) /* a settle: refunds, overruns, wild ones */
                state = ra_settle(&l, state, now, uniform(&r, 0, 16384),
                                  chance(&r, 50) ? uniform(&r, 0, 1 << 20) : wild(&r));
            else
                state = ra_step(&l, state, now, random_cost(&r, &l)).next_state;
            cr_assert(ra_state_reachable(&l, state),
                      SEEDED("%s: stored %lld, which reads as unreachable"),
                      ra_algorithm_name(l.algorithm), (long long)state);
            if (l.emission_ns && chance(&r, 10)) {
                int64_t fits = uniform(&r, 1, l.tolerance_ns / l.emission_ns);
                cr_assert_not(ra_step(&l, state, now, fits).unfittable,
                              SEEDED("%s: cost %lld reads as unfittable at %lld"),
                              ra_algorithm_name(l.algorithm), (long long)fits, (long long)state);
            }
        }
    }
}
