/* The counter table: exactness under hash collisions, incremental reclamation, the cap. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "table.h"

#define S RA_NS_PER_S

static gov_table_t t;
static ra_limiter_t gcra;
static int ix;

static void setup(void)
{
    const uint64_t seed[2] = {7, 9};
    cr_assert_eq(gov_table_init(&t, 0, 100000, seed), 0);
    ra_limiter_init(&gcra, RA_GCRA, 10, S, 10);
    ix = gov_table_ident_add(&t, 42, &gcra, false);
    cr_assert_geq(ix, 0);
}

static void teardown(void)
{
    gov_table_free(&t);
}

TestSuite(table, .init = setup, .fini = teardown);

Test(table, siphash_2_4_matches_the_reference_vector)
{
    uint8_t key[16], msg[15];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 15; i++)
        msg[i] = (uint8_t)i;
    uint64_t k0 = 0, k1 = 0;
    for (int i = 7; i >= 0; i--) {
        k0 = (k0 << 8) | key[i];
        k1 = (k1 << 8) | key[8 + i];
    }
    cr_assert_eq(gov_siphash(k0, k1, msg, sizeof(msg), 2, 4), UINT64_C(0xa129ca6149be45e5));
}

Test(table, keys_with_the_same_hash_stay_two_counters)
{
    size_t a, b;
    cr_assert_eq(gov_table_get(&t, ix, 12345, "alpha", 5, &a), 0);
    cr_assert_eq(gov_table_get(&t, ix, 12345, "bravo", 5, &b), 0);
    cr_assert_neq(a, b);
    t.slots[a].state = 111;
    t.slots[b].state = 222;
    cr_assert_eq(t.slots[gov_table_find(&t, ix, 12345, "alpha", 5)].state, 111);
    cr_assert_eq(t.slots[gov_table_find(&t, ix, 12345, "bravo", 5)].state, 222);
    cr_assert_eq(gov_table_find(&t, ix, 12345, "alph", 4), GOV_SLOT_NONE);
    cr_assert_eq(t.count, 2);
}

Test(table, same_id_under_two_identities_is_two_counters)
{
    int other = gov_table_ident_add(&t, 43, &gcra, false);
    size_t a, b;
    uint64_t h = gov_table_hash(&t, ix, "k", 1);
    cr_assert_eq(gov_table_get(&t, ix, h, "k", 1, &a), 0);
    cr_assert_eq(gov_table_get(&t, other, h, "k", 1, &b), 0);
    cr_assert_neq(a, b);
}

Test(table, long_and_empty_ids_round_trip)
{
    char id[257];
    memset(id, 'z', 256);
    size_t a, b;
    uint64_t h = gov_table_hash(&t, ix, id, 256);
    cr_assert_eq(gov_table_get(&t, ix, h, id, 256, &a), 0);
    cr_assert_eq(gov_table_find(&t, ix, h, id, 256), a);
    h = gov_table_hash(&t, ix, "", 0);
    cr_assert_eq(gov_table_get(&t, ix, h, "", 0, &b), 0);
    cr_assert_eq(gov_table_find(&t, ix, h, "", 0), b);
}

static void fill(int n, int64_t state)
{
    cr_assert_eq(gov_table_reserve(&t, (size_t)n), 0);
    for (int i = 0; i < n; i++) {
        char k[16];
        int len = snprintf(k, sizeof(k), "k-%d", i);
        size_t s;
        cr_assert_eq(
            gov_table_get(&t, ix, gov_table_hash(&t, ix, k, (size_t)len), k, (size_t)len, &s), 0);
        t.slots[s].state = state;
    }
}

Test(table, reclamation_frees_idle_counters_a_bounded_slice_at_a_time)
{
    fill(5000, 100 * S); /* TATs at 100 s */
    size_t cap = t.mask + 1;
    /* at 50 s every counter still holds information: nothing goes */
    cr_assert_eq(gov_table_reclaim(&t, 50 * S, cap), 0);
    cr_assert_eq(t.count, 5000);
    /* at 200 s all are idle, but one call never frees more than its budget */
    size_t freed = gov_table_reclaim(&t, 200 * S, 64);
    cr_assert_leq(freed, 64);
    cr_assert_eq(t.count, 5000 - freed);
    size_t calls = 1;
    while (t.count && calls < 10 * cap / 64) {
        gov_table_reclaim(&t, 200 * S, 64);
        calls++;
    }
    cr_assert_eq(t.count, 0, "a full lap frees every idle key");
    cr_assert_eq(t.idents[ix].count, 0);
}

