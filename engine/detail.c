/*
 * The rule language's detailed metrics: a rule with detailed_metric (or an entry with
 * value_to_metric) is counted per the values a descriptor carried, under the key envoy ratelimit
 * names its stats with (domain.key_value.key_value...), besides its per-limit counts.
 *
 * Those keys come from requests, so their number is bounded here: at most GOV_DETAIL_MAX series
 * are kept for the process's life (counters never go backwards across a reload), and what does
 * not find room is counted in `dropped` instead of growing memory. A table of fixed size, open
 * addressing, allocated at the first detailed count.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "tt_hash.h"

typedef struct detail {
    uint64_t hash; /* 0: empty */
    char limit[CFG_ID_MAX + 1];
    uint16_t key_len;
    char key[GOV_DETAIL_KEY_MAX];
    uint64_t outcomes[GOV_OUT_COUNT];
} detail_t;

struct gov_details {
    detail_t slots[GOV_DETAIL_SLOTS];
    size_t count;
    uint64_t dropped;
};

/* Appends ".key" and "_value" parts to the key being built, cut at the bound. */
static size_t put(char *key, size_t at, const char *a, size_t alen, char sep)
{
    if (at < GOV_DETAIL_KEY_MAX && sep)
        key[at++] = sep;
    size_t n = alen < GOV_DETAIL_KEY_MAX - at ? alen : GOV_DETAIL_KEY_MAX - at;
    memcpy(key + at, a, n);
    return at + n;
}

/*
 * The stats key of a descriptor that met rule l: envoy ratelimit's GetLimit. With
 * detailed_metric every entry is key_value (a glob sharing its threshold: its pattern); else an
 * entry with value_to_metric is key_value, a value entry key_value, a glob key_pattern, a
 * key-only entry its key. Returns 0 when the rule keeps no detailed series.
 */
static size_t stats_key(char *key, const gov_limit_t *l, const gov_subject_t *s)
{
    cfg_entry_t e[CFG_RULE_ENTRIES_MAX];
    size_t n = cfg_rule_entries(&l->cfg.rule, e);
    bool detailed = l->cfg.rule.flags & CFG_RULE_DETAILED, any = detailed;
    for (size_t i = 0; i < n && !any; i++)
        any = e[i].flags & CFG_ENTRY_VALUE_METRIC;
    if (!any || n != s->n)
        return 0;
    size_t at = put(key, 0, l->cfg.rule.domain, strlen(l->cfg.rule.domain), 0);
    for (size_t i = 0; i < n; i++) {
        const char *v = s->pairs[i].id;
        size_t vl = s->pairs[i].id_len;
        bool shared = e[i].match == CFG_MATCH_GLOB && (e[i].flags & CFG_ENTRY_SHARE);
        if (shared || (!detailed && !(e[i].flags & CFG_ENTRY_VALUE_METRIC))) {
            v = e[i].value; /* "" for a key-only entry: its key alone */
            vl = e[i].value_len;
        }
        at = put(key, at, e[i].key, e[i].key_len, '.');
        if (vl)
            at = put(key, at, v, vl, '_');
    }
    return at;
}

void gov__detail_count(gov_engine_t *e, const gov_limit_t *l, const gov_subject_t *s,
                       gov_outcome_t outcome)
{
    char key[GOV_DETAIL_KEY_MAX];
    size_t len = stats_key(key, l, s);
    if (len == 0)
        return;
    if (!e->details && !(e->details = calloc(1, sizeof(*e->details))))
        return; /* out of memory: the per-limit counts still count it */
    gov_details_t *d = e->details;
    size_t id_len = strlen(l->cfg.id);
    uint64_t h = tt_fnv1a64(tt_fnv1a64(TT_FNV1A64_BASIS, l->cfg.id, id_len + 1), key, len) | 1;
    for (size_t i = 0, at = h & (GOV_DETAIL_SLOTS - 1); i < GOV_DETAIL_SLOTS;
         i++, at = (at + 1) & (GOV_DETAIL_SLOTS - 1)) {
        detail_t *x = &d->slots[at];
        if (x->hash == h && x->key_len == len && memcmp(x->key, key, len) == 0 &&
            strcmp(x->limit, l->cfg.id) == 0) {
            x->outcomes[outcome]++;
            return;
        }
        if (x->hash)
            continue;
        if (d->count >= GOV_DETAIL_MAX)
            break;
        x->hash = h;
        memcpy(x->limit, l->cfg.id, id_len + 1);
        memcpy(x->key, key, len);
        x->key_len = (uint16_t)len;
        x->outcomes[outcome] = 1;
        d->count++;
        return;
    }
    d->dropped++;
}

uint64_t gov_engine_each_detail(gov_engine_t *e, gov_detail_fn fn, void *ctx)
{
    if (!e->details)
        return 0;
    for (size_t i = 0; i < GOV_DETAIL_SLOTS; i++) {
        const detail_t *x = &e->details->slots[i];
        if (!x->hash)
            continue;
        gov_detail_t m = {.limit = x->limit, .key = x->key, .key_len = x->key_len};
        memcpy(m.outcomes, x->outcomes, sizeof(m.outcomes));
        fn(ctx, &m);
    }
    return e->details->dropped;
}

void gov__details_free(gov_engine_t *e)
{
    free(e->details);
    e->details = NULL;
}
