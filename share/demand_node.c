/*
 * Demand-aware division's daemon side: members, the share core's divisor and payloads in; the
 * engine's per-key hook, payloads, `fleet` and /metrics out. The decisions are the core's; this
 * file only moves things. The hook is one table look-up and one ra_limiter_effective.
 */
#include "demand_node.h"
#include "tt_clock.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct demand_node {
    demand_core_t *core;
    int64_t interval_ns;
    demand_member_t *members; /* the live list handed to the core, members_max entries */
    uint32_t cap;
    uint32_t divisor;
    /* the daemon's glue (demand_node_attach) */
    mb_t *mb;
    const share_node_t *share;
    demand_emit_fn send;
    void *send_ctx;
    uv_timer_t timer;       /* every demand_interval: demand_tick */
    uv_timer_t flush_timer; /* when early grants are due: demand_flush */
    bool attached;
};

int demand_node_new(demand_node_t **out, const cfg_share_t *cfg, tt_err_t *err)
{
    /* the shared_state.share setting each demand_config_t field comes from */
    static const char *const from[][2] = {
        {"interval_ns", "demand_interval"},
        {"window_ns", "demand_interval"},
        {"cold_num", "cold_share"},
        {"keys_max", "demand_keys"},
        {"owned_max", "demand_keys"},
        {"leases_max", "demand_keys"},
        {"self_id", "node_id"},
    };
    *out = NULL;
    demand_config_t dc;
    demand_config_from_share(&dc, cfg);
    demand_node_t *n = calloc(1, sizeof(*n));
    if (!n)
        return tt_err_set(err, DEMAND_ENOMEM, "", "the demand node");
    n->members = calloc(dc.members_max, sizeof(*n->members));
    int rc = n->members ? demand_new(&n->core, &dc, cfg->node_id, strlen(cfg->node_id), err)
                        : tt_err_set(err, DEMAND_ENOMEM, "", "the demand node's member list");
    if (rc < 0) {
        if (rc == DEMAND_ECONFIG)
            share_node_name_setting(err, from, sizeof(from) / sizeof(from[0]));
        free(n->members);
        free(n);
        return rc;
    }
    n->cap = dc.members_max;
    n->interval_ns = dc.interval_ns;
    *out = n;
    return 0;
}

void demand_node_free(demand_node_t *n)
{
    if (!n)
        return;
    demand_free(n->core);
    free(n->members);
    free(n);
}

demand_core_t *demand_node_core(demand_node_t *n)
{
    return n->core;
}

void demand_node_refresh(demand_node_t *n, const share_members_t *m, uint32_t divisor, int64_t now)
{
    uint32_t used = 0;
    for (size_t i = 0; i < m->count && used < n->cap; i++) {
        swim_member_view_t v;
        if (m->get(m->ctx, i, &v) != 0 || (v.state != SWIM_ALIVE && v.state != SWIM_SUSPECT))
            continue;
        n->members[used++] = (demand_member_t){.id = v.id, .id_len = v.id_len};
    }
    n->divisor = divisor;
    demand_set_members(n->core, n->members, used, divisor, now);
}

static void flush_or_arm(demand_node_t *n, int64_t now);

int demand_node_receive(demand_node_t *n, const char *from, size_t from_len, const uint8_t *bytes,
                        size_t len, int64_t now)
{
    int rc = demand_receive(n->core, now, from, from_len, bytes, len, NULL);
    if (n->attached)
        flush_or_arm(n, now);
    return rc;
}

/* ---- the daemon's glue ---------------------------------------------------------------------- */

static void on_flush(uv_timer_t *t)
{
    flush_or_arm(t->data, tt_wall_ns());
}

/* Sends the early grants due now, and arms the flush timer for those due later. */
static void flush_or_arm(demand_node_t *n, int64_t now)
{
    demand_flush(n->core, now, n->send, n->send_ctx);
    int64_t at = demand_flush_deadline(n->core);
    if (at == INT64_MAX) {
        uv_timer_stop(&n->flush_timer);
        return;
    }
    uv_timer_start(&n->flush_timer, on_flush, (uint64_t)((at - now + 999999) / 1000000), 0);
}

