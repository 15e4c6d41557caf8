/*
 * The Lua assets agree with ratealg step for step: every line of the tests/vectors files, then a
 * seeded random sweep over the whole int64 domain (edges included), run by a real redis-server
 * with `now` passed in. Each step is checked three ways: the script's reply against ratealg,
 * against the line's expected fields, and what the key holds afterwards (the new state on an
 * admission, expiring once idle; the old state, untouched, on a denial). The checks go to Redis
 * in batches of 1 to RDS_BATCH_MAX operations (seeded sizes), as the store sends them, each
 * operation on a key of its own; a seeded sequence on a few keys is decided batched and one by
 * one and must come out the same, field by field.
 */
#include <criterion/criterion.h>
#include <glob.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ratealg.h"
#include "script.h"

/*
 * Built twice. Plain: one redis-server, each op sent as the script command on a synchronous
 * connection. With TT_VECTORS_CLUSTER: a 3-primary Redis Cluster, each op through the async
 * store's cluster path (slot map, one connection per primary, the scripts its handshake
 * loaded), over three keys that live on three different primaries.
 */
#ifdef TT_VECTORS_CLUSTER
#include "cluster.h"
#include "redis_store.h"
#include "slots.h"

static rc_cluster_t cluster;
static uv_loop_t loop;
static rds_store_t *store;
#else
static rh_server_t server;
#endif
static redisContext *conn;     /* plain: the server; cluster: tags[0]'s primary */
static redisContext *conns[3]; /* the connection that holds tags[i]'s keys */
static char tags[3][16];       /* hash tags: batches take turns on them (cluster: a primary each) */
static char shas[RDS_SCRIPT_COUNT][RDS_SHA_LEN + 1];

/* Key j of a batch on tag t: "{<tag>}:<j>", so a batch's keys share a slot. */
static void key_of(int t, int j, char *out, size_t outsz)
{
    snprintf(out, outsz, "{%s}:%d", tags[t], j);
}

static void load_scripts(void)
{
    for (int i = 0; i < RDS_SCRIPT_COUNT; i++) {
        const rds_script_t *s = rds_script(i);
        redisReply *r = redisCommand(conn, "SCRIPT LOAD %b", s->body, s->len);
        tt_err_t err;
        cr_assert_eq(rds_reply_sha(r, shas[i], &err), 0, "%s: %s", s->name, err.message);
        freeReplyObject(r);
    }
}

#ifdef TT_VECTORS_CLUSTER
static bool is_ready(void *s)
{
    return rds_store_ready(s);
}

static void setup(void)
{
    cr_assert_eq(rc_start(&cluster), 0, "the cluster did not start");
    uv_loop_init(&loop);
    rds_options_t o = {.n_cluster = 1, .timeout_ns = INT64_C(5000000000)};
    o.cluster[0] = cluster.seeds[0];
    tt_err_t err;
    cr_assert_eq(rds_store_new(&loop, &o, &store, &err), 0, "%s", err.message);
    cr_assert(rh_run_until(&loop, is_ready, store, 10000), "the cluster store never got ready");
    for (int i = 0; i < 3; i++) { /* a tag on each primary (nodes 0, 1, 2 at the start) */
        int n = 0;
        do
            snprintf(tags[i], sizeof(tags[i]), "vec%d", n++);
        while (rc_primary_of(&cluster, 0, rds_key_slot(tags[i], strlen(tags[i]))) != i);
        conns[i] = rh_connect(&cluster.node[i]);
        cr_assert_not_null(conns[i]);
    }
    conn = conns[0];
    load_scripts();
}

static void teardown(void)
{
    rds_store_close(store);
    uv_run(&loop, UV_RUN_DEFAULT);
    cr_assert_eq(uv_loop_close(&loop), 0, "a handle was left open");
    for (int i = 0; i < 3; i++)
        if (conns[i])
            redisFree(conns[i]);
    rc_stop(&cluster);
}

typedef struct one {
    bool done;
    int status;
    ra_result_t result;
    char err[256];
} one_t;

static void one_done(void *arg, const rds_outcome_t *o)
{
    one_t *one = arg;
    cr_assert_not(one->done, "an operation was answered twice");
    one->done = true;
    one->status = o->status;
    one->result = o->result;
    if (o->status < 0)
        snprintf(one->err, sizeof(one->err), "%s", o->error);
}

typedef struct ones {
    one_t *one;
    int n;
} ones_t;

