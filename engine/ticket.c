/*
 * Tickets: (index, generation) through a keyed 64-bit permutation (see ticket.h).
 *
 * The permutation is the block cipher Speck64/128 (Beaulieu et al., "The SIMON and SPECK
 * Families of Lightweight Block Ciphers", 2013): 27 rounds of add, rotate and xor on two 32-bit
 * words, a few nanoseconds a ticket, which matters because a tpm decision seals one. The round
 * keys are expanded once per key. test_ticket checks the paper's test vector.
 */
#include "ticket.h"

#include <string.h>

#include "table.h" /* gov_siphash */

#define ROR(x, r) (((x) >> (r)) | ((x) << (32 - (r))))
#define ROL(x, r) (((x) << (r)) | ((x) >> (32 - (r))))

void gov_ticket_expand(gov_ticket_key_t *key, const uint32_t k[4])
{
    uint32_t a = k[0], l[3] = {k[1], k[2], k[3]};
    for (uint32_t i = 0; i < GOV_TICKET_ROUNDS; i++) {
        key->rk[i] = a;
        uint32_t *li = &l[i % 3];
        *li = (ROR(*li, 8) + a) ^ i;
        a = ROL(a, 3) ^ *li;
    }
}

gov_ticket_key_t gov_ticket_key(const uint64_t seed[2], const char *label)
{
    size_t len = strlen(label);
    uint64_t a = gov_siphash(seed[0], seed[1], label, len, 2, 4);
    uint64_t b = gov_siphash(seed[1], seed[0], label, len, 2, 4);
    const uint32_t k[4] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32)};
    gov_ticket_key_t key;
    gov_ticket_expand(&key, k);
    return key;
}

uint64_t gov_ticket_seal(const gov_ticket_key_t *key, uint32_t index, uint32_t gen)
{
    uint32_t x = gen, y = index;
    for (int i = 0; i < GOV_TICKET_ROUNDS; i++) {
        x = (ROR(x, 8) + y) ^ key->rk[i];
        y = ROL(y, 3) ^ x;
    }
    return ((uint64_t)x << 32) | y;
}

void gov_ticket_open(const gov_ticket_key_t *key, uint64_t ticket, uint32_t *index, uint32_t *gen)
{
    uint32_t x = (uint32_t)(ticket >> 32), y = (uint32_t)ticket;
    for (int i = GOV_TICKET_ROUNDS - 1; i >= 0; i--) {
        y = ROR(y ^ x, 3);
        x = ROL((x ^ key->rk[i]) - y, 8);
    }
    *index = y;
    *gen = x;
}
