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

#include <msgpack.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *proto_code_name(int err)
{
    switch (err) {
    case PROTO_EFRAME:
        return "bad_frame";
    case PROTO_ETOOBIG:
        return "too_large";
    case PROTO_EDEEP:
        return "too_deep";
    case PROTO_ETYPE:
        return "wrong_type";
    case PROTO_EOP:
        return "unknown_op";
    case PROTO_EMISSING:
        return "missing_field";
    case PROTO_EVALUE:
        return "bad_value";
    case PROTO_EFIELD:
        return "unknown_field";
    default:
        return "error";
    }
}

static const char *const op_names[PROTO_OP_COUNT_] = {
    "decide", "settle", "acquire", "release", "ping", "fleet", "members",
};

const char *proto_op_name(proto_op_t op)
{
    return (unsigned)op < PROTO_OP_COUNT_ ? op_names[op] : "unknown";
}

bool proto_str_eq(proto_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/*
 * Reads the header of the value at p: its header size, the bytes of payload after the header,
 * and how many child values follow (map entries count twice). Returns 0, PROTO_EMORE when the
 * header itself is cut, PROTO_EFRAME for 0xc1 (which no msgpack value starts with).
 */
static int head(const uint8_t *p, const uint8_t *end, size_t *hdr, uint64_t *payload,
                uint64_t *children)
{
    if (p >= end)
        return PROTO_EMORE;
    uint8_t b = *p;
    size_t h = 1;
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
    } else {
        switch (b) {
        case 0xc1:
            return PROTO_EFRAME;
        case 0xc4:
        case 0xd9:
            lenbytes = 1;
            break;
        case 0xc5:
        case 0xda:
            lenbytes = 2;
            break;
        case 0xc6:
        case 0xdb:
            lenbytes = 4;
            break;
        case 0xc7:
            lenbytes = 1;
            kind = 3;
            break;
        case 0xc8:
            lenbytes = 2;
            kind = 3;
            break;
        case 0xc9:
            lenbytes = 4;
            kind = 3;
            break;
        case 0xca:
            pl = 4;
            break;
        case 0xcb:
            pl = 8;
            break;
        case 0xcc:
        case 0xd0:
            pl = 1;
            break;
        case 0xcd:
        case 0xd1:
            pl = 2;
            break;
        case 0xce:
        case 0xd2:
            pl = 4;
            break;
        case 0xcf:
        case 0xd3:
            pl = 8;
            break;
        case 0xd4:
            pl = 2;
            break;
        case 0xd5:
            pl = 3;
            break;
        case 0xd6:
            pl = 5;
            break;
        case 0xd7:
            pl = 9;
            break;
        case 0xd8:
            pl = 17;
            break;
        case 0xdc:
            lenbytes = 2;
            kind = 1;
            break;
        case 0xdd:
            lenbytes = 4;
            kind = 1;
            break;
        case 0xde:
            lenbytes = 2;
            kind = 2;
            break;
        case 0xdf:
            lenbytes = 4;
            kind = 2;
            break;
        default:
            return PROTO_EFRAME;
        }
    }
    if (lenbytes) {
        if ((size_t)(end - p) < 1u + (size_t)lenbytes)
            return PROTO_EMORE;
        uint64_t n = be(p + 1, lenbytes);
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

static bool is_map_byte(uint8_t b)
{
    return (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf;
}

int proto_frame(const uint8_t *data, size_t len, size_t *msg_len, bool *deep)
{
    uint64_t left[PROTO_MAX_DEPTH]; /* values still to read in each open container */
    int depth = 0;
    uint64_t pending = 1; /* values still to read in the whole message */
    size_t pos = 0;
    *deep = false;
    if (len == 0)
        return PROTO_EMORE;
    if (!is_map_byte(data[0]))
        return PROTO_EFRAME;
    for (;;) {
        size_t hdr;
        uint64_t payload, children;
        int rc = head(data + pos, data + len, &hdr, &payload, &children);
        if (rc == PROTO_EMORE)
            return len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
        if (rc)
            return rc;
        if (payload > PROTO_MAX_MESSAGE || pos + hdr + payload > PROTO_MAX_MESSAGE)
            return PROTO_ETOOBIG;
        if (pos + hdr + payload > len)
            return PROTO_EMORE;
        pos += hdr + (size_t)payload;
        pending--;
        if (depth > 0)
            left[depth - 1]--;
        if (children > 0) {
            /* every pending value needs at least one more byte within the bound */
            if (children > PROTO_MAX_MESSAGE || pending + children > PROTO_MAX_MESSAGE - pos)
                return PROTO_ETOOBIG;
            pending += children;
            if (depth < PROTO_MAX_DEPTH) {
                left[depth++] = children;
            } else {
                *deep = true;
                left[depth - 1] += children;
            }
        }
        while (depth > 0 && left[depth - 1] == 0)
            depth--;
        if (pending == 0) {
            *msg_len = pos;
            return 0;
        }
        if (pos >= len)
            return len >= PROTO_MAX_MESSAGE ? PROTO_ETOOBIG : PROTO_EMORE;
    }
}

/* ---- pull reader ---- */

static int need(const proto_reader_t *r, size_t n)
{
    return (size_t)(r->end - r->pos) >= n ? 0 : PROTO_EFRAME;
}

static int read_len(proto_reader_t *r, uint8_t fix_lo, uint8_t fix_hi, uint8_t fix_mask,
                    uint8_t b16, uint8_t b32, uint8_t b8, uint32_t *n)
{
    if (need(r, 1))
        return PROTO_EFRAME;
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
        return PROTO_ETYPE;
    if (need(r, 1 + (size_t)lb))
        return PROTO_EFRAME;
    *n = (uint32_t)be(r->pos + 1, lb);
    r->pos += 1 + lb;
    return 0;
}

int proto_read_map(proto_reader_t *r, uint32_t *n)
{
    const uint8_t *start = r->pos;
    int rc = read_len(r, 0x80, 0x8f, 0x0f, 0xde, 0xdf, 0, n);
    /* each entry takes at least two bytes: refuse a header the message cannot hold */
    if (rc == 0 && (uint64_t)*n * 2 > (uint64_t)(r->end - r->pos)) {
        r->pos = start;
        return PROTO_EFRAME;
    }
    return rc;
}

int proto_read_array(proto_reader_t *r, uint32_t *n)
{
    const uint8_t *start = r->pos;
    int rc = read_len(r, 0x90, 0x9f, 0x0f, 0xdc, 0xdd, 0, n);
    if (rc == 0 && (uint64_t)*n > (uint64_t)(r->end - r->pos)) {
        r->pos = start;
        return PROTO_EFRAME;
    }
    return rc;
}

int proto_read_str(proto_reader_t *r, proto_str_t *s)
{
    const uint8_t *start = r->pos;
    uint32_t n;
    int rc = read_len(r, 0xa0, 0xbf, 0x1f, 0xda, 0xdb, 0xd9, &n);
    if (rc)
        return rc;
    if (need(r, n)) {
        r->pos = start;
        return PROTO_EFRAME;
    }
    s->ptr = (const char *)r->pos;
    s->len = n;
    r->pos += n;
    return 0;
}

/* Reads any integer as a sign and a magnitude. */
static int read_integer(proto_reader_t *r, bool *neg, uint64_t *mag)
{
    if (need(r, 1))
        return PROTO_EFRAME;
    uint8_t b = r->pos[0];
    if (b <= 0x7f) {
        *neg = false;
        *mag = b;
        r->pos++;
        return 0;
    }
    if (b >= 0xe0) {
        *neg = true;
        *mag = (uint64_t)(-(int64_t)(int8_t)b);
        r->pos++;
        return 0;
    }
    int n;
    bool is_signed;
    switch (b) {
    case 0xcc:
        n = 1;
        is_signed = false;
        break;
    case 0xcd:
        n = 2;
        is_signed = false;
        break;
    case 0xce:
        n = 4;
        is_signed = false;
        break;
    case 0xcf:
        n = 8;
        is_signed = false;
        break;
    case 0xd0:
        n = 1;
        is_signed = true;
        break;
    case 0xd1:
        n = 2;
        is_signed = true;
        break;
    case 0xd2:
        n = 4;
        is_signed = true;
        break;
    case 0xd3:
        n = 8;
        is_signed = true;
        break;
    default:
        return PROTO_ETYPE;
    }
    if (need(r, 1 + (size_t)n))
        return PROTO_EFRAME;
    uint64_t v = be(r->pos + 1, n);
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

int proto_read_int(proto_reader_t *r, int64_t *v)
{
    const uint8_t *start = r->pos;
    bool neg;
    uint64_t mag;
    int rc = read_integer(r, &neg, &mag);
    if (rc)
        return rc;
    if (neg ? mag > (uint64_t)INT64_MAX + 1 : mag > (uint64_t)INT64_MAX) {
        r->pos = start;
        return PROTO_EVALUE;
    }
    *v = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return 0;
}

int proto_read_uint(proto_reader_t *r, uint64_t *v)
{
    const uint8_t *start = r->pos;
    bool neg;
    uint64_t mag;
    int rc = read_integer(r, &neg, &mag);
    if (rc)
        return rc;
    if (neg && mag != 0) {
        r->pos = start;
        return PROTO_EVALUE;
    }
    *v = mag;
    return 0;
}

int proto_read_bool(proto_reader_t *r, bool *v)
{
    if (need(r, 1))
        return PROTO_EFRAME;
    if (r->pos[0] != 0xc2 && r->pos[0] != 0xc3)
        return PROTO_ETYPE;
    *v = r->pos[0] == 0xc3;
    r->pos++;
    return 0;
}

int proto_read_nil(proto_reader_t *r)
{
    if (need(r, 1))
        return PROTO_EFRAME;
    if (r->pos[0] != 0xc0)
        return PROTO_ETYPE;
    r->pos++;
    return 0;
}

int proto_skip(proto_reader_t *r)
{
    uint64_t pending = 1;
    const uint8_t *p = r->pos;
    while (pending > 0) {
        size_t hdr;
        uint64_t payload, children;
        if (head(p, r->end, &hdr, &payload, &children))
            return PROTO_EFRAME;
        if (hdr + payload > (uint64_t)(r->end - p))
            return PROTO_EFRAME;
        p += hdr + payload;
        pending--;
        if (children > (uint64_t)(r->end - p) || pending + children > (uint64_t)(r->end - p))
            return PROTO_EFRAME;
        pending += children;
    }
    r->pos = p;
    return 0;
}

/* ---- request decoding ---- */

enum field {
    F_OP = 0,
    F_SEQ,
    F_SUBJECT,
    F_TOKENS,
    F_RESERVED,
    F_ACTUAL,
    F_LEASE,
    F_COUNT_,
};

static const char *const field_names[F_COUNT_] = {
    "op", "seq", "subject", "tokens", "reserved", "actual", "lease",
};

#define BIT(f) (1u << (f))
/* What each op takes (op and seq go everywhere) and what it cannot do without. */
static const struct {
    unsigned allowed, required;
} op_fields[PROTO_OP_COUNT_] = {
    [PROTO_OP_DECIDE] = {BIT(F_SUBJECT) | BIT(F_TOKENS), BIT(F_SUBJECT)},
    [PROTO_OP_SETTLE] = {BIT(F_SUBJECT) | BIT(F_RESERVED) | BIT(F_ACTUAL),
                         BIT(F_SUBJECT) | BIT(F_RESERVED) | BIT(F_ACTUAL)},
    [PROTO_OP_ACQUIRE] = {BIT(F_SUBJECT), BIT(F_SUBJECT)},
    [PROTO_OP_RELEASE] = {BIT(F_LEASE), BIT(F_LEASE)},
    [PROTO_OP_PING] = {0, 0},
    [PROTO_OP_FLEET] = {0, 0},
    [PROTO_OP_MEMBERS] = {0, 0},
};

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

static int decode_subject(proto_reader_t *r, proto_request_t *req, proto_error_t *err)
{
    uint32_t n;
    int rc = proto_read_map(r, &n);
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
        if (proto_read_str(r, &p->level))
            return fail(err, PROTO_ETYPE, "subject: level names must be strings");
        if (p->level.len == 0 || p->level.len > PROTO_MAX_LEVEL_NAME)
            return fail(err, PROTO_EVALUE, "subject: level name of %u bytes, must be 1 to %d",
                        p->level.len, PROTO_MAX_LEVEL_NAME);
        if (proto_read_str(r, &p->id))
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

static int decode_count(proto_reader_t *r, const char *name, int64_t *out, proto_error_t *err)
{
    int rc = proto_read_int(r, out);
    if (rc == PROTO_ETYPE)
        return fail(err, PROTO_ETYPE, "%s: must be an integer", name);
    if (rc == 0 && (*out < 0 || *out > PROTO_MAX_COUNT))
        rc = PROTO_EVALUE;
    if (rc)
        return fail(err, PROTO_EVALUE, "%s: must be between 0 and 2^40", name);
    return 0;
}

static int decode_field(proto_reader_t *r, enum field f, proto_request_t *req, int *op,
                        proto_error_t *err)
{
    proto_str_t s;
    char buf[36];
    int rc;
    switch (f) {
    case F_OP:
        if (proto_read_str(r, &s))
            return fail(err, PROTO_ETYPE, "op: must be a string");
        for (int i = 0; i < PROTO_OP_COUNT_; i++)
            if (proto_str_eq(s, op_names[i])) {
                *op = i;
                return 0;
            }
        return fail(err, PROTO_EOP,
                    "unknown op \"%s\" (decide settle acquire release ping "
                    "fleet members)",
                    printable(s, buf));
    case F_SEQ:
        rc = proto_read_uint(r, &req->seq);
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
    case F_RESERVED:
        return decode_count(r, "reserved", &req->reserved, err);
    case F_ACTUAL:
        return decode_count(r, "actual", &req->actual, err);
    case F_LEASE:
        rc = proto_read_uint(r, &req->lease);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "lease: must be an unsigned integer");
        if (rc || req->lease == 0)
            return fail(err, PROTO_EVALUE, "lease: must be a lease id from acquire");
        return 0;
    default:
        return fail(err, PROTO_EFIELD, "unknown field");
    }
}

int proto_decode_request(const uint8_t *msg, size_t len, proto_request_t *req, proto_error_t *err)
{
    proto_reader_t r = {msg, msg + len};
    uint32_t n;
    req->seq = 0;
    req->nsubject = 0;
    req->has_tokens = false;
    req->tokens = req->reserved = req->actual = 0;
    req->lease = 0;
    err->code = 0;
    err->message[0] = 0;
    if (proto_read_map(&r, &n))
        return fail(err, PROTO_EFRAME, "a request must be a msgpack map");
    unsigned seen = 0;
    int op = -1;
    char buf[36];
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t key;
        if (proto_read_str(&r, &key)) {
            fail(err, PROTO_ETYPE, "field names must be strings");
            if (proto_skip(&r))
                return fail(err, PROTO_EFRAME, "truncated");
        } else {
            int f = 0;
            while (f < F_COUNT_ && !proto_str_eq(key, field_names[f]))
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
                if (proto_skip(&r))
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
    unsigned extra = seen & ~(BIT(F_OP) | BIT(F_SEQ) | op_fields[op].allowed);
    for (int f = 0; f < F_COUNT_; f++)
        if (extra & BIT(f))
            return fail(err, PROTO_EFIELD, "op \"%s\" takes no \"%s\"", op_names[op],
                        field_names[f]);
    unsigned missing = op_fields[op].required & ~seen;
    for (int f = 0; f < F_COUNT_; f++)
        if (missing & BIT(f))
            return fail(err, PROTO_EMISSING, "op \"%s\" needs \"%s\"", op_names[op],
                        field_names[f]);
    return 0;
}

/* ---- output ---- */

void proto_out_free(proto_out_t *out)
{
    free(out->data);
    out->data = NULL;
    out->len = out->cap = 0;
}

int proto_out_append(proto_out_t *out, const void *bytes, size_t n)
{
    if (out->cap - out->len < n) {
        size_t cap = out->cap ? out->cap : 256;
        while (cap - out->len < n)
            cap *= 2;
        uint8_t *p = realloc(out->data, cap);
        if (!p) {
            out->failed = true;
            return -1;
        }
        out->data = p;
        out->cap = cap;
    }
    memcpy(out->data + out->len, bytes, n);
    out->len += n;
    return 0;
}

static int out_write(void *data, const char *buf, size_t len)
{
    return proto_out_append(data, buf, len);
}

#define KEY(pk, lit)                                                                               \
    (msgpack_pack_str(pk, sizeof(lit) - 1), msgpack_pack_str_body(pk, lit, sizeof(lit) - 1))

static void pack_str(msgpack_packer *pk, proto_str_t s)
{
    msgpack_pack_str(pk, s.len);
    msgpack_pack_str_body(pk, s.ptr, s.len);
}

static void pack_cstr(msgpack_packer *pk, const char *s)
{
    pack_str(pk, (proto_str_t){s, (uint32_t)strlen(s)});
}

static msgpack_packer packer(proto_out_t *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, out_write);
    return pk;
}

static int done(proto_out_t *out, size_t start)
{
    if (out->failed) {
        out->len = start; /* never leave half a message behind */
        return -1;
    }
    return 0;
}

/* Opens an answer: a map of `fields` entries (seq included) and the seq. */
static msgpack_packer open_answer(proto_out_t *out, uint32_t fields, uint64_t seq)
{
    msgpack_packer pk = packer(out);
    msgpack_pack_map(&pk, fields);
    KEY(&pk, "seq");
    msgpack_pack_uint64(&pk, seq);
    return pk;
}

int proto_enc_decision(proto_out_t *out, uint64_t seq, const proto_decision_t *d)
{
    size_t start = out->len;
    bool has_limit = d->limit.len > 0, has_rem = d->remaining >= 0, has_code = d->code.len > 0;
    msgpack_packer pk = open_answer(out, 7u + has_limit + has_rem + has_code + d->has_lease, seq);
    KEY(&pk, "admit");
    d->admit ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    KEY(&pk, "verdict");
    pack_str(&pk, d->verdict);
    if (has_limit) {
        KEY(&pk, "limit");
        pack_str(&pk, d->limit);
    }
    if (has_rem) {
        KEY(&pk, "remaining");
        msgpack_pack_int64(&pk, d->remaining);
    }
    KEY(&pk, "retry_after");
    msgpack_pack_int64(&pk, d->retry_after);
    KEY(&pk, "reset_after");
    msgpack_pack_int64(&pk, d->reset_after);
    if (has_code) {
        KEY(&pk, "code");
        pack_str(&pk, d->code);
    }
    KEY(&pk, "soft_denied");
    msgpack_pack_array(&pk, d->nsoft);
    for (uint32_t i = 0; i < d->nsoft; i++)
        pack_str(&pk, d->soft_denied[i]);
    KEY(&pk, "headers");
    msgpack_pack_map(&pk, d->nheaders);
    for (uint32_t i = 0; i < d->nheaders; i++) {
        pack_str(&pk, d->headers[i].name);
        pack_str(&pk, d->headers[i].value);
    }
    if (d->has_lease) {
        KEY(&pk, "lease");
        msgpack_pack_uint64(&pk, d->lease);
    }
    return done(out, start);
}

int proto_enc_settled(proto_out_t *out, uint64_t seq, int64_t settled)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 2, seq);
    KEY(&pk, "settled");
    msgpack_pack_int64(&pk, settled);
    return done(out, start);
}

int proto_enc_released(proto_out_t *out, uint64_t seq, bool released)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 2, seq);
    KEY(&pk, "released");
    released ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    return done(out, start);
}

