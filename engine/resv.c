/* The reservation pool: an array with a free list and an oldest-first queue (see resv.h). */
#include "resv.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX
#define EXPIRE_PER_ADD 2 /* expired entries ended by every add: expiry keeps pace with adds */

int gov_resv_init(gov_resv_t *r, size_t max, size_t max_bytes, int64_t ttl, const uint64_t seed[2],
                  void (*drop)(void *record))
{
    memset(r, 0, sizeof(*r));
    r->free = r->head = r->tail = NONE;
    r->max = max < NONE - 1 ? max : NONE - 1;
    r->max_bytes = max_bytes;
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
    memset(r, 0, sizeof(*r));
}

/* Ends the entry at the head of the queue, whatever its state, and puts it on the free list. */
static void pop_head(gov_resv_t *r)
{
    uint32_t i = r->head;
    gov_resv_entry_t *x = &r->e[i];
    if (x->state == GOV_RESV_OPEN) {
        r->drop(x->record);
        r->bytes -= x->bytes;
        r->open--;
    }
    r->head = x->next;
    if (r->head == NONE)
        r->tail = NONE;
    r->count--;
    *x = (gov_resv_entry_t){.gen = x->gen, .next = r->free};
    r->free = i;
}

size_t gov_resv_expire(gov_resv_t *r, int64_t now, size_t budget)
{
    size_t ended = 0;
    while (ended < budget && r->head != NONE && r->e[r->head].expires <= now) {
        r->expired += r->e[r->head].state == GOV_RESV_OPEN;
        pop_head(r);
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

uint64_t gov_resv_add(gov_resv_t *r, void *record, size_t bytes, int64_t now)
{
    gov_resv_expire(r, now, EXPIRE_PER_ADD);
    while (r->head != NONE && (r->count >= r->max || r->bytes + bytes > r->max_bytes)) {
        r->evicted += r->e[r->head].state == GOV_RESV_OPEN;
        pop_head(r);
    }
    uint32_t i = take(r);
    if (i == NONE)
        return 0;
    gov_resv_entry_t *x = &r->e[i];
    uint64_t id;
    do /* one (index, generation) in 2^64 seals to 0, which says "none": skip it */
        x->gen++;
    while ((id = gov_ticket_seal(&r->key, i, x->gen)) == 0);
    x->record = record;
    x->bytes = (uint32_t)bytes;
    x->expires = now > INT64_MAX - r->ttl ? INT64_MAX : now + r->ttl;
    x->state = GOV_RESV_OPEN;
    x->next = NONE;
    if (r->tail != NONE)
        r->e[r->tail].next = i;
    else
        r->head = i;
    r->tail = i;
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
    x->record = NULL;
    x->bytes = 0;
    x->state = GOV_RESV_SETTLED;
}
