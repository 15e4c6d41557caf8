/*
 * The matching tree of the rule language; see match.h for what it answers.
 *
 * Built in two passes. The first grows a trie from the rules in config order: each rule's path
 * walks from its domain's root, creating the nodes it does not find, and the rule is set at the
 * node its last entry reaches. The second lays every node's children out in one array, in the
 * order a lookup tries them: the children written for a value (sorted by key, then value, for a
 * binary search), then the globs (in config order: the first that matches wins, as envoy
 * ratelimit tries its wildcards), then the key-only ones (sorted by key). All text lives in one
 * block. A walk is a binary search per level (and a scan of that level's globs when no value
 * child matched): no allocation, no recursion.
 */
#include "match.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct edge {
    uint32_t key, value; /* offsets into text */
    uint16_t key_len, value_len;
    uint8_t match; /* cfg_match_t */
    uint32_t child;
} edge_t;

typedef struct node {
    uint32_t first; /* edges [first, first + n_value + n_glob + n_any) */
    uint32_t n_value, n_glob, n_any;
    int32_t rule; /* GOV_RULE_NONE, or the limit whose path ends here */
} node_t;

typedef struct domain {
    uint32_t name;
    uint16_t len;
    uint32_t root;
} domain_t;

struct gov_rules {
    domain_t *domains; /* sorted by name */
    size_t n_domains;
    node_t *nodes;
    edge_t *edges;
    char *text;
};

/* ---- building ---- */

/* A child while the trie grows: its entry, and its node. */
typedef struct tmp_edge {
    const cfg_entry_t *entry;
    uint32_t child;
} tmp_edge_t;

typedef struct tmp_node {
    tmp_edge_t *edges;
    size_t n, cap;
    int32_t rule;
} tmp_node_t;

typedef struct builder {
    tmp_node_t *nodes;
    size_t n_nodes, cap_nodes;
    cfg_entry_t *entries; /* every rule's entries, read out once (they point into the limits) */
    size_t n_entries;
} builder_t;

static int new_node(builder_t *b, uint32_t *out)
{
    if (b->n_nodes == b->cap_nodes) {
        size_t cap = b->cap_nodes ? 2 * b->cap_nodes : 64;
        tmp_node_t *n = realloc(b->nodes, cap * sizeof(*n));
        if (!n)
            return -1;
        b->nodes = n;
        b->cap_nodes = cap;
    }
    b->nodes[b->n_nodes] = (tmp_node_t){.rule = GOV_RULE_NONE};
    *out = (uint32_t)b->n_nodes++;
    return 0;
}

static bool same_entry(const cfg_entry_t *a, const cfg_entry_t *b)
{
    return a->match == b->match && a->key_len == b->key_len && a->value_len == b->value_len &&
           memcmp(a->key, b->key, a->key_len) == 0 && memcmp(a->value, b->value, a->value_len) == 0;
}

/* The child of node `at` for entry e, created when missing. */
static int child_of(builder_t *b, uint32_t at, const cfg_entry_t *e, uint32_t *out)
{
    tmp_node_t *n = &b->nodes[at];
    for (size_t i = 0; i < n->n; i++) {
        if (same_entry(n->edges[i].entry, e)) {
            *out = n->edges[i].child;
            return 0;
        }
    }
    uint32_t child;
    if (new_node(b, &child) < 0)
        return -1;
    n = &b->nodes[at]; /* new_node may have moved the array */
    if (n->n == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 4;
        tmp_edge_t *ed = realloc(n->edges, cap * sizeof(*ed));
        if (!ed)
            return -1;
        n->edges = ed;
        n->cap = cap;
    }
    n->edges[n->n++] = (tmp_edge_t){.entry = e, .child = child};
    *out = child;
    return 0;
}

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* Order of a node's value children and of its key-only children: key, then value. */
static int cmp_tmp(const void *x, const void *y)
{
    const cfg_entry_t *a = ((const tmp_edge_t *)x)->entry, *b = ((const tmp_edge_t *)y)->entry;
    int c = cmp_bytes(a->key, a->key_len, b->key, b->key_len);
    return c ? c : cmp_bytes(a->value, a->value_len, b->value, b->value_len);
}

static void builder_free(builder_t *b)
{
    for (size_t i = 0; i < b->n_nodes; i++)
        free(b->nodes[i].edges);
    free(b->nodes);
    free(b->entries);
}

void gov_rules_free(gov_rules_t *r)
{
    if (!r)
        return;
    free(r->domains);
    free(r->nodes);
    free(r->edges);
    free(r->text);
    free(r);
}

