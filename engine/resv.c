/* The reservation pool: an array with a free list, an oldest-first queue, and the accounts that
 * share it (see resv.h). */
#include "resv.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define EXPIRE_PER_ADD 2 /* expired entries ended by every add: expiry keeps pace with adds */

int gov_resv_init(gov_resv_t *r, size_t max, size_t max_bytes, int64_t ttl, const uint64_t seed[2],
                  void (*drop)(void *record))
{
    memset(r, 0, sizeof(*r));
    r->free = r->head = r->tail = r->free_acct = NONE;
    r->max = max < NONE - 1 ? max : NONE - 1;
    r->max_bytes = max_bytes;
    r->entry_cost = r->max ? max_bytes / r->max : 0;
    if (!r->entry_cost)
        r->entry_cost = 1;
    r->ttl = ttl;
    r->drop = drop;
    r->key = gov_ticket_key(seed, "reservation");
    return 0;
}

void gov_resv_free(gov_resv_t *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->e[i].record)
            r->drop(r->e[i].record);
    free(r->e);
    free(r->acct);
    free(r->heap);
    free(r->map);
    memset(r, 0, sizeof(*r));
}

/* ---- accounts: a max-heap on weight, and a map from id ----------------------------------- */

static void heap_set(gov_resv_t *r, uint32_t at, uint32_t a)
{
    r->heap[at] = a;
    r->acct[a].heap = at;
}

/* Restores the heap after account a's weight changed (either way). */
static void heap_fix(gov_resv_t *r, uint32_t a)
{
    uint32_t at = r->acct[a].heap;
    uint64_t w = r->acct[a].weight;
    while (at > 0 && r->acct[r->heap[(at - 1) / 2]].weight < w) {
        heap_set(r, at, r->heap[(at - 1) / 2]);
        at = (at - 1) / 2;
    }
    for (;;) {
        uint32_t big = at, l = 2 * at + 1, rt = l + 1;
        if (l < r->n_heap &&
            r->acct[r->heap[l]].weight > (big == at ? w : r->acct[r->heap[big]].weight))
            big = l;
        if (rt < r->n_heap &&
            r->acct[r->heap[rt]].weight > (big == at ? w : r->acct[r->heap[big]].weight))
            big = rt;
        if (big == at)
            break;
        heap_set(r, at, r->heap[big]);
        at = big;
    }
    heap_set(r, at, a);
}

static uint32_t map_pos(const gov_resv_t *r, uint64_t id)
{
    return (uint32_t)((id * UINT64_C(0x9e3779b97f4a7c15)) >> 32) & (r->map_cap - 1);
}

/* Doubles the map, and the heap and the accounts with it (at most half as many as the map's
 * slots); -1 when out of memory. */
static int map_grow(gov_resv_t *r)
{
    uint32_t cap = r->map_cap ? 2 * r->map_cap : 16;
    uint32_t *map = calloc(cap, sizeof(*map));
    uint32_t *heap = map ? realloc(r->heap, cap / 2 * sizeof(*heap)) : NULL;
    gov_resv_account_t *acct = heap ? realloc(r->acct, cap / 2 * sizeof(*acct)) : NULL;
    if (heap)
        r->heap = heap;
    if (!acct) {
        free(map);
        return -1;
    }
    r->acct = acct;
    uint32_t *old = r->map, old_cap = r->map_cap;
    r->map = map;
    r->map_cap = cap;
    for (uint32_t i = 0; i < old_cap; i++) {
        if (!old[i])
            continue;
        uint32_t at = map_pos(r, r->acct[old[i] - 1].id);
        while (map[at])
            at = (at + 1) & (cap - 1);
        map[at] = old[i];
    }
    free(old);
    return 0;
}

/* The index of account `id`, made when it has none. NONE when out of memory. */
static uint32_t account(gov_resv_t *r, uint64_t id)
{
    uint32_t at = 0;
    if (r->map_cap) {
        for (at = map_pos(r, id); r->map[at]; at = (at + 1) & (r->map_cap - 1))
            if (r->acct[r->map[at] - 1].id == id)
                return r->map[at] - 1;
    }
    if (2 * (r->n_heap + 1) > r->map_cap) { /* at most half full */
        if (map_grow(r) < 0)
            return NONE;
        for (at = map_pos(r, id); r->map[at]; at = (at + 1) & (r->map_cap - 1))
            ;
    }
    uint32_t a = r->free_acct; /* else a new one: the map's growth made room for it */
    if (a != NONE)
        r->free_acct = r->acct[a].head;
    else
        a = r->n_acct++;
    r->acct[a] = (gov_resv_account_t){.id = id, .head = NONE, .tail = NONE, .heap = r->n_heap};
    r->heap[r->n_heap++] = a;
    r->map[at] = a + 1;
    return a;
}

/* Forgets account a, which holds no entry any more (backward-shift deletion in the map). */
static void account_drop(gov_resv_t *r, uint32_t a)
{
    uint32_t at = map_pos(r, r->acct[a].id);
    while (r->map[at] != a + 1)
        at = (at + 1) & (r->map_cap - 1);
    for (uint32_t next = (at + 1) & (r->map_cap - 1); r->map[next];
         next = (next + 1) & (r->map_cap - 1)) {
        uint32_t home = map_pos(r, r->acct[r->map[next] - 1].id);
        /* moves back unless its home lies cyclically in (at, next] */
        if ((next > at && (home <= at || home > next)) ||
            (next < at && home <= at && home > next)) {
            r->map[at] = r->map[next];
            at = next;
        }
    }
    r->map[at] = 0;
    uint32_t last = r->heap[--r->n_heap];
    if (last != a) {
        heap_set(r, r->acct[a].heap, last);
        heap_fix(r, last);
    }
    r->acct[a].head = r->free_acct;
    r->free_acct = a;
}

