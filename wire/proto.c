/*
 * The socket protocol's codec. See proto.h for the shape; docs/protocol.md for the wire.
 *
 * Framing walks the message's values with a small stack of "values still to read" per open
 * container. Every container header adds its children to the pending total, and that total
 * must fit in the bytes the 64 KiB bound still allows (each value takes at least one byte), so
 * a forged header is refused the moment it is read. Past PROTO_MAX_DEPTH the stack stops
 * growing and the deeper children are counted in the deepest frame instead: the message's end
 * is still found exactly, and the request is answered "too_deep" instead of closing the stream.
 */
#include "proto.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[PROTO_OP_COUNT_] = {
    "decide", "settle", "acquire", "release", "ping", "fleet", "members", "charge",
};

const char *proto_op_name(proto_op_t op)
{
    return (unsigned)op < PROTO_OP_COUNT_ ? op_names[op] : "unknown";
}

void proto_framer_init(proto_framer_t *f)
{
    *f = (proto_framer_t){.pending = 1};
}

int proto_frame_resume(proto_framer_t *f, const uint8_t *data, size_t len, size_t *msg_len,
                       bool *deep)
{
    if (len == 0)
        return PROTO_EMORE;
    if (f->pos == 0 && !wire_is_map_byte(data[0]))
        return PROTO_EFRAME;
    for (;;) {
        size_t hdr;
        uint64_t payload, children;
        int rc = wire_head(data + f->pos, data + len, &hdr, &payload, &children);
        if (rc == PROTO_EMORE)
            return len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
        if (rc)
            return rc;
        if (payload > PROTO_MAX_MESSAGE || f->pos + hdr + payload > PROTO_MAX_MESSAGE)
            return PROTO_ETOOBIG;
        if (f->pos + hdr + payload > len) /* cut: read this header again when more comes */
            return PROTO_EMORE;
        f->steps++;
        f->pos += hdr + (size_t)payload;
        f->pending--;
        if (f->depth > 0)
            f->left[f->depth - 1]--;
        if (children > 0) {
            /* every pending value needs at least one more byte within the bound */
            if (children > PROTO_MAX_MESSAGE || f->pending + children > PROTO_MAX_MESSAGE - f->pos)
                return PROTO_ETOOBIG;
            f->pending += children;
            if (f->depth < PROTO_MAX_DEPTH) {
                f->left[f->depth++] = children;
            } else {
                f->deep = true;
                f->left[f->depth - 1] += children;
            }
        }
        while (f->depth > 0 && f->left[f->depth - 1] == 0)
            f->depth--;
        *deep = f->deep;
        if (f->pending == 0) {
            *msg_len = f->pos;
            return 0;
        }
        if (f->pos >= len)
            return len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
    }
}

int proto_frame(const uint8_t *data, size_t len, size_t *msg_len, bool *deep)
{
    proto_framer_t f;
    proto_framer_init(&f);
    *deep = false;
    return proto_frame_resume(&f, data, len, msg_len, deep);
}

/* ---- request decoding ---- */

enum field {
    F_OP = 0,
    F_SEQ,
    F_SUBJECT,
    F_TOKENS,
    F_RESERVATION,
    F_ACTUAL,
    F_LEASE,
    F_RESERVED, /* retired (issue 23): named only to say what replaced it */
    F_V,
    F_HEADERS,
    F_COUNT_,
};

static const char *const field_names[F_COUNT_] = {
    "op", "seq", "subject", "tokens", "reservation", "actual", "lease", "reserved", "v", "headers",
};

#define BIT(f) (1u << (f))
/* What each op takes (op, seq and v go everywhere) and what it cannot do without. */
static const struct {
    unsigned allowed, required;
} op_fields[PROTO_OP_COUNT_] = {
    [PROTO_OP_DECIDE] = {BIT(F_SUBJECT) | BIT(F_TOKENS) | BIT(F_HEADERS), BIT(F_SUBJECT)},
    [PROTO_OP_SETTLE] = {BIT(F_RESERVATION) | BIT(F_ACTUAL), BIT(F_RESERVATION) | BIT(F_ACTUAL)},
    [PROTO_OP_ACQUIRE] = {BIT(F_SUBJECT) | BIT(F_HEADERS), BIT(F_SUBJECT)},
    [PROTO_OP_RELEASE] = {BIT(F_LEASE), BIT(F_LEASE)},
    [PROTO_OP_PING] = {0, 0},
    [PROTO_OP_FLEET] = {0, 0},
    [PROTO_OP_MEMBERS] = {0, 0},
    [PROTO_OP_CHARGE] = {BIT(F_SUBJECT) | BIT(F_TOKENS), BIT(F_SUBJECT) | BIT(F_TOKENS)},
};

/* What replaced settle by subject and reserved count, which let any client refund any key. */
#define SETTLE_BY_RESERVATION                                                                      \
    "settle takes \"reservation\" (a tpm decision's id) and \"actual\"; tokens counted "           \
    "without one: op \"charge\""

