/* The gossip wire codec and seal; the layout is drawn in swim_proto.h. */
#include "swim_proto.h"

#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "tt_hash.h"
#include "wire.h"
#include "wire_pack.h"

/* ---- encoding: msgpack-c's packer writing into a bounded buffer (wire/wire_pack.h) ---- */

static void packer(msgpack_packer *pk, wire_pack_t *w)
{
    wire_packer_init(pk, w);
}

static void pack_str(msgpack_packer *pk, const char *s, size_t len)
{
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, s, len);
}

static void pack_bin(msgpack_packer *pk, const void *b, size_t len)
{
    msgpack_pack_bin(pk, len);
    msgpack_pack_bin_body(pk, b, len);
}

static void pack_addr(msgpack_packer *pk, const swim_addr_t *a)
{
    uint8_t b[19];
    size_t iplen = a->family == 6 ? 16 : 4;
    b[0] = a->family == 6 ? 6 : 4;
    b[1] = (uint8_t)(a->port >> 8);
    b[2] = (uint8_t)a->port;
    memcpy(b + 3, a->ip, iplen);
    pack_bin(pk, b, 3 + iplen);
}

void swim_enc_head(wire_pack_t *w, const char *sender, size_t sender_len, uint64_t gen,
                   int64_t sent_ns, uint64_t seq, swim_kind_t kind)
{
    msgpack_packer pk;
    packer(&pk, w);
    msgpack_pack_array(&pk, 7);
    pack_str(&pk, sender, sender_len);
    msgpack_pack_uint64(&pk, gen);
    msgpack_pack_int64(&pk, sent_ns);
    msgpack_pack_uint64(&pk, seq);
    msgpack_pack_uint8(&pk, (uint8_t)kind);
}

void swim_enc_msg(wire_pack_t *w, const swim_msg_t *m)
{
    msgpack_packer pk;
    packer(&pk, w);
    switch (m->kind) {
    case SWIM_PING:
    case SWIM_PING_REQ:
        msgpack_pack_array(&pk, m->kind == SWIM_PING ? 3 : 4);
        msgpack_pack_uint32(&pk, m->probe_seq);
        pack_str(&pk, m->target, m->target_len);
        msgpack_pack_uint64(&pk, m->target_gen);
        if (m->kind == SWIM_PING_REQ)
            pack_addr(&pk, &m->target_addr);
        break;
    case SWIM_ACK:
    case SWIM_NACK:
        msgpack_pack_array(&pk, 1);
        msgpack_pack_uint32(&pk, m->probe_seq);
        break;
    case SWIM_PUSHPULL:
        msgpack_pack_array(&pk, 1);
        if (m->join)
            msgpack_pack_true(&pk);
        else
            msgpack_pack_false(&pk);
        break;
    case SWIM_APP:
        msgpack_pack_array(&pk, 1);
        pack_bin(&pk, m->app, m->app_len);
        break;
    default:
        msgpack_pack_array(&pk, 0);
    }
}

size_t swim_enc_array_open(wire_pack_t *w)
{
    size_t at = w->len;
    static const char hdr[5] = {(char)0xdd, 0, 0, 0, 0};
    wire_pack_write(w, hdr, sizeof hdr);
    return at;
}

void swim_enc_array_close(wire_pack_t *w, size_t at, uint32_t count)
{
    if (w->overflow)
        return;
    w->p[at + 1] = (uint8_t)(count >> 24);
    w->p[at + 2] = (uint8_t)(count >> 16);
    w->p[at + 3] = (uint8_t)(count >> 8);
    w->p[at + 4] = (uint8_t)count;
}

void swim_enc_update(wire_pack_t *w, const swim_update_t *u)
{
    msgpack_packer pk;
    packer(&pk, w);
    msgpack_pack_array(&pk, 8);
    msgpack_pack_uint8(&pk, (uint8_t)u->state);
    pack_str(&pk, u->id, u->id_len);
    msgpack_pack_uint64(&pk, u->generation);
    msgpack_pack_uint32(&pk, u->incarnation);
    pack_addr(&pk, &u->addr);
    msgpack_pack_uint32(&pk, u->meta_version);
    pack_bin(&pk, u->meta, u->meta_len);
    msgpack_pack_uint64(&pk, u->from);
}

