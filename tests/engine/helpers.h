/* Shared by the engine tests: armed limits and subjects in one line each. */
#ifndef TT_TESTS_ENGINE_HELPERS_H
#define TT_TESTS_ENGINE_HELPERS_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <string.h>

#include "engine.h"
#include "store.h"
#include "disclose.h"

#define S RA_NS_PER_S
#define T0 (INT64_C(1700000000) * S) /* a fixed "now": 2023-11-14 */

/* An armed limit, defaulting to local, on, hard, fail open. */
static inline cfg_limit_t mk_limit(const char *id, const char *level, cfg_type_t type,
                                   ra_algorithm_t alg, int64_t amount, int64_t period_ns,
                                   int64_t burst)
{
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, id);
    strcpy(l.level, level);
    l.type = type;
    l.algorithm = alg;
    l.amount = amount;
    l.period_ns = period_ns;
    l.burst = burst ? burst : amount;
    l.posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    char msg[512];
    cr_assert_eq(cfg_limit_arm(&l, msg, sizeof(msg)), 0, "arm %s: %s", id, msg);
    return l;
}

static inline cfg_limit_t rpm(const char *id, const char *level, int64_t amount, int64_t period,
                              int64_t burst)
{
    return mk_limit(id, level, CFG_TYPE_RPM, RA_GCRA, amount, period, burst);
}

static inline cfg_limit_t tpm(const char *id, const char *level, int64_t amount, int64_t period,
                              int64_t burst)
{
    return mk_limit(id, level, CFG_TYPE_TPM, RA_GCRA, amount, period, burst);
}

static inline cfg_limit_t conc(const char *id, const char *level, int64_t amount)
{
    return mk_limit(id, level, CFG_TYPE_CONCURRENCY, RA_GCRA, amount, 0, 0);
}

static inline gov_engine_t *mk_engine(const cfg_limit_t *limits, size_t n, bool disclose)
{
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create(&e, &o, limits, n, disclose, &err), 0, "%s", err.message);
    return e;
}

/* subj(&s, "team", "t-42", "key", "k-1", NULL) */
static inline gov_subject_t *subj(gov_subject_t *s, ...)
{
    va_list ap;
    va_start(ap, s);
    s->n = 0;
    for (const char *lv; (lv = va_arg(ap, const char *));) {
        const char *id = va_arg(ap, const char *);
        s->pairs[s->n++] = (gov_pair_t){lv, strlen(lv), id, strlen(id)};
    }
    va_end(ap);
    return s;
}

/* The value of header `name`, or NULL. */
static inline const char *hdr(const gov_result_t *r, const char *name)
{
    for (uint32_t i = 0; i < r->n_headers; i++)
        if (strcmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

static inline gov_result_t decide(gov_engine_t *e, const gov_subject_t *s, int64_t tokens,
                                  int64_t now)
{
    gov_result_t r;
    int rc = gov_decide(e, NULL, s, tokens, now, &r, NULL, NULL);
    cr_assert_eq(rc, 0, "decide: %d %s", rc, r.err.message);
    gov_result_render(&r);
    return r;
}

/* A config of `base` (our YAML: its server and shared_state settings) and envoy ratelimit's
 * files (one string per domain: the rule language), armed; the caller frees it with cfg_free. */
static inline cfg_config_t *envoy_config_on(const char *base, const char *const *files, size_t n)
{
    cfg_config_t *cfg;
    cfg_report_t r = {0};
    cr_assert_eq(cfg_load_string("t.yaml", base, strlen(base), &cfg, &r), 0, "%s",
                 r.n ? r.items[0].text : "");
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(cfg_load_envoy_string(cfg, "f.yaml", files[i], strlen(files[i]), &r), 0,
                     "file %zu: %s", i, r.n ? r.items[0].text : "");
    cr_assert_eq(cfg_arm(cfg, &r), 0);
    cfg_report_free(&r);
    return cfg;
}

static inline cfg_config_t *envoy_config(const char *const *files, size_t n)
{
    return envoy_config_on("{}", files, n);
}

#endif
