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

#include "slots.h"
#include "store.h" /* engine/store.h: the redis hook */
#include "tt_clock.h"
#include "tt_fmt.h" /* tt_fmt_label: host names come from Redis (CLUSTER SLOTS, MOVED) */

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
    int rc = n < 0 ? n
                   : rds_store_call(g->store, op->limiter ? op->limiter : &op->limit->limiter, key,
                                    (size_t)n, &call, on_done, op);
    if (rc < 0)
        count_unavailable(g, op);
    return rc;
}

/* fleet's "down": the store cannot decide (rds_store_ready, what RDS_EVENT_UP/DOWN tell) */
static bool ready(void *ctx)
{
    const rds_gov_t *g = ctx;
    return g->store != NULL && rds_store_ready(g->store);
}

static const gov_redis_ops_t ops = {.submit = submit, .ready = ready};

_Static_assert(CFG_REDIS_NODES_MAX <= RDS_SEEDS_MAX, "every configured seed fits the store");
_Static_assert(CFG_NAME_MAX <= RDS_MASTER_MAX, "a configured master name fits the store");

void rds_options_from_config(const cfg_redis_t *redis, rds_options_t *out, rds_tls_options_t *tls)
{
    *tls = (rds_tls_options_t){.ca_file = redis->tls.ca_file,
                               .cert_file = redis->tls.cert_file,
                               .key_file = redis->tls.key_file,
                               .server_name = redis->tls.server_name,
                               .verify = redis->tls.verify};
    *out = (rds_options_t){.tls = redis->tls.present ? tls : NULL,
                           .address = redis->address,
                           .n_cluster = redis->n_cluster,
                           .n_sentinels = redis->n_sentinels,
                           .master = redis->master,
                           .timeout_ns = redis->timeout_ns};
    for (size_t i = 0; i < redis->n_cluster; i++)
        out->cluster[i] = redis->cluster[i];
    for (size_t i = 0; i < redis->n_sentinels; i++)
        out->sentinels[i] = redis->sentinels[i];
}

int rds_credentials_from_config(const cfg_redis_t *redis, rds_credentials_t *out, tt_err_t *err)
{
    _Static_assert(CFG_NAME_MAX <= RDS_USER_MAX, "a configured user name fits");
    memset(out, 0, sizeof(*out));
    int rc = 0;
    if (redis->password_file[0])
        rc = rds_auth_read(redis->username, redis->password_file,
                           "shared_state.redis.password_file", &out->redis, err);
    if (rc == 0 && redis->sentinel_password_file[0])
        rc = rds_auth_read(redis->sentinel_username, redis->sentinel_password_file,
                           "shared_state.redis.sentinel_password_file", &out->sentinel, err);
    if (rc < 0)
        rds_credentials_wipe(out);
    return rc;
}

int rds_tls_from_config(const cfg_redis_t *redis, rds_tls_t **out, tt_err_t *err)
{
    *out = NULL;
    if (!redis->tls.present)
        return 0;
    rds_options_t o;
    rds_tls_options_t tls;
    rds_options_from_config(redis, &o, &tls);
    return rds_tls_new(&tls, out, err);
}

int rds_tls_check(const cfg_redis_t *redis, tt_err_t *err)
{
    rds_tls_t *t;
    int rc = rds_tls_from_config(redis, &t, err);
    rds_tls_free(t);
    return rc;
}

void rds_gov_set_tls(rds_gov_t *g, rds_tls_t *tls)
{
    if (g->store != NULL)
        rds_store_set_tls(g->store, tls);
    else
        rds_tls_free(tls);
}

void rds_gov_set_credentials(rds_gov_t *g, const rds_credentials_t *c)
{
    if (g->store != NULL)
        rds_store_set_credentials(g->store, c);
}

int rds_gov_attach(rds_gov_t *g, gov_engine_t *engine, uv_loop_t *loop, const rds_options_t *o,
                   tt_err_t *err)
{
    memset(g, 0, sizeof(*g));
    rds_options_t with_data = *o;
    with_data.data = g;
    int rc = rds_store_new(loop, &with_data, &g->store, err);
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

/* Per node: one family per call of emit, then one sample per node and call. */
static void node_metrics(const rds_store_t *store, void (*emit)(void *ud, const char *line),
                         void *ud)
{
    static const struct {
        const char *name, *type, *help;
    } families[] = {
        {"node_calls_total", "counter", "Script calls sent to each Redis node."},
        {"node_errors_total", "counter",
         "Error or misshapen replies, timeouts and calls lost, per node."},
        {"node_redirects_total", "counter", "MOVED or ASK answered by each node."},
        {"node_latency_seconds", "summary", "From a script call's send to its reply, per node."},
        {"node_up", "gauge", "1 when the node is connected and its handshake done."},
    };
    rds_node_stats_t nodes[RDS_NODES_MAX + RDS_SEEDS_MAX];
    size_t n = rds_store_nodes(store, nodes, sizeof(nodes) / sizeof(nodes[0]));
    if (n > sizeof(nodes) / sizeof(nodes[0]))
        n = sizeof(nodes) / sizeof(nodes[0]);
    for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
        char line[1600], label[600];
        snprintf(line, sizeof(line),
                 "# HELP tokentriage_redis_%s %s\n# TYPE tokentriage_redis_%s %s\n",
                 families[f].name, families[f].help, families[f].name, families[f].type);
        emit(ud, line);
        for (size_t i = 0; i < n; i++) {
            const rds_node_stats_t *st = &nodes[i];
            tt_fmt_label(label, sizeof(label), st->node, strlen(st->node));
            const char *role = st->sentinel ? "sentinel" : "redis";
            const char *name = families[f].name;
            if (f == 3)
                snprintf(line, sizeof(line),
                         "tokentriage_redis_%s_sum{node=\"%s\",role=\"%s\"} %.9f\n"
                         "tokentriage_redis_%s_count{node=\"%s\",role=\"%s\"} %" PRIu64 "\n",
                         name, label, role, (double)st->latency_ns / 1e9, name, label, role,
                         st->replies);
            else
                snprintf(line, sizeof(line),
                         "tokentriage_redis_%s{node=\"%s\",role=\"%s\"} %" PRIu64 "\n", name, label,
                         role,
                         f == 0   ? st->calls
                         : f == 1 ? st->errors
                         : f == 2 ? st->redirects
                                  : (uint64_t)st->ready);
            emit(ud, line);
        }
    }
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
        {"calls_total", "Decisions (script operations) sent to Redis.", st.calls},
        {"batches_total", "Script calls sent to Redis, each carrying one or more decisions.",
         st.batches},
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
        {"redirects_total", "MOVED or ASK answers followed (Redis Cluster).", st.redirects},
        {"map_refreshes_total", "Cluster slot maps installed (Redis Cluster).", st.refreshes},
        {"primary_switches_total", "Primaries changed through Sentinel.", st.switches},
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
    if (g->store)
        node_metrics(g->store, emit, ud);
}
