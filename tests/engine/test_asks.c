/* attach.levels combinations and gov_decide_asks: several asks decided as one (SPEC §12). */
#include "helpers.h"

#define MIN (60 * S)

static gov_ask_t ask(gov_subject_t *s, int64_t cost)
{
    return (gov_ask_t){.subject = *s, .cost = cost};
}

/* Decides the asks and asserts success. */
static void asks(gov_engine_t *e, const gov_ask_t *a, size_t n, unsigned flags, int64_t now,
                 gov_result_t *out)
{
    int rc = gov_decide_asks(e, a, n, flags, now, out);
    cr_assert_eq(rc, 0, "asks: %d %s", rc, out[0].err.message);
    for (size_t i = 0; i < n; i++)
        gov_result_render(&out[i]); /* as the gRPC door renders the one whose headers travel */
}

Test(combo, a_combination_counts_per_pair_of_ids_and_needs_every_level)
{
    cfg_limit_t ls[] = {rpm("pair", "generic_key,team", 2, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t a, b, alone;
    subj(&a, "team", "t1", "generic_key", "chat", NULL);
    subj(&b, "team", "t2", "generic_key", "chat", NULL);
    subj(&alone, "team", "t1", NULL);
    cr_assert(decide(e, &a, GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, &a, GOV_NO_TOKENS, T0).admit);
    cr_assert_not(decide(e, &a, GOV_NO_TOKENS, T0).admit);
    gov_result_t r = decide(e, &b, GOV_NO_TOKENS, T0); /* another team: its own counter */
    cr_assert(r.admit);
    cr_assert_str_eq(r.limit, "pair");
    r = decide(e, &alone, GOV_NO_TOKENS, T0); /* one level of two: the combination is not named */
    cr_assert(r.admit);
    cr_assert_str_eq(r.limit, "");
    gov_engine_destroy(e);
}

Test(combo, the_key_cannot_be_forged_by_moving_bytes_between_ids)
{
    cfg_limit_t ls[] = {rpm("pair", "a,b", 1, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t x, y;
    subj(&x, "a", "ab", "b", "c", NULL);
    subj(&y, "a", "a", "b", "bc", NULL);
    cr_assert(decide(e, &x, GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, &y, GOV_NO_TOKENS, T0).admit, "length-prefixed ids: two counters");
    gov_engine_destroy(e);
}

Test(combo, a_combination_has_its_own_identity)
{
    cfg_limit_t one = rpm("x", "team", 5, MIN, 0), two = rpm("x", "generic_key,team", 5, MIN, 0),
                swapped = rpm("x", "team,generic_key", 5, MIN, 0);
    cr_assert_neq(one.identity, two.identity);
    cr_assert_neq(two.identity, swapped.identity);
}

Test(asks, exact_matching_applies_only_the_limits_attached_to_those_levels_in_order)
{
    cfg_limit_t ls[] = {rpm("team_rpm", "team", 5, MIN, 0),
                        rpm("pair", "generic_key,team", 1, MIN, 0),
                        rpm("all", "global", 1, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 3, true);
    gov_subject_t team, pair, swapped;
    subj(&team, "team", "t1", NULL);
    subj(&pair, "generic_key", "chat", "team", "t1", NULL);
    subj(&swapped, "team", "t1", "generic_key", "chat", NULL);
    gov_ask_t a[] = {ask(&team, 1), ask(&pair, 1), ask(&swapped, 1)};
    gov_result_t r[3];
    asks(e, a, 3, GOV_ASK_EXACT, T0, r);
    cr_assert_str_eq(r[0].limit, "team_rpm");
    cr_assert_eq(r[0].remaining, 4);
    cr_assert_str_eq(r[1].limit, "pair");
    cr_assert_eq(r[1].remaining, 0);
    cr_assert_str_eq(r[2].limit, "", "another order names no limit");
    cr_assert_eq(r[2].remaining, -1);
    cr_assert(r[2].admit);
    gov_engine_destroy(e);
}

Test(asks, a_denial_in_one_ask_consumes_nothing_in_any)
{
    cfg_limit_t ls[] = {rpm("team_rpm", "team", 5, MIN, 0), rpm("key_rpm", "key", 1, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t team, key;
    subj(&team, "team", "t1", NULL);
    subj(&key, "key", "k1", NULL);
    gov_ask_t a[] = {ask(&team, 1), ask(&key, 2)};
    gov_result_t r[2];
    asks(e, a, 2, GOV_ASK_EXACT, T0, r);
    cr_assert(r[0].admit, "its own limit admits");
    cr_assert_eq(r[1].verdict, GOV_UNFITTABLE, "cost 2 never fits a burst of 1");
    asks(e, a, 1, GOV_ASK_EXACT, T0, r);
    cr_assert_eq(r[0].remaining, 4, "the first attempt kept nothing");
    gov_engine_destroy(e);
}

Test(asks, two_asks_on_one_counter_see_both_costs)
{
    cfg_limit_t ls[] = {rpm("team_rpm", "team", 3, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team;
    subj(&team, "team", "t1", NULL);
    gov_ask_t a[] = {ask(&team, 2), ask(&team, 2)};
    gov_result_t r[2];
    asks(e, a, 2, GOV_ASK_EXACT, T0, r);
    cr_assert(r[0].admit);
    cr_assert_not(r[1].admit, "2 + 2 > 3");
    a[1].cost = 1;
    asks(e, a, 2, GOV_ASK_EXACT, T0, r);
    cr_assert(r[1].admit);
    cr_assert_eq(r[1].remaining, 0);
    gov_engine_destroy(e);
}

Test(asks, cost_zero_is_a_check_that_consumes_nothing)
{
    cfg_limit_t ls[] = {tpm("team_tpm", "team", 100000, MIN, 20000)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team;
    subj(&team, "team", "t1", NULL);
    gov_ask_t a = ask(&team, 0);
    gov_result_t r;
    for (int i = 0; i < 3; i++) {
        asks(e, &a, 1, GOV_ASK_EXACT, T0, &r);
        cr_assert(r.admit);
        cr_assert_eq(r.remaining, 20000);
    }
    a.cost = 15000;
    asks(e, &a, 1, GOV_ASK_EXACT, T0, &r);
    cr_assert_eq(r.remaining, 5000);
    gov_engine_destroy(e);
}

Test(asks, a_charge_is_kept_on_overrun_and_reported_as_a_denial)
{
    cfg_limit_t ls[] = {tpm("team_tpm", "team", 100000, MIN, 20000)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team;
    subj(&team, "team", "t1", NULL);
    gov_ask_t a = ask(&team, 18000);
    gov_result_t r;
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, T0, &r);
    cr_assert(r.admit);
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, T0, &r); /* 36000 of 20000: an overrun */
    cr_assert_not(r.admit, "the overrun is reported");
    cr_assert_eq(r.remaining, 0);
    a.cost = 0;
    asks(e, &a, 1, GOV_ASK_EXACT, T0 + 9 * S, &r);
    cr_assert_not(r.admit, "the overrun was charged: 36000 - 20000 tokens take 9.6 s to repay");
    asks(e, &a, 1, GOV_ASK_EXACT, T0 + 10 * S, &r);
    cr_assert(r.admit, "and are repaid at the rate");
    gov_engine_destroy(e);
}

Test(asks, bad_asks_are_refused_and_change_nothing)
{
    cfg_limit_t ls[] = {rpm("team_rpm", "team", 5, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team, twice;
    subj(&team, "team", "t1", NULL);
    subj(&twice, "team", "t1", "team", "t2", NULL);
    gov_ask_t a[] = {ask(&team, 1), ask(&team, -1)};
    gov_result_t r[GOV_ASKS_MAX + 1];
    cr_assert_eq(gov_decide_asks(e, a, 2, GOV_ASK_EXACT, T0, r), GOV_ERANGE);
    cr_assert_eq(r[1].status, GOV_ERANGE);
    a[1] = ask(&twice, 1);
    cr_assert_eq(gov_decide_asks(e, a, 2, GOV_ASK_EXACT, T0, r), GOV_ESUBJECT);
    cr_assert_eq(r[1].err.code, GOV_ESUBJECT);
    cr_assert_str_eq(r[1].err.path, "subject.team");
    cr_assert_str_eq(r[1].err.message, "level given twice");
    gov_ask_t many[GOV_ASKS_MAX + 1];
    for (size_t i = 0; i <= GOV_ASKS_MAX; i++)
        many[i] = ask(&team, 1);
    cr_assert_eq(gov_decide_asks(e, many, GOV_ASKS_MAX + 1, GOV_ASK_EXACT, T0, r), GOV_EINVAL);
    cr_assert_eq(gov_decide_asks(e, many, 0, GOV_ASK_EXACT, T0, r), GOV_EINVAL);
    asks(e, a, 1, GOV_ASK_EXACT, T0, r);
    cr_assert_eq(r[0].remaining, 4, "nothing was spent before");
    gov_engine_destroy(e);
}

/* issue 29: an admitted ask whose step was undone (another ask was over) reports the state that
 * was kept, not the step it did not keep: envoy ratelimit's integration test, key2 (20/min) and
 * key3 (10/h) asked together; once key3 is over, key2's remaining stays where its counter is. */
Test(asks, an_undone_step_reports_the_remaining_that_was_kept)
{
    cfg_limit_t ls[] = {mk_limit("key2", "key2", CFG_TYPE_RPM, RA_FIXED_WINDOW, 20, MIN, 0),
                        mk_limit("key3", "key3", CFG_TYPE_RPM, RA_FIXED_WINDOW, 10, 60 * MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t k2, k3;
    subj(&k2, "key2", "v", NULL);
    subj(&k3, "key3", "v", NULL);
    gov_ask_t a[] = {ask(&k2, 1), ask(&k3, 1)};
    gov_result_t r[2];
    int64_t t = T0 - T0 % (60 * MIN); /* the start of an hour: both windows open */
    for (int i = 0; i < 10; i++) {
        asks(e, a, 2, GOV_ASK_EXACT, t, r);
        cr_assert(r[0].admit && r[1].admit, "request %d", i);
        cr_assert_eq(r[0].remaining, 20 - (i + 1));
    }
    for (int i = 10; i < 15; i++) {
        asks(e, a, 2, GOV_ASK_EXACT, t, r);
        cr_assert_not(r[1].admit, "request %d: key3 is over", i);
        cr_assert(r[0].admit, "key2's own limit admits");
        cr_expect_eq(r[0].remaining, 10, "request %d: key2's counter stays at 10 used", i);
        cr_expect_eq(r[0].reset_after_s, 60, "and its window's reset");
    }
    gov_engine_destroy(e);
}

/* issue 29: a soft (shadow) limit over its limit still names itself, its remaining 0 and its
 * reset: the status the gRPC door answers keeps its current_limit and duration_until_reset. */
Test(asks, a_soft_limit_over_its_limit_keeps_its_status)
{
    cfg_limit_t ls[] = {rpm("shadow", "team", 2, MIN, 0)};
    ls[0].posture.enforce_hard = 0;
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team;
    subj(&team, "team", "t1", NULL);
    gov_ask_t a = ask(&team, 1);
    gov_result_t r;
    asks(e, &a, 1, GOV_ASK_EXACT, T0, &r);
    asks(e, &a, 1, GOV_ASK_EXACT, T0, &r);
    cr_assert(r.admit);
    cr_assert_str_eq(r.limit, "shadow");
    asks(e, &a, 1, GOV_ASK_EXACT, T0, &r);
    cr_assert(r.admit, "soft: admitted");
    cr_assert_eq(r.n_soft_denied, 1);
    cr_expect_str_eq(r.limit, "shadow", "the limit that would have denied is named");
    cr_expect_eq(r.remaining, 0);
    cr_expect_gt(r.reset_after_s, 0, "with its reset");
    gov_engine_destroy(e);
}

/* issue 29: a charged overrun of a window limit (grpc_charge_domains) is a denial with a retry:
 * the window's reset, not the 0 a unit probe of the window reads (the window has room for one). */
Test(asks, a_charged_window_overrun_is_a_denial_with_a_retry)
{
    cfg_limit_t ls[] = {mk_limit("win", "team", CFG_TYPE_RPM, RA_FIXED_WINDOW, 10, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 1, true);
    gov_subject_t team;
    subj(&team, "team", "t1", NULL);
    int64_t t = T0 - T0 % MIN + 20 * S;
    gov_ask_t a = ask(&team, 8);
    gov_result_t r;
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, t, &r);
    cr_assert(r.admit);
    a.cost = 5; /* 8 + 5 > 10: over, yet a unit still fits */
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, t, &r);
    cr_assert_not(r.admit);
    cr_expect_eq(r.retry_after_s, 40, "the window resets in 40 s");
    const char *retry = hdr(&r, "Retry-After");
    cr_expect(retry && strcmp(retry, "40") == 0, "Retry-After: %s", retry ? retry : "(none)");
    gov_engine_destroy(e);
    e = mk_engine(ls, 1, false); /* no disclosure: Retry-After is the retry alone */
    a.cost = 8;
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, t, &r);
    a.cost = 5;
    asks(e, &a, 1, GOV_ASK_EXACT | GOV_ASK_CHARGE, t, &r);
    cr_assert_not(r.admit);
    retry = hdr(&r, "Retry-After");
    cr_expect(retry && strcmp(retry, "40") == 0, "Retry-After: %s", retry ? retry : "(none)");
    gov_engine_destroy(e);
}

/* A combination's key longer than the table's largest chunk (two ids of 200 bytes): counted like
 * any other, without touching memory beyond the id arena's size classes. */
Test(combo, a_combination_of_long_ids_is_counted)
{
    cfg_limit_t ls[] = {rpm("pair", "a,b", 2, MIN, 0), rpm("other", "a", 5, MIN, 0)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    char x[201], y[201];
    memset(x, 'x', 200);
    memset(y, 'y', 200);
    x[200] = y[200] = '\0';
    gov_subject_t s;
    subj(&s, "a", x, "b", y, NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_not(r.admit, "the pair's counter holds 2");
    cr_assert_str_eq(r.limit, "pair");
    y[0] = 'z'; /* another pair: its own counter */
    subj(&s, "a", x, "b", y, NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}
