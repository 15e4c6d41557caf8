/*
 * Configuration generations.
 *
 * A generation (gov_set_t) is one armed configuration: its limits, copied, and the distinct
 * levels they attach to. Reload builds the next generation aside, binds it to the counter table
 * and swaps it in whole, or changes nothing. Generations are reference counted: a request
 * waiting on redis holds the one it started under and finishes against it.
 *
 * Counters live in one table keyed by a limit's identity, through a small table index. A kept
 * limit (same id, same identity) reuses the old index; the others get a fresh one, and the old
 * index is dropped: its counters are reclaimed by the ticks, after which the index may be
 * given to another limit. So anything that outlives a call holds a gov_handle_t (index and
 * generation) and checks it (gov__handle_live) before it touches a counter: a redis answer that
 * comes back after two reloads must not step a limit it never asked about.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

static bool counts(const cfg_limit_t *l)
{
    return cfg_limit_counts(l);
}

void gov__set_unref(gov_set_t *set)
{
    if (set && --set->refs == 0) {
        free(set->combo_keys);
        free(set->index);
        free(set->level_at);
        gov_rules_free(set->rules);
        free(set);
    }
}

static const gov_limit_t *set_find(const gov_set_t *set, const char *id)
{
    for (size_t i = 0; set && i < set->n; i++)
        if (strcmp(set->limits[i].cfg.id, id) == 0)
            return &set->limits[i];
    return NULL;
}

/* Splits a limit's attach (one level, or levels joined by ',') into level indexes. */
static int set_levels(gov_set_t *set, gov_limit_t *l)
{
    const char *name = l->cfg.level;
    while (*name) {
        size_t len = strcspn(name, ",");
        if (len == 0 || len > CFG_LEVEL_MAX || l->n_levels == CFG_ATTACH_LEVELS_MAX)
            return -1;
        size_t k = 0;
        while (k < set->n_levels &&
               (set->levels[k].len != len || memcmp(set->levels[k].name, name, len) != 0))
            k++;
        if (k == set->n_levels) {
            memcpy(set->levels[k].name, name, len);
            set->levels[k].len = len;
            set->n_levels++;
        }
        l->levels[l->n_levels++] = (uint16_t)k;
        name += len + (name[len] == ',');
    }
    return 0;
}