static bool all_done(void *arg)
{
    ones_t *o = arg;
    for (int i = 0; i < o->n; i++)
        if (!o->one[i].done)
            return false;
    return true;
}

/* Runs n ops through the cluster store in one loop turn, with `now` passed in: their keys share
 * a slot, so the store sends them as one script call (checked by its counters). */
static void run_batch(int n, const ra_limiter_t *const *l, char (*key)[32], const rds_op_t *op,
                      ra_result_t *out, int *status, char (*err)[256])
{
    one_t one[RDS_BATCH_MAX] = {0};
    rds_stats_t before, after;
    rds_store_stats(store, &before);
    for (int i = 0; i < n; i++)
        cr_assert_eq(rds_store_call(store, l[i], key[i], strlen(key[i]), &op[i], one_done, &one[i]),
                     0);
    ones_t all = {one, n};
    cr_assert(rh_run_until(&loop, all_done, &all, 10000), "no outcome for %s", key[0]);
    rds_store_stats(store, &after);
    cr_assert_eq(after.batches - before.batches, 1,
                 "%d operations on one slot took %" PRIu64 " script calls", n,
                 after.batches - before.batches);
    for (int i = 0; i < n; i++) {
        out[i] = one[i].result;
        status[i] = one[i].status;
        snprintf(err[i], sizeof(err[i]), "%s", one[i].err);
    }
}
#else
static void setup(void)
{
    cr_assert_eq(rh_start(&server), 0, "redis-server did not start");
    conn = rh_connect(&server);
    cr_assert_not_null(conn);
    for (int i = 0; i < 3; i++) {
        snprintf(tags[i], sizeof(tags[i]), "vec%d", i);
        conns[i] = conn;
    }
    load_scripts();
}

static void teardown(void)
{
    if (conn)
        redisFree(conn);
    conn = NULL;
    rh_stop(&server);
}

/* Runs n ops of one script as one script call, the command written by rds_batch_format as the
 * store writes it, with `now` passed in; each op's status, result and error come back. */
static void run_batch(int n, const ra_limiter_t *const *l, char (*key)[32], const rds_op_t *op,
                      ra_result_t *out, int *status, char (*err)[256])
{
    static rds_batch_t b;
    int script = rds_script_for(l[0]);
    cr_assert_geq(script, 0);
    rds_batch_init(&b, (rds_script_id_t)script);
    for (int i = 0; i < n; i++)
        cr_assert_eq(rds_batch_add(&b, l[i], key[i], strlen(key[i]), &op[i]), 0);
    static char cmd[1 << 16];
    cr_assert_leq(rds_batch_bound(&b, false), sizeof(cmd));
    size_t len = rds_batch_format(&b, shas[script], false, cmd);
    redisReply *r = NULL;
    cr_assert_eq(redisAppendFormattedCommand(conn, cmd, len), REDIS_OK);
    cr_assert_eq(redisGetReply(conn, (void **)&r), REDIS_OK);
    tt_err_t whole = {0};
    int rc = rds_batch_reply(r, (uint32_t)n, &whole);
    for (int i = 0; i < n; i++) {
        tt_err_t e = whole;
        status[i] = rc < 0 ? rc : rds_reply_read(r->element[i], &out[i], &e);
        snprintf(err[i], sizeof(err[i]), "%s", status[i] < 0 ? e.message : "");
    }
    freeReplyObject(r);
}
#endif

TestSuite(lua, .init = setup, .fini = teardown, .timeout = 120);

/* The connection that holds a key "{<tag>}:<j>" (every test key has one of the three tags). */
static redisContext *conn_for(const char *key)
{
    for (int i = 0; i < 3; i++)
        if (strncmp(key + 1, tags[i], strlen(tags[i])) == 0 && key[1 + strlen(tags[i])] == '}')
            return conns[i];
    return conn;
}

static void put_state(const char *key, int64_t state)
{
    redisContext *c = conn_for(key);
    redisReply *r = state == 0 ? redisCommand(c, "DEL %s", key)
                               : redisCommand(c, "SET %s %" PRId64, key, state);
    cr_assert(r && r->type != REDIS_REPLY_ERROR);
    freeReplyObject(r);
}

/* What the key holds: *present false when absent. */
static int64_t get_state(const char *key, bool *present)
{
    redisReply *r = redisCommand(conn_for(key), "GET %s", key);
    cr_assert_not_null(r);
    *present = r->type == REDIS_REPLY_STRING;
    int64_t v = *present ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    return v;
}

