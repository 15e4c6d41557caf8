/*
 * The member table, the bottom of the core: a dense array of lean records (self first), its
 * open-addressing index by id hash, the id arena, state changes, the reclaiming of dead and left
 * members, and the event queue. It calls nothing of the files above it: what they keep per
 * member (a running suspicion, a place in the dissemination queue) hears of a state change, a
 * reclaim or a renumbering through the hooks swim_new hands it (c->hooks). See swim.c.
 */
#include "swim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

bool swim_addr_eq(const swim_addr_t *a, const swim_addr_t *b)
{
    return a->family == b->family && a->port == b->port &&
           memcmp(a->ip, b->ip, a->family == 6 ? 16 : 4) == 0;
}

/* ---- memory and events ---------------------------------------------------------------------- */

bool swim__grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

swim_event_t *swim__emit(swim_core_t *c, swim_event_type_t type, const member_t *m)
{
    if (!swim__grow((void **)&c->ev, &c->ev_cap, c->n_ev + 1, sizeof *c->ev))
        return NULL;
    if (type == SWIM_EV_DOWN)
        c->ctr.downs++;
    swim_event_t *e = &c->ev[c->n_ev++];
    memset(e, 0, offsetof(swim_event_t, id));
    e->type = type;
    e->live_count = c->last_live;
    if (m) {
        e->generation = m->gen;
        e->id_len = m->id_len;
        memcpy(e->id, swim__id_of(c, m), m->id_len + 1u);
    } else {
        e->id[0] = 0;
    }
    return e;
}

void swim__note_live(swim_core_t *c)
{
    int live = c->live;
    if (live != c->last_live) {
        c->last_live = live;
        swim__emit(c, SWIM_EV_LIVE_COUNT, NULL);
    }
}

/* ---- the index ----------------------------------------------------------------------------------
 */

/* The member index: open addressing, at most half full. A slot holds the member's position + 1
 * in its low IDX_BITS (0: empty) and 12 more bits of its hash above them, so a probe that meets
 * another member does not read that member's record (a cache miss each: a third of the
 * simulator's lookups at 5,000 members). */
#define IDX_BITS 20
#define IDX_POS ((UINT32_C(1) << IDX_BITS) - 1)
#define MEMBERS_MAX (1u << (IDX_BITS - 1)) /* a table's capacity doubles up to this */

static uint64_t index_mix(uint64_t h)
{
    h ^= h >> 33; /* murmur3's finalizer: FNV's low bits cluster on similar ids */
    h *= UINT64_C(0xff51afd7ed558ccd);
    return h ^ (h >> 33);
}

static uint32_t index_tag(uint64_t mixed)
{
    return (uint32_t)(mixed >> 52) << IDX_BITS;
}

int32_t swim__find(const swim_core_t *c, const char *id, size_t len)
{
    uint64_t h = swim_id_hash(id, len), x = index_mix(h);
    uint32_t tag = index_tag(x);
    for (size_t s = (size_t)x & (c->index_cap - 1);; s = (s + 1) & (c->index_cap - 1)) {
        uint32_t e = c->index[s];
        if (!e)
            return -1;
        if ((e & ~IDX_POS) != tag)
            continue;
        int32_t i = (int32_t)(e & IDX_POS) - 1;
        const member_t *m = &c->m[i];
        if (m->hash == h && m->id_len == len && memcmp(swim__id_of(c, m), id, len) == 0)
            return i;
    }
}

static void index_put(swim_core_t *c, int32_t i)
{
    uint64_t x = index_mix(c->m[i].hash);
    size_t s = (size_t)x & (c->index_cap - 1);
    while (c->index[s])
        s = (s + 1) & (c->index_cap - 1);
    c->index[s] = index_tag(x) | (uint32_t)(i + 1);
}

static void index_rebuild(swim_core_t *c)
{
    memset(c->index, 0, c->index_cap * sizeof *c->index);
    for (size_t i = 0; i < c->n; i++)
        index_put(c, (int32_t)i);
}

/* Room for one more member: grows the table, its index and the per-member arrays. */
int swim__reserve(swim_core_t *c)
{
    if (c->n < c->cap)
        return 0;
    size_t nc = c->cap ? c->cap * 2 : 16;
    if (nc > MEMBERS_MAX)
        return SWIM_ENOMEM;
    member_t *m = realloc(c->m, nc * sizeof *m);
    if (!m)
        return SWIM_ENOMEM;
    c->m = m;
    int32_t *scratch = realloc(c->scratch, nc * sizeof *scratch);
    if (!scratch)
        return SWIM_ENOMEM;
    c->scratch = scratch;
    int32_t *order = realloc(c->order, nc * sizeof *order);
    if (!order)
        return SWIM_ENOMEM;
    c->order = order;
    /* at most half full: a miss costs about 2.5 probes (4x cost 16 bytes a member, 5,000
     * cores of 5,000 members 650 MB, for 1.3 probes) */
    uint32_t *idx = malloc(2 * nc * sizeof *idx);
    if (!idx)
        return SWIM_ENOMEM;
    free(c->index);
    c->index = idx;
    c->index_cap = 2 * nc;
    c->cap = nc;
    index_rebuild(c);
    return 0;
}

