/*
 * The rule language in our own YAML (SPEC §12): a governance.limits entry with a domain and a
 * descriptor path is a rule, matched as envoy ratelimit matches its descriptors. The fields:
 *
 *   - id: api_per_ip
 *     domain: edge                       # the namespace (envoy's domain)
 *     descriptor:                        # the path from the domain's top, 1 to 16 entries
 *       - key: remote_address            # no value: every value, a counter per value
 *       - { key: path, value: "v1.*" }   # a value: that one; with '*': a glob
 *     type: rpm                          # rpm or tpm (the hits_addend is the cost)
 *     amount: 10                         # 0 (always over) with algorithm envoy_window
 *     period: 1s
 *     name: api_per_ip                   # current_limit.name; what replaces refers to
 *     replaces: [default_limit]          # switches those rules off where this one matches
 *     quota_mode: true                   # OVER_LIMIT overall only when every quota rule is
 *     detailed_metric: true              # metrics keyed by the descriptor's values
 *   - { id: ok_ip, domain: edge, descriptor: [...], unlimited: true }  # OK, 4294967295 left
 *   - { id: open_ip, domain: edge, descriptor: [...], allow: true }    # matched, no limit
 *
 * An entry's share_threshold (a glob's values share one counter) and value_to_metric are
 * written on the entry. envoy ratelimit's files (envoy.c) produce the same model.
 */
#include "schema.h"

#include <stdio.h>
#include <string.h>

const char *const cfg__rule_keys[] = {"domain",     "descriptor",      "name",
                                      "replaces",   "unlimited",       "allow",
                                      "quota_mode", "detailed_metric", NULL};
static const char *const entry_keys[] = {"key", "value", "share_threshold", "value_to_metric",
                                         NULL};

/* Bytes a domain, key or name may hold: printable, no spaces (as Envoy's configs write them). */
static int token_char(int ch)
{
    return ch > ' ' && ch < 0x7f;
}

/* A value: any printable byte, spaces too (header values carry them), and UTF-8. */
static int value_char(int ch)
{
    return ch >= ' ' && ch != 0x7f;
}

static void load_entry(struct cfg__ctx *c, const cfg_node_t *n, const char *base, cfg_limit_t *l)
{
    char path[PATH_SIZE], key[CFG_RULE_KEY_MAX + 1] = "", value[CFG_RULE_VALUE_MAX + 1] = "";
    const cfg_node_t *m = cfg__want_map(c, n, base, entry_keys), *v;
    if (!m)
        return;
    bool share = false, metric = false;
    if (!(v = cfg__at(m, "key"))) {
        cfg__err(c, cfg__join(path, base, "key"), m, "missing; every entry names its key");
        return;
    }
    if (cfg__get_string(c, v, cfg__join(path, base, "key"), key, CFG_RULE_KEY_MAX, false,
                        token_char, "a descriptor key (printable, no spaces)") < 0)
        return;
    if ((v = cfg__at(m, "value")) &&
        cfg__get_string(c, v, cfg__join(path, base, "value"), value, CFG_RULE_VALUE_MAX, true,
                        value_char, "a descriptor value (printable)") < 0)
        return;
    cfg_match_t match = cfg_match_of(value, strlen(value));
    if ((v = cfg__at(m, "share_threshold")) &&
        cfg__get_bool(c, v, cfg__join(path, base, "share_threshold"), &share) == 0 && share &&
        match != CFG_MATCH_GLOB) {
        cfg__err(c, path, v,
                 "share_threshold shares one counter among the values a glob matches; the value "
                 "\"%s\" holds no '*'",
                 value);
        return;
    }
    if ((v = cfg__at(m, "value_to_metric")))
        cfg__get_bool(c, v, cfg__join(path, base, "value_to_metric"), &metric);
    uint8_t flags =
        (uint8_t)((share ? CFG_ENTRY_SHARE : 0) | (metric ? CFG_ENTRY_VALUE_METRIC : 0));
    if (cfg_rule_add_entry(&l->rule, match, flags, key, strlen(key), value, strlen(value)) < 0)
        cfg__err(c, base, n, "the descriptor's entries take more than %d bytes together",
                 CFG_RULE_BYTES);
}

