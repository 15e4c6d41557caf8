/*
 * Disclosure: what a decision tells its caller about the limits it read (SPEC §5), as the
 * numbers the rate headers are rendered from (wire/ratehdr.h). Internal to the engine; no
 * allocation. docs/engine.md ("Disclosure") says what each number means and why.
 */
#ifndef TT_ENGINE_DISCLOSE_H
#define TT_ENGINE_DISCLOSE_H

#include "engine.h"

/* One limit's observation: what a non-committing unit probe reads after the decision. */
typedef struct gov_obs {
    const cfg_limit_t *limit; /* NULL: nothing observed; id, type and period are read here */
    int64_t quota;            /* units per period of the limiter in force: the amount, or for
                                 a share limit this replica's share of it (docs/share.md) */
    int64_t remaining;        /* ra_observe_remaining on the state after the decision */
    int64_t window_s;         /* RateLimit t: whole seconds (rounded up) until `remaining`
                                 next grows; with remaining 0, until one unit fits again */
    int64_t reset_ms;         /* milliseconds (rounded up) until the key is as a fresh one */
    int64_t depth;            /* burst (tau / T of the limiter in force) or window amount */
} gov_obs_t;

/*
 * Fills quota, window_s, reset_ms and depth of `o` for a limit whose limiter in force is `lim`
 * (the share store's effective one, or cfg->limiter) and whose state after the decision is
 * `state`, at `now`. limit and remaining are the caller's.
 */
void gov_obs_fill(gov_obs_t *o, const ra_limiter_t *lim, int64_t state, int64_t now);

/* True when a is tighter than b: lower remaining / depth (exact, 128-bit cross products). */
bool gov_obs_tighter(const gov_obs_t *a, const gov_obs_t *b);

/*
 * Fills out->disclosed: the policy (Ratelimit-Policy and RateLimit) from `tight`, the requests
 * trio from `rpm`, the tokens trio from `tpm` (each absent when its limit is NULL), and the
 * retry (Retry-After when >= 0; the renderer raises it to tight's t).
 */
void gov_disclose(gov_result_t *out, const gov_obs_t *tight, const gov_obs_t *rpm,
                  const gov_obs_t *tpm, int64_t retry_after_s);

#endif
