/*
 * Fleet: every rate-class limit with the bound its store discloses (SPEC section 6), and the
 * concurrency limits, which only acquire reaches.
 */
#include <string.h>

#include "engine_int.h"

static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

size_t gov_fleet_acquire_only(const gov_engine_t *e, const char **ids, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < e->set->n; i++) {
        const cfg_limit_t *l = &e->set->limits[i].cfg;
        if (l->type != CFG_TYPE_CONCURRENCY || !cfg_limit_counts(l) || !l->posture.on)
            continue;
        if (k < cap)
            ids[k] = l->id;
        k++;
    }
    return k;
}

size_t gov_fleet(gov_engine_t *e, int64_t now, gov_fleet_entry_t *out, size_t cap)
{
    int64_t members = e->members ? e->members(e->members_ctx) : 1;
    if (members < 1)
        members = 1;
    /* a redis store that cannot answer: every redis limit follows its posture until it can */
    bool redis_down = e->redis.ready && !e->redis.ready(e->redis_ctx);
    size_t k = 0;
    for (size_t i = 0; i < e->set->n; i++) {
        const gov_limit_t *l = &e->set->limits[i];
        if (!cfg_type_is_rate(l->cfg.type) || !cfg_limit_counts(&l->cfg) ||
            (l->cfg.rule.flags & CFG_RULE_OVERRIDE))
            continue; /* a rule that counts nothing; a descriptor override's counters */
        if (k < cap) {
            gov_fleet_entry_t *f = &out[k];
            int64_t depth = gov__depth_of(&l->cfg.limiter);
            *f = (gov_fleet_entry_t){.type = l->cfg.type,
                                     .store = l->cfg.store,
                                     .algorithm = l->cfg.algorithm,
                                     .amount = l->cfg.amount,
                                     .period_ns = l->cfg.period_ns,
                                     .burst = l->cfg.burst,
                                     .n = 1,
                                     .local_share = l->cfg.amount,
                                     .sustained_bound = l->cfg.amount,
                                     .burst_bound = depth,
                                     .state = "armed",
                                     .divisor_min = 1,
                                     .divisor_max = 1,
                                     .converged = true};
            memcpy(f->id, l->cfg.id, sizeof(f->id));
            /* local: every replica counts alone; redis: one counter, but while the fallback
             * decides (the store down, or its last answer unavailable, and posture.fail open)
             * every replica counts alone again */
            bool redis = l->cfg.store == CFG_STORE_REDIS;
            if (redis && redis_down)
                f->state = "down";
            f->fallback = redis && (l->fallback || (redis_down && l->cfg.posture.fail_open));
            bool alone = l->cfg.store == CFG_STORE_LOCAL || f->fallback;
            if (alone) {
                f->n = members;
                f->sustained_bound = sat_mul(members, l->cfg.amount);
                f->burst_bound = sat_mul(members, depth);
            } else if (l->cfg.store == CFG_STORE_REDIS) {
                f->n = members;
            } else if (e->share.fleet) {
                e->share.fleet(e->share_ctx, &l->cfg, now, f);
            }
        }
        k++;
    }
    return k;
}