/* The key after a write of `state` at `now`: absent once idle. A state whose TTL is under a
 * second may already have expired by the time we look, so absence is accepted for it too. */
static void check_stored(const ra_limiter_t *l, const char *key, int64_t state, int64_t now,
                         const char *where)
{
    bool present;
    int64_t held = get_state(key, &present);
    if (present) {
        cr_assert_eq(held, state, "%s: key holds %" PRId64 ", want %" PRId64, where, held, state);
        return;
    }
    bool idle = ra_state_is_idle(l, state, now);
    int64_t into = now % l->period_ns; /* an envoy count expires at its window's end */
    into += into < 0 ? l->period_ns : 0;
    bool short_ttl = (l->algorithm == RA_GCRA && (uint64_t)state - (uint64_t)now < 1000000000u) ||
                     (l->algorithm == RA_ENVOY_WINDOW && l->period_ns - into < 1000000000) ||
                     (l->algorithm != RA_GCRA && l->period_ns < 500000000);
    cr_assert(idle || short_ttl, "%s: key is gone but state %" PRId64 " is not idle", where, state);
}

/* ---- checks, sent in batches -------------------------------------------------------------- */

typedef struct vec_line {
    char algorithm[32];
    int64_t amount, period, burst, num, den, unit, state, now, cost;
    int64_t admit, unfittable, remaining, retry, reset, state_after;
} vec_line_t;

/* One operation to check against ratealg, on a key of its own holding `state` first. */
typedef struct check {
    ra_limiter_t l;
    int64_t state;
    rds_op_t op;
    const vec_line_t *line; /* a vector line's own expectations too, or NULL */
    char where[160];
} check_t;

static check_t queue[RDS_BATCH_MAX];
static vec_line_t queue_lines[RDS_BATCH_MAX];
static int queued, batch_size = 1, batches;

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_u64(void)
{
    rng ^= rng << 13; /* xorshift64: deterministic, so a failure replays */
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void compare(const check_t *c, const char *key, int status, const ra_result_t *got,
                    const char *err)
{
    const ra_limiter_t *l = &c->l;
    int64_t now = c->op.now_ns;
    cr_assert_eq(status, 0, "%s: %s", c->where, err);
    if (c->op.settle) {
        int64_t want = ra_settle(l, c->state, now, c->op.reserved, c->op.actual);
        cr_assert_eq(got->next_state, want, "%s: lua %" PRId64 ", ratealg %" PRId64, c->where,
                     got->next_state, want);
        check_stored(l, key, want, now, c->where);
        return;
    }
    ra_result_t want = ra_step(l, c->state, now, c->op.cost);
    cr_assert(got->admit == want.admit && got->unfittable == want.unfittable &&
                  got->remaining == want.remaining && got->retry_after_s == want.retry_after_s &&
                  got->reset_after_s == want.reset_after_s && got->next_state == want.next_state,
              "%s: lua {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
              "} ratealg {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "}",
              c->where, got->admit, got->unfittable, got->remaining, got->retry_after_s,
              got->reset_after_s, got->next_state, want.admit, want.unfittable, want.remaining,
              want.retry_after_s, want.reset_after_s, want.next_state);
    check_stored(l, key, got->admit ? got->next_state : c->state, now, c->where);
    const vec_line_t *v = c->line;
    if (v == NULL)
        return;
    cr_assert(got->admit == v->admit && got->unfittable == v->unfittable &&
                  got->next_state == v->state_after,
              "%s: disagrees with the line's admit/unfittable/state", c->where);
    if (l->algorithm == RA_GCRA) /* the catalogue pins remaining, retry and reset for gcra only */
        cr_assert(got->remaining == v->remaining && got->retry_after_s == v->retry &&
                      got->reset_after_s == v->reset,
                  "%s: disagrees with the line's remaining/retry/reset", c->where);
}

/* Sends what is queued as one script call, on keys of one tag (taking turns), and checks each
 * operation; the next batch's size is drawn from 1..RDS_BATCH_MAX. */
static void flush(void)
{
    if (queued == 0)
        return;
    const ra_limiter_t *l[RDS_BATCH_MAX];
    char key[RDS_BATCH_MAX][32], err[RDS_BATCH_MAX][256];
    rds_op_t op[RDS_BATCH_MAX];
    ra_result_t got[RDS_BATCH_MAX];
    int status[RDS_BATCH_MAX];
    for (int i = 0; i < queued; i++) {
        key_of(batches % 3, i, key[i], sizeof(key[i]));
        put_state(key[i], queue[i].state);
        l[i] = &queue[i].l;
        op[i] = queue[i].op;
    }
    run_batch(queued, l, key, op, got, status, err);
    for (int i = 0; i < queued; i++)
        compare(&queue[i], key[i], status[i], &got[i], err[i]);
    queued = 0;
    batches++;
    batch_size = 1 + (int)(next_u64() % RDS_BATCH_MAX);
}

