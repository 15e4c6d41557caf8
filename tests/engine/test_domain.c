/*
 * gov_decide_domain: a domain's descriptors decided by the rule language (SPEC §12), as
 * envoyproxy/ratelimit's service decides them (its README's examples and service tests), on
 * rules read from our own files in envoy ratelimit's schema.
 */
#include "fake_redis.h"

#define MIN (60 * S)

static cfg_config_t *cfg;
static gov_engine_t *engine;

/* A config of envoy files, armed, and an engine over it. */
static void load(const char *const *files, size_t n)
{
    cfg = envoy_config(files, n);
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create_config(&engine, &o, cfg, &err), 0, "%s", err.message);
}

static void done(void)
{
    gov_engine_destroy(engine);
    cfg_free(cfg);
}

/* A descriptor from "k=v" strings. */
static gov_ask_t d(size_t n, const char *const *kv)
{
    gov_ask_t a = {.cost = 1};
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        a.subject.pairs[i] = (gov_pair_t){kv[i], (size_t)(eq - kv[i]), eq + 1, strlen(eq + 1)};
    }
    a.subject.n = n;
    return a;
}
#define D(...)                                                                                     \
    d(sizeof((const char *[]){__VA_ARGS__}) / sizeof(char *), (const char *[]){__VA_ARGS__})

static void ask(const char *domain, gov_ask_t *a, size_t n, unsigned flags, int64_t now,
                gov_result_t *out)
{
    int rc =
        gov_decide_domain(engine, domain, strlen(domain), a, n, flags, now, out, NULL, NULL, NULL);
    cr_assert_eq(rc, 0, "%d %s", rc, out[0].err.message);
}

/* t0 at the start of a day: every window of these tests opens there */
#define T (T0 - T0 % (86400 * S))

Test(domain, replaces_switches_off_a_named_rule_and_keeps_it_untouched)
{
    /* the README's example 7 */
    const char *files[] = {"domain: example7\n"
                           "descriptors:\n"
                           "  - key: key_1\n"
                           "    value: value_1\n"
                           "    descriptors:\n"
                           "      - key: user\n"
                           "        value: bkthomps\n"
                           "        rate_limit: { name: specific_limit, requests_per_unit: 5, "
                           "unit: second }\n"
                           "  - key: key_2\n"
                           "    value: value_2\n"
                           "    descriptors:\n"
                           "      - key: user\n"
                           "        value: bkthomps\n"
                           "        rate_limit:\n"
                           "          replaces: [ { name: specific_limit } ]\n"
                           "          requests_per_unit: 10\n"
                           "          unit: second\n"};
    load(files, 1);
    gov_ask_t a[2] = {D("key_1=value_1", "user=bkthomps"), D("key_2=value_2", "user=bkthomps")};
    gov_result_t r[2];
    for (int i = 0; i < 10; i++) {
        ask("example7", a, 2, 0, T, r);
        cr_assert_eq(r[0].met, GOV_MET_REPLACED);
        cr_assert_str_eq(r[0].limit, "", "replaced: answered as no rule");
        cr_assert_eq(r[1].met, GOV_MET_LIMIT);
        cr_assert(r[1].admit, "request %d: 10 per second", i);
        cr_assert_eq(r[1].limit_amount, 10);
    }
    ask("example7", a, 2, 0, T, r);
    cr_assert_not(r[1].admit);
    ask("example7", a, 1, 0, T, r); /* alone: its own 5 per second, untouched by the above */
    cr_assert(r[0].admit);
    cr_assert_eq(r[0].remaining, 4);
    cr_assert_str_eq(r[0].rule_name, "specific_limit");
    done();
}

