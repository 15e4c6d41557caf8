/* The demand core: water-filling, ownership, reporting, leases and the bounds of its tables. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "demand.h"
#include "demand_fleet.h"
#include "demand_wire.h"

#define S (1000 * DF_MS)
#define DEN DEMAND_SHARE_DEN
#define INTERVAL (500 * DF_MS)

static uint64_t sum(const uint32_t *v, uint32_t n)
{
    uint64_t s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

/* ---- water-filling ------------------------------------------------------------------------- */

Test(demand_waterfill, uneven_demands_get_max_min_fair_shares)
{
    uint32_t need[] = {100, 500, 2000, 3000}, share[4];
    uint64_t order[4];
    demand_waterfill(need, 4, 3000, 10, share, order);
    /* 100 is met, 500 is met, the two large ones split the remaining 2400 evenly */
    cr_expect_eq(share[0], 100);
    cr_expect_eq(share[1], 500);
    cr_expect_eq(share[2], 1200);
    cr_expect_eq(share[3], 1200);
}

Test(demand_waterfill, shares_sum_to_the_amount_and_never_go_below_the_floor)
{
    uint32_t need[7] = {0, 1, 7, 1000, 999, 3, 123456}, share[7];
    uint64_t order[7];
    for (uint64_t amount = 70; amount < 5000; amount += 37) {
        demand_waterfill(need, 7, amount, 10, share, order);
        cr_assert_eq(sum(share, 7), amount, "amount %lu", (unsigned long)amount);
        for (int i = 0; i < 7; i++)
            cr_assert_geq(share[i], 10, "amount %lu, reporter %d", (unsigned long)amount, i);
    }
}

Test(demand_waterfill, one_reporter_gets_everything)
{
    uint32_t need = 5, share;
    uint64_t order;
    demand_waterfill(&need, 1, 900000, 13107, &share, &order);
    cr_expect_eq(share, 900000);
}

Test(demand_waterfill, what_demand_leaves_over_is_spread_evenly)
{
    uint32_t need[] = {10, 20, 30}, share[3];
    uint64_t order[3];
    demand_waterfill(need, 3, 1000, 1, share, order);
    cr_expect_eq(sum(share, 3), 1000);
    /* 940 left over: 313 each, the first (smallest) gets the remainder unit */
    cr_expect_eq(share[0], 10 + 314);
    cr_expect_eq(share[1], 20 + 313);
    cr_expect_eq(share[2], 30 + 313);
}

Test(demand_waterfill, demand_below_the_floor_counts_as_the_floor)
{
    uint32_t need[] = {1, 1, 900}, share[3];
    uint64_t order[3];
    demand_waterfill(need, 3, 600, 100, share, order);
    cr_expect_eq(share[0], 100);
    cr_expect_eq(share[1], 100);
    cr_expect_eq(share[2], 400);
}

Test(demand_cold, is_c_over_n_and_never_zero)
{
    cr_expect_eq(demand_cold_num(52429, 4), 13107);
    cr_expect_eq(demand_cold_num(52429, 1), 52429);
    cr_expect_eq(demand_cold_num(52429, 1000000), 1);
}

/* ---- configuration ------------------------------------------------------------------------- */

