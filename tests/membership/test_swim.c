/* The SWIM core, driven as whole clusters through the deterministic simulator (sim.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"
#include "swim.h"
#include "swim_proto.h"

/* Counts DOWN events about nodes that were up at the time (false deaths) and the first time
 * every survivor agreed on a target's death. */
typedef struct watch {
    int false_deaths;
    int downs;
    int lefts;
    int max_live;
    int victim; /* a node killed on purpose: its death is not false */
} watch_t;

static void on_event(void *ud, sim_t *s, int node, const swim_event_t *ev)
{
    watch_t *w = ud;
    if (ev->type == SWIM_EV_LIVE_COUNT && ev->live_count > w->max_live)
        w->max_live = ev->live_count;
    if (ev->type == SWIM_EV_LEFT)
        w->lefts++;
    if (ev->type != SWIM_EV_DOWN)
        return;
    w->downs++;
    int target = atoi(ev->id + 1);
    if (target != w->victim && sim_up(s, target))
        w->false_deaths++;
}

static sim_t *cluster(watch_t *w, uint64_t seed, int n, double loss)
{
    memset(w, 0, sizeof *w);
    w->victim = -1;
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    o.loss = loss;
    o.on_event = on_event;
    o.ud = w;
    sim_t *s = sim_new(&o);
    sim_add_many(s, n);
    return s;
}

static bool all_see(sim_t *s, int target, int state)
{
    for (int i = 0; i < sim_size(s); i++)
        if (i != target && sim_up(s, i) && sim_state(s, i, target) != state)
            return false;
    return true;
}

static bool all_dead(sim_t *s, void *arg)
{
    return all_see(s, *(int *)arg, SWIM_DEAD);
}

static bool all_left(sim_t *s, void *arg)
{
    return all_see(s, *(int *)arg, SWIM_LEFT);
}

Test(swim, a_single_node_counts_itself_and_stays_quiet)
{
    watch_t w;
    sim_t *s = cluster(&w, 1, 1, 0);
    sim_run_until(s, sim_now(s) + 60 * SIM_S);
    cr_assert_eq(swim_live_count(sim_core(s, 0)), 1);
    cr_assert_eq(swim_member_count(sim_core(s, 0)), 1);
    cr_assert_eq(sim_datagrams(s), 0);
    sim_free(s);
}

Test(swim, two_and_three_nodes_converge_within_seconds)
{
    for (int n = 2; n <= 3; n++) {
        watch_t w;
        sim_t *s = cluster(&w, 7, n, 0);
        cr_assert(sim_run_while_not(s, sim_now(s) + 5 * SIM_S, sim_converged, NULL),
                  "%d nodes did not converge", n);
        sim_run_until(s, sim_now(s) + 120 * SIM_S);
        cr_assert(sim_converged(s, NULL));
        cr_assert_eq(w.downs, 0);
        sim_free(s);
    }
}

Test(swim, a_killed_member_of_64_is_marked_dead_by_every_survivor)
{
    watch_t w;
    sim_t *s = cluster(&w, 3, 64, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_run_until(s, sim_now(s) + 10 * SIM_S);
    int victim = 17;
    w.victim = victim;
    sim_kill(s, victim);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, all_dead, &victim));
    cr_assert_eq(w.false_deaths, 0);
    cr_assert_eq(swim_live_count(sim_core(s, 0)), 63);
    sim_free(s);
}

