/* A compiled share limit for the share tests: armed as the daemon arms it. */
#ifndef TT_TESTS_SHARE_LIMIT_HELPER_H
#define TT_TESTS_SHARE_LIMIT_HELPER_H

#include <criterion/criterion.h>
#include <string.h>

#include "limit.h"

static inline cfg_limit_t share_test_limit(cfg_type_t type, int64_t amount, int64_t period,
                                           int64_t burst)
{
    cfg_limit_t l;
    memset(&l, 0, sizeof(l));
    strcpy(l.id, "team_rpm");
    strcpy(l.level, "team");
    l.type = type;
    l.store = CFG_STORE_SHARE;
    l.algorithm = RA_GCRA;
    l.posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    l.amount = amount;
    l.period_ns = period;
    l.burst = burst;
    char msg[256];
    cr_assert_eq(cfg_limit_arm(&l, msg, sizeof(msg)), 0, "%s", msg);
    return l;
}

#endif
