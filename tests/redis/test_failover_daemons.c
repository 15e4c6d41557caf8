/*
 * Failover seen through decisions: a real `tokentriage serve` on a Redis Cluster (3 primaries, 3
 * replicas) and on a Sentinel-watched primary, both with a password and TLS (the store reaches
 * every cluster node and the primary Sentinel names with the same settings), a primary SIGKILLed
 * under a steady pipelined load. Asserted on the decisions themselves: every request answered
 * exactly once, in order; decisions Redis could not make followed the posture (fail closed: a
 * deny with retry 1), and only between the kill and the promotion; Redis resumed deciding;
 * and on the new primaries every key holds exactly what the daemon admitted, or less by at most
 * what it admitted in the last second before the kill (writes the dead primary acknowledged but
 * never replicated: the window docs/redis.md states), or more by at most the calls answered by
 * the posture (a call that timed out after Redis did it). The gap is measured and logged.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../integration/daemon.h"
#include "certs.h"
#include "cluster.h"
#include "harness.h"

#define KEYS 64
#define PASSWORD "fail0ver-pw"
#define T_NS (INT64_C(3600) * 1000000000) /* amount 8760 per 8760h: one hour per admission */

static rt_certs_t certs;
static tt_daemon_t d;
static tt_client_t *client;
static char secret_path[128];

/* ---- the load ----------------------------------------------------------------------------- */

typedef struct key_tally {
    int admitted, posture, recent; /* recent: admitted in the last second before the kill */
} key_tally_t;

typedef struct run {
    key_tally_t key[KEYS];
    long long requests, answers, denied_otherwise;
    long long kill_ms, first_posture_ms, last_posture_ms, back_ms;
    uint64_t last_seq;
    bool seq_in_order;
} run_t;

/* One round: a decision per key, pipelined, every answer read and checked. */
static void round_of(run_t *r, long long now_ms, bool before_kill)
{
    char ids[KEYS][16];
    for (int k = 0; k < KEYS; k++) {
        snprintf(ids[k], sizeof(ids[k]), "k-%d", k);
        tt_pair_t s[] = {{"key", ids[k]}};
        cr_assert_eq(tt_send_decide(client, s, 1, -1, NULL), 0);
        r->requests++;
    }
    cr_assert_eq(tt_flush(client), 0);
    for (int k = 0; k < KEYS; k++) {
        tt_response_t resp;
        cr_assert_eq(tt_recv(client, &resp), 0, "%s", resp.error_message);
        cr_assert_eq(resp.kind, TT_KIND_DECISION, "%s", resp.error_message);
        r->answers++;
        if (resp.seq <= r->last_seq && r->last_seq != 0)
            r->seq_in_order = false;
        r->last_seq = resp.seq;
        if (resp.admit) {
            r->key[k].admitted++;
            if (before_kill)
                r->key[k].recent++;
        } else if (resp.retry_after == 1) {
            r->key[k].posture++; /* fail closed: Redis had no answer (or not yet connected) */
            if (r->kill_ms != 0 && r->first_posture_ms == 0)
                r->first_posture_ms = now_ms;
            if (r->kill_ms != 0)
                r->last_posture_ms = now_ms;
        } else {
            r->denied_otherwise++;
        }
    }
}

static bool all_admitted(run_t *r)
{
    key_tally_t before[KEYS];
    memcpy(before, r->key, sizeof(before));
    round_of(r, rh_now_ms(), false);
    for (int k = 0; k < KEYS; k++)
        if (r->key[k].admitted == before[k].admitted)
            return false;
    return true;
}

/* Load until Redis decides everything, one second more, then `kill`, then until Redis has
 * decided every key for 40 rounds in a row after the gap; 10 ms between rounds (about 8760 per
 * key would exhaust a key, and the test is bounded far below that). */
