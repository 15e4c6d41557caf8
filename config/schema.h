/*
 * Shared inside config/'s schema (load.c, schema.c, sections.c, governance.c): the walk's
 * context, the report of one field, and the readers of one field's value, each reporting what
 * is wrong with the field's path and position and leaving the output untouched on error.
 */
#ifndef TT_CONFIG_SCHEMA_H
#define TT_CONFIG_SCHEMA_H

#include "internal.h"

#define PATH_SIZE 256 /* a field's path, "governance.limits[3].attach.levels[1]" */

struct cfg__ctx {
    const char *file;
    cfg_report_t *report;
    cfg_config_t *cfg;
    int errors;
    int oom;
};

/* The stores by name, in cfg_store_t order. */
extern const char *const cfg__store_names[];

void cfg__err(struct cfg__ctx *c, const char *path, const cfg_node_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

void cfg__warn(struct cfg__ctx *c, const char *path, const cfg_node_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

const char *cfg__join(char *buf, const char *base, const char *key);


/* "a, b, c" into buf. */
const char *cfg__list(char *buf, size_t size, const char *const *cands);

const char *cfg__kind_name(const cfg_node_t *n);

/* Returns the node if it is a mapping whose keys are all in `keys`; reports otherwise (and
 * still returns a mapping, so its known keys are checked too). */
const cfg_node_t *cfg__want_map(struct cfg__ctx *c, const cfg_node_t *n, const char *path,
                                const char *const *keys);

/* The text of a scalar value, or NULL after reporting. */
const char *cfg__want_scalar(struct cfg__ctx *c, const cfg_node_t *n, const char *path);

/* A string of at most max bytes, every byte accepted by ok() (NULL: any printable). */
int cfg__get_string(struct cfg__ctx *c, const cfg_node_t *n, const char *path, char *out,
                    size_t max, bool allow_empty, int (*ok)(int), const char *what);

int cfg__id_char(int ch);

int cfg__level_char(int ch);

int cfg__get_int(struct cfg__ctx *c, const cfg_node_t *n, const char *path, int64_t min,
                 int64_t max, int64_t *out);

int cfg__get_bool(struct cfg__ctx *c, const cfg_node_t *n, const char *path, bool *out);

/* One of `names` (NULL-terminated); its index in *out. */
int cfg__get_enum(struct cfg__ctx *c, const cfg_node_t *n, const char *path, const char *what,
                  const char *const *names, int *out);

int cfg__get_duration(struct cfg__ctx *c, const cfg_node_t *n, const char *path, int64_t min,
                      int64_t max, int64_t *out);

/* host:port (host a name, an IPv4 address or a bracketed IPv6 one). Port 0 (pick one) only
 * where a listener may take any port. */
int cfg__get_address(struct cfg__ctx *c, const cfg_node_t *n, const char *path, char *out,
                     bool allow_empty, bool allow_port0);

/* The node of `key` in map, when present (and the map itself valid). */
const cfg_node_t *cfg__at(const cfg_node_t *map, const char *key);

void cfg__load_server(struct cfg__ctx *c, const cfg_node_t *n);

void cfg__load_shared_state(struct cfg__ctx *c, const cfg_node_t *n);

void cfg__load_governance(struct cfg__ctx *c, const cfg_node_t *n);

/* A store a limit (or server.grpc_config_store) names has its section declared; reports at
 * `path` and returns -1 otherwise. */
int cfg__check_store_declared(struct cfg__ctx *c, const char *path, const cfg_node_t *at,
                              cfg_store_t store);

/* ---- the rule language (rules.c, envoy.c) ---- */

/* The keys of a governance.limits entry that only a rule takes (rules.c reads them). */
extern const char *const cfg__rule_keys[];

/* Reads a limit's rule fields (domain, descriptor, name, replaces, unlimited, allow,
 * quota_mode, detailed_metric) from mapping m at `base`. Returns 1 when the limit is a rule
 * (domain given), 0 when not (and none of its keys was given), -1 after reporting. */
int cfg__load_rule(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l);

/* The checks across the rules of governance.limits: two rules on one path of a domain, and the
 * flags of an entry (share_threshold, value_to_metric) the same wherever two paths share it. */
void cfg__rules_check(struct cfg__ctx *c, const cfg_node_t *root);

/* Whether two rules of one domain sit at the same place: same entries, in order. */
bool cfg__same_path(const cfg_rule_t *a, const cfg_rule_t *b);

/* Appends the counters of descriptors carrying their own limit (one per envoy unit,
 * rls_override_<unit>) when the config holds rules and has none yet. Returns 0, or CFG_EINVALID
 * (an id taken, too many limits) or CFG_ENOMEM, reported. */
int cfg__add_overrides(cfg_config_t *cfg, cfg_report_t *report);

#endif