Test(domain, unlimited_allow_and_zero)
{
    const char *files[] = {
        "domain: internal\n"
        "descriptors:\n"
        "  - { key: ldap, rate_limit: { unlimited: true } }\n"
        "  - { key: azure, rate_limit: { unit: minute, requests_per_unit: 100 } }\n"
        "  - { key: azure, value: open }\n"
        "  - { key: remote_address, value: 50.0.0.5, rate_limit: { unit: "
        "second, requests_per_unit: 0 } }\n"};
    load(files, 1);
    gov_ask_t a[4] = {D("ldap=x"), D("azure=open"), D("remote_address=50.0.0.5"), D("other=1")};
    gov_result_t r[4];
    ask("internal", a, 4, 0, T, r);
    cr_assert_eq(r[0].met, GOV_MET_UNLIMITED);
    cr_assert(r[0].admit);
    cr_assert_eq(r[1].met, GOV_MET_ALLOW);
    cr_assert_eq(r[2].met, GOV_MET_LIMIT);
    cr_assert_not(r[2].admit, "requests_per_unit 0: always over");
    cr_assert_eq(r[2].remaining, 0);
    cr_assert_eq(r[2].limit_amount, 0);
    cr_assert_eq(r[2].limit_period_ns, S);
    cr_assert_eq(r[3].met, GOV_MET_NONE);
    a[2].cost = 0;
    ask("internal", &a[2], 1, 0, T, r);
    cr_assert(r[0].admit, "a hits_addend of 0 is a check: 0 fits 0");
    done();
}

Test(domain, an_over_descriptor_keeps_nothing_unless_independent)
{
    /* envoy ratelimit's integration test: key2 20/min and key3 10/h asked together */
    const char *files[] = {
        "domain: another\n"
        "descriptors:\n"
        "  - { key: key2, rate_limit: { unit: minute, requests_per_unit: 20 } }\n"
        "  - { key: key3, rate_limit: { unit: hour, requests_per_unit: 10 } }\n"};
    load(files, 1);
    gov_ask_t a[2] = {D("key2=r"), D("key3=r")};
    gov_result_t r[2];
    for (int i = 0; i < 15; i++) {
        ask("another", a, 2, 0, T, r);
        cr_assert_eq(r[1].admit, i < 10, "request %d", i);
        cr_assert_eq(r[0].remaining, i < 10 ? 20 - (i + 1) : 10,
                     "request %d: STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT's answer", i);
    }
    a[0] = D("key2=s");
    a[1] = D("key3=s");
    for (int i = 0; i < 15; i++) { /* envoy ratelimit's default: every key counted */
        ask("another", a, 2, GOV_ASK_CHARGE, T, r);
        cr_assert_eq(r[1].admit, i < 10, "request %d", i);
        cr_assert_eq(r[0].remaining, 20 - (i + 1), "request %d: envoy ratelimit's default", i);
        cr_assert_eq(r[1].remaining, i < 10 ? 10 - (i + 1) : 0);
    }
    a[1].cost = 0; /* a check: key3 was counted past its 10 (15), as INCRBY counts */
    ask("another", &a[1], 1, 0, T, r);
    cr_assert_not(r[0].admit, "0 more does not fit 15 of 10");
    done();
}

Test(domain, quota_mode_is_over_only_when_every_quota_rule_is)
{
    /* the docker-compose example's quota.sh: service_1 1/min, service_2 2/min, quota_mode */
    const char *files[] = {"domain: rl\n"
                           "descriptors:\n"
                           "  - { key: service, value: service_1, quota_mode: true, rate_limit: "
                           "{ unit: minute, requests_per_unit: 1 } }\n"
                           "  - { key: service, value: service_2, quota_mode: true, rate_limit: "
                           "{ unit: minute, requests_per_unit: 2 } }\n"};
    load(files, 1);
    gov_ask_t a[2] = {D("service=service_1"), D("service=service_2")};
    gov_result_t r[2];
    ask("rl", a, 2, 0, T, r);
    cr_assert(r[0].admit && r[1].admit);
    cr_assert(r[0].rule_flags & CFG_RULE_QUOTA);
    gov_verdict_t overall;
    cr_assert_eq(gov_decide_domain(engine, "rl", 2, a, 2, 0, T, r, &overall, NULL, NULL), 0);
    cr_assert_not(r[0].admit, "service_1 is over");
    cr_assert(r[1].admit, "service_2 is not: the request goes, service_2 counted");
    cr_assert_eq(overall, GOV_ADMIT);
    cr_assert_eq(gov_decide_domain(engine, "rl", 2, a, 2, 0, T, r, &overall, NULL, NULL), 0);
    cr_assert_not(r[0].admit);
    cr_assert_not(r[1].admit, "both over: the third is refused");
    cr_assert_eq(overall, GOV_DENY);
    done();
}

