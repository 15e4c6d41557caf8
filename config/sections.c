/* The schema of the server and shared_state sections (share, redis). */
#include "schema.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- sections ---- */

static const char *const server_keys[] = {"socket",
                                          "socket_mode",
                                          "socket_group",
                                          "http",
                                          "http_decide",
                                          "http_subject",
                                          "http_tokens",
                                          "tokens_file",
                                          "max_counters",
                                          "max_connections",
                                          "allow_uids",
                                          "allow_gids",
                                          "state_dir",
                                          "snapshot_interval",
                                          "config_watch",
                                          "config_poll",
                                          "record",
                                          "log_level",
                                          "grpc",
                                          "grpc_domains",
                                          "grpc_charge_domains",
                                          "grpc_config_dir",
                                          "grpc_config_store",
                                          "grpc_merge_domain_config",
                                          "grpc_stop_cache_key_increment_when_overlimit",
                                          "grpc_shadow_mode",
                                          "grpc_limit_headers",
                                          NULL};
static const char *const record_keys[] = {"file",          "max_bytes",     "files", "sample",
                                          "hash_subjects", "hash_key_file", NULL};
static const char *const limit_header_keys[] = {"limit", "remaining", "reset", NULL};
static const char *const http_decide_names[] = {"off", "on", NULL};

