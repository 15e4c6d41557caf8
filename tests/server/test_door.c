/* door.c, the one engine call behind every way in, in-process: what it answers and what it
 * counts on /metrics, by door. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "door_fixture.h"
#include "helpers.h" /* tests/engine's: limits and engines in a line */

static gov_engine_t *eng;
static door_fixture_t fx;
static door_t *door;

static void setup(void)
{
    cfg_limit_t l[] = {rpm("team_rpm", "team", 2, 60 * S, 0),
                       tpm("key_tpm", "key", 100000, INT64_C(8760) * 3600 * S, 20000)};
    eng = mk_engine(l, 2, true);
    door = door_fixture_open(&fx, eng);
}

static void teardown(void)
{
    door_fixture_close(&fx);
    gov_engine_destroy(eng);
}

TestSuite(door, .init = setup, .fini = teardown);

/* The value of one sample of the /metrics text, or -1. */
static long sample(const char *name)
{
    tt_buf_t out = {0};
    srv_metrics_render(fx.metrics, &out);
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", name);
    tt_buf_append(&out, "", 1);
    const char *at = strstr((const char *)out.data, want);
    long v = at ? strtol(at + strlen(want), NULL, 10) : -1;
    tt_buf_free(&out);
    return v;
}

static gov_subject_t team(const char *id)
{
    gov_subject_t s;
    return *subj(&s, "team", id, NULL);
}

static void never(gov_result_t *r, void *ctx)
{
    (void)r;
    (void)ctx;
    cr_assert_fail("a local limit answers at once");
}

static int decide_on(srv_door_t which, const gov_subject_t *s, int64_t tokens, door_req_t *req)
{
    door_caller_t who = {.door = which};
    door_args_t a = {
        .op = PROTO_OP_DECIDE, .subject = s, .tokens = tokens, .now = T0, .start_ns = 1};
    return door_call(door, &who, &a, req, never, NULL);
}

Test(door, a_decision_is_counted_on_its_own_door_by_verdict)
{
    door_req_t req;
    gov_subject_t s = team("a");
    for (int i = 0; i < 3; i++)
        cr_assert_eq(decide_on(SRV_DOOR_HTTP, &s, GOV_NO_TOKENS, &req), 0);
    cr_assert_eq(req.result.verdict, GOV_DENY, "the third of an amount of 2");
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"http\",verdict=\"admit\"}"), 2);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"http\",verdict=\"deny\"}"), 1);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"socket\",verdict=\"admit\"}"), 0);
    cr_assert_eq(sample("tokentriage_requests_total{door=\"http\",op=\"decide\"}"), 3);
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"http\"}"), 3);
}

Test(door, an_engine_error_is_counted_by_door_and_code_and_is_no_decision)
{
    door_req_t req;
    gov_subject_t s = {.pairs = {{"key", 3, "k", 1}}, .n = 1};
    cr_assert_eq(decide_on(SRV_DOOR_SOCKET, &s, GOV_NO_TOKENS, &req), GOV_ETOKENS);
    cr_assert_eq(req.result.status, GOV_ETOKENS);
    cr_assert_eq(sample("tokentriage_request_errors_total{door=\"socket\",code=\"other\"}"), 1);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"socket\",verdict=\"admit\"}"), 0);
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"socket\"}"), 0);
}

Test(door, a_batched_decision_is_observed_once_at_the_end_of_its_batch)
{
    door_caller_t who = {.door = SRV_DOOR_SOCKET};
    gov_subject_t s = team("b");
    door_req_t req;
    door_args_t a = {.op = PROTO_OP_DECIDE,
                     .subject = &s,
                     .tokens = GOV_NO_TOKENS,
                     .now = T0,
                     .start_ns = 1,
                     .batched = true};
    cr_assert_eq(door_call(door, &who, &a, &req, never, NULL), 0);
    cr_assert_eq(door_call(door, &who, &a, &req, never, NULL), 0);
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"socket\"}"), 0);
    door_batch_end(door, SRV_DOOR_SOCKET, 1);
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"socket\"}"), 2);
    door_batch_end(door, SRV_DOOR_SOCKET, 1); /* nothing more since */
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"socket\"}"), 2);
}

