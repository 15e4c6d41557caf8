/* The share core driven by synthetic membership views. */
#include <criterion/criterion.h>
#include <string.h>

#include "limit_helper.h"
#include "share.h"

#define S RA_NS_PER_S
#define T0 (1700000000 * S)
#define MAXM 64

/* A synthetic view: member 0 is self, the rest are peers with a state and a divisor. */
typedef struct fake_view {
    share_member_t m[MAXM];
    uint8_t meta[MAXM][SHARE_META_LEN];
    share_view_t v;
} fake_view_t;

static void peer_set(fake_view_t *f, size_t i, share_member_state_t st, share_state_t pst,
                     uint32_t divisor)
{
    share_core_t fake;
    memset(&fake, 0, sizeof(fake));
    fake.state = pst;
    fake.divisor = divisor;
    share_meta_encode(&fake, f->meta[i], SHARE_META_LEN);
    f->m[i] = (share_member_t){.state = st, .meta = f->meta[i], .meta_len = SHARE_META_LEN};
    if (i >= f->v.count)
        f->v.count = i + 1;
}

/* Self plus `peers` alive peers that all divide by `divisor` (0: unarmed). */
static void view_init(fake_view_t *f, size_t peers, uint32_t divisor)
{
    memset(f, 0, sizeof(*f));
    f->v.members = f->m;
    f->v.joined = true;
    f->m[0] = (share_member_t){.state = SHARE_MEMBER_ALIVE, .is_self = true};
    f->v.count = 1;
    for (size_t i = 1; i <= peers; i++)
        peer_set(f, i, SHARE_MEMBER_ALIVE, divisor ? SHARE_ARMED : SHARE_UNARMED, divisor);
}

static void set_state(fake_view_t *f, size_t from, size_t to, share_member_state_t st)
{
    for (size_t i = from; i < to; i++)
        f->m[i].state = st;
}

static share_core_t core_at(int64_t hold, int64_t now)
{
    share_config_t cfg;
    share_config_default(&cfg);
    cfg.partition_hold_ns = hold;
    share_core_t c;
    cr_assert_eq(share_init(&c, &cfg, now, NULL), 0);
    return c;
}

/* A core that has seen `f` once, at T0. */
static share_core_t core_seeing(const fake_view_t *f, int64_t hold)
{
    share_core_t c = core_at(hold, T0);
    share_update(&c, &f->v, T0);
    return c;
}

static share_disclosure_t disclosed(const share_core_t *c, const cfg_limit_t *l)
{
    share_disclosure_t d;
    cr_assert_eq(share_disclose(c, l, &d), 0);
    return d;
}

/* ---- N -------------------------------------------------------------------------------------- */

Test(share, n_counts_alive_and_suspect_members_and_self)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    f.m[2].state = SHARE_MEMBER_SUSPECT;
    f.m[3].state = SHARE_MEMBER_DEAD;
    f.m[4].state = SHARE_MEMBER_LEFT;
    share_core_t c = core_seeing(&f, 0);
    cr_assert_eq(c.live, 4); /* self, 1, 2 (suspect), 5 */
    cr_assert_eq(share_divisor(&c), 4);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
}

Test(share, self_counts_once_whatever_its_own_entry_says)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    f.m[0].state = SHARE_MEMBER_DEAD;
    share_core_t c = core_seeing(&f, 0);
    cr_assert_eq(share_divisor(&c), 3);
}

Test(share, a_change_of_n_changes_the_limiter_on_the_next_call)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_at(0, T0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    ra_limiter_t eff, want;
    share_update(&c, &f.v, T0);
    cr_assert_eq(share_limiter(&c, &l, &eff), 0);
    cr_assert_eq(ra_limiter_effective(&l.limiter, 1, 3, 1, &want), 0);
    cr_assert_eq(memcmp(&eff, &want, sizeof(eff)), 0);
    cr_assert_eq(eff.emission_ns, 600000000); /* 300/min over 3: one per 600 ms */

    f.m[2].state = SHARE_MEMBER_DEAD;
    share_update(&c, &f.v, T0 + S);
    cr_assert_eq(share_limiter(&c, &l, &eff), 0);
    cr_assert_eq(eff.emission_ns, 400000000);
    cr_assert_eq(eff.tolerance_ns, l.limiter.tolerance_ns, "tau itself does not change");
}