/* Queues a check; a batch holds one script's operations, so another script sends it first. */
static void check(const check_t *c)
{
    if (queued > 0 && rds_script_for(&queue[0].l) != rds_script_for(&c->l))
        flush();
    queue[queued] = *c;
    if (c->line != NULL) {
        queue_lines[queued] = *c->line;
        queue[queued].line = &queue_lines[queued];
    }
    if (++queued >= batch_size)
        flush();
}

/* A step of ratealg against the script (and the key it leaves). */
static void check_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost,
                       const vec_line_t *line, const char *where)
{
    check_t c = {.l = *l, .state = state, .line = line};
    c.op = (rds_op_t){.has_now = true, .now_ns = now, .cost = cost};
    snprintf(c.where, sizeof(c.where), "%s", where);
    check(&c);
}

/* ---- the shared vectors ------------------------------------------------------------------- */

static int parse_line(const char *text, vec_line_t *v)
{
    int used = 0;
    int n = sscanf(text,
                   "%31s %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                   " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNd64
                   " %" SCNd64 " %" SCNd64 " %" SCNd64 " %n",
                   v->algorithm, &v->amount, &v->period, &v->burst, &v->num, &v->den, &v->unit,
                   &v->state, &v->now, &v->cost, &v->admit, &v->unfittable, &v->remaining,
                   &v->retry, &v->reset, &v->state_after, &used);
    return n == 16 && text[used] == '\0' ? 0 : -1;
}

typedef struct tally {
    int run, skipped_bucket, skipped_share;
} tally_t;

static void run_line(const char *text, const char *where, tally_t *t)
{
    vec_line_t v;
    cr_assert_eq(parse_line(text, &v), 0, "%s: not a 16-field vector line", where);
    ra_algorithm_t alg;
    cr_assert_eq(ra_algorithm_parse(v.algorithm, &alg), 0, "%s: algorithm", where);
    if (alg == RA_TOKEN_BUCKET) { /* no redis form: arm turns it down */
        t->skipped_bucket++;
        return;
    }
    if (v.num != v.den || v.unit != 1) { /* the effective form is the share store's */
        t->skipped_share++;
        return;
    }
    ra_limiter_t l;
    cr_assert_eq(ra_limiter_init(&l, alg, v.amount, v.period, v.burst), 0, "%s: arm", where);
    check_step(&l, v.state, v.now, v.cost, &v, where);
    t->run++;
}

static void run_file(const char *path, tally_t *t)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char text[1024], where[600];
    for (int no = 1; fgets(text, sizeof(text), f); no++) {
        text[strcspn(text, "\r\n")] = '\0';
        const char *p = text + strspn(text, " \t");
        if (*p == '\0' || *p == '#')
            continue;
        snprintf(where, sizeof(where), "%s:%d", path, no);
        run_line(p, where, t);
    }
    fclose(f);
}

Test(lua, every_shared_vector_line_agrees_with_ratealg)
{
    glob_t g;
    int rc = glob(TT_SOURCE_DIR "/tests/vectors/*.vec", 0, NULL, &g);
    cr_assert(rc == 0 && g.gl_pathc > 0, "no vector files under tests/vectors/");
    tally_t t = {0};
    for (size_t i = 0; i < g.gl_pathc; i++)
        run_file(g.gl_pathv[i], &t);
    globfree(&g);
    flush();
    cr_assert_gt(t.run, 0);
    cr_log_info("vectors: %d lines run, %d token_bucket and %d effective-form lines skipped", t.run,
                t.skipped_bucket, t.skipped_share);
}

/* ---- a seeded random sweep ---------------------------------------------------------------- */

