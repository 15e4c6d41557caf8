/*
 * Two real `tokentriage serve` daemons on one real Redis Cluster (3 primaries, 3 replicas),
 * through the client library: every one of 1000 keys, spread over the slots, is one counter
 * for both daemons, so the fleet admits `amount` per key between them, not `amount` each.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/daemon.h"
#include "cluster.h"

#define KEYS 1000
#define AMOUNT 5

static rc_cluster_t cluster;
static tt_daemon_t a, b;
static tt_client_t *ca, *cb;

/* The limit, and the cluster seeds a daemon starts from (each daemon gets different ones). */
static void limits_for(char *buf, size_t n, const char *seed_x, const char *seed_y)
{
    /* a period of an hour: nothing refills while the test runs, so the count is exact; fail
     * closed: a decision Redis did not make is a denial, never an admission */
    snprintf(buf, n,
             "    - id: key_rph\n      attach: { level: key }\n      type: rpm\n"
             "      amount: %d\n      period: 1h\n      burst: %d\n      store: redis\n"
             "      posture: { fail: closed }\n"
             "shared_state:\n  redis: { cluster: [\"%s\", \"%s\"], timeout: 2s }\n",
             AMOUNT, AMOUNT, seed_x, seed_y);
}

static void setup(void)
{
    cr_assert_eq(rc_start(&cluster), 0, "the cluster did not start");
    char limits[1024];
    limits_for(limits, sizeof(limits), cluster.seeds[0], cluster.seeds[2]);
    cr_assert_eq(tt_daemon_start(&a, limits, NULL), 0, "daemon a did not start");
    limits_for(limits, sizeof(limits), cluster.seeds[1], cluster.node[4].address);
    cr_assert_eq(tt_daemon_start(&b, limits, NULL), 0, "daemon b did not start");
    cr_assert((ca = tt_daemon_client(&a)) && (cb = tt_daemon_client(&b)));
    tt_set_timeout(ca, 10000);
    tt_set_timeout(cb, 10000);
}

static void teardown(void)
{
    tt_close(ca);
    tt_close(cb);
    tt_daemon_stop(&a);
    tt_daemon_stop(&b);
    rc_stop(&cluster);
}

TestSuite(cluster_daemons, .init = setup, .fini = teardown, .timeout = 90);

/* True once a decision through c on a fresh key was admitted: Redis answered it (fail closed
 * denies everything Redis did not decide). */
static bool decided_by_redis(tt_client_t *c, int attempt)
{
    char id[32];
    snprintf(id, sizeof(id), "probe-%p-%d", (void *)c, attempt);
    tt_pair_t s[] = {{"key", id}};
    tt_response_t r;
    return tt_decide(c, s, 1, -1, &r) == 0 && r.admit;
}

static void wait_connected(tt_client_t *c)
{
    long long deadline = rh_now_ms() + 15000;
    for (int attempt = 0; !decided_by_redis(c, attempt); attempt++)
        cr_assert_lt(rh_now_ms(), deadline, "the daemon's cluster store never connected");
}

Test(cluster_daemons, two_daemons_admit_amount_per_key_between_them_over_1000_keys)
{
    wait_connected(ca);
    wait_connected(cb);
    static int admitted[KEYS];
    const int batch = 100; /* keys per pipelined round: 2 x 100 x AMOUNT x 2 requests */
    for (int first = 0; first < KEYS; first += batch) {
        char ids[100][16];
        for (int k = 0; k < batch; k++) {
            snprintf(ids[k], sizeof(ids[k]), "k-%d", first + k);
            tt_pair_t s[] = {{"key", ids[k]}};
            for (int i = 0; i < AMOUNT; i++) { /* twice the amount, half through each */
                cr_assert_eq(tt_send_decide(ca, s, 1, -1, NULL), 0);
                cr_assert_eq(tt_send_decide(cb, s, 1, -1, NULL), 0);
            }
        }
        cr_assert_eq(tt_flush(ca), 0);
        cr_assert_eq(tt_flush(cb), 0);
        tt_client_t *both[] = {ca, cb};
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < batch; k++)
                for (int i = 0; i < AMOUNT; i++) {
                    tt_response_t r;
                    cr_assert_eq(tt_recv(both[d], &r), 0, "%s", r.error_message);
                    admitted[first + k] += r.admit;
                }
    }
    for (int k = 0; k < KEYS; k++)
        cr_assert_eq(admitted[k], AMOUNT, "key k-%d: the fleet admitted %d, not %d", k, admitted[k],
                     AMOUNT);
}
