/* The decision engine: decisions, verdicts, two phases, disclosure. */
#include "helpers.h"

Test(disclosure, seed_capture_comes_out_exactly)
{
    cfg_limit_t l = rpm("team_rpm", "team", 300, 60 * S, 60);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t-42", NULL), GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"team_rpm\";q=300;w=60");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Limit-Requests"), "300");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "59");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "200ms");
    cr_assert_str_eq(hdr(&r, "RateLimit"), "\"team_rpm\";r=59;t=1");
    cr_assert_null(hdr(&r, "Retry-After"));
    cr_assert_null(hdr(&r, "X-Ratelimit-Limit-Tokens"));
    cr_assert_str_eq(r.limit, "team_rpm");
    cr_assert_eq(r.remaining, 59);
    gov_engine_destroy(e);
}

Test(disclosure, burst_at_amount_reads_299_of_300)
{
    cfg_limit_t l = rpm("team_rpm", "team", 300, 60 * S, 0);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t-42", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "299");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Limit-Requests"), "300");
    gov_engine_destroy(e);
}

Test(disclosure, off_writes_no_rate_headers)
{
    cfg_limit_t l = rpm("team_rpm", "team", 1, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, false);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_eq(r.n_headers, 0);
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_not(r.admit);
    cr_assert_eq(r.n_headers, 1, "only the verdict's Retry-After");
    cr_assert_str_eq(hdr(&r, "Retry-After"), "60");
    gov_engine_destroy(e);
}

Test(disclosure, deny_carries_retry_after_and_reset_as_go_duration)
{
    cfg_limit_t l = rpm("slow", "team", 10, 3600 * S, 1); /* T = 6 min */
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "6m0s");
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(r.retry_after_s, 360);
    cr_assert_str_eq(hdr(&r, "Retry-After"), "360");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "0");
    gov_engine_destroy(e);
}

Test(disclosure, policy_scales_a_period_below_one_second_to_whole_seconds)
{
    cfg_limit_t l = rpm("fast", "team", 5, S / 2, 5);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"fast\";q=10;w=1");
    gov_engine_destroy(e);
}

Test(disclosure, tightest_by_remaining_over_depth_and_tokens_trio)
{
    cfg_limit_t ls[] = {
        rpm("team_rpm", "team", 300, 60 * S, 60),
        tpm("team_tpm", "team", 100000, 60 * S, 20000),
    };
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    /* 59/60 of rpm left against 10000/20000 of tpm: tpm is the tightest */
    gov_result_t r = decide(e, &s, 10000, T0);
    cr_assert(r.admit);
    cr_assert_str_eq(r.limit, "team_tpm");
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"team_tpm\";q=100000;qu=\"tokens\";w=60");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Limit-Tokens"), "100000");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Tokens"), "10000");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Tokens"), "6s");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "59");
    gov_engine_destroy(e);
}

Test(disclosure, redis_limits_are_never_disclosed)
{
    cfg_limit_t l = rpm("team_rpm", "team", 300, 60 * S, 60);
    l.store = CFG_STORE_REDIS;
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    /* no redis store wired: unavailable, fail open runs the local fallback, still undisclosed */
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_eq(r.n_headers, 0);
    gov_engine_destroy(e);
}

Test(decide, denial_in_one_limit_consumes_nothing_in_another)
{
    cfg_limit_t ls[] = {
        rpm("key_rpm", "key", 100, 60 * S, 100),
        rpm("team_rpm", "team", 1, 60 * S, 1),
    };
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    for (int i = 0; i < 5; i++) {
        r = decide(e, &s, GOV_NO_TOKENS, T0);
        cr_assert_eq(r.verdict, GOV_DENY);
        cr_assert_str_eq(r.limit, "team_rpm");
    }
    /* key_rpm was charged by the admitted request only, not by the five denied ones: a request
     * naming the key alone (key_rpm applies, team_rpm does not) reads the engine's own counter,
     * and after it 100 - 2 are left */
    gov_subject_t k;
    r = decide(e, subj(&k, "key", "k", NULL), GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_str_eq(r.limit, "key_rpm");
    cr_assert_eq(r.remaining, 98, "key_rpm was charged by a denied decision");
    gov_limit_metrics_t lm[2];
    cr_assert_eq(gov_engine_limit_metrics(e, lm, 2), 2);
    cr_assert_eq(lm[0].outcomes[GOV_OUT_ADMIT], 7, "key_rpm admitted in every probe");
    cr_assert_eq(lm[1].outcomes[GOV_OUT_DENY], 5);
    gov_engine_destroy(e);
}

Test(decide, denying_limit_is_the_one_with_the_largest_retry)
{
    cfg_limit_t ls[] = {
        rpm("short", "team", 1, 10 * S, 1),
        rpm("long", "key", 1, 100 * S, 1),
    };
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0 + S);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_str_eq(r.limit, "long");
    cr_assert_eq(r.retry_after_s, 99);
    gov_engine_destroy(e);
}