Test(share, tpm_limits_keep_one_reserve_cap_fitting)
{
    fake_view_t f;
    view_init(&f, 9, 10);
    share_core_t c = core_seeing(&f, 0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_TPM, 100000, 60 * S, 100000);
    ra_limiter_t eff;
    cr_assert_eq(share_limiter(&c, &l, &eff), 0);
    cr_assert_eq(eff.tolerance_ns, eff.emission_ns * RA_RESERVE_CAP);
    cr_assert(ra_step(&eff, 0, T0, RA_RESERVE_CAP).admit);
}

Test(share, a_limit_not_on_store_share_has_no_share_limiter)
{
    share_core_t c = core_at(0, T0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    l.store = CFG_STORE_LOCAL;
    ra_limiter_t eff;
    cr_assert_eq(share_limiter(&c, &l, &eff), SHARE_ELIMIT);
    share_disclosure_t d;
    cr_assert_eq(share_disclose(&c, &l, &d), SHARE_ELIMIT);
}

/* ---- arming --------------------------------------------------------------------------------- */

Test(share, stays_unarmed_until_membership_joins)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    f.v.joined = false;
    share_core_t c = core_at(60 * S, T0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    ra_limiter_t eff;
    share_update(&c, &f.v, T0 + S);
    cr_assert_eq(share_state(&c), SHARE_UNARMED);
    cr_assert_eq(share_divisor(&c), 0);
    cr_assert_eq(share_limiter(&c, &l, &eff), SHARE_EUNARMED);
    cr_assert_eq(share_next_deadline(&c), T0 + 5 * S, "the join timeout");

    f.v.joined = true;
    share_update(&c, &f.v, T0 + 2 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_limiter(&c, &l, &eff), 0);
    cr_assert_eq(share_next_deadline(&c), INT64_MAX);
}

Test(share, arms_solo_after_the_join_timeout_without_a_seed)
{
    fake_view_t f;
    view_init(&f, 0, 0);
    f.v.joined = false;
    share_core_t c = core_at(60 * S, T0);
    share_update(&c, &f.v, T0 + 5 * S - 1);
    cr_assert_eq(share_state(&c), SHARE_UNARMED);
    share_update(&c, &f.v, T0 + 5 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 1);
}

Test(share, once_armed_never_unarms)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 0);
    f.v.joined = false; /* a rejoin in progress */
    share_update(&c, &f.v, T0 + S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
}

/* ---- partition hold ------------------------------------------------------------------------- */

Test(share, a_partition_holds_the_largest_n_for_partition_hold)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    share_core_t c = core_seeing(&f, 60 * S);
    cr_assert_eq(share_divisor(&c), 6);

    set_state(&f, 3, 6, SHARE_MEMBER_DEAD); /* 6 -> 3: half */
    share_update(&c, &f.v, T0 + 10 * S);
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_divisor(&c), 6);
    cr_assert_eq(share_next_deadline(&c), T0 + 70 * S);

    share_update(&c, &f.v, T0 + 70 * S - 1);
    cr_assert_eq(share_state(&c), SHARE_HELD);
    share_update(&c, &f.v, T0 + 70 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED, "the drop has lasted partition_hold");
    cr_assert_eq(share_divisor(&c), 3);
    share_update(&c, &f.v, T0 + 71 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED, "and does not come back");
}

Test(share, losing_less_than_half_does_not_hold)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 4, 6, SHARE_MEMBER_DEAD); /* 6 -> 4 */
    share_update(&c, &f.v, T0 + S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 4);
}

Test(share, a_cut_off_replica_of_three_holds_and_heals)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 1, 3, SHARE_MEMBER_DEAD);
    share_update(&c, &f.v, T0 + 20 * S);
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_divisor(&c), 3);

    set_state(&f, 1, 3, SHARE_MEMBER_ALIVE); /* the link is back */
    share_update(&c, &f.v, T0 + 30 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 3);
}

