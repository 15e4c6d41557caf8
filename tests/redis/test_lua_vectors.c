/*
 * The Lua assets agree with ratealg step for step: every line of the tests/vectors files, then a
 * seeded random sweep over the whole int64 domain (edges included), run by a real redis-server
 * with `now` passed in. Each step is checked three ways: the script's reply against ratealg,
 * against the line's expected fields, and what the key holds afterwards (the new state on an
 * admission, expiring once idle; the old state, untouched, on a denial).
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
static redisContext *conn;     /* plain: the server; cluster: keys[0]'s primary */
static redisContext *conns[3]; /* the connection that holds keys[i] */
static char keys[3][32];       /* the keys the steps and settles take turns on */
static char shas[RDS_SCRIPT_COUNT][RDS_SHA_LEN + 1];

static void load_scripts(void)
{
    for (int i = 0; i < RDS_SCRIPT_COUNT; i++) {
        const rds_script_t *s = rds_script(i);
        redisReply *r = redisCommand(conn, "SCRIPT LOAD %b", s->body, s->len);
        char err[256];
        cr_assert_eq(rds_reply_sha(r, shas[i], err, sizeof(err)), 0, "%s: %s", s->name, err);
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
    char err[256];
    cr_assert_eq(rds_store_new(&loop, &o, &store, err, sizeof(err)), 0, "%s", err);
    cr_assert(rh_run_until(&loop, is_ready, store, 10000), "the cluster store never got ready");
    for (int i = 0; i < 3; i++) { /* a key on each primary (nodes 0, 1, 2 at the start) */
        int n = 0;
        do
            snprintf(keys[i], sizeof(keys[i]), "vec:%d", n++);
        while (rc_primary_of(&cluster, 0, rds_key_slot(keys[i], strlen(keys[i]))) != i);
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
    one->done = true;
    one->status = o->status;
    one->result = o->result;
    if (o->status < 0)
        snprintf(one->err, sizeof(one->err), "%s", o->error);
}

static bool one_finished(void *arg)
{
    return ((one_t *)arg)->done;
}

/* Runs one op through the cluster store with `now` passed in; returns the outcome's status. */
static int run(const ra_limiter_t *l, const char *key, const rds_op_t *op, ra_result_t *out,
               char *err, size_t errsz)
{
    one_t one = {0};
    cr_assert_eq(rds_store_call(store, l, key, strlen(key), op, one_done, &one), 0);
    cr_assert(rh_run_until(&loop, one_finished, &one, 10000), "no outcome for %s", key);
    *out = one.result;
    snprintf(err, errsz, "%s", one.err);
    return one.status;
}
#else
static void setup(void)
{
    cr_assert_eq(rh_start(&server), 0, "redis-server did not start");
    conn = rh_connect(&server);
    cr_assert_not_null(conn);
    for (int i = 0; i < 3; i++) {
        snprintf(keys[i], sizeof(keys[i]), "vec:%d", i);
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

/* Runs one op through its script with `now` passed in; returns the reply's status. */
static int run(const ra_limiter_t *l, const char *key, const rds_op_t *op, ra_result_t *out,
               char *err, size_t errsz)
{
    rds_command_t cmd;
    int script = rds_script_for(l);
    cr_assert_geq(script, 0);
    cr_assert_eq(rds_command_build(&cmd, shas[script], l, key, strlen(key), op), 0);
    redisReply *r = redisCommandArgv(conn, cmd.argc, cmd.argv, cmd.argvlen);
    int rc = rds_reply_read(r, out, err, errsz);
    freeReplyObject(r);
    return rc;
}
#endif

TestSuite(lua, .init = setup, .fini = teardown, .timeout = 120);

/* The next of the three keys, in turn. */
static const char *next_key(void)
{
    static unsigned turn;
    return keys[turn++ % 3];
}

static redisContext *conn_for(const char *key)
{
    for (int i = 0; i < 3; i++)
        if (strcmp(keys[i], key) == 0)
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
    bool short_ttl = (l->algorithm == RA_GCRA && (uint64_t)state - (uint64_t)now < 1000000000u) ||
                     (l->algorithm != RA_GCRA && l->period_ns < 500000000);
    cr_assert(idle || short_ttl, "%s: key is gone but state %" PRId64 " is not idle", where, state);
}

/* One step: ratealg, the script, and the stored key agree. Returns the script's result. */
static ra_result_t check_step(const ra_limiter_t *l, int64_t state, int64_t now, int64_t cost,
                              const char *where)
{
    const char *key = next_key();
    put_state(key, state);
    ra_result_t want = ra_step(l, state, now, cost), got;
    rds_op_t op = {.has_now = true, .now_ns = now, .cost = cost};
    char err[256] = "";
    cr_assert_eq(run(l, key, &op, &got, err, sizeof(err)), 0, "%s: %s", where, err);
    cr_assert(got.admit == want.admit && got.unfittable == want.unfittable &&
                  got.remaining == want.remaining && got.retry_after_s == want.retry_after_s &&
                  got.reset_after_s == want.reset_after_s && got.next_state == want.next_state,
              "%s: lua {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64
              "} ratealg {%d %d %" PRId64 " %" PRId64 " %" PRId64 " %" PRId64 "}",
              where, got.admit, got.unfittable, got.remaining, got.retry_after_s, got.reset_after_s,
              got.next_state, want.admit, want.unfittable, want.remaining, want.retry_after_s,
              want.reset_after_s, want.next_state);
    if (got.admit)
        check_stored(l, key, got.next_state, now, where);
    else
        check_stored(l, key, state, now, where);
    return got;
}

/* ---- the shared vectors ------------------------------------------------------------------- */

typedef struct vec_line {
    char algorithm[32];
    int64_t amount, period, burst, num, den, unit, state, now, cost;
    int64_t admit, unfittable, remaining, retry, reset, state_after;
} vec_line_t;

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
    ra_result_t got = check_step(&l, v.state, v.now, v.cost, where);
    cr_assert(got.admit == v.admit && got.unfittable == v.unfittable &&
                  got.next_state == v.state_after,
              "%s: disagrees with the line's admit/unfittable/state", where);
    if (alg == RA_GCRA) /* the catalogue pins remaining, retry and reset for gcra only */
        cr_assert(got.remaining == v.remaining && got.retry_after_s == v.retry &&
                      got.reset_after_s == v.reset,
                  "%s: disagrees with the line's remaining/retry/reset", where);
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
    cr_assert_gt(t.run, 0);
    cr_log_info("vectors: %d lines run, %d token_bucket and %d effective-form lines skipped", t.run,
                t.skipped_bucket, t.skipped_share);
}

/* ---- a seeded random sweep ---------------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_u64(void)
{
    rng ^= rng << 13; /* xorshift64: deterministic, so a failure replays */
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

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
        ra_algorithm_t alg = (ra_algorithm_t)(r % 3); /* gcra, fixed, sliding */
        int64_t period = periods[(r >> 4) % (sizeof(periods) / sizeof(periods[0]))];
        int64_t amount = 1 + (int64_t)((r >> 12) % (alg == RA_GCRA ? 1000000 : 65535));
        int64_t burst = 1 + (int64_t)((r >> 36) % 100000);
        if ((r >> 60) == 0)
            amount = alg == RA_GCRA ? 1 : 65535;
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
        snprintf(where, sizeof(where), "random case %d (%s)", i, ra_algorithm_name(l.algorithm));
        check_step(&l, state, now, cost, where);
    }
}

/* One settle through the script against ra_settle: the same new state, stored the same way. */
static void check_settle(const ra_limiter_t *l, int64_t state, int64_t now, int64_t reserved,
                         int64_t actual, const char *where)
{
    const char *key = next_key();
    char err[256];
    put_state(key, state);
    rds_op_t op = {
        .settle = true, .has_now = true, .now_ns = now, .reserved = reserved, .actual = actual};
    ra_result_t got;
    cr_assert_eq(run(l, key, &op, &got, err, sizeof(err)), 0, "%s: %s", where, err);
    int64_t want = ra_settle(l, state, now, reserved, actual);
    cr_assert_eq(got.next_state, want, "%s: lua %" PRId64 ", ratealg %" PRId64, where,
                 got.next_state, want);
    check_stored(l, key, want == state ? state : want, now, where);
}

Test(lua, random_settles_agree_with_ratealg)
{
    char where[128];
    for (int i = 0; i < 1500; i++) {
        ra_limiter_t l;
        do
            l = random_limiter();
        while (l.algorithm != RA_GCRA);
        int64_t now = pick(INT64_C(1700000000000000000), INT64_C(120000000000));
        int64_t state = next_u64() % 4 == 0 ? pick(0, 1000) : pick(now, INT64_C(60000000000));
        int64_t reserved = pick(16384, 32768), actual = pick(1000, 100000);
        snprintf(where, sizeof(where), "random settle %d", i);
        check_settle(&l, state, now, reserved, actual, where);
    }
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
}

#ifndef TT_VECTORS_CLUSTER /* what follows speaks to the one server directly */
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

Test(lua, bad_arguments_are_named_in_the_error)
{
    redisReply *r = redisCommand(conn, "EVALSHA %s 1 k step 0 10 1 1", shas[RDS_SCRIPT_GCRA]);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert(strstr(r->str, "ARGV[2] (T)"), "%s", r->str);
    freeReplyObject(r);
    r = redisCommand(conn, "EVALSHA %s 1 k sliding 65536 10 1 1", shas[RDS_SCRIPT_WINDOW]);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert(strstr(r->str, "ARGV[2] (amount)"), "%s", r->str);
    freeReplyObject(r);
    r = redisCommand(conn, "EVALSHA %s 1 k step 1 10 1 99999999999999999999",
                     shas[RDS_SCRIPT_GCRA]);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR);
    cr_assert(strstr(r->str, "ARGV[5] (cost)"), "%s", r->str);
    freeReplyObject(r);
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
