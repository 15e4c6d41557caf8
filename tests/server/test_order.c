/*
 * Answers stay in request order when the engine answers some decisions later (GOV_PENDING, a
 * redis limit), and a connection that closes while a decision is pending leaves nothing behind.
 *
 * The server runs in-process on its own thread with the real engine; its redis store is a fake
 * that queues every operation and, from a timer on the server's loop, answers the NEWEST first,
 * so later decisions finish before earlier ones. The client library drives it from the test
 * thread.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"
#include "dispatch.h"
#include "door.h"
#include "engine.h"
#include "srv.h"
#include "store.h"
#include "tokentriage.h"

#define CONFIG                                                                                     \
    "server: { http: \"\" }\n"                                                                     \
    "governance:\n"                                                                                \
    "  limits:\n"                                                                                  \
    "    - { id: team_redis, attach: { level: team }, type: rpm, amount: 1000, period: 1m,\n"      \
    "        store: redis }\n"                                                                     \
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 1000, period: 1m }\n"         \
    "shared_state:\n"                                                                              \
    "  redis: { address: 127.0.0.1:6379, timeout: 50ms }\n"

static struct {
    uv_loop_t loop;
    uv_timer_t answer;
    uv_async_t stop;
    pthread_t thread;
    cfg_config_t *cfg;
    gov_engine_t *engine;
    srv_metrics_t *metrics;
    srv_t *srv;
    door_t *door;
    dispatch_t *dispatch;
    char dir[64], sock[128];
    gov_redis_op_t *ops[1024]; /* queued, answered newest first */
    int nops;
    atomic_int answered;
} t;

static int fake_submit(void *ctx, gov_redis_op_t *op)
{
    if (t.nops == 1024)
        return -1;
    t.ops[t.nops++] = op;
    return 0;
}

static const gov_redis_ops_t fake_ops = {.submit = fake_submit};

/* Every few milliseconds, answer what is queued, newest first: an admission, as Lua would. */
static void on_answer(uv_timer_t *timer)
{
    while (t.nops > 0) {
        gov_redis_op_t *op = t.ops[--t.nops];
        gov_redis_reply_t rep = {.r = {.admit = true, .remaining = 999, .reset_after_s = 1}};
        atomic_fetch_add(&t.answered, 1); /* first: the answer may reach the client at once */
        gov_redis_complete(op, &rep, op->now);
    }
}

static void on_stop(uv_async_t *a)
{
    srv_stop(t.srv);
    uv_close((uv_handle_t *)&t.answer, NULL);
    uv_close((uv_handle_t *)&t.stop, NULL);
}

static void *run_loop(void *arg)
{
    uv_run(&t.loop, UV_RUN_DEFAULT);
    return NULL;
}

static void start(void)
{
    cfg_report_t rep = {0};
    cr_assert_eq(cfg_load_string("order.yaml", CONFIG, sizeof(CONFIG) - 1, &t.cfg, &rep), 0);
    cr_assert_eq(cfg_arm(t.cfg, &rep), 0);
    cfg_report_free(&rep);
    tt_err_t gerr;
    gov_options_t gopt = {0};
    cr_assert_eq(gov_engine_create_config(&t.engine, &gopt, t.cfg, &gerr), 0, "%s", gerr.message);
    gov_engine_set_redis(t.engine, &fake_ops, NULL);
    t.metrics = srv_metrics_new();
    snprintf(t.dir, sizeof(t.dir), "/tmp/tt-order-XXXXXX");
    cr_assert_not_null(mkdtemp(t.dir));
    snprintf(t.sock, sizeof(t.sock), "%s/tt.sock", t.dir);
    uv_loop_init(&t.loop);
    srv_options_t so = {.socket_path = t.sock};
    cr_assert_eq(door_new(&t.door, t.engine, t.metrics, NULL, &gerr), 0);
    cr_assert_eq(dispatch_new(&t.dispatch, t.engine, t.door, t.metrics, "test", t.sock, "test"), 0);
    cr_assert_eq(srv_start(&t.srv, &t.loop, &so, dispatch_handler(t.dispatch), t.metrics, &gerr), 0,
                 "%s", gerr.message);
    uv_timer_init(&t.loop, &t.answer);
    uv_timer_start(&t.answer, on_answer, 3, 3);
    uv_async_init(&t.loop, &t.stop, on_stop);
    pthread_create(&t.thread, NULL, run_loop, NULL);
}