Test(domain, a_descriptor_carrying_its_own_limit_counts_per_descriptor)
{
    const char *files[] = {"domain: o\ndescriptors: [{ key: k, rate_limit: { unit: second, "
                           "requests_per_unit: 1 } }]\n",
                           "domain: p\ndescriptors: [{ key: x }]\n"};
    load(files, 2);
    gov_ask_t a = D("k=v", "sub=1");
    a.override_unit = 4; /* DAY */
    a.override_amount = 2;
    gov_result_t r;
    ask("o", &a, 1, 0, T, &r);
    cr_assert_eq(r.met, GOV_MET_OVERRIDE, "no rule at this depth: the override applies anyway");
    cr_assert_eq(r.limit_amount, 2);
    cr_assert_eq(r.limit_period_ns, 86400 * S);
    cr_assert_eq(r.remaining, 1);
    cr_assert_str_eq(r.rule_name, "", "an override has no name");
    a.override_amount = 3; /* a new amount: the same counter, as envoy's cache key */
    ask("o", &a, 1, 0, T, &r);
    cr_assert_eq(r.remaining, 1);
    ask("o", &a, 1, 0, T, &r);
    cr_assert_eq(r.remaining, 0);
    ask("o", &a, 1, 0, T, &r);
    cr_assert_not(r.admit);
    ask("p", &a, 1, 0, T, &r); /* another domain: another counter */
    cr_assert_eq(r.remaining, 2);
    a.subject.pairs[1].id = "2"; /* another value: another counter */
    ask("o", &a, 1, 0, T, &r);
    cr_assert_eq(r.remaining, 2);
    done();
}

Test(domain, a_shadow_rule_over_its_limit_is_admitted_with_its_status)
{
    const char *files[] = {"domain: s\ndescriptors: [{ key: k, shadow_mode: true, rate_limit: "
                           "{ unit: minute, requests_per_unit: 1 } }]\n"};
    load(files, 1);
    gov_ask_t a = D("k=v");
    gov_result_t r;
    ask("s", &a, 1, 0, T, &r);
    ask("s", &a, 1, 0, T, &r);
    cr_assert(r.admit, "shadow: never denied");
    cr_assert_eq(r.n_soft_denied, 1, "the would-be denial is counted");
    cr_assert_str_eq(r.limit, "rls_s_k");
    cr_assert_eq(r.remaining, 0);
    cr_assert_eq(r.reset_after_s, 60);
    cr_assert_eq(r.limit_amount, 1);
    done();
}

Test(domain, domains_count_apart_and_a_domain_without_rules_uses_levels)
{
    const char *files[] = {"domain: a\ndescriptors: [{ key: k, rate_limit: { unit: minute, "
                           "requests_per_unit: 2 } }]\n",
                           "domain: b\ndescriptors: [{ key: k, rate_limit: { unit: minute, "
                           "requests_per_unit: 2 } }]\n"};
    load(files, 2);
    gov_ask_t a = D("k=v");
    gov_result_t r;
    ask("a", &a, 1, 0, T, &r);
    ask("a", &a, 1, 0, T, &r);
    cr_assert_eq(r.remaining, 0);
    ask("b", &a, 1, 0, T, &r);
    cr_assert_eq(r.remaining, 1, "domain b's own counter");
    ask("c", &a, 1, 0, T, &r);
    cr_assert_eq(r.met, GOV_MET_NONE);
    cr_assert_str_eq(r.limit, "", "no rule, no limit attached to level k");
    done();
}

