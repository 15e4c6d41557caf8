/* Concurrency leases: the pool of chains and the owner map (see lease.h). */
#include "lease.h"

#include <stdlib.h>
#include <string.h>

int gov_leases_init(gov_leases_t *l, size_t max, const uint64_t seed[2])
{
    memset(l, 0, sizeof(*l));
    l->key = gov_ticket_key(seed, "lease");
    l->free = GOV_LEASE_NONE;
    l->max = max < GOV_LEASE_NONE - 1 ? max : GOV_LEASE_NONE - 1;
    l->owners = calloc(64, sizeof(*l->owners));
    if (!l->owners)
        return -1;
    l->omask = 63;
    return 0;
}

void gov_leases_free(gov_leases_t *l)
{
    free(l->e);
    free(l->owners);
    memset(l, 0, sizeof(*l));
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x;
}

static size_t owner_find(const gov_leases_t *l, uint64_t owner)
{
    size_t i = mix(owner) & l->omask;
    while (l->owners[i].head && l->owners[i].owner != owner)
        i = (i + 1) & l->omask;
    return i;
}

static int owners_grow(gov_leases_t *l)
{
    size_t cap = (l->omask + 1) * 2;
    gov_owner_slot_t *o = calloc(cap, sizeof(*o)), *old = l->owners;
    if (!o)
        return -1;
    size_t old_cap = l->omask + 1;
    l->owners = o;
    l->omask = cap - 1;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].head)
            o[owner_find(l, old[i].owner)] = old[i];
    free(old);
    return 0;
}

static void owner_delete(gov_leases_t *l, size_t i)
{
    l->ocount--;
    for (size_t j = (i + 1) & l->omask; l->owners[j].head; j = (j + 1) & l->omask) {
        size_t home = mix(l->owners[j].owner) & l->omask;
        bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!in_range) {
            l->owners[i] = l->owners[j];
            i = j;
        }
    }
    l->owners[i].head = 0;
}

int gov_leases_reserve(gov_leases_t *l, size_t gauges)
{
    size_t need = gauges ? gauges : 1;
    if (l->entries + need > l->max)
        return -1;
    if ((l->ocount + 1) * 4 > (l->omask + 1) * 3 && owners_grow(l) < 0)
        return -1;
    size_t spare = (size_t)(l->cap - l->n);
    for (uint32_t f = l->free; f != GOV_LEASE_NONE && spare < need; f = l->e[f].next)
        spare++;
    if (spare >= need)
        return 0;
    size_t cap = l->cap ? (size_t)l->cap * 2 : 256;
    while (cap - l->n < need)
        cap *= 2;
    if (cap > l->max)
        cap = l->max;
    gov_lease_entry_t *e = realloc(l->e, cap * sizeof(*e));
    if (!e)
        return -1;
    l->e = e;
    l->cap = (uint32_t)cap;
    return 0;
}

static uint32_t entry_take(gov_leases_t *l)
{
    uint32_t i;
    if (l->free != GOV_LEASE_NONE) {
        i = l->free;
        l->free = l->e[i].next;
    } else {
        i = l->n++;
        l->e[i].gen = 0;
    }
    l->entries++;
    return i;
}

static void entry_give(gov_leases_t *l, uint32_t i)
{
    l->e[i].used = 0;
    l->e[i].next = l->free;
    l->free = i;
    l->entries--;
}

uint64_t gov_leases_add(gov_leases_t *l, uint64_t owner, const gov_gauge_ref_t *gauges, size_t n)
{
    uint32_t head = entry_take(l);
    gov_lease_entry_t *h = &l->e[head];
    uint64_t id;
    do /* one (index, generation) in 2^64 seals to 0, which says "no lease": skip it */
        h->gen++;
    while ((id = gov_ticket_seal(&l->key, head, h->gen)) == 0);
    h->used = 1;
    h->owner = owner;
    h->has_gauge = n > 0;
    if (n)
        h->gauge = gauges[0];
    h->next = GOV_LEASE_NONE;
    uint32_t tail = head;
    for (size_t k = 1; k < n; k++) {
        uint32_t c = entry_take(l);
        l->e[c].used = 2;
        l->e[c].has_gauge = 1;
        l->e[c].gauge = gauges[k];
        l->e[c].next = GOV_LEASE_NONE;
        l->e[tail].next = c;
        tail = c;
    }
    size_t o = owner_find(l, owner);
    h = &l->e[head];
    h->oprev = GOV_LEASE_NONE;
    if (l->owners[o].head) {
        h->onext = l->owners[o].head - 1;
        l->e[h->onext].oprev = head;
    } else {
        h->onext = GOV_LEASE_NONE;
        l->owners[o].owner = owner;
        l->ocount++;
    }
    l->owners[o].head = head + 1;
    l->heads++;
    return id;
}

static void end_head(gov_leases_t *l, uint32_t head, void (*put)(void *, const gov_gauge_ref_t *),
                     void *ctx)
{
    gov_lease_entry_t *h = &l->e[head];
    if (h->oprev != GOV_LEASE_NONE) {
        l->e[h->oprev].onext = h->onext;
    } else {
        size_t o = owner_find(l, h->owner);
        if (h->onext != GOV_LEASE_NONE)
            l->owners[o].head = h->onext + 1;
        else
            owner_delete(l, o);
    }
    if (h->onext != GOV_LEASE_NONE)
        l->e[h->onext].oprev = h->oprev;
    for (uint32_t i = head; i != GOV_LEASE_NONE;) {
        uint32_t next = l->e[i].next;
        if (l->e[i].has_gauge)
            put(ctx, &l->e[i].gauge);
        entry_give(l, i);
        i = next;
    }
    l->heads--;
}

int gov_leases_end(gov_leases_t *l, uint64_t id, uint64_t owner,
                   void (*put)(void *, const gov_gauge_ref_t *), void *ctx)
{
    uint32_t head, gen;
    gov_ticket_open(&l->key, id, &head, &gen);
    if (head >= l->n || l->e[head].used != 1 || l->e[head].gen != gen || l->e[head].owner != owner)
        return -1;
    end_head(l, head, put, ctx);
    return 0;
}

size_t gov_leases_end_owner(gov_leases_t *l, uint64_t owner,
                            void (*put)(void *, const gov_gauge_ref_t *), void *ctx)
{
    size_t ended = 0;
    for (;;) {
        size_t o = owner_find(l, owner);
        if (!l->owners[o].head)
            return ended;
        end_head(l, l->owners[o].head - 1, put, ctx);
        ended++;
    }
}
