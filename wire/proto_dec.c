/*
 * Request decoding: a framed message into a proto_request_t (proto_decode_request), and the
 * stream's fast path that decodes the first message without framing it first
 * (proto_decode_first), with a decoder specialised for the decide shape. See proto.h.
 */
#include "proto_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *const proto__op_names[PROTO_OP_COUNT_] = {
    "decide", "settle", "acquire", "release", "ping", "fleet", "members", "charge",
};

const char *proto_op_name(proto_op_t op)
{
    return (unsigned)op < PROTO_OP_COUNT_ ? proto__op_names[op] : "unknown";
}

const char *const proto__field_names[F_COUNT_] = {
    "op", "seq", "subject", "tokens", "reservation", "actual", "lease", "reserved", "v", "headers",
};

const proto_op_fields_t proto__op_fields[PROTO_OP_COUNT_] = {
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
static int __attribute__((format(printf, 4, 5)))
fail(tt_err_t *err, int code, const char *path, const char *fmt, ...)
{
    if (err->code != 0)
        return err->code;
    va_list ap;
    va_start(ap, fmt);
    tt_err_vset(err, code, path, fmt, ap);
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

/* The path of a subject's level: `subject.team`. */
static const char *level_path(char path[TT_ERR_PATH_MAX], proto_str_t level)
{
    char buf[36];
    snprintf(path, TT_ERR_PATH_MAX, "subject.%s", printable(level, buf));
    return path;
}

static int decode_subject(wire_reader_t *r, proto_request_t *req, tt_err_t *err)
{
    uint32_t n;
    int rc = wire_read_map(r, &n);
    if (rc == PROTO_ETYPE)
        return fail(err, PROTO_ETYPE, "subject", "must be a map of level to id");
    if (rc)
        return fail(err, PROTO_EFRAME, "subject", "truncated");
    if (n == 0)
        return fail(err, PROTO_EVALUE, "subject", "names no level");
    if (n > PROTO_MAX_LEVELS)
        return fail(err, PROTO_EVALUE, "subject", "%u levels, at most %d", n, PROTO_MAX_LEVELS);
    char path[TT_ERR_PATH_MAX];
    for (uint32_t i = 0; i < n; i++) {
        proto_pair_t *p = &req->subject[i];
        if (wire_read_str(r, &p->level))
            return fail(err, PROTO_ETYPE, "subject", "level names must be strings");
        if (p->level.len == 0 || p->level.len > PROTO_MAX_LEVEL_NAME)
            return fail(err, PROTO_EVALUE, "subject", "level name of %u bytes, must be 1 to %d",
                        p->level.len, PROTO_MAX_LEVEL_NAME);
        if (wire_read_str(r, &p->id))
            return fail(err, PROTO_ETYPE, level_path(path, p->level), "id must be a string");
        if (p->id.len == 0 || p->id.len > PROTO_MAX_ID)
            return fail(err, PROTO_EVALUE, level_path(path, p->level),
                        "id of %u bytes, must be 1 to %d", p->id.len, PROTO_MAX_ID);
        for (uint32_t j = 0; j < i; j++)
            if (req->subject[j].level.len == p->level.len &&
                memcmp(req->subject[j].level.ptr, p->level.ptr, p->level.len) == 0)
                return fail(err, PROTO_EVALUE, level_path(path, p->level), "level given twice");
    }
    req->nsubject = n;
    return 0;
}

static int decode_count(wire_reader_t *r, const char *name, int64_t *out, tt_err_t *err)
{
    int rc = wire_read_int(r, out);
    if (rc == PROTO_ETYPE)
        return fail(err, PROTO_ETYPE, name, "must be an integer");
    if (rc == 0 && (*out < 0 || *out > PROTO_MAX_COUNT))
        rc = PROTO_EVALUE;
    if (rc)
        return fail(err, PROTO_EVALUE, name, "must be between 0 and 2^40");
    return 0;
}

static int decode_field(wire_reader_t *r, enum field f, proto_request_t *req, int *op,
                        tt_err_t *err)
{
    proto_str_t s;
    char buf[36];
    int rc;
    switch (f) {
    case F_OP:
        if (wire_read_str(r, &s))
            return fail(err, PROTO_ETYPE, "op", "must be a string");
        for (int i = 0; i < PROTO_OP_COUNT_; i++)
            if (wire_str_eq(s, proto__op_names[i])) {
                *op = i;
                return 0;
            }
        return fail(err, PROTO_EOP, "",
                    "unknown op \"%s\" (decide settle charge acquire release ping "
                    "fleet members)",
                    printable(s, buf));
    case F_SEQ:
        rc = wire_read_uint(r, &req->seq);
        if (rc == PROTO_EVALUE)
            return fail(err, PROTO_EVALUE, "seq", "must not be negative");
        if (rc)
            return fail(err, PROTO_ETYPE, "seq", "must be an unsigned integer");
        return 0;
    case F_SUBJECT:
        return decode_subject(r, req, err);
    case F_TOKENS:
        req->has_tokens = true;
        return decode_count(r, "tokens", &req->tokens, err);
    case F_RESERVATION:
        rc = wire_read_uint(r, &req->reservation);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "reservation", "must be an unsigned integer");
        if (rc || req->reservation == 0)
            return fail(err, PROTO_EVALUE, "reservation", "must be the id a tpm decision answered");
        return 0;
    case F_RESERVED:
        return fail(err, PROTO_EFIELD, "reserved", "no longer taken: " SETTLE_BY_RESERVATION);
    case F_ACTUAL:
        return decode_count(r, "actual", &req->actual, err);
    case F_V: {
        uint64_t v;
        rc = wire_read_uint(r, &v);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "v", "must be an unsigned integer");
        if (rc || v < PROTO_V1 || v > PROTO_V_MAX)
            return fail(err, PROTO_EVALUE, "v",
                        "protocol %lld is not served here: this daemon speaks 1 and 2 "
                        "(docs/protocol.md)",
                        rc ? -1ll : (long long)v);
        req->version = (uint8_t)v;
        return 0;
    }
    case F_HEADERS: {
        bool b;
        if (wire_read_bool(r, &b))
            return fail(err, PROTO_ETYPE, "headers", "must be true or false");
        req->headers = b;
        return 0;
    }
    case F_LEASE:
        rc = wire_read_uint(r, &req->lease);
        if (rc == PROTO_ETYPE)
            return fail(err, PROTO_ETYPE, "lease", "must be an unsigned integer");
        if (rc || req->lease == 0)
            return fail(err, PROTO_EVALUE, "lease", "must be a lease id from acquire");
        return 0;
    default:
        return fail(err, PROTO_EFIELD, "", "unknown field");
    }
}

