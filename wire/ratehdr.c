/*
 * The rate headers from a decision's numbers. See ratehdr.h.
 *
 *   Ratelimit-Policy: "<id>";q=<quota x scale>[;qu="tokens"];w=<seconds>
 *   RateLimit: "<id>";r=<remaining>;t=<seconds until remaining grows>
 *   X-Ratelimit-Limit-Requests / -Remaining-Requests / -Reset-Requests (tightest rpm limit)
 *   X-Ratelimit-Limit-Tokens / -Remaining-Tokens / -Reset-Tokens       (tightest tpm limit)
 *   Retry-After: <seconds>, at least t                                (on deny)
 *
 * Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers-11 and are RFC 9651
 * Structured Fields: their integers are capped at 15 digits (config validation already refuses
 * limits that would need more, so the cap is a guard, not a behaviour). The draft's w is whole
 * seconds, so a period that is not is advertised over the shortest whole-second window holding
 * a whole number of periods (1500 ms: w=3 and q doubled; 250 ms: w=1, q x 4).
 */
#include "ratehdr.h"
#include "tt_fmt.h"

#include <string.h>

typedef struct buf {
    char *p, *end;
} buf_t;

static void put_mem(buf_t *b, const char *s, size_t n)
{
    if (n > (size_t)(b->end - b->p))
        n = (size_t)(b->end - b->p);
    memcpy(b->p, s, n);
    b->p += n;
}

#define PUT_LIT(b, lit) put_mem(b, lit, sizeof(lit) - 1)

static void put_i64(buf_t *b, int64_t v)
{
    char tmp[TT_FMT_I64_MAX];
    put_mem(b, tmp, tt_fmt_i64(tmp, v));
}

static size_t finish(buf_t *b, char *start)
{
    if (b->p == b->end)
        b->p--; /* keep room for the NUL: values are sized never to need this */
    *b->p = '\0';
    return (size_t)(b->p - start);
}

/* An SF Integer: 0 ..= PROTO_SF_INT_MAX (negative values read 0, larger ones the cap). */
static void put_sf_int(buf_t *b, int64_t v)
{
    put_i64(b, v < 0 ? 0 : v > PROTO_SF_INT_MAX ? PROTO_SF_INT_MAX : v);
}

size_t proto_go_duration(char *out, size_t size, int64_t ms)
{
    buf_t b = {out, out + size};
    if (ms <= 0) {
        PUT_LIT(&b, "0s");
        return finish(&b, out);
    }
    if (ms < 1000) { /* Go switches to the smaller unit below a second */
        put_i64(&b, ms);
        PUT_LIT(&b, "ms");
        return finish(&b, out);
    }
    int64_t s = ms / 1000, frac = ms % 1000;
    if (s >= 3600) {
        put_i64(&b, s / 3600);
        PUT_LIT(&b, "h");
    }
    if (s >= 60) {
        put_i64(&b, s % 3600 / 60);
        PUT_LIT(&b, "m");
    }
    put_i64(&b, s % 60);
    if (frac) { /* three digits, trailing zeros dropped: .5, .25, .125 */
        char d[4] = {'.', (char)('0' + frac / 100), (char)('0' + frac / 10 % 10),
                     (char)('0' + frac % 10)};
        size_t n = 4;
        while (d[n - 1] == '0')
            n--;
        put_mem(&b, d, n);
    }
    PUT_LIT(&b, "s");
    return finish(&b, out);
}

/* The window of a period: w_s whole seconds holding `scale` periods (ms are whole, so the
 * scale is at most 1000). */
static void policy_window(int64_t period_ms, int64_t *w_s, int64_t *scale)
{
    int64_t a = period_ms, b = 1000;
    if (a <= 0) {
        *w_s = 0, *scale = 1;
        return;
    }
    while (b) { /* gcd(period, 1 s) */
        int64_t t = a % b;
        a = b;
        b = t;
    }
    *w_s = period_ms / a;
    *scale = 1000 / a;
}

static buf_t header(proto_rate_header_t *h, const char *name)
{
    h->name = name;
    return (buf_t){h->value, h->value + sizeof(h->value)};
}

static void header_i64(proto_rate_header_t *h, const char *name, int64_t v)
{
    buf_t b = header(h, name);
    put_i64(&b, v);
    finish(&b, h->value);
}

static uint32_t trio(proto_rate_header_t *h, const proto_trio_t *t, const char *limit,
                     const char *remaining, const char *reset)
{
    header_i64(&h[0], limit, t->quota);
    header_i64(&h[1], remaining, t->remaining);
    h[2].name = reset;
    proto_go_duration(h[2].value, sizeof(h[2].value), t->reset_ms);
    return 3;
}

uint32_t proto_render_headers(const proto_disclosed_t *d, proto_rate_header_t *out)
{
    uint32_t n = 0;
    int64_t retry = d->retry_s;
    if (d->has_policy) {
        int64_t w, scale, q;
        size_t id_len = strnlen(d->policy_id, sizeof(d->policy_id));
        policy_window(d->period_ms, &w, &scale);
        buf_t b = header(&out[n], "Ratelimit-Policy");
        PUT_LIT(&b, "\"");
        put_mem(&b, d->policy_id, id_len);
        PUT_LIT(&b, "\";q=");
        put_sf_int(&b, __builtin_mul_overflow(d->quota, scale, &q) ? INT64_MAX : q);
        if (d->policy_tpm) /* the draft's default unit is requests */
            PUT_LIT(&b, ";qu=\"tokens\"");
        PUT_LIT(&b, ";w=");
        put_sf_int(&b, w);
        finish(&b, out[n++].value);
        b = header(&out[n], "RateLimit");
        PUT_LIT(&b, "\"");
        put_mem(&b, d->policy_id, id_len);
        PUT_LIT(&b, "\";r=");
        put_sf_int(&b, d->remaining);
        PUT_LIT(&b, ";t=");
        put_sf_int(&b, d->t_s);
        finish(&b, out[n++].value);
        int64_t t = d->t_s > PROTO_SF_INT_MAX ? PROTO_SF_INT_MAX : d->t_s;
        if (retry >= 0 && retry < t) /* never before the end of the window */
            retry = t;
    }
    if (d->has_requests)
        n += trio(&out[n], &d->requests, "X-Ratelimit-Limit-Requests",
                  "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests");
    if (d->has_tokens)
        n += trio(&out[n], &d->tokens, "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens",
                  "X-Ratelimit-Reset-Tokens");
    if (retry >= 0)
        header_i64(&out[n++], "Retry-After", retry);
    return n;
}