int proto_enc_pong(proto_out_t *out, uint64_t seq, const char *version)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 3, seq);
    KEY(&pk, "pong");
    msgpack_pack_true(&pk);
    KEY(&pk, "version");
    pack_cstr(&pk, version);
    return done(out, start);
}

int proto_enc_error(proto_out_t *out, uint64_t seq, const char *code, const char *message)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 2, seq);
    KEY(&pk, "error");
    msgpack_pack_map(&pk, 2);
    KEY(&pk, "code");
    pack_cstr(&pk, code);
    KEY(&pk, "message");
    pack_cstr(&pk, message);
    return done(out, start);
}

int proto_enc_fleet(proto_out_t *out, uint64_t seq, const char *node, int64_t n,
                    const proto_fleet_limit_t *rows, uint32_t nrows)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 4, seq);
    KEY(&pk, "node");
    pack_cstr(&pk, node);
    KEY(&pk, "n");
    msgpack_pack_int64(&pk, n);
    KEY(&pk, "limits");
    msgpack_pack_array(&pk, nrows);
    for (uint32_t i = 0; i < nrows; i++) {
        const proto_fleet_limit_t *l = &rows[i];
        msgpack_pack_map(&pk, 10 + (l->state.len > 0));
        KEY(&pk, "id");
        pack_str(&pk, l->id);
        KEY(&pk, "type");
        pack_str(&pk, l->type);
        KEY(&pk, "store");
        pack_str(&pk, l->store);
        KEY(&pk, "algorithm");
        pack_str(&pk, l->algorithm);
        KEY(&pk, "amount");
        msgpack_pack_int64(&pk, l->amount);
        KEY(&pk, "period_s");
        msgpack_pack_int64(&pk, l->period_s);
        KEY(&pk, "burst");
        msgpack_pack_int64(&pk, l->burst);
        KEY(&pk, "n");
        msgpack_pack_int64(&pk, l->n);
        KEY(&pk, "sustained_bound");
        msgpack_pack_int64(&pk, l->sustained_bound);
        KEY(&pk, "burst_bound");
        msgpack_pack_int64(&pk, l->burst_bound);
        if (l->state.len > 0) {
            KEY(&pk, "state");
            pack_str(&pk, l->state);
        }
    }
    return done(out, start);
}

