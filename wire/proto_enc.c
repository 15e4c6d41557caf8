/*
 * Encoding: answers (and, for the client, requests) appended to a tt_buf_t (common/tt_buf.h),
 * each value written in place in its smallest msgpack form. See proto.h.
 */
#include "proto_int.h"

#include <stdlib.h>
#include <string.h>

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

/* n bytes from s: a key's constant length is a few moves already; the short strings of an
 * answer (a verdict, a limit id) go by two overlapping moves instead of a call to memcpy. */
W_INLINE uint8_t *p_bytes(uint8_t *d, const char *s, size_t n)
{
    if (__builtin_constant_p(n) || n > 16) {
        memcpy(d, s, n);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = (uint8_t)s[i];
    }
    return d + n;
}

W_INLINE uint8_t *p_str(uint8_t *d, const char *s, size_t n)
{
    return p_bytes(p_sized(d, n, 0xa0, 31, 0xd9, 0xda, 0xdb), s, n);
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
        if (tt_buf_room(out, need)) {                                                              \
            uint8_t *d = (out)->data + (out)->len;                                                 \
            (out)->len = (size_t)((expr) - (out)->data);                                           \
        }                                                                                          \
    } while (0)

W_INLINE void w_map(tt_buf_t *out, uint32_t n)
{
    W_PUT(out, 5, p_map(d, n));
}

W_INLINE void w_array(tt_buf_t *out, uint32_t n)
{
    W_PUT(out, 5, p_array(d, n));
}

W_INLINE void w_str(tt_buf_t *out, const char *p, size_t n)
{
    W_PUT(out, 5 + n, p_str(d, p, n));
}

W_INLINE void w_pstr(tt_buf_t *out, proto_str_t s)
{
    w_str(out, s.ptr, s.len);
}

static void w_cstr(tt_buf_t *out, const char *s)
{
    w_str(out, s, strlen(s));
}

W_INLINE void w_uint(tt_buf_t *out, uint64_t v)
{
    W_PUT(out, 9, p_uint(d, v));
}

W_INLINE void w_int(tt_buf_t *out, int64_t v)
{
    W_PUT(out, 9, p_int(d, v));
}

W_INLINE void w_bool(tt_buf_t *out, bool v)
{
    W_PUT(out, 1, p_bool(d, v));
}

#define W_KEY(out, lit) w_str(out, lit, sizeof(lit) - 1)

static int done(tt_buf_t *out, size_t start)
{
    if (out->failed) {
        out->len = start; /* never leave half a message behind */
        return -1;
    }
    return 0;
}

/* Opens an answer: a map of `fields` entries (seq included) and the seq. */
static void open_answer(tt_buf_t *out, uint32_t fields, uint64_t seq)
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
int proto_enc_decision(tt_buf_t *out, uint64_t seq, const proto_decision_t *d)
{
    const proto_disclosed_t *x = d->disclosed;
    bool has_limit = d->limit.len > 0, has_rem = d->remaining >= 0, has_code = d->code.len > 0;
    bool has_resv = d->reservation != 0, has_soft = !x || d->nsoft > 0;
    size_t need = 200 + d->verdict.len + d->limit.len + d->code.len + (x ? DISCLOSED_MAX : 0);
    for (uint32_t i = 0; i < d->nsoft; i++)
        need += 5 + d->soft_denied[i].len;
    for (uint32_t i = 0; d->send_headers && i < d->nheaders; i++)
        need += 10 + d->headers[i].name.len + d->headers[i].value.len;
    if (!tt_buf_room(out, need))
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

int proto_enc_settled(tt_buf_t *out, uint64_t seq, int64_t settled, bool already_settled)
{
    size_t start = out->len;
    open_answer(out, 3, seq);
    W_KEY(out, "settled");
    w_int(out, settled);
    W_KEY(out, "already_settled");
    w_bool(out, already_settled);
    return done(out, start);
}

int proto_enc_charged(tt_buf_t *out, uint64_t seq, int64_t charged)
{
    size_t start = out->len;
    open_answer(out, 2, seq);
    W_KEY(out, "charged");
    w_int(out, charged);
    return done(out, start);
}

int proto_enc_released(tt_buf_t *out, uint64_t seq, bool released)
{
    size_t start = out->len;
    open_answer(out, 2, seq);
    W_KEY(out, "released");
    w_bool(out, released);
    return done(out, start);
}

int proto_enc_pong(tt_buf_t *out, uint64_t seq, const char *version)
{
    size_t start = out->len;
    open_answer(out, 3, seq);
    W_KEY(out, "pong");
    w_bool(out, true);
    W_KEY(out, "version");
    w_cstr(out, version);
    return done(out, start);
}

int proto_enc_error(tt_buf_t *out, uint64_t seq, const char *code, const char *message)
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
    int64_t n, unheard, snapshot_age_ms;
    const char *doubt;
    const char *const *acquire_only; /* "acquire_only": [ids], only when there are some */
    uint32_t n_acquire_only;
};