Test(demand_config, out_of_range_fields_are_named)
{
    static const struct {
        const char *path;
        size_t off, size;
        int64_t value;
    } cases[] = {
#define F(field) #field, offsetof(demand_config_t, field), sizeof(((demand_config_t *)0)->field)
        {F(interval_ns), 999999},
        {F(interval_ns), 60 * S + 1},
        {F(window_ns), 9 * 500 * DF_MS},
        {F(lease_intervals), 1},
        {F(cold_num), 0},
        {F(cold_num), (1 << 20) + 1},
        {F(keys_max), 0},
        {F(keys_max), (1 << 24) + 1},
        {F(owned_max), 0},
        {F(leases_max), (1 << 26) + 1},
        {F(members_max), 65537},
        {F(datagram_max), 1401},
        {F(datagram_max), 64},
#undef F
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        demand_config_t cfg;
        demand_config_default(&cfg);
        if (cases[i].size == sizeof(int64_t))
            memcpy((char *)&cfg + cases[i].off, &cases[i].value, sizeof(int64_t));
        else
            memcpy((char *)&cfg + cases[i].off, &(uint32_t){(uint32_t)cases[i].value},
                   sizeof(uint32_t));
        demand_core_t *c = (demand_core_t *)&cfg; /* not NULL: demand_new must clear it */
        tt_err_t err = {0};
        cr_expect_eq(demand_new(&c, &cfg, "a", 1, &err), DEMAND_ECONFIG, "case %zu", i);
        cr_expect_eq(err.code, DEMAND_ECONFIG, "case %zu", i);
        cr_expect_str_eq(err.path, cases[i].path, "case %zu: %s", i, err.message);
        cr_expect_null(c, "case %zu", i);
    }
    demand_config_t cfg;
    demand_config_default(&cfg);
    demand_core_t *c;
    tt_err_t err = {0};
    char id[DEMAND_ID_MAX + 1];
    memset(id, 'x', sizeof(id));
    cr_expect_eq(demand_new(&c, &cfg, "", 0, &err), DEMAND_ECONFIG);
    cr_expect_eq(err.code, DEMAND_ECONFIG);
    cr_expect_str_eq(err.path, "self_id");
    err = (tt_err_t){0};
    cr_expect_eq(demand_new(&c, &cfg, id, sizeof(id), &err), DEMAND_ECONFIG);
    cr_expect_str_eq(err.path, "self_id");
    cr_expect(strstr(err.message, "129 bytes"), "%s", err.message);
    cr_expect_eq(demand_new(&c, &cfg, id, DEMAND_ID_MAX, &err), 0);
    demand_free(c);
}

/* ---- ownership ----------------------------------------------------------------------------- */

Test(demand_owner, every_replica_agrees_and_owners_spread_over_the_fleet)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    int per[4] = {0};
    for (int k = 0; k < 400; k++) {
        char key[16];
        snprintf(key, sizeof(key), "key-%d", k);
        int o = df_owner(&f, 0, &l, key);
        for (int i = 1; i < 4; i++)
            cr_assert_eq(df_owner(&f, i, &l, key), o);
        per[o]++;
    }
    for (int i = 0; i < 4; i++)
        cr_expect(per[i] > 60 && per[i] < 140, "r%d owns %d of 400", i, per[i]);
    df_free(&f);
}

Test(demand_owner, a_leaving_member_moves_only_its_own_keys)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    int before[300];
    for (int k = 0; k < 300; k++) {
        char key[16];
        snprintf(key, sizeof(key), "key-%d", k);
        before[k] = df_owner(&f, 0, &l, key);
    }
    bool live[DF_MAX] = {true, true, false, true};
    df_view(&f, 0, live);
    int moved = 0;
    for (int k = 0; k < 300; k++) {
        char key[16];
        snprintf(key, sizeof(key), "key-%d", k);
        int now = df_owner(&f, 0, &l, key);
        cr_assert_neq(now, 2);
        if (before[k] != 2)
            cr_assert_eq(now, before[k], "key-%d moved from r%d", k, before[k]);
        else
            moved++;
    }
    cr_expect_gt(moved, 0);
    df_free(&f);
}

/* ---- reporting and leases ------------------------------------------------------------------ */

/* Offers `per_s` arrivals per second of `key` at replica i for `dur`, stepping gcra. */
static void offer(dfleet_t *f, df_load_t *ld, int i, int64_t per_s, int64_t dur)
{
    df_load_rate(f, ld, i, per_s);
    df_drive(f, ld, 1, f->now + dur, NULL, NULL);
}

/* Four replicas; replica 0 has offered 2000/s of a key owned by `owner` for 2 s. */
static void hot_at_r0(dfleet_t *f, cfg_limit_t *l, df_load_t *ld, int owner, char key[16])
{
    df_init(f, 4, NULL);
    *l = df_limit(1000, S, 100);
    df_load_hot(f, ld, l, owner, key, 16, 2000);
    df_drive(f, ld, 1, f->now + 2 * S, NULL, NULL);
}

