/* The msgpack reader: bounds, restored positions, and failures that name the field. */
#include <criterion/criterion.h>
#include <string.h>

#include "wire.h"

#define READER(bytes, e)                                                                           \
    {                                                                                              \
        .pos = (bytes), .end = (bytes) + sizeof(bytes), .err = (e)                                 \
    }

Test(wire, a_header_announcing_more_than_the_bytes_left_is_refused_and_nothing_consumed)
{
    static const uint8_t b[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0x01};
    wire_reader_t r = READER(b, NULL);
    uint32_t n;
    cr_assert_eq(wire_read_array(&r, &n), TT_ERR_FRAME);
    cr_assert_eq(r.pos, b);
    cr_assert_eq(wire_read_map(&r, &n), TT_ERR_TYPE);
    cr_assert_eq(wire_skip(&r), TT_ERR_FRAME);
    cr_assert_eq(r.pos, b);
}

Test(wire, integers_of_every_form_read_as_their_value_and_out_of_range_is_bad_value)
{
    static const uint8_t b[] = {0xd0, 0x85, 0xcd, 0x01, 0x00, 0xcf, 0xff, 0xff,
                                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xe0};
    wire_reader_t r = READER(b, NULL);
    int64_t v;
    uint64_t u;
    cr_assert_eq(wire_read_int(&r, &v), 0);
    cr_assert_eq(v, -123);
    cr_assert_eq(wire_read_uint(&r, &u), 0);
    cr_assert_eq(u, 256);
    cr_assert_eq(wire_read_int(&r, &v), TT_ERR_VALUE);
    cr_assert_eq(wire_read_uint(&r, &u), 0);
    cr_assert_eq(u, UINT64_MAX);
    cr_assert_eq(wire_read_uint(&r, &u), TT_ERR_VALUE, "-32 is not unsigned");
    cr_assert_eq(wire_read_int(&r, &v), 0);
    cr_assert_eq(v, -32);
    cr_assert_eq(r.pos, r.end);
}

Test(wire, a_failure_names_the_field_under_the_readers_path)
{
    static const uint8_t b[] = {0xa1, 'x', 0xcc, 0xc8, 0xc5, 0x01, 0x01};
    tt_err_t e;
    wire_reader_t r = READER(b, &e);
    uint64_t u;
    wire_str_t s;
    r.path = "items[3]";
    cr_assert_eq(wire_want_uint(&r, 10, &u, "identity"), TT_ERR_TYPE);
    cr_assert_str_eq(e.path, "items[3].identity");
    cr_assert_str_eq(e.message, "not an unsigned integer (byte 0xa1)");
    cr_assert_eq(wire_want_str(&r, 0, 8, &s, "name"), 0);
    cr_assert_eq(wire_want_uint(&r, 100, &u, "demand"), TT_ERR_VALUE);
    cr_assert_str_eq(e.message, "200, at most 100");
    r.pos += 2;
    r.path = NULL;
    cr_assert_eq(wire_want_bin(&r, 0, 256, &s, "key"), TT_ERR_VALUE);
    char buf[128];
    cr_assert_str_eq(tt_err_format(&e, buf, sizeof(buf)), "key: 257 bytes, at most 256");
    cr_assert_eq(wire_want_bin(&r, 258, 300, &s, "key"), TT_ERR_VALUE);
    cr_assert_str_eq(e.message, "257 bytes, at least 258");
    cr_assert_eq(wire_want_bin(&r, 0, 300, &s, "key"), TT_ERR_FRAME);
    cr_assert_str_eq(e.message, "truncated");
}

Test(wire, every_code_has_a_name_and_a_message)
{
    cr_assert_str_eq(tt_err_name(TT_ERR_FRAME), "bad_frame");
    cr_assert_str_eq(tt_err_name(TT_ERR_FIELD), "unknown_field");
    cr_assert_str_eq(tt_err_name(12345), "error");
    cr_assert_str_eq(tt_err_message(12345), "unknown error");
    cr_assert_neq(strlen(tt_err_message(TT_ERR_VALUE)), 0);
}
