/*
 * The async store on a real Redis Cluster (3 primaries, 3 replicas, tests/redis/cluster.c):
 * keys over every slot decided on their primaries, the scripts loaded on each; a resharding
 * under load followed through MOVED and ASK with no error and no count lost; a primary
 * SIGKILLed: refused at once (the posture decides) until its replica is promoted, then resumed
 * on the new primary. Counts are exact: a fixed window with `now` passed in never rolls over,
 * so what a key holds is the number of admissions it had.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "redis_store.h"
#include "store_test.h"
#include "slots.h"

#define MS INT64_C(1000000)
#define NOW (INT64_C(1767225600) * 1000000000) /* a fixed now: the window never moves */
#define KEYS 1000

static rc_cluster_t cluster;
static uv_loop_t loop;

#ifdef TT_CLUSTER_TLS
/* test_redis_cluster_tls: the same tests on a cluster the store reaches over TLS with a
 * password (CLUSTER SLOTS and MOVED then name the TLS ports); the checks use the plain ports */
#include "certs.h"
static rt_certs_t certs;

static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rt_certs_make(&certs), 0);
    rc_options_t o = {.password = "cluster-pw",
                      .cert = certs.server.pem,
                      .key = certs.server.key,
                      .ca = certs.ca};
    cr_assert_eq(rc_start_with(&cluster, &o), 0, "the cluster did not start");
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    rc_stop(&cluster);
    rt_certs_remove(&certs);
}

/* Node i as the store names it: its TLS address. */
static const char *store_name(int i)
{
    return cluster.tls_address[i];
}
#else
static void setup(void)
{
    uv_loop_init(&loop);
    cr_assert_eq(rc_start(&cluster), 0, "the cluster did not start");
}

static void teardown(void)
{
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    rc_stop(&cluster);
}

static const char *store_name(int i)
{
    return cluster.node[i].address;
}
#endif

TestSuite(cluster, .init = setup, .fini = teardown, .timeout = 90);

static rds_store_t *open_cluster(int64_t timeout_ns)
{
    rds_options_t o = {.n_cluster = 3,
                       .timeout_ns = timeout_ns,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 100 * MS};
    for (int i = 0; i < 3; i++)
        o.cluster[i] = cluster.seeds[i];
#ifdef TT_CLUSTER_TLS
    rds_credentials_t cred = {.redis = {.password = "cluster-pw", .password_len = 10}};
    rds_tls_options_t tls = {.ca_file = certs.ca, .server_name = "redis.test", .verify = true};
    o.credentials = &cred;
    o.tls = &tls;
#endif
    return rs_store_new(&loop, &o);
}

/* ---- calls: one fixed-window step at NOW, counted per key ---------------------------------- */

typedef struct load {
    rds_store_t *store;
    ra_limiter_t limiter;
    char keys[KEYS][RDS_KEY_MAX];
    int n_keys;
    int admitted[KEYS];
    int sent, answered, failed, refused;
    long long worst_ms; /* the longest a call waited for its answer */
    char last_error[256];
} load_t;

typedef struct call {
    load_t *load;
    int key;
    long long sent_ms;
} call_t;

static void on_done(void *arg, const rds_outcome_t *o)
{
    call_t *c = arg;
    load_t *l = c->load;
    long long waited = rh_now_ms() - c->sent_ms;
    if (waited > l->worst_ms)
        l->worst_ms = waited;
    l->answered++;
    if (o->status == 0 && o->result.admit)
        l->admitted[c->key]++;
    else if (o->status < 0) {
        l->failed++;
        snprintf(l->last_error, sizeof(l->last_error), "%s", o->error);
    }
    free(c);
}

static int send_one(load_t *l, int key)
{
    call_t *c = malloc(sizeof(*c));
    *c = (call_t){l, key, rh_now_ms()};
    rds_op_t op = {.cost = 1, .has_now = true, .now_ns = NOW};
    int rc =
        rds_store_call(l->store, &l->limiter, l->keys[key], strlen(l->keys[key]), &op, on_done, c);
    if (rc < 0) {
        free(c);
        l->refused++;
        return rc;
    }
    l->sent++;
    return 0;
}

static bool all_answered(void *arg)
{
    load_t *l = arg;
    return l->answered == l->sent;
}

/* A counter key as the daemon makes them, NUL-terminated. */
static void make_key(char *out, const char *id)
{
    int n = rds_key(out, 0x5eed, id, strlen(id));
    cr_assert_gt(n, 0);
    out[n] = '\0';
}