static bool is_rule(const cfg_limit_t *l)
{
    return cfg_limit_is_rule(l) && !(l->rule.flags & CFG_RULE_OVERRIDE);
}

static int cmp_name(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Lays the trie out (see the essay); the domains are nodes [0, n_domains), named `names`
 * (sorted). */
static gov_rules_t *flatten(const builder_t *b, const char *const *names, size_t n_domains)
{
    gov_rules_t *r = calloc(1, sizeof(*r));
    size_t n_edges = b->n_nodes - n_domains, text = 0;
    for (size_t i = 0; i < b->n_entries; i++)
        text += b->entries[i].key_len + b->entries[i].value_len;
    for (size_t d = 0; d < n_domains; d++)
        text += strlen(names[d]);
    if (!r || !(r->nodes = calloc(b->n_nodes, sizeof(node_t))) ||
        !(r->edges = calloc(n_edges ? n_edges : 1, sizeof(edge_t))) ||
        !(r->text = malloc(text ? text : 1)) ||
        !(r->domains = calloc(n_domains, sizeof(domain_t)))) {
        gov_rules_free(r);
        return NULL;
    }
    size_t at = 0, e = 0;
    for (size_t d = 0; d < n_domains; d++) {
        size_t len = strlen(names[d]);
        memcpy(r->text + at, names[d], len);
        r->domains[d] = (domain_t){.name = (uint32_t)at, .len = (uint16_t)len, .root = (uint32_t)d};
        at += len;
    }
    r->n_domains = n_domains;
    for (size_t i = 0; i < b->n_nodes; i++) {
        const tmp_node_t *t = &b->nodes[i];
        node_t *n = &r->nodes[i];
        n->rule = t->rule;
        n->first = (uint32_t)e;
        tmp_edge_t *sorted = t->n ? malloc(t->n * sizeof(*sorted)) : NULL;
        if (t->n && !sorted) {
            gov_rules_free(r);
            return NULL;
        }
        size_t k = 0;
        for (int pass = 0; pass < 3; pass++) { /* values, globs, key-only */
            cfg_match_t want = pass == 0   ? CFG_MATCH_VALUE
                               : pass == 1 ? CFG_MATCH_GLOB
                                           : CFG_MATCH_ANY;
            size_t from = k;
            for (size_t j = 0; j < t->n; j++)
                if (t->edges[j].entry->match == want)
                    sorted[k++] = t->edges[j];
            if (want != CFG_MATCH_GLOB && k - from > 1)
                qsort(sorted + from, k - from, sizeof(*sorted), cmp_tmp);
            uint32_t count = (uint32_t)(k - from);
            if (pass == 0)
                n->n_value = count;
            else if (pass == 1)
                n->n_glob = count;
            else
                n->n_any = count;
        }
        for (size_t j = 0; j < k; j++, e++) {
            const cfg_entry_t *en = sorted[j].entry;
            edge_t *ed = &r->edges[e];
            ed->key = (uint32_t)at;
            ed->key_len = (uint16_t)en->key_len;
            memcpy(r->text + at, en->key, en->key_len);
            at += en->key_len;
            ed->value = (uint32_t)at;
            ed->value_len = (uint16_t)en->value_len;
            if (en->value_len)
                memcpy(r->text + at, en->value, en->value_len);
            at += en->value_len;
            ed->match = (uint8_t)en->match;
            ed->child = sorted[j].child;
        }
        free(sorted);
    }
    return r;
}

int gov_rules_build(const cfg_limit_t *limits, size_t n, gov_rules_t **out, tt_err_t *err)
{
    *out = NULL;
    builder_t b = {0};
    size_t n_rules = 0, total = 0;
    for (size_t i = 0; i < n; i++)
        if (is_rule(&limits[i])) {
            n_rules++;
            total += limits[i].rule.n_entries;
        }
    if (n_rules == 0)
        return 0;
    /* the domains first, sorted: nodes 0 .. n_domains - 1 are their roots */
    const char **names = malloc(n_rules * sizeof(*names));
    b.entries = malloc((total ? total : 1) * sizeof(*b.entries));
    if (!names || !b.entries)
        goto oom;
    size_t n_domains = 0;
    for (size_t i = 0; i < n; i++)
        if (is_rule(&limits[i]))
            names[n_domains++] = limits[i].rule.domain;
    qsort(names, n_domains, sizeof(*names), cmp_name);
    size_t u = 0;
    for (size_t d = 0; d < n_domains; d++)
        if (d == 0 || strcmp(names[d], names[u - 1]) != 0)
            names[u++] = names[d];
    n_domains = u;
    for (size_t d = 0; d < n_domains; d++) {
        uint32_t node;
        if (new_node(&b, &node) < 0)
            goto oom;
    }
    for (size_t i = 0; i < n; i++) {
        const cfg_limit_t *l = &limits[i];
        if (!is_rule(l))
            continue;
        const char *dn = l->rule.domain;
        const char **d = bsearch(&dn, names, n_domains, sizeof(*names), cmp_name);
        uint32_t at = (uint32_t)(d - names);
        cfg_entry_t *e = b.entries + b.n_entries;
        size_t k = cfg_rule_entries(&l->rule, e);
        b.n_entries += k;
        for (size_t j = 0; j < k; j++)
            if (child_of(&b, at, &e[j], &at) < 0)
                goto oom;
        if (k == 0 || b.nodes[at].rule != GOV_RULE_NONE) {
            char path[TT_ERR_PATH_MAX];
            snprintf(path, sizeof(path), "governance.limits[%zu]", i);
            tt_err_set(err, GOV_ELIMITS, path,
                       k == 0 ? "limit \"%s\": a rule without a descriptor"
                              : "limit \"%s\": another rule has the same domain and descriptor",
                       l->id);
            free(names);
            builder_free(&b);
            return GOV_ELIMITS;
        }
        b.nodes[at].rule = (int32_t)i;
    }
    gov_rules_t *r = flatten(&b, names, n_domains);
    if (!r)
        goto oom;
    free(names);
    builder_free(&b);
    *out = r;
    return 0;
oom:
    free(names);
    builder_free(&b);
    return tt_err_set(err, GOV_ENOMEM, "", "out of memory building the rules' tree");
}

/* ---- walking ---- */

static const domain_t *find_domain(const gov_rules_t *r, const char *name, size_t len)
{
    size_t lo = 0, hi = r->n_domains;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const domain_t *d = &r->domains[mid];
        int c = cmp_bytes(r->text + d->name, d->len, name, len);
        if (c == 0)
            return d;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool gov_rules_has_domain(const gov_rules_t *r, const char *domain, size_t len)
{
    return r && find_domain(r, domain, len) != NULL;
}

/* Binary search in edges[lo, hi) sorted by (key, value); value NULL: by key alone. */
static const edge_t *search(const gov_rules_t *r, size_t lo, size_t hi, const gov_pair_t *e,
                            bool with_value)
{
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const edge_t *ed = &r->edges[mid];
        int c = cmp_bytes(r->text + ed->key, ed->key_len, e->level, e->level_len);
        if (c == 0 && with_value)
            c = cmp_bytes(r->text + ed->value, ed->value_len, e->id, e->id_len);
        if (c == 0)
            return ed;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static bool key_is(const gov_rules_t *r, const edge_t *ed, const gov_pair_t *e)
{
    return ed->key_len == e->level_len && memcmp(r->text + ed->key, e->level, e->level_len) == 0;
}

static const edge_t *find_edge(const gov_rules_t *r, const node_t *n, const gov_pair_t *e)
{
    size_t globs = n->first + n->n_value, any = globs + n->n_glob;
    const edge_t *ed = search(r, n->first, globs, e, true);
    if (ed)
        return ed;
    for (size_t i = globs; i < any; i++) { /* a glob whose text is the value itself */
        ed = &r->edges[i];
        if (key_is(r, ed, e) && ed->value_len == e->id_len &&
            memcmp(r->text + ed->value, e->id, e->id_len) == 0)
            return ed;
    }
    for (size_t i = globs; i < any; i++) {
        ed = &r->edges[i];
        if (key_is(r, ed, e) &&
            cfg_glob_match(r->text + ed->value, ed->value_len, e->id, e->id_len))
            return ed;
    }
    return search(r, any, any + n->n_any, e, false);
}

int gov_rules_match(const gov_rules_t *r, const char *domain, size_t domain_len,
                    const gov_pair_t *entries, size_t n)
{
    const domain_t *d = r && n ? find_domain(r, domain, domain_len) : NULL;
    if (!d)
        return GOV_RULE_NONE;
    const node_t *node = &r->nodes[d->root];
    for (size_t i = 0; i < n; i++) {
        const edge_t *ed = find_edge(r, node, &entries[i]);
        if (!ed)
            return GOV_RULE_NONE;
        node = &r->nodes[ed->child];
        if (i + 1 == n)
            return node->rule;
        if (node->n_value + node->n_glob + node->n_any == 0)
            return GOV_RULE_NONE; /* the descriptor is deeper than the tree here */
    }
    return GOV_RULE_NONE;
}
