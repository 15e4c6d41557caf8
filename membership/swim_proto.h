/*
 * swim_proto: the gossip wire format, its codec and its seal.
 *
 * Every datagram is at most SWIM_DATAGRAM_MAX (1400) bytes, so it fits an Ethernet MTU with
 * IPv6 and UDP headers to spare; the encoder never produces more and the receiver drops more
 * before reading a byte of it. The outer frame is fixed binary, the body is MessagePack:
 *
 *   sealed (a keyring is configured):
 *   +---------+---------+------------------------+-------------------------------+
 *   | version | mode=1  | nonce: 24 bytes        | XChaCha20-Poly1305-IETF       |
 *   | 1 byte  | 1 byte  | (random, per datagram) | ciphertext of BODY + 16 tag   |
 *   +---------+---------+------------------------+-------------------------------+
 *   associated data = version || mode || cluster label (the label is never sent)
 *
 *   plaintext (no keyring; a loud warning at start):
 *   +---------+---------+----------------------------------------------------------+
 *   | version | mode=0  | BODY                                                     |
 *   +---------+---------+----------------------------------------------------------+
 *
 *   BODY = MessagePack array(7):
 *   +-----------------------------------------------------------------------------+
 *   | [ sender_id:   str (1..128 bytes)       who sent it (the node id)           |
 *   |   sender_gen:  uint                     its generation (a restart bumps it) |
 *   |   sent_ns:     int                      its clock when sealing (replay)     |
 *   |   seq:         uint                     per-sender datagram counter (replay)|
 *   |   kind:        uint                     PING ACK NACK PING_REQ GOSSIP PUSHPULL APP
 *   |   msg:         array                    the kind's own fields, below        |
 *   |   updates:     array of UPDATE          piggybacked dissemination           |
 *   | ]                                                                           |
 *   +-----------------------------------------------------------------------------+
 *   msg per kind:
 *     PING      [probe_seq: uint, target_id: str, target_gen: uint]
 *     ACK       [probe_seq: uint]
 *     NACK      [probe_seq: uint]
 *     PING_REQ  [probe_seq: uint, target_id: str, target_gen: uint, target_addr: bin]
 *     GOSSIP    []
 *     PUSHPULL  [join: bool]            (TCP only: the whole member table as updates)
 *     APP       [payload: bin (<= 1150)] an application message (the share store's demand
 *                                        reports and grants), delivered with the sender's id
 *
 *   UPDATE = array(8): one member's state as the sender knows it
 *   +-----------------------------------------------------------------------------+
 *   | [ state: uint (ALIVE SUSPECT DEAD LEFT), id: str, gen: uint, incarnation:    |
 *   |   uint, addr: bin, meta_version: uint, meta: bin (<= 64), from: uint ]       |
 *   +-----------------------------------------------------------------------------+
 *   addr = bin(7): family 4, port (2 bytes, big endian), IPv4 (4)
 *        | bin(19): family 6, port (2), IPv6 (16)
 *   from = a 64-bit hash of the accuser's id (suspect/dead): it only has to tell
 *          independent confirmations apart, so the full id is not sent.
 *
 * Decoders read through (pos, end), never past end, and fail naming the field that was wrong
 * ("updates[3].meta: 80 bytes, at most 64"). A datagram is decoded completely (every update
 * validated) before any of it is applied, so a bad one changes nothing.
 */
#ifndef TT_SWIM_PROTO_H
#define TT_SWIM_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "swim.h"
#include "wire_pack.h" /* the encoder writes into a wire_pack_t: bounded, overflow sticky */

#define SWIM_WIRE_VERSION 1
#define SWIM_MODE_PLAIN 0
#define SWIM_MODE_SEALED 1
#define SWIM_NONCE_BYTES 24
#define SWIM_TAG_BYTES 16
#define SWIM_FRAME_HEAD 2 /* version, mode */
#define SWIM_SEAL_OVERHEAD (SWIM_FRAME_HEAD + SWIM_NONCE_BYTES + SWIM_TAG_BYTES)
/* An encoded update is at most this long: the builder reserves it before encoding one. */
#define SWIM_UPDATE_MAX (1 + 2 + SWIM_ID_MAX + 9 + 5 + 2 + 19 + 5 + 2 + SWIM_META_MAX + 9)

typedef enum swim_kind {
    SWIM_PING = 1,
    SWIM_ACK = 2,
    SWIM_NACK = 3,
    SWIM_PING_REQ = 4,
    SWIM_GOSSIP = 5,
    SWIM_PUSHPULL = 6,
    SWIM_APP = 7,
} swim_kind_t;

