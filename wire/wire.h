/*
 * wire: the one msgpack reader, that the decoders of the daemon's inputs (the decision socket's
 * requests, the gossip datagrams, the demand payloads, the members file) and of the answers its
 * clients read are written on. Two readers of the socket's bytes walk them by hand on purpose
 * (proto_frame.c and proto_dec.c say why, with their measurements): the framer, which finds
 * where a message ends without interpreting it, and fast_decide, the fast path of an ordinary
 * decision, fuzz-checked against the decoder it shortcuts. Their bounds are the same.
 *
 * A reader walks (pos, end) and never reads past end. It has two layers over the same struct:
 *
 *  - wire_read_*: one value each, returning 0, TT_ERR_TYPE (the value is another type: nothing
 *    consumed), TT_ERR_FRAME (truncated or malformed) or TT_ERR_VALUE (an integer out of the
 *    type's range); on failure pos is where it was. Inline: the socket's hot path is built on
 *    them, and a call per value would cost a fifth of a decision.
 *  - wire_want_*: the same reads for decoders that name the field that was wrong, as
 *    tarantool's swim_proto.c does (pos, again, unchanged on failure): a failure fills r->err
 *    (when set) with the code, the path (r->path, then "." and the field: `items[3].key`) and
 *    what was wrong (`truncated`, `not bin (byte 0xa1)`, `300 bytes, at most 256`,
 *    `0 bytes, at least 1`, `9, at most 7`).
 *
 * Array and map counts read by wire_want_* are not checked against the bytes left (each
 * element's read is), so a decoder can name a count beyond its own bound as such.
 *
 * Nothing is allocated: strings and binaries are returned in place. Plain container headers are
 * checked against the bytes that remain (every element takes at least one byte), so a forged
 * header announcing 2^32 elements is refused when it is read, not after a huge allocation.
 */
#ifndef TT_WIRE_WIRE_H
#define TT_WIRE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tt_err.h"

/* Bytes that are not NUL-terminated: a pointer into a message, and a length. */
typedef struct wire_str {
    const char *ptr;
    uint32_t len;
} wire_str_t;

typedef struct wire_reader {
    const uint8_t *pos;
    const uint8_t *end;
    tt_err_t *err;    /* wire_want_* failures are described here; NULL: not described */
    const char *path; /* where the reader is, prefixed to field names; NULL or "": the top */
} wire_reader_t;

/* True when s equals the NUL-terminated lit (inline: lit is usually a constant). */
static inline bool wire_str_eq(wire_str_t s, const char *lit)
{
    size_t n = __builtin_strlen(lit);
    return s.len == n && __builtin_memcmp(s.ptr, lit, n) == 0;
}

static inline uint64_t wire_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/*
 * The header of the value at p, without reading its payload: the header's size, the bytes of
 * payload after it, and how many child values follow (map entries count twice). Returns 0,
 * TT_ERR_MORE when the header itself is cut, TT_ERR_FRAME for 0xc1 (no value starts with it).
 * Framing and skipping are built on it.
 */
int wire_head(const uint8_t *p, const uint8_t *end, size_t *hdr, uint64_t *payload,
              uint64_t *children);

