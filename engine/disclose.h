/*
 * Disclosure: the rate headers a caller hands back to its own client (SPEC §5). Internal to
 * the engine; pure formatting, no allocation.
 */
#ifndef TT_ENGINE_DISCLOSE_H
#define TT_ENGINE_DISCLOSE_H

#include "engine.h"

/* One limit's observation: what a non-committing unit probe reads after the decision. */
typedef struct gov_obs {
    const cfg_limit_t *limit; /* NULL: nothing observed */
    int64_t remaining;        /* ra_observe_remaining on the state after the decision */
    int64_t reset_s;          /* whole seconds until the key is as a fresh one */
    int64_t depth;            /* burst (tau / T of the limiter in force) or window amount */
} gov_obs_t;

/* True when a is tighter than b: lower remaining / depth (exact, 128-bit cross products). */
bool gov_obs_tighter(const gov_obs_t *a, const gov_obs_t *b);

/*
 * Writes the headers into out->headers: Ratelimit-Policy and RateLimit for `tight`, the
 * X-Ratelimit-*-Requests trio for `rpm`, the -Tokens trio for `tpm` (each skipped when its
 * limit is NULL), then Retry-After when `retry_after_s` >= 0.
 */
void gov_disclose(gov_result_t *out, const gov_obs_t *tight, const gov_obs_t *rpm,
                  const gov_obs_t *tpm, int64_t retry_after_s);

/* A Go-style duration of whole seconds: 0s, 59s, 1m0s, 6m0s, 1h0m0s. Returns the length. */
size_t gov_go_duration(char *buf, size_t size, int64_t seconds);

#endif
