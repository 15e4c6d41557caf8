/* What the swim fuzz targets share: a fresh plaintext core "rx" at T0, and a check that traps. */
#ifndef TT_TESTS_FUZZ_SWIM_H
#define TT_TESTS_FUZZ_SWIM_H

#include "swim.h"

#define T0 (INT64_C(1700000000) * 1000000000)

static inline void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static inline swim_core_t *fuzz_core(void)
{
    swim_config_t cfg;
    swim_config_default(&cfg);
    cfg.id = "rx";
    cfg.generation = 1;
    cfg.addr = (swim_addr_t){.family = 4, .port = 7946, .ip = {10, 0, 0, 1}};
    swim_core_t *c;
    tt_err_t err;
    check(swim_new(&c, &cfg, T0, &err) == 0);
    swim_outbox_clear(c);
    return c;
}

#endif