Test(share, a_rolling_update_of_graceful_leaves_never_holds)
{
    fake_view_t f;
    view_init(&f, 1, 2); /* two replicas: one leave halves N */
    share_core_t c = core_seeing(&f, 60 * S);
    int64_t t = T0;
    for (int round = 0; round < 3; round++) {
        f.m[1].state = SHARE_MEMBER_LEFT;
        f.v.left_total++;
        share_update(&c, &f.v, t += S);
        cr_assert_eq(share_state(&c), SHARE_ARMED, "round %d: leave", round);
        cr_assert_eq(share_divisor(&c), 1);
        f.m[1].state = SHARE_MEMBER_ALIVE; /* the new pod joins */
        share_update(&c, &f.v, t += 5 * S);
        cr_assert_eq(share_divisor(&c), 2);
    }
}

Test(share, two_leaves_before_the_replacements_join_do_not_hold)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    f.m[1].state = SHARE_MEMBER_LEFT;
    f.v.left_total = 1;
    share_update(&c, &f.v, T0 + S);
    f.m[2].state = SHARE_MEMBER_LEFT;
    f.v.left_total = 2;
    share_update(&c, &f.v, T0 + 2 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 1);
}

Test(share, a_kill_beside_a_leave_still_counts_as_a_drop)
{
    fake_view_t f;
    view_init(&f, 3, 4);
    share_core_t c = core_seeing(&f, 60 * S);
    f.m[1].state = SHARE_MEMBER_LEFT; /* 4 -> 3 gracefully: the reference becomes 3 */
    f.v.left_total = 1;
    share_update(&c, &f.v, T0 + S);
    f.m[2].state = SHARE_MEMBER_DEAD; /* 3 -> 2 by failure: not half of 3 */
    share_update(&c, &f.v, T0 + 2 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    f.m[3].state = SHARE_MEMBER_DEAD; /* 3 -> 1: held on 3, not on the 4 of before the leave */
    share_update(&c, &f.v, T0 + 3 * S);
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_divisor(&c), 3);
}

Test(share, partition_hold_zero_turns_the_hold_off)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    share_core_t c = core_seeing(&f, 0);
    set_state(&f, 1, 6, SHARE_MEMBER_DEAD);
    share_update(&c, &f.v, T0 + S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 1);
}

Test(share, a_drop_in_two_steps_holds_on_the_older_peak_then_the_newer)
{
    fake_view_t f;
    view_init(&f, 9, 10);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 4, 10, SHARE_MEMBER_DEAD); /* 10 -> 4 at +10 s */
    share_update(&c, &f.v, T0 + 10 * S);
    cr_assert_eq(share_divisor(&c), 10);
    set_state(&f, 1, 4, SHARE_MEMBER_DEAD); /* 4 -> 1 at +40 s */
    share_update(&c, &f.v, T0 + 40 * S);
    cr_assert_eq(share_divisor(&c), 10);
    share_update(&c, &f.v, T0 + 70 * S); /* the 10 expires; the 4 was seen at +40 s */
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_divisor(&c), 4);
    cr_assert_eq(share_next_deadline(&c), T0 + 100 * S);
    share_update(&c, &f.v, T0 + 100 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
    cr_assert_eq(share_divisor(&c), 1);
}

Test(share, a_peak_seen_long_ago_does_not_hold)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 3, 6, SHARE_MEMBER_DEAD);
    share_update(&c, &f.v, T0 + 61 * S); /* the 6 was in effect until now: still a drop */
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_next_deadline(&c), T0 + 121 * S);
}

Test(share, a_full_peak_table_only_makes_the_hold_last_longer)
{
    fake_view_t f;
    view_init(&f, MAXM - 1, MAXM);
    share_core_t c = core_seeing(&f, 60 * S);
    /* MAXM -> 1, one member a step, every 100 ms: more falling values than the table holds */
    int64_t t = T0;
    for (size_t i = MAXM - 1; i >= 1; i--) {
        f.m[i].state = SHARE_MEMBER_DEAD;
        share_update(&c, &f.v, t += S / 10);
        cr_assert_leq(c.npeaks, SHARE_PEAKS_MAX);
    }
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_divisor(&c), MAXM, "the first peak is never lost");
    share_update(&c, &f.v, T0 + 60 * S);
    cr_assert_eq(share_state(&c), SHARE_HELD, "still holding on a later peak");
    cr_assert_geq(share_divisor(&c), 2);
}