Test(demand_report, demand_below_the_cold_share_sends_nothing)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    df_load_t ld;
    df_load_init(&ld, &l, "quiet");
    /* cold share = 1.25% of 1000/s = 12.5/s; 10/s stays below it */
    offer(&f, &ld, 0, 10, 5 * S);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(f.packets_sent[i], 0, "r%d sent %lu", i, (unsigned long)f.packets_sent[i]);
    cr_expect_eq(demand_share(f.core[0], &l, "quiet", 5, f.now), demand_cold_num(52429, 4));
    demand_disclosure_t d;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_eq(d.keys_tracked, 1);
    cr_expect_eq(d.keys_hot, 0);
    df_free(&f);
}

Test(demand_report, one_reporter_is_leased_the_amount_less_the_cold_shares)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 2, key);
    uint32_t cold = demand_cold_num(52429, 4);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now), DEN - 3 * cold);
    demand_disclosure_t d;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_eq(d.keys_leased, 1);
    cr_expect_leq(d.largest_lease_age_ns, INTERVAL);
    demand_disclose(f.core[2], &l, f.now, &d);
    cr_expect_eq(d.keys_owned, 1);
    cr_expect_eq(d.leases_granted, 1);
    df_free(&f);
}

Test(demand_report, all_reporters_share_the_whole_amount)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    df_load_t ld;
    df_load_init(&ld, &l, "busy");
    for (int i = 0; i < 4; i++)
        df_load_rate(&f, &ld, i, 100 + 200 * i); /* 100, 300, 500, 700 per s: 1.6 x the cap */
    df_drive(&f, &ld, 1, f.now + 3 * S, NULL, NULL);
    uint32_t share[4];
    for (int i = 0; i < 4; i++)
        share[i] = demand_share(f.core[i], &l, "busy", 4, f.now);
    cr_expect_eq(sum(share, 4), DEN, "shares %u %u %u %u", share[0], share[1], share[2], share[3]);
    /* max-min: 100/s and 300/s are met (with the cap in 2^20ths), the others split the rest */
    cr_expect_geq(share[0], DEN / 10);
    cr_expect_geq(share[1], DEN * 3 / 10);
    cr_expect(share[2] == share[3] || share[2] + 1 == share[3] || share[3] + 1 == share[2]);
    df_free(&f);
}

Test(demand_report, uneven_reporters_and_the_cold_ones_sum_to_the_amount)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    df_load_t ld;
    df_load_init(&ld, &l, "two");
    df_load_rate(&f, &ld, 1, 900);
    df_load_rate(&f, &ld, 3, 300);
    df_drive(&f, &ld, 1, f.now + 3 * S, NULL, NULL);
    uint32_t cold = demand_cold_num(52429, 4), share[4];
    for (int i = 0; i < 4; i++) {
        share[i] = demand_share(f.core[i], &l, "two", 3, f.now);
        cr_expect_geq(share[i], cold);
    }
    cr_expect_eq(share[0], cold);
    cr_expect_eq(share[2], cold);
    cr_expect_eq(share[1] + share[3], DEN - 2 * cold); /* A = amount x (1 - c x 2/4) */
    cr_expect_eq(sum(share, 4), DEN);
    df_free(&f);
}

Test(demand_lease, lapses_to_the_cold_share_three_intervals_after_the_last_grant)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 3, key);
    uint32_t cold = demand_cold_num(52429, 4);
    cr_assert_gt(demand_share(f.core[0], &l, key, strlen(key), f.now), cold);
    df_kill(&f, 3);
    int64_t killed = f.now, lapsed = 0;
    while (f.now < killed + 3 * S && !lapsed) {
        offer(&f, &ld, 0, 2000, DF_MS);
        if (demand_share(f.core[0], &l, key, strlen(key), f.now) == cold)
            lapsed = f.now;
    }
    cr_assert(lapsed, "the lease never lapsed");
    /* granted at most one owner interval before the kill (+1 ms delay), valid 3 intervals */
    cr_expect_leq(lapsed - killed, 3 * INTERVAL + DF_MS);
    cr_expect_geq(lapsed - killed, 2 * INTERVAL);
    df_free(&f);
}

Test(demand_lease, a_clock_that_goes_back_ends_the_lease_instead_of_stretching_it)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 2, key);
    uint32_t cold = demand_cold_num(52429, 4);
    cr_assert_gt(demand_share(f.core[0], &l, key, strlen(key), f.now), cold);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now - S), cold);
    df_free(&f);
}

