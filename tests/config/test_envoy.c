/*
 * envoy ratelimit's config files, read as they are (config/envoy.c), and the rules of our own
 * YAML (config/rules.c): the same model, the same refusals. The files here are our own, written
 * in envoy ratelimit's schema to express what its test/config files test (basic_config,
 * wildcard, shadowmode_config, the bad ones), with envoy ratelimit's messages after our paths.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "helpers.h"

/* A config with no limits to append the files' rules to. */
static cfg_config_t *empty_config(void)
{
    cfg_config_t *cfg;
    char *text = load_text("server: { grpc: /run/tt-test-grpc.sock }\n", 0, &cfg);
    cr_assert_not_null(cfg, "%s", text);
    free(text);
    return cfg;
}

/* Loads one envoy file's text; returns the printed report (caller frees) and the rc. */
static char *envoy(cfg_config_t *cfg, const char *name, const char *yaml, int *rc)
{
    cfg_report_t r = {0};
    *rc = cfg_load_envoy_string(cfg, name, yaml, strlen(yaml), &r);
    char *text = report_text(&r);
    cfg_report_free(&r);
    return text;
}

static const cfg_limit_t *rule_at(const cfg_config_t *cfg, const char *full_key)
{
    char key[512];
    for (size_t i = 0; i < cfg->n_limits; i++)
        if (strcmp(cfg_rule_full_key(&cfg->limits[i].rule, key, sizeof(key)), full_key) == 0)
            return &cfg->limits[i];
    return NULL;
}

/* envoy ratelimit's basic_config.yaml, in our words: a key/value with nested key-only and
 * key/value rules, a key-only default beside key/value overrides and a whitelisted value, an
 * hour, a named day, a rule with its own nested rule, an unlimited key, a detailed one. */
static const char basic[] =
    "# what envoy ratelimit's basic_config tests, our own file\n"
    "domain: shop\n"
    "descriptors:\n"
    "  - key: tenant\n"
    "    value: acme\n"
    "    descriptors:\n"
    "      - key: user\n"
    "        rate_limit: { unit: second, requests_per_unit: 5 }\n"
    "      - key: user\n"
    "        value: alice\n"
    "        rate_limit: { unit: SECOND, requests_per_unit: 10 }\n"
    "  - key: route\n"
    "    rate_limit: { unit: minute, requests_per_unit: 20 }\n"
    "  - key: route\n"
    "    value: checkout\n"
    "    rate_limit: { unit: minute, requests_per_unit: 30 }\n"
    "  - key: route\n"
    "    value: health\n"
    "  - key: ip\n"
    "    rate_limit: { unit: hour, requests_per_unit: 1 }\n"
    "  - key: login\n"
    "    rate_limit: { name: login_limit, unit: day, requests_per_unit: 1 }\n"
    "  - key: cart\n"
    "    value: big\n"
    "    rate_limit: { unit: day, requests_per_unit: 15 }\n"
    "    descriptors:\n"
    "      - key: item\n"
    "        value: tv\n"
    "        rate_limit: { unit: day, requests_per_unit: 25 }\n"
    "  - key: probe\n"
    "    rate_limit: { unlimited: true }\n"
    "  - key: search\n"
    "    detailed_metric: yes\n"
    "    rate_limit: { unit: minute, requests_per_unit: 70 }\n";