Test(decide, cost_above_the_burst_is_unfittable_with_its_code)
{
    cfg_limit_t ls[] = {
        rpm("team_rpm", "team", 300, 60 * S, 60),
        tpm("team_tpm", "team", 100000, 60 * S, 20000),
    };
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), 20001, T0);
    cr_assert_eq(r.verdict, GOV_UNFITTABLE);
    cr_assert_not(r.admit);
    cr_assert_str_eq(r.code, "quota_cost_unfittable");
    cr_assert_str_eq(r.limit, "team_tpm");
    cr_assert_eq(r.retry_after_s, 0);
    cr_assert_null(hdr(&r, "Retry-After"));
    /* and nothing was consumed: rpm still has its whole burst */
    r = decide(e, &s, 1, T0);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "59");
    gov_engine_destroy(e);
}

Test(decide, soft_limit_admits_and_reports_the_would_be_denial)
{
    cfg_limit_t ls[] = {
        rpm("hard", "team", 100, 60 * S, 100),
        rpm("soft", "team", 1, 60 * S, 1),
    };
    ls[1].posture.enforce_hard = 0;
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.n_soft_denied, 0);
    r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(r.admit);
    cr_assert_eq(r.n_soft_denied, 1);
    cr_assert_str_eq(r.soft_denied[0], "soft");
    cr_assert_str_eq(r.limit, "hard");
    gov_engine_destroy(e);
}

Test(decide, mode_off_skips_the_limit)
{
    cfg_limit_t l = rpm("off", "team", 1, 60 * S, 1);
    l.posture.on = 0;
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    for (int i = 0; i < 3; i++) {
        gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
        cr_assert(r.admit);
        cr_assert_str_eq(r.limit, "");
        cr_assert_eq(r.remaining, -1);
        cr_assert_eq(r.n_headers, 0);
    }
    gov_engine_destroy(e);
}

Test(decide, global_applies_to_every_subject_as_one_counter)
{
    cfg_limit_t l = rpm("all", "global", 2, 60 * S, 2);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t a, b, none = {.n = 0};
    cr_assert(decide(e, subj(&a, "team", "a", NULL), GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, subj(&b, "team", "b", NULL), GOV_NO_TOKENS, T0).admit);
    cr_assert_not(decide(e, &none, GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}

Test(decide, unnamed_level_does_not_apply)
{
    cfg_limit_t l = rpm("team_rpm", "team", 1, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "key", "k", NULL);
    for (int i = 0; i < 3; i++)
        cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}

Test(decide, tpm_without_tokens_is_a_clear_error)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r;
    cr_assert_eq(
        gov_decide(e, NULL, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0, &r, NULL, NULL),
        GOV_ETOKENS);
    cr_assert_eq(r.status, GOV_ETOKENS);
    cr_assert_eq(r.err.code, GOV_ETOKENS);
    cr_assert_str_eq(r.err.path, "tokens");
    cr_assert_str_eq(r.err.message, "required: tpm limit \"team_tpm\" applies");
    cr_assert_str_eq(gov_strcode(r.status), "tokens_required");
    cr_assert_eq(gov_decide(e, NULL, &s, -5, T0, &r, NULL, NULL), GOV_ERANGE);
    cr_assert_eq(gov_decide(e, NULL, &s, (INT64_C(1) << 40) + 1, T0, &r, NULL, NULL), GOV_ERANGE);
    gov_engine_destroy(e);
}

Test(decide, malformed_subjects_are_named_and_change_nothing)
{
    cfg_limit_t l = rpm("team_rpm", "team", 1, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r;
    subj(&s, "team", "t", "team", "u", NULL);
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, NULL, NULL), GOV_ESUBJECT);
    cr_assert_eq(r.err.code, GOV_ESUBJECT);
    cr_assert_str_eq(r.err.path, "subject.team");
    cr_assert_str_eq(r.err.message, "level given twice");
    char id[GOV_ID_MAX + 2];
    memset(id, 'x', sizeof(id) - 1);
    id[sizeof(id) - 1] = 0;
    subj(&s, "team", id, NULL);
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, NULL, NULL), GOV_ESUBJECT);
    cr_assert_str_eq(r.err.path, "subject.team");
    cr_assert_str_eq(r.err.message, "id longer than 256 bytes");
    s.n = GOV_SUBJECT_MAX + 1;
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, NULL, NULL), GOV_ESUBJECT);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 0);
    cr_assert(decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}

Test(decide, window_algorithms_disclose_amount_as_depth)
{
    cfg_limit_t l = mk_limit("win", "team", CFG_TYPE_RPM, RA_FIXED_WINDOW, 10, 8 * S, 0);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, 2 * S);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "9");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Reset-Requests"), "6s");
    gov_engine_destroy(e);
}