static void refresh_from_mb(demand_node_t *n, int64_t now)
{
    share_members_t m = share_node_members(n->mb);
    demand_node_refresh(n, &m, share_divisor(share_node_core(n->share)), now);
}

static void on_event(void *ud, mb_t *mb, const swim_event_t *ev)
{
    (void)mb;
    (void)ev;
    refresh_from_mb(ud, tt_wall_ns());
}

static void on_tick(uv_timer_t *t)
{
    demand_node_t *n = t->data;
    int64_t now = tt_wall_ns();
    /* the share core may have changed its divisor (a hold ending) without a member event */
    if (share_divisor(share_node_core(n->share)) != n->divisor)
        refresh_from_mb(n, now);
    demand_tick(n->core, now, n->send, n->send_ctx);
    flush_or_arm(n, now); /* the tick answered every change: stops the flush timer */
}

int demand_node_attach(demand_node_t *n, uv_loop_t *loop, mb_t *mb, const share_node_t *share,
                       demand_emit_fn send, void *send_ctx)
{
    int rc = uv_timer_init(loop, &n->timer);
    if (rc < 0 || (rc = uv_timer_init(loop, &n->flush_timer)) < 0)
        return rc;
    n->timer.data = n;
    n->flush_timer.data = n;
    n->mb = mb;
    n->share = share;
    n->send = send;
    n->send_ctx = send_ctx;
    n->attached = true;
    if ((rc = mb_subscribe(mb, on_event, n)) < 0)
        return rc;
    refresh_from_mb(n, tt_wall_ns());
    uint64_t ms = (uint64_t)((n->interval_ns + 999999) / 1000000);
    return uv_timer_start(&n->timer, on_tick, ms, ms);
}

void demand_node_close(demand_node_t *n)
{
    if (n->attached && !uv_is_closing((uv_handle_t *)&n->timer)) {
        uv_close((uv_handle_t *)&n->timer, NULL);
        uv_close((uv_handle_t *)&n->flush_timer, NULL);
    }
}

/* ---- the engine's hooks, fleet ------------------------------------------------------------- */

int demand_node_limiter(void *ctx, const cfg_limit_t *limit, const char *key, size_t key_len,
                        int64_t cost, int64_t now, ra_limiter_t *out, bool *armed)
{
    demand_node_t *n = ctx;
    int rc = demand_limiter(n->core, limit, key, key_len, cost, now, out);
    *armed = rc != DEMAND_EUNARMED;
    return rc == DEMAND_EUNARMED ? 0 : rc;
}

void demand_node_fleet(const demand_node_t *n, const cfg_limit_t *limit, int64_t now,
                       gov_fleet_entry_t *out)
{
    demand_disclosure_t d;
    demand_disclose(n->core, limit, now, &d);
    out->sustained_bound = d.sustained_bound;
    out->burst_bound = d.burst_bound;
    out->demand = true;
    out->keys_leased = d.keys_leased;
    out->keys_owned = d.keys_owned;
    out->largest_lease_age_ms = d.largest_lease_age_ns / 1000000;
    /* an unleased key runs on the cold share; a leased one on its lease */
    out->local_share = demand_units(limit->amount, d.cold_num);
    out->largest_lease = demand_units(limit->amount, d.largest_lease_num);
    out->moving = d.moving;
}

/* The share store's entry (N, state, divisors), then demand mode's bounds and figures. */
static void hook_fleet(void *ctx, const cfg_limit_t *limit, int64_t now, gov_fleet_entry_t *out)
{
    const demand_node_t *n = ctx;
    share_node_ops.fleet((void *)n->share, limit, now, out);
    demand_node_fleet(n, limit, now, out);
}

const gov_share_ops_t demand_node_ops = {.key_limiter = demand_node_limiter, .fleet = hook_fleet};

/* ---- /metrics ------------------------------------------------------------------------------- */

