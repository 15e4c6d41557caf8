/*
 * Disclosure: what a decision tells its caller about the limits it read (SPEC §5), as numbers.
 * The numbers go into the result's `disclosed` (wire/ratehdr.h); the header strings are
 * rendered from them only where someone asks for strings (gov_result_render): a protocol 1 or
 * `"headers": true` answer, the HTTP and gRPC front doors. A protocol 2 client renders them
 * itself from the same table (tests/vectors/headers.txt). docs/engine.md ("Disclosure").
 */
#include "disclose.h"
#include "engine_int.h"

#include <string.h>

/* ceil(v / unit), 0 for v <= 0; no overflow anywhere in int64. */
static int64_t ceil_div(int64_t v, int64_t unit)
{
    return v <= 0 ? 0 : v / unit + (v % unit != 0);
}

int64_t gov__depth_of(const ra_limiter_t *lim)
{
    if (lim->algorithm == RA_GCRA || lim->algorithm == RA_TOKEN_BUCKET)
        return lim->tolerance_ns / lim->emission_ns;
    return lim->amount;
}

void gov_obs_fill(gov_obs_t *o, const ra_limiter_t *lim, int64_t state, int64_t now)
{
    const cfg_limit_t *l = o->limit;
    o->depth = gov__depth_of(lim);
    if (lim->algorithm == RA_GCRA || lim->algorithm == RA_TOKEN_BUCKET) {
        const int64_t T = lim->emission_ns, tau = lim->tolerance_ns;
        int64_t ahead, next;
        if (__builtin_sub_overflow(state, now, &ahead)) /* a TAT far from now either way */
            ahead = state > now ? INT64_MAX : 0;
        if (ahead < 0)
            ahead = 0;
        /* The credit x = tau - ahead holds floor(x / T) units (the remaining); the next unit
         * accrues when x reaches (remaining + 1) x T, T - x mod T from now. Within that time the
         * caller can spend no more than the remaining: the draft's effective window. With no
         * credit it is when a unit fits again, which is what a denied request's retry says. */
        int64_t x = tau - ahead;
        if (x >= 0)
            next = T - x % T;
        else if (__builtin_sub_overflow(T, x, &next))
            next = INT64_MAX;
        o->window_s = ceil_div(next, RA_NS_PER_S);
        o->reset_ms = ceil_div(ahead, RA_NS_PER_S / 1000);
        /* A share limit steps with T_s: it admits period / T_s units a period here */
        o->quota = T == l->limiter.emission_ns ? l->amount : lim->period_ns / T;
    } else {
        int64_t into = now % lim->period_ns;
        if (into < 0)
            into += lim->period_ns;
        o->window_s = ceil_div(lim->period_ns - into, RA_NS_PER_S);
        o->reset_ms = ceil_div(lim->period_ns - into, RA_NS_PER_S / 1000);
        o->quota = l->amount;
    }
}

bool gov_obs_tighter(const gov_obs_t *a, const gov_obs_t *b)
{
    if (!b->limit)
        return a->limit != NULL;
    if (!a->limit)
        return false;
    return gov__tighter(a->remaining, a->depth, b->remaining, b->depth);
}

static void trio(proto_trio_t *t, const gov_obs_t *o)
{
    *t = (proto_trio_t){.quota = o->quota, .remaining = o->remaining, .reset_ms = o->reset_ms};
}

void gov_disclose(gov_result_t *out, const gov_obs_t *tight, const gov_obs_t *rpm,
                  const gov_obs_t *tpm, int64_t retry_after_s)
{
    proto_disclosed_t *d = &out->disclosed;
    d->retry_s = retry_after_s;
    if ((d->has_policy = tight && tight->limit)) {
        const cfg_limit_t *l = tight->limit;
        memcpy(d->policy_id, l->id, sizeof(d->policy_id));
        d->policy_tpm = l->type == CFG_TYPE_TPM;
        d->period_ms = l->period_ns / (RA_NS_PER_S / 1000);
        d->quota = tight->quota;
        d->remaining = tight->remaining;
        d->t_s = tight->window_s;
    }
    if ((d->has_requests = rpm && rpm->limit))
        trio(&d->requests, rpm);
    if ((d->has_tokens = tpm && tpm->limit))
        trio(&d->tokens, tpm);
}

void gov_result_render(gov_result_t *r)
{
    r->n_headers = r->status < 0 ? 0 : proto_render_headers(&r->disclosed, r->headers);
}
