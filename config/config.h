/*
 * The compiled configuration: what `serve` runs on and what a reload swaps in.
 *
 * Three steps, as in the seed. Loading (cfg_load_file, cfg_load_string) parses the YAML with
 * a source position on every node, checks the schema and its coherence (validate), and builds
 * a new cfg_config_t aside: it never touches a model already in use, so a bad reload leaves
 * the old one serving. Arming (cfg_arm) then compiles every limit with cfg_limit_arm: the
 * seed's domain checks and store/algorithm checks. Both steps report every problem they find
 * into a cfg_report_t, one line each, and change nothing else on error.
 *
 * Ownership: a cfg_config_t comes from cfg_load_* and belongs to the caller, who frees it
 * with cfg_free (limits included). It holds no pointers into the YAML text or the report.
 */
#ifndef TT_CONFIG_CONFIG_H
#define TT_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "duration.h"
#include "limit.h"
#include "tt_err.h"
#include "tt_log.h"

/* Errors: rows of the one error table (common/tt_err.h), which names them. */
enum {
    CFG_EINVALID = TT_ERR_CONFIG, /* the configuration has errors; the report lists them */
    CFG_ENOMEM = TT_ERR_NOMEM,    /* out of memory (also reported) */
};

/* Bounds on the input and on the model (documented in docs/configuration.md). */
#define CFG_FILE_MAX (1024 * 1024) /* bytes in a config file */
#define CFG_DEPTH_MAX 32           /* nesting of mappings and sequences */
#define CFG_NODES_MAX 100000       /* nodes in one document */
#define CFG_SCALAR_MAX 4096        /* bytes in one scalar, after ${VAR} expansion */
#define CFG_LIMITS_MAX 512         /* governance.limits entries (the engine holds this many) */
#define CFG_SEEDS_MAX 64           /* shared_state.share.seeds entries */
#define CFG_REDIS_NODES_MAX 16     /* shared_state.redis.cluster or .sentinels entries */
#define CFG_ALLOW_MAX 32           /* server.allow_uids / server.allow_gids entries */
#define CFG_ADDR_MAX 256           /* host:port strings */
#define CFG_PATH_MAX 4096          /* file paths */
#define CFG_SOCKET_PATH_MAX 107    /* a unix socket path (sun_path less its NUL) */
#define CFG_NAME_MAX 128           /* node ids, cluster labels, group names */
#define CFG_DOMAINS_MAX 32         /* server.grpc_domains / grpc_charge_domains entries */
#define CFG_HEADER_MAX 128         /* an HTTP header name in server.http_subject/http_tokens */
#define CFG_HTTP_SUBJECT_MAX 16    /* server.http_subject entries (a subject's levels) */
#define CFG_TOKENS_MAX 1024        /* entries of server.tokens_file */
#define CFG_TOKEN_LEVELS_MAX 16    /* levels one token's subjects name */
#define CFG_GRANTS_MAX 65536       /* ids granted in server.tokens_file, all tokens together */
#define CFG_TOKEN_MIN 16           /* bytes of a bearer token given in clear */
#define CFG_TOKEN_MAX 512
#define CFG_TOKEN_DIGEST 32    /* SHA-256 */
#define CFG_SUBJECT_ID_MAX 256 /* bytes of a subject id (the engine's GOV_ID_MAX) */
#define CFG_PERIOD_MAX_NS (INT64_C(8760) * 3600 * 1000000000) /* 8760h, one year */
#define CFG_GRPC_FILES_MAX 256 /* files read from server.grpc_config_dir */

