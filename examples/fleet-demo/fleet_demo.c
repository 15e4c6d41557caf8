/*
 * fleet-demo: the share store at work, in one command (examples/fleet-demo/run.sh).
 *
 * Starts three `tokentriage serve` replicas on loopback (one gossip port each), all holding one
 * share limit: team_rpm, 600 a minute with a burst of 60, divided across the live replicas.
 * Drives load at each (20 decisions a second, six times its share) and prints, every 5 s, what
 * each replica admitted beside the fleet-wide total and the bound the replicas disclose
 * (burst_bound + sustained_bound x elapsed / period). After a minute it kills one replica
 * (SIGKILL) and shows the survivors re-divide: N goes from 3 to 2 within the disclosed
 * detect_within_s, each survivor's share from 200 to 300 a minute. It cleans up after itself
 * (the replicas die with it, whatever ends it).
 *
 * The replicas are run by tests/share/fleet.c, the same harness the fleet tests use.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet.h"
#include "tokentriage.h"

#define LIMIT "team_rpm"
#define PERIOD_MS 60000
#define PACE_MS 50 /* 20 decisions a second at each replica */
#define REPORT_MS 5000
#define BEFORE_MS 60000 /* a minute at three replicas */
#define AFTER_MS 30000  /* then half a minute after the kill */

static const char *const limits_yaml = "    - id: " LIMIT "\n"
                                       "      attach: { level: team }\n"
                                       "      type: rpm\n"
                                       "      amount: 600\n"
                                       "      period: 1m\n"
                                       "      burst: 60\n"
                                       "      store: share\n";

static fleet_t fleet;
static tt_client_t *client[3];
static long long admitted[3];

static void cleanup(void)
{
    for (int i = 0; i < 3; i++)
        tt_close(client[i]);
    fleet_teardown(&fleet);
}

static void on_signal(int sig)
{
    (void)sig;
    exit(1); /* runs cleanup */
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void load_once(void)
{
    tt_pair_t team = {.level = "team", .id = "t-42"};
    for (int i = 0; i < 3; i++) {
        tt_response_t r;
        if (client[i] && tt_decide(client[i], &team, 1, -1, &r) == 0 && r.admit)
            admitted[i]++;
    }
}

/* One line per report: every replica's N and admitted count, the fleet's total, the bound. */
static void report(int64_t t0, const fleet_row_t *bound)
{
    int64_t now = fleet_now_ms();
    printf("%5.1fs ", (double)(now - t0) / 1000);
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        fleet_row_t row;
        if (client[i] && fleet_query(client[i], LIMIT, &row) == 0)
            printf("| r%d N=%lld %-5s %5lld ", i, (long long)row.n, row.state, admitted[i]);
        else
            printf("| r%d %-14s %5lld ", i, "(dead)", admitted[i]);
        total += admitted[i];
    }
    double limit = bound->burst_bound + (double)bound->sustained_bound * (now - t0) / PERIOD_MS;
    printf("| fleet %5lld  bound %6.0f\n", total, limit);
    fflush(stdout);
}

/* Drives load for `ms`, reporting every REPORT_MS. */
static void run_for(int64_t t0, int64_t ms, const fleet_row_t *bound)
{
    int64_t end = fleet_now_ms() + ms, next = fleet_now_ms() + REPORT_MS;
    while (fleet_now_ms() < end) {
        load_once();
        if (fleet_now_ms() >= next) {
            report(t0, bound);
            next += REPORT_MS;
        }
        sleep_ms(PACE_MS);
    }
}

int main(void)
{
    setenv("TT_FLEET_LOOPBACK", "1", 1); /* loopback ports: no root needed */
    if (fleet_setup(&fleet, 3) != 0)
        return 1;
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    for (int i = 0; i < 3; i++)
        if (fleet_start(&fleet, i, limits_yaml) != 0) {
            fprintf(stderr, "fleet-demo: cannot start replica %d\n", i);
            return 1;
        }
    printf("three replicas on loopback (logs in %s), limit %s: 600 a minute, burst 60, "
           "store share\n",
           fleet.dir, LIMIT);
    /* Wait until every replica counts three and the divisors agree. */
    int64_t deadline = fleet_now_ms() + 30000;
    fleet_row_t row = {0};
    for (int ready = 0; ready < 3;) {
        ready = 0;
        for (int i = 0; i < 3; i++) {
            if (!client[i] && tt_connect(&client[i], fleet.r[i].sock) != 0)
                client[i] = NULL;
            ready += client[i] && fleet_query(client[i], LIMIT, &row) == 0 && row.n == 3 &&
                     row.converged;
        }
        if (fleet_now_ms() > deadline) {
            fprintf(stderr, "fleet-demo: the replicas did not converge (see %s/r*/log)\n",
                    fleet.dir);
            return 1;
        }
        sleep_ms(100);
    }
    printf("converged: N=3 everywhere, local share %lld a minute, sustained_bound %lld, "
           "burst_bound %lld, detect_within_s %lld\n\n",
           (long long)row.local_share, (long long)row.sustained_bound, (long long)row.burst_bound,
           (long long)row.detect_within_s);
    printf("20 decisions a second at each replica; admitted so far:\n");
    int64_t t0 = fleet_now_ms();
    run_for(t0, BEFORE_MS, &row);

    printf("\nSIGKILL r2: its share goes unused until the survivors detect it (at most %lld s)\n",
           (long long)row.detect_within_s);
    int64_t killed = fleet_now_ms();
    fleet_signal(&fleet, 2, SIGKILL);
    tt_close(client[2]);
    client[2] = NULL;
    for (int divided = 0; divided < 2 && fleet_now_ms() - killed < AFTER_MS;) {
        load_once();
        sleep_ms(PACE_MS);
        fleet_row_t r0, r1;
        divided = (fleet_query(client[0], LIMIT, &r0) == 0 && r0.n == 2) +
                  (fleet_query(client[1], LIMIT, &r1) == 0 && r1.n == 2);
        if (divided == 2)
            printf("the survivors divide by 2 after %.1f s\n",
                   (double)(fleet_now_ms() - killed) / 1000);
    }
    run_for(t0, AFTER_MS - (fleet_now_ms() - killed), &row);
    fleet_row_t after;
    if (fleet_query(client[0], LIMIT, &after) == 0)
        printf("\nr0 now: N=%lld, local share %lld a minute, sustained_bound %lld, %s\n",
               (long long)after.n, (long long)after.local_share, (long long)after.sustained_bound,
               after.converged ? "converged" : "not converged yet");
    return 0;
}
