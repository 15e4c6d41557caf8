/*
 * The commands that run the Lua assets, and the checking of their replies. A reply crosses a
 * trust boundary (a Redis we do not own, a proxy, a port some other program listens on), so
 * every field is checked for type and range before a decision rests on it.
 */
#include "script.h"
#include "tt_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* redis/embed.cmake writes this from redis/lua/ at build time, in rds_script_id_t order. */
extern const rds_script_t rds_scripts[RDS_SCRIPT_COUNT];

const rds_script_t *rds_script(rds_script_id_t id)
{
    return (unsigned)id < RDS_SCRIPT_COUNT ? &rds_scripts[id] : NULL;
}

int rds_script_for(const ra_limiter_t *l)
{
    switch (l->algorithm) {
    case RA_GCRA:
        return RDS_SCRIPT_GCRA;
    case RA_FIXED_WINDOW:
    case RA_SLIDING_WINDOW:
    case RA_ENVOY_WINDOW:
        return RDS_SCRIPT_WINDOW;
    default:
        return -1; /* token_bucket: arm turns it down with the seed's message */
    }
}

int rds_key(char *buf, uint64_t identity, const char *id, size_t idlen)
{
    static const char prefix[] = "tokentriage:{";
    size_t head = sizeof(prefix) - 1 + 16 + 1;
    if (idlen > RDS_KEY_MAX - head - 1)
        return RDS_EARG;
    memcpy(buf, prefix, sizeof(prefix) - 1);
    for (int i = 0; i < 16; i++) /* the identity in 16 lowercase hex digits, as %016x */
        buf[sizeof(prefix) - 1 + i] = "0123456789abcdef"[(identity >> (60 - 4 * i)) & 15];
    buf[head - 1] = ':';
    memcpy(buf + head, id, idlen);
    buf[head + idlen] = '}';
    return (int)(head + idlen + 1);
}

/* The operations, as the scripts spell them; a settle takes one argument more. */
enum { VERB_STEP, VERB_SETTLE, VERB_FIXED, VERB_SLIDING, VERB_ENVOY, VERB_ENVOY_SETTLE };
static const struct {
    const char *name;
    uint8_t len, argc;
} verbs[] = {{"step", 4, 5},    {"settle", 6, 6}, {"fixed", 5, 5},
             {"sliding", 7, 5}, {"envoy", 5, 5},  {"envoy-settle", 12, 6}};

void rds_batch_init(rds_batch_t *b, rds_script_id_t script)
{
    b->script = script;
    b->n = 0;
    b->key_bytes = 0;
}

int rds_batch_add(rds_batch_t *b, const ra_limiter_t *l, const char *key, size_t keylen,
                  const rds_op_t *op)
{
    int script = rds_script_for(l);
    if (script < 0 || keylen > RDS_KEY_MAX ||
        (op->settle && script != RDS_SCRIPT_GCRA && l->algorithm != RA_ENVOY_WINDOW))
        return RDS_EARG;
    if (script != (int)b->script || b->n == RDS_BATCH_MAX ||
        keylen > RDS_BATCH_KEY_BYTES - b->key_bytes)
        return RDS_EFULL;
    rds_item_t *it = &b->item[b->n++];
    it->key_off = (uint16_t)b->key_bytes;
    it->key_len = (uint16_t)keylen;
    memcpy(b->keys + b->key_bytes, key, keylen);
    b->key_bytes += (uint32_t)keylen;
    it->has_now = op->has_now;
    it->now_ns = op->now_ns;
    if (script == RDS_SCRIPT_GCRA) {
        it->verb = op->settle ? VERB_SETTLE : VERB_STEP;
        it->p1 = l->emission_ns;
        it->p2 = l->tolerance_ns;
    } else {
        it->verb = l->algorithm == RA_FIXED_WINDOW   ? VERB_FIXED
                   : l->algorithm == RA_ENVOY_WINDOW ? (op->settle ? VERB_ENVOY_SETTLE : VERB_ENVOY)
                                                     : VERB_SLIDING;
        it->p1 = l->amount;
        it->p2 = l->period_ns;
    }
    it->x = op->settle ? op->reserved : op->cost;
    it->y = op->actual;
    return 0;
}

/* A RESP length line: "$<n>\r\n", or "*<n>\r\n" when type is '*'. Lengths here are mostly
 * one or two digits. */
static char *put_len(char *at, char type, size_t n)
{
    *at++ = type;
    if (n < 10) {
        *at++ = (char)('0' + n);
    } else if (n < 100) {
        *at++ = (char)('0' + n / 10);
        *at++ = (char)('0' + n % 10);
    } else {
        char num[TT_FMT_I64_MAX];
        size_t k = tt_fmt_i64(num, (int64_t)n);
        memcpy(at, num, k);
        at += k;
    }
    *at++ = '\r';
    *at++ = '\n';
    return at;
}

