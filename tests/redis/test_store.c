/*
 * The async store against a real redis-server (and against fake ones that answer nonsense):
 * decisions through Redis, one counter shared by two stores, a Redis killed, paused and
 * brought back, bad keys and bad replies, and batches: each call of one answered exactly once
 * through a timeout, NOSCRIPT, BUSY and a lost connection. Every wait is a poll with a deadline
 * on the libuv loop; nothing sleeps blindly.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "redis_store.h"
#include "store_test.h"

#define MS INT64_C(1000000)

static rh_server_t server;
static uv_loop_t loop;

#ifdef TT_STORE_TLS
/* test_redis_store_tls: the same tests with the store over TLS (the server's tls-port, verified
 * against the test's CA); the fake servers stay plain unix sockets */
#include "certs.h"
static rt_certs_t certs;
static const char *tls_args[16];
static char tls_storage[512], tls_address[32];
#define STORE_ADDRESS tls_address

static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rt_certs_make(&certs), 0);
    int port = rh_free_port();
    rt_server_args(&certs, &certs.server, port, "optional", tls_args, tls_storage);
    snprintf(tls_address, sizeof(tls_address), "127.0.0.1:%d", port);
    cr_assert_eq(rh_start_with(&server, tls_args, NULL), 0, "redis-server did not start");
}

static void teardown(void)
{
    cr_assert_eq(rh_suite_stop(&server, &loop), 0, "a handle was left open");
    rt_certs_remove(&certs);
}
#else
#define STORE_ADDRESS server.address

static void setup(void)
{
    cr_assert_eq(rh_suite_start(&server, &loop), 0, "redis-server did not start");
}

static void teardown(void)
{
    cr_assert_eq(rh_suite_stop(&server, &loop), 0, "a handle was left open");
}
#endif

TestSuite(store, .init = setup, .fini = teardown, .timeout = 60);

/* ---- driving the loop --------------------------------------------------------------------- */

static bool run_until(bool (*pred)(void *), void *arg, long long ms)
{
    return rh_run_until(&loop, pred, arg, ms);
}

static bool is_ready(void *s)
{
    return rds_store_ready(s);
}

static bool is_not_ready(void *s)
{
    return !rds_store_ready(s);
}

/* A store on `address`, its events tallied in *e (NULL: not told). Over TLS in
 * test_redis_store_tls when the address has the TLS port, whatever its host. */
static rds_store_t *open_store_told(const char *address, int64_t timeout_ns, rs_events_t *e)
{
    rds_options_t o = {.address = address,
                       .timeout_ns = timeout_ns,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 100 * MS,
                       .on_event = e != NULL ? rs_on_event : NULL,
                       .data = e};
#ifdef TT_STORE_TLS
    rds_tls_options_t tls = {.ca_file = certs.ca, .verify = true};
    const char *port = strrchr(address, ':');
    if (port != NULL && strcmp(port, strrchr(tls_address, ':')) == 0)
        o.tls = &tls;
#endif
    rds_store_t *s;
    tt_err_t err;
    cr_assert_eq(rds_store_new(&loop, &o, &s, &err), 0, "%s", err.message);
    return s;
}

static rds_store_t *open_store(const char *address, int64_t timeout_ns)
{
    return open_store_told(address, timeout_ns, NULL);
}

/* ---- calls and their outcomes ------------------------------------------------------------- */

typedef struct tally {
    int sent, answered, admitted, denied, failed;
    int last_status;
    long long worst_ms; /* the longest any call waited for its answer */
    char last_error[256];
} tally_t;

typedef struct call_ctx {
    tally_t *tally;
    long long sent_ms;
} call_ctx_t;

static void on_done(void *arg, const rds_outcome_t *o)
{
    call_ctx_t *ctx = arg;
    tally_t *t = ctx->tally;
    long long waited = rh_now_ms() - ctx->sent_ms;
    if (waited > t->worst_ms)
        t->worst_ms = waited;
    t->answered++;
    t->last_status = o->status;
    if (o->status == 0 && o->result.admit)
        t->admitted++;
    else if (o->status == 0)
        t->denied++;
    else {
        t->failed++;
        snprintf(t->last_error, sizeof(t->last_error), "%s", o->error);
    }
    free(ctx);
}

/* Sends one step; a call refused at once counts as failed with its status. */
static int send_step(rds_store_t *s, const ra_limiter_t *l, const char *key, tally_t *t)
{
    call_ctx_t *ctx = malloc(sizeof(*ctx));
    ctx->tally = t;
    ctx->sent_ms = rh_now_ms();
    rds_op_t op = {.cost = 1};
    int rc = rds_store_call(s, l, key, strlen(key), &op, on_done, ctx);
    if (rc < 0) {
        free(ctx);
        t->failed++;
        t->last_status = rc;
        return rc;
    }
    t->sent++;
    return 0;
}

static bool all_answered(void *arg)
{
    tally_t *t = arg;
    return t->answered == t->sent;
}

static ra_limiter_t team_rpm(void) /* 300/1m burst 60: T = 200 ms, tau = 12 s */
{
    ra_limiter_t l;
    cr_assert_eq(ra_limiter_init(&l, RA_GCRA, 300, 60000 * MS, 60), 0);
    return l;
}

