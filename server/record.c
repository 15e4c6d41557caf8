/* See record.h. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "tt_io.h"

#define HASH_BYTES 16 /* BLAKE2b-128: 32 hex characters per id */

struct rec {
    int fd;
    char path[CFG_PATH_MAX + 1];
    int64_t max_bytes;
    int files;
    uint64_t sample;
    bool hash;
    uint8_t key[REC_KEY_BYTES];
    char node[128];
    int64_t file_bytes; /* in the current file, written or waiting */
    tt_buf_t pending;
    rec_stats_t st;
};

static int pack_write(void *data, const char *buf, size_t len)
{
    return tt_buf_append(data, buf, len);
}

static void pack_str(msgpack_packer *pk, const char *s, size_t n)
{
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pack_cstr(msgpack_packer *pk, const char *s)
{
    pack_str(pk, s, strlen(s));
}

/* The file's header, into out. */
static void header(const rec_t *r, int64_t now, tt_buf_t *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, pack_write);
    msgpack_pack_map(&pk, 5);
    pack_cstr(&pk, "tokentriage_traffic");
    msgpack_pack_int(&pk, REC_VERSION);
    pack_cstr(&pk, "hashed");
    r->hash ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
    pack_cstr(&pk, "sample");
    msgpack_pack_uint64(&pk, r->sample);
    pack_cstr(&pk, "node");
    pack_cstr(&pk, r->node);
    pack_cstr(&pk, "started");
    msgpack_pack_int64(&pk, now);
}

/* Ends the current file (renamed aside, the oldest gone) and begins a new one with its header.
 * 0 or -1 with errno. */
