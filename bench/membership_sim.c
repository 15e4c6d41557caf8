/*
 * membership_sim: the simulator's figures for docs/membership.md.
 *
 *   membership_sim kill  [nodes] [runs] [loss] time to first suspicion and to agreement
 *   membership_sim loss  [nodes] [loss] [secs] false deaths and suspicions under loss
 *   membership_sim bytes [nodes] [secs]        steady-state bytes/s per node
 *   membership_sim join  [nodes]               time until every view is complete
 *   membership_sim traces                      the trace hashes of twelve seeded runs (below)
 *   membership_sim scale [nodes] [secs] [loss] [kill_every]
 *       a sealed fleet for secs at loss: bytes/s per member (UDP, push-pull), a member killed
 *       every kill_every s and the time until every live member has it dead, false deaths;
 *       above 2,000 members the fleet joins 100 a second
 *
 * Everything runs on the virtual clock; the wall time printed is the CPU cost.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

typedef struct stats {
    int victim;
    int64_t t_kill, first_suspect;
    int downs, false_deaths;
} stats_t;

static void on_event(void *ud, sim_t *s, int node, const swim_event_t *ev)
{
    stats_t *st = ud;
    if (ev->type != SWIM_EV_DOWN)
        return;
    st->downs++;
    int target = atoi(ev->id + 1);
    if (target != st->victim && sim_up(s, target))
        st->false_deaths++;
}

/*
 * A fleet of n joining through node 0: all at once, or (wave > 0) wave members a second, as a
 * rolling start would. All at once, every joiner announces itself to every member it learned
 * of (about N^2/2 datagrams), all in flight together: 12 GB of them at 5,000.
 */
static sim_t *make(stats_t *st, uint64_t seed, int n, double loss, bool sealed, int wave)
{
    memset(st, 0, sizeof *st);
    st->victim = -1;
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    o.loss = loss;
    o.sealed = sealed;
    o.on_event = on_event;
    o.ud = st;
    sim_t *s = sim_new(&o);
    if (wave <= 0)
        sim_add_many(s, n);
    for (int k = 0; wave > 0 && k < n; k += wave) {
        for (int j = k; j < n && j < k + wave; j++)
            sim_add(s, j ? 0 : -1);
        sim_run_until(s, sim_now(s) + SIM_S);
    }
    if (!sim_run_while_not(s, sim_now(s) + 600 * SIM_S, sim_converged, NULL)) {
        fprintf(stderr, "cluster of %d did not converge\n", n);
        exit(1);
    }
    return s;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(int64_t *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp64);
    int k = (int)(p * (n - 1) + 0.5);
    return (double)v[k] / 1e9;
}

static bool anyone_suspects(sim_t *s, void *arg)
{
    int victim = *(int *)arg;
    for (int i = 0; i < sim_size(s); i++)
        if (i != victim && sim_state(s, i, victim) >= SWIM_SUSPECT)
            return true;
    return false;
}

static bool everyone_agrees(sim_t *s, void *arg)
{
    int victim = *(int *)arg;
    for (int i = 0; i < sim_size(s); i++)
        if (i != victim && sim_state(s, i, victim) != SWIM_DEAD)
            return false;
    return true;
}

static void kill_bench(int n, int runs, double loss)
{
    int64_t *susp = calloc((size_t)runs, sizeof *susp),
            *agree = calloc((size_t)runs, sizeof *agree);
    int false_deaths = 0;
    for (int r = 0; r < runs; r++) {
        stats_t st;
        sim_t *s = make(&st, 1000 + (uint64_t)r, n, 0, true, 0);
        sim_set_loss(s, loss);
        sim_run_until(s, sim_now(s) + (int64_t)(r % 10) * 100 * SIM_MS);
        st.victim = 1 + r % (n - 1);
        int64_t t0 = sim_now(s);
        sim_kill(s, st.victim);
        /* the simulator checks predicates every 100 ms: figures are to 0.1 s */
        sim_run_while_not(s, t0 + 120 * SIM_S, anyone_suspects, &st.victim);
        susp[r] = sim_now(s) - t0;
        sim_run_while_not(s, t0 + 120 * SIM_S, everyone_agrees, &st.victim);
        agree[r] = sim_now(s) - t0;
        false_deaths += st.false_deaths;
        sim_free(s);
    }
    printf("kill N=%d runs=%d loss=%.0f%%: first suspicion p50 %.1f s p99 %.1f s; agreement p50 "
           "%.1f s "
           "p99 %.1f s; false deaths %d\n",
           n, runs, loss * 100, pct(susp, runs, 0.5), pct(susp, runs, 0.99), pct(agree, runs, 0.5),
           pct(agree, runs, 0.99), false_deaths);
    free(susp);
    free(agree);
}