/* The built-in defaults; the daemon and the clients resolve the socket the same way. */
#define CFG_DEFAULT_SOCKET "/run/tokentriage/tokentriage.sock"
#define CFG_DEFAULT_SOCKET_MODE 0660
#define CFG_DEFAULT_HTTP "127.0.0.1:9464"
#define CFG_DEFAULT_MAX_COUNTERS 1000000
#define CFG_DEFAULT_MAX_CONNECTIONS 1024
#define CFG_DEFAULT_SNAPSHOT_INTERVAL_NS (INT64_C(5) * 1000000000)
#define CFG_SNAPSHOT_INTERVAL_MIN_NS (INT64_C(100) * 1000000)
#define CFG_DEFAULT_CONFIG_POLL_NS (INT64_C(5) * 1000000000) /* the config watch's poll */
#define CFG_CONFIG_POLL_MIN_NS (INT64_C(100) * 1000000)
#define CFG_DEFAULT_RECORD_MAX_BYTES (INT64_C(64) << 20) /* server.record.max_bytes */
#define CFG_DEFAULT_RECORD_FILES 2
#define CFG_RECORD_FILES_MAX 16
#define CFG_DEFAULT_SHARE_BIND "0.0.0.0:7946"
#define CFG_DEFAULT_PARTITION_HOLD_NS (INT64_C(60) * 1000000000)
#define CFG_DEFAULT_JOIN_TIMEOUT_NS (INT64_C(10) * 1000000000)
#define CFG_DEFAULT_COLD_SHARE 0.05
#define CFG_DEFAULT_DEMAND_INTERVAL_NS (INT64_C(500) * 1000000)
#define CFG_DEFAULT_DEMAND_KEYS 4096
#define CFG_DEMAND_KEYS_MIN 64
#define CFG_DEMAND_KEYS_MAX 65536
#define CFG_DEFAULT_REDIS_TIMEOUT_NS (INT64_C(50) * 1000000)

/* server.http_decide: whether the TCP listener serves /v1/decide and /v1/settle. */
typedef enum cfg_http_decide {
    CFG_HTTP_DECIDE_OFF = 0, /* the default: decisions over HTTP on the socket only */
    CFG_HTTP_DECIDE_ON,      /* also on server.http, each request with a bearer token of
                                server.tokens_file (required) */
} cfg_http_decide_t;

/* One server.http_subject entry: the subject level a request header names. */
typedef struct cfg_http_level {
    char level[CFG_LEVEL_MAX + 1];
    char header[CFG_HEADER_MAX + 1];
} cfg_http_level_t;

/* One id a token may name at one level (server.tokens_file): exactly, or as a prefix ("a-*"; "*"
 * alone: any id). The id's bytes are in the tokens' `ids`, at id_off. */
typedef struct cfg_grant {
    char level[CFG_LEVEL_MAX + 1];
    uint32_t id_off, id_len;
    bool prefix;
} cfg_grant_t;

/* One bearer token: its SHA-256 (the token itself is not kept), the client it speaks for, and
 * what it may name: grants[first .. first + n_grants) of its cfg_tokens_t. */
typedef struct cfg_token {
    char name[CFG_NAME_MAX + 1];
    uint64_t client; /* a hash of the name, never 0: entries of one name are one client */
    uint8_t digest[CFG_TOKEN_DIGEST];
    size_t first, n_grants;
    size_t at; /* its place in the file's list (tokens[at]) */
} cfg_token_t;

/* server.tokens_file, read when the config is armed (cfg_arm). Owned by the config. */
typedef struct cfg_tokens {
    cfg_token_t *tokens;
    size_t n;
    /* the tokens by a keyed hash of their digest (a key drawn at each load): index + 1, 0 empty;
     * linear probing, index_cap a power of two at least twice n */
    uint32_t *index;
    size_t index_cap;
    uint8_t index_key[16];
    cfg_grant_t *grants;
    size_t n_grants, grants_cap;
    char *ids;
    size_t ids_len, ids_cap;
} cfg_tokens_t;

/* server: the decision socket and the operations endpoint. */
/* server.record: a bounded, rotating sample of the decisions' inputs, for `tokentriage simulate
 * --traffic` (off unless `file` is set). */
typedef struct cfg_record {
    char file[CFG_PATH_MAX + 1];          /* absolute; "" = off */
    int64_t max_bytes;                    /* one file's bound, 4096 .. 2^40 */
    int64_t files;                        /* kept, the one written included: file, file.1, ... */
    int64_t sample;                       /* 1 subject in `sample` is recorded (1: all) */
    bool hash_subjects;                   /* ids written as keyed hashes (default true) */
    char hash_key_file[CFG_PATH_MAX + 1]; /* the hashes' key; "" = a random key per start */
} cfg_record_t;

