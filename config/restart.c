/*
 * What a reload cannot change in a running daemon. Limits swap live (gov_engine_reload_prepare,
 * then _commit); the listeners, the counter table's size, membership and the Redis connection
 * are built once at start. Field by field, not memcmp: the structs are copied around and their
 * padding is not guaranteed to match.
 */
#include <string.h>

#include "config.h"

static bool http_differs(const cfg_server_t *a, const cfg_server_t *b)
{
    if (a->http_decide != b->http_decide || a->n_http_subject != b->n_http_subject ||
        strcmp(a->http_tokens, b->http_tokens) != 0)
        return true;
    for (size_t i = 0; i < a->n_http_subject; i++)
        if (strcmp(a->http_subject[i].level, b->http_subject[i].level) != 0 ||
            strcmp(a->http_subject[i].header, b->http_subject[i].header) != 0)
            return true;
    return false;
}

static bool record_differs(const cfg_record_t *a, const cfg_record_t *b)
{
    return strcmp(a->file, b->file) != 0 || a->max_bytes != b->max_bytes || a->files != b->files ||
           a->sample != b->sample || a->hash_subjects != b->hash_subjects ||
           strcmp(a->hash_key_file, b->hash_key_file) != 0;
}

static bool server_differs(const cfg_server_t *a, const cfg_server_t *b)
{
    /* grpc_domains and grpc_charge_domains apply on reload: the front door reads them live; so
     * does tokens_file (path and content: the doors check callers against the armed config's) */
    if (strcmp(a->grpc, b->grpc) != 0 || http_differs(a, b))
        return true;
    return strcmp(a->socket, b->socket) != 0 || a->socket_mode != b->socket_mode ||
           strcmp(a->socket_group, b->socket_group) != 0 || strcmp(a->http, b->http) != 0 ||
           a->max_counters != b->max_counters || a->max_connections != b->max_connections ||
           strcmp(a->state_dir, b->state_dir) != 0 ||
           a->snapshot_interval_ns != b->snapshot_interval_ns ||
           a->config_watch != b->config_watch || a->config_poll_ns != b->config_poll_ns ||
           record_differs(&a->record, &b->record) || a->n_allow_uids != b->n_allow_uids ||
           a->n_allow_gids != b->n_allow_gids ||
           memcmp(a->allow_uids, b->allow_uids, a->n_allow_uids * sizeof(a->allow_uids[0])) != 0 ||
           memcmp(a->allow_gids, b->allow_gids, a->n_allow_gids * sizeof(a->allow_gids[0])) != 0;
}

static bool lists_differ(const char (*a)[CFG_ADDR_MAX + 1], size_t na,
                         const char (*b)[CFG_ADDR_MAX + 1], size_t nb)
{
    if (na != nb)
        return true;
    for (size_t i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return true;
    return false;
}

static bool share_differs(const cfg_share_t *a, const cfg_share_t *b)
{
    if (a->present != b->present || lists_differ(a->seeds, a->n_seeds, b->seeds, b->n_seeds))
        return true;
    return strcmp(a->node_id, b->node_id) != 0 || strcmp(a->bind, b->bind) != 0 ||
           strcmp(a->advertise, b->advertise) != 0 ||
           strcmp(a->keyring_file, b->keyring_file) != 0 || strcmp(a->cluster, b->cluster) != 0 ||
           a->partition_hold_ns != b->partition_hold_ns ||
           a->join_timeout_ns != b->join_timeout_ns || a->division != b->division ||
           a->cold_share != b->cold_share || a->demand_interval_ns != b->demand_interval_ns ||
           a->demand_keys != b->demand_keys;
}

static bool redis_differs(const cfg_redis_t *a, const cfg_redis_t *b)
{
    return a->present != b->present || strcmp(a->address, b->address) != 0 ||
           lists_differ(a->cluster, a->n_cluster, b->cluster, b->n_cluster) ||
           lists_differ(a->sentinels, a->n_sentinels, b->sentinels, b->n_sentinels) ||
           strcmp(a->master, b->master) != 0 || a->timeout_ns != b->timeout_ns;
}

size_t cfg_restart_sections(const cfg_config_t *running, const cfg_config_t *reloaded,
                            const char *names[CFG_RESTART_SECTIONS])
{
    size_t n = 0;
    if (server_differs(&running->server, &reloaded->server))
        names[n++] = "server";
    if (share_differs(&running->share, &reloaded->share))
        names[n++] = "shared_state.share";
    if (redis_differs(&running->redis, &reloaded->redis))
        names[n++] = "shared_state.redis";
    return n;
}