Test(envoy, a_file_becomes_rules_as_envoy_ratelimit_reads_it)
{
    cfg_config_t *cfg = empty_config();
    int rc;
    char *text = envoy(cfg, "basic.yaml", basic, &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    /* 10 nodes with a rate_limit, 1 whitelisted, and the 7 override counters */
    cr_expect_eq(cfg->n_limits, 11 + CFG_UNITS);
    const cfg_limit_t *l = rule_at(cfg, "shop.tenant_acme.user");
    cr_assert_not_null(l);
    cr_expect_eq(l->algorithm, RA_ENVOY_WINDOW);
    cr_expect_eq(l->amount, 5);
    cr_expect_eq(l->period_ns, RA_NS_PER_S);
    cr_expect_eq(l->type, CFG_TYPE_RPM);
    cr_expect_str_eq(l->id, "rls_shop_tenant_acme_user");
    cr_expect(l->posture.on && l->posture.enforce_hard);
    cr_assert_not_null(l = rule_at(cfg, "shop.tenant_acme.user_alice"));
    cr_expect_eq(l->amount, 10, "units are read case-insensitively");
    cr_assert_not_null(l = rule_at(cfg, "shop.route_health"));
    cr_expect(l->rule.flags & CFG_RULE_ALLOW, "no rate_limit, no children: whitelisted");
    cr_assert_not_null(l = rule_at(cfg, "shop.login"));
    cr_expect_str_eq(l->rule.name, "login_limit");
    cr_expect_eq(l->period_ns, 86400 * RA_NS_PER_S);
    cr_assert_not_null(l = rule_at(cfg, "shop.cart_big.item_tv"));
    cr_expect_eq(l->amount, 25);
    cr_assert_not_null(rule_at(cfg, "shop.cart_big"));
    cr_assert_null(rule_at(cfg, "shop.tenant_acme"), "a node with children only is implied");
    cr_assert_not_null(l = rule_at(cfg, "shop.probe"));
    cr_expect(l->rule.flags & CFG_RULE_UNLIMITED);
    cr_assert_not_null(l = rule_at(cfg, "shop.search"));
    cr_expect(l->rule.flags & CFG_RULE_DETAILED, "YAML 1.1's yes, as go-yaml reads it");
    cfg_report_t r = {0};
    cr_expect_eq(cfg_arm(cfg, &r), 0);
    cfg_report_free(&r);
    cfg_free(cfg);
}

/* Two keys that read alike as an id: the second is told apart by a hash of its full key,
 * FNV-1a 64, pinned (the id names the rule's counters and its metric series). */
Test(envoy, a_rule_whose_id_is_taken_is_told_apart_by_a_hash_of_its_key)
{
    cfg_config_t *cfg = empty_config();
    int rc;
    char *text = envoy(cfg, "alike.yaml",
                       "domain: d\n"
                       "descriptors:\n"
                       "  - key: a-b\n"
                       "    rate_limit: { unit: minute, requests_per_unit: 1 }\n"
                       "  - key: a_b\n"
                       "    rate_limit: { unit: minute, requests_per_unit: 2 }\n",
                       &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    const cfg_limit_t *first = rule_at(cfg, "d.a-b"), *second = rule_at(cfg, "d.a_b");
    cr_assert(first && second);
    cr_expect_str_eq(first->id, "rls_d_a_b");
    cr_expect_str_eq(second->id, "rls_d_a_b_be4ce4c9428e3ecf");
    cfg_free(cfg);
}

Test(envoy, wildcards_shadow_quota_and_replaces_are_kept)
{
    cfg_config_t *cfg = empty_config();
    int rc;
    char *text = envoy(cfg, "w.yaml",
                       "domain: w\n"
                       "descriptors:\n"
                       "  - key: path\n"
                       "    value: /api/*\n"
                       "    share_threshold: true\n"
                       "    value_to_metric: true\n"
                       "    descriptors:\n"
                       "      - key: method\n"
                       "        shadow_mode: true\n"
                       "        quota_mode: true\n"
                       "        rate_limit:\n"
                       "          unit: hour\n"
                       "          requests_per_unit: 4294967295\n"
                       "          name: per_method\n"
                       "          replaces: [ { name: a }, { name: b } ]\n",
                       &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    const cfg_limit_t *l = rule_at(cfg, "w.path_/api/*.method");
    cr_assert_not_null(l);
    cfg_entry_t e[CFG_RULE_ENTRIES_MAX];
    cr_assert_eq(cfg_rule_entries(&l->rule, e), 2);
    cr_expect_eq(e[0].match, CFG_MATCH_GLOB);
    cr_expect_eq(e[0].flags, CFG_ENTRY_SHARE | CFG_ENTRY_VALUE_METRIC);
    cr_expect_eq(e[1].match, CFG_MATCH_ANY);
    cr_expect_not(l->posture.enforce_hard, "shadow_mode is posture.enforce soft");
    cr_expect(l->rule.flags & CFG_RULE_QUOTA);
    cr_expect_eq(l->amount, 4294967295, "requests_per_unit is a uint32");
    cr_expect_eq(l->rule.n_replaces, 2);
    size_t len;
    const char *name = cfg_rule_replaces(&l->rule, 1, &len);
    cr_expect(len == 1 && name[0] == 'b');
    cfg_free(cfg);
}

/* envoy ratelimit's bad files (test/config: bad_limit_unit, empty_domain, empty_key,
 * duplicate_key, misspelled_key and misspelled_key2, non_map_list, replaces_self,
 * replaces_empty, unlimited_with_unit, share_threshold without a wildcard), each refused with
 * envoy ratelimit's words after the path, and a path-named unknown key with a suggestion. */
Test(envoy, each_bad_file_is_refused_naming_where_and_why)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"domain: d\ndescriptors:\n  - key: k\n    value: v\n    rate_limit: { unit: fortnight, "
         "requests_per_unit: 5 }\n",
         "Error: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'; expected "
         "one of: second, minute, hour, day, week, month, year (f.yaml:5:25)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: minuet, "
         "requests_per_unit: 5 }\n",
         "Error: descriptors[0].rate_limit.unit: invalid rate limit unit 'minuet'; did you mean "
         "\"minute\"? (f.yaml:4:25)\n"},
        {"descriptors:\n  - key: k\n",
         "Error: domain: config file cannot have empty domain (f.yaml:1:1)\n"},
        {"domain: d\ndescriptors:\n  - value: v\n",
         "Error: descriptors[0].key: descriptor has empty key (f.yaml:3:5)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
         "Error: descriptors[1]: duplicate descriptor composite key 'd.k_v' (f.yaml:5:5)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    ratelimit: { unit: day }\n",
         "Error: descriptors[0].ratelimit: unknown key; did you mean \"rate_limit\"? "
         "(f.yaml:4:5)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: day, requestsperunit: 5 "
         "}\n",
         "Error: descriptors[0].rate_limit.requestsperunit: unknown key; did you mean "
         "\"requests_per_unit\"? (f.yaml:4:30)\n"},
        {"domain: d\ndescriptors:\n  - a\n",
         "Error: descriptors[0]: expected a mapping, got a scalar (f.yaml:3:5)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { name: me, replaces: [{ name: me "
         "}], unit: second }\n",
         "Error: descriptors[0].rate_limit.replaces[0].name: replaces should not contain name of "
         "same descriptor (f.yaml:4:48)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { replaces: [{ name: }], unit: "
         "second }\n",
         "Error: descriptors[0].rate_limit.replaces[0].name: should not have an empty replaces "
         "entry (f.yaml:4:38)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unlimited: true, unit: day }\n",
         "Error: descriptors[0].rate_limit.unit: should not specify rate limit unit when "
         "unlimited (f.yaml:4:42)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    value: plain\n    share_threshold: true\n",
         "Error: descriptors[0].share_threshold: share_threshold can only be used with wildcard "
         "values (containing '*'), but found key 'k_plain' (f.yaml:5:22)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    unit: second\n",
         "Error: descriptors[0].unit: unknown key; expected one of: key, value, rate_limit, "
         "descriptors, shadow_mode, quota_mode, detailed_metric, value_to_metric, "
         "share_threshold, metadata (f.yaml:4:5)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: day, requests_per_unit: -1 "
         "}\n",
         "Error: descriptors[0].rate_limit.requests_per_unit: must not be negative, got -1 "
         "(f.yaml:4:49)\n"},
        {"domain: d\ndescriptors:\n  - key: k\n    rate_limit: { unit: day, requests_per_unit: "
         "4294967296 }\n",
         "Error: descriptors[0].rate_limit.requests_per_unit: 4294967296 is out of range [0, "
         "4294967295] (f.yaml:4:49)\n"},
        {"'''\n", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_config_t *cfg = empty_config();
        size_t before = cfg->n_limits;
        int rc;
        char *text = envoy(cfg, "f.yaml", cases[i].yaml, &rc);
        cr_expect_eq(rc, CFG_EINVALID, "case %zu: %s", i, text);
        if (cases[i].want)
            cr_expect_str_eq(text, cases[i].want, "case %zu: %s", i, text);
        else
            cr_expect(strstr(text, "Error: ") == text, "case %zu: %s", i, text);
        cr_expect_eq(cfg->n_limits, before, "case %zu: a bad file changes nothing", i);
        free(text);
        cfg_free(cfg);
    }
}

Test(envoy, a_domain_twice_is_refused_unless_merged)
{
    cfg_config_t *cfg = empty_config();
    int rc;
    char *text = envoy(cfg, "a.yaml", "domain: d\ndescriptors: [{ key: a, value: 1 }]\n", &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    text = envoy(cfg, "b.yaml", "domain: d\ndescriptors: [{ key: b, value: 2 }]\n", &rc);
    cr_expect_eq(rc, CFG_EINVALID);
    cr_expect(strstr(text, "Error: domain: duplicate domain 'd' in config file"), "%s", text);
    free(text);
    cfg->server.grpc_merge_domain_config = true;
    text = envoy(cfg, "b.yaml", "domain: d\ndescriptors: [{ key: b, value: 2 }]\n", &rc);
    cr_expect_eq(rc, 0, "%s", text);
    free(text);
    text = envoy(cfg, "c.yaml", "domain: d\ndescriptors: [{ key: a, value: 1 }]\n", &rc);
    cr_expect_eq(rc, CFG_EINVALID, "merged, a composite key still counts once");
    cr_expect(strstr(text, "duplicate descriptor composite key 'd.a_1'"), "%s", text);
    free(text);
    cfg_free(cfg);
}

Test(envoy, values_are_read_literally_and_numbers_are_text)
{
    cfg_config_t *cfg = empty_config();
    int rc;
    setenv("TT_TEST_ENVOY", "expanded", 1);
    char *text = envoy(cfg, "v.yaml",
                       "domain: d\ndescriptors:\n  - key: k\n    value: ${TT_TEST_ENVOY}\n"
                       "  - key: port\n    value: 8080\n",
                       &rc);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    cr_expect_not_null(rule_at(cfg, "d.k_${TT_TEST_ENVOY}"), "no ${VAR} in envoy's files");
    cr_expect_not_null(rule_at(cfg, "d.port_8080"));
    cfg_free(cfg);
}

/* A directory as a ConfigMap mounts it: ..data and a timestamped directory (skipped), the
 * files as symlinks into them (followed), read in name order. */
Test(envoy, a_configmap_directory_is_read_through_its_symlinks)
{
    char dir[] = "/tmp/tt_envoy_dir_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char p[512], q[512];
    snprintf(p, sizeof(p), "%s/..2026_01_01", dir);
    cr_assert_eq(mkdir(p, 0700), 0);
    snprintf(p, sizeof(p), "%s/..2026_01_01/a.yaml", dir);
    FILE *f = fopen(p, "w");
    fputs("domain: one\ndescriptors: [{ key: k, rate_limit: { unit: second, requests_per_unit: "
          "3 } }]\n",
          f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/..2026_01_01/b.yaml", dir);
    f = fopen(p, "w");
    fputs("domain: two\ndescriptors: [{ key: k, value: v }]\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/..data", dir);
    cr_assert_eq(symlink("..2026_01_01", p), 0);
    snprintf(p, sizeof(p), "%s/a.yaml", dir);
    cr_assert_eq(symlink("..data/a.yaml", p), 0);
    snprintf(p, sizeof(p), "%s/b.yaml", dir);
    cr_assert_eq(symlink("..data/b.yaml", p), 0);

    cfg_config_t *cfg = empty_config();
    cfg_report_t r = {0};
    cr_assert_eq(cfg_load_grpc_config_dir(cfg, dir, &r), 0);
    cr_expect_eq(r.n_errors, 0);
    cfg_report_free(&r);
    cr_expect_not_null(rule_at(cfg, "one.k"));
    cr_expect_not_null(rule_at(cfg, "two.k_v"));
    cr_expect_eq(cfg->n_limits, 2 + CFG_UNITS, "each domain once, and the override counters");

    /* a bad file anywhere: nothing of the directory joins, every finding is reported */
    snprintf(p, sizeof(p), "%s/..2026_01_01/c.yaml", dir);
    f = fopen(p, "w");
    fputs("domain: three\ndescriptors: [{ key: k, rate_limit: { unit: sec } }]\n", f);
    fclose(f);
    snprintf(q, sizeof(q), "%s/c.yaml", dir);
    cr_assert_eq(symlink("..data/c.yaml", q), 0);
    cfg_config_t *cfg2 = empty_config();
    cr_expect_eq(cfg_load_grpc_config_dir(cfg2, dir, &r), CFG_EINVALID);
    char *text = report_text(&r);
    cr_expect(strstr(text, "c.yaml"), "the finding names its file: %s", text);
    cr_expect(strstr(text, "descriptors[0].rate_limit.unit: invalid rate limit unit 'sec'"), "%s",
              text);
    cr_expect_eq(cfg2->n_limits, 0, "all or nothing");
    free(text);
    cfg_report_free(&r);
    cfg_free(cfg2);
    cfg_free(cfg);
    unlink(q);
    snprintf(p, sizeof(p), "rm -rf %s", dir);
    cr_expect_eq(system(p), 0);
}

/* ---- the same model in our own YAML ---- */

Test(rules, our_yaml_expresses_every_rule_envoy_files_do)
{
    cfg_config_t *cfg;
    char *text =
        load_text("governance:\n"
                  "  limits:\n"
                  "    - id: per_ip\n"
                  "      domain: edge\n"
                  "      descriptor: [{ key: remote_address }]\n"
                  "      type: rpm\n"
                  "      amount: 10\n"
                  "      period: 1s\n"
                  "      name: per_ip\n"
                  "    - id: banned\n"
                  "      domain: edge\n"
                  "      descriptor: [{ key: remote_address, value: 50.0.0.5 }]\n"
                  "      type: rpm\n"
                  "      amount: 0\n"
                  "      period: 1s\n"
                  "      algorithm: envoy_window\n"
                  "      replaces: [per_ip]\n"
                  "    - id: files\n"
                  "      domain: edge\n"
                  "      descriptor: [{ key: f, value: 'docs/*', share_threshold: true }]\n"
                  "      type: rpm\n"
                  "      amount: 5\n"
                  "      period: 1h\n"
                  "      posture: { enforce: soft }\n"
                  "      quota_mode: true\n"
                  "    - { id: ok, domain: edge, descriptor: [{ key: a }], unlimited: true }\n"
                  "    - { id: open, domain: edge, descriptor: [{ key: b }], allow: true }\n",
                  1, &cfg);
    cr_assert_not_null(cfg, "%s", text);
    free(text);
    cr_expect_eq(cfg->n_limits, 5 + CFG_UNITS);
    const cfg_limit_t *l = cfg_find_limit(cfg, "banned");
    cr_assert_not_null(l);
    cr_expect_eq(l->amount, 0);
    cr_expect_eq(l->limiter.algorithm, RA_ENVOY_WINDOW, "armed");
    cr_expect_eq(l->rule.n_replaces, 1);
    cr_expect_neq(cfg_find_limit(cfg, "per_ip")->identity, l->identity);
    cr_expect(cfg_find_limit(cfg, "ok")->rule.flags & CFG_RULE_UNLIMITED);
    cr_expect(cfg_find_limit(cfg, "open")->rule.flags & CFG_RULE_ALLOW);
    cr_expect_not_null(cfg_find_limit(cfg, "rls_override_minute"));
    cfg_free(cfg);
}

Test(rules, a_rule_identity_is_its_domain_and_path)
{
    static const char *fmt = "governance:\n  limits:\n    - { id: r, domain: %s, descriptor: "
                             "[{ key: %s }], type: rpm, amount: 1, period: 1s }\n";
    char yaml[512];
    uint64_t ids[3];
    const char *domains[] = {"a", "b", "a"}, *keys[] = {"k", "k", "j"};
    for (int i = 0; i < 3; i++) {
        cfg_config_t *cfg;
        snprintf(yaml, sizeof(yaml), fmt, domains[i], keys[i]);
        char *text = load_text(yaml, 1, &cfg);
        cr_assert_not_null(cfg, "%s", text);
        ids[i] = cfg->limits[0].identity;
        free(text);
        cfg_free(cfg);
    }
    cr_expect_neq(ids[0], ids[1], "two domains never share a counter");
    cr_expect_neq(ids[0], ids[2], "nor two paths");
}

Test(rules, a_rule_is_refused_for_what_it_does_not_take)
{
    static const struct {
        const char *yaml, *want;
    } cases[] = {
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k }], attach: "
         "{ level: team }, type: rpm, amount: 1, period: 1s }\n",
         "governance.limits[0].attach: a limit with a domain matches by its descriptor"},
        {"governance:\n  limits:\n    - { id: r, domain: d, type: rpm, amount: 1, period: 1s }\n",
         "governance.limits[0].descriptor: missing"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k }], type: "
         "rpm, amount: 0, period: 1s }\n",
         "governance.limits[0].amount: 0 (always over the limit) is a limit of algorithm "
         "envoy_window alone; gcra needs at least 1"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k }], "
         "unlimited: true, amount: 4 }\n",
         "governance.limits[0].amount: a rule with unlimited: true counts nothing"},
        {"governance:\n  limits:\n    - { id: r, attach: { level: team }, type: rpm, amount: 1, "
         "period: 1s, replaces: [x] }\n",
         "governance.limits[0].replaces: only a limit with a domain"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k, value: v, "
         "share_threshold: true }], type: rpm, amount: 1, period: 1s }\n",
         "share_threshold shares one counter among the values a glob matches"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k }], type: "
         "rpm, amount: 1, period: 1s }\n    - { id: s, domain: d, descriptor: [{ key: k }], "
         "type: rpm, amount: 2, period: 1s }\n",
         "governance.limits[1].descriptor: duplicate descriptor composite key 'd.k' (first at "
         "governance.limits[0])"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k, value: 'a*', "
         "share_threshold: true }, { key: x }], type: rpm, amount: 1, period: 1s }\n    - { id: "
         "s, domain: d, descriptor: [{ key: k, value: 'a*' }, { key: y }], type: rpm, amount: 2, "
         "period: 1s }\n",
         "governance.limits[1].descriptor[0]: share_threshold and value_to_metric belong to the "
         "place in the tree"},
        {"governance:\n  limits:\n    - { id: r, domain: d, descriptor: [{ key: k }], type: "
         "concurrency, amount: 1 }\n",
         "governance.limits[0].type: a limit with a domain is a rate"},
        {"governance:\n  limits:\n    - { id: rls_override_second, attach: { level: t }, type: "
         "rpm, amount: 1, period: 1s }\n    - { id: r, domain: d, descriptor: [{ key: k }], type: "
         "rpm, amount: 1, period: 1s }\n",
         "ids rls_override_<unit> name the counters of descriptors"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_config_t *cfg;
        char *text = load_text(cases[i].yaml, 0, &cfg);
        cr_expect_null(cfg, "case %zu passed", i);
        cr_expect(strstr(text, cases[i].want), "case %zu: %s", i, text);
        free(text);
        cfg_free(cfg);
    }
}

