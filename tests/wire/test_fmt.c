/* common/tt_fmt.h: integers to decimal text, against printf over the edges. */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>

#include "tt_fmt.h"

static void same_as_printf(int64_t v)
{
    char want[32], got[TT_FMT_I64_MAX + 1];
    snprintf(want, sizeof(want), "%" PRId64, v);
    size_t n = tt_fmt_i64(got, v);
    got[n] = '\0';
    cr_assert_str_eq(got, want);
}

Test(fmt, every_edge_and_a_spread_reads_as_printf_writes_it)
{
    static const int64_t edges[] = {0,
                                    1,
                                    -1,
                                    9,
                                    10,
                                    -10,
                                    99,
                                    100,
                                    101,
                                    999,
                                    1000,
                                    INT64_MAX,
                                    INT64_MIN,
                                    INT64_MAX - 1,
                                    INT64_MIN + 1,
                                    INT64_C(1) << 53,
                                    INT64_C(10000000000000000)};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
        same_as_printf(edges[i]);
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < 100000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        same_as_printf((int64_t)(x >> (x & 63))); /* every magnitude */
        same_as_printf(-(int64_t)(x >> 1));
    }
}
