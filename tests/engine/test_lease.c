/* Concurrency leases: gauges per key, release, a closed connection's leases. */
#include "helpers.h"

static gov_result_t acquire(gov_engine_t *e, const gov_subject_t *s, uint64_t owner)
{
    gov_result_t r;
    cr_assert_eq(gov_acquire(e, s, owner, T0, &r), 0, "%s", r.err.message);
    return r;
}

Test(lease, the_gauge_admits_amount_then_denies_until_a_release)
{
    cfg_limit_t l = conc("key_conc", "key", 2);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t a = acquire(e, &s, 1), b = acquire(e, &s, 1);
    cr_assert(a.admit && b.admit);
    cr_assert_neq(a.lease, 0);
    cr_assert_neq(a.lease, b.lease);
    cr_assert_eq(b.remaining, 0);
    gov_result_t c = acquire(e, &s, 1);
    cr_assert_eq(c.verdict, GOV_DENY);
    cr_assert_str_eq(c.limit, "key_conc");
    cr_assert_eq(c.lease, 0);
    cr_assert_eq(gov_release(e, 1, a.lease), 0);
    cr_assert(acquire(e, &s, 1).admit);
    gov_engine_destroy(e);
}

Test(lease, a_lease_is_released_once)
{
    cfg_limit_t l = conc("key_conc", "key", 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t a = acquire(e, &s, 1);
    cr_assert_eq(gov_release(e, 1, a.lease), 0);
    cr_assert_eq(gov_release(e, 1, a.lease), GOV_ENOLEASE);
    cr_assert_eq(gov_release(e, 1, 0), GOV_ENOLEASE);
    cr_assert_eq(gov_release(e, 1, UINT64_MAX), GOV_ENOLEASE);
    /* the slot is reused under a new generation: the old id stays dead */
    gov_result_t b = acquire(e, &s, 1);
    cr_assert_neq(b.lease, a.lease);
    cr_assert_eq(gov_release(e, 1, a.lease), GOV_ENOLEASE);
    cr_assert_eq(gov_release(e, 1, b.lease), 0);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, 0);
    gov_engine_destroy(e);
}

Test(lease, only_the_owner_releases_a_lease)
{
    cfg_limit_t l = conc("key_conc", "key", 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t a = acquire(e, &s, 1);
    cr_assert_eq(gov_release(e, 2, a.lease), GOV_ENOLEASE, "another owner ended the lease");
    cr_assert_not(acquire(e, &s, 2).admit, "the gauge still holds the lease");
    cr_assert_eq(gov_release(e, 1, a.lease), 0);
    cr_assert(acquire(e, &s, 2).admit);
    gov_engine_destroy(e);
}

Test(lease, a_closed_connection_releases_all_its_leases_and_no_other)
{
    cfg_limit_t l = conc("key_conc", "key", 10);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    for (int i = 0; i < 6; i++)
        cr_assert(acquire(e, &s, 100).admit);
    gov_result_t other = acquire(e, &s, 200);
    for (int i = 0; i < 3; i++)
        cr_assert(acquire(e, &s, 300).admit);
    cr_assert_not(acquire(e, &s, 200).admit);
    cr_assert_eq(gov_release_owner(e, 100), 6);
    cr_assert_eq(gov_release_owner(e, 100), 0);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, 4);
    for (int i = 0; i < 6; i++)
        cr_assert(acquire(e, &s, 400).admit);
    cr_assert_not(acquire(e, &s, 400).admit);
    cr_assert_eq(gov_release(e, 200, other.lease), 0);
    cr_assert_eq(gov_release_owner(e, 300), 3);
    cr_assert_eq(gov_release_owner(e, 400), 6);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, 0);
    gov_engine_tick(e, T0);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 0, "gauges back at 0 are reclaimed");
    gov_engine_destroy(e);
}