/* Mostly realistic values around `base`, sometimes the int64 edges and limb boundaries. */
static int64_t pick(int64_t base, int64_t spread)
{
    static const int64_t edges[] = {0,
                                    1,
                                    -1,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MAX - 1,
                                    INT64_MIN + 1,
                                    INT64_C(4294967296),
                                    INT64_C(4294967295),
                                    -INT64_C(4294967296),
                                    INT64_C(9007199254740993),
                                    INT64_C(1700000000000000000)};
    uint64_t r = next_u64();
    switch (r % 8) {
    case 0:
        return edges[(r >> 8) % (sizeof(edges) / sizeof(edges[0]))];
    case 1:
        return (int64_t)next_u64();
    default: /* wrapping on purpose: near an edge, the neighbours are the other edge */
        return (int64_t)((uint64_t)base + (r >> 8) % (uint64_t)spread - (uint64_t)(spread / 2));
    }
}

static ra_limiter_t random_limiter(void)
{
    static const int64_t periods[] = {1,
                                      999,
                                      INT64_C(1000000000),
                                      INT64_C(60000000000),
                                      INT64_C(3600000000000),
                                      INT64_C(68719476736),
                                      INT64_C(68719476735),
                                      INT64_MAX / 3,
                                      INT64_MAX};
    ra_limiter_t l;
    for (;;) {
        uint64_t r = next_u64();
        static const ra_algorithm_t algs[] = {RA_GCRA, RA_FIXED_WINDOW, RA_SLIDING_WINDOW,
                                              RA_ENVOY_WINDOW};
        ra_algorithm_t alg = algs[r % 4];
        int64_t period = periods[(r >> 4) % (sizeof(periods) / sizeof(periods[0]))];
        int64_t amount = 1 + (int64_t)((r >> 12) % (alg == RA_GCRA ? 1000000 : 65535));
        int64_t burst = 1 + (int64_t)((r >> 36) % 100000);
        if ((r >> 60) == 0)
            amount = alg == RA_GCRA ? 1 : 65535;
        if (alg == RA_ENVOY_WINDOW) /* 0 ..= 2^32 - 1, the edges often */
            amount = (r >> 59) == 0 ? 0 : (r >> 59) == 1 ? RA_ENVOY_CEILING : (int64_t)(r >> 32);
        if (ra_limiter_init(&l, alg, amount, period, burst) == 0)
            return l;
    }
}

Test(lua, random_steps_over_the_int64_domain_agree_with_ratealg)
{
    char where[128];
    for (int i = 0; i < 3000; i++) {
        ra_limiter_t l = random_limiter();
        int64_t spread = l.period_ns < INT64_MAX / 4 ? 4 * l.period_ns : INT64_MAX / 2;
        int64_t now = pick(INT64_C(1700000000000000000), spread);
        int64_t state;
        if (l.algorithm == RA_GCRA)
            spread = l.tolerance_ns < INT64_MAX / 2 ? 2 * l.tolerance_ns + 2 : INT64_MAX;
        if (l.algorithm == RA_GCRA)
            state = next_u64() % 3 == 0 ? pick(0, 1000) : pick(now, spread);
        else
            state = (int64_t)next_u64();
        int64_t cost = next_u64() % 4 == 0 ? pick(0, 10) : (int64_t)(next_u64() % 70000);
        if (l.algorithm == RA_ENVOY_WINDOW && next_u64() % 4 == 0) /* near the amount */
            cost = pick(l.amount, 8);
        snprintf(where, sizeof(where), "random case %d (%s)", i, ra_algorithm_name(l.algorithm));
        check_step(&l, state, now, cost, NULL, where);
    }
    flush();
}

/* A settle of ratealg against the script: the same new state, stored the same way. */
static void check_settle(const ra_limiter_t *l, int64_t state, int64_t now, int64_t reserved,
                         int64_t actual, const char *where)
{
    check_t c = {.l = *l, .state = state};
    c.op = (rds_op_t){
        .settle = true, .has_now = true, .now_ns = now, .reserved = reserved, .actual = actual};
    snprintf(c.where, sizeof(c.where), "%s", where);
    check(&c);
}