Test(engine, builds_from_the_embedded_default_config)
{
    cfg_config_t *cfg = NULL;
    cfg_report_t rep = {0};
    cr_assert_eq(cfg_load_file(TT_SOURCE_DIR "/config/default.yaml", &cfg, &rep), 0);
    cr_assert_eq(cfg_arm(cfg, &rep), 0);
    gov_engine_t *e = NULL;
    tt_err_t err;
    cr_assert_eq(gov_engine_create_config(&e, NULL, cfg, &err), 0, "%s", err.message);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters_max, (uint64_t)cfg->server.max_counters);
    gov_engine_destroy(e);
    cfg_free(cfg);
    cfg_report_free(&rep);
}

/* ---- settle and charge (issues 12, 23)
 * ---------------------------------------------------------------------- */

static int64_t remaining_tokens(gov_engine_t *e, const gov_subject_t *s, int64_t now)
{
    gov_result_t r = decide(e, s, 0, now); /* a zero-token decision reads without spending */
    const char *v = hdr(&r, "X-Ratelimit-Remaining-Tokens");
    cr_assert_not_null(v);
    return strtoll(v, NULL, 10);
}

static gov_result_t settle(gov_engine_t *e, uint64_t reservation, int64_t actual, int64_t now)
{
    gov_result_t r;
    int rc = gov_settle(e, NULL, reservation, actual, now, &r, NULL, NULL);
    cr_assert_eq(rc, 0, "settle: %d %s", rc, r.err.message);
    return r;
}

static gov_result_t charge(gov_engine_t *e, const gov_subject_t *s, int64_t tokens, int64_t now)
{
    gov_result_t r;
    int rc = gov_charge(e, s, tokens, now, &r, NULL, NULL);
    cr_assert_eq(rc, 0, "charge: %d %s", rc, r.err.message);
    return r;
}

/* An admitted tpm decision and its reservation. */
static uint64_t reserve(gov_engine_t *e, const gov_subject_t *s, int64_t tokens, int64_t now)
{
    gov_result_t r = decide(e, s, tokens, now);
    cr_assert(r.admit);
    cr_assert_neq(r.reservation, 0, "an admitted tpm decision carries a reservation");
    return r.reservation;
}

Test(settle, reserve_16384_then_settle_1000_restores_the_headroom)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t id = reserve(e, &s, 16384, T0);
    cr_assert_eq(remaining_tokens(e, &s, T0), 20000 - 16384);
    gov_result_t r = settle(e, id, 1000, T0);
    cr_assert_eq(r.settled, 1);
    cr_assert_not(r.already_settled);
    int64_t left = remaining_tokens(e, &s, T0); /* the next decision shows the refund */
    cr_assert(left >= 20000 - 1000 - 1 && left <= 20000 - 1000, "left %lld", (long long)left);
    gov_engine_destroy(e);
}

Test(settle, an_overrun_pushes_the_next_admission_out_by_the_overrun)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000); /* T = 600 us, tau = 12 s */
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    settle(e, reserve(e, &s, 16384, T0), 16384 + 50000, T0);
    /* TAT = T0 + 66384 x 600 us = T0 + 39.8304 s; one token fits once TAT + T - tau <= now */
    int64_t allow_at = T0 + INT64_C(66385) * 600000 - 12 * S;
    gov_result_t r = decide(e, &s, 1, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(r.retry_after_s, ra_ceil_s(allow_at - T0));
    cr_assert_eq(r.retry_after_s, 28);
    cr_assert_not(decide(e, &s, 1, allow_at - 1).admit);
    cr_assert(decide(e, &s, 1, allow_at).admit);
    gov_engine_destroy(e);
}

Test(settle, a_refund_on_a_full_bucket_changes_nothing)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    /* a key that has refilled since its decision: still full after the refund */
    uint64_t id = reserve(e, &s, 16384, T0);
    settle(e, id, 0, T0 + 60 * S);
    cr_assert_eq(remaining_tokens(e, &s, T0 + 60 * S), 20000);
    cr_assert(decide(e, &s, 20000, T0 + 60 * S).admit);
    cr_assert_not(decide(e, &s, 1, T0 + 60 * S).admit);
    gov_engine_destroy(e);
}

Test(settle, corrects_every_tpm_limit_the_decision_charged_and_no_rpm)
{
    cfg_limit_t ls[] = {
        tpm("team_tpm", "team", 100000, 60 * S, 20000),
        tpm("key_tpm", "key", 100000, 60 * S, 20000),
        rpm("team_rpm", "team", 10, 60 * S, 10),
        tpm("org_tpm", "org", 100000, 60 * S, 20000),
    };
    gov_engine_t *e = mk_engine(ls, 4, true);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    gov_result_t r = settle(e, reserve(e, &s, 10000, T0), 10, T0);
    cr_assert_eq(r.settled, 2);
    cr_assert_eq(remaining_tokens(e, &s, T0), 20000 - 10);
    gov_engine_destroy(e);
}

