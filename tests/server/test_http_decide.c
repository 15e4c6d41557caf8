/* The HTTP front door (SPEC §12) on the real daemon: /v1/decide over the TCP listener, each
 * request with a bearer token of server.tokens_file (SPEC §9). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "httpc.h"

/* key_rpm is a fixed window of a year: its remaining moves by exactly the requests decided,
 * with no refill during a test, so it tells exactly what was spent. */
#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 5\n"        \
    "      period: 1m\n"                                                                           \
    "    - id: key_rpm\n      attach: { level: key }\n      type: rpm\n      amount: 60000\n"      \
    "      period: 8760h\n      algorithm: fixed_window\n"                                         \
    "    - id: key_tpm\n      attach: { level: key }\n      type: tpm\n      amount: 100000\n"     \
    "      period: 1m\n      burst: 100000\n"

/* A year-long tpm bucket: nothing refills during a test, so the remaining tokens move by
 * exactly what was charged and refunded. */
/* Tokens per team, for the reservations of several clients. */
#define TPM_TEAM                                                                                   \
    "    - id: team_tpm\n      attach: { level: team }\n      type: tpm\n      amount: 100000\n"   \
    "      period: 8760h\n      burst: 100000\n"

#define TPM_YEAR                                                                                   \
    "    - id: key_tpm\n      attach: { level: key }\n      type: tpm\n      amount: 100000\n"     \
    "      period: 8760h\n      burst: 100000\n"

/* server.tokens_file: the proxy's token names any team and key, team a's only its own. */
#define TOKEN "proxy-token-0123456789abcdef"
#define TOKEN_A "team-a-token-0123456789abcdef"
#define TOKENS                                                                                     \
    "tokens:\n"                                                                                    \
    "  - { name: proxy, token: " TOKEN ", subjects: { team: [\"*\"], key: [\"*\"] } }\n"           \
    "  - { name: team-a, token: " TOKEN_A ", subjects: { team: [a], key: [\"a-*\"] } }\n"

static tt_daemon_t d;
static int port;
static httpc_response_t r;
static char v[256];
static char tokens_dir[64], tokens_file[96];
static const char *bearer = TOKEN; /* what ask() presents; NULL: no Authorization */

static void stop(void)
{
    tt_daemon_stop(&d);
    if (tokens_file[0])
        unlink(tokens_file);
    if (tokens_dir[0])
        rmdir(tokens_dir);
    tokens_file[0] = tokens_dir[0] = '\0';
    bearer = TOKEN;
}

TestSuite(http_decide, .fini = stop, .timeout = 60);

/* The daemon with HTTP on host:<free port>, the header mapping, decide served there with the
 * tokens of TOKENS (unless `more` says http_decide itself), and `more` server lines. */
static void start_on(const char *host, const char *limits, const char *more)
{
    if (!tokens_dir[0]) {
        snprintf(tokens_dir, sizeof(tokens_dir), "/tmp/tt-http-tokens-XXXXXX");
        cr_assert_not_null(mkdtemp(tokens_dir));
        snprintf(tokens_file, sizeof(tokens_file), "%s/tokens.yaml", tokens_dir);
        FILE *f = fopen(tokens_file, "w");
        cr_assert_not_null(f);
        fputs(TOKENS, f);
        fclose(f);
    }
    char extra[768];
    port = tt_free_port();
    snprintf(extra, sizeof(extra),
             "  http: %s:%d\n  http_subject: { team: X-Team, key: X-Api-Key }\n"
             "  http_tokens: X-Tokens\n  tokens_file: %s\n%s%s",
             host, port, tokens_file, strstr(more, "http_decide:") ? "" : "  http_decide: on\n",
             more);
    cr_assert_eq(tt_daemon_start(&d, limits, extra), 0);
}

static void start(void)
{
    start_on("127.0.0.1", LIMITS, "");
}

/* One request on a new connection; returns the status. */
static int ask(const char *method, const char *target, const char *headers)
{
    int fd = httpc_tcp(port);
    cr_assert_geq(fd, 0);
    static char req[65536];
    char auth[128] = "";
    if (bearer)
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", bearer);
    int n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s\r\n",
                     method, target, auth, headers ? headers : "");
    cr_assert_lt((size_t)n, sizeof(req));
    httpc_reset();
    httpc_send(fd, req, (size_t)n); /* the daemon may answer a bad head before taking it all */
    cr_assert_eq(httpc_read(fd, &r, 5000), 0, "%s %s: no answer", method, target);
    close(fd);
    return r.status;
}