Test(lua, random_settles_agree_with_ratealg)
{
    char where[128];
    for (int i = 0; i < 1500; i++) {
        ra_limiter_t l; /* gcra and envoy_window settle (envoy: a refund, or a charge) */
        do
            l = random_limiter();
        while (l.algorithm != RA_GCRA && l.algorithm != RA_ENVOY_WINDOW);
        int64_t now = pick(INT64_C(1700000000000000000), INT64_C(120000000000));
        int64_t state = next_u64() % 4 == 0 ? pick(0, 1000) : pick(now, INT64_C(60000000000));
        int64_t reserved = pick(16384, 32768), actual = pick(1000, 100000);
        if (l.algorithm == RA_ENVOY_WINDOW) { /* a state of now's window, or of another */
            /* floor(now / period), without the overflow of now - (now mod period) at the
             * edges pick() gives (INT64_MIN + 1) */
            uint64_t index = (uint64_t)(now / l.period_ns - (now % l.period_ns < 0));
            state = next_u64() % 3 ? (int64_t)(index << 32 | (next_u64() & 0xffffffffu))
                                   : (int64_t)next_u64();
            if (next_u64() % 4 == 0)
                reserved = pick(0, 8), actual = pick(INT64_C(4294967295), 16);
        }
        snprintf(where, sizeof(where), "random settle %d (%s)", i, ra_algorithm_name(l.algorithm));
        check_settle(&l, state, now, reserved, actual, where);
    }
    flush();
}

Test(lua, huge_overruns_stop_where_ratealg_stops)
{
    /* issue 23, item 3: 2^40 tokens on 16384/1h pass INT64_MAX - tau; from a fresh key, from
     * the ceiling itself, and from beyond it (a state no settle writes, left as it is) */
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 16384, INT64_C(3600000000000), 16384);
    int64_t now = INT64_C(1700000000000000000), ceiling = INT64_MAX - l.tolerance_ns;
    const int64_t states[] = {0, now + 1, ceiling - 1, ceiling, ceiling + 1, INT64_MAX};
    char where[128];
    for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
        snprintf(where, sizeof(where), "overrun from %" PRId64, states[i]);
        check_settle(&l, states[i], now, 0, INT64_C(1) << 40, where);
        check_settle(&l, states[i], now, 5, 6, where);
    }
    flush();
}

/* ---- batched and one by one --------------------------------------------------------------- */

/*
 * A seeded sequence on four keys (so a batch often steps one key several times), decided one
 * script call per operation on keys "a<k>", then again on keys "b<k>" in batches of seeded sizes:
 * the same results, field by field, and the same states left behind.
 */
static void batched_as_one_by_one(bool window)
{
    enum { KEYS = 4, OPS = 640 };
    ra_limiter_t lim[KEYS];
    for (int k = 0; k < KEYS; k++) {
        ra_algorithm_t alg = !window  ? RA_GCRA
                             : k == 3 ? RA_ENVOY_WINDOW
                             : k % 2  ? RA_SLIDING_WINDOW
                                      : RA_FIXED_WINDOW;
        cr_assert_eq(ra_limiter_init(&lim[k], alg, 5 + k, INT64_C(1000000000) * (k + 1), 3 + k), 0);
    }
    static const ra_limiter_t *l[OPS];
    static rds_op_t op[OPS];
    static char a[OPS][32], b[OPS][32], err[OPS][256];
    static ra_result_t one[OPS], many[OPS];
    static int st_one[OPS], st_many[OPS];
    int64_t now = INT64_C(1700000000000000000);
    for (int i = 0; i < OPS; i++) {
        int k = (int)(next_u64() % KEYS);
        now += (int64_t)(next_u64() % 400000000) - 50000000; /* mostly on, sometimes back */
        l[i] = &lim[k];
        op[i] = (rds_op_t){.has_now = true, .now_ns = now, .cost = (int64_t)(next_u64() % 4)};
        if (!window && next_u64() % 5 == 0)
            op[i] = (rds_op_t){.settle = true,
                               .has_now = true,
                               .now_ns = now,
                               .reserved = (int64_t)(next_u64() % 4),
                               .actual = (int64_t)(next_u64() % 6)};
        snprintf(a[i], sizeof(a[i]), "{%s}:a%d", tags[0], k);
        snprintf(b[i], sizeof(b[i]), "{%s}:b%d", tags[0], k);
    }
    for (int k = 0; k < KEYS; k++) {
        char ka[32], kb[32];
        snprintf(ka, sizeof(ka), "{%s}:a%d", tags[0], k);
        snprintf(kb, sizeof(kb), "{%s}:b%d", tags[0], k);
        put_state(ka, 0);
        put_state(kb, 0);
    }
    for (int i = 0; i < OPS; i++)
        run_batch(1, &l[i], &a[i], &op[i], &one[i], &st_one[i], &err[i]);
    int sizes = 0;
    for (int i = 0; i < OPS; sizes++) {
        int n = 1 + (int)(next_u64() % RDS_BATCH_MAX);
        n = n > OPS - i ? OPS - i : n;
        run_batch(n, &l[i], &b[i], &op[i], &many[i], &st_many[i], &err[i]);
        i += n;
    }
    for (int i = 0; i < OPS; i++) {
        cr_assert(st_one[i] == 0 && st_many[i] == 0, "op %d: %s", i, err[i]);
        const ra_result_t *x = &one[i], *y = &many[i];
        cr_assert(x->admit == y->admit && x->unfittable == y->unfittable &&
                      x->remaining == y->remaining && x->retry_after_s == y->retry_after_s &&
                      x->reset_after_s == y->reset_after_s && x->next_state == y->next_state,
                  "op %d: one by one {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
                  "}, batched {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "}",
                  i, x->admit, x->unfittable, x->remaining, x->retry_after_s, x->reset_after_s,
                  x->next_state, y->admit, y->unfittable, y->remaining, y->retry_after_s,
                  y->reset_after_s, y->next_state);
    }
    for (int k = 0; k < KEYS; k++) {
        char ka[32], kb[32];
        bool pa, pb;
        snprintf(ka, sizeof(ka), "{%s}:a%d", tags[0], k);
        snprintf(kb, sizeof(kb), "{%s}:b%d", tags[0], k);
        int64_t va = get_state(ka, &pa), vb = get_state(kb, &pb);
        cr_assert(pa == pb && va == vb, "key %d: one by one left %" PRId64 ", batched %" PRId64, k,
                  va, vb);
    }
    cr_log_info("%d operations: %d one by one, %d batched calls", OPS, OPS, sizes);
}