static void loss_bench(int n, double loss, int secs)
{
    stats_t st;
    sim_t *s = make(&st, 7, n, 0, false, 0);
    sim_set_loss(s, loss);
    uint64_t susp0 = 0, ref0 = 0;
    for (int i = 0; i < n; i++) {
        susp0 += swim_counters(sim_core(s, i))->suspicions;
        ref0 += swim_counters(sim_core(s, i))->refutes;
    }
    sim_run_until(s, sim_now(s) + (int64_t)secs * SIM_S);
    uint64_t susp = 0, ref = 0;
    int health = 0;
    for (int i = 0; i < n; i++) {
        susp += swim_counters(sim_core(s, i))->suspicions;
        ref += swim_counters(sim_core(s, i))->refutes;
        health += swim_health(sim_core(s, i));
    }
    printf("loss N=%d loss=%.0f%% %d s: false deaths %d, suspicions %llu, refutes %llu, "
           "mean health score %.2f; trace %016llx\n",
           n, loss * 100, secs, st.false_deaths, (unsigned long long)(susp - susp0),
           (unsigned long long)(ref - ref0), (double)health / n, (unsigned long long)sim_trace(s));
    sim_free(s);
}

static void bytes_bench(int n, int secs, double loss)
{
    stats_t st;
    sim_t *s = make(&st, 9, n, 0, true, 0);
    sim_set_loss(s, loss);
    sim_run_until(s, sim_now(s) + 60 * SIM_S); /* past the join's burst */
    uint64_t b0 = 0, b1 = 0;
    for (int i = 0; i < n; i++)
        b0 += sim_tx_bytes(s, i);
    sim_run_until(s, sim_now(s) + (int64_t)secs * SIM_S);
    for (int i = 0; i < n; i++)
        b1 += sim_tx_bytes(s, i);
    printf("bytes N=%d sealed, loss=%.0f%%, %d s steady state: %.0f bytes/s sent per node (UDP + "
           "push-pull), false deaths %d\n",
           n, loss * 100, secs, (double)(b1 - b0) / n / secs, st.false_deaths);
    sim_free(s);
}

static void join_bench(int n)
{
    stats_t st;
    memset(&st, 0, sizeof st);
    sim_opts_t o;
    sim_opts_default(&o);
    sim_t *s = sim_new(&o);
    int64_t t0 = sim_now(s);
    sim_add_many(s, n);
    bool ok = sim_run_while_not(s, t0 + 900 * SIM_S, sim_converged, NULL);
    printf("join N=%d (all through one seed at once): %s after %.1f s\n", n,
           ok ? "converged" : "NOT converged", (double)(sim_now(s) - t0) / 1e9);
    sim_free(s);
}

static bool all_live_see_dead(sim_t *s, void *arg)
{
    int victim = *(int *)arg;
    for (int i = 0; i < sim_size(s); i++)
        if (i != victim && sim_up(s, i) && sim_state(s, i, victim) != SWIM_DEAD)
            return false;
    return true;
}

/* Bytes sent by every member so far (a killed one's stop at its kill): all, and UDP alone. */
static void fleet_bytes(sim_t *s, uint64_t *all, uint64_t *udp)
{
    *all = *udp = 0;
    for (int i = 0; i < sim_size(s); i++) {
        *all += sim_tx_bytes(s, i);
        *udp += swim_counters(sim_core(s, i))->tx_bytes;
    }
}