static char *put(char *at, const char *s, size_t n)
{
    at = put_len(at, '$', n);
    memcpy(at, s, n);
    at += n;
    *at++ = '\r';
    *at++ = '\n';
    return at;
}

static char *put_i64(char *at, int64_t v)
{
    char num[TT_FMT_I64_MAX];
    return put(at, num, tt_fmt_i64(num, v));
}

/* A bulk's framing ("$", up to 20 digits, two CRLFs) and an int64's digits, bounded. */
#define BULK_FRAME 25
#define BULK_I64 (BULK_FRAME + TT_FMT_I64_MAX)

size_t rds_batch_bound(const rds_batch_t *b, bool eval)
{
    /* *argc, EVALSHA or EVAL, the SHA or the body, n */
    size_t head = 3 * BULK_I64 + BULK_FRAME + (eval ? rds_script(b->script)->len : RDS_SHA_LEN);
    return head + b->key_bytes + b->n * (BULK_FRAME + 6 * BULK_I64);
}

size_t rds_batch_format(const rds_batch_t *b, const char *sha, bool eval, char *out)
{
    size_t argc = 3 + b->n;
    for (uint32_t i = 0; i < b->n; i++)
        argc += verbs[b->item[i].verb].argc;
    char *at = put_len(out, '*', argc);
    if (eval) {
        const rds_script_t *s = rds_script(b->script);
        at = put(at, "EVAL", 4);
        at = put(at, s->body, s->len);
    } else {
        at = put(at, "EVALSHA", 7);
        at = put(at, sha, RDS_SHA_LEN);
    }
    at = put_i64(at, b->n);
    for (uint32_t i = 0; i < b->n; i++)
        at = put(at, b->keys + b->item[i].key_off, b->item[i].key_len);
    /* a run of operations on one limit repeats its verb and two parameters: written once */
    const rds_item_t *prev = NULL;
    const char *prev_at = NULL;
    size_t prev_len = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const rds_item_t *it = &b->item[i];
        if (prev != NULL && prev->verb == it->verb && prev->p1 == it->p1 && prev->p2 == it->p2) {
            memcpy(at, prev_at, prev_len);
            at += prev_len;
        } else {
            char *start = at;
            at = put(at, verbs[it->verb].name, verbs[it->verb].len);
            at = put_i64(at, it->p1);
            at = put_i64(at, it->p2);
            prev = it;
            prev_at = start;
            prev_len = (size_t)(at - start);
        }
        at = it->has_now ? put_i64(at, it->now_ns) : put(at, "", 0);
        at = put_i64(at, it->x);
        if (it->verb == VERB_SETTLE || it->verb == VERB_ENVOY_SETTLE)
            at = put_i64(at, it->y);
    }
    return (size_t)(at - out);
}

static const char *type_name(int type)
{
    switch (type) {
    case REDIS_REPLY_STRING:
        return "a bulk string";
    case REDIS_REPLY_ARRAY:
        return "an array";
    case REDIS_REPLY_INTEGER:
        return "an integer";
    case REDIS_REPLY_NIL:
        return "nil";
    case REDIS_REPLY_STATUS:
        return "a status";
    case REDIS_REPLY_ERROR:
        return "an error";
    default:
        return "an unknown type";
    }
}

/* A strict decimal int64: optional '-', 1..19 digits, nothing else, in range. Digit by digit
 * on the magnitude (strtoll's locale and errno handling cost more than the rest of a reply). */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
    size_t i = n > 0 && s[0] == '-';
    if (i == n || n - i > 19)
        return -1;
    uint64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9)
            return -1;
        v = v * 10 + d; /* 19 digits stay below 2^64 */
    }
    bool negative = s[0] == '-';
    if (v > (uint64_t)INT64_MAX + negative)
        return -1;
    *out = negative ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static const char *const field_names[] = {"admit",         "unfittable",    "remaining",
                                          "retry_after_s", "reset_after_s", "state"};

/* Reads element i of a script reply: an integer in [lo, hi]; the state is always a decimal
 * string (it exceeds what Lua's doubles carry), remaining one when it is too large for an
 * integer reply from Lua (the scripts answer it as a number below 2^52, which is cheaper). */
