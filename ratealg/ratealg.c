/*
 * The four algorithms of the catalogue (shared/seed/rate-algorithms.txt), in exact integers,
 * and envoy_window, envoyproxy/ratelimit's counter.
 *
 * gcra keeps one theoretical arrival time (TAT). token_bucket is gcra under another name: the
 * bucket level at any instant is (tau - (TAT - now)) / T, so it forwards every step. The two
 * window algorithms share one packed state, [index:32][prev:16][curr:16] from bit 63 down, and
 * one body: fixed_window is sliding_window with the previous window's weight forced to zero.
 * envoy_window is the window envoy ratelimit keeps in Redis (a key per epoch-aligned window,
 * INCRBY): [index:32][count:32], so requests_per_unit reaches 2^32 - 1 where the catalogue's
 * packed counters stop at 65535, and 0 is a limit (always over), as Envoy's API allows.
 *
 * Inputs come from anywhere (a Redis reply, a clock that jumped), so no sum or product here
 * may wrap: the decisions use exact unsigned distances or 128-bit intermediates, and the
 * settle path, which has no decision to make, saturates.
 */
#include "ratealg.h"

#include <string.h>

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t ra_ceil_s(int64_t ns)
{
    if (ns <= 0)
        return 0;
    return ns / RA_NS_PER_S + (ns % RA_NS_PER_S != 0);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t floor_mod(int64_t a, int64_t b)
{
    int64_t m = a % b;
    return m < 0 ? m + b : m;
}

int ra_limiter_init(ra_limiter_t *out, ra_algorithm_t algorithm, int64_t amount, int64_t period_ns,
                    int64_t burst)
{
    memset(out, 0, sizeof(*out));
    if (amount < 0 || (amount == 0 && algorithm != RA_ENVOY_WINDOW))
        return RA_EAMOUNT;
    if (period_ns <= 0)
        return RA_EPERIOD;
    int64_t t = 0, tau = 0;
    switch (algorithm) {
    case RA_GCRA:
    case RA_TOKEN_BUCKET:
        if (burst <= 0)
            return RA_EBURST;
        t = period_ns / amount;
        if (t == 0)
            return RA_EEMISSION;
        if (__builtin_mul_overflow(t, burst, &tau))
            return RA_ETAU;
        break;
    case RA_FIXED_WINDOW:
    case RA_SLIDING_WINDOW:
        if (amount > RA_WINDOW_CEILING)
            return RA_ECEILING;
        burst = 0;
        break;
    case RA_ENVOY_WINDOW:
        if (amount > RA_ENVOY_CEILING)
            return RA_ECEILING;
        burst = amount; /* the plain amount, which the effective form is derived from */
        break;
    default:
        return RA_EALGORITHM;
    }
    out->algorithm = algorithm;
    out->amount = amount;
    out->period_ns = period_ns;
    out->burst = burst;
    out->emission_ns = t;
    out->tolerance_ns = tau;
    return 0;
}

/* envoy_window's share of a fleet amount: floor(amount x num / den) per window, at least
 * `unit` (but never more than the amount itself), the plain amount kept in burst. */
static int envoy_effective(int64_t w, int64_t amount, int64_t num, int64_t den, int64_t unit,
                           ra_limiter_t *out)
{
    if (w <= 0 || amount < 0 || amount > RA_ENVOY_CEILING)
        return w <= 0 ? RA_EPERIOD : RA_EAMOUNT;
    if (num <= 0 || den <= 0 || num > den || unit <= 0)
        return RA_ESHARE;
    int64_t share = (int64_t)((unsigned __int128)amount * (uint64_t)num / (uint64_t)den);
    int64_t floor_amount = unit < amount ? unit : amount;
    out->algorithm = RA_ENVOY_WINDOW;
    out->amount = share > floor_amount ? share : floor_amount;
    out->period_ns = w;
    out->burst = amount;
    return 0;
}

int ra_limiter_effective(const ra_limiter_t *plain, int64_t num, int64_t den, int64_t unit,
                         ra_limiter_t *out)
{
    /* read everything first: out may be plain itself */
    const ra_algorithm_t alg = plain->algorithm;
    const int64_t w = plain->period_ns, r = plain->amount, b = plain->burst;
    memset(out, 0, sizeof(*out));
    if (alg == RA_ENVOY_WINDOW)
        return envoy_effective(w, b, num, den, unit, out);
    if (alg != RA_GCRA)
        return RA_ENOEFFECTIVE;
    if (r <= 0 || w <= 0 || b <= 0) /* not armed */
        return r <= 0 ? RA_EAMOUNT : w <= 0 ? RA_EPERIOD : RA_EBURST;
    if (num <= 0 || den <= 0 || num > den || unit <= 0)
        return RA_ESHARE;
    /* tau from the plain parameters, so an effective limiter passed in again is re-derived
     * rather than floored twice */
    int64_t tau, floor_tau;
    if (__builtin_mul_overflow(w / r, b, &tau))
        return RA_ETAU;
    unsigned __int128 t =
        (unsigned __int128)w * (uint64_t)den / ((unsigned __int128)r * (uint64_t)num);
    if (t > INT64_MAX || __builtin_mul_overflow((int64_t)t, unit, &floor_tau))
        return RA_ETAU;
    out->algorithm = alg;
    out->amount = r;
    out->period_ns = w;
    out->burst = b;
    out->emission_ns = (int64_t)t;
    out->tolerance_ns = floor_tau > tau ? floor_tau : tau;
    return 0;
}

/* ---- gcra --------------------------------------------------------------------------------- */

/* ceil(x / 1 s) of a distance that may need all 64 unsigned bits (a TAT far from `now`). */
static int64_t ceil_s_u64(uint64_t ns)
{
    return (int64_t)(ns / RA_NS_PER_S + (ns % RA_NS_PER_S != 0));
}

/*
 * Distances from `now` are computed as unsigned 64-bit differences of two int64s that are
 * ordered (tat >= now, new_tat >= now), which is exact for every pair: no saturation reaches
 * a decision. The one value int64 cannot hold is a new TAT past INT64_MAX; since the TAT never
 * decreases while steps are denied, such a cost can never be admitted at any int64 `now`
 * either, so it is unfittable, exactly like n x T > tau.
 */
static ra_result_t gcra_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost)
{
    const int64_t t = l->emission_ns, tau = l->tolerance_ns;
    ra_result_t r = {.next_state = state};
    int64_t tat = state > now ? state : now;
    uint64_t behind = (uint64_t)tat - (uint64_t)now; /* tat - now, exact */
    int64_t charge, new_tat;
    if (cost < 0 || __builtin_mul_overflow(cost, t, &charge) || charge > tau ||
        __builtin_add_overflow(tat, charge, &new_tat)) {
        r.unfittable = true;
    } else {
        uint64_t ahead = (uint64_t)new_tat - (uint64_t)now; /* new_tat - now */
        if (ahead <= (uint64_t)tau) {                       /* now >= allow_at */
            r.admit = true;
            r.next_state = new_tat;
            r.remaining = (tau - (int64_t)ahead) / t;
            r.reset_after_s = ceil_s_u64(ahead);
            return r;
        }
        r.retry_after_s = ceil_s_u64(ahead - (uint64_t)tau); /* allow_at - now */
    }
    /* denied or unfittable: what is left of the allowance now, and when the TAT is reached */
    r.remaining = behind < (uint64_t)tau ? (tau - (int64_t)behind) / t : 0;
    r.reset_after_s = ceil_s_u64(behind);
    return r;
}

