/*
 * Which Redis serves a key (store_int.h): one address; a Redis Cluster's slot map; or the
 * primary that Sentinel names.
 *
 * Cluster. The seeds are connected first; the first that completes its handshake is asked
 * CLUSTER SLOTS, and the map it answers becomes the route: slot -> primary, one connection per
 * primary (at most RDS_NODES_MAX), every one of them loaded with the scripts by its handshake.
 * The map is asked again, at most once per REFRESH_GAP_MS, whenever it may be stale: a MOVED
 * (whose slot is re-routed at once), a CLUSTERDOWN, a call for a slot with no ready primary,
 * and a primary's connection lost or failing to come back (a failover: its replica is promoted
 * and the next map names it). It is also asked on its own: every REFRESH_PERIOD_MS while the map
 * is whole and its primaries ready (a failover that lost us no connection, a manual one or a
 * resharding, with no call to meet a MOVED), and every REFRESH_RETRY_MS while it is not (a
 * primary gone and its replica not promoted yet: the new primary is connected as soon as the
 * map names it, before any call needs it). When no primary is reachable the seeds are connected
 * again.
 * A primary that leaves the map is disconnected once none of its calls is in flight.
 *
 * Sentinel. One Sentinel at a time is asked SENTINEL get-master-addr-by-name and, on the same
 * connection, subscribed to +switch-master; when it fails or is lost the next one in the list
 * is asked. A new primary (from the answer or a +switch-master for our master) is connected at
 * once, without backoff, and every connection to the primary checks ROLE in its handshake, so a
 * demoted primary is never used. Losing the primary re-asks (a +switch-master may have been
 * missed while the subscription was down).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define REFRESH_GAP_MS 100     /* between two CLUSTER SLOTS */
#define REFRESH_RETRY_MS 500   /* while the map is not whole, or could not be used */
#define REFRESH_PERIOD_MS 5000 /* while it is: a failover or a resharding nobody told us of */

int rds_address_parse(const char *address, char *host, size_t hostsz, int *port, tt_err_t *err)
{
    const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address;
    size_t n = strlen(address);
    if (path[0] == '/') {
        if (strlen(path) >= hostsz || strlen(path) >= 108) /* sun_path */
            goto bad;
        snprintf(host, hostsz, "%s", path);
        *port = 0;
        return 0;
    }
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address || n == 0)
        goto bad;
    const char *h = address, *h_end = colon;
    if (address[0] == '[') { /* [v6]:port */
        if (colon[-1] != ']')
            goto bad;
        h++;
        h_end--;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p < 1 || p > 65535 || h_end <= h ||
        (size_t)(h_end - h) >= hostsz)
        goto bad;
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = '\0';
    *port = (int)p;
    return 0;
bad:
    return tt_err_set(err, RDS_EADDRESS, "shared_state.redis.address",
                      "\"%.*s\" is neither host:port nor a unix socket path (/path or unix:/path)",
                      (int)(n > 80 ? 80 : n), address);
}

static int parse_endpoint(const char *address, const char *path, rds_endpoint_t *e, tt_err_t *err)
{
    if (rds_address_parse(address, e->host, sizeof(e->host), &e->port, err) == 0 && e->port != 0)
        return 0;
    return tt_err_set(err, RDS_EADDRESS, path, "\"%.100s\" is not host:port", address);
}

int rds__topology_parse(rds_store_t *s, const rds_options_t *o, tt_err_t *err)
{
    bool single = o->address != NULL && o->address[0] != '\0';
    if (single + (o->n_cluster > 0) + (o->n_sentinels > 0) != 1 || o->n_cluster > RDS_SEEDS_MAX ||
        o->n_sentinels > RDS_SEEDS_MAX)
        return tt_err_set(err, RDS_EADDRESS, "shared_state.redis",
                          "give one of address, cluster (at most %d seeds) or sentinels (at most "
                          "%d) with master",
                          RDS_SEEDS_MAX, RDS_SEEDS_MAX);
    memset(s->route, RDS_MAP_NONE, sizeof(s->route));
    if (single) {
        s->mode = RDS_MODE_SINGLE;
        s->n_seeds = 1;
        return rds_address_parse(o->address, s->seeds[0].host, sizeof(s->seeds[0].host),
                                 &s->seeds[0].port, err);
    }
    bool cluster = o->n_cluster > 0;
    s->mode = cluster ? RDS_MODE_CLUSTER : RDS_MODE_SENTINEL;
    s->n_seeds = (uint32_t)(cluster ? o->n_cluster : o->n_sentinels);
    for (uint32_t i = 0; i < s->n_seeds; i++) {
        char path[64];
        snprintf(path, sizeof(path), "shared_state.redis.%s[%u]", cluster ? "cluster" : "sentinels",
                 i);
        int rc = parse_endpoint(cluster ? o->cluster[i] : o->sentinels[i], path, &s->seeds[i], err);
        if (rc < 0)
            return rc;
    }
    if (cluster)
        return (s->scratch = malloc(sizeof(*s->scratch)))
                   ? 0
                   : tt_err_set(err, TT_ERR_NOMEM, "", "redis: out of memory");
    if (o->master == NULL || o->master[0] == '\0' || strlen(o->master) > RDS_MASTER_MAX)
        return tt_err_set(err, RDS_EADDRESS, "shared_state.redis.master",
                          "Sentinel needs the master's name");
    snprintf(s->master, sizeof(s->master), "%s", o->master);
    return 0;
}