Test(lua, gcra_steps_and_settles_batched_decide_as_one_by_one)
{
    batched_as_one_by_one(false);
}

Test(lua, window_steps_batched_decide_as_one_by_one)
{
    batched_as_one_by_one(true);
}

#ifndef TT_VECTORS_CLUSTER /* what follows speaks to the one server directly */
/* One op on one key: a batch of one. Returns its status. */
static int run(const ra_limiter_t *l, const char *key, const rds_op_t *op, ra_result_t *out,
               char *err, size_t errsz)
{
    char k[1][32], e[1][256];
    int status;
    snprintf(k[0], sizeof(k[0]), "%s", key);
    run_batch(1, &l, k, op, out, &status, e);
    snprintf(err, errsz, "%s", e[0]);
    return status;
}

Test(lua, a_key_holding_a_non_integer_is_a_clear_error_and_stays_untouched)
{
    /* Beyond 2^52 a double cannot hold the value, so only a plain decimal is read there: each
     * of these is refused rather than rounded (the last ones are numbers Lua reads as
     * integers: an exponent, hexadecimal, a fraction that rounds away, one past INT64_MAX) */
    static const char *const garbage[] = {"twelve",
                                          "1.5",
                                          "",
                                          "-",
                                          "1.7e18",
                                          "17000000000000000e1",
                                          "0x17979cfe362a0000",
                                          "4503599627370496.5",
                                          "1700000000000000000.25",
                                          "9223372036854775808",
                                          "-9223372036854775809",
                                          "99999999999999999999"};
    static const char key[] = "vec:garbage";
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 300, INT64_C(60000000000), 60);
    rds_op_t op = {.has_now = true, .now_ns = INT64_C(1700000000000000000), .cost = 1};
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        freeReplyObject(redisCommand(conn, "SET %s %s", key, garbage[i]));
        ra_result_t got;
        char err[256] = "";
        cr_assert_eq(run(&l, key, &op, &got, err, sizeof(err)), RDS_EREDIS, "\"%s\" was read",
                     garbage[i]);
        cr_assert(strstr(err, "holds no int64 state") && strstr(err, garbage[i]), "%s", err);
        redisReply *r = redisCommand(conn, "GET %s", key);
        cr_assert_str_eq(r->str, garbage[i]);
        freeReplyObject(r);
    }
}

