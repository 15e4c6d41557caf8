/*
 * demand_index: the demand core's key index (private to demand.c and demand_exchange.c). A key is
 * (limit identity, key bytes), hashed the same on every replica (rendezvous ownership depends on
 * it); records of either kind (a key measured here, a key owned here) start with its keyref, so
 * one open-addressing index serves both. Inline: demand_arrive, on the decision path, is one
 * key_hash and one index_find.
 */
#ifndef TT_SHARE_DEMAND_INDEX_H
#define TT_SHARE_DEMAND_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "demand.h"
#include "tt_hash.h"

#define NIL UINT32_MAX

/* ---- hashing ------------------------------------------------------------------------------- */

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

static inline uint64_t member_hash(const char *id, size_t len)
{
    return fmix64(tt_fnv1a64(TT_FNV1A64_BASIS, id, len));
}

static inline uint64_t key_hash(uint64_t identity, const void *key, size_t len)
{
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(identity >> (8 * i)); /* little endian on every host */
    return fmix64(tt_fnv1a64(tt_fnv1a64(TT_FNV1A64_BASIS, id, 8), key, len));
}

/* ---- keys and their index ------------------------------------------------------------------ */

/* What identifies a key; the first member of both record types, so one index serves both. */
typedef struct keyref {
    uint64_t identity;
    uint64_t hash; /* key_hash(identity, key) */
    uint32_t key_len;
    uint8_t key[DEMAND_KEY_MAX];
} keyref_t;

/* Open addressing with linear probing over a record array; slot = record index + 1, 0 empty.
 * Capacity is a power of two at least twice the records, so a probe always ends. */
typedef struct index {
    uint32_t *slot;
    uint32_t mask;
    const char *base; /* the records; the keyref is at the start of each */
    size_t stride;
} index_t;

static inline const keyref_t *rec_key(const index_t *x, uint32_t rec)
{
    return (const keyref_t *)(x->base + (size_t)rec * x->stride);
}

static inline bool key_eq(const keyref_t *k, uint64_t identity, uint64_t hash, const void *key,
                          size_t len)
{
    return k->hash == hash && k->identity == identity && k->key_len == len &&
           memcmp(k->key, key, len) == 0;
}

static inline uint32_t index_find(const index_t *x, uint64_t identity, uint64_t hash,
                                  const void *key, size_t len)
{
    for (uint32_t b = (uint32_t)hash & x->mask;; b = (b + 1) & x->mask) {
        uint32_t s = x->slot[b];
        if (s == 0)
            return NIL;
        if (key_eq(rec_key(x, s - 1), identity, hash, key, len))
            return s - 1;
    }
}

static inline void index_put(index_t *x, uint32_t rec)
{
    uint32_t b = (uint32_t)rec_key(x, rec)->hash & x->mask;
    while (x->slot[b])
        b = (b + 1) & x->mask;
    x->slot[b] = rec + 1;
}

/* Removes a record and shifts the probe chain back over the hole (no tombstones). */
static inline void index_del(index_t *x, uint32_t rec)
{
    uint32_t i = (uint32_t)rec_key(x, rec)->hash & x->mask;
    while (x->slot[i] != rec + 1)
        i = (i + 1) & x->mask;
    x->slot[i] = 0;
    for (uint32_t j = (i + 1) & x->mask; x->slot[j]; j = (j + 1) & x->mask) {
        uint32_t home = (uint32_t)rec_key(x, x->slot[j] - 1)->hash & x->mask;
        /* move j into the hole unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            x->slot[i] = x->slot[j];
            x->slot[j] = 0;
            i = j;
        }
    }
}

#endif
