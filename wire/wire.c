/* The msgpack reader's out-of-line half: headers, skipping, and the naming layer. */
#include "wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int wire_head(const uint8_t *p, const uint8_t *end, size_t *hdr, uint64_t *payload,
              uint64_t *children)
{
    if (p >= end)
        return TT_ERR_MORE;
    uint8_t b = *p;
    uint64_t pl = 0, ch = 0;
    int lenbytes = 0; /* a big-endian length follows the type byte */
    int kind = 0;     /* 0 payload, 1 array, 2 map, 3 ext (one type byte after the length) */
    if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3) {
        /* fixints, nil, booleans: the byte is the value */
    } else if (b <= 0x8f) {
        ch = 2u * (b & 0x0f);
    } else if (b <= 0x9f) {
        ch = b & 0x0f;
    } else if (b <= 0xbf) {
        pl = b & 0x1f;
    } else if (b == 0xc1) {
        return TT_ERR_FRAME;
    } else if (b >= 0xc4 && b <= 0xc6) { /* bin 8/16/32 */
        lenbytes = 1 << (b - 0xc4);
    } else if (b >= 0xc7 && b <= 0xc9) { /* ext 8/16/32 */
        lenbytes = 1 << (b - 0xc7);
        kind = 3;
    } else if (b == 0xca || b == 0xcb) { /* float 32/64 */
        pl = b == 0xca ? 4 : 8;
    } else if (b >= 0xcc && b <= 0xd3) { /* uint, int 8..64 */
        pl = 1u << ((b - 0xcc) & 3);
    } else if (b >= 0xd4 && b <= 0xd8) { /* fixext 1..16, after its type byte */
        pl = 1 + (1u << (b - 0xd4));
    } else if (b >= 0xd9 && b <= 0xdb) { /* str 8/16/32 */
        lenbytes = 1 << (b - 0xd9);
    } else { /* 0xdc..0xdf: array 16/32, map 16/32 */
        lenbytes = b & 1 ? 4 : 2;
        kind = b <= 0xdd ? 1 : 2;
    }
    size_t h = 1;
    if (lenbytes) {
        if ((size_t)(end - p) < 1u + (size_t)lenbytes)
            return TT_ERR_MORE;
        uint64_t n = wire_be(p + 1, lenbytes);
        h += (size_t)lenbytes;
        if (kind == 1)
            ch = n;
        else if (kind == 2)
            ch = 2 * n;
        else if (kind == 3)
            pl = n + 1;
        else
            pl = n;
    }
    *hdr = h;
    *payload = pl;
    *children = ch;
    return 0;
}

int wire_read_float(wire_reader_t *r, double *v)
{
    if (wire__need(r, 1))
        return TT_ERR_FRAME;
    uint8_t b = r->pos[0];
    if (b != 0xca && b != 0xcb)
        return TT_ERR_TYPE;
    if (wire__need(r, b == 0xca ? 5 : 9))
        return TT_ERR_FRAME;
    if (b == 0xca) {
        uint32_t w = (uint32_t)wire_be(r->pos + 1, 4);
        float f;
        memcpy(&f, &w, 4);
        *v = f;
    } else {
        uint64_t w = wire_be(r->pos + 1, 8);
        memcpy(v, &w, 8);
    }
    r->pos += b == 0xca ? 5 : 9;
    return 0;
}

int wire_skip(wire_reader_t *r)
{
    uint64_t pending = 1;
    const uint8_t *p = r->pos;
    while (pending > 0) {
        size_t hdr;
        uint64_t payload, children;
        if (wire_head(p, r->end, &hdr, &payload, &children))
            return TT_ERR_FRAME;
        if (hdr + payload > (uint64_t)(r->end - p))
            return TT_ERR_FRAME;
        p += hdr + payload;
        pending--;
        if (children > (uint64_t)(r->end - p) || pending + children > (uint64_t)(r->end - p))
            return TT_ERR_FRAME;
        pending += children;
    }
    r->pos = p;
    return 0;
}

/* ---- naming ---- */

