/* hdoor: HTTP requests to routes and decision calls, and decisions to HTTP answers. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "helpers.h" /* tests/engine's: limits and engines in a line */
#include "hdoor.h"

static hdoor_map_t map = {
    .subject = {{"team", "X-Team"}, {"key", "X-Api-Key"}}, .n_subject = 2, .tokens = "X-Tokens"};
static hreq_reader_t rd;
static hdoor_call_t call;
static tt_buf_t out;

static bool known(void *ud, const char *level, size_t len)
{
    (void)ud;
    return (len == 4 && memcmp(level, "team", 4) == 0) ||
           (len == 3 && memcmp(level, "key", 3) == 0);
}

static void teardown(void)
{
    hreq_free(&rd);
    tt_buf_free(&out);
}

TestSuite(hdoor, .fini = teardown);

static hdoor_frame_t keep = {.keep_alive = true};

/* Parses the raw request and routes it (decide served unless `off`). */
static hdoor_route_t route_on(const char *raw, bool decide_on)
{
    hreq_free(&rd);
    hreq_init(&rd, hdoor_want, &map);
    out.len = 0;
    size_t used;
    const hreq_request_t *req;
    cr_assert_eq(hreq_feed(&rd, (const uint8_t *)raw, strlen(raw), &used, &req), HREQ_DONE, "%s",
                 rd.message);
    hdoor_env_t env = {.map = &map, .decide = decide_on, .known = known};
    return hdoor_route(&env, req, &call, &out, keep);
}

static hdoor_route_t route(const char *raw)
{
    return route_on(raw, true);
}

static const char *answer(void)
{
    tt_buf_append(&out, "", 1);
    out.len--;
    return (const char *)out.data;
}

static bool pair_is(size_t i, const char *level, const char *id)
{
    const gov_pair_t *p = &call.subject.pairs[i];
    return p->level_len == strlen(level) && memcmp(p->level, level, p->level_len) == 0 &&
           p->id_len == strlen(id) && memcmp(p->id, id, p->id_len) == 0;
}

Test(hdoor, the_query_names_levels_and_tokens)
{
    cr_assert_eq(route("GET /v1/decide?team=t%2D1&key=a+b&tokens=1200 HTTP/1.1\r\n\r\n"),
                 HDOOR_DECIDE, "%s", answer());
    cr_assert_eq(call.subject.n, 2);
    cr_assert(pair_is(0, "team", "t-1"));
    cr_assert(pair_is(1, "key", "a b"));
    cr_assert_eq(call.tokens, 1200);
}

Test(hdoor, mapped_headers_name_levels_and_tokens_whatever_their_case)
{
    cr_assert_eq(route("POST /v1/decide HTTP/1.1\r\nx-team:  t-9 \r\nX-API-KEY: k\r\n"
                       "x-tokens: 7\r\nCookie: team=evil\r\nContent-Length: 0\r\n\r\n"),
                 HDOOR_DECIDE, "%s", answer());
    cr_assert_eq(call.subject.n, 2);
    cr_assert(pair_is(0, "team", "t-9"));
    cr_assert(pair_is(1, "key", "k"));
    cr_assert_eq(call.tokens, 7);
}

Test(hdoor, without_tokens_the_call_says_so)
{
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\n\r\n"), HDOOR_DECIDE);
    cr_assert_eq(call.tokens, GOV_NO_TOKENS);
}

Test(hdoor, a_forwarded_request_reads_headers_and_not_its_clients_query)
{
    cr_assert_eq(
        route("DELETE /v1/decide/api/items?taem=1&tokens=abc HTTP/1.1\r\nX-Team: t\r\n\r\n"),
        HDOOR_DECIDE, "%s", answer());
    cr_assert_eq(call.subject.n, 1);
    cr_assert(pair_is(0, "team", "t"));
    cr_assert_eq(call.tokens, GOV_NO_TOKENS);
}