int proto_enc_members(proto_out_t *out, uint64_t seq, int64_t live, const proto_member_t *rows,
                      uint32_t nrows)
{
    size_t start = out->len;
    msgpack_packer pk = open_answer(out, 3, seq);
    KEY(&pk, "live");
    msgpack_pack_int64(&pk, live);
    KEY(&pk, "members");
    msgpack_pack_array(&pk, nrows);
    for (uint32_t i = 0; i < nrows; i++) {
        const proto_member_t *m = &rows[i];
        msgpack_pack_map(&pk, 7);
        KEY(&pk, "id");
        pack_str(&pk, m->id);
        KEY(&pk, "address");
        pack_str(&pk, m->address);
        KEY(&pk, "state");
        pack_str(&pk, m->state);
        KEY(&pk, "incarnation");
        msgpack_pack_uint64(&pk, m->incarnation);
        KEY(&pk, "generation");
        msgpack_pack_uint64(&pk, m->generation);
        KEY(&pk, "last_heard_ms");
        msgpack_pack_int64(&pk, m->last_heard_ms);
        KEY(&pk, "self");
        m->self ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    }
    return done(out, start);
}

int proto_enc_request(proto_out_t *out, const proto_request_t *req)
{
    if ((unsigned)req->op >= PROTO_OP_COUNT_)
        return -1;
    size_t start = out->len;
    msgpack_packer pk = packer(out);
    unsigned fields = op_fields[req->op].allowed;
    if (req->op == PROTO_OP_DECIDE && !req->has_tokens)
        fields &= ~BIT(F_TOKENS);
    msgpack_pack_map(&pk, 2 + (unsigned)__builtin_popcount(fields));
    KEY(&pk, "op");
    pack_cstr(&pk, op_names[req->op]);
    KEY(&pk, "seq");
    msgpack_pack_uint64(&pk, req->seq);
    if (fields & BIT(F_SUBJECT)) {
        KEY(&pk, "subject");
        msgpack_pack_map(&pk, req->nsubject);
        for (uint32_t i = 0; i < req->nsubject; i++) {
            pack_str(&pk, req->subject[i].level);
            pack_str(&pk, req->subject[i].id);
        }
    }
    if (fields & BIT(F_TOKENS)) {
        KEY(&pk, "tokens");
        msgpack_pack_int64(&pk, req->tokens);
    }
    if (fields & BIT(F_RESERVED)) {
        KEY(&pk, "reserved");
        msgpack_pack_int64(&pk, req->reserved);
    }
    if (fields & BIT(F_ACTUAL)) {
        KEY(&pk, "actual");
        msgpack_pack_int64(&pk, req->actual);
    }
    if (fields & BIT(F_LEASE)) {
        KEY(&pk, "lease");
        msgpack_pack_uint64(&pk, req->lease);
    }
    return done(out, start);
}