/* ---- tests -------------------------------------------------------------------------------- */

Test(store, decides_through_redis_and_denies_past_the_burst)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 500 * MS);
    cr_assert(run_until(is_ready, s, 5000), "never became ready");
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    long long start = rh_now_ms();
    for (int i = 0; i < 80; i++)
        send_step(s, &l, "team:a", &t);
    cr_assert(run_until(all_answered, &t, 5000));
    long long grace = (rh_now_ms() - start) / 200 + 1; /* one more per 200 ms that passed */
    cr_assert(t.admitted >= 60 && t.admitted <= 60 + grace, "admitted %d", t.admitted);
    cr_assert_eq(t.admitted + t.denied, 80);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_eq(st.decided, 80);
    cr_assert_eq(st.connects, 1);
    rds_store_close(s);
}

Test(store, a_unix_socket_address_works_too)
{
    char address[128];
    snprintf(address, sizeof(address), "unix:%s", server.sock);
    rds_store_t *s = open_store(address, 500 * MS);
    cr_assert(run_until(is_ready, s, 5000), "never became ready");
    ra_limiter_t l;
    ra_limiter_init(&l, RA_SLIDING_WINDOW, 10, 8000 * MS, 10);
    tally_t t = {0};
    for (int i = 0; i < 12; i++)
        send_step(s, &l, "team:w", &t);
    cr_assert(run_until(all_answered, &t, 5000));
    cr_assert(t.admitted <= 10 && t.admitted >= 1, "admitted %d", t.admitted);
    cr_assert_eq(t.failed, 0);
    rds_store_close(s);
}

Test(store, a_store_made_on_a_loop_that_has_not_run_for_a_while_gives_its_handshake_its_time)
{
    /* a daemon's start: the loop made, then more than the handshake's 1000 ms of work (the
     * configuration, the host's checks) before the store, the loop's clock not read meanwhile */
    uv_update_time(&loop);
    usleep(1200 * 1000);
    rs_events_t e = {0};
    rds_store_t *s = open_store_told(STORE_ADDRESS, 50 * MS, &e);
    cr_assert(run_until(is_ready, s, 5000), "never ready: %s", e.last);
    cr_assert_eq(e.node_down, 0, "its first handshake failed: %s", e.last);
    rds_store_close(s);
}

Test(store, two_stores_on_one_redis_enforce_one_counter)
{
    rds_store_t *a = open_store(STORE_ADDRESS, 500 * MS);
    rds_store_t *b = open_store(STORE_ADDRESS, 500 * MS);
    cr_assert(run_until(is_ready, a, 5000) && run_until(is_ready, b, 5000));
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    long long start = rh_now_ms();
    for (int i = 0; i < 60; i++) { /* 120 in one burst, interleaved across both */
        send_step(a, &l, "team:shared", &t);
        send_step(b, &l, "team:shared", &t);
    }
    cr_assert(run_until(all_answered, &t, 5000));
    long long grace = (rh_now_ms() - start) / 200 + 1;
    cr_assert(t.admitted >= 60 && t.admitted <= 60 + grace, "admitted %d of 120, not 60",
              t.admitted);
    rds_store_close(a);
    rds_store_close(b);
}

Test(store, refuses_at_once_while_not_connected)
{
    rh_kill(&server);
    rds_store_t *s = open_store(STORE_ADDRESS, 50 * MS);
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    cr_assert_eq(send_step(s, &l, "team:a", &t), RDS_EUNAVAILABLE);
    run_until(is_ready, s, 100); /* a few failed connects and backoffs */
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_not(st.ready);
    cr_assert(strstr(st.last_error, "connect"), "%s", st.last_error);
    rds_store_close(s);
}

static bool killed_and_answered(void *arg)
{
    tally_t *t = arg;
    return t->answered == t->sent;
}

Test(store, redis_killed_mid_load_fails_within_the_timeout_then_reconnects_and_resumes)
{
    const int64_t timeout = 100 * MS;
    rds_store_t *s = open_store(STORE_ADDRESS, timeout);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 1000000, 60000 * MS, 1000000);
    tally_t t = {0};
    for (int i = 0; i < 200; i++)
        send_step(s, &l, "team:load", &t);
    rh_kill(&server); /* with those in flight, or some of them */
    for (int i = 0; i < 200; i++)
        send_step(s, &l, "team:load", &t);
    cr_assert(run_until(killed_and_answered, &t, 5000), "calls still waiting: no stall allowed");
    cr_assert_gt(t.failed, 0);
    cr_assert_leq(t.worst_ms, 100 + 150, "a call waited %lld ms, past the timeout", t.worst_ms);
    cr_assert(run_until(is_not_ready, s, 2000));

    cr_assert_eq(rh_restart(&server), 0);
    cr_assert(run_until(is_ready, s, 5000), "did not reconnect");
    tally_t after = {0};
    for (int i = 0; i < 10; i++)
        send_step(s, &l, "team:load", &after);
    cr_assert(run_until(all_answered, &after, 5000));
    cr_assert_eq(after.admitted, 10, "after the restart: %d admitted, %d failed (%s)",
                 after.admitted, after.failed, after.last_error);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_geq(st.connects, 2);
    cr_assert_geq(st.disconnects, 1);
    rds_store_close(s);
}

