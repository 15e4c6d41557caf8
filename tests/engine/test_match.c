/*
 * The rule language's matching tree (engine/match.c) against what envoy ratelimit's config tests
 * assert of GetLimit (test/config/config_test.go: TestBasicConfig, TestWildcardConfig, the
 * share_threshold file's repeated key), on our own files in envoy ratelimit's schema.
 */
#include "helpers.h"
#include "match.h"

static cfg_config_t *cfg;
static gov_rules_t *rules;

/* Loads envoy files (one string per domain) into a fresh config and builds the tree. */
static void load(const char *const *files, size_t n)
{
    cfg = envoy_config(files, n);
    tt_err_t err;
    cr_assert_eq(gov_rules_build(cfg->limits, cfg->n_limits, &rules, &err), 0, "%s", err.message);
}

static void done(void)
{
    gov_rules_free(rules);
    cfg_free(cfg);
    rules = NULL;
    cfg = NULL;
}

/* The full key of the rule a descriptor meets ("" for none): entries as "k=v" strings. */
static const char *meet(const char *domain, size_t n, const char *const *kv)
{
    static char out[512];
    gov_pair_t e[16];
    char keys[16][64];
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        size_t kl = (size_t)(eq - kv[i]);
        memcpy(keys[i], kv[i], kl);
        e[i] = (gov_pair_t){keys[i], kl, eq + 1, strlen(eq + 1)};
    }
    int ix = gov_rules_match(rules, domain, strlen(domain), e, n);
    if (ix == GOV_RULE_NONE)
        return "";
    return cfg_rule_full_key(&cfg->limits[ix].rule, out, sizeof(out));
}

#define MEET(domain, ...)                                                                          \
    meet(domain, sizeof((const char *[]){__VA_ARGS__}) / sizeof(const char *),                     \
         (const char *[]){__VA_ARGS__})

static const char basic[] =
    "domain: shop\n"
    "descriptors:\n"
    "  - key: tenant\n"
    "    value: acme\n"
    "    descriptors:\n"
    "      - { key: user, rate_limit: { unit: second, requests_per_unit: 5 } }\n"
    "      - { key: user, value: alice, rate_limit: { unit: second, "
    "requests_per_unit: 10 } }\n"
    "  - { key: route, rate_limit: { unit: minute, requests_per_unit: 20 } }\n"
    "  - { key: route, value: checkout, rate_limit: { unit: minute, "
    "requests_per_unit: 30 } }\n"
    "  - { key: route, value: health }\n"
    "  - { key: login, rate_limit: { name: l, unit: day, requests_per_unit: 1 } }\n"
    "  - key: cart\n"
    "    value: big\n"
    "    rate_limit: { unit: day, requests_per_unit: 15 }\n"
    "    descriptors:\n"
    "      - { key: item, value: tv, rate_limit: { unit: day, "
    "requests_per_unit: 25 } }\n"
    "  - { key: probe, rate_limit: { unlimited: true } }\n";

Test(match, the_most_specific_rule_at_the_descriptors_depth)
{
    const char *files[] = {basic};
    load(files, 1);
    cr_expect_str_eq(MEET("other", "route=x"), "", "an unknown domain meets no rule");
    cr_expect_str_eq(MEET("shop", "tenant=globex"), "", "a value nobody wrote, no key-only rule");
    cr_expect_str_eq(MEET("shop", "tenant=acme"), "", "a node with children only has no rule");
    cr_expect_str_eq(MEET("shop", "route=checkout", "sub=x"), "",
                     "deeper than the tree: no rule (no backtracking to route's key-only rule)");
    cr_expect_str_eq(MEET("shop", "cart=big", "item=radio"), "");
    cr_expect_str_eq(MEET("shop", "tenant=acme", "user=bob"), "shop.tenant_acme.user");
    cr_expect_str_eq(MEET("shop", "tenant=acme", "user=alice"), "shop.tenant_acme.user_alice",
                     "a value wins over the key alone at the same place");
    cr_expect_str_eq(MEET("shop", "route=anything"), "shop.route");
    cr_expect_str_eq(MEET("shop", "route=checkout"), "shop.route_checkout");
    cr_expect_str_eq(MEET("shop", "route=health"), "shop.route_health",
                     "a whitelisted value is met (and limits nothing)");
    cr_expect_str_eq(MEET("shop", "login=x"), "shop.login");
    cr_expect_str_eq(MEET("shop", "cart=big"), "shop.cart_big");
    cr_expect_str_eq(MEET("shop", "cart=big", "item=tv"), "shop.cart_big.item_tv");
    cr_expect_str_eq(MEET("shop", "probe=1"), "shop.probe");
    cr_expect_str_eq(MEET("shop", "ROUTE=x"), "", "keys are case-sensitive");
    cr_expect(gov_rules_has_domain(rules, "shop", 4));
    cr_expect_not(gov_rules_has_domain(rules, "sho", 3));
    done();
}