/* What key_rpm has left, from its header. */
static long requests_left(void)
{
    const char *h = httpc_header(&r, "X-Ratelimit-Remaining-Requests", v, sizeof(v));
    return h ? strtol(h, NULL, 10) : -1;
}

static long tokens_left(void)
{
    const char *h = httpc_header(&r, "X-Ratelimit-Remaining-Tokens", v, sizeof(v));
    return h ? strtol(h, NULL, 10) : -1;
}

Test(http_decide, admits_then_denies_with_the_headers_and_retry_after)
{
    start();
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(ask("GET", "/v1/decide?team=t-1", NULL), 200, "request %d: %s", i, r.raw);
        cr_assert_str_eq(httpc_header(&r, "Ratelimit-Policy", v, sizeof(v)),
                         "\"team_rpm\";q=5;w=60");
        char want[64];
        snprintf(want, sizeof(want), "\"team_rpm\";r=%d;", 4 - i);
        cr_assert(strstr(httpc_header(&r, "RateLimit", v, sizeof(v)), want), "%s", v);
        cr_assert_str_eq(httpc_header(&r, "Content-Type", v, sizeof(v)), "application/json");
        cr_assert(strstr(r.body, "\"admit\":true,\"verdict\":\"admit\",\"limit\":\"team_rpm\""),
                  "%s", r.body);
    }
    cr_assert_eq(ask("GET", "/v1/decide?team=t-1", NULL), 429, "%s", r.raw);
    long retry = strtol(httpc_header(&r, "Retry-After", v, sizeof(v)), NULL, 10);
    cr_assert(retry >= 1 && retry <= 60, "Retry-After %ld", retry);
    cr_assert_not_null(httpc_header(&r, "RateLimit", v, sizeof(v)));
    cr_assert(strstr(r.body, "\"admit\":false,\"verdict\":\"deny\""), "%s", r.body);
    /* another team is its own counter; POST and a header do the same */
    cr_assert_eq(ask("POST", "/v1/decide", "X-Team: t-2\r\nContent-Length: 0\r\n"), 200);
}

Test(http_decide, tokens_come_from_the_query_or_the_mapped_header)
{
    start_on("127.0.0.1", TPM_YEAR, ""); /* no refill: exact however slow the run */
    cr_assert_eq(ask("GET", "/v1/decide?key=k&tokens=1000", NULL), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 99000);
    cr_assert_eq(ask("GET", "/v1/decide", "X-Api-Key: k\r\nX-Tokens: 500\r\n"), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 98500);
}

/* Issue 19: bad client input must never be a decision, and never fail open. Each case is a 400
 * naming what was wrong and spends nothing: the sentinel's counter moves only by the good
 * requests around them. */
Test(http_decide, malformed_requests_are_400_and_spend_nothing)
{
    start();
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", NULL), 200);
    cr_assert_eq(requests_left(), 59999);
    static const struct {
        const char *target, *headers, *message;
    } cases[] = {
        {"/v1/decide?key=sentinel&tokens=abc", NULL, "is not a whole number"},
        {"/v1/decide?key=sentinel", "X-Tokens: 1e3\r\n", "\\\"1e3\\\" is not a whole number"},
        {"/v1/decide?key=sentinel", "X-Tokens: 99999999999999999999\r\n", "is not a whole"},
        {"/v1/decide?key=sentinel&tokens=-5", NULL, "is not a whole number"},
        {"/v1/decide?key=sentinel&tokens=1&taem=x", NULL, "taem names no level"},
        {"/v1/decide?key=sentinel&key=sentinel&tokens=1", NULL, "level key given twice"},
        {"/v1/decide?tokens=1", "X-Api-Key: sentinel\r\nX-Api-Key: sentinel\r\n", "given twice"},
        {"/v1/decide?key=sentinel&tokens=1%", NULL, "bad percent-encoding"},
        /* the engine's error: its code's name, and "path: message" */
        {"/v1/decide?key=sentinel", NULL,
         "{\"error\":{\"code\":\"tokens_required\",\"message\":\"tokens: required: tpm limit "
         "\\\"key_tpm\\\" applies\"}}"},
        {"/v1/decide?tokens=1", NULL, "no subject"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(ask("GET", cases[i].target, cases[i].headers), 400, "case %zu: %s", i, r.raw);
        cr_assert(strstr(r.body, cases[i].message), "case %zu: %s", i, r.body);
        cr_assert_null(httpc_header(&r, "RateLimit", v, sizeof(v)), "case %zu decided", i);
    }
    /* an oversized header and a body too large: the parser's bounds, still no decision */
    static char big[40000];
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "X-Pad: ", 7);
    memcpy(big + sizeof(big) - 3, "\r\n", 3);
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", big), 431);
    cr_assert_eq(ask("POST", "/v1/decide?key=sentinel&tokens=1", "Content-Length: 100000\r\n"),
                 413);
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", NULL), 200);
    cr_assert_eq(requests_left(), 59998, "the sentinel spent only the two good requests");
}

