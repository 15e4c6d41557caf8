/* FNV-1a 64 (common/tt_hash.h). Its values are in saved files (a snapshot's fingerprint) and
 * on the wire (gossip's `from`), so they are pinned: the published FNV-1a 64 vectors, and a
 * hash continued over two pieces is the hash of the whole. */
#include <criterion/criterion.h>
#include <string.h>

#include "tt_hash.h"

static uint64_t of(const char *s)
{
    return tt_fnv1a64(TT_FNV1A64_BASIS, s, strlen(s));
}

Test(tt_hash, fnv1a64_gives_the_published_values)
{
    cr_assert_eq(of(""), UINT64_C(0xcbf29ce484222325));
    cr_assert_eq(of("a"), UINT64_C(0xaf63dc4c8601ec8c));
    cr_assert_eq(of("foobar"), UINT64_C(0x85944171f73967e8));
}

Test(tt_hash, a_hash_continues_over_pieces)
{
    cr_assert_eq(tt_fnv1a64(of("foo"), "bar", 3), of("foobar"));
}
