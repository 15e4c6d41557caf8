/*
 * The share store on top of real membership cores in the simulated network (tests/membership's
 * sim): virtual time, seeded, no sleeps. Each simulated node has a share_node refreshed on
 * every membership event, as the daemon's shell does, and at the share core's own deadlines.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "limit_helper.h"
#include "share_node.h"
#include "sim.h"

#define S SIM_S
#define MS SIM_MS
#define MAXN 8

typedef struct fleet {
    sim_t *sim;
    int n;
    share_node_t *share[MAXN];
    cfg_limit_t limit;
} fleet_t;

static int swim_get(const void *ctx, size_t i, swim_member_view_t *v)
{
    return swim_member_get(ctx, i, v);
}

/* What the daemon's glue does on a membership event, with a swim core for the shell. */
static void refresh(fleet_t *f, int i, size_t left)
{
    swim_core_t *core = sim_core(f->sim, i);
    share_members_t m = {.ctx = core,
                         .count = swim_member_count(core),
                         .get = swim_get,
                         .joined = swim_joined(core)};
    int64_t now = sim_now(f->sim);
    if (share_node_refresh(f->share[i], &m, left, now) == 1)
        cr_assert_eq(swim_set_meta(core, now, share_node_meta(f->share[i]), SHARE_META_LEN), 0);
}

static void on_event(void *ud, sim_t *s, int node, const swim_event_t *ev)
{
    fleet_t *f = ud;
    (void)s;
    if (f->share[node])
        refresh(f, node, ev->type == SWIM_EV_LEFT);
}

/* n nodes joining through node 0, each with a share node, run until membership converged. */
static void fleet_start(fleet_t *f, int n, uint64_t seed)
{
    memset(f, 0, sizeof(*f));
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    o.on_event = on_event;
    o.ud = f;
    f->sim = sim_new(&o);
    f->n = n;
    f->limit = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    for (int i = 0; i < n; i++) {
        int id = sim_add(f->sim, i == 0 ? -1 : 0);
        cr_assert_eq(id, i);
        cfg_share_t cfg = {
            .partition_hold_ns = 60 * S, .join_timeout_ns = 5 * S, .n_seeds = i == 0 ? 0 : 1};
        cr_assert_eq(share_node_new(&f->share[i], &cfg, sim_now(f->sim), NULL), 0);
        refresh(f, i, 0);
    }
    cr_assert(sim_run_while_not(f->sim, sim_now(f->sim) + 30 * S, sim_converged, NULL));
}

static void fleet_stop(fleet_t *f)
{
    for (int i = 0; i < f->n; i++)
        share_node_free(f->share[i]);
    sim_free(f->sim);
}

static share_disclosure_t disclosed(fleet_t *f, int i)
{
    share_disclosure_t d;
    cr_assert_eq(share_disclose(share_node_core(f->share[i]), &f->limit, &d), 0);
    return d;
}

/* Every node in `who` (a bitmask) divides by `n` in `state`, and, if asked, is converged. */
typedef struct expect {
    fleet_t *f;
    unsigned who;
    uint32_t n;
    share_state_t state;
    bool converged;
} expect_t;

/* The daemon's glue refreshes at each node's deadline too (a hold expiring, a divisor held long
 * enough to publish): here at the first simulated event after it. */
static void refresh_due(fleet_t *f)
{
    for (int i = 0; i < f->n; i++)
        if (f->share[i] && sim_up(f->sim, i) && share_node_deadline(f->share[i]) <= sim_now(f->sim))
            refresh(f, i, 0);
}

static bool all_at(sim_t *s, void *arg)
{
    const expect_t *e = arg;
    (void)s;
    refresh_due(e->f);
    for (int i = 0; i < e->f->n; i++) {
        if (!(e->who & (1u << i)))
            continue;
        share_disclosure_t d = disclosed(e->f, i);
        if (d.n != e->n || d.state != e->state || (e->converged && !d.converged))
            return false;
    }
    return true;
}

/* Runs until the expectation holds or `within` passes; returns the virtual time it took. */
static int64_t run_until(fleet_t *f, expect_t e, int64_t within)
{
    e.f = f;
    int64_t t0 = sim_now(f->sim);
    bool ok = sim_run_while_not(f->sim, t0 + within, all_at, &e);
    cr_assert(ok, "not reached within %lld ms", (long long)(within / MS));
    return sim_now(f->sim) - t0;
}

