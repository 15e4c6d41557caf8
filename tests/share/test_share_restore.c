/*
 * A share counter across a restart (issue 35), through the state directory's real snapshot and
 * restore (state/state.h) into a real engine. While a replica was down its peers divided by one
 * fewer and spent its share of the rate, so a counter that came back refilled for the downtime
 * would spend that share a second time: a share counter resumes the debt it had when the snapshot
 * was taken. A local counter's downtime counts as elapsed, as SPEC §11 says.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state.h"

#define S INT64_C(1000000000)
#define T0 (INT64_C(1700000000) * S)

static char dir[64];
static uv_loop_t loop;
static cfg_config_t *cfg;

static void ignore(void *ctx, const st_event_t *ev)
{
    (void)ctx;
    (void)ev;
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/tt-sr-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    uv_loop_init(&loop);
    static const char yaml[] =
        "governance:\n  limits:\n"
        "    - { id: fleet, attach: { level: team }, type: rpm, amount: 60, period: 1h, "
        "burst: 60, store: share }\n"
        "    - { id: node, attach: { level: key }, type: rpm, amount: 60, period: 1h, "
        "burst: 60 }\n"
        "shared_state:\n  share: { node_id: r0 }\n";
    cfg_report_t rep = {0};
    cr_assert_eq(cfg_load_string("<test>", yaml, sizeof(yaml) - 1, &cfg, &rep), 0);
    cr_assert_eq(cfg_arm(cfg, &rep), 0);
    cfg_report_free(&rep);
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    cfg_free(cfg);
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(share_restore, .init = setup, .fini = teardown, .timeout = 60);

static gov_engine_t *engine(void)
{
    gov_engine_t *e;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {7, 9}};
    cr_assert_eq(gov_engine_create_config(&e, &o, cfg, &err), 0, "%s", err.message);
    return e;
}

static st_node_t *node(void)
{
    st_node_t *n;
    st_options_t o = {.dir = dir, .interval_ns = 0};
    cr_assert_eq(st_node_open(&n, &loop, &o, ignore, NULL), 0);
    return n;
}

static void finish(st_node_t *n, gov_engine_t *e)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    st_node_free(n);
    gov_engine_destroy(e);
}

typedef struct found {
    int64_t state[2]; /* by limit; 0: not held */
} found_t;

static void collect(void *ctx, size_t limit, const char *key, size_t key_len, int64_t state)
{
    found_t *f = ctx;
    if (limit < 2)
        f->state[limit] = state;
}

Test(share_restore, a_share_counter_resumes_its_debt_after_the_downtime_and_a_local_one_refills)
{
    /* one unit is 60 s here (60 an hour) and the tolerance an hour: a TAT 50 s ahead is a debt
     * of 50 s, which 30 s of downtime would refill to 20 s */
    gov_engine_t *e = engine();
    int64_t written = T0, tat = T0 + 50 * S, now = T0 + 30 * S;
    cr_assert_eq(gov_engine_restore(e, 0, "t-1", 3, tat, written), 0);
    cr_assert_eq(gov_engine_restore(e, 1, "k-1", 3, tat, written), 0);
    st_node_t *n = node();
    st_node_start(n, e, &cfg);
    st_node_stop(n, true, written); /* the snapshot at SIGTERM */
    finish(n, e);

    e = engine();
    n = node();
    st_node_restore(n, e, cfg, now);
    found_t f = {{0, 0}};
    gov_engine_each_counter(e, now, collect, &f);
    cr_assert_eq(f.state[0], tat + 30 * S,
                 "the share counter came back %lld s ahead of now, not 50: refilled for the "
                 "downtime its peers spent",
                 (long long)((f.state[0] - now) / S));
    cr_assert_eq(f.state[1], tat, "a local counter's downtime counts as elapsed");
    st_node_stop(n, false, 0);
    finish(n, e);
}
