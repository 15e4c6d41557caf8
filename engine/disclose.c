/*
 * The rate headers. Formatting is hand-rolled (no snprintf) because it runs on every decision.
 *
 *   Ratelimit-Policy: "<id>";q=<amount>;w=<period seconds>   (w left out below 1 s; the
 *                     period is floored to whole seconds)
 *   RateLimit: "<id>";r=<remaining>;t=<reset seconds>
 *   X-Ratelimit-Limit-Requests / -Remaining-Requests / -Reset-Requests (tightest rpm limit)
 *   X-Ratelimit-Limit-Tokens / -Remaining-Tokens / -Reset-Tokens       (tightest tpm limit)
 *   Retry-After: <seconds>                                           (on deny)
 */
#include "disclose.h"

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

size_t gov_go_duration(char *out, size_t size, int64_t s)
{
    buf_t b = {out, out + size};
    if (s < 0)
        s = 0;
    if (s >= 3600) {
        put_i64(&b, s / 3600);
        put_str(&b, "h");
    }
    if (s >= 60) {
        put_i64(&b, s % 3600 / 60);
        put_str(&b, "m");
    }
    put_i64(&b, s % 60);
    put_str(&b, "s");
    return finish(&b, out);
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

static void header_duration(gov_result_t *out, const char *name, int64_t s)
{
    gov_header_t *h = &out->headers[out->n_headers++];
    h->name = name;
    gov_go_duration(h->value, sizeof(h->value), s);
}

static void trio(gov_result_t *out, const gov_obs_t *o, const char *limit, const char *remaining,
                 const char *reset)
{
    header_i64(out, limit, o->limit->amount);
    header_i64(out, remaining, o->remaining);
    header_duration(out, reset, o->reset_s);
}

void gov_disclose(gov_result_t *out, const gov_obs_t *tight, const gov_obs_t *rpm,
                  const gov_obs_t *tpm, int64_t retry_after_s)
{
    if (tight && tight->limit) {
        const cfg_limit_t *l = tight->limit;
        buf_t b = header(out, "Ratelimit-Policy");
        char *start = b.p;
        put_str(&b, "\"");
        put_str(&b, l->id);
        put_str(&b, "\";q=");
        put_i64(&b, l->amount);
        if (l->period_ns >= RA_NS_PER_S) {
            put_str(&b, ";w=");
            put_i64(&b, l->period_ns / RA_NS_PER_S);
        }
        finish(&b, start);
        b = header(out, "RateLimit");
        start = b.p;
        put_str(&b, "\"");
        put_str(&b, l->id);
        put_str(&b, "\";r=");
        put_i64(&b, tight->remaining);
        put_str(&b, ";t=");
        put_i64(&b, tight->reset_s);
        finish(&b, start);
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