static int rotate(rec_t *r, int64_t now)
{
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    char from[CFG_PATH_MAX + 16], to[CFG_PATH_MAX + 16];
    for (int k = r->files - 1; k >= 1; k--) {
        if (k == 1)
            snprintf(from, sizeof(from), "%s", r->path);
        else
            snprintf(from, sizeof(from), "%s.%d", r->path, k - 1);
        snprintf(to, sizeof(to), "%s.%d", r->path, k);
        if (rename(from, to) != 0 && errno != ENOENT)
            return -1;
    }
    r->fd = open(r->path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (r->fd < 0)
        return -1;
    tt_buf_t h = {0};
    header(r, now, &h);
    int rc = h.failed || tt_write_all(r->fd, h.data, h.len) ? -1 : 0;
    r->file_bytes = (int64_t)h.len;
    tt_buf_free(&h);
    r->st.rotations++;
    return rc;
}

/* The key into key: BLAKE2b-256 of the key file's bytes (16 .. 4096 of them), or random when
 * there is no key file (random false: left as it is, for rec_check). */
static int read_key(const cfg_record_t *cfg, uint8_t key[REC_KEY_BYTES], bool random, tt_err_t *err)
{
    if (!cfg->hash_key_file[0]) {
        if (random)
            randombytes_buf(key, REC_KEY_BYTES);
        return 0;
    }
    int fd = open(cfg->hash_key_file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    uint8_t buf[4097];
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0)
        return tt_err_set(err, TT_ERR_INVAL, "server.record.hash_key_file", "%s: %s",
                          cfg->hash_key_file, strerror(e));
    if (n < 16 || n > 4096)
        return tt_err_set(err, TT_ERR_INVAL, "server.record.hash_key_file",
                          "%s: %zd bytes; a key file holds 16 to 4096", cfg->hash_key_file, n);
    crypto_generichash(key, REC_KEY_BYTES, buf, (size_t)n, NULL, 0);
    sodium_memzero(buf, sizeof(buf));
    return 0;
}

int rec_check(const cfg_record_t *cfg, tt_err_t *err)
{
    uint8_t key[REC_KEY_BYTES];
    int rc = read_key(cfg, key, false, err);
    sodium_memzero(key, sizeof(key));
    if (rc != 0)
        return rc;
    char dir[CFG_PATH_MAX + 1];
    snprintf(dir, sizeof(dir), "%s", cfg->file);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = '\0'; /* "/x" is in "/" */
    struct stat st;
    if (stat(dir, &st) != 0)
        return tt_err_set(err, TT_ERR_INVAL, "server.record.file", "%s: its directory %s: %s",
                          cfg->file, dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return tt_err_set(err, TT_ERR_INVAL, "server.record.file",
                          "%s: its directory %s is not a directory", cfg->file, dir);
    if (access(dir, W_OK | X_OK) != 0)
        return tt_err_set(err, TT_ERR_INVAL, "server.record.file",
                          "%s: its directory %s cannot be written here: %s", cfg->file, dir,
                          strerror(errno));
    if (lstat(cfg->file, &st) == 0 && !S_ISREG(st.st_mode))
        return tt_err_set(err, TT_ERR_INVAL, "server.record.file",
                          "%s: not a regular file (a recording is written only to one)", cfg->file);
    return 0;
}

int rec_open(rec_t **out, const cfg_record_t *cfg, const char *node, int64_t now, tt_err_t *err)
{
    *out = NULL;
    if (sodium_init() < 0)
        return tt_err_set(err, TT_ERR_NOMEM, "server.record", "libsodium did not start");
    rec_t *r = calloc(1, sizeof(*r));
    if (!r)
        return tt_err_set(err, TT_ERR_NOMEM, "server.record", "out of memory");
    *r = (rec_t){.fd = -1,
                 .max_bytes = cfg->max_bytes,
                 .files = (int)cfg->files,
                 .sample = (uint64_t)cfg->sample,
                 .hash = cfg->hash_subjects};
    snprintf(r->path, sizeof(r->path), "%s", cfg->file);
    snprintf(r->node, sizeof(r->node), "%s", node ? node : "");
    int rc = rec_check(cfg, err);
    if (rc == 0)
        rc = read_key(cfg, r->key, true, err);
    if (rc == 0 && rotate(r, now) != 0)
        rc =
            tt_err_set(err, TT_ERR_INVAL, "server.record.file", "%s: %s", r->path, strerror(errno));
    if (rc != 0) {
        rec_close(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* The keyed hash of bytes, as hex into out (2 * HASH_BYTES + 1). */
static void hash_hex(const rec_t *r, const void *p, size_t n, char *out)
{
    uint8_t h[HASH_BYTES];
    crypto_generichash(h, sizeof(h), p, n, r->key, sizeof(r->key));
    sodium_bin2hex(out, 2 * HASH_BYTES + 1, h, sizeof(h));
}

/* Whether this subject is in the sample: the keyed hash of all its levels and ids. */
static bool sampled(const rec_t *r, const gov_subject_t *s)
{
    if (r->sample <= 1)
        return true;
    crypto_generichash_state st;
    crypto_generichash_init(&st, r->key, sizeof(r->key), 8);
    for (size_t i = 0; i < s->n; i++) {
        crypto_generichash_update(&st, (const uint8_t *)s->pairs[i].level, s->pairs[i].level_len);
        crypto_generichash_update(&st, (const uint8_t *)"", 1);
        crypto_generichash_update(&st, (const uint8_t *)s->pairs[i].id, s->pairs[i].id_len);
        crypto_generichash_update(&st, (const uint8_t *)"", 1);
    }
    uint8_t h[8];
    crypto_generichash_final(&st, h, sizeof(h));
    uint64_t v;
    memcpy(&v, h, sizeof(v));
    return v % r->sample == 0;
}

void rec_decision(rec_t *r, int64_t now, const gov_subject_t *s, int64_t tokens,
                  const gov_result_t *res)
{
    if (!r || (res && res->status < 0) || !sampled(r, s))
        return;
    size_t start = r->pending.len;
    msgpack_packer pk;
    msgpack_packer_init(&pk, &r->pending, pack_write);
    bool limit = res && res->limit[0];
    msgpack_pack_map(&pk, 3 + (tokens >= 0) + limit);
    pack_cstr(&pk, "t");
    msgpack_pack_int64(&pk, now);
    pack_cstr(&pk, "s");
    msgpack_pack_map(&pk, s->n);
    for (size_t i = 0; i < s->n; i++) {
        pack_str(&pk, s->pairs[i].level, s->pairs[i].level_len);
        if (r->hash) {
            char hex[2 * HASH_BYTES + 1];
            hash_hex(r, s->pairs[i].id, s->pairs[i].id_len, hex);
            pack_str(&pk, hex, 2 * HASH_BYTES);
        } else {
            pack_str(&pk, s->pairs[i].id, s->pairs[i].id_len);
        }
    }
    if (tokens >= 0) {
        pack_cstr(&pk, "n");
        msgpack_pack_int64(&pk, tokens);
    }
    pack_cstr(&pk, "v");
    pack_cstr(&pk, res ? gov_verdict_name(res->verdict) : "pending");
    if (limit) {
        pack_cstr(&pk, "l");
        pack_cstr(&pk, res->limit);
    }
    size_t len = r->pending.len - start;
    r->pending.len = start; /* taken back; appended again below if it is kept */
    if (r->pending.failed || start + len > REC_PENDING_MAX) {
        r->pending.failed = false;
        r->st.dropped++;
        return;
    }
    if (r->file_bytes + (int64_t)len > r->max_bytes) {
        /* the file is full: what waits goes to it, then a new file */
        uint8_t *rec = malloc(len);
        if (!rec) {
            r->st.dropped++;
            return;
        }
        memcpy(rec, r->pending.data + start, len);
        rec_flush(r);
        if (rotate(r, now) != 0)
            r->st.write_errors++;
        if (r->file_bytes + (int64_t)len > r->max_bytes) { /* too large for any file */
            free(rec);
            r->st.dropped++;
            return;
        }
        tt_buf_append(&r->pending, rec, len);
        free(rec);
    } else {
        r->pending.len = start + len; /* the bytes are still there */
    }
    r->file_bytes += (int64_t)len;
    r->st.records++;
}

int rec_flush(rec_t *r)
{
    if (!r || r->pending.len == 0)
        return 0;
    int rc = r->fd >= 0 ? tt_write_all(r->fd, r->pending.data, r->pending.len) : -1;
    if (rc != 0)
        r->st.write_errors++;
    r->pending.len = 0;
    return rc;
}

void rec_stats(const rec_t *r, rec_stats_t *out)
{
    *out = r ? r->st : (rec_stats_t){0};
}

/* ---- reading it back ------------------------------------------------------------------- */

int rec_read_header(wire_reader_t *rd, bool *hashed, char *why, size_t size)
{
    uint32_t n;
    int64_t version = 0;
    *hashed = false;
    if (wire_read_map(rd, &n)) {
        snprintf(why, size, "not a tokentriage traffic file (no header)");
        return -1;
    }
    for (uint32_t i = 0; i < n && version >= 0; i++) {
        wire_str_t k;
        bool b;
        if (wire_read_str(rd, &k))
            version = -1;
        else if (wire_str_eq(k, "tokentriage_traffic") && wire_read_int(rd, &version) == 0)
            continue;
        else if (wire_str_eq(k, "hashed") && wire_read_bool(rd, &b) == 0)
            *hashed = b;
        else if (wire_skip(rd))
            version = -1;
    }
    if (version == REC_VERSION)
        return 0;
    if (version > REC_VERSION)
        snprintf(why, size, "a traffic file of version %lld; this tokentriage reads version %d",
                 (long long)version, REC_VERSION);
    else
        snprintf(why, size, "not a tokentriage traffic file (its header)");
    return -1;
}

int rec_read_entry(wire_reader_t *rd, rec_entry_t *out, char *why, size_t size)
{
    uint32_t n;
    *out = (rec_entry_t){.tokens = GOV_NO_TOKENS};
    bool have_t = false, have_s = false;
    if (wire_read_map(rd, &n)) {
        bool map = rd->pos < rd->end &&
                   ((rd->pos[0] & 0xf0) == 0x80 || rd->pos[0] == 0xde || rd->pos[0] == 0xdf);
        return snprintf(why, size, map ? "a map cut short" : "not a map"), -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        wire_str_t k;
        if (wire_read_str(rd, &k))
            return snprintf(why, size, "a key that is not a string"), -1;
        if (wire_str_eq(k, "t")) {
            if (wire_read_int(rd, &out->t) || out->t < 0)
                return snprintf(why, size, "t: not a time (ns since the epoch)"), -1;
            have_t = true;
        } else if (wire_str_eq(k, "n")) {
            if (wire_read_int(rd, &out->tokens) || out->tokens < 0 || out->tokens > GOV_TOKENS_MAX)
                return snprintf(why, size, "n: tokens must be a whole number from 0 to %lld",
                                (long long)GOV_TOKENS_MAX),
                       -1;
        } else if (wire_str_eq(k, "s")) {
            uint32_t levels;
            if (wire_read_map(rd, &levels) || levels < 1 || levels > GOV_SUBJECT_MAX)
                return snprintf(why, size, "s: a subject is a map of 1 to %d levels",
                                GOV_SUBJECT_MAX),
                       -1;
            for (uint32_t j = 0; j < levels; j++) {
                wire_str_t level, id;
                if (wire_read_str(rd, &level) || level.len < 1 || level.len > CFG_LEVEL_MAX ||
                    wire_read_str(rd, &id) || id.len < 1 || id.len > GOV_ID_MAX)
                    return snprintf(why, size,
                                    "s: level %u: a level of 1 to %d bytes and an id of 1 to %d",
                                    j + 1, CFG_LEVEL_MAX, GOV_ID_MAX),
                           -1;
                out->s.pairs[out->s.n++] = (gov_pair_t){level.ptr, level.len, id.ptr, id.len};
            }
            have_s = true;
        } else if (wire_str_eq(k, "v") || wire_str_eq(k, "l")) {
            wire_str_t *v = wire_str_eq(k, "v") ? &out->verdict : &out->limit;
            if (wire_read_str(rd, v) || v->len > CFG_ID_MAX)
                return snprintf(why, size, "%.*s: a string of at most %d bytes", (int)k.len, k.ptr,
                                CFG_ID_MAX),
                       -1;
        } else if (wire_skip(rd)) { /* a field a later version added */
            return snprintf(why, size, "%.*s: cut short", (int)k.len, k.ptr), -1;
        }
    }
    if (!have_t || !have_s)
        return snprintf(why, size, "%s: missing", have_t ? "s" : "t"), -1;
    return 0;
}

const char *rec_path(const rec_t *r)
{
    return r->path;
}

void rec_close(rec_t *r)
{
    if (!r)
        return;
    rec_flush(r);
    if (r->fd >= 0)
        close(r->fd);
    tt_buf_free(&r->pending);
    sodium_memzero(r->key, sizeof(r->key));
    free(r);
}