Test(swim, a_graceful_leave_is_seen_everywhere_within_two_seconds)
{
    watch_t w;
    sim_t *s = cluster(&w, 5, 64, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    int leaver = 9;
    sim_leave(s, leaver);
    cr_assert(sim_run_while_not(s, sim_now(s) + 2 * SIM_S, all_left, &leaver));
    cr_assert_eq(w.downs, 0);
    sim_free(s);
}

Test(swim, twenty_percent_loss_for_an_hour_kills_no_one)
{
    watch_t w;
    sim_t *s = cluster(&w, 11, 32, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_set_loss(s, 0.20);
    sim_run_until(s, sim_now(s) + 3600 * SIM_S);
    cr_assert_eq(w.downs, 0, "%d members declared dead at 20%% loss", w.downs);
    sim_free(s);
}

Test(swim, a_node_paused_five_seconds_every_minute_kills_no_healthy_node)
{
    watch_t w;
    sim_t *s = cluster(&w, 13, 32, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    for (int minute = 0; minute < 10; minute++) {
        sim_pause(s, 4, 5 * SIM_S);
        sim_run_until(s, sim_now(s) + 60 * SIM_S);
    }
    cr_assert_eq(w.downs, 0, "%d deaths", w.downs);
    cr_assert(sim_converged(s, NULL));
    sim_free(s);
}

Test(swim, a_restarted_node_with_a_new_address_is_counted_once)
{
    watch_t w;
    sim_t *s = cluster(&w, 17, 16, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    w.max_live = 0;
    sim_kill(s, 6);
    sim_restart(s, 6, 0);
    /* the new generation supersedes the old at once: no death to wait for */
    cr_assert(sim_run_while_not(s, sim_now(s) + 5 * SIM_S, sim_converged, NULL));
    cr_assert_leq(w.max_live, 16);
    cr_assert_eq(w.downs, 0);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(swim_live_count(sim_core(s, i)), 16);
    sim_free(s);
}

static bool sides_split(sim_t *s, void *arg)
{
    int half = *(int *)arg;
    for (int i = 0; i < sim_size(s); i++)
        if (swim_live_count(sim_core(s, i)) != half)
            return false;
    return true;
}

Test(swim, a_partition_splits_the_view_and_heals)
{
    for (int held = 0; held < 2; held++) {
        watch_t w;
        sim_t *s = cluster(&w, 19 + held, 32, 0);
        cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
        for (int i = 16; i < 32; i++)
            sim_group(s, i, 1);
        int half = 16;
        cr_assert(sim_run_while_not(s, sim_now(s) + 60 * SIM_S, sides_split, &half));
        /* heal a short partition (dead members still gossiped to) and one older than the
         * reclaim time (only the seeds bring the halves back together) */
        sim_run_until(s, sim_now(s) + (held ? 120 : 5) * SIM_S);
        for (int i = 16; i < 32; i++)
            sim_group(s, i, 0);
        cr_assert(sim_run_while_not(s, sim_now(s) + 180 * SIM_S, sim_converged, NULL),
                  "partition %d did not heal", held);
        sim_free(s);
    }
}

/*
 * Islands (issue 35). Half a fleet restarts in place while its seed is down: the first back
 * (n0, the seed) finds no one and the others join it, so the restarted half forms a fleet of its
 * own, unaware of the half that stayed. The half that stayed looks for the members that left at
 * their addresses; the two merge within seconds, not at a seed push-pull 30 to 90 s later.
 */
Test(swim, an_island_of_members_restarted_in_place_merges_with_the_rest_within_five_seconds)
{
    watch_t w;
    sim_t *s = cluster(&w, 41, 10, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    for (int i = 0; i < 5; i++) {
        sim_leave(s, i);
        sim_run_until(s, sim_now(s) + 300 * SIM_S / 1000);
    }
    sim_run_until(s, sim_now(s) + 2 * SIM_S);
    sim_restart_in_place(s, 0, -1);
    for (int i = 1; i < 5; i++)
        sim_restart_in_place(s, i, 0);
    sim_run_until(s, sim_now(s) + 100 * SIM_MS);
    cr_assert_eq(swim_live_count(sim_core(s, 0)), 5, "an island of the five restarted");
    cr_assert_eq(swim_live_count(sim_core(s, 9)), 5, "and one of the five that stayed");
    cr_assert(sim_run_while_not(s, sim_now(s) + 5 * SIM_S, sim_converged, NULL),
              "the two islands did not merge within 5 s");
    cr_assert_gt(swim_counters(sim_core(s, 9))->rejoin_pings +
                     swim_counters(sim_core(s, 0))->rejoin_pings,
                 0);
    sim_free(s);
}

/* Two members restart with new addresses while the seed is gone for good: the second joins the
 * first, which restarted alone. The rest cannot find them where they were, nor can either side
 * reach the seed; but the restarted members remember the rest (swim_remember, from the state
 * directory) and find them. */
Test(swim, a_restarted_member_in_an_island_finds_the_members_it_remembers)
{
    watch_t w;
    sim_t *s = cluster(&w, 43, 10, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    char ids[10][8];
    uint64_t gens[10];
    swim_addr_t addrs[10];
    for (int i = 3; i < 10; i++) { /* what n2 knows of n3..n9 (views are the core's: copied) */
        swim_member_view_t v;
        snprintf(ids[i], sizeof ids[i], "n%d", i);
        cr_assert_eq(swim_member_find(sim_core(s, 2), ids[i], &v), 0);
        gens[i] = v.generation;
        addrs[i] = v.addr;
    }
    w.victim = 0;
    sim_kill(s, 0); /* the seed, for good */
    sim_leave(s, 1);
    sim_leave(s, 2);
    sim_run_until(s, sim_now(s) + 2 * SIM_S);
    sim_restart(s, 1, -1);
    sim_restart(s, 2, 1);
    for (int i = 3; i < 10; i++)
        cr_assert_eq(swim_remember(sim_core(s, 2), ids[i], strlen(ids[i]), gens[i], &addrs[i]), 0);
    sim_run_until(s, sim_now(s) + 100 * SIM_MS);
    cr_assert_eq(swim_live_count(sim_core(s, 2)), 2, "an island of two");
    cr_assert(sim_run_while_not(s, sim_now(s) + 5 * SIM_S, sim_converged, NULL),
              "the island did not find the members it remembers within 5 s");
    cr_assert_gt(swim_counters(sim_core(s, 2))->rejoin_merges, 0);
    sim_free(s);
}

Test(swim, a_one_way_cut_is_bridged_by_indirect_probes)
{
    watch_t w;
    sim_t *s = cluster(&w, 23, 16, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_cut(s, 2, 3, true); /* 2 cannot reach 3; everyone else can */
    sim_run_until(s, sim_now(s) + 300 * SIM_S);
    cr_assert_eq(w.downs, 0);
    cr_assert(sim_converged(s, NULL));
    sim_free(s);
}

Test(swim, duplication_and_reordering_change_nothing)
{
    watch_t w;
    memset(&w, 0, sizeof w);
    w.victim = -1;
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = 29;
    o.dup = 0.2;
    o.delay_min = 0;
    o.delay_max = 200 * SIM_MS;
    o.on_event = on_event;
    o.ud = &w;
    sim_t *s = sim_new(&o);
    sim_add_many(s, 16);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_run_until(s, sim_now(s) + 300 * SIM_S);
    cr_assert_eq(w.downs, 0);
    cr_assert_gt(swim_counters(sim_core(s, 0))->drop_replay, 0, "duplicates are dropped");
    sim_free(s);
}

Test(swim, a_sealed_cluster_converges_and_detects_a_death)
{
    watch_t w;
    memset(&w, 0, sizeof w);
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = 31;
    o.sealed = true;
    o.on_event = on_event;
    o.ud = &w;
    sim_t *s = sim_new(&o);
    sim_add_many(s, 16);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    w.victim = 3;
    sim_kill(s, 3);
    int v = 3;
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, all_dead, &v));
    cr_assert_eq(w.false_deaths, 0);
    cr_assert_eq(swim_counters(sim_core(s, 0))->drop_auth, 0);
    sim_free(s);
}

static uint64_t run_trace(uint64_t seed)
{
    watch_t w;
    sim_t *s = cluster(&w, seed, 12, 0.1);
    sim_run_until(s, sim_now(s) + 20 * SIM_S);
    sim_kill(s, 5);
    sim_pause(s, 7, 3 * SIM_S);
    sim_run_until(s, sim_now(s) + 40 * SIM_S);
    uint64_t t = sim_trace(s);
    sim_free(s);
    return t;
}

Test(swim, the_same_seed_gives_the_same_trace)
{
    cr_assert_eq(run_trace(41), run_trace(41));
    cr_assert_neq(run_trace(41), run_trace(42));
}

/* 1000 nodes take about 7 s of CPU and 600 MB: that run is `membership_sim join 1000`
 * (docs/membership.md); the suite keeps a quarter of it. */
Test(swim, two_hundred_and_fifty_nodes_joining_at_once_converge)
{
    watch_t w;
    sim_t *s = cluster(&w, 43, 250, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 60 * SIM_S, sim_converged, NULL));
    cr_assert_eq(w.downs, 0);
    sim_free(s);
}

/* ---- slow members: what they receive is read late while their timers run (sim_lag) ---- */

/* An hour at N = 64 with `slow` members reading 1.5 or 3 s late and `loss` on every link:
 * returns the false deaths. */
static int slow_hour(uint64_t seed, int slow, int64_t lag, double loss)
{
    watch_t w;
    sim_t *s = cluster(&w, seed, 64, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 60 * SIM_S, sim_converged, NULL));
    for (int k = 0; k < slow; k++)
        sim_lag(s, 5 + 13 * k, lag);
    sim_set_loss(s, loss);
    sim_run_until(s, sim_now(s) + 3600 * SIM_S);
    int deaths = w.false_deaths;
    sim_free(s);
    return deaths;
}

Test(swim_slow, one_member_reading_1_5_s_late_for_an_hour_kills_no_one)
{
    int d = slow_hour(101, 1, 1500 * SIM_MS, 0);
    cr_assert_eq(d, 0, "%d false deaths", d);
}

Test(swim_slow, four_members_reading_3_s_late_for_an_hour_kill_no_one)
{
    int d = slow_hour(103, 4, 3000 * SIM_MS, 0);
    cr_assert_eq(d, 0, "%d false deaths", d);
}

Test(swim_slow, twenty_percent_loss_at_64_for_an_hour_kills_no_one)
{
    int d = slow_hour(107, 0, 0, 0.20);
    cr_assert_eq(d, 0, "%d false deaths", d);
}

/* Not none, here: four members reading 3 s late at 20% loss lose one now and then. Over 38
 * seeded hours (109-116, 201-210, 301-320) the core with issue 35's island search switched off
 * (rejoin_window_ns 0: the core as it was) declared 25 false deaths, 0.66 an hour, at most 2 in
 * one; with it on, whose draws shift the seeded run, also 25, at most 2. This seed had none by
 * luck before and has one now; the test holds the rate to what was measured. */
Test(swim_slow, four_slow_members_and_twenty_percent_loss_for_an_hour_kill_at_most_two)
{
    int d = slow_hour(109, 4, 3000 * SIM_MS, 0.20);
    cr_assert_leq(d, 2, "%d false deaths", d);
}

Test(swim_slow, one_member_reading_1_5_s_late_with_twenty_percent_loss_kills_no_one)
{
    int d = slow_hour(113, 1, 1500 * SIM_MS, 0.20);
    cr_assert_eq(d, 0, "%d false deaths", d);
}

/* ---- claims fed to one core directly ---- */

/* A plaintext GOSSIP datagram from "peer" (generation 7) carrying `n` updates, into c. */
static int claim(swim_core_t *c, int64_t now, uint64_t seq, const swim_update_t *u, int n)
{
    uint8_t dgram[SWIM_DATAGRAM_MAX] = {SWIM_WIRE_VERSION, SWIM_MODE_PLAIN};
    wire_pack_t w = {dgram + 2, 0, sizeof dgram - 2, false};
    swim_enc_head(&w, "peer", 4, 7, now, seq, SWIM_GOSSIP);
    swim_msg_t om = {.kind = SWIM_GOSSIP};
    swim_enc_msg(&w, &om);
    size_t at = swim_enc_array_open(&w);
    for (int k = 0; k < n; k++)
        swim_enc_update(&w, &u[k]);
    swim_enc_array_close(&w, at, (uint32_t)n);
    cr_assert_not(w.overflow);
    swim_addr_t from = {.family = 4, .port = 7946, .ip = {10, 0, 0, 2}};
    return swim_receive(c, now, &from, dgram, 2 + w.len, NULL);
}

static swim_core_t *lone_core(const char *id, int64_t now)
{
    swim_config_t cfg;
    swim_config_default(&cfg);
    cfg.id = id;
    cfg.generation = 1;
    cfg.addr = (swim_addr_t){.family = 4, .port = 7946, .ip = {10, 0, 0, 1}};
    swim_core_t *c;
    tt_err_t err;
    cr_assert_eq(swim_new(&c, &cfg, now, &err), 0, "%s", err.message);
    return c;
}

Test(swim, refuting_a_declared_death_raises_the_local_health_score_as_a_suspicion_does)
{
    int64_t now = INT64_C(1700000000) * SIM_S;
    for (int st = SWIM_SUSPECT; st <= SWIM_DEAD; st++) {
        swim_core_t *c = lone_core("rx", now);
        swim_update_t u = {.state = (swim_state_t)st,
                           .id = "rx",
                           .id_len = 2,
                           .generation = 1,
                           .addr = {.family = 4, .port = 7946, .ip = {10, 0, 0, 1}}};
        cr_assert_eq(claim(c, now, 1, &u, 1), 0);
        cr_assert_eq(swim_counters(c)->refutes, 1);
        cr_assert_eq(swim_health(c), 1, "refuting %s left health at %d", swim_state_name(u.state),
                     swim_health(c));
        swim_free(c);
    }
}

/* Finding 5: a newcomer whose join push-pull says a stranger is DEAD (which the push-pull
 * turns into SUSPECT) must not count that stranger live, nor announce it UP. */
typedef struct up_watch {
    watch_t w;
    int newcomer, victim, ups;
} up_watch_t;

static void on_up(void *ud, sim_t *s, int node, const swim_event_t *ev)
{
    up_watch_t *uw = ud;
    on_event(&uw->w, s, node, ev);
    if (node == uw->newcomer && ev->type == SWIM_EV_UP && atoi(ev->id + 1) == uw->victim)
        uw->ups++;
}

Test(swim, a_newcomer_ignores_a_suspicion_about_a_member_it_never_knew)
{
    for (uint64_t seed = 51; seed < 56; seed++) {
        up_watch_t uw = {.newcomer = -1, .victim = 3};
        uw.w.victim = 3;
        sim_opts_t o;
        sim_opts_default(&o);
        o.seed = seed;
        o.on_event = on_up;
        o.ud = &uw;
        sim_t *s = sim_new(&o);
        sim_add_many(s, 8);
        cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
        sim_kill(s, 3);
        cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, all_dead, &uw.victim));
        uw.newcomer = 8;
        sim_add(s, 0);
        for (int k = 0; k < 100; k++) { /* ten seconds, every 100 ms */
            sim_run_until(s, sim_now(s) + 100 * SIM_MS);
            cr_assert_leq(swim_live_count(sim_core(s, 8)), 8, "seed %llu: the dead member counted",
                          (unsigned long long)seed);
        }
        cr_assert_eq(uw.ups, 0, "seed %llu: the newcomer announced a dead member up",
                     (unsigned long long)seed);
        cr_assert_neq(sim_state(s, 8, 3), SWIM_ALIVE);
        cr_assert_neq(sim_state(s, 8, 3), SWIM_SUSPECT);
        sim_free(s);
    }
}

Test(swim, a_report_of_another_process_with_our_id_is_a_duplicate_and_stale_gossip_is_not)
{
    int64_t now = INT64_C(1700000000) * SIM_S;
    swim_core_t *c = lone_core("rx", now);
    swim_update_t u = {.state = SWIM_ALIVE,
                       .id = "rx",
                       .id_len = 2,
                       .generation = 9,
                       .addr = {.family = 4, .port = 7946, .ip = {10, 0, 0, 9}}};
    /* an older or newer generation of us in plain gossip: a predecessor's ghost, no report */
    cr_assert_eq(claim(c, now, 1, &u, 1), 0);
    cr_assert_not(swim_duplicate(c, now, NULL, NULL));
    u.from = 0x5eed; /* a peer's report: it hears from both of us */
    cr_assert_eq(claim(c, now, 2, &u, 1), 0);
    uint64_t gen = 0;
    cr_assert(swim_duplicate(c, now, &gen, NULL));
    cr_assert_eq(gen, 9);
    size_t n;
    const swim_event_t *ev = swim_events(c, &n);
    bool told = false;
    for (size_t k = 0; k < n; k++)
        told |= ev[k].type == SWIM_EV_DUPLICATE && ev[k].generation == 9;
    cr_assert(told, "no SWIM_EV_DUPLICATE");
    cr_assert(swim_duplicate(c, now + SWIM_DUPLICATE_HOLD_NS - 1, NULL, NULL));
    cr_assert_not(swim_duplicate(c, now + SWIM_DUPLICATE_HOLD_NS, NULL, NULL), "it lapses");
    cr_assert_eq(swim_live_count(c), 1, "the report changes no count");
    swim_free(c);
}

/* ---- joins reach every view at once (issue #17 finding 4) ---- */

static bool everyone_knows(sim_t *s, void *arg)
{
    int j = *(int *)arg;
    for (int i = 0; i < sim_size(s); i++)
        if (i != j && sim_up(s, i) && sim_state(s, i, j) != SWIM_ALIVE)
            return false;
    return true;
}

/* 100 members join a cluster of 32 one after another at 5% loss; each must be in every view
 * within 2 s. Gossip alone leaves a straggler now and then, which then waits for a push-pull
 * (tens of seconds); a datagram from a sender the receiver does not know makes it fetch that
 * sender's record at once. */
Test(swim, a_join_reaches_every_view_within_two_seconds_at_five_percent_loss)
{
    watch_t w;
    sim_t *s = cluster(&w, 61, 32, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_set_loss(s, 0.05);
    int late = 0, worst = 0;
    for (int k = 0; k < 100; k++) {
        int j = sim_add(s, k % 32);
        int64_t t0 = sim_now(s);
        if (!sim_run_while_not(s, t0 + 2 * SIM_S, everyone_knows, &j)) {
            late++;
            sim_run_while_not(s, t0 + 120 * SIM_S, everyone_knows, &j);
            int ms = (int)((sim_now(s) - t0) / SIM_MS);
            worst = ms > worst ? ms : worst;
        }
        sim_run_until(s, sim_now(s) + 500 * SIM_MS);
    }
    cr_assert_eq(late, 0, "%d of 100 joins missing from some view after 2 s (the worst %d ms)",
                 late, worst);
    cr_assert_eq(w.false_deaths, 0);
    sim_free(s);
}

/* ---- scale: what loss costs in bytes (issue #17, "Scale") ---- */

/* 256 sealed members at 20% loss on every link: each sends at most 1 KiB a second (UDP and
 * push-pull) in a steady minute, and a member killed then is dead in every view within 30 s with
 * no false death. Every false suspicion under loss was a fleet-wide event (the suspicion and
 * its refutation flooded to every member), so the bytes per member grew with N: 5.5 KiB/s here
 * before. The 5,000-member hour is `membership_sim scale` (docs/membership.md). */
Test(swim_scale, two_hundred_and_fifty_six_members_at_twenty_percent_loss_send_under_a_kib_a_second)
{
    watch_t w;
    memset(&w, 0, sizeof w);
    w.victim = -1;
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = 127;
    o.sealed = true;
    o.on_event = on_event;
    o.ud = &w;
    sim_t *s = sim_new(&o);
    int n = 256;
    sim_add_many(s, n);
    cr_assert(sim_run_while_not(s, sim_now(s) + 60 * SIM_S, sim_converged, NULL));
    sim_set_loss(s, 0.20);
    sim_run_until(s, sim_now(s) + 30 * SIM_S); /* past the first suspicions' burst */
    uint64_t b0 = 0, b1 = 0;
    for (int i = 0; i < n; i++)
        b0 += sim_tx_bytes(s, i);
    sim_run_until(s, sim_now(s) + 60 * SIM_S);
    for (int i = 0; i < n; i++)
        b1 += sim_tx_bytes(s, i);
    double per = (double)(b1 - b0) / n / 60;
    cr_assert_leq(per, 1024.0, "%.0f bytes/s sent per member at 20%% loss", per);
    int victim = 77;
    w.victim = victim;
    sim_kill(s, victim);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, all_dead, &victim),
              "the killed member is not dead everywhere after 30 s");
    cr_assert_eq(w.false_deaths, 0, "%d false deaths", w.false_deaths);
    sim_free(s);
}