/* Every malformed request: a 400 naming what was wrong, never a decision. */
Test(hdoor, malformed_requests_are_400_naming_what_was_wrong)
{
    static const struct {
        const char *raw, *code, *message;
    } cases[] = {
        {"GET /v1/decide?team=t&tokens=abc HTTP/1.1\r\n\r\n", "bad_value",
         "tokens (query): \\\"abc\\\" is not a whole number from 0 to 1099511627776"},
        {"GET /v1/decide?team=t HTTP/1.1\r\nX-Tokens: 1e3\r\n\r\n", "bad_value",
         "tokens (header X-Tokens): \\\"1e3\\\" is not a whole number"},
        {"GET /v1/decide?team=t&tokens=-1 HTTP/1.1\r\n\r\n", "bad_value", "\\\"-1\\\" is not"},
        {"GET /v1/decide?team=t&tokens=99999999999999999999 HTTP/1.1\r\n\r\n", "bad_value",
         "\\\"99999999999999999999\\\" is not"},
        {"GET /v1/decide?team=t&tokens=1099511627777 HTTP/1.1\r\n\r\n", "bad_value", "is not"},
        {"GET /v1/decide?team=t&tokens= HTTP/1.1\r\n\r\n", "bad_value", "\\\"\\\" is not"},
        {"GET /v1/decide?team=t&tokens=1&tokens=2 HTTP/1.1\r\n\r\n", "bad_value",
         "tokens given twice"},
        {"GET /v1/decide?team=t&tokens=1 HTTP/1.1\r\nX-Tokens: 1\r\n\r\n", "bad_value",
         "tokens given twice (again in header X-Tokens)"},
        {"GET /v1/decide?taem=t HTTP/1.1\r\n\r\n", "unknown_level",
         "query parameter taem names no level a limit attaches to"},
        {"GET /v1/decide?team=a&team=b HTTP/1.1\r\n\r\n", "bad_subject",
         "level team given twice (again in query)"},
        {"GET /v1/decide?team=a HTTP/1.1\r\nX-Team: b\r\n\r\n", "bad_subject",
         "level team given twice (again in header X-Team)"},
        {"GET /v1/decide HTTP/1.1\r\nX-Team: a\r\nx-team: b\r\n\r\n", "bad_value",
         "header x-team given twice"},
        {"GET /v1/decide?team= HTTP/1.1\r\n\r\n", "bad_subject", "level team: empty id (query)"},
        {"GET /v1/decide HTTP/1.1\r\nX-Team: \r\n\r\n", "bad_subject",
         "level team: empty id (header X-Team)"},
        {"GET /v1/decide?team=%zz HTTP/1.1\r\n\r\n", "bad_value",
         "query parameter team=%zz: bad percent-encoding"},
        {"GET /v1/decide?team=%4 HTTP/1.1\r\n\r\n", "bad_value", "bad percent-encoding"},
        {"GET /v1/decide?=x HTTP/1.1\r\n\r\n", "bad_value", "a query parameter without a name"},
        {"GET /v1/decide?team=t&deny_status=200 HTTP/1.1\r\n\r\n", "bad_value",
         "deny_status: \\\"200\\\" is not 401, 403 or 429"},
        {"GET /v1/decide HTTP/1.1\r\n\r\n", "bad_subject",
         "no subject: name a level in the query (?team=...) or send one of the headers X-Team, "
         "X-Api-Key"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(route(cases[i].raw), HDOOR_ANSWERED, "case %zu", i);
        const char *a = answer();
        cr_assert(strstr(a, "HTTP/1.1 400 Bad Request\r\n") == a, "case %zu: %s", i, a);
        char code[64];
        snprintf(code, sizeof(code), "\"code\":\"%s\"", cases[i].code);
        cr_assert(strstr(a, code), "case %zu: %s", i, a);
        cr_assert(strstr(a, cases[i].message), "case %zu: %s", i, a);
    }
}

Test(hdoor, an_id_longer_than_the_engine_takes_is_400)
{
    char raw[600];
    char id[GOV_ID_MAX + 2];
    memset(id, 'i', sizeof(id) - 1);
    id[sizeof(id) - 1] = 0;
    snprintf(raw, sizeof(raw), "GET /v1/decide?team=%s HTTP/1.1\r\n\r\n", id);
    cr_assert_eq(route(raw), HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "level team: id longer than 256 bytes (query)"), "%s", answer());
}

Test(hdoor, decide_off_is_403)
{
    cr_assert_eq(route_on("GET /v1/decide?team=t HTTP/1.1\r\n\r\n", false), HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "HTTP/1.1 403 Forbidden\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\"code\":\"decide_off\""));
}

