/* See hreq.h. */
#include "hreq.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What one request holds while it is read; allocated at its first byte. */
struct hreq_buf {
    hreq_request_t req;
    bool started;  /* a byte of the current request has arrived */
    bool done;     /* the parser reached the end of the request */
    bool in_value; /* the last callback was a header value */
    bool keeping;  /* the current header is kept */
    size_t name_len;
    char name[HREQ_NAME_MAX + 1]; /* the current header's name, while it arrives */
    size_t target_len, kept_len, body_len;
    char target[HREQ_TARGET_MAX];
    char kept[HREQ_KEPT_BYTES]; /* kept headers' names and values */
    char body[HREQ_BODY_MAX];
};

/* What each error is answered with, and the code it is counted as. */
static const struct refusal {
    int err, status;
    const char *reason, *code;
} refusals[] = {
    {HREQ_ETARGET, 414, "URI Too Long", "uri_too_long"},
    {HREQ_EHEAD, 431, "Request Header Fields Too Large", "headers_too_large"},
    {HREQ_EBODY, 413, "Content Too Large", "too_large"},
    {HREQ_ENOMEM, 503, "Service Unavailable", "out_of_memory"},
    {HREQ_EBAD, 400, "Bad Request", "bad_request"}, /* the last: anything else too */
};

static const struct refusal *refusal_of(int err)
{
    size_t i = 0;
    while (i < sizeof(refusals) / sizeof(refusals[0]) - 1 && refusals[i].err != err)
        i++;
    return &refusals[i];
}

int hreq_status(int err, const char **reason)
{
    const struct refusal *f = refusal_of(err);
    *reason = f->reason;
    return f->status;
}

const char *hreq_code(int err)
{
    return refusal_of(err)->code;
}

/* Latches the first error; returns the parser's "callback failed" value. */
__attribute__((format(printf, 3, 4))) static int fail(hreq_reader_t *r, int code, const char *fmt,
                                                      ...)
{
    if (r->error == 0) {
        r->error = code;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof(r->message), fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    if (len > HREQ_TARGET_MAX - b->target_len)
        return fail(r, HREQ_ETARGET, "request target longer than %d bytes", HREQ_TARGET_MAX);
    memcpy(b->target + b->target_len, at, len);
    b->target_len += len;
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    /* Debian's libhttp-parser is built lenient: it takes a space inside a name as part of it and
     * still matches "Transfer-Encoding " and "Content-Length " by their letters, so the framing
     * would follow a header a proxy in front may read as another one. RFC 9112 §5.1: a 400. */
    if (memchr(at, ' ', len))
        return fail(r, HREQ_EBAD, "whitespace in a header name (before its colon)");
    if (b->in_value) { /* a new header begins */
        b->in_value = false;
        b->name_len = 0;
    }
    /* a name longer than any wanted one is read on and never kept */
    size_t room = HREQ_NAME_MAX + 1 - b->name_len;
    size_t n = len < room ? len : room;
    memcpy(b->name + b->name_len, at, n);
    b->name_len += n;
    return 0;
}

static int keep_bytes(hreq_reader_t *r, const char *at, size_t len)
{
    hreq_buf_t *b = r->buf;
    if (len > HREQ_KEPT_BYTES - b->kept_len)
        return fail(r, HREQ_EHEAD, "the headers read here are longer than %d bytes together",
                    HREQ_KEPT_BYTES);
    memcpy(b->kept + b->kept_len, at, len);
    b->kept_len += len;
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    hreq_request_t *q = &b->req;
    if (!b->in_value) {
        b->in_value = true;
        b->keeping =
            b->name_len <= HREQ_NAME_MAX && r->want && r->want(r->want_ud, b->name, b->name_len);
        if (b->keeping) {
            if (q->nheaders == HREQ_KEPT_MAX)
                return fail(r, HREQ_EHEAD, "more than %d of the headers read here", HREQ_KEPT_MAX);
            size_t at_name = b->kept_len;
            if (keep_bytes(r, b->name, b->name_len))
                return -1;
            q->headers[q->nheaders++] = (hreq_header_t){.name = {b->kept + at_name, b->name_len},
                                                        .value = {b->kept + b->kept_len, 0}};
        }
    }
    if (!b->keeping)
        return 0;
    if (keep_bytes(r, at, len))
        return -1;
    q->headers[q->nheaders - 1].value.len += len;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    hreq_request_t *q = &b->req;
    if (p->http_major != 1)
        return fail(r, HREQ_EBAD, "HTTP/%u.%u is not served here: HTTP/1.x only", p->http_major,
                    p->http_minor);
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > HREQ_BODY_MAX)
        return fail(r, HREQ_EBODY, "a body of %llu bytes; at most %d",
                    (unsigned long long)p->content_length, HREQ_BODY_MAX);
    q->method = (enum http_method)p->method;
    q->target = (hreq_str_t){b->target, b->target_len};
    const char *mark = memchr(b->target, '?', b->target_len);
    size_t path_len = mark ? (size_t)(mark - b->target) : b->target_len;
    q->path = (hreq_str_t){b->target, path_len};
    q->query = mark ? (hreq_str_t){mark + 1, b->target_len - path_len - 1} : (hreq_str_t){"", 0};
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    if (len > HREQ_BODY_MAX - b->body_len) /* chunked: the length was not known up front */
        return fail(r, HREQ_EBODY, "a body longer than %d bytes", HREQ_BODY_MAX);
    memcpy(b->body + b->body_len, at, len);
    b->body_len += len;
    return 0;
}