/* Records the first error only: later ones are usually consequences. */
static int fail(proto_error_t *err, int code, const char *fmt, ...)
{
    if (err->code != 0)
        return err->code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof(err->message), fmt, ap);
    va_end(ap);
    return code;
}

/* A name from the wire, made safe to print: at most 32 bytes, non-printables as '?'. */
static const char *printable(proto_str_t s, char buf[36])
{
    uint32_t n = s.len > 32 ? 32 : s.len;
    for (uint32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        buf[i] = (c >= 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
    }
    if (s.len > 32) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = 0;
    return buf;
}

static int decode_subject(wire_reader_t *r, proto_request_t *req, proto_error_t *err)
{
    uint32_t n;
    int rc = wire_read_map(r, &n);
    if (rc == PROTO_ETYPE)
        return fail(err, PROTO_ETYPE, "subject: must be a map of level to id");
    if (rc)
        return fail(err, PROTO_EFRAME, "subject: truncated");
    if (n == 0)
        return fail(err, PROTO_EVALUE, "subject: names no level");
    if (n > PROTO_MAX_LEVELS)
        return fail(err, PROTO_EVALUE, "subject: %u levels, at most %d", n, PROTO_MAX_LEVELS);
    char buf[36];
    for (uint32_t i = 0; i < n; i++) {
        proto_pair_t *p = &req->subject[i];
        if (wire_read_str(r, &p->level))
            return fail(err, PROTO_ETYPE, "subject: level names must be strings");
        if (p->level.len == 0 || p->level.len > PROTO_MAX_LEVEL_NAME)
            return fail(err, PROTO_EVALUE, "subject: level name of %u bytes, must be 1 to %d",
                        p->level.len, PROTO_MAX_LEVEL_NAME);
        if (wire_read_str(r, &p->id))
            return fail(err, PROTO_ETYPE, "subject.%s: id must be a string",
                        printable(p->level, buf));
        if (p->id.len == 0 || p->id.len > PROTO_MAX_ID)
            return fail(err, PROTO_EVALUE, "subject.%s: id of %u bytes, must be 1 to %d",
                        printable(p->level, buf), p->id.len, PROTO_MAX_ID);
        for (uint32_t j = 0; j < i; j++)
            if (req->subject[j].level.len == p->level.len &&
                memcmp(req->subject[j].level.ptr, p->level.ptr, p->level.len) == 0)
                return fail(err, PROTO_EVALUE, "subject.%s: level given twice",
                            printable(p->level, buf));
    }
    req->nsubject = n;
    return 0;
}

static int decode_count(wire_reader_t *r, const char *name, int64_t *out, proto_error_t *err)
{
    int rc = wire_read_int(r, out);
    if (rc == PROTO_ETYPE)
        return fail(err, PROTO_ETYPE, "%s: must be an integer", name);
    if (rc == 0 && (*out < 0 || *out > PROTO_MAX_COUNT))
        rc = PROTO_EVALUE;
    if (rc)
        return fail(err, PROTO_EVALUE, "%s: must be between 0 and 2^40", name);
    return 0;
}

static int decode_field(wire_reader_t *r, enum field f, proto_request_t *req, int *op,
                        proto_error_t *err)
{
    proto_str_t s;
    char buf[36];
    int rc;
    switch (f) {
    case F_OP:
        if (wire_read_str(r, &s))
            return fail(err, PROTO_ETYPE, "op: must be a string");
        for (int i = 0; i < PROTO_OP_COUNT_; i++)
            if (wire_str_eq(s, op_names[i])) {
                *op = i;
                return 0;
            }
        return fail(err, PROTO_EOP,
                    "unknown op \"%s\" (decide settle charge acquire release ping "
                    "fleet members)",
                    printable(s, buf));
    case F_SEQ:
        rc = wire_read_uint(r, &req->seq);
        if (rc == PROTO_EVALUE)
            return fail(err, PROTO_EVALUE, "seq: must not be negative");
        if (rc)
            return fail(err, PROTO_ETYPE, "seq: must be an unsigned integer");
        return 0;
    case F_SUBJECT:
        return decode_subject(r, req, err);
    case F_TOKENS:
        req->has_tokens = true;
        return decode_count(r, "tokens", &req->tokens, err);
    case F_RESERVATION:
        rc = wire_read_uint(r, &req->reservation);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "reservation: must be an unsigned integer");
        if (rc || req->reservation == 0)
            return fail(err, PROTO_EVALUE, "reservation: must be the id a tpm decision answered");
        return 0;
    case F_RESERVED:
        return fail(err, PROTO_EFIELD, "reserved: no longer taken: " SETTLE_BY_RESERVATION);
    case F_ACTUAL:
        return decode_count(r, "actual", &req->actual, err);
    case F_V: {
        uint64_t v;
        rc = wire_read_uint(r, &v);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "v: must be an unsigned integer");
        if (rc || v < PROTO_V1 || v > PROTO_V_MAX)
            return fail(err, PROTO_EVALUE,
                        "v: protocol %lld is not served here: this daemon speaks 1 and 2 "
                        "(docs/protocol.md)",
                        rc ? -1ll : (long long)v);
        req->version = (uint8_t)v;
        return 0;
    }
    case F_HEADERS: {
        bool b;
        if (wire_read_bool(r, &b))
            return fail(err, PROTO_ETYPE, "headers: must be true or false");
        req->headers = b;
        return 0;
    }
    case F_LEASE:
        rc = wire_read_uint(r, &req->lease);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "lease: must be an unsigned integer");
        if (rc || req->lease == 0)
            return fail(err, PROTO_EVALUE, "lease: must be a lease id from acquire");
        return 0;
    default:
        return fail(err, PROTO_EFIELD, "unknown field");
    }
}