static inline bool wire_is_map_byte(uint8_t b)
{
    return (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf;
}

/* ---- the plain layer ---- */

static inline int wire__need(const wire_reader_t *r, size_t n)
{
    return (size_t)(r->end - r->pos) >= n ? 0 : TT_ERR_FRAME;
}

/* A length-prefixed header: a fix form (fix_lo..fix_hi, the length in fix_mask), or a type
 * byte (b8, b16, b32; 0 when the family has no such form) and a big-endian length. */
static inline int wire__len(wire_reader_t *r, uint8_t fix_lo, uint8_t fix_hi, uint8_t fix_mask,
                            uint8_t b8, uint8_t b16, uint8_t b32, uint32_t *n)
{
    if (wire__need(r, 1))
        return TT_ERR_FRAME;
    uint8_t b = r->pos[0];
    int lb;
    if (b >= fix_lo && b <= fix_hi) {
        *n = b & fix_mask;
        r->pos++;
        return 0;
    }
    if (b8 && b == b8)
        lb = 1;
    else if (b == b16)
        lb = 2;
    else if (b == b32)
        lb = 4;
    else
        return TT_ERR_TYPE;
    if (wire__need(r, 1 + (size_t)lb))
        return TT_ERR_FRAME;
    *n = (uint32_t)wire_be(r->pos + 1, lb);
    r->pos += 1 + lb;
    return 0;
}

/* A map header: *n entries. Each entry takes at least two bytes, so a header the rest of the
 * message cannot hold is TT_ERR_FRAME. */
static inline int wire_read_map(wire_reader_t *r, uint32_t *n)
{
    const uint8_t *start = r->pos;
    int rc = wire__len(r, 0x80, 0x8f, 0x0f, 0, 0xde, 0xdf, n);
    if (rc == 0 && (uint64_t)*n * 2 > (uint64_t)(r->end - r->pos)) {
        r->pos = start;
        return TT_ERR_FRAME;
    }
    return rc;
}

static inline int wire_read_array(wire_reader_t *r, uint32_t *n)
{
    const uint8_t *start = r->pos;
    int rc = wire__len(r, 0x90, 0x9f, 0x0f, 0, 0xdc, 0xdd, n);
    if (rc == 0 && (uint64_t)*n > (uint64_t)(r->end - r->pos)) {
        r->pos = start;
        return TT_ERR_FRAME;
    }
    return rc;
}

/* A str, or (wire_read_bin) a bin, returned in place. */
static inline int wire__bytes(wire_reader_t *r, bool bin, wire_str_t *s)
{
    const uint8_t *start = r->pos;
    uint32_t n;
    int rc = bin ? wire__len(r, 1, 0, 0, 0xc4, 0xc5, 0xc6, &n)
                 : wire__len(r, 0xa0, 0xbf, 0x1f, 0xd9, 0xda, 0xdb, &n);
    if (rc)
        return rc;
    if (wire__need(r, n)) {
        r->pos = start;
        return TT_ERR_FRAME;
    }
    s->ptr = (const char *)r->pos;
    s->len = n;
    r->pos += n;
    return 0;
}

static inline int wire_read_str(wire_reader_t *r, wire_str_t *s)
{
    return wire__bytes(r, false, s);
}

static inline int wire_read_bin(wire_reader_t *r, wire_str_t *s)
{
    return wire__bytes(r, true, s);
}

/* Any integer form, as a sign and a magnitude. */
static inline int wire__integer(wire_reader_t *r, bool *neg, uint64_t *mag)
{
    if (wire__need(r, 1))
        return TT_ERR_FRAME;
    uint8_t b = r->pos[0];
    if (b <= 0x7f || b >= 0xe0) {
        *neg = b >= 0xe0;
        *mag = *neg ? (uint64_t)(-(int64_t)(int8_t)b) : b;
        r->pos++;
        return 0;
    }
    if (b < 0xcc || b > 0xd3)
        return TT_ERR_TYPE;
    bool is_signed = b >= 0xd0;
    int n = 1 << ((b - 0xcc) & 3); /* 0xcc..0xcf, 0xd0..0xd3: 1, 2, 4, 8 bytes */
    if (wire__need(r, 1 + (size_t)n))
        return TT_ERR_FRAME;
    uint64_t v = wire_be(r->pos + 1, n);
    r->pos += 1 + n;
    if (is_signed) {
        int shift = 64 - 8 * n;
        int64_t sv = (int64_t)(v << shift) >> shift; /* sign-extend */
        *neg = sv < 0;
        *mag = sv < 0 ? (uint64_t)0 - (uint64_t)sv : (uint64_t)sv;
    } else {
        *neg = false;
        *mag = v;
    }
    return 0;
}

static inline int wire_read_int(wire_reader_t *r, int64_t *v)
{
    const uint8_t *start = r->pos;
    bool neg;
    uint64_t mag;
    int rc = wire__integer(r, &neg, &mag);
    if (rc)
        return rc;
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) {
        r->pos = start;
        return TT_ERR_VALUE;
    }
    *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

static inline int wire_read_uint(wire_reader_t *r, uint64_t *v)
{
    const uint8_t *start = r->pos;
    bool neg;
    uint64_t mag;
    int rc = wire__integer(r, &neg, &mag);
    if (rc)
        return rc;
    if (neg && mag != 0) {
        r->pos = start;
        return TT_ERR_VALUE;
    }
    *v = mag;
    return 0;
}

static inline int wire_read_bool(wire_reader_t *r, bool *v)
{
    if (wire__need(r, 1))
        return TT_ERR_FRAME;
    if (r->pos[0] != 0xc2 && r->pos[0] != 0xc3)
        return TT_ERR_TYPE;
    *v = r->pos[0] == 0xc3;
    r->pos++;
    return 0;
}

static inline int wire_read_nil(wire_reader_t *r)
{
    if (wire__need(r, 1))
        return TT_ERR_FRAME;
    if (r->pos[0] != 0xc0)
        return TT_ERR_TYPE;
    r->pos++;
    return 0;
}

/* A float32 or float64, as a double. */
int wire_read_float(wire_reader_t *r, double *v);
/* Skips one value however deep, without recursion: 0 or TT_ERR_FRAME (pos unchanged). */
int wire_skip(wire_reader_t *r);

/* ---- the naming layer: failures fill r->err with the field's path ---- */

/* Records a failure of `field` (under r->path) in r->err and returns code. */
int wire_fail(wire_reader_t *r, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

int wire_want_array(wire_reader_t *r, uint32_t *n, const char *field);
int wire_want_map(wire_reader_t *r, uint32_t *n, const char *field);
/* An unsigned integer of at most max. */
int wire_want_uint(wire_reader_t *r, uint64_t max, uint64_t *v, const char *field);
int wire_want_int(wire_reader_t *r, int64_t *v, const char *field);
int wire_want_bool(wire_reader_t *r, bool *v, const char *field);
/* A bin (wire_want_bin) or str of min..max bytes, in place. Outside the range the message
 * names the bound it broke: `300 bytes, at most 256`, `0 bytes, at least 1`. */
int wire_want_bin(wire_reader_t *r, size_t min, size_t max, wire_str_t *s, const char *field);
int wire_want_str(wire_reader_t *r, size_t min, size_t max, wire_str_t *s, const char *field);

#endif