static bool a_reconnect_failed(void *arg)
{
    rds_stats_t st;
    rds_store_stats(arg, &st);
    return strstr(st.last_error, "stalled") || strstr(st.last_error, "connect");
}

Test(store, a_redis_down_through_several_reconnect_attempts_is_found_again)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 50 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    rh_kill(&server);
    cr_assert(run_until(is_not_ready, s, 2000));
    cr_assert(run_until(a_reconnect_failed, s, 2000), "no reconnect attempt failed");
    cr_assert(!run_until(is_ready, s, 300)); /* a few more attempts, all failing */
    cr_assert_eq(rh_restart(&server), 0);
    cr_assert(run_until(is_ready, s, 5000), "did not reconnect after repeated failures");
    rds_store_close(s);
}

Test(store, a_paused_redis_times_out_and_the_stalled_connection_is_remade)
{
    const int64_t timeout = 80 * MS;
    rds_store_t *s = open_store(STORE_ADDRESS, timeout);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    rh_pause(&server, true);
    tally_t t = {0};
    for (int i = 0; i < 5; i++)
        send_step(s, &l, "team:p", &t);
    bool done = run_until(all_answered, &t, 3000);
    rh_pause(&server, false);
    cr_assert(done, "calls never answered");
    cr_assert_eq(t.last_status, RDS_ETIMEDOUT);
    cr_assert_leq(t.worst_ms, 80 + 150);
    cr_assert(run_until(is_ready, s, 5000), "did not come back after SIGCONT");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_eq(st.timeouts, 5);
    cr_assert_geq(st.connects, 2, "the stalled connection was not remade");
    rds_store_close(s);
}

Test(store, a_key_holding_garbage_is_an_error_not_a_decision)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 500 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    char key[RDS_KEY_MAX];
    int n = rds_key(key, 42, "bad", 3);
    cr_assert_gt(n, 0);
    key[n] = '\0';
    redisContext *c = rh_connect(&server);
    freeReplyObject(redisCommand(c, "SET %s %s", key, "not-a-number"));
    redisFree(c);
    tally_t t = {0};
    send_step(s, &l, key, &t);
    cr_assert(run_until(all_answered, &t, 5000));
    cr_assert_eq(t.last_status, RDS_EREDIS);
    cr_assert(strstr(t.last_error, "holds no int64 state"), "%s", t.last_error);
    cr_assert(rds_store_ready(s), "an error reply must not cost the connection");
    rds_store_close(s);
}

Test(store, in_flight_calls_are_bounded)
{
    rds_options_t o = {.address = server.address, .timeout_ns = 500 * MS, .max_in_flight = 8};
    rds_store_t *s;
    tt_err_t err;
    cr_assert_eq(rds_store_new(&loop, &o, &s, &err), 0);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    int refused = 0;
    for (int i = 0; i < 20; i++)
        refused += send_step(s, &l, "team:b", &t) == RDS_EFULL;
    cr_assert_eq(refused, 12);
    cr_assert(run_until(all_answered, &t, 5000));
    rds_store_close(s);
}

Test(store, closing_answers_every_call_in_flight)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 500 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    for (int i = 0; i < 10; i++)
        send_step(s, &l, "team:c", &t);
    rds_store_close(s);
    cr_assert_eq(t.answered, 10);
    cr_assert_eq(t.last_status, RDS_ECLOSED);
}

/* ---- batches: each call answered exactly once, whatever happens to its script call -------- */

typedef struct once {
    int answers, status;
    bool admit;
} once_t;

static void once_done(void *arg, const rds_outcome_t *o)
{
    once_t *x = arg;
    x->answers++;
    x->status = o->status;
    x->admit = o->status == 0 && o->result.admit;
}

typedef struct calls {
    once_t *x;
    int n;
} calls_t;

static bool every_answered(void *arg)
{
    calls_t *c = arg;
    for (int i = 0; i < c->n; i++)
        if (c->x[i].answers == 0)
            return false;
    return true;
}

/* n steps on `key` in one loop turn, so they go in batches. */
static void send_steps(rds_store_t *s, const ra_limiter_t *l, const char *key, once_t *x, int n)
{
    rds_op_t op = {.cost = 1};
    for (int i = 0; i < n; i++)
        cr_assert_eq(rds_store_call(s, l, key, strlen(key), &op, once_done, &x[i]), 0, "call %d",
                     i);
}

static void expect_each_answered_once(const once_t *x, int n)
{
    for (int i = 0; i < n; i++)
        cr_assert_eq(x[i].answers, 1, "call %d was answered %d times", i, x[i].answers);
}

Test(store, pipelined_calls_share_script_calls_and_are_decided_in_order)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 2000 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm(); /* burst 60 */
    once_t x[100] = {0};
    send_steps(s, &l, "team:q", x, 100);
    calls_t all = {x, 100};
    cr_assert(run_until(every_answered, &all, 5000));
    expect_each_answered_once(x, 100);
    for (int i = 0; i < 100; i++)
        cr_assert(x[i].status == 0 && x[i].admit == (i < 60), "call %d: status %d admit %d", i,
                  x[i].status, x[i].admit);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_eq(st.calls, 100);
    cr_assert_eq(st.batches, (100 + RDS_BATCH_MAX - 1) / RDS_BATCH_MAX,
                 "100 calls of one turn in %" PRIu64 " script calls", st.batches);
    rds_store_close(s);
}

