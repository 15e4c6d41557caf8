/*
 * bench_redis: decisions per second through the redis store, end to end: gov_decide on an
 * engine whose one limit is `store: redis`, the hook, hiredis on a libuv loop, the Lua script
 * in a real Redis, and back. `depth` decisions are kept in flight (1: one at a time, each
 * waiting for its reply; 64: pipelined), each completion sends the next.
 *
 *   bench_redis ADDRESS [--depth N] [--seconds S] [--algorithm gcra|fixed_window|sliding_window]
 *               [--keys K] [--tls CA_FILE]
 *
 * ADDRESS is host:port or a unix socket path, or cluster:HOST:PORT[,HOST:PORT...] for the seeds
 * of a Redis Cluster (bench/bench_cluster.sh runs one beside a single Redis). --tls speaks TLS,
 * verifying the server against CA_FILE (bench/bench_tls.sh runs both beside each other). Prints
 * one line of results, with this process's CPU per decision (the daemon's side of it).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "gov.h"

typedef struct bench {
    gov_engine_t *e;
    uv_loop_t *loop;
    uint64_t done, admitted, failed, sent;
    uint64_t stop_at_ns;
    int keys;
    bool stopping;
    int in_flight;
} bench_t;

typedef struct slot {
    bench_t *b;
    gov_result_t out;
    char id[16];
    gov_subject_t s;
} slot_t;

static int64_t realtime(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * RA_NS_PER_S + ts.tv_nsec;
}

static void send_one(slot_t *sl);

static void finished(slot_t *sl)
{
    bench_t *b = sl->b;
    b->done++;
    b->admitted += sl->out.admit;
    if (uv_hrtime() >= b->stop_at_ns) {
        b->stopping = true;
        b->in_flight--;
        return;
    }
    send_one(sl);
}

static void on_done(gov_result_t *r, void *ctx)
{
    (void)r;
    finished(ctx);
}

/* Sends one decision from this slot; decisions answered at once (Redis refused) loop here. */
static void send_one(slot_t *sl)
{
    bench_t *b = sl->b;
    for (;;) {
        int n = snprintf(sl->id, sizeof(sl->id), "k%d", (int)(b->sent++ % (uint64_t)b->keys));
        sl->s.n = 1;
        sl->s.pairs[0] = (gov_pair_t){"team", 4, sl->id, (size_t)n};
        int rc = gov_decide(b->e, NULL, &sl->s, GOV_NO_TOKENS, realtime(), &sl->out, on_done, sl);
        if (rc == GOV_PENDING)
            return;
        b->failed++;
        b->done++;
        if (uv_hrtime() >= b->stop_at_ns) {
            b->stopping = true;
            b->in_flight--;
            return;
        }
    }
}

static void on_ready_check(uv_timer_t *t)
{
    rds_gov_t *g = t->data;
    if (rds_store_ready(g->store))
        uv_timer_stop(t);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_redis ADDRESS [--depth N] [--seconds S] "
                        "[--algorithm A] [--keys K]\n");
        return 64;
    }
    const char *address = argv[1], *alg = "gcra", *ca = NULL;
    int depth = 1, keys = 1000;
    double seconds = 3;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--depth") == 0)
            depth = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--algorithm") == 0)
            alg = argv[i + 1];
        else if (strcmp(argv[i], "--keys") == 0)
            keys = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--tls") == 0)
            ca = argv[i + 1];
    }
    if (depth < 1 || depth > 4096 || keys < 1 || seconds <= 0) {
        fprintf(stderr, "bench_redis: depth 1..4096, keys >= 1, seconds > 0\n");
        return 64;
    }
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, "bench");
    strcpy(l.level, "team");
    l.type = CFG_TYPE_RPM;
    l.store = CFG_STORE_REDIS;
    l.amount = 60000; /* high enough that most decisions admit and write */
    l.period_ns = 60 * RA_NS_PER_S;
    l.burst = 60000;
    l.posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    char msg[512];
    if (ra_algorithm_parse(alg, &l.algorithm) < 0 || cfg_limit_arm(&l, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "bench_redis: algorithm %s: %s\n", alg, msg);
        return 64;
    }
    gov_engine_t *e;
    gov_options_t eo = {.hash_seed = {1, 2}};
    tt_err_t err;
    if (gov_engine_create(&e, &eo, &l, 1, false, &err) < 0) {
        fprintf(stderr, "bench_redis: %s\n", tt_err_format(&err, msg, sizeof(msg)));
        return 70;
    }
    uv_loop_t *loop = uv_default_loop();
    rds_gov_t g;
    rds_tls_options_t tls = {.ca_file = ca, .verify = true};
    rds_options_t o = {.timeout_ns = 1000 * INT64_C(1000000), .tls = ca ? &tls : NULL};
    char seeds[1024];
    if (strncmp(address, "cluster:", 8) == 0) { /* seeds, comma-separated */
        snprintf(seeds, sizeof(seeds), "%s", address + 8);
        for (char *save, *t = strtok_r(seeds, ",", &save); t && o.n_cluster < RDS_SEEDS_MAX;
             t = strtok_r(NULL, ",", &save))
            o.cluster[o.n_cluster++] = t;
    } else {
        o.address = address;
    }
    if (rds_gov_attach(&g, e, loop, &o, &err) < 0) {
        fprintf(stderr, "bench_redis: %s\n", tt_err_format(&err, msg, sizeof(msg)));
        return 64;
    }
    uv_timer_t wait;
    uv_timer_init(loop, &wait);
    wait.data = &g;
    uv_timer_start(&wait, on_ready_check, 1, 1);
    uint64_t give_up = uv_hrtime() + 5 * UINT64_C(1000000000);
    while (!rds_store_ready(g.store) && uv_hrtime() < give_up)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&wait, NULL);
    if (!rds_store_ready(g.store)) {
        rds_stats_t st;
        rds_store_stats(g.store, &st);
        fprintf(stderr, "bench_redis: not connected: %s\n", st.last_error);
        return 69;
    }
    bench_t b = {.e = e, .loop = loop, .keys = keys};
    slot_t *slots = calloc((size_t)depth, sizeof(*slots));
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    uint64_t start = uv_hrtime();
    b.stop_at_ns = start + (uint64_t)(seconds * 1e9);
    b.in_flight = depth;
    for (int i = 0; i < depth; i++) {
        slots[i].b = &b;
        send_one(&slots[i]);
    }
    while (b.in_flight > 0)
        uv_run(loop, UV_RUN_ONCE);
    double took = (double)(uv_hrtime() - start) / 1e9;
    getrusage(RUSAGE_SELF, &after);
    double cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec + after.ru_stime.tv_sec -
                          before.ru_stime.tv_sec) *
                     1e6 +
                 (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec +
                          after.ru_stime.tv_usec - before.ru_stime.tv_usec);
    rds_stats_t st;
    rds_store_stats(g.store, &st);
    printf("redis store%s%s, %s, depth %d, %d keys: %.0f decisions/s (%" PRIu64 " in %.2f s; "
           "%" PRIu64 " admitted, %" PRIu64 " not answered by redis, %" PRIu64 " timeouts); "
           "%.2f us CPU per decision\n",
           o.n_cluster ? " (cluster)" : "", ca ? " over TLS" : "", alg, depth, keys,
           (double)b.done / took, b.done, took, b.admitted, b.failed, st.timeouts,
           b.done ? cpu / (double)b.done : 0);
    rds_gov_close(&g);
    uv_run(loop, UV_RUN_DEFAULT);
    gov_engine_destroy(e);
    free(slots);
    return 0;
}
