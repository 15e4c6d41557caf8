/* Arming: the catalogue's messages byte for byte, canonical compiled limits, the identity. */
#include <criterion/criterion.h>

#include "helpers.h"

/* The catalogue's messages, copied from shared/seed/rate-algorithms.txt. */
#define SEED_SHARE_TOKEN_BUCKET                                                                    \
    "Error: governance: compile limits: govern: limit \"team_rpm\": store \"share\": counter: "    \
    "store \"share\" requires an algorithm with a per-step effective-rate form "                   \
    "(ratealg.EffectiveLimiter); \"token_bucket\" has none \xe2\x80\x94 use algorithm \"gcra\"\n"
#define SEED_REDIS_TOKEN_BUCKET                                                                    \
    "Error: governance: compile limits: govern: limit \"team_rpm\": store \"redis\": counter: "    \
    "algorithm has no distributed (redis) form\n"
#define SEED_TPM_BURST                                                                             \
    "Error: governance: compile limits: govern: limit \"team_tpm\": tpm limit \"team_tpm\": "      \
    "burst 500 is below the reserve cap 16384 \xe2\x80\x94 an ordinary max-token reserve could "   \
    "never fit (a permanent 100% refusal); raise burst (default is amount 500) to at least the "   \
    "reserve cap\n"
#define SEED_WINDOW_CEILING                                                                        \
    "Error: governance: compile limits: govern: limit \"team_rpm\": sliding_window: limit "        \
    "100000 exceeds the packed window-counter ceiling 65535; the frozen int64 state holds a "      \
    "16-bit per-window counter \xe2\x80\x94 use algorithm \"gcra\" (unbounded) for limits this "   \
    "large\n"

#define TEAM_RPM(extra)                                                                            \
    "governance:\n  limits:\n    - id: team_rpm\n      attach: { level: team }\n"                  \
    "      type: rpm\n" extra
#define SHARE "shared_state:\n  share: { node_id: n1, seeds: [peer:7946] }\n"
#define REDIS "shared_state:\n  redis: { address: 127.0.0.1:6379, timeout: 50ms }\n"

static void expect_arm_error(const char *yaml, const char *want)
{
    char *validated = load_text(yaml, 0, NULL);
    cr_assert_str_eq(validated, "", "validate alone reported: %s", validated);
    char *armed = load_text(yaml, 1, NULL);
    cr_assert_str_eq(armed, want);
    free(validated);
    free(armed);
}

Test(arm, token_bucket_on_share_prints_the_catalogue_message)
{
    expect_arm_error(TEAM_RPM("      amount: 300\n      period: 1m\n      algorithm: token_bucket\n"
                              "      burst: 60\n      store: share\n") SHARE,
                     SEED_SHARE_TOKEN_BUCKET);
}

Test(arm, token_bucket_on_redis_prints_the_catalogue_message)
{
    expect_arm_error(TEAM_RPM("      amount: 300\n      period: 1m\n      algorithm: token_bucket\n"
                              "      burst: 60\n      store: redis\n") REDIS,
                     SEED_REDIS_TOKEN_BUCKET);
}

Test(arm, fixed_window_on_share_gets_the_same_message_with_its_own_name)
{
    char want[1024];
    snprintf(want, sizeof(want), "%s", SEED_SHARE_TOKEN_BUCKET);
    char *at = strstr(want, "\"token_bucket\"");
    memcpy(at, "\"fixed_window\"", 14);
    expect_arm_error(TEAM_RPM("      amount: 300\n      period: 1m\n      algorithm: fixed_window\n"
                              "      store: share\n") SHARE,
                     want);
}

Test(arm, the_same_limit_spelled_gcra_arms_on_share_and_redis)
{
    char *s = load_text(TEAM_RPM("      amount: 300\n      period: 1m\n      algorithm: gcra\n"
                                 "      burst: 60\n      store: share\n") SHARE,
                        1, NULL);
    char *r = load_text(TEAM_RPM("      amount: 300\n      period: 1m\n      algorithm: gcra\n"
                                 "      burst: 60\n      store: redis\n") REDIS,
                        1, NULL);
    cr_assert_str_eq(s, "");
    cr_assert_str_eq(r, "");
    free(s);
    free(r);
}

Test(arm, tpm_burst_below_the_reserve_cap_prints_the_catalogue_message)
{
    expect_arm_error("governance:\n  limits:\n    - id: team_tpm\n      attach: { level: team }\n"
                     "      type: tpm\n      amount: 500\n      period: 1m\n",
                     SEED_TPM_BURST);
}