/* A member's room for metadata, allocated the first time it has any. */
bool swim__meta_room(member_t *m, size_t len)
{
    if (len && !m->meta)
        m->meta = malloc(SWIM_META_MAX);
    return !len || m->meta;
}

/* A new member (alive, zeroed), with room for meta_len bytes of metadata; -1 out of memory. */
int32_t swim__add_member(swim_core_t *c, int64_t now, const char *id, size_t len, size_t meta_len)
{
    uint8_t *meta = meta_len ? malloc(SWIM_META_MAX) : NULL;
    if ((meta_len && !meta) || swim__reserve(c) ||
        !swim__grow((void **)&c->ids, &c->ids_cap, c->ids_len + len + 1, 1)) {
        free(meta);
        return -1;
    }
    int32_t i = (int32_t)c->n++;
    member_t *m = &c->m[i];
    memset(m, 0, sizeof *m);
    m->meta = meta;
    m->id_off = (uint32_t)c->ids_len;
    memcpy(c->ids + c->ids_len, id, len);
    c->ids[c->ids_len + len] = 0;
    c->ids_len += len + 1;
    m->id_len = (uint8_t)len;
    m->hash = swim_id_hash(id, len);
    m->bc_tx = -1;
    m->susp = -1;
    m->bc_prev = m->bc_next = -1;
    m->state_since = m->last_heard = m->gen_since = now;
    m->state = SWIM_ALIVE;
    c->live++;
    index_put(c, i);
    return i;
}

void swim__set_state(swim_core_t *c, int64_t now, int32_t i, swim_state_t s)
{
    member_t *m = &c->m[i];
    if (m->state != SWIM_SUSPECT || s != SWIM_SUSPECT)
        c->hooks.unsuspect(c, i);
    if (m->state != s)
        m->state_since = now;
    if (!swim__is_live(s) && m->state_since + c->cfg.reclaim_ns < c->reclaim_due)
        c->reclaim_due = m->state_since + c->cfg.reclaim_ns;
    if (!swim__is_live(s))
        c->hooks.not_live(c, now, i);
    c->live += (int)swim__is_live(s) - (int)swim__is_live(m->state);
    m->state = s;
}

/*
 * Drops the members dead or left for reclaim_ns. Only when one may be due (c->reclaim_due,
 * kept by set_state): scanning every table every second was the simulator's largest cost at
 * 1,000 members (each of N cores reading N records a second).
 */
void swim__reclaim(swim_core_t *c, int64_t now)
{
    if (now < c->reclaim_due)
        return;
    size_t keep = 1;
    bool any = false;
    c->reclaim_due = INT64_MAX;
    for (size_t i = 1; i < c->n; i++) {
        const member_t *m = &c->m[i];
        if (swim__is_live(m->state))
            continue;
        int64_t due = m->state_since + c->cfg.reclaim_ns;
        if (now >= due)
            any = true;
        else if (due < c->reclaim_due)
            c->reclaim_due = due;
    }
    if (!any)
        return;
    int32_t *map = c->scratch;
    map[0] = 0;
    for (size_t i = 1; i < c->n; i++) {
        member_t *m = &c->m[i];
        if (!swim__is_live(m->state) && now - m->state_since >= c->cfg.reclaim_ns) {
            c->hooks.dropped(c, (int32_t)i);
            free(m->meta);
            map[i] = -1;
        } else {
            map[i] = (int32_t)keep++;
        }
    }
    for (size_t i = 1; i < c->n; i++)
        if (map[i] >= 0 && (size_t)map[i] != i)
            c->m[map[i]] = c->m[i];
    size_t old_n = c->n;
    c->n = keep;
    /* the id arena is in table order (members are appended to both), so it compacts in place */
    c->ids_len = 0;
    for (size_t i = 0; i < c->n; i++) {
        member_t *m = &c->m[i];
        memmove(c->ids + c->ids_len, c->ids + m->id_off, m->id_len + 1u);
        m->id_off = (uint32_t)c->ids_len;
        c->ids_len += m->id_len + 1u;
    }
    c->hooks.renumbered_queue(c, map);
    c->hooks.renumbered_probes(c, map, old_n);
    index_rebuild(c);
}