static int on_message_complete(http_parser *p)
{
    hreq_reader_t *r = p->data;
    hreq_buf_t *b = r->buf;
    b->req.body = (hreq_str_t){b->body, b->body_len};
    /* after an Upgrade the bytes that follow are another protocol: answer, then close */
    b->req.keep_alive = http_should_keep_alive(p) && !p->upgrade;
    b->done = true;
    http_parser_pause(p, 1); /* hand this request over before parsing the next */
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

static void buf_reset(hreq_buf_t *b)
{
    b->req.nheaders = 0;
    b->started = b->done = b->in_value = b->keeping = false;
    b->name_len = b->target_len = b->kept_len = b->body_len = 0;
}

void hreq_init(hreq_reader_t *r, hreq_want_fn want, void *want_ud)
{
    *r = (hreq_reader_t){.want = want, .want_ud = want_ud};
    /* the parser's bound on a head is process-wide; every reader sets the same value */
    http_parser_set_max_header_size(HREQ_HEAD_MAX);
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

int hreq_feed(hreq_reader_t *r, const uint8_t *data, size_t len, size_t *used,
              const hreq_request_t **req)
{
    *used = 0;
    *req = NULL;
    if (r->error)
        return r->error;
    if (len == 0)
        return 0;
    if (!r->buf) {
        if (!(r->buf = malloc(sizeof(*r->buf))))
            return fail(r, HREQ_ENOMEM, "out of memory"), r->error;
        buf_reset(r->buf);
    }
    r->buf->started = true;
    size_t n = http_parser_execute(&r->parser, &settings, (const char *)data, len);
    *used = n;
    if (r->error)
        return r->error;
    enum http_errno e = HTTP_PARSER_ERRNO(&r->parser);
    if (r->buf->done) {
        *req = &r->buf->req;
        return HREQ_DONE;
    }
    if (e == HPE_HEADER_OVERFLOW)
        return fail(r, HREQ_EHEAD, "a request head longer than %d bytes", HREQ_HEAD_MAX), r->error;
    if (e != HPE_OK)
        return fail(r, HREQ_EBAD, "malformed request: %s", http_errno_description(e)), r->error;
    return 0;
}

void hreq_next(hreq_reader_t *r)
{
    if (r->buf)
        buf_reset(r->buf);
    if (r->error == 0)
        http_parser_pause(&r->parser, 0);
}

void hreq_release(hreq_reader_t *r)
{
    if (hreq_idle(r)) {
        free(r->buf);
        r->buf = NULL;
    }
}

bool hreq_idle(const hreq_reader_t *r)
{
    return !r->buf || !r->buf->started;
}

void hreq_free(hreq_reader_t *r)
{
    free(r->buf);
    r->buf = NULL;
}

bool hreq_str_ieq(hreq_str_t s, const char *lit)
{
    size_t n = strlen(lit);
    return s.len == n && strncasecmp(s.ptr, lit, n) == 0;
}

const hreq_str_t *hreq_header(const hreq_request_t *req, const char *name)
{
    for (uint32_t i = 0; i < req->nheaders; i++)
        if (hreq_str_ieq(req->headers[i].name, name))
            return &req->headers[i].value;
    return NULL;
}
