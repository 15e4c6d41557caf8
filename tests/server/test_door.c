/* door.c, the one engine call behind every way in, in-process: what it answers and what it
 * counts on /metrics, by door. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    proto_out_t out = {0};
    srv_metrics_render(fx.metrics, &out);
    char want[256];
    snprintf(want, sizeof(want), "\n%s ", name);
    proto_out_append(&out, "", 1);
    const char *at = strstr((const char *)out.data, want);
    long v = at ? strtol(at + strlen(want), NULL, 10) : -1;
    proto_out_free(&out);
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