static int read_field(const redisReply *reply, size_t i, int64_t lo, int64_t hi, int64_t *out,
                      tt_err_t *err)
{
    const redisReply *e = reply->element[i];
    bool may_string = i == 2 || i == 5, must_string = i == 5;
    bool want_string = e && may_string && (must_string || e->type == REDIS_REPLY_STRING);
    if (e == NULL || e->type != (want_string ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER))
        return tt_err_set(err, RDS_EREPLY, "", "redis: script reply field %zu (%s) is %s, want %s",
                          i + 1, field_names[i], e ? type_name(e->type) : "missing",
                          must_string  ? "a decimal string"
                          : may_string ? "an integer or a decimal string"
                                       : "an integer");
    int64_t v = e->integer;
    if (want_string && parse_i64(e->str, e->len, &v) < 0)
        return tt_err_set(err, RDS_EREPLY, "",
                          "redis: script reply field %zu (%s) is not a decimal int64: %.*s", i + 1,
                          field_names[i], (int)(e->len > 40 ? 40 : e->len), e->str);
    if (v < lo || v > hi)
        return tt_err_set(err, RDS_EREPLY, "",
                          "redis: script reply field %zu (%s) is %" PRId64 ", out of range", i + 1,
                          field_names[i], v);
    *out = v;
    return 0;
}

/* Redis' error reply, as it said it (clipped). */
static int error_reply(const redisReply *reply, int code, tt_err_t *err)
{
    return tt_err_set(err, code, "", "redis: %.*s", (int)(reply->len > 150 ? 150 : reply->len),
                      reply->str);
}

int rds_batch_reply(const redisReply *reply, uint32_t n, tt_err_t *err)
{
    if (reply == NULL)
        return tt_err_set(err, RDS_ECONN, "", "redis: connection lost before the reply");
    if (reply->type == REDIS_REPLY_ERROR) {
        bool noscript = reply->len >= 8 && memcmp(reply->str, "NOSCRIPT", 8) == 0;
        return error_reply(reply, noscript ? RDS_ENOSCRIPT : RDS_EREDIS, err);
    }
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != n)
        return tt_err_set(
            err, RDS_EREPLY, "", "redis: script reply is %s of %zu elements, want an array of %u",
            type_name(reply->type), reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0, n);
    return 0;
}

int rds_reply_read(const redisReply *reply, ra_result_t *out, tt_err_t *err)
{
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR) /* this operation's own error */
        return error_reply(reply, RDS_EREDIS, err);
    int rc = rds_batch_reply(reply, 6, err);
    if (rc < 0)
        return rc;
    static const int64_t lo[6] = {0, 0, 0, 0, 0, INT64_MIN};
    static const int64_t hi[6] = {1, 1, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    int64_t v[6];
    for (size_t i = 0; i < 6; i++) {
        rc = read_field(reply, i, lo[i], hi[i], &v[i], err);
        if (rc < 0)
            return rc;
    }
    if (v[0] && v[1])
        return tt_err_set(err, RDS_EREPLY, "",
                          "redis: script reply says both admit and unfittable");
    *out = (ra_result_t){.admit = v[0],
                         .unfittable = v[1],
                         .remaining = v[2],
                         .retry_after_s = v[3],
                         .reset_after_s = v[4],
                         .next_state = v[5]};
    return 0;
}

int rds_reply_ok(const redisReply *reply, tt_err_t *err)
{
    if (reply == NULL)
        return tt_err_set(err, RDS_ECONN, "", "redis: connection lost before the reply");
    if (reply->type == REDIS_REPLY_ERROR)
        return error_reply(reply, RDS_EREDIS, err);
    if (reply->type != REDIS_REPLY_STATUS || reply->len != 2 || memcmp(reply->str, "OK", 2) != 0)
        return tt_err_set(err, RDS_EREPLY, "", "redis: answered %s, want +OK",
                          type_name(reply->type));
    return 0;
}

int rds_reply_sha(const redisReply *reply, char *sha, tt_err_t *err)
{
    if (reply == NULL)
        return tt_err_set(err, RDS_ECONN, "",
                          "redis: connection lost before the SCRIPT LOAD reply");
    if (reply->type == REDIS_REPLY_ERROR)
        return error_reply(reply, RDS_EREDIS, err);
    bool ok = reply->type == REDIS_REPLY_STRING && reply->len == RDS_SHA_LEN;
    for (size_t i = 0; ok && i < RDS_SHA_LEN; i++)
        ok = (reply->str[i] >= '0' && reply->str[i] <= '9') ||
             (reply->str[i] >= 'a' && reply->str[i] <= 'f');
    if (!ok)
        return tt_err_set(err, RDS_EREPLY, "", "redis: SCRIPT LOAD answered %s, want a 40-hex SHA1",
                          type_name(reply->type));
    memcpy(sha, reply->str, RDS_SHA_LEN);
    sha[RDS_SHA_LEN] = '\0';
    return 0;
}
