/*
 * rds slots: the pure part of Redis Cluster and Sentinel. Slot hashing (CRC16 of the key's
 * hash tag), the slot map read from CLUSTER SLOTS, MOVED/ASK redirects, and the Sentinel
 * replies (the primary's address, +switch-master, ROLE). No I/O, no clock, no allocation:
 * every reply here is outside input, so each is bounded and checked, and a bad one is an
 * error naming what was wrong, never a guess. The async store (redis_store.c) is the shell.
 */
#ifndef TT_REDIS_SLOTS_H
#define TT_REDIS_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "tt_err.h"

#define RDS_SLOTS 16384
#define RDS_NODES_MAX 64    /* primaries (connections) one store holds at most */
#define RDS_HOST_MAX 255    /* a host name, an IP literal, or a unix socket path */
#define RDS_MAP_NONE 0xff   /* a slot no primary serves */
#define RDS_REDIRECTS_MAX 2 /* MOVED or ASK answers followed per call */

/* Errors beside script.h's RDS_E*. */
enum {
    RDS_EMAP = TT_ERR_RDS_MAP, /* a CLUSTER SLOTS (or Sentinel) reply we cannot use */
};

typedef struct rds_endpoint {
    char host[RDS_HOST_MAX + 1];
    int port; /* 0: host is a unix socket path */
} rds_endpoint_t;

/* Which primary serves each slot. */
typedef struct rds_map {
    uint32_t n_nodes;
    rds_endpoint_t nodes[RDS_NODES_MAX];
    uint8_t slot[RDS_SLOTS]; /* index into nodes, or RDS_MAP_NONE */
    uint32_t covered;        /* slots with a primary */
} rds_map_t;

/* CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with. */
uint16_t rds_crc16(const char *buf, size_t len);

/* The slot of a key: CRC16 of the hash tag (the bytes between the first '{' and the first '}'
 * after it, when not empty) or of the whole key, mod 16384. */
int rds_key_slot(const char *key, size_t len);

/*
 * Reads a CLUSTER SLOTS reply into *map. `asked` is the node the command went to: an entry
 * whose endpoint is NULL or "" means that node's host (Redis' "unknown endpoint"). Every
 * entry is checked (shape, slot range, no overlap, host length, port range, at most
 * RDS_NODES_MAX primaries). Returns 0, or RDS_EMAP with err naming the entry; *map is then
 * unspecified (read into a scratch map).
 */
int rds_map_parse(const redisReply *reply, const rds_endpoint_t *asked, rds_map_t *map,
                  tt_err_t *err);

typedef enum rds_redirect_kind {
    RDS_REDIRECT_NONE = 0,
    RDS_REDIRECT_MOVED,
    RDS_REDIRECT_ASK,
} rds_redirect_kind_t;

typedef struct rds_redirect {
    rds_redirect_kind_t kind;
    int slot;
    rds_endpoint_t to;
} rds_redirect_t;

/*
 * Reads an error reply's text: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
 * An empty host means `asked`'s. Returns 0 with out->kind NONE for any other error, 0 with a
 * redirect, or RDS_EMAP for a redirect that is misshapen (err says how).
 */
int rds_redirect_parse(const char *str, size_t len, const rds_endpoint_t *asked,
                       rds_redirect_t *out, tt_err_t *err);

/* SENTINEL get-master-addr-by-name: a two-element array [ip, port]. NIL (unknown master) and
 * everything else are RDS_EMAP with err saying what came. */
int rds_sentinel_addr_parse(const redisReply *reply, rds_endpoint_t *out, tt_err_t *err);

/* A +switch-master message's payload: "<master> <old ip> <old port> <new ip> <new port>".
 * Returns 0 with the new primary when it names `master`, 1 when it names another master, or
 * RDS_EMAP when misshapen. */
int rds_switch_master_parse(const char *str, size_t len, const char *master, rds_endpoint_t *out,
                            tt_err_t *err);

/* ROLE: 0 when the first element is "master", RDS_EMAP otherwise (err names the role). */
int rds_role_is_primary(const redisReply *reply, tt_err_t *err);

#endif