Test(door, a_settle_through_the_door_reaches_the_engine)
{
    door_caller_t who = {.door = SRV_DOOR_HTTP};
    gov_subject_t s = {.pairs = {{"key", 3, "k", 1}}, .n = 1};
    door_req_t req;
    cr_assert_eq(decide_on(SRV_DOOR_HTTP, &s, 20000, &req), 0);
    cr_assert(req.result.admit, "the whole burst");
    uint64_t id = req.result.reservation;
    cr_assert_neq(id, 0);
    door_args_t a = {.op = PROTO_OP_SETTLE, .reservation = id, .tokens = 100, .now = T0};
    cr_assert_eq(door_call(door, &who, &a, &req, never, NULL), 0);
    cr_assert_eq(req.result.settled, 1);
    cr_assert_eq(sample("tokentriage_requests_total{door=\"http\",op=\"settle\"}"), 1);
    cr_assert_eq(decide_on(SRV_DOOR_HTTP, &s, 19900, &req), 0);
    cr_assert(req.result.admit, "the refund of 19900 made room for 19900 more");
}

/* A gRPC request is one decision: denied when any of its asks is, unfittable when none is
 * denied and one cannot fit. */
Test(door, a_grpc_request_of_several_asks_is_one_decision)
{
    const rls_door_t *g = door_rls(door);
    rls_caller_t who = {.tcp = false};
    gov_ask_t asks[2] = {{.subject = team("c"), .cost = 1}, {.subject = team("d"), .cost = 2}};
    gov_result_t res[2];
    cr_assert_eq(g->decide(g->ud, &who, "d", 1, asks, 2, GOV_ASK_EXACT, T0, res, NULL, NULL), 0);
    cr_assert(res[0].admit && res[1].admit);
    asks[1].cost = 1; /* d has nothing left */
    cr_assert_eq(g->decide(g->ud, &who, "d", 1, asks, 2, GOV_ASK_EXACT, T0, res, NULL, NULL), 0);
    cr_assert(res[0].admit && res[1].verdict == GOV_DENY);
    asks[1].cost = 3; /* above the burst of 2: never fits */
    cr_assert_eq(g->decide(g->ud, &who, "d", 1, asks, 2, GOV_ASK_EXACT, T0, res, NULL, NULL), 0);
    cr_assert(res[0].admit && res[1].verdict == GOV_UNFITTABLE);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"grpc\",verdict=\"admit\"}"), 1);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"grpc\",verdict=\"deny\"}"), 1);
    cr_assert_eq(sample("tokentriage_verdicts_total{door=\"grpc\",verdict=\"unfittable\"}"), 1);
    cr_assert_eq(sample("tokentriage_requests_total{door=\"grpc\",op=\"decide\"}"), 3);
    cr_assert_eq(sample("tokentriage_decision_latency_seconds_count{door=\"grpc\"}"), 3);
}

/* What the observer (the recording) was told: a line per decision. */
static char told[1024];

static uint64_t on_asked(void *ud, const door_decision_t *what, const door_verdict_t *v)
{
    (void)ud;
    size_t at = strlen(told);
    if (what->subject)
        snprintf(told + at, sizeof(told) - at, "decide %.*s=%.*s",
                 (int)what->subject->pairs[0].level_len, what->subject->pairs[0].level,
                 (int)what->subject->pairs[0].id_len, what->subject->pairs[0].id);
    else
        snprintf(told + at, sizeof(told) - at, "request %.*s of %zu", (int)what->domain_len,
                 what->domain, what->n);
    at = strlen(told);
    snprintf(told + at, sizeof(told) - at, ": %s %s\n", v ? gov_verdict_name(v->verdict) : "later",
             v ? v->limit : "");
    return 0;
}

static void on_answered(void *ud, uint64_t token, const door_verdict_t *v)
{
    (void)ud, (void)token, (void)v;
    cr_assert_fail("every answer here comes at once");
}

/* Every door's decisions are told to the observer the same way, with the verdict they were
 * counted with: a decide of the socket or HTTP by its subject, a gRPC request by its domain and
 * asks (denied: the limit of its first ask denied); an engine error is no decision. */
