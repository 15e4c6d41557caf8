/*
 * demand_wire: encoder (msgpack-c's packer into a bounded buffer) and decoder (a reader over
 * (pos, end) that names the field it stopped at). The layout is drawn in demand_wire.h.
 */
#include "demand_wire.h"

#include <msgpack.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ---- encoder ------------------------------------------------------------------------------- */

/* A fixed buffer the packer writes into; `over` is set instead of writing past cap. */
typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    bool over;
} wbuf_t;

static int wbuf_write(void *data, const char *buf, size_t len)
{
    wbuf_t *w = data;
    if (w->over || len > w->cap - w->len) {
        w->over = true;
        return -1;
    }
    memcpy(w->p + w->len, buf, len);
    w->len += len;
    return 0;
}

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
    wbuf_t w = {.p = buf, .cap = cap};
    msgpack_packer pk;
    msgpack_packer_init(&pk, &w, wbuf_write);
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
    if (w.over || w.len > INT32_MAX)
        return DEMAND_EWIRE;
    return (int)w.len;
}

/* ---- decoder ------------------------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *pos, *end;
    char *err;
    size_t err_size;
    char path[48]; /* "items[3]" while inside an item, "" at the top */
} rd_t;

static int fail(rd_t *r, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(rd_t *r, const char *field, const char *fmt, ...)
{
    if (r->err && r->err_size) {
        char what[128];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        snprintf(r->err, r->err_size, "demand payload: %s%s%s: %s", r->path, *r->path ? "." : "",
                 field, what);
    }
    return DEMAND_EWIRE;
}

/* Reads an n-byte big-endian integer. */
static int take_be(rd_t *r, size_t n, uint64_t *v, const char *field)
{
    if ((size_t)(r->end - r->pos) < n)
        return fail(r, field, "truncated");
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x = x << 8 | r->pos[i];
    r->pos += n;
    *v = x;
    return 0;
}

static int rd_array(rd_t *r, uint32_t *n, const char *field)
{
    if (r->pos >= r->end)
        return fail(r, field, "truncated");
    uint8_t b = *r->pos++;
    uint64_t v = 0;
    if ((b & 0xf0) == 0x90) {
        *n = b & 0x0f;
        return 0;
    }
    if (b == 0xdc || b == 0xdd) {
        if (take_be(r, b == 0xdc ? 2 : 4, &v, field) < 0)
            return DEMAND_EWIRE;
        *n = (uint32_t)v;
        return 0;
    }
    return fail(r, field, "not an array (byte 0x%02x)", b);
}

static int rd_uint(rd_t *r, uint64_t max, uint64_t *out, const char *field)
{
    if (r->pos >= r->end)
        return fail(r, field, "truncated");
    uint8_t b = *r->pos++;
    uint64_t v = 0;
    if (b <= 0x7f)
        v = b;
    else if (b >= 0xcc && b <= 0xcf) {
        if (take_be(r, (size_t)1 << (b - 0xcc), &v, field) < 0)
            return DEMAND_EWIRE;
    } else
        return fail(r, field, "not an unsigned integer (byte 0x%02x)", b);
    if (v > max)
        return fail(r, field, "%llu, at most %llu", (unsigned long long)v, (unsigned long long)max);
    *out = v;
    return 0;
}

static int rd_bin(rd_t *r, size_t max, const uint8_t **p, uint32_t *len, const char *field)
{
    if (r->pos >= r->end)
        return fail(r, field, "truncated");
    uint8_t b = *r->pos++;
    uint64_t n = 0;
    if (b < 0xc4 || b > 0xc6)
        return fail(r, field, "not bin (byte 0x%02x)", b);
    if (take_be(r, (size_t)1 << (b - 0xc4), &n, field) < 0)
        return DEMAND_EWIRE;
    if (n > max)
        return fail(r, field, "%llu bytes, at most %zu", (unsigned long long)n, max);
    if ((uint64_t)(r->end - r->pos) < n)
        return fail(r, field, "truncated");
    *p = r->pos;
    *len = (uint32_t)n;
    r->pos += n;
    return 0;
}

static int rd_item(rd_t *r, demand_kind_t kind, demand_item_t *it)
{
    uint32_t want = kind == DEMAND_GRANT ? 4 : 3, n;
    uint64_t v = 0;
    memset(it, 0, sizeof(*it));
    if (rd_array(r, &n, "fields") < 0)
        return DEMAND_EWIRE;
    if (n != want)
        return fail(r, "fields", "%u fields, a %s has %u", n,
                    kind == DEMAND_GRANT ? "grant" : "report", want);
    if (rd_uint(r, UINT64_MAX, &it->identity, "identity") < 0 ||
        rd_bin(r, DEMAND_KEY_MAX, &it->key, &it->key_len, "key") < 0)
        return DEMAND_EWIRE;
    if (kind == DEMAND_REPORT) {
        if (rd_uint(r, DEMAND_DEMAND_CAP, &v, "demand") < 0)
            return DEMAND_EWIRE;
        it->value = (uint32_t)v;
        return 0;
    }
    if (rd_uint(r, DEMAND_SHARE_DEN, &v, "share") < 0)
        return DEMAND_EWIRE;
    if (v == 0)
        return fail(r, "share", "0, at least 1");
    it->value = (uint32_t)v;
    if (rd_uint(r, DEMAND_WIRE_TTL_MAX_MS, &v, "ttl_ms") < 0)
        return DEMAND_EWIRE;
    if (v == 0)
        return fail(r, "ttl_ms", "0, at least 1");
    it->ttl_ms = (uint32_t)v;
    return 0;
}

int demand_wire_decode(const uint8_t *bytes, size_t len, demand_msg_t *out, char *err,
                       size_t err_size)
{
    rd_t r = {.pos = bytes, .end = bytes + len, .err = err, .err_size = err_size};
    uint32_t n;
    uint64_t v = 0;
    out->n = 0;
    if (len > DEMAND_WIRE_DATAGRAM_MAX)
        return fail(&r, "payload", "%zu bytes, at most %d", len, DEMAND_WIRE_DATAGRAM_MAX);
    if (rd_array(&r, &n, "payload") < 0)
        return DEMAND_EWIRE;
    if (n != 3)
        return fail(&r, "payload", "%u fields, expected 3", n);
    if (rd_uint(&r, UINT32_MAX, &v, "version") < 0)
        return DEMAND_EWIRE;
    if (v != DEMAND_WIRE_VERSION)
        return fail(&r, "version", "%llu, this replica speaks %d", (unsigned long long)v,
                    DEMAND_WIRE_VERSION);
    if (rd_uint(&r, UINT32_MAX, &v, "kind") < 0)
        return DEMAND_EWIRE;
    if (v != DEMAND_REPORT && v != DEMAND_GRANT)
        return fail(&r, "kind", "%llu, not report (1) or grant (2)", (unsigned long long)v);
    out->kind = (demand_kind_t)v;
    if (rd_array(&r, &n, "items") < 0)
        return DEMAND_EWIRE;
    if (n > DEMAND_WIRE_ITEMS_MAX)
        return fail(&r, "items", "%u items, at most %d", n, DEMAND_WIRE_ITEMS_MAX);
    for (uint32_t i = 0; i < n; i++) {
        snprintf(r.path, sizeof(r.path), "items[%u]", i);
        if (rd_item(&r, out->kind, &out->items[i]) < 0) {
            out->n = 0;
            return DEMAND_EWIRE;
        }
    }
    r.path[0] = '\0';
    if (r.pos != r.end) {
        out->n = 0;
        return fail(&r, "payload", "%zu bytes after the items", (size_t)(r.end - r.pos));
    }
    out->n = n;
    return 0;
}
