/*
 * A limit of the rule language (SPEC §12, "Envoy RLS: the rule language"): where in a domain's
 * tree of descriptors a limit sits, and how it behaves there. envoyproxy/ratelimit's YAML files
 * (server.grpc_config_dir, config/envoy.c) and our own governance.limits (domain + descriptor,
 * config/rules.c) both compile to this; the engine builds its matching tree from it.
 *
 * A rule is a path of entries from the domain's top: each entry a key and one of
 *   - no value: matches every value, and the limit counts one counter per value (envoy's
 *     "key only");
 *   - a value: matches that value exactly;
 *   - a value with '*': matches by glob, each '*' any run of bytes, the empty one included
 *     (`foo*`; `v1.*.action`, a star between two literal parts).
 * A limit applies to a descriptor whose entries walk the path to its end (the depths equal).
 *
 * Canonical bytes: the rule sits inside cfg_limit_t by value, its entries and replaces packed
 * into `bytes` (below), zero-filled past `len`, so two rules that mean the same thing are the
 * same bytes and hash to the same counter identity.
 */
#ifndef TT_CONFIG_RULE_H
#define TT_CONFIG_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFG_RULE_DOMAIN_MAX 128 /* bytes in a domain name */
#define CFG_RULE_NAME_MAX 128   /* bytes in a rule's name (current_limit.name, replaces) */
#define CFG_RULE_ENTRIES_MAX 16 /* entries in a path (a descriptor's, as the socket's levels) */
#define CFG_RULE_KEY_MAX 128    /* bytes in an entry's key */
#define CFG_RULE_VALUE_MAX 256  /* bytes in an entry's value (a subject id's bound) */
#define CFG_RULE_REPLACES_MAX 8 /* names one rule replaces */
#define CFG_RULE_BYTES 2048     /* the packed entries and replaces of one rule */

typedef enum cfg_match {
    CFG_MATCH_ANY = 0, /* the key alone: every value, a counter per value */
    CFG_MATCH_VALUE,   /* exactly `value` */
    CFG_MATCH_GLOB,    /* `value` with '*': each '*' any run of bytes */
} cfg_match_t;

/* An entry's flags. */
enum {
    /* a glob's values share one counter (envoy's share_threshold), instead of one per value */
    CFG_ENTRY_SHARE = 1,
    /* the value is part of the rule's metric key (envoy's value_to_metric) */
    CFG_ENTRY_VALUE_METRIC = 2,
};

/* A rule's flags. */
enum {
    CFG_RULE_UNLIMITED = 1, /* matches and never limits: OK, remaining 2^32 - 1 (as envoy) */
    CFG_RULE_ALLOW = 2,     /* matches, limits nothing (envoy: a descriptor without rate_limit) */
    CFG_RULE_DETAILED = 4,  /* metrics keyed by the descriptor's values (detailed_metric) */
    CFG_RULE_QUOTA = 8,     /* quota_mode: OVER_LIMIT overall only when every quota rule is */
    CFG_RULE_OVERRIDE = 16, /* the counter of descriptors carrying their own limit (field 2) */
};

typedef struct cfg_rule {
    char domain[CFG_RULE_DOMAIN_MAX + 1]; /* "" : not a rule (a limit attached to levels) */
    char name[CFG_RULE_NAME_MAX + 1];     /* "" : none */
    uint8_t n_entries;
    uint8_t n_replaces;
    uint8_t flags;
    uint8_t pad_;
    uint16_t len; /* bytes of `bytes` in use */
    uint8_t pad2_[2];
    /* n_entries x [match u8][flags u8][key length u8][value length u16 LE][key][value], then
     * n_replaces x [name length u8][name] */
    uint8_t bytes[CFG_RULE_BYTES];
} cfg_rule_t;

/* One entry of a rule, read out of its packed bytes (pointers into the rule). */
typedef struct cfg_entry {
    cfg_match_t match;
    uint8_t flags;
    const char *key;
    size_t key_len;
    const char *value; /* "" for CFG_MATCH_ANY */
    size_t value_len;
} cfg_entry_t;

/* Appends an entry (the rule zero-filled first, entries before replaces). Returns 0, or -1 when
 * it does not fit (too many entries, a key or value too long, the bytes full). */
int cfg_rule_add_entry(cfg_rule_t *r, cfg_match_t match, uint8_t flags, const char *key,
                       size_t key_len, const char *value, size_t value_len);
/* Appends a name to replace (after every entry). 0, or -1 when it does not fit. */
int cfg_rule_add_replaces(cfg_rule_t *r, const char *name, size_t len);

/* Reads the entries into out[CFG_RULE_ENTRIES_MAX]; returns how many. */
size_t cfg_rule_entries(const cfg_rule_t *r, cfg_entry_t *out);
/* The i-th name replaced: its bytes (not NUL-terminated) and length. */
const char *cfg_rule_replaces(const cfg_rule_t *r, size_t i, size_t *len);

/* The match of a value as written: ANY when empty, GLOB when it holds a '*', else VALUE. */
cfg_match_t cfg_match_of(const char *value, size_t len);

/* Whether `value` matches the glob `pattern` (each '*' any run of bytes, the empty one too). No
 * allocation, no recursion: linear in the value for each literal segment. */
bool cfg_glob_match(const char *pattern, size_t plen, const char *value, size_t vlen);

/*
 * Envoy's rate limit units, as its RateLimitResponse.RateLimit.Unit numbers them, with their
 * lengths (envoy ratelimit's UnitToDivider: a month is 30 days, a year 365). 0 (UNKNOWN) is
 * none of them.
 */
#define CFG_UNITS 7
typedef struct cfg_unit {
    const char *name; /* lower case, as envoy's YAML writes it: "second" */
    int number;       /* the proto enum value: SECOND 1 .. YEAR 6, WEEK 7 */
    int64_t seconds;
} cfg_unit_t;
extern const cfg_unit_t cfg_units[CFG_UNITS];

/* The unit of exactly this period, or NULL. */
const cfg_unit_t *cfg_unit_of_period(int64_t period_ns);
/* The unit of this proto number, or NULL (0, UNKNOWN, and numbers Envoy does not define). */
const cfg_unit_t *cfg_unit_of_number(int number);

/* The path of a rule as envoy ratelimit names it in its stats: domain.key_value.key...
 * (the values of exact and glob entries; a key-only entry is its key). Into buf; returns buf. */
char *cfg_rule_full_key(const cfg_rule_t *r, char *buf, size_t size);

#endif
