/*
 * bench_engine: nanoseconds per gov_decide at 1, 10k and 1M distinct keys, and bytes per
 * counter at 1M keys, by the table's own accounting and by the process's resident set.
 *
 *   bench_engine [decisions per run, default 2000000] [only this many keys]
 *
 * One thread, the engine alone (no socket), timed in thread CPU time. Subject ids are generated
 * before anything is measured. Two configs: one rpm limit, and the embedded default's shape (an rpm
 * limit per key and a tpm limit per team, disclosure on), which is what a served request costs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"

#define S RA_NS_PER_S

/* Thread CPU time: the build machine is shared, and time spent descheduled is not ours. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec;
}

static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (size_t)sysconf(_SC_PAGESIZE);
}

static cfg_limit_t limit(const char *id, const char *level, cfg_type_t type, int64_t amount,
                         int64_t burst)
{
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, id);
    strcpy(l.level, level);
    l.type = type;
    l.amount = amount;
    l.period_ns = 60 * S;
    l.burst = burst;
    l.posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    char msg[256];
    if (cfg_limit_arm(&l, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "arm: %s\n", msg);
        exit(1);
    }
    return l;
}

static char (*ids)[16];
static size_t *id_lens;

static gov_engine_t *engine(const cfg_limit_t *ls, size_t n, size_t initial)
{
    gov_engine_t *e;
    tt_err_t err;
    gov_options_t o = {
        .max_counters = 4u << 20, .initial_counters = initial, .hash_seed = {0x1234, 0x5678}};
    if (gov_engine_create(&e, &o, ls, n, true, &err) < 0) {
        char text[TT_ERR_TEXT_MAX];
        fprintf(stderr, "engine: %s\n", tt_err_format(&err, text, sizeof(text)));
        exit(1);
    }
    return e;
}

/* `decisions` decisions cycling over `keys` keys, all at the same `now` (so no key goes idle
 * and none is reclaimed mid-run); returns ns per decision. */
static double run(gov_engine_t *e, size_t keys, size_t decisions, int64_t *now, int64_t tokens)
{
    gov_subject_t s = {.n = 2};
    s.pairs[0] = (gov_pair_t){"key", 3, NULL, 0};
    s.pairs[1] = (gov_pair_t){"team", 4, "team-1", 6};
    gov_result_t r;
    size_t admitted = 0;
    int64_t t0 = cpu_ns();
    for (size_t i = 0; i < decisions; i++) {
        size_t k = i % keys;
        s.pairs[0].id = ids[k];
        s.pairs[0].id_len = id_lens[k];
        if (gov_decide(e, NULL, &s, tokens, *now, &r, NULL, NULL) == 0 && r.admit)
            admitted++;
    }
    int64_t t1 = cpu_ns();
    if (admitted != decisions)
        fprintf(stderr, "note: %zu of %zu admitted\n", admitted, decisions);
    return (double)(t1 - t0) / (double)decisions;
}

int main(int argc, char **argv)
{
    size_t decisions = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
    size_t only = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
    const size_t max_keys = 1000000;
    ids = malloc(max_keys * sizeof(*ids));
    id_lens = malloc(max_keys * sizeof(*id_lens));
    for (size_t i = 0; i < max_keys; i++)
        id_lens[i] = (size_t)snprintf(ids[i], sizeof(ids[i]), "k-%zu", i);

    /* T = 60 ns with a 1e9 depth (60 s): every decision of a run admits */
    cfg_limit_t one[] = {limit("key_rpm", "key", CFG_TYPE_RPM, 1000000000, 1000000000)};
    cfg_limit_t dflt[] = {
        limit("key_rpm", "key", CFG_TYPE_RPM, 1000000000, 1000000000),
        limit("team_tpm", "team", CFG_TYPE_TPM, 1000000000, 1000000000),
    };
    const size_t key_counts[] = {1, 10000, 1000000};
    printf("%-28s %10s %12s\n", "config", "keys", "ns/decide");
    for (int c = 0; c < 2; c++) {
        for (size_t k = 0; k < 3; k++) {
            size_t keys = key_counts[k];
            if (only && keys != only)
                continue;
            gov_engine_t *e = c == 0 ? engine(one, 1, keys) : engine(dflt, 2, keys);
            int64_t now = INT64_C(1700000000) * S;
            run(e, keys, keys, &now, 100); /* every key gets its counter first */
            double ns = run(e, keys, decisions, &now, 100);
            printf("%-28s %10zu %12.1f\n", c == 0 ? "1 rpm limit" : "rpm/key + tpm/team + hdrs",
                   keys, ns);
            gov_engine_destroy(e);
        }
    }

    if (only)
        return 0;
    /* bytes per counter at 1M keys: grown the ordinary way, not pre-sized */
    size_t rss0 = rss_bytes();
    cfg_limit_t ordinary = limit("key_rpm", "key", CFG_TYPE_RPM, 1000, 1000);
    gov_engine_t *e = engine(&ordinary, 1, 0);
    int64_t now = INT64_C(1700000000) * S;
    int64_t worst = 0; /* the longest single decision: where a stop-the-world step would show */
    gov_subject_t s = {.n = 1};
    gov_result_t r;
    for (size_t i = 0; i < max_keys; i++) {
        s.pairs[0] = (gov_pair_t){"key", 3, ids[i], id_lens[i]};
        int64_t t0 = cpu_ns();
        gov_decide(e, NULL, &s, 0, now, &r, NULL, NULL);
        int64_t dt = cpu_ns() - t0;
        worst = dt > worst ? dt : worst;
    }
    size_t rss1 = rss_bytes();
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    printf("\ncounters %llu, table %llu bytes: %.1f bytes/counter (table accounting)\n",
           (unsigned long long)m.counters, (unsigned long long)m.table_bytes,
           (double)m.table_bytes / (double)m.counters);
    printf("resident set grew %zu bytes: %.1f bytes/counter (RSS)\n", rss1 - rss0,
           (double)(rss1 - rss0) / (double)m.counters);
    printf("longest single decision while growing to 1M keys: %.3f ms (growth is incremental; "
           "no step touches the whole table)\n",
           (double)worst / 1e6);
    gov_engine_destroy(e);
    free(ids);
    free(id_lens);
    return 0;
}