Test(rules, the_gRPC_settings_read_as_envoy_ratelimit_names_them)
{
    cfg_config_t *cfg;
    char *text = load_text("server:\n"
                           "  grpc_config_dir: /etc/ratelimit/config\n"
                           "  grpc_stop_cache_key_increment_when_overlimit: false\n"
                           "  grpc_shadow_mode: true\n"
                           "  grpc_merge_domain_config: true\n"
                           "  grpc_limit_headers: { remaining: X-Left }\n",
                           0, &cfg);
    cr_assert_not_null(cfg, "%s", text);
    free(text);
    const cfg_server_t *s = &cfg->server;
    cr_expect_str_eq(s->grpc_config_dir, "/etc/ratelimit/config");
    cr_expect_not(s->grpc_stop_cache_key_increment_when_overlimit);
    cr_expect(s->grpc_shadow_mode && s->grpc_merge_domain_config && s->grpc_limit_headers);
    cr_expect_str_eq(s->grpc_limit_header[0], "RateLimit-Limit", "the default name");
    cr_expect_str_eq(s->grpc_limit_header[1], "X-Left");
    cfg_free(cfg);
    text = load_text("server: { grpc_config_store: redis }\n", 0, &cfg);
    cr_expect_null(cfg);
    cr_expect(strstr(text, "server.grpc_config_store: store \"redis\" needs shared_state.redis"),
              "%s", text);
    free(text);
    text = load_text("server: { grpc_config_dir: relative/dir }\n", 0, &cfg);
    cr_expect(strstr(text, "server.grpc_config_dir: \"relative/dir\" must be an absolute path"),
              "%s", text);
    free(text);
    cfg_free(cfg);
}