Test(domain, bad_descriptors_are_refused_and_change_nothing)
{
    const char *files[] = {"domain: a\ndescriptors: [{ key: k, rate_limit: { unit: minute, "
                           "requests_per_unit: 2 } }]\n"};
    load(files, 1);
    gov_ask_t a[2] = {D("k=v"), D("k=v")};
    gov_result_t r[2];
    a[1].subject.n = 0;
    cr_assert_eq(gov_decide_domain(engine, "a", 1, a, 2, 0, T, r, NULL, NULL, NULL), GOV_ESUBJECT);
    a[1] = D("k=v");
    a[1].cost = -1;
    cr_assert_eq(gov_decide_domain(engine, "a", 1, a, 2, 0, T, r, NULL, NULL, NULL), GOV_ERANGE);
    a[1].cost = 1;
    a[1].override_unit = 9;
    cr_assert_eq(gov_decide_domain(engine, "a", 1, a, 2, 0, T, r, NULL, NULL, NULL), GOV_EINVAL);
    ask("a", a, 1, 0, T, r);
    cr_assert_eq(r[0].remaining, 1, "nothing was spent before");
    done();
}

static char seen_key[GOV_DETAIL_KEY_MAX + 1];
static size_t n_seen;

static void on_detail(void *ctx, const gov_detail_t *m)
{
    (void)ctx;
    if (m->outcomes[GOV_OUT_ADMIT] == 1 && strncmp(m->key, "dm.route_draw", 13) == 0)
        snprintf(seen_key, sizeof(seen_key), "%.*s", (int)m->key_len, m->key);
    n_seen++;
}

/* detailed_metric and value_to_metric: the series is keyed as envoy ratelimit names its stats,
 * and the series are bounded (the rest counted as dropped, not kept) */
Test(domain, detailed_series_are_keyed_as_envoy_and_bounded)
{
    const char *files[] = {"domain: dm\n"
                           "descriptors:\n"
                           "  - key: route\n"
                           "    value_to_metric: true\n"
                           "    descriptors:\n"
                           "      - key: http_method\n"
                           "        descriptors:\n"
                           "          - { key: subject_id, rate_limit: { unit: minute, "
                           "requests_per_unit: 60 } }\n"
                           "  - { key: any, detailed_metric: true, rate_limit: { unit: minute, "
                           "requests_per_unit: 60 } }\n"};
    load(files, 1);
    gov_ask_t a = D("route=draw", "http_method=GET", "subject_id=123");
    gov_result_t r;
    ask("dm", &a, 1, 0, T, &r);
    n_seen = 0;
    cr_assert_eq(gov_engine_each_detail(engine, on_detail, NULL), 0);
    cr_assert_str_eq(seen_key, "dm.route_draw.http_method.subject_id",
                     "value_to_metric on route: its value; the others as written");
    char v[32];
    for (int i = 0; i < GOV_DETAIL_MAX + 10; i++) {
        snprintf(v, sizeof(v), "any=%d", i);
        gov_ask_t b = d(1, (const char *const[]){v});
        ask("dm", &b, 1, 0, T, &r);
    }
    n_seen = 0;
    uint64_t dropped = gov_engine_each_detail(engine, on_detail, NULL);
    cr_assert_eq(n_seen, GOV_DETAIL_MAX, "at most GOV_DETAIL_MAX series");
    cr_assert_eq(dropped, 11, "the rest counted as dropped");
    done();
}

/* ---- rules in Redis (a fake store answering as the Lua script does) ---------------------- */

static fake_redis_t fake;