/* The gauges per demand-mode limit, in the order disclosure_values fills them. */
static const struct {
    const char *name, *help;
} gauges[] = {
    {"demand_keys_tracked", "Keys of a demand-mode limit measured here."},
    {"demand_keys_hot", "Keys whose demand here is above the cold share (reported)."},
    {"demand_keys_leased", "Keys holding a live lease here."},
    {"demand_keys_owned", "Keys owned here with at least one reporter."},
    {"demand_leases_granted", "Leases this replica grants as owner."},
    {"demand_largest_lease_age_milliseconds", "Time since the oldest live lease was granted."},
    {"demand_largest_lease", "The largest live lease here in 2^-20 of the amount (0: none)."},
    {"demand_cold_share", "The cold share c/N in 2^-20 of the amount."},
    {"demand_sustained_bound", "Units per period the fleet may admit (x2 while ownership moves)."},
    {"demand_burst_bound", "Units the fleet may admit at once (burst x2 while moving, + N units)."},
    {"demand_moving", "1 within one lease lifetime of an ownership change."},
};
#define NGAUGES (sizeof(gauges) / sizeof(gauges[0]))

static void disclosure_values(const demand_disclosure_t *d, int64_t v[NGAUGES])
{
    int64_t all[] = {d->keys_tracked,      d->keys_hot,       d->keys_leased,
                     d->keys_owned,        d->leases_granted, d->largest_lease_age_ns / 1000000,
                     d->largest_lease_num, d->cold_num,       d->sustained_bound,
                     d->burst_bound,       d->moving};
    _Static_assert(sizeof(all) / sizeof(all[0]) == NGAUGES, "one value per gauge");
    memcpy(v, all, sizeof(all));
}

typedef struct counter {
    const char *name;
    const char *help;
    size_t offset; /* into demand_counters_t */
} counter_t;

#define COUNTER(f, help)                                                                           \
    {                                                                                              \
        "demand_" #f "_total", help, offsetof(demand_counters_t, f)                                \
    }
static const counter_t counters[] = {
    COUNTER(tx_packets, "Demand datagrams sent."),
    COUNTER(tx_bytes, "Demand payload bytes sent."),
    COUNTER(rx_packets, "Demand datagrams received."),
    COUNTER(rx_bytes, "Demand payload bytes received."),
    COUNTER(reports_sent, "Demand reports sent."),
    COUNTER(grants_sent, "Leases granted on the wire."),
    COUNTER(reports_received, "Demand reports received."),
    COUNTER(grants_received, "Leases received."),
    COUNTER(rx_bad, "Demand datagrams dropped: undecodable or from a non-member."),
    COUNTER(grants_ignored, "Leases ignored: not from the owner, or for a key no longer hot."),
    COUNTER(reports_misrouted, "Reports for a key this replica does not own in its view."),
    COUNTER(untracked_arrivals, "Arrivals on the cold share, unmeasured: keys_max full."),
    COUNTER(reports_refused, "Reports refused: owned_max or leases_max full."),
};
#undef COUNTER

void demand_node_metrics(const demand_node_t *n, const cfg_limit_t *limits, size_t count,
                         int64_t now, share_emit_fn emit, void *ctx)
{
    char line[256];
    for (size_t g = 0; g < NGAUGES; g++) {
        snprintf(line, sizeof(line), "# HELP tokentriage_%s %s\n# TYPE tokentriage_%s gauge\n",
                 gauges[g].name, gauges[g].help, gauges[g].name);
        emit(ctx, line);
        for (size_t i = 0; i < count; i++) {
            if (limits[i].store != CFG_STORE_SHARE || !cfg_type_is_rate(limits[i].type))
                continue;
            demand_disclosure_t d;
            int64_t v[NGAUGES];
            demand_disclose(n->core, &limits[i], now, &d);
            disclosure_values(&d, v);
            snprintf(line, sizeof(line), "tokentriage_%s{limit=\"%s\"} %" PRId64 "\n",
                     gauges[g].name, limits[i].id, v[g]);
            emit(ctx, line);
        }
    }
    const demand_counters_t *c = demand_counters(n->core);
    for (size_t k = 0; k < sizeof(counters) / sizeof(counters[0]); k++) {
        uint64_t v;
        memcpy(&v, (const char *)c + counters[k].offset, sizeof(v));
        snprintf(line, sizeof(line),
                 "# HELP tokentriage_%s %s\n# TYPE tokentriage_%s counter\ntokentriage_%s %" PRIu64
                 "\n",
                 counters[k].name, counters[k].help, counters[k].name, counters[k].name, v);
        emit(ctx, line);
    }
}