Test(node, a_setting_out_of_range_is_named_as_the_operator_wrote_it)
{
    cfg_share_t cfg = {.partition_hold_ns = -1, .join_timeout_ns = 5 * S};
    share_node_t *n = (share_node_t *)&cfg; /* not NULL: share_node_new must clear it */
    tt_err_t err = {0};
    cr_expect_eq(share_node_new(&n, &cfg, 0, &err), SHARE_ECONFIG);
    cr_expect_eq(err.code, SHARE_ECONFIG);
    cr_expect_str_eq(err.path, "shared_state.share.partition_hold", "%s", err.message);
    cr_expect_null(n);
    cfg = (cfg_share_t){.partition_hold_ns = 60 * S, .join_timeout_ns = -1};
    err = (tt_err_t){0};
    cr_expect_eq(share_node_new(&n, &cfg, 0, &err), SHARE_ECONFIG);
    cr_expect_str_eq(err.path, "shared_state.share.join_timeout", "%s", err.message);
}

Test(node, a_joined_fleet_of_three_converges_on_n_3_with_exact_bounds)
{
    fleet_t f;
    fleet_start(&f, 3, 1);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    for (int i = 0; i < 3; i++) {
        share_disclosure_t d = disclosed(&f, i);
        cr_assert_eq(d.local_share, 100);
        cr_assert_eq(d.sustained_bound, 300);
        cr_assert_eq(d.burst_bound, 60);
        cr_assert_eq(d.divisors_unknown, 0);
    }
    fleet_stop(&f);
}

Test(node, survivors_of_a_kill_divide_by_two_within_the_disclosed_detect_within)
{
    for (uint64_t seed = 1; seed <= 20; seed++) {
        fleet_t f;
        fleet_start(&f, 3, seed);
        run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true},
                  10 * S);
        int64_t within = disclosed(&f, 0).detect_within_s * S;
        cr_assert_eq(within, 8 * S);
        sim_kill(f.sim, 2);
        int64_t took = run_until(&f, (expect_t){.who = 3, .n = 2, .state = SHARE_ARMED}, within);
        cr_log_info("seed %llu: re-divided %lld ms after the kill", (unsigned long long)seed,
                    (long long)(took / MS));
        /* and the survivors' bounds converge on the amount again */
        run_until(&f, (expect_t){.who = 3, .n = 2, .state = SHARE_ARMED, .converged = true}, 2 * S);
        cr_assert_eq(disclosed(&f, 0).sustained_bound, 300);
        fleet_stop(&f);
    }
}

Test(node, a_graceful_leave_re_divides_at_once_and_never_holds)
{
    fleet_t f;
    fleet_start(&f, 2, 7);
    run_until(&f, (expect_t){.who = 3, .n = 2, .state = SHARE_ARMED, .converged = true}, 10 * S);
    sim_leave(f.sim, 1);
    /* one replica of two leaving halves N: a drop to half, but a graceful one */
    int64_t took = run_until(&f, (expect_t){.who = 1, .n = 1, .state = SHARE_ARMED}, 2 * S);
    cr_log_info("re-divided %lld ms after the leave", (long long)(took / MS));
    fleet_stop(&f);
}

Test(node, a_cut_off_node_holds_its_share_and_heals)
{
    fleet_t f;
    fleet_start(&f, 3, 3);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    sim_group(f.sim, 2, 1); /* node 2 alone on its side */
    run_until(&f, (expect_t){.who = 4, .n = 3, .state = SHARE_HELD}, 20 * S);
    run_until(&f, (expect_t){.who = 3, .n = 2, .state = SHARE_ARMED}, 20 * S);
    share_disclosure_t d = disclosed(&f, 2);
    cr_assert_eq(d.live, 1);
    cr_assert_eq(d.local_share, 100, "the held share: a third, not the whole amount");

    sim_group(f.sim, 2, 0);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 60 * S);
    fleet_stop(&f);
}

Test(node, a_lasting_cut_ends_the_hold_after_partition_hold)
{
    fleet_t f;
    fleet_start(&f, 3, 4);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    int64_t cut = sim_now(f.sim);
    sim_group(f.sim, 2, 1);
    run_until(&f, (expect_t){.who = 4, .n = 3, .state = SHARE_HELD}, 20 * S);
    /* The shell's timer: no membership event comes while the cut lasts. The peers may be
     * declared dead one at a time (3 -> 2 -> 1): then the hold moves from the 3 to the 2. A
     * deadline may also be a new divisor's publishing, which changes no divisor. */
    uint32_t last = 3;
    for (int steps = 0; share_state(share_node_core(f.share[2])) == SHARE_HELD; steps++) {
        cr_assert_lt(steps, 6);
        int64_t deadline = share_node_deadline(f.share[2]);
        cr_assert_lt(deadline, INT64_MAX);
        sim_run_until(f.sim, deadline);
        refresh(&f, 2, 0);
        uint32_t n = share_divisor(share_node_core(f.share[2]));
        cr_assert_leq(n, last, "the divisor only falls while the cut lasts");
        last = n;
    }
    cr_assert_eq(last, 1, "alone for partition_hold: the whole amount");
    cr_assert_geq(sim_now(f.sim) - cut, 60 * S, "held at least partition_hold");
    cr_assert_leq(sim_now(f.sim) - cut, 60 * S + 20 * S, "and not much longer");
    fleet_stop(&f);
}

