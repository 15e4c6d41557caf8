/*
 * The schema: from the node tree to a cfg_config_t, reporting every error on the way.
 *
 * This is the seed's "validate" phase: names resolve (keys, types, algorithms, stores),
 * values are in range, and the parts agree with each other (the algorithm knob per the
 * seed's table, a rate-class limit has a period, a store binding names a declared section,
 * ids are unique). It does not compile a limit type: the domain checks (window ceiling, tau,
 * tpm reserve cap) belong to arming, exactly as the seed orders them, which is why a
 * sliding_window limit of 100000 on redis validates and then fails to arm.
 *
 * The walk never stops at the first error: each field is checked on its own, a field that
 * fails is left at its default, and checks that depend on a failed field are skipped so one
 * mistake gives one line. The model being built is new and private until the whole load
 * succeeds, which is what makes a reload all-or-nothing.
 *
 * Here: the entry points and the defaults. The walk is in sections.c (server, shared_state)
 * and governance.c (keys, limits), reading each field through schema.c (schema.h).
 */
#include "schema.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the model ---- */

static void set_defaults(cfg_config_t *cfg)
{
    snprintf(cfg->server.socket, sizeof(cfg->server.socket), "%s", CFG_DEFAULT_SOCKET);
    cfg->server.socket_mode = CFG_DEFAULT_SOCKET_MODE;
    snprintf(cfg->server.http, sizeof(cfg->server.http), "%s", CFG_DEFAULT_HTTP);
    cfg->server.max_counters = CFG_DEFAULT_MAX_COUNTERS;
    cfg->server.max_connections = CFG_DEFAULT_MAX_CONNECTIONS;
    cfg->server.snapshot_interval_ns = CFG_DEFAULT_SNAPSHOT_INTERVAL_NS;
    cfg->server.config_watch = true;
    cfg->server.config_poll_ns = CFG_DEFAULT_CONFIG_POLL_NS;
    cfg->server.record.max_bytes = CFG_DEFAULT_RECORD_MAX_BYTES;
    cfg->server.record.files = CFG_DEFAULT_RECORD_FILES;
    cfg->server.record.sample = 1;
    cfg->server.record.hash_subjects = true;
    cfg->server.log_level = TT_LOG_INFO;
    cfg->disclose_limits = true;
    snprintf(cfg->share.bind, sizeof(cfg->share.bind), "%s", CFG_DEFAULT_SHARE_BIND);
    cfg->share.partition_hold_ns = CFG_DEFAULT_PARTITION_HOLD_NS;
    cfg->share.join_timeout_ns = CFG_DEFAULT_JOIN_TIMEOUT_NS;
    cfg->share.cold_share = CFG_DEFAULT_COLD_SHARE;
    cfg->share.demand_interval_ns = CFG_DEFAULT_DEMAND_INTERVAL_NS;
    cfg->share.demand_keys = CFG_DEFAULT_DEMAND_KEYS;
    cfg->redis.timeout_ns = CFG_DEFAULT_REDIS_TIMEOUT_NS;
    cfg->server.grpc_stop_cache_key_increment_when_overlimit = true;
    snprintf(cfg->server.grpc_limit_header[0], CFG_HEADER_MAX + 1, "RateLimit-Limit");
    snprintf(cfg->server.grpc_limit_header[1], CFG_HEADER_MAX + 1, "RateLimit-Remaining");
    snprintf(cfg->server.grpc_limit_header[2], CFG_HEADER_MAX + 1, "RateLimit-Reset");
}

static const char *const root_keys[] = {"server", "governance", "shared_state", NULL};

int cfg_load_string(const char *name, const char *text, size_t len, cfg_config_t **out,
                    cfg_report_t *report)
{
    *out = NULL;
    cfg_doc_t doc;
    int rc = cfg__yaml_load(name, text, len, 0, &doc, report);
    if (rc < 0) {
        cfg__doc_free(&doc);
        return rc;
    }
    cfg_config_t *cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        cfg__doc_free(&doc);
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return CFG_ENOMEM;
    }
    snprintf(cfg->source, sizeof(cfg->source), "%s", name);
    set_defaults(cfg);
    struct cfg__ctx c = {.file = name, .report = report, .cfg = cfg, .errors = doc.errors};
    const cfg_node_t *root = doc.root, *v;
    if (!root || (root->kind == CFG_NODE_SCALAR && root->null)) {
        cfg__err(&c, "(root)", root,
                 "the configuration is empty; expected a mapping with server, "
                 "governance and shared_state");
    } else if (root->kind != CFG_NODE_MAP) {
        cfg__err(&c, "(root)", root,
                 "expected a mapping with server, governance and shared_state, "
                 "got %s",
                 cfg__kind_name(root));
    } else {
        cfg__want_map(&c, root, "", root_keys);
        /* shared_state first: store bindings in governance resolve against it */
        if ((v = cfg__map_get(root, "server")))
            cfg__load_server(&c, v);
        if ((v = cfg__map_get(root, "shared_state")))
            cfg__load_shared_state(&c, v);
        if ((v = cfg__map_get(root, "governance")))
            cfg__load_governance(&c, v);
        const cfg_node_t *srv = cfg__map_get(root, "server");
        if ((v = srv && srv->kind == CFG_NODE_MAP ? cfg__map_get(srv, "grpc_config_store") : NULL))
            cfg__check_store_declared(&c, "server.grpc_config_store", v,
                                      cfg->server.grpc_config_store);
        cfg__rules_check(&c, root);
    }
    cfg__doc_free(&doc);
    if (!c.errors && !c.oom) {
        int rc2 = cfg__add_overrides(cfg, report);
        c.oom = rc2 == CFG_ENOMEM;
        c.errors += rc2 == CFG_EINVALID;
    }
    if (c.oom) {
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        cfg_free(cfg);
        return CFG_ENOMEM;
    }
    if (c.errors) {
        cfg_free(cfg);
        return CFG_EINVALID;
    }
    *out = cfg;
    return 0;
}

int cfg_load_file(const char *path, cfg_config_t **out, cfg_report_t *report)
{
    *out = NULL;
    char *buf;
    size_t len;
    int rc = cfg__read_file(path, &buf, &len, report);
    if (rc < 0)
        return rc;
    rc = cfg_load_string(path, buf, len, out, report);
    free(buf);
    if (rc == 0 && (*out)->server.grpc_config_dir[0]) {
        rc = cfg_load_grpc_config_dir(*out, (*out)->server.grpc_config_dir, report);
        if (rc < 0) {
            cfg_free(*out);
            *out = NULL;
        }
    }
    return rc;
}

void cfg_free(cfg_config_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->limits);
    cfg__tokens_free(&cfg->tokens);
    free(cfg);
}

const cfg_limit_t *cfg_find_limit(const cfg_config_t *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->n_limits; i++)
        if (strcmp(cfg->limits[i].id, id) == 0)
            return &cfg->limits[i];
    return NULL;
}