Test(demand_lease, a_key_that_goes_quiet_releases_its_share_and_is_forgotten)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 1, key);
    demand_disclosure_t d;
    demand_disclose(f.core[1], &l, f.now, &d);
    cr_assert_eq(d.leases_granted, 1);
    offer(&f, &ld, 0, 0, 3 * S); /* one release, then the window empties */
    demand_disclose(f.core[1], &l, f.now, &d);
    cr_expect_eq(d.keys_owned, 0);
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_eq(d.keys_leased, 0);
    cr_expect_eq(d.keys_tracked, 0);
    uint64_t sent = f.packets_sent[0];
    offer(&f, &ld, 0, 0, 3 * S);
    cr_expect_eq(f.packets_sent[0], sent, "a forgotten key still costs traffic");
    df_free(&f);
}

Test(demand_lease, a_site_whose_arrivals_stop_releases_at_its_next_tick_not_after_the_window)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 1, key);
    uint32_t cold = demand_cold_num(52429, 4);
    cr_assert_gt(demand_share(f.core[0], &l, key, strlen(key), f.now), cold);
    /* stop just after r0's tick: the next bucket holds no arrivals at all */
    offer(&f, &ld, 0, 2000, f.next_tick[0] - f.now + DF_MS);
    int64_t stopped = f.now, next = f.next_tick[0];
    offer(&f, &ld, 0, 0, next - f.now + 2 * DF_MS); /* r0's tick, its release, 1 ms on the wire */
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now), cold);
    demand_disclosure_t d;
    demand_disclose(f.core[1], &l, f.now, &d);
    cr_expect_eq(d.keys_owned, 0, "the owner dropped the key %ld ms after the stop",
                 (long)((f.now - stopped) / DF_MS));
    df_free(&f);
}

/* ---- early grants -------------------------------------------------------------------------- */

Test(demand_flush, an_owner_answers_a_new_reporter_on_receipt_not_at_its_next_tick)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    df_load_t ld;
    char key[16];
    df_key_owned_by(&f, &l, 1, key, sizeof(key));
    df_load_init(&ld, &l, key);
    df_run(&f, f.next_tick[0] + DF_MS); /* just after r0's tick */
    int64_t report_at = f.next_tick[0], owner_tick = f.next_tick[1];
    while (owner_tick < report_at)
        owner_tick += INTERVAL;
    cr_assert_gt(owner_tick - report_at, 100 * DF_MS, "r1 ticks well after r0 reports");
    offer(&f, &ld, 0, 2000, report_at - f.now + 2 * DF_MS); /* report, then grant: 1 ms each */
    cr_assert_lt(f.now, owner_tick);
    cr_expect_gt(demand_share(f.core[0], &l, key, strlen(key), f.now), demand_cold_num(52429, 4),
                 "leased before the owner's tick, %ld ms away",
                 (long)((owner_tick - f.now) / DF_MS));
    df_free(&f);
}

/* Collects what a core emits. */
typedef struct sent {
    int datagrams;
    int items;
} sent_t;

static void count_sent(void *ctx, const char *to, size_t to_len, const uint8_t *bytes, size_t len)
{
    (void)to, (void)to_len;
    sent_t *s = ctx;
    demand_msg_t m;
    cr_assert_eq(demand_wire_decode(bytes, len, &m, NULL), 0);
    cr_assert_eq(m.kind, DEMAND_GRANT);
    s->datagrams++;
    s->items += (int)m.n;
}

/* A report of `demand` for `key` from member `from` to core `to`. */
static void report(dfleet_t *f, int to, const char *from, const cfg_limit_t *l, const char *key,
                   uint32_t demand)
{
    demand_item_t it = {.identity = l->identity,
                        .key = (const uint8_t *)key,
                        .key_len = (uint32_t)strlen(key),
                        .value = demand};
    uint8_t buf[1400];
    int len = demand_wire_encode(DEMAND_REPORT, &it, 1, buf, sizeof(buf));
    cr_assert_gt(len, 0);
    cr_assert_eq(demand_receive(f->core[to], f->now, from, strlen(from), buf, (size_t)len, NULL),
                 0);
}