typedef struct cfg_server {
    char socket[CFG_SOCKET_PATH_MAX + 1]; /* default CFG_DEFAULT_SOCKET */
    uint32_t socket_mode;                 /* permission bits, default 0660 */
    char socket_group[CFG_NAME_MAX + 1];  /* chgrp the socket to this group; "" = leave it */
    char http[CFG_ADDR_MAX + 1];          /* host:port of /metrics etc.; "" = off */
    cfg_http_decide_t http_decide;
    /* the HTTP front door's subject from request headers (SPEC §12), in config order */
    cfg_http_level_t http_subject[CFG_HTTP_SUBJECT_MAX];
    size_t n_http_subject;
    char http_tokens[CFG_HEADER_MAX + 1]; /* the header carrying tokens; "" = none */
    /* the bearer tokens the TCP doors (HTTP decide, gRPC on host:port) accept, and what each
     * may spend; "" = none: no TCP door decides. Read at arm, so on every reload. */
    char tokens_file[CFG_PATH_MAX + 1];
    int64_t max_counters;             /* live counters held before new keys are refused */
    int64_t max_connections;          /* concurrent socket clients */
    char state_dir[CFG_PATH_MAX + 1]; /* counters across restarts (SPEC 11); "" = off */
    int64_t snapshot_interval_ns;     /* 0: a snapshot only at stop */
    /* reload when the config file (or the keyring file) changes: inotify on their directories,
     * and a poll every config_poll_ns behind it (docs/configuration.md, "Reload") */
    bool config_watch;
    int64_t config_poll_ns;
    cfg_record_t record;
    /* the lowest level the log writes (default info); a reload applies it; serve's --log-level
     * wins over it */
    tt_log_level_t log_level;
    /* SO_PEERCRED allow-list: when either list is non-empty, a peer is served only when its
     * uid is in allow_uids or its gid in allow_gids; both empty = the file mode alone decides */
    uint32_t allow_uids[CFG_ALLOW_MAX];
    size_t n_allow_uids;
    uint32_t allow_gids[CFG_ALLOW_MAX];
    size_t n_allow_gids;
    /* Envoy's rate limit service (gRPC, SPEC §12): host:port or an absolute unix path; "" = off */
    char grpc[CFG_ADDR_MAX + 1];
    /* the domains served (none listed: every domain), and those counted after the fact (every
     * descriptor charged, overruns included: the AI Gateway's response-path token counts) */
    char grpc_domains[CFG_DOMAINS_MAX][CFG_NAME_MAX + 1];
    size_t n_grpc_domains;
    char grpc_charge_domains[CFG_DOMAINS_MAX][CFG_NAME_MAX + 1];
    size_t n_grpc_charge_domains;
    /* The rule language (SPEC §12): envoy ratelimit's config files, read as they are, one per
     * domain ("" = none), the store their rules count in, and envoy ratelimit's settings that
     * change answers, under their names there. All apply on reload. */
    char grpc_config_dir[CFG_PATH_MAX + 1];
    cfg_store_t grpc_config_store;                     /* local (default) | share | redis */
    bool grpc_merge_domain_config;                     /* MERGE_DOMAIN_CONFIG, default false */
    bool grpc_stop_cache_key_increment_when_overlimit; /* default true: two-phase */
    bool grpc_shadow_mode;                             /* SHADOW_MODE: overall never OVER_LIMIT */
    /* LIMIT_RESPONSE_HEADERS_ENABLED and the three names (default RateLimit-Limit, -Remaining,
     * -Reset): envoy ratelimit's headers beside ours, of the status closest to its limit */
    bool grpc_limit_headers;
    char grpc_limit_header[3][CFG_HEADER_MAX + 1];
} cfg_server_t;

typedef enum cfg_division {
    CFG_DIVISION_EQUAL = 0, /* amount / N on every replica */
    CFG_DIVISION_DEMAND,    /* leases from each key's owner, SPEC 6b */
} cfg_division_t;

/* shared_state.share: membership and the divided fleet caps. */
typedef struct cfg_share {
    bool present;                                /* the section was declared */
    char node_id[CFG_NAME_MAX + 1];              /* required */
    char bind[CFG_ADDR_MAX + 1];                 /* UDP/TCP gossip listener, default 0.0.0.0:7946 */
    char advertise[CFG_ADDR_MAX + 1];            /* what peers dial; "" = derive from bind */
    char seeds[CFG_SEEDS_MAX][CFG_ADDR_MAX + 1]; /* host:port, DNS names re-resolved */
    size_t n_seeds;
    char keyring_file[CFG_PATH_MAX + 1]; /* "" = plaintext gossip, loudly warned */
    char cluster[CFG_NAME_MAX + 1];      /* label bound as AEAD associated data; may be "" */
    int64_t partition_hold_ns;           /* 0 disables the hold */
    int64_t join_timeout_ns;             /* go solo when no seed answers within this */
    cfg_division_t division;
    double cold_share;          /* c in (0, 1): the share without a lease (demand mode) */
    int64_t demand_interval_ns; /* demand reports and lease refresh */
    int64_t demand_keys;        /* keys measured (and owned) per replica in demand mode */
    int64_t replicas; /* the fleet's expected size, for arm's burst warning only; 0: not said */
} cfg_share_t;

