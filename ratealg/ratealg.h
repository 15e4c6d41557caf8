/*
 * ratealg: the rate algorithms, pure: the catalogue's four and envoy_window, envoyproxy/
 * ratelimit's counter (the gRPC door's rule language, docs/algorithms.md).
 *
 * No clock, no I/O, no allocation, no globals: time is an argument (int64 nanoseconds since
 * the Unix epoch) and the per-key state is one int64 the caller owns. A step never writes the
 * caller's state itself: it returns the state to store on admission, so a caller can probe
 * several limits and commit them together (two-phase decisions) by storing `next_state`.
 *
 * Every operation is defined for every int64 input (state from anywhere, `now` anywhere,
 * costs up to INT64_MAX): decisions are computed exactly (unsigned distances, 128-bit
 * intermediates), nothing wraps, and no input reaches undefined behaviour. docs/algorithms.md
 * describes the few places where int64 itself runs out.
 */
#ifndef TT_RATEALG_H
#define TT_RATEALG_H

#include <stdbool.h>
#include <stdint.h>

#include "tt_err.h"

#define RA_NS_PER_S INT64_C(1000000000)
/* The packed window state holds 16-bit counters, so a window limit caps amount here. */
#define RA_WINDOW_CEILING 65535
/* envoy_window counts in 32 bits: requests_per_unit is a uint32 in Envoy's API. */
#define RA_ENVOY_CEILING INT64_C(4294967295)
/* tpm limits must always fit an ordinary max-token reservation. */
#define RA_RESERVE_CAP 16384

typedef enum ra_algorithm {
    RA_GCRA = 0, /* the default: the zero value */
    RA_FIXED_WINDOW,
    RA_SLIDING_WINDOW,
    RA_TOKEN_BUCKET,
    /* envoyproxy/ratelimit's fixed window: a 32-bit count per epoch-aligned window, amount
     * 0 ..= 2^32 - 1 (0: always over the limit). State [index:32][count:32] from bit 63. */
    RA_ENVOY_WINDOW,
} ra_algorithm_t;

/* Errors from arming a limiter: rows of the one error table (common/tt_err.h). */
enum {
    RA_EAMOUNT = TT_ERR_RA_AMOUNT,           /* amount <= 0 (envoy_window: < 0) */
    RA_EPERIOD = TT_ERR_RA_PERIOD,           /* period <= 0 */
    RA_EBURST = TT_ERR_RA_BURST,             /* burst <= 0 (gcra, token_bucket) */
    RA_EEMISSION = TT_ERR_RA_EMISSION,       /* T = floor(period / amount) is 0 */
    RA_ETAU = TT_ERR_RA_TAU,                 /* tau = T x burst leaves int64 */
    RA_ECEILING = TT_ERR_RA_CEILING,         /* window amount above RA_WINDOW_CEILING (envoy_window:
                                                RA_ENVOY_CEILING) */
    RA_ENOEFFECTIVE = TT_ERR_RA_NOEFFECTIVE, /* only gcra has the effective-rate form */
    RA_ESHARE = TT_ERR_RA_SHARE,             /* share num/den not in (0, 1], or unit <= 0 */
    RA_EALGORITHM = TT_ERR_RA_ALGORITHM,     /* not one of ra_algorithm_t */
};

/*
 * An armed limiter: the parameters and what is derived from them once. Plain data, safe to
 * copy and compare; ra_limiter_init zeroes it first so equal limiters are equal bytes.
 */
typedef struct ra_limiter {
    ra_algorithm_t algorithm;
    uint32_t pad_;        /* always 0: no indeterminate padding, so limiters compare as bytes */
    int64_t amount;       /* r: units per period */
    int64_t period_ns;    /* w */
    int64_t burst;        /* b: gcra and token_bucket; 0 for the windows, which do not read it */
    int64_t emission_ns;  /* T (T_s in the effective form); 0 for the windows */
    int64_t tolerance_ns; /* tau (tau_s in the effective form); 0 for the windows */
} ra_limiter_t;

/* What one step decided. Durations are whole seconds, rounded up. */
typedef struct ra_result {
    bool admit;
    bool unfittable; /* the cost can never fit (gcra, token_bucket): do not retry it */
    int64_t remaining;
    int64_t retry_after_s;
    int64_t reset_after_s;
    int64_t next_state; /* the state to store if admitted; the old state otherwise */
} ra_result_t;