static void run_failover(run_t *r, void (*kill_it)(void *), void *arg)
{
    memset(r, 0, sizeof(*r));
    r->seq_in_order = true;
    long long deadline = rh_now_ms() + 20000;
    while (!all_admitted(r))
        cr_assert_lt(rh_now_ms(), deadline, "the daemon's store never connected");
    long long start = rh_now_ms();
    while (rh_now_ms() - start < 1000) { /* the last second before the kill: "recent" */
        round_of(r, rh_now_ms(), true);
        usleep(10000); /* pacing the load, not waiting for a state */
    }
    kill_it(arg);
    r->kill_ms = rh_now_ms();
    int clean = 0;
    deadline = r->kill_ms + 40000;
    while (clean < 40) {
        cr_assert_lt(rh_now_ms(), deadline, "decisions never came back to Redis");
        long long now = rh_now_ms();
        long long posture_before = r->last_posture_ms;
        round_of(r, now, false);
        if (r->last_posture_ms != posture_before || r->first_posture_ms == 0) {
            clean = 0;
        } else if (++clean == 1) {
            r->back_ms = now;
        }
        usleep(10000); /* pacing the load */
    }
}

/* What Redis holds for each key: its GCRA TAT read back as a count of admissions. */
static void counted(rh_server_t *nodes, int n_nodes, long long start_wall_ns, int out[KEYS])
{
    memset(out, 0, sizeof(int) * KEYS);
    for (int i = 0; i < n_nodes; i++) {
        if (nodes[i].pid == 0)
            continue;
        redisContext *c = rh_connect(&nodes[i]);
        cr_assert_not_null(c);
        redisReply *role = redisCommand(c, "ROLE");
        bool primary =
            role && role->type == REDIS_REPLY_ARRAY && strcmp(role->element[0]->str, "master") == 0;
        freeReplyObject(role);
        redisReply *keys = primary ? redisCommand(c, "KEYS tokentriage:*") : NULL;
        for (size_t j = 0; keys && j < keys->elements; j++) {
            const char *name = keys->element[j]->str, *id = strstr(name, ":k-");
            if (id == NULL)
                continue; /* a probe of another test */
            int k = atoi(id + 3);
            redisReply *v = redisCommand(c, "GET %s", name);
            cr_assert(v && v->type == REDIS_REPLY_STRING);
            long long tat = strtoll(v->str, NULL, 10);
            /* tat = first admission + count x T, the first within seconds of the start */
            out[k] += (int)((tat - start_wall_ns) / T_NS);
            freeReplyObject(v);
        }
        freeReplyObject(keys);
        redisFree(c);
    }
}

static long long wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void check(const run_t *r, const int counted_[KEYS], const char *where)
{
    cr_assert_eq(r->answers, r->requests, "%s: every request answered once", where);
    cr_assert(r->seq_in_order, "%s: answers out of order (or one twice)", where);
    cr_assert_eq(r->denied_otherwise, 0, "%s: a deny that was not the posture's", where);
    cr_assert_gt(r->first_posture_ms, 0, "%s: the gap was never noticed", where);
    long long admitted = 0, in_redis = 0, lost = 0, extra = 0;
    for (int k = 0; k < KEYS; k++) {
        const key_tally_t *t = &r->key[k];
        admitted += t->admitted;
        in_redis += counted_[k];
        cr_assert_leq(counted_[k], t->admitted + t->posture,
                      "%s: key k-%d counted %d, admitted %d, posture %d: counted twice", where, k,
                      counted_[k], t->admitted, t->posture);
        cr_assert_geq(counted_[k], t->admitted - t->recent,
                      "%s: key k-%d counted %d, admitted %d: lost more than the last second "
                      "before the kill (%d)",
                      where, k, counted_[k], t->admitted, t->recent);
        if (counted_[k] < t->admitted)
            lost += t->admitted - counted_[k];
        else
            extra += counted_[k] - t->admitted;
    }
    cr_log_info("%s: posture from %lld ms to %lld ms after the kill, Redis deciding every key "
                "again %lld ms after it; %lld decisions, %lld admitted, %lld counted in Redis "
                "(%lld lost with the dead primary, %lld decided by Redis after a timeout)",
                where, r->first_posture_ms - r->kill_ms, r->last_posture_ms - r->kill_ms,
                r->back_ms - r->kill_ms, r->answers, admitted, in_redis, lost, extra);
}