/* ---- decoding: the wire's reader (wire/wire.h), naming the field ---- */

/* Fails with a message of the decoder's own (a rule the reader does not know). */
#define FAIL(r, field, ...) (wire_fail(r, TT_ERR_VALUE, field, __VA_ARGS__), SWIM_EMALFORMED)

static int rd_uint(wire_reader_t *r, uint64_t max, uint64_t *v, const char *field)
{
    return wire_want_uint(r, max, v, field) < 0 ? SWIM_EMALFORMED : 0;
}

static int rd_u32(wire_reader_t *r, uint32_t *v, const char *field)
{
    uint64_t x = 0;
    if (rd_uint(r, UINT32_MAX, &x, field))
        return SWIM_EMALFORMED;
    *v = (uint32_t)x;
    return 0;
}

static int rd_bin(wire_reader_t *r, size_t min, size_t max, const uint8_t **p, size_t *len,
                  const char *field)
{
    wire_str_t s;
    if (wire_want_bin(r, min, max, &s, field) < 0)
        return SWIM_EMALFORMED;
    *p = (const uint8_t *)s.ptr;
    *len = s.len;
    return 0;
}

static int rd_id(wire_reader_t *r, const char **id, size_t *len, const char *field)
{
    wire_str_t s;
    if (wire_want_str(r, 1, SWIM_ID_MAX, &s, field) < 0)
        return SWIM_EMALFORMED;
    if (memchr(s.ptr, 0, s.len))
        return FAIL(r, field, "contains a NUL byte");
    *id = s.ptr;
    *len = s.len;
    return 0;
}

static int rd_addr(wire_reader_t *r, swim_addr_t *a, const char *field)
{
    const uint8_t *p = NULL;
    size_t n = 0;
    if (rd_bin(r, 7, 19, &p, &n, field))
        return SWIM_EMALFORMED;
    if (!((p[0] == 4 && n == 7) || (p[0] == 6 && n == 19)))
        return FAIL(r, field, "family %u with %zu bytes", p[0], n);
    memset(a, 0, sizeof *a);
    a->family = p[0];
    a->port = (uint16_t)(p[1] << 8 | p[2]);
    memcpy(a->ip, p + 3, n - 3);
    return 0;
}

/* An array of exactly `want` elements. */
static int rd_tuple(wire_reader_t *r, uint32_t want, const char *field)
{
    uint32_t n = 0;
    if (wire_want_array(r, &n, field) < 0)
        return SWIM_EMALFORMED;
    if (n != want)
        return FAIL(r, field, "%u elements, expected %u", n, want);
    return 0;
}

/* One update; r->path names it (`updates[3]`) while the body is validated. */
static int rd_update(wire_reader_t *r, swim_update_t *u)
{
    uint64_t v = 0;
    if (rd_tuple(r, 8, "") || rd_uint(r, SWIM_LEFT, &v, "state"))
        return SWIM_EMALFORMED;
    u->state = (swim_state_t)v;
    if (rd_id(r, &u->id, &u->id_len, "id") || rd_uint(r, UINT64_MAX, &u->generation, "gen") ||
        rd_u32(r, &u->incarnation, "incarnation") || rd_addr(r, &u->addr, "addr") ||
        rd_u32(r, &u->meta_version, "meta_version") ||
        rd_bin(r, 0, SWIM_META_MAX, &u->meta, &u->meta_len, "meta") ||
        rd_uint(r, UINT64_MAX, &u->from, "from"))
        return SWIM_EMALFORMED;
    return 0;
}

/* The reader describes a failure with its own code (TT_ERR_VALUE, ...): the caller's is ours. */
static int failed(tt_err_t *err)
{
    if (err)
        err->code = SWIM_EMALFORMED;
    return SWIM_EMALFORMED;
}

int swim_update_next(const uint8_t **pos, const uint8_t *end, swim_update_t *u, tt_err_t *err)
{
    wire_reader_t r = {.pos = *pos, .end = end, .err = err};
    if (rd_update(&r, u))
        return failed(err);
    *pos = r.pos;
    return 0;
}

