/*
 * The commands that run the Lua assets, and the checking of their replies. A reply crosses a
 * trust boundary (a Redis we do not own, a proxy, a port some other program listens on), so
 * every field is checked for type and range before a decision rests on it.
 */
#include "script.h"
#include "tt_fmt.h"

#include <errno.h>
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

/* Appends one argument to cmd, copying it into cmd->buf. */
static void push(rds_command_t *cmd, size_t *used, const char *s, size_t n)
{
    char *at = cmd->buf + *used;
    memcpy(at, s, n);
    *used += n;
    cmd->argv[cmd->argc] = at;
    cmd->argvlen[cmd->argc] = n;
    cmd->argc++;
}

static void push_str(rds_command_t *cmd, size_t *used, const char *s)
{
    push(cmd, used, s, strlen(s));
}

static void push_i64(rds_command_t *cmd, size_t *used, int64_t v)
{
    char num[TT_FMT_I64_MAX];
    push(cmd, used, num, tt_fmt_i64(num, v));
}

int rds_command_build(rds_command_t *cmd, const char *sha, const ra_limiter_t *l, const char *key,
                      size_t keylen, const rds_op_t *op)
{
    int script = rds_script_for(l);
    if (script < 0 || keylen > RDS_KEY_MAX || (op->settle && script != RDS_SCRIPT_GCRA))
        return RDS_EARG;
    size_t used = 0;
    cmd->script = (rds_script_id_t)script;
    cmd->argc = 0;
    push_str(cmd, &used, "EVALSHA");
    push(cmd, &used, sha, RDS_SHA_LEN);
    push_str(cmd, &used, "1");
    push(cmd, &used, key, keylen);
    if (script == RDS_SCRIPT_GCRA) {
        push_str(cmd, &used, op->settle ? "settle" : "step");
        push_i64(cmd, &used, l->emission_ns);
        push_i64(cmd, &used, l->tolerance_ns);
    } else {
        push_str(cmd, &used, l->algorithm == RA_FIXED_WINDOW ? "fixed" : "sliding");
        push_i64(cmd, &used, l->amount);
        push_i64(cmd, &used, l->period_ns);
    }
    if (op->has_now)
        push_i64(cmd, &used, op->now_ns);
    else
        push(cmd, &used, "", 0);
    if (op->settle) {
        push_i64(cmd, &used, op->reserved);
        push_i64(cmd, &used, op->actual);
    } else {
        push_i64(cmd, &used, op->cost);
    }
    return 0;
}

