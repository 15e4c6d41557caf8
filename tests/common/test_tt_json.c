/* The one JSON string escaper (common/tt_json.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "tt_json.h"
#include "tt_utf8.h"

/* in[0, n) as a quoted JSON string, NUL-terminated in a static buffer. */
static const char *quoted(const char *in, size_t n)
{
    static char text[256];
    tt_buf_t b = {0};
    cr_assert_eq(tt_json_str(&b, in, n), 0);
    cr_assert_lt(b.len, sizeof(text));
    memcpy(text, b.data, b.len);
    text[b.len] = '\0';
    tt_buf_free(&b);
    return text;
}
#define Q(lit) quoted(lit, sizeof(lit) - 1)

Test(tt_json, quotes_backslashes_and_controls_are_escaped)
{
    cr_assert_str_eq(Q("plain text 123"), "\"plain text 123\"");
    cr_assert_str_eq(Q("a\"b\\c"), "\"a\\\"b\\\\c\"");
    cr_assert_str_eq(Q("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
    cr_assert_str_eq(Q("\x01\x1f"), "\"\\u0001\\u001f\"");
    cr_assert_str_eq(Q("\0"), "\"\\u0000\"");
    cr_assert_str_eq(Q(""), "\"\"");
    cr_assert_str_eq(Q("/"), "\"/\"", "the solidus needs no escape");
}

Test(tt_json, del_is_escaped)
{
    cr_assert_str_eq(Q("a\x7f"), "\"a\\u007f\"");
}

Test(tt_json, well_formed_utf8_is_copied_and_anything_else_is_the_replacement_character)
{
    cr_assert_str_eq(Q("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                     "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    cr_assert_str_eq(Q("\xff"), "\"\\ufffd\"", "no UTF-8 starts with 0xff");
    cr_assert_str_eq(Q("\x80z"), "\"\\ufffdz\"", "a lone continuation byte");
    cr_assert_str_eq(Q("\xc3"), "\"\\ufffd\"", "a sequence cut short");
    cr_assert_str_eq(Q("\xc0\xaf"), "\"\\ufffd\\ufffd\"", "an overlong '/'");
    cr_assert_str_eq(Q("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"", "a surrogate");
    cr_assert_str_eq(Q("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "past U+10FFFF");
}

Test(tt_json, a_fixed_buffer_is_cut_between_characters_never_inside_one)
{
    char out[8];
    size_t used;
    /* "ab" fits, the 6-byte escape of 0x01 does not: stop after "ab" */
    cr_assert_eq(tt_json_escape(out, 7, "ab\x01", 3, &used), 2);
    cr_assert_eq(used, 2);
    /* "\xc3\xa9" is two bytes and one character: all or nothing */
    cr_assert_eq(tt_json_escape(out, 4, "abc\xc3\xa9", 5, &used), 3);
    cr_assert_eq(used, 3);
    cr_assert_eq(tt_json_escape(out, 5, "abc\xc3\xa9", 5, &used), 5);
    cr_assert_eq(used, 5);
    cr_assert_eq(memcmp(out, "abc\xc3\xa9", 5), 0);
    cr_assert_eq(tt_json_escape(out, 0, "a", 1, &used), 0);
    cr_assert_eq(used, 0);
}

Test(tt_json, a_long_string_grows_the_buffer_as_it_goes)
{
    char in[3000];
    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = i % 3 == 0 ? '"' : 'x';
    tt_buf_t b = {0};
    cr_assert_eq(tt_json_str(&b, in, sizeof(in)), 0);
    cr_assert_eq(b.len, 2 + sizeof(in) + sizeof(in) / 3);
    cr_assert_eq(b.data[0], '"');
    cr_assert_eq(memcmp(b.data + 1, "\\\"xx\\\"xx", 8), 0);
    cr_assert_eq(b.data[b.len - 1], '"');
    tt_buf_free(&b);
}

Test(tt_json, utf8_len_takes_well_formed_sequences_only)
{
    const unsigned char *u = (const unsigned char *)"a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    cr_assert_eq(tt_utf8_len(u, 1), 1);
    cr_assert_eq(tt_utf8_len(u + 1, 2), 2);
    cr_assert_eq(tt_utf8_len(u + 3, 3), 3);
    cr_assert_eq(tt_utf8_len(u + 6, 4), 4);
    cr_assert_eq(tt_utf8_len(u + 6, 3), 0, "cut short");
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xc1\xbf", 2), 0, "overlong");
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xe0\x9f\xbf", 3), 0, "overlong");
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xed\xbf\xbf", 3), 0, "a surrogate");
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0, "past U+10FFFF");
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xf5\x80\x80\x80", 4), 0);
    cr_assert_eq(tt_utf8_len((const unsigned char *)"\xc3\x28", 2), 0, "no continuation");
}
