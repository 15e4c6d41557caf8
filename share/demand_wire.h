/*
 * demand_wire: the demand reports and lease grants on the gossip port, MessagePack.
 *
 * An opaque payload for membership's sealed transport (SPEC §7): the shell hands these bytes to
 * the gossip layer as an application message, which seals them like every gossip datagram and
 * tells the receiver which member sent them. Every payload is at most datagram_max bytes
 * (default 1150, so payload + membership's frame + seal stay within 1400).
 *
 *   PAYLOAD = array(3):
 *   +-----------------------------------------------------------------------------+
 *   | [ version: uint = 1     a receiver rejects any other version                |
 *   |   kind:    uint         1 REPORT (replica -> owner), 2 GRANT (owner -> replica)|
 *   |   items:   array(0..255) of ITEM ]                                          |
 *   +-----------------------------------------------------------------------------+
 *   REPORT item = array(3): [ identity: uint64   the limit's counter identity      |
 *                            key: bin(0..256)    the subject id for its level       |
 *                            demand: uint32      smoothed demand, in 1/2^20 of the  |
 *                                                amount per period, <= 2^30; 0 = release ]
 *   GRANT item  = array(4): [ identity: uint64, key: bin(0..256),                   |
 *                            share: uint32       1..2^20: the lease, num / 2^20     |
 *                            ttl_ms: uint32      1..180000: valid this long from receipt ]
 *
 * The lease carries a lifetime, not a deadline: replicas' clocks need not agree. The decoder
 * reads through (pos, end), never past end, and names the field that was wrong
 * ("items[3].key: 300 bytes, at most 256"); the whole payload is decoded before any of it is
 * used, so a bad one changes nothing.
 */
#ifndef TT_SHARE_DEMAND_WIRE_H
#define TT_SHARE_DEMAND_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "demand.h"

#define DEMAND_WIRE_VERSION 1
#define DEMAND_WIRE_ITEMS_MAX 255
/* Three intervals of the longest demand_interval the config accepts (60 s). */
#define DEMAND_WIRE_TTL_MAX_MS 180000
/* The largest payload the transport may carry (the gossip datagram limit, SPEC §7). */
#define DEMAND_WIRE_DATAGRAM_MAX 1400
/* The frame around the items, at most: array(3), version, kind, array16 header. */
#define DEMAND_WIRE_HEAD_MAX 6

typedef enum demand_kind {
    DEMAND_REPORT = 1,
    DEMAND_GRANT = 2,
} demand_kind_t;

/* One report or grant. `key` points into the decoded payload or the encoder's caller's memory. */
typedef struct demand_item {
    uint64_t identity;
    const uint8_t *key;
    uint32_t key_len;
    uint32_t value;  /* REPORT: demand; GRANT: share num */
    uint32_t ttl_ms; /* GRANT only */
} demand_item_t;

typedef struct demand_msg {
    demand_kind_t kind;
    uint32_t n;
    demand_item_t items[DEMAND_WIRE_ITEMS_MAX];
} demand_msg_t;

/* The most bytes one item of `kind` with a key of key_len bytes can take. */
size_t demand_wire_item_max(demand_kind_t kind, size_t key_len);

/*
 * Encodes n items (n <= DEMAND_WIRE_ITEMS_MAX) into buf. Returns the length, or DEMAND_EWIRE when
 * they do not fit `cap` or an item is out of range (the encoder refuses what the decoder would).
 */
int demand_wire_encode(demand_kind_t kind, const demand_item_t *items, uint32_t n, uint8_t *buf,
                       size_t cap);

/* Decodes a payload into *out (keys point into `bytes`). Returns 0 or DEMAND_EWIRE, with err's
 * path naming the field (`items[3].key`, `version`; err may be NULL). */
int demand_wire_decode(const uint8_t *bytes, size_t len, demand_msg_t *out, tt_err_t *err);

#endif