/* ---- fixed_window and sliding_window ------------------------------------------------------ */

typedef struct window {
    uint32_t index;
    int64_t prev, curr;
    int64_t elapsed;
} window_t;

static int64_t window_pack(uint32_t index, int64_t prev, int64_t curr)
{
    return (int64_t)(((uint64_t)index << 32) | ((uint64_t)prev << 16) | (uint64_t)curr);
}

static window_t window_load(const ra_limiter_t *l, int64_t state, int64_t now)
{
    window_t w = {.index = (uint32_t)(uint64_t)floor_div(now, l->period_ns),
                  .elapsed = floor_mod(now, l->period_ns)};
    uint32_t stored = (uint32_t)((uint64_t)state >> 32);
    int64_t prev = ((uint64_t)state >> 16) & 0xffff, curr = (uint64_t)state & 0xffff;
    if (stored == w.index) {
        w.prev = prev;
        w.curr = curr;
    } else if ((uint32_t)(stored + 1) == w.index) {
        w.prev = curr;
    }
    return w;
}

/*
 * The headroom before the current count: floor((amount*w - prev*(w - elapsed)) / w) for the
 * sliding window, amount for the fixed one. Since amount - prev is an integer, that floor is
 * amount - prev + floor(prev * elapsed / w), and prev * elapsed < 2^16 * w fits an unsigned
 * 64-bit product for every window shorter than 2^48 ns (about 78 hours); longer windows take
 * the 128-bit product. Either way the result is exact.
 */
