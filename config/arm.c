/*
 * Arming: turning a validated limit into something a store can run. The messages here are the
 * catalogue's (shared/seed/rate-algorithms.txt), word for word; users grep for them.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#include "tt_hash.h"

#define ARM_PATH "governance" /* the path of an arm finding */
#define PREFIX ARM_PATH ": compile limits: govern: limit \"%s\": "

const char *cfg_type_name(cfg_type_t t)
{
    static const char *const names[] = {"rpm",        "tpm",          "concurrency",
                                        "budget_usd", "quota_tokens", "quota_requests"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

const char *cfg_store_name(cfg_store_t s)
{
    static const char *const names[] = {"local", "share", "redis"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

int cfg_type_algorithm_check(cfg_type_t t, ra_algorithm_t alg, tt_err_t *err)
{
    if (t != CFG_TYPE_TPM || alg == RA_GCRA)
        return 0;
    return tt_err_set(err, CFG_EINVALID, "",
                      "type tpm takes algorithm \"gcra\" only; \"%s\" is not available for a "
                      "token rate",
                      ra_algorithm_name(alg));
}

/* The identity is FNV-1a 64 (common/tt_hash.h: stable across versions and platforms, which is
 * all an identity needs) over the fields, each written the same way on every host. */
static uint64_t fnv_i64(uint64_t h, int64_t v)
{
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)((uint64_t)v >> (8 * i)); /* little-endian, whatever the host */
    return tt_fnv1a64(h, b, sizeof(b));
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return tt_fnv1a64(h, s, strlen(s) + 1); /* the NUL separates fields */
}

uint64_t cfg_limit_identity(const cfg_limit_t *l)
{
    uint64_t h = TT_FNV1A64_BASIS;
    h = fnv_str(h, l->id);
    h = fnv_i64(h, l->type);
    h = fnv_str(h, l->level);
    h = fnv_i64(h, l->store);
    h = fnv_i64(h, l->algorithm);
    h = fnv_i64(h, l->amount);
    h = fnv_i64(h, l->period_ns);
    if (cfg_type_is_rate(l->type) && (l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET))
        h = fnv_i64(h, l->burst);
    if (cfg_limit_is_rule(l)) { /* where the rule counts: its domain and path (not its name) */
        cfg_entry_t e[CFG_RULE_ENTRIES_MAX];
        size_t n = cfg_rule_entries(&l->rule, e);
        h = fnv_str(h, l->rule.domain);
        for (size_t i = 0; i < n; i++) {
            h = fnv_i64(h, (int64_t)e[i].match << 8 | e[i].flags);
            h = fnv_i64(h, (int64_t)e[i].key_len);
            h = tt_fnv1a64(h, e[i].key, e[i].key_len);
            h = fnv_i64(h, (int64_t)e[i].value_len);
            h = tt_fnv1a64(h, e[i].value, e[i].value_len);
        }
    }
    return h;
}

/* store "share" drives the effective-rate form, which gcra alone has; redis has Lua assets for
 * gcra and the window pair, none for token_bucket. */
static int arm_store(const cfg_limit_t *l, char *msg, size_t size)
{
    if (l->store == CFG_STORE_SHARE && l->algorithm != RA_GCRA && l->algorithm != RA_ENVOY_WINDOW) {
        snprintf(msg, size,
                 PREFIX "store \"share\": counter: store \"share\" requires an algorithm with a "
                        "per-step effective-rate form (ratealg.EffectiveLimiter); \"%s\" has "
                        "none \xe2\x80\x94 use algorithm \"gcra\"",
                 l->id, ra_algorithm_name(l->algorithm));
        return CFG_EINVALID;
    }
    if (l->store == CFG_STORE_REDIS && l->algorithm == RA_TOKEN_BUCKET) {
        snprintf(msg, size,
                 PREFIX "store \"redis\": counter: algorithm has no distributed (redis) form",
                 l->id);
        return CFG_EINVALID;
    }
    return 0;
}

static int arm_domain(const cfg_limit_t *l, int err, char *msg, size_t size)
{
    const char *alg = ra_algorithm_name(l->algorithm);
    switch (err) {
    case RA_ECEILING:
        if (l->algorithm == RA_ENVOY_WINDOW) {
            snprintf(msg, size,
                     PREFIX "%s: limit %lld exceeds the 32-bit window counter ceiling 4294967295 "
                            "(requests_per_unit is a uint32 in Envoy's API) \xe2\x80\x94 use "
                            "algorithm \"gcra\" (unbounded) for limits this large",
                     l->id, alg, (long long)l->amount);
            break;
        }
        snprintf(msg, size,
                 PREFIX "%s: limit %lld exceeds the packed window-counter ceiling 65535; the "
                        "frozen int64 state holds a 16-bit per-window counter \xe2\x80\x94 use "
                        "algorithm \"gcra\" (unbounded) for limits this large",
                 l->id, alg, (long long)l->amount);
        break;
    case RA_ETAU:
        snprintf(msg, size,
                 PREFIX "%s: burst %lld overflows the allowance offset tau = T \xc3\x97 burst "
                        "(int64 nanoseconds, T = %lld ns) \xe2\x80\x94 lower burst",
                 l->id, alg, (long long)l->burst, (long long)(l->period_ns / l->amount));
        break;
    case RA_EEMISSION:
        snprintf(msg, size,
                 PREFIX "%s: amount %lld exceeds the period in nanoseconds (%lld); the emission "
                        "interval T = period / amount would be 0 \xe2\x80\x94 lengthen the period",
                 l->id, alg, (long long)l->amount, (long long)l->period_ns);
        break;
    default:
        snprintf(msg, size, PREFIX "%s: %s", l->id, alg, ra_strerror(err));
        break;
    }
    return CFG_EINVALID;
}

int cfg_limit_arm(cfg_limit_t *l, char *msg, size_t size)
{
    memset(&l->limiter, 0, sizeof(l->limiter));
    l->identity = 0;
    if (cfg_type_is_rate(l->type) && cfg_limit_counts(l)) {
        if (arm_store(l, msg, size) < 0)
            return CFG_EINVALID;
        int err = ra_limiter_init(&l->limiter, l->algorithm, l->amount, l->period_ns, l->burst);
        if (err < 0)
            return arm_domain(l, err, msg, size);
        if (l->type == CFG_TYPE_TPM && l->burst < RA_RESERVE_CAP) {
            snprintf(msg, size,
                     PREFIX "tpm limit \"%s\": burst %lld is below the reserve cap 16384 "
                            "\xe2\x80\x94 an ordinary max-token reserve could never fit (a "
                            "permanent 100%% refusal); raise burst (default is amount %lld) to "
                            "at least the reserve cap",
                     l->id, l->id, (long long)l->burst, (long long)l->amount);
            memset(&l->limiter, 0, sizeof(l->limiter));
            return CFG_EINVALID;
        }
    }
    l->identity = cfg_limit_identity(l);
    return 0;
}

/* The warning for a limit this daemon validates but does not enforce. */
static int folded(cfg_report_t *report, size_t i, const cfg_limit_t *l)
{
    char path[64];
    snprintf(path, sizeof(path), "governance.limits[%zu]", i);
    return cfg__report_add(report, true, 0, path, NULL,
                           "limit \"%s\": %s is folded from ledger rows, which this daemon does "
                           "not hold: it validates but is not enforced here",
                           l->id, cfg_type_name(l->type));
}

/* The warning for a share limit whose burst leaves each of the fleet's replicas fewer than
 * CFG_SHARE_BURST_UNITS units: a bucket that small turns arrival jitter into missed slots, and
 * the fleet under-admits (docs/share.md, "What burst a fleet needs"). rpm only: a tpm replica
 * always holds a reserve cap. */
static int thin_burst(cfg_report_t *report, size_t i, const cfg_limit_t *l, int64_t replicas)
{
    if (replicas <= 0 || l->store != CFG_STORE_SHARE || l->type != CFG_TYPE_RPM ||
        l->burst >= CFG_SHARE_BURST_UNITS * replicas)
        return 0;
    char path[64];
    snprintf(path, sizeof(path), "governance.limits[%zu].burst", i);
    return cfg__report_add(
        report, true, 0, path, NULL,
        "limit \"%s\": burst %lld over %lld replicas (shared_state.share.replicas) is %.2g "
        "a replica: a bucket that small turns arrival jitter into missed slots and the fleet "
        "under-admits (requests arriving at random at 1.5x a replica's share: 60%% of the cap "
        "admitted at 1 a replica, 87%% at 2, 98%% at 4); raise burst to at least %d x replicas "
        "(%lld)",
        l->id, (long long)l->burst, (long long)replicas, (double)l->burst / (double)replicas,
        CFG_SHARE_BURST_UNITS, (long long)CFG_SHARE_BURST_UNITS * replicas);
}

int cfg_arm(cfg_config_t *cfg, cfg_report_t *report)
{
    int failed = 0;
    cfg->armed = false;
    for (size_t i = 0; i < cfg->n_limits; i++) {
        cfg_limit_t *l = &cfg->limits[i];
        char msg[1024];
        if (cfg_limit_arm(l, msg, sizeof(msg)) < 0) {
            failed = 1;
            /* cfg_limit_arm's message begins with its path (PREFIX) */
            if (cfg__report_add(report, false, CFG_EINVALID, ARM_PATH, NULL, "%s",
                                msg + strlen(ARM_PATH ": ")) < 0)
                return CFG_ENOMEM;
            continue;
        }
        if (!cfg_type_is_rate(l->type) && l->type != CFG_TYPE_CONCURRENCY &&
            folded(report, i, l) < 0)
            return CFG_ENOMEM;
        if (thin_burst(report, i, l, cfg->share.replicas) < 0)
            return CFG_ENOMEM;
    }
    cfg__tokens_free(&cfg->tokens); /* armed again: the file is read again */
    if (cfg->server.tokens_file[0]) {
        int rc = cfg__load_tokens(&cfg->tokens, cfg->server.tokens_file, report);
        if (rc == CFG_ENOMEM)
            return rc;
        failed |= rc < 0;
    }
    if (failed)
        return CFG_EINVALID;
    cfg->armed = true;
    return 0;
}