Test(http_decide, a_thousand_decisions_on_one_keep_alive_connection)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    const char req[] = "GET /v1/decide?key=ka HTTP/1.1\r\nHost: t\r\nX-Tokens: 1\r\n"
                       "Authorization: Bearer " TOKEN "\r\n\r\n";
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "request %d", i);
        cr_assert_eq(r.status, 200, "request %d: %s", i, r.raw);
    }
    cr_assert_eq(requests_left(), 59000, "%s", r.raw);
    close(fd);
}

Test(http_decide, a_pipelined_burst_is_answered_in_order)
{
    start();
    int fd = httpc_tcp(port);
    httpc_reset();
    static char burst[200 * 160];
    size_t len = 0;
    for (int i = 0; i < 200; i++)
        len += (size_t)snprintf(burst + len, sizeof(burst) - len,
                                "GET /v1/decide?key=pipe&tokens=%d HTTP/1.1\r\nHost: t\r\n"
                                "Authorization: Bearer " TOKEN "\r\n\r\n",
                                i + 1);
    cr_assert_eq(httpc_send(fd, burst, len), 0);
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "answer %d", i);
        cr_assert_eq(r.status, 200);
        /* key_rpm's remaining says which request this answer is for */
        cr_assert_eq(requests_left(), 59999 - i, "answer %d: %s", i, r.raw);
    }
    close(fd);
}

Test(http_decide, a_deny_only_posture_fail_closed_made_is_503)
{
    start_on("127.0.0.1",
             "    - id: key_rpm\n      attach: { level: key }\n      type: rpm\n"
             "      amount: 10\n      period: 1m\n      posture: { fail: closed }\n",
             "  max_counters: 1\n");
    cr_assert_eq(ask("GET", "/v1/decide?key=a", NULL), 200, "%s", r.raw);
    cr_assert_eq(ask("GET", "/v1/decide?key=b", NULL), 503, "%s", r.raw);
    cr_assert(strstr(r.body, "\"unavailable\":true"), "%s", r.body);
    cr_assert_not_null(httpc_header(&r, "Retry-After", v, sizeof(v)));
}

/* SPEC §9 (issue 34 item 4): the TCP listener decides only when server.http_decide is on, and
 * then only for a bearer token of server.tokens_file; on loopback as anywhere. */
