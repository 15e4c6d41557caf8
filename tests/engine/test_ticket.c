/* Tickets: the keyed permutation behind lease and reservation ids. */
#include <criterion/criterion.h>

#include "ticket.h"

Test(ticket, speck64_128_gives_the_papers_test_vector)
{
    /* Beaulieu et al. 2013, Appendix C: key 1b1a1918 13121110 0b0a0908 03020100, plaintext
     * 3b726574 7475432d, ciphertext 8c6fa548 454e028b (the first word is x, the second y) */
    const uint32_t k[4] = {0x03020100, 0x0b0a0908, 0x13121110, 0x1b1a1918};
    gov_ticket_key_t key;
    gov_ticket_expand(&key, k);
    uint64_t t = gov_ticket_seal(&key, 0x7475432d, 0x3b726574);
    cr_assert_eq(t, UINT64_C(0x8c6fa548454e028b), "%016llx", (unsigned long long)t);
    uint32_t index, gen;
    gov_ticket_open(&key, t, &index, &gen);
    cr_assert_eq(index, 0x7475432du);
    cr_assert_eq(gen, 0x3b726574u);
}

Test(ticket, every_sealed_pair_opens_to_itself)
{
    const uint64_t seed[2] = {11, 12};
    gov_ticket_key_t k = gov_ticket_key(seed, "lease");
    uint64_t x = 88172645463325252u;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint32_t index = i < 50000 ? (uint32_t)i : (uint32_t)x, gen = (uint32_t)(x >> 32), ix, g;
        gov_ticket_open(&k, gov_ticket_seal(&k, index, gen), &ix, &g);
        cr_assert_eq(ix, index);
        cr_assert_eq(g, gen);
    }
}

Test(ticket, another_key_or_label_opens_to_another_pair)
{
    const uint64_t seed[2] = {11, 12}, other[2] = {11, 13};
    gov_ticket_key_t a = gov_ticket_key(seed, "lease"), b = gov_ticket_key(other, "lease"),
                     c = gov_ticket_key(seed, "reservation");
    int same = 0;
    for (uint32_t i = 0; i < 1000; i++) {
        uint64_t t = gov_ticket_seal(&a, i, 1);
        uint32_t ix, g;
        gov_ticket_open(&b, t, &ix, &g);
        same += ix == i && g == 1;
        gov_ticket_open(&c, t, &ix, &g);
        same += ix == i && g == 1;
    }
    cr_assert_eq(same, 0);
}

Test(ticket, neighbouring_pairs_seal_far_apart)
{
    /* half the bits differ on average between the tickets of (i, g) and (i, g + 1) */
    const uint64_t seed[2] = {1, 2};
    gov_ticket_key_t k = gov_ticket_key(seed, "lease");
    long bits = 0;
    for (uint32_t i = 0; i < 1000; i++)
        bits += __builtin_popcountll(gov_ticket_seal(&k, i, 7) ^ gov_ticket_seal(&k, i, 8));
    cr_assert(bits > 1000 * 28 && bits < 1000 * 36, "%ld differing bits over 1000 pairs", bits);
}