/* ---- bounds --------------------------------------------------------------------------------- */

Test(share, a_converged_fleet_discloses_exactly_amount_and_burst)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.state, SHARE_ARMED);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(d.live, 3);
    cr_assert_eq(d.local_share, 100);
    cr_assert_eq(d.local_burst, 20);
    cr_assert_eq(d.divisor_min, 3);
    cr_assert_eq(d.divisor_max, 3);
    cr_assert_eq(d.divisors_unknown, 0);
    cr_assert_eq(d.sustained_bound, 300);
    cr_assert_eq(d.burst_bound, 60);
    cr_assert(d.converged);
}

Test(share, an_indivisible_amount_rounds_up_once_per_divisor)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 100, 60 * S, 10);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.local_share, 33, "rounded down: what this replica is sure to get");
    cr_assert_eq(d.sustained_bound, 100, "3 x 100/3 in one group: exact");
    cr_assert_eq(d.burst_bound, 12, "3 x ceil(10/3)");
    cr_assert_eq(d.local_burst, 3, "floor(tau_s / T_s): 10/3 admitted at once, rounded down");
}

Test(share, lagging_divisors_are_summed_and_the_view_is_not_converged)
{
    fake_view_t f;
    view_init(&f, 3, 4);
    f.m[3].state = SHARE_MEMBER_DEAD; /* we see 3 live; one peer still divides by 4 */
    peer_set(&f, 2, SHARE_MEMBER_ALIVE, SHARE_ARMED, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 100, 60 * S, 100);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(d.divisor_min, 3);
    cr_assert_eq(d.divisor_max, 4);
    cr_assert_eq(d.sustained_bound, 67 + 25, "ceil(2 x 100/3) + 100/4");
    cr_assert_eq(d.burst_bound, 2 * 34 + 25);
    cr_assert_not(d.converged);
}

Test(share, an_unknown_divisor_is_bounded_as_the_whole_amount)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    f.m[2].meta = NULL; /* no metadata gossiped yet */
    f.m[2].meta_len = 0;
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.divisors_unknown, 1);
    cr_assert_eq(d.sustained_bound, 200 + 300);
    cr_assert_eq(d.burst_bound, 40 + 60);
    cr_assert_not(d.converged);
}

/* ---- a restart's memory of the fleet (share_remember, issue 35) ------------------------------ */

/* A core restarted at T0 remembering `remembered` peers, that has seen `f` with `unheard` of
 * them missing. */
static share_core_t restarted(fake_view_t *f, uint32_t remembered, uint32_t unheard)
{
    share_core_t c = core_at(60 * S, T0);
    share_remember(&c, remembered, T0);
    f->v.unheard = unheard;
    share_update(&c, &f->v, T0);
    return c;
}

/* A replica restarted with state knew 9 peers; it has found 4 of them (and itself): the 5 it has
 * not found may be a fleet of their own beside it. They count in N, with unknown divisors, and
 * the view claims nothing of the fleet's bound until they are found. */