static void scale_bench(int n, int secs, double loss, int every)
{
    stats_t st;
    /* Up to 2,000 members join all at once and warm up 60 s, as the figures in
     * docs/membership.md were made. Above, they join in waves and warm up 300 s: after a mass
     * join every member's broadcast queue holds every member, 4 x log10(N) sends each, which
     * at 5,000 takes about 200 s of full gossip datagrams to drain. */
    bool big = n > 2000;
    sim_t *s = make(&st, 5000, n, 0, true, big ? 100 : 0);
    sim_set_loss(s, loss);
    sim_run_until(s, sim_now(s) + (big ? 300 : 60) * SIM_S); /* past the join's bursts */
    int kills = every > 0 ? secs / every : 0, live = n;
    int64_t *agree = calloc((size_t)(kills ? kills : 1), sizeof *agree);
    uint64_t all0, udp0, all1, udp1, susp = 0, ref = 0;
    fleet_bytes(s, &all0, &udp0);
    int64_t t0 = sim_now(s), prev = t0;
    double member_secs = 0; /* live members summed over time: what bytes/s per member divide by */
    for (int k = 0; k < kills; k++) {
        sim_run_until(s, t0 + (int64_t)(k + 1) * every * SIM_S);
        int victim = 1 + (int)((uint64_t)k * 7919 % (uint64_t)(n - 1));
        while (!sim_up(s, victim))
            victim = 1 + victim % (n - 1);
        int64_t tk = sim_now(s);
        member_secs += (double)live-- * (double)(tk - prev) / 1e9;
        prev = tk;
        fleet_bytes(s, &all1, &udp1); /* so far: a run cut short still has its figures */
        fprintf(stderr, "at %.0f s: %.0f bytes/s per member so far (UDP %.0f)\n",
                (double)(tk - t0) / 1e9, (double)(all1 - all0) / member_secs,
                (double)(udp1 - udp0) / member_secs);
        sim_kill(s, victim);
        if (!sim_run_while_not(s, tk + 120 * SIM_S, all_live_see_dead, &victim))
            fprintf(stderr, "kill %d (n%d): not dead everywhere after 120 s\n", k, victim);
        agree[k] = sim_now(s) - tk;
        fprintf(stderr, "kill %d of %d at %.0f s: dead everywhere after %.1f s, false deaths %d\n",
                k + 1, kills, (double)(tk - t0) / 1e9, (double)agree[k] / 1e9, st.false_deaths);
    }
    sim_run_until(s, t0 + (int64_t)secs * SIM_S);
    member_secs += (double)live * (double)(sim_now(s) - prev) / 1e9;
    fleet_bytes(s, &all1, &udp1);
    for (int i = 0; i < n; i++) {
        susp += swim_counters(sim_core(s, i))->suspicions;
        ref += swim_counters(sim_core(s, i))->refutes;
    }
    printf("scale N=%d sealed, loss=%.0f%%, %d s: %.0f bytes/s sent per member (UDP %.0f, "
           "push-pull %.0f); %d kills, agreement p50 %.1f s p99 %.1f s max %.1f s; false deaths "
           "%d; suspicions %llu, refutes %llu; trace %016llx\n",
           n, loss * 100, secs, (double)(all1 - all0) / member_secs,
           (double)(udp1 - udp0) / member_secs,
           (double)((all1 - all0) - (udp1 - udp0)) / member_secs, kills,
           kills ? pct(agree, kills, 0.5) : 0, kills ? pct(agree, kills, 0.99) : 0,
           kills ? pct(agree, kills, 1.0) : 0, st.false_deaths, (unsigned long long)susp,
           (unsigned long long)ref, (unsigned long long)sim_trace(s));
    free(agree);
    sim_free(s);
}

/*
 * Traces for a refactor of the core (issue 33): a behaviour change shows as another hash. Three
 * scenarios, four seeds each: (1) 32 members, sealed on odd seeds, 2% duplication and up to 30 ms
 * of reordering: a kill, a leave, a restart in place, a restart with a new address, a partition
 * in halves healed after 15 s, a pause, a slow member and a one-way cut; (2) 24 members at 20% loss
 * for 300 s; (3) ten members, five of which leave and restart in place as an island beside the
 * five that stayed (issue 35).
 */
/* The run's trace; the simulator freed. */
static uint64_t traced(sim_t *s)
{
    uint64_t t = sim_trace(s);
    sim_free(s);
    return t;
}

