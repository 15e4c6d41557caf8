/*
 * libFuzzer target for the rule language's matching tree (engine/match.c): the bytes write a
 * few rules over a small alphabet (keys a b c, values with '*'), then descriptors; each
 * descriptor's rule from the tree must be the one envoy ratelimit's GetLimit picks, written out
 * here plainly over the flat list of rules (the slow path the tree shortcuts): at each level
 * the child written for exactly the value (or a glob written as that very text), else the first
 * glob in config order that matches (a backtracking glob, unlike the product's), else the key
 * alone; the rule where the last entry lands; a node without children ends the walk.
 * Run longer, from a fuzz build tree: tests/fuzz/fuzz_match -max_total_time=600 corpus/
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "match.h"

#define RULES 24
#define DEPTH 4

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static const char *const keys[] = {"a", "b", "c"};
static const char *const values[] = {"",   "",  "x",   "y",  "xy",  "x*",
                                     "*y", "*", "x*y", "**", "xyx", "y*x"};
static const char *const descriptor_values[] = {"x", "y",  "xy", "yx",  "xyx",
                                                "",  "x*", "*",  "xxy", "yy"};

typedef struct spec {
    const char *key, *value;
} spec_t;

typedef struct rule {
    spec_t path[DEPTH];
    size_t n;
    int domain;
} rule_t;

static bool same_spec(const spec_t *a, const spec_t *b)
{
    return strcmp(a->key, b->key) == 0 && strcmp(a->value, b->value) == 0;
}

/* A glob by backtracking: '*' any run, the empty one too. */
static bool glob(const char *p, const char *v)
{
    if (!*p)
        return !*v;
    if (*p == '*')
        return glob(p + 1, v) || (*v && glob(p, v + 1));
    return *v == *p && glob(p + 1, v + 1);
}

static bool has_prefix(const rule_t *r, const spec_t *prefix, size_t n, int domain)
{
    if (r->domain != domain || r->n < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!same_spec(&r->path[i], &prefix[i]))
            return false;
    return true;
}

/* envoy ratelimit's GetLimit over the flat rules. */
static int oracle(const rule_t *rules, size_t n, int domain, const spec_t *d, size_t depth)
{
    spec_t at[DEPTH];
    for (size_t i = 0; i < depth; i++) {
        /* the children of `at`, in order of first appearance */
        spec_t kids[RULES];
        size_t nk = 0;
        for (size_t r = 0; r < n; r++) {
            if (!has_prefix(&rules[r], at, i, domain) || rules[r].n <= i)
                continue;
            size_t k = 0;
            while (k < nk && !same_spec(&kids[k], &rules[r].path[i]))
                k++;
            if (k == nk)
                kids[nk++] = rules[r].path[i];
        }
        const spec_t *pick = NULL;
        for (size_t k = 0; k < nk && !pick; k++) /* exact, or a glob named by the value */
            if (strcmp(kids[k].key, d[i].key) == 0 && kids[k].value[0] &&
                strcmp(kids[k].value, d[i].value) == 0)
                pick = &kids[k];
        for (size_t k = 0; k < nk && !pick; k++)
            if (strcmp(kids[k].key, d[i].key) == 0 && strchr(kids[k].value, '*') &&
                glob(kids[k].value, d[i].value))
                pick = &kids[k];
        for (size_t k = 0; k < nk && !pick; k++)
            if (strcmp(kids[k].key, d[i].key) == 0 && !kids[k].value[0])
                pick = &kids[k];
        if (!pick)
            return GOV_RULE_NONE;
        at[i] = *pick;
        if (i + 1 == depth) {
            for (size_t r = 0; r < n; r++)
                if (rules[r].n == depth && has_prefix(&rules[r], at, depth, domain))
                    return (int)r;
            return GOV_RULE_NONE;
        }
        bool deeper = false;
        for (size_t r = 0; r < n && !deeper; r++)
            deeper = rules[r].n > i + 1 && has_prefix(&rules[r], at, i + 1, domain);
        if (!deeper)
            return GOV_RULE_NONE;
    }
    return GOV_RULE_NONE;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cfg_limit_t limits[RULES];
    rule_t rules[RULES];
    size_t n = 0, at = 0;
    if (size < 1)
        return 0;
    size_t want = data[at++] % RULES + 1;
    while (n < want && at + 1 < size) {
        rule_t r = {.n = data[at] % DEPTH + 1, .domain = (data[at] >> 4) & 1};
        at++;
        if (size - at < r.n)
            break;
        for (size_t i = 0; i < r.n; i++, at++)
            r.path[i] = (spec_t){keys[data[at] % 3], values[(data[at] / 3) % 12]};
        bool dup = false;
        for (size_t k = 0; k < n && !dup; k++)
            dup = rules[k].domain == r.domain && rules[k].n == r.n &&
                  has_prefix(&rules[k], r.path, r.n, r.domain);
        if (dup)
            continue;
        cfg_limit_t *l = &limits[n];
        memset(l, 0, sizeof(*l));
        snprintf(l->rule.domain, sizeof(l->rule.domain), "%s", r.domain ? "d1" : "d0");
        for (size_t i = 0; i < r.n; i++)
            check(cfg_rule_add_entry(
                      &l->rule, cfg_match_of(r.path[i].value, strlen(r.path[i].value)), 0,
                      r.path[i].key, 1, r.path[i].value, strlen(r.path[i].value)) == 0);
        rules[n++] = r;
    }
    gov_rules_t *tree;
    tt_err_t err;
    check(gov_rules_build(limits, n, &tree, &err) == 0);
    while (at + 1 < size) {
        size_t depth = data[at] % (DEPTH + 1) + 1;
        int domain = (data[at] >> 4) & 1;
        at++;
        if (size - at < depth)
            break;
        spec_t d[DEPTH + 1];
        gov_pair_t e[DEPTH + 1];
        for (size_t i = 0; i < depth; i++, at++) {
            d[i] = (spec_t){keys[data[at] % 3], descriptor_values[(data[at] / 3) % 10]};
            e[i] = (gov_pair_t){d[i].key, 1, d[i].value, strlen(d[i].value)};
        }
        const char *dn = domain ? "d1" : "d0";
        int want_rule = depth <= DEPTH ? oracle(rules, n, domain, d, depth) : GOV_RULE_NONE;
        check(gov_rules_match(tree, dn, 2, e, depth) == want_rule);
    }
    gov_rules_free(tree);
    return 0;
}