Test(demand_flush, only_a_change_in_who_reports_is_answered_early_and_passes_are_spaced)
{
    dfleet_t f;
    df_init(&f, 3, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    char key[16];
    df_key_owned_by(&f, &l, 0, key, sizeof(key));
    demand_core_t *owner = f.core[0];
    sent_t s = {0};
    cr_expect_eq(demand_flush_deadline(owner), INT64_MAX, "nothing waits");
    report(&f, 0, "r1", &l, key, DEN / 2); /* r1 joins: answered at once */
    cr_expect_eq(demand_flush_deadline(owner), f.now);
    demand_flush(owner, f.now, count_sent, &s);
    cr_expect_eq(s.items, 1);
    report(&f, 0, "r1", &l, key, DEN / 3); /* only its demand changed: waits for the tick */
    cr_expect_eq(demand_flush_deadline(owner), INT64_MAX);
    f.now += DF_MS;
    report(&f, 0, "r2", &l, key, DEN / 2); /* r2 joins 1 ms after a pass: the gap holds it */
    int64_t due = demand_flush_deadline(owner);
    cr_expect_eq(due, f.now - DF_MS + INTERVAL / 8);
    demand_flush(owner, f.now, count_sent, &s);
    cr_expect_eq(s.items, 1, "sent within the gap");
    demand_flush(owner, due, count_sent, &s);
    cr_expect_eq(s.items, 3, "both reporters get their new shares");
    cr_expect_eq(s.datagrams, 3);
    cr_expect_eq(demand_flush_deadline(owner), INT64_MAX);
    f.now = due + S;
    report(&f, 0, "r2", &l, key, 0); /* a release, after the gap: at once, to r1 */
    cr_expect_eq(demand_flush_deadline(owner), f.now);
    demand_flush(owner, f.now, count_sent, &s);
    cr_expect_eq(s.items, 4);
    df_free(&f);
}

Test(demand_lease, ownership_change_moves_the_key_and_discloses_the_double_bound)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 2, key);
    demand_disclosure_t d;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_not(d.moving);
    cr_expect_eq(d.sustained_bound, 1000);
    cr_expect_eq(d.burst_bound, 100 + 4);
    /* r2 leaves every view (gracefully: it keeps running, but nobody routes to it) */
    bool live[DF_MAX] = {true, true, false, true};
    for (int i = 0; i < 4; i++)
        if (i != 2)
            df_view(&f, i, live);
    bool only[DF_MAX] = {false, false, true, false};
    df_view(&f, 2, only);
    int64_t moved = f.now;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect(d.moving);
    cr_expect_eq(d.sustained_bound, 2000);
    cr_expect_eq(d.burst_bound, 200 + 3);
    cr_expect_eq(d.moving_until_ns, moved + 4 * INTERVAL);
    offer(&f, &ld, 0, 2000, 2 * INTERVAL + 10 * DF_MS);
    int owner = df_owner(&f, 0, &l, key);
    cr_assert_neq(owner, 2);
    demand_disclose(f.core[owner], &l, f.now, &d);
    cr_expect_eq(d.keys_owned, 1, "the new owner r%d took over", owner);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now),
                 DEN - 2 * demand_cold_num(52429, 3));
    offer(&f, &ld, 0, 2000, 2 * INTERVAL);
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_not(d.moving);
    cr_expect_eq(d.sustained_bound, 1000);
    df_free(&f);
}

Test(demand_lease, views_that_disagree_on_the_owner_give_no_lease_rather_than_two)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    df_load_t ld;
    char key[16];
    df_load_hot(&f, &ld, &l, 3, key, sizeof(key), 2000);
    bool without3[DF_MAX] = {true, true, true, false};
    df_view(&f, 0, without3); /* only r0 has lost r3: it reports to someone who defers to r3 */
    int other = df_owner(&f, 0, &l, key);
    cr_assert_neq(other, 3);
    df_drive(&f, &ld, 1, f.now + 2 * S, NULL, NULL);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now), demand_cold_num(52429, 3));
    cr_expect_gt(demand_counters(f.core[other])->reports_misrouted, 0);
    df_free(&f);
}