Test(settle, a_made_up_reservation_is_refused_and_refunds_nothing)
{
    /* issue 23, item 2: the key has spent its burst; no id may hand it a full bucket */
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t id = reserve(e, &s, 20000, T0);
    gov_result_t r;
    const uint64_t guesses[] = {0, 1, id + 1, id - 1, id ^ (UINT64_C(1) << 32), UINT64_MAX};
    for (size_t i = 0; i < sizeof(guesses) / sizeof(guesses[0]); i++) {
        cr_assert_eq(gov_settle(e, NULL, guesses[i], 0, T0, &r, NULL, NULL), GOV_ERESERVATION);
        cr_assert_str_eq(gov_strcode(r.status), "unknown_reservation");
    }
    cr_assert_eq(r.err.code, GOV_ERESERVATION);
    cr_assert_str_eq(r.err.path, "reservation");
    cr_assert_str_eq(r.err.message,
                     "unknown or expired (never issued, another client's, not settled within 900 s "
                     "of its decision, or evicted from a full pool); it stays charged");
    cr_assert_eq(remaining_tokens(e, &s, T0), 0);
    gov_engine_destroy(e);
}

Test(settle, a_reservation_is_settled_once)
{
    /* issue 23, item 2: a client retrying a settle after a timeout must not refund twice */
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t id = reserve(e, &s, 20000, T0);
    cr_assert_eq(settle(e, id, 10000, T0).settled, 1);
    gov_result_t r = settle(e, id, 10000, T0);
    cr_assert(r.already_settled);
    cr_assert_eq(r.settled, 0);
    r = settle(e, id, 0, T0); /* another actual changes nothing either */
    cr_assert(r.already_settled);
    cr_assert_eq(remaining_tokens(e, &s, T0), 10000);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.settles, 1);
    cr_assert_eq(m.reservations, 0, "a settled reservation is no longer open");
    gov_engine_destroy(e);
}

Test(settle, only_admitted_decisions_that_charge_tokens_reserve)
{
    cfg_limit_t ls[] = {tpm("team_tpm", "team", 100000, 60 * S, 20000),
                        rpm("key_rpm", "key", 2, 60 * S, 2)}; /* 2 requests, then deny */
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s, k;
    subj(&s, "team", "t", "key", "k", NULL);
    cr_assert_eq(decide(e, &s, 0, T0).reservation, 0, "a reading charges nothing");
    cr_assert_neq(decide(e, &s, 5, T0).reservation, 0);
    gov_result_t r = decide(e, &s, 5, T0);
    cr_assert_not(r.admit);
    cr_assert_eq(r.reservation, 0, "a denial charges nothing");
    cr_assert_eq(decide(e, subj(&k, "key", "u", NULL), GOV_NO_TOKENS, T0).reservation, 0,
                 "no tpm limit");
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.reservations, 1);
    gov_engine_destroy(e);
}

static gov_engine_t *with_reservations(const cfg_limit_t *l, size_t max, int64_t ttl)
{
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {5, 6}, .max_reservations = max, .reservation_ttl_ns = ttl};
    cr_assert_eq(gov_engine_create(&e, &o, l, 1, true, &err), 0, "%s", err.message);
    return e;
}

Test(settle, a_reservation_not_settled_in_time_expires_as_charged)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 600 * S, 20000); /* T = 6 ms */
    gov_engine_t *e = with_reservations(&l, 0, 10 * S);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t id = reserve(e, &s, 20000, T0);
    gov_engine_tick(e, T0 + 10 * S);
    gov_result_t r;
    cr_assert_eq(gov_settle(e, NULL, id, 0, T0 + 10 * S, &r, NULL, NULL), GOV_ERESERVATION);
    /* still charged: 10 s refilled 1666 tokens, not the 20000 a refund would give */
    cr_assert_eq(remaining_tokens(e, &s, T0 + 10 * S), 1666);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.reservations, 0);
    cr_assert_eq(m.reservations_expired, 1);
    gov_engine_destroy(e);
}

/* SPEC §9: a reservation is its client's. Another owner's settle is told the id is unknown and
 * refunds nothing; the owner's own settle still applies, once. */
Test(settle, a_reservation_is_settled_by_its_owner_alone)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, INT64_C(8760) * 3600 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_client_t a = {.account = 1, .owner = 7}, b = {.account = 2, .owner = 8};
    gov_result_t r;
    cr_assert_eq(gov_decide(e, &a, &s, 20000, T0, &r, NULL, NULL), 0);
    cr_assert(r.admit && r.reservation);
    uint64_t id = r.reservation;
    cr_assert_eq(gov_settle(e, &b, id, 0, T0, &r, NULL, NULL), GOV_ERESERVATION);
    cr_assert(strstr(r.err.message, "another client's"), "%s", r.err.message);
    cr_assert_eq(gov_settle(e, NULL, id, 0, T0, &r, NULL, NULL), GOV_ERESERVATION,
                 "the anonymous client is another owner too");
    cr_assert_eq(remaining_tokens(e, &s, T0), 0, "nothing was refunded");
    cr_assert_eq(gov_settle(e, &a, id, 5000, T0, &r, NULL, NULL), 0);
    cr_assert_eq(r.settled, 1);
    cr_assert_eq(remaining_tokens(e, &s, T0), 15000, "the owner's settle refunded 15000");
    gov_engine_destroy(e);
}

