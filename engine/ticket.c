/* Tickets: a keyed 64-bit permutation of (index, generation) (see ticket.h). */
#include "ticket.h"

#include <string.h>

#include "table.h" /* gov_siphash */

#define ROUNDS 8

gov_ticket_key_t gov_ticket_key(const uint64_t seed[2], const char *label)
{
    size_t len = strlen(label);
    return (gov_ticket_key_t){{gov_siphash(seed[0], seed[1], label, len, 2, 4),
                               gov_siphash(seed[1], seed[0], label, len, 2, 4)}};
}

/* The round function: SipHash-2-4 of (round, half), cut to 32 bits. */
static uint32_t round_fn(const gov_ticket_key_t *key, uint32_t round, uint32_t half)
{
    uint8_t m[8];
    for (int i = 0; i < 4; i++) {
        m[i] = (uint8_t)(round >> (8 * i));
        m[4 + i] = (uint8_t)(half >> (8 * i));
    }
    return (uint32_t)gov_siphash(key->k[0], key->k[1], m, sizeof(m), 2, 4);
}

uint64_t gov_ticket_seal(const gov_ticket_key_t *key, uint32_t index, uint32_t gen)
{
    uint32_t l = index, r = gen;
    for (uint32_t i = 0; i < ROUNDS; i++) {
        uint32_t next = l ^ round_fn(key, i, r);
        l = r;
        r = next;
    }
    return ((uint64_t)l << 32) | r;
}

void gov_ticket_open(const gov_ticket_key_t *key, uint64_t ticket, uint32_t *index, uint32_t *gen)
{
    uint32_t l = (uint32_t)(ticket >> 32), r = (uint32_t)ticket;
    for (uint32_t i = ROUNDS; i-- > 0;) {
        uint32_t prev = r ^ round_fn(key, i, l);
        r = l;
        l = prev;
    }
    *index = l;
    *gen = r;
}
