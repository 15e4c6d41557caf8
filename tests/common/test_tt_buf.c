/* The one byte buffer (common/tt_buf.h). */
#include <criterion/criterion.h>
#include <stdint.h>

#include "tt_buf.h"

Test(tt_buf, appends_grow_it_and_keep_every_byte)
{
    tt_buf_t b = {0};
    char chunk[100];
    for (int i = 0; i < 100; i++) {
        memset(chunk, i, sizeof(chunk));
        cr_assert_eq(tt_buf_append(&b, chunk, sizeof(chunk)), 0);
    }
    cr_assert_eq(b.len, 10000);
    cr_assert_geq(b.cap, b.len);
    for (size_t i = 0; i < b.len; i++)
        cr_assert_eq(b.data[i], i / 100, "byte %zu", i);
    cr_assert_eq(tt_buf_append(&b, NULL, 0), 0);
    cr_assert_eq(b.len, 10000);
    cr_assert_not(b.failed);
    tt_buf_free(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len + b.cap, 0);
}

Test(tt_buf, a_size_that_cannot_be_had_fails_and_stays_failed)
{
    tt_buf_t b = {0};
    cr_assert_eq(tt_buf_append(&b, "ab", 2), 0);
    cr_assert_not(tt_buf_room(&b, SIZE_MAX - 1));
    cr_assert(b.failed);
    cr_assert_eq(b.len, 2, "what it held is still there");
    static const char more[4096];
    cr_assert_leq(b.cap - b.len + 1, sizeof(more));
    cr_assert_eq(tt_buf_append(&b, more, b.cap - b.len + 1), -1, "it never grows again");
    tt_buf_free(&b);
}

Test(tt_buf, printf_appends_the_whole_text_whatever_its_length)
{
    tt_buf_t b = {0};
    cr_assert_eq(tt_buf_printf(&b, "%s=%d;", "a", 1), 0);
    char long_text[3000];
    memset(long_text, 'x', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = 0;
    for (int i = 0; i < 3; i++) /* past the room there was: formatted again at its size */
        cr_assert_eq(tt_buf_printf(&b, "[%s %llu]", long_text, 18446744073709551615ULL), 0);
    size_t one = strlen(long_text) + strlen("[ 18446744073709551615]");
    cr_assert_eq(b.len, 4 + 3 * one);
    cr_assert(memcmp(b.data, "a=1;[xxx", 8) == 0);
    cr_assert(memcmp(b.data + 4 + 3 * one - 22, " 18446744073709551615]", 22) == 0);
    cr_assert_not(b.failed);
    tt_buf_free(&b);
}