Test(table, deletion_keeps_every_other_key_findable)
{
    fill(3000, 100 * S);
    /* make every third key idle, reclaim a lap, then every other key must still be found */
    for (size_t i = 0; i <= t.mask; i++)
        if (t.slots[i].hash && t.slots[i].hash % 3 == 0)
            t.slots[i].state = 0;
    size_t before = t.count;
    gov_table_reclaim(&t, 200 * S - 150 * S, (t.mask + 1) * 2);
    cr_assert_lt(t.count, before);
    size_t found = 0;
    for (int i = 0; i < 3000; i++) {
        char k[16];
        int len = snprintf(k, sizeof(k), "k-%d", i);
        if (gov_table_find(&t, ix, gov_table_hash(&t, ix, k, (size_t)len), k, (size_t)len) !=
            GOV_SLOT_NONE)
            found++;
    }
    cr_assert_eq(found, t.count);
}

Test(table, gauges_above_zero_are_never_reclaimed)
{
    int g = gov_table_ident_add(&t, 44, &gcra, true);
    size_t a, b;
    cr_assert_eq(gov_table_get(&t, g, 1, "busy", 4, &a), 0);
    cr_assert_eq(gov_table_get(&t, g, 2, "idle", 4, &b), 0);
    t.slots[a].state = 3;
    gov_table_reclaim(&t, INT64_MAX, t.mask + 1);
    cr_assert_eq(t.count, 1);
    cr_assert_neq(gov_table_find(&t, g, 1, "busy", 4), GOV_SLOT_NONE);
}

Test(table, the_cap_refuses_new_keys_and_keeps_old_ones)
{
    gov_table_free(&t);
    const uint64_t seed[2] = {1, 1};
    gov_table_init(&t, 0, 10, seed);
    ix = gov_table_ident_add(&t, 42, &gcra, false);
    fill(10, 100 * S);
    size_t s;
    cr_assert_eq(gov_table_get(&t, ix, 99, "new", 3, &s), -1);
    cr_assert_eq(t.count, 10);
    cr_assert_neq(gov_table_find(&t, ix, gov_table_hash(&t, ix, "k-3", 3), "k-3", 3),
                  GOV_SLOT_NONE);
}

Test(table, a_dropped_identity_stops_matching_and_is_reclaimed)
{
    fill(100, 100 * S);
    gov_table_ident_drop(&t, ix);
    gov_table_reclaim(&t, 0, (t.mask + 1) * 2);
    cr_assert_eq(t.count, 0);
    /* its index is free again, under a new generation */
    uint32_t gen = t.idents[ix].gen;
    int again = gov_table_ident_add(&t, 77, &gcra, false);
    cr_assert_eq(again, ix);
    cr_assert_eq(t.idents[ix].gen, gen + 1);
}

Test(table, bytes_account_for_slots_and_ids)
{
    size_t empty = gov_table_bytes(&t);
    fill(1000, 100 * S);
    cr_assert_gt(gov_table_bytes(&t), empty);
    cr_assert_geq(gov_table_bytes(&t), (t.mask + 1) * sizeof(gov_slot_t));
    cr_assert_eq(sizeof(gov_slot_t), 24);
}

/* The state snapshot has the kernel hold the table's big memory in huge pages: what it lists
 * starts on a 2 MiB boundary, the slot array first, then the id blocks that are full. */
Test(table, its_big_memory_is_listed_and_starts_on_huge_page_boundaries)
{
    gov_table_t big;
    const uint64_t seed[2] = {1, 2};
    cr_assert_eq(gov_table_init(&big, 300000, 300000, seed), 0);
    int id = gov_table_ident_add(&big, 5, &gcra, false);
    cr_assert_eq(gov_table_reserve(&big, 270000), 0);
    for (int i = 0; i < 270000; i++) { /* 8-byte ids: 262,144 fill a 2 MiB block */
        char k[16];
        size_t s, len = (size_t)snprintf(k, sizeof(k), "%08d", i);
        cr_assert_eq(gov_table_get(&big, id, gov_table_hash(&big, id, k, len), k, len, &s), 0);
    }
    void *addr[8];
    size_t len[8];
    cr_assert_eq(gov_table_regions(&big, addr, len, 8), 2, "the slot array and one full block");
    cr_assert_eq(addr[0], (void *)big.slots);
    cr_assert_eq(len[0], (big.mask + 1) * sizeof(gov_slot_t));
    cr_assert_eq(len[1], (size_t)2 << 20);
    for (int i = 0; i < 2; i++)
        cr_assert_eq((uintptr_t)addr[i] % ((uintptr_t)2 << 20), 0, "region %d", i);
    cr_assert_eq(gov_table_regions(&big, addr, len, 1), 1);
    gov_table_free(&big);
}

/* A random walk against a plain array model: inserts, lookups, idle marks and reclamation
 * slices, with few distinct hashes so clusters are long and deletions shift a lot, through
 * three incremental growths, the last one releasing its old array in slices. */
