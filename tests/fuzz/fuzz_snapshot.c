/*
 * libFuzzer target for the snapshot reader (state/snap.h). Each input is read twice: as it is,
 * and with both checksums made to match (the fuzzer could hardly ever forge a CRC, so this is
 * what lets it reach the field checks behind them). Properties beyond "no crash, no leak, no
 * UB": a failed decode has called no callback; a snapshot that decodes re-encodes, through the
 * encoder, to exactly the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

/* The re-encoding goes to `out` through a small buffer, so the encoder flushes often. */
static uint8_t out[1 << 17], small[ST_HEADER_SIZE + 512], copy[1 << 17];
static size_t out_len;
static st_enc_t enc;
static int calls;

static int sink(void *ctx, const uint8_t *bytes, size_t len)
{
    (void)ctx;
    if (out_len + len > sizeof(out))
        return ST_EIO;
    memcpy(out + out_len, bytes, len);
    out_len += len;
    return 0;
}

static void on_scope(void *ctx, const char *s, size_t len)
{
    calls++;
    check(st_enc_scope(&enc, s, len) == 0);
}

static void on_limit(void *ctx, uint32_t i, const st_limit_t *l)
{
    calls++;
    check(st_enc_limit(&enc, l) == 0);
}

static void on_counter(void *ctx, uint32_t limit, const char *key, size_t len, int64_t state)
{
    calls++;
    check(st_enc_counter(&enc, limit, key, len, state) == 0);
}

static const st_visit_t visit = {on_scope, on_limit, on_counter};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void one(const uint8_t *data, size_t size)
{
    st_header_t h;
    tt_err_t err;
    out_len = 0;
    calls = 0;
    st_enc_init(&enc, small, sizeof(small), sink, NULL);
    int rc = st_decode(data, size, &visit, NULL, &h, &err);
    if (rc != 0) {
        check(rc < 0 && calls == 0 && st_reason_index(rc) >= 0 && err.code == rc);
        check(err.message[0] && strnlen(err.path, sizeof(err.path)) < sizeof(err.path));
        return;
    }
    uint8_t header[ST_HEADER_SIZE];
    check(st_enc_finish(&enc, h.written_ns, h.fingerprint, header) == 0);
    memcpy(out, header, sizeof(header));
    check(out_len == size && memcmp(out, data, size) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    if (size < ST_HEADER_SIZE || size > sizeof(copy))
        return 0;
    memcpy(copy, data, size);
    put_u32(copy + 48, (uint32_t)(size - ST_HEADER_SIZE));
    put_u32(copy + 52, 0);
    put_u32(copy + 56, st_crc32c(0, copy + ST_HEADER_SIZE, size - ST_HEADER_SIZE));
    put_u32(copy + 60, st_crc32c(0, copy, 60));
    one(copy, size);
    return 0;
}
