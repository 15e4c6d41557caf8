/*
 * The rate headers. Formatting is hand-rolled (no snprintf) because it runs on every decision.
 *
 *   Ratelimit-Policy: "<id>";q=<quota x scale>[;qu="tokens"];w=<seconds>
 *   RateLimit: "<id>";r=<remaining>;t=<seconds until remaining grows>
 *   X-Ratelimit-Limit-Requests / -Remaining-Requests / -Reset-Requests (tightest rpm limit)
 *   X-Ratelimit-Limit-Tokens / -Remaining-Tokens / -Reset-Tokens       (tightest tpm limit)
 *   Retry-After: <seconds>, at least t                                (on deny)
 *
 * Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers-11 and are RFC 9651
 * Structured Fields: their integers are capped at 15 digits (config validation already refuses
 * limits that would need more, so the cap is a guard, not a behaviour). The scale and the
 * meaning of t are explained in docs/engine.md ("Disclosure").
 */
#include "disclose.h"
#include "engine_int.h"

#include <string.h>

typedef struct buf {
    char *p, *end;
} buf_t;

static void put_str(buf_t *b, const char *s)
{
    size_t n = strlen(s);
    if (n > (size_t)(b->end - b->p))
        n = (size_t)(b->end - b->p);
    memcpy(b->p, s, n);
    b->p += n;
}

static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324"
                                     "25262728293031323334353637383940414243444546474849"
                                     "50515253545556575859606162636465666768697071727374"
                                     "75767778798081828384858687888990919293949596979899";

static void put_i64(buf_t *b, int64_t v)
{
    char tmp[24];
    int n = sizeof(tmp);
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    while (u >= 100) { /* two digits per division, written from the end */
        unsigned d = (unsigned)(u % 100) * 2;
        u /= 100;
        tmp[--n] = digit_pairs[d + 1];
        tmp[--n] = digit_pairs[d];
    }
    if (u >= 10) {
        tmp[--n] = digit_pairs[u * 2 + 1];
        tmp[--n] = digit_pairs[u * 2];
    } else {
        tmp[--n] = (char)('0' + u);
    }
    if (v < 0)
        tmp[--n] = '-';
    size_t len = sizeof(tmp) - (size_t)n, room = (size_t)(b->end - b->p);
    if (len > room)
        len = room;
    memcpy(b->p, tmp + n, len);
    b->p += len;
}

static size_t finish(buf_t *b, char *start)
{
    if (b->p == b->end)
        b->p--; /* keep room for the NUL: values are sized never to need this */
    *b->p = '\0';
    return (size_t)(b->p - start);
}

/* An SF Integer: 0 ..= CFG_SF_INT_MAX (negative values read 0, larger ones the cap). */
static void put_sf_int(buf_t *b, int64_t v)
{
    put_i64(b, v < 0 ? 0 : v > CFG_SF_INT_MAX ? CFG_SF_INT_MAX : v);
}

size_t gov_go_duration(char *out, size_t size, int64_t ms)
{
    buf_t b = {out, out + size};
    if (ms <= 0) {
        put_str(&b, "0s");
        return finish(&b, out);
    }
    if (ms < 1000) { /* Go switches to the smaller unit below a second */
        put_i64(&b, ms);
        put_str(&b, "ms");
        return finish(&b, out);
    }
    int64_t s = ms / 1000, frac = ms % 1000;
    if (s >= 3600) {
        put_i64(&b, s / 3600);
        put_str(&b, "h");
    }
    if (s >= 60) {
        put_i64(&b, s % 3600 / 60);
        put_str(&b, "m");
    }
    put_i64(&b, s % 60);
    if (frac) { /* three digits, trailing zeros dropped: .5, .25, .125 */
        char d[4] = {(char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                     (char)('0' + frac % 10), '\0'};
        for (int i = 2; i > 0 && d[i] == '0'; i--)
            d[i] = '\0';
        put_str(&b, ".");
        put_str(&b, d);
    }
    put_str(&b, "s");
    return finish(&b, out);
}

/* ceil(v / unit), 0 for v <= 0; no overflow anywhere in int64. */
static int64_t ceil_div(int64_t v, int64_t unit)
{
    return v <= 0 ? 0 : v / unit + (v % unit != 0);
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
    return (__int128)a->remaining * b->depth < (__int128)b->remaining * a->depth;
}

static buf_t header(gov_result_t *out, const char *name)
{
    gov_header_t *h = &out->headers[out->n_headers++];
    h->name = name;
    return (buf_t){h->value, h->value + sizeof(h->value)};
}

static void header_i64(gov_result_t *out, const char *name, int64_t v)
{
    buf_t b = header(out, name);
    put_i64(&b, v);
    finish(&b, out->headers[out->n_headers - 1].value);
}

static void header_duration(gov_result_t *out, const char *name, int64_t ms)
{
    gov_header_t *h = &out->headers[out->n_headers++];
    h->name = name;
    gov_go_duration(h->value, sizeof(h->value), ms);
}

static void trio(gov_result_t *out, const gov_obs_t *o, const char *limit, const char *remaining,
                 const char *reset)
{
    header_i64(out, limit, o->quota);
    header_i64(out, remaining, o->remaining);
    header_duration(out, reset, o->reset_ms);
}

void gov_disclose(gov_result_t *out, const gov_obs_t *tight, const gov_obs_t *rpm,
                  const gov_obs_t *tpm, int64_t retry_after_s)
{
    if (tight && tight->limit) {
        const cfg_limit_t *l = tight->limit;
        int64_t w, scale, q;
        cfg_policy_window(l->period_ns, &w, &scale);
        buf_t b = header(out, "Ratelimit-Policy");
        char *start = b.p;
        put_str(&b, "\"");
        put_str(&b, l->id);
        put_str(&b, "\";q=");
        put_sf_int(&b, __builtin_mul_overflow(tight->quota, scale, &q) ? INT64_MAX : q);
        if (l->type == CFG_TYPE_TPM) /* the draft's default unit is requests */
            put_str(&b, ";qu=\"tokens\"");
        put_str(&b, ";w=");
        put_sf_int(&b, w);
        finish(&b, start);
        b = header(out, "RateLimit");
        start = b.p;
        put_str(&b, "\"");
        put_str(&b, l->id);
        put_str(&b, "\";r=");
        put_sf_int(&b, tight->remaining);
        put_str(&b, ";t=");
        put_sf_int(&b, tight->window_s);
        finish(&b, start);
        int64_t t = tight->window_s > CFG_SF_INT_MAX ? CFG_SF_INT_MAX : tight->window_s;
        if (retry_after_s >= 0 && retry_after_s < t) /* never before the end of the window */
            retry_after_s = t;
    }
    if (rpm && rpm->limit)
        trio(out, rpm, "X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests",
             "X-Ratelimit-Reset-Requests");
    if (tpm && tpm->limit)
        trio(out, tpm, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens",
             "X-Ratelimit-Reset-Tokens");
    if (retry_after_s >= 0)
        header_i64(out, "Retry-After", retry_after_s);
}
