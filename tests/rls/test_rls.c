/* rls.c, the mapping core, without sockets: protobuf bytes in, engine decisions (through the
 * daemon's own door, server/door.c), bytes out. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "door_fixture.h"
#include "pbwrite.h"
#include "rls.h"
#include "rls.pb-c.h"

#define S RA_NS_PER_S
#define T0 (INT64_C(1700000000) * S)

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest request_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor descriptor_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor__Entry entry_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse response_t;

#define OK_CODE ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK
#define OVER ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT

static const char *yaml =
    "server: { grpc_charge_domains: [tokens] }\n"
    "governance:\n"
    "  limits:\n"
    "    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 3, period: 1m }\n"
    "    - { id: pair_rpm, attach: { levels: [generic_key, team] }, type: rpm, amount: 100,\n"
    "        period: 30s }\n"
    "    - { id: team_tpm, attach: { level: tenant }, type: tpm, amount: 100000, period: 1m,\n"
    "        burst: 20000 }\n";

static cfg_config_t *cfg;
static gov_engine_t *eng;
static door_fixture_t fx;
static door_t *door;
static const rls_caller_t who = {.tcp = false};

static void setup(void)
{
    cfg_report_t r = {0};
    cr_assert_eq(cfg_load_string("t.yaml", yaml, strlen(yaml), &cfg, &r), 0);
    cr_assert_eq(cfg_arm(cfg, &r), 0);
    cfg_report_free(&r);
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create_config(&eng, &o, cfg, &err), 0, "%s", err.message);
    door = door_fixture_open(&fx, eng);
}

static void teardown(void)
{
    door_fixture_close(&fx);
    gov_engine_destroy(eng);
    cfg_free(cfg);
}

TestSuite(rls, .init = setup, .fini = teardown);

/* A request of up to 4 descriptors of up to 4 entries, "k=v,k=v;k=v" style, with per-descriptor
 * hits_addend (-1: unset). */
typedef struct built {
    request_t req;
    descriptor_t d[4], *dp[4];
    entry_t e[4][4], *ep[4][4];
    Tokentriage__Wire__UInt64Value h[4];
    char text[256];
} built_t;

static void build(built_t *b, const char *domain, uint32_t hits, const char *descs,
                  const int64_t *per)
{
    envoy__service__ratelimit__v3__rate_limit_request__init(&b->req);
    b->req.domain = (char *)domain;
    b->req.hits_addend = hits;
    snprintf(b->text, sizeof(b->text), "%s", descs);
    size_t nd = 0;
    for (char *ds = strtok(b->text, ";"); ds && nd < 4; ds = strtok(NULL, ";"), nd++) {
        descriptor_t *d = &b->d[nd];
        envoy__service__ratelimit__v3__rate_limit_descriptor__init(d);
        b->dp[nd] = d;
        d->entries = b->ep[nd];
        size_t ne = 0;
        for (char *kv = ds; kv && *kv && ne < 4; ne++) {
            char *next = strchr(kv, ',');
            if (next)
                *next++ = '\0';
            entry_t *en = &b->e[nd][ne];
            envoy__service__ratelimit__v3__rate_limit_descriptor__entry__init(en);
            char *eq = strchr(kv, '=');
            *eq = '\0';
            en->key = kv;
            en->value = eq + 1;
            b->ep[nd][ne] = en;
            kv = next;
        }
        d->n_entries = ne;
        if (per && per[nd] >= 0) {
            tokentriage__wire__uint64_value__init(&b->h[nd]);
            b->h[nd].value = (uint64_t)per[nd];
            d->hits_addend = &b->h[nd];
        }
    }
    b->req.n_descriptors = nd;
    b->req.descriptors = b->dp;
}

/* Packs, asks, and unpacks the response (NULL on an error status, kept in *status). */
static response_t *ask(built_t *b, int64_t now, int *status, char *msg)
{
    size_t len = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&b->req);
    uint8_t *buf = malloc(len + 1);
    envoy__service__ratelimit__v3__rate_limit_request__pack(&b->req, buf);
    rls_answer_t a;
    *status = rls_should_rate_limit(door_rls(door), &who, &cfg, buf, len, now, &a);
    free(buf);
    if (msg)
        snprintf(msg, 256, "%s", a.message);
    response_t *r = NULL;
    if (*status == RLS_OK) {
        r = envoy__service__ratelimit__v3__rate_limit_response__unpack(NULL, a.len, a.body);
        cr_assert_not_null(r);
    }
    rls_answer_free(&a);
    return r;
}

