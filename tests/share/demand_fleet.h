/*
 * A fleet of demand cores in one process: a fake network (fixed delay, drops to and from dead
 * replicas) and a virtual clock advanced in steps. Membership is scripted by the test (who is
 * live in whose view), so every run is the same trace.
 */
#ifndef TT_TESTS_DEMAND_FLEET_H
#define TT_TESTS_DEMAND_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "demand.h"

#define DF_MAX 8
#define DF_INFLIGHT 8192
#define DF_MS INT64_C(1000000)
#define DF_T0 (INT64_C(1700000000) * 1000 * DF_MS)

typedef struct df_packet {
    int from, to;
    int64_t at;
    uint32_t len;
    uint8_t bytes[1400];
} df_packet_t;

typedef struct dfleet {
    int n;
    demand_core_t *core[DF_MAX];
    char id[DF_MAX][16];
    bool dead[DF_MAX];
    int64_t next_tick[DF_MAX];
    int64_t now;
    int64_t delay_ns;
    df_packet_t *wire; /* in flight, unordered */
    uint32_t nwire;
    uint64_t bytes_sent[DF_MAX];
    uint64_t packets_sent[DF_MAX];
    uint32_t largest_packet;
    int sender;             /* whose tick is emitting */
    uint32_t loss_permille; /* datagrams lost at random (a fixed-seed xorshift) */
    uint64_t rng;
    uint64_t lost;
} dfleet_t;

/* n replicas "r0".."r<n-1>", all in each other's view, divisor n, ticks staggered by
 * interval / n, network delay 1 ms. cfg NULL: defaults. */
void df_init(dfleet_t *f, int n, const demand_config_t *cfg);
void df_free(dfleet_t *f);

/* Sets replica i's view: the replicas with live[j] true (self always), divisor = their count. */
void df_view(dfleet_t *f, int i, const bool *live);

/* Replica i stops: it ticks no more, and what is sent to or from it is lost. */
void df_kill(dfleet_t *f, int i);

/* Runs the clock to `until`: deliveries, early grants and ticks in time order. */
void df_run(dfleet_t *f, int64_t until);

/* Which replica owns (limit, key) in replica i's view (-1: none). */
int df_owner(const dfleet_t *f, int i, const cfg_limit_t *l, const char *key);

/* A share gcra limit, armed. */
cfg_limit_t df_limit(int64_t amount, int64_t period_ns, int64_t burst);

/* The first key "k<n>" whose owner in replica 0's view is replica `owner`. */
void df_key_owned_by(const dfleet_t *f, const cfg_limit_t *l, int owner, char *key, size_t size);

/*
 * Offered load for one (limit, key): evenly spaced arrivals at rate[i] per second at replica i,
 * each asking demand_arrive for its share and stepping real gcra (ratealg's effective-rate form)
 * with it. Counts are cumulative.
 */
typedef struct df_load {
    const cfg_limit_t *limit;
    const char *key;
    int64_t rate[DF_MAX];
    int64_t state[DF_MAX];
    uint64_t offered[DF_MAX], admitted[DF_MAX];
    int64_t started[DF_MAX]; /* when the current rate began */
    uint64_t done[DF_MAX];   /* arrivals made since then */
} df_load_t;

void df_load_init(df_load_t *ld, const cfg_limit_t *limit, const char *key);
/* Picks a key owned by replica `owner` (df_key_owned_by) and offers `per_s` of it at replica 0
 * from now on. */
void df_load_hot(dfleet_t *f, df_load_t *ld, const cfg_limit_t *limit, int owner, char *key,
                 size_t size, int64_t per_s);
/* Changes replica i's rate from now on. */
void df_load_rate(dfleet_t *f, df_load_t *ld, int i, int64_t per_s);

/* Called after every simulated millisecond with the fleet's admissions in it. */
typedef void (*df_observe_fn)(void *ctx, const dfleet_t *f, uint64_t admitted_this_ms);

/* Runs the fleet to `until` in 1 ms steps, driving the loads. observe may be NULL. */
void df_drive(dfleet_t *f, df_load_t *loads, int nloads, int64_t until, df_observe_fn observe,
              void *ctx);

#endif