static void load_replaces(struct cfg__ctx *c, const cfg_node_t *v, const char *base, cfg_limit_t *l)
{
    char path[PATH_SIZE], name[CFG_RULE_NAME_MAX + 1];
    if (v->kind != CFG_NODE_SEQ) {
        cfg__err(c, base, v, "expected a sequence of rule names, got %s",
                 v->null ? "an empty value" : cfg__kind_name(v));
        return;
    }
    if (v->n > CFG_RULE_REPLACES_MAX) {
        cfg__err(c, base, v, "%zu names; at most %d", v->n, CFG_RULE_REPLACES_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        snprintf(path, sizeof(path), "%.*s[%zu]", PATH_SIZE - 24, base, i);
        if (cfg__get_string(c, v->items[i], path, name, CFG_RULE_NAME_MAX, false, value_char,
                            "a rule name (printable)") < 0)
            continue;
        if (strcmp(name, l->rule.name) == 0) /* envoy ratelimit's message */
            cfg__err(c, path, v->items[i], "replaces should not contain name of same descriptor");
        else if (cfg_rule_add_replaces(&l->rule, name, strlen(name)) < 0)
            cfg__err(c, path, v->items[i], "the rule's path and names take more than %d bytes",
                     CFG_RULE_BYTES);
    }
}

static void get_flag(struct cfg__ctx *c, const cfg_node_t *m, const char *base, const char *key,
                     uint8_t flag, cfg_limit_t *l)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = cfg__at(m, key);
    bool on = false;
    if (v && cfg__get_bool(c, v, cfg__join(path, base, key), &on) == 0 && on)
        l->rule.flags |= flag;
}

int cfg__load_rule(struct cfg__ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l)
{
    char path[PATH_SIZE];
    const cfg_node_t *d = cfg__at(m, "domain"), *v;
    int errors = c->errors;
    if (!d) {
        for (size_t k = 1; cfg__rule_keys[k]; k++)
            if ((v = cfg__at(m, cfg__rule_keys[k])))
                cfg__err(c, cfg__join(path, base, cfg__rule_keys[k]), v,
                         "only a limit with a domain (a rule of the gRPC door) takes %s",
                         cfg__rule_keys[k]);
        return c->errors > errors ? -1 : 0;
    }
    cfg__get_string(c, d, cfg__join(path, base, "domain"), l->rule.domain, CFG_RULE_DOMAIN_MAX,
                    false, token_char, "a domain (printable, no spaces)");
    if ((v = cfg__at(m, "name")))
        cfg__get_string(c, v, cfg__join(path, base, "name"), l->rule.name, CFG_RULE_NAME_MAX, false,
                        value_char, "a rule name (printable)");
    if (!(v = cfg__at(m, "descriptor"))) {
        cfg__err(c, cfg__join(path, base, "descriptor"), m,
                 "missing; a limit with a domain names its descriptor: a sequence of entries "
                 "{ key: K, value: V } from the domain's top");
    } else if (v->kind != CFG_NODE_SEQ || v->n == 0 || v->n > CFG_RULE_ENTRIES_MAX) {
        cfg__err(c, cfg__join(path, base, "descriptor"), v,
                 "expected a sequence of 1 to %d entries { key: K, value: V }, got %s",
                 CFG_RULE_ENTRIES_MAX,
                 v->kind == CFG_NODE_SEQ ? "too many or none"
                 : v->null               ? "an empty value"
                                         : cfg__kind_name(v));
    } else {
        for (size_t i = 0; i < v->n; i++) {
            char ebase[PATH_SIZE];
            snprintf(ebase, sizeof(ebase), "%.*s.descriptor[%zu]", PATH_SIZE - 40, base, i);
            load_entry(c, v->items[i], ebase, l);
        }
    }
    if ((v = cfg__at(m, "replaces")))
        load_replaces(c, v, cfg__join(path, base, "replaces"), l);
    get_flag(c, m, base, "unlimited", CFG_RULE_UNLIMITED, l);
    get_flag(c, m, base, "allow", CFG_RULE_ALLOW, l);
    get_flag(c, m, base, "quota_mode", CFG_RULE_QUOTA, l);
    get_flag(c, m, base, "detailed_metric", CFG_RULE_DETAILED, l);
    if ((l->rule.flags & CFG_RULE_UNLIMITED) && (l->rule.flags & CFG_RULE_ALLOW))
        cfg__err(c, cfg__join(path, base, "allow"), cfg__at(m, "allow"),
                 "unlimited and allow both given: unlimited answers OK with 4294967295 remaining, "
                 "allow answers OK with no limit; write one");
    return c->errors > errors ? -1 : 1;
}