/* Wants n and connects it unless a reconnect is already scheduled (its backoff stands). */
static void want(rds_node_t *n)
{
    n->wanted = true;
    if (n->conn == NULL && !uv_is_active((uv_handle_t *)&n->reconnect))
        rds__node_connect(n);
}

static void want_seeds(rds_store_t *s)
{
    for (uint32_t i = 0; i < s->n_seeds; i++) {
        rds_node_t *n = rds__node_get(s, &s->seeds[i], false);
        if (n != NULL)
            want(n);
    }
}

void rds__topology_start(rds_store_t *s)
{
    switch (s->mode) {
    case RDS_MODE_SINGLE:
        s->primary = rds__node_get(s, &s->seeds[0], false);
        want(s->primary);
        break;
    case RDS_MODE_CLUSTER:
        s->refresh_wanted = true;
        want_seeds(s);
        break;
    case RDS_MODE_SENTINEL:
        s->watcher = rds__node_get(s, &s->seeds[0], true);
        want(s->watcher);
        break;
    }
}

/* ---- the cluster's map -------------------------------------------------------------------- */

static void on_refresh(uv_timer_t *t)
{
    rds_store_t *s = t->data;
    if (s->closing || s->refresh_in_flight)
        return;
    for (uint32_t k = 0; k < s->n_nodes; k++) {
        rds_node_t *n = s->nodes[(s->refresh_cursor + k) % s->n_nodes];
        if (!n->wanted || !rds__node_usable(n))
            continue;
        const char *argv[] = {"CLUSTER", "SLOTS"};
        const size_t len[] = {7, 5};
        if (s->topology_hooks->send(n, RDS_CALL_SLOTS, 2, argv, len) < 0)
            continue;
        s->refresh_cursor = n->index + 1;
        s->refresh_in_flight = true;
        s->refresh_wanted = false;
        s->last_refresh_ms = uv_now(s->loop);
        return;
    }
    want_seeds(s); /* nobody to ask: the seeds again; the first ready one is asked */
}

/* The next CLUSTER SLOTS in `ms` at the latest: a sooner one already armed stands. */
static void refresh_in(rds_store_t *s, uint64_t ms)
{
    if (!uv_is_active((uv_handle_t *)&s->refresh) || uv_timer_get_due_in(&s->refresh) > ms)
        uv_timer_start(&s->refresh, on_refresh, ms, 0);
}

void rds__refresh_failed(rds_store_t *s)
{
    s->refresh_in_flight = false;
    if (!s->closing)
        refresh_in(s, REFRESH_RETRY_MS);
}

void rds__refresh_soon(rds_store_t *s)
{
    if (s->mode != RDS_MODE_CLUSTER || s->closing)
        return;
    s->refresh_wanted = true;
    if (s->refresh_in_flight)
        return;
    uint64_t now = uv_now(s->loop), due = s->last_refresh_ms + REFRESH_GAP_MS;
    refresh_in(s, due > now && s->last_refresh_ms ? due - now : 0);
}

/* Makes `map` the route. The nodes it names are found or made and wanted; the others are no
 * longer wanted, and disconnected when none of their calls is in flight. */
static int install(rds_store_t *s, const rds_map_t *map, tt_err_t *err)
{
    uint8_t index[RDS_NODES_MAX];
    bool keep[RDS_CONNS_MAX] = {false};
    for (uint32_t i = 0; i < s->n_nodes; i++)
        s->nodes[i]->wanted = false; /* so that spare nodes can be re-pointed */
    for (uint32_t i = 0; i < map->n_nodes; i++) {
        rds_node_t *n = rds__node_get(s, &map->nodes[i], false);
        if (n == NULL) {
            for (uint32_t slot = 0; slot < RDS_SLOTS; slot++)
                if (s->route[slot] != RDS_MAP_NONE)
                    s->nodes[s->route[slot]]->wanted = true;
            return tt_err_set(err, RDS_EMAP, "",
                              "redis: the cluster names more primaries than free connections");
        }
        n->wanted = keep[n->index] = true;
        index[i] = (uint8_t)n->index;
    }
    for (uint32_t slot = 0; slot < RDS_SLOTS; slot++)
        s->route[slot] = map->slot[slot] == RDS_MAP_NONE ? RDS_MAP_NONE : index[map->slot[slot]];
    s->covered = map->covered;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        rds_node_t *n = s->nodes[i];
        if (keep[i])
            want(n);
        else if (n->conn != NULL && n->pending == 0)
            rds__node_drop(n, NULL);
    }
    s->stats.refreshes++;
    return 0;
}

