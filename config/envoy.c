/*
 * envoyproxy/ratelimit's config files, read as they are (SPEC §12, server.grpc_config_dir).
 *
 * One file holds one domain and its tree of descriptors:
 *
 *   domain: edge
 *   descriptors:
 *     - key: remote_address              # every value, a counter per value
 *       rate_limit: { unit: second, requests_per_unit: 10 }
 *     - key: remote_address
 *       value: 50.0.0.5                   # this value wins over the key alone
 *       rate_limit: { unit: second, requests_per_unit: 0 }
 *       descriptors: [...]                # deeper levels: a descriptor of more entries
 *
 * Every node with a rate_limit becomes a rule of the model (rule.h) at its path; a node with
 * neither a rate_limit nor nested descriptors matches and limits nothing (an `allow` rule: envoy
 * ratelimit "whitelists" it); a node with nested descriptors only is implied by its children.
 * The rule counts as envoy ratelimit counts: algorithm envoy_window, requests_per_unit per unit
 * (second .. year), in the store server.grpc_config_store; shadow_mode is posture.enforce soft.
 *
 * The schema is checked per level with our reader (schema.c): an unknown key is an error naming
 * its path in the file, with a suggestion ("descriptors[0].ratelimit: unknown key; did you mean
 * \"rate_limit\"?"). envoy ratelimit checks keys against one list for every level, so it lets a
 * key through at the wrong level (a `unit` beside `key`) and ignores it: we refuse that, on
 * purpose (docs/clients.md). Where envoy ratelimit has a message for a mistake, ours says the
 * same words after the path. Values are read literally: no ${VAR} in these files.
 *
 * A load is all or nothing: the rules of a file, and of a directory, are appended only when
 * everything in it is valid; a bad file changes nothing, and reports every finding it has.
 */
#include "schema.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "tt_hash.h"

static const char *const root_keys[] = {"domain", "descriptors", NULL};
static const char *const descriptor_keys[] = {
    "key",        "value",           "rate_limit",      "descriptors",     "shadow_mode",
    "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata",
    NULL};
static const char *const rate_limit_keys[] = {"requests_per_unit", "unit", "unlimited", "name",
                                              "replaces",          NULL};
static const char *const replaces_keys[] = {"name", NULL};
static const char *const unit_names[] = {"second", "minute", "hour", "day",
                                         "week",   "month",  "year", NULL};

/* The rules one file yields, before they join the config, and where each was written. */
struct batch {
    cfg_limit_t *l;
    const cfg_node_t **at; /* the node of each rule */
    char (*path)[PATH_SIZE];
    size_t n, cap;
};

static void batch_free(struct batch *b)
{
    free(b->l);
    free(b->at);
    free(b->path);
}

struct walk {
    struct cfg__ctx *c;
    struct batch *out;
    cfg_rule_t path; /* the entries above the node being read */
};

static int printable(int ch)
{
    return ch >= ' ' && ch != 0x7f;
}

/* envoy ratelimit reads its files with go-yaml v2: YAML 1.1 booleans. */
static int get_bool(struct cfg__ctx *c, const cfg_node_t *n, const char *path, bool *out)
{
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
                                      "on",   "On",   "ON",   "y",   "Y",   NULL};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
                                     "off",   "Off",   "OFF",   "n",  "N",  NULL};
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    for (size_t i = 0; yes[i]; i++) {
        if (strcmp(s, yes[i]) == 0 || strcmp(s, no[i]) == 0) {
            *out = strcmp(s, yes[i]) == 0;
            return 0;
        }
    }
    cfg__err(c, path, n, "\"%s\" is not a boolean; write true or false", s);
    return -1;
}

static const cfg_node_t *want_map(struct cfg__ctx *c, const cfg_node_t *n, const char *path,
                                  const char *const *keys)
{
    return cfg__want_map(c, n, path, keys);
}

/* A sequence (an empty value reads as none, as go-yaml leaves a nil slice); NULL after
 * reporting anything else. */
static const cfg_node_t *want_seq(struct cfg__ctx *c, const cfg_node_t *n, const char *path,
                                  bool *empty)
{
    *empty = n->kind == CFG_NODE_SCALAR && n->null && !n->failed;
    if (*empty || n->failed)
        return NULL;
    if (n->kind != CFG_NODE_SEQ) {
        cfg__err(c, path, n, "expected a sequence, got %s", cfg__kind_name(n));
        return NULL;
    }
    return n;
}