/* Issue 34 item 9: one client filling the pool with large subjects must not flush another
 * client's open reservations; a full pool takes from the client holding the most. */
Test(settle, one_client_filling_the_pool_cannot_flush_another_clients_reservations)
{
    cfg_limit_t l = tpm("key_tpm", "key", INT64_C(1) << 40, INT64_C(8760) * 3600 * S, 0);
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {5, 6}, .reservation_bytes = 64 * 1024};
    cr_assert_eq(gov_engine_create(&e, &o, &l, 1, true, &err), 0, "%s", err.message);
    gov_client_t a = {.account = 1, .owner = 1}, b = {.account = 2, .owner = 2};
    gov_subject_t s;
    gov_result_t r;
    cr_assert_eq(gov_decide(e, &a, subj(&s, "key", "a", NULL), 1000, T0, &r, NULL, NULL), 0);
    uint64_t mine = r.reservation;
    cr_assert_neq(mine, 0);
    /* b: 200 reservations of ~4 KiB each (16 levels of 250-byte ids), 12 times the budget */
    static char id[16][251];
    static const char *const level[16] = {"key", "l1", "l2",  "l3",  "l4",  "l5",  "l6",  "l7",
                                          "l8",  "l9", "l10", "l11", "l12", "l13", "l14", "l15"};
    for (int i = 0; i < 200; i++) {
        s.n = 16;
        for (int k = 0; k < 16; k++) {
            memset(id[k], 'a' + k, 250);
            snprintf(id[k], 12, "b%d-%d-", i, k);
            id[k][strlen(id[k])] = 'x';
            s.pairs[k] = (gov_pair_t){level[k], strlen(level[k]), id[k], 250};
        }
        cr_assert_eq(gov_decide(e, &b, &s, 1, T0, &r, NULL, NULL), 0, "%s", r.err.message);
        cr_assert_neq(r.reservation, 0);
    }
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_gt(m.reservations_evicted, 150, "b's own reservations made room (%llu)",
                 (unsigned long long)m.reservations_evicted);
    cr_assert_eq(gov_settle(e, &a, mine, 10, T0, &r, NULL, NULL), 0,
                 "a's reservation was flushed: %s", r.err.message);
    cr_assert_eq(r.settled, 1);
    gov_engine_destroy(e);
}

Test(settle, a_full_pool_ends_its_oldest_reservation_which_stays_charged)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = with_reservations(&l, 2, 0);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t a = reserve(e, &s, 5000, T0), b = reserve(e, &s, 5000, T0),
             c = reserve(e, &s, 5000, T0);
    gov_result_t r;
    cr_assert_eq(gov_settle(e, NULL, a, 0, T0, &r, NULL, NULL), GOV_ERESERVATION, "a was evicted");
    cr_assert_eq(settle(e, b, 0, T0).settled, 1);
    cr_assert_eq(settle(e, c, 0, T0).settled, 1);
    cr_assert_eq(remaining_tokens(e, &s, T0), 15000, "a's 5000 stay charged");
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.reservations_evicted, 1);
    gov_engine_destroy(e);
}

Test(settle, a_reload_that_resets_the_limit_leaves_its_new_counter_alone)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    cfg_limit_t changed = tpm("team_tpm", "team", 100000, 60 * S, 30000); /* new identity */
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    uint64_t kept = reserve(e, &s, 10000, T0);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, &l, 1, true, NULL, NULL, &err), 0);
    cr_assert_eq(settle(e, kept, 0, T0).settled, 1, "a kept limit is corrected");
    uint64_t reset = reserve(e, &s, 10000, T0);
    cr_assert_eq(gov_engine_reload(e, &changed, 1, true, NULL, NULL, &err), 0);
    cr_assert(decide(e, &s, 30000, T0).admit);
    cr_assert_eq(settle(e, reset, 0, T0).settled, 0, "the reset limit's counters are gone");
    cr_assert_eq(remaining_tokens(e, &s, T0), 0, "and the new counter was not refunded");
    gov_engine_destroy(e);
}

Test(charge, counts_tokens_on_every_tpm_limit_and_never_refunds)
{
    cfg_limit_t ls[] = {tpm("team_tpm", "team", 100000, 60 * S, 20000),
                        tpm("key_tpm", "key", 100000, 60 * S, 20000),
                        rpm("team_rpm", "team", 10, 60 * S, 10)};
    gov_engine_t *e = mk_engine(ls, 3, true);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    cr_assert_eq(charge(e, &s, 5000, T0).settled, 2);
    cr_assert_eq(remaining_tokens(e, &s, T0), 15000);
    cr_assert_eq(charge(e, &s, 0, T0).settled, 2);
    cr_assert_eq(remaining_tokens(e, &s, T0), 15000, "a charge of 0 gives nothing back");
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.charges, 2);
    cr_assert_eq(m.reservations, 0, "a charge reserves nothing");
    gov_engine_destroy(e);
}