/* A core that knows 5,000 members (told by gossip, never probing: its probe interval is
 * longer than the test) runs two hours: the push-pull rounds it starts, after the first, cost
 * at most 128 bytes a second (it answers about as many: 256 in all, pushpull_bytes_per_s).
 * memberlist's logarithmic scale alone (every 270 s at 5,000) came to 4x that, and push-pull
 * alone then broke the 1 KiB/s a member may send. */
Test(swim_scale, push_pull_at_five_thousand_members_keeps_within_its_byte_budget)
{
    int64_t now = INT64_C(1700000000) * SIM_S;
    swim_config_t cfg;
    swim_config_default(&cfg);
    cfg.id = "rx";
    cfg.generation = 1;
    cfg.addr = (swim_addr_t){.family = 4, .port = 7946, .ip = {10, 0, 0, 1}};
    cfg.probe_interval_ns = cfg.probe_timeout_ns = 100000 * SIM_S;
    swim_core_t *c;
    tt_err_t err;
    cr_assert_eq(swim_new(&c, &cfg, now, &err), 0, "%s", err.message);
    char ids[5000][8];
    swim_update_t u[40];
    for (int k = 0, seq = 1; k < 5000; seq++) {
        int m = 0;
        for (; m < 40 && k < 5000; m++, k++) {
            int len = snprintf(ids[k], sizeof ids[k], "m%d", k);
            u[m] = (swim_update_t){
                .state = SWIM_ALIVE,
                .id = ids[k],
                .id_len = (size_t)len,
                .generation = 1,
                .addr = {.family = 4, .port = 7946, .ip = {10, 1, (uint8_t)(k >> 8), (uint8_t)k}}};
        }
        cr_assert_eq(claim(c, now, (uint64_t)seq, u, m), 0);
    }
    cr_assert_eq(swim_live_count(c), 5001);
    size_t cap = swim_pushpull_bound(c), len;
    uint8_t *buf = malloc(cap);
    cr_assert_eq(swim_pushpull_encode(c, now, true, buf, cap, &len), 0); /* the join's */
    int64_t first = 0, last = 0, end = now + 7200 * SIM_S;
    uint64_t bytes = 0;
    int rounds = 0;
    while (now < end) {
        swim_tick(c, now);
        if (swim_outbox(c)->pp_wanted) {
            cr_assert_eq(swim_pushpull_encode(c, now, false, buf, cap, &len), 0);
            if (rounds++)
                bytes += len;
            else
                first = now;
            last = now;
        }
        swim_outbox_clear(c);
        swim_events_clear(c);
        now = swim_next_deadline(c);
    }
    cr_assert_geq(rounds, 3, "%d push-pull rounds in two hours", rounds);
    double per_s = (double)bytes / ((double)(last - first) / 1e9);
    /* 128 B/s, give or take a byte a round: a round is timed from the one before, whose
     * message may be a byte shorter (the header's varints grow) */
    cr_assert_leq(bytes * 1000 * (uint64_t)SIM_S, 128 * 1001 * (uint64_t)(last - first),
                  "push-pull rounds cost %.1f bytes/s (%d rounds of %zu bytes)", per_s, rounds,
                  len);
    free(buf);
    swim_free(c);
}

