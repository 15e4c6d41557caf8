/*
 * From a request to the limits it meets: the subject resolved against the generation's levels,
 * the limits of the operation's types that apply (mode on; "global" always, with the empty id as
 * its one key), the limiter in force for each, and its local counter. Shared by decide, settle
 * and acquire.
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

static const uint8_t no_key[1] = {0};

size_t gov__key_fold(char *key, size_t len)
{
    if (len <= GOV_ID_MAX)
        return len;
    unsigned char digest[GOV_KEY_DIGEST];
    crypto_generichash(digest, sizeof(digest), (const unsigned char *)key, len, NULL, 0);
    memcpy(key + GOV_ID_MAX - GOV_KEY_DIGEST, digest, GOV_KEY_DIGEST);
    return GOV_ID_MAX;
}

/* For each subject pair, the config level it names (index into gov_set_t.levels) or -1. */
typedef struct gov_resolved {
    int level[GOV_SUBJECT_MAX];
} gov_resolved_t;

size_t gov__subject_bytes(const gov_subject_t *s)
{
    size_t bytes = 0;
    for (size_t i = 0; i < s->n; i++)
        bytes += s->pairs[i].level_len + s->pairs[i].id_len;
    return bytes;
}

void gov__subject_copy(gov_subject_t *dst, char *bytes, const gov_subject_t *src)
{
    dst->n = src->n;
    for (size_t i = 0; i < src->n; i++) {
        const gov_pair_t *from = &src->pairs[i];
        gov_pair_t *to = &dst->pairs[i];
        memcpy(bytes, from->level, from->level_len);
        to->level = bytes;
        to->level_len = from->level_len;
        bytes += from->level_len;
        if (from->id_len)
            memcpy(bytes, from->id, from->id_len);
        to->id = bytes;
        to->id_len = from->id_len;
        bytes += from->id_len;
    }
}

/* The packed form: n, then per pair its level length (1 byte) and id length (2 bytes, little
 * endian), then the bytes of every level and id in order. */
size_t gov__subject_pack_size(const gov_subject_t *s)
{
    return 1 + 3 * s->n + gov__subject_bytes(s);
}

void gov__subject_pack(uint8_t *dst, const gov_subject_t *s)
{
    uint8_t *b = dst + 1 + 3 * s->n;
    dst[0] = (uint8_t)s->n;
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *pr = &s->pairs[i];
        dst[1 + 3 * i] = (uint8_t)pr->level_len;
        dst[2 + 3 * i] = (uint8_t)pr->id_len;
        dst[3 + 3 * i] = (uint8_t)(pr->id_len >> 8);
        memcpy(b, pr->level, pr->level_len);
        b += pr->level_len;
        if (pr->id_len)
            memcpy(b, pr->id, pr->id_len);
        b += pr->id_len;
    }
}

void gov__subject_unpack(gov_subject_t *s, const uint8_t *src)
{
    const char *b = (const char *)src + 1 + 3 * (size_t)src[0];
    s->n = src[0];
    for (size_t i = 0; i < s->n; i++) {
        gov_pair_t *pr = &s->pairs[i];
        pr->level_len = src[1 + 3 * i];
        pr->id_len = (size_t)src[2 + 3 * i] | (size_t)src[3 + 3 * i] << 8;
        pr->level = b;
        b += pr->level_len;
        pr->id = b;
        b += pr->id_len;
    }
}

void gov__probes_select(probe_t *p, size_t *n, const gov_probe_set_t *keep,
                        const gov_probe_set_t *local)
{
    size_t k = 0;
    for (size_t i = 0; i < *n; i++) {
        if (!(keep->bits[i / 64] >> (i % 64) & 1))
            continue;
        p[k] = p[i];
        p[k++].local = local->bits[i / 64] >> (i % 64) & 1;
    }
    *n = k;
}

/* The path of one level of the subject, "subject.<level>", in buf (TT_ERR_PATH_MAX bytes). */
static const char *level_path(char *buf, const gov_pair_t *p)
{
    snprintf(buf, TT_ERR_PATH_MAX, "subject.%.*s", (int)p->level_len, p->level);
    return buf;
}

