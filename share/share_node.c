/*
 * The share store's daemon side: membership in, the engine's hooks, /readyz and /metrics out.
 * The decisions are share.c's; this file only moves the view in and the answers out. The
 * engine calls the limiter hook on every step of a share limit: that is one
 * ra_limiter_effective (a 128-bit division), nothing allocated, nothing locked.
 */
#include "share_node.h"
#include "tt_clock.h"
#include "tt_log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct share_node {
    share_core_t core;
    bool solo;               /* no seed configured: joined from the start */
    share_member_t *members; /* the view handed to the core, grown as membership grows */
    size_t cap;
    uint64_t left_total;
    uint8_t meta[SHARE_META_LEN]; /* the payload last returned for publishing */
    bool meta_set;
    int64_t pending_since; /* a new divisor not published yet, since then; 0: none */
    /* the daemon's glue (share_node_attach) */
    mb_t *mb;
    uv_timer_t timer;
    bool attached;
};

void share_node_name_setting(tt_err_t *err, const char *const (*from)[2], size_t n)
{
    for (size_t i = 0; err && i < n; i++)
        if (strcmp(err->path, from[i][0]) == 0) {
            snprintf(err->path, sizeof(err->path), "shared_state.share.%s", from[i][1]);
            return;
        }
}

int share_node_new(share_node_t **out, const cfg_share_t *cfg, int64_t now, tt_err_t *err)
{
    static const char *const from[][2] = {{"partition_hold_ns", "partition_hold"},
                                          {"join_timeout_ns", "join_timeout"}};
    *out = NULL;
    share_node_t *n = calloc(1, sizeof(*n));
    if (!n)
        return tt_err_set(err, TT_ERR_NOMEM, "", "the share node");
    share_config_t sc;
    share_config_default(&sc);
    sc.partition_hold_ns = cfg->partition_hold_ns;
    sc.join_timeout_ns = cfg->join_timeout_ns;
    int rc = share_init(&n->core, &sc, now, err);
    if (rc < 0) {
        share_node_name_setting(err, from, sizeof(from) / sizeof(from[0]));
        free(n);
        return rc;
    }
    n->solo = cfg->n_seeds == 0;
    *out = n;
    return 0;
}

void share_node_free(share_node_t *n)
{
    if (!n)
        return;
    free(n->members);
    free(n);
}

static share_member_state_t member_state(swim_state_t s)
{
    switch (s) {
    case SWIM_ALIVE:
        return SHARE_MEMBER_ALIVE;
    case SWIM_SUSPECT:
        return SHARE_MEMBER_SUSPECT;
    case SWIM_LEFT:
        return SHARE_MEMBER_LEFT;
    default:
        return SHARE_MEMBER_DEAD;
    }
}

int share_node_refresh(share_node_t *n, const share_members_t *m, size_t left_events, int64_t now)
{
    if (m->count > n->cap) {
        share_member_t *grown = realloc(n->members, m->count * sizeof(*grown));
        if (grown) {
            n->members = grown;
            n->cap = m->count;
        }
    }
    /* Should growing fail, the view is read short: N too small for one refresh, which the
     * next refresh corrects; nothing is lost. */
    size_t used = 0;
    for (size_t i = 0; i < m->count && used < n->cap; i++) {
        swim_member_view_t v;
        if (m->get(m->ctx, i, &v) != 0)
            continue;
        n->members[used++] = (share_member_t){.state = member_state(v.state),
                                              .is_self = v.self,
                                              .meta = v.meta,
                                              .meta_len = v.meta_len};
    }
    n->left_total += left_events;
    share_view_t view = {.members = n->members,
                         .count = used,
                         .joined = n->solo || m->joined,
                         .left_total = n->left_total,
                         .unheard = m->unheard};
    share_update(&n->core, &view, now);

    /* Publishing (issue 35). A new divisor goes to every live member directly, twice (swim.c:
     * up to 64 datagrams each time), and every replica's divisor moves with every leave and every
     * join: in a rolling restart, where a leave and the restart's join come a moment apart, what
     * a replica sent grew with N (2.0, 8.4, 19.6, 43.5, 85.9 KB/s a replica at 8 to 128 replicas,
     * one restart a second). So a new divisor is published once it has held for
     * SHARE_NODE_PUBLISH_HOLD_NS, and not at all if it went back meanwhile: a leave and the join a
     * moment later cancel out, and a replica publishes at most one divisor a hold. A new state
     * (armed, held) goes out at once: peers bound an unarmed replica as the whole amount. This
     * replica divides by its new N at once; only its peers' view of it lags, by the hold. */
    uint8_t meta[SHARE_META_LEN];
    share_meta_encode(&n->core, meta, sizeof(meta));
    if (n->meta_set && memcmp(meta, n->meta, sizeof(meta)) == 0) {
        n->pending_since = 0; /* unchanged, or back to what was published */
        return 0;
    }
    if (n->meta_set && meta[1] == n->meta[1]) { /* the divisor alone */
        if (!n->pending_since)
            n->pending_since = now > 0 ? now : 1;
        if (now - n->pending_since < SHARE_NODE_PUBLISH_HOLD_NS)
            return 0;
    }
    n->pending_since = 0;
    memcpy(n->meta, meta, sizeof(meta));
    n->meta_set = true;
    return 1;
}