Test(node, a_rolling_update_of_three_never_holds)
{
    fleet_t f;
    fleet_start(&f, 3, 5);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    for (int i = 0; i < 3; i++) {
        unsigned others = 7u & ~(1u << i);
        sim_leave(f.sim, i);
        run_until(&f, (expect_t){.who = others, .n = 2, .state = SHARE_ARMED}, 2 * S);
        sim_run_until(f.sim, sim_now(f.sim) + S); /* the old process is gone */
        share_node_free(f.share[i]);              /* the new pod: a new process */
        f.share[i] = NULL;
        sim_restart(f.sim, i, i == 0 ? 1 : 0);
        cfg_share_t cfg = {.partition_hold_ns = 60 * S, .join_timeout_ns = 5 * S, .n_seeds = 1};
        cr_assert_eq(share_node_new(&f.share[i], &cfg, sim_now(f.sim), NULL), 0);
        refresh(&f, i, 0);
        run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true},
                  10 * S);
    }
    fleet_stop(&f);
}

/* ---- the daemon's surfaces: the engine's hooks, /readyz, /metrics --------------------------- */

static void append(void *ctx, const char *text)
{
    strncat(ctx, text, 16384 - strlen(ctx) - 1);
}

Test(node, the_engine_hook_is_unarmed_until_membership_joins_then_gives_a_third)
{
    fleet_t f;
    memset(&f, 0, sizeof(f));
    f.limit = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    sim_opts_t o;
    sim_opts_default(&o);
    o.on_event = on_event;
    o.ud = &f;
    f.sim = sim_new(&o);
    f.n = 1;
    sim_add(f.sim, -1);
    cfg_share_t cfg = {.partition_hold_ns = 60 * S, .join_timeout_ns = 5 * S, .n_seeds = 1};
    cr_assert_eq(share_node_new(&f.share[0], &cfg, sim_now(f.sim), NULL), 0);
    refresh(&f, 0, 0); /* a seed is configured but nobody answered yet */

    ra_limiter_t lim;
    bool armed = true;
    const char *why = NULL;
    cr_assert_eq(share_node_ops.limiter(f.share[0], &f.limit, sim_now(f.sim), &lim, &armed), 0);
    cr_assert_not(armed, "posture.fail decides");
    cr_assert_not(share_node_ready(f.share[0], &why));
    cr_assert_str_eq(why, "share store not armed: membership has not joined yet");

    f.n = 3; /* two more join through node 0 */
    for (int i = 1; i < 3; i++) {
        sim_add(f.sim, 0);
        cr_assert_eq(share_node_new(&f.share[i], &cfg, sim_now(f.sim), NULL), 0);
        refresh(&f, i, 0);
    }
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    cr_assert_eq(share_node_ops.limiter(f.share[0], &f.limit, sim_now(f.sim), &lim, &armed), 0);
    cr_assert(armed);
    cr_assert_eq(lim.emission_ns, 3 * f.limit.limiter.emission_ns);
    cr_assert(share_node_ready(f.share[0], &why));
    fleet_stop(&f);
}

