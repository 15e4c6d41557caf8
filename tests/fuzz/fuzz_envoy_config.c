/*
 * libFuzzer target for envoy ratelimit's config files as the gRPC door reads them
 * (config/envoy.c): any bytes as one file, appended to a config, armed, and built into the
 * engine's matching tree. Properties beyond "no crash, no leak, no UB": a refused file is
 * reported and changes nothing; an accepted one yields rules of its domain only, each armed,
 * and a tree the engine builds (config/ and engine/ agree on what is a duplicate).
 * Seeds: tests/fuzz/envoy_config (our own files in envoy ratelimit's schema). Run longer with:
 *   tests/fuzz/fuzz_envoy_config -max_total_time=600 corpus/ ../tests/fuzz/envoy_config
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "match.h"

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
    check(cfg_load_string("base.yaml", "{}", 2, &cfg, &report) == 0);
    int rc = cfg_load_envoy_string(cfg, "fuzz.yaml", (const char *)data, size, &report);
    if (rc < 0) {
        check(cfg->n_limits == 0 && report.n_errors > 0);
    } else {
        check(report.n_errors == 0);
        for (size_t i = 0; i < cfg->n_limits; i++) {
            const cfg_limit_t *l = &cfg->limits[i];
            check(cfg_limit_is_rule(l) && l->id[0]);
            if (l->rule.flags & CFG_RULE_OVERRIDE)
                continue; /* the override counters, once rules exist */
            check(l->rule.n_entries > 0 && strcmp(l->rule.domain, cfg->limits[0].rule.domain) == 0);
        }
        check(cfg_arm(cfg, &report) == 0);
        gov_rules_t *tree = NULL;
        tt_err_t err;
        check(gov_rules_build(cfg->limits, cfg->n_limits, &tree, &err) == 0);
        check((tree != NULL) == (cfg->n_limits > 0));
        gov_rules_free(tree);
    }
    for (size_t i = 0; i < report.n; i++)
        check(report.items[i].text && report.items[i].path[0] && report.items[i].message[0]);
    cfg_report_free(&report);
    cfg_free(cfg);
    return 0;
}