Test(demand_lease, a_grant_from_a_member_that_does_not_own_the_key_is_ignored)
{
    dfleet_t f;
    cfg_limit_t l;
    df_load_t ld;
    char key[16];
    hot_at_r0(&f, &l, &ld, 2, key);
    uint32_t before = demand_share(f.core[0], &l, key, strlen(key), f.now);
    demand_item_t it = {.identity = l.identity,
                        .key = (const uint8_t *)key,
                        .key_len = (uint32_t)strlen(key),
                        .value = DEN,
                        .ttl_ms = 1500};
    uint8_t buf[256];
    int len = demand_wire_encode(DEMAND_GRANT, &it, 1, buf, sizeof(buf));
    cr_assert_gt(len, 0);
    cr_expect_eq(demand_receive(f.core[0], f.now, "r1", 2, buf, (size_t)len, NULL), 0);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now), before);
    cr_expect_eq(demand_counters(f.core[0])->grants_ignored, 1);
    cr_expect_eq(demand_receive(f.core[0], f.now, "r2", 2, buf, (size_t)len, NULL), 0);
    cr_expect_eq(demand_share(f.core[0], &l, key, strlen(key), f.now), DEN, "the owner's is");
    df_free(&f);
}

/* ---- bounds -------------------------------------------------------------------------------- */

Test(demand_bounds, keys_beyond_keys_max_run_on_the_cold_share_and_are_counted)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    cfg.keys_max = 8;
    dfleet_t f;
    df_init(&f, 2, &cfg);
    cfg_limit_t l = df_limit(1000, S, 100);
    for (int k = 0; k < 10; k++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", k);
        uint32_t s = demand_arrive(f.core[0], &l, key, strlen(key), 1, f.now);
        cr_expect_eq(s, demand_cold_num(52429, 2));
    }
    cr_expect_eq(demand_counters(f.core[0])->untracked_arrivals, 2);
    demand_disclosure_t d;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_eq(d.keys_tracked, 8);
    df_free(&f);
}

Test(demand_bounds, keys_coming_and_going_are_found_again_and_never_tracked_twice)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    cfg.keys_max = 64;
    dfleet_t f;
    df_init(&f, 2, &cfg);
    cfg_limit_t l = df_limit(1000, S, 100);
    uint64_t x = 88172645463325252u; /* xorshift64: the same trace every run */
    uint32_t prev = 0, forgotten = 0, full = 0;
    for (int round = 0; round < 400; round++) {
        int keys[40];
        for (int k = 0; k < 40; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            keys[k] = (int)(x % 100);
            char key[16];
            snprintf(key, sizeof(key), "k%d", keys[k]);
            /* costs of 0 .. 63: most buckets above the cold share (25 per second here), so keys
             * stay hot for a while and the table fills */
            demand_arrive(f.core[0], &l, key, strlen(key), (int64_t)(x >> 58), f.now);
        }
        demand_disclosure_t before, after;
        demand_disclose(f.core[0], &l, f.now, &before);
        cr_assert_leq(before.keys_tracked, 64);
        for (int k = 0; k < 40; k++) {
            char key[16];
            snprintf(key, sizeof(key), "k%d", keys[k]);
            demand_arrive(f.core[0], &l, key, strlen(key), 0, f.now);
        }
        demand_disclose(f.core[0], &l, f.now, &after);
        cr_assert_eq(after.keys_tracked, before.keys_tracked, "round %d", round);
        forgotten += prev > before.keys_tracked;
        full += before.keys_tracked == 64;
        prev = after.keys_tracked;
        df_run(&f, f.now + (round % 7 == 0 ? 3 * S : INTERVAL)); /* some rounds let keys idle */
    }
    cr_expect_gt(forgotten, 20, "idle keys were forgotten (slots reused)");
    cr_expect_gt(full, 20, "the table was full at times");
    df_free(&f);
}

