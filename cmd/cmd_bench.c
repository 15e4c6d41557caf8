/*
 * tokentriage bench [-s SOCK] [-c CONNECTIONS] [-p DEPTH] [-k KEYS] [-d SECONDS | -n COUNT]
 *                   [--level LEVEL] [--tokens N] [--json]
 *
 * A load generator for the decision socket: CONNECTIONS threads, each with its own connection
 * keeping DEPTH decide requests in flight (refilled in batches of half the depth, so writes
 * are batched as a real pipelining client batches them), over KEYS distinct subject ids at
 * LEVEL. Prints decisions/s and the round-trip latency percentiles (from sending a request to
 * reading its answer; with DEPTH > 1 that includes the wait behind earlier answers).
 */
#define _GNU_SOURCE /* asprintf */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cmd.h"

#define HELP                                                                                       \
    "usage: tokentriage bench [-s SOCKET] [-c CONNECTIONS] [-p DEPTH] [-k KEYS]\n"                 \
    "                         [-d SECONDS | -n COUNT] [--level LEVEL] [--tokens N] [--json]\n"     \
    "\n"                                                                                           \
    "Loads the daemon's socket and measures it: CONNECTIONS threads, each keeping DEPTH decide\n"  \
    "requests in flight over KEYS subject ids at LEVEL, then prints decisions/s, verdicts and "    \
    "the\n"                                                                                        \
    "round-trip latency percentiles. The decisions are real: they spend the limits' counters.\n"   \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET                                                                   \
    "  -c, --connections N  connections, one thread each, 1 to 4096 (default 1)\n"                 \
    "  -p, --depth N        requests in flight per connection, 1 to 65536 (default 1: "            \
    "unpipelined)\n"                                                                               \
    "  -k, --keys N         distinct subject ids, bench-0 .. bench-N-1 (default 1000)\n"           \
    "  -d, --duration S     seconds to run, 1 to 86400 (default 5)\n"                              \
    "  -n, --count N        decisions to send in all, instead of a duration\n"                     \
    "  --level LEVEL        the subject level the ids go under (default key)\n"                    \
    "  --tokens N           each decision's token cost (default: not sent)\n" CLI_HELP_JSON        \
        CLI_HELP_HELP "\n" CLI_HELP_EXIT

/* Log-linear latency histogram: 32 sub-buckets per power of two of nanoseconds (3% error). */
#define SUB 32
#define NBUCKETS (64 * SUB)

typedef struct worker {
    pthread_t thread;
    const char *sock;
    long long depth, keys, count; /* count: requests for this worker; 0 = until the deadline */
    int64_t deadline_ns;
    const char *level;
    long long tokens;
    int connect_error;
    int rc; /* first transport error */
    uint64_t done, admitted, denied, errors;
    uint64_t hist[NBUCKETS];
} worker_t;

static char **key_ids;

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int bucket(uint64_t ns)
{
    if (ns < SUB)
        return (int)ns;
    int log = 63 - __builtin_clzll(ns);
    int sub = (int)((ns >> (log - 5)) & (SUB - 1));
    int b = (log - 4) * SUB + sub;
    return b < NBUCKETS ? b : NBUCKETS - 1;
}

static double bucket_ns(int b)
{
    if (b < SUB)
        return b;
    int log = b / SUB + 4, sub = b % SUB;
    return (double)((uint64_t)1 << log) * (1.0 + (sub + 0.5) / SUB);
}

static void *run(void *arg)
{
    worker_t *w = arg;
    tt_client_t *c;
    if ((w->connect_error = tt_connect(&c, w->sock)) != 0)
        return NULL;
    tt_set_timeout(c, 10000);
    int64_t *sent_at = calloc((size_t)w->depth, sizeof(int64_t)); /* a FIFO of send times */
    tt_response_t *r = malloc(sizeof(*r));
    if (!sent_at || !r) {
        w->rc = TT_ENOMEM;
        goto out;
    }
    uint64_t head = 0, tail = 0, next_key = (uint64_t)(uintptr_t)w * 7919;
    bool sending = true;
    for (;;) {
        if (sending && tt_outstanding(c) <= (size_t)w->depth / 2) {
            while (tt_outstanding(c) < (size_t)w->depth) {
                if (w->count ? head >= (uint64_t)w->count : mono_ns() >= w->deadline_ns) {
                    sending = false;
                    break;
                }
                tt_pair_t p = {w->level, key_ids[next_key++ % (uint64_t)w->keys]};
                sent_at[head++ % (uint64_t)w->depth] = mono_ns();
                int rc = tt_send_decide(c, &p, 1, w->tokens, NULL);
                if (rc) {
                    w->rc = rc;
                    goto out;
                }
            }
        }
        if (tt_outstanding(c) == 0)
            break;
        int rc = tt_recv(c, r);
        if (rc != 0 && rc != TT_ESERVER) {
            w->rc = rc;
            break;
        }
        w->hist[bucket((uint64_t)(mono_ns() - sent_at[tail++ % (uint64_t)w->depth]))]++;
        w->done++;
        if (rc == TT_ESERVER)
            w->errors++;
        else if (r->admit)
            w->admitted++;
        else
            w->denied++;
    }
out:
    free(sent_at);
    free(r);
    tt_close(c);
    return NULL;
}