Test(match, globs_match_as_envoy_ratelimit_matches_wildcards)
{
    const char *files[] = {"domain: w\n"
                           "descriptors:\n"
                           "  - { key: wild, value: foo*, rate_limit: { unit: minute, "
                           "requests_per_unit: 20 } }\n"
                           "  - { key: plain, value: foo, rate_limit: { unit: minute, "
                           "requests_per_unit: 20 } }\n"
                           "  - { key: any, rate_limit: { unit: minute, requests_per_unit: 20 } }\n"
                           "  - { key: mid, value: bar*b, rate_limit: { unit: minute, "
                           "requests_per_unit: 20 } }\n"
                           "  - { key: multi, value: foo*bar*baz, rate_limit: { unit: minute, "
                           "requests_per_unit: 10 } }\n"
                           "  - key: nested\n"
                           "    value: v1\n"
                           "    descriptors:\n"
                           "      - { key: wild, value: goo*, rate_limit: { unit: minute, "
                           "requests_per_unit: 20 } }\n"};
    load(files, 1);
    cr_expect_str_eq(MEET("w", "wild=foo1"), "w.wild_foo*");
    cr_expect_str_eq(MEET("w", "wild=foo"), "w.wild_foo*", "a '*' matches the empty run too");
    cr_expect_str_eq(MEET("w", "wild=bar"), "");
    cr_expect_str_eq(MEET("w", "plain=foo1"), "", "a value without '*' does not match eagerly");
    cr_expect_str_eq(MEET("w", "any=foo1"), "w.any");
    cr_expect_str_eq(MEET("w", "mid=barab"), "w.mid_bar*b");
    cr_expect_str_eq(MEET("w", "mid=bar123b"), "w.mid_bar*b");
    cr_expect_str_eq(MEET("w", "mid=barb"), "w.mid_bar*b");
    cr_expect_str_eq(MEET("w", "mid=bara"), "", "the suffix is required");
    cr_expect_str_eq(MEET("w", "mid=xbarb"), "", "the prefix is required");
    cr_expect_str_eq(MEET("w", "mid=bab"), "", "prefix and suffix may not overlap");
    cr_expect_str_eq(MEET("w", "multi=foo123bar456baz"), "w.multi_foo*bar*baz");
    cr_expect_str_eq(MEET("w", "multi=foobarbaz"), "w.multi_foo*bar*baz");
    cr_expect_str_eq(MEET("w", "multi=foo123baz"), "", "a middle segment is required");
    cr_expect_str_eq(MEET("w", "multi=bar456baz"), "");
    cr_expect_str_eq(MEET("w", "multi=foobazbar"), "", "segments in order");
    cr_expect_str_eq(MEET("w", "nested=v1", "wild=goo2"), "w.nested_v1.wild_goo*");
    done();
}

Test(match, exact_beats_glob_beats_key_only_and_the_first_glob_wins)
{
    const char *files[] = {"domain: o\n"
                           "descriptors:\n"
                           "  - { key: f, rate_limit: { unit: minute, requests_per_unit: 1 } }\n"
                           "  - { key: f, value: test*, rate_limit: { unit: minute, "
                           "requests_per_unit: 2 } }\n"
                           "  - { key: f, value: te*, rate_limit: { unit: minute, "
                           "requests_per_unit: 3 } }\n"
                           "  - { key: f, value: test1, rate_limit: { unit: minute, "
                           "requests_per_unit: 4 } }\n"
                           "  - { key: f, value: t*, rate_limit: { unit: minute, "
                           "requests_per_unit: 5 } }\n"
                           "  - { key: g, value: g*, rate_limit: { unit: minute, "
                           "requests_per_unit: 6 } }\n"
                           "  - { key: g, value: ga*, rate_limit: { unit: minute, "
                           "requests_per_unit: 7 } }\n"};
    load(files, 1);
    cr_expect_str_eq(MEET("o", "f=test1"), "o.f_test1", "the exact value first");
    cr_expect_str_eq(MEET("o", "f=test2"), "o.f_test*", "then the first glob in config order");
    cr_expect_str_eq(MEET("o", "f=tex"), "o.f_te*");
    cr_expect_str_eq(MEET("o", "g=ga*"), "o.g_ga*",
                     "a glob whose text is the value comes first (envoy's map finds it by name), "
                     "before the first glob that matches (g*)");
    cr_expect_str_eq(MEET("o", "g=gab"), "o.g_g*");
    cr_expect_str_eq(MEET("o", "f=x"), "o.f", "then the key alone");
    done();
}

Test(match, a_key_repeated_in_one_descriptor_walks_two_levels)
{
    const char *files[] = {"domain: r\n"
                           "descriptors:\n"
                           "  - key: files\n"
                           "    value: top/*\n"
                           "    share_threshold: true\n"
                           "    descriptors:\n"
                           "      - { key: files, value: nested/*, share_threshold: true, "
                           "rate_limit: { unit: minute, requests_per_unit: 300 } }\n"};
    load(files, 1);
    cr_expect_str_eq(MEET("r", "files=top/a", "files=nested/b"), "r.files_top/*.files_nested/*");
    cr_expect_str_eq(MEET("r", "files=nested/b", "files=top/a"), "");
    done();
}

Test(match, domains_are_namespaces)
{
    const char *files[] = {"domain: a\ndescriptors: [{ key: k, rate_limit: { unit: second, "
                           "requests_per_unit: 1 } }]\n",
                           "domain: b\ndescriptors: [{ key: k, rate_limit: { unit: second, "
                           "requests_per_unit: 2 } }]\n",
                           "domain: ab\ndescriptors: [{ key: x }]\n"};
    load(files, 3);
    const char *ka = MEET("a", "k=1");
    cr_expect_str_eq(ka, "a.k");
    cr_expect_str_eq(MEET("b", "k=1"), "b.k");
    cr_expect_str_eq(MEET("ab", "k=1"), "");
    cr_expect_str_eq(MEET("", "k=1"), "");
    done();
}

Test(match, no_rule_means_no_tree)
{
    gov_rules_t *r = (gov_rules_t *)1;
    tt_err_t err;
    cr_expect_eq(gov_rules_build(NULL, 0, &r, &err), 0);
    cr_expect_null(r);
    gov_pair_t e = {"k", 1, "v", 1};
    cr_expect_eq(gov_rules_match(NULL, "d", 1, &e, 1), GOV_RULE_NONE);
    cr_expect_not(gov_rules_has_domain(NULL, "d", 1));
}
