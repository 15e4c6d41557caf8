/*
 * libFuzzer target for the config loader: any bytes through load, validate and arm.
 * Properties checked beyond "no crash, no leak, no UB": a load either fails with at least one
 * error reported or yields a model whose limits are valid; arming keeps identities consistent.
 * Seeds: examples/ and tests/vectors/config/. Run longer with, from a fuzz build tree:
 *   tests/fuzz/fuzz_config -max_total_time=600 -dict=../tests/fuzz/config.dict \
 *       corpus/ ../examples ../tests/vectors/config
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cfg_report_t report = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_string("fuzz.yaml", (const char *)data, size, &cfg, &report);
    if (rc < 0) {
        check(cfg == NULL && report.n_errors > 0);
    } else {
        check(cfg != NULL && report.n_errors == 0);
        for (size_t i = 0; i < cfg->n_limits; i++) {
            const cfg_limit_t *l = &cfg->limits[i];
            check(l->id[0] != '\0');
            if (cfg_limit_is_rule(l)) { /* matched by descriptor; amount 0 is envoy_window's */
                check(l->level[0] == '\0' && cfg_type_is_rate(l->type) && l->amount >= 0);
                check(l->rule.n_entries > 0 || (l->rule.flags & CFG_RULE_OVERRIDE));
                continue;
            }
            check(l->level[0] != '\0' && l->amount > 0);
            check(!cfg_type_is_rate(l->type) || (l->period_ns > 0 && l->burst > 0));
        }
        if (cfg_arm(cfg, &report) == 0) {
            check(cfg->armed);
            for (size_t i = 0; i < cfg->n_limits; i++)
                check(cfg->limits[i].identity == cfg_limit_identity(&cfg->limits[i]));
        } else {
            check(!cfg->armed && report.n_errors > 0);
        }
    }
    for (size_t i = 0; i < report.n; i++)
        check(report.items[i].text && report.items[i].path[0] && report.items[i].message[0] &&
              (report.items[i].warning ? report.items[i].code == 0 : report.items[i].code < 0));
    cfg_report_free(&report);
    cfg_free(cfg);
    return 0;
}