static void weigh(gov_resv_t *r, uint32_t a, int64_t delta)
{
    r->acct[a].weight = (uint64_t)((int64_t)r->acct[a].weight + delta);
    heap_fix(r, a);
}

/* ---- entries ----------------------------------------------------------------------------- */

/* Ends entry i, the oldest of its account, whatever its state, and puts it on the free list. */
static void end_entry(gov_resv_t *r, uint32_t i)
{
    gov_resv_entry_t *x = &r->e[i];
    int64_t weight = (int64_t)r->entry_cost;
    if (x->state == GOV_RESV_OPEN) {
        r->drop(x->record);
        r->bytes -= x->bytes;
        r->open--;
        weight += x->bytes;
    }
    if (x->prev != NONE)
        r->e[x->prev].next = x->next;
    else
        r->head = x->next;
    if (x->next != NONE)
        r->e[x->next].prev = x->prev;
    else
        r->tail = x->prev;
    r->count--;
    gov_resv_account_t *ac = &r->acct[x->acct];
    ac->head = x->anext; /* entries of an account end in the order they came */
    if (ac->head == NONE) {
        ac->tail = NONE;
        account_drop(r, x->acct);
    } else {
        weigh(r, x->acct, -weight);
    }
    *x = (gov_resv_entry_t){.gen = x->gen, .next = r->free};
    r->free = i;
}

size_t gov_resv_expire(gov_resv_t *r, int64_t now, size_t budget)
{
    size_t ended = 0;
    while (ended < budget && r->head != NONE && r->e[r->head].expires <= now) {
        r->expired += r->e[r->head].state == GOV_RESV_OPEN;
        end_entry(r, r->head);
        ended++;
    }
    return ended;
}

/* An entry to fill: from the free list, or a new one (growing the array). NONE when out of
 * memory or at the cap with nothing to end (cannot happen: the caller made room). */
static uint32_t take(gov_resv_t *r)
{
    if (r->free != NONE) {
        uint32_t i = r->free;
        r->free = r->e[i].next;
        return i;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap ? (size_t)r->cap * 2 : 64;
        if (cap > r->max)
            cap = r->max;
        if (cap <= r->n)
            return NONE;
        gov_resv_entry_t *e = realloc(r->e, cap * sizeof(*e));
        if (!e)
            return NONE;
        r->e = e;
        r->cap = (uint32_t)cap;
    }
    r->e[r->n] = (gov_resv_entry_t){0};
    return r->n++;
}

uint64_t gov_resv_add(gov_resv_t *r, uint64_t account_id, void *record, size_t bytes, int64_t now)
{
    gov_resv_expire(r, now, EXPIRE_PER_ADD);
    /* room: the heaviest account gives up its oldest entry, while the pool is full */
    while (r->head != NONE && (r->count >= r->max || r->bytes + bytes > r->max_bytes)) {
        uint32_t oldest = r->acct[r->heap[0]].head;
        r->evicted += r->e[oldest].state == GOV_RESV_OPEN;
        end_entry(r, oldest);
    }
    uint32_t a = account(r, account_id);
    uint32_t i = a == NONE ? NONE : take(r);
    if (i == NONE) {
        if (a != NONE && r->acct[a].head == NONE)
            account_drop(r, a);
        return 0;
    }
    gov_resv_entry_t *x = &r->e[i];
    uint64_t id;
    do /* one (index, generation) in 2^64 seals to 0, which says "none": skip it */
        x->gen++;
    while ((id = gov_ticket_seal(&r->key, i, x->gen)) == 0);
    x->record = record;
    x->bytes = (uint32_t)bytes;
    x->expires = now > INT64_MAX - r->ttl ? INT64_MAX : now + r->ttl;
    x->state = GOV_RESV_OPEN;
    x->next = x->anext = NONE;
    x->prev = r->tail;
    x->acct = a;
    if (r->tail != NONE)
        r->e[r->tail].next = i;
    else
        r->head = i;
    r->tail = i;
    gov_resv_account_t *ac = &r->acct[a];
    if (ac->tail != NONE)
        r->e[ac->tail].anext = i;
    else
        ac->head = i;
    ac->tail = i;
    weigh(r, a, (int64_t)(r->entry_cost + bytes));
    r->count++;
    r->open++;
    r->bytes += bytes;
    return id;
}

/* The entry `id` names at `now`, or NULL. */
static const gov_resv_entry_t *lookup(const gov_resv_t *r, uint64_t id, int64_t now)
{
    uint32_t i, gen;
    gov_ticket_open(&r->key, id, &i, &gen);
    if (i >= r->n)
        return NULL;
    const gov_resv_entry_t *x = &r->e[i];
    if (!x->state || x->gen != gen || x->expires <= now)
        return NULL;
    return x;
}

int gov_resv_find(const gov_resv_t *r, uint64_t id, int64_t now, void **record)
{
    const gov_resv_entry_t *x = lookup(r, id, now);
    if (!x)
        return GOV_RESV_UNKNOWN;
    *record = x->record;
    return x->state;
}

void gov_resv_settle(gov_resv_t *r, uint64_t id)
{
    uint32_t i, gen;
    gov_ticket_open(&r->key, id, &i, &gen);
    gov_resv_entry_t *x = &r->e[i];
    r->drop(x->record);
    r->bytes -= x->bytes;
    r->open--;
    weigh(r, x->acct, -(int64_t)x->bytes);
    x->record = NULL;
    x->bytes = 0;
    x->state = GOV_RESV_SETTLED;
}
