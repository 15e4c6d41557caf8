/*
 * Concurrency leases: who holds which gauge slots. Internal to the engine.
 *
 * A lease is a chain of pool entries, one per gauge it holds (a lease over no gauge is a head
 * alone). Its id is a ticket (ticket.h) sealing the head index and its generation, so a stale
 * or forged id is rejected in O(1) without a lookup structure and cannot be guessed; and only
 * the owner that took a lease may end it (a connection, or its closing). Heads of one owner (a
 * connection) are linked in a list whose head an owner map holds, so a closed connection ends its
 * leases in O(its leases). A gauge is named by what finds its counter again: the identity index and
 * its generation, the key hash and the key's arena reference (stable while the gauge is above 0).
 */
#ifndef TT_ENGINE_LEASE_H
#define TT_ENGINE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ticket.h"

#define GOV_LEASE_NONE UINT32_MAX

typedef struct gov_gauge_ref {
    uint64_t hash;
    uint32_t key;
    uint32_t ident_gen;
    uint16_t ident;
    uint16_t len;
} gov_gauge_ref_t;

typedef struct gov_lease_entry {
    uint64_t owner; /* head only */
    uint32_t gen;   /* head only: the id's generation */
    uint32_t next;  /* next entry of this lease (or of the free list) */
    uint32_t oprev; /* head only: the owner's list */
    uint32_t onext;
    uint8_t used; /* 0 free, 1 head, 2 continuation */
    uint8_t has_gauge;
    gov_gauge_ref_t gauge;
} gov_lease_entry_t;

typedef struct gov_owner_slot {
    uint64_t owner;
    uint32_t head; /* first lease head of this owner + 1; 0: empty slot */
} gov_owner_slot_t;

typedef struct gov_leases {
    gov_lease_entry_t *e;
    uint32_t n, cap; /* entries used (high-water mark), allocated */
    uint32_t free;   /* free list head, GOV_LEASE_NONE when empty */
    size_t entries;  /* in use */
    size_t heads;    /* leases held */
    size_t max;      /* cap on entries */
    gov_owner_slot_t *owners;
    size_t omask, ocount;
    gov_ticket_key_t key; /* seals the ids */
} gov_leases_t;

/* `seed`: the process's random seed, from which the ids' key is derived. */
int gov_leases_init(gov_leases_t *l, size_t max, const uint64_t seed[2]);
void gov_leases_free(gov_leases_t *l);

/* True when a lease over `gauges` gauges fits under the cap (and memory allows). */
int gov_leases_reserve(gov_leases_t *l, size_t gauges);

/* Creates a lease over gauges[0..n) for `owner` (gov_leases_reserve first). Returns its id. */
uint64_t gov_leases_add(gov_leases_t *l, uint64_t owner, const gov_gauge_ref_t *gauges, size_t n);

/* Ends lease `id` of `owner`, calling put(ctx, gauge) for each gauge it held. 0, or -1 when
 * `owner` holds no such lease (never issued, ended, or another owner's: told apart for no one). */
int gov_leases_end(gov_leases_t *l, uint64_t id, uint64_t owner,
                   void (*put)(void *, const gov_gauge_ref_t *), void *ctx);

/* Ends every lease of `owner`. Returns how many. */
size_t gov_leases_end_owner(gov_leases_t *l, uint64_t owner,
                            void (*put)(void *, const gov_gauge_ref_t *), void *ctx);

#endif