/* Redis holds a client postponed by CLIENT PAUSE: it has read that client's commands. */
static bool a_client_postponed(void *arg)
{
    redisReply *r = redisCommand(arg, "INFO clients");
    bool yes = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "blocked_clients:1");
    freeReplyObject(r);
    return yes;
}

Test(store, a_batch_across_a_connection_loss_answers_each_call_once)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 2000 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    /* Redis reads the batches but runs no script until the pause ends, so they are in flight
     * when it dies (a paused process would leave them unread, and hiredis 0.14 would then see
     * the reset only through the timeout) */
    redisContext *admin = rh_connect(&server);
    freeReplyObject(redisCommand(admin, "CLIENT PAUSE 10000 WRITE"));
    once_t x[40] = {0};
    send_steps(s, &l, "team:lost", x, 40);
    cr_assert(run_until(a_client_postponed, admin, 3000), "the batches never reached Redis");
    redisFree(admin);
    rh_kill(&server);
    calls_t all = {x, 40};
    cr_assert(run_until(every_answered, &all, 3000), "calls still waiting after the loss");
    expect_each_answered_once(x, 40);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(x[i].status, RDS_ECONN, "call %d: %d", i, x[i].status);
    cr_assert_eq(rh_restart(&server), 0);
    cr_assert(run_until(is_ready, s, 5000), "did not reconnect");
    once_t after[3] = {0};
    send_steps(s, &l, "team:lost", after, 3);
    calls_t again = {after, 3};
    cr_assert(run_until(every_answered, &again, 5000));
    expect_each_answered_once(after, 3);
    cr_assert(after[0].admit && after[2].admit);
    rds_store_close(s);
}

Test(store, bad_addresses_are_named)
{
    static const char *const bad[] = {"",           "localhost", "host:",     "host:0",
                                      "host:70000", ":6379",     "[::1:6379", "host:12ab"};
    char host[64];
    tt_err_t err;
    int port;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(rds_address_parse(bad[i], host, sizeof(host), &port, &err), RDS_EADDRESS, "%s",
                     bad[i]);
        cr_assert_eq(err.code, RDS_EADDRESS);
        cr_assert_str_eq(err.path, "shared_state.redis.address");
        cr_assert(strstr(err.message, "neither host:port nor a unix socket path"), "%s",
                  err.message);
    }
    cr_assert_eq(rds_address_parse("[::1]:6380", host, sizeof(host), &port, &err), 0);
    cr_assert_str_eq(host, "::1");
    cr_assert_eq(port, 6380);
    cr_assert_eq(rds_address_parse("/run/redis.sock", host, sizeof(host), &port, &err), 0);
    cr_assert_eq(port, 0);
}

Test(store, a_batch_timed_out_answers_each_call_once)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 80 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    ra_limiter_t l = team_rpm();
    rh_pause(&server, true);
    once_t x[40] = {0};
    send_steps(s, &l, "team:late", x, 40);
    calls_t all = {x, 40};
    bool answered = run_until(every_answered, &all, 3000);
    rh_pause(&server, false);
    cr_assert(answered, "calls still waiting past the timeout");
    expect_each_answered_once(x, 40);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(x[i].status, RDS_ETIMEDOUT, "call %d: %d", i, x[i].status);
    cr_assert(run_until(is_ready, s, 5000), "did not come back after SIGCONT");
    expect_each_answered_once(x, 40); /* the late replies answer nobody again */
    rds_store_close(s);
}

Test(store, a_batch_answered_noscript_is_sent_again_as_eval_and_each_call_answered_once)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 2000 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    redisContext *c = rh_connect(&server);
    freeReplyObject(redisCommand(c, "SCRIPT FLUSH"));
    redisFree(c);
    ra_limiter_t l = team_rpm(); /* burst 60 */
    once_t x[70] = {0};
    send_steps(s, &l, "team:flushed", x, 70); /* three batches, each answered NOSCRIPT */
    calls_t all = {x, 70};
    cr_assert(run_until(every_answered, &all, 5000));
    expect_each_answered_once(x, 70);
    for (int i = 0; i < 70; i++)
        cr_assert(x[i].status == 0 && x[i].admit == (i < 60), "call %d: status %d admit %d", i,
                  x[i].status, x[i].admit);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_geq(st.reloads, 1);
    rds_store_close(s);
}

static bool program_ended(void *pid)
{
    return rh_poll_program(*(pid_t *)pid) != -2;
}

/* Redis answers BUSY to every script while another runs past busy-reply-threshold. */
static bool redis_is_busy(void *arg)
{
    redisReply *r = redisCommand(arg, "PING");
    bool busy = r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "BUSY", 4) == 0;
    freeReplyObject(r);
    return busy;
}