/* Decodes the map at r->pos, leaving r->pos after it when it succeeds. */
static int decode(wire_reader_t *rd, proto_request_t *req, tt_err_t *err)
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
    err->path[0] = 0;
    err->message[0] = 0;
    if (wire_read_map(&r, &n))
        return fail(err, PROTO_EFRAME, "", "a request must be a msgpack map");
    unsigned seen = 0;
    int op = -1;
    char buf[36];
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t key;
        if (wire_read_str(&r, &key)) {
            fail(err, PROTO_ETYPE, "", "field names must be strings");
            if (wire_skip(&r))
                return fail(err, PROTO_EFRAME, "", "truncated");
        } else {
            int f = 0;
            while (f < F_COUNT_ && !wire_str_eq(key, proto__field_names[f]))
                f++;
            const uint8_t *value = r.pos;
            if (f == F_COUNT_)
                fail(err, PROTO_EFIELD, "", "unknown field \"%s\"", printable(key, buf));
            else if (seen & BIT(f))
                fail(err, PROTO_EVALUE, proto__field_names[f], "given twice");
            else if (decode_field(&r, (enum field)f, req, &op, err) == 0)
                seen |= BIT(f);
            /* whatever was wrong with the value, step over all of it */
            if (err->code != 0) {
                r.pos = value;
                if (wire_skip(&r))
                    return fail(err, PROTO_EFRAME, "", "truncated");
            }
        }
        /* after an error, read on only to find a seq the error can echo */
        if (err->code != 0 && (seen & BIT(F_SEQ)))
            break;
    }
    if (err->code != 0)
        return err->code;
    if (op < 0)
        return fail(err, PROTO_EMISSING, "", "missing \"op\"");
    req->op = (proto_op_t)op;
    unsigned extra = seen & ~(BIT(F_OP) | BIT(F_SEQ) | BIT(F_V) | proto__op_fields[op].allowed);
    if (op == PROTO_OP_SETTLE && (extra & BIT(F_SUBJECT)))
        return fail(err, PROTO_EFIELD, "",
                    "op \"settle\" takes no \"subject\": " SETTLE_BY_RESERVATION);
    for (int f = 0; f < F_COUNT_; f++)
        if (extra & BIT(f))
            return fail(err, PROTO_EFIELD, "", "op \"%s\" takes no \"%s\"", proto__op_names[op],
                        proto__field_names[f]);
    unsigned missing = proto__op_fields[op].required & ~seen;
    for (int f = 0; f < F_COUNT_; f++)
        if (missing & BIT(f))
            return fail(err, PROTO_EMISSING, "", "op \"%s\" needs \"%s\"", proto__op_names[op],
                        proto__field_names[f]);
    if (req->version == PROTO_V1) { /* protocol 1 knows one answer: the rendered headers */
        if ((seen & BIT(F_HEADERS)) && !req->headers)
            return fail(err, PROTO_EVALUE, "headers",
                        "false needs \"v\": 2 (a protocol 1 answer always carries "
                        "the headers)");
        req->headers = true;
    }
    rd->pos = r.pos;
    return 0;
}