/* ---- metadata reaches every view at once (issue #17 finding 4) ---- */

typedef struct meta_want {
    int node;
    uint32_t version;
} meta_want_t;

static bool everyone_has_meta(sim_t *s, void *arg)
{
    const meta_want_t *m = arg;
    char id[16];
    snprintf(id, sizeof id, "n%d", m->node);
    for (int i = 0; i < sim_size(s); i++) {
        swim_member_view_t v;
        if (i != m->node && sim_up(s, i) &&
            (swim_member_find(sim_core(s, i), id, &v) != 0 || v.meta_version < m->version))
            return false;
    }
    return true;
}

/* 400 metadata updates (the share store's divisor) at random members of 32, at 5% loss, one
 * every half second; each must be in every view within 2 s. Gossip alone leaves a straggler
 * now and then, which then waits for a push-pull (tens of seconds). */
Test(swim, a_metadata_update_reaches_every_view_within_two_seconds_at_five_percent_loss)
{
    watch_t w;
    sim_t *s = cluster(&w, 67, 32, 0);
    cr_assert(sim_run_while_not(s, sim_now(s) + 30 * SIM_S, sim_converged, NULL));
    sim_set_loss(s, 0.05);
    int late = 0, worst = 0;
    uint64_t r = 67;
    for (uint32_t k = 0; k < 400; k++) {
        r = r * UINT64_C(6364136223846793005) + 1442695040888963407u;
        meta_want_t m = {.node = (int)((r >> 33) % 32)};
        swim_core_t *c = sim_core(s, m.node);
        swim_member_view_t self;
        cr_assert_eq(swim_member_get(c, 0, &self), 0);
        cr_assert_eq(swim_set_meta(c, sim_now(s), (const uint8_t *)&k, sizeof k), 0);
        m.version = self.meta_version + 1;
        int64_t t0 = sim_now(s);
        if (!sim_run_while_not(s, t0 + 2 * SIM_S, everyone_has_meta, &m)) {
            late++;
            sim_run_while_not(s, t0 + 120 * SIM_S, everyone_has_meta, &m);
            int ms = (int)((sim_now(s) - t0) / SIM_MS);
            worst = ms > worst ? ms : worst;
        }
        sim_run_until(s, sim_now(s) + 500 * SIM_MS);
    }
    cr_assert_eq(late, 0,
                 "%d of 400 metadata updates missing from some view after 2 s (the worst %d ms)",
                 late, worst);
    cr_assert_eq(w.false_deaths, 0);
    sim_free(s);
}
