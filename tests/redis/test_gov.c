/*
 * The redis store plugged into real engines (gov_engine_t) on one libuv loop, against a real
 * redis-server: two engines share one counter; Redis killed under load makes posture.fail
 * decide within the timeout (open: the local fallback limiter; closed: deny, retry 1); Redis
 * back resumes; a redis limit is never disclosed; a settle moves the TAT in Redis.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/helpers.h"
#include "gov.h"
#include "harness.h"

#define MS INT64_C(1000000)

static rh_server_t server;
static uv_loop_t loop;

static void setup(void)
{
    cr_assert_eq(rh_suite_start(&server, &loop), 0, "redis-server did not start");
}

static void teardown(void)
{
    cr_assert_eq(rh_suite_stop(&server, &loop), 0, "a handle was left open");
}

TestSuite(gov, .init = setup, .fini = teardown, .timeout = 60);

static int64_t realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

static cfg_limit_t redis_limit(cfg_type_t type, int64_t amount, int64_t burst, bool fail_open)
{
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, type == CFG_TYPE_TPM ? "team_tpm" : "team_rpm");
    strcpy(l.level, "team");
    l.type = type;
    l.store = CFG_STORE_REDIS;
    l.amount = amount;
    l.period_ns = 60 * S;
    l.burst = burst;
    l.posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = fail_open};
    char msg[512];
    cr_assert_eq(cfg_limit_arm(&l, msg, sizeof(msg)), 0, "%s", msg);
    return l;
}

/* An engine with its redis hook attached. */
typedef struct node {
    gov_engine_t *e;
    rds_gov_t g;
} node_t;

static void node_open(node_t *n, const cfg_limit_t *l, int64_t timeout_ns)
{
    n->e = mk_engine(l, 1, true);
    rds_options_t o = {.address = server.address,
                       .timeout_ns = timeout_ns,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 100 * MS};
    tt_err_t err;
    cr_assert_eq(rds_gov_attach(&n->g, n->e, &loop, &o, &err), 0, "%s", err.message);
}

static void node_close(node_t *n)
{
    rds_gov_close(&n->g);
    gov_engine_destroy(n->e);
}

static bool node_ready(void *arg)
{
    node_t *n = arg;
    return n->g.store && rds_store_ready(n->g.store);
}

/* ---- decisions, sync or async ------------------------------------------------------------- */

typedef struct tally {
    int sent, done, admitted, denied, retry1;
    bool headers_seen;
    int64_t last_remaining;
    uint64_t last_reservation;
} tally_t;

typedef struct pending {
    gov_result_t out;
    tally_t *t;
} pending_t;

static void count(tally_t *t, const gov_result_t *r)
{
    t->done++;
    if (r->admit)
        t->admitted++;
    else
        t->denied++;
    if (!r->admit && r->retry_after_s == 1)
        t->retry1++;
    t->last_remaining = r->remaining;
    t->last_reservation = r->reservation;
    if (r->disclosed.has_policy || r->disclosed.has_requests || r->disclosed.has_tokens)
        t->headers_seen = true; /* anything beyond Retry-After */
}

static void on_decided(gov_result_t *r, void *ctx)
{
    pending_t *p = ctx;
    cr_assert_eq(r->status, 0, "%s", r->err.message);
    count(p->t, r);
    free(p);
}

static void send_decide(node_t *n, const char *team, int64_t tokens, tally_t *t)
{
    gov_subject_t s;
    subj(&s, "team", team, NULL);
    pending_t *p = malloc(sizeof(*p));
    p->t = t;
    t->sent++;
    int rc = gov_decide(n->e, NULL, &s, tokens, realtime(), &p->out, on_decided, p);
    cr_assert(rc == 0 || rc == GOV_PENDING, "decide: %d %s", rc, p->out.err.message);
    if (rc == 0) { /* answered at once (redis refused the call, posture decided) */
        count(t, &p->out);
        free(p);
    }
}

static bool all_done(void *arg)
{
    tally_t *t = arg;
    return t->done == t->sent;
}

/* ---- tests -------------------------------------------------------------------------------- */

