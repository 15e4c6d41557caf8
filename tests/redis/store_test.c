/* The store's shared test helpers: see store_test.h. */
#include "store_test.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

void rs_on_event(void *data, rds_event_t event, const char *node, const char *detail)
{
    rs_events_t *e = data;
    (void)node;
    e->node_up += event == RDS_EVENT_NODE_UP;
    if (event == RDS_EVENT_NODE_UP)
        snprintf(e->up_detail, sizeof(e->up_detail), "%s", detail);
    e->up += event == RDS_EVENT_UP;
    e->down += event == RDS_EVENT_DOWN;
    if (event == RDS_EVENT_NODE_DOWN) {
        e->node_down++;
        snprintf(e->last, sizeof(e->last), "%s", detail);
    }
}

rds_store_t *rs_store_new(uv_loop_t *loop, const rds_options_t *o)
{
    rds_store_t *s;
    tt_err_t err;
    cr_assert_eq(rds_store_new(loop, o, &s, &err), 0, "%s", err.message);
    return s;
}

bool rs_ready(void *store)
{
    return rds_store_ready(store);
}

bool rs_failed_twice(void *store)
{
    rds_stats_t st;
    rds_store_stats(store, &st);
    return st.disconnects >= 2;
}

bool rs_failed_thrice(void *store)
{
    rds_stats_t st;
    rds_store_stats(store, &st);
    return st.disconnects >= 3;
}

static void on_done(void *arg, const rds_outcome_t *o)
{
    rs_tally_t *t = arg;
    t->answered++;
    t->admitted += o->status == 0 && o->result.admit;
}

static bool all_answered(void *arg)
{
    rs_tally_t *t = arg;
    return t->answered == t->sent;
}

int rs_steps(uv_loop_t *loop, rds_store_t *s, const char *key, int n, rs_tally_t *t)
{
    ra_limiter_t l;
    cr_assert_eq(ra_limiter_init(&l, RA_GCRA, 1000, 60000 * RS_MS, 1000), 0);
    rds_op_t op = {.cost = 1};
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++)
        if ((rc = rds_store_call(s, &l, key, strlen(key), &op, on_done, t)) == 0)
            t->sent++;
    cr_assert(rh_run_until(loop, all_answered, t, 5000));
    return rc;
}

long long rs_dbsize(const rh_server_t *server)
{
    redisContext *c = rh_connect(server);
    cr_assert_not_null(c);
    redisReply *r = redisCommand(c, "DBSIZE");
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "DBSIZE: %s", r ? r->str : "no reply");
    long long n = r->integer;
    freeReplyObject(r);
    redisFree(c);
    return n;
}

void rs_expect_refused(uv_loop_t *loop, rds_store_t *s, rs_events_t *e, const rh_server_t *server,
                       const char *address, const char *want)
{
    cr_assert(rh_run_until(loop, rs_failed_thrice, s, 10000), "did not fail its handshakes");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_not(st.ready);
    cr_assert(strstr(st.last_error, address), "no address: %s", st.last_error);
    cr_assert(strstr(st.last_error, want), "want \"%s\": %s", want, st.last_error);
    cr_assert_null(strstr(st.last_error, "secret"), "a password leaked: %s", st.last_error);
    cr_assert_str_eq(e->last, st.last_error);
    /* a reason is told once while it repeats (the second telling seen under load was the
     * deadline counted from a stale clock: test_store's a_store_made_on_a_loop_that_has_...) */
    cr_assert_eq(e->node_down, 1, "told %d times: %s", e->node_down, e->last);
    cr_assert_eq(e->up, 0);
    rs_tally_t t = {0};
    cr_assert_eq(rs_steps(loop, s, "team:refused", 1, &t), RDS_EUNAVAILABLE);
    cr_assert_eq(rs_dbsize(server), 0, "Redis counted a call it never decided");
    rds_store_close(s);
}
