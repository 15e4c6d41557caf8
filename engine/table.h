/*
 * The counter table: (limit identity, subject id) -> int64 state. Internal to the engine.
 *
 * Open addressing, linear probing, deletion by backward shift (no tombstones). A slot is 24
 * bytes: the 64-bit keyed hash of (identity, id), the state, and an exact reference to the key
 * (the identity's small index in this table plus the id bytes in a size-classed arena). The
 * hash decides where to look and rejects almost every mismatch; the ident index, length and
 * bytes then decide exactly, so two keys whose hashes collide stay two counters.
 *
 * See the essay in table.c for reclamation and the cap.
 */
#ifndef TT_ENGINE_TABLE_H
#define TT_ENGINE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratealg.h"

#define GOV_IDENTS_MAX 1024 /* identities held at once (limits of the live config + dying ones) */
#define GOV_ARENA_CLASSES 6 /* id chunks of 8, 16, 32, 64, 128, 256 bytes */
#define GOV_KEY_MAX 256     /* the longest key the table holds: its largest chunk */
#define GOV_SLOT_NONE SIZE_MAX

typedef struct gov_slot {
    uint64_t hash; /* 0: empty */
    int64_t state;
    uint32_t key;   /* arena reference: class in the top 3 bits, chunk index + 1 below; 0 if
                       len is 0 */
    uint16_t ident; /* index into gov_table_t.idents */
    uint16_t len;   /* id length in bytes */
} gov_slot_t;

/* One counter identity: every key of one limit (of one config generation). */
typedef struct gov_ident {
    uint64_t identity;
    ra_limiter_t limiter; /* the plain limiter, for the idle test */
    uint64_t count;       /* slots held */
    uint32_t gen;         /* bumped on every allocation of this index */
    bool alive;           /* false: dropped by a reload, its slots are reclaimed as met */
    bool gauge;           /* a concurrency gauge: idle when the count is 0 */
} gov_ident_t;

typedef struct gov_arena {
    uint8_t **blocks;              /* fixed blocks of chunks: the arena never moves */
    uint32_t n_blocks, cap_blocks; /* blocks allocated, pointers room */
    uint32_t n;                    /* chunks used (high-water mark) */
    uint32_t free;                 /* head of the free list (chunk index + 1), 0 when empty */
} gov_arena_t;

typedef struct gov_table {
    gov_slot_t *slots;
    size_t mask;     /* capacity - 1; capacity is a power of two */
    gov_slot_t *old; /* the array being moved from after a growth, NULL when none */
    size_t old_mask;
    size_t moved;          /* old slots [0, moved) are across */
    size_t released;       /* old slots [0, released) are returned to the kernel: never read */
    size_t released_bytes; /* the same in bytes, a multiple of the page size */
    size_t count;          /* occupied slots */
    size_t max;            /* the cap */
    size_t cursor;         /* reclamation position */
    uint64_t seed[2];
    uint64_t reclaimed;
    gov_arena_t arena[GOV_ARENA_CLASSES];
    gov_ident_t idents[GOV_IDENTS_MAX];
} gov_table_t;

int gov_table_init(gov_table_t *t, size_t initial, size_t max, const uint64_t seed[2]);
void gov_table_free(gov_table_t *t);

/* Registers an identity; returns its index, or -1 when every index is taken. */
int gov_table_ident_add(gov_table_t *t, uint64_t identity, const ra_limiter_t *limiter, bool gauge);
/* Drops an identity: lookups stop matching its slots at once, reclamation frees them. */
void gov_table_ident_drop(gov_table_t *t, int ident);

uint64_t gov_table_hash(const gov_table_t *t, int ident, const char *key, size_t len);

/* The slot holding (ident, key), or GOV_SLOT_NONE. (Not const: a key found in the old array
 * after a growth is moved across.) */
size_t gov_table_find(gov_table_t *t, int ident, uint64_t hash, const char *key, size_t len);

/* The slot holding the key that `ref` (a slot's `key` field) refers to, or GOV_SLOT_NONE. */
size_t gov_table_find_ref(gov_table_t *t, int ident, uint64_t hash, uint32_t ref, uint16_t len);

/*
 * Finds (ident, key) or inserts it with state 0. Returns 0 and sets *slot, -1 at the cap,
 * -2 when out of memory or the key is longer than GOV_KEY_MAX. Never grows nor shifts the slot
 * array (so slot numbers held by the caller stay valid): call gov_table_reserve first.
 */
int gov_table_get(gov_table_t *t, int ident, uint64_t hash, const char *key, size_t len,
                  size_t *slot);

/* Makes room for `extra` inserts without growing (starts a growth now if needed) and moves a
 * slice of a growth under way. Invalidates slot numbers. 0 or -2. */
int gov_table_reserve(gov_table_t *t, size_t extra);

/* True when `extra` inserts fit with nothing to do: no growth under way, below the cap and the
 * load factor. Then gov_table_reserve (and the cap's reclamation) would do nothing: the usual
 * decision on keys the table holds skips both calls. */
static inline bool gov_table_has_room(const gov_table_t *t, size_t extra)
{
    return !t->old && t->count + extra <= t->max && t->count + extra <= (t->mask + 1) / 4 * 3;
}

/* Examines up to `budget` slots from the cursor and frees those equivalent to a fresh key (or
 * of a dropped identity). Returns how many were freed. Invalidates slot numbers. */
size_t gov_table_reclaim(gov_table_t *t, int64_t now, size_t budget);

/* Calls fn for every counter held, in no particular order (both arrays while a growth is under
 * way). Reads only, allocates nothing: safe in a forked child. fn must not change the table. */
typedef void (*gov_table_each_fn)(void *ctx, int ident, const char *key, size_t len, int64_t state);
void gov_table_each(const gov_table_t *t, gov_table_each_fn fn, void *ctx);

/* The table's big memory: the slot array, what is left of the old one while a growth is under
 * way, and the arena's full blocks; up to `cap` ranges, returns how many it filled. For the
 * state snapshot, which asks the kernel to hold them in huge pages. */
size_t gov_table_regions(const gov_table_t *t, void **addr, size_t *len, size_t cap);

/* Bytes of memory the table holds: slot arrays, the arena chunks handed out (to the page; a
 * block's untouched pages hold nothing), the struct itself. */
size_t gov_table_bytes(const gov_table_t *t);

/* SipHash-c-d, exposed for its test vector. */
uint64_t gov_siphash(uint64_t k0, uint64_t k1, const void *data, size_t len, int c, int d);

#endif
