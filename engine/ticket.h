/*
 * Tickets: the opaque 64-bit ids the engine hands out (lease ids, reservation ids). Internal to
 * the engine; pure, no allocation.
 *
 * A ticket names a pool entry by its index and the generation the entry had when it was handed
 * out, like a handle, sealed by a keyed permutation of the 64-bit pair (the block cipher
 * Speck64/128, keyed from the process's random seed) so that it cannot be written down without
 * the key. Opening a ticket is the inverse permutation: any 64-bit value opens to some (index,
 * generation), and the pool accepts it only when that entry is live with that generation, so a
 * guess is accepted with probability (live entries) / 2^64, and a ticket seen says nothing about
 * the next one of the same entry.
 */
#ifndef TT_ENGINE_TICKET_H
#define TT_ENGINE_TICKET_H

#include <stdint.h>

#define GOV_TICKET_ROUNDS 27

/* The expanded round keys. */
typedef struct gov_ticket_key {
    uint32_t rk[GOV_TICKET_ROUNDS];
} gov_ticket_key_t;

/* Expands a 128-bit key, given as Speck's words k[0] (the first round key) .. k[3]. */
void gov_ticket_expand(gov_ticket_key_t *key, const uint32_t k[4]);

/* A key for one kind of ticket, derived from the process seed and a label ("lease", ...): two
 * kinds never open each other's tickets to the same entry. */
gov_ticket_key_t gov_ticket_key(const uint64_t seed[2], const char *label);

uint64_t gov_ticket_seal(const gov_ticket_key_t *key, uint32_t index, uint32_t gen);
void gov_ticket_open(const gov_ticket_key_t *key, uint64_t ticket, uint32_t *index, uint32_t *gen);

#endif