/* The kind's own fields: the msg array. */
static int rd_kind_msg(wire_reader_t *r, swim_msg_t *m)
{
    switch (m->kind) {
    case SWIM_PING:
    case SWIM_PING_REQ:
        if (rd_tuple(r, m->kind == SWIM_PING ? 3 : 4, "msg") ||
            rd_u32(r, &m->probe_seq, "msg.probe_seq") ||
            rd_id(r, &m->target, &m->target_len, "msg.target_id") ||
            rd_uint(r, UINT64_MAX, &m->target_gen, "msg.target_gen"))
            return SWIM_EMALFORMED;
        if (m->kind == SWIM_PING_REQ && rd_addr(r, &m->target_addr, "msg.target_addr"))
            return SWIM_EMALFORMED;
        return 0;
    case SWIM_ACK:
    case SWIM_NACK:
        return rd_tuple(r, 1, "msg") ? SWIM_EMALFORMED : rd_u32(r, &m->probe_seq, "msg.probe_seq");
    case SWIM_GOSSIP:
        return rd_tuple(r, 0, "msg");
    case SWIM_PUSHPULL:
        if (rd_tuple(r, 1, "msg") || wire_want_bool(r, &m->join, "msg.join") < 0)
            return SWIM_EMALFORMED;
        return 0;
    case SWIM_APP:
        if (rd_tuple(r, 1, "msg"))
            return SWIM_EMALFORMED;
        return rd_bin(r, 0, SWIM_APP_MAX, &m->app, &m->app_len, "msg.payload");
    }
    return FAIL(r, "kind", "%u is not a message kind", (unsigned)m->kind);
}

static int rd_msg(wire_reader_t *r, swim_msg_t *m)
{
    uint64_t v = 0;
    uint32_t n = 0;
    if (rd_tuple(r, 7, "body") || rd_id(r, &m->sender, &m->sender_len, "sender_id") ||
        rd_uint(r, UINT64_MAX, &m->sender_gen, "sender_gen") ||
        wire_want_int(r, &m->sent_ns, "sent_ns") < 0 || rd_uint(r, UINT64_MAX, &m->seq, "seq") ||
        rd_uint(r, SWIM_APP, &v, "kind"))
        return SWIM_EMALFORMED;
    m->kind = (swim_kind_t)v;
    if (rd_kind_msg(r, m))
        return SWIM_EMALFORMED;
    if (wire_want_array(r, &n, "updates") < 0)
        return SWIM_EMALFORMED;
    /* every update takes at least 10 bytes: a cheap bound before walking them */
    if (n > (size_t)(r->end - r->pos) / 10)
        return FAIL(r, "updates", "%u elements cannot fit in %zu bytes", n,
                    (size_t)(r->end - r->pos));
    m->n_updates = n;
    m->updates = r->pos;
    for (uint32_t i = 0; i < n; i++) {
        swim_update_t u;
        const uint8_t *at = r->pos;
        if (rd_update(r, &u)) {
            /* read again to name it (`updates[3].meta`): naming every update as it was read
             * cost 4% of the simulator's CPU */
            char path[24];
            snprintf(path, sizeof path, "updates[%u]", i);
            r->pos = at;
            r->path = path;
            rd_update(r, &u);
            r->path = NULL;
            return SWIM_EMALFORMED;
        }
    }
    if (r->pos != r->end)
        return FAIL(r, "body", "%zu trailing bytes", (size_t)(r->end - r->pos));
    m->end = r->end;
    return 0;
}

int swim_msg_decode(swim_msg_t *m, const uint8_t *body, size_t len, tt_err_t *err)
{
    wire_reader_t r = {.pos = body, .end = body + len, .err = err};
    memset(m, 0, sizeof *m);
    return rd_msg(&r, m) ? failed(err) : 0;
}

/* ---- the members file ---- */