Test(lease, ids_do_not_give_away_the_pool_index_or_its_generation)
{
    /* issue 23, item 1: ids were (generation << 32) | (index + 1), so the next id of a slot, or
     * another connection's, could be written down without seeing it. The same slot taken and
     * given back 64 times must not show that shape, nor a step between ids. */
    cfg_limit_t l = conc("key_conc", "key", 2);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    uint64_t prev = 0;
    int shaped = 0, stepped = 0;
    for (int i = 0; i < 64; i++) {
        gov_result_t r = acquire(e, &s, 1);
        cr_assert(r.admit);
        shaped += (r.lease >> 32) < 4096 && (r.lease & 0xffffffffu) < 4096;
        stepped += i > 0 && r.lease - prev == UINT64_C(1) << 32;
        prev = r.lease;
        cr_assert_eq(gov_release_owner(e, 1), 1);
    }
    cr_assert_eq(shaped, 0, "%d of 64 ids read as (generation, index)", shaped);
    cr_assert_eq(stepped, 0, "%d of 63 ids follow from the one before", stepped);
    gov_engine_destroy(e);
}

Test(lease, two_gauges_are_taken_all_or_none)
{
    cfg_limit_t ls[] = {conc("team_conc", "team", 1), conc("key_conc", "key", 5)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s1, s2;
    subj(&s1, "team", "t", "key", "k", NULL);
    subj(&s2, "team", "t", "key", "k", NULL);
    gov_result_t a = acquire(e, &s1, 1);
    cr_assert(a.admit);
    cr_assert_str_eq(a.limit, "team_conc", "the tightest gauge");
    gov_result_t b = acquire(e, &s2, 1);
    cr_assert_not(b.admit);
    cr_assert_str_eq(b.limit, "team_conc");
    /* key_conc was not taken by the denied acquire: an acquire naming the key alone reads its
     * gauge, held once by `a`, so after this one 5 - 2 are left */
    gov_subject_t key;
    subj(&key, "key", "k", NULL);
    gov_result_t c = acquire(e, &key, 1);
    cr_assert(c.admit);
    cr_assert_str_eq(c.limit, "key_conc");
    cr_assert_eq(c.remaining, 3, "the denied acquire took a slot of key_conc");
    gov_limit_metrics_t m[2];
    gov_engine_limit_metrics(e, m, 2);
    cr_assert_eq(m[1].counters, 1);
    gov_engine_destroy(e);
}

Test(lease, soft_gauges_admit_and_report)
{
    cfg_limit_t l = conc("key_conc", "key", 1);
    l.posture.enforce_hard = 0;
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    acquire(e, &s, 1);
    gov_result_t r = acquire(e, &s, 1);
    cr_assert(r.admit);
    cr_assert_eq(r.n_soft_denied, 1);
    cr_assert_str_eq(r.soft_denied[0], "key_conc");
    gov_engine_destroy(e);
}

Test(lease, no_concurrency_limit_still_gives_a_releasable_lease)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = acquire(e, subj(&s, "key", "k", NULL), 5);
    cr_assert(r.admit);
    cr_assert_neq(r.lease, 0);
    cr_assert_eq(gov_release(e, 5, r.lease), 0);
    gov_engine_destroy(e);
}

Test(lease, the_lease_cap_is_a_clear_error_and_takes_nothing)
{
    cfg_limit_t l = conc("key_conc", "key", 100);
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.max_leases = 2};
    cr_assert_eq(gov_engine_create(&e, &o, &l, 1, true, &err), 0);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    acquire(e, &s, 1);
    uint64_t second = acquire(e, &s, 1).lease;
    gov_result_t r;
    cr_assert_eq(gov_acquire(e, &s, 1, T0, &r), GOV_ELEASES);
    cr_assert_str_eq(gov_strcode(r.status), "lease_cap");
    /* the refused acquire took no slot: with one lease back, the gauge holds 1, and the next
     * acquire leaves 100 - 2 */
    cr_assert_eq(gov_release(e, 1, second), 0);
    r = acquire(e, &s, 1);
    cr_assert(r.admit);
    cr_assert_eq(r.remaining, 98, "the refused acquire took a slot");
    cr_assert_eq(gov_release_owner(e, 1), 2);
    gov_engine_destroy(e);
}

