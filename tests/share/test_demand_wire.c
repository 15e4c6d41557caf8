/* The demand wire format: round trips, the bounds, and a decoder that names the bad field. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "demand_wire.h"

static demand_msg_t msg; /* large: not on the stack */

static tt_err_t err;

/* Decodes into msg; a failure must come with the payload's code in err. */
static int decode(const uint8_t *b, size_t len)
{
    err = (tt_err_t){0};
    int rc = demand_wire_decode(b, len, &msg, &err);
    if (rc < 0)
        cr_expect_eq(err.code, rc);
    return rc;
}

Test(demand_wire, reports_and_grants_round_trip)
{
    demand_item_t in[3] = {
        {.identity = UINT64_MAX, .key = (const uint8_t *)"team-1", .key_len = 6, .value = 7},
        {.identity = 0, .key = (const uint8_t *)"", .key_len = 0, .value = 0},
        {.identity = 42, .key = (const uint8_t *)"k", .key_len = 1, .value = DEMAND_DEMAND_CAP},
    };
    uint8_t buf[1400];
    int len = demand_wire_encode(DEMAND_REPORT, in, 3, buf, sizeof(buf));
    cr_assert_gt(len, 0);
    cr_assert_eq(decode(buf, (size_t)len), 0, "%s: %s", err.path, err.message);
    cr_assert_eq(msg.kind, DEMAND_REPORT);
    cr_assert_eq(msg.n, 3);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(msg.items[i].identity, in[i].identity);
        cr_expect_eq(msg.items[i].key_len, in[i].key_len);
        cr_expect_eq(memcmp(msg.items[i].key, in[i].key, in[i].key_len), 0);
        cr_expect_eq(msg.items[i].value, in[i].value);
    }
    in[0].value = DEMAND_SHARE_DEN;
    in[0].ttl_ms = 1500;
    len = demand_wire_encode(DEMAND_GRANT, in, 1, buf, sizeof(buf));
    cr_assert_eq(decode(buf, (size_t)len), 0, "%s: %s", err.path, err.message);
    cr_expect_eq(msg.kind, DEMAND_GRANT);
    cr_expect_eq(msg.items[0].value, DEMAND_SHARE_DEN);
    cr_expect_eq(msg.items[0].ttl_ms, 1500);
}

/* A global limit's key is empty and may come without a pointer: msgpack-c then hands the
 * writer an empty body with a NULL pointer, which must be written as nothing (memcpy from NULL
 * is undefined even for 0 bytes; the sanitizer build stops on it). */
Test(demand_wire, an_empty_key_without_a_pointer_round_trips)
{
    demand_item_t in = {.identity = 9, .key = NULL, .key_len = 0, .value = 3};
    uint8_t buf[64];
    int len = demand_wire_encode(DEMAND_REPORT, &in, 1, buf, sizeof(buf));
    cr_assert_gt(len, 0);
    cr_assert_eq(decode(buf, (size_t)len), 0, "%s: %s", err.path, err.message);
    cr_assert_eq(msg.n, 1);
    cr_expect_eq(msg.items[0].identity, 9);
    cr_expect_eq(msg.items[0].key_len, 0);
    cr_expect_eq(msg.items[0].value, 3);
}

Test(demand_wire, item_max_is_an_upper_bound)
{
    uint8_t key[DEMAND_KEY_MAX], buf[1400];
    memset(key, 'x', sizeof(key));
    for (size_t kl = 0; kl <= DEMAND_KEY_MAX; kl += 17) {
        demand_item_t it = {.identity = UINT64_MAX,
                            .key = key,
                            .key_len = (uint32_t)kl,
                            .value = DEMAND_SHARE_DEN,
                            .ttl_ms = DEMAND_WIRE_TTL_MAX_MS};
        int len = demand_wire_encode(DEMAND_GRANT, &it, 1, buf, sizeof(buf));
        cr_assert_gt(len, 0);
        cr_expect_leq((size_t)len, DEMAND_WIRE_HEAD_MAX + demand_wire_item_max(DEMAND_GRANT, kl));
    }
}

Test(demand_wire, the_encoder_refuses_what_does_not_fit_or_is_out_of_range)
{
    uint8_t buf[64];
    demand_item_t it = {
        .identity = 1, .key = (const uint8_t *)"abc", .key_len = 3, .value = 0, .ttl_ms = 1};
    cr_expect_eq(demand_wire_encode(DEMAND_GRANT, &it, 1, buf, sizeof(buf)), DEMAND_EWIRE);
    it.value = DEMAND_DEMAND_CAP + 1;
    cr_expect_eq(demand_wire_encode(DEMAND_REPORT, &it, 1, buf, sizeof(buf)), DEMAND_EWIRE);
    it.value = 1;
    cr_expect_eq(demand_wire_encode(DEMAND_REPORT, &it, 1, buf, 8), DEMAND_EWIRE);
}

