/*
 * demand_wire: encoder (msgpack-c's packer into a bounded buffer, wire/wire_pack.h) and decoder
 * (the wire's reader, wire/wire.h, over (pos, end), naming the field it stopped at). The layout is
 * drawn in demand_wire.h.
 */
#include "demand_wire.h"

#include <msgpack.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "wire.h"
#include "wire_pack.h"

/* ---- encoder ------------------------------------------------------------------------------- */

size_t demand_wire_item_max(demand_kind_t kind, size_t key_len)
{
    /* array header 1, identity 9, bin header up to 3 + key, then one or two uint32 (5 each) */
    return 1 + 9 + 3 + key_len + (kind == DEMAND_GRANT ? 10 : 5);
}

static bool item_valid(demand_kind_t kind, const demand_item_t *it)
{
    if (it->key_len > DEMAND_KEY_MAX)
        return false;
    if (kind == DEMAND_REPORT)
        return it->value <= DEMAND_DEMAND_CAP;
    return it->value >= 1 && it->value <= DEMAND_SHARE_DEN && it->ttl_ms >= 1 &&
           it->ttl_ms <= DEMAND_WIRE_TTL_MAX_MS;
}

int demand_wire_encode(demand_kind_t kind, const demand_item_t *items, uint32_t n, uint8_t *buf,
                       size_t cap)
{
    if ((kind != DEMAND_REPORT && kind != DEMAND_GRANT) || n > DEMAND_WIRE_ITEMS_MAX)
        return DEMAND_EWIRE;
    wire_pack_t w = {.p = buf, .cap = cap};
    msgpack_packer pk;
    wire_packer_init(&pk, &w);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_uint32(&pk, DEMAND_WIRE_VERSION);
    msgpack_pack_uint32(&pk, kind);
    msgpack_pack_array(&pk, n);
    for (uint32_t i = 0; i < n; i++) {
        const demand_item_t *it = &items[i];
        if (!item_valid(kind, it))
            return DEMAND_EWIRE;
        msgpack_pack_array(&pk, kind == DEMAND_GRANT ? 4 : 3);
        msgpack_pack_uint64(&pk, it->identity);
        msgpack_pack_bin(&pk, it->key_len);
        msgpack_pack_bin_body(&pk, it->key, it->key_len);
        msgpack_pack_uint32(&pk, it->value);
        if (kind == DEMAND_GRANT)
            msgpack_pack_uint32(&pk, it->ttl_ms);
    }
    if (w.overflow || w.len > INT32_MAX)
        return DEMAND_EWIRE;
    return (int)w.len;
}

/* ---- decoder: the wire's reader, naming the field ------------------------------------------ */

/* Fails with a message of the decoder's own (a range the reader does not know). */
#define FAIL(r, field, ...) (wire_fail(r, TT_ERR_VALUE, field, __VA_ARGS__), DEMAND_EWIRE)

static int rd_item(wire_reader_t *r, demand_kind_t kind, demand_item_t *it)
{
    uint32_t want = kind == DEMAND_GRANT ? 4 : 3, n;
    uint64_t v = 0;
    wire_str_t key;
    memset(it, 0, sizeof(*it));
    if (wire_want_array(r, &n, "fields") < 0)
        return DEMAND_EWIRE;
    if (n != want)
        return FAIL(r, "fields", "%u fields, a %s has %u", n,
                    kind == DEMAND_GRANT ? "grant" : "report", want);
    if (wire_want_uint(r, UINT64_MAX, &it->identity, "identity") < 0 ||
        wire_want_bin(r, 0, DEMAND_KEY_MAX, &key, "key") < 0)
        return DEMAND_EWIRE;
    it->key = (const uint8_t *)key.ptr;
    it->key_len = key.len;
    if (kind == DEMAND_REPORT) {
        if (wire_want_uint(r, DEMAND_DEMAND_CAP, &v, "demand") < 0)
            return DEMAND_EWIRE;
        it->value = (uint32_t)v;
        return 0;
    }
    if (wire_want_uint(r, DEMAND_SHARE_DEN, &v, "share") < 0)
        return DEMAND_EWIRE;
    if (v == 0)
        return FAIL(r, "share", "0, at least 1");
    it->value = (uint32_t)v;
    if (wire_want_uint(r, DEMAND_WIRE_TTL_MAX_MS, &v, "ttl_ms") < 0)
        return DEMAND_EWIRE;
    if (v == 0)
        return FAIL(r, "ttl_ms", "0, at least 1");
    it->ttl_ms = (uint32_t)v;
    return 0;
}

static int rd_payload(wire_reader_t *r, size_t len, demand_msg_t *out)
{
    uint32_t n;
    uint64_t v = 0;
    if (len > DEMAND_WIRE_DATAGRAM_MAX)
        return FAIL(r, "payload", "%zu bytes, at most %d", len, DEMAND_WIRE_DATAGRAM_MAX);
    if (wire_want_array(r, &n, "payload") < 0)
        return DEMAND_EWIRE;
    if (n != 3)
        return FAIL(r, "payload", "%u fields, expected 3", n);
    if (wire_want_uint(r, UINT32_MAX, &v, "version") < 0)
        return DEMAND_EWIRE;
    if (v != DEMAND_WIRE_VERSION)
        return FAIL(r, "version", "%llu, this replica speaks %d", (unsigned long long)v,
                    DEMAND_WIRE_VERSION);
    if (wire_want_uint(r, UINT32_MAX, &v, "kind") < 0)
        return DEMAND_EWIRE;
    if (v != DEMAND_REPORT && v != DEMAND_GRANT)
        return FAIL(r, "kind", "%llu, not report (1) or grant (2)", (unsigned long long)v);
    out->kind = (demand_kind_t)v;
    if (wire_want_array(r, &n, "items") < 0)
        return DEMAND_EWIRE;
    if (n > DEMAND_WIRE_ITEMS_MAX)
        return FAIL(r, "items", "%u items, at most %d", n, DEMAND_WIRE_ITEMS_MAX);
    char path[24];
    r->path = path;
    for (uint32_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "items[%u]", i);
        if (rd_item(r, out->kind, &out->items[i]) < 0)
            return DEMAND_EWIRE;
    }
    r->path = NULL;
    if (r->pos != r->end)
        return FAIL(r, "payload", "%zu bytes after the items", (size_t)(r->end - r->pos));
    out->n = n;
    return 0;
}

int demand_wire_decode(const uint8_t *bytes, size_t len, demand_msg_t *out, tt_err_t *err)
{
    wire_reader_t r = {.pos = bytes, .end = bytes + len, .err = err};
    out->n = 0;
    if (rd_payload(&r, len, out) == 0)
        return 0;
    /* the reader named the field with its own code (wrong_type, ...); the payload's is one */
    if (err)
        err->code = DEMAND_EWIRE;
    return DEMAND_EWIRE;
}
