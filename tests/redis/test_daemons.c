/*
 * Two real `tokentriage serve` daemons sharing one real redis-server, through the client
 * library: one counter for both, no rate headers for a redis limit, Redis killed under load
 * (posture.fail open: the local fallback decides, promptly) and brought back (resumes).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/daemon.h"
#include "harness.h"

static rh_server_t server;
static tt_daemon_t a, b;
static tt_client_t *ca, *cb;

static void setup(void)
{
    cr_assert_eq(rh_start(&server), 0, "redis-server did not start");
    /* a reaches Redis over TCP, b over its unix socket: one server either way */
    char limits[1024], address[128];
    const char *fmt = "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n"
                      "      amount: 300\n      period: 1m\n      burst: 60\n      store: redis\n"
                      "      posture: { fail: open }\n"
                      "shared_state:\n  redis: { address: \"%s\", timeout: 100ms }\n";
    snprintf(limits, sizeof(limits), fmt, server.address);
    cr_assert_eq(tt_daemon_start(&a, limits, NULL), 0, "daemon a did not start");
    snprintf(address, sizeof(address), "unix:%s", server.sock);
    snprintf(limits, sizeof(limits), fmt, address);
    cr_assert_eq(tt_daemon_start(&b, limits, NULL), 0, "daemon b did not start");
    cr_assert((ca = tt_daemon_client(&a)) && (cb = tt_daemon_client(&b)));
    tt_set_timeout(ca, 5000);
    tt_set_timeout(cb, 5000);
}

static void teardown(void)
{
    tt_close(ca);
    tt_close(cb);
    tt_daemon_stop(&a);
    tt_daemon_stop(&b);
    rh_stop(&server);
}

TestSuite(daemons, .init = setup, .fini = teardown, .timeout = 60);

/* True once a decision on `probe` through c left its key in Redis: that daemon's redis store
 * is connected (before that, posture.fail decides and Redis sees nothing). */
static bool decided_by_redis(tt_client_t *c, const char *probe)
{
    tt_pair_t s[] = {{"team", probe}};
    tt_response_t r;
    if (tt_decide(c, s, 1, -1, &r) != 0)
        return false;
    redisContext *rc = rh_connect(&server);
    redisReply *keys = redisCommand(rc, "KEYS tokentriage:{*:%s}", probe);
    bool found = keys && keys->type == REDIS_REPLY_ARRAY && keys->elements == 1;
    freeReplyObject(keys);
    redisFree(rc);
    return found;
}

static void wait_connected(tt_client_t *c, const char *probe)
{
    long long deadline = rh_now_ms() + 10000;
    while (!decided_by_redis(c, probe))
        cr_assert_lt(rh_now_ms(), deadline, "the daemon's redis store never connected");
}

typedef struct burst {
    int admitted, answered;
    bool headers;
    long long took_ms;
} burst_t;

/* n decisions pipelined on each client, interleaved, then every answer read. */
static burst_t run_burst(const char *team, int n)
{
    tt_pair_t s[] = {{"team", team}};
    burst_t out = {0};
    long long start = rh_now_ms();
    for (int i = 0; i < n; i++) {
        cr_assert_eq(tt_send_decide(ca, s, 1, -1, NULL), 0);
        cr_assert_eq(tt_send_decide(cb, s, 1, -1, NULL), 0);
    }
    cr_assert_eq(tt_flush(ca), 0);
    cr_assert_eq(tt_flush(cb), 0);
    tt_client_t *both[] = {ca, cb};
    for (int k = 0; k < 2; k++) {
        tt_response_t r;
        while (tt_outstanding(both[k]) > 0) {
            cr_assert_eq(tt_recv(both[k], &r), 0, "%s", r.error_message);
            out.answered++;
            out.admitted += r.admit;
            out.headers = out.headers || tt_header(&r, "RateLimit") ||
                          tt_header(&r, "X-Ratelimit-Remaining-Requests");
        }
    }
    out.took_ms = rh_now_ms() - start;
    return out;
}

Test(daemons, two_daemons_on_one_redis_admit_one_burst_of_60_not_120)
{
    wait_connected(ca, "probe-a");
    wait_connected(cb, "probe-b");
    burst_t r = run_burst("t-42", 60);
    cr_assert_eq(r.answered, 120);
    long long grace = r.took_ms / 200 + 1; /* the counter refills one per 200 ms */
    cr_assert(r.admitted >= 60 && r.admitted <= 60 + grace, "admitted %d of 120 in %lld ms",
              r.admitted, r.took_ms);
    cr_assert_not(r.headers, "a redis-backed limit was disclosed in the rate headers");
}

Test(daemons, redis_killed_under_load_falls_back_promptly_and_resumes_when_back)
{
    wait_connected(ca, "probe-a");
    wait_connected(cb, "probe-b");
    rh_kill(&server);
    /* each daemon's fallback limiter counts alone: 60 each, and nobody waits on a dead Redis */
    burst_t down = run_burst("t-7", 70);
    cr_assert_eq(down.answered, 140);
    cr_assert(down.admitted >= 120 && down.admitted <= 122, "fallback admitted %d", down.admitted);
    cr_assert_lt(down.took_ms, 2000, "140 decisions took %lld ms with Redis down", down.took_ms);

    cr_assert_eq(rh_restart(&server), 0);
    wait_connected(ca, "probe-a2");
    wait_connected(cb, "probe-b2");
    burst_t back = run_burst("t-8", 60);
    long long grace = back.took_ms / 200 + 1;
    cr_assert(back.admitted >= 60 && back.admitted <= 60 + grace,
              "after the restart: admitted %d of 120", back.admitted);
}