static void fleet_body(tt_buf_t *out, uint64_t seq, const void *ctx,
                       const proto_fleet_limit_t *rows, uint32_t nrows, bool truncated)
{
    const struct fleet_head *h = ctx;
    open_answer(out, 7 + (h->doubt != NULL) + (h->n_acquire_only > 0), seq);
    W_KEY(out, "node");
    w_cstr(out, h->node);
    W_KEY(out, "n");
    w_int(out, h->n);
    W_KEY(out, "unheard");
    w_int(out, h->unheard);
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
    if (h->n_acquire_only) {
        W_KEY(out, "acquire_only");
        w_array(out, h->n_acquire_only);
        for (uint32_t i = 0; i < h->n_acquire_only; i++)
            w_cstr(out, h->acquire_only[i]);
    }
}

static void members_body(tt_buf_t *out, uint64_t seq, const void *ctx, const proto_member_t *rows,
                         uint32_t nrows, bool truncated)
{
    const proto_members_head_t *h = ctx;
    open_answer(out, 6, seq);
    W_KEY(out, "live");
    w_int(out, h->live);
    W_KEY(out, "unheard");
    w_int(out, h->unheard);
    W_KEY(out, "unheard_for_ms");
    w_int(out, h->unheard_for_ms);
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

int proto_enc_fleet(tt_buf_t *out, uint64_t seq, const char *node, int64_t n, int64_t unheard,
                    const char *doubt, int64_t snapshot_age_ms, const proto_fleet_limit_t *rows,
                    uint32_t nrows, const char *const *acquire_only, uint32_t n_acquire_only)
{
    const struct fleet_head head = {node,          n, unheard, snapshot_age_ms, doubt, acquire_only,
                                    n_acquire_only};
    FIT_ROWS(out, seq, &head, rows, nrows, fleet_body);
}

int proto_enc_members(tt_buf_t *out, uint64_t seq, const proto_members_head_t *head,
                      const proto_member_t *rows, uint32_t nrows)
{
    FIT_ROWS(out, seq, head, rows, nrows, members_body);
}

int proto_enc_request(tt_buf_t *out, const proto_request_t *req)
{
    if ((unsigned)req->op >= PROTO_OP_COUNT_)
        return -1;
    size_t start = out->len;
    unsigned fields = proto__op_fields[req->op].allowed;
    if (req->op == PROTO_OP_DECIDE && !req->has_tokens)
        fields &= ~BIT(F_TOKENS);
    if (!req->headers)
        fields &= ~BIT(F_HEADERS);
    if (req->version > PROTO_V1)
        fields |= BIT(F_V);
    w_map(out, 2 + (unsigned)__builtin_popcount(fields));
    W_KEY(out, "op");
    w_cstr(out, proto__op_names[req->op]);
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