/* Fails the check of limits[i]: GOV_ELIMITS, its path "governance.limits[i]". */
static int limit_fail(tt_err_t *err, size_t i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int limit_fail(tt_err_t *err, size_t i, const char *fmt, ...)
{
    char path[TT_ERR_PATH_MAX];
    snprintf(path, sizeof(path), "governance.limits[%zu]", i);
    va_list ap;
    va_start(ap, fmt);
    tt_err_vset(err, GOV_ELIMITS, path, fmt, ap);
    va_end(ap);
    return GOV_ELIMITS;
}

int gov__set_build(const cfg_limit_t *limits, size_t n, bool disclose, gov_set_t **out,
                   tt_err_t *err)
{
    if (n > GOV_LIMITS_MAX)
        return tt_err_set(err, GOV_ELIMITS, "governance.limits", "%zu limits, at most %d", n,
                          GOV_LIMITS_MAX);
    for (size_t i = 0; i < n; i++) {
        const cfg_limit_t *l = &limits[i];
        size_t id_len = strnlen(l->id, sizeof(l->id)), lv_len = strnlen(l->level, sizeof(l->level));
        bool rule = cfg_limit_is_rule(l);
        if (id_len == 0 || id_len > CFG_ID_MAX ||
            (!rule && (lv_len == 0 || lv_len > CFG_ATTACH_MAX)))
            return limit_fail(err, i, "id or level empty or too long");
        if (rule && (lv_len || !cfg_type_is_rate(l->type) ||
                     strnlen(l->rule.domain, sizeof(l->rule.domain)) > CFG_RULE_DOMAIN_MAX))
            return limit_fail(err, i, "limit \"%s\": a rule is a rate with no levels", l->id);
        if (cfg_limit_counts(l) && cfg_type_is_rate(l->type) &&
            (l->limiter.period_ns <= 0 ||
             (l->limiter.amount <= 0 && l->limiter.algorithm != RA_ENVOY_WINDOW)))
            return limit_fail(err, i, "limit \"%s\" not armed", l->id);
        if (l->type == CFG_TYPE_CONCURRENCY && l->amount <= 0)
            return limit_fail(err, i, "limit \"%s\": amount must be positive", l->id);
        if (strchr(l->level, ',') && l->store == CFG_STORE_REDIS)
            return limit_fail(err, i, "limit \"%s\": store redis counts one level", l->id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(limits[j].id, l->id) == 0)
                return limit_fail(err, i, "duplicate id \"%s\"", l->id);
    }
    gov_set_t *set = calloc(1, sizeof(*set) + n * sizeof(gov_limit_t));
    if (!set)
        return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
    set->refs = 1;
    set->disclose = disclose;
    set->n = n;
    for (size_t i = 0; i < n; i++) {
        gov_limit_t *l = &set->limits[i];
        l->cfg = limits[i];
        l->ident = (gov_handle_t){.index = -1};
        if ((l->rule = cfg_limit_is_rule(&l->cfg))) {
            cfg_entry_t e[CFG_RULE_ENTRIES_MAX];
            size_t k = cfg_rule_entries(&l->cfg.rule, e);
            for (size_t j = 0; j < k; j++)
                if (e[j].match == CFG_MATCH_ANY ||
                    (e[j].match == CFG_MATCH_GLOB && !(e[j].flags & CFG_ENTRY_SHARE)))
                    l->key_mask |= (uint16_t)(1u << j);
            continue;
        }
        if (strcmp(l->cfg.level, "global") != 0 && set_levels(set, l) < 0) {
            gov__set_unref(set);
            return limit_fail(err, i, "limit \"%s\": bad attach \"%s\"", limits[i].id,
                              limits[i].level);
        }
        if (l->n_levels > 1 && !set->combo_keys &&
            !(set->combo_keys = malloc((size_t)GOV_APPLY_MAX * COMBO_KEY_MAX))) {
            gov__set_unref(set);
            return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
        }
    }
    if (gov__set_index(set) < 0) {
        gov__set_unref(set);
        return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
    }
    int rc = gov_rules_build(limits, n, &set->rules, err);
    if (rc < 0) {
        gov__set_unref(set);
        return rc;
    }
    *out = set;
    return 0;
}

/* Gives back the identities the first n limits of `set` were freshly bound to. None of them has
 * a counter yet (nothing decided against `set`), so each index is free again at once. */
static void release_fresh(gov_engine_t *e, gov_set_t *set, const gov_reload_action_t *actions,
                          size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (actions[j] != GOV_RELOAD_KEPT && set->limits[j].ident.index >= 0)
            gov_table_ident_drop(&e->table, set->limits[j].ident.index);
}

int gov__set_bind(gov_engine_t *e, gov_set_t *set, const gov_set_t *old,
                  gov_reload_action_t *actions, tt_err_t *err)
{
    for (size_t i = 0; i < set->n; i++) {
        gov_limit_t *l = &set->limits[i];
        const gov_limit_t *was = set_find(old, l->cfg.id);
        bool same = was && was->cfg.identity == l->cfg.identity;
        actions[i] = !was ? GOV_RELOAD_ADDED : same ? GOV_RELOAD_KEPT : GOV_RELOAD_RESET;
        if (was) { /* Prometheus counters never go backwards: a limit keeps its counts */
            memcpy(l->outcomes, was->outcomes, sizeof(l->outcomes));
            l->store_errors = was->store_errors;
        }
        if (!counts(&l->cfg))
            continue;
        if (same && was->ident.index >= 0) {
            l->ident = was->ident;
            continue;
        }
        int ix = gov_table_ident_add(&e->table, l->cfg.identity, &l->cfg.limiter,
                                     l->cfg.type == CFG_TYPE_CONCURRENCY);
        if (ix < 0) {
            release_fresh(e, set, actions, i);
            return tt_err_set(err, GOV_ELIMITS, "",
                              "too many counter identities alive (%d): the counters of earlier "
                              "reloads are still being reclaimed; retry the reload shortly",
                              GOV_IDENTS_MAX);
        }
        l->ident = (gov_handle_t){.index = ix, .gen = e->table.idents[ix].gen};
    }
    return 0;
}

/* A generation built and bound aside, waiting for its commit. */
struct gov_reload {
    gov_set_t *set;
    gov_reload_action_t actions[GOV_LIMITS_MAX];
};

int gov_engine_reload_prepare(gov_engine_t *e, const cfg_limit_t *limits, size_t n, bool disclose,
                              gov_reload_t **out, tt_err_t *err)
{
    gov_reload_t *r = malloc(sizeof(*r));
    if (!r)
        return tt_err_set(err, GOV_ENOMEM, "", "out of memory");
    int rc = gov__set_build(limits, n, disclose, &r->set, err);
    if (rc < 0) {
        free(r);
        return rc;
    }
    if ((rc = gov__set_bind(e, r->set, e->set, r->actions, err)) < 0) {
        gov__set_unref(r->set);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void gov_engine_reload_abort(gov_engine_t *e, gov_reload_t *r)
{
    if (!r)
        return;
    release_fresh(e, r->set, r->actions, r->set->n);
    gov__set_unref(r->set);
    free(r);
}

void gov_engine_reload_commit(gov_engine_t *e, gov_reload_t *r, gov_reload_fn report, void *ctx)
{
    gov_set_t *set = r->set, *old = e->set;
    for (size_t i = 0; i < set->n; i++)
        if (report)
            report(ctx, set->limits[i].cfg.id, r->actions[i]);
    for (size_t i = 0; i < old->n; i++) {
        const gov_limit_t *l = &old->limits[i];
        const gov_limit_t *now_l = set_find(set, l->cfg.id);
        if (l->ident.index >= 0 && (!now_l || now_l->ident.index != l->ident.index))
            gov_table_ident_drop(&e->table, l->ident.index);
        if (!now_l && report)
            report(ctx, l->cfg.id, GOV_RELOAD_REMOVED);
    }
    e->set = set;
    gov__set_unref(old);
    free(r);
    e->m.reloads++;
}

int gov_engine_reload(gov_engine_t *e, const cfg_limit_t *limits, size_t n, bool disclose,
                      gov_reload_fn report, void *ctx, tt_err_t *err)
{
    gov_reload_t *r;
    int rc = gov_engine_reload_prepare(e, limits, n, disclose, &r, err);
    if (rc == 0)
        gov_engine_reload_commit(e, r, report, ctx);
    return rc;
}
