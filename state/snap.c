/*
 * The snapshot codec. See snap.h for the layout.
 *
 * Why this shape. A snapshot is written from a forked child (state.c) where nothing may
 * allocate, so the encoder fills a caller's buffer and hands it to a sink when full; the
 * header's counts and checksum are known only at the end, so the header is emitted as zeros and
 * returned by st_enc_finish for the caller to write at offset 0. The decoder distrusts every
 * byte: the checksum catches a torn or flipped file, and the structural walk (run once dry
 * before any callback) catches a file whose checksum was made to match.
 */
#include "snap.h"
#include "tt_hash.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char magic[8] = {'T', 'T', 'S', 'T', 'A', 'T', 'E', '\n'};

/* ---- errors ---------------------------------------------------------------------------------- */

int st_reason_index(int err)
{
    return err <= ST_EUNSAFE && err >= ST_ETOOBIG ? ST_EUNSAFE - err : -1;
}

int st_reason_err(int index)
{
    return ST_EUNSAFE - index;
}

const char *st_reason(int err)
{
    return st_reason_index(err) < 0 ? "unknown" : tt_err_name(err);
}

const char *st_strerror(int err)
{
    return tt_err_message(err);
}

/* ---- checksums --------------------------------------------------------------------------------
 * CRC-32C, slicing by 8 over tables built on first use (the polynomial reflected, 0x82f63b78).
 * The first call builds them, so a child never builds them (the parent did at start). */

static uint32_t crc_table[8][256];
static bool crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
    crc_ready = true;
}