Test(store, a_batch_answered_busy_answers_each_call_once_with_the_error)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 2000 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    redisContext *c = rh_connect(&server);
    freeReplyObject(redisCommand(c, "CONFIG SET busy-reply-threshold 10"));
    char port[16];
    snprintf(port, sizeof(port), "%d", server.port);
    const char *argv[] = {"redis-cli", "-p", port, "EVAL", "while true do end", "0", NULL};
    pid_t spinner;
    cr_assert_eq(rh_spawn_program(argv, &spinner), 0);
    cr_assert(run_until(redis_is_busy, c, 5000), "the spinning script never made Redis busy");
    ra_limiter_t l = team_rpm();
    once_t x[40] = {0};
    send_steps(s, &l, "team:busy", x, 40);
    calls_t all = {x, 40};
    bool answered = run_until(every_answered, &all, 3000);
    freeReplyObject(redisCommand(c, "SCRIPT KILL"));
    redisFree(c);
    cr_assert(answered, "calls still waiting while Redis was busy");
    expect_each_answered_once(x, 40);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(x[i].status, RDS_EREDIS, "call %d: %d", i, x[i].status);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert(strstr(st.last_error, "BUSY"), "%s", st.last_error);
    cr_assert(rds_store_ready(s), "an error reply must not cost the connection");
    rds_store_close(s);
    cr_assert(run_until(program_ended, &spinner, 5000), "redis-cli did not end after SCRIPT KILL");
}

/* ---- a name of several addresses ---------------------------------------------------------- */

/* Makes redis.test resolve, in this test's process, to [::1] first and then 127.0.0.1, where
 * the server listens (on 127.0.0.1 only); skips where that cannot be arranged (see
 * rh_resolve_as). *address is "redis.test:<the store's port>" (the TLS port over TLS: the
 * server's certificate names redis.test). */
static void resolve_v6_first(char address[64])
{
    static const char *const order[] = {"::1", "127.0.0.1", NULL};
    char why[256];
    if (rh_resolve_as(server.dir, "redis.test", order, why, sizeof(why)) < 0)
        cr_skip_test("%s", why);
    snprintf(address, 64, "redis.test%s", strrchr(STORE_ADDRESS, ':'));
}

/* One decision through the store, which is ready. */
static void expect_decides(rds_store_t *s)
{
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    send_step(s, &l, "team:named", &t);
    cr_assert(run_until(all_answered, &t, 5000));
    cr_assert_eq(t.admitted, 1, "%s", t.last_error);
}

Test(store, a_name_whose_first_address_refuses_is_reached_at_the_next)
{
    char address[64], v6[64], v4[64];
    resolve_v6_first(address);
    const char *port = strrchr(address, ':') + 1;
    snprintf(v6, sizeof(v6), "[::1]:%s: connection refused", port);
    snprintf(v4, sizeof(v4), "127.0.0.1:%s", port);
    rs_events_t e = {0};
    rds_store_t *s = open_store_told(address, 500 * MS, &e);
    cr_assert(run_until(is_ready, s, 5000), "never ready through %s: %s", address, e.last);
    expect_decides(s);
    /* the connection told once, with where it went and why not the first */
    cr_assert_eq(e.node_up, 1);
    cr_assert(strstr(e.up_detail, v4) && strstr(e.up_detail, v6), "%s", e.up_detail);
    cr_assert_eq(e.node_down, 0, "a refused address on the way is no failure: %s", e.last);
    rds_store_close(s);
}

/* A listening socket on [::1]:port whose accept queue is full (backlog 0, one connection
 * made and never accepted): a connect there gets no answer at all (its SYN is dropped), as an
 * address behind a firewall that drops. The descriptors go in fds[2]. */