void share_node_remember(share_node_t *n, uint32_t members, int64_t now)
{
    share_remember(&n->core, members, now);
}

const uint8_t *share_node_meta(const share_node_t *n)
{
    return n->meta;
}

int64_t share_node_deadline(const share_node_t *n)
{
    int64_t t = share_next_deadline(&n->core);
    if (n->pending_since && n->pending_since + SHARE_NODE_PUBLISH_HOLD_NS < t)
        t = n->pending_since + SHARE_NODE_PUBLISH_HOLD_NS;
    return t;
}

const share_core_t *share_node_core(const share_node_t *n)
{
    return &n->core;
}

bool share_node_ready(const share_node_t *n, const char **why)
{
    if (share_state(&n->core) != SHARE_UNARMED)
        return true;
    if (why)
        *why = "share store not armed: membership has not joined yet";
    return false;
}

/* ---- the daemon's glue ---------------------------------------------------------------------- */

static int mb_get(const void *ctx, size_t i, swim_member_view_t *v)
{
    return mb_member_get(ctx, i, v);
}

share_members_t share_node_members(const mb_t *mb)
{
    size_t unheard = mb_known_missing(mb, NULL, 0);
    return (share_members_t){.ctx = mb,
                             .count = mb_member_count(mb),
                             .get = mb_get,
                             .joined = mb_joined(mb) || mb_solo(mb),
                             .unheard = unheard > UINT32_MAX ? UINT32_MAX : (uint32_t)unheard};
}

static void on_timer(uv_timer_t *t);

/*
 * One line per change of what the share limits divide by (docs/share.md, "What the log says"):
 * the store armed, N changed (old_n, n), the hold taken while N stays. live is membership's
 * count, which N follows except while held.
 */
static void log_change(const share_node_t *n, share_state_t was, uint32_t was_n)
{
    share_state_t st = share_state(&n->core);
    uint32_t d = share_divisor(&n->core);
    int live = mb_live_count(n->mb);
    if (was == SHARE_UNARMED && st != SHARE_UNARMED)
        tt_log(TT_LOG_INFO, "share store armed", TT_UINT("n", d), TT_INT("live", live),
               TT_STR("state", share_state_name(st)));
    else if (d != was_n)
        tt_log(TT_LOG_INFO, "N changed", TT_UINT("old_n", was_n), TT_UINT("n", d),
               TT_INT("live", live), TT_STR("state", share_state_name(st)));
    else if (st == SHARE_HELD && was != SHARE_HELD)
        tt_log(TT_LOG_WARN,
               "N held: at most half of the view is left; dividing by the recent largest N until "
               "the drop has lasted partition_hold",
               TT_UINT("n", d), TT_INT("live", live));
}