Test(door, every_door_tells_the_observer_its_decisions)
{
    told[0] = '\0';
    door_set_observer(door, &(door_observer_t){.asked = on_asked, .answered = on_answered});
    door_req_t req;
    gov_subject_t a = team("a"), k = {.pairs = {{"key", 3, "k", 1}}, .n = 1};
    decide_on(SRV_DOOR_SOCKET, &a, GOV_NO_TOKENS, &req);
    decide_on(SRV_DOOR_HTTP, &a, GOV_NO_TOKENS, &req);
    decide_on(SRV_DOOR_HTTP, &a, GOV_NO_TOKENS, &req);
    decide_on(SRV_DOOR_SOCKET, &k, GOV_NO_TOKENS, &req); /* tokens required: an error */
    const rls_door_t *g = door_rls(door);
    rls_caller_t who = {.tcp = false};
    gov_ask_t asks[2] = {{.subject = team("c"), .cost = 1}, {.subject = team("a"), .cost = 1}};
    gov_result_t res[2];
    g->decide(g->ud, &who, "edge", 4, asks, 2, GOV_ASK_EXACT, T0, res, NULL, NULL);
    cr_assert_str_eq(told, "decide team=a: admit team_rpm\n"
                           "decide team=a: admit team_rpm\n"
                           "decide team=a: deny team_rpm\n"
                           "request edge of 2: deny team_rpm\n");
    door_set_observer(door, NULL);
    decide_on(SRV_DOOR_SOCKET, &a, GOV_NO_TOKENS, &req);
    cr_assert_str_eq(told + strlen(told) - 33, "request edge of 2: deny team_rpm\n", "none now");
}

Test(door, allow_lists_past_their_bound_name_the_list)
{
    static uint32_t ids[DOOR_ALLOW_MAX + 1];
    door_t *d;
    tt_err_t err;
    door_options_t o = {.allow_gids = ids, .n_allow_gids = DOOR_ALLOW_MAX + 1};
    cr_assert_eq(door_new(&d, eng, fx.metrics, &o, &err), TT_ERR_INVAL);
    cr_assert_null(d);
    cr_assert_str_eq(err.path, "server.allow_gids");
    cr_assert_str_eq(err.message, "at most 32 entries");
    o = (door_options_t){.allow_uids = ids, .n_allow_uids = DOOR_ALLOW_MAX + 1};
    cr_assert_eq(door_new(&d, eng, fx.metrics, &o, &err), TT_ERR_INVAL);
    cr_assert_str_eq(err.path, "server.allow_uids");
}

/* ---- who may spend (SPEC §9) ------------------------------------------------------------ */

#define TOKEN "proxy-token-0123456789abcdef"
#define TOKEN_A "team-a-token-0123456789abcdef"

static cfg_config_t *tcfg;
static char tdir[64], tfile[96];

static door_t *cd; /* the suite's checked door */

/* A door whose callers are checked: allow_uids [0], the tokens of a file armed into tcfg. */
static void checked_setup(void)
{
    setup();
    snprintf(tdir, sizeof(tdir), "/tmp/tt-door-XXXXXX");
    cr_assert_not_null(mkdtemp(tdir));
    snprintf(tfile, sizeof(tfile), "%s/tokens.yaml", tdir);
    FILE *f = fopen(tfile, "w");
    fputs("tokens:\n"
          "  - { name: proxy, token: " TOKEN ", subjects: { team: [\"*\"], key: [\"*\"] } }\n"
          "  - { name: team-a, token: " TOKEN_A ", subjects: { team: [a] } }\n",
          f);
    fclose(f);
    char yaml[256];
    snprintf(yaml, sizeof(yaml), "server: { tokens_file: %s, http_decide: on }\n", tfile);
    cfg_report_t r = {0};
    cr_assert_eq(cfg_load_string("t.yaml", yaml, strlen(yaml), &tcfg, &r), 0);
    cr_assert_eq(cfg_arm(tcfg, &r), 0);
    cfg_report_free(&r);
    static const uint32_t root[] = {0};
    door_options_t o = {.allow_uids = root, .n_allow_uids = 1, .cfg = &tcfg};
    tt_err_t err;
    cr_assert_eq(door_new(&cd, eng, fx.metrics, &o, &err), 0);
}

static void checked_teardown(void)
{
    door_free(cd);
    cfg_free(tcfg);
    unlink(tfile);
    rmdir(tdir);
    teardown();
}

TestSuite(who_may_spend, .init = checked_setup, .fini = checked_teardown);

static int call_as(door_t *d, const door_caller_t *who, proto_op_t op, const gov_subject_t *s,
                   int64_t tokens, uint64_t reservation, door_req_t *req)
{
    door_args_t a = {
        .op = op, .subject = s, .tokens = tokens, .reservation = reservation, .now = T0};
    return door_call(d, who, &a, req, never, NULL);
}

static door_caller_t tcp_with(const char *auth)
{
    return (door_caller_t){.door = SRV_DOOR_HTTP,
                           .tcp = true,
                           .authorization = auth,
                           .authorization_len = auth ? strlen(auth) : 0};
}