static void silent_listener(int port, int fds[2])
{
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
    inet_pton(AF_INET6, "::1", &a.sin6_addr);
    int one = 1;
    fds[0] = socket(AF_INET6, SOCK_STREAM, 0);
    fds[1] = socket(AF_INET6, SOCK_STREAM, 0);
    cr_assert(fds[0] >= 0 && fds[1] >= 0);
    setsockopt(fds[0], IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    cr_assert_eq(bind(fds[0], (struct sockaddr *)&a, sizeof(a)), 0, "[::1]:%d is taken", port);
    cr_assert_eq(listen(fds[0], 0), 0);
    cr_assert_eq(connect(fds[1], (struct sockaddr *)&a, sizeof(a)), 0);
}

Test(store, a_name_whose_first_address_never_answers_is_reached_at_the_next_in_time)
{
    char address[64], v6[64];
    resolve_v6_first(address);
    int fds[2];
    silent_listener(atoi(strrchr(address, ':') + 1), fds);
    /* the handshake's 1000 ms (the timeout is less): about half of it for [::1] (of what the
     * lookup left), the rest for 127.0.0.1 */
    snprintf(v6, sizeof(v6), "[::1]:%s: connection timed out (its share of 1000 ms)",
             strrchr(address, ':') + 1);
    rs_events_t e = {0};
    rds_store_t *s = open_store_told(address, 500 * MS, &e);
    cr_assert(run_until(is_ready, s, 5000), "never ready through %s: %s", address, e.last);
    expect_decides(s);
    cr_assert(strstr(e.up_detail, v6), "%s", e.up_detail);
    cr_assert_eq(e.node_down, 0, "%s", e.last);
    rds_store_close(s);
    close(fds[1]);
    close(fds[0]);
}

Test(store, a_name_none_of_whose_addresses_answers_names_each_once)
{
    char address[64], want[160];
    resolve_v6_first(address);
    int port = rh_free_port(); /* nobody listens there */
    snprintf(address, sizeof(address), "redis.test:%d", port);
    snprintf(want, sizeof(want),
             "redis: connect redis.test:%d: [::1]:%d: connection refused; 127.0.0.1:%d: "
             "connection refused",
             port, port, port);
    rs_events_t e = {0};
    rds_store_t *s = open_store_told(address, 50 * MS, &e);
    cr_assert(run_until(rs_failed_thrice, s, 5000), "did not fail its connects");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_str_eq(st.last_error, want);
    cr_assert_str_eq(e.last, want);
    cr_assert_eq(e.node_down, 1, "told once while it repeats, not %d times", e.node_down);
    rds_store_close(s);
}

Test(store, a_bad_topology_names_its_field)
{
    static const struct {
        rds_options_t o;
        const char *path, *message;
    } cases[] = {
        {{.n_cluster = 2, .cluster = {"127.0.0.1:7000", "seed-without-port"}},
         "shared_state.redis.cluster[1]",
         "\"seed-without-port\" is not host:port"},
        {{.n_sentinels = 1, .sentinels = {"127.0.0.1:26379"}},
         "shared_state.redis.master",
         "Sentinel needs the master's name"},
        {{.address = "127.0.0.1:6379", .n_cluster = 1, .cluster = {"127.0.0.1:7000"}},
         "shared_state.redis",
         "give one of address, cluster"},
        {{.address = "nowhere"}, "shared_state.redis.address", "neither host:port"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rds_store_t *s = NULL;
        tt_err_t err = {0};
        cr_assert_eq(rds_store_new(&loop, &cases[i].o, &s, &err), RDS_EADDRESS, "case %zu", i);
        cr_assert_null(s);
        cr_assert_eq(err.code, RDS_EADDRESS);
        cr_assert_str_eq(err.path, cases[i].path, "case %zu", i);
        cr_assert(strstr(err.message, cases[i].message), "case %zu: %s", i, err.message);
    }
}

/* ---- a fake Redis on a unix socket that answers what we tell it to ------------------------ */

typedef enum fake_mode {
    FAKE_GARBAGE,        /* bytes that are not RESP at all */
    FAKE_WRONG_TYPE,     /* SCRIPT LOAD answered properly, the script with an integer */
    FAKE_SHORT_ARRAY,    /* the script answered with an array of 2 */
    FAKE_BAD_NUMBER,     /* the script answered with a non-decimal remaining */
    FAKE_STATUS_FOR_SHA, /* SCRIPT LOAD answered +OK */
    FAKE_ONE_MORE,       /* a batch of k answered with k + 1 answers */
    FAKE_ONE_FEWER,      /* ... with k - 1 */
    FAKE_NESTED,         /* each answer's first field an array */
    FAKE_LONG_ARRAY,     /* the script answered with an array header of 100,000 */
    FAKE_EXTRA_REPLY,    /* the script answered properly, then a reply nobody asked for */
} fake_mode_t;

typedef struct fake {
    uv_pipe_t listener;
    uv_pipe_t peer;
    bool has_peer;
    fake_mode_t mode;
    char path[128];
    char buf[1 << 16];
    size_t len;
} fake_t;

/* One complete RESP command at buf (an array of bulk strings): its length, name and third
 * argument as a number (a script call's number of keys: its batch's operations), or 0. */
static size_t parse_command(const char *buf, size_t len, char *name, size_t namesz, long *third)
{
    const char *p = buf, *end = buf + len;
    if (len < 4 || *p != '*')
        return 0;
    long n = strtol(p + 1, NULL, 10);
    if ((p = memchr(p, '\n', (size_t)(end - p))) == NULL)
        return 0;
    p++;
    for (long i = 0; i < n; i++) {
        if (p >= end || *p != '$')
            return 0;
        long blen = strtol(p + 1, NULL, 10);
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL || end - (nl + 1) < blen + 2)
            return 0;
        if (i == 0)
            snprintf(name, namesz, "%.*s", (int)(blen < 32 ? blen : 32), nl + 1);
        if (i == 2)
            *third = strtol(nl + 1, NULL, 10);
        p = nl + 1 + blen + 2;
    }
    return (size_t)(p - buf);
}

static void fake_write(fake_t *f, const char *text)
{
    uv_buf_t b = uv_buf_init((char *)text, (unsigned)strlen(text));
    uv_try_write((uv_stream_t *)&f->peer, &b, 1);
}

/* A script call's answer: an array of one item per operation. */
static void fake_items(fake_t *f, long n, const char *item)
{
    char head[32];
    snprintf(head, sizeof(head), "*%ld\r\n", n);
    fake_write(f, head);
    for (long i = 0; i < n; i++)
        fake_write(f, item);
}

static void fake_answer(fake_t *f, const char *cmd, long ops)
{
    static const char sha[] = "$40\r\n0123456789abcdef0123456789abcdef01234567\r\n";
    bool load = strcasecmp(cmd, "SCRIPT") == 0;
    switch (f->mode) {
    case FAKE_GARBAGE:
        fake_write(f, "%%this is not redis\r\n");
        break;
    case FAKE_STATUS_FOR_SHA:
        fake_write(f, "+OK\r\n");
        break;
    case FAKE_WRONG_TYPE:
        fake_write(f, load ? sha : ":7\r\n");
        break;
    case FAKE_SHORT_ARRAY:
        load ? fake_write(f, sha) : fake_items(f, ops, "*2\r\n:1\r\n:0\r\n");
        break;
    case FAKE_BAD_NUMBER:
        load ? fake_write(f, sha)
             : fake_items(f, ops, "*6\r\n:1\r\n:0\r\n$3\r\n1e3\r\n:0\r\n:1\r\n$1\r\n5\r\n");
        break;
    case FAKE_ONE_MORE:
    case FAKE_ONE_FEWER:
        load ? fake_write(f, sha)
             : fake_items(f, ops + (f->mode == FAKE_ONE_MORE ? 1 : -1),
                          "*6\r\n:1\r\n:0\r\n:5\r\n:0\r\n:1\r\n$1\r\n5\r\n");
        break;
    case FAKE_NESTED:
        load ? fake_write(f, sha)
             : fake_items(f, ops, "*6\r\n*1\r\n*1\r\n:1\r\n:0\r\n:5\r\n:0\r\n:1\r\n$1\r\n5\r\n");
        break;
    case FAKE_LONG_ARRAY:
        fake_write(f, load ? sha : "*100000\r\n:1\r\n");
        break;
    case FAKE_EXTRA_REPLY:
        load ? fake_write(f, sha)
             : fake_items(f, ops, "*6\r\n:1\r\n:0\r\n:5\r\n:0\r\n:1\r\n$1\r\n5\r\n");
        if (!load)
            fake_write(f, "+OK\r\n");
        break;
    }
}

static void fake_alloc(uv_handle_t *h, size_t want, uv_buf_t *buf)
{
    fake_t *f = h->data;
    (void)want;
    *buf = uv_buf_init(f->buf + f->len, (unsigned)(sizeof(f->buf) - f->len));
}

static void fake_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    fake_t *f = st->data;
    (void)buf;
    if (n < 0) {
        uv_read_stop(st);
        return;
    }
    f->len += (size_t)n;
    char name[40];
    long ops = 0;
    size_t used;
    while ((used = parse_command(f->buf, f->len, name, sizeof(name), &ops)) > 0) {
        fake_answer(f, name, ops);
        memmove(f->buf, f->buf + used, f->len - used);
        f->len -= used;
    }
}

