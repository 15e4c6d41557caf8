/* The test Redis Cluster: see cluster.h. */
#include "cluster.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "slots.h"

static const char *const cluster_args[] = {
    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
    /* short, so a failover is quick; loopback on a loaded machine still meets it */
    "--cluster-node-timeout", "1000",
    /* a replica always stands for election, however long since it last heard its primary */
    "--cluster-replica-validity-factor", "0", NULL};

static bool node_ok(rh_server_t *s)
{
    redisContext *c = rh_connect(s);
    if (c == NULL)
        return false;
    redisReply *r = redisCommand(c, "CLUSTER INFO");
    bool ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, "cluster_state:ok");
    freeReplyObject(r);
    redisFree(c);
    return ok;
}

int rc_primary_of(rc_cluster_t *c, int asked, int slot)
{
    redisContext *conn = rh_connect(&c->node[asked]);
    if (conn == NULL)
        return -1;
    redisReply *r = redisCommand(conn, "CLUSTER SLOTS");
    static rds_map_t map;
    tt_err_t err;
    rds_endpoint_t at = {.host = "127.0.0.1", .port = c->node[asked].port};
    int found = -1;
    if (rds_map_parse(r, &at, &map, &err) == 0 && map.slot[slot] != RDS_MAP_NONE)
        for (int i = 0; i < RC_NODES; i++)
            if (c->node[i].port == map.nodes[map.slot[slot]].port)
                found = i;
    freeReplyObject(r);
    redisFree(conn);
    return found;
}

bool rc_ok(rc_cluster_t *c)
{
    int first = -1;
    for (int i = 0; i < RC_NODES; i++) {
        if (c->node[i].pid == 0)
            continue;
        if (!node_ok(&c->node[i]))
            return false;
        for (int slot = 0; slot < RDS_SLOTS; slot += 4096) { /* a sample of the map */
            int p = rc_primary_of(c, i, slot);
            if (p < 0 || c->node[p].pid == 0)
                return false;
        }
        if (first < 0)
            first = i;
        else if (rc_primary_of(c, i, 16383) != rc_primary_of(c, first, 16383))
            return false;
    }
    return first >= 0;
}

bool rc_is_primary(rc_cluster_t *c, int i)
{
    redisContext *conn = rh_connect(&c->node[i]);
    if (conn == NULL)
        return false;
    redisReply *r = redisCommand(conn, "ROLE");
    bool primary = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                   r->element[0]->type == REDIS_REPLY_STRING &&
                   strcmp(r->element[0]->str, "master") == 0;
    freeReplyObject(r);
    redisFree(conn);
    return primary;
}

int rc_node_id(rc_cluster_t *c, int i, char id[41])
{
    redisContext *conn = rh_connect(&c->node[i]);
    if (conn == NULL)
        return -1;
    redisReply *r = redisCommand(conn, "CLUSTER MYID");
    int rc = r && r->type == REDIS_REPLY_STRING && r->len == 40 ? 0 : -1;
    if (rc == 0)
        memcpy(id, r->str, 41);
    freeReplyObject(r);
    redisFree(conn);
    return rc;
}

const char *rc_key_in_slot(int slot, char *buf, size_t n)
{
    for (unsigned i = 0;; i++) {
        snprintf(buf, n, "k%u", i);
        if (rds_key_slot(buf, strlen(buf)) == slot)
            return buf;
    }
}

int rc_start(rc_cluster_t *c)
{
    rc_options_t none = {0};
    return rc_start_with(c, &none);
}

/* Node i's arguments: the cluster's, then the password's and TLS's. */
static const char *const *node_args(rc_cluster_t *c, int i, const rc_options_t *o)
{
    const char **a = c->args[i];
    int n = 0;
    for (int k = 0; cluster_args[k]; k++)
        a[n++] = cluster_args[k];
    if (o->password) {
        const char *auth[] = {"--requirepass", o->password, "--masterauth", o->password};
        for (int k = 0; k < 4; k++)
            a[n++] = auth[k];
    }
    if (o->cert) {
        int port;
        do /* the cluster bus listens 10000 above the TLS port, which Redis wants <= 55535 */
            port = rh_free_port();
        while (port > 55535 || !rh_port_free(port + 10000));
        snprintf(c->storage[i], sizeof(c->storage[i]), "%d", port);
        snprintf(c->tls_address[i], sizeof(c->tls_address[i]), "127.0.0.1:%d", port);
        const char *tls[] = {"--tls-port",         c->storage[i], "--tls-cert-file",    o->cert,
                             "--tls-key-file",     o->key,        "--tls-ca-cert-file", o->ca,
                             "--tls-auth-clients", "optional",    "--tls-cluster",      "yes",
                             "--tls-replication",  "yes"};
        for (size_t k = 0; k < sizeof(tls) / sizeof(tls[0]); k++)
            a[n++] = tls[k];
    }
    a[n] = NULL;
    return a;
}

int rc_start_with(rc_cluster_t *c, const rc_options_t *o)
{
    memset(c, 0, sizeof(*c));
    if (o->password)
        snprintf(c->password, sizeof(c->password), "%s", o->password);
    const char *argv[24] = {"redis-cli"};
    int n = 1;
    if (o->password) {
        argv[n++] = "-a";
        argv[n++] = c->password;
        argv[n++] = "--no-auth-warning";
    }
    argv[n++] = "--cluster";
    argv[n++] = "create";
    for (int i = 0; i < RC_NODES; i++) {
        /* with TLS, a node that did not start may have met its bus port (TLS port + 10000)
         * taken: node_args draws another TLS port each time */
        int started = -1;
        for (int attempt = 0; attempt < (o->cert ? 5 : 1) && started != 0; attempt++)
            started = rh_start_with(&c->node[i], node_args(c, i, o), NULL);
        if (started != 0) {
            fprintf(stderr, "cluster node %d did not start\n", i);
            rc_stop(c);
            return -1;
        }
        if (o->password)
            c->node[i].password = c->password;
        argv[n++] = c->node[i].address;
    }
    for (int i = 0; i < 3; i++)
        c->seeds[i] = o->cert ? c->tls_address[i] : c->node[i].address;
    const char *tail[] = {"--cluster-replicas", "1", "--cluster-yes", NULL};
    memcpy(argv + n, tail, sizeof(tail));
    if (rh_run_program(argv, 60000) != 0) {
        fprintf(stderr, "redis-cli --cluster create failed\n");
        rc_stop(c);
        return -1;
    }
    long long deadline = rh_now_ms() + 30000;
    while (!rc_ok(c)) {
        if (rh_now_ms() > deadline) {
            fprintf(stderr, "the cluster never reported cluster_state:ok everywhere\n");
            rc_stop(c);
            return -1;
        }
        usleep(20000); /* polling the cluster's state, bounded by the deadline */
    }
    return 0;
}

void rc_stop(rc_cluster_t *c)
{
    for (int i = 0; i < RC_NODES; i++)
        rh_stop(&c->node[i]);
}
