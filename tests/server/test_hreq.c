/* hreq: requests off a byte stream, through libhttp-parser. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "hreq.h"

static hreq_reader_t rd;

static bool want_team(void *ud, const char *name, size_t len)
{
    (void)ud;
    return hreq_str_ieq((hreq_str_t){name, len}, "X-Team") ||
           hreq_str_ieq((hreq_str_t){name, len}, "X-Tokens");
}

static void setup(void)
{
    hreq_init(&rd, want_team, NULL);
}

static void teardown(void)
{
    hreq_free(&rd);
}

TestSuite(hreq, .init = setup, .fini = teardown);

static bool eq(hreq_str_t s, const char *lit)
{
    return s.len == strlen(lit) && memcmp(s.ptr, lit, s.len) == 0;
}

static int feed_str(const char *s, size_t *used, const hreq_request_t **req)
{
    return hreq_feed(&rd, (const uint8_t *)s, strlen(s), used, req);
}

Test(hreq, a_get_is_read_whole_with_the_wanted_headers_only)
{
    const char *s = "GET /v1/decide?team=t-1&tokens=5 HTTP/1.1\r\nHost: x\r\nx-team: t-9\r\n"
                    "Cookie: a=b\r\nX-Tokens: 12 \r\n\r\n";
    size_t used;
    const hreq_request_t *req;
    cr_assert_eq(feed_str(s, &used, &req), HREQ_DONE);
    cr_assert_eq(used, strlen(s));
    cr_assert_eq(req->method, HTTP_GET);
    cr_assert(eq(req->path, "/v1/decide"));
    cr_assert(eq(req->query, "team=t-1&tokens=5"));
    cr_assert(req->keep_alive);
    cr_assert_eq(req->nheaders, 2);
    cr_assert(eq(*hreq_header(req, "X-TEAM"), "t-9"));
    cr_assert(
        eq(hreq_header(req, "x-tokens")->ptr[0] == '1' ? (hreq_str_t){"12", 2} : req->path, "12"));
    cr_assert_null(hreq_header(req, "Cookie"));
    hreq_next(&rd);
    cr_assert(hreq_idle(&rd));
}

Test(hreq, a_request_dripped_byte_by_byte_reads_the_same)
{
    const char *s = "POST /v1/settle HTTP/1.1\r\nHost: x\r\nX-Team: t\r\nContent-Length: 9\r\n\r\n"
                    "actual=42";
    const hreq_request_t *req = NULL;
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        size_t used;
        int rc = hreq_feed(&rd, (const uint8_t *)s + i, 1, &used, &req);
        cr_assert_eq(used, 1, "byte %zu", i);
        cr_assert_eq(rc, i + 1 == n ? HREQ_DONE : 0, "byte %zu", i);
        cr_assert(!hreq_idle(&rd));
    }
    cr_assert_eq(req->method, HTTP_POST);
    cr_assert(eq(req->body, "actual=42"));
    cr_assert(eq(*hreq_header(req, "x-team"), "t"));
}

Test(hreq, pipelined_requests_come_one_at_a_time)
{
    const char *a = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    const char *b = "GET /b?q HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char both[256];
    snprintf(both, sizeof(both), "%s%s", a, b);
    size_t used;
    const hreq_request_t *req;
    cr_assert_eq(feed_str(both, &used, &req), HREQ_DONE);
    cr_assert_eq(used, strlen(a));
    cr_assert(eq(req->path, "/a"));
    hreq_next(&rd);
    size_t used2;
    cr_assert_eq(feed_str(both + used, &used2, &req), HREQ_DONE);
    cr_assert_eq(used2, strlen(b));
    cr_assert(eq(req->path, "/b"));
    cr_assert(eq(req->query, "q"));
    cr_assert(!req->keep_alive);
}

Test(hreq, http_1_0_closes_unless_asked_to_keep_alive)
{
    size_t used;
    const hreq_request_t *req;
    cr_assert_eq(feed_str("GET / HTTP/1.0\r\n\r\n", &used, &req), HREQ_DONE);
    cr_assert(!req->keep_alive);
    hreq_free(&rd);
    hreq_init(&rd, NULL, NULL);
    cr_assert_eq(feed_str("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &used, &req),
                 HREQ_DONE);
    cr_assert(req->keep_alive);
}

static void expect_error(const char *s, int code, int status, const char *message)
{
    size_t used;
    const hreq_request_t *req;
    const char *reason;
    cr_assert_eq(feed_str(s, &used, &req), code, "%s", rd.message);
    cr_assert_eq(hreq_status(code, &reason), status);
    cr_assert(strstr(rd.message, message), "%s", rd.message);
    /* latched: the stream cannot go on */
    cr_assert_eq(feed_str("GET / HTTP/1.1\r\n\r\n", &used, &req), code);
}