Test(gov, two_engines_sharing_one_redis_admit_one_burst_not_two)
{
    cfg_limit_t l = redis_limit(CFG_TYPE_RPM, 300, 60, true); /* 300/1m burst 60 */
    node_t a, b;
    node_open(&a, &l, 500 * MS);
    node_open(&b, &l, 500 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &a, 5000) &&
              rh_run_until(&loop, node_ready, &b, 5000));
    tally_t t = {0};
    long long start = rh_now_ms();
    for (int i = 0; i < 60; i++) {
        send_decide(&a, "t-42", GOV_NO_TOKENS, &t);
        send_decide(&b, "t-42", GOV_NO_TOKENS, &t);
    }
    cr_assert(rh_run_until(&loop, all_done, &t, 5000));
    long long grace = (rh_now_ms() - start) / 200 + 1;
    cr_assert(t.admitted >= 60 && t.admitted <= 60 + grace, "admitted %d of 120 (want 60)",
              t.admitted);
    cr_assert_not(t.headers_seen, "a redis-backed limit was disclosed");
    cr_assert_eq(a.g.fallbacks + b.g.fallbacks, 0);
    node_close(&a);
    node_close(&b);
}

Test(gov, redis_killed_fail_open_lets_the_local_fallback_decide_then_redis_resumes)
{
    cfg_limit_t l = redis_limit(CFG_TYPE_RPM, 300, 60, true);
    node_t n;
    node_open(&n, &l, 100 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000));
    tally_t warm = {0};
    for (int i = 0; i < 5; i++)
        send_decide(&n, "t-1", GOV_NO_TOKENS, &warm);
    rh_kill(&server); /* some of those may be in flight */
    cr_assert(rh_run_until(&loop, all_done, &warm, 2000), "decisions stalled");

    /* down: the fallback limiter (same config, local counter) decides: 60 of 70 */
    tally_t down = {0};
    for (int i = 0; i < 70; i++)
        send_decide(&n, "t-2", GOV_NO_TOKENS, &down);
    cr_assert(rh_run_until(&loop, all_done, &down, 2000), "decisions stalled");
    cr_assert(down.admitted >= 60 && down.admitted <= 61, "fallback admitted %d", down.admitted);
    cr_assert_geq(n.g.fallbacks, 70);
    gov_metrics_t m;
    gov_engine_metrics(n.e, &m);
    cr_assert_geq(m.store_errors, 70);

    cr_assert_eq(rh_restart(&server), 0);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000), "did not reconnect");
    uint64_t fallbacks = n.g.fallbacks;
    tally_t back = {0};
    for (int i = 0; i < 10; i++)
        send_decide(&n, "t-3", GOV_NO_TOKENS, &back);
    cr_assert(rh_run_until(&loop, all_done, &back, 2000));
    cr_assert_eq(back.admitted, 10);
    cr_assert_eq(n.g.fallbacks, fallbacks, "redis is back: no more fallbacks");
    rds_stats_t st;
    rds_store_stats(n.g.store, &st);
    cr_assert_geq(st.decided, 10);
    node_close(&n);
}

Test(gov, redis_down_fail_closed_denies_with_retry_one)
{
    cfg_limit_t l = redis_limit(CFG_TYPE_RPM, 300, 60, false);
    node_t n;
    node_open(&n, &l, 100 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000));
    rh_kill(&server);
    tally_t t = {0};
    for (int i = 0; i < 20; i++)
        send_decide(&n, "t-1", GOV_NO_TOKENS, &t);
    cr_assert(rh_run_until(&loop, all_done, &t, 2000), "decisions stalled");
    cr_assert_eq(t.admitted, 0);
    cr_assert_eq(t.retry1, 20);
    cr_assert_eq(n.g.fail_closed, 20);
    node_close(&n);
}

Test(gov, a_paused_redis_decides_by_posture_within_the_timeout)
{
    cfg_limit_t l = redis_limit(CFG_TYPE_RPM, 300, 60, false);
    node_t n;
    node_open(&n, &l, 60 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000));
    rh_pause(&server, true);
    tally_t t = {0};
    long long start = rh_now_ms();
    for (int i = 0; i < 3; i++)
        send_decide(&n, "t-1", GOV_NO_TOKENS, &t);
    bool done = rh_run_until(&loop, all_done, &t, 2000);
    long long took = rh_now_ms() - start;
    rh_pause(&server, false);
    cr_assert(done, "decisions stalled behind a paused redis");
    cr_assert_leq(took, 60 + 150, "decisions took %lld ms against a 60 ms timeout", took);
    cr_assert_eq(t.retry1, 3);
    node_close(&n);
}