Test(share, members_known_before_a_restart_and_not_found_count_in_n_and_keep_the_view_open)
{
    fake_view_t f;
    view_init(&f, 4, 5);
    share_core_t c = restarted(&f, 9, 5);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 1000, 60 * S, 100);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.state, SHARE_ARMED);
    cr_assert_eq(d.live, 5);
    cr_assert_eq(d.n, 10, "the five not found count: dividing by 10, not 5");
    cr_assert_eq(d.unheard, 5);
    cr_assert_eq(d.divisors_unknown, 5);
    cr_assert_not(d.converged, "a view short of the fleet it left is not the fleet's");
    cr_assert_eq(d.sustained_bound, 4 * 200 + 100 + 5 * 1000,
                 "peers at 5, self at 10, the five unknown bounded as the whole amount each");
    cr_assert_eq(share_next_deadline(&c), T0 + share_detect_within_ns(&c.cfg.swim, 10, 0));

    /* found: the view is the fleet's again */
    f.v.unheard = 0;
    for (size_t i = 5; i <= 9; i++)
        peer_set(&f, i, SHARE_MEMBER_ALIVE, SHARE_ARMED, 10);
    for (size_t i = 1; i <= 4; i++)
        peer_set(&f, i, SHARE_MEMBER_ALIVE, SHARE_ARMED, 10);
    share_update(&c, &f.v, T0 + S);
    d = disclosed(&c, &l);
    cr_assert_eq(d.n, 10);
    cr_assert_eq(d.unheard, 0);
    cr_assert(d.converged);
    cr_assert_eq(d.sustained_bound, 1000);
    cr_assert_eq(share_next_deadline(&c), INT64_MAX);
}

/* Members that are gone for good (dead before the restart, not seen since) are waited for no
 * longer than failure detection would take to drop them. */
Test(share, members_not_found_are_waited_for_no_longer_than_the_detection_window)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = restarted(&f, 4, 2);
    cr_assert_eq(share_divisor(&c), 5);
    int64_t window = share_detect_within_ns(&c.cfg.swim, 5, 0);
    share_update(&c, &f.v, T0 + window - 1);
    cr_assert_eq(share_divisor(&c), 5);
    share_update(&c, &f.v, T0 + window);
    cr_assert_eq(share_divisor(&c), 3);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.unheard, 0);
    cr_assert(d.converged);
}

/* A view's figure above what this replica remembered is a shell's mistake: it counts no more. */
Test(share, unheard_is_at_most_what_was_remembered_and_nothing_without_a_restart)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    f.v.unheard = 7;
    share_core_t c = core_seeing(&f, 60 * S); /* nothing remembered */
    cr_assert_eq(share_divisor(&c), 3);
    share_core_t r = restarted(&f, 2, 7);
    cr_assert_eq(share_divisor(&r), 5);
}

Test(share, an_unarmed_replica_discloses_itself_as_unknown)
{
    share_core_t c = core_at(60 * S, T0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.state, SHARE_UNARMED);
    cr_assert_eq(d.n, 0);
    cr_assert_eq(d.local_share, 0);
    cr_assert_eq(d.divisors_unknown, 1);
    cr_assert_eq(d.sustained_bound, 300);
    cr_assert_not(d.converged);
}

Test(share, the_burst_floor_shows_in_the_burst_bound)
{
    fake_view_t f;
    view_init(&f, 9, 10);
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_TPM, 1000000, 60 * S, 100000);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.burst_bound, 10 * RA_RESERVE_CAP, "100000/10 < 16384: the unit floor wins");
    cr_assert_eq(d.sustained_bound, 1000000);
    cr_assert_eq(d.local_burst, RA_RESERVE_CAP);
    cr_assert(d.converged);
}

Test(share, a_held_replica_is_not_converged_and_bounds_its_held_share)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 1, 3, SHARE_MEMBER_DEAD);
    share_update(&c, &f.v, T0 + S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.state, SHARE_HELD);
    cr_assert_eq(d.n, 3);
    cr_assert_eq(d.live, 1);
    cr_assert_eq(d.local_share, 100);
    cr_assert_eq(d.sustained_bound, 100, "its view holds itself alone, dividing by 3");
    cr_assert_not(d.converged);
}

Test(share, bounds_saturate_instead_of_wrapping)
{
    fake_view_t f;
    view_init(&f, MAXM - 1, 0); /* all unarmed: each bounded as the whole amount */
    share_core_t c = core_seeing(&f, 60 * S);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, INT64_MAX / 2, INT64_MAX, INT64_MAX / 4);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.sustained_bound, INT64_MAX);
}

