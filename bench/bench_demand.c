/*
 * bench_demand: what demand-aware division costs on the wire and on the decision path.
 *
 * Four replicas (demand cores) exchange their reports and grants directly (no sockets, no
 * seal: add membership's frame and seal, about 200 bytes per datagram, to get UDP payload
 * bytes). For 10, 100 and 1000 hot keys (16-byte subject ids, one limit) it runs 20 simulated
 * seconds and prints the bytes and datagrams each replica sends per second, in two layouts:
 *   one  each hot key's traffic arrives at one replica (the keys spread over the four)
 *   all  every hot key's traffic arrives at all four replicas (the worst case: every replica
 *        reports every key it does not own, every owner grants three remote reporters)
 * Then the wall-clock cost of demand_arrive (the decision path's look-up) and of demand_tick.
 * Usage: bench_demand [seconds]   (simulated seconds, default 20)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "demand.h"

#define REPLICAS 4
#define MS INT64_C(1000000)
#define S (1000 * MS)
#define T0 (INT64_C(1700000000) * S)

static demand_core_t *core[REPLICAS];
static char ids[REPLICAS][8];
static uint64_t tx_bytes[REPLICAS], tx_packets[REPLICAS];
static int sender;
static int64_t clock_now;

/* Delivers at once: demand_receive never emits, so this cannot recurse. */
static void emit(void *ctx, const char *to, size_t to_len, const uint8_t *bytes, size_t len)
{
    (void)ctx;
    tx_bytes[sender] += len;
    tx_packets[sender]++;
    for (int j = 0; j < REPLICAS; j++)
        if (strlen(ids[j]) == to_len && memcmp(ids[j], to, to_len) == 0)
            demand_receive(core[j], clock_now, ids[sender], strlen(ids[sender]), bytes, len, NULL);
}

static cfg_limit_t bench_limit(void)
{
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, "team_rpm");
    strcpy(l.level, "team");
    l.store = CFG_STORE_SHARE;
    l.amount = 1000;
    l.period_ns = S;
    l.burst = 100;
    char msg[256];
    if (cfg_limit_arm(&l, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "bench_demand: %s\n", msg);
        exit(1);
    }
    return l;
}

static void fleet_up(void)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    demand_member_t m[REPLICAS];
    for (int i = 0; i < REPLICAS; i++) {
        snprintf(ids[i], sizeof(ids[i]), "node-%d", i);
        m[i] = (demand_member_t){ids[i], strlen(ids[i])};
    }
    for (int i = 0; i < REPLICAS; i++) {
        if (demand_new(&core[i], &cfg, ids[i], strlen(ids[i]), NULL) < 0) {
            fprintf(stderr, "bench_demand: demand_new failed\n");
            exit(1);
        }
        demand_set_members(core[i], m, REPLICAS, REPLICAS, T0);
    }
    memset(tx_bytes, 0, sizeof(tx_bytes));
    memset(tx_packets, 0, sizeof(tx_packets));
}

static void fleet_down(void)
{
    for (int i = 0; i < REPLICAS; i++)
        demand_free(core[i]);
}

/* Runs `seconds` with `hot` keys, 100 arrivals per key per interval at each replica that sees
 * it; every replica ticks every 500 ms, staggered. Prints bytes/s and datagrams/s per replica. */
static void wire_cost(int hot, bool everywhere, int seconds)
{
    cfg_limit_t l = bench_limit();
    fleet_up();
    char key[32];
    int64_t step = 500 * MS / REPLICAS;
    for (int64_t t = T0; t < T0 + seconds * S; t += step) {
        clock_now = t;
        int i = (int)((t - T0) / step % REPLICAS); /* whose tick it is */
        for (int k = 0; k < hot; k++) {
            if (!everywhere && k % REPLICAS != i)
                continue;
            snprintf(key, sizeof(key), "team-%011d", k);
            demand_arrive(core[i], &l, key, strlen(key), 100, t);
        }
        sender = i;
        demand_tick(core[i], t, emit, NULL);
    }
    double bytes = 0, packets = 0;
    for (int i = 0; i < REPLICAS; i++) {
        bytes += (double)tx_bytes[i];
        packets += (double)tx_packets[i];
    }
    printf("%-5d %-4s %12.0f %12.1f %12.0f\n", hot, everywhere ? "all" : "one",
           bytes / REPLICAS / seconds, packets / REPLICAS / seconds,
           (bytes + packets * 200) / REPLICAS / seconds);
    fleet_down();
}

static double since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a->tv_sec) * 1e9 + (double)(b.tv_nsec - a->tv_nsec);
}

/* The decision path: demand_arrive over `keys` tracked keys, and a tick over them. */
static void cpu_cost(int keys)
{
    cfg_limit_t l = bench_limit();
    fleet_up();
    char(*names)[32] = calloc((size_t)keys, 32);
    for (int k = 0; k < keys; k++)
        snprintf(names[k], 32, "team-%011d", k);
    const int rounds = 2000000;
    struct timespec a;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile uint32_t sink = 0; /* keeps the calls from being optimised away */
    for (int r = 0; r < rounds; r++) {
        const char *key = names[r % keys];
        sink = demand_arrive(core[0], &l, key, 16, 1, T0 + r);
    }
    double arrive_ns = since(&a) / rounds;
    sender = 0;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int r = 0; r < 20; r++) {
        clock_now = T0 + S + r * 500 * MS;
        demand_tick(core[0], clock_now, emit, NULL);
    }
    double tick_us = since(&a) / 20 / 1000;
    (void)sink;
    printf("%-6d %14.1f %14.1f\n", keys, arrive_ns, tick_us);
    free(names);
    fleet_down();
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 20;
    if (seconds < 1)
        seconds = 20;
    printf("# wire cost per replica, 4 replicas, 16-byte keys, %d simulated s\n", seconds);
    printf("%-5s %-4s %12s %12s %12s\n", "hot", "at", "payload B/s", "datagrams/s", "+200B frame");
    for (int hot = 10; hot <= 1000; hot *= 10) {
        wire_cost(hot, false, seconds);
        wire_cost(hot, true, seconds);
    }
    printf("# decision path and tick, replica 0\n%-6s %14s %14s\n", "keys", "arrive ns/op",
           "tick us");
    for (int keys = 10; keys <= 1000; keys *= 10)
        cpu_cost(keys);
    return 0;
}