static double percentile(const uint64_t *hist, uint64_t total, double q)
{
    uint64_t want = (uint64_t)(q * (double)total), seen = 0;
    for (int b = 0; b < NBUCKETS; b++) {
        seen += hist[b];
        if (seen > want)
            return bucket_ns(b);
    }
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"connections", required_argument, NULL, 'c'},
                                         {"depth", required_argument, NULL, 'p'},
                                         {"keys", required_argument, NULL, 'k'},
                                         {"duration", required_argument, NULL, 'd'},
                                         {"count", required_argument, NULL, 'n'},
                                         {"level", required_argument, NULL, 'l'},
                                         {"tokens", required_argument, NULL, 't'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    const char *level = "key";
    long long conns = 1, depth = 1, keys = 1000, seconds = 5, count = 0, tokens = -1;
    int ch, rc;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "s:c:p:k:d:n:h", opts, HELP)) != -1) {
        int bad = 0;
        switch (ch) {
        case 'c':
            bad = cli_parse_count(optarg, "--connections", 1, 4096, HELP, &conns);
            break;
        case 'p':
            bad = cli_parse_count(optarg, "--depth", 1, 65536, HELP, &depth);
            break;
        case 'k':
            bad = cli_parse_count(optarg, "--keys", 1, 100000000, HELP, &keys);
            break;
        case 'd':
            bad = cli_parse_count(optarg, "--duration", 1, 86400, HELP, &seconds);
            break;
        case 'n':
            bad = cli_parse_count(optarg, "--count", 1, 1LL << 40, HELP, &count);
            break;
        case 'l':
            level = optarg;
            break;
        case 't':
            bad = cli_parse_count(optarg, "--tokens", 0, 1LL << 40, HELP, &tokens);
            break;
        default:
            if ((rc = cli_common_option(ch, &o, HELP)) != CLI_CONTINUE)
                return rc;
        }
        if (bad)
            return EX_USAGE_;
    }
    if (optind != argc)
        return cmd_usage_error(HELP, "unexpected argument \"%s\"", argv[optind]);
    char path[256];
    if (tt_socket_path(path, sizeof(path), o.sock, NULL, 0) != 0)
        return EX_USAGE_;
    key_ids = calloc((size_t)keys, sizeof(char *));
    worker_t *w = calloc((size_t)conns, sizeof(worker_t));
    if (!key_ids || !w)
        return EX_SOFTWARE_;
    for (long long i = 0; i < keys; i++)
        if (asprintf(&key_ids[i], "bench-%lld", i) < 0)
            return EX_SOFTWARE_;
    int64_t start = mono_ns();
    for (long long i = 0; i < conns; i++) {
        w[i] = (worker_t){.sock = path,
                          .depth = depth,
                          .keys = keys,
                          .level = level,
                          .tokens = tokens,
                          .deadline_ns = start + seconds * 1000000000LL,
                          .count = count ? count / conns + (i < count % conns) : 0};
        pthread_create(&w[i].thread, NULL, run, &w[i]);
    }
    static uint64_t hist[NBUCKETS];
    uint64_t done = 0, admitted = 0, denied = 0, errors = 0;
    int failure = 0;
    for (long long i = 0; i < conns; i++) {
        pthread_join(w[i].thread, NULL);
        if (w[i].connect_error || w[i].rc) {
            failure = w[i].connect_error ? w[i].connect_error : w[i].rc;
        }
        done += w[i].done, admitted += w[i].admitted, denied += w[i].denied;
        errors += w[i].errors;
        for (int b = 0; b < NBUCKETS; b++)
            hist[b] += w[i].hist[b];
    }
    double secs = (double)(mono_ns() - start) / 1e9;
    if (failure) {
        fprintf(stderr, "tokentriage bench: %s at %s\n", tt_strerror(failure), path);
        if (done == 0)
            return EX_UNAVAILABLE_;
    }
    double rate = (double)done / secs;
    double p50 = percentile(hist, done, 0.50) / 1e3, p99 = percentile(hist, done, 0.99) / 1e3,
           p999 = percentile(hist, done, 0.999) / 1e3;
    if (o.json)
        printf("{\"connections\":%lld,\"depth\":%lld,\"keys\":%lld,\"decisions\":%llu,"
               "\"seconds\":%.3f,\"decisions_per_s\":%.0f,\"admitted\":%llu,\"denied\":%llu,"
               "\"errors\":%llu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"p999_us\":%.1f}\n",
               conns, depth, keys, (unsigned long long)done, secs, rate,
               (unsigned long long)admitted, (unsigned long long)denied, (unsigned long long)errors,
               p50, p99, p999);
    else
        printf("connections %lld  depth %lld  keys %lld\n"
               "decisions   %llu in %.2f s = %.0f decisions/s\n"
               "verdicts    %llu admitted, %llu denied, %llu errors\n"
               "latency     p50 %.1f us  p99 %.1f us  p99.9 %.1f us\n",
               conns, depth, keys, (unsigned long long)done, secs, rate,
               (unsigned long long)admitted, (unsigned long long)denied, (unsigned long long)errors,
               p50, p99, p999);
    for (long long i = 0; i < keys; i++)
        free(key_ids[i]);
    free(key_ids);
    free(w);
    return failure && done == 0 ? EX_UNAVAILABLE_ : EX_OK_;
}