/* An HTTP header name: an RFC 9110 token. */
static int header_char(int ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* An absolute path, or "" when empty is allowed: 0, or an error reported. */
static int get_abs_path(struct cfg__ctx *c, const cfg_node_t *v, const char *path, char *out,
                        const char *empty)
{
    if (cfg__get_string(c, v, path, out, CFG_PATH_MAX, true, NULL, "a path") != 0)
        return -1;
    if (out[0] && out[0] != '/') {
        cfg__err(c, path, v, "\"%s\" must be an absolute path (or \"\" for %s)", out, empty);
        return -1;
    }
    return 0;
}

/* server.record: the decisions' inputs kept for `simulate --traffic` (docs/operators.md). */
static void load_record(struct cfg__ctx *c, const cfg_node_t *n)
{
    cfg_record_t *r = &c->cfg->server.record;
    const cfg_node_t *m = cfg__want_map(c, n, "server.record", record_keys), *v;
    if (!m)
        return;
    if ((v = cfg__at(m, "file")))
        get_abs_path(c, v, "server.record.file", r->file, "no recording");
    else
        cfg__err(c, "server.record.file", m, "required: where the recording is written");
    if ((v = cfg__at(m, "max_bytes")))
        cfg__get_int(c, v, "server.record.max_bytes", 4096, INT64_C(1) << 40, &r->max_bytes);
    if ((v = cfg__at(m, "files")))
        cfg__get_int(c, v, "server.record.files", 1, CFG_RECORD_FILES_MAX, &r->files);
    if ((v = cfg__at(m, "sample")))
        cfg__get_int(c, v, "server.record.sample", 1, 1000000, &r->sample);
    if ((v = cfg__at(m, "hash_subjects")))
        cfg__get_bool(c, v, "server.record.hash_subjects", &r->hash_subjects);
    if ((v = cfg__at(m, "hash_key_file")))
        get_abs_path(c, v, "server.record.hash_key_file", r->hash_key_file,
                     "a key drawn at each start");
}

/* server.http_subject: level -> header, and server.http_tokens: one header; no header twice. */
static void load_http_mapping(struct cfg__ctx *c, const cfg_node_t *subject,
                              const cfg_node_t *tokens)
{
    cfg_server_t *s = &c->cfg->server;
    char p[PATH_SIZE];
    if (subject && !subject->failed && subject->kind != CFG_NODE_MAP)
        cfg__err(c, "server.http_subject", subject,
                 "expected a mapping of subject levels to header names, got %s",
                 subject->null ? "an empty value" : cfg__kind_name(subject));
    else if (subject && subject->n > CFG_HTTP_SUBJECT_MAX)
        cfg__err(c, "server.http_subject", subject, "%zu levels; at most %d", subject->n,
                 CFG_HTTP_SUBJECT_MAX);
    else if (subject && !subject->failed) {
        for (size_t i = 0; i < subject->n; i++) {
            const cfg_node_t *k = subject->items[2 * i], *v = subject->items[2 * i + 1];
            cfg_http_level_t *e = &s->http_subject[s->n_http_subject];
            cfg__join(p, "server.http_subject", k->text);
            if (cfg__get_string(c, k, p, e->level, CFG_LEVEL_MAX, false, cfg__level_char,
                                "a level name") ||
                cfg__get_string(c, v, p, e->header, CFG_HEADER_MAX, false, header_char,
                                "an HTTP header name"))
                continue;
            if (strcmp(e->level, "global") == 0) {
                cfg__err(c, p, k, "\"global\" is one counter for every request; it takes no id");
                continue;
            }
            size_t j = 0;
            while (j < s->n_http_subject && strcasecmp(s->http_subject[j].header, e->header) != 0)
                j++;
            if (j < s->n_http_subject) {
                cfg__err(c, p, v, "header %s already names level %s", e->header,
                         s->http_subject[j].level);
                continue;
            }
            s->n_http_subject++;
        }
    }
    if (!tokens || cfg__get_string(c, tokens, "server.http_tokens", s->http_tokens, CFG_HEADER_MAX,
                                   false, header_char, "an HTTP header name"))
        return;
    for (size_t j = 0; j < s->n_http_subject; j++) {
        if (strcasecmp(s->http_subject[j].header, s->http_tokens) == 0) {
            cfg__err(c, "server.http_tokens", tokens, "header %s already names level %s",
                     s->http_tokens, s->http_subject[j].level);
            s->http_tokens[0] = '\0';
        }
    }
}

/* server.allow_uids / allow_gids: a sequence of numeric ids (names would need NSS at load). */
static void get_ids(struct cfg__ctx *c, const cfg_node_t *v, const char *key, uint32_t *ids,
                    size_t *n)
{
    char p[PATH_SIZE];
    snprintf(p, sizeof(p), "server.%s", key);
    if (v->kind != CFG_NODE_SEQ) {
        cfg__err(c, p, v, "expected a sequence of numeric ids, got %s",
                 v->null ? "an empty value" : cfg__kind_name(v));
        return;
    }
    if (v->n > CFG_ALLOW_MAX) {
        cfg__err(c, p, v, "%zu ids; at most %d", v->n, CFG_ALLOW_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        int64_t id;
        snprintf(p, sizeof(p), "server.%s[%zu]", key, i);
        if (cfg__get_int(c, v->items[i], p, 0, UINT32_MAX - 1, &id) == 0)
            ids[(*n)++] = (uint32_t)id;
    }
}

static int domain_char(int ch)
{
    return isgraph(ch);
}

/* server.grpc_domains / grpc_charge_domains: Envoy rate limit domains (printable, no spaces). */
static void get_domains(struct cfg__ctx *c, const cfg_node_t *v, const char *key,
                        char (*out)[CFG_NAME_MAX + 1], size_t *n)
{
    char p[PATH_SIZE];
    snprintf(p, sizeof(p), "server.%s", key);
    if (v->kind != CFG_NODE_SEQ) {
        cfg__err(c, p, v, "expected a sequence of domain names, got %s",
                 v->null ? "an empty value" : cfg__kind_name(v));
        return;
    }
    if (v->n > CFG_DOMAINS_MAX) {
        cfg__err(c, p, v, "%zu domains; at most %d", v->n, CFG_DOMAINS_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        snprintf(p, sizeof(p), "server.%s[%zu]", key, i);
        if (cfg__get_string(c, v->items[i], p, out[*n], CFG_NAME_MAX, false, domain_char,
                            "a domain name (printable, no spaces)") == 0)
            (*n)++;
    }
}

/* server.grpc: host:port, or an absolute unix socket path; "" is off. */
static void get_grpc(struct cfg__ctx *c, const cfg_node_t *v, char *out)
{
    const char *s = cfg__want_scalar(c, v, "server.grpc");
    if (s && s[0] == '/')
        cfg__get_string(c, v, "server.grpc", out, CFG_SOCKET_PATH_MAX, false, NULL, "a path");
    else if (s && *s && !strchr(s, ':'))
        cfg__err(c, "server.grpc", v,
                 "\"%s\" is neither host:port nor an absolute unix socket path", s);
    else if (s)
        cfg__get_address(c, v, "server.grpc", out, true, true);
}

/* server.grpc_limit_headers: envoy ratelimit's LIMIT_RESPONSE_HEADERS_ENABLED, its three names
 * (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER) defaulted as there. */
static void load_limit_headers(struct cfg__ctx *c, const cfg_node_t *v)
{
    cfg_server_t *s = &c->cfg->server;
    char p[PATH_SIZE];
    const cfg_node_t *m = v->kind == CFG_NODE_SCALAR && v->null && !v->failed
                              ? NULL
                              : cfg__want_map(c, v, "server.grpc_limit_headers", limit_header_keys);
    if (!m && !(v->kind == CFG_NODE_SCALAR && v->null && !v->failed))
        return;
    s->grpc_limit_headers = true;
    for (size_t i = 0; i < 3; i++) {
        const cfg_node_t *h = cfg__at(m, limit_header_keys[i]);
        cfg__join(p, "server.grpc_limit_headers", limit_header_keys[i]);
        if (h)
            cfg__get_string(c, h, p, s->grpc_limit_header[i], CFG_HEADER_MAX, false, header_char,
                            "an HTTP header name");
    }
}

void cfg__load_server(struct cfg__ctx *c, const cfg_node_t *n)
{
    cfg_server_t *s = &c->cfg->server;
    char p[PATH_SIZE];
    const cfg_node_t *m = cfg__want_map(c, n, "server", server_keys), *v;
    if ((v = cfg__at(m, "socket")) &&
        cfg__get_string(c, v, "server.socket", s->socket, CFG_SOCKET_PATH_MAX, false, NULL,
                        "a path") == 0 &&
        s->socket[0] != '/')
        cfg__err(c, "server.socket", v, "\"%s\" must be an absolute path", s->socket);
    if ((v = cfg__at(m, "socket_mode"))) {
        const char *t = cfg__want_scalar(c, v, "server.socket_mode");
        char *end;
        long mode = t ? strtol(t, &end, 8) : -1;
        if (t && (!*t || *end || mode < 0 || mode > 0777 || !isdigit((unsigned char)*t)))
            cfg__err(c, "server.socket_mode", v, "\"%s\" is not an octal file mode (0000-0777)", t);
        else if (t)
            s->socket_mode = (uint32_t)mode;
    }
    if ((v = cfg__at(m, "socket_group")))
        cfg__get_string(c, v, "server.socket_group", s->socket_group, CFG_NAME_MAX, true,
                        cfg__level_char, "a group name");
    if ((v = cfg__at(m, "http")))
        cfg__get_address(c, v, "server.http", s->http, true, true);
    int decide;
    const cfg_node_t *decide_at = cfg__at(m, "http_decide");
    if (decide_at && decide_at->kind == CFG_NODE_SCALAR && decide_at->text &&
        strcmp(decide_at->text, "loopback") == 0) /* the old default */
        cfg__err(c, "server.http_decide", decide_at,
                 "\"loopback\" is no more: any local user reached 127.0.0.1 and spent every "
                 "counter; write \"on\" (each request with a bearer token of server.tokens_file) "
                 "or \"off\" (the socket serves /v1/decide)");
    else if (decide_at && cfg__get_enum(c, decide_at, "server.http_decide", "setting",
                                        http_decide_names, &decide) == 0)
        s->http_decide = (cfg_http_decide_t)decide;
    const cfg_node_t *tokens_at = cfg__at(m, "tokens_file");
    if (tokens_at &&
        cfg__get_string(c, tokens_at, "server.tokens_file", s->tokens_file, CFG_PATH_MAX, true,
                        NULL, "a path") == 0 &&
        s->tokens_file[0] && s->tokens_file[0] != '/')
        cfg__err(c, "server.tokens_file", tokens_at,
                 "\"%s\" must be an absolute path (or \"\" for no tokens)", s->tokens_file);
    load_http_mapping(c, cfg__at(m, "http_subject"), cfg__at(m, "http_tokens"));
    if ((v = cfg__at(m, "max_counters")))
        cfg__get_int(c, v, cfg__join(p, "server", "max_counters"), 1, 100000000, &s->max_counters);
    if ((v = cfg__at(m, "max_connections")))
        cfg__get_int(c, v, cfg__join(p, "server", "max_connections"), 1, 65536,
                     &s->max_connections);
    if ((v = cfg__at(m, "state_dir")))
        get_abs_path(c, v, "server.state_dir", s->state_dir, "no state");
    if ((v = cfg__at(m, "snapshot_interval")) &&
        cfg__get_duration(c, v, "server.snapshot_interval", 0, INT64_C(3600) * 1000000000,
                          &s->snapshot_interval_ns) == 0 &&
        s->snapshot_interval_ns > 0 && s->snapshot_interval_ns < CFG_SNAPSHOT_INTERVAL_MIN_NS)
        cfg__err(c, "server.snapshot_interval", v,
                 "must be 0 (a snapshot only at stop) or at least 100ms");
    if ((v = cfg__at(m, "config_watch")))
        cfg__get_bool(c, v, "server.config_watch", &s->config_watch);
    if ((v = cfg__at(m, "config_poll")))
        cfg__get_duration(c, v, "server.config_poll", CFG_CONFIG_POLL_MIN_NS,
                          INT64_C(3600) * 1000000000, &s->config_poll_ns);
    if ((v = cfg__at(m, "record")))
        load_record(c, v);
    int level;
    if ((v = cfg__at(m, "log_level")) &&
        cfg__get_enum(c, v, "server.log_level", "level", tt_log_level_names, &level) == 0)
        s->log_level = (tt_log_level_t)level;
    if ((v = cfg__at(m, "allow_uids")))
        get_ids(c, v, "allow_uids", s->allow_uids, &s->n_allow_uids);
    if ((v = cfg__at(m, "allow_gids")))
        get_ids(c, v, "allow_gids", s->allow_gids, &s->n_allow_gids);
    if ((v = cfg__at(m, "grpc")))
        get_grpc(c, v, s->grpc);
    if ((v = cfg__at(m, "grpc_domains")))
        get_domains(c, v, "grpc_domains", s->grpc_domains, &s->n_grpc_domains);
    if ((v = cfg__at(m, "grpc_charge_domains")))
        get_domains(c, v, "grpc_charge_domains", s->grpc_charge_domains, &s->n_grpc_charge_domains);
    if ((v = cfg__at(m, "grpc_config_dir")))
        get_abs_path(c, v, "server.grpc_config_dir", s->grpc_config_dir, "none");
    int store;
    if ((v = cfg__at(m, "grpc_config_store")) &&
        cfg__get_enum(c, v, "server.grpc_config_store", "store", cfg__store_names, &store) == 0)
        s->grpc_config_store = (cfg_store_t)store;
    if ((v = cfg__at(m, "grpc_merge_domain_config")))
        cfg__get_bool(c, v, "server.grpc_merge_domain_config", &s->grpc_merge_domain_config);
    if ((v = cfg__at(m, "grpc_stop_cache_key_increment_when_overlimit")))
        cfg__get_bool(c, v, "server.grpc_stop_cache_key_increment_when_overlimit",
                      &s->grpc_stop_cache_key_increment_when_overlimit);
    if ((v = cfg__at(m, "grpc_shadow_mode")))
        cfg__get_bool(c, v, "server.grpc_shadow_mode", &s->grpc_shadow_mode);
    if ((v = cfg__at(m, "grpc_limit_headers")))
        load_limit_headers(c, v);
    /* SPEC §9: a TCP door decides only with bearer tokens */
    if (s->http_decide == CFG_HTTP_DECIDE_ON && !s->tokens_file[0])
        cfg__err(c, "server.http_decide", decide_at,
                 "on needs server.tokens_file: a decision over TCP is made only for a bearer "
                 "token bound to the subjects it may spend");
    if (s->grpc[0] && s->grpc[0] != '/' && !s->tokens_file[0])
        cfg__err(c, "server.grpc", cfg__at(m, "grpc"),
                 "a TCP address needs server.tokens_file: a decision over TCP is made only for a "
                 "bearer token bound to the subjects it may spend (or serve gRPC on an absolute "
                 "unix socket path, where server.allow_uids apply)");
}

/* A sequence of host:port (gossip seeds, Redis Cluster seeds, Sentinels): at most `max`, each
 * checked as an address and named by its index. */
static void get_address_list(struct cfg__ctx *c, const cfg_node_t *v, const char *base,
                             const char *key, char (*out)[CFG_ADDR_MAX + 1], size_t max, size_t *n)
{
    char p[PATH_SIZE];
    if (v->kind != CFG_NODE_SEQ) {
        cfg__err(c, cfg__join(p, base, key), v, "expected a sequence of host:port, got %s",
                 v->null ? "an empty value" : cfg__kind_name(v));
    } else if (v->n > max) {
        cfg__err(c, cfg__join(p, base, key), v, "%zu entries; at most %zu", v->n, max);
    } else {
        for (size_t i = 0; i < v->n; i++) {
            snprintf(p, sizeof(p), "%s.%s[%zu]", base, key, i);
            if (cfg__get_address(c, v->items[i], p, out[*n], false, false) == 0)
                (*n)++;
        }
    }
}

static const char *const share_keys[] = {
    "node_id",         "bind",           "advertise",    "seeds",    "keyring_file",
    "cluster",         "partition_hold", "join_timeout", "division", "cold_share",
    "demand_interval", "demand_keys",    "replicas",     NULL};
static const char *const division_names[] = {"equal", "demand", NULL};

static void load_share(struct cfg__ctx *c, const cfg_node_t *n)
{
    cfg_share_t *s = &c->cfg->share;
    const char *base = "shared_state.share";
    char p[PATH_SIZE];
    const cfg_node_t *m = cfg__want_map(c, n, base, share_keys), *v;
    if (!m)
        return;
    s->present = true;
    if (!(v = cfg__at(m, "node_id")))
        cfg__err(c, cfg__join(p, base, "node_id"), m,
                 "missing; every replica needs a unique node id "
                 "(e.g. node_id: ${NODE_NAME})");
    else
        cfg__get_string(c, v, cfg__join(p, base, "node_id"), s->node_id, CFG_NAME_MAX, false,
                        cfg__level_char, "a node id (letters, digits, _ - .)");
    if ((v = cfg__at(m, "bind")))
        cfg__get_address(c, v, cfg__join(p, base, "bind"), s->bind, false, true);
    if ((v = cfg__at(m, "advertise")))
        cfg__get_address(c, v, cfg__join(p, base, "advertise"), s->advertise, true, false);
    if ((v = cfg__at(m, "seeds")))
        get_address_list(c, v, base, "seeds", s->seeds, CFG_SEEDS_MAX, &s->n_seeds);
    if ((v = cfg__at(m, "keyring_file")))
        cfg__get_string(c, v, cfg__join(p, base, "keyring_file"), s->keyring_file, CFG_PATH_MAX,
                        true, NULL, "a path");
    if ((v = cfg__at(m, "cluster")))
        cfg__get_string(c, v, cfg__join(p, base, "cluster"), s->cluster, CFG_NAME_MAX, true,
                        cfg__level_char, "a cluster label (letters, digits, _ - .)");
    if ((v = cfg__at(m, "partition_hold")))
        cfg__get_duration(c, v, cfg__join(p, base, "partition_hold"), 0, INT64_C(3600) * 1000000000,
                          &s->partition_hold_ns);
    if ((v = cfg__at(m, "join_timeout")))
        cfg__get_duration(c, v, cfg__join(p, base, "join_timeout"), 1000000,
                          INT64_C(600) * 1000000000, &s->join_timeout_ns);
    int division;
    if ((v = cfg__at(m, "division")) && cfg__get_enum(c, v, cfg__join(p, base, "division"),
                                                      "division", division_names, &division) == 0)
        s->division = (cfg_division_t)division;
    if ((v = cfg__at(m, "cold_share"))) {
        const char *t = cfg__want_scalar(c, v, cfg__join(p, base, "cold_share"));
        char *end;
        double d = t ? strtod(t, &end) : 0;
        if (t && (end == t || *end || !(d > 0 && d < 1)))
            cfg__err(c, p, v, "\"%s\" is not a fraction strictly between 0 and 1 (e.g. 0.05)", t);
        else if (t)
            s->cold_share = d;
    }
    if ((v = cfg__at(m, "demand_interval")))
        cfg__get_duration(c, v, cfg__join(p, base, "demand_interval"), INT64_C(10) * 1000000,
                          INT64_C(60) * 1000000000, &s->demand_interval_ns);
    if ((v = cfg__at(m, "demand_keys")))
        cfg__get_int(c, v, cfg__join(p, base, "demand_keys"), CFG_DEMAND_KEYS_MIN,
                     CFG_DEMAND_KEYS_MAX, &s->demand_keys);
    if ((v = cfg__at(m, "replicas")))
        cfg__get_int(c, v, cfg__join(p, base, "replicas"), 1, 1000000, &s->replicas);
}

static const char *const redis_keys[] = {"address", "cluster", "sentinels", "master", "timeout",
                                         "username", "password_file", "sentinel_username",
                                         "sentinel_password_file", "tls",
                                         /* known only to be refused with the reason */
                                         "password", "sentinel_password", NULL};
static const char *const redis_tls_keys[] = {"ca_file",     "cert_file", "key_file",
                                             "server_name", "verify",    NULL};

/* An ACL user name: printable, no spaces (Redis' own rule for ACL SETUSER). */
static int username_char(int ch)
{
    return isgraph(ch);
}

/* A DNS name to check the server's certificate against: letters, digits, '-', '.', and '*'
 * nowhere (a wildcard belongs to certificates, not to the name asked for). */
static int server_name_char(int ch)
{
    return isalnum(ch) || ch == '-' || ch == '.' || ch == ':' || ch == '[' || ch == ']';
}

/* shared_state.redis.tls: a mapping (an empty one: TLS with the system's trust store). */
static void load_redis_tls(struct cfg__ctx *c, const cfg_node_t *n)
{
    cfg_redis_tls_t *t = &c->cfg->redis.tls;
    const char *base = "shared_state.redis.tls";
    char p[PATH_SIZE];
    t->present = true;
    t->verify = true;
    if (n->kind == CFG_NODE_SCALAR && n->null)
        return; /* "tls:" alone: every default */
    const cfg_node_t *m = cfg__want_map(c, n, base, redis_tls_keys), *v;
    if (!m)
        return;
    const struct {
        const char *key;
        char *out;
    } files[] = {{"ca_file", t->ca_file}, {"cert_file", t->cert_file}, {"key_file", t->key_file}};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if ((v = cfg__at(m, files[i].key)))
            cfg__get_string(c, v, cfg__join(p, base, files[i].key), files[i].out, CFG_PATH_MAX,
                            false, NULL, "a path");
    const cfg_node_t *cert = cfg__at(m, "cert_file"), *key = cfg__at(m, "key_file");
    if ((cert != NULL) != (key != NULL))
        cfg__err(c, cfg__join(p, base, cert ? "key_file" : "cert_file"), cert ? cert : key,
                 "missing; a client certificate needs both cert_file and key_file");
    if ((v = cfg__at(m, "server_name")))
        cfg__get_string(c, v, cfg__join(p, base, "server_name"), t->server_name,
                        sizeof(t->server_name) - 1, false, server_name_char,
                        "a DNS name or an IP address");
    if ((v = cfg__at(m, "verify")) &&
        cfg__get_bool(c, v, cfg__join(p, base, "verify"), &t->verify) == 0 && !t->verify)
        cfg__warn(c, cfg__join(p, base, "verify"), v,
                  "false: the servers' certificates are not checked, so anyone on the path can "
                  "read and answer for Redis (and learn the password)");
}

/* AUTH: username and password_file (and the Sentinels' pair). A password is never inline. */
static void load_redis_auth(struct cfg__ctx *c, const cfg_node_t *m, bool sentinels)
{
    cfg_redis_t *r = &c->cfg->redis;
    const char *base = "shared_state.redis";
    char p[PATH_SIZE];
    const cfg_node_t *v;
    for (int s = 0; s < 2; s++) {
        const char *user_key = s ? "sentinel_username" : "username";
        const char *file_key = s ? "sentinel_password_file" : "password_file";
        const char *inline_key = s ? "sentinel_password" : "password";
        char *user = s ? r->sentinel_username : r->username;
        char *file = s ? r->sentinel_password_file : r->password_file;
        if ((v = cfg__at(m, inline_key)))
            cfg__err(c, cfg__join(p, base, inline_key), v,
                     "a password is never written in the configuration: put it in a file (a "
                     "mounted Secret) and name it with %s",
                     file_key);
        if (s && !sentinels && (cfg__at(m, user_key) || cfg__at(m, file_key))) {
            const cfg_node_t *at =
                cfg__at(m, user_key) ? cfg__at(m, user_key) : cfg__at(m, file_key);
            cfg__err(c, cfg__join(p, base, cfg__at(m, user_key) ? user_key : file_key), at,
                     "only with sentinels (the Sentinels' own credentials)");
            continue;
        }
        if ((v = cfg__at(m, file_key)))
            cfg__get_string(c, v, cfg__join(p, base, file_key), file, CFG_PATH_MAX, false, NULL,
                            "a path");
        if ((v = cfg__at(m, user_key))) {
            cfg__get_string(c, v, cfg__join(p, base, user_key), user, CFG_NAME_MAX, false,
                            username_char, "an ACL user name (printable, no spaces)");
            if (!cfg__at(m, file_key))
                cfg__err(c, cfg__join(p, base, file_key), m,
                         "missing; %s needs a password (AUTH <user> <password>): name the file "
                         "that holds it",
                         user_key);
        }
    }
}

/* shared_state.redis names one topology: address (one Redis), cluster (seed nodes of a Redis
 * Cluster) or sentinels with master (a primary that Sentinel fails over). */
static void load_redis(struct cfg__ctx *c, const cfg_node_t *n)
{
    cfg_redis_t *r = &c->cfg->redis;
    const char *base = "shared_state.redis", *s;
    char p[PATH_SIZE];
    const cfg_node_t *m = cfg__want_map(c, n, base, redis_keys), *v;
    if (!m)
        return;
    r->present = true;
    const char *topologies[] = {"address", "cluster", "sentinels"};
    const cfg_node_t *given[3];
    const char *first = NULL;
    for (int i = 0; i < 3; i++) {
        given[i] = cfg__at(m, topologies[i]);
        if (given[i] && first)
            cfg__err(c, cfg__join(p, base, topologies[i]), given[i],
                     "give one of address, cluster or sentinels, not %s and %s", first,
                     topologies[i]);
        else if (given[i])
            first = topologies[i];
    }
    if (!first)
        cfg__err(c, cfg__join(p, base, "address"), m,
                 "missing; write the Redis host:port (or cluster: [seed host:port, ...], or "
                 "sentinels: [host:port, ...] with master: NAME)");
    const char *path = "shared_state.redis.address";
    if ((v = given[0]) == NULL)
        v = NULL; /* another topology, or none (reported above) */
    else if (v->kind == CFG_NODE_SCALAR && !v->null && !v->failed && (s = v->text) &&
             (s[0] == '/' || strncmp(s, "unix:", 5) == 0)) {
        /* a unix socket path (redis/: rds_address_parse); sun_path holds 107 bytes */
        const char *sock = s[0] == '/' ? s : s + 5;
        if (sock[0] != '/' || strlen(sock) > 107 || sock[strlen(sock) - 1] == '/')
            cfg__err(c, path, v, "\"%s\" is not a unix socket path (absolute, at most 107 bytes)",
                     s);
        else
            memcpy(r->address, s, strlen(s) + 1);
    } else
        cfg__get_address(c, v, path, r->address, false, false);
    for (int i = 1; i < 3; i++) {
        size_t *count = i == 1 ? &r->n_cluster : &r->n_sentinels;
        if (given[i])
            get_address_list(c, given[i], base, topologies[i], i == 1 ? r->cluster : r->sentinels,
                             CFG_REDIS_NODES_MAX, count);
        if (given[i] && given[i]->kind == CFG_NODE_SEQ && given[i]->n == 0)
            cfg__err(c, cfg__join(p, base, topologies[i]), given[i],
                     "empty; name at least one host:port");
    }
    if ((v = cfg__at(m, "master"))) {
        if (!given[2])
            cfg__err(c, cfg__join(p, base, "master"), v,
                     "only with sentinels (the name Sentinel knows the primary by)");
        else
            cfg__get_string(c, v, cfg__join(p, base, "master"), r->master, CFG_NAME_MAX, false,
                            cfg__level_char, "a master name (letters, digits, _ - .)");
    } else if (given[2]) {
        cfg__err(
            c, cfg__join(p, base, "master"), m,
            "missing; Sentinel needs the name it monitors the primary by (e.g. master: mymaster)");
    }
    if ((v = cfg__at(m, "timeout")))
        cfg__get_duration(c, v, "shared_state.redis.timeout", 1000000, INT64_C(60) * 1000000000,
                          &r->timeout_ns);
    load_redis_auth(c, m, given[2] != NULL);
    if ((v = cfg__at(m, "tls")))
        load_redis_tls(c, v);
}

static const char *const shared_state_keys[] = {"share", "redis", NULL};

void cfg__load_shared_state(struct cfg__ctx *c, const cfg_node_t *n)
{
    const cfg_node_t *m = cfg__want_map(c, n, "shared_state", shared_state_keys), *v;
    if ((v = cfg__at(m, "share")))
        load_share(c, v);
    if ((v = cfg__at(m, "redis")))
        load_redis(c, v);
}