Test(arm, large_sliding_window_on_redis_validates_clean_then_fails_to_arm)
{
    /* The catalogue's surprise, reproduced on purpose: the ceiling is the algorithm's, and the
     * local fallback limiter is built from the same config whatever the store. */
    expect_arm_error(TEAM_RPM("      amount: 100000\n      period: 1m\n"
                              "      algorithm: sliding_window\n      store: redis\n") REDIS,
                     SEED_WINDOW_CEILING);
}

Test(arm, every_failing_limit_is_reported_and_nothing_is_armed)
{
    cfg_config_t *cfg = NULL;
    cfg_report_t r = {0};
    const char *yaml =
        TEAM_RPM("      amount: 100000\n      period: 1m\n"
                 "      algorithm: sliding_window\n") "    - id: team_tpm\n      attach: { level: "
                                                      "team }\n      type: tpm\n      amount: 500\n"
                                                      "      period: 1m\n";
    cr_assert_eq(cfg_load_string("t.yaml", yaml, strlen(yaml), &cfg, &r), 0);
    cr_assert_eq(cfg_arm(cfg, &r), CFG_EINVALID);
    cr_assert_eq(r.n_errors, 2);
    cr_assert_not(cfg->armed);
    cfg_report_free(&r);
    cfg_free(cfg);
}

Test(arm, ledger_types_arm_with_a_warning_that_they_are_not_enforced)
{
    char *text =
        load_text("governance:\n  limits:\n    - id: budget\n      attach: { level: team }\n"
                  "      type: budget_usd\n      amount: 100\n      period: monthly\n",
                  1, NULL);
    cr_assert_str_eq(text, "Warning: governance.limits[0]: limit \"budget\": budget_usd is folded "
                           "from ledger rows, which this daemon does not hold: it validates but "
                           "is not enforced here\n");
    free(text);
}

/* ---- canonical form and identity ---- */

static cfg_limit_t armed_limit(const char *body)
{
    char yaml[2048];
    snprintf(yaml, sizeof(yaml),
             "%s%sshared_state:\n  redis: { address: 127.0.0.1:6379 }\n"
             "  share: { node_id: n1 }\n",
             TEAM_RPM(""), body);
    cfg_config_t *cfg = NULL;
    char *text = load_text(yaml, 1, &cfg);
    cr_assert_not_null(cfg, "%s", text);
    cfg_limit_t l = cfg->limits[0];
    free(text);
    cfg_free(cfg);
    return l;
}

Test(canonical, omitted_algorithm_and_gcra_compile_to_the_same_bytes)
{
    cfg_limit_t a = armed_limit("      amount: 300\n      period: 1m\n      burst: 60\n");
    cfg_limit_t b = armed_limit("      amount: 300\n      period: 1m\n      algorithm: gcra\n"
                                "      burst: 60\n");
    cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
    cr_assert_eq(a.identity, b.identity);
}

Test(canonical, the_defaults_compile_like_their_spelled_out_values)
{
    cfg_limit_t a = armed_limit("      amount: 300\n      period: 1m\n");
    cfg_limit_t b = armed_limit("      amount: 300\n      period: 60s\n      burst: 300\n"
                                "      store: local\n"
                                "      posture: { mode: \"on\", enforce: hard, fail: open }\n");
    cr_assert_eq(memcmp(&a, &b, sizeof(a)), 0);
}

#define WINDOW "      amount: 300\n      period: 1m\n      algorithm: sliding_window\n"
#define GCRA "      amount: 300\n      period: 1m\n      burst: 60\n"

/* The identity keys a limit's counters in a snapshot (and a fleet's replicas of two versions
 * must agree on it), so its value is pinned: FNV-1a 64 over the fields, as written. */
Test(identity, its_value_is_the_same_on_every_build)
{
    cr_assert_eq(armed_limit(GCRA).identity, UINT64_C(0x758e5544cc99bac0));
}

Test(identity, an_inert_window_burst_edit_keeps_the_counter)
{
    uint64_t none = armed_limit(WINDOW).identity;
    cr_assert_eq(armed_limit(WINDOW "      burst: 5\n").identity, none);
    cr_assert_eq(armed_limit(WINDOW "      burst: 500\n").identity, none);
}

Test(identity, a_gcra_burst_edit_resets_the_counter)
{
    cr_assert_neq(armed_limit(GCRA).identity,
                  armed_limit("      amount: 300\n      period: 1m\n      burst: 61\n").identity);
}