Test(lua, a_bad_key_in_a_batch_answers_its_own_operation_alone)
{
    /* a step on a fresh key, then on a key holding garbage, on a list, and the first key again:
     * the bad two get their own errors and write nothing; the others decide (the second step on
     * the first key sees the first's write) as they would alone */
    freeReplyObject(redisCommand(conn, "SET {b}:garbage twelve"));
    freeReplyObject(redisCommand(conn, "DEL {b}:list {b}:ok"));
    freeReplyObject(redisCommand(conn, "RPUSH {b}:list a"));
    ra_limiter_t lim;
    ra_limiter_init(&lim, RA_GCRA, 300, INT64_C(60000000000), 60);
    const ra_limiter_t *l[4] = {&lim, &lim, &lim, &lim};
    char key[4][32] = {"{b}:ok", "{b}:garbage", "{b}:list", "{b}:ok"}, err[4][256];
    int64_t now = INT64_C(1700000000000000000);
    rds_op_t op[4];
    for (int i = 0; i < 4; i++)
        op[i] = (rds_op_t){.has_now = true, .now_ns = now, .cost = 1};
    ra_result_t got[4];
    int status[4];
    run_batch(4, l, key, op, got, status, err);
    cr_assert_eq(status[1], RDS_EREDIS);
    cr_assert(strstr(err[1], "holds no int64 state"), "%s", err[1]);
    cr_assert_eq(status[2], RDS_EREDIS);
    cr_assert(strstr(err[2], "WRONGTYPE"), "%s", err[2]);
    ra_result_t first = ra_step(&lim, 0, now, 1);
    ra_result_t second = ra_step(&lim, first.next_state, now, 1);
    cr_assert(status[0] == 0 && got[0].admit && got[0].next_state == first.next_state, "%s",
              err[0]);
    cr_assert(status[3] == 0 && got[3].admit && got[3].next_state == second.next_state &&
                  got[3].remaining == second.remaining,
              "%s", err[3]);
    redisReply *r = redisCommand(conn, "GET {b}:garbage");
    cr_assert_str_eq(r->str, "twelve");
    freeReplyObject(r);
}

Test(lua, a_key_of_another_type_is_redis_own_wrongtype_error)
{
    static const char key[] = "vec:list";
    freeReplyObject(redisCommand(conn, "RPUSH %s a", key));
    ra_limiter_t l;
    ra_limiter_init(&l, RA_SLIDING_WINDOW, 10, INT64_C(8000000000), 10);
    rds_op_t op = {.has_now = true, .now_ns = INT64_C(1700000000000000000), .cost = 1};
    ra_result_t got;
    char err[256] = "";
    cr_assert_eq(run(&l, key, &op, &got, err, sizeof(err)), RDS_EREDIS);
    cr_assert(strstr(err, "WRONGTYPE"), "%s", err);
}

/* The error an operation's reply carries (a one-operation call). */
static void expect_item_error(redisReply *r, const char *want)
{
    cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == 1);
    cr_assert_eq(r->element[0]->type, REDIS_REPLY_ERROR);
    cr_assert(strstr(r->element[0]->str, want), "%s", r->element[0]->str);
    freeReplyObject(r);
}

Test(lua, bad_arguments_are_named_in_the_error)
{
    expect_item_error(redisCommand(conn, "EVALSHA %s 1 k step 0 10 1 1", shas[RDS_SCRIPT_GCRA]),
                      "ARGV[2] (T)");
    expect_item_error(
        redisCommand(conn, "EVALSHA %s 1 k sliding 65536 10 1 1", shas[RDS_SCRIPT_WINDOW]),
        "ARGV[2] (amount)");
    expect_item_error(redisCommand(conn, "EVALSHA %s 1 k step 1 10 1 99999999999999999999",
                                   shas[RDS_SCRIPT_GCRA]),
                      "ARGV[5] (cost)");
}

Test(lua, without_now_the_script_uses_redis_time_and_expires_idle_keys)
{
    static const char key[] = "vec:time";
    put_state(key, 0);
    ra_limiter_t l;
    ra_limiter_init(&l, RA_GCRA, 300, INT64_C(60000000000), 60); /* T = 200 ms, tau = 12 s */
    rds_op_t op = {.cost = 1};
    ra_result_t got;
    char err[256] = "";
    cr_assert_eq(run(&l, key, &op, &got, err, sizeof(err)), 0, "%s", err);
    cr_assert(got.admit);
    cr_assert_eq(got.remaining, 59);
    redisReply *t = redisCommand(conn, "TIME");
    int64_t server_now = strtoll(t->element[0]->str, NULL, 10) * 1000000000 +
                         strtoll(t->element[1]->str, NULL, 10) * 1000;
    freeReplyObject(t);
    /* the TAT is Redis' now + T, so within a second of the server's clock */
    cr_assert(got.next_state > server_now - INT64_C(1000000000) &&
              got.next_state <= server_now + INT64_C(200000000));
    redisReply *ttl = redisCommand(conn, "PTTL %s", key);
    cr_assert(ttl->integer > 0 && ttl->integer <= 200, "pttl %lld", ttl->integer);
    freeReplyObject(ttl);
}
#endif