/* Decodes the map at r->pos, leaving r->pos after it when it succeeds. */
static int decode(wire_reader_t *rd, proto_request_t *req, proto_error_t *err)
{
    wire_reader_t r = *rd;
    uint32_t n;
    req->seq = 0;
    req->version = PROTO_V1;
    req->headers = false;
    req->nsubject = 0;
    req->has_tokens = false;
    req->tokens = req->actual = 0;
    req->reservation = req->lease = 0;
    err->code = 0;
    err->message[0] = 0;
    if (wire_read_map(&r, &n))
        return fail(err, PROTO_EFRAME, "a request must be a msgpack map");
    unsigned seen = 0;
    int op = -1;
    char buf[36];
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t key;
        if (wire_read_str(&r, &key)) {
            fail(err, PROTO_ETYPE, "field names must be strings");
            if (wire_skip(&r))
                return fail(err, PROTO_EFRAME, "truncated");
        } else {
            int f = 0;
            while (f < F_COUNT_ && !wire_str_eq(key, field_names[f]))
                f++;
            const uint8_t *value = r.pos;
            if (f == F_COUNT_)
                fail(err, PROTO_EFIELD, "unknown field \"%s\"", printable(key, buf));
            else if (seen & BIT(f))
                fail(err, PROTO_EVALUE, "%s: given twice", field_names[f]);
            else if (decode_field(&r, (enum field)f, req, &op, err) == 0)
                seen |= BIT(f);
            /* whatever was wrong with the value, step over all of it */
            if (err->code != 0) {
                r.pos = value;
                if (wire_skip(&r))
                    return fail(err, PROTO_EFRAME, "truncated");
            }
        }
        /* after an error, read on only to find a seq the error can echo */
        if (err->code != 0 && (seen & BIT(F_SEQ)))
            break;
    }
    if (err->code != 0)
        return err->code;
    if (op < 0)
        return fail(err, PROTO_EMISSING, "missing \"op\"");
    req->op = (proto_op_t)op;
    unsigned extra = seen & ~(BIT(F_OP) | BIT(F_SEQ) | BIT(F_V) | op_fields[op].allowed);
    if (op == PROTO_OP_SETTLE && (extra & BIT(F_SUBJECT)))
        return fail(err, PROTO_EFIELD,
                    "op \"settle\" takes no \"subject\": " SETTLE_BY_RESERVATION);
    for (int f = 0; f < F_COUNT_; f++)
        if (extra & BIT(f))
            return fail(err, PROTO_EFIELD, "op \"%s\" takes no \"%s\"", op_names[op],
                        field_names[f]);
    unsigned missing = op_fields[op].required & ~seen;
    for (int f = 0; f < F_COUNT_; f++)
        if (missing & BIT(f))
            return fail(err, PROTO_EMISSING, "op \"%s\" needs \"%s\"", op_names[op],
                        field_names[f]);
    if (req->version == PROTO_V1) { /* protocol 1 knows one answer: the rendered headers */
        if ((seen & BIT(F_HEADERS)) && !req->headers)
            return fail(err, PROTO_EVALUE,
                        "headers: false needs \"v\": 2 (a protocol 1 answer always carries "
                        "the headers)");
        req->headers = true;
    }
    rd->pos = r.pos;
    return 0;
}

int proto_decode_request(const uint8_t *msg, size_t len, proto_request_t *req, proto_error_t *err)
{
    wire_reader_t r = {.pos = msg, .end = msg + len};
    return decode(&r, req, err);
}

/*
 * The decide shape, decoded straight: a fixmap of fixstr keys, each recognised by its length and
 * bytes, each value in the forms clients write (positive fixint or uint8..64, fixstr or str8,
 * fixmap, true/false). Anything else -- another op, another form, a field twice, a bad value --
 * returns -1 and the general decoder reads the message again, for its specific error or for the
 * rarer forms. Every request this accepts, decode() accepts alike (fuzz_proto checks).
 */
#define FAST_NEED(n) ((size_t)(end - p) >= (size_t)(n))

/* An unsigned integer at *pp: positive fixint or uint8/16/32/64. */
static inline bool fast_uint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (!FAST_NEED(1))
        return false;
    uint8_t b = *p;
    int n = b <= 0x7f ? 0 : b == 0xcc ? 1 : b == 0xcd ? 2 : b == 0xce ? 4 : b == 0xcf ? 8 : -1;
    if (n < 0 || !FAST_NEED(1 + n))
        return false;
    *v = n ? wire_be(p + 1, n) : b;
    *pp = p + 1 + n;
    return true;
}

