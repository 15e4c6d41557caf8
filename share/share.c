/*
 * The share store: one fleet cap divided across the live replicas, with no coordinator.
 *
 * Every replica runs GCRA on its own counters in the effective-rate form (SPEC §3) with the
 * share 1/N, N being the members alive or suspect in its own membership view, itself included.
 * If every replica sees the same N, the fleet admits what one GCRA with the whole amount would
 * admit: N replicas x amount/N sustained, N x max(burst/N, unit) at once. Nothing is exchanged
 * per request; the only coupling is SWIM gossip, which is why this is fast and why it is only
 * as accurate as the views agree. This file turns a view into a divisor and says, honestly, how
 * far off the fleet can be.
 *
 * Accuracy model. Member m divides by N_m (gossiped in its metadata). Over any interval of
 * length E a gcra limiter with emission T_s and tolerance tau_s admits at most (E + tau_s) / T_s
 * units (each admission k needs now >= start + k T_s - tau_s), and T_s >= N_m x w / r up to the
 * whole-nanosecond floor, tau_s / T_s <= max(burst / N_m, unit). Summed over the live members:
 *
 *     admitted(E) <= burst_bound + sustained_bound x E / period
 *     sustained_bound = sum_m amount / N_m        burst_bound = sum_m max(burst / N_m, unit)
 *
 * which is exactly amount and about burst when every N_m is the live count (`converged`). The
 * error modes, each disclosed rather than hidden:
 *   - too large N_m (a member not yet detected dead, a suspect that is really gone): the fleet
 *     under-admits; a dead member's share goes unused for at most detect_within_s.
 *   - too small N_m (a joiner not yet seen, a replica cut off and armed solo): over-admits; the
 *     bound says by how much, as far as this replica's view reaches.
 *   - the unit floor: a share of burst below one unit still admits one unit (a tpm replica
 *     always fits one reserve cap), so burst_bound exceeds burst when burst / N < unit.
 * Rounding: bounds are exact integers, rounded up once per distinct divisor (so a converged
 * view reports amount exactly, a view with k distinct divisors at most k - 1 over the exact
 * rational sum); a member whose divisor is unknown (no metadata yet, undecodable, unarmed) or
 * does not fit the SHARE_GROUPS_MAX table is bounded as dividing by 1: it may admit the whole
 * amount, and converged is false. The whole-nanosecond floor of T_s is plain gcra's own and is
 * not counted (it is below one part in T_s, i.e. in a million for any period of a millisecond
 * per unit or more).
 *
 * Partition hold (SPEC §6). A replica cut off from most of the fleet sees its peers die and
 * would arm solo with the whole amount, over-admitting N-fold for as long as the cut lasts.
 * So a drop of N to at most half of the largest N seen within partition_hold keeps dividing
 * by that largest N, in state held, until the drop has lasted partition_hold. Graceful leaves
 * are not a drop: with L(t) the leaves reported so far, the hold compares 2 x N(now) against
 * max over the window of (N(s) + L(s)) - L(now), i.e. the largest N seen, less the members
 * that left since. (A leave reported for a member this view had already declared dead
 * discounts one member too many for one window: the hold is then more lenient by one member.)
 * The windowed maximum is a monotone deque (values strictly decreasing from
 * the front, each stamped with when it was last in effect), so the hold is stateless beyond
 * it: held iff the window's peak is at least twice the live count, and it ends exactly
 * partition_hold after the peak was last seen. A drop in two steps holds on the older peak,
 * then on the newer one. If the deque fills (SHARE_PEAKS_MAX distinct falling values within
 * one window), the newest entry is stretched instead of a new one added: its value is larger
 * than the one being added, so the hold can only last longer, never shorter.
 *
 * Arming. Until membership has joined (or found no seed within join_timeout and gone solo)
 * the replica does not know N at all; share_limiter says SHARE_EUNARMED and posture.fail
 * decides. Once armed it never unarms: a later partition is what the hold is for.
 *
 * A restart's memory (share_remember, issue 35). A replica that restarts with state knows how
 * many peers it had (membership keeps them in the state directory). A view that holds only some
 * of them may be an island: the rest may be a fleet of their own, each side dividing the whole
 * amount by what it sees, each converged on itself (a rolling restart that took every static
 * seed down at once did exactly that: 2.3x the amount for half a minute). So until every
 * remembered peer is in the view in some state (share_view_t.unheard counts the others), or
 * until the detection window of a fleet that size has passed (a peer that died meanwhile is
 * never heard of again), each one not found counts in N, as a suspect does, with an unknown
 * divisor in the bounds: the replica under-admits a little for a few seconds in an ordinary
 * restart, and never claims the fleet's bound from part of it.
 *
 * The divisor gossiped to peers (share_meta_encode) is the one in use: the live count (and a
 * restart's unheard peers) when armed, the held peak when held, 0 when unarmed. Six bytes,
 * versioned (share.h).
 *
 * detect_within_s (share_detect_within_ns). A dead peer's share goes unused while survivors
 * still count it, i.e. until each survivor has marked it dead. SWIM (SPEC §7) probes members in
 * a shuffled round robin, one per probe interval I; with n members a survivor's gap between
 * two probes of the same member is at most 2(n - 1) - 1 intervals (probed first in one round,
 * last in the next). The failed probe (direct timeout, then indirect probes) ends with the
 * interval: suspect after at most (2n - 2) x I; above 32 members (retry_above) the failed
 * member is probed twice more at once, an interval each, and suspected after at most
 * (2n - 2 + 2) x I (one dead member at a time). A suspicion then times out after
 * S_min = suspicion_mult x max(1, log10 n) x I when the cluster is too small to confirm it
 * (Lifeguard, as memberlist: k = suspicion_mult - 2 confirmations are expected, and none when
 * n - 2 < k), and otherwise after at most S_max = suspicion_max_mult x S_min (confirmations
 * from other survivors only shorten it), whether the survivor suspected by its own probe or
 * first heard of it by gossip. So every healthy survivor has dropped the dead peer within
 *
 *     detect_within = (2n - 2 + (n > 32 ? 2 : 0)) x I + (n - 2 < suspicion_mult - 2 ? S_min :
 * S_max)
 *
 * With the defaults (I = 1 s, 4, 6): n = 3 -> 4 s + 4 s = 8 s; n = 4 -> 6 s + 24 s = 30 s;
 * n = 100 -> 200 s + 48 s. A worst case, not the typical: with many survivors someone probes
 * the dead member within about one interval and the confirmations bring the timeout down to
 * S_min. A survivor whose own Lifeguard health is degraded stretches its probe interval (up
 * to 8x); the bound assumes healthy survivors.
 */