Test(settle, bad_input_is_a_clear_error_and_changes_nothing)
{
    cfg_limit_t ls[] = {
        tpm("team_tpm", "team", 100000, 60 * S, 20000),
        rpm("key_rpm", "key", 10, 60 * S, 10),
    };
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s, k;
    subj(&s, "team", "t", NULL);
    uint64_t id = reserve(e, &s, 16384, T0);
    gov_result_t r;
    cr_assert_eq(gov_settle(e, NULL, id, -7, T0, &r, NULL, NULL), GOV_ERANGE);
    cr_assert_eq(gov_settle(e, NULL, id, (INT64_C(1) << 40) + 1, T0, &r, NULL, NULL), GOV_ERANGE);
    cr_assert_eq(r.err.code, GOV_ERANGE);
    cr_assert_str_eq(r.err.path, "actual");
    cr_assert_str_eq(r.err.message, "1099511627777 is outside 0..2^40");
    cr_assert_eq(gov_charge(e, &s, -1, T0, &r, NULL, NULL), GOV_ERANGE);
    cr_assert_str_eq(r.err.path, "tokens");
    cr_assert_str_eq(r.err.message, "-1 is outside 0..2^40");
    cr_assert_eq(gov_charge(e, subj(&k, "key", "k", NULL), 10, T0, &r, NULL, NULL), GOV_ENOTPM);
    cr_assert_str_eq(gov_strcode(r.status), "no_tpm_limit");
    cr_assert_eq(remaining_tokens(e, &s, T0), 20000 - 16384);
    cr_assert_eq(settle(e, id, 0, T0).settled, 1, "the bad settles left it open");
    gov_engine_destroy(e);
}

Test(charge, the_upper_bound_2_pow_40_is_accepted)
{
    cfg_limit_t l = tpm("team_tpm", "team", 100000, 60 * S, 20000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert_eq(charge(e, &s, INT64_C(1) << 40, T0).settled, 1);
    cr_assert_not(decide(e, &s, 1, T0).admit);
    gov_engine_destroy(e);
}

Test(charge, a_huge_overrun_leaves_a_deny_with_a_retry_not_unfittable)
{
    /* issue 23, item 3, through the engine: tpm 16384/1h, 2^40 tokens overrun */
    cfg_limit_t l = tpm("team_tpm", "team", 16384, 3600 * S, 16384);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    charge(e, &s, INT64_C(1) << 40, T0);
    gov_result_t r = decide(e, &s, 1, T0);
    cr_assert_eq(r.verdict, GOV_DENY, "verdict %s", gov_verdict_name(r.verdict));
    cr_assert_null(r.code);
    cr_assert_gt(r.retry_after_s, 3600, "the retry says how long");
    cr_assert_not_null(hdr(&r, "Retry-After"));
    gov_engine_destroy(e);
}

/* ---- reload --------------------------------------------------------------------------------- */

typedef struct reload_log {
    char lines[16][96];
    int n;
} reload_log_t;

static void log_reload(void *ctx, const char *id, gov_reload_action_t a)
{
    reload_log_t *log = ctx;
    snprintf(log->lines[log->n++], sizeof(log->lines[0]), "%s %s", id, gov_reload_action_name(a));
}

Test(reload, keeps_unchanged_counters_and_resets_only_what_changed)
{
    cfg_limit_t old[] = {
        rpm("kept", "team", 10, 60 * S, 1),
        rpm("changed", "team", 10, 60 * S, 1),
        rpm("gone", "team", 10, 60 * S, 1),
        mk_limit("win", "team", CFG_TYPE_RPM, RA_FIXED_WINDOW, 1, 60 * S, 0),
    };
    gov_engine_t *e = mk_engine(old, 4, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    cr_assert_not(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    cfg_limit_t neu[] = {
        rpm("added", "team", 10, 60 * S, 10), rpm("kept", "team", 10, 60 * S, 1),
        rpm("changed", "team", 20, 60 * S, 1),
        mk_limit("win", "team", CFG_TYPE_RPM, RA_FIXED_WINDOW, 1, 60 * S, 99), /* inert */
    };
    reload_log_t log = {0};
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, neu, 4, true, log_reload, &log, &err), 0);
    cr_assert_eq(log.n, 5);
    cr_assert_str_eq(log.lines[0], "added added");
    cr_assert_str_eq(log.lines[1], "kept kept");
    cr_assert_str_eq(log.lines[2], "changed reset");
    cr_assert_str_eq(log.lines[3], "win kept");
    cr_assert_str_eq(log.lines[4], "gone removed");
    /* kept and win still remember the request; changed starts fresh */
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    gov_limit_metrics_t m[4];
    gov_engine_limit_metrics(e, m, 4);
    cr_assert_str_eq(m[1].id, "kept");
    cr_assert_eq(m[1].outcomes[GOV_OUT_DENY], 2, "counts carry over a reload");
    cr_assert_eq(m[2].outcomes[GOV_OUT_ADMIT], 2, "changed admitted, it was reset");
    cr_assert_eq(m[3].outcomes[GOV_OUT_DENY], 2);
    gov_engine_destroy(e);
}

Test(reload, a_bad_config_changes_nothing)
{
    cfg_limit_t l = rpm("kept", "team", 10, 60 * S, 1);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    cfg_limit_t dup[] = {rpm("a", "team", 10, 60 * S, 1), rpm("a", "team", 10, 60 * S, 1)};
    reload_log_t log = {0};
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, dup, 2, true, log_reload, &log, &err), GOV_ELIMITS);
    cr_assert_eq(err.code, GOV_ELIMITS);
    cr_assert_str_eq(err.path, "governance.limits[1]");
    cr_assert_str_eq(err.message, "duplicate id \"a\"");
    cr_assert_eq(log.n, 0);
    cr_assert_not(decide(e, &s, GOV_NO_TOKENS, T0).admit, "the old config still serves");
    gov_engine_destroy(e);
}