static void write_secret(const char *dir, const char *text)
{
    snprintf(secret_path, sizeof(secret_path), "%s/redis-password", dir);
    cr_assert_eq(rh_write_file(secret_path, text), 0);
}

static const char *const LIMIT =
    "    - id: key_rph\n      attach: { level: key }\n      type: rpm\n"
    "      amount: 8760\n      period: 8760h\n      store: redis\n"
    "      posture: { fail: closed }\n";

/* ---- Redis Cluster ------------------------------------------------------------------------ */

static rc_cluster_t cluster;
static bool in_sync(rh_server_t *node);

/* Every replica's link to its primary is up: what a primary acknowledged now reaches it. */
static bool replicas_in_sync(void)
{
    int synced = 0;
    for (int i = 0; i < RC_NODES; i++)
        synced += in_sync(&cluster.node[i]);
    return synced == RC_NODES / 2;
}

static void cluster_setup(void)
{
    cr_assert_eq(rt_certs_make(&certs), 0);
    rc_options_t o = {
        .password = PASSWORD, .cert = certs.server.pem, .key = certs.server.key, .ca = certs.ca};
    cr_assert_eq(rc_start_with(&cluster, &o), 0, "the cluster did not start");
    long long deadline = rh_now_ms() + 20000;
    while (!replicas_in_sync()) {
        cr_assert_lt(rh_now_ms(), deadline, "the replicas never synced over TLS");
        usleep(20000); /* polling the replication links, bounded by the deadline */
    }
    write_secret(certs.dir, PASSWORD "\n");
    char limits[2048];
    snprintf(limits, sizeof(limits),
             "%sshared_state:\n  redis:\n    cluster: [\"%s\", \"%s\"]\n    timeout: 200ms\n"
             "    password_file: %s\n    tls: { ca_file: %s, server_name: redis.test }\n",
             LIMIT, cluster.seeds[0], cluster.seeds[1], secret_path, certs.ca);
    cr_assert_eq(tt_daemon_start(&d, limits, NULL), 0, "the daemon did not start");
    cr_assert_not_null(client = tt_daemon_client(&d));
    tt_set_timeout(client, 10000);
}

static void cluster_teardown(void)
{
    tt_close(client);
    tt_daemon_stop(&d);
    rc_stop(&cluster);
    rt_certs_remove(&certs);
}

static void kill_node(void *arg)
{
    rh_kill(arg);
}

Test(failover, a_cluster_primary_killed_under_load_over_tls, .init = cluster_setup,
     .fini = cluster_teardown, .timeout = 120)
{
    long long start = wall_ns();
    static run_t r;
    int victim = rc_primary_of(&cluster, 0, 0);
    cr_assert(victim >= 0);
    run_failover(&r, kill_node, &cluster.node[victim]);
    int in_redis[KEYS];
    counted(cluster.node, RC_NODES, start, in_redis);
    check(&r, in_redis, "cluster");
}

/* ---- Sentinel ----------------------------------------------------------------------------- */

static rh_server_t primary, replica, sentinel;
static const char *primary_args[24], *replica_args[24], *sentinel_args[16];
static char primary_tls[512], replica_tls[512], sentinel_tls[512], sentinel_address[32];
static char primary_port[16];

/* The TLS arguments for a data node, then the password's and replication's. */
static void data_args(const char *args[24], char storage[512], bool replica_of_primary)
{
    int port = rh_free_port();
    rt_server_args(&certs, &certs.server, port, "optional", args, storage);
    int n = 10;
    const char *more[] = {
        "--tls-replication", "yes", "--requirepass", PASSWORD, "--masterauth", PASSWORD, NULL};
    for (int i = 0; more[i]; i++)
        args[n++] = more[i];
    if (replica_of_primary) {
        args[n++] = "--replicaof";
        args[n++] = "127.0.0.1";
        args[n++] = primary_port;
    }
    args[n] = NULL;
}