void swim_known_encode(wire_pack_t *w, const char *node, size_t node_len, const char *label,
                       size_t label_len, size_t n,
                       void (*get)(const void *ctx, size_t i, swim_known_t *m), const void *ctx)
{
    msgpack_packer pk;
    packer(&pk, w);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_uint8(&pk, SWIM_KNOWN_VERSION);
    pack_str(&pk, node, node_len);
    pack_str(&pk, label, label_len);
    msgpack_pack_array(&pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        swim_known_t m;
        get(ctx, i, &m);
        msgpack_pack_array(&pk, 3);
        pack_str(&pk, m.id, m.id_len);
        msgpack_pack_uint64(&pk, m.generation);
        pack_addr(&pk, &m.addr);
    }
}

/* One pass over the file: checks it whole when each is NULL, hands the members over when not. */
static int known_walk(wire_reader_t *r, const char *node, size_t node_len, const char *label,
                      size_t label_len, void (*each)(void *ud, const swim_known_t *m), void *ud)
{
    uint64_t version = 0;
    wire_str_t id, lab;
    uint32_t n = 0;
    if (rd_tuple(r, 4, "") || rd_uint(r, UINT64_MAX, &version, "version"))
        return SWIM_EMALFORMED;
    if (version != SWIM_KNOWN_VERSION)
        return FAIL(r, "version", "%llu, this daemon reads %d", (unsigned long long)version,
                    SWIM_KNOWN_VERSION);
    if (wire_want_str(r, 1, SWIM_ID_MAX, &id, "node_id") < 0 ||
        wire_want_str(r, 0, SWIM_LABEL_MAX, &lab, "cluster") < 0)
        return SWIM_EMALFORMED;
    if (id.len != node_len || memcmp(id.ptr, node, node_len) != 0)
        return FAIL(r, "node_id", "written by \"%.*s\", this node is \"%.*s\"", (int)id.len, id.ptr,
                    (int)node_len, node);
    if (lab.len != label_len || memcmp(lab.ptr, label, label_len) != 0)
        return FAIL(r, "cluster", "written in cluster \"%.*s\", this one is \"%.*s\"", (int)lab.len,
                    lab.ptr, (int)label_len, label);
    if (wire_want_array(r, &n, "members") < 0)
        return SWIM_EMALFORMED;
    if (n > SWIM_REMEMBER_MAX)
        return FAIL(r, "members", "%u, at most %d", n, SWIM_REMEMBER_MAX);
    for (uint32_t i = 0; i < n; i++) {
        char path[24];
        snprintf(path, sizeof path, "members[%u]", i);
        r->path = path;
        swim_known_t m;
        if (rd_tuple(r, 3, "") || rd_id(r, &m.id, &m.id_len, "id") ||
            rd_uint(r, UINT64_MAX, &m.generation, "generation") || rd_addr(r, &m.addr, "addr"))
            return SWIM_EMALFORMED;
        r->path = NULL;
        if (each)
            each(ud, &m);
    }
    if (r->pos != r->end)
        return FAIL(r, "", "%zu trailing bytes", (size_t)(r->end - r->pos));
    return 0;
}

int swim_known_decode(const uint8_t *bytes, size_t len, const char *node, size_t node_len,
                      const char *label, size_t label_len,
                      void (*each)(void *ud, const swim_known_t *m), void *ud, tt_err_t *err)
{
    wire_reader_t r = {.pos = bytes, .end = bytes + len, .err = err};
    if (known_walk(&r, node, node_len, label, label_len, NULL, NULL))
        return failed(err);
    r = (wire_reader_t){.pos = bytes, .end = bytes + len};
    return known_walk(&r, node, node_len, label, label_len, each, ud);
}

/* ---- the seal ---- */

static void make_ad(uint8_t *ad, uint8_t mode, const char *label, size_t label_len)
{
    ad[0] = SWIM_WIRE_VERSION;
    ad[1] = mode;
    memcpy(ad + 2, label, label_len);
}