/* One rpm request at T0 from each of `n` distinct ids of `level`. */
static void one_request_each(gov_engine_t *e, const char *level, int n)
{
    gov_subject_t s;
    for (int i = 0; i < n; i++) {
        char id[16];
        snprintf(id, sizeof(id), "id-%d", i);
        decide(e, subj(&s, level, id, NULL), GOV_NO_TOKENS, T0);
    }
}

Test(reload, dropped_counters_are_reclaimed_by_ticks)
{
    cfg_limit_t l = rpm("gone", "team", 10, 60 * S, 10);
    gov_engine_t *e = mk_engine(&l, 1, true);
    one_request_each(e, "team", 100);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 100);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, NULL, 0, true, NULL, NULL, &err), 0);
    gov_engine_tick(e, T0);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 0);
    cr_assert_eq(m.reloads, 1);
    gov_engine_destroy(e);
}

/* ---- the cap -------------------------------------------------------------------------------- */

static gov_engine_t *capped(cfg_limit_t *l, size_t n, size_t cap)
{
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.max_counters = cap, .hash_seed = {3, 4}};
    cr_assert_eq(gov_engine_create(&e, &o, l, n, true, &err), 0);
    return e;
}

Test(cap, fail_open_admits_uncounted_keys_past_the_cap)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1, 60 * S, 1);
    gov_engine_t *e = capped(&l, 1, 2);
    gov_subject_t a, b, c;
    cr_assert(decide(e, subj(&a, "key", "a", NULL), GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, subj(&b, "key", "b", NULL), GOV_NO_TOKENS, T0).admit);
    subj(&c, "key", "c", NULL);
    cr_assert(decide(e, &c, GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, &c, GOV_NO_TOKENS, T0).admit, "uncounted: posture.fail open");
    cr_assert_not(decide(e, &a, GOV_NO_TOKENS, T0).admit, "old keys keep their state");
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 2);
    cr_assert_eq(m.cap_hits, 2);
    cr_assert_eq(m.store_errors, 2);
    gov_limit_metrics_t lm;
    gov_engine_limit_metrics(e, &lm, 1);
    cr_assert_eq(lm.outcomes[GOV_OUT_FAIL_OPEN], 2);
    gov_engine_destroy(e);
}

Test(cap, fail_closed_denies_new_keys_with_retry_one)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1, 60 * S, 1);
    l.posture.fail_open = 0;
    gov_engine_t *e = capped(&l, 1, 1);
    gov_subject_t a, b;
    cr_assert(decide(e, subj(&a, "key", "a", NULL), GOV_NO_TOKENS, T0).admit);
    gov_result_t r = decide(e, subj(&b, "key", "b", NULL), GOV_NO_TOKENS, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(r.retry_after_s, 1);
    cr_assert_str_eq(r.limit, "key_rpm");
    cr_assert(r.unavailable, "the denial is the posture's alone");
    gov_engine_destroy(e);
}