static void fake_accept(uv_stream_t *listener, int status)
{
    fake_t *f = listener->data;
    if (status < 0)
        return;
    if (f->has_peer) { /* one client at a time: a reconnect replaces the old one */
        uv_close((uv_handle_t *)&f->peer, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
    }
    uv_pipe_init(&loop, &f->peer, 0);
    f->peer.data = f;
    f->len = 0;
    if (uv_accept(listener, (uv_stream_t *)&f->peer) == 0) {
        f->has_peer = true;
        uv_read_start((uv_stream_t *)&f->peer, fake_alloc, fake_read);
    }
}

static void fake_start(fake_t *f, fake_mode_t mode)
{
    memset(f, 0, sizeof(*f));
    f->mode = mode;
    snprintf(f->path, sizeof(f->path), "%s/fake.sock", server.dir);
    uv_pipe_init(&loop, &f->listener, 0);
    f->listener.data = f;
    cr_assert_eq(uv_pipe_bind(&f->listener, f->path), 0);
    cr_assert_eq(uv_listen((uv_stream_t *)&f->listener, 8, fake_accept), 0);
}

static void fake_stop(fake_t *f)
{
    if (f->has_peer)
        uv_close((uv_handle_t *)&f->peer, NULL);
    uv_close((uv_handle_t *)&f->listener, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    unlink(f->path);
}

typedef struct connected_wait {
    rds_store_t *s;
    uint64_t disconnects;
} connected_wait_t;

static bool dropped_enough(void *arg)
{
    connected_wait_t *w = arg;
    rds_stats_t st;
    rds_store_stats(w->s, &st);
    return st.disconnects >= w->disconnects;
}

static void expect_never_ready(fake_mode_t mode, const char *want_error)
{
    fake_t f;
    fake_start(&f, mode);
    rds_store_t *s = open_store(f.path, 100 * MS);
    connected_wait_t w = {s, 2};
    cr_assert(run_until(dropped_enough, &w, 5000), "the bad server was not dropped and retried");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_not(st.ready);
    cr_assert_eq(st.connects, 0);
    cr_assert(strstr(st.last_error, want_error), "%s", st.last_error);
    ra_limiter_t l = team_rpm();
    tally_t t = {0};
    cr_assert_eq(send_step(s, &l, "team:f", &t), RDS_EUNAVAILABLE);
    rds_store_close(s);
    fake_stop(&f);
}

Test(store, a_server_answering_garbage_is_dropped_with_a_clear_error)
{
    expect_never_ready(FAKE_GARBAGE, "Protocol error");
}

Test(store, a_server_answering_status_to_script_load_is_never_used)
{
    expect_never_ready(FAKE_STATUS_FOR_SHA, "SCRIPT LOAD answered a status");
}

/* Starts the fake in `mode`, opens a store on it, and has it answer three steps of one batch. */
static rds_store_t *three_steps(fake_t *f, fake_mode_t mode, int64_t timeout_ns, tally_t *t)
{
    fake_start(f, mode);
    rds_store_t *s = open_store(f->path, timeout_ns);
    cr_assert(run_until(is_ready, s, 5000), "the handshake with the fake did not complete");
    ra_limiter_t l = team_rpm();
    for (int i = 0; i < 3; i++)
        send_step(s, &l, "team:f", t);
    cr_assert(run_until(all_answered, t, 5000));
    return s;
}

static void expect_reply_error(fake_mode_t mode, const char *want_error)
{
    fake_t f;
    tally_t t = {0};
    rds_store_t *s = three_steps(&f, mode, 200 * MS, &t);
    cr_assert_eq(t.failed, 3);
    cr_assert_eq(t.last_status, RDS_EREPLY);
    cr_assert(strstr(t.last_error, want_error), "%s", t.last_error);
    rds_store_close(s);
    fake_stop(&f);
}

Test(store, a_script_answered_with_an_integer_is_a_wrong_type_error)
{
    expect_reply_error(FAKE_WRONG_TYPE, "an integer of 0 elements, want an array of 3");
}

Test(store, a_script_answered_with_a_short_array_is_a_shape_error)
{
    expect_reply_error(FAKE_SHORT_ARRAY, "an array of 2 elements");
}

Test(store, a_batch_answered_with_one_answer_too_many_fails_each_caller_once)
{
    expect_reply_error(FAKE_ONE_MORE, "an array of 4 elements, want an array of 3");
}

Test(store, a_batch_answered_with_one_answer_too_few_fails_each_caller_once)
{
    expect_reply_error(FAKE_ONE_FEWER, "an array of 2 elements, want an array of 3");
}

Test(store, an_answer_with_a_nested_array_for_a_field_is_named)
{
    expect_reply_error(FAKE_NESTED, "field 1 (admit) is an array, want an integer");
}

Test(store, a_script_answered_with_a_non_decimal_field_is_named)
{
    expect_reply_error(FAKE_BAD_NUMBER, "field 3 (remaining) is not a decimal int64: 1e3");
}

/* A reply of hostile shape drops the connection with a message naming what was wrong; every
 * caller is answered once (not by the timeout) and nothing else happens to the process. */
static void expect_dropped(fake_mode_t mode, const char *want_error)
{
    fake_t f;
    tally_t t = {0};
    rds_store_t *s = three_steps(&f, mode, 2000 * MS, &t);
    cr_assert_eq(t.answered, 3);
    cr_assert_eq(t.failed, 3);
    cr_assert_eq(t.last_status, RDS_ECONN, "%s", t.last_error);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_eq(st.timeouts, 0);
    cr_assert(strstr(st.last_error, want_error), "%s", st.last_error);
    rds_store_close(s);
    fake_stop(&f);
}

Test(store, an_array_header_past_the_bound_drops_the_connection_naming_it)
{
    expect_dropped(FAKE_LONG_ARRAY, "an array of 100000 elements");
}

Test(store, a_reply_nobody_asked_for_drops_the_connection)
{
    fake_t f;
    tally_t t = {0};
    rds_store_t *s = three_steps(&f, FAKE_EXTRA_REPLY, 2000 * MS, &t);
    cr_assert_eq(t.admitted, 3, "%s", t.last_error);
    connected_wait_t w = {s, 1};
    cr_assert(run_until(dropped_enough, &w, 5000), "the connection was kept");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert(strstr(st.last_error, "a reply nobody asked for"), "%s", st.last_error);
    rds_store_close(s);
    fake_stop(&f);
}

static void count_active_idle(uv_handle_t *h, void *arg)
{
    if (h->type == UV_IDLE && uv_is_active(h))
        (*(int *)arg)++;
}

static int active_idle_handles(void)
{
    int n = 0;
    uv_walk(&loop, count_active_idle, &n);
    return n;
}

/* An active idle handle makes libuv poll without waiting: the flush's may run only while a
 * batch is open, else the daemon spins. */
Test(store, the_flush_idle_handle_runs_only_while_a_batch_is_open)
{
    rds_store_t *s = open_store(STORE_ADDRESS, 2000 * MS);
    cr_assert(run_until(is_ready, s, 5000));
    cr_assert_eq(active_idle_handles(), 0, "idle before any call");
    ra_limiter_t l = team_rpm();
    once_t x[40] = {0};
    send_steps(s, &l, "team:idle", x, 40);
    cr_assert_eq(active_idle_handles(), 1, "two batches open, one flush due");
    calls_t all = {x, 40};
    cr_assert(run_until(every_answered, &all, 5000));
    expect_each_answered_once(x, 40);
    cr_assert_eq(active_idle_handles(), 0, "the flush's idle handle left running");
    rds_store_close(s);
}