Test(who_may_spend, a_unix_peer_outside_the_allow_list_spends_nothing)
{
    door_t *d = cd;
    door_req_t req;
    gov_subject_t s = team("u");
    door_caller_t nobody = {.door = SRV_DOOR_HTTP, .cred = true, .uid = 65534, .gid = 65534};
    door_caller_t unknown = {.door = SRV_DOOR_GRPC};
    door_caller_t root = {.door = SRV_DOOR_SOCKET, .cred = true, .uid = 0, .gid = 0};
    cr_assert_eq(call_as(d, &nobody, PROTO_OP_DECIDE, &s, GOV_NO_TOKENS, 0, &req), TT_ERR_PEER);
    cr_assert(strstr(req.result.err.message, "uid 65534"), "%s", req.result.err.message);
    cr_assert_eq(call_as(d, &unknown, PROTO_OP_DECIDE, &s, GOV_NO_TOKENS, 0, &req), TT_ERR_PEER,
                 "a peer whose ids the kernel did not give");
    cr_assert_not(door_peer_allowed(d, &nobody));
    cr_assert(door_peer_allowed(d, &root));
    cr_assert_eq(
        sample("tokentriage_request_errors_total{door=\"http\",code=\"peer_not_allowed\"}"), 1);
    cr_assert_eq(call_as(d, &root, PROTO_OP_DECIDE, &s, GOV_NO_TOKENS, 0, &req), 0);
    cr_assert_eq(req.result.remaining, 1, "the refused calls spent nothing: 2 - 1");
}

Test(who_may_spend, over_tcp_only_a_token_decides_and_only_its_subjects)
{
    door_t *d = cd;
    door_req_t req;
    gov_subject_t a = team("a"), b = team("b");
    static const char *const refused[] = {
        NULL, "Bearer", "Basic cHJveHk6eA==", "Bearer not-a-token-of-this-daemon"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        door_caller_t who = tcp_with(refused[i]);
        cr_assert_eq(call_as(d, &who, PROTO_OP_DECIDE, &a, GOV_NO_TOKENS, 0, &req),
                     TT_ERR_UNAUTHENTICATED, "case %zu", i);
        cr_assert_str_eq(req.result.err.path, "authorization");
    }
    door_caller_t team_a = tcp_with("bearer  " TOKEN_A); /* the scheme's case, and spaces */
    cr_assert_eq(call_as(d, &team_a, PROTO_OP_DECIDE, &b, GOV_NO_TOKENS, 0, &req),
                 TT_ERR_FORBIDDEN);
    cr_assert_str_eq(req.result.err.path, "subject.team");
    cr_assert(strstr(req.result.err.message, "team-a"), "%s", req.result.err.message);
    cr_assert_null(strstr(req.result.err.message, TOKEN_A), "never the token itself");
    cr_assert_eq(call_as(d, &team_a, PROTO_OP_DECIDE, &a, GOV_NO_TOKENS, 0, &req), 0);
    cr_assert(req.result.admit);
    cr_assert_eq(req.result.remaining, 1, "the refusals spent nothing");
    gov_subject_t ab;
    subj(&ab, "team", "a", "key", "k", NULL);
    cr_assert_eq(call_as(d, &team_a, PROTO_OP_CHARGE, &ab, 1, 0, &req), TT_ERR_FORBIDDEN,
                 "a level it was not given, on a charge too");
    cr_assert_eq(sample("tokentriage_request_errors_total{door=\"http\",code=\"unauthenticated\"}"),
                 4);
    cr_assert_eq(sample("tokentriage_request_errors_total{door=\"http\",code=\"forbidden\"}"), 2);
    /* asks: the one it may not name carries the error; nothing is decided */
    door_caller_t grpc_a = {.door = SRV_DOOR_GRPC,
                            .tcp = true,
                            .authorization = "Bearer " TOKEN_A,
                            .authorization_len = strlen("Bearer " TOKEN_A)};
    gov_ask_t asks[2] = {{.subject = team("a"), .cost = 1}, {.subject = team("b"), .cost = 1}};
    gov_result_t res[2];
    cr_assert_eq(door_decide_asks(d, &grpc_a, "d", 1, asks, 2, GOV_ASK_EXACT, T0, res, NULL, NULL),
                 TT_ERR_FORBIDDEN);
    cr_assert_eq(res[0].status, 0);
    cr_assert_eq(res[1].status, TT_ERR_FORBIDDEN);
    cr_assert_eq(call_as(d, &team_a, PROTO_OP_DECIDE, &a, GOV_NO_TOKENS, 0, &req), 0);
    cr_assert_eq(req.result.remaining, 0, "the refused asks spent nothing of team a");
}