static cfg_limit_t *batch_add(struct walk *w, const cfg_node_t *at, const char *path)
{
    struct batch *b = w->out;
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 16;
        cfg_limit_t *l = realloc(b->l, cap * sizeof(*l));
        if (l)
            b->l = l;
        const cfg_node_t **a = realloc(b->at, cap * sizeof(*a));
        if (a)
            b->at = a;
        char(*p)[PATH_SIZE] = realloc(b->path, cap * sizeof(*p));
        if (p)
            b->path = p;
        if (!l || !a || !p) {
            w->c->oom = 1;
            return NULL;
        }
        b->cap = cap;
    }
    b->at[b->n] = at;
    snprintf(b->path[b->n], PATH_SIZE, "%s", path);
    cfg_limit_t *l = &b->l[b->n++];
    memset(l, 0, sizeof(*l));
    return l;
}

/* The unit of a rate_limit, case-insensitive as envoy ratelimit reads it. */
static int get_unit(struct cfg__ctx *c, const cfg_node_t *v, const char *path)
{
    const char *s = cfg__want_scalar(c, v, path);
    if (!s)
        return -1;
    for (int i = 0; unit_names[i]; i++)
        if (strcasecmp(s, unit_names[i]) == 0)
            return i;
    char lower[32] = "", all[96];
    for (size_t i = 0; s[i] && i + 1 < sizeof(lower); i++)
        lower[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
    const char *guess = cfg_suggest(lower, unit_names);
    if (guess)
        cfg__err(c, path, v, "invalid rate limit unit '%s'; did you mean \"%s\"?", s, guess);
    else
        cfg__err(c, path, v, "invalid rate limit unit '%s'; expected one of: %s", s,
                 cfg__list(all, sizeof(all), unit_names));
    return -1;
}

/* A node's rate_limit block into l (a rule at w->path). */
static void load_rate_limit(struct walk *w, const cfg_node_t *n, const char *base, cfg_limit_t *l,
                            bool shadow)
{
    struct cfg__ctx *c = w->c;
    char path[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, rate_limit_keys), *v;
    if (!m)
        return;
    bool unlimited = false;
    if ((v = cfg__at(m, "unlimited")))
        get_bool(c, v, cfg__join(path, base, "unlimited"), &unlimited);
    if ((v = cfg__at(m, "name")))
        cfg__get_string(c, v, cfg__join(path, base, "name"), l->rule.name, CFG_RULE_NAME_MAX, true,
                        printable, "a name (printable)");
    const cfg_node_t *unit = cfg__at(m, "unit");
    int u = -1;
    if (unlimited && unit && !(unit->kind == CFG_NODE_SCALAR && !unit->failed && !unit->text[0]))
        cfg__err(c, cfg__join(path, base, "unit"), unit,
                 "should not specify rate limit unit when unlimited");
    else if (!unlimited && !unit)
        cfg__err(c, cfg__join(path, base, "unit"), m,
                 "invalid rate limit unit ''; a rate_limit needs its unit: second, minute, hour, "
                 "day, week, month or year (or unlimited: true)");
    else if (!unlimited)
        u = get_unit(c, unit, cfg__join(path, base, "unit"));
    int64_t rpu = 0; /* absent: 0, as go-yaml leaves a uint32 field: always over the limit */
    if ((v = cfg__at(m, "requests_per_unit")))
        cfg__get_int(c, v, cfg__join(path, base, "requests_per_unit"), 0, RA_ENVOY_CEILING, &rpu);
    if ((v = cfg__at(m, "replaces"))) {
        bool empty;
        const cfg_node_t *seq = want_seq(c, v, cfg__join(path, base, "replaces"), &empty);
        for (size_t i = 0; seq && i < seq->n; i++) {
            char ip[PATH_SIZE], np[PATH_SIZE], name[CFG_RULE_NAME_MAX + 1] = "";
            snprintf(ip, sizeof(ip), "%.*s.replaces[%zu]", PATH_SIZE - 40, base, i);
            const cfg_node_t *r = want_map(c, seq->items[i], ip, replaces_keys);
            const cfg_node_t *nm = r ? cfg__at(r, "name") : NULL;
            if (r && (!nm || (nm->kind == CFG_NODE_SCALAR && nm->null && !nm->failed))) {
                cfg__err(c, cfg__join(np, ip, "name"), nm ? nm : r,
                         "should not have an empty replaces entry");
                continue;
            }
            if (!nm || cfg__get_string(c, nm, cfg__join(np, ip, "name"), name, CFG_RULE_NAME_MAX,
                                       false, printable, "a name (printable)") < 0)
                continue;
            if (strcmp(name, l->rule.name) == 0)
                cfg__err(c, np, nm, "replaces should not contain name of same descriptor");
            else if (cfg_rule_add_replaces(&l->rule, name, strlen(name)) < 0)
                cfg__err(c, np, nm, "more than %d names, or more than %d bytes with the path",
                         CFG_RULE_REPLACES_MAX, CFG_RULE_BYTES);
        }
    }
    l->type = CFG_TYPE_RPM;
    l->store = c->cfg->server.grpc_config_store;
    l->posture = (cfg_posture_t){.on = 1, .enforce_hard = !shadow, .fail_open = 1};
    if (unlimited) {
        l->rule.flags |= CFG_RULE_UNLIMITED;
        return;
    }
    if (u < 0)
        return;
    l->algorithm = RA_ENVOY_WINDOW;
    l->amount = rpu;
    l->burst = rpu;
    l->period_ns = cfg_units[u].seconds * RA_NS_PER_S;
}

static void load_descriptors(struct walk *w, const cfg_node_t *seq, const char *base);

static void load_node(struct walk *w, const cfg_node_t *n, const char *base)
{
    struct cfg__ctx *c = w->c;
    char path[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, descriptor_keys), *v;
    if (!m)
        return;
    char key[CFG_RULE_KEY_MAX + 1] = "", value[CFG_RULE_VALUE_MAX + 1] = "";
    v = cfg__at(m, "key");
    if (!v || (v->kind == CFG_NODE_SCALAR && !v->failed && (v->null || !v->text[0]))) {
        cfg__err(c, cfg__join(path, base, "key"), v ? v : m, "descriptor has empty key");
        return;
    }
    if (cfg__get_string(c, v, cfg__join(path, base, "key"), key, CFG_RULE_KEY_MAX, false, printable,
                        "a descriptor key (printable)") < 0)
        return;
    if ((v = cfg__at(m, "value")) && !(v->kind == CFG_NODE_SCALAR && v->null && !v->failed) &&
        cfg__get_string(c, v, cfg__join(path, base, "value"), value, CFG_RULE_VALUE_MAX, true,
                        printable, "a descriptor value (printable)") < 0)
        return;
    bool shadow = false, quota = false, detailed = false, to_metric = false, share = false;
    if ((v = cfg__at(m, "shadow_mode")))
        get_bool(c, v, cfg__join(path, base, "shadow_mode"), &shadow);
    if ((v = cfg__at(m, "quota_mode")))
        get_bool(c, v, cfg__join(path, base, "quota_mode"), &quota);
    if ((v = cfg__at(m, "detailed_metric")))
        get_bool(c, v, cfg__join(path, base, "detailed_metric"), &detailed);
    if ((v = cfg__at(m, "value_to_metric")))
        get_bool(c, v, cfg__join(path, base, "value_to_metric"), &to_metric);
    cfg_match_t match = cfg_match_of(value, strlen(value));
    if ((v = cfg__at(m, "share_threshold")) &&
        get_bool(c, v, cfg__join(path, base, "share_threshold"), &share) == 0 && share &&
        match != CFG_MATCH_GLOB) /* envoy ratelimit's message */
        cfg__err(c, path, v,
                 "share_threshold can only be used with wildcard values (containing '*'), but "
                 "found key '%s%s%s'",
                 key, value[0] ? "_" : "", value);
    /* metadata is the response's dynamic metadata: accepted, not returned (docs/clients.md) */
    cfg_rule_t saved = w->path;
    uint8_t flags =
        (uint8_t)((share ? CFG_ENTRY_SHARE : 0) | (to_metric ? CFG_ENTRY_VALUE_METRIC : 0));
    if (cfg_rule_add_entry(&w->path, match, flags, key, strlen(key), value, strlen(value)) < 0) {
        cfg__err(c, base, n, "deeper than %d levels, or the path takes more than %d bytes",
                 CFG_RULE_ENTRIES_MAX, CFG_RULE_BYTES);
        return;
    }
    const cfg_node_t *rl = cfg__at(m, "rate_limit"), *children = cfg__at(m, "descriptors");
    bool has_children = false;
    const cfg_node_t *seq = NULL;
    if (children) {
        bool empty;
        seq = want_seq(c, children, cfg__join(path, base, "descriptors"), &empty);
        has_children = seq && seq->n > 0;
    }
    if (rl || !has_children) {
        cfg_limit_t *l = batch_add(w, n, base);
        if (l) {
            l->rule = w->path;
            if (rl) {
                load_rate_limit(w, rl, cfg__join(path, base, "rate_limit"), l, shadow);
            } else {
                l->type = CFG_TYPE_RPM;
                l->rule.flags |= CFG_RULE_ALLOW;
            }
            l->rule.flags |=
                (uint8_t)((quota ? CFG_RULE_QUOTA : 0) | (detailed ? CFG_RULE_DETAILED : 0));
            l->posture.on = 1;
        }
    }
    if (seq)
        load_descriptors(w, seq, cfg__join(path, base, "descriptors"));
    w->path = saved;
}

static void load_descriptors(struct walk *w, const cfg_node_t *seq, const char *base)
{
    for (size_t i = 0; i < seq->n; i++) {
        char path[PATH_SIZE];
        snprintf(path, sizeof(path), "%.*s[%zu]", PATH_SIZE - 24, base, i);
        load_node(w, seq->items[i], path);
    }
}

/* ---- joining the config ---- */

/* A rule's id from its domain and path, [a-z0-9_], at most CFG_ID_MAX, unique in cfg and in
 * the batch so far: "rls_" and the full key with every other byte '_', or, when that is too
 * long or taken, cut and followed by a hash of the full key. */
static int make_id(const cfg_config_t *cfg, const struct batch *b, size_t upto, cfg_limit_t *l)
{
    char full[CFG_RULE_DOMAIN_MAX + CFG_RULE_BYTES + 64], id[CFG_ID_MAX + 1];
    cfg_rule_full_key(&l->rule, full, sizeof(full));
    size_t k = 0;
    memcpy(id, "rls_", 4);
    k = 4;
    for (size_t i = 0; full[i] && k < sizeof(id) - 1; i++) {
        char ch = full[i];
        ch = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9')))
            ch = '_';
        if (ch == '_' && id[k - 1] == '_')
            continue;
        id[k++] = ch;
    }
    id[k] = '\0';
    bool cut = strlen(full) + 4 > CFG_ID_MAX;
    for (int attempt = 0; attempt < 2; attempt++) {
        bool taken = false;
        for (size_t i = 0; i < cfg->n_limits && !taken; i++)
            taken = strcmp(cfg->limits[i].id, id) == 0;
        for (size_t i = 0; i < upto && !taken; i++)
            taken = strcmp(b->l[i].id, id) == 0;
        if (!taken && !(cut && attempt == 0)) {
            memcpy(l->id, id, strlen(id) + 1);
            return 0;
        }
        uint64_t h = tt_fnv1a64(TT_FNV1A64_BASIS, full, strlen(full));
        size_t keep = k < CFG_ID_MAX - 17 ? k : CFG_ID_MAX - 17;
        snprintf(id + keep, sizeof(id) - keep, "_%016llx", (unsigned long long)h);
        cut = false;
    }
    return -1;
}

/* The checks of a file's rules against each other and the config. */
static void check_batch(struct cfg__ctx *c, const struct batch *b, const cfg_node_t *domain_node)
{
    const cfg_config_t *cfg = c->cfg;
    char key[512];
    bool known = false;
    for (size_t i = 0; i < cfg->n_limits && !known; i++)
        known = strcmp(cfg->limits[i].rule.domain, b->l[0].rule.domain) == 0;
    if (known && !cfg->server.grpc_merge_domain_config) {
        cfg__err(c, "domain", domain_node,
                 "duplicate domain '%s' in config file (another file, or governance.limits, "
                 "declares it; server.grpc_merge_domain_config: true merges them)",
                 b->l[0].rule.domain);
        return;
    }
    for (size_t i = 0; i < b->n; i++) {
        const cfg_limit_t *a = &b->l[i];
        bool dup = false;
        for (size_t j = 0; j < i && !dup; j++)
            dup = cfg__same_path(&b->l[j].rule, &a->rule);
        for (size_t j = 0; j < cfg->n_limits && !dup; j++)
            dup = strcmp(cfg->limits[j].rule.domain, a->rule.domain) == 0 &&
                  cfg__same_path(&cfg->limits[j].rule, &a->rule);
        if (dup) /* envoy ratelimit's message */
            cfg__err(c, b->path[i], b->at[i], "duplicate descriptor composite key '%s'",
                     cfg_rule_full_key(&a->rule, key, sizeof(key)));
    }
}

/* Appends a checked batch to cfg's limits. */
static int append(cfg_config_t *cfg, struct batch *b)
{
    if (b->n == 0)
        return 0;
    cfg_limit_t *all = realloc(cfg->limits, (cfg->n_limits + b->n) * sizeof(*all));
    if (!all)
        return CFG_ENOMEM;
    memcpy(all + cfg->n_limits, b->l, b->n * sizeof(*all));
    cfg->limits = all;
    cfg->n_limits += b->n;
    return 0;
}

int cfg_load_envoy_string(cfg_config_t *cfg, const char *name, const char *text, size_t len,
                          cfg_report_t *report)
{
    size_t before = cfg->n_limits;
    cfg_doc_t doc;
    int rc = cfg__yaml_load(name, text, len, CFG_YAML_LITERAL, &doc, report);
    if (rc < 0) {
        cfg__doc_free(&doc);
        return rc;
    }
    struct cfg__ctx c = {.file = name, .report = report, .cfg = cfg, .errors = doc.errors};
    struct batch b = {0};
    struct walk w = {.c = &c, .out = &b};
    const cfg_node_t *root = doc.root, *d = NULL, *v;
    char domain[CFG_RULE_DOMAIN_MAX + 1] = "";
    if (!root || (root->kind == CFG_NODE_SCALAR && root->null)) {
        cfg__err(&c, "(root)", root,
                 "the file is empty; an envoy ratelimit config is a mapping with domain and "
                 "descriptors");
    } else if (root->kind != CFG_NODE_MAP) {
        cfg__err(&c, "(root)", root,
                 "expected a mapping with domain and descriptors (an envoy ratelimit config), "
                 "got %s",
                 cfg__kind_name(root));
    } else if ((root = want_map(&c, root, "", root_keys))) {
        d = cfg__at(root, "domain");
        if (!d || (d->kind == CFG_NODE_SCALAR && !d->failed && (d->null || !d->text[0])))
            cfg__err(&c, "domain", d ? d : root, "config file cannot have empty domain");
        else
            cfg__get_string(&c, d, "domain", domain, CFG_RULE_DOMAIN_MAX, false, printable,
                            "a domain (printable)");
        memcpy(w.path.domain, domain, sizeof(domain));
        bool empty;
        if (domain[0] && (v = cfg__at(root, "descriptors")) &&
            (v = want_seq(&c, v, "descriptors", &empty)))
            load_descriptors(&w, v, "descriptors");
    }
    if (!c.errors && !c.oom && b.n) {
        check_batch(&c, &b, d);
        if (!c.errors && cfg->n_limits + b.n > CFG_LIMITS_MAX)
            cfg__err(&c, "descriptors", d,
                     "%zu rules with governance.limits and the files before; at most %d",
                     cfg->n_limits + b.n, CFG_LIMITS_MAX);
        for (size_t i = 0; !c.errors && i < b.n; i++)
            if (make_id(cfg, &b, i, &b.l[i]) < 0)
                cfg__err(&c, b.path[i], b.at[i], "no id left for this rule");
    }
    cfg__doc_free(&doc);
    if (c.oom || (!c.errors && append(cfg, &b) < 0)) {
        batch_free(&b);
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return CFG_ENOMEM;
    }
    batch_free(&b);
    if (c.errors)
        return CFG_EINVALID;
    rc = cfg__add_overrides(cfg, report);
    if (rc < 0) /* all or nothing: the file's rules go with it */
        cfg->n_limits = before;
    return rc;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int cfg_load_grpc_config_dir(cfg_config_t *cfg, const char *dir, cfg_report_t *report)
{
    size_t before = cfg->n_limits;
    DIR *d = opendir(dir);
    if (!d) {
        cfg__report_add(report, false, CFG_EINVALID, "server.grpc_config_dir", NULL,
                        "cannot open the directory %s: %s", dir, strerror(errno));
        return CFG_EINVALID;
    }
    char *names[CFG_GRPC_FILES_MAX];
    size_t n = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue; /* ., .., and a ConfigMap's ..data and ..<timestamp> */
        if (n == CFG_GRPC_FILES_MAX) {
            cfg__report_add(report, false, CFG_EINVALID, "server.grpc_config_dir", NULL,
                            "%s holds more than %d files", dir, CFG_GRPC_FILES_MAX);
            rc = CFG_EINVALID;
            break;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = CFG_ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(names[0]), by_name);
    for (size_t i = 0; i < n && rc != CFG_ENOMEM; i++) {
        char path[CFG_PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            cfg__report_add(report, true, 0, "server.grpc_config_dir", NULL,
                            "%s is a directory: not read (the files of server.grpc_config_dir "
                            "are read, not its subdirectories)",
                            path);
            continue;
        }
        char *text;
        size_t len;
        int r = cfg__read_file(path, &text, &len, report);
        if (r == 0) {
            r = cfg_load_envoy_string(cfg, path, text, len, report);
            free(text);
        }
        if (r < 0 && rc != CFG_ENOMEM)
            rc = r;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    if (rc == 0)
        rc = cfg__add_overrides(cfg, report);
    if (rc < 0)
        cfg->n_limits = before; /* all or nothing: what the good files appended goes too */
    return rc;
}

/* ---- the counters of a descriptor's own limit ---- */

int cfg__add_overrides(cfg_config_t *cfg, cfg_report_t *report)
{
    bool rules = false;
    for (size_t i = 0; i < cfg->n_limits; i++) {
        if (cfg->limits[i].rule.flags & CFG_RULE_OVERRIDE)
            return 0;
        rules = rules || cfg_limit_is_rule(&cfg->limits[i]);
    }
    if (!rules)
        return 0;
    for (size_t i = 0; i < cfg->n_limits; i++)
        if (strncmp(cfg->limits[i].id, "rls_override_", 13) == 0)
            return cfg__report_add(report, false, CFG_EINVALID, "governance.limits", NULL,
                                   "limit \"%s\": ids rls_override_<unit> name the counters of "
                                   "descriptors that carry their own limit; choose another id",
                                   cfg->limits[i].id) < 0
                       ? CFG_ENOMEM
                       : CFG_EINVALID;
    if (cfg->n_limits + CFG_UNITS > CFG_LIMITS_MAX)
        return cfg__report_add(report, false, CFG_EINVALID, "governance.limits", NULL,
                               "%zu limits and rules, and the %d counters of descriptors that "
                               "carry their own limit; at most %d",
                               cfg->n_limits, CFG_UNITS, CFG_LIMITS_MAX) < 0
                   ? CFG_ENOMEM
                   : CFG_EINVALID;
    struct batch b = {0};
    struct cfg__ctx c = {.cfg = cfg};
    struct walk w = {.c = &c, .out = &b};
    for (size_t u = 0; u < CFG_UNITS; u++) {
        cfg_limit_t *l = batch_add(&w, NULL, "");
        if (!l)
            break;
        snprintf(l->id, sizeof(l->id), "rls_override_%s", cfg_units[u].name);
        snprintf(l->rule.domain, sizeof(l->rule.domain), "*");
        l->rule.flags = CFG_RULE_OVERRIDE;
        l->type = CFG_TYPE_RPM;
        l->algorithm = RA_ENVOY_WINDOW;
        l->store = cfg->server.grpc_config_store;
        l->posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
        l->period_ns = cfg_units[u].seconds * RA_NS_PER_S;
    }
    int rc = c.oom ? CFG_ENOMEM : append(cfg, &b);
    batch_free(&b);
    if (rc < 0)
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
    return rc;
}
