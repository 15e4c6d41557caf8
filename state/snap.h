/*
 * The snapshot format (prefix st_): a pure encoder and a checked decoder. No I/O, no clock, no
 * allocation: the encoder hands full buffers to a sink the caller gives, the decoder reads one
 * buffer through (pos, end). The shell (state.h) does the files.
 *
 * Layout, little-endian throughout:
 *
 *   header, ST_HEADER_SIZE bytes
 *     0  magic        "TTSTATE\n"
 *     8  version      u32  (ST_VERSION)
 *    12  header size  u32  (64)
 *    16  written_ns   i64  wall clock when the snapshot was taken (SPEC §2)
 *    24  fingerprint  u64  FNV-1a of the scope string: whose counters these are
 *    32  n_limits     u32
 *    36  reserved     u32  (0)
 *    40  n_counters   u64
 *    48  body_len     u64  bytes after the header
 *    56  body_crc     u32  CRC-32C of the body
 *    60  header_crc   u32  CRC-32C of bytes 0..59
 *   body
 *     scope           u16 length + bytes (node id and cluster label; display only)
 *     n_limits x      identity u64, type u8, store u8, algorithm u8, id length u8, id bytes
 *     n_counters x    limit u32 (index into the limits above), state i64,
 *                     key length u16, key bytes
 *
 * A decoder checks the header, then the checksum, then walks the whole body once without
 * reporting anything: only a snapshot that is whole in every field reaches the caller's
 * callbacks, so a bad file restores nothing at all.
 */
#ifndef TT_STATE_SNAP_H
#define TT_STATE_SNAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tt_err.h"

#define ST_VERSION 1
#define ST_HEADER_SIZE 64
#define ST_SCOPE_MAX 300   /* bytes of the scope string */
#define ST_ID_MAX 64       /* bytes of a limit id (CFG_ID_MAX) */
#define ST_KEY_MAX 256     /* bytes of a counter key (GOV_ID_MAX) */
#define ST_LIMITS_MAX 1024 /* limits in one snapshot */

/* Why a snapshot was not restored: rows of the one error table (common/tt_err.h), which gives
 * each a name for metrics and logs and a sentence. */
enum {
    ST_EUNSAFE = TT_ERR_ST_UNSAFE, /* the first: st_reason_index counts from it */
    ST_EMISSING = TT_ERR_ST_MISSING,
    ST_ETRUNCATED = TT_ERR_ST_TRUNCATED,
    ST_EMAGIC = TT_ERR_ST_MAGIC,
    ST_EVERSION = TT_ERR_ST_VERSION,
    ST_ECHECKSUM = TT_ERR_ST_CHECKSUM,
    ST_EFORMAT = TT_ERR_ST_FORMAT,
    ST_EFOREIGN = TT_ERR_ST_FOREIGN,
    ST_EIO = TT_ERR_ST_IO,
    ST_ELOCKED = TT_ERR_ST_LOCKED,
    ST_ETOOBIG = TT_ERR_ST_TOOBIG,
};

#define ST_REASONS 11 /* the ST_E* codes, ST_EUNSAFE down to ST_ETOOBIG */

/* "corrupt", "foreign", ... for an ST_E* code; "unknown" otherwise. */
const char *st_reason(int err);
/* The sentence for an ST_E* code. */
const char *st_strerror(int err);
/* 0 .. ST_REASONS-1 for an ST_E* code (metrics arrays), -1 otherwise; st_reason_err is the
 * code of an index. */
int st_reason_index(int err);
int st_reason_err(int index);

/* CRC-32C (Castagnoli), continued from `crc` (0 to start). */
uint32_t st_crc32c(uint32_t crc, const void *data, size_t len);

/* FNV-1a 64 of the scope string: the header's fingerprint. */
uint64_t st_fingerprint(const char *scope, size_t len);

typedef struct st_header {
    uint32_t version;
    int64_t written_ns;
    uint64_t fingerprint;
    uint32_t n_limits;
    uint64_t n_counters;
    uint64_t body_len;
    uint32_t body_crc;
} st_header_t;

/* One limit of the snapshot: its counter identity and what names it for people. */
typedef struct st_limit {
    uint64_t identity;
    uint8_t type, store, algorithm; /* cfg_type_t, cfg_store_t, ra_algorithm_t */
    char id[ST_ID_MAX + 1];
} st_limit_t;

/* ---- encoder --------------------------------------------------------------------------------- */

/* Takes `len` bytes the encoder has filled; returns 0, or a negative code that stops it. */
typedef int (*st_sink_fn)(void *ctx, const uint8_t *bytes, size_t len);

/*
 * An encoder over a caller's buffer (at least ST_HEADER_SIZE + 512 bytes). The first bytes it
 * emits are ST_HEADER_SIZE zeros standing for the header, which is known only at the end:
 * st_enc_finish writes it into `header`, and the caller puts it at offset 0. Nothing allocates,
 * so an encoder may run in a forked child.
 */
typedef struct st_enc {
    uint8_t *buf;
    size_t cap, len;
    st_sink_fn sink;
    void *ctx;
    int err;        /* the first error of the sink; every later call does nothing */
    uint32_t crc;   /* of the body so far (flushed bytes) */
    bool in_header; /* the header placeholder is still in buf */
    uint32_t n_limits;
    uint64_t n_counters, body_len;
} st_enc_t;

void st_enc_init(st_enc_t *w, uint8_t *buf, size_t cap, st_sink_fn sink, void *ctx);
/* The scope first, then every limit, then the counters. Each returns 0 or the sink's error. */
int st_enc_scope(st_enc_t *w, const char *scope, size_t len);
int st_enc_limit(st_enc_t *w, const st_limit_t *l);
int st_enc_counter(st_enc_t *w, uint32_t limit, const char *key, size_t key_len, int64_t state);
/* Flushes what is left and writes the final header. */
int st_enc_finish(st_enc_t *w, int64_t written_ns, uint64_t fingerprint,
                  uint8_t header[ST_HEADER_SIZE]);

/* ---- decoder --------------------------------------------------------------------------------- */

/* Reads and checks the header alone (magic, version, size, header checksum): 0, or a negative
 * ST_E* code described in *err as st_decode does. */
int st_dec_header(const uint8_t *buf, size_t len, st_header_t *h, tt_err_t *err);

typedef struct st_visit {
    /* The scope string (not NUL-terminated). Optional. */
    void (*scope)(void *ctx, const char *scope, size_t len);
    /* One limit, in order (index 0, 1, ...). Optional. */
    void (*limit)(void *ctx, uint32_t index, const st_limit_t *l);
    /* One counter. Optional. */
    void (*counter)(void *ctx, uint32_t limit, const char *key, size_t key_len, int64_t state);
} st_visit_t;

/*
 * Checks a whole snapshot in memory: header, body checksum, every field. Only when all of it is
 * whole does it call `v` for the scope, each limit and each counter, in file order. Returns 0,
 * or a negative ST_E* code described in *err (the path of the field: header.version,
 * limits[3].id, counters[17].key, body; NULL: not described), and then no callback has run.
 */
int st_decode(const uint8_t *buf, size_t len, const st_visit_t *v, void *ctx, st_header_t *h,
              tt_err_t *err);

#endif