Test(cap, a_real_denial_beside_a_fail_closed_one_is_not_unavailable)
{
    cfg_limit_t l[2] = {rpm("key_rpm", "key", 1, 60 * S, 1), rpm("team_rpm", "team", 1, 60 * S, 1)};
    l[0].posture.fail_open = 0;
    gov_engine_t *e = capped(l, 2, 2);
    gov_subject_t a, b;
    cr_assert(decide(e, subj(&a, "key", "a", "team", "t", NULL), GOV_NO_TOKENS, T0).admit);
    gov_result_t r = decide(e, subj(&b, "key", "b", "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_not(r.unavailable, "team_rpm denies on its own count");
    r = decide(e, subj(&b, "key", "a", "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert_not(r.unavailable);
    gov_engine_destroy(e);
}

Test(cap, levels_known_are_those_limits_attach_to)
{
    cfg_limit_t l[2] = {rpm("key_rpm", "key", 1, 60 * S, 1), rpm("team_rpm", "team", 1, 60 * S, 1)};
    gov_engine_t *e = capped(l, 2, 2);
    cr_assert(gov_level_known(e, "team", 4));
    cr_assert(gov_level_known(e, "key", 3));
    cr_assert_not(gov_level_known(e, "tea", 3));
    cr_assert_not(gov_level_known(e, "taem", 4));
    cr_assert_not(gov_level_known(e, "global", 6));
    gov_engine_destroy(e);
}

Test(cap, idle_counters_make_room_before_new_keys_are_refused)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1, 60 * S, 1);
    l.posture.fail_open = 0;
    gov_engine_t *e = capped(&l, 1, 2);
    gov_subject_t a, b, c;
    cr_assert(decide(e, subj(&a, "key", "a", NULL), GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, subj(&b, "key", "b", NULL), GOV_NO_TOKENS, T0).admit);
    /* a minute later both are idle: c gets a counter */
    gov_result_t r = decide(e, subj(&c, "key", "c", NULL), GOV_NO_TOKENS, T0 + 61 * S);
    cr_assert(r.admit);
    cr_assert_not(decide(e, &c, GOV_NO_TOKENS, T0 + 61 * S).admit, "and it counts");
    gov_engine_destroy(e);
}

Test(cap, decisions_on_held_keys_at_the_cap_reclaim_nothing)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1, 60 * S, 1);
    gov_engine_t *e = capped(&l, 1, 2);
    gov_subject_t a, b, c;
    cr_assert(decide(e, subj(&a, "key", "a", NULL), GOV_NO_TOKENS, T0).admit);
    cr_assert(decide(e, subj(&b, "key", "b", NULL), GOV_NO_TOKENS, T0).admit);
    /* a minute later both are idle, the table full: a's decision needs no room, takes none */
    cr_assert(decide(e, &a, GOV_NO_TOKENS, T0 + 61 * S).admit);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters_reclaimed, 0, "a held key does not pay the cap's reclamation");
    cr_assert_eq(m.counters, 2);
    /* a new key still gets room from the idle one */
    cr_assert(decide(e, subj(&c, "key", "c", NULL), GOV_NO_TOKENS, T0 + 61 * S).admit);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters_reclaimed, 1);
    cr_assert_eq(m.cap_hits, 0);
    gov_engine_destroy(e);
}

/* ---- metrics -------------------------------------------------------------------------------- */

Test(metrics, decisions_are_counted_by_verdict_and_limit)
{
    cfg_limit_t ls[] = {rpm("a", "team", 1, 60 * S, 1), tpm("b", "team", 100000, 60 * S, 20000)};
    gov_engine_t *e = mk_engine(ls, 2, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    decide(e, &s, 1, T0);
    decide(e, &s, 1, T0);
    decide(e, &s, 30000, T0 + 3600 * S);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.decisions[GOV_ADMIT], 1);
    cr_assert_eq(m.decisions[GOV_DENY], 1);
    cr_assert_eq(m.decisions[GOV_UNFITTABLE], 1);
    cr_assert_eq(m.counters, 2);
    cr_assert_gt(m.table_bytes, 0);
    gov_limit_metrics_t lm[2];
    gov_engine_limit_metrics(e, lm, 2);
    cr_assert_eq(lm[0].outcomes[GOV_OUT_ADMIT], 2);
    cr_assert_eq(lm[0].outcomes[GOV_OUT_DENY], 1);
    cr_assert_eq(lm[1].outcomes[GOV_OUT_UNFITTABLE], 1);
    cr_assert_eq(lm[1].counters, 1);
    gov_engine_destroy(e);
}

Test(disclosure, numbers_of_every_width_are_written_whole)
{
    cfg_limit_t l = rpm("w", "team", INT64_C(1000000000), 60 * S, INT64_C(1234567890123));
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    gov_result_t r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Limit-Requests"), "1000000000");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "1234567890122");
    cr_assert_str_eq(hdr(&r, "RateLimit"), "\"w\";r=1234567890122;t=1");
    gov_engine_destroy(e);
}

Test(reload, a_tick_frees_a_bounded_slice_never_the_whole_table)
{
    cfg_limit_t l = rpm("key_rpm", "key", 1000, 60 * S, 1000);
    gov_engine_t *e = mk_engine(&l, 1, true);
    one_request_each(e, "key", 40000);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    uint64_t held = m.counters;
    cr_assert_geq(held, 39000, "per-operation reclamation found nothing idle yet");
    /* an hour later every counter is idle; one tick examines at most 16384 slots */
    gov_engine_tick(e, T0 + 3600 * S);
    gov_engine_metrics(e, &m);
    cr_assert_gt(m.counters, 0, "one tick is not a sweep");
    cr_assert_leq(held - m.counters, 16384);
    for (int i = 0; i < 16 && m.counters; i++) {
        gov_engine_tick(e, T0 + 3600 * S);
        gov_engine_metrics(e, &m);
    }
    cr_assert_eq(m.counters, 0, "ticks get through the table in a bounded number of slices");
    cr_assert_geq(m.counters_reclaimed, held);
    gov_engine_destroy(e);
}