Test(lease, leases_of_a_reset_limit_release_harmlessly)
{
    cfg_limit_t l = conc("key_conc", "key", 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t a = acquire(e, &s, 1);
    cfg_limit_t wider = conc("key_conc", "key", 2);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, &wider, 1, true, NULL, NULL, &err), 0);
    gov_result_t b = acquire(e, &s, 1), c = acquire(e, &s, 1);
    cr_assert(b.admit && c.admit, "the reset gauge starts at 0");
    cr_assert_eq(gov_release(e, 1, a.lease), 0);
    cr_assert_not(acquire(e, &s, 1).admit, "the old lease did not touch the new gauge");
    gov_engine_destroy(e);
}

Test(lease, many_owners_grow_the_owner_map)
{
    cfg_limit_t l = conc("key_conc", "key", 100000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    for (uint64_t o = 1; o <= 2000; o++) {
        acquire(e, &s, o);
        acquire(e, &s, o);
    }
    for (uint64_t o = 1; o <= 2000; o += 2)
        cr_assert_eq(gov_release_owner(e, o), 2);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, 2000);
    for (uint64_t o = 2; o <= 2000; o += 2)
        cr_assert_eq(gov_release_owner(e, o), 2);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, 0);
    gov_engine_destroy(e);
}

Test(lease, leases_of_a_kept_limit_still_release_their_gauge)
{
    cfg_limit_t l = conc("key_conc", "key", 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    gov_result_t a = acquire(e, &s, 1);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, &l, 1, true, NULL, NULL, &err), 0);
    cr_assert_not(acquire(e, &s, 1).admit, "the kept gauge still holds the lease");
    cr_assert_eq(gov_release(e, 1, a.lease), 0);
    cr_assert(acquire(e, &s, 1).admit);
    gov_engine_destroy(e);
}

/* Random acquires, releases and closed connections against a model of every gauge. */
Test(lease, a_random_walk_agrees_with_a_model_of_the_gauges)
{
    cfg_limit_t l = conc("key_conc", "key", 5);
    gov_engine_t *e = mk_engine(&l, 1, true);
    enum { KEYS = 3, OWNERS = 4, MAXL = 64 };
    struct {
        uint64_t id;
        int key, owner;
    } held[MAXL];
    int n_held = 0, gauge[KEYS] = {0};
    uint64_t x = 2463534242u;
    for (int step = 0; step < 20000; step++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        int op = (int)(x % 10), k = (int)((x >> 8) % KEYS), o = (int)((x >> 16) % OWNERS);
        char id[8];
        snprintf(id, sizeof(id), "k%d", k);
        gov_subject_t s;
        subj(&s, "key", id, NULL);
        if (op < 5 && n_held < MAXL) {
            gov_result_t r = acquire(e, &s, (uint64_t)o + 1);
            cr_assert_eq(r.admit, gauge[k] < 5, "step %d", step);
            if (r.admit) {
                gauge[k]++;
                held[n_held].id = r.lease;
                held[n_held].key = k;
                held[n_held++].owner = o;
            }
        } else if (op < 9 && n_held) {
            int i = (int)((x >> 24) % (uint64_t)n_held);
            cr_assert_eq(gov_release(e, (uint64_t)held[i].owner + 1, held[i].id), 0);
            gauge[held[i].key]--;
            held[i] = held[--n_held];
        } else {
            size_t expect = 0;
            for (int i = 0; i < n_held;) {
                if (held[i].owner == o) {
                    gauge[held[i].key]--;
                    held[i] = held[--n_held];
                    expect++;
                } else {
                    i++;
                }
            }
            cr_assert_eq(gov_release_owner(e, (uint64_t)o + 1), expect);
        }
    }
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.leases, (uint64_t)n_held);
    gov_engine_destroy(e);
}