Test(http_decide, the_tcp_listener_decides_only_when_told_and_only_for_a_token)
{
    start_on("127.0.0.1", LIMITS, "  http_decide: off\n");
    cr_assert_eq(ask("GET", "/v1/decide?team=t", NULL), 403, "%s", r.raw);
    cr_assert(strstr(r.body, "\"code\":\"decide_off\"") && strstr(r.body, "server.http_decide"),
              "%s", r.body);
    cr_assert_eq(ask("GET", "/healthz", NULL), 200);
    tt_daemon_stop(&d);
    start_on("0.0.0.0", LIMITS, "");
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", NULL), 200, "%s", r.raw);
    cr_assert_eq(requests_left(), 59999);
    static const char *const refused[] = {NULL, "not-a-token-of-this-daemon-1234", ""};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        bearer = refused[i];
        cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", NULL), 401, "case %zu: %s", i,
                     r.raw);
        cr_assert(strstr(r.body, "\"code\":\"unauthenticated\""), "%s", r.body);
        cr_assert_str_eq(httpc_header(&r, "WWW-Authenticate", v, sizeof(v)),
                         "Bearer realm=\"tokentriage\"");
    }
    bearer = NULL;
    cr_assert_eq(
        ask("GET", "/v1/decide?key=sentinel&tokens=1", "Authorization: Basic cHJveHk6eA==\r\n"),
        401, "%s", r.raw);
    cr_assert(strstr(r.body, "expected \\\"Bearer <token>\\\""), "%s", r.body);
    cr_assert_eq(ask("POST", "/v1/settle?reservation=7&actual=1", NULL), 401, "%s", r.raw);
    bearer = TOKEN;
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1", NULL), 200, "%s", r.raw);
    /* a forward-auth proxy passes its client's own Authorization (an LLM API key) along and
     * states its token in Tokentriage-Authorization, which wins */
    bearer = "sk-the-client-s-own-api-key-000";
    cr_assert_eq(ask("GET", "/v1/decide?key=sentinel&tokens=1",
                     "Tokentriage-Authorization: Bearer " TOKEN "\r\n"),
                 200, "%s", r.raw);
    cr_assert_eq(requests_left(), 59997, "only the requests with the token spent");
}

/* issue 31 item 4: a token spends only the subjects it was granted, and settles only what it
 * reserved; the socket's reservations are not a token's either. */
Test(http_decide, a_token_spends_only_its_subjects_and_settles_only_its_reservations)
{
    start_on("127.0.0.1", LIMITS TPM_TEAM, "");
    bearer = TOKEN_A;
    cr_assert_eq(ask("GET", "/v1/decide?team=a&key=a-1&tokens=1", NULL), 200, "%s", r.raw);
    static const char *const other[] = {"/v1/decide?team=b", "/v1/decide?team=a&key=b-1",
                                        "/v1/decide?key=a-1&team=ab"};
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        cr_assert_eq(ask("GET", other[i], NULL), 403, "%s: %s", other[i], r.raw);
        cr_assert(strstr(r.body, "\"code\":\"forbidden\"") && strstr(r.body, "team-a"), "%s",
                  r.body);
    }
    cr_assert_eq(ask("GET", "/v1/decide", "X-Team: b\r\n"), 403, "a mapped header is named too");
    /* team a's reservation, and the proxy's */
    cr_assert_eq(ask("GET", "/v1/decide?team=a&tokens=5000", NULL), 200, "%s", r.raw);
    char mine[32], theirs[32], target[128];
    cr_assert_not_null(httpc_header(&r, "Tokentriage-Reservation", mine, sizeof(mine)));
    bearer = TOKEN;
    cr_assert_eq(ask("GET", "/v1/decide?team=a&tokens=5000", NULL), 200, "%s", r.raw);
    cr_assert_not_null(httpc_header(&r, "Tokentriage-Reservation", theirs, sizeof(theirs)));
    bearer = TOKEN_A;
    snprintf(target, sizeof(target), "/v1/settle?reservation=%s&actual=0", theirs);
    cr_assert_eq(ask("POST", target, NULL), 404, "another token's reservation: %s", r.raw);
    snprintf(target, sizeof(target), "/v1/settle?reservation=%s&actual=0", mine);
    cr_assert_eq(ask("POST", target, NULL), 200, "%s", r.raw);
    cr_assert(strstr(r.body, "\"settled\":1"), "%s", r.body);
    bearer = TOKEN;
    snprintf(target, sizeof(target), "/v1/settle?reservation=%s&actual=0", theirs);
    cr_assert_eq(ask("POST", target, NULL), 200, "the proxy settles its own: %s", r.raw);
    /* a reservation made on the socket is the socket's callers', not a token's */
    tt_client_t *c = tt_daemon_client(&d);
    tt_response_t tr;
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "a"}}, 1, 100, &tr), 0);
    cr_assert(tr.admit && tr.reservation);
    snprintf(target, sizeof(target), "/v1/settle?reservation=%llu&actual=0",
             (unsigned long long)tr.reservation);
    cr_assert_eq(ask("POST", target, NULL), 404, "%s", r.raw);
    cr_assert_eq(tt_settle(c, tr.reservation, 0, &tr), 0);
    cr_assert_eq(tr.settled, 1, "still the socket's to settle");
    tt_close(c);
}