Test(table, a_random_walk_agrees_with_a_plain_model)
{
    enum { KEYS = 6000 };       /* grows 1024 -> 2048 -> 4096 -> 8192 slots on the way */
    static int64_t model[KEYS]; /* -1: absent */
    for (int i = 0; i < KEYS; i++)
        model[i] = -1;
    uint64_t x = 88172645463325252u;
    bool grew_during_a_move = false, released_during_a_move = false;
    for (int step = 0; step < 30000; step++) {
        grew_during_a_move = grew_during_a_move || t.old != NULL;
        released_during_a_move = released_during_a_move || (t.old && t.released > 0);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)(x % KEYS), op = (int)((x >> 20) % 8);
        char id[16];
        size_t len = (size_t)snprintf(id, sizeof(id), "id-%d", k);
        uint64_t h = (uint64_t)(k % 997) + 1; /* few distinct hashes: long probe chains */
        if (op < 4) {
            cr_assert_eq(gov_table_reserve(&t, 1), 0);
            size_t s;
            cr_assert_eq(gov_table_get(&t, ix, h, id, len, &s), 0);
            if (model[k] < 0)
                model[k] = 0;
            cr_assert_eq(t.slots[s].state, model[k]);
            t.slots[s].state = model[k] = (int64_t)(x >> 40) % 4 ? 100 * S : 0;
        } else if (op < 7) {
            size_t s = gov_table_find(&t, ix, h, id, len);
            if (s == GOV_SLOT_NONE && model[k] == 0)
                model[k] = -1; /* an idle key may have been reclaimed */
            if (model[k] < 0)
                cr_assert_eq(s, GOV_SLOT_NONE, "key %d", k);
            else
                cr_assert_eq(t.slots[s].state, model[k], "key %d", k);
        } else if ((x >> 57) % 64) { /* a slice, checked later */
            gov_table_reclaim(&t, 50 * S, 1 + (size_t)(x >> 50) % 64);
        } else { /* a slice, and every key checked */
            gov_table_reclaim(&t, 50 * S, 1 + (size_t)(x >> 50) % 64);
            /* idle keys (state 0) may or may not be gone; busy ones must all be there */
            for (int i = 0; i < KEYS; i++) {
                if (model[i] < 0)
                    continue;
                char kid[16];
                size_t kl = (size_t)snprintf(kid, sizeof(kid), "id-%d", i);
                size_t s = gov_table_find(&t, ix, (uint64_t)(i % 997) + 1, kid, kl);
                if (s == GOV_SLOT_NONE) {
                    cr_assert_eq(model[i], 0, "a busy key %d was lost", i);
                    model[i] = -1;
                }
            }
        }
    }
    size_t present = 0;
    for (int i = 0; i < KEYS; i++) {
        char kid[16];
        size_t kl = (size_t)snprintf(kid, sizeof(kid), "id-%d", i);
        bool there = gov_table_find(&t, ix, (uint64_t)(i % 997) + 1, kid, kl) != GOV_SLOT_NONE;
        cr_assert(there || model[i] <= 0, "a busy key %d was lost", i);
        present += there;
    }
    cr_assert_eq(present, t.count, "no key is held twice, none is lost");
    cr_assert(grew_during_a_move, "the walk ran while a growth was under way");
    cr_assert(released_during_a_move, "and while part of an old array was already released");
}

/*
 * A growth hands the old array's moved prefix back to the kernel as it goes, and the kernel may
 * put another mapping there (a thread's stack, an arena block). Dropping the old array must
 * unmap only what the table still holds. Maps a page of ours at the start of the released
 * prefix, then finishes the move (or frees the table) and checks that page is still ours.
 */
static uint8_t *map_into_released_prefix(void)
{
    char id[16];
    for (int k = 0; !(t.old && t.released_bytes > 0); k++) {
        cr_assert_lt(k, 100000, "no growth released part of its old array");
        size_t len = (size_t)snprintf(id, sizeof(id), "k-%d", k), s;
        cr_assert_eq(gov_table_reserve(&t, 1), 0);
        cr_assert_eq(gov_table_get(&t, ix, gov_table_hash(&t, ix, id, len), id, len, &s), 0);
    }
    uint8_t *mine = mmap(t.old, 4096, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    cr_assert_eq((void *)mine, (void *)t.old, "the released prefix is free address space");
    memset(mine, 0x5a, 4096);
    return mine;
}

static void assert_still_mapped(uint8_t *mine)
{
    cr_assert_eq(msync(mine, 4096, MS_ASYNC), 0, "the table unmapped a page it had released");
    cr_assert_eq(mine[4095], 0x5a);
    munmap(mine, 4096);
}

Test(table, finishing_a_growth_unmaps_only_what_the_table_still_holds)
{
    uint8_t *mine = map_into_released_prefix();
    while (t.old)
        cr_assert_eq(gov_table_reserve(&t, 0), 0);
    assert_still_mapped(mine);
}

Test(table, freeing_the_table_mid_growth_unmaps_only_what_it_still_holds)
{
    uint8_t *mine = map_into_released_prefix();
    gov_table_free(&t);
    assert_still_mapped(mine);
    cr_assert_eq(gov_table_init(&t, 0, 100000, (const uint64_t[2]){7, 9}), 0); /* for teardown */
}