static int64_t get_tat(const cfg_limit_t *l, const char *team)
{
    char key[RDS_KEY_MAX + 1];
    int n = rds_key(key, l->identity, team, strlen(team));
    key[n] = '\0';
    redisContext *c = rh_connect(&server);
    redisReply *r = redisCommand(c, "GET %s", key);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "no state under %s", key);
    int64_t v = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return v;
}

static void on_settled(gov_result_t *r, void *ctx)
{
    *(int64_t *)ctx = r->settled;
}

static bool settled(void *arg)
{
    return *(int64_t *)arg >= 0;
}

Test(gov, a_settle_refunds_in_redis_by_the_unused_tokens_and_a_charge_adds)
{
    /* 100000 tokens/1m, burst 20000: T = 600 us. Reserve 16384, use 1000. */
    cfg_limit_t l = redis_limit(CFG_TYPE_TPM, 100000, 20000, true);
    node_t n;
    node_open(&n, &l, 500 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000));
    tally_t t = {0};
    send_decide(&n, "t-9", 16384, &t);
    cr_assert(rh_run_until(&loop, all_done, &t, 2000));
    cr_assert_eq(t.admitted, 1);
    int64_t before = get_tat(&l, "t-9");

    gov_subject_t s;
    subj(&s, "team", "t-9", NULL);
    gov_result_t out;
    int64_t n_settled = -1;
    cr_assert_neq(t.last_reservation, 0);
    int rc =
        gov_settle(n.e, NULL, t.last_reservation, 1000, realtime(), &out, on_settled, &n_settled);
    cr_assert_eq(rc, GOV_PENDING, "%d %s", rc, out.err.message);
    cr_assert(rh_run_until(&loop, settled, &n_settled, 2000));
    cr_assert_eq(n_settled, 1);
    /* the TAT moved back by (16384 - 1000) x T, which still leaves it 1000 T ahead of now */
    cr_assert_eq(get_tat(&l, "t-9"), before - INT64_C(15384) * l.limiter.emission_ns);

    /* tokens counted after the fact are charged in full, past the burst */
    n_settled = -1;
    rc = gov_charge(n.e, &s, 50000, realtime(), &out, on_settled, &n_settled);
    cr_assert_eq(rc, GOV_PENDING);
    cr_assert(rh_run_until(&loop, settled, &n_settled, 2000));
    cr_assert_eq(get_tat(&l, "t-9"), before - INT64_C(15384) * l.limiter.emission_ns +
                                         INT64_C(50000) * l.limiter.emission_ns);
    node_close(&n);
}

static void append_line(void *ud, const char *line)
{
    strcat(ud, line);
}

Test(gov, metrics_name_the_redis_counters)
{
    cfg_limit_t l = redis_limit(CFG_TYPE_RPM, 300, 60, true);
    node_t n;
    node_open(&n, &l, 500 * MS);
    cr_assert(rh_run_until(&loop, node_ready, &n, 5000));
    char buf[4096] = "";
    rds_gov_metrics(&n.g, append_line, buf);
    cr_assert(strstr(buf, "tokentriage_redis_up 1\n"), "%s", buf);
    cr_assert(strstr(buf, "# TYPE tokentriage_redis_timeouts_total counter\n"));
    cr_assert(strstr(buf, "tokentriage_redis_fallbacks_total 0\n"));
    char sample[128];
    snprintf(sample, sizeof(sample), "tokentriage_redis_node_up{node=\"%s\",role=\"redis\"} 1\n",
             server.address);
    cr_assert(strstr(buf, sample), "%s", buf);
    cr_assert(strstr(buf, "# TYPE tokentriage_redis_node_latency_seconds summary\n"));
    cr_assert(strstr(buf, "tokentriage_redis_node_latency_seconds_count{node="), "%s", buf);
    node_close(&n);
}