/* Arms a limiter. burst is read by gcra and token_bucket only (pass amount for the default).
 * Returns 0 or a negative RA_E* code; on error *out is zeroed. */
int ra_limiter_init(ra_limiter_t *out, ra_algorithm_t algorithm, int64_t amount, int64_t period_ns,
                    int64_t burst);

/*
 * The effective-rate form of a gcra limiter for a replica holding the share num/den of the
 * fleet amount: T_s = floor(w x den / (r x num)), tau_s = max(tau, T_s x unit). unit is the
 * cost that must always fit (1 for rpm, RA_RESERVE_CAP for tpm). num == den gives the plain
 * limiter back, byte for byte, whenever the plain one already fits the unit (T x unit <= tau,
 * which arming guarantees for rpm and tpm). Everything is derived from the plain parameters
 * (period, amount, burst), so passing an effective limiter again gives the same result, and
 * out may be plain. envoy_window has an effective form too: amount x num / den per window,
 * rounded down but at least one unit of `unit` (0 stays 0), its own plain amount kept in
 * `burst` so the form is derived from the plain one again. Returns 0 or RA_ENOEFFECTIVE, RA_ESHARE,
 * RA_ETAU (T_s or T_s x unit leaves int64), or RA_EAMOUNT/RA_EPERIOD/RA_EBURST for a limiter that
 * was never armed.
 */
int ra_limiter_effective(const ra_limiter_t *plain, int64_t num, int64_t den, int64_t unit,
                         ra_limiter_t *out);

/*
 * One arrival of `cost` units at `now` against `state`; SPEC section 3. A cost below 0 is
 * unfittable (gcra) or denied (windows). gcra also calls a cost unfittable when the new TAT
 * would leave int64: such a step could not be admitted at any later `now` either. A zeroed
 * (unarmed) limiter denies everything.
 */
ra_result_t ra_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost);

/*
 * The remaining headroom a caller may be told, read without committing: a unit probe through
 * the same algorithm with the probe added back, 0 when the probe is denied.
 */
int64_t ra_observe_remaining(const ra_limiter_t *l, int64_t state, int64_t now);
/* The same reading from the unit probe's step, when the caller has already made it. */
int64_t ra_observe_of(ra_result_t unit_step);

/*
 * Settles a reservation against a gcra (or token_bucket) state: moves the TAT by
 * (actual - reserved) x T. A refund never moves the TAT below `now` (a full bucket stays full);
 * an overrun is always charged, but never past INT64_MAX - tau, so a later cost that fits the
 * burst is denied with a retry rather than called unfittable. Returns the new state. An
 * envoy_window count moves by (actual - reserved) in the current window, never below 0 nor past
 * 2^32 - 1 (a charge counted after the fact, as envoy ratelimit's INCRBY counts one over the
 * limit). The catalogue's two windows have no settle: their state is returned unchanged.
 */
int64_t ra_settle(const ra_limiter_t *l, int64_t state, int64_t now, int64_t reserved,
                  int64_t actual);

/*
 * True when `state` is one this limiter's steps and settles can store: a gcra TAT at most
 * INT64_MAX - tau (the ceiling ra_settle keeps, from which every cost that fits still adds
 * without leaving int64), a window whose two counts are at most the amount. A state read from
 * outside (a snapshot) that is not could never have been written by this limiter.
 */
bool ra_state_reachable(const ra_limiter_t *l, int64_t state);

/* True when `state` decides exactly as a fresh key (state 0) would from `now` on, so the
 * counter can be forgotten (for windows: as long as the clock does not go backwards). */
bool ra_state_is_idle(const ra_limiter_t *l, int64_t state, int64_t now);

/* ceil(x / 1 s) for x > 0, else 0; never overflows. */
int64_t ra_ceil_s(int64_t ns);

const char *ra_algorithm_name(ra_algorithm_t a);
/* Returns 0 and sets *out, or RA_EALGORITHM for an unregistered name. */
int ra_algorithm_parse(const char *name, ra_algorithm_t *out);
const char *ra_strerror(int err);

#endif