/* ---- JSON ---- */

static int json_str(proto_out_t *out, const char *p, size_t n)
{
    proto_out_append(out, "\"", 1);
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            run++;
            continue;
        }
        proto_out_append(out, p + i - run, run);
        run = 0;
        char esc[8];
        int k = (c == '"' || c == '\\') ? snprintf(esc, sizeof(esc), "\\%c", c)
                                        : snprintf(esc, sizeof(esc), "\\u%04x", c);
        proto_out_append(out, esc, (size_t)k);
    }
    proto_out_append(out, p + n - run, run);
    return proto_out_append(out, "\"", 1);
}

static int json_value(proto_reader_t *r, proto_out_t *out, int depth)
{
    if (depth > PROTO_MAX_DEPTH)
        return PROTO_EDEEP;
    if (need(r, 1))
        return PROTO_EFRAME;
    uint8_t b = r->pos[0];
    uint32_t n;
    proto_str_t s;
    int64_t i64;
    uint64_t u64;
    bool bv;
    char num[32];
    if (proto_read_map(r, &n) == 0) {
        proto_out_append(out, "{", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                proto_out_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
            proto_out_append(out, ":", 1);
            if ((rc = json_value(r, out, depth + 1)))
                return rc;
        }
        return proto_out_append(out, "}", 1);
    }
    if (proto_read_array(r, &n) == 0) {
        proto_out_append(out, "[", 1);
        for (uint32_t i = 0; i < n; i++) {
            if (i)
                proto_out_append(out, ",", 1);
            int rc = json_value(r, out, depth + 1);
            if (rc)
                return rc;
        }
        return proto_out_append(out, "]", 1);
    }
    if (proto_read_str(r, &s) == 0)
        return json_str(out, s.ptr, s.len);
    if (b == 0xc4 || b == 0xc5 || b == 0xc6) { /* bin: same layout as str8/16/32 */
        int lb = b == 0xc4 ? 1 : b == 0xc5 ? 2 : 4;
        if (need(r, 1 + (size_t)lb) || need(r, 1 + lb + be(r->pos + 1, lb)))
            return PROTO_EFRAME;
        size_t len = (size_t)be(r->pos + 1, lb);
        int rc = json_str(out, (const char *)r->pos + 1 + lb, len);
        r->pos += 1 + lb + len;
        return rc;
    }
    if (proto_read_int(r, &i64) == 0)
        return proto_out_append(out, num,
                                (size_t)snprintf(num, sizeof(num), "%lld", (long long)i64));
    if (proto_read_uint(r, &u64) == 0)
        return proto_out_append(
            out, num, (size_t)snprintf(num, sizeof(num), "%llu", (unsigned long long)u64));
    if (proto_read_bool(r, &bv) == 0)
        return bv ? proto_out_append(out, "true", 4) : proto_out_append(out, "false", 5);
    if (b == 0xca || b == 0xcb) {
        if (need(r, b == 0xca ? 5 : 9))
            return PROTO_EFRAME;
        double d;
        if (b == 0xca) {
            uint32_t w = (uint32_t)be(r->pos + 1, 4);
            float f;
            memcpy(&f, &w, 4);
            d = f;
        } else {
            uint64_t w = be(r->pos + 1, 8);
            memcpy(&d, &w, 8);
        }
        r->pos += b == 0xca ? 5 : 9;
        return proto_out_append(out, num, (size_t)snprintf(num, sizeof(num), "%.17g", d));
    }
    /* nil, ext: null */
    if (proto_skip(r))
        return PROTO_EFRAME;
    return proto_out_append(out, "null", 4);
}

int proto_to_json(proto_reader_t *r, proto_out_t *out)
{
    int rc = json_value(r, out, 0);
    if (rc)
        return rc;
    return out->failed ? -1 : 0;
}