Test(who_may_spend, a_token_settles_its_own_reservations_alone)
{
    door_t *d = cd;
    door_req_t req;
    gov_subject_t k;
    subj(&k, "key", "k", NULL);
    door_caller_t proxy = tcp_with("Bearer " TOKEN), team_a = tcp_with("Bearer " TOKEN_A);
    door_caller_t root = {.door = SRV_DOOR_SOCKET, .cred = true, .uid = 0, .gid = 0};
    cr_assert_eq(call_as(d, &proxy, PROTO_OP_DECIDE, &k, 20000, 0, &req), 0);
    uint64_t id = req.result.reservation;
    cr_assert_neq(id, 0);
    cr_assert_eq(call_as(d, &team_a, PROTO_OP_SETTLE, NULL, 0, id, &req), GOV_ERESERVATION,
                 "another token's");
    cr_assert_eq(call_as(d, &root, PROTO_OP_SETTLE, NULL, 0, id, &req), GOV_ERESERVATION,
                 "the socket's callers are another owner");
    cr_assert_eq(call_as(d, &proxy, PROTO_OP_SETTLE, NULL, 0, id, &req), 0);
    cr_assert_eq(req.result.settled, 1);
}

/* ---- a slot written before ---------------------------------------------------------------- */

/* The engine starts every result it is handed, and the door clears the ones it refuses: an
 * answer never reads what its slot held before (the socket reuses a spare slot, and mallocs a
 * new one uncleared). Each call is made twice, on twin engines: into a cleared slot and into
 * one of stale bytes. */

static gov_engine_t *twin;
static door_t *twin_door;

static void twins_setup(void)
{
    setup();
    cfg_limit_t l[] = {rpm("team_rpm", "team", 2, 60 * S, 0),
                       tpm("key_tpm", "key", 100000, INT64_C(8760) * 3600 * S, 20000)};
    twin = mk_engine(l, 2, true);
    tt_err_t err;
    cr_assert_eq(door_new(&twin_door, twin, fx.metrics, NULL, &err), 0);
}

static void twins_teardown(void)
{
    door_free(twin_door);
    gov_engine_destroy(twin);
    teardown();
}

TestSuite(stale_slot, .init = twins_setup, .fini = twins_teardown);

/* What the doors' answers read of a result (dispatch.c, hdoor.c, rls.c, the recording). */
static void same_answer(gov_result_t *a, gov_result_t *b, const char *what)
{
    cr_assert_eq(a->status, b->status, "%s", what);
    if (a->status < 0) {
        cr_assert_eq(a->err.code, b->err.code, "%s", what);
        cr_assert_str_eq(a->err.path, b->err.path, "%s", what);
        cr_assert_str_eq(a->err.message, b->err.message, "%s", what);
        return;
    }
    gov_result_render(a);
    gov_result_render(b);
    cr_assert_eq(a->admit, b->admit, "%s", what);
    cr_assert_eq(a->verdict, b->verdict, "%s", what);
    cr_assert_str_eq(a->limit, b->limit, "%s", what);
    cr_assert_eq(a->remaining, b->remaining, "%s", what);
    cr_assert_eq(a->retry_after_s, b->retry_after_s, "%s", what);
    cr_assert_eq(a->reset_after_s, b->reset_after_s, "%s", what);
    cr_assert_eq(a->code, b->code, "%s", what); /* NULL or the same static string */
    cr_assert_eq(a->n_soft_denied, b->n_soft_denied, "%s", what);
    cr_assert_eq(a->soft_truncated, b->soft_truncated, "%s", what);
    for (uint32_t i = 0; i < a->n_soft_denied && i < GOV_SOFT_MAX; i++)
        cr_assert_str_eq(a->soft_denied[i], b->soft_denied[i], "%s", what);
    cr_assert_eq(a->disclosed.has_policy, b->disclosed.has_policy, "%s", what);
    cr_assert_eq(a->disclosed.has_requests, b->disclosed.has_requests, "%s", what);
    cr_assert_eq(a->disclosed.has_tokens, b->disclosed.has_tokens, "%s", what);
    cr_assert_eq(a->disclosed.retry_s, b->disclosed.retry_s, "%s", what);
    cr_assert_eq(a->n_headers, b->n_headers, "%s", what);
    for (uint32_t i = 0; i < a->n_headers && i < GOV_HEADERS_MAX; i++) {
        cr_assert_str_eq(a->headers[i].name, b->headers[i].name, "%s", what);
        cr_assert_str_eq(a->headers[i].value, b->headers[i].value, "%s", what);
    }
    cr_assert_eq(a->unavailable, b->unavailable, "%s", what);
    cr_assert_eq(a->settled, b->settled, "%s", what);
    cr_assert_eq(a->already_settled, b->already_settled, "%s", what);
    cr_assert_eq(a->lease != 0, b->lease != 0, "%s", what); /* ids: each engine its own */
    cr_assert_eq(a->reservation != 0, b->reservation != 0, "%s", what);
    cr_assert_eq(a->limit_amount, b->limit_amount, "%s", what);
    cr_assert_eq(a->limit_period_ns, b->limit_period_ns, "%s", what);
    cr_assert_eq(a->met, b->met, "%s", what);
    cr_assert_eq(a->rule_flags, b->rule_flags, "%s", what);
    cr_assert_str_eq(a->rule_name, b->rule_name, "%s", what);
}

