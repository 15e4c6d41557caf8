/*
 * The pure cluster and Sentinel core (redis/slots.c): slot hashing against Redis' own values,
 * CLUSTER SLOTS maps, redirects and Sentinel replies, and each of them fed bad replies. The
 * replies are real RESP bytes read by hiredis' own reader, as the store receives them.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "script.h"
#include "slots.h"
#include "store_int.h"

static const rds_endpoint_t asked = {.host = "10.0.0.9", .port = 7000};

/* Parses RESP bytes into a reply the caller frees. */
static redisReply *resp(const char *bytes)
{
    redisReader *r = redisReaderCreate();
    void *reply = NULL;
    redisReaderFeed(r, bytes, strlen(bytes));
    cr_assert_eq(redisReaderGetReply(r, &reply), REDIS_OK, "bad RESP in the test: %s", bytes);
    cr_assert_not_null(reply, "incomplete RESP in the test: %s", bytes);
    redisReaderFree(r);
    return reply;
}

Test(slots, crc16_is_the_xmodem_checksum_redis_cluster_uses)
{
    cr_assert_eq(rds_crc16("123456789", 9), 0x31C3);
    cr_assert_eq(rds_crc16("", 0), 0);
}

/* The values redis-cli's CLUSTER KEYSLOT answers. */
Test(slots, key_slots_match_redis_cluster_keyslot)
{
    cr_assert_eq(rds_key_slot("foo", 3), 12182);
    cr_assert_eq(rds_key_slot("bar", 3), 5061);
    cr_assert_eq(rds_key_slot("hello", 5), 866);
}

Test(slots, a_hash_tag_picks_the_slot_and_an_empty_one_does_not)
{
    int tagged = rds_key_slot("user1000", 8);
    cr_assert_eq(rds_key_slot("{user1000}.following", 20), tagged);
    cr_assert_eq(rds_key_slot("x{user1000}y{z}", 15), tagged, "the first { and the first } after");
    cr_assert_eq(rds_key_slot("{}user", 6), rds_key_slot("{}user", 6));
    cr_assert_neq(rds_key_slot("{}user", 6), rds_key_slot("user", 4), "empty tag: whole key");
    cr_assert_eq(rds_key_slot("{}user", 6), rds_crc16("{}user", 6) & 16383);
    cr_assert_eq(rds_key_slot("{open", 5), rds_crc16("{open", 5) & 16383, "no closing brace");
}

Test(slots, a_counter_key_hashes_its_identity_and_id_whatever_braces_the_id_holds)
{
    char a[RDS_KEY_MAX], b[RDS_KEY_MAX];
    int na = rds_key(a, 0x1234, "t-1", 3), nb = rds_key(b, 0x1234, "{x}", 3);
    cr_assert_str_eq((a[na] = '\0', a), "tokentriage:{0000000000001234:t-1}");
    cr_assert_eq(rds_key_slot(a, (size_t)na), rds_key_slot("0000000000001234:t-1", 20));
    /* the id's own braces do not choose the slot: ours opened first */
    cr_assert_eq(rds_key_slot(b, (size_t)nb), rds_key_slot("0000000000001234:{x", 19));
    na = rds_key(a, UINT64_C(0xfedcba9876543210), "k", 1); /* every nibble, the top one too */
    cr_assert_str_eq((a[na] = '\0', a), "tokentriage:{fedcba9876543210:k}");
}

#define SLOTS3                                                                                     \
    "*3\r\n"                                                                                       \
    "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"                          \
    "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nid\r\n"                                               \
    "*3\r\n:5461\r\n:10922\r\n*2\r\n$9\r\n127.0.0.1\r\n:7001\r\n"                                  \
    "*3\r\n:10923\r\n:16383\r\n*2\r\n$0\r\n\r\n:7002\r\n"

Test(slots, cluster_slots_becomes_a_map_of_primaries)
{
    static rds_map_t map;
    tt_err_t err = {0};
    redisReply *r = resp(SLOTS3);
    cr_assert_eq(rds_map_parse(r, &asked, &map, &err), 0, "%s", err.message);
    freeReplyObject(r);
    cr_assert_eq(map.n_nodes, 3);
    cr_assert_eq(map.covered, RDS_SLOTS);
    cr_assert_str_eq(map.nodes[map.slot[0]].host, "127.0.0.1");
    cr_assert_eq(map.nodes[map.slot[5460]].port, 7000, "the primary, not the replica 7003");
    cr_assert_eq(map.nodes[map.slot[5461]].port, 7001);
    cr_assert_str_eq(map.nodes[map.slot[16383]].host, "10.0.0.9", "unknown endpoint: the asked");
    cr_assert_eq(map.nodes[map.slot[16383]].port, 7002);
}

