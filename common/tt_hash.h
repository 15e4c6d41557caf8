/*
 * FNV-1a, 64 bits: the one unkeyed hash for fingerprints (what a snapshot was written for, what
 * a watched file holds now). Not for tables clients can aim at: those take the engine's keyed
 * SipHash. Continue a hash by passing the last value back in; start from TT_FNV1A64_BASIS.
 */
#ifndef TT_HASH_H
#define TT_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TT_FNV1A64_BASIS UINT64_C(0xcbf29ce484222325)

static inline uint64_t tt_fnv1a64(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

#endif