/* A fixstr or str8 at *pp of 1..max bytes. */
static inline bool fast_str(const uint8_t **pp, const uint8_t *end, uint32_t max, proto_str_t *s)
{
    const uint8_t *p = *pp;
    if (!FAST_NEED(2))
        return false;
    uint32_t n, hdr = 1;
    if ((p[0] & 0xe0) == 0xa0)
        n = p[0] & 0x1f;
    else if (p[0] == 0xd9)
        n = p[1], hdr = 2;
    else
        return false;
    if (n == 0 || n > max || !FAST_NEED(hdr + n))
        return false;
    *s = (proto_str_t){(const char *)p + hdr, n};
    *pp = p + hdr + n;
    return true;
}

static bool fast_subject(const uint8_t **pp, const uint8_t *end, proto_request_t *req)
{
    const uint8_t *p = *pp;
    if (!FAST_NEED(1) || (p[0] & 0xf0) != 0x80 || (p[0] & 0x0f) == 0)
        return false;
    uint32_t n = p[0] & 0x0f; /* a fixmap: at most 15 levels, within the bound of 16 */
    p++;
    for (uint32_t i = 0; i < n; i++) {
        proto_pair_t *pr = &req->subject[i];
        if (!fast_str(&p, end, PROTO_MAX_LEVEL_NAME, &pr->level) ||
            !fast_str(&p, end, PROTO_MAX_ID, &pr->id))
            return false;
        for (uint32_t j = 0; j < i; j++)
            if (req->subject[j].level.len == pr->level.len &&
                memcmp(req->subject[j].level.ptr, pr->level.ptr, pr->level.len) == 0)
                return false;
    }
    req->nsubject = n;
    *pp = p;
    return true;
}

#define KEY_IS(p, len, lit) ((len) == sizeof(lit) - 1 && memcmp(p, lit, sizeof(lit) - 1) == 0)

static int fast_decide(const uint8_t *data, size_t len, size_t *used, proto_request_t *req)
{
    const uint8_t *p = data, *end = data + len;
    if (len < 1 || (p[0] & 0xf0) != 0x80)
        return -1;
    uint32_t n = *p++ & 0x0f;
    unsigned seen = 0;
    uint64_t v;
    req->seq = 0;
    req->version = PROTO_V1;
    req->headers = false;
    req->has_tokens = false;
    req->tokens = req->actual = 0;
    req->reservation = req->lease = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!FAST_NEED(1) || (p[0] & 0xe0) != 0xa0)
            return -1;
        uint32_t kl = p[0] & 0x1f;
        const uint8_t *k = p + 1;
        if (!FAST_NEED(1 + kl))
            return -1;
        p += 1 + kl;
        int f;
        if (KEY_IS(k, kl, "op")) {
            if (!FAST_NEED(7) || memcmp(p,
                                        "\xa6"
                                        "decide",
                                        7) != 0)
                return -1;
            p += 7;
            f = F_OP;
        } else if (KEY_IS(k, kl, "seq")) {
            if (!fast_uint(&p, end, &req->seq))
                return -1;
            f = F_SEQ;
        } else if (KEY_IS(k, kl, "subject")) {
            if (!fast_subject(&p, end, req))
                return -1;
            f = F_SUBJECT;
        } else if (KEY_IS(k, kl, "v")) {
            if (!fast_uint(&p, end, &v) || v < PROTO_V1 || v > PROTO_V_MAX)
                return -1;
            req->version = (uint8_t)v;
            f = F_V;
        } else if (KEY_IS(k, kl, "tokens")) {
            if (!fast_uint(&p, end, &v) || v > (uint64_t)PROTO_MAX_COUNT)
                return -1;
            req->has_tokens = true;
            req->tokens = (int64_t)v;
            f = F_TOKENS;
        } else if (KEY_IS(k, kl, "headers")) {
            if (!FAST_NEED(1) || (p[0] != 0xc2 && p[0] != 0xc3))
                return -1;
            req->headers = *p++ == 0xc3;
            f = F_HEADERS;
        } else {
            return -1;
        }
        if (seen & BIT(f))
            return -1;
        seen |= BIT(f);
    }
    if (!(seen & BIT(F_OP)) || !(seen & BIT(F_SUBJECT)))
        return -1;
    if (req->version == PROTO_V1) {
        if ((seen & BIT(F_HEADERS)) && !req->headers)
            return -1;
        req->headers = true;
    }
    req->op = PROTO_OP_DECIDE;
    *used = (size_t)(p - data);
    return 0;
}

int proto_decode_first(const uint8_t *data, size_t len, size_t *used, proto_request_t *req,
                       proto_error_t *err)
{
    if (fast_decide(data, len, used, req) == 0)
        return 0;
    wire_reader_t r = {.pos = data, .end = data + len};
    if (len == 0 || !wire_is_map_byte(data[0]) || decode(&r, req, err) != 0)
        return -1;
    *used = (size_t)(r.pos - data);
    return 0;
}