void rds_command_to_eval(rds_command_t *cmd)
{
    const rds_script_t *s = rds_script(cmd->script);
    cmd->argv[0] = "EVAL";
    cmd->argvlen[0] = 4;
    cmd->argv[1] = s->body;
    cmd->argvlen[1] = s->len;
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

/* A strict decimal int64: optional '-', 1..19 digits, nothing else. */
static int parse_i64(const char *s, size_t n, int64_t *out)
{
    if (n == 0 || n > 20)
        return -1;
    char tmp[24];
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    size_t i = tmp[0] == '-';
    if (i == n)
        return -1;
    for (size_t k = i; k < n; k++)
        if (tmp[k] < '0' || tmp[k] > '9')
            return -1;
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

static const char *const field_names[] = {"admit",         "unfittable",    "remaining",
                                          "retry_after_s", "reset_after_s", "state"};

/* Reads element i of a script reply: an integer in [lo, hi]; the state is always a decimal
 * string (it exceeds what Lua's doubles carry), remaining one when it is too large for an
 * integer reply from Lua (the scripts answer it as a number below 2^52, which is cheaper). */
static int read_field(const redisReply *reply, size_t i, int64_t lo, int64_t hi, int64_t *out,
                      char *err, size_t errsz)
{
    const redisReply *e = reply->element[i];
    bool may_string = i == 2 || i == 5, must_string = i == 5;
    bool want_string = e && may_string && (must_string || e->type == REDIS_REPLY_STRING);
    if (e == NULL || e->type != (want_string ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER)) {
        snprintf(err, errsz, "redis: script reply field %zu (%s) is %s, want %s", i + 1,
                 field_names[i], e ? type_name(e->type) : "missing",
                 must_string  ? "a decimal string"
                 : may_string ? "an integer or a decimal string"
                              : "an integer");
        return RDS_EREPLY;
    }
    int64_t v = e->integer;
    if (want_string && parse_i64(e->str, e->len, &v) < 0) {
        snprintf(err, errsz, "redis: script reply field %zu (%s) is not a decimal int64: %.*s",
                 i + 1, field_names[i], (int)(e->len > 40 ? 40 : e->len), e->str);
        return RDS_EREPLY;
    }
    if (v < lo || v > hi) {
        snprintf(err, errsz, "redis: script reply field %zu (%s) is %" PRId64 ", out of range",
                 i + 1, field_names[i], v);
        return RDS_EREPLY;
    }
    *out = v;
    return 0;
}

static int error_reply(const redisReply *reply, char *err, size_t errsz)
{
    bool noscript = reply->len >= 8 && memcmp(reply->str, "NOSCRIPT", 8) == 0;
    snprintf(err, errsz, "redis: %.*s", (int)(reply->len > 200 ? 200 : reply->len), reply->str);
    return noscript ? RDS_ENOSCRIPT : RDS_EREDIS;
}

int rds_reply_read(const redisReply *reply, ra_result_t *out, char *err, size_t errsz)
{
    if (reply == NULL) {
        snprintf(err, errsz, "redis: connection lost before the reply");
        return RDS_ECONN;
    }
    if (reply->type == REDIS_REPLY_ERROR)
        return error_reply(reply, err, errsz);
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 6) {
        snprintf(err, errsz, "redis: script reply is %s of %zu elements, want an array of 6",
                 type_name(reply->type), reply->type == REDIS_REPLY_ARRAY ? reply->elements : 0);
        return RDS_EREPLY;
    }
    static const int64_t lo[6] = {0, 0, 0, 0, 0, INT64_MIN};
    static const int64_t hi[6] = {1, 1, INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    int64_t v[6];
    for (size_t i = 0; i < 6; i++) {
        int rc = read_field(reply, i, lo[i], hi[i], &v[i], err, errsz);
        if (rc < 0)
            return rc;
    }
    if (v[0] && v[1]) {
        snprintf(err, errsz, "redis: script reply says both admit and unfittable");
        return RDS_EREPLY;
    }
    *out = (ra_result_t){.admit = v[0],
                         .unfittable = v[1],
                         .remaining = v[2],
                         .retry_after_s = v[3],
                         .reset_after_s = v[4],
                         .next_state = v[5]};
    return 0;
}

int rds_reply_sha(const redisReply *reply, char *sha, char *err, size_t errsz)
{
    if (reply == NULL) {
        snprintf(err, errsz, "redis: connection lost before the SCRIPT LOAD reply");
        return RDS_ECONN;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        error_reply(reply, err, errsz);
        return RDS_EREDIS;
    }
    bool ok = reply->type == REDIS_REPLY_STRING && reply->len == RDS_SHA_LEN;
    for (size_t i = 0; ok && i < RDS_SHA_LEN; i++)
        ok = (reply->str[i] >= '0' && reply->str[i] <= '9') ||
             (reply->str[i] >= 'a' && reply->str[i] <= 'f');
    if (!ok) {
        snprintf(err, errsz, "redis: SCRIPT LOAD answered %s, want a 40-hex SHA1",
                 type_name(reply->type));
        return RDS_EREPLY;
    }
    memcpy(sha, reply->str, RDS_SHA_LEN);
    sha[RDS_SHA_LEN] = '\0';
    return 0;
}