/* A decoded update. Pointers point into the decoded buffer: valid while it is. */
typedef struct swim_update {
    swim_state_t state;
    const char *id;
    size_t id_len;
    uint64_t generation;
    uint32_t incarnation;
    swim_addr_t addr;
    uint32_t meta_version;
    size_t meta_len;
    const uint8_t *meta;
    uint64_t from;
} swim_update_t;

/* A body: what the decoder fills and what the encoder's swim_enc_msg reads (the kind's own
 * fields). The updates are validated, then walked with swim_update_next. */
typedef struct swim_msg {
    const char *sender;
    size_t sender_len;
    uint64_t sender_gen;
    int64_t sent_ns;
    uint64_t seq;
    swim_kind_t kind;
    uint32_t probe_seq;
    const char *target;
    size_t target_len;
    uint64_t target_gen;
    swim_addr_t target_addr;
    bool join;
    const uint8_t *app; /* APP: the payload */
    size_t app_len;
    uint32_t n_updates;
    const uint8_t *updates; /* the first update; swim_update_next walks from here */
    const uint8_t *end;
} swim_msg_t;

/* Body header: the 5 scalar fields; the caller then writes msg and updates. */
void swim_enc_head(wire_pack_t *w, const char *sender, size_t sender_len, uint64_t gen,
                   int64_t sent_ns, uint64_t seq, swim_kind_t kind);
/* The msg array of m->kind, from m's fields for that kind. */
void swim_enc_msg(wire_pack_t *w, const swim_msg_t *m);
/* An array32 header whose count is patched later: returns its offset. */
size_t swim_enc_array_open(wire_pack_t *w);
void swim_enc_array_close(wire_pack_t *w, size_t at, uint32_t count);
void swim_enc_update(wire_pack_t *w, const swim_update_t *u);

/* Decodes and validates a whole body (every update too). 0 or SWIM_EMALFORMED with err. */
int swim_msg_decode(swim_msg_t *m, const uint8_t *body, size_t len, tt_err_t *err);
/* Decodes the update at *pos (already validated by swim_msg_decode) and advances *pos. */
int swim_update_next(const uint8_t **pos, const uint8_t *end, swim_update_t *u, tt_err_t *err);

/*
 * Seal: writes version, mode, nonce and the AEAD ciphertext of body into out (room for
 * blen + SWIM_SEAL_OVERHEAD). Returns the length written.
 */
size_t swim_seal(const uint8_t key[SWIM_KEY_BYTES], const char *label, size_t label_len,
                 const uint8_t nonce[SWIM_NONCE_BYTES], const uint8_t *body, size_t blen,
                 uint8_t *out);
/*
 * Opens a frame: with nkeys > 0 it must be sealed and open under one of the keys (each
 * tried, primary first); with none it must be plaintext. On success *body and *blen are the
 * body (in scratch, which has room for len bytes, or inside `in` for plaintext).
 * Errors: SWIM_ETRUNCATED, SWIM_EVERSION, SWIM_EMODE, SWIM_EAUTH.
 */
int swim_open(const uint8_t (*keys)[SWIM_KEY_BYTES], size_t nkeys, const char *label,
              size_t label_len, const uint8_t *in, size_t len, uint8_t *scratch,
              const uint8_t **body, size_t *blen, tt_err_t *err);

/*
 * The members file: what a node knew of the fleet when it last saved, kept in its state
 * directory so that a restart finds the fleet it left (swim_known_save / swim_known_load):
 *
 *   [ version: 1, node_id: str, cluster: str (the label; "" without one),
 *     members: array (<= SWIM_REMEMBER_MAX) of [ id: str, generation: uint, addr: bin(7|19) ] ]
 *
 * One entry per member alive or suspect at the save, self excluded. A file another node or
 * another cluster wrote is refused (a state directory handed from one to another).
 */
#define SWIM_KNOWN_VERSION 1
/* Appends the file to w: n members from get(ctx, i, &member). */
void swim_known_encode(wire_pack_t *w, const char *node, size_t node_len, const char *label,
                       size_t label_len, size_t n,
                       void (*get)(const void *ctx, size_t i, swim_known_t *m), const void *ctx);
/* Decodes and validates the whole file, then calls each(ud, member) per member (pointers into
 * bytes, for the call). 0, or SWIM_EMALFORMED naming the field (`members[3].addr`) or saying
 * whose file it is, having called nothing. */
int swim_known_decode(const uint8_t *bytes, size_t len, const char *node, size_t node_len,
                      const char *label, size_t label_len,
                      void (*each)(void *ud, const swim_known_t *m), void *ud, tt_err_t *err);

/* 64-bit FNV-1a of an id: the `from` field and the member index key. */
uint64_t swim_id_hash(const char *id, size_t len);

#endif
