/*
 * libFuzzer target for every Redis reply the cluster and Sentinel code reads (redis/slots.c) and
 * the script reply reader (redis/script.c): the input is RESP bytes, read by hiredis' own reader
 * as the store receives them, then offered to each parser; the raw bytes also go to the two
 * text parsers (a redirect's error text, a +switch-master payload). Properties beyond "no
 * crash, no leak, no UB": a map that parses names only slots in range and primaries it lists,
 * and counts what it covers; a redirect names a slot in range and a port in 1..65535.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "script.h"
#include "slots.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static rds_map_t map;
static const rds_endpoint_t asked = {.host = "10.0.0.1", .port = 7000};

static void text(const char *s, size_t n)
{
    rds_redirect_t rd;
    rds_endpoint_t e;
    tt_err_t err;
    if (rds_redirect_parse(s, n, &asked, &rd, &err) == 0 && rd.kind != RDS_REDIRECT_NONE)
        check(rd.slot >= 0 && rd.slot < RDS_SLOTS && rd.to.port >= 1 && rd.to.port <= 65535);
    if (rds_switch_master_parse(s, n, "mymaster", &e, &err) == 0)
        check(e.port >= 1 && e.port <= 65535 && e.host[0] != '\0');
}

/* hiredis 0.14's reader allocates an array's element pointers when it reads the header, so
 * "*1000000000" is an 8 GB calloc inside hiredis before any of our code runs (docs/redis.md):
 * arrays of 100,000 elements or more are left out, the rest is fuzzed. */
static bool huge_array(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < size; i++) {
        size_t digits = 0;
        while (data[i] == '*' && i + 1 + digits < size && data[i + 1 + digits] >= '0' &&
               data[i + 1 + digits] <= '9')
            digits++;
        if (digits >= 6)
            return true;
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    text((const char *)data, size);
    if (huge_array(data, size))
        return 0;
    redisReader *r = redisReaderCreate();
    redisReaderFeed(r, (const char *)data, size);
    void *reply = NULL;
    for (int i = 0; i < 4 && redisReaderGetReply(r, &reply) == REDIS_OK && reply; i++) {
        const redisReply *rep = reply;
        tt_err_t err;
        char sha[RDS_SHA_LEN + 1];
        rds_endpoint_t e;
        ra_result_t res;
        if (rds_map_parse(rep, &asked, &map, &err) == 0) {
            uint32_t covered = 0;
            for (int s = 0; s < RDS_SLOTS; s++) {
                check(map.slot[s] == RDS_MAP_NONE || map.slot[s] < map.n_nodes);
                covered += map.slot[s] != RDS_MAP_NONE;
            }
            check(covered == map.covered && map.n_nodes <= RDS_NODES_MAX);
        }
        if (rds_sentinel_addr_parse(rep, &e, &err) == 0)
            check(e.port >= 1 && e.port <= 65535);
        (void)rds_role_is_primary(rep, &err);
        (void)rds_reply_read(rep, &res, &err);
        (void)rds_reply_sha(rep, sha, &err);
        if (rep->type == REDIS_REPLY_ERROR || rep->type == REDIS_REPLY_STRING)
            text(rep->str, rep->len);
        freeReplyObject(reply);
        reply = NULL;
    }
    redisReaderFree(r);
    return 0;
}