static response_t *ok(const char *domain, uint32_t hits, const char *descs, const int64_t *per,
                      int64_t now)
{
    built_t b;
    build(&b, domain, hits, descs, per);
    int st;
    char msg[256];
    response_t *r = ask(&b, now, &st, msg);
    cr_assert_eq(st, RLS_OK, "%s", msg);
    return r;
}

static void done(response_t *r)
{
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(r, NULL);
}

Test(rls, one_entry_descriptor_counts_its_level_and_reports_the_limit)
{
    response_t *r = ok("edge", 0, "team=t1", NULL, T0);
    cr_assert_eq(r->overall_code, OK_CODE);
    cr_assert_eq(r->n_statuses, 1);
    cr_assert_eq(r->statuses[0]->code, OK_CODE);
    cr_assert_str_eq(r->statuses[0]->current_limit->name, "team_rpm");
    cr_assert_eq(r->statuses[0]->current_limit->requests_per_unit, 3);
    cr_assert_eq(r->statuses[0]->current_limit->unit,
                 ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__MINUTE);
    cr_assert_eq(r->statuses[0]->limit_remaining, 2, "hits_addend unset costs one");
    cr_assert_eq(r->statuses[0]->duration_until_reset->seconds, 20);
    cr_assert_geq(r->n_response_headers_to_add, 2);
    done(r);
}

Test(rls, a_period_that_is_not_one_unit_reads_as_the_sustained_rate)
{
    response_t *r = ok("edge", 0, "generic_key=chat,team=t1", NULL, T0);
    cr_assert_str_eq(r->statuses[0]->current_limit->name, "pair_rpm");
    cr_assert_eq(r->statuses[0]->current_limit->unit,
                 ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__SECOND);
    cr_assert_eq(r->statuses[0]->current_limit->requests_per_unit, 3, "100 per 30 s: 3.33/s");
    done(r);
}

Test(rls, a_descriptor_matching_no_limit_is_ok_with_no_current_limit)
{
    response_t *r = ok("edge", 0, "team=t1,generic_key=chat;path=/x", NULL, T0);
    cr_assert_eq(r->overall_code, OK_CODE);
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(r->statuses[i]->code, OK_CODE);
        cr_assert_null(r->statuses[i]->current_limit);
    }
    done(r);
}

Test(rls, hits_addend_zero_means_one_and_two_costs_two)
{
    done(ok("edge", 0, "team=t1", NULL, T0));
    response_t *r = ok("edge", 2, "team=t1", NULL, T0);
    cr_assert_eq(r->statuses[0]->limit_remaining, 0, "1 + 2 of 3");
    done(r);
}

Test(rls, an_over_limit_consumes_nothing_in_any_descriptor)
{
    int64_t per[] = {-1, 50000};
    response_t *r = ok("edge", 1, "team=t1;tenant=a", per, T0);
    cr_assert_eq(r->overall_code, OVER);
    cr_assert_eq(r->statuses[0]->code, OK_CODE);
    cr_assert_eq(r->statuses[1]->code, OVER, "50000 tokens never fit a burst of 20000");
    bool retry = false;
    for (size_t i = 0; i < r->n_response_headers_to_add; i++)
        retry = retry || strcmp(r->response_headers_to_add[i]->key, "Retry-After") == 0 ||
                strcmp(r->response_headers_to_add[i]->key, "RateLimit") == 0;
    cr_assert(retry, "the denial's headers travel");
    done(r);
    r = ok("edge", 0, "team=t1", NULL, T0);
    cr_assert_eq(r->statuses[0]->limit_remaining, 2, "the team's hit was not kept");
    done(r);
}

Test(rls, a_descriptor_hits_addend_of_zero_is_a_check_and_a_charge_domain_keeps_overruns)
{
    int64_t check[] = {0}, spend[] = {18000};
    response_t *r = ok("tokens", 0, "tenant=a", check, T0);
    cr_assert_eq(r->statuses[0]->limit_remaining, 20000);
    done(r);
    done(ok("tokens", 0, "tenant=a", spend, T0));
    r = ok("tokens", 0, "tenant=a", spend, T0);
    cr_assert_eq(r->overall_code, OVER, "36000 of 20000: reported");
    done(r);
    r = ok("tokens", 0, "tenant=a", check, T0 + 9 * S);
    cr_assert_eq(r->overall_code, OVER, "and charged: 16000 tokens of debt take 9.6 s");
    done(r);
}