bool cfg__same_path(const cfg_rule_t *a, const cfg_rule_t *b)
{
    cfg_entry_t ea[CFG_RULE_ENTRIES_MAX], eb[CFG_RULE_ENTRIES_MAX];
    size_t n = cfg_rule_entries(a, ea);
    if (n != cfg_rule_entries(b, eb))
        return false;
    for (size_t i = 0; i < n; i++)
        if (ea[i].match != eb[i].match || ea[i].key_len != eb[i].key_len ||
            ea[i].value_len != eb[i].value_len || memcmp(ea[i].key, eb[i].key, ea[i].key_len) ||
            memcmp(ea[i].value, eb[i].value, ea[i].value_len))
            return false;
    return true;
}

/* How many leading entries two paths share (same key, match and value), and at the first one
 * whose flags differ among those, its index (else -1). */
static size_t shared_prefix(const cfg_rule_t *a, const cfg_rule_t *b, int *flags_differ)
{
    cfg_entry_t ea[CFG_RULE_ENTRIES_MAX], eb[CFG_RULE_ENTRIES_MAX];
    size_t na = cfg_rule_entries(a, ea), nb = cfg_rule_entries(b, eb), k = 0;
    *flags_differ = -1;
    for (; k < na && k < nb; k++) {
        if (ea[k].match != eb[k].match || ea[k].key_len != eb[k].key_len ||
            ea[k].value_len != eb[k].value_len || memcmp(ea[k].key, eb[k].key, ea[k].key_len) ||
            memcmp(ea[k].value, eb[k].value, ea[k].value_len))
            break;
        if (ea[k].flags != eb[k].flags && *flags_differ < 0)
            *flags_differ = (int)k;
    }
    return k;
}

/* The node of governance.limits[i] (for a finding's position), or the list itself. */
static const cfg_node_t *limit_node(const cfg_node_t *root, size_t i, const char *key)
{
    const cfg_node_t *g = root ? cfg__map_get(root, "governance") : NULL;
    const cfg_node_t *ls = g && g->kind == CFG_NODE_MAP ? cfg__map_get(g, "limits") : NULL;
    if (!ls || ls->kind != CFG_NODE_SEQ || i >= ls->n)
        return root;
    const cfg_node_t *m = ls->items[i], *k = m->kind == CFG_NODE_MAP ? cfg__map_get(m, key) : NULL;
    return k ? k : m;
}

void cfg__rules_check(struct cfg__ctx *c, const cfg_node_t *root)
{
    const cfg_config_t *cfg = c->cfg;
    char path[PATH_SIZE], key[512];
    for (size_t i = 0; i < cfg->n_limits; i++) {
        const cfg_limit_t *a = &cfg->limits[i];
        if (!cfg_limit_is_rule(a) || a->rule.n_entries == 0)
            continue;
        for (size_t j = 0; j < i; j++) {
            const cfg_limit_t *b = &cfg->limits[j];
            int differ;
            if (!cfg_limit_is_rule(b) || strcmp(a->rule.domain, b->rule.domain) != 0)
                continue;
            size_t k = shared_prefix(&a->rule, &b->rule, &differ);
            snprintf(path, sizeof(path), "governance.limits[%zu].descriptor", i);
            if (k == a->rule.n_entries && k == b->rule.n_entries) {
                cfg__err(c, path, limit_node(root, i, "descriptor"),
                         "duplicate descriptor composite key '%s' (first at "
                         "governance.limits[%zu])",
                         cfg_rule_full_key(&a->rule, key, sizeof(key)), j);
                break;
            }
            if (differ >= 0) {
                snprintf(path, sizeof(path), "governance.limits[%zu].descriptor[%d]", i, differ);
                cfg__err(c, path, limit_node(root, i, "descriptor"),
                         "share_threshold and value_to_metric belong to the place in the tree: "
                         "they differ from governance.limits[%zu]'s at the same place",
                         j);
                break;
            }
        }
    }
}