/* Re-reads membership, publishes a changed divisor, and re-arms the deadline timer. */
static void refresh_from_mb(share_node_t *n, size_t left_events)
{
    int64_t now = tt_wall_ns();
    share_members_t m = share_node_members(n->mb);
    share_state_t was = share_state(&n->core);
    uint32_t was_n = share_divisor(&n->core);
    if (share_node_refresh(n, &m, left_events, now) == 1)
        mb_set_meta(n->mb, n->meta, sizeof(n->meta));
    log_change(n, was, was_n);
    int64_t deadline = share_node_deadline(n);
    if (deadline == INT64_MAX) {
        uv_timer_stop(&n->timer);
        return;
    }
    int64_t wait_ms = deadline > now ? (deadline - now + 999999) / 1000000 : 0;
    uv_timer_start(&n->timer, on_timer, (uint64_t)wait_ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    refresh_from_mb(t->data, 0);
}

static void on_event(void *ud, mb_t *mb, const swim_event_t *ev)
{
    (void)mb;
    refresh_from_mb(ud, ev->type == SWIM_EV_LEFT);
}

int share_node_attach(share_node_t *n, uv_loop_t *loop, mb_t *mb)
{
    int rc = uv_timer_init(loop, &n->timer);
    if (rc < 0)
        return rc;
    n->timer.data = n;
    n->mb = mb;
    n->attached = true;
    if ((rc = mb_subscribe(mb, on_event, n)) < 0)
        return rc;
    refresh_from_mb(n, 0);
    return 0;
}

void share_node_close(share_node_t *n)
{
    if (n && n->attached && !uv_is_closing((uv_handle_t *)&n->timer))
        uv_close((uv_handle_t *)&n->timer, NULL);
}

/* ---- the engine's hooks --------------------------------------------------------------------- */

static int hook_limiter(void *ctx, const cfg_limit_t *limit, int64_t now, ra_limiter_t *out,
                        bool *armed)
{
    (void)now; /* the core moves with membership, not with steps */
    const share_node_t *n = ctx;
    int rc = share_limiter(&n->core, limit, out);
    *armed = rc != SHARE_EUNARMED;
    return rc == SHARE_EUNARMED ? 0 : rc;
}

/* share_disclose with membership's health score read now (it stretches detect_within_s). */
static int disclose(share_node_t *n, const cfg_limit_t *limit, share_disclosure_t *d)
{
    if (n->mb)
        share_set_health(&n->core, mb_health(n->mb));
    return share_disclose(&n->core, limit, d);
}

static void hook_fleet(void *ctx, const cfg_limit_t *limit, int64_t now, gov_fleet_entry_t *out)
{
    (void)now;
    share_node_t *n = ctx;
    share_disclosure_t d;
    if (disclose(n, limit, &d) != 0)
        return;
    out->n = d.n;
    out->local_share = d.local_share;
    out->sustained_bound = d.sustained_bound;
    out->burst_bound = d.burst_bound;
    out->state = share_state_name(d.state);
    out->divisor_min = d.divisor_min;
    out->divisor_max = d.divisor_max;
    out->detect_within_s = d.detect_within_s;
    out->converged = d.converged;
}

const gov_share_ops_t share_node_ops = {.limiter = hook_limiter, .fleet = hook_fleet};

/* ---- /metrics ------------------------------------------------------------------------------- */

/* One gauge family: its name, help, and the disclosure field it reads. */
typedef struct gauge {
    const char *name;
    const char *help;
    int64_t (*read)(const share_disclosure_t *d);
} gauge_t;

#define FIELD(f)                                                                                   \
    static int64_t read_##f(const share_disclosure_t *d)                                           \
    {                                                                                              \
        return (int64_t)d->f;                                                                      \
    }
FIELD(n)
FIELD(live)
FIELD(local_share)
FIELD(sustained_bound)
FIELD(burst_bound)
FIELD(divisor_min)
FIELD(divisor_max)
FIELD(divisors_unknown)
FIELD(detect_within_s)
FIELD(converged)
FIELD(unheard)
#undef FIELD

static const gauge_t gauges[] = {
    {"share_n", "The divisor a share limit runs with (0 while unarmed).", read_n},
    {"share_live", "Members alive or suspect in this replica's view, itself included.", read_live},
    {"share_local_share", "Units per period this replica admits for a share limit.",
     read_local_share},
    {"share_sustained_bound", "Units per period the fleet may admit, as this view implies.",
     read_sustained_bound},
    {"share_burst_bound", "Units the fleet may admit at once, as this view implies.",
     read_burst_bound},
    {"share_divisor_min", "The smallest divisor gossiped by a live member.", read_divisor_min},
    {"share_divisor_max", "The largest divisor gossiped by a live member.", read_divisor_max},
    {"share_divisors_unknown", "Live members whose divisor is unknown (bounded as 1).",
     read_divisors_unknown},
    {"share_detect_within_seconds", "How long a dead peer's share can go unused.",
     read_detect_within_s},
    {"share_converged", "1 when every live member divides by the live count.", read_converged},
    {"share_unheard",
     "Members this replica knew before its restart that its view does not hold yet (counted in "
     "N, their divisors unknown).",
     read_unheard},
};

void share_node_metrics(share_node_t *n, const cfg_limit_t *limits, size_t count,
                        share_emit_fn emit, void *ctx)
{
    char line[256];
    for (size_t g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
        snprintf(line, sizeof(line), "# HELP tokentriage_%s %s\n# TYPE tokentriage_%s gauge\n",
                 gauges[g].name, gauges[g].help, gauges[g].name);
        emit(ctx, line);
        for (size_t i = 0; i < count; i++) {
            share_disclosure_t d;
            if (disclose(n, &limits[i], &d) != 0)
                continue;
            snprintf(line, sizeof(line), "tokentriage_%s{limit=\"%s\"} %" PRId64 "\n",
                     gauges[g].name, limits[i].id, gauges[g].read(&d));
            emit(ctx, line);
        }
    }
    /* The state as an enum: one series per state, 1 for the current one. */
    emit(ctx, "# HELP tokentriage_share_state A share limit's state (unarmed, armed, held).\n"
              "# TYPE tokentriage_share_state gauge\n");
    for (size_t i = 0; i < count; i++) {
        share_disclosure_t d;
        if (disclose(n, &limits[i], &d) != 0)
            continue;
        for (int s = SHARE_UNARMED; s <= SHARE_HELD; s++) {
            snprintf(line, sizeof(line), "tokentriage_share_state{limit=\"%s\",state=\"%s\"} %d\n",
                     limits[i].id, share_state_name((share_state_t)s), d.state == (share_state_t)s);
            emit(ctx, line);
        }
    }
}