Test(rls, malformed_requests_get_an_error_status_and_spend_nothing)
{
    static const struct {
        const char *domain, *descs;
        int64_t per;
        int status;
    } bad[] = {
        {"", "team=t1", -1, RLS_INVALID_ARGUMENT},
        {"edge", "", -1, RLS_INVALID_ARGUMENT},
        {"edge", "team=", -1, RLS_INVALID_ARGUMENT},
        {"edge", "team=t1,team=t2", -1, RLS_INVALID_ARGUMENT},
        {"edge", "team=t1", (INT64_C(1) << 40) + 1, RLS_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        built_t b;
        int64_t per[] = {bad[i].per};
        build(&b, bad[i].domain, 3, bad[i].descs, per);
        int st;
        char msg[256];
        cr_assert_null(ask(&b, T0, &st, msg));
        cr_assert_eq(st, bad[i].status, "case %zu: %d %s", i, st, msg);
        cr_assert_neq(msg[0], '\0');
    }
    rls_answer_t a;
    uint8_t junk[] = {0xff, 0xff, 0xff};
    cr_assert_eq(rls_should_rate_limit(door_rls(door), &who, &cfg, junk, sizeof(junk), T0, &a),
                 RLS_INVALID_ARGUMENT);
    cr_assert_eq(
        rls_should_rate_limit(door_rls(door), &who, &cfg, junk, RLS_MESSAGE_MAX + 1, T0, &a),
        RLS_RESOURCE_EXHAUSTED);
    response_t *r = ok("edge", 0, "team=t1", NULL, T0);
    cr_assert_eq(r->statuses[0]->limit_remaining, 2, "nothing was spent");
    done(r);
}

Test(rls, an_engine_error_names_the_descriptor_then_the_field)
{
    built_t b;
    build(&b, "edge", 1, "team=t1;team=t1,team=t2", NULL);
    int st;
    char msg[256];
    cr_assert_null(ask(&b, T0, &st, msg));
    cr_assert_eq(st, RLS_INVALID_ARGUMENT, "%d %s", st, msg);
    cr_assert_str_eq(msg, "descriptors[1]: subject.team: level given twice");
}

Test(rls, a_domain_outside_grpc_domains_is_not_found)
{
    cfg->server.n_grpc_domains = 1;
    strcpy(cfg->server.grpc_domains[0], "edge");
    built_t b;
    build(&b, "other", 0, "team=t1", NULL);
    int st;
    cr_assert_null(ask(&b, T0, &st, NULL));
    cr_assert_eq(st, RLS_NOT_FOUND);
    done(ok("edge", 0, "team=t1", NULL, T0));
}

/* ---- the response encoder (pbwrite.c) against protobuf-c, byte for byte -------------------- */

typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus status_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit limit_t;
typedef Envoy__Service__Ratelimit__V3__HeaderValue header_t;
typedef Tokentriage__Wire__Duration duration_t;

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next(void) /* splitmix64 */
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/* A number of the kinds the encoder must tell apart: 0 (left out), one byte, several, the top. */
static uint64_t some(void)
{
    switch (next() % 5) {
    case 0:
        return 0;
    case 1:
        return next() % 128;
    case 2:
        return next() % 70000;
    case 3:
        return next();
    default:
        return UINT64_MAX;
    }
}

/* NULL, "", or up to 300 bytes (a length of two bytes past 127). */
static char *some_text(char *buf)
{
    uint64_t k = next() % 4;
    if (k == 0)
        return NULL;
    size_t len = k == 1 ? 0 : k == 2 ? next() % 20 : next() % 300;
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)('a' + next() % 26);
    buf[len] = '\0';
    return buf;
}