int proto_decode_request(const uint8_t *msg, size_t len, proto_request_t *req, tt_err_t *err)
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

/* The bytes at p are the literal lit (a key with its header, or a key and its value). */
#define AT(p, lit) (FAST_NEED(sizeof(lit) - 1) && memcmp(p, lit, sizeof(lit) - 1) == 0)

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
        int f;
        /* a key is known by its header byte (its length), then matched with it in one compare */
        switch (FAST_NEED(1) ? p[0] : 0) {
        case 0xa2:
            if (!AT(p, "\xa2"
                       "op"
                       "\xa6"
                       "decide"))
                return -1;
            p += 10;
            f = F_OP;
            break;
        case 0xa3:
            if (!AT(p, "\xa3"
                       "seq"))
                return -1;
            p += 4;
            if (!fast_uint(&p, end, &req->seq))
                return -1;
            f = F_SEQ;
            break;
        case 0xa7:
            if (AT(p, "\xa7"
                      "subject")) {
                p += 8;
                if (!fast_subject(&p, end, req))
                    return -1;
                f = F_SUBJECT;
            } else if (AT(p, "\xa7"
                             "headers")) {
                p += 8;
                if (!FAST_NEED(1) || (p[0] != 0xc2 && p[0] != 0xc3))
                    return -1;
                req->headers = *p++ == 0xc3;
                f = F_HEADERS;
            } else {
                return -1;
            }
            break;
        case 0xa1:
            if (!AT(p, "\xa1"
                       "v"))
                return -1;
            p += 2;
            if (!fast_uint(&p, end, &v) || v < PROTO_V1 || v > PROTO_V_MAX)
                return -1;
            req->version = (uint8_t)v;
            f = F_V;
            break;
        case 0xa6:
            if (!AT(p, "\xa6"
                       "tokens"))
                return -1;
            p += 7;
            if (!fast_uint(&p, end, &v) || v > (uint64_t)PROTO_MAX_COUNT)
                return -1;
            req->has_tokens = true;
            req->tokens = (int64_t)v;
            f = F_TOKENS;
            break;
        default:
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
                       tt_err_t *err)
{
    if (fast_decide(data, len, used, req) == 0)
        return 0;
    wire_reader_t r = {.pos = data, .end = data + len};
    if (len == 0 || !wire_is_map_byte(data[0]) || decode(&r, req, err) != 0)
        return -1;
    *used = (size_t)(r.pos - data);
    return 0;
}