Test(slots, slots_no_range_names_stay_unserved)
{
    static rds_map_t map;
    tt_err_t err;
    redisReply *r = resp("*1\r\n*3\r\n:100\r\n:199\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    cr_assert_eq(rds_map_parse(r, &asked, &map, &err), 0, "%s", err.message);
    freeReplyObject(r);
    cr_assert_eq(map.covered, 100);
    cr_assert_eq(map.slot[99], RDS_MAP_NONE);
    cr_assert_eq(map.slot[200], RDS_MAP_NONE);
    cr_assert_eq(map.slot[150], 0);
}

/* Each bad reply is refused with a message naming what was wrong. */
Test(slots, bad_cluster_slots_replies_are_refused_with_a_reason)
{
    static const struct {
        const char *resp, *want;
    } cases[] = {
        {"-ERR This instance has cluster support disabled\r\n", "cluster support disabled"},
        {"+OK\r\n", "want an array"},
        {"*1\r\n:5\r\n", "range 1: not an array"},
        {"*1\r\n*2\r\n:0\r\n:1\r\n", "range 1: not an array"},
        {"*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n", "start <= end"},
        {"*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n", "0..16383"},
        {"*1\r\n*3\r\n:-1\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n", "0..16383"},
        {"*1\r\n*3\r\n$1\r\n0\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n", "0..16383"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*1\r\n$1\r\nh\r\n", "not an array [host, port"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n:1\r\n:1\r\n", "host is not a string"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:0\r\n", "port is not an integer"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:65536\r\n", "port is not an integer"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\n?\r\n:1\r\n", "no endpoint known"},
        {"*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$3\r\na\0b\r\n:1\r\n", "holds a NUL"},
        {"*2\r\n*3\r\n:0\r\n:9\r\n*2\r\n$1\r\nh\r\n:1\r\n*3\r\n:9\r\n:9\r\n*2\r\n$1\r\nh\r\n:2\r\n",
         "range 2: its slots overlap"},
    };
    static rds_map_t map;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tt_err_t err = {0};
        redisReader *rd = redisReaderCreate();
        void *reply = NULL;
        /* the NUL case needs its real length */
        size_t n = strlen(cases[i].resp);
        if (strstr(cases[i].want, "NUL"))
            n = sizeof("*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$3\r\na\0b\r\n:1\r\n") - 1;
        redisReaderFeed(rd, cases[i].resp, n);
        cr_assert_eq(redisReaderGetReply(rd, &reply), REDIS_OK);
        cr_assert_not_null(reply, "case %zu", i);
        redisReaderFree(rd);
        cr_assert_eq(rds_map_parse(reply, &asked, &map, &err), RDS_EMAP, "case %zu", i);
        cr_assert(strstr(err.message, cases[i].want), "case %zu: %s (want %s)", i, err.message,
                  cases[i].want);
        freeReplyObject(reply);
    }
    tt_err_t err;
    cr_assert_eq(rds_map_parse(NULL, &asked, &map, &err), RDS_EMAP);
}

Test(slots, more_primaries_than_a_store_holds_are_refused)
{
    static char buf[65 * 64];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "*65\r\n");
    for (int i = 0; i < 65; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n,
                              "*3\r\n:%d\r\n:%d\r\n*2\r\n$1\r\nh\r\n:%d\r\n", i, i, 1000 + i);
    static rds_map_t map;
    tt_err_t err;
    redisReply *r = resp(buf);
    cr_assert_eq(rds_map_parse(r, &asked, &map, &err), RDS_EMAP);
    cr_assert(strstr(err.message, "range 65: more primaries"), "%s", err.message);
    freeReplyObject(r);
}

static int redirect(const char *s, rds_redirect_t *out, tt_err_t *err)
{
    return rds_redirect_parse(s, strlen(s), &asked, out, err);
}

Test(slots, moved_and_ask_are_read_with_their_slot_and_target)
{
    rds_redirect_t r;
    tt_err_t err;
    cr_assert_eq(redirect("MOVED 3999 127.0.0.1:6381", &r, &err), 0);
    cr_assert_eq(r.kind, RDS_REDIRECT_MOVED);
    cr_assert_eq(r.slot, 3999);
    cr_assert_str_eq(r.to.host, "127.0.0.1");
    cr_assert_eq(r.to.port, 6381);
    cr_assert_eq(redirect("ASK 16383 ::1:7002", &r, &err), 0);
    cr_assert_eq(r.kind, RDS_REDIRECT_ASK);
    cr_assert_eq(r.slot, 16383);
    cr_assert_str_eq(r.to.host, "::1", "IPv6: the last colon splits");
    cr_assert_eq(redirect("MOVED 0 :7005", &r, &err), 0);
    cr_assert_str_eq(r.to.host, "10.0.0.9", "an empty host is the node asked");
    cr_assert_eq(r.to.port, 7005);
}

Test(slots, other_errors_are_not_redirects)
{
    rds_redirect_t r;
    tt_err_t err;
    const char *others[] = {"TRYAGAIN Multiple keys request during rehashing of slot",
                            "CLUSTERDOWN The cluster is down",
                            "NOSCRIPT No matching script",
                            "MOVEDX 1 h:1",
                            "ASKING",
                            "ERR MOVED 1 h:1"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
        cr_assert_eq(redirect(others[i], &r, &err), 0, "%s", others[i]);
        cr_assert_eq(r.kind, RDS_REDIRECT_NONE, "%s", others[i]);
    }
}

Test(slots, misshapen_redirects_are_refused)
{
    const char *bad[] = {"MOVED 16384 h:1",  "MOVED -1 h:1",   "MOVED 12 h", "MOVED 12 h:0",
                         "MOVED 12 h:65536", "MOVED 12 h:12x", "MOVED  h:1", "MOVED 1234567 h:1",
                         "ASK 1h:1",         "ASK 1 h:123456", "MOVED 12",   "MOVED 12 "};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rds_redirect_t r;
        tt_err_t err = {0};
        cr_assert_eq(redirect(bad[i], &r, &err), RDS_EMAP, "%s", bad[i]);
        cr_assert(strstr(err.message, "misshapen redirect"), "%s: %s", bad[i], err.message);
        cr_assert_eq(r.kind, RDS_REDIRECT_NONE);
    }
    char host[400] = "MOVED 1 ";
    memset(host + 8, 'h', 300);
    strcpy(host + 308, ":1");
    rds_redirect_t r;
    tt_err_t err;
    cr_assert_eq(redirect(host, &r, &err), RDS_EMAP, "a host too long");
}