int rds__on_slots(rds_call_t *c, const redisReply *reply, tt_err_t *err)
{
    rds_store_t *s = c->store;
    s->refresh_in_flight = false;
    int rc = rds_map_parse(reply, &c->node->at, s->scratch, err);
    if (rc < 0 || (rc = install(s, s->scratch, err)) < 0) {
        refresh_in(s, REFRESH_RETRY_MS);
        return rc;
    }
    if (s->refresh_wanted) /* something asked again while this one was out */
        rds__refresh_soon(s);
    else /* the next one on its own: soon while a primary is missing, else periodically */
        refresh_in(s, rds__topology_ready(s) ? REFRESH_PERIOD_MS : REFRESH_RETRY_MS);
    return 0;
}

void rds__moved(rds_store_t *s, int slot, rds_node_t *to)
{
    if (to != NULL && s->mode == RDS_MODE_CLUSTER) {
        if (s->route[slot] == RDS_MAP_NONE)
            s->covered++;
        s->route[slot] = (uint8_t)to->index;
    }
    rds__refresh_soon(s);
}

rds_node_t *rds__route(rds_store_t *s, int slot)
{
    if (s->mode != RDS_MODE_CLUSTER)
        return s->primary;
    uint8_t i = s->route[slot];
    rds_node_t *n = i == RDS_MAP_NONE ? NULL : s->nodes[i];
    if (!rds__node_usable(n))
        rds__refresh_soon(s);
    return n;
}

bool rds__topology_ready(const rds_store_t *s)
{
    if (s->mode != RDS_MODE_CLUSTER)
        return rds__node_usable(s->primary);
    if (s->covered != RDS_SLOTS)
        return false;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        if (s->nodes[i]->wanted && !rds__node_usable(s->nodes[i]))
            return false;
    return true;
}

/* ---- Sentinel ----------------------------------------------------------------------------- */

static bool same(const rds_endpoint_t *a, const rds_endpoint_t *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* The primary is at `at` (Sentinel said so): connect there now, without backoff. */
static void set_primary(rds_store_t *s, const rds_endpoint_t *at)
{
    rds_node_t *old = s->primary;
    if (old != NULL && same(&old->at, at)) {
        old->backoff_ms = s->backoff_min_ms;
        if (old->conn == NULL)
            uv_timer_stop(&old->reconnect);
        want(old);
        return;
    }
    if (old != NULL) {
        old->wanted = false;
        rds__node_drop(old, "redis: Sentinel names another primary");
        s->stats.switches++;
    }
    s->primary = rds__node_get(s, at, false);
    if (s->primary != NULL)
        want(s->primary);
}

int rds__topology_primary(rds_node_t *n, const redisReply *reply, tt_err_t *err)
{
    rds_endpoint_t at;
    int rc = rds_sentinel_addr_parse(reply, &at, err);
    if (rc == 0)
        set_primary(n->store, &at);
    return rc;
}

int rds__topology_message(rds_node_t *n, const redisReply *reply, tt_err_t *err)
{
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
        reply->element[0]->type != REDIS_REPLY_STRING ||
        strcmp(reply->element[0]->str, "message") != 0 ||
        reply->element[2]->type != REDIS_REPLY_STRING)
        return 0; /* not a message of the channel */
    rds_endpoint_t at;
    const redisReply *m = reply->element[2];
    int rc = rds_switch_master_parse(m->str, m->len, n->store->master, &at, err);
    if (rc == 0)
        set_primary(n->store, &at);
    return rc < 0 ? rc : 0;
}

void rds__topology_node_ready(rds_node_t *n)
{
    rds_store_t *s = n->store;
    if (s->mode == RDS_MODE_CLUSTER && s->refresh_wanted)
        rds__refresh_soon(s);
}

void rds__topology_node_lost(rds_node_t *n)
{
    rds_store_t *s = n->store;
    if (s->closing)
        return;
    if (s->mode == RDS_MODE_CLUSTER && n->wanted) {
        rds__refresh_soon(s);
    } else if (s->mode == RDS_MODE_SENTINEL && n == s->watcher) {
        s->seed_cursor = (s->seed_cursor + 1) % s->n_seeds; /* the next Sentinel */
        n->at = s->seeds[s->seed_cursor];
    } else if (s->mode == RDS_MODE_SENTINEL && n == s->primary && n->wanted &&
               s->watcher->conn != NULL) {
        rds__node_drop(s->watcher, NULL); /* ask again */
    }
}