static load_t *new_load(rds_store_t *s)
{
    load_t *l = calloc(1, sizeof(*l));
    l->store = s;
    cr_assert_eq(ra_limiter_init(&l->limiter, RA_FIXED_WINDOW, 65535, 3600000 * MS, 65535), 0);
    return l;
}

/* What key i holds on the primary serving it: the window's current count. */
static int stored_count(load_t *l, int i)
{
    const char *key = l->keys[i];
    int p = rc_primary_of(&cluster, 0, rds_key_slot(key, strlen(key)));
    cr_assert_geq(p, 0);
    redisContext *c = rh_connect(&cluster.node[p]);
    redisReply *r = redisCommand(c, "GET %s", key);
    cr_assert(r && r->type == REDIS_REPLY_STRING, "key %s is missing on its primary", key);
    int64_t state = strtoll(r->str, NULL, 10);
    freeReplyObject(r);
    redisFree(c);
    return (int)(state & 0xffff);
}

/* ---- tests -------------------------------------------------------------------------------- */

Test(cluster, keys_over_every_slot_are_decided_on_their_primaries)
{
    rds_store_t *s = open_cluster(2000 * MS);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never ready");
    load_t *l = new_load(s);
    for (int i = 0; i < KEYS; i++) {
        char id[16];
        snprintf(id, sizeof(id), "s%d", i);
        make_key(l->keys[i], id);
    }
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < KEYS; i++)
            cr_assert_eq(send_one(l, i), 0);
    cr_assert(rh_run_until(&loop, all_answered, l, 20000));
    cr_assert_eq(l->failed, 0, "%s", l->last_error);
    int primaries_used[RC_NODES] = {0};
    for (int i = 0; i < KEYS; i++) {
        cr_assert_eq(l->admitted[i], 3);
        cr_assert_eq(stored_count(l, i), 3, "key %s", l->keys[i]);
        primaries_used[rc_primary_of(&cluster, 0, rds_key_slot(l->keys[i], strlen(l->keys[i])))]++;
    }
    int used = 0;
    for (int i = 0; i < RC_NODES; i++)
        used += primaries_used[i] > 0;
    cr_assert_eq(used, 3, "keys spread over all three primaries");
    rds_node_stats_t nodes[8];
    cr_assert_eq(rds_store_nodes(s, nodes, 8), 3, "one connection per primary");
    for (int i = 0; i < 3; i++)
        cr_assert(nodes[i].ready && nodes[i].calls > 0 && nodes[i].replies == nodes[i].calls, "%s",
                  nodes[i].node);
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_eq(st.reloads, 0, "EVALSHA found the scripts on every primary: the handshake");
    rds_store_close(s);
    free(l);
}

/* Keys whose slots are all below `below` (the first slots of the first primary). */
static void keys_in_low_slots(load_t *l, int n, int below)
{
    char id[24];
    for (unsigned i = 0; l->n_keys < n; i++) {
        snprintf(id, sizeof(id), "m%u", i);
        make_key(l->keys[l->n_keys], id);
        const char *k = l->keys[l->n_keys];
        if (rds_key_slot(k, strlen(k)) < below)
            l->n_keys++;
    }
}

/* Keeps `depth` calls in flight over the load's keys, round robin, from a 1 ms timer. */
typedef struct driver {
    uv_timer_t timer;
    load_t *load;
    int depth, next;
    bool stop;
} driver_t;

static void on_drive(uv_timer_t *t)
{
    driver_t *d = t->data;
    load_t *l = d->load;
    while (!d->stop && l->sent - l->answered < d->depth) {
        if (send_one(l, d->next) < 0)
            break; /* refused: counted; the next tick tries again */
        d->next = (d->next + 1) % l->n_keys;
    }
}

static void drive(driver_t *d, load_t *l, int depth)
{
    *d = (driver_t){.load = l, .depth = depth};
    uv_timer_init(&loop, &d->timer);
    d->timer.data = d;
    uv_timer_start(&d->timer, on_drive, 1, 1);
}

static void stop_driving(driver_t *d)
{
    d->stop = true;
    uv_close((uv_handle_t *)&d->timer, NULL);
}

typedef struct program {
    pid_t pid;
    int status;
} program_t;

static bool program_ended(void *arg)
{
    program_t *p = arg;
    if (p->status == -2)
        p->status = rh_poll_program(p->pid);
    return p->status != -2;
}

