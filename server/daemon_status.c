/* See daemon_status.h. */
#include "daemon_status.h"

#include <stdlib.h>
#include <string.h>

#include "daemon_state.h"
#include "redis_store.h"
#include "tt_clock.h"

void srv_status_tick(srv_status_src_t *s, int64_t now)
{
    if (!status_rates_due(&s->rates, now))
        return;
    gov_limit_metrics_t *lm = malloc(GOV_LIMITS_MAX * sizeof(*lm));
    if (!lm)
        return; /* the next tick tries again */
    size_t n = gov_engine_limit_metrics(s->engine, lm, GOV_LIMITS_MAX);
    status_rates_sample(&s->rates, lm, n < GOV_LIMITS_MAX ? n : GOV_LIMITS_MAX, now);
    free(lm);
}

/* Members in the order a person looks for them: this replica first, then by id. */
static int by_id(const void *a, const void *b)
{
    const proto_member_t *x = a, *y = b;
    if (x->self != y->self)
        return x->self ? -1 : 1;
    size_t n = x->id.len < y->id.len ? x->id.len : y->id.len;
    int c = memcmp(x->id.ptr, y->id.ptr, n);
    return c ? c : (x->id.len > y->id.len) - (x->id.len < y->id.len);
}

int srv_status_page(void *ud, tt_buf_t *body)
{
    srv_status_src_t *s = ud;
    int64_t now = tt_wall_ns();
    status_view_t v = {
        .node = s->node,
        .version = s->version,
        .now = now,
        .ready = true,
        .generation = s->generation,
        .applied_ns = s->applied_ns,
        .config = s->config,
        .reloads_refused = s->refused,
        .live = 1,
        .rates = &s->rates,
        .snapshot_age_ms = s->state ? srv_state_age_ms(s->state, now) : -1,
        .state_dir = s->state != NULL,
    };
    if (s->ready)
        v.ready = s->ready(s->ready_ud, &v.not_ready);
    gov_fleet_entry_t *limits = malloc(GOV_LIMITS_MAX * sizeof(*limits));
    proto_member_t *members = NULL;
    int rc = -1;
    if (!limits)
        goto out;
    v.limits = limits;
    v.n_limits = gov_fleet(s->engine, now, limits, GOV_LIMITS_MAX);
    if (v.n_limits > GOV_LIMITS_MAX)
        v.n_limits = GOV_LIMITS_MAX;
    if (s->members) {
        proto_members_head_t head;
        size_t cap = s->members(s->members_ud, NULL, 0, &head);
        if (!(members = calloc(cap ? cap : 1, sizeof(*members))))
            goto out;
        v.n_members = s->members(s->members_ud, members, cap, &head);
        v.live = head.live;
        v.unheard = head.unheard;
        v.unheard_for_ms = head.unheard_for_ms;
        if (v.n_members > cap)
            v.n_members = cap;
        qsort(members, v.n_members, sizeof(*members), by_id);
        v.members = members;
        v.membership = true;
        v.n_in_doubt = s->doubt ? s->doubt(s->doubt_ud) : NULL;
    }
    rds_stats_t st;
    if (s->redis && s->redis->store) {
        rds_store_stats(s->redis->store, &st);
        v.redis = st.ready ? STATUS_UP : STATUS_DOWN;
        v.redis_detail = st.last_error;
    }
    rc = status_render(&v, body);
out:
    free(limits);
    free(members);
    return rc;
}

void srv_status_free(srv_status_src_t *s)
{
    status_rates_free(&s->rates);
}