/* A share replica's bucket of fewer units than this (burst / replicas) turns arrival jitter into
 * missed slots: arm warns (docs/share.md, "What burst a fleet needs"). */
#define CFG_SHARE_BURST_UNITS 4

/* shared_state.redis.tls: every connection the store makes (primaries, cluster nodes,
 * Sentinels) speaks TLS when present. */
typedef struct cfg_redis_tls {
    bool present;
    char ca_file[CFG_PATH_MAX + 1];   /* "" = the system's trust store */
    char cert_file[CFG_PATH_MAX + 1]; /* a client certificate, with key_file; "" = none */
    char key_file[CFG_PATH_MAX + 1];
    char server_name[256]; /* the DNS name checked (and sent as SNI); "" = each node's host */
    bool verify;           /* default true: false is warned about */
} cfg_redis_tls_t;

/* shared_state.redis: the one shared counter store. */
typedef struct cfg_redis {
    bool present;
    /* exactly one topology: address, or cluster, or sentinels with master */
    char address[CFG_ADDR_MAX + 1];                      /* host:port or a socket path */
    char cluster[CFG_REDIS_NODES_MAX][CFG_ADDR_MAX + 1]; /* Redis Cluster seed nodes */
    size_t n_cluster;
    char sentinels[CFG_REDIS_NODES_MAX][CFG_ADDR_MAX + 1]; /* Sentinels to ask */
    size_t n_sentinels;
    char master[CFG_NAME_MAX + 1]; /* the name Sentinel monitors */
    int64_t timeout_ns;            /* a reply slower than this counts as unavailable */
    /* AUTH (SPEC §13): the files' paths only; the store reads the secrets (at start and on each
     * reload), so no password is ever in the model, a report or `validate --explain` */
    char username[CFG_NAME_MAX + 1];          /* ACL user; "" = AUTH <password> alone */
    char password_file[CFG_PATH_MAX + 1];     /* "" = no AUTH */
    char sentinel_username[CFG_NAME_MAX + 1]; /* the Sentinels' own, when they have one */
    char sentinel_password_file[CFG_PATH_MAX + 1];
    cfg_redis_tls_t tls;
} cfg_redis_t;

typedef struct cfg_config {
    char source[CFG_PATH_MAX + 1]; /* the file name, or the name given to cfg_load_string */
    cfg_server_t server;
    bool disclose_limits; /* governance.keys.disclose_limits, default true */
    cfg_share_t share;
    cfg_redis_t redis;
    size_t n_limits;
    cfg_limit_t *limits; /* owned; validated and canonical, armed only after cfg_arm */
    cfg_tokens_t tokens; /* server.tokens_file's, once armed */
    bool armed;
} cfg_config_t;

/*
 * One finding: the detail of the one error space (code, path, message; see tt_err.h) with its
 * position. The message is not bounded as a tt_err_t's is: a config message may be long (the
 * keys a mapping takes, the arm's explanations), so the report owns it. `text` is what is
 * printed after "Error: " or "Warning: ": "path: message (file:line:col)", the position left
 * out when there is none. path, message and text are one allocation, owned by the report.
 */
typedef struct cfg_finding {
    bool warning;
    int code;            /* CFG_EINVALID, or CFG_ENOMEM; 0 for a warning */
    const char *path;    /* the field: "governance.limits[0].amount"; "(root)": the whole file */
    const char *message; /* what is wrong with it */
    int line, col;       /* its position in the file (1-based); 0: none (the arm's findings) */
    char *text;
} cfg_finding_t;

/* Everything a load or an arm found. Zero-initialise, reuse across calls, cfg_report_free. */
typedef struct cfg_report {
    cfg_finding_t *items;
    size_t n, cap;
    size_t n_errors, n_warnings;
} cfg_report_t;

/*
 * Loads, validates and compiles a configuration file. On success *out is a new model (not
 * armed) and 0 is returned; otherwise *out is NULL, every error is in the report and the
 * return is CFG_EINVALID or CFG_ENOMEM. Warnings may be added either way.
 */