Test(demand_bounds, reports_beyond_leases_max_are_refused_and_the_sum_still_holds)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    cfg.leases_max = 1;
    dfleet_t f;
    df_init(&f, 3, &cfg);
    cfg_limit_t l = df_limit(1000, S, 100);
    char key[16];
    df_key_owned_by(&f, &l, 2, key, sizeof(key));
    df_load_t ld;
    df_load_init(&ld, &l, key);
    df_load_rate(&f, &ld, 0, 900);
    df_load_rate(&f, &ld, 1, 900);
    df_drive(&f, &ld, 1, f.now + 3 * S, NULL, NULL);
    cr_expect_gt(demand_counters(f.core[2])->reports_refused, 0);
    uint32_t cold = demand_cold_num(52429, 3),
             a = demand_share(f.core[0], &l, key, strlen(key), f.now),
             b = demand_share(f.core[1], &l, key, strlen(key), f.now);
    /* one of them holds the single lease (A for one reporter), the other stays cold */
    cr_expect(a == cold || b == cold, "%u %u", a, b);
    cr_expect_leq((uint64_t)a + b + cold, DEN);
    df_free(&f);
}

Test(demand_bounds, many_hot_keys_are_batched_into_datagrams_within_datagram_max)
{
    dfleet_t f;
    df_init(&f, 4, NULL);
    cfg_limit_t l = df_limit(1000, S, 100);
    /* 1000 hot keys with 24-byte ids, all at replica 0 */
    for (int t = 0; t < 3; t++) {
        for (int k = 0; k < 1000; k++) {
            char key[32];
            snprintf(key, sizeof(key), "team-%019d", k);
            for (int a = 0; a < 20; a++)
                demand_arrive(f.core[0], &l, key, strlen(key), 1, f.now);
        }
        df_run(&f, f.now + INTERVAL);
    }
    cr_expect_leq(f.largest_packet, 1150);
    cr_expect_gt(f.largest_packet, 1000, "batches are filled");
    const demand_counters_t *c = demand_counters(f.core[0]);
    cr_expect_gt(c->reports_sent, 1400); /* about 3/4 of the keys are owned remotely */
    cr_expect_lt(c->tx_packets * 25, c->reports_sent, "more than 25 reports per datagram");
    demand_disclosure_t d;
    demand_disclose(f.core[0], &l, f.now, &d);
    cr_expect_gt(d.keys_leased, 900);
    df_free(&f);
}

Test(demand_bounds, members_beyond_members_max_are_left_out_and_counted)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    cfg.members_max = 2;
    demand_core_t *c;
    cr_assert_eq(demand_new(&c, &cfg, "a", 1, NULL), 0);
    demand_member_t m[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    cr_expect_eq(demand_set_members(c, m, 3, 3, DF_T0), DEMAND_EMEMBERS);
    cr_expect_eq(demand_counters(c)->members_left_out, 1);
    demand_free(c);
}

Test(demand_owner, the_same_set_in_another_order_or_with_repeats_is_no_move)
{
    demand_config_t cfg;
    demand_config_default(&cfg);
    demand_core_t *c;
    cr_assert_eq(demand_new(&c, &cfg, "a", 1, NULL), 0);
    cfg_limit_t l = df_limit(1000, S, 100);
    demand_member_t m1[] = {{"a", 1}, {"b", 1}, {"c", 1}};
    demand_member_t m2[] = {{"c", 1}, {"b", 1}, {"c", 1}, {"b", 1}};
    demand_set_members(c, m1, 3, 3, DF_T0);
    demand_disclosure_t d;
    demand_disclose(c, &l, DF_T0 + 10 * S, &d);
    cr_assert_not(d.moving);
    demand_set_members(c, m2, 4, 3, DF_T0 + 10 * S);
    demand_disclose(c, &l, DF_T0 + 10 * S, &d);
    cr_expect_not(d.moving, "the same three members");
    demand_set_members(c, m2, 1, 2, DF_T0 + 10 * S);
    demand_disclose(c, &l, DF_T0 + 10 * S, &d);
    cr_expect(d.moving, "b left");
    demand_free(c);
}