/* A grant payload with one item whose fields are given as raw msgpack. */
static size_t grant(uint8_t *b, const uint8_t *item, size_t len)
{
    const uint8_t head[] = {0x93, 0x01, 0x02, 0x91};
    memcpy(b, head, sizeof(head));
    memcpy(b + sizeof(head), item, len);
    return sizeof(head) + len;
}

Test(demand_wire, the_decoder_names_the_bad_field)
{
    struct {
        uint8_t item[16];
        size_t len;
        const char *path, *message;
    } cases[] = {
        {{0x93, 0x01, 0xc4, 0x00, 0x01}, 5, "items[0].fields", "3 fields, a grant has 4"},
        {{0x94, 0xa1, 'x', 0xc4, 0x00, 0x01, 0x01}, 7, "items[0].identity", "not an unsigned"},
        {{0x94, 0x01, 0xa1, 'x', 0x01, 0x01}, 6, "items[0].key", "not bin"},
        {{0x94, 0x01, 0xc4, 0x00, 0x00, 0x01}, 6, "items[0].share", "0, at least 1"},
        {{0x94, 0x01, 0xc4, 0x00, 0xce, 0x00, 0x10, 0x00, 0x01, 0x01},
         10,
         "items[0].share",
         "1048577, at most 1048576"},
        {{0x94, 0x01, 0xc4, 0x00, 0x01, 0xce, 0x00, 0x02, 0xbf, 0x21},
         10,
         "items[0].ttl_ms",
         "180001, at most 180000"},
        {{0x94, 0x01, 0xc4, 0x00, 0x01, 0x00}, 6, "items[0].ttl_ms", "0, at least 1"},
        {{0x94, 0x01, 0xc5, 0x01, 0x01}, 5, "items[0].key", "257 bytes, at most 256"},
    };
    uint8_t b[64];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = grant(b, cases[i].item, cases[i].len);
        cr_expect_eq(decode(b, len), DEMAND_EWIRE, "case %zu", i);
        cr_expect_str_eq(err.path, cases[i].path, "case %zu", i);
        cr_expect(strstr(err.message, cases[i].message), "case %zu: %s", i, err.message);
        cr_expect_eq(msg.n, 0);
    }
}

Test(demand_wire, the_frame_is_checked_before_the_items)
{
    static const struct {
        uint8_t b[8];
        size_t len;
        const char *path, *message;
    } cases[] = {
        {{0x93, 0x02, 0x01, 0x90}, 4, "version", "2, this replica speaks 1"},
        {{0x93, 0x01, 0x03, 0x90}, 4, "kind", "3, not report (1) or grant (2)"},
        {{0x93, 0x01, 0x01, 0xdc, 0x01, 0x00}, 6, "items", "256 items, at most 255"},
        {{0x93, 0x01, 0x01, 0x90, 0x00}, 5, "payload", "1 bytes after the items"},
        {{0x92, 0x01, 0x01}, 3, "payload", "2 fields, expected 3"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_expect_eq(decode(cases[i].b, cases[i].len), DEMAND_EWIRE, "case %zu", i);
        cr_expect_str_eq(err.path, cases[i].path, "case %zu", i);
        cr_expect_str_eq(err.message, cases[i].message, "case %zu", i);
    }
    uint8_t big[1401] = {0x93};
    cr_expect_eq(decode(big, sizeof(big)), DEMAND_EWIRE);
    cr_expect_str_eq(err.path, "payload");
    cr_expect_str_eq(err.message, "1401 bytes, at most 1400");
}

Test(demand_wire, every_truncation_fails_cleanly)
{
    demand_item_t in[2] = {
        {.identity = 1u << 20,
         .key = (const uint8_t *)"team-1",
         .key_len = 6,
         .value = 9,
         .ttl_ms = 1500},
        {.identity = 3,
         .key = (const uint8_t *)"team-22",
         .key_len = 7,
         .value = 70000,
         .ttl_ms = 1500},
    };
    uint8_t buf[256];
    int len = demand_wire_encode(DEMAND_GRANT, in, 2, buf, sizeof(buf));
    cr_assert_gt(len, 0);
    for (int cut = 0; cut < len; cut++) {
        uint8_t *copy = malloc(cut ? (size_t)cut : 1); /* exactly `cut` bytes: ASan sees any
                                                          over-read */
        cr_assert(copy);
        memcpy(copy, buf, (size_t)cut);
        cr_expect_eq(decode(copy, (size_t)cut), DEMAND_EWIRE, "cut at %d", cut);
        free(copy);
    }
}