static bool in_sync(rh_server_t *node)
{
    redisContext *c = rh_connect(node);
    redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
    bool ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 &&
              r->element[3]->type == REDIS_REPLY_STRING &&
              strcmp(r->element[3]->str, "connected") == 0;
    freeReplyObject(r);
    if (c)
        redisFree(c);
    return ok;
}

static void sentinel_setup(void)
{
    cr_assert_eq(rt_certs_make(&certs), 0);
    data_args(primary_args, primary_tls, false);
    cr_assert_eq(rh_start_with(&primary, primary_args, NULL), 0, "the primary did not start");
    primary.password = PASSWORD;
    snprintf(primary_port, sizeof(primary_port), "%.15s", primary_tls); /* its TLS port */
    data_args(replica_args, replica_tls, true);
    cr_assert_eq(rh_start_with(&replica, replica_args, NULL), 0, "the replica did not start");
    replica.password = PASSWORD;
    long long synced = rh_now_ms() + 20000;
    while (!in_sync(&replica)) {
        cr_assert_lt(rh_now_ms(), synced, "the replica never synced over TLS");
        usleep(20000); /* polling the replication link, bounded by the deadline */
    }
    int port = rh_free_port();
    rt_server_args(&certs, &certs.server, port, "optional", sentinel_args, sentinel_tls);
    snprintf(sentinel_address, sizeof(sentinel_address), "127.0.0.1:%d", port);
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "sentinel monitor mymaster 127.0.0.1 %s 1\n"
             "sentinel down-after-milliseconds mymaster 500\n"
             "sentinel failover-timeout mymaster 5000\n"
             "sentinel auth-pass mymaster %s\n"
             "requirepass sentinel-%s\n"
             "tls-replication yes\n",
             primary_port, PASSWORD, PASSWORD);
    cr_assert_eq(rh_start_with(&sentinel, sentinel_args, conf), 0, "the Sentinel did not start");
    sentinel.password = "sentinel-" PASSWORD;
    long long deadline = rh_now_ms() + 20000;
    while (rh_sentinel_replicas(&sentinel, "mymaster") != 1) {
        cr_assert_lt(rh_now_ms(), deadline, "the Sentinel never saw the replica");
        usleep(20000); /* polling the Sentinel's view, bounded by the deadline */
    }
    write_secret(certs.dir, PASSWORD "\n");
    char sentinel_secret[160];
    snprintf(sentinel_secret, sizeof(sentinel_secret), "%s/sentinel-password", certs.dir);
    cr_assert_eq(rh_write_file(sentinel_secret, "sentinel-" PASSWORD "\n"), 0);
    char limits[2048];
    snprintf(limits, sizeof(limits),
             "%sshared_state:\n  redis:\n    sentinels: [\"%s\"]\n    master: mymaster\n"
             "    timeout: 200ms\n    password_file: %s\n    sentinel_password_file: %s\n"
             "    tls: { ca_file: %s, server_name: redis.test }\n",
             LIMIT, sentinel_address, secret_path, sentinel_secret, certs.ca);
    cr_assert_eq(tt_daemon_start(&d, limits, NULL), 0, "the daemon did not start");
    cr_assert_not_null(client = tt_daemon_client(&d));
    tt_set_timeout(client, 10000);
}

static void sentinel_teardown(void)
{
    tt_close(client);
    tt_daemon_stop(&d);
    rh_stop(&sentinel);
    rh_stop(&replica);
    rh_stop(&primary);
    rt_certs_remove(&certs);
}

Test(failover, a_sentinel_primary_killed_under_load_over_tls, .init = sentinel_setup,
     .fini = sentinel_teardown, .timeout = 120)
{
    long long start = wall_ns();
    static run_t r;
    run_failover(&r, kill_node, &primary);
    rh_server_t nodes[] = {replica};
    int in_redis[KEYS];
    counted(nodes, 1, start, in_redis);
    check(&r, in_redis, "sentinel");
}
