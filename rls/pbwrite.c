/* The RateLimitResponse's encoder; see pbwrite.h. */
#include "pbwrite.h"

#include <string.h>

typedef Envoy__Service__Ratelimit__V3__RateLimitResponse response_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus status_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit limit_t;
typedef Envoy__Service__Ratelimit__V3__HeaderValue header_t;
typedef Tokentriage__Wire__Duration duration_t;

/* Wire types: 0 varint, 2 length-delimited. Every tag here is one byte (fields 1 to 4). */
#define TAG(field, type) ((uint8_t)((field) << 3 | (type)))

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A varint field (int32 and enums sign-extended to 64 bits, as protobuf has it), left out at 0. */
static size_t num_size(uint64_t v)
{
    return v ? 1 + varint_size(v) : 0;
}

static uint8_t *num(uint8_t *p, int field, uint64_t v)
{
    if (!v)
        return p;
    *p++ = TAG(field, 0);
    return varint(p, v);
}

/* A length-delimited field of `len` bytes: its tag and length and them. */
static size_t field_size(size_t len)
{
    return 1 + varint_size(len) + len;
}

static size_t str_size(const char *s)
{
    size_t len = s ? strlen(s) : 0;
    return len ? field_size(len) : 0;
}

static uint8_t *str(uint8_t *p, int field, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    if (!len)
        return p;
    *p++ = TAG(field, 2);
    p = varint(p, len);
    memcpy(p, s, len);
    return p + len;
}

static uint8_t *head(uint8_t *p, int field, size_t len)
{
    *p++ = TAG(field, 2);
    return varint(p, len);
}

#define I32(v) ((uint64_t)(int64_t)(int32_t)(v)) /* int32 and enums: negative is ten bytes */

static size_t limit_size(const limit_t *l)
{
    return num_size(l->requests_per_unit) + num_size(I32(l->unit)) + str_size(l->name);
}

static size_t duration_size(const duration_t *d)
{
    return num_size((uint64_t)d->seconds) + num_size(I32(d->nanos));
}

static size_t status_size(const status_t *s)
{
    return num_size(I32(s->code)) +
           (s->current_limit ? field_size(limit_size(s->current_limit)) : 0) +
           num_size(s->limit_remaining) +
           (s->duration_until_reset ? field_size(duration_size(s->duration_until_reset)) : 0);
}

static size_t header_size(const header_t *h)
{
    return str_size(h->key) + str_size(h->value);
}

size_t rls_response_size(const response_t *r)
{
    size_t n = num_size(I32(r->overall_code));
    for (size_t i = 0; i < r->n_statuses; i++)
        n += field_size(status_size(r->statuses[i]));
    for (size_t i = 0; i < r->n_response_headers_to_add; i++)
        n += field_size(header_size(r->response_headers_to_add[i]));
    return n;
}

size_t rls_response_write(const response_t *r, uint8_t *out)
{
    uint8_t *p = num(out, 1, I32(r->overall_code));
    for (size_t i = 0; i < r->n_statuses; i++) {
        const status_t *s = r->statuses[i];
        p = head(p, 2, status_size(s));
        p = num(p, 1, I32(s->code));
        if (s->current_limit) {
            const limit_t *l = s->current_limit;
            p = head(p, 2, limit_size(l));
            p = num(p, 1, l->requests_per_unit);
            p = num(p, 2, I32(l->unit));
            p = str(p, 3, l->name);
        }
        p = num(p, 3, s->limit_remaining);
        if (s->duration_until_reset) {
            const duration_t *d = s->duration_until_reset;
            p = head(p, 4, duration_size(d));
            p = num(p, 1, (uint64_t)d->seconds);
            p = num(p, 2, I32(d->nanos));
        }
    }
    for (size_t i = 0; i < r->n_response_headers_to_add; i++) {
        const header_t *h = r->response_headers_to_add[i];
        p = head(p, 3, header_size(h));
        p = str(p, 1, h->key);
        p = str(p, 2, h->value);
    }
    return (size_t)(p - out);
}