Test(rls, the_response_encoder_writes_what_protobuf_c_packs)
{
    static char texts[3 * GOV_ASKS_MAX + 2 * 16][301];
    for (int round = 0; round < 5000; round++) {
        response_t r = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
        status_t st[GOV_ASKS_MAX], *stp[GOV_ASKS_MAX];
        limit_t lim[GOV_ASKS_MAX];
        duration_t dur[GOV_ASKS_MAX];
        header_t hv[16], *hvp[16];
        size_t t = 0;
        r.overall_code = (int)(int32_t)some();
        r.n_statuses = next() % 5 ? next() % 5 : next() % (GOV_ASKS_MAX + 1);
        r.statuses = stp;
        for (size_t i = 0; i < r.n_statuses; i++) {
            envoy__service__ratelimit__v3__rate_limit_response__descriptor_status__init(&st[i]);
            stp[i] = &st[i];
            st[i].code = (int)(int32_t)some();
            st[i].limit_remaining = (uint32_t)some();
            if (next() % 3) {
                envoy__service__ratelimit__v3__rate_limit_response__rate_limit__init(&lim[i]);
                lim[i].requests_per_unit = (uint32_t)some();
                lim[i].unit = (int)(int32_t)some();
                lim[i].name = some_text(texts[t++]);
                if (!lim[i].name)
                    lim[i].name = (char *)protobuf_c_empty_string;
                st[i].current_limit = &lim[i];
            }
            if (next() % 3) {
                tokentriage__wire__duration__init(&dur[i]);
                dur[i].seconds = (int64_t)some();
                dur[i].nanos = (int32_t)some();
                st[i].duration_until_reset = &dur[i];
            }
        }
        r.n_response_headers_to_add = next() % 17;
        r.response_headers_to_add = hvp;
        for (size_t i = 0; i < r.n_response_headers_to_add; i++) {
            envoy__service__ratelimit__v3__header_value__init(&hv[i]);
            hvp[i] = &hv[i];
            char *k = some_text(texts[t++]), *v = some_text(texts[t++]);
            hv[i].key = k ? k : (char *)protobuf_c_empty_string;
            hv[i].value = v ? v : (char *)protobuf_c_empty_string;
        }
        size_t want = envoy__service__ratelimit__v3__rate_limit_response__get_packed_size(&r);
        cr_assert_eq(rls_response_size(&r), want, "round %d", round);
        uint8_t *a = malloc(want + 1), *b = malloc(want + 1);
        envoy__service__ratelimit__v3__rate_limit_response__pack(&r, a);
        cr_assert_eq(rls_response_write(&r, b), want, "round %d", round);
        cr_assert_eq(memcmp(a, b, want), 0, "round %d: the bytes differ", round);
        free(a);
        free(b);
    }
}

/* A door whose engine answers the first descriptor admitted and the second denied only because
 * its limit's store could not answer (posture.fail closed: Redis down, the share store not
 * armed). */
static int store_down_decide(void *ud, const rls_caller_t *w, const char *domain, size_t domain_len,
                             const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                             gov_result_t *results, void (*later)(gov_result_t *, void *),
                             void *ctx)
{
    (void)ud, (void)w, (void)domain, (void)domain_len, (void)asks, (void)flags, (void)now;
    (void)later, (void)ctx;
    for (size_t i = 0; i < n; i++) {
        results[i] = (gov_result_t){.admit = i == 0, .remaining = 1, .retry_after_s = i ? 1 : 0};
        snprintf(results[i].limit, sizeof results[i].limit, "%s", i ? "shared_rpm" : "team_rpm");
        results[i].verdict = i ? GOV_DENY : GOV_ADMIT;
        results[i].unavailable = i > 0;
        results[i].code = i ? "unavailable" : NULL;
    }
    return 0;
}

/* issue 30 item 4: the call fails UNAVAILABLE naming the descriptor and its limit, the error
 * status Envoy's failure_mode_deny acts on, not an OVER_LIMIT it would answer 429 */
Test(rls, a_store_that_cannot_answer_fails_the_call_unavailable)
{
    built_t b;
    build(&b, "edge", 1, "team=t1;shared=s1", NULL);
    size_t len = envoy__service__ratelimit__v3__rate_limit_request__get_packed_size(&b.req);
    uint8_t *buf = malloc(len + 1);
    envoy__service__ratelimit__v3__rate_limit_request__pack(&b.req, buf);
    rls_door_t down = {.decide = store_down_decide};
    rls_answer_t a;
    cr_assert_eq(rls_should_rate_limit(&down, &who, &cfg, buf, len, T0, &a), RLS_UNAVAILABLE);
    free(buf);
    cr_assert_eq(a.status, 14, "grpc-status UNAVAILABLE");
    cr_assert_null(a.body);
    cr_assert_str_eq(a.message, "descriptors[1]: limit \"shared_rpm\": its store cannot answer, "
                                "and its posture fails closed");
    rls_answer_free(&a);
}