/* Our own YAML: rules of both stores in one domain. */
static void load_mixed(void)
{
    static const char *yaml =
        "shared_state:\n  redis: { address: 127.0.0.1:6379 }\n"
        "governance:\n  limits:\n"
        "    - { id: red, domain: m, descriptor: [{ key: r }], type: rpm, amount: 5, period: 60s, "
        "algorithm: envoy_window, store: redis }\n"
        "    - { id: red1, domain: m, descriptor: [{ key: r1 }], type: rpm, amount: 1, period: "
        "60s, algorithm: envoy_window, store: redis }\n"
        "    - { id: loc, domain: m, descriptor: [{ key: l }], type: rpm, amount: 5, period: 60s, "
        "algorithm: envoy_window }\n"
        "    - { id: loc1, domain: m, descriptor: [{ key: l1 }], type: rpm, amount: 1, period: "
        "60s, algorithm: envoy_window }\n";
    cfg = envoy_config_on(yaml, NULL, 0);
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create_config(&engine, &o, cfg, &err), 0, "%s", err.message);
    fake = (fake_redis_t){0};
    gov_engine_set_redis(engine, &fake_ops, &fake);
}

/* Asks domain m: the request waits on Redis, its ops (one per redis rule met, all sent at once)
 * are answered, and done runs once, with the results. The refunds and charges the decision sends
 * then are left queued. Returns the request's verdict. */
static gov_verdict_t ask_redis(gov_ask_t *a, size_t n, unsigned flags, int n_ops, gov_result_t *r)
{
    done_log_t log = {0};
    gov_verdict_t v = GOV_UNFITTABLE;
    int first = fake.n;
    cr_assert_eq(gov_decide_domain(engine, "m", 1, a, n, flags, T, r, &v, on_done, &log),
                 GOV_PENDING);
    cr_assert_eq(fake.n - first, n_ops, "one op per redis rule, sent before the answer");
    for (int i = first; i < first + n_ops; i++) {
        cr_assert_eq(fake.ops[i]->kind, GOV_REDIS_STEP);
        cr_assert_eq(log.calls, 0, "no answer before the last op's");
        fake_answer(&fake, i, T);
    }
    cr_assert_eq(log.calls, 1);
    cr_assert_eq(log.last, r);
    return v;
}

/* The counter of limit `id` for one value, as the rule keys it (length-prefixed). */
static int64_t counted(const char *id, const char *value)
{
    char key[64] = {0, (char)strlen(value)};
    memcpy(key + 2, value, strlen(value));
    return *fake_counter(&fake, id, key, 2 + strlen(value)) & 0xffffffff; /* envoy_window */
}

Test(domain_redis, a_refused_request_gives_back_what_redis_counted)
{
    load_mixed();
    gov_ask_t a[2] = {D("r=x"), D("r1=y")};
    gov_result_t r[2];
    cr_assert_eq(ask_redis(a, 2, 0, 2, r), GOV_ADMIT);
    cr_assert(r[0].admit && r[1].admit);
    cr_assert_eq(r[0].remaining, 4);
    cr_assert_eq(fake.n, 2, "admitted: nothing to give back");
    cr_assert_eq(ask_redis(a, 2, 0, 2, r), GOV_DENY, "r1 is over: the request is refused");
    cr_assert_not(r[1].admit);
    cr_assert_eq(r[0].remaining, 4, "r answers the count the refund leaves, not 3");
    cr_assert_eq(counted("red", "x"), 2, "redis counted it before the request was refused");
    cr_assert_eq(fake.n, 5, "and the refund is sent");
    gov_redis_op_t *refund = fake.ops[4];
    cr_assert_eq(refund->kind, GOV_REDIS_SETTLE);
    cr_assert_str_eq(refund->limit->id, "red");
    cr_assert_eq(refund->reserved, 1);
    cr_assert_eq(refund->actual, 0);
    fake_answer(&fake, 4, T);
    cr_assert_eq(counted("red", "x"), 1, "given back");
    cr_assert_eq(counted("red1", "y"), 1, "the refused step counted nothing");
    done();
}