Test(node, fleet_entries_and_gauges_carry_the_disclosure)
{
    fleet_t f;
    fleet_start(&f, 3, 2);
    run_until(&f, (expect_t){.who = 7, .n = 3, .state = SHARE_ARMED, .converged = true}, 10 * S);
    gov_fleet_entry_t e = {.n = 1};
    share_node_ops.fleet(f.share[1], &f.limit, sim_now(f.sim), &e);
    cr_assert_eq(e.n, 3);
    cr_assert_eq(e.sustained_bound, 300);
    cr_assert_eq(e.burst_bound, 60);
    cr_assert_str_eq(e.state, "armed");
    cr_assert_eq(e.divisor_min, 3);
    cr_assert_eq(e.divisor_max, 3);
    cr_assert_eq(e.detect_within_s, 8);
    cr_assert(e.converged);

    cfg_limit_t limits[2] = {f.limit, f.limit};
    limits[1].store = CFG_STORE_LOCAL; /* not a share limit: no gauges */
    strcpy(limits[1].id, "local_rpm");
    static char text[16384];
    text[0] = '\0';
    share_node_metrics(f.share[1], limits, 2, append, text);
    cr_assert(
        strstr(text,
               "# TYPE tokentriage_share_n gauge\ntokentriage_share_n{limit=\"team_rpm\"} 3\n"),
        "%s", text);
    cr_assert(strstr(text, "tokentriage_share_sustained_bound{limit=\"team_rpm\"} 300\n"));
    cr_assert(strstr(text, "tokentriage_share_detect_within_seconds{limit=\"team_rpm\"} 8\n"));
    cr_assert(strstr(text, "tokentriage_share_converged{limit=\"team_rpm\"} 1\n"));
    cr_assert(strstr(text, "tokentriage_share_state{limit=\"team_rpm\",state=\"armed\"} 1\n"));
    cr_assert(strstr(text, "tokentriage_share_state{limit=\"team_rpm\",state=\"held\"} 0\n"));
    cr_assert_null(strstr(text, "local_rpm"));
    fleet_stop(&f);
}

/* ---- publishing the divisor: a change held, a change undone never sent (issue 35) -------------
 * A fake member table at chosen times: self and three peers alive. */

typedef struct table {
    swim_state_t state[4];
} table_t;

static int table_get(const void *ctx, size_t i, swim_member_view_t *v)
{
    const table_t *t = ctx;
    static const char *const ids[] = {"self", "p1", "p2", "p3"};
    memset(v, 0, sizeof(*v));
    v->id = ids[i];
    v->id_len = strlen(ids[i]);
    v->state = t->state[i];
    v->self = i == 0;
    return 0;
}

static int refresh_table(share_node_t *n, const table_t *t, int64_t now)
{
    share_members_t m = {.ctx = t, .count = 4, .get = table_get, .joined = true};
    return share_node_refresh(n, &m, 0, now);
}

static uint32_t published_divisor(share_node_t *n)
{
    share_meta_t meta;
    cr_assert_eq(share_meta_decode(share_node_meta(n), SHARE_META_LEN, &meta, NULL), 0);
    return meta.divisor;
}

/* Every replica's divisor changes with every leave and every join, and each change went to every
 * live member directly, twice: in a rolling restart, where a leave and the restart's join come a
 * moment apart, what a replica sent grew with N (43.5 KB/s a replica at 64 replicas, one restart a
 * second). A new divisor is now published only once it has held for the hold, and not at all when
 * it went back meanwhile; a new state (armed, held) at once. */
Test(node, a_divisor_change_is_published_after_a_hold_and_one_undone_meanwhile_never)
{
    cfg_share_t cfg = {.partition_hold_ns = 60 * S, .join_timeout_ns = 5 * S, .n_seeds = 1};
    share_node_t *n;
    cr_assert_eq(share_node_new(&n, &cfg, 0, NULL), 0);
    table_t t = {{SWIM_ALIVE, SWIM_ALIVE, SWIM_ALIVE, SWIM_ALIVE}};
    int64_t t0 = 1000 * S;
    cr_assert_eq(refresh_table(n, &t, t0), 1, "armed: published at once");
    cr_assert_eq(published_divisor(n), 4);

    t.state[3] = SWIM_LEFT; /* a restart's leave ... */
    cr_assert_eq(refresh_table(n, &t, t0 + 100 * MS), 0, "a new divisor waits for the hold");
    cr_assert_eq(share_divisor(share_node_core(n)), 3, "while this replica divides by it at once");
    cr_assert_eq(share_node_deadline(n), t0 + 100 * MS + SHARE_NODE_PUBLISH_HOLD_NS);
    t.state[3] = SWIM_ALIVE; /* ... and its join, a moment later */
    cr_assert_eq(refresh_table(n, &t, t0 + 300 * MS), 0, "undone: nothing to publish");
    cr_assert_eq(share_node_deadline(n), INT64_MAX);
    cr_assert_eq(refresh_table(n, &t, t0 + 2 * S), 0);
    cr_assert_eq(published_divisor(n), 4);

    t.state[3] = SWIM_DEAD; /* a change that holds */
    cr_assert_eq(refresh_table(n, &t, t0 + 3 * S), 0);
    cr_assert_eq(refresh_table(n, &t, t0 + 3 * S + SHARE_NODE_PUBLISH_HOLD_NS), 1);
    cr_assert_eq(published_divisor(n), 3);
    share_node_free(n);
}
