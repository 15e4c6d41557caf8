/*
 * A compiled limit: what the config layer hands the stores and the engine.
 *
 * Canonical by construction: fixed-size fields, zero-filled before anything is written, the
 * algorithm's empty value already filled in (gcra). Two limits that mean the same thing are
 * the same bytes, so `algorithm:` left out and `algorithm: gcra` compile identically.
 */
#ifndef TT_CONFIG_LIMIT_H
#define TT_CONFIG_LIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "ratealg.h"
#include "rule.h"

#define CFG_ID_MAX 64           /* limit ids: [a-z0-9_]+ */
#define CFG_LEVEL_MAX 64        /* subject level names */
#define CFG_ATTACH_LEVELS_MAX 4 /* levels in one attach.levels combination */
/* attach as stored: one level, or the levels of a combination joined by ',' in order */
#define CFG_ATTACH_MAX (CFG_ATTACH_LEVELS_MAX * (CFG_LEVEL_MAX + 1) - 1)

typedef enum cfg_type {
    CFG_TYPE_RPM = 0,
    CFG_TYPE_TPM,
    CFG_TYPE_CONCURRENCY,
    CFG_TYPE_BUDGET_USD,
    CFG_TYPE_QUOTA_TOKENS,
    CFG_TYPE_QUOTA_REQUESTS,
} cfg_type_t;

typedef enum cfg_store {
    CFG_STORE_LOCAL = 0,
    CFG_STORE_SHARE,
    CFG_STORE_REDIS,
} cfg_store_t;

typedef struct cfg_posture {
    uint8_t on;           /* mode: "on" (1) | "off" (0): off is compiled, never evaluated */
    uint8_t enforce_hard; /* enforce: hard (1, deny) | soft (0, admit and report) */
    uint8_t fail_open;    /* fail: open (1) | closed (0), when the store cannot answer */
    uint8_t pad_;         /* always 0: keeps the struct free of indeterminate padding */
} cfg_posture_t;

typedef struct cfg_limit {
    char id[CFG_ID_MAX + 1];
    /* attach.level ("global" is one counter for every subject), or attach.levels joined by ','
     * ("generic_key,team": one counter per combination of ids); a ',' never occurs in a level
     * name, so the joined form is canonical and single-level limits keep their identity */
    char level[CFG_ATTACH_MAX + 1];
    uint8_t pad_[3];
    cfg_type_t type;
    cfg_store_t store;
    ra_algorithm_t algorithm; /* rate-class only; RA_GCRA otherwise */
    cfg_posture_t posture;
    int64_t amount;
    int64_t period_ns; /* rate-class only; 0 otherwise */
    int64_t burst;     /* as written, defaulted to amount; read by gcra/token_bucket only */
    /* Filled by cfg_limit_arm: */
    uint64_t identity;    /* hash of the canonical fields the algorithm reads */
    ra_limiter_t limiter; /* the plain (whole-fleet) limiter, rate-class only */
    /* The rule language (SPEC §12): a limit of a domain, matched by descriptor (rule.domain
     * not empty; `level` is then empty). Its counters are keyed by the descriptor's values. */
    cfg_rule_t rule;
} cfg_limit_t;

/* rpm and tpm: the types with a windowed rate and an algorithm. */
static inline int cfg_type_is_rate(cfg_type_t t)
{
    return t == CFG_TYPE_RPM || t == CFG_TYPE_TPM;
}

/* A limit of the rule language: matched by domain and descriptor, not attached to levels. */
static inline int cfg_limit_is_rule(const cfg_limit_t *l)
{
    return l->rule.domain[0] != '\0';
}

/* Whether a limit keeps counters: rate-class and concurrency limits, but not a rule that limits
 * nothing (allow) or never limits (unlimited). */
static inline int cfg_limit_counts(const cfg_limit_t *l)
{
    if (l->rule.flags & (CFG_RULE_ALLOW | CFG_RULE_UNLIMITED))
        return 0;
    return cfg_type_is_rate(l->type) || l->type == CFG_TYPE_CONCURRENCY;
}

/* The largest Integer an RFC 9651 Structured Field carries: 15 decimal digits. The numbers a
 * disclosed limit's RateLimit-Policy and RateLimit headers carry must fit it (validate checks). */
#define CFG_SF_INT_MAX INT64_C(999999999999999)

/*
 * The window RateLimit-Policy advertises for a period, exactly. The draft's `w` is whole
 * seconds, so a period that is not is advertised over the shortest whole-second window holding
 * a whole number of periods: w_s seconds = `scale` periods, and q = amount x scale (1500 ms:
 * w=3, scale 2; 250 ms: w=1, scale 4; 1m: w=60, scale 1). Durations are whole milliseconds,
 * so scale <= 1000.
 */
static inline void cfg_policy_window(int64_t period_ns, int64_t *w_s, int64_t *scale)
{
    int64_t a = period_ns, b = RA_NS_PER_S;
    while (b) { /* gcd(period, 1 s) */
        int64_t t = a % b;
        a = b;
        b = t;
    }
    *w_s = period_ns / a;
    *scale = RA_NS_PER_S / a;
}

/* The cost that must always fit a limit of this type: 1 request, or a max-token reserve. */
static inline int64_t cfg_type_unit(cfg_type_t t)
{
    return t == CFG_TYPE_TPM ? RA_RESERVE_CAP : 1;
}

const char *cfg_type_name(cfg_type_t t);
const char *cfg_store_name(cfg_store_t s);

/*
 * The validate-phase pairing rule of type and algorithm: tpm takes gcra only. Returns 0, or
 * CFG_EINVALID described in *err with an empty path (the caller names its field: the loader
 * governance.limits[i].algorithm, `tokentriage simulate` --algorithm) and the config loader's
 * message. Shared by the loader and `tokentriage simulate`, which builds its limit from flags.
 */
int cfg_type_algorithm_check(cfg_type_t t, ra_algorithm_t alg, tt_err_t *err);

/*
 * Arms one validated limit: the store/algorithm checks, then the seed's three domain checks
 * (window ceiling, tau overflow, tpm burst below the reserve cap), then the limiter and the
 * counter identity. Returns 0, or -1 with the seed's message, word for word and without the
 * "Error: " prefix, in msg. Types without a rate (concurrency, ledger types) arm without a
 * limiter; the caller warns about the ledger types.
 */
int cfg_limit_arm(cfg_limit_t *limit, char *msg, size_t msg_size);

/* The counter identity: a hash of id, type, level, store, algorithm, amount, period, and
 * burst only where the algorithm reads it. Editing an inert burst keeps the identity. */
uint64_t cfg_limit_identity(const cfg_limit_t *limit);

#endif