/* ---- output ---- */

void proto_out_free(proto_out_t *out)
{
    free(out->data);
    out->data = NULL;
    out->len = out->cap = 0;
}

/* Grows the buffer: room()'s slow path, out of line. */
static __attribute__((noinline)) bool grow(proto_out_t *out, size_t n)
{
    if (out->failed)
        return false;
    size_t cap = out->cap ? out->cap : 256;
    while (cap - out->len < n)
        cap *= 2;
    uint8_t *p = realloc(out->data, cap);
    if (!p) {
        out->failed = true;
        return false;
    }
    out->data = p;
    out->cap = cap;
    return true;
}

/* Makes room for n more bytes; false (and `failed` latched) when memory runs out. */
static inline bool room(proto_out_t *out, size_t n)
{
    return __builtin_expect(out->cap - out->len >= n, 1) || grow(out, n);
}

int proto_out_append(proto_out_t *out, const void *bytes, size_t n)
{
    if (!room(out, n))
        return -1;
    if (n)
        memcpy(out->data + out->len, bytes, n);
    out->len += n;
    return 0;
}

/*
 * The writer. Answers are small maps of short keys and integers, so every value is written in
 * place: one capacity check, then the bytes (the smallest msgpack form of each), no call per
 * item. An allocation failure latches out->failed and later writes do nothing. The writers
 * are forced inline so that a key's length is a constant and its copy a few moves.
 */
#define W_INLINE static inline __attribute__((always_inline))

/* The p_ writers put one value at d, which has room for it, and return where it ends: a
 * message whose size is bounded up front (a decision) checks room once and writes with these.
 * The w_ writers check room for each value, then write with the same. */

