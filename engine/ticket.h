/*
 * Tickets: the opaque 64-bit ids the engine hands out (lease ids, reservation ids). Internal to
 * the engine; pure, no allocation.
 *
 * A ticket names a pool entry by its index and the generation the entry had when it was handed
 * out, like a handle; sealed by a keyed permutation so that it cannot be written down without
 * the key. The permutation is an 8-round Feistel network over the two 32-bit halves whose round
 * function is SipHash-2-4 keyed by the process's random seed. Opening a ticket is the inverse
 * permutation: any 64-bit value opens to some (index, generation), and the pool accepts it only
 * when that entry is live with that generation, so a guess is accepted with probability (live
 * entries) / 2^64, and a ticket seen says nothing about the next one of the same entry.
 */
#ifndef TT_ENGINE_TICKET_H
#define TT_ENGINE_TICKET_H

#include <stdint.h>

typedef struct gov_ticket_key {
    uint64_t k[2];
} gov_ticket_key_t;

/* A key for one kind of ticket, derived from the process seed and a label ("lease", ...): two
 * kinds never open each other's tickets to the same entry. */
gov_ticket_key_t gov_ticket_key(const uint64_t seed[2], const char *label);

uint64_t gov_ticket_seal(const gov_ticket_key_t *key, uint32_t index, uint32_t gen);
void gov_ticket_open(const gov_ticket_key_t *key, uint64_t ticket, uint32_t *index, uint32_t *gen);

#endif