#include "share.h"

#include <math.h>
#include <string.h>

void share_config_default(share_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->partition_hold_ns = 60 * RA_NS_PER_S;
    cfg->join_timeout_ns = 5 * RA_NS_PER_S;
    cfg->swim.probe_interval_ns = RA_NS_PER_S;
    cfg->swim.suspicion_mult = 4;
    cfg->swim.suspicion_max_mult = 6;
    cfg->swim.probe_retries = 2;
    cfg->swim.retry_above = 32;
}

int share_init(share_core_t *core, const share_config_t *cfg, int64_t now, tt_err_t *err)
{
    memset(core, 0, sizeof(*core));
    if (cfg->partition_hold_ns < 0)
        return tt_err_set(err, SHARE_ECONFIG, "partition_hold_ns", "negative");
    if (cfg->join_timeout_ns < 0)
        return tt_err_set(err, SHARE_ECONFIG, "join_timeout_ns", "negative");
    if (cfg->swim.probe_interval_ns <= 0)
        return tt_err_set(err, SHARE_ECONFIG, "swim.probe_interval_ns", "not positive");
    if (cfg->swim.suspicion_mult == 0)
        return tt_err_set(err, SHARE_ECONFIG, "swim.suspicion_mult", "0");
    if (cfg->swim.suspicion_max_mult == 0)
        return tt_err_set(err, SHARE_ECONFIG, "swim.suspicion_max_mult", "0");
    core->cfg = *cfg;
    core->started_ns = now;
    core->live = 1;
    core->unknown = 1; /* self, unarmed */
    return 0;
}