Test(domain_redis, with_charge_what_redis_refused_is_counted_too)
{
    load_mixed();
    gov_ask_t a[2] = {D("r=x"), D("r1=y")};
    gov_result_t r[2];
    ask_redis(a, 2, GOV_ASK_CHARGE, 2, r);
    cr_assert_eq(ask_redis(a, 2, GOV_ASK_CHARGE, 2, r), GOV_DENY);
    cr_assert_eq(r[0].remaining, 3, "kept: envoy ratelimit's default counts every descriptor");
    cr_assert_eq(fake.n, 5);
    cr_assert_eq(fake.ops[4]->kind, GOV_REDIS_SETTLE, "the over one is charged");
    cr_assert_str_eq(fake.ops[4]->limit->id, "red1");
    cr_assert_eq(fake.ops[4]->reserved, 0);
    cr_assert_eq(fake.ops[4]->actual, 1);
    fake_answer(&fake, 4, T);
    cr_assert_eq(counted("red1", "y"), 2, "as envoy's INCRBY counts past the limit");
    cr_assert_eq(counted("red", "x"), 2);
    done();
}

Test(domain_redis, local_and_redis_rules_are_one_two_phase_decision)
{
    load_mixed();
    gov_ask_t a[2] = {D("r=x"), D("l1=y")};
    gov_result_t r[2];
    cr_assert_eq(ask_redis(a, 2, 0, 1, r), GOV_ADMIT, "the local rule steps when Redis answers");
    cr_assert_eq(ask_redis(a, 2, 0, 1, r), GOV_DENY, "l1 over, locally");
    cr_assert_eq(fake.n, 3, "what redis counted is given back");
    cr_assert_eq(fake.ops[2]->reserved, 1);
    fake_answer(&fake, 2, T);
    cr_assert_eq(counted("red", "x"), 1);
    gov_ask_t b[2] = {D("l=z"), D("r1=w")};
    cr_assert_eq(ask_redis(b, 2, 0, 1, r), GOV_ADMIT);
    cr_assert_eq(r[0].remaining, 4);
    cr_assert_eq(ask_redis(b, 2, 0, 1, r), GOV_DENY, "r1 over, in redis");
    cr_assert_eq(r[0].remaining, 4, "the local step is undone");
    cr_assert_eq(fake.n, 5, "nothing of redis's to give back");
    ask("m", b, 1, 0, T, r);
    cr_assert_eq(r[0].remaining, 3, "l counted once, not twice");
    done();
}

Test(domain_redis, a_caller_that_cannot_wait_is_refused_and_nothing_counts)
{
    load_mixed();
    gov_ask_t a[2] = {D("l=z"), D("r=x")};
    gov_result_t r[2];
    cr_assert_eq(gov_decide_domain(engine, "m", 1, a, 2, 0, T, r, NULL, NULL, NULL), GOV_EINVAL);
    cr_assert_eq(fake.submitted, 0);
    ask("m", a, 1, 0, T, r);
    cr_assert_eq(r[0].remaining, 4, "the local rule was not stepped either");
    done();
}

Test(domain_redis, redis_unavailable_decides_by_posture_fail)
{
    load_mixed();
    gov_ask_t a = D("r1=x");
    gov_result_t r;
    done_log_t log = {0};
    gov_verdict_t v;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(gov_decide_domain(engine, "m", 1, &a, 1, 0, T, &r, &v, on_done, &log),
                     GOV_PENDING);
        fake_unavailable(&fake, i, T);
        cr_assert_eq(log.calls, i + 1);
        cr_assert_eq(r.admit, i == 0, "fail open: the local fallback counts 1 per minute");
    }
    done();
}