static int64_t window_room(const ra_limiter_t *l, const window_t *w)
{
    if (l->algorithm == RA_FIXED_WINDOW)
        return l->amount;
    uint64_t carried; /* floor(prev * elapsed / w) <= prev */
    if (l->period_ns < (INT64_C(1) << 48))
        carried = (uint64_t)w->prev * (uint64_t)w->elapsed / (uint64_t)l->period_ns;
    else
        carried =
            (uint64_t)((unsigned __int128)w->prev * (uint64_t)w->elapsed / (uint64_t)l->period_ns);
    return l->amount - w->prev + (int64_t)carried;
}

static ra_result_t window_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost)
{
    window_t w = window_load(l, state, now);
    int64_t room = window_room(l, &w);
    ra_result_t r = {.next_state = state};
    r.reset_after_s = ra_ceil_s(l->period_ns - w.elapsed);
    /* fixed: curr + n <= amount. sliding: prev*(w-e) + (curr+n)*w <= amount*w, which for
     * integer curr + n is curr + n <= floor((amount*w - prev*(w-e)) / w) = room. */
    if (cost >= 0 && cost <= room - w.curr) {
        r.admit = true;
        w.curr += cost;
        r.next_state = window_pack(w.index, w.prev, w.curr);
        r.remaining = room - w.curr;
        return r;
    }
    r.remaining = room - w.curr > 0 ? room - w.curr : 0;
    r.retry_after_s = r.reset_after_s;
    return r;
}

/* ---- envoy_window -------------------------------------------------------------------------- */

/* The count of the current window: the stored one when the state is of this window, else 0
 * (any other window, a clock gone backwards included: Redis' key of an old window has expired
 * or is another key). */
static int64_t envoy_count(const ra_limiter_t *l, int64_t state, int64_t now, uint32_t *index)
{
    *index = (uint32_t)(uint64_t)floor_div(now, l->period_ns);
    return (uint32_t)((uint64_t)state >> 32) == *index ? (int64_t)(uint32_t)(uint64_t)state : 0;
}

static int64_t envoy_pack(uint32_t index, int64_t count)
{
    return (int64_t)(((uint64_t)index << 32) | (uint64_t)count);
}

/* Admit iff count + n <= amount; remaining = amount - count after the step (at least 0);
 * reset = retry (on a denial) = ceil_s(w - elapsed): envoy ratelimit's duration_until_reset. */
static ra_result_t envoy_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost)
{
    uint32_t index;
    int64_t count = envoy_count(l, state, now, &index);
    ra_result_t r = {.next_state = state};
    r.reset_after_s = ra_ceil_s(l->period_ns - floor_mod(now, l->period_ns));
    if (cost >= 0 && cost <= l->amount - count) {
        r.admit = true;
        r.next_state = envoy_pack(index, count + cost);
        r.remaining = l->amount - count - cost;
        return r;
    }
    r.remaining = l->amount - count > 0 ? l->amount - count : 0;
    r.retry_after_s = r.reset_after_s;
    return r;
}

static int64_t envoy_settle(const ra_limiter_t *l, int64_t state, int64_t now, int64_t delta)
{
    uint32_t index;
    int64_t count = sat_add(envoy_count(l, state, now, &index), delta);
    count = count < 0 ? 0 : count > RA_ENVOY_CEILING ? RA_ENVOY_CEILING : count;
    return envoy_pack(index, count);
}

/* ---- dispatch ----------------------------------------------------------------------------- */

