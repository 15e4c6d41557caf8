/*
 * The async store behind a real Sentinel: a primary, its replica and one Sentinel (quorum 1)
 * on loopback. The store finds the primary through the Sentinel; the primary is SIGKILLed,
 * the Sentinel fails over, and the store follows +switch-master to the promoted replica
 * (which ROLE confirms) within a second of the message, as a subscriber of our own sees it.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>

#include "harness.h"
#include "redis_store.h"
#include "store_test.h"

#define MS INT64_C(1000000)

static rh_server_t primary, replica, sentinel;
static uv_loop_t loop;
static char primary_port[16];
static const char *replica_args[] = {"--replicaof", "127.0.0.1", primary_port, NULL};

static bool replica_in_sync(void)
{
    redisContext *c = rh_connect(&replica);
    redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 &&
              r->element[3]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[3]->str, "connected") == 0;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rh_start(&primary), 0, "the primary did not start");
    snprintf(primary_port, sizeof(primary_port), "%d", primary.port);
    cr_assert_eq(rh_start_with(&replica, replica_args, NULL), 0, "the replica did not start");
    char conf[512];
    snprintf(conf, sizeof(conf),
             "sentinel monitor mymaster 127.0.0.1 %d 1\n"
             "sentinel down-after-milliseconds mymaster 500\n"
             "sentinel failover-timeout mymaster 5000\n",
             primary.port);
    cr_assert_eq(rh_start_with(&sentinel, NULL, conf), 0, "the Sentinel did not start");
    long long deadline = rh_now_ms() + 20000;
    while (!(replica_in_sync() && rh_sentinel_replicas(&sentinel, "mymaster") == 1)) {
        cr_assert_lt(rh_now_ms(), deadline, "the replica or the Sentinel never got ready");
        usleep(20000); /* polling their state, bounded by the deadline */
    }
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    rh_stop(&sentinel);
    rh_stop(&replica);
    rh_stop(&primary);
}

TestSuite(sentinel, .init = setup, .fini = teardown, .timeout = 60);

/* A Sentinel-mode store asking the Sentinel at `address` about mymaster. */
static rds_store_t *open_store(const char *address)
{
    rds_options_t o = {.n_sentinels = 1,
                       .master = "mymaster",
                       .timeout_ns = 200 * MS,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 100 * MS};
    o.sentinels[0] = address;
    return rs_store_new(&loop, &o);
}

/* ---- our own +switch-master subscriber, on the same loop ---------------------------------- */

typedef struct watch {
    redisAsyncContext *ac;
    long long switched_ms; /* 0 until the message came */
    char to[64];
} watch_t;

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    watch_t *w = privdata;
    redisReply *reply = r;
    if (reply && reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
        strcmp(reply->element[0]->str, "message") == 0) {
        w->switched_ms = rh_now_ms();
        snprintf(w->to, sizeof(w->to), "%s", reply->element[2]->str);
    }
}

static bool switched(void *arg)
{
    return ((watch_t *)arg)->switched_ms != 0;
}

/* ---- decisions ---------------------------------------------------------------------------- */

typedef struct tally {
    int sent, answered, admitted, failed;
} tally_t;

static void on_done(void *arg, const rds_outcome_t *o)
{
    tally_t *t = arg;
    t->answered++;
    t->admitted += o->status == 0 && o->result.admit;
    t->failed += o->status < 0;
}

static void step(rds_store_t *s, tally_t *t)
{
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 1000000, 60000 * MS, 1000000);
    rds_op_t op = {.cost = 1};
    if (rds_store_call(s, &l, "team:s", 6, &op, on_done, t) == 0)
        t->sent++;
}

typedef struct resume {
    rds_store_t *store;
    tally_t tally;
} resume_t;

/* Sends one step whenever none is in flight; true once one was admitted by Redis. */
static bool decided(void *arg)
{
    resume_t *r = arg;
    if (r->tally.admitted > 0)
        return true;
    if (r->tally.answered == r->tally.sent)
        step(r->store, &r->tally);
    return false;
}

Test(sentinel, the_store_follows_a_failover_within_a_second_of_switch_master)
{
    rds_store_t *s = open_store(sentinel.address);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never found the primary");
    resume_t before = {.store = s};
    cr_assert(rh_run_until(&loop, decided, &before, 5000), "no decision through the primary");
    rds_node_stats_t nodes[4];
    size_t n = rds_store_nodes(s, nodes, 4);
    cr_assert_eq(n, 2, "the Sentinel and the primary");
    cr_assert(strcmp(nodes[0].node, primary.address) == 0 ||
              strcmp(nodes[1].node, primary.address) == 0);

    watch_t w = {0};
    w.ac = redisAsyncConnect("127.0.0.1", sentinel.port);
    cr_assert(w.ac && !w.ac->err);
    redisLibuvAttach(w.ac, &loop);
    redisAsyncCommand(w.ac, on_message, &w, "SUBSCRIBE +switch-master");

    rh_kill(&primary);
    cr_assert(rh_run_until(&loop, switched, &w, 30000), "the Sentinel never failed over");
    resume_t after = {.store = s};
    cr_assert(rh_run_until(&loop, decided, &after, 5000), "decisions did not resume");
    long long followed = rh_now_ms() - w.switched_ms;
    cr_log_info("+switch-master %s: decided on the new primary %lld ms later", w.to, followed);
    cr_assert_leq(followed, 1000, "followed %lld ms after +switch-master", followed);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_geq(st.switches, 1);
    n = rds_store_nodes(s, nodes, 4);
    bool on_replica = false;
    for (size_t i = 0; i < n; i++)
        on_replica = on_replica || (strcmp(nodes[i].node, replica.address) == 0 && nodes[i].ready);
    cr_assert(on_replica, "the promoted replica is the store's primary");
    redisAsyncFree(w.ac);
    rds_store_close(s);
}

static bool saw_role_refused(void *s)
{
    rds_stats_t st;
    rds_store_stats(s, &st);
    return strstr(st.last_error, "ROLE says slave") != NULL;
}

Test(sentinel, a_primary_that_role_says_is_a_replica_is_never_used)
{
    /* a Sentinel that names the replica as mymaster's primary (it monitors the wrong node) */
    rh_server_t liar;
    char conf[256];
    snprintf(conf, sizeof(conf),
             "sentinel monitor mymaster 127.0.0.1 %d 1\n"
             "sentinel down-after-milliseconds mymaster 60000\n",
             replica.port);
    cr_assert_eq(rh_start_with(&liar, NULL, conf), 0);
    rds_store_t *s = open_store(liar.address);
    bool refused = rh_run_until(&loop, saw_role_refused, s, 5000);
    bool ready = rds_store_ready(s);
    rds_store_close(s);
    rh_stop(&liar);
    cr_assert(refused, "ROLE was not checked");
    cr_assert_not(ready, "a replica was used as the primary");
}