Test(identity, amount_period_store_and_algorithm_edits_reset_the_counter)
{
    uint64_t base = armed_limit(GCRA).identity;
    cr_assert_neq(armed_limit("      amount: 301\n      period: 1m\n      burst: 60\n").identity,
                  base);
    cr_assert_neq(armed_limit("      amount: 300\n      period: 2m\n      burst: 60\n").identity,
                  base);
    cr_assert_neq(armed_limit(GCRA "      store: redis\n").identity, base);
    cr_assert_neq(armed_limit(GCRA "      store: share\n").identity, base);
    cr_assert_neq(armed_limit(GCRA "      algorithm: token_bucket\n").identity, base);
    cr_assert_neq(armed_limit(WINDOW).identity, armed_limit("      amount: 300\n      period: 1m\n"
                                                            "      algorithm: fixed_window\n")
                                                    .identity);
}

Test(identity, a_posture_edit_keeps_the_counter)
{
    cr_assert_eq(armed_limit(GCRA).identity,
                 armed_limit(GCRA "      posture: { enforce: soft, fail: closed }\n").identity);
}

Test(identity, equals_the_published_hash_of_the_canonical_fields)
{
    cfg_limit_t l = armed_limit(GCRA);
    cr_assert_eq(l.identity, cfg_limit_identity(&l));
    cr_assert_neq(l.identity, 0);
}

/* The type/algorithm pairing rule the loader and `simulate` share: a code, no path (each caller
 * names its own field), the loader's message. */
Test(arm, tpm_with_another_algorithm_is_refused_by_code_with_the_loaders_message)
{
    tt_err_t err;
    cr_assert_eq(cfg_type_algorithm_check(CFG_TYPE_TPM, RA_GCRA, &err), 0);
    cr_assert_eq(cfg_type_algorithm_check(CFG_TYPE_RPM, RA_FIXED_WINDOW, &err), 0);
    cr_assert_eq(cfg_type_algorithm_check(CFG_TYPE_TPM, RA_FIXED_WINDOW, &err), CFG_EINVALID);
    cr_assert_eq(err.code, CFG_EINVALID);
    cr_assert_str_eq(err.path, "");
    cr_assert_str_eq(err.message, "type tpm takes algorithm \"gcra\" only; \"fixed_window\" is "
                                  "not available for a token rate");
}

/* ---- a share limit's burst over the fleet (issue 35) ---- */

static char *share_fleet(int replicas, int burst)
{
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "governance:\n  limits:\n    - id: fleet_rpm\n      attach: { level: team }\n"
             "      type: rpm\n      amount: 3200\n      period: 1m\n      burst: %d\n"
             "      store: share\n"
             "shared_state:\n  share: { node_id: n1, replicas: %d }\n",
             burst, replicas);
    return load_text(yaml, 1, NULL);
}

/* At 64 replicas, burst 64 leaves one unit to each: the roll bench's fleet admitted 95% of its cap
 * (74% with requests at 1.5x the share): arm says so, and says what burst to set. */
Test(arm, a_share_burst_of_fewer_than_four_units_a_replica_is_warned_about)
{
    char *text = share_fleet(64, 64);
    cr_assert_str_eq(text,
                     "Warning: governance.limits[0].burst: limit \"fleet_rpm\": burst 64 over 64 "
                     "replicas (shared_state.share.replicas) is 1 a replica: a bucket that small "
                     "turns arrival jitter into missed slots and the fleet under-admits (requests "
                     "arriving at random at 1.5x a replica's share: 60% of the cap admitted at 1 "
                     "a replica, 87% at 2, 98% at 4); raise burst to at least 4 x replicas (256)\n",
                     "%s", text);
    free(text);
    text = share_fleet(64, 256);
    cr_assert_str_eq(text, "", "four units each: nothing to say");
    free(text);
}

Test(arm, without_the_fleet_size_a_share_burst_is_not_judged)
{
    char *text =
        load_text("governance:\n  limits:\n    - id: fleet_rpm\n      attach: { level: "
                  "team }\n      type: rpm\n      amount: 3200\n      period: 1m\n      "
                  "burst: 1\n      store: share\nshared_state:\n  share: { node_id: n1 }\n",
                  1, NULL);
    cr_assert_str_eq(text, "");
    free(text);
    text = share_fleet(0, 64);
    cr_assert(strstr(text, "Error: shared_state.share.replicas: "), "%s", text);
    free(text);
}