/* Level names are short: compared inline rather than by a call. */
static inline bool same_name(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static int resolve(const gov_set_t *set, const gov_subject_t *s, gov_resolved_t *res,
                   gov_result_t *out)
{
    char path[TT_ERR_PATH_MAX];
    if (s->n > GOV_SUBJECT_MAX)
        return gov__fail(out, GOV_ESUBJECT, "subject", "%zu levels, at most %d", s->n,
                         GOV_SUBJECT_MAX);
    for (size_t i = 0; i < s->n; i++) {
        const gov_pair_t *p = &s->pairs[i];
        if (!p->level || p->level_len == 0 || p->level_len > CFG_LEVEL_MAX)
            return gov__fail(out, GOV_ESUBJECT, "subject", "a level name must be 1 to %d bytes",
                             CFG_LEVEL_MAX);
        if (p->id_len > GOV_ID_MAX || (!p->id && p->id_len))
            return gov__fail(out, GOV_ESUBJECT, level_path(path, p), "id longer than %d bytes",
                             GOV_ID_MAX);
        for (size_t j = 0; j < i; j++)
            if (s->pairs[j].level_len == p->level_len &&
                memcmp(s->pairs[j].level, p->level, p->level_len) == 0)
                return gov__fail(out, GOV_ESUBJECT, level_path(path, p), "level given twice");
        res->level[i] = -1;
        for (size_t k = 0; k < set->n_levels; k++) {
            if (set->levels[k].len == p->level_len &&
                same_name(set->levels[k].name, p->level, p->level_len)) {
                res->level[i] = (int)k;
                break;
            }
        }
    }
    return 0;
}

/* Which limits a subject addresses: every limit whose levels it names, or (exact) only those
 * attached to exactly its levels in its order. *pair: the pair holding a one-level key. */
static bool applies(const gov_limit_t *l, size_t n_pairs, const gov_resolved_t *res, bool exact,
                    int *pair)
{
    *pair = -1;
    if (exact && l->n_levels != n_pairs)
        return false;
    for (size_t j = 0; j < l->n_levels; j++) {
        int found = -1;
        for (size_t k = 0; k < n_pairs && found < 0; k++)
            if (res->level[k] == l->levels[j] && (!exact || k == j))
                found = (int)k;
        if (found < 0)
            return false;
        *pair = found;
    }
    return true;
}

/* The key of a combination: each id in the limit's level order, length-prefixed, so no two
 * tuples of ids share a counter. */
static size_t combo_key(char *buf, const gov_limit_t *l, const gov_subject_t *s,
                        const gov_resolved_t *res)
{
    size_t len = 0;
    for (size_t j = 0; j < l->n_levels; j++) {
        for (size_t k = 0; k < s->n; k++) {
            if (res->level[k] != l->levels[j])
                continue;
            const gov_pair_t *pr = &s->pairs[k];
            buf[len++] = (char)(pr->id_len >> 8);
            buf[len++] = (char)(pr->id_len & 0xff);
            if (pr->id_len)
                memcpy(buf + len, pr->id, pr->id_len);
            len += pr->id_len;
            break;
        }
    }
    return len;
}

/* Appends the probe of l, which applies, unless it is off or not of `types`. -1 when more than
 * GOV_APPLY_MAX would be held. */
static inline __attribute__((always_inline)) int add(gov_set_t *set, const gov_subject_t *s,
                                                     const gov_resolved_t *res, unsigned types,
                                                     gov_limit_t *l, int pair, probe_t *p,
                                                     size_t *n_io)
{
    size_t n = *n_io;
    if (!l->cfg.posture.on || !(types & TYPE_BIT(l->cfg.type)))
        return 0;
    if (n == GOV_APPLY_MAX)
        return -1;
    probe_t *q = &p[n];
    *q =
        (probe_t){.l = l, .pair = pair, .slot = GOV_SLOT_NONE, .lim = l->cfg.limiter, .amount = -1};
    if (l->n_levels > 1) {
        q->pair = -1;
        q->key = set->combo_keys + n * COMBO_KEY_MAX;
        q->key_len = gov__key_fold(set->combo_keys + n * COMBO_KEY_MAX,
                                   combo_key(set->combo_keys + n * COMBO_KEY_MAX, l, s, res));
    } else if (pair < 0 || !s->pairs[pair].id_len) {
        q->key = (const char *)no_key;
    } else {
        q->key = s->pairs[pair].id;
        q->key_len = s->pairs[pair].id_len;
    }
    *n_io = n + 1;
    return 0;
}

/* The limits of `types` that apply, in config order, after p[*n_io]. -1 when more than
 * GOV_APPLY_MAX would be held. A subject of one level reads the generation's index; any other
 * walks every limit. */
static int collect(gov_set_t *set, const gov_subject_t *s, const gov_resolved_t *res,
                   unsigned types, bool exact, probe_t *p, size_t *n_io)
{
    if (s->n == 1 && !exact) {
        const uint16_t *g = set->index, *g_end = g + set->n_global, *k = g_end, *k_end = g_end;
        if (res->level[0] >= 0) {
            k = g_end + set->level_at[res->level[0]];
            k_end = g_end + set->level_at[res->level[0] + 1];
        }
        while (g < g_end || k < k_end) { /* the two lists merged, in config order */
            gov_limit_t *l = &set->limits[k == k_end || (g < g_end && *g < *k) ? *g++ : *k++];
            if (add(set, s, res, types, l, l->n_levels ? 0 : -1, p, n_io) < 0)
                return -1;
        }
        return 0;
    }
    for (size_t i = 0; i < set->n; i++) {
        gov_limit_t *l = &set->limits[i];
        int pair;
        if (!l->rule && applies(l, s->n, res, exact, &pair) &&
            add(set, s, res, types, l, pair, p, n_io) < 0)
            return -1;
    }
    return 0;
}

int gov__set_index(gov_set_t *set)
{
    size_t total = 0;
    set->index = malloc((set->n + 1) * sizeof(*set->index));
    set->level_at = malloc((set->n_levels + 1) * sizeof(*set->level_at));
    if (!set->index || !set->level_at)
        return -1;
    for (size_t i = 0; i < set->n; i++)
        if (set->limits[i].n_levels == 0 && !set->limits[i].rule)
            set->index[total++] = (uint16_t)i;
    set->n_global = total;
    /* each limit of levels applies to one level alone at most (all its levels that one) */
    for (size_t k = 0; k < set->n_levels; k++) {
        gov_resolved_t res = {.level = {(int)k}};
        set->level_at[k] = (uint32_t)(total - set->n_global);
        for (size_t i = 0; i < set->n; i++) {
            int pair;
            if (set->limits[i].n_levels > 0 && applies(&set->limits[i], 1, &res, false, &pair))
                set->index[total++] = (uint16_t)i;
        }
    }
    set->level_at[set->n_levels] = (uint32_t)(total - set->n_global);
    return 0;
}

int gov__prepare_at(gov_set_t *set, const gov_subject_t *s, unsigned types, bool exact, probe_t *p,
                    size_t *n, gov_result_t *out)
{
    gov_resolved_t res;
    int rc = resolve(set, s, &res, out);
    if (rc < 0)
        return rc;
    if (collect(set, s, &res, types, exact, p, n) < 0)
        return gov__fail(out, GOV_ESUBJECT, "subject", "more than %d limits apply", GOV_APPLY_MAX);
    return 0;
}

int gov__prepare(gov_set_t *set, const gov_subject_t *s, unsigned types, probe_t *p, size_t *n,
                 gov_result_t *out)
{
    *n = 0;
    return gov__prepare_at(set, s, types, false, p, n, out);
}

/* At the cap a larger slice of reclamation runs first. */
int gov__reserve(gov_engine_t *e, size_t n, int64_t now, gov_result_t *out)
{
    if (e->table.count + n > e->table.max)
        gov_table_reclaim(&e->table, now, RECLAIM_AT_CAP);
    if (gov_table_reserve(&e->table, n) < 0)
        return gov__fail(out, GOV_ENOMEM, "", "out of memory growing the counter table");
    return 0;
}

/* The limiter in force: the share store's effective one for share limits, per key when the
 * store answers per key (`cost` is the arrival it counts). -1: unarmed or the store could not
 * say. */
int gov__limiter_in_force(gov_engine_t *e, probe_t *p, int64_t cost, int64_t now)
{
    p->lim = p->l->cfg.limiter;
    if (p->l->cfg.store != CFG_STORE_SHARE || (!e->share.limiter && !e->share.key_limiter))
        return 0; /* local; and share before the share store is wired: plain (N = 1), armed */
    bool armed = false;
    const cfg_limit_t *l = &p->l->cfg;
    int rc = e->share.key_limiter ? e->share.key_limiter(e->share_ctx, l, p->key, p->key_len, cost,
                                                         now, &p->lim, &armed)
                                  : e->share.limiter(e->share_ctx, l, now, &p->lim, &armed);
    if (rc < 0 || !armed) {
        p->lim = p->l->cfg.limiter;
        return -1;
    }
    return 0;
}

/* The handle is checked, not the index: a reload may have dropped the identity while an
 * asynchronous request was in flight, and a later one given its index to another limit. */
int gov__local_slot(gov_engine_t *e, probe_t *p, bool create)
{
    gov_table_t *t = &e->table;
    if (!gov__handle_live(t, p->l->ident))
        return -1;
    int ix = p->l->ident.index;
    uint64_t h = gov_table_hash(t, ix, p->key, p->key_len);
    if (!create) {
        p->slot = gov_table_find(t, ix, h, p->key, p->key_len);
        return 0;
    }
    int rc = gov_table_get(t, ix, h, p->key, p->key_len, &p->slot);
    if (rc == -1)
        e->m.cap_hits++;
    return rc < 0 ? -1 : 0;
}

/* posture.fail for a limit whose store could not answer. */
void gov__posture_fail(probe_t *p)
{
    p->evaluated = true;
    p->observed = false;
    p->slot = GOV_SLOT_NONE;
    if (p->l->cfg.posture.fail_open) {
        p->outcome = GOV_OUT_FAIL_OPEN;
        p->r = (ra_result_t){.admit = true, .remaining = -1};
    } else {
        p->outcome = GOV_OUT_FAIL_CLOSED;
        p->r = (ra_result_t){.admit = false, .retry_after_s = 1, .reset_after_s = 1};
    }
}

void gov__store_failed(gov_engine_t *e, probe_t *p)
{
    p->l->store_errors++;
    e->m.store_errors++;
    gov__posture_fail(p);
}

void gov__local_step(gov_engine_t *e, probe_t *p, int64_t now, int64_t cost)
{
    if (gov__local_slot(e, p, true) < 0) {
        gov__store_failed(e, p);
        return;
    }
    p->state = e->table.slots[p->slot].state;
    p->r = ra_step(&p->lim, p->state, now, cost);
    p->unit_step = cost == 1;
    p->evaluated = true;
    p->observed = p->l->cfg.store != CFG_STORE_REDIS; /* redis limits are never disclosed */
    p->outcome = GOV_OUT_ADMIT;
}