int cfg_load_file(const char *path, cfg_config_t **out, cfg_report_t *report);

/* The same from memory; `name` stands for the file in positions ("<default>" for the
 * embedded config). `len` bytes of `text` are read; no NUL is needed. */
int cfg_load_string(const char *name, const char *text, size_t len, cfg_config_t **out,
                    cfg_report_t *report);

/*
 * Arms every limit (cfg_limit_arm): seed messages for each limit that fails, warnings for the
 * ledger types this daemon does not enforce; and reads server.tokens_file (its findings carry
 * that file's positions). All-or-nothing: returns 0 and sets cfg->armed, or CFG_EINVALID with
 * every failing limit and token reported.
 */
int cfg_arm(cfg_config_t *cfg, cfg_report_t *report);

void cfg_free(cfg_config_t *cfg);

/*
 * envoy ratelimit's config files (SPEC §12, the rule language; config/envoy.c): every regular
 * file of `dir` whose name does not start with '.' (a ConfigMap's ..data and its timestamped
 * directory are skipped; symlinks are followed), in name order, each one domain in envoy
 * ratelimit's schema, appended to cfg's limits as rules of store server.grpc_config_store.
 * cfg_load_file calls it for server.grpc_config_dir. All or nothing, as a load: returns 0, or
 * CFG_EINVALID / CFG_ENOMEM with every finding reported (file and position in each) and cfg
 * unchanged.
 */
int cfg_load_grpc_config_dir(cfg_config_t *cfg, const char *dir, cfg_report_t *report);

/* One envoy ratelimit config file's text, `name` standing for its file, appended the same way
 * (what the directory reader does per file; the fuzz target and the tests call it), with the
 * override counters when the config had none. */
int cfg_load_envoy_string(cfg_config_t *cfg, const char *name, const char *text, size_t len,
                          cfg_report_t *report);

/* The limit with this id, or NULL. */
const cfg_limit_t *cfg_find_limit(const cfg_config_t *cfg, const char *id);

/* The entry of a bearer token presented (`len` bytes), or NULL. Its SHA-256 is looked up by a
 * keyed hash of it (SipHash with a key drawn at load, so which slots are probed says nothing an
 * outsider can aim at) and compared with each candidate's in constant time (libsodium's
 * sodium_memcmp): a cost independent of the number of tokens. */
const cfg_token_t *cfg_token_find(const cfg_tokens_t *t, const char *token, size_t len);
/* Whether `tok` may name `id` at `level`. */
bool cfg_token_allows(const cfg_tokens_t *t, const cfg_token_t *tok, const char *level,
                      size_t level_len, const char *id, size_t id_len);

/* The sections a running daemon reads at start only: `server` (with max_counters),
 * `shared_state.share` (membership and division) and `shared_state.redis`. */
#define CFG_RESTART_SECTIONS 3

/* Names the start-only sections that differ between the running config and a reloaded one
 * (names[i] are static strings) and returns how many; a reload applies its limits and says that
 * these apply after a restart. */
size_t cfg_restart_sections(const cfg_config_t *running, const cfg_config_t *reloaded,
                            const char *names[CFG_RESTART_SECTIONS]);

/* Adds a finding that has no position in the file: what the daemon's host checks find
 * (srv_preflight: a keyring file that does not parse, a socket directory that cannot be made).
 * `code` is a row of the error table (ignored for a warning). Returns 0 or CFG_ENOMEM. */
int cfg_report_add(cfg_report_t *report, bool warning, int code, const char *path, const char *fmt,
                   ...) __attribute__((format(printf, 5, 6)));

/* The closest of `cands` (NULL-terminated) to `word`, within two edits and closer than the
 * candidate's own length, or NULL: the "did you mean" of unknown keys and values, and of the
 * command line's unknown subcommands. */
const char *cfg_suggest(const char *word, const char *const *cands);

/* Writes each finding as one line, "Error: ..." or "Warning: ...". */
void cfg_report_print(const cfg_report_t *report, FILE *to);
void cfg_report_free(cfg_report_t *report);

/* The embedded default configuration (config/default.yaml), NUL-terminated. */
extern const char cfg_default_yaml[];
extern const size_t cfg_default_yaml_len;

/* Formats ns the way a config writes it ("1h30m", "200ms"; "60us", "5ns" below a
 * millisecond, which only derived values such as T reach; "0s"). Returns buf. */
char *cfg_duration_format(int64_t ns, char *buf, size_t size);

#endif