Test(cluster, a_resharding_under_load_is_followed_through_moved_and_ask_losing_nothing)
{
    cr_assert_eq(rc_primary_of(&cluster, 0, 0), 0, "node 0 serves the first slots");
    char from[41], to[41];
    cr_assert_eq(rc_node_id(&cluster, 0, from), 0);
    cr_assert_eq(rc_node_id(&cluster, 1, to), 0);
    rds_store_t *s = open_cluster(2000 * MS);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never ready");
    load_t *l = new_load(s);
    keys_in_low_slots(l, 400, 300);
    driver_t d;
    drive(&d, l, 32);
    const char *argv[24] = {"redis-cli"};
    int n = 1;
#ifdef TT_CLUSTER_TLS
    /* over TLS, so that the nodes it reads (and has MIGRATE to) are named by their TLS ports */
    const char *tls[] = {"--tls", "--cacert",       certs.ca,
                         "-a",    cluster.password, "--no-auth-warning"};
    for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++)
        argv[n++] = tls[i];
#endif
    const char *rest[] = {
        "--cluster", "reshard",         store_name(0), "--cluster-from", from, "--cluster-to",
        to,          "--cluster-slots", "300",         "--cluster-yes",  NULL};
    memcpy(argv + n, rest, sizeof(rest));
    program_t reshard = {.status = -2};
    cr_assert_eq(rh_spawn_program(argv, &reshard.pid), 0);
    bool ended = rh_run_until(&loop, program_ended, &reshard, 60000);
    stop_driving(&d);
    cr_assert(ended, "the resharding did not end within a minute");
    cr_assert_eq(reshard.status, 0, "redis-cli --cluster reshard failed");
    cr_assert(rh_run_until(&loop, all_answered, l, 10000));
    cr_assert_eq(rc_primary_of(&cluster, 0, 0), 1, "slot 0 moved to node 1");
    cr_assert_eq(rc_primary_of(&cluster, 0, 299), 1, "slot 299 moved to node 1");

    cr_assert_eq(l->failed, 0, "an error was answered: %s", l->last_error);
    cr_assert_eq(l->refused, 0, "a call was refused during the resharding");
    int total = 0;
    for (int i = 0; i < l->n_keys; i++) {
        cr_assert_eq(stored_count(l, i), l->admitted[i], "key %s: %d admitted, Redis holds %d",
                     l->keys[i], l->admitted[i], stored_count(l, i));
        total += l->admitted[i];
    }
    cr_assert_eq(total, l->sent, "every call admitted (the window holds 65535)");
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_assert_gt(st.redirects, 0, "the resharding was seen through redirects");
    cr_log_info("resharding 300 slots under load: %d calls, %" PRIu64 " redirects, %" PRIu64
                " maps",
                l->sent, st.redirects, st.refreshes);
    rds_store_close(s);
    free(l);
}

/* Moves an empty slot from primary `from` to primary `to` as redis-cli's resharding does, on
 * every primary, without telling the store. */
static void move_empty_slot(int slot, int from, int to)
{
    char from_id[41], to_id[41];
    cr_assert_eq(rc_node_id(&cluster, from, from_id), 0);
    cr_assert_eq(rc_node_id(&cluster, to, to_id), 0);
    const struct {
        int node;
        const char *how, *id;
    } steps[] = {{to, "IMPORTING", from_id},
                 {from, "MIGRATING", to_id},
                 {to, "NODE", to_id},
                 {from, "NODE", to_id},
                 {3 - from - to, "NODE", to_id}};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        redisContext *c = rh_connect(&cluster.node[steps[i].node]);
        cr_assert_not_null(c);
        redisReply *r =
            redisCommand(c, "CLUSTER SETSLOT %d %s %s", slot, steps[i].how, steps[i].id);
        cr_assert(r && r->type != REDIS_REPLY_ERROR, "CLUSTER SETSLOT %d %s: %s", slot,
                  steps[i].how, r ? r->str : "no reply");
        freeReplyObject(r);
        redisFree(c);
    }
}

typedef struct slot_wait {
    int slot, to;
} slot_wait_t;

static bool slot_moved(void *arg)
{
    slot_wait_t *w = arg;
    for (int i = 0; i < 3; i++)
        if (rc_primary_of(&cluster, i, w->slot) != w->to)
            return false;
    return true;
}