Test(demand_receive, a_datagram_from_a_non_member_or_garbage_changes_nothing)
{
    dfleet_t f;
    df_init(&f, 2, NULL);
    uint8_t junk[] = {0x93, 0x01, 0x01, 0x91, 0x93, 0x01, 0xc4, 0x05, 'a'};
    tt_err_t err = {0};
    cr_expect_eq(demand_receive(f.core[0], f.now, "r1", 2, junk, sizeof(junk), &err), DEMAND_EWIRE);
    cr_expect_eq(err.code, DEMAND_EWIRE);
    cr_expect_str_eq(err.path, "items[0].key");
    cr_expect_str_eq(err.message, "truncated");
    err = (tt_err_t){0};
    cr_expect_eq(demand_receive(f.core[0], f.now, "zz", 2, junk, sizeof(junk), &err),
                 DEMAND_ESENDER);
    cr_expect_eq(err.code, DEMAND_ESENDER);
    cr_expect_str_eq(err.path, "from");
    cr_expect(strstr(err.message, "\"zz\""), "%s", err.message);
    cr_expect_eq(demand_receive(f.core[0], f.now, "r0", 2, junk, sizeof(junk), NULL),
                 DEMAND_ESENDER, "self is not a peer");
    cr_expect_eq(demand_counters(f.core[0])->rx_bad, 3);
    df_free(&f);
}

/* ---- the glue for the engine and the config ------------------------------------------------ */

Test(demand_config, follows_shared_state_share)
{
    cfg_share_t s = {.cold_share = 0.05, .demand_interval_ns = 500 * DF_MS, .demand_keys = 100000};
    demand_config_t cfg;
    demand_config_from_share(&cfg, &s);
    cr_expect_eq(cfg.keys_max, 100000);
    cr_expect_eq(cfg.owned_max, 100000);
    cr_expect_eq(cfg.leases_max, 400000);
    cr_expect_eq(cfg.cold_num, 52429);
    cr_expect_eq(cfg.interval_ns, 500 * DF_MS);
    cr_expect_eq(cfg.window_ns, 2 * S);
    s.demand_interval_ns = 10 * DF_MS; /* the shortest the loader takes: window 8 intervals */
    s.cold_share = 1e-9;
    demand_config_from_share(&cfg, &s);
    cr_expect_eq(cfg.window_ns, 80 * DF_MS);
    cr_expect_eq(cfg.cold_num, 1);
    s.demand_interval_ns = 60 * S; /* the longest: window one interval, lease 3 minutes */
    demand_config_from_share(&cfg, &s);
    cr_expect_eq(cfg.window_ns, 60 * S);
    demand_core_t *c;
    cr_expect_eq(demand_new(&c, &cfg, "a", 1, NULL), 0);
    demand_free(c);
}

Test(demand_limiter, is_unarmed_until_the_share_store_has_a_divisor_then_steps_the_share)
{
    demand_core_t *c;
    demand_config_t cfg;
    demand_config_default(&cfg);
    cr_assert_eq(demand_new(&c, &cfg, "a", 1, NULL), 0);
    cfg_limit_t l = df_limit(1000, S, 100);
    ra_limiter_t got, want;
    cr_expect_eq(demand_limiter(c, &l, "k", 1, 1, DF_T0, &got), DEMAND_EUNARMED);
    cr_expect_eq(memcmp(&got, &l.limiter, sizeof(got)), 0);
    demand_member_t m[] = {{"a", 1}, {"b", 1}};
    demand_set_members(c, m, 2, 2, DF_T0);
    cr_expect_eq(demand_limiter(c, &l, "k", 1, 1, DF_T0, &got), 0);
    cr_assert_eq(ra_limiter_effective(&l.limiter, demand_cold_num(52429, 2), DEN, 1, &want), 0);
    cr_expect_eq(memcmp(&got, &want, sizeof(got)), 0);
    demand_free(c);
}

/* Every replica must hash a member and a key alike, or two versions in one fleet disagree on
 * who owns a key: the values are pinned (FNV-1a 64 finished by murmur3's fmix64; the identity's
 * 8 bytes little endian, then the key). */
#include "demand_index.h"

Test(demand, member_and_key_hashes_are_the_same_on_every_replica_and_version)
{
    cr_assert_eq(member_hash("node-a", 6), UINT64_C(0x48e86629c152a3f3));
    cr_assert_eq(key_hash(UINT64_C(0x0123456789abcdef), "team-1", 6), UINT64_C(0x11264fc26031549d));
    cr_assert_eq(key_hash(0, "", 0), UINT64_C(0x7bd3144f29c0cc9e));
}