/* A type byte and a big-endian number of `bytes` bytes (0 for fix forms). */
W_INLINE uint8_t *p_head(uint8_t *d, uint8_t type, uint64_t v, int bytes)
{
    d[0] = type;
    for (int i = 0; i < bytes; i++)
        d[1 + i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    return d + 1 + bytes;
}

W_INLINE uint8_t *p_sized(uint8_t *d, uint64_t n, uint8_t fix, uint64_t fix_max, uint8_t t8,
                          uint8_t t16, uint8_t t32)
{
    if (n <= fix_max)
        return p_head(d, (uint8_t)(fix | n), 0, 0);
    if (t8 && n <= 0xff)
        return p_head(d, t8, n, 1);
    if (n <= 0xffff)
        return p_head(d, t16, n, 2);
    return p_head(d, t32, n, 4);
}

W_INLINE uint8_t *p_map(uint8_t *d, uint32_t n)
{
    return p_sized(d, n, 0x80, 15, 0, 0xde, 0xdf);
}

W_INLINE uint8_t *p_array(uint8_t *d, uint32_t n)
{
    return p_sized(d, n, 0x90, 15, 0, 0xdc, 0xdd);
}

W_INLINE uint8_t *p_str(uint8_t *d, const char *s, size_t n)
{
    d = p_sized(d, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
    memcpy(d, s, n);
    return d + n;
}

W_INLINE uint8_t *p_uint(uint8_t *d, uint64_t v)
{
    if (v <= 0x7f)
        return p_head(d, (uint8_t)v, 0, 0);
    if (v <= 0xff)
        return p_head(d, 0xcc, v, 1);
    if (v <= 0xffff)
        return p_head(d, 0xcd, v, 2);
    if (v <= 0xffffffffu)
        return p_head(d, 0xce, v, 4);
    return p_head(d, 0xcf, v, 8);
}

W_INLINE uint8_t *p_int(uint8_t *d, int64_t v)
{
    if (v >= 0)
        return p_uint(d, (uint64_t)v);
    if (v >= -32)
        return p_head(d, (uint8_t)v, 0, 0);
    if (v >= INT8_MIN)
        return p_head(d, 0xd0, (uint64_t)v, 1);
    if (v >= INT16_MIN)
        return p_head(d, 0xd1, (uint64_t)v, 2);
    if (v >= INT32_MIN)
        return p_head(d, 0xd2, (uint64_t)v, 4);
    return p_head(d, 0xd3, (uint64_t)v, 8);
}

W_INLINE uint8_t *p_bool(uint8_t *d, bool v)
{
    return p_head(d, v ? 0xc3 : 0xc2, 0, 0);
}

#define P_KEY(d, lit) p_str(d, lit, sizeof(lit) - 1)

/* Runs the p_ writer call `expr` (on `d`) at the end of out when `need` bytes fit. */
#define W_PUT(out, need, expr)                                                                     \
    do {                                                                                           \
        if (room(out, need)) {                                                                     \
            uint8_t *d = (out)->data + (out)->len;                                                 \
            (out)->len = (size_t)((expr) - (out)->data);                                           \
        }                                                                                          \
    } while (0)

W_INLINE void w_map(proto_out_t *out, uint32_t n)
{
    W_PUT(out, 5, p_map(d, n));
}

W_INLINE void w_array(proto_out_t *out, uint32_t n)
{
    W_PUT(out, 5, p_array(d, n));
}

W_INLINE void w_str(proto_out_t *out, const char *p, size_t n)
{
    W_PUT(out, 5 + n, p_str(d, p, n));
}

W_INLINE void w_pstr(proto_out_t *out, proto_str_t s)
{
    w_str(out, s.ptr, s.len);
}

static void w_cstr(proto_out_t *out, const char *s)
{
    w_str(out, s, strlen(s));
}

W_INLINE void w_uint(proto_out_t *out, uint64_t v)
{
    W_PUT(out, 9, p_uint(d, v));
}

W_INLINE void w_int(proto_out_t *out, int64_t v)
{
    W_PUT(out, 9, p_int(d, v));
}

W_INLINE void w_bool(proto_out_t *out, bool v)
{
    W_PUT(out, 1, p_bool(d, v));
}

#define W_KEY(out, lit) w_str(out, lit, sizeof(lit) - 1)

static int done(proto_out_t *out, size_t start)
{
    if (out->failed) {
        out->len = start; /* never leave half a message behind */
        return -1;
    }
    return 0;
}

/* Opens an answer: a map of `fields` entries (seq included) and the seq. */
static void open_answer(proto_out_t *out, uint32_t fields, uint64_t seq)
{
    w_map(out, fields);
    W_KEY(out, "seq");
    w_uint(out, seq);
}

/* [q, r, reset_ms]: a trio of tests/vectors/headers.txt */
W_INLINE uint8_t *p_trio(uint8_t *d, const proto_trio_t *t)
{
    d = p_array(d, 3);
    d = p_int(d, t->quota);
    d = p_int(d, t->remaining);
    return p_int(d, t->reset_ms);
}

/* Protocol 2's numbers, each under the name of its line in tests/vectors/headers.txt; at most
 * DISCLOSED_MAX bytes. */
#define DISCLOSED_MAX (8 + 1 + 2 + PROTO_POLICY_ID_MAX + 4 + 4 * 9 + 2 * (10 + 1 + 3 * 9) + 6 + 9)

W_INLINE uint8_t *p_disclosed(uint8_t *d, const proto_disclosed_t *x)
{
    if (x->has_policy) {
        d = P_KEY(d, "policy");
        d = p_array(d, 6);
        d = p_str(d, x->policy_id, strnlen(x->policy_id, sizeof(x->policy_id)));
        d = x->policy_tpm ? P_KEY(d, "tpm") : P_KEY(d, "rpm");
        d = p_int(d, x->period_ms);
        d = p_int(d, x->quota);
        d = p_int(d, x->remaining);
        d = p_int(d, x->t_s);
    }
    if (x->has_requests)
        d = p_trio(P_KEY(d, "requests"), &x->requests);
    if (x->has_tokens)
        d = p_trio(P_KEY(d, "tokens"), &x->tokens);
    if (x->retry_s >= 0)
        d = p_int(P_KEY(d, "retry"), x->retry_s);
    return d;
}

/*
 * A decision is the answer of nearly every request, so it is written with one room check: the
 * bound below is every key, every integer at 9 bytes and every string with a 5-byte header.
 */
int proto_enc_decision(proto_out_t *out, uint64_t seq, const proto_decision_t *d)
{
    const proto_disclosed_t *x = d->disclosed;
    bool has_limit = d->limit.len > 0, has_rem = d->remaining >= 0, has_code = d->code.len > 0;
    bool has_resv = d->reservation != 0, has_soft = !x || d->nsoft > 0;
    size_t need = 200 + d->verdict.len + d->limit.len + d->code.len + (x ? DISCLOSED_MAX : 0);
    for (uint32_t i = 0; i < d->nsoft; i++)
        need += 5 + d->soft_denied[i].len;
    for (uint32_t i = 0; d->send_headers && i < d->nheaders; i++)
        need += 10 + d->headers[i].name.len + d->headers[i].value.len;
    if (!room(out, need))
        return -1;
    unsigned numbers =
        x ? (unsigned)x->has_policy + x->has_requests + x->has_tokens + (x->retry_s >= 0) : 0;
    uint8_t *p = out->data + out->len;
    p = p_map(p, 5u + has_limit + has_rem + has_code + has_soft + d->send_headers + d->has_lease +
                     has_resv + numbers);
    p = p_uint(P_KEY(p, "seq"), seq);
    p = p_bool(P_KEY(p, "admit"), d->admit);
    p = p_str(P_KEY(p, "verdict"), d->verdict.ptr, d->verdict.len);
    if (has_limit)
        p = p_str(P_KEY(p, "limit"), d->limit.ptr, d->limit.len);
    if (has_rem)
        p = p_int(P_KEY(p, "remaining"), d->remaining);
    p = p_int(P_KEY(p, "retry_after"), d->retry_after);
    p = p_int(P_KEY(p, "reset_after"), d->reset_after);
    if (has_code)
        p = p_str(P_KEY(p, "code"), d->code.ptr, d->code.len);
    if (has_soft) {
        p = p_array(P_KEY(p, "soft_denied"), d->nsoft);
        for (uint32_t i = 0; i < d->nsoft; i++)
            p = p_str(p, d->soft_denied[i].ptr, d->soft_denied[i].len);
    }
    if (x)
        p = p_disclosed(p, x);
    if (d->send_headers) {
        p = p_map(P_KEY(p, "headers"), d->nheaders);
        for (uint32_t i = 0; i < d->nheaders; i++) {
            p = p_str(p, d->headers[i].name.ptr, d->headers[i].name.len);
            p = p_str(p, d->headers[i].value.ptr, d->headers[i].value.len);
        }
    }
    if (d->has_lease)
        p = p_uint(P_KEY(p, "lease"), d->lease);
    if (has_resv)
        p = p_uint(P_KEY(p, "reservation"), d->reservation);
    out->len = (size_t)(p - out->data);
    return 0;
}

int proto_enc_settled(proto_out_t *out, uint64_t seq, int64_t settled, bool already_settled)
{
    size_t start = out->len;
    open_answer(out, 3, seq);
    W_KEY(out, "settled");
    w_int(out, settled);
    W_KEY(out, "already_settled");
    w_bool(out, already_settled);
    return done(out, start);
}

int proto_enc_charged(proto_out_t *out, uint64_t seq, int64_t charged)
{
    size_t start = out->len;
    open_answer(out, 2, seq);
    W_KEY(out, "charged");
    w_int(out, charged);
    return done(out, start);
}

int proto_enc_released(proto_out_t *out, uint64_t seq, bool released)
{
    size_t start = out->len;
    open_answer(out, 2, seq);
    W_KEY(out, "released");
    w_bool(out, released);
    return done(out, start);
}

int proto_enc_pong(proto_out_t *out, uint64_t seq, const char *version)
{
    size_t start = out->len;
    open_answer(out, 3, seq);
    W_KEY(out, "pong");
    w_bool(out, true);
    W_KEY(out, "version");
    w_cstr(out, version);
    return done(out, start);
}

int proto_enc_error(proto_out_t *out, uint64_t seq, const char *code, const char *message)
{
    size_t start = out->len;
    open_answer(out, 2, seq);
    W_KEY(out, "error");
    w_map(out, 2);
    W_KEY(out, "code");
    w_cstr(out, code);
    W_KEY(out, "message");
    w_cstr(out, message);
    return done(out, start);
}

/* What a fleet answer says above its rows. */
struct fleet_head {
    const char *node;
    int64_t n, snapshot_age_ms;
    const char *doubt;
};

static void fleet_body(proto_out_t *out, uint64_t seq, const void *ctx,
                       const proto_fleet_limit_t *rows, uint32_t nrows, bool truncated)
{
    const struct fleet_head *h = ctx;
    open_answer(out, 6 + (h->doubt != NULL), seq);
    W_KEY(out, "node");
    w_cstr(out, h->node);
    W_KEY(out, "n");
    w_int(out, h->n);
    if (h->doubt) {
        W_KEY(out, "n_in_doubt");
        w_cstr(out, h->doubt);
    }
    W_KEY(out, "snapshot_age_ms");
    w_int(out, h->snapshot_age_ms);
    W_KEY(out, "truncated");
    w_bool(out, truncated);
    W_KEY(out, "limits");
    w_array(out, nrows);
    for (uint32_t i = 0; i < nrows; i++) {
        const proto_fleet_limit_t *l = &rows[i];
        w_map(out, 15 + (l->state.len > 0) + 6 * l->demand);
        W_KEY(out, "id");
        w_pstr(out, l->id);
        W_KEY(out, "type");
        w_pstr(out, l->type);
        W_KEY(out, "store");
        w_pstr(out, l->store);
        W_KEY(out, "algorithm");
        w_pstr(out, l->algorithm);
        W_KEY(out, "amount");
        w_int(out, l->amount);
        W_KEY(out, "period_s");
        w_int(out, l->period_s);
        W_KEY(out, "burst");
        w_int(out, l->burst);
        W_KEY(out, "n");
        w_int(out, l->n);
        W_KEY(out, "sustained_bound");
        w_int(out, l->sustained_bound);
        W_KEY(out, "burst_bound");
        w_int(out, l->burst_bound);
        if (l->state.len > 0) {
            W_KEY(out, "state");
            w_pstr(out, l->state);
        }
        W_KEY(out, "local_share");
        w_int(out, l->local_share);
        W_KEY(out, "divisor_min");
        w_int(out, l->divisor_min);
        W_KEY(out, "divisor_max");
        w_int(out, l->divisor_max);
        W_KEY(out, "detect_within_s");
        w_int(out, l->detect_within_s);
        W_KEY(out, "converged");
        w_bool(out, l->converged);
        if (l->demand) {
            W_KEY(out, "division");
            w_cstr(out, "demand");
            W_KEY(out, "keys_leased");
            w_int(out, l->keys_leased);
            W_KEY(out, "keys_owned");
            w_int(out, l->keys_owned);
            W_KEY(out, "largest_lease_age_ms");
            w_int(out, l->largest_lease_age_ms);
            W_KEY(out, "largest_lease");
            w_int(out, l->largest_lease);
            W_KEY(out, "moving");
            w_bool(out, l->moving);
        }
    }
}

static void members_body(proto_out_t *out, uint64_t seq, const void *ctx,
                         const proto_member_t *rows, uint32_t nrows, bool truncated)
{
    open_answer(out, 4, seq);
    W_KEY(out, "live");
    w_int(out, *(const int64_t *)ctx);
    W_KEY(out, "truncated");
    w_bool(out, truncated);
    W_KEY(out, "members");
    w_array(out, nrows);
    for (uint32_t i = 0; i < nrows; i++) {
        const proto_member_t *m = &rows[i];
        w_map(out, 7 + (m->duplicate_generation != 0));
        W_KEY(out, "id");
        w_pstr(out, m->id);
        W_KEY(out, "address");
        w_pstr(out, m->address);
        W_KEY(out, "state");
        w_pstr(out, m->state);
        W_KEY(out, "incarnation");
        w_uint(out, m->incarnation);
        W_KEY(out, "generation");
        w_uint(out, m->generation);
        W_KEY(out, "last_heard_ms");
        w_int(out, m->last_heard_ms);
        W_KEY(out, "self");
        w_bool(out, m->self);
        if (m->duplicate_generation) {
            W_KEY(out, "duplicate_generation");
            w_uint(out, m->duplicate_generation);
        }
    }
}

/*
 * A listing answer must stay within the 64 KiB message bound the client frames with: when the
 * rows do not fit, it is written again with as many as fit and "truncated": true.
 */
#define FIT_ROWS(out, seq, ctx, rows, nrows, body)                                                 \
    do {                                                                                           \
        size_t start_ = (out)->len;                                                                \
        uint32_t n_ = (nrows);                                                                     \
        for (;;) {                                                                                 \
            body(out, seq, ctx, rows, n_, n_ < (nrows));                                           \
            size_t size_ = (out)->len - start_;                                                    \
            if ((out)->failed || size_ <= PROTO_MAX_MESSAGE || n_ == 0)                            \
                break;                                                                             \
            (out)->len = start_;                                                                   \
            n_ = (uint32_t)((uint64_t)n_ * (PROTO_MAX_MESSAGE - 1024) / size_);                    \
        }                                                                                          \
        return done(out, start_);                                                                  \
    } while (0)

int proto_enc_fleet(proto_out_t *out, uint64_t seq, const char *node, int64_t n, const char *doubt,
                    int64_t snapshot_age_ms, const proto_fleet_limit_t *rows, uint32_t nrows)
{
    const struct fleet_head head = {node, n, snapshot_age_ms, doubt};
    FIT_ROWS(out, seq, &head, rows, nrows, fleet_body);
}

int proto_enc_members(proto_out_t *out, uint64_t seq, int64_t live, const proto_member_t *rows,
                      uint32_t nrows)
{
    FIT_ROWS(out, seq, &live, rows, nrows, members_body);
}

int proto_enc_request(proto_out_t *out, const proto_request_t *req)
{
    if ((unsigned)req->op >= PROTO_OP_COUNT_)
        return -1;
    size_t start = out->len;
    unsigned fields = op_fields[req->op].allowed;
    if (req->op == PROTO_OP_DECIDE && !req->has_tokens)
        fields &= ~BIT(F_TOKENS);
    if (!req->headers)
        fields &= ~BIT(F_HEADERS);
    if (req->version > PROTO_V1)
        fields |= BIT(F_V);
    w_map(out, 2 + (unsigned)__builtin_popcount(fields));
    W_KEY(out, "op");
    w_cstr(out, op_names[req->op]);
    W_KEY(out, "seq");
    w_uint(out, req->seq);
    if (fields & BIT(F_V)) {
        W_KEY(out, "v");
        w_uint(out, req->version);
    }
    if (fields & BIT(F_SUBJECT)) {
        W_KEY(out, "subject");
        w_map(out, req->nsubject);
        for (uint32_t i = 0; i < req->nsubject; i++) {
            w_pstr(out, req->subject[i].level);
            w_pstr(out, req->subject[i].id);
        }
    }
    if (fields & BIT(F_TOKENS)) {
        W_KEY(out, "tokens");
        w_int(out, req->tokens);
    }
    if (fields & BIT(F_RESERVATION)) {
        W_KEY(out, "reservation");
        w_uint(out, req->reservation);
    }
    if (fields & BIT(F_ACTUAL)) {
        W_KEY(out, "actual");
        w_int(out, req->actual);
    }
    if (fields & BIT(F_LEASE)) {
        W_KEY(out, "lease");
        w_uint(out, req->lease);
    }
    if (fields & BIT(F_HEADERS)) {
        W_KEY(out, "headers");
        w_bool(out, true);
    }
    return done(out, start);
}