/* Each refusal is counted under a code of its own (tokentriage_request_errors_total). */
Test(hreq, each_error_is_counted_as_its_code)
{
    cr_assert_str_eq(hreq_code(HREQ_EBAD), "bad_request");
    cr_assert_str_eq(hreq_code(HREQ_ETARGET), "uri_too_long");
    cr_assert_str_eq(hreq_code(HREQ_EHEAD), "headers_too_large");
    cr_assert_str_eq(hreq_code(HREQ_EBODY), "too_large");
    cr_assert_str_eq(hreq_code(HREQ_ENOMEM), "out_of_memory");
    cr_assert_str_eq(hreq_code(-1), "bad_request", "anything else is a 400");
}

Test(hreq, garbage_is_400_with_the_parser_reason)
{
    expect_error("\x01 / HTTP/1.1\r\n\r\n", HREQ_EBAD, 400,
                 "malformed request: invalid HTTP method");
}

Test(hreq, http_2_is_refused)
{
    expect_error("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", HREQ_EBAD, 400, "");
}

Test(hreq, a_long_target_is_414)
{
    static char s[8192];
    memset(s, 'a', sizeof(s));
    memcpy(s, "GET /", 5);
    strcpy(s + 6000, " HTTP/1.1\r\n\r\n");
    expect_error(s, HREQ_ETARGET, 414, "request target longer than 4096 bytes");
}

Test(hreq, a_head_beyond_the_bound_is_431_even_in_headers_nobody_reads)
{
    static char s[40000];
    memset(s, 'a', sizeof(s) - 1);
    memcpy(s, "GET / HTTP/1.1\r\nCookie: ", 24);
    expect_error(s, HREQ_EHEAD, 431, "request head longer than 32768 bytes");
}

Test(hreq, kept_header_values_are_bounded)
{
    static char s[12000];
    memset(s, 'a', sizeof(s) - 1);
    memcpy(s, "GET / HTTP/1.1\r\nX-Team: ", 24);
    expect_error(s, HREQ_EHEAD, 431, "longer than 8192 bytes together");
}

Test(hreq, a_body_announced_too_long_is_413_before_it_arrives)
{
    expect_error("POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", HREQ_EBODY, 413,
                 "a body of 5000 bytes; at most 4096");
}

Test(hreq, a_chunked_body_too_long_is_413)
{
    static char s[6000];
    int n = snprintf(s, sizeof(s), "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1388\r\n");
    memset(s + n, 'b', sizeof(s) - 1 - (size_t)n);
    expect_error(s, HREQ_EBODY, 413, "a body longer than 4096 bytes");
}

/* RFC 9112 §5.1: whitespace between a field name and its colon is a 400, never a header read
 * under another name (libhttp-parser, built lenient, took "Transfer-Encoding : chunked" as
 * Transfer-Encoding: a request-smuggling form when a proxy in front reads it otherwise). */
Test(hreq, a_space_before_a_header_colon_is_400)
{
    static const char *heads[] = {
        "POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc",
        "GET / HTTP/1.1\r\nX-Team  : t-1\r\n\r\n",
        "GET / HTTP/1.1\r\nX Team: t-1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        hreq_free(&rd);
        hreq_init(&rd, want_team, NULL);
        expect_error(heads[i], HREQ_EBAD, 400, "whitespace in a header name");
    }
}

Test(hreq, an_idle_reader_holds_no_buffer)
{
    cr_assert(hreq_idle(&rd));
    size_t used;
    const hreq_request_t *req;
    cr_assert_eq(feed_str("GET / HT", &used, &req), 0);
    cr_assert(!hreq_idle(&rd));
    cr_assert_eq(feed_str("TP/1.1\r\n\r\n", &used, &req), HREQ_DONE);
    hreq_next(&rd);
    cr_assert(hreq_idle(&rd));
    hreq_release(&rd);
    cr_assert_null(rd.buf);
    cr_assert_eq(feed_str("GET / HT", &used, &req), 0);
    hreq_release(&rd);
    cr_assert_not_null(rd.buf, "a request under way keeps its buffer");
}