static uint64_t trace_events(uint64_t seed)
{
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    o.sealed = seed & 1;
    o.dup = 0.02;
    o.delay_max = 30 * SIM_MS;
    sim_t *s = sim_new(&o);
    sim_add_many(s, 32);
    sim_run_until(s, sim_now(s) + 20 * SIM_S);
    sim_kill(s, 5);
    sim_run_until(s, sim_now(s) + 60 * SIM_S);
    sim_leave(s, 7);
    sim_run_until(s, sim_now(s) + 10 * SIM_S);
    sim_restart_in_place(s, 7, 0);
    sim_run_until(s, sim_now(s) + 30 * SIM_S);
    sim_restart(s, 5, 1);
    sim_run_until(s, sim_now(s) + 30 * SIM_S);
    for (int i = 16; i < 32; i++)
        sim_group(s, i, 1);
    sim_run_until(s, sim_now(s) + 15 * SIM_S);
    for (int i = 16; i < 32; i++)
        sim_group(s, i, 0);
    sim_run_until(s, sim_now(s) + 90 * SIM_S);
    sim_pause(s, 3, 5 * SIM_S);
    sim_lag(s, 9, 2 * SIM_S);
    sim_cut(s, 2, 4, true);
    sim_run_until(s, sim_now(s) + 60 * SIM_S);
    return traced(s);
}

static uint64_t trace_loss(uint64_t seed)
{
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    o.loss = 0.2;
    sim_t *s = sim_new(&o);
    sim_add_many(s, 24);
    sim_run_until(s, sim_now(s) + 300 * SIM_S);
    return traced(s);
}

static uint64_t trace_island(uint64_t seed)
{
    sim_opts_t o;
    sim_opts_default(&o);
    o.seed = seed;
    sim_t *s = sim_new(&o);
    sim_add_many(s, 10);
    sim_run_until(s, sim_now(s) + 20 * SIM_S);
    for (int i = 0; i < 5; i++) {
        sim_leave(s, i);
        sim_run_until(s, sim_now(s) + 300 * SIM_MS);
    }
    sim_run_until(s, sim_now(s) + 2 * SIM_S);
    sim_restart_in_place(s, 0, -1);
    for (int i = 1; i < 5; i++)
        sim_restart_in_place(s, i, 0);
    sim_run_until(s, sim_now(s) + 90 * SIM_S);
    return traced(s);
}

static void traces(void)
{
    for (uint64_t seed = 1; seed <= 4; seed++)
        printf("events %llu %016llx\nloss %llu %016llx\nisland %llu %016llx\n",
               (unsigned long long)seed, (unsigned long long)trace_events(seed),
               (unsigned long long)seed, (unsigned long long)trace_loss(seed),
               (unsigned long long)seed, (unsigned long long)trace_island(seed));
}

int main(int argc, char **argv)
{
    /* Blocks above 128 KiB (each core's member table) from mmap, not the heap: a table grows by
     * doubling, and on the heap the blocks each core left behind were taken by the next core's
     * growth and written, so a table's untouched tail was resident too (5,000 cores of 5,000
     * members: 6.8 GB and rising, where the records are 3.8 GB). mmap'd, realloc moves pages. */
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
    const char *what = argc > 1 ? argv[1] : "kill";
    clock_t c0 = clock();
    if (strcmp(what, "kill") == 0)
        kill_bench(argc > 2 ? atoi(argv[2]) : 64, argc > 3 ? atoi(argv[3]) : 100,
                   argc > 4 ? atof(argv[4]) : 0);
    else if (strcmp(what, "loss") == 0)
        loss_bench(argc > 2 ? atoi(argv[2]) : 64, argc > 3 ? atof(argv[3]) : 0.2,
                   argc > 4 ? atoi(argv[4]) : 3600);
    else if (strcmp(what, "bytes") == 0)
        bytes_bench(argc > 2 ? atoi(argv[2]) : 64, argc > 3 ? atoi(argv[3]) : 300,
                    argc > 4 ? atof(argv[4]) : 0);
    else if (strcmp(what, "scale") == 0)
        scale_bench(argc > 2 ? atoi(argv[2]) : 1000, argc > 3 ? atoi(argv[3]) : 600,
                    argc > 4 ? atof(argv[4]) : 0.2, argc > 5 ? atoi(argv[5]) : 120);
    else if (strcmp(what, "join") == 0)
        join_bench(argc > 2 ? atoi(argv[2]) : 1000);
    else if (strcmp(what, "traces") == 0)
        traces();
    else {
        fprintf(stderr, "usage: membership_sim kill|loss|bytes|join|scale|traces [args]\n");
        return 64;
    }
    fprintf(stderr, "cpu %.2f s\n", (double)(clock() - c0) / CLOCKS_PER_SEC);
    return 0;
}