Test(cluster, a_batch_whose_slot_moved_is_redirected_whole_and_each_call_answered_once)
{
    rds_store_t *s = open_cluster(2000 * MS);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never ready");
    load_t *l = new_load(s);
    for (int i = 0; i < 20; i++) /* one slot: the batch's */
        snprintf(l->keys[i], sizeof(l->keys[i]), "{moving}:%d", i);
    l->n_keys = 20;
    int slot = rds_key_slot(l->keys[0], strlen(l->keys[0]));
    int from = rc_primary_of(&cluster, 0, slot), to = (from + 1) % 3;
    cr_assert(from >= 0 && from < 3 && rc_is_primary(&cluster, to));
    move_empty_slot(slot, from, to);
    slot_wait_t w = {slot, to};
    cr_assert(rh_run_until(&loop, slot_moved, &w, 10000), "the primaries never agreed");
    rds_stats_t before, after;
    rds_store_stats(s, &before);
    for (int i = 0; i < 20; i++) /* the store still routes the slot to `from` */
        cr_assert_eq(send_one(l, i), 0);
    cr_assert(rh_run_until(&loop, all_answered, l, 10000));
    cr_assert_eq(l->answered, 20, "a call was answered twice");
    cr_assert_eq(l->failed, 0, "%s", l->last_error);
    rds_store_stats(s, &after);
    cr_assert_eq(after.batches - before.batches, 1, "20 calls of one slot in one script call");
    cr_assert_geq(after.redirects - before.redirects, 1, "the batch was not redirected");
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(l->admitted[i], 1, "key %s admitted %d times", l->keys[i], l->admitted[i]);
        cr_assert_eq(stored_count(l, i), 1, "key %s on its new primary", l->keys[i]);
    }
    rds_store_close(s);
    free(l);
}

typedef struct failover {
    rc_cluster_t *cluster;
    int promoted; /* the node now serving slot 0, once it is not node 0 */
} failover_t;

static bool replica_promoted(void *arg)
{
    failover_t *f = arg;
    int p = rc_primary_of(f->cluster, 1, 0);
    if (p > 0 && rc_is_primary(f->cluster, p))
        f->promoted = p;
    return f->promoted > 0;
}

/* The last call on key 0 was decided by Redis. */
typedef struct probe {
    load_t *load;
    int before;
} probe_t;

static bool decided_again(void *arg)
{
    probe_t *p = arg;
    return p->load->admitted[0] > p->before;
}

Test(cluster, a_primary_killed_follows_the_posture_then_resumes_on_its_promoted_replica)
{
    const int64_t timeout = 100 * MS;
    rds_store_t *s = open_cluster(timeout);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never ready");
    load_t *l = new_load(s);
    keys_in_low_slots(l, 50, 5000); /* all on node 0 */
    for (int i = 0; i < l->n_keys; i++)
        cr_assert_eq(send_one(l, i), 0);
    cr_assert(rh_run_until(&loop, all_answered, l, 5000));
    cr_assert_eq(l->failed, 0, "%s", l->last_error);

    driver_t d;
    drive(&d, l, 8);
    rh_kill(&cluster.node[0]);
    long long killed = rh_now_ms();
    failover_t f = {.cluster = &cluster};
    cr_assert(rh_run_until(&loop, replica_promoted, &f, 30000), "no replica was promoted");
    long long promoted = rh_now_ms();
    /* the gap: every call was answered by the posture (refused at once, an error, a timeout),
     * none waited past the timeout */
    cr_assert_gt(l->refused + l->failed, 0, "the gap was not noticed");
    cr_assert_leq(l->worst_ms, 100 + 150, "a call waited %lld ms in the gap", l->worst_ms);
    probe_t p = {.load = l, .before = l->admitted[0]};
    bool resumed = rh_run_until(&loop, decided_again, &p, 10000);
    long long back = rh_now_ms();
    stop_driving(&d);
    cr_assert(resumed, "decisions did not resume on the new primary");
    cr_assert(rh_run_until(&loop, all_answered, l, 5000));
    rds_stats_t st;
    rds_store_stats(s, &st);
    cr_log_info("failover: promoted %lld ms after the kill, decisions back %lld ms after that, "
                "%" PRIu64 " maps",
                promoted - killed, back - promoted, st.refreshes);
    cr_assert_leq(back - promoted, 2000, "resumed %lld ms after the promotion was visible",
                  back - promoted);
    cr_assert(rh_run_until(&loop, rs_ready, s, 5000), "the store is whole again");
    rds_node_stats_t nodes[8];
    size_t n = rds_store_nodes(s, nodes, 8);
    const char *promoted_at = store_name(f.promoted);
    bool found = false;
    for (size_t i = 0; i < n && i < 8; i++) {
        cr_assert_str_neq(nodes[i].node, store_name(0), "the dead primary is dropped");
        found = found || strcmp(nodes[i].node, promoted_at) == 0;
    }
    cr_assert(found, "the promoted replica is connected");
    rds_store_close(s);
    free(l);
}