static void stop(void)
{
    uv_async_send(&t.stop);
    pthread_join(t.thread, NULL);
    uv_loop_close(&t.loop);
    srv_free(t.srv);
    dispatch_free(t.dispatch);
    door_free(t.door);
    gov_engine_destroy(t.engine);
    srv_metrics_free(t.metrics);
    cfg_free(t.cfg);
    rmdir(t.dir);
}

TestSuite(order, .init = start, .fini = stop, .timeout = 30);

Test(order, answers_keep_request_order_when_later_ones_finish_first)
{
    tt_client_t *c;
    cr_assert_eq(tt_connect(&c, t.sock), 0);
    tt_set_timeout(c, 5000);
    enum { N = 300 };
    uint64_t seq[N];
    tt_kind_t want[N];
    for (int i = 0; i < N; i++) {
        tt_pair_t redis[] = {{"team", "a"}}, local[] = {{"key", "k"}},
                  both[] = {{"team", "b"}, {"key", "k2"}};
        switch (i % 4) {
        case 0:
            cr_assert_eq(tt_send_decide(c, redis, 1, -1, &seq[i]), 0);
            want[i] = TT_KIND_DECISION;
            break;
        case 1:
            cr_assert_eq(tt_send_ping(c, &seq[i]), 0);
            want[i] = TT_KIND_PONG;
            break;
        case 2:
            cr_assert_eq(tt_send_decide(c, local, 1, -1, &seq[i]), 0);
            want[i] = TT_KIND_DECISION;
            break;
        default:
            cr_assert_eq(tt_send_decide(c, both, 2, -1, &seq[i]), 0);
            want[i] = TT_KIND_DECISION;
            break;
        }
    }
    tt_response_t r;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(tt_recv(c, &r), 0, "answer %d: %s %s", i, r.error_code, r.error_message);
        cr_assert_eq(r.seq, seq[i], "answer %d out of order", i);
        cr_assert_eq(r.kind, want[i], "answer %d", i);
        if (i % 4 == 0)
            cr_assert_str_eq(r.limit, "team_redis");
    }
    cr_assert_geq(atomic_load(&t.answered), N / 2, "the redis decisions did go pending");
    tt_close(c);
}

Test(order, a_connection_that_closes_while_a_decision_is_pending_leaves_nothing_behind)
{
    tt_client_t *c;
    int before = atomic_load(&t.answered);
    cr_assert_eq(tt_connect(&c, t.sock), 0);
    for (int i = 0; i < 50; i++)
        cr_assert_eq(tt_send_decide(c, (tt_pair_t[]){{"team", "gone"}}, 1, -1, NULL), 0);
    cr_assert_eq(tt_flush(c), 0);
    tt_close(c); /* before any answer: the engine still owes 50 */
    for (int i = 0; i < 5000 && atomic_load(&t.answered) < before + 50; i++)
        usleep(1000);
    cr_assert_eq(atomic_load(&t.answered), before + 50);
    /* the server goes on serving; ASan would report the orphaned slots had they leaked */
    tt_client_t *d;
    cr_assert_eq(tt_connect(&d, t.sock), 0);
    tt_response_t r;
    cr_assert_eq(tt_decide(d, (tt_pair_t[]){{"team", "next"}}, 1, -1, &r), 0);
    cr_assert(r.admit);
    tt_close(d);
}