Test(slots, sentinel_gives_the_primary_address_or_a_reason)
{
    rds_endpoint_t e;
    tt_err_t err;
    redisReply *r = resp("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    cr_assert_eq(rds_sentinel_addr_parse(r, &e, &err), 0, "%s", err.message);
    cr_assert_str_eq(e.host, "127.0.0.1");
    cr_assert_eq(e.port, 6380);
    freeReplyObject(r);
    static const struct {
        const char *resp, *want;
    } bad[] = {
        {"$-1\r\n", "unknown to this Sentinel"},
        {"*-1\r\n", "unknown to this Sentinel"},
        {"-ERR no such command\r\n", "an error"},
        {"*1\r\n$1\r\nh\r\n", "not an array [ip, port]"},
        {"*2\r\n$1\r\nh\r\n:6379\r\n", "not an array [ip, port]"},
        {"*2\r\n$0\r\n\r\n$4\r\n6380\r\n", "empty"},
        {"*2\r\n$1\r\nh\r\n$5\r\n99999\r\n", "not ip, port"},
        {"*2\r\n$1\r\nh\r\n$3\r\nabc\r\n", "not ip, port"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = resp(bad[i].resp);
        cr_assert_eq(rds_sentinel_addr_parse(r, &e, &err), RDS_EMAP, "case %zu", i);
        cr_assert(strstr(err.message, bad[i].want), "case %zu: %s", i, err.message);
        freeReplyObject(r);
    }
}

static int switch_master(const char *s, rds_endpoint_t *e, tt_err_t *err)
{
    return rds_switch_master_parse(s, strlen(s), "mymaster", e, err);
}

Test(slots, switch_master_names_the_new_primary_of_our_master_only)
{
    rds_endpoint_t e;
    tt_err_t err;
    cr_assert_eq(switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380", &e, &err), 0);
    cr_assert_str_eq(e.host, "127.0.0.1");
    cr_assert_eq(e.port, 6380);
    cr_assert_eq(switch_master("other 127.0.0.1 6379 127.0.0.1 6380", &e, &err), 1);
    cr_assert_eq(switch_master("mymasterx 127.0.0.1 6379 127.0.0.1 6380", &e, &err), 1);
    const char *bad[] = {"mymaster 127.0.0.1 6379 127.0.0.1",
                         "mymaster 127.0.0.1 6379 127.0.0.1 6380 extra",
                         "mymaster 127.0.0.1 6379 127.0.0.1 port",
                         "mymaster 127.0.0.1 6379  6380",
                         "",
                         " 127.0.0.1 6379 127.0.0.1 6380"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(switch_master(bad[i], &e, &err), RDS_EMAP, "%s", bad[i]);
}

Test(slots, role_accepts_a_primary_only)
{
    tt_err_t err;
    redisReply *r = resp("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    cr_assert_eq(rds_role_is_primary(r, &err), 0);
    freeReplyObject(r);
    r = resp("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n$9\r\nconnected\r\n:1\r\n");
    cr_assert_eq(rds_role_is_primary(r, &err), RDS_EMAP);
    cr_assert(strstr(err.message, "ROLE says slave"), "%s", err.message);
    freeReplyObject(r);
    r = resp(":1\r\n");
    cr_assert_eq(rds_role_is_primary(r, &err), RDS_EMAP);
    freeReplyObject(r);
    cr_assert_eq(rds_role_is_primary(NULL, &err), RDS_EMAP);
}

/* ---- script replies (script.c): the same pure layer ------------------------------------- */

/* remaining is answered as an integer when the script has it as a double below 2^52 (cheaper
 * in Lua than text), else as decimal text; the state is always text */
Test(script, remaining_is_an_integer_or_a_decimal_and_the_state_a_decimal)
{
    static const struct {
        const char *resp;
        int rc;
        int64_t remaining; /* or a piece of the error */
        const char *error;
    } cases[] = {
        {"*6\r\n:1\r\n:0\r\n:59\r\n:0\r\n:1\r\n$19\r\n1700000000200000000\r\n", 0, 59, NULL},
        {"*6\r\n:1\r\n:0\r\n$16\r\n9007199254740993\r\n:0\r\n:0\r\n$1\r\n5\r\n", 0,
         INT64_C(9007199254740993), NULL},
        {"*6\r\n:0\r\n:0\r\n:-1\r\n:1\r\n:1\r\n$1\r\n5\r\n", RDS_EREPLY, 0,
         "field 3 (remaining) is -1, out of range"},
        {"*6\r\n:1\r\n:0\r\n*0\r\n:0\r\n:1\r\n$1\r\n5\r\n", RDS_EREPLY, 0,
         "field 3 (remaining) is an array, want an integer or a decimal string"},
        {"*6\r\n:1\r\n:0\r\n:59\r\n:0\r\n:1\r\n:5\r\n", RDS_EREPLY, 0,
         "field 6 (state) is an integer, want a decimal string"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        redisReply *r = resp(cases[i].resp);
        ra_result_t got;
        tt_err_t err = {0};
        int rc = rds_reply_read(r, &got, &err);
        freeReplyObject(r);
        cr_assert_eq(rc, cases[i].rc, "case %zu: %d (%s)", i, rc, err.message);
        if (rc == 0)
            cr_assert_eq(got.remaining, cases[i].remaining, "case %zu", i);
        else
            cr_assert(strstr(err.message, cases[i].error), "case %zu: %s", i, err.message);
    }
}

/* The state's decimal text: every int64, nothing beyond, nothing but digits and one '-'. */
Test(script, the_state_is_read_over_the_whole_int64_range_and_nothing_else)
{
    static const struct {
        const char *text;
        bool ok;
        int64_t v;
    } cases[] = {
        {"0", true, 0},
        {"-0", true, 0},
        {"9223372036854775807", true, INT64_MAX},
        {"-9223372036854775808", true, INT64_MIN},
        {"0009223372036854775807", false, 0}, /* more than 19 digits, even if leading zeros */
        {"9223372036854775808", false, 0},
        {"-9223372036854775809", false, 0},
        {"99999999999999999999", false, 0},
        {"", false, 0},
        {"-", false, 0},
        {"+5", false, 0},
        {"1e3", false, 0},
        {" 5", false, 0},
        {"5 ", false, 0},
        {"--5", false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "*6\r\n:1\r\n:0\r\n:1\r\n:0\r\n:1\r\n$%zu\r\n%s\r\n",
                 strlen(cases[i].text), cases[i].text);
        redisReply *r = resp(text);
        ra_result_t got;
        tt_err_t err = {0};
        int rc = rds_reply_read(r, &got, &err);
        freeReplyObject(r);
        cr_assert_eq(rc == 0, cases[i].ok, "\"%s\": %d (%s)", cases[i].text, rc, err.message);
        if (rc == 0)
            cr_assert_eq(got.next_state, cases[i].v, "\"%s\"", cases[i].text);
        else
            cr_assert(strstr(err.message, "field 6 (state) is not a decimal int64"), "%s",
                      err.message);
    }
}

/* ---- replies in an arena (reply.c) ------------------------------------------------------- */

/* Reads one reply of `resp` through a reader whose objects live in arena a. */
static redisReply *arena_read(rds_replies_t *a, const char *resp, size_t len)
{
    redisReader *reader = redisReaderCreate();
    rds__replies_attach(a, reader);
    void *reply = NULL;
    cr_assert_eq(redisReaderFeed(reader, resp, len), REDIS_OK);
    cr_assert_eq(redisReaderGetReply(reader, &reply), REDIS_OK);
    redisReaderFree(reader); /* the reply stays: it is the arena's */
    return reply;
}

Test(reply, replies_larger_than_a_chunk_are_read_whole_and_the_arena_is_reused)
{
    /* 3000 strings of 100 bytes and a nested array with an integer, a nil and an error: about
     * 450 KB of objects, many chunks; read twice with a reset between */
    enum { N = 3000 };
    static char resp[N * 110 + 256];
    char item[101];
    memset(item, 'x', 100);
    item[100] = '\0';
    size_t len = (size_t)snprintf(resp, sizeof(resp), "*%d\r\n", N + 1);
    for (int i = 0; i < N; i++) {
        item[0] = (char)('a' + i % 26);
        len += (size_t)snprintf(resp + len, sizeof(resp) - len, "$100\r\n%s\r\n", item);
    }
    len += (size_t)snprintf(resp + len, sizeof(resp) - len, "*3\r\n:-42\r\n$-1\r\n-ERR no\r\n");
    rds_replies_t a = {0};
    for (int round = 0; round < 2; round++) {
        redisReply *r = arena_read(&a, resp, len);
        cr_assert(r && r->type == REDIS_REPLY_ARRAY && r->elements == N + 1);
        for (int i = 0; i < N; i++) {
            const redisReply *e = r->element[i];
            cr_assert(e->type == REDIS_REPLY_STRING && e->len == 100 && e->str[100] == '\0' &&
                          e->str[0] == 'a' + i % 26 && e->str[99] == 'x',
                      "element %d", i);
        }
        const redisReply *inner = r->element[N];
        cr_assert(inner->type == REDIS_REPLY_ARRAY && inner->elements == 3);
        cr_assert(inner->element[0]->type == REDIS_REPLY_INTEGER &&
                  inner->element[0]->integer == -42);
        cr_assert_eq(inner->element[1]->type, REDIS_REPLY_NIL);
        cr_assert(inner->element[2]->type == REDIS_REPLY_ERROR &&
                  strcmp(inner->element[2]->str, "ERR no") == 0);
        cr_assert(a.arena.head && a.arena.head->next, "a reply past one chunk takes more");
        tt_arena_reset(&a.arena);
        cr_assert(a.arena.head && !a.arena.head->next && a.arena.head->used == 0,
                  "one chunk kept, empty");
    }
    redisReply *small = arena_read(&a, ":7\r\n", 4);
    cr_assert(small->type == REDIS_REPLY_INTEGER && small->integer == 7);
    cr_assert_null(a.arena.head->next, "a small reply fits the chunk kept");
    tt_arena_free(&a.arena);
    cr_assert_null(a.arena.head);
}

/* An array header is outside input: its length is what the arena allocates, and clears, at
 * once (hiredis 0.14 refuses only lengths past INT_MAX). Past what any reply of ours holds it
 * is refused: the reader fails and nothing is allocated (test_store checks the message
 * the connection is dropped with). */
Test(reply, an_array_header_past_the_bound_is_refused_before_allocating)
{
    static const char *const cases[] = {
        "*100000\r\n:1\r\n", "*16385\r\n:1\r\n",
        "*2147483647\r\n:1\r\n", /* 16 GB of element pointers */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rds_replies_t a = {0};
        redisReader *reader = redisReaderCreate();
        rds__replies_attach(&a, reader);
        void *reply = NULL;
        cr_assert_eq(redisReaderFeed(reader, cases[i], strlen(cases[i])), REDIS_OK);
        cr_assert_eq(redisReaderGetReply(reader, &reply), REDIS_ERR, "case %zu", i);
        cr_assert_null(a.arena.head, "case %zu: nothing allocated", i);
        redisReaderFree(reader);
        tt_arena_free(&a.arena);
    }
    /* the largest reply read (CLUSTER SLOTS: one range per slot at most) still fits */
    rds_replies_t a = {0};
    redisReply *r = arena_read(&a, "*16384\r\n", 8);
    cr_assert_null(r, "an array waits for its elements");
    tt_arena_free(&a.arena);
}