/* The replica of node `primary` (its ROLE names primary's port), or -1. */
static int replica_of(int primary)
{
    for (int i = 0; i < RC_NODES; i++) {
        redisContext *c = rh_connect(&cluster.node[i]);
        redisReply *r = c ? redisCommand(c, "ROLE") : NULL;
        bool mine = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
                    strcmp(r->element[0]->str, "slave") == 0 &&
                    r->element[2]->type == REDIS_REPLY_INTEGER &&
                    (r->element[2]->integer == cluster.node[primary].port || /* or the TLS port */
                     r->element[2]->integer == atoi(strrchr(store_name(primary), ':') + 1));
        freeReplyObject(r);
        if (c)
            redisFree(c);
        if (mine)
            return i;
    }
    return -1;
}

typedef struct promoted {
    rds_store_t *store;
    const char *address;
} promoted_t;

/* The store wants, and has ready, a connection to `address`. */
static bool store_uses(void *arg)
{
    promoted_t *p = arg;
    rds_node_stats_t nodes[RDS_NODES_MAX + RDS_SEEDS_MAX];
    size_t n = rds_store_nodes(p->store, nodes, sizeof(nodes) / sizeof(nodes[0]));
    for (size_t i = 0; i < n && i < sizeof(nodes) / sizeof(nodes[0]); i++)
        if (strcmp(nodes[i].node, p->address) == 0 && nodes[i].ready)
            return true;
    return false;
}

static bool promoted_everywhere(void *arg)
{
    int *who = arg;
    return rc_primary_of(&cluster, who[0], 0) == who[0] &&
           rc_primary_of(&cluster, who[1], 0) == who[0];
}

Test(cluster, the_map_follows_a_failover_on_its_own_with_no_call_made)
{
    rds_store_t *s = open_cluster(500 * MS);
    cr_assert(rh_run_until(&loop, rs_ready, s, 10000), "never ready");
    int old = rc_primary_of(&cluster, 0, 0), replica = replica_of(old);
    cr_assert(old >= 0 && replica >= 0, "slot 0's primary %d has no replica", old);
    /* a manual failover: the replica takes over, the old primary stays up as its replica, so
     * no connection of the store is lost and nothing tells it but the map */
    int who[2] = {replica, old};
    bool done = false;
    for (int attempt = 0; attempt < 4 && !done; attempt++) { /* a manual failover may time out */
        redisContext *c = rh_connect(&cluster.node[replica]);
        redisReply *r = redisCommand(c, "CLUSTER FAILOVER");
        cr_assert(r && r->type == REDIS_REPLY_STATUS, "CLUSTER FAILOVER: %s", r ? r->str : "");
        freeReplyObject(r);
        redisFree(c);
        done = rh_run_until(&loop, promoted_everywhere, who, 8000);
    }
    cr_assert(done, "the failover never happened");
    promoted_t p = {s, store_name(replica)};
    cr_assert(rh_run_until(&loop, store_uses, &p, 15000),
              "the store did not learn of the new primary without a call");
    rds_stats_t before;
    rds_store_stats(s, &before);
    cr_assert_geq(before.refreshes, 2);
    /* a call for slot 0 goes straight to the new primary: no MOVED */
    static load_t l;
    memset(&l, 0, sizeof(l));
    l.store = s;
    cr_assert_eq(ra_limiter_init(&l.limiter, RA_FIXED_WINDOW, 1000, 3600000 * MS, 1000), 0);
    char id[RDS_KEY_MAX];
    rc_key_in_slot(0, id, sizeof(id));
    snprintf(l.keys[0], sizeof(l.keys[0]), "%s", id);
    l.n_keys = 1;
    cr_assert_eq(send_one(&l, 0), 0);
    cr_assert(rh_run_until(&loop, all_answered, &l, 5000));
    cr_assert_eq(l.admitted[0], 1, "%s", l.last_error);
    rds_stats_t after;
    rds_store_stats(s, &after);
    cr_assert_eq(after.redirects, before.redirects, "the call was redirected: the map was stale");
    rds_store_close(s);
}
