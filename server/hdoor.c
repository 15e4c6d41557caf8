/* See hdoor.h. */
#include "hdoor.h"
#include "tt_fmt.h"
#include "tt_json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- answers ----------------------------------------------------------------------------- */

/* A bounded text buffer; appends past its end are dropped (and `full` set). */
typedef struct tbuf {
    char *p;
    size_t len, cap;
    bool full;
} tbuf_t;

static void put(tbuf_t *b, const char *s, size_t n)
{
    if (n > b->cap - 1 - b->len) {
        n = b->cap - 1 - b->len;
        b->full = true;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

__attribute__((format(printf, 2, 3))) static void putf(tbuf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->cap - b->len) {
        b->full = true;
        b->len = b->cap - 1;
    } else {
        b->len += (size_t)n;
    }
}

static void put_str(tbuf_t *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_i64(tbuf_t *b, int64_t v)
{
    char tmp[TT_FMT_I64_MAX];
    put(b, tmp, tt_fmt_i64(tmp, v));
}

/* A JSON string through the one escaper (tt_json.h: runs of plain bytes copied whole, as this
 * runs for every header of every answer); cut between characters when the buffer is full. */
static void json_str(tbuf_t *b, const char *s, size_t n)
{
    put(b, "\"", 1);
    size_t used;
    b->len += tt_json_escape(b->p + b->len, b->cap - 1 - b->len, s, n, &used);
    b->p[b->len] = '\0';
    if (used < n)
        b->full = true;
    put(b, "\"", 1);
}

int hdoor_respond(tt_buf_t *out, int status, const char *reason, const char *type,
                  const char *extra, const void *body, size_t len, hdoor_frame_t f)
{
    char head[256];
    tbuf_t h = {head, 0, sizeof(head), false};
    put_str(&h, "HTTP/1.1 ");
    put_i64(&h, status);
    put_str(&h, " ");
    put_str(&h, reason);
    put_str(&h, "\r\nContent-Type: ");
    put_str(&h, type);
    put_str(&h, "\r\nContent-Length: ");
    put_i64(&h, (int64_t)len);
    put_str(&h, f.keep_alive ? "\r\n" : "\r\nConnection: close\r\n");
    if (h.full)
        return -1;
    tt_buf_append(out, head, h.len);
    if (extra)
        tt_buf_append(out, extra, strlen(extra));
    tt_buf_append(out, "\r\n", 2);
    if (!f.head_only && len)
        tt_buf_append(out, body, len);
    return out->failed ? -1 : 0;
}

int hdoor_respond_text(tt_buf_t *out, int status, const char *reason, const char *text,
                       hdoor_frame_t f)
{
    return hdoor_respond(out, status, reason, "text/plain; charset=utf-8", NULL, text, strlen(text),
                         f);
}

static int respond_error_with(tt_buf_t *out, int status, const char *reason, const char *extra,
                              const char *code, const char *message, hdoor_frame_t f);

int hdoor_respond_error(tt_buf_t *out, int status, const char *reason, const char *code,
                        const char *message, hdoor_frame_t f)
{
    return respond_error_with(out, status, reason, NULL, code, message, f);
}

static const char *reason_of(int status)
{
    return status == 401 ? "Unauthorized" : status == 403 ? "Forbidden" : "Too Many Requests";
}

static int respond_error_with(tt_buf_t *out, int status, const char *reason, const char *extra,
                              const char *code, const char *message, hdoor_frame_t f)
{
    char body[512];
    tbuf_t b = {body, 0, sizeof(body), false};
    put(&b, "{\"error\":{\"code\":", 17);
    json_str(&b, code, strlen(code));
    put(&b, ",\"message\":", 11);
    json_str(&b, message, strlen(message));
    put(&b, "}}\n", 3);
    return hdoor_respond(out, status, reason, "application/json", extra, body, b.len, f);
}

/* The engine's (or the door's) error in r: its code's name and "path: message". The door's
 * refusals are 401 (with the challenge RFC 6750 asks for) and 403, whatever the route. */
static int respond_engine_error(tt_buf_t *out, int status, const char *reason,
                                const gov_result_t *r, hdoor_frame_t f)
{
    char text[TT_ERR_TEXT_MAX];
    const char *extra = NULL;
    if (r->status == TT_ERR_UNAUTHENTICATED) {
        status = 401;
        reason = "Unauthorized";
        extra = "WWW-Authenticate: Bearer realm=\"tokentriage\"\r\n";
    } else if (r->status == TT_ERR_FORBIDDEN || r->status == TT_ERR_PEER) {
        status = 403;
        reason = "Forbidden";
    }
    return respond_error_with(out, status, reason, extra, gov_strcode(r->status),
                              tt_err_format(&r->err, text, sizeof(text)), f);
}

int hdoor_respond_decision(tt_buf_t *out, const gov_result_t *r, int deny_status, hdoor_frame_t f)
{
    if (r->status < 0) {
        bool ours = r->status == GOV_ENOMEM || r->status == GOV_ELIMITS;
        return respond_engine_error(out, ours ? 503 : 400,
                                    ours ? "Service Unavailable" : "Bad Request", r, f);
    }
    int status = r->admit ? 200 : r->unavailable ? 503 : deny_status;
    const char *reason = r->admit         ? "OK"
                         : r->unavailable ? "Service Unavailable"
                                          : reason_of(deny_status);
    char extra[GOV_HEADERS_MAX * (GOV_HEADER_VALUE_MAX + 40)];
    tbuf_t h = {extra, 0, sizeof(extra), false};
    for (uint32_t i = 0; i < r->n_headers && i < GOV_HEADERS_MAX; i++) {
        put_str(&h, r->headers[i].name);
        put(&h, ": ", 2);
        put_str(&h, r->headers[i].value);
        put(&h, "\r\n", 2);
    }
    if (r->reservation) { /* a header too: a forward-auth proxy can hand it to its upstream */
        putf(&h, "Tokentriage-Reservation: %llu\r\n", (unsigned long long)r->reservation);
    }
    char body[2048 + GOV_SOFT_MAX * (CFG_ID_MAX + 4)];
    tbuf_t b = {body, 0, sizeof(body), false};
    put_str(&b, r->admit ? "{\"admit\":true,\"verdict\":\"" : "{\"admit\":false,\"verdict\":\"");
    put_str(&b, gov_verdict_name(r->verdict));
    put_str(&b, "\",\"limit\":");
    json_str(&b, r->limit, strlen(r->limit));
    if (r->remaining >= 0) {
        put_str(&b, ",\"remaining\":");
        put_i64(&b, r->remaining);
    }
    put_str(&b, ",\"retry_after\":");
    put_i64(&b, r->retry_after_s);
    put_str(&b, ",\"reset_after\":");
    put_i64(&b, r->reset_after_s);
    if (r->code) {
        put_str(&b, ",\"code\":");
        json_str(&b, r->code, strlen(r->code));
    }
    if (r->unavailable)
        put(&b, ",\"unavailable\":true", 19);
    if (r->reservation)
        putf(&b, ",\"reservation\":%llu", (unsigned long long)r->reservation);
    put(&b, ",\"soft_denied\":[", 16);
    for (uint32_t i = 0; i < r->n_soft_denied && i < GOV_SOFT_MAX; i++) {
        if (i)
            put(&b, ",", 1);
        json_str(&b, r->soft_denied[i], strlen(r->soft_denied[i]));
    }
    put(&b, "],\"headers\":{", 13);
    for (uint32_t i = 0; i < r->n_headers && i < GOV_HEADERS_MAX; i++) {
        if (i)
            put(&b, ",", 1);
        json_str(&b, r->headers[i].name, strlen(r->headers[i].name));
        put(&b, ":", 1);
        json_str(&b, r->headers[i].value, strlen(r->headers[i].value));
    }
    put(&b, "}}\n", 3);
    if (h.full || b.full) /* the buffers are sized for the largest result: never */
        return -1;
    return hdoor_respond(out, status, reason, "application/json", extra, body, b.len, f);
}

int hdoor_respond_settled(tt_buf_t *out, const gov_result_t *r, hdoor_frame_t f)
{
    if (r->status < 0) {
        bool ours = r->status == GOV_ENOMEM;
        int status = ours ? 503 : r->status == GOV_ERESERVATION ? 404 : 400;
        const char *reason = ours            ? "Service Unavailable"
                             : status == 404 ? "Not Found"
                                             : "Bad Request";
        return respond_engine_error(out, status, reason, r, f);
    }
    char body[96];
    tbuf_t b = {body, 0, sizeof(body), false};
    putf(&b, "{\"settled\":%lld,\"already_settled\":%s}\n", (long long)r->settled,
         r->already_settled ? "true" : "false");
    return hdoor_respond(out, 200, "OK", "application/json", NULL, body, b.len, f);
}

/* ---- requests ---------------------------------------------------------------------------- */

bool hdoor_want(void *ud, const char *name, size_t len)
{
    const hdoor_map_t *m = ud;
    hreq_str_t n = {name, len};
    if (hreq_str_ieq(n, "Authorization") || hreq_str_ieq(n, "Tokentriage-Authorization"))
        return true;
    for (size_t i = 0; i < m->n_subject; i++)
        if (hreq_str_ieq(n, m->subject[i].header))
            return true;
    return m->tokens[0] && hreq_str_ieq(n, m->tokens);
}

static bool str_eq(hreq_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

/* A short printable rendering of untrusted bytes, for messages. */
static const char *show(char *buf, size_t size, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < size; i++)
        buf[k++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    if (k + 4 >= size && n > k) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

/* A 400 naming what was wrong; returns HDOOR_ANSWERED. */
__attribute__((format(printf, 4, 5))) static hdoor_route_t
bad(tt_buf_t *out, hdoor_frame_t f, const char *code, const char *fmt, ...)
{
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hdoor_respond_error(out, 400, "Bad Request", code, msg, f);
    return HDOOR_ANSWERED;
}

static int hex(int ch)
{
    return ch >= '0' && ch <= '9'   ? ch - '0'
           : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
           : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                    : -1;
}

/* application/x-www-form-urlencoded: '+' is a space, %XX a byte. Writes at most n bytes to
 * out; returns the decoded length or -1 on a bad escape. */
static long form_decode(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int hi = i + 2 < n ? hex(s[i + 1]) : -1, lo = i + 2 < n ? hex(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            out[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[k++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    return (long)k;
}

/* A whole number min..max written in decimal digits and nothing else (no sign, no space). */
static int parse_decimal(hreq_str_t v, uint64_t min, uint64_t max, uint64_t *out)
{
    if (v.len == 0 || v.len > 20)
        return -1;
    uint64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        unsigned d = (unsigned)(v.ptr[i] - '0');
        if (d > 9 || n > (UINT64_MAX - d) / 10)
            return -1;
        n = n * 10 + d;
    }
    if (n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/* tokens (and a settle's actual): 0..GOV_TOKENS_MAX. */
static int parse_tokens(hreq_str_t v, int64_t *out)
{
    uint64_t t;
    if (parse_decimal(v, 0, (uint64_t)GOV_TOKENS_MAX, &t))
        return -1;
    *out = (int64_t)t;
    return 0;
}

/* A header value without the optional whitespace around it. */
static hreq_str_t trim(hreq_str_t v)
{
    while (v.len && (v.ptr[0] == ' ' || v.ptr[0] == '\t')) {
        v.ptr++;
        v.len--;
    }
    while (v.len && (v.ptr[v.len - 1] == ' ' || v.ptr[v.len - 1] == '\t'))
        v.len--;
    return v;
}

/* Adds (level, id) from `where` (for messages); 0, or a 400 written. */
static int add_pair(hdoor_call_t *call, hreq_str_t level, hreq_str_t id, const char *where,
                    tt_buf_t *out, hdoor_frame_t f)
{
    char lv[80];
    show(lv, sizeof(lv), level.ptr, level.len);
    gov_subject_t *s = &call->subject;
    for (size_t i = 0; i < s->n; i++)
        if (s->pairs[i].level_len == level.len &&
            memcmp(s->pairs[i].level, level.ptr, level.len) == 0)
            return bad(out, f, "bad_subject", "level %s given twice (again in %s)", lv, where), -1;
    if (s->n == GOV_SUBJECT_MAX)
        return bad(out, f, "bad_subject", "more than %d levels", GOV_SUBJECT_MAX), -1;
    if (id.len == 0)
        return bad(out, f, "bad_subject", "level %s: empty id (%s)", lv, where), -1;
    if (id.len > GOV_ID_MAX)
        return bad(out, f, "bad_subject", "level %s: id longer than %d bytes (%s)", lv, GOV_ID_MAX,
                   where),
               -1;
    s->pairs[s->n++] = (gov_pair_t){level.ptr, level.len, id.ptr, id.len};
    return 0;
}

static int set_tokens(hdoor_call_t *call, hreq_str_t v, const char *where, tt_buf_t *out,
                      hdoor_frame_t f)
{
    char shown[80];
    if (call->tokens != GOV_NO_TOKENS)
        return bad(out, f, "bad_value", "tokens given twice (again in %s)", where), -1;
    if (parse_tokens(v, &call->tokens) != 0)
        return bad(out, f, "bad_value", "tokens (%s): \"%s\" is not a whole number from 0 to %lld",
                   where, show(shown, sizeof(shown), v.ptr, v.len), (long long)GOV_TOKENS_MAX),
               -1;
    return 0;
}

/* The next parameter of a query, decoded into *scratch (which it advances: decoding never
 * lengthens, so a buffer of the target's size holds them all). 1 with name and value, 0 at
 * the end, -1 with a 400 written. */
static int query_next(const char **p, const char *end, char **scratch, hreq_str_t *name,
                      hreq_str_t *value, tt_buf_t *out, hdoor_frame_t f)
{
    while (*p < end) {
        const char *amp = memchr(*p, '&', (size_t)(end - *p));
        const char *seg = *p, *seg_end = amp ? amp : end;
        *p = seg_end + 1;
        if (seg_end == seg)
            continue;
        const char *eq = memchr(seg, '=', (size_t)(seg_end - seg));
        const char *name_end = eq ? eq : seg_end;
        long nl = form_decode(seg, (size_t)(name_end - seg), *scratch);
        long vl =
            eq ? form_decode(eq + 1, (size_t)(seg_end - eq - 1), *scratch + (nl > 0 ? nl : 0)) : 0;
        char shown[80];
        if (nl < 0 || vl < 0)
            return bad(out, f, "bad_value", "query parameter %s: bad percent-encoding",
                       show(shown, sizeof(shown), seg, (size_t)(seg_end - seg))),
                   -1;
        *name = (hreq_str_t){*scratch, (size_t)nl};
        *value = (hreq_str_t){*scratch + nl, (size_t)vl};
        *scratch += nl + vl;
        if (name->len == 0)
            return bad(out, f, "bad_value", "a query parameter without a name"), -1;
        return 1;
    }
    return 0;
}

/* The query of /v1/decide: levels and tokens. 0, or a 400 written. */
static int read_query(const hdoor_env_t *env, hreq_str_t q, hdoor_call_t *call, tt_buf_t *out,
                      hdoor_frame_t f)
{
    const char *p = q.ptr;
    char *scratch = call->scratch;
    hreq_str_t name, value;
    int rc;
    while ((rc = query_next(&p, q.ptr + q.len, &scratch, &name, &value, out, f)) == 1) {
        char shown[80];
        if (str_eq(name, "tokens")) {
            if (set_tokens(call, value, "query", out, f))
                return -1;
        } else if (str_eq(name, "deny_status")) {
            if (!str_eq(value, "401") && !str_eq(value, "403") && !str_eq(value, "429"))
                return bad(out, f, "bad_value", "deny_status: \"%s\" is not 401, 403 or 429",
                           show(shown, sizeof(shown), value.ptr, value.len)),
                       -1;
            call->deny_status =
                (value.ptr[0] - '0') * 100 + (value.ptr[1] - '0') * 10 + (value.ptr[2] - '0');
        } else if (!env->known(env->known_ud, name.ptr, name.len)) {
            return bad(out, f, "unknown_level",
                       "query parameter %s names no level a limit attaches to",
                       show(shown, sizeof(shown), name.ptr, name.len)),
                   -1;
        } else if (add_pair(call, name, value, "query", out, f)) {
            return -1;
        }
    }
    return rc;
}

/* The mapped headers. 0, or a 400 written. */
static int read_headers(const hdoor_env_t *env, const hreq_request_t *req, hdoor_call_t *call,
                        tt_buf_t *out, hdoor_frame_t f)
{
    const hdoor_map_t *m = env->map;
    for (uint32_t i = 0; i < req->nheaders; i++) {
        const hreq_header_t *h = &req->headers[i];
        for (uint32_t j = 0; j < i; j++)
            if (h->name.len == req->headers[j].name.len &&
                strncasecmp(h->name.ptr, req->headers[j].name.ptr, h->name.len) == 0) {
                char shown[80];
                return bad(out, f, "bad_value", "header %s given twice",
                           show(shown, sizeof(shown), h->name.ptr, h->name.len)),
                       -1;
            }
        if (hreq_str_ieq(h->name, "Authorization") ||
            hreq_str_ieq(h->name, "Tokentriage-Authorization"))
            continue; /* read_authorization's */
        char where[CFG_HEADER_MAX + 8];
        snprintf(where, sizeof(where), "header %.*s", (int)h->name.len, h->name.ptr);
        if (m->tokens[0] && hreq_str_ieq(h->name, m->tokens)) {
            if (set_tokens(call, trim(h->value), where, out, f))
                return -1;
            continue;
        }
        for (size_t k = 0; k < m->n_subject; k++) {
            if (!hreq_str_ieq(h->name, m->subject[k].header))
                continue;
            hreq_str_t level = {m->subject[k].level, strlen(m->subject[k].level)};
            if (add_pair(call, level, trim(h->value), where, out, f))
                return -1;
        }
    }
    return 0;
}

/*
 * The caller's credentials, for the door: Tokentriage-Authorization when sent, else
 * Authorization. A forward-auth proxy passes its client's own headers along, and an LLM client's
 * Authorization is often its API key (Bearer sk-...): the proxy states its tokentriage token in
 * the header of our own name instead, which then wins. 0, or a 400 written.
 */
static int read_authorization(const hreq_request_t *req, hdoor_call_t *call, tt_buf_t *out,
                              hdoor_frame_t f)
{
    static const char *const names[] = {"Tokentriage-Authorization", "Authorization"};
    call->authorization = (hreq_str_t){NULL, 0};
    for (size_t n = 0; n < 2 && !call->authorization.ptr; n++) {
        bool seen = false;
        for (uint32_t i = 0; i < req->nheaders; i++) {
            if (!hreq_str_ieq(req->headers[i].name, names[n]))
                continue;
            if (seen)
                return bad(out, f, "bad_value", "header %s given twice", names[n]), -1;
            seen = true;
            call->authorization = trim(req->headers[i].value);
        }
    }
    return 0;
}

static hdoor_route_t decide(const hdoor_env_t *env, const hreq_request_t *req, bool forwarded,
                            hdoor_call_t *call, tt_buf_t *out, hdoor_frame_t f)
{
    call->subject.n = 0;
    call->tokens = GOV_NO_TOKENS;
    call->deny_status = 429;
    if (read_authorization(req, call, out, f))
        return HDOOR_ANSWERED;
    /* a forwarded request's query is its client's, not ours */
    if (!forwarded && read_query(env, req->query, call, out, f))
        return HDOOR_ANSWERED;
    if (read_headers(env, req, call, out, f))
        return HDOOR_ANSWERED;
    if (call->subject.n == 0) {
        char hint[CFG_HTTP_SUBJECT_MAX * (CFG_HEADER_MAX + 2) + 1] = "";
        tbuf_t h = {hint, 0, sizeof(hint), false};
        for (size_t i = 0; i < env->map->n_subject; i++)
            putf(&h, "%s%s", i ? ", " : "", env->map->subject[i].header);
        return bad(out, f, "bad_subject", "no subject: name a level in the query (?team=...)%s%s",
                   hint[0] ? " or send one of the headers " : "", hint);
    }
    return HDOOR_DECIDE;
}

/* POST /v1/settle?reservation=ID&actual=A: the query names both, and nothing else. */
static hdoor_route_t settle(const hreq_request_t *req, hdoor_call_t *call, tt_buf_t *out,
                            hdoor_frame_t f)
{
    if (req->method != HTTP_POST) {
        static const char text[] = "settle with POST: it changes counters\n";
        hdoor_respond(out, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                      "Allow: POST\r\n", text, sizeof(text) - 1, f);
        return HDOOR_ANSWERED;
    }
    call->reservation = 0;
    call->tokens = GOV_NO_TOKENS;
    if (read_authorization(req, call, out, f))
        return HDOOR_ANSWERED;
    const char *p = req->query.ptr;
    char *scratch = call->scratch;
    hreq_str_t name, value;
    char shown[80];
    int rc;
    while ((rc = query_next(&p, req->query.ptr + req->query.len, &scratch, &name, &value, out,
                            f)) == 1) {
        show(shown, sizeof(shown), value.ptr, value.len);
        if (str_eq(name, "reservation")) {
            if (call->reservation)
                return bad(out, f, "bad_value", "reservation given twice");
            if (parse_decimal(value, 1, UINT64_MAX, &call->reservation))
                return bad(out, f, "bad_value",
                           "reservation: \"%s\" is not a reservation id (the decimal a tpm "
                           "decision answered)",
                           shown);
        } else if (str_eq(name, "actual")) {
            if (call->tokens != GOV_NO_TOKENS)
                return bad(out, f, "bad_value", "actual given twice");
            if (parse_tokens(value, &call->tokens))
                return bad(out, f, "bad_value",
                           "actual: \"%s\" is not a whole number from 0 to %lld", shown,
                           (long long)GOV_TOKENS_MAX);
        } else {
            return bad(out, f, "bad_value",
                       "query parameter %s: settle takes reservation and actual only",
                       show(shown, sizeof(shown), name.ptr, name.len));
        }
    }
    if (rc < 0)
        return HDOOR_ANSWERED;
    if (!call->reservation || call->tokens == GOV_NO_TOKENS)
        return bad(out, f, "bad_value",
                   "settle takes ?reservation=ID&actual=A: the id a tpm decision answered and "
                   "the tokens the call used");
    return HDOOR_SETTLE;
}

hdoor_route_t hdoor_route(const hdoor_env_t *env, const hreq_request_t *req, hdoor_call_t *call,
                          tt_buf_t *out, hdoor_frame_t f)
{
    hreq_str_t path = req->path;
    static const char prefix[] = "/v1/decide/";
    bool forwarded =
        path.len >= sizeof(prefix) - 1 && memcmp(path.ptr, prefix, sizeof(prefix) - 1) == 0;
    bool spends = forwarded || str_eq(path, "/v1/decide") || str_eq(path, "/v1/settle");
    if (spends && !env->decide) {
        hdoor_respond_error(out, 403, "Forbidden", "decide_off",
                            "this listener does not serve /v1/decide and /v1/settle: "
                            "server.http_decide is off (the socket serves them; on TCP they need "
                            "server.http_decide: on and a bearer token of server.tokens_file)",
                            f);
        return HDOOR_ANSWERED;
    }
    if (str_eq(path, "/v1/settle"))
        return settle(req, call, out, f);
    if (spends)
        return decide(env, req, forwarded, call, out, f);
    static const struct {
        const char *path;
        hdoor_route_t route;
    } ops[] = {{"/healthz", HDOOR_HEALTHZ},
               {"/readyz", HDOOR_READYZ},
               {"/metrics", HDOOR_METRICS},
               {"/status", HDOOR_STATUS},
               {"/v1/fleet", HDOOR_FLEET}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        if (!str_eq(path, ops[i].path))
            continue;
        if (req->method == HTTP_GET || req->method == HTTP_HEAD)
            return ops[i].route;
        static const char text[] = "only GET and HEAD here\n";
        hdoor_respond(out, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                      "Allow: GET, HEAD\r\n", text, sizeof(text) - 1, f);
        return HDOOR_ANSWERED;
    }
    hdoor_respond_text(
        out, 404, "Not Found",
        "not found: try /status, /v1/fleet, /v1/decide, /v1/settle, /metrics, /healthz, /readyz\n",
        f);
    return HDOOR_ANSWERED;
}