Test(hdoor, operations_routes_take_get_and_head_only)
{
    cr_assert_eq(route("GET /healthz HTTP/1.1\r\n\r\n"), HDOOR_HEALTHZ);
    cr_assert_eq(route("HEAD /readyz HTTP/1.1\r\n\r\n"), HDOOR_READYZ);
    cr_assert_eq(route("GET /metrics?x HTTP/1.1\r\n\r\n"), HDOOR_METRICS);
    cr_assert_eq(route("POST /healthz HTTP/1.1\r\n\r\n"), HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "405 Method Not Allowed\r\n"), "%s", answer());
    cr_assert(strstr(answer(), "\r\nAllow: GET, HEAD\r\n"), "%s", answer());
    cr_assert_eq(route("GET /HEALTHZ HTTP/1.1\r\n\r\n"), HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "404 Not Found\r\n"), "%s", answer());
    cr_assert_eq(route("GET /v1/decidex HTTP/1.1\r\n\r\n"), HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "404 Not Found\r\n"), "%s", answer());
}

static gov_result_t result(bool admit, gov_verdict_t v)
{
    gov_result_t r = {.admit = admit,
                      .verdict = v,
                      .remaining = admit ? 4 : 0,
                      .retry_after_s = admit ? 0 : 12,
                      .reset_after_s = 60};
    snprintf(r.limit, sizeof(r.limit), "team_rpm");
    r.headers[r.n_headers].name = "RateLimit";
    snprintf(r.headers[r.n_headers++].value, GOV_HEADER_VALUE_MAX, "\"team_rpm\";r=%d;t=60",
             admit ? 4 : 0);
    if (!admit && v == GOV_DENY) {
        r.headers[r.n_headers].name = "Retry-After";
        snprintf(r.headers[r.n_headers++].value, GOV_HEADER_VALUE_MAX, "12");
    }
    return r;
}

/* Strings in an answer go through the one escaper: DEL escaped, bytes that are not UTF-8 as
 * U+FFFD, so the body is always valid JSON whatever a limit or a header holds. */
Test(hdoor, the_json_body_is_valid_whatever_its_strings_hold)
{
    gov_result_t r = result(true, GOV_ADMIT);
    snprintf(r.limit, sizeof(r.limit), "a\x7f\xff\n\xc3\xa9");
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "\"limit\":\"a\\u007f\\ufffd\\n\xc3\xa9\""), "%s", answer());
}

Test(hdoor, an_admit_is_200_with_the_headers_and_a_json_body)
{
    gov_result_t r = result(true, GOV_ADMIT);
    snprintf(r.soft_denied[r.n_soft_denied++], CFG_ID_MAX + 1, "soft_one");
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    const char *a = answer();
    cr_assert(strstr(a, "HTTP/1.1 200 OK\r\n") == a, "%s", a);
    cr_assert(strstr(a, "\r\nRateLimit: \"team_rpm\";r=4;t=60\r\n"), "%s", a);
    cr_assert_null(strstr(a, "Connection: close"));
    cr_assert(strstr(a, "\r\n\r\n{\"admit\":true,\"verdict\":\"admit\",\"limit\":\"team_rpm\","
                        "\"remaining\":4,\"retry_after\":0,\"reset_after\":60,"
                        "\"soft_denied\":[\"soft_one\"],"
                        "\"headers\":{\"RateLimit\":\"\\\"team_rpm\\\";r=4;t=60\"}}\n"),
              "%s", a);
}

/* A denial as the engine answers it and the door renders it: one request a minute, the second
 * denied. The Retry-After and the numbers are the product's (gcra: the next one is allowed 60 s
 * on), not this test's. */
static gov_result_t engine_denial(void)
{
    cfg_limit_t l = rpm("team_rpm", "team", 1, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r;
    subj(&s, "team", "t-1", NULL);
    cr_assert_eq(gov_decide(e, NULL, &s, 0, T0, &r, NULL, NULL), 0);
    cr_assert(r.admit);
    cr_assert_eq(gov_decide(e, NULL, &s, 0, T0 + S / 2, &r, NULL, NULL), 0);
    gov_engine_destroy(e);
    cr_assert_not(r.admit);
    gov_result_render(&r); /* as the door does before an answer */
    return r;
}

Test(hdoor, a_deny_is_429_with_the_engines_retry_after)
{
    gov_result_t r = engine_denial();
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, (hdoor_frame_t){0}), 0);
    const char *a = answer();
    cr_assert(strstr(a, "HTTP/1.1 429 Too Many Requests\r\n") == a, "%s", a);
    cr_assert(strstr(a, "\r\nRetry-After: 60\r\n"), "%s", a);
    cr_assert(strstr(a, "\r\nConnection: close\r\n"), "%s", a);
    cr_assert(strstr(a, "\"verdict\":\"deny\""), "%s", a);
    cr_assert(strstr(a, "\"retry_after\":60,"), "%s", a);
}