int wire_fail(wire_reader_t *r, int code, const char *field, const char *fmt, ...)
{
    if (!r->err)
        return code;
    const char *path = r->path ? r->path : "";
    char full[sizeof(r->err->path)];
    snprintf(full, sizeof(full), "%s%s%s", path, *path && *field ? "." : "", field);
    char what[sizeof(r->err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return tt_err_set(r->err, code, full, "%s", what);
}

/* The failure of a plain read: truncated, or the wrong type (named with its first byte). */
static int failed(wire_reader_t *r, int rc, const char *field, const char *want)
{
    if (rc == TT_ERR_FRAME)
        return wire_fail(r, rc, field, "truncated");
    return wire_fail(r, rc, field, "not %s (byte 0x%02x)", want, r->pos[0]);
}

/* The count is not checked against the bytes left (each element's read is): a decoder names a
 * count beyond its own bound as such before it walks the elements. */
int wire_want_array(wire_reader_t *r, uint32_t *n, const char *field)
{
    int rc = wire__len(r, 0x90, 0x9f, 0x0f, 0, 0xdc, 0xdd, n);
    return rc ? failed(r, rc, field, "an array") : 0;
}

int wire_want_map(wire_reader_t *r, uint32_t *n, const char *field)
{
    int rc = wire__len(r, 0x80, 0x8f, 0x0f, 0, 0xde, 0xdf, n);
    return rc ? failed(r, rc, field, "a map") : 0;
}

int wire_want_uint(wire_reader_t *r, uint64_t max, uint64_t *v, const char *field)
{
    const uint8_t *start = r->pos;
    uint64_t x;
    int rc = wire_read_uint(r, &x);
    if (rc)
        return failed(r, rc == TT_ERR_VALUE ? TT_ERR_TYPE : rc, field, "an unsigned integer");
    if (x > max) {
        r->pos = start;
        wire_fail(r, TT_ERR_VALUE, field, "%llu, at most %llu", (unsigned long long)x,
                  (unsigned long long)max);
        return TT_ERR_VALUE;
    }
    *v = x;
    return 0;
}

int wire_want_int(wire_reader_t *r, int64_t *v, const char *field)
{
    int rc = wire_read_int(r, v);
    if (rc == TT_ERR_VALUE)
        return wire_fail(r, rc, field, "above %lld", (long long)INT64_MAX);
    return rc ? failed(r, rc, field, "an integer") : 0;
}

int wire_want_bool(wire_reader_t *r, bool *v, const char *field)
{
    int rc = wire_read_bool(r, v);
    return rc ? failed(r, rc, field, "a boolean") : 0;
}

/* The length is checked before the body is: a header announcing too much is named as such
 * even when the bytes it announces are not there. */
static int want_bytes(wire_reader_t *r, bool bin, size_t min, size_t max, wire_str_t *s,
                      const char *field)
{
    const char *want = bin ? "bin" : "a string";
    size_t hdr;
    uint64_t payload, children;
    if (r->pos >= r->end)
        return failed(r, TT_ERR_FRAME, field, want);
    uint8_t b = r->pos[0];
    bool is_bin = b >= 0xc4 && b <= 0xc6;
    bool is_str = (b >= 0xa0 && b <= 0xbf) || (b >= 0xd9 && b <= 0xdb);
    if (bin ? !is_bin : !is_str)
        return failed(r, TT_ERR_TYPE, field, want);
    if (wire_head(r->pos, r->end, &hdr, &payload, &children))
        return failed(r, TT_ERR_FRAME, field, want);
    if (payload > max)
        return wire_fail(r, TT_ERR_VALUE, field, "%llu bytes, at most %zu",
                         (unsigned long long)payload, max);
    if (payload < min)
        return wire_fail(r, TT_ERR_VALUE, field, "%llu bytes, at least %zu",
                         (unsigned long long)payload, min);
    int rc = wire__bytes(r, bin, s);
    return rc ? failed(r, rc, field, want) : 0;
}

int wire_want_bin(wire_reader_t *r, size_t min, size_t max, wire_str_t *s, const char *field)
{
    return want_bytes(r, true, min, max, s, field);
}

int wire_want_str(wire_reader_t *r, size_t min, size_t max, wire_str_t *s, const char *field)
{
    return want_bytes(r, false, min, max, s, field);
}