/* `a` through both doors, into a cleared slot and a stale one; a settle settles each engine's
 * own reservation (`ids`: the twins' latest, kept by each decide that made one). */
static void both(door_args_t a, const char *what, uint64_t ids[2])
{
    static door_req_t slot[2];
    door_t *doors[2] = {door, twin_door};
    door_caller_t who = {.door = SRV_DOOR_SOCKET, .conn = 1};
    int rc[2];
    memset(&slot[0], 0, sizeof(slot[0]));
    memset(&slot[1], 0xa5, sizeof(slot[1]));
    for (int i = 0; i < 2; i++) {
        if (a.op == PROTO_OP_SETTLE)
            a.reservation = ids[i];
        rc[i] = door_call(doors[i], &who, &a, &slot[i], never, NULL);
        if (a.op == PROTO_OP_DECIDE && rc[i] == 0 && slot[i].result.reservation)
            ids[i] = slot[i].result.reservation;
    }
    cr_assert_eq(rc[0], rc[1], "%s", what);
    same_answer(&slot[0].result, &slot[1].result, what);
}

Test(stale_slot, no_answer_reads_what_its_slot_held_before)
{
    gov_subject_t t = team("s"), k;
    subj(&k, "key", "k", NULL);
    uint64_t ids[2] = {0, 0};
    door_args_t decide = {.op = PROTO_OP_DECIDE, .subject = &t, .tokens = GOV_NO_TOKENS, .now = T0};
    both(decide, "admitted", ids);
    both(decide, "the last of the burst", ids);
    both(decide, "denied", ids);
    decide.subject = &k;
    both(decide, "an engine error: tokens required", ids);
    decide.tokens = 20000;
    both(decide, "admitted with a reservation", ids);
    cr_assert_neq(ids[0], 0);
    both((door_args_t){.op = PROTO_OP_SETTLE, .tokens = 100, .now = T0}, "settled", ids);
    both((door_args_t){.op = PROTO_OP_SETTLE, .tokens = 100, .now = T0}, "settled before", ids);
    both((door_args_t){.op = PROTO_OP_CHARGE, .subject = &k, .tokens = 5, .now = T0}, "charged",
         ids);
    both((door_args_t){.op = PROTO_OP_ACQUIRE, .subject = &t, .now = T0}, "acquired", ids);
    both((door_args_t){.op = PROTO_OP_FLEET, .now = T0}, "not an engine call", ids);
}

Test(stale_slot, no_grpc_answer_reads_what_its_results_held_before)
{
    door_t *doors[2] = {door, twin_door};
    door_caller_t who = {.door = SRV_DOOR_GRPC};
    gov_ask_t asks[2] = {{.subject = team("g"), .cost = 1}, {.subject = team("h"), .cost = 3}};
    gov_result_t res[2][2];
    for (int round = 0; round < 3; round++) {
        memset(res[0], 0, sizeof(res[0]));
        memset(res[1], 0xa5, sizeof(res[1]));
        int rc[2];
        for (int i = 0; i < 2; i++)
            rc[i] = door_decide_asks(doors[i], &who, "d", 1, asks, 2, GOV_ASK_EXACT, T0, res[i],
                                     NULL, NULL);
        cr_assert_eq(rc[0], rc[1]);
        same_answer(&res[0][0], &res[1][0], "the first ask");
        same_answer(&res[0][1], &res[1][1], "the second ask: unfittable");
    }
}