Test(hdoor, a_deny_takes_the_status_the_request_asked_for)
{
    cr_assert_eq(route("GET /v1/decide?team=t&deny_status=403 HTTP/1.1\r\n\r\n"), HDOOR_DECIDE);
    cr_assert_eq(call.deny_status, 403);
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\n\r\n"), HDOOR_DECIDE);
    cr_assert_eq(call.deny_status, 429);
    gov_result_t r = result(false, GOV_DENY);
    cr_assert_eq(hdoor_respond_decision(&out, &r, 403, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 403 Forbidden\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\r\nRetry-After: 12\r\n"), "%s", answer());
    r = result(true, GOV_ADMIT);
    out.len = 0;
    cr_assert_eq(hdoor_respond_decision(&out, &r, 403, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 200 OK\r\n") == answer(), "%s", answer());
}

Test(hdoor, a_deny_only_posture_made_is_503)
{
    gov_result_t r = result(false, GOV_DENY);
    r.unavailable = true;
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 503 Service Unavailable\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\"unavailable\":true"), "%s", answer());
}

Test(hdoor, unfittable_is_429_with_its_code)
{
    gov_result_t r = result(false, GOV_UNFITTABLE);
    r.code = "quota_cost_unfittable";
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 429 ") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\"code\":\"quota_cost_unfittable\""), "%s", answer());
    cr_assert_null(strstr(answer(), "Retry-After"));
}

Test(hdoor, an_engine_error_is_400_naming_it)
{
    gov_result_t r = {.status = GOV_ETOKENS};
    tt_err_set(&r.err, GOV_ETOKENS, "tokens", "required: tpm limit \"t\" applies");
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 400 Bad Request\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "{\"error\":{\"code\":\"tokens_required\",\"message\":\"tokens: "
                               "required: tpm limit \\\"t\\\" applies\"}}"),
              "%s", answer());
}

Test(hdoor, a_head_answer_has_no_body)
{
    cr_assert_eq(hdoor_respond_text(&out, 200, "OK", "ok\n", (hdoor_frame_t){.head_only = true}),
                 0);
    cr_assert_str_eq(answer(), "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                               "Content-Length: 3\r\nConnection: close\r\n\r\n");
}

Test(hdoor, settle_takes_post_with_a_reservation_and_actual)
{
    cr_assert_eq(route("POST /v1/settle?actual=250&reservation=18446744073709551615 HTTP/1.1\r\n"
                       "Host: t\r\nContent-Length: 0\r\n\r\n"),
                 HDOOR_SETTLE, "%s", answer());
    cr_assert_eq(call.reservation, UINT64_MAX);
    cr_assert_eq(call.tokens, 250);
    cr_assert_eq(route("GET /v1/settle?reservation=1&actual=1 HTTP/1.1\r\nHost: t\r\n\r\n"),
                 HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "405 Method Not Allowed\r\n") && strstr(answer(), "Allow: POST\r\n"),
              "%s", answer());
    static const struct {
        const char *query, *says;
    } bad[] = {
        {"reservation=1", "settle takes ?reservation=ID&actual=A"},
        {"reservation=1&actual=2&reservation=1", "reservation given twice"},
        {"reservation=1&actual=2&actual=2", "actual given twice"},
        {"reservation=0&actual=2", "reservation: \\\"0\\\" is not a reservation id"},
        {"reservation=-1&actual=2", "reservation: \\\"-1\\\" is not"},
        {"reservation=18446744073709551616&actual=2", "is not a reservation id"},
        {"reservation=1&actual=1099511627777", "actual: \\\"1099511627777\\\" is not a whole"},
        {"reservation=1&actual=2&team=t", "query parameter team: settle takes reservation and"},
        {"reservation=%zz&actual=2", "bad percent-encoding"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char raw[256];
        snprintf(raw, sizeof(raw), "POST /v1/settle?%s HTTP/1.1\r\nHost: t\r\n\r\n", bad[i].query);
        cr_assert_eq(route(raw), HDOOR_ANSWERED, "%s", bad[i].query);
        cr_assert(strstr(answer(), "400 Bad Request\r\n"), "%s: %s", bad[i].query, answer());
        cr_assert(strstr(answer(), bad[i].says), "%s: %s", bad[i].query, answer());
    }
    cr_assert_eq(
        route_on("POST /v1/settle?reservation=1&actual=1 HTTP/1.1\r\nHost: t\r\n\r\n", false),
        HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "403 Forbidden\r\n"), "%s", answer());
}