Test(http_decide, decisions_over_http_are_counted_on_metrics)
{
    start();
    cr_assert_eq(ask("GET", "/v1/decide?team=m", NULL), 200);
    cr_assert_eq(ask("GET", "/metrics", NULL), 200);
    cr_assert(
        strstr(r.body, "tokentriage_decisions_total{limit=\"team_rpm\",verdict=\"admit\"} 1\n"),
        "%s", r.body);
    cr_assert(strstr(r.body, "tokentriage_decision_latency_seconds_count{door=\"http\"} 1\n"), "%s",
              r.body);
    cr_assert(strstr(r.body, "tokentriage_verdicts_total{door=\"http\",verdict=\"admit\"} 1\n"),
              "%s", r.body);
}

/* SPEC §12: the first byte tells a msgpack map from an HTTP method, on the same socket. */
Test(http_decide, the_socket_serves_http_and_msgpack_side_by_side)
{
    start_on("127.0.0.1", LIMITS, "  http_decide: off\n"); /* the socket serves it regardless */
    int fd = httpc_unix(d.socket);
    cr_assert_geq(fd, 0);
    httpc_reset();
    tt_client_t *c = tt_daemon_client(&d);
    const char req[] = "GET /v1/decide?key=sock HTTP/1.1\r\nHost: t\r\nX-Tokens: 1\r\n\r\n";
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "request %d", i);
        cr_assert_eq(r.status, 200, "%s", r.raw);
        cr_assert_eq(requests_left(), 59999 - 2 * i, "%s", r.raw);
        tt_response_t tr;
        cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"key", "sock"}}, 1, 1, &tr), 0);
        cr_assert(tr.admit);
    }
    tt_close(c);
    close(fd);
    /* a stream that is neither is still refused as before */
    fd = httpc_unix(d.socket);
    cr_assert_eq(httpc_send(fd, "\x01", 1), 0);
    cr_assert(httpc_closed(fd, 5000));
    close(fd);
}

/* Issue 19: POST /v1/settle settles the reservation /v1/decide answered, once (a retry after a
 * timeout changes nothing), and only with the id the decision handed out. */
Test(http_decide, a_reservation_is_settled_over_http_once)
{
    start_on("127.0.0.1", TPM_YEAR, "");
    cr_assert_eq(ask("GET", "/v1/decide?key=k&tokens=1000", NULL), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 99000);
    char id[32];
    cr_assert_not_null(httpc_header(&r, "Tokentriage-Reservation", id, sizeof(id)), "%s", r.raw);
    char in_body[64];
    snprintf(in_body, sizeof(in_body), "\"reservation\":%s", id);
    cr_assert(strstr(r.body, in_body), "%s", r.body);

    char target[128];
    snprintf(target, sizeof(target), "/v1/settle?reservation=%s&actual=200", id);
    cr_assert_eq(ask("GET", target, NULL), 405, "%s", r.raw); /* settling is not a GET */
    cr_assert_eq(ask("POST", target, "Content-Length: 0\r\n"), 200, "%s", r.raw);
    cr_assert(strstr(r.body, "\"settled\":1,\"already_settled\":false"), "%s", r.body);
    cr_assert_eq(ask("GET", "/v1/decide?key=k&tokens=0", NULL), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 99800); /* 800 of the 1000 reserved came back */

    cr_assert_eq(ask("POST", target, "Content-Length: 0\r\n"), 200, "%s", r.raw);
    cr_assert(strstr(r.body, "\"settled\":0,\"already_settled\":true"), "%s", r.body);
    cr_assert_eq(ask("GET", "/v1/decide?key=k&tokens=0", NULL), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 99800);

    /* an id nobody was handed, and malformed settles: nothing changes */
    cr_assert_eq(ask("POST", "/v1/settle?reservation=12345&actual=1", NULL), 404, "%s", r.raw);
    cr_assert(strstr(r.body, "\"code\":\"unknown_reservation\""), "%s", r.body);
    static const char *const bad[] = {
        "/v1/settle?actual=1",
        "/v1/settle?reservation=0&actual=1",
        "/v1/settle?reservation=abc&actual=1",
        "/v1/settle?reservation=18446744073709551616&actual=1",
        "/v1/settle?reservation=7",
        "/v1/settle?reservation=7&actual=-1",
        "/v1/settle?reservation=7&actual=1e3",
        "/v1/settle?reservation=7&actual=1&key=k",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(ask("POST", bad[i], NULL), 400, "%s: %s", bad[i], r.raw);
        cr_assert(strstr(r.body, "\"message\":"), "%s: %s", bad[i], r.body);
    }
    cr_assert_eq(ask("GET", "/v1/decide?key=k&tokens=0", NULL), 200, "%s", r.raw);
    cr_assert_eq(tokens_left(), 99800);
}