ra_result_t ra_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost)
{
    if (l->period_ns <= 0) /* an unarmed (zeroed) limiter: deny, never divide by zero */
        return (ra_result_t){.next_state = state};
    switch (l->algorithm) {
    case RA_GCRA:
    case RA_TOKEN_BUCKET:
        return gcra_step(l, state, now, cost);
    case RA_ENVOY_WINDOW:
        return envoy_step(l, state, now, cost);
    default:
        return window_step(l, state, now, cost);
    }
}

int64_t ra_observe_of(ra_result_t unit_step)
{
    return unit_step.admit ? sat_add(unit_step.remaining, 1) : 0;
}

int64_t ra_observe_remaining(const ra_limiter_t *l, int64_t state, int64_t now)
{
    return ra_observe_of(ra_step(l, state, now, 1));
}

int64_t ra_settle(const ra_limiter_t *l, int64_t state, int64_t now, int64_t reserved,
                  int64_t actual)
{
    if (l->algorithm == RA_ENVOY_WINDOW && l->period_ns > 0)
        return envoy_settle(l, state, now, sat_sub(actual, reserved));
    if (l->algorithm != RA_GCRA && l->algorithm != RA_TOKEN_BUCKET)
        return state;
    int64_t delta = sat_sub(actual, reserved), shift;
    if (__builtin_mul_overflow(delta, l->emission_ns, &shift))
        shift = delta > 0 ? INT64_MAX : INT64_MIN;
    if (shift >= 0) {
        /* An overrun is charged from wherever the TAT stands, up to INT64_MAX - tau: from there
         * every cost that fits the burst still adds to the TAT without leaving int64, so a later
         * step is a denial whose retry says how long, never "unfittable" (never retry). */
        int64_t base = state > now ? state : now, ceiling = INT64_MAX - l->tolerance_ns;
        int64_t room; /* ceiling - base; past INT64_MAX only when base is far below 0 */
        if (base >= ceiling)
            return base;
        if (__builtin_sub_overflow(ceiling, base, &room) || shift < room)
            return base + shift;
        return ceiling;
    }
    if (state <= now) /* a full bucket stays full */
        return state;
    int64_t refunded = sat_add(state, shift);
    return refunded > now ? refunded : now;
}

bool ra_state_reachable(const ra_limiter_t *l, int64_t state)
{
    if (l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET)
        return state <= INT64_MAX - l->tolerance_ns;
    int64_t prev = ((uint64_t)state >> 16) & 0xffff, curr = (uint64_t)state & 0xffff;
    return prev <= l->amount && curr <= l->amount;
}

bool ra_state_is_idle(const ra_limiter_t *l, int64_t state, int64_t now)
{
    if (l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET)
        return state == 0 || (state <= now && now >= 0); /* max(state, t) == max(0, t) */
    if (l->algorithm == RA_ENVOY_WINDOW) {
        uint32_t index;
        return l->period_ns <= 0 || envoy_count(l, state, now, &index) == 0;
    }
    window_t w = window_load(l, state, now);
    return w.prev == 0 && w.curr == 0;
}

/* ---- names -------------------------------------------------------------------------------- */

static const char *const algorithm_names[] = {
    [RA_GCRA] = "gcra",
    [RA_FIXED_WINDOW] = "fixed_window",
    [RA_SLIDING_WINDOW] = "sliding_window",
    [RA_TOKEN_BUCKET] = "token_bucket",
    [RA_ENVOY_WINDOW] = "envoy_window",
};

const char *ra_algorithm_name(ra_algorithm_t a)
{
    if ((unsigned)a >= sizeof(algorithm_names) / sizeof(algorithm_names[0]))
        return "unknown";
    return algorithm_names[a];
}

int ra_algorithm_parse(const char *name, ra_algorithm_t *out)
{
    for (unsigned i = 0; i < sizeof(algorithm_names) / sizeof(algorithm_names[0]); i++) {
        if (strcmp(name, algorithm_names[i]) == 0) {
            *out = (ra_algorithm_t)i;
            return 0;
        }
    }
    return RA_EALGORITHM;
}

const char *ra_strerror(int err)
{
    return err == 0 ? "ok" : tt_err_message(err);
}
