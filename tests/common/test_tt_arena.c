/* tt_arena: aligned bump allocations over chunks, a reset that keeps one chunk, a free. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "tt_arena.h"

Test(tt_arena, allocations_are_aligned_distinct_and_survive_until_the_reset)
{
    tt_arena_t a = {0};
    char *p[1000];
    for (int i = 0; i < 1000; i++) { /* 1000 x 37 bytes: past one chunk */
        p[i] = tt_arena_alloc(&a, 37);
        cr_assert_not_null(p[i]);
        cr_assert_eq((uintptr_t)p[i] % _Alignof(max_align_t), 0, "allocation %d misaligned", i);
        memset(p[i], i & 0xff, 37);
    }
    for (int i = 0; i < 1000; i++)
        for (int k = 0; k < 37; k++)
            cr_assert_eq((unsigned char)p[i][k], i & 0xff, "allocation %d overwritten", i);
    cr_assert_not_null(a.head->next,
                       "1000 allocations of 48 bytes take more than one chunk of 16 KB");
    tt_arena_reset(&a);
    cr_assert(a.head && !a.head->next && a.head->used == 0);
    tt_arena_free(&a);
    cr_assert_null(a.head);
}

Test(tt_arena, an_allocation_larger_than_a_chunk_gets_one_of_its_own)
{
    tt_arena_t a = {0};
    char *small = tt_arena_alloc(&a, 8);
    char *big = tt_arena_alloc(&a, 3 * TT_ARENA_CHUNK);
    cr_assert(small && big);
    memset(big, 1, 3 * TT_ARENA_CHUNK);
    cr_assert_geq(a.head->size, 3 * TT_ARENA_CHUNK);
    tt_arena_free(&a);
}