Test(share, many_distinct_divisors_overflow_into_the_unknown_count)
{
    fake_view_t f;
    view_init(&f, 40, 0);
    for (size_t i = 1; i <= 40; i++)
        peer_set(&f, i, SHARE_MEMBER_ALIVE, SHARE_ARMED, (uint32_t)(100 + i));
    share_core_t c = core_seeing(&f, 60 * S);
    cr_assert_eq(c.ngroups, SHARE_GROUPS_MAX);
    cr_assert_eq(c.unknown, 40 - (SHARE_GROUPS_MAX - 1));
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    share_disclosure_t d = disclosed(&c, &l);
    cr_assert_eq(d.divisor_min, 41, "self");
    cr_assert_eq(d.divisor_max, 115);
    cr_assert_geq(d.sustained_bound, 300 * (40 - 15), "the overflow is bounded as 1 each");
}

/* ---- detect_within -------------------------------------------------------------------------- */

Test(share, detect_within_follows_the_swim_timings)
{
    share_config_t cfg;
    share_config_default(&cfg);
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 3, 0), 8 * S, "4 probe intervals + 4 s (min)");
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 4, 0), 30 * S, "6 + 24: confirmations expected");
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 10, 0), 42 * S, "18 + 24");
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 100, 0), 248 * S, "198 + 2 retries + 6 x 4 x 2");
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 1, 0), 6 * S, "alone: as a pair");
    cfg.swim.probe_interval_ns = S / 2;
    cr_assert_eq(share_detect_within_ns(&cfg.swim, 3, 0), 4 * S);
}

/* The suspicion window disclosed must hold for this replica as it is: a degraded Lifeguard
 * health score h makes its probes (h + 1) times slower (membership/swim.c), so it keeps counting a
 * dead peer that much longer before it even suspects it. Before, detect_within_s assumed a
 * healthy replica and understated the window whenever the score rose. */
Test(share, a_degraded_health_score_stretches_the_disclosed_detect_within)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    share_core_t c = core_seeing(&f, 0);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 300, 60 * S, 60);
    cr_assert_eq(disclosed(&c, &l).detect_within_s, 8, "healthy: 4 probe intervals + 4 s");
    share_set_health(&c, 3);
    cr_assert_eq(disclosed(&c, &l).detect_within_s, 20, "score 3: 4 x 4 probe intervals + 4 s");
    share_set_health(&c, 99);
    cr_assert_eq(disclosed(&c, &l).detect_within_s, 36, "at most 8 x: 32 + 4 s");
}

/* ---- metadata ------------------------------------------------------------------------------- */

Test(share, metadata_round_trips_the_divisor_in_use)
{
    fake_view_t f;
    view_init(&f, 4, 5);
    share_core_t c = core_seeing(&f, 60 * S);
    uint8_t buf[SHARE_META_LEN];
    cr_assert_eq(share_meta_encode(&c, buf, sizeof(buf)), SHARE_META_LEN);
    uint8_t want[] = {1, 1, 0, 0, 0, 5};
    cr_assert_eq(memcmp(buf, want, sizeof(want)), 0);
    share_meta_t m;
    cr_assert_eq(share_meta_decode(buf, sizeof(buf), &m, NULL), 0);
    cr_assert_eq(m.state, SHARE_ARMED);
    cr_assert_eq(m.divisor, 5);
    cr_assert_eq(share_meta_encode(&c, buf, SHARE_META_LEN - 1), SHARE_EMETA);
}

Test(share, a_later_version_is_read_by_its_prefix)
{
    uint8_t v2[] = {2, 2, 0, 0, 1, 0, 0xff, 0xff};
    share_meta_t m;
    cr_assert_eq(share_meta_decode(v2, sizeof(v2), &m, NULL), 0);
    cr_assert_eq(m.state, SHARE_HELD);
    cr_assert_eq(m.divisor, 256);
}

