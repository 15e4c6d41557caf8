/*
 * The engine's redis hook. An operation comes from the engine with the limit (its identity and
 * limiter) and the subject id; it leaves as one script call on the counter key
 * tokentriage:{<identity>:<id>}, and comes back as gov_redis_complete: Redis' result, or
 * "unavailable" for every reason Redis had none (refused at once, timed out, an error or a
 * misshapen reply, the connection lost, the store closed). The engine then applies
 * posture.fail; the counts here say how often that happened and which way.
 */
#include "gov.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store.h" /* engine/store.h: the redis hook */
#include "tt_clock.h"

static void count_unavailable(rds_gov_t *g, const gov_redis_op_t *op)
{
    if (op->limit->posture.fail_open)
        g->fallbacks++;
    else
        g->fail_closed++;
}

static void on_done(void *arg, const rds_outcome_t *o)
{
    gov_redis_op_t *op = arg;
    if (o->status < 0)
        count_unavailable(o->data, op);
    gov_redis_reply_t reply = {.unavailable = o->status < 0, .r = o->result};
    gov_redis_complete(op, &reply, tt_wall_ns());
}

static int submit(void *ctx, gov_redis_op_t *op)
{
    rds_gov_t *g = ctx;
    char key[RDS_KEY_MAX];
    int n = rds_key(key, op->limit->identity, op->key, op->key_len);
    rds_op_t call = {.settle = op->kind == GOV_REDIS_SETTLE,
                     .cost = op->cost,
                     .reserved = op->reserved,
                     .actual = op->actual};
    int rc =
        n < 0 ? n
              : rds_store_call(g->store, &op->limit->limiter, key, (size_t)n, &call, on_done, op);
    if (rc < 0)
        count_unavailable(g, op);
    return rc;
}

static const gov_redis_ops_t ops = {.submit = submit};

_Static_assert(CFG_REDIS_NODES_MAX <= RDS_SEEDS_MAX, "every configured seed fits the store");
_Static_assert(CFG_NAME_MAX <= RDS_MASTER_MAX, "a configured master name fits the store");

void rds_options_from_config(const cfg_redis_t *redis, rds_options_t *out)
{
    *out = (rds_options_t){.address = redis->address,
                           .n_cluster = redis->n_cluster,
                           .n_sentinels = redis->n_sentinels,
                           .master = redis->master,
                           .timeout_ns = redis->timeout_ns};
    for (size_t i = 0; i < redis->n_cluster; i++)
        out->cluster[i] = redis->cluster[i];
    for (size_t i = 0; i < redis->n_sentinels; i++)
        out->sentinels[i] = redis->sentinels[i];
}

int rds_gov_attach(rds_gov_t *g, gov_engine_t *engine, uv_loop_t *loop, const rds_options_t *o,
                   char *err, size_t errsz)
{
    memset(g, 0, sizeof(*g));
    rds_options_t with_data = *o;
    with_data.data = g;
    int rc = rds_store_new(loop, &with_data, &g->store, err, errsz);
    if (rc < 0)
        return rc;
    g->engine = engine;
    gov_engine_set_redis(engine, &ops, g);
    return 0;
}

void rds_gov_close(rds_gov_t *g)
{
    if (g->store == NULL)
        return;
    rds_store_close(g->store); /* answers what is in flight: the engine completes it */
    g->store = NULL;
    gov_engine_set_redis(g->engine, NULL, NULL);
}

void rds_gov_metrics(const rds_gov_t *g, void (*emit)(void *ud, const char *line), void *ud)
{
    rds_stats_t st = {0};
    if (g->store)
        rds_store_stats(g->store, &st);
    const struct {
        const char *name, *help;
        uint64_t value;
    } rows[] = {
        {"calls_total", "Script calls sent to Redis.", st.calls},
        {"decided_total", "Calls Redis answered with a decision.", st.decided},
        {"errors_total", "Error or misshapen replies.", st.errors},
        {"timeouts_total", "Calls with no reply within shared_state.redis.timeout.", st.timeouts},
        {"refused_total", "Calls refused at once (not connected, too many in flight).",
         st.unavailable},
        {"lost_total", "Calls in flight when a connection went.", st.lost},
        {"connects_total", "Connections that completed the script handshake.", st.connects},
        {"disconnects_total", "Connections lost or dropped.", st.disconnects},
        {"script_reloads_total", "NOSCRIPT answered by reloading the script.", st.reloads},
        {"fallbacks_total", "Unavailable on a fail-open limit: the local limiter decided.",
         g->fallbacks},
        {"fail_closed_total", "Unavailable on a fail-closed limit: denied with retry 1.",
         g->fail_closed},
        {"up", "1 when connected and the scripts are loaded.", st.ready},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const char *type = strcmp(rows[i].name, "up") == 0 ? "gauge" : "counter";
        char line[320];
        snprintf(line, sizeof(line),
                 "# HELP tokentriage_redis_%s %s\n# TYPE tokentriage_redis_%s %s\n"
                 "tokentriage_redis_%s %" PRIu64 "\n",
                 rows[i].name, rows[i].help, rows[i].name, type, rows[i].name, rows[i].value);
        emit(ud, line);
    }
}