uint32_t st_crc32c(uint32_t crc, const void *data, size_t len)
{
    if (!crc_ready)
        crc_init();
    const uint8_t *p = data;
    crc = ~crc;
    for (; len >= 8; len -= 8, p += 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                             (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (len--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

uint64_t st_fingerprint(const char *scope, size_t len)
{
    return tt_fnv1a64(TT_FNV1A64_BASIS, scope, len);
}

/* ---- little-endian fields -------------------------------------------------------------------- */

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

/* ---- encoder --------------------------------------------------------------------------------- */

/* The largest record: a counter with the longest key (a limit record is smaller). */
#define RECORD_MAX (4 + 8 + 2 + ST_KEY_MAX)

static int flush(st_enc_t *w)
{
    if (w->err || !w->len)
        return w->err;
    size_t skip = w->in_header ? ST_HEADER_SIZE : 0; /* the placeholder is not in the body */
    w->crc = st_crc32c(w->crc, w->buf + skip, w->len - skip);
    w->body_len += w->len - skip;
    w->in_header = false;
    w->err = w->sink(w->ctx, w->buf, w->len);
    w->len = 0;
    return w->err;
}

/* Room for one record, flushing first when the buffer cannot take it. */
static uint8_t *room(st_enc_t *w, size_t n)
{
    if (w->len + n > w->cap && flush(w))
        return NULL;
    return w->err ? NULL : w->buf + w->len;
}

void st_enc_init(st_enc_t *w, uint8_t *buf, size_t cap, st_sink_fn sink, void *ctx)
{
    *w = (st_enc_t){.buf = buf, .cap = cap, .sink = sink, .ctx = ctx, .in_header = true};
    memset(buf, 0, ST_HEADER_SIZE);
    w->len = ST_HEADER_SIZE;
}

int st_enc_scope(st_enc_t *w, const char *scope, size_t len)
{
    if (len > ST_SCOPE_MAX)
        len = ST_SCOPE_MAX;
    uint8_t *p = room(w, 2 + len);
    if (!p)
        return w->err;
    put_le(p, len, 2);
    memcpy(p + 2, scope, len);
    w->len += 2 + len;
    return 0;
}

int st_enc_limit(st_enc_t *w, const st_limit_t *l)
{
    size_t id_len = strnlen(l->id, ST_ID_MAX);
    uint8_t *p = room(w, 12 + id_len);
    if (!p)
        return w->err;
    put_le(p, l->identity, 8);
    p[8] = l->type;
    p[9] = l->store;
    p[10] = l->algorithm;
    p[11] = (uint8_t)id_len;
    memcpy(p + 12, l->id, id_len);
    w->len += 12 + id_len;
    w->n_limits++;
    return 0;
}

int st_enc_counter(st_enc_t *w, uint32_t limit, const char *key, size_t key_len, int64_t state)
{
    if (key_len > ST_KEY_MAX)
        return ST_EFORMAT; /* the engine holds no such key */
    uint8_t *p = room(w, RECORD_MAX);
    if (!p)
        return w->err;
    put_le(p, limit, 4);
    put_le(p + 4, (uint64_t)state, 8);
    put_le(p + 12, key_len, 2);
    memcpy(p + 14, key, key_len);
    w->len += 14 + key_len;
    w->n_counters++;
    return 0;
}

int st_enc_finish(st_enc_t *w, int64_t written_ns, uint64_t fingerprint,
                  uint8_t header[ST_HEADER_SIZE])
{
    if (flush(w))
        return w->err;
    memset(header, 0, ST_HEADER_SIZE);
    memcpy(header, magic, sizeof(magic));
    put_le(header + 8, ST_VERSION, 4);
    put_le(header + 12, ST_HEADER_SIZE, 4);
    put_le(header + 16, (uint64_t)written_ns, 8);
    put_le(header + 24, fingerprint, 8);
    put_le(header + 32, w->n_limits, 4);
    put_le(header + 40, w->n_counters, 8);
    put_le(header + 48, w->body_len, 8);
    put_le(header + 56, w->crc, 4);
    put_le(header + 60, st_crc32c(0, header, 60), 4);
    return 0;
}

/* ---- decoder --------------------------------------------------------------------------------- */

static int fail(tt_err_t *err, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(tt_err_t *err, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_err_vset(err, code, path, fmt, ap);
    va_end(ap);
    return code;
}

/* The path of one element's field, "limits[3].id", in buf (TT_ERR_PATH_MAX bytes). */
static const char *element(char *buf, const char *list, unsigned long long i, const char *field)
{
    snprintf(buf, TT_ERR_PATH_MAX, "%s[%llu]%s%s", list, i, *field ? "." : "", field);
    return buf;
}

int st_dec_header(const uint8_t *buf, size_t len, st_header_t *h, tt_err_t *err)
{
    if (len < sizeof(magic) || memcmp(buf, magic, sizeof(magic)) != 0)
        return len < sizeof(magic) && memcmp(buf, magic, len) == 0
                   ? fail(err, ST_ETRUNCATED, "header", "%zu bytes of %d", len, ST_HEADER_SIZE)
                   : fail(err, ST_EMAGIC, "header", "no snapshot magic");
    if (len < 12)
        return fail(err, ST_ETRUNCATED, "header", "%zu bytes of %d", len, ST_HEADER_SIZE);
    h->version = (uint32_t)get_le(buf + 8, 4);
    if (h->version != ST_VERSION)
        return fail(err, ST_EVERSION, "header.version", "%u, this build reads %d", h->version,
                    ST_VERSION);
    if (len < ST_HEADER_SIZE)
        return fail(err, ST_ETRUNCATED, "header", "%zu bytes of %d", len, ST_HEADER_SIZE);
    if (get_le(buf + 60, 4) != st_crc32c(0, buf, 60))
        return fail(err, ST_ECHECKSUM, "header", "checksum mismatch");
    if (get_le(buf + 12, 4) != ST_HEADER_SIZE)
        return fail(err, ST_EFORMAT, "header.size", "%u, expected %d",
                    (unsigned)get_le(buf + 12, 4), ST_HEADER_SIZE);
    if (get_le(buf + 36, 4) != 0)
        return fail(err, ST_EFORMAT, "header.reserved", "not 0");
    h->written_ns = (int64_t)get_le(buf + 16, 8);
    h->fingerprint = get_le(buf + 24, 8);
    h->n_limits = (uint32_t)get_le(buf + 32, 4);
    h->n_counters = get_le(buf + 40, 8);
    h->body_len = get_le(buf + 48, 8);
    h->body_crc = (uint32_t)get_le(buf + 56, 4);
    if (h->n_limits > ST_LIMITS_MAX)
        return fail(err, ST_EFORMAT, "header.n_limits", "%u, at most %d", h->n_limits,
                    ST_LIMITS_MAX);
    return 0;
}

/* One pass over the body; callbacks only when `v` is given (the second pass). */
static int walk(const uint8_t *pos, const uint8_t *end, const st_header_t *h, const st_visit_t *v,
                void *ctx, tt_err_t *err)
{
    char path[TT_ERR_PATH_MAX];
    if (end - pos < 2)
        return fail(err, ST_EFORMAT, "scope", "the body ends before it");
    size_t n = (size_t)get_le(pos, 2);
    if (n > ST_SCOPE_MAX || (size_t)(end - pos - 2) < n)
        return fail(err, ST_EFORMAT, "scope", "length %zu does not fit", n);
    if (v && v->scope)
        v->scope(ctx, (const char *)pos + 2, n);
    pos += 2 + n;
    for (uint32_t i = 0; i < h->n_limits; i++) {
        if (end - pos < 12)
            return fail(err, ST_EFORMAT, element(path, "limits", i, ""), "the body ends inside it");
        st_limit_t l = {
            .identity = get_le(pos, 8), .type = pos[8], .store = pos[9], .algorithm = pos[10]};
        size_t id_len = pos[11];
        if (id_len == 0 || id_len > ST_ID_MAX || (size_t)(end - pos - 12) < id_len)
            return fail(err, ST_EFORMAT, element(path, "limits", i, "id"),
                        "length %zu does not fit", id_len);
        memcpy(l.id, pos + 12, id_len);
        l.id[id_len] = '\0';
        if (memchr(l.id, '\0', id_len))
            return fail(err, ST_EFORMAT, element(path, "limits", i, "id"), "holds a NUL byte");
        if (v && v->limit)
            v->limit(ctx, i, &l);
        pos += 12 + id_len;
    }
    for (uint64_t i = 0; i < h->n_counters; i++) {
        if (end - pos < 14)
            return fail(err, ST_EFORMAT, element(path, "counters", i, ""),
                        "the body ends inside it");
        uint32_t limit = (uint32_t)get_le(pos, 4);
        int64_t state = (int64_t)get_le(pos + 4, 8);
        size_t key_len = (size_t)get_le(pos + 12, 2);
        if (limit >= h->n_limits)
            return fail(err, ST_EFORMAT, element(path, "counters", i, "limit"), "%u of %u limits",
                        limit, h->n_limits);
        if (key_len > ST_KEY_MAX || (size_t)(end - pos - 14) < key_len)
            return fail(err, ST_EFORMAT, element(path, "counters", i, "key"),
                        "length %zu does not fit", key_len);
        if (v && v->counter)
            v->counter(ctx, limit, (const char *)pos + 14, key_len, state);
        pos += 14 + key_len;
    }
    if (pos != end)
        return fail(err, ST_EFORMAT, "body", "%zu bytes after the last counter",
                    (size_t)(end - pos));
    return 0;
}

int st_decode(const uint8_t *buf, size_t len, const st_visit_t *v, void *ctx, st_header_t *h,
              tt_err_t *err)
{
    int rc = st_dec_header(buf, len, h, err);
    if (rc)
        return rc;
    if (h->body_len > len - ST_HEADER_SIZE)
        return fail(err, ST_ETRUNCATED, "body", "%zu bytes of %llu", len - ST_HEADER_SIZE,
                    (unsigned long long)h->body_len);
    if (h->body_len < len - ST_HEADER_SIZE)
        return fail(err, ST_EFORMAT, "body", "%zu bytes after its end",
                    (size_t)(len - ST_HEADER_SIZE - h->body_len));
    const uint8_t *body = buf + ST_HEADER_SIZE, *end = body + h->body_len;
    if (st_crc32c(0, body, h->body_len) != h->body_crc)
        return fail(err, ST_ECHECKSUM, "body", "checksum mismatch");
    if ((rc = walk(body, end, h, NULL, NULL, err)))
        return rc;
    return v ? walk(body, end, h, v, ctx, err) : 0;
}