Test(share, bad_metadata_is_rejected_naming_the_fault)
{
    static const struct {
        uint8_t b[SHARE_META_LEN];
        size_t len;
        const char *path, *fault;
    } bad[] = {
        {{1, 1, 0, 0, 0}, 5, "", "5 bytes, shorter than 6"},
        {{0, 1, 0, 0, 0, 3}, 6, "version", "0"},
        {{1, 3, 0, 0, 0, 3}, 6, "state", "3, not unarmed (0), armed (1) or held (2)"},
        {{1, 0, 0, 0, 0, 3}, 6, "divisor", "3, nonzero while unarmed"},
        {{1, 1, 0, 0, 0, 0}, 6, "divisor", "0 while armed or held"},
        {{1, 1, 0, 0x0f, 0x42, 0x41}, 6, "divisor", "1000001, above 1000000"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        share_meta_t m = {.state = SHARE_ARMED, .divisor = 7};
        tt_err_t err = {.path = "stale"};
        cr_assert_eq(share_meta_decode(bad[i].b, bad[i].len, &m, &err), SHARE_EMETA);
        cr_expect_eq(err.code, SHARE_EMETA, "case %zu", i);
        cr_expect_str_eq(err.path, bad[i].path, "case %zu", i);
        cr_expect_str_eq(err.message, bad[i].fault, "case %zu", i);
        cr_assert_eq(m.divisor, 0, "nothing half-decoded");
    }
    cr_assert_eq(share_meta_decode(NULL, 0, &(share_meta_t){0}, NULL), SHARE_EMETA);
}

Test(share, a_peer_with_bad_metadata_counts_but_as_unknown)
{
    fake_view_t f;
    view_init(&f, 2, 3);
    f.meta[2][0] = 0;
    share_core_t c = core_seeing(&f, 60 * S);
    cr_assert_eq(share_divisor(&c), 3);
    cr_assert_eq(c.unknown, 1);
}

Test(share, init_rejects_an_out_of_range_field_naming_it)
{
    static const struct {
        const char *path;
        int64_t hold, join, probe;
        uint32_t mult, max_mult;
    } cases[] = {
        {"partition_hold_ns", -1, 5 * S, S, 4, 6},
        {"join_timeout_ns", 60 * S, -1, S, 4, 6},
        {"swim.probe_interval_ns", 60 * S, 5 * S, 0, 4, 6},
        {"swim.suspicion_mult", 60 * S, 5 * S, S, 0, 6},
        {"swim.suspicion_max_mult", 60 * S, 5 * S, S, 4, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        share_config_t cfg;
        share_config_default(&cfg);
        cfg.partition_hold_ns = cases[i].hold;
        cfg.join_timeout_ns = cases[i].join;
        cfg.swim.probe_interval_ns = cases[i].probe;
        cfg.swim.suspicion_mult = cases[i].mult;
        cfg.swim.suspicion_max_mult = cases[i].max_mult;
        share_core_t c;
        tt_err_t err = {0};
        cr_expect_eq(share_init(&c, &cfg, T0, &err), SHARE_ECONFIG, "case %zu", i);
        cr_expect_eq(err.code, SHARE_ECONFIG, "case %zu", i);
        cr_expect_str_eq(err.path, cases[i].path, "case %zu: %s", i, err.message);
    }
    share_config_t cfg;
    share_config_default(&cfg);
    share_core_t c;
    cr_assert_eq(share_init(&c, &cfg, T0, NULL), 0);
    cr_assert_str_eq(share_state_name(SHARE_HELD), "held");
    cr_assert_str_eq(share_strerror(SHARE_EUNARMED),
                     "share store not armed yet (membership has not joined)");
}

Test(share, a_clock_that_steps_back_neither_ends_nor_extends_a_hold_early)
{
    fake_view_t f;
    view_init(&f, 5, 6);
    share_core_t c = core_seeing(&f, 60 * S);
    set_state(&f, 3, 6, SHARE_MEMBER_DEAD);
    share_update(&c, &f.v, T0 + 10 * S);
    cr_assert_eq(share_state(&c), SHARE_HELD);
    share_update(&c, &f.v, T0 - 3600 * S); /* the wall clock stepped back an hour */
    cr_assert_eq(share_state(&c), SHARE_HELD);
    cr_assert_eq(share_next_deadline(&c), T0 + 70 * S);
    share_update(&c, &f.v, T0 + 70 * S);
    cr_assert_eq(share_state(&c), SHARE_ARMED);
}