size_t swim_seal(const uint8_t key[SWIM_KEY_BYTES], const char *label, size_t label_len,
                 const uint8_t nonce[SWIM_NONCE_BYTES], const uint8_t *body, size_t blen,
                 uint8_t *out)
{
    uint8_t ad[2 + SWIM_LABEL_MAX];
    make_ad(ad, SWIM_MODE_SEALED, label, label_len);
    out[0] = SWIM_WIRE_VERSION;
    out[1] = SWIM_MODE_SEALED;
    memcpy(out + SWIM_FRAME_HEAD, nonce, SWIM_NONCE_BYTES);
    unsigned long long clen = 0;
    crypto_aead_xchacha20poly1305_ietf_encrypt(out + SWIM_FRAME_HEAD + SWIM_NONCE_BYTES, &clen,
                                               body, blen, ad, 2 + label_len, NULL, nonce, key);
    return SWIM_FRAME_HEAD + SWIM_NONCE_BYTES + (size_t)clen;
}

int swim_open(const uint8_t (*keys)[SWIM_KEY_BYTES], size_t nkeys, const char *label,
              size_t label_len, const uint8_t *in, size_t len, uint8_t *scratch,
              const uint8_t **body, size_t *blen, tt_err_t *err)
{
    if (len < SWIM_FRAME_HEAD) {
        return tt_err_set(err, SWIM_ETRUNCATED, "frame", "%zu bytes, shorter than its header", len);
    }
    if (in[0] != SWIM_WIRE_VERSION) {
        return tt_err_set(err, SWIM_EVERSION, "version", "%u, expected %u", in[0],
                          SWIM_WIRE_VERSION);
    }
    uint8_t want = nkeys ? SWIM_MODE_SEALED : SWIM_MODE_PLAIN;
    if (in[1] != want) {
        return tt_err_set(err, SWIM_EMODE, "mode", "%u, expected %u (%s)", in[1], want,
                          nkeys ? "sealed: a keyring is configured" : "plaintext: no keyring");
    }
    if (!nkeys) {
        *body = in + SWIM_FRAME_HEAD;
        *blen = len - SWIM_FRAME_HEAD;
        return 0;
    }
    if (len < SWIM_SEAL_OVERHEAD) {
        return tt_err_set(err, SWIM_ETRUNCATED, "frame", "%zu bytes, shorter than nonce and tag",
                          len);
    }
    uint8_t ad[2 + SWIM_LABEL_MAX];
    make_ad(ad, SWIM_MODE_SEALED, label, label_len);
    const uint8_t *nonce = in + SWIM_FRAME_HEAD;
    const uint8_t *c = nonce + SWIM_NONCE_BYTES;
    size_t clen = len - SWIM_FRAME_HEAD - SWIM_NONCE_BYTES;
    for (size_t k = 0; k < nkeys; k++) {
        unsigned long long mlen;
        if (crypto_aead_xchacha20poly1305_ietf_decrypt(scratch, &mlen, NULL, c, clen, ad,
                                                       2 + label_len, nonce, keys[k]) == 0) {
            *body = scratch;
            *blen = (size_t)mlen;
            return 0;
        }
    }
    return tt_err_set(err, SWIM_EAUTH, "seal",
                      "opens under none of %zu keys (forged, another key or another label)", nkeys);
}

uint64_t swim_id_hash(const char *id, size_t len)
{
    return tt_fnv1a64(TT_FNV1A64_BASIS, id, len);
}

int swim_keyring_parse(const char *text, size_t len, uint8_t (*keys)[SWIM_KEY_BYTES], size_t max,
                       size_t *n, tt_err_t *err)
{
    *n = 0;
    size_t line = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line++;
        const char *a = p, *b = eol;
        p = eol + (eol < end);
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
            b--;
        if (a == b || *a == '#')
            continue;
        char path[32];
        snprintf(path, sizeof path, "line %zu", line);
        if (*n == max)
            return tt_err_set(err, SWIM_EKEYRING, path, "more than %zu keys", max);
        size_t bin_len = 0;
        const char *stop = NULL;
        if (sodium_base642bin(keys[*n], SWIM_KEY_BYTES, a, (size_t)(b - a), NULL, &bin_len, &stop,
                              sodium_base64_VARIANT_ORIGINAL) != 0 ||
            stop != b || bin_len != SWIM_KEY_BYTES) {
            return tt_err_set(
                err, SWIM_EKEYRING, path,
                "not the base64 of a %d-byte key (try: head -c32 /dev/urandom | base64)",
                SWIM_KEY_BYTES);
        }
        (*n)++;
    }
    return 0;
}
