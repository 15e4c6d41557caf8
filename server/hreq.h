/*
 * hreq: HTTP/1.x requests read off a byte stream, with Debian's libhttp-parser doing the
 * parsing. Pure: bytes in, requests out; no socket, no clock, no libuv.
 *
 * A reader is fed whatever the socket delivered. It stops at the end of each whole request
 * (pipelined requests are handed over one at a time) and says how many bytes it used, so the
 * caller answers and feeds the rest. Parsing resumes where the last feed stopped: a request
 * dripped one byte per read costs the same as one sent whole.
 *
 * Bounded. The request head (request line and headers) is at most HREQ_HEAD_MAX bytes, counted
 * by the parser itself; the target at most HREQ_TARGET_MAX; a body at most HREQ_BODY_MAX.
 * Only the headers the caller asks for (hreq_want_fn) are kept, at most HREQ_KEPT_MAX of them
 * and HREQ_KEPT_BYTES of values: the others are parsed and dropped, so a proxy that forwards
 * every header of its client costs nothing for the ones nobody reads.
 *
 * Memory. An idle reader holds the parser's 32 bytes and no buffer: the buffer that holds a
 * request's target, kept headers and body is allocated at its first byte, reused by the
 * requests that follow, and freed by hreq_release between requests (the shell calls it when a
 * read has been dealt with: pipelined requests share one buffer, idle connections hold none).
 */
#ifndef TT_SERVER_HREQ_H
#define TT_SERVER_HREQ_H

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tt_err.h"

#define HREQ_HEAD_MAX (32 * 1024) /* request line and headers, as the parser counts them */
#define HREQ_TARGET_MAX 4096      /* the request target (path and query) */
#define HREQ_NAME_MAX 128         /* a header name anyone may ask for */
#define HREQ_KEPT_MAX 32          /* kept headers */
#define HREQ_KEPT_BYTES 8192      /* bytes of kept header values */
#define HREQ_BODY_MAX 4096        /* a request body */

/* hreq_feed's results. HREQ_DONE is not an error; the negative codes (rows of the one error
 * table, common/tt_err.h) end the connection after their answer (hreq_status gives it). */
enum {
    HREQ_DONE = 1,
    HREQ_EBAD = TT_ERR_HTTP_BAD,       /* 400: the bytes are not an HTTP/1.x request */
    HREQ_ETARGET = TT_ERR_HTTP_TARGET, /* 414: target longer than HREQ_TARGET_MAX */
    HREQ_EHEAD = TT_ERR_HTTP_HEAD,     /* 431: head beyond HREQ_HEAD_MAX, or the kept bounds */
    HREQ_EBODY = TT_ERR_HTTP_BODY,     /* 413: body longer than HREQ_BODY_MAX */
    HREQ_ENOMEM = TT_ERR_NOMEM,        /* 503 */
};

/* The status code and reason phrase an error is answered with. */
int hreq_status(int err, const char **reason);
/* The code a refusal is counted as (tokentriage_request_errors_total{door="http"}): bad_request,
 * too_large (413), uri_too_long, headers_too_large, out_of_memory. */
const char *hreq_code(int err);

/* Bytes that are not NUL-terminated. */
typedef struct hreq_str {
    const char *ptr;
    size_t len;
} hreq_str_t;

typedef struct hreq_header {
    hreq_str_t name, value;
} hreq_header_t;

/* A whole request. Strings point into the reader's buffer: valid until hreq_next. */
typedef struct hreq_request {
    enum http_method method;
    hreq_str_t target; /* as sent: path, then '?' and the query when present */
    hreq_str_t path;   /* the target up to '?' (not percent-decoded) */
    hreq_str_t query;  /* after '?' (not decoded); empty when absent */
    uint32_t nheaders;
    hreq_header_t headers[HREQ_KEPT_MAX]; /* the kept ones, in order */
    hreq_str_t body;
    bool keep_alive; /* the client expects the connection to stay open */
} hreq_request_t;

/* Should a header named name[0, len) be kept? (Case is the client's: compare without it.) */
typedef bool (*hreq_want_fn)(void *ud, const char *name, size_t len);

typedef struct hreq_buf hreq_buf_t;

typedef struct hreq_reader {
    http_parser parser;
    hreq_want_fn want;
    void *want_ud;
    hreq_buf_t *buf; /* NULL while idle */
    int error;       /* the first error, latched */
    char message[160];
} hreq_reader_t;

/* Readies r; want may be NULL (no header kept). */
void hreq_init(hreq_reader_t *r, hreq_want_fn want, void *want_ud);

/*
 * Parses data[0, len). Returns HREQ_DONE with a whole request in *req (and *used the bytes it
 * took, the rest unread); 0 when all of data was used and the request is not whole yet; or a
 * negative HREQ_E* code with r->message saying what was wrong (the stream cannot go on; feed
 * returns the same code from then on).
 */
int hreq_feed(hreq_reader_t *r, const uint8_t *data, size_t len, size_t *used,
              const hreq_request_t **req);

/* The request handed over has been dealt with: ready for the next one. */
void hreq_next(hreq_reader_t *r);

/* Frees the request buffer when no request is under way (hreq_idle). */
void hreq_release(hreq_reader_t *r);

/* True when no byte of a request is waiting (between requests). */
bool hreq_idle(const hreq_reader_t *r);

void hreq_free(hreq_reader_t *r);

/* Case-insensitive comparison of s with the NUL-terminated lit. */
bool hreq_str_ieq(hreq_str_t s, const char *lit);

/* The value of the first kept header named `name` (case-insensitive), or NULL. */
const hreq_str_t *hreq_header(const hreq_request_t *req, const char *name);

#endif
