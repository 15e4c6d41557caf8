/* The bounded msgpack-c writer (wire/wire_pack.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "wire_pack.h"

static uint8_t buf[16];
static wire_pack_t w;
static msgpack_packer pk;

/* A packer writing into the first cap bytes of buf (zeroed). */
static void start(size_t cap)
{
    memset(buf, 0, sizeof(buf));
    w = (wire_pack_t){.p = buf, .cap = cap};
    wire_packer_init(&pk, &w);
}

Test(wire_pack, the_packer_writes_into_the_space_given)
{
    start(sizeof(buf));
    msgpack_pack_array(&pk, 2);
    msgpack_pack_uint32(&pk, 7);
    msgpack_pack_str(&pk, 2);
    msgpack_pack_str_body(&pk, "hi", 2);
    cr_assert_not(w.overflow);
    cr_assert_eq(w.len, 5);
    cr_assert_eq(memcmp(buf, "\x92\x07\xa2hi", 5), 0);
}

Test(wire_pack, a_write_past_the_end_sets_overflow_and_it_stays_set)
{
    start(4);
    msgpack_pack_bin(&pk, 5);
    msgpack_pack_bin_body(&pk, "abcde", 5); /* 2 + 5 > 4 */
    cr_assert(w.overflow);
    cr_assert_eq(w.len, 2, "the header fitted; the body did not");
    msgpack_pack_nil(&pk); /* would fit: refused all the same */
    cr_assert_eq(w.len, 2);
    cr_assert_eq(buf[4], 0, "nothing past cap");
}

Test(wire_pack, an_empty_body_without_a_pointer_is_nothing)
{
    start(4);
    msgpack_pack_bin(&pk, 0);
    msgpack_pack_bin_body(&pk, NULL, 0);
    msgpack_pack_str(&pk, 0);
    msgpack_pack_str_body(&pk, NULL, 0);
    cr_assert_not(w.overflow);
    cr_assert_eq(w.len, 3);
    cr_assert_eq(memcmp(buf, "\xc4\x00\xa0", 3), 0);
}
