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
#include "slots.h"

#define MS INT64_C(1000000)
#define NOW (INT64_C(1767225600) * 1000000000) /* a fixed now: the window never moves */
#define KEYS 1000

static rc_cluster_t cluster;
static uv_loop_t loop;

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

TestSuite(cluster, .init = setup, .fini = teardown, .timeout = 90);

static rds_store_t *open_cluster(int64_t timeout_ns)
{
    rds_options_t o = {.n_cluster = 3,
                       .timeout_ns = timeout_ns,
                       .backoff_min_ns = 10 * MS,
                       .backoff_max_ns = 100 * MS};
    for (int i = 0; i < 3; i++)
        o.cluster[i] = cluster.seeds[i];
    rds_store_t *s;
    char err[256];
    cr_assert_eq(rds_store_new(&loop, &o, &s, err, sizeof(err)), 0, "%s", err);
    return s;
}

static bool is_ready(void *s)
{
    return rds_store_ready(s);
}

/* ---- calls: one fixed-window step at NOW, counted per key ---------------------------------- */

typedef struct load {
    rds_store_t *store;
    ra_limiter_t limiter;
    char keys[KEYS][RDS_KEY_MAX];
    int n_keys;
    int admitted[KEYS];
    int sent, answered, failed, refused;
    char last_error[256];
} load_t;

typedef struct call {
    load_t *load;
    int key;
} call_t;

static void on_done(void *arg, const rds_outcome_t *o)
{
    call_t *c = arg;
    load_t *l = c->load;
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
    *c = (call_t){l, key};
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
    cr_assert(rh_run_until(&loop, is_ready, s, 10000), "never ready");
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