Test(hdoor, a_settle_answer_says_what_changed)
{
    gov_result_t r = {.settled = 2};
    cr_assert_eq(hdoor_respond_settled(&out, &r, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 200 OK\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\r\n\r\n{\"settled\":2,\"already_settled\":false}\n"), "%s",
              answer());
    out.len = 0;
    r = (gov_result_t){.status = GOV_ERESERVATION};
    tt_err_set(&r.err, GOV_ERESERVATION, "", "no such reservation");
    cr_assert_eq(hdoor_respond_settled(&out, &r, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 404 Not Found\r\n") == answer(), "%s", answer());
    cr_assert(strstr(answer(), "\"code\":\"unknown_reservation\""), "%s", answer());
}

Test(hdoor, an_admit_with_a_reservation_carries_it_in_a_header_and_the_body)
{
    gov_result_t r = result(true, GOV_ADMIT);
    r.reservation = 12345678901234567890u;
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "\r\nTokentriage-Reservation: 12345678901234567890\r\n"), "%s",
              answer());
    cr_assert(strstr(answer(), ",\"reservation\":12345678901234567890,"), "%s", answer());
}

static bool authorization_is(const char *want)
{
    return want ? call.authorization.len == strlen(want) &&
                      memcmp(call.authorization.ptr, want, call.authorization.len) == 0
                : call.authorization.ptr == NULL;
}

/* The credentials go to the door as sent; Tokentriage-Authorization wins over a client's own
 * Authorization (a forward-auth proxy passes the client's API key along). */
Test(hdoor, the_credentials_are_read_for_the_door)
{
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\n\r\n"), HDOOR_DECIDE);
    cr_assert(authorization_is(NULL));
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\nauthorization:  Bearer abc \r\n\r\n"),
                 HDOOR_DECIDE);
    cr_assert(authorization_is("Bearer abc"));
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\nAuthorization: Bearer sk-client\r\n"
                       "Tokentriage-Authorization: Bearer ours\r\n\r\n"),
                 HDOOR_DECIDE);
    cr_assert(authorization_is("Bearer ours"));
    cr_assert_eq(route("POST /v1/settle?reservation=7&actual=1 HTTP/1.1\r\n"
                       "Tokentriage-Authorization: Bearer ours\r\n\r\n"),
                 HDOOR_SETTLE);
    cr_assert(authorization_is("Bearer ours"));
    cr_assert_eq(route("GET /v1/decide?team=t HTTP/1.1\r\nAuthorization: Bearer a\r\n"
                       "Authorization: Bearer b\r\n\r\n"),
                 HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "400 Bad Request") && strstr(answer(), "given twice"), "%s",
              answer());
    cr_assert_eq(route("POST /v1/settle?reservation=7&actual=1 HTTP/1.1\r\n"
                       "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n"),
                 HDOOR_ANSWERED);
    cr_assert(strstr(answer(), "header Authorization given twice"), "%s", answer());
}

/* The door's refusals: 401 with the challenge RFC 6750 asks for, 403; on both routes. */
Test(hdoor, a_caller_the_door_refused_is_401_or_403)
{
    gov_result_t r = {.status = TT_ERR_UNAUTHENTICATED};
    tt_err_set(&r.err, TT_ERR_UNAUTHENTICATED, "authorization", "no token");
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 401 Unauthorized\r\n"), "%s", answer());
    cr_assert(strstr(answer(), "\r\nWWW-Authenticate: Bearer realm=\"tokentriage\"\r\n"), "%s",
              answer());
    cr_assert(
        strstr(answer(), "\"code\":\"unauthenticated\",\"message\":\"authorization: no token\""),
        "%s", answer());
    out.len = 0;
    cr_assert_eq(hdoor_respond_settled(&out, &r, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 401 Unauthorized\r\n"), "%s", answer());
    out.len = 0;
    r.status = r.err.code = TT_ERR_FORBIDDEN;
    cr_assert_eq(hdoor_respond_decision(&out, &r, 429, keep), 0);
    cr_assert(strstr(answer(), "HTTP/1.1 403 Forbidden\r\n") && strstr(answer(), "\"forbidden\""),
              "%s", answer());
    cr_assert_null(strstr(answer(), "WWW-Authenticate"));
}