Test(http_decide, settle_is_served_where_decide_is)
{
    start_on("127.0.0.1", TPM_YEAR, "  http_decide: off\n");
    cr_assert_eq(ask("POST", "/v1/settle?reservation=7&actual=1", NULL), 403, "%s", r.raw);
    int fd = httpc_unix(d.socket); /* the decision socket serves it regardless */
    cr_assert_geq(fd, 0);
    httpc_reset();
    const char req[] = "POST /v1/settle?reservation=7&actual=1 HTTP/1.1\r\nHost: t\r\n\r\n";
    cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
    cr_assert_eq(httpc_read(fd, &r, 5000), 0);
    cr_assert_eq(r.status, 404, "%s", r.raw);
    close(fd);
}

/* Issue 34 item 8 (RFC 9112 §5.1): "Transfer-Encoding : chunked", a space before the colon, is a
 * 400 on both HTTP doors, never a chunked body: a proxy in front that reads the header as
 * unknown would frame the body by its Content-Length and the two would disagree on where the
 * next request starts. Nothing is decided. */
Test(http_decide, a_space_before_a_header_colon_is_400_on_both_doors)
{
    start();
    static const char req[] = "POST /v1/decide?key=smuggle&tokens=1 HTTP/1.1\r\nHost: t\r\n"
                              "Authorization: Bearer " TOKEN "\r\n"
                              "Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n";
    for (int door = 0; door < 2; door++) {
        int fd = door == 0 ? httpc_tcp(port) : httpc_unix(d.socket);
        cr_assert_geq(fd, 0);
        httpc_reset();
        cr_assert_eq(httpc_send(fd, req, sizeof(req) - 1), 0);
        cr_assert_eq(httpc_read(fd, &r, 5000), 0, "door %d: no answer", door);
        cr_assert_eq(r.status, 400, "door %d: %s", door, r.raw);
        cr_assert(strstr(r.body, "whitespace in a header name"), "door %d: %s", door, r.body);
        cr_assert_null(httpc_header(&r, "RateLimit", v, sizeof(v)), "door %d decided", door);
        close(fd);
    }
    cr_assert_eq(ask("GET", "/v1/decide?key=smuggle&tokens=1", NULL), 200);
    cr_assert_eq(requests_left(), 59999, "only the good request spent: %s", r.raw);
}

/* issue 31 item 4: the tokens file is read again on every reload, and the config watch reloads
 * when it changes (no signal, no restart): a new token decides, a removed one no longer does. */
Test(http_decide, tokens_rotate_without_a_restart)
{
    start_on("127.0.0.1", LIMITS, "");
    cr_assert_eq(ask("GET", "/v1/decide?team=t", NULL), 200, "%s", r.raw);
    FILE *f = fopen(tokens_file, "w");
    cr_assert_not_null(f);
    fputs("tokens:\n  - { name: proxy, token: rotated-token-0123456789abc, "
          "subjects: { team: [\"*\"] } }\n",
          f);
    fclose(f);
    bearer = "rotated-token-0123456789abc";
    int status = 0;
    for (long long end = tt_now_ms() + 20000; status != 200 && tt_now_ms() < end;)
        if ((status = ask("GET", "/v1/decide?team=t", NULL)) != 200)
            usleep(20000); /* polled with a deadline: the watch reloads within its poll */
    cr_assert_eq(status, 200, "the new token is not accepted: %s", r.raw);
    bearer = TOKEN;
    cr_assert_eq(ask("GET", "/v1/decide?team=t", NULL), 401, "the old one is: %s", r.raw);
    cr_assert(tt_daemon_log_has(&d, "reload applied", 0));
}