const char *share_state_name(share_state_t s)
{
    static const char *const names[] = {"unarmed", "armed", "held"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

const char *share_strerror(int err)
{
    return err == 0 ? "ok" : tt_err_message(err);
}

/* ---- metadata ------------------------------------------------------------------------------ */

int share_meta_encode(const share_core_t *core, uint8_t *buf, size_t size)
{
    if (size < SHARE_META_LEN)
        return SHARE_EMETA;
    uint32_t d = core->divisor;
    buf[0] = SHARE_META_VERSION;
    buf[1] = (uint8_t)core->state;
    buf[2] = (uint8_t)(d >> 24);
    buf[3] = (uint8_t)(d >> 16);
    buf[4] = (uint8_t)(d >> 8);
    buf[5] = (uint8_t)d;
    return SHARE_META_LEN;
}

int share_meta_decode(const uint8_t *buf, size_t len, share_meta_t *out, tt_err_t *err)
{
    memset(out, 0, sizeof(*out));
    if (!buf || len < SHARE_META_LEN)
        return tt_err_set(err, SHARE_EMETA, "", "%zu bytes, shorter than 6", buf ? len : 0);
    if (buf[0] < SHARE_META_VERSION)
        return tt_err_set(err, SHARE_EMETA, "version", "0");
    if (buf[1] > SHARE_HELD)
        return tt_err_set(err, SHARE_EMETA, "state", "%u, not unarmed (0), armed (1) or held (2)",
                          buf[1]);
    uint32_t d = (uint32_t)buf[2] << 24 | (uint32_t)buf[3] << 16 | (uint32_t)buf[4] << 8 | buf[5];
    share_state_t st = (share_state_t)buf[1];
    if (st == SHARE_UNARMED && d != 0)
        return tt_err_set(err, SHARE_EMETA, "divisor", "%u, nonzero while unarmed", d);
    if (st != SHARE_UNARMED && d == 0)
        return tt_err_set(err, SHARE_EMETA, "divisor", "0 while armed or held");
    if (d > SHARE_DIVISOR_MAX)
        return tt_err_set(err, SHARE_EMETA, "divisor", "%u, above 1000000", d);
    out->state = st;
    out->divisor = d;
    return 0;
}

/* ---- the view ------------------------------------------------------------------------------ */

/* Counts one live member's divisor into the ascending group table (0 means unknown); `cap`
 * leaves self a slot a peer cannot take. */
static void group_add(share_core_t *c, uint32_t divisor, uint32_t cap)
{
    if (divisor == 0) {
        c->unknown++;
        return;
    }
    uint32_t i = 0;
    while (i < c->ngroups && c->groups[i].divisor < divisor)
        i++;
    if (i < c->ngroups && c->groups[i].divisor == divisor) {
        c->groups[i].count++;
        return;
    }
    if (c->ngroups >= cap) { /* bounded as 1, like an unknown divisor */
        c->unknown++;
        return;
    }
    memmove(&c->groups[i + 1], &c->groups[i], (c->ngroups - i) * sizeof(c->groups[0]));
    c->groups[i] = (share_group_t){.divisor = divisor, .count = 1};
    c->ngroups++;
}

static bool member_is_live(const share_member_t *m)
{
    return m->state == SHARE_MEMBER_ALIVE || m->state == SHARE_MEMBER_SUSPECT;
}

/* Reads the live count and the peers' divisors out of a view. */
static void read_view(share_core_t *c, const share_view_t *v)
{
    c->live = 1; /* self, whatever its own entry says */
    c->ngroups = 0;
    c->unknown = 0;
    for (size_t i = 0; i < v->count; i++) {
        const share_member_t *m = &v->members[i];
        if (m->is_self || !member_is_live(m))
            continue;
        if (c->live < SHARE_DIVISOR_MAX)
            c->live++;
        share_meta_t meta;
        bool ok = share_meta_decode(m->meta, m->meta_len, &meta, NULL) == 0;
        group_add(c, ok ? meta.divisor : 0, SHARE_GROUPS_MAX - 1);
    }
}

/* ---- the partition hold -------------------------------------------------------------------- */

/* Records that `value` was in effect at `now`: the sliding-window maximum's push. */
static void peak_push(share_core_t *c, uint64_t value, int64_t now)
{
    while (c->npeaks > 0 && c->peaks[c->npeaks - 1].value <= value)
        c->npeaks--;
    if (c->npeaks == SHARE_PEAKS_MAX) { /* stretch the newest (larger) entry: holds longer */
        c->peaks[c->npeaks - 1].seen_ns = now;
        return;
    }
    c->peaks[c->npeaks++] = (share_peak_t){.value = value, .seen_ns = now};
}

/* Forgets the peaks last seen partition_hold ago or earlier. The newest entry (the current
 * value, just pushed) always stays. */
static void peak_expire(share_core_t *c, int64_t now)
{
    uint32_t drop = 0;
    while (drop + 1 < c->npeaks && now - c->peaks[drop].seen_ns >= c->cfg.partition_hold_ns)
        drop++;
    if (drop) {
        memmove(c->peaks, c->peaks + drop, (c->npeaks - drop) * sizeof(c->peaks[0]));
        c->npeaks -= drop;
    }
}

void share_update(share_core_t *c, const share_view_t *v, int64_t now)
{
    if (c->npeaks && now < c->peaks[c->npeaks - 1].seen_ns)
        now = c->peaks[c->npeaks - 1].seen_ns; /* the wall clock stepped back: time stands */
    read_view(c, v);
    if (v->left_total > c->left_total)
        c->left_total = v->left_total; /* monotone: a smaller figure is a shell's mistake */

    /* The previous value was in effect until now; then the current one starts. */
    uint64_t value = c->live + c->left_total;
    if (c->have_prev)
        peak_push(c, c->prev_value, now);
    peak_push(c, value, now);
    c->prev_value = value;
    c->have_prev = true;
    peak_expire(c, now);

    if (c->state == SHARE_UNARMED && (v->joined || now - c->started_ns >= c->cfg.join_timeout_ns))
        c->state = SHARE_ARMED;
    /* a restart's remembered members not found yet: in N, their divisors unknown */
    c->unheard =
        now < c->recall_until ? (v->unheard < c->remembered ? v->unheard : c->remembered) : 0;
    c->unknown += c->unheard;
    if (c->state == SHARE_UNARMED) {
        c->divisor = 0;
        c->unknown++; /* self, dividing by nothing yet */
        return;
    }
    uint64_t peak = c->peaks[0].value - c->left_total; /* >= live: value is in the window */
    uint64_t counted = (uint64_t)c->live + c->unheard;
    if (c->cfg.partition_hold_ns > 0 && 2 * (uint64_t)c->live <= peak) {
        c->state = SHARE_HELD;
        if (peak < counted)
            peak = counted;
        c->divisor = peak > SHARE_DIVISOR_MAX ? SHARE_DIVISOR_MAX : (uint32_t)peak;
    } else {
        c->state = SHARE_ARMED;
        c->divisor = counted > SHARE_DIVISOR_MAX ? SHARE_DIVISOR_MAX : (uint32_t)counted;
    }
    group_add(c, c->divisor, SHARE_GROUPS_MAX); /* self, with the divisor it really uses */
}

int64_t share_next_deadline(const share_core_t *c)
{
    int64_t t = INT64_MAX;
    if (c->state == SHARE_UNARMED)
        t = c->started_ns + c->cfg.join_timeout_ns;
    else if (c->state == SHARE_HELD)
        t = c->peaks[0].seen_ns + c->cfg.partition_hold_ns;
    if (c->unheard && c->recall_until < t)
        t = c->recall_until;
    return t;
}

void share_remember(share_core_t *c, uint32_t members, int64_t now)
{
    c->remembered = members > SHARE_DIVISOR_MAX ? SHARE_DIVISOR_MAX : members;
    c->recall_until = members ? now + share_detect_within_ns(&c->cfg.swim, members + 1, 0) : now;
}

/* ---- limits and disclosure ----------------------------------------------------------------- */

/* The limits this store divides: gcra, and envoy_window (the gRPC door's envoy rules), both of
 * which have an effective-rate form (ra_limiter_effective). */
static bool is_share_gcra(const cfg_limit_t *l)
{
    return l->store == CFG_STORE_SHARE && cfg_type_is_rate(l->type) &&
           ((l->limiter.algorithm == RA_GCRA && l->limiter.emission_ns > 0) ||
            (l->limiter.algorithm == RA_ENVOY_WINDOW && l->limiter.period_ns > 0));
}

int share_limiter(const share_core_t *c, const cfg_limit_t *limit, ra_limiter_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!is_share_gcra(limit))
        return SHARE_ELIMIT;
    if (c->state == SHARE_UNARMED)
        return SHARE_EUNARMED;
    return ra_limiter_effective(&limit->limiter, 1, c->divisor, cfg_type_unit(limit->type), out);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t s;
    return __builtin_add_overflow(a, b, &s) ? INT64_MAX : s;
}

/* ceil(count x a / d) for a >= 0, count, d >= 1, saturating. */
static int64_t ceil_share(uint32_t count, int64_t a, uint32_t d)
{
    unsigned __int128 q = ((unsigned __int128)count * (uint64_t)a + d - 1) / d;
    return q > INT64_MAX ? INT64_MAX : (int64_t)q;
}

/* The bounds' terms for `count` members dividing by `d`. */
static void bound_group(const cfg_limit_t *l, uint32_t count, uint32_t d, int64_t *sustained,
                        int64_t *burst)
{
    int64_t unit = cfg_type_unit(l->type);
    int64_t each = ceil_share(1, l->burst, d);
    if (each < unit)
        each = unit;
    *sustained = sat_add(*sustained, ceil_share(count, l->amount, d));
    *burst = sat_add(*burst, ceil_share(count, each, 1));
}

void share_set_health(share_core_t *c, int health)
{
    c->health = health < 0 ? 0 : health;
}

int64_t share_detect_within_ns(const share_swim_timing_t *t, uint32_t live, int health)
{
    double n = live < 2 ? 2 : live; /* alone there is no peer to lose; report the pair's */
    /* Lifeguard: a replica with score h probes every (h + 1) intervals, at most 8 (swim.c) */
    double slow = health < 0 ? 1 : health > 7 ? 8 : health + 1;
    double scale = log10(n) > 1 ? log10(n) : 1;
    double suspicion = (double)t->suspicion_mult * scale;
    if (n - 2 >= (double)t->suspicion_mult - 2) /* confirmations expected: up to the max */
        suspicion *= t->suspicion_max_mult;
    double probes = 2 * n - 2 + (n > t->retry_above ? t->probe_retries : 0);
    double ns = ceil((probes * slow + suspicion) * (double)t->probe_interval_ns);
    return ns >= (double)INT64_MAX ? INT64_MAX : (int64_t)ns;
}

int share_disclose(const share_core_t *c, const cfg_limit_t *limit, share_disclosure_t *out)
{
    memset(out, 0, sizeof(*out));
    if (!is_share_gcra(limit))
        return SHARE_ELIMIT;
    out->state = c->state;
    out->n = c->divisor;
    out->live = c->live;
    out->divisors_unknown = c->unknown;
    out->detect_within_s = ra_ceil_s(share_detect_within_ns(&c->cfg.swim, c->live, c->health));

    if (c->divisor != 0) {
        ra_limiter_t eff;
        if (share_limiter(c, limit, &eff) == 0) {
            out->local_share = limit->amount / c->divisor;
            out->local_burst =
                eff.algorithm == RA_ENVOY_WINDOW ? eff.amount : eff.tolerance_ns / eff.emission_ns;
        }
    }
    /* Self is in the groups with the divisor it uses, the peers with what they gossip. */
    int64_t sustained = 0, burst = 0;
    for (uint32_t i = 0; i < c->ngroups; i++) {
        const share_group_t *g = &c->groups[i];
        bound_group(limit, g->count, g->divisor, &sustained, &burst);
    }
    if (c->ngroups) {
        out->divisor_min = c->groups[0].divisor;
        out->divisor_max = c->groups[c->ngroups - 1].divisor;
    }
    if (c->unknown)
        bound_group(limit, c->unknown, 1, &sustained, &burst);
    out->sustained_bound = sustained;
    out->burst_bound = burst;
    out->unheard = c->unheard;
    out->converged = c->state == SHARE_ARMED && out->divisors_unknown == 0 &&
                     out->divisor_min == c->live && out->divisor_max == c->live;
    return 0;
}
