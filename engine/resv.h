/*
 * The reservation pool: records that a settle may claim once, by an unguessable id, within a
 * bound. Internal to the engine; it holds the records (opaque here) and their ids, and knows
 * nothing of what they say (settle.c does).
 *
 * Entries live in one array that grows by doubling up to `max` (indices never move) with a free
 * list, and in a queue from the oldest to the newest. Every entry has the same lifetime (`ttl`
 * from its creation), so the queue's head is always the next to expire: expiry pops the head
 * while its time has come, in bounded slices. A full pool (`max` entries, or `max_bytes` of
 * records) makes room by ending an entry early: an open one is then evicted, which for a
 * reservation means it stays charged (the conservative side: a refund is lost, nothing is
 * over-admitted), and is counted. A settled entry stays in the queue, without its record, until
 * its time, so that a repeated settle is told "already settled" rather than "unknown".
 *
 * Whose entry makes room (issue 34 item 9). Every entry belongs to an account (the client the
 * server's door named: a uid, a token's client), and a full pool ends the oldest entry of the
 * account that holds the most, weighed as its records' bytes plus max_bytes / max for each of
 * its entries (so the count bound and the byte bound weigh alike). One client alone may fill the
 * pool; a client that floods it takes room from itself once it holds the most, and from another
 * only while that other holds more: a client holding less than its fair share (the pool over
 * the clients holding entries) keeps every reservation. Accounts live in a max-heap on their
 * weight and a small map from id to index; an account with no entry left is forgotten.
 *
 * Ids are tickets (ticket.h) over (index, generation) with their own key.
 */
#ifndef TT_ENGINE_RESV_H
#define TT_ENGINE_RESV_H

#include <stddef.h>
#include <stdint.h>

#include "ticket.h"

enum {
    GOV_RESV_UNKNOWN = -1, /* never issued, expired or evicted */
    GOV_RESV_OPEN = 1,
    GOV_RESV_SETTLED = 2,
};

typedef struct gov_resv_entry {
    void *record; /* the owner's record while open; NULL otherwise */
    int64_t expires;
    uint32_t gen;
    uint32_t next;  /* in the queue: the next younger entry; free: the next free one */
    uint32_t prev;  /* in the queue: the next older entry */
    uint32_t acct;  /* its account's index */
    uint32_t anext; /* the next younger entry of its account */
    uint32_t bytes; /* of the record, against max_bytes */
    uint8_t state;  /* 0 free, GOV_RESV_OPEN, GOV_RESV_SETTLED */
} gov_resv_entry_t;

/* One client's part of the pool. */
typedef struct gov_resv_account {
    uint64_t id;
    uint64_t weight;     /* its open records' bytes, and entry_cost for each of its entries */
    uint32_t head, tail; /* its entries, oldest first (through anext); free: head is the next */
    uint32_t heap;       /* its place in the heap */
} gov_resv_account_t;

typedef struct gov_resv {
    gov_resv_entry_t *e;
    uint32_t n, cap;       /* entries used (high-water mark), allocated */
    uint32_t free;         /* free list head, UINT32_MAX when empty */
    uint32_t head, tail;   /* the queue, oldest first; UINT32_MAX when empty */
    size_t count, open;    /* entries in the queue; of them open */
    size_t max, max_bytes; /* the bounds */
    size_t bytes;          /* of the open records */
    int64_t ttl;           /* ns from creation to expiry */
    uint64_t expired, evicted;
    size_t entry_cost; /* what one entry weighs beside its record: max_bytes / max */
    gov_resv_account_t *acct;
    uint32_t n_acct, free_acct; /* accounts: high-water mark, free list (allocated
                                   with the map: map_cap / 2) */
    uint32_t *heap, n_heap;     /* account indices, the heaviest first */
    uint32_t *map, map_cap;     /* id -> index + 1 (0: empty), linear probing */
    gov_ticket_key_t key;
    void (*drop)(void *record); /* frees a record the pool ends (expired, evicted, settled) */
} gov_resv_t;

int gov_resv_init(gov_resv_t *r, size_t max, size_t max_bytes, int64_t ttl, const uint64_t seed[2],
                  void (*drop)(void *record));
/* Drops every record and frees the pool. */
void gov_resv_free(gov_resv_t *r);

/*
 * Adds an open entry of `account` holding `record` (`bytes` long) at `now`; from then on the
 * pool owns the record. Returns its id (never 0), or 0 when memory runs out, and then the record
 * was not taken. Makes room first: expired entries go, then, while the pool is full, the oldest
 * entry of the account holding the most (above).
 */
uint64_t gov_resv_add(gov_resv_t *r, uint64_t account, void *record, size_t bytes, int64_t now);

/* What `id` names at `now`: GOV_RESV_OPEN (with *record), GOV_RESV_SETTLED or GOV_RESV_UNKNOWN.
 * Changes nothing. */
int gov_resv_find(const gov_resv_t *r, uint64_t id, int64_t now, void **record);

/* Marks an open entry (just found) settled and drops its record. */
void gov_resv_settle(gov_resv_t *r, uint64_t id);

/* Ends up to `budget` entries whose time has come. Returns how many. */
size_t gov_resv_expire(gov_resv_t *r, int64_t now, size_t budget);

#endif
