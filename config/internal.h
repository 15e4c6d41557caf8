/* Shared inside config/ only: the report writer and the YAML node tree. */
#ifndef TT_CONFIG_INTERNAL_H
#define TT_CONFIG_INTERNAL_H

#include "config.h"
#include "tt_arena.h"

/* A finding's position in the file; its file name is borrowed. */
typedef struct cfg_pos {
    const char *file;
    int line, col;
} cfg_pos_t;

/* Appends one finding: code (ignored for a warning), the field's path, where it is (NULL: no
 * position), the formatted message. Returns 0 or CFG_ENOMEM. */
int cfg__report_add(cfg_report_t *r, bool warning, int code, const char *path, const cfg_pos_t *at,
                    const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * The YAML document as a tree. Every node keeps its source position (1-based line and
 * column). Scalars are NUL-terminated text with ${VAR} already expanded; a mapping holds its
 * pairs in document order, keys being scalars, duplicates already refused. The whole tree
 * lives in one arena owned by the cfg_doc_t.
 */
typedef enum cfg_node_kind {
    CFG_NODE_SCALAR,
    CFG_NODE_SEQ,
    CFG_NODE_MAP,
} cfg_node_kind_t;

typedef struct cfg_node cfg_node_t;
struct cfg_node {
    cfg_node_kind_t kind;
    int line, col;
    bool null;          /* a plain scalar that YAML reads as null: empty, "~", "null" */
    bool failed;        /* already reported (a ${VAR} that did not expand): read no further */
    char *text;         /* scalar text */
    size_t len;         /* scalar length (bytes) */
    cfg_node_t **items; /* SEQ: n items; MAP: n pairs as key, value, key, value... */
    size_t n;           /* items in a SEQ, pairs in a MAP */
};

typedef struct cfg_doc {
    const char *name; /* borrowed: the file name used in positions */
    cfg_node_t *root; /* NULL for an empty stream */
    tt_arena_t arena;
    int errors; /* reported while loading, the tree still usable (duplicates, ${VAR}) */
} cfg_doc_t;

/* cfg__yaml_load's flags. */
enum {
    CFG_YAML_LITERAL = 1, /* no ${VAR} expansion: envoy ratelimit's files are read as they are */
};

/*
 * Parses `len` bytes of YAML into a tree: size, UTF-8, depth, node count and scalar length
 * bounded, aliases refused, duplicate keys and unset ${VAR}s reported. Returns 0 when the
 * tree is usable (doc->errors counts what was reported anyway), or CFG_EINVALID / CFG_ENOMEM
 * with the errors in the report; the doc is freed by cfg__doc_free either way.
 */
int cfg__yaml_load(const char *name, const char *text, size_t len, unsigned flags, cfg_doc_t *doc,
                   cfg_report_t *report);

/* Reads a whole regular file of at most CFG_FILE_MAX bytes into a malloc'd *buf (the caller
 * frees it). A missing, unreadable, special or oversized file is reported as (root) with the
 * file's name and the reason. Returns 0, CFG_EINVALID or CFG_ENOMEM. */
int cfg__read_file(const char *path, char **buf, size_t *len, cfg_report_t *report);
void cfg__doc_free(cfg_doc_t *doc);

/* server.tokens_file into t (tokens.c). 0, or CFG_EINVALID / CFG_ENOMEM with every finding
 * reported and t empty. */
int cfg__load_tokens(cfg_tokens_t *t, const char *path, cfg_report_t *report);
void cfg__tokens_free(cfg_tokens_t *t);

/* The value node of `key` in a mapping node (its first occurrence), or NULL. */
const cfg_node_t *cfg__map_get(const cfg_node_t *map, const char *key);

#endif
