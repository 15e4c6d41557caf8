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
/* A record's tail, "v": verdict, "l": limit: fixstr keys, a verdict of at most 10 bytes, a limit
 * id of at most CFG_ID_MAX (str8). */
#define TAIL_MAX (2 + 11 + 2 + 2 + CFG_ID_MAX)

/* A record waiting for its answer (see record.h): its head at pending[start, head_end), its
 * tail once answered. */
typedef struct slot {
    uint64_t id;
    size_t start, head_end;
    enum { SLOT_WAITING, SLOT_ANSWERED, SLOT_GONE } state;
    uint8_t tail_len;
    uint8_t tail[TAIL_MAX];
} slot_t;

struct rec {
    int fd;
    char path[CFG_PATH_MAX + 1];
    int64_t max_bytes;
    int files;
    uint64_t sample;
    bool hash;
    uint8_t key[REC_KEY_BYTES];
    char node[128];
    int64_t file_bytes; /* in the current file, written or waiting (a waiting tail: TAIL_MAX) */
    tt_buf_t pending;
    tt_buf_t out;  /* what a flush writes: pending with the tails in place */
    slot_t *slots; /* the records waiting (and answered before them), in the file's order; their
                      ids consecutive, slots[0]'s the oldest */
    size_t n_slots, cap_slots; /* at most REC_WAITING_MAX */
    uint64_t next_id;
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
                 .hash = cfg->hash_subjects,
                 .next_id = 1};
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

static void hash_subject(crypto_generichash_state *st, const gov_subject_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        crypto_generichash_update(st, (const uint8_t *)s->pairs[i].level, s->pairs[i].level_len);
        crypto_generichash_update(st, (const uint8_t *)"", 1);
        crypto_generichash_update(st, (const uint8_t *)s->pairs[i].id, s->pairs[i].id_len);
        crypto_generichash_update(st, (const uint8_t *)"", 1);
    }
}

/* Whether this decision is in the sample: the keyed hash of its whole subject (a gRPC request's
 * domain and every descriptor's entries). */
static bool sampled(const rec_t *r, const door_decision_t *w)
{
    if (r->sample <= 1)
        return true;
    crypto_generichash_state st;
    crypto_generichash_init(&st, r->key, sizeof(r->key), 8);
    if (w->subject) {
        hash_subject(&st, w->subject);
    } else {
        crypto_generichash_update(&st, (const uint8_t *)w->domain, w->domain_len);
        crypto_generichash_update(&st, (const uint8_t *)"", 1);
        for (size_t a = 0; a < w->n; a++)
            hash_subject(&st, &w->asks[a].subject);
    }
    uint8_t h[8];
    crypto_generichash_final(&st, h, sizeof(h));
    uint64_t v;
    memcpy(&v, h, sizeof(v));
    return v % r->sample == 0;
}

/* A subject's map: levels (or entry keys) as they are, ids hashed when the recording hashes. */
static void pack_subject(const rec_t *r, msgpack_packer *pk, const gov_subject_t *s)
{
    msgpack_pack_map(pk, s->n);
    for (size_t i = 0; i < s->n; i++) {
        pack_str(pk, s->pairs[i].level, s->pairs[i].level_len);
        if (r->hash) {
            char hex[2 * HASH_BYTES + 1];
            hash_hex(r, s->pairs[i].id, s->pairs[i].id_len, hex);
            pack_str(pk, hex, 2 * HASH_BYTES);
        } else {
            pack_str(pk, s->pairs[i].id, s->pairs[i].id_len);
        }
    }
}

/* A record's head: its map (the tail's two fields counted), the time and the inputs. */
static void pack_head(const rec_t *r, const door_decision_t *w, tt_buf_t *out)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, out, pack_write);
    bool tokens = w->subject && w->tokens >= 0;
    msgpack_pack_map(&pk, 1 + (w->subject ? 1 + tokens : 2) + 2); /* t, s [n] or d a, v l */
    pack_cstr(&pk, "t");
    msgpack_pack_int64(&pk, w->now);
    if (w->subject) {
        pack_cstr(&pk, "s");
        pack_subject(r, &pk, w->subject);
        if (tokens) {
            pack_cstr(&pk, "n");
            msgpack_pack_int64(&pk, w->tokens);
        }
        return;
    }
    pack_cstr(&pk, "d");
    pack_str(&pk, w->domain, w->domain_len);
    pack_cstr(&pk, "a");
    msgpack_pack_array(&pk, w->n);
    for (size_t i = 0; i < w->n; i++) {
        const gov_ask_t *a = &w->asks[i];
        msgpack_pack_map(&pk, 2 + (a->override_unit ? 2 : 0));
        pack_cstr(&pk, "s");
        pack_subject(r, &pk, &a->subject);
        pack_cstr(&pk, "n");
        msgpack_pack_int64(&pk, a->cost);
        if (a->override_unit) {
            pack_cstr(&pk, "u");
            msgpack_pack_int(&pk, a->override_unit);
            pack_cstr(&pk, "r");
            msgpack_pack_int64(&pk, a->override_amount);
        }
    }
}

/* A record's tail: "v" the verdict (NULL: "pending", the answer never came) and "l" the limit
 * that decided it ("" none; an id is at most CFG_ID_MAX bytes, so a tail TAIL_MAX). */
static void pack_tail(msgpack_packer *pk, const door_verdict_t *v)
{
    pack_cstr(pk, "v");
    pack_cstr(pk, v ? gov_verdict_name(v->verdict) : "pending");
    pack_cstr(pk, "l");
    pack_cstr(pk, v && v->limit ? v->limit : "");
}

/* msgpack-c's writer into a waiting record's tail. */
static int tail_write(void *data, const char *buf, size_t len)
{
    slot_t *sl = data;
    if (sl->tail_len + len > TAIL_MAX)
        return -1;
    memcpy(sl->tail + sl->tail_len, buf, len);
    sl->tail_len = (uint8_t)(sl->tail_len + len);
    return 0;
}

static void answer_slot(rec_t *r, slot_t *sl, const door_verdict_t *v)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sl, tail_write);
    sl->tail_len = 0;
    pack_tail(&pk, v);
    sl->state = SLOT_ANSWERED;
    r->file_bytes -= TAIL_MAX - (int64_t)sl->tail_len;
}

/* Every record still waiting is written `pending`: at a rotation, at the stop. */
static void give_up_waiting(rec_t *r)
{
    for (size_t i = 0; i < r->n_slots; i++)
        if (r->slots[i].state == SLOT_WAITING)
            answer_slot(r, &r->slots[i], NULL);
}

/* Keeps what was packed at pending[start, len) as a record of the current file, with `extra`
 * file bytes to come (a waiting record's tail): counted, or dropped when it cannot be kept (then
 * pending is as it was). A record that does not fit the current file begins the next one. */
static bool keep(rec_t *r, size_t start, int64_t now, int64_t extra)
{
    size_t len = r->pending.len - start;
    r->pending.len = start; /* taken back; appended again below if it is kept */
    if (r->pending.failed || start + len > REC_PENDING_MAX) {
        r->pending.failed = false;
        r->st.dropped++;
        return false;
    }
    if (r->file_bytes + (int64_t)len + extra > r->max_bytes) {
        /* the file is full: what waits goes to it, then a new file */
        uint8_t *rec = malloc(len);
        if (!rec) {
            r->st.dropped++;
            return false;
        }
        memcpy(rec, r->pending.data + start, len);
        give_up_waiting(r);
        rec_flush(r);
        if (rotate(r, now) != 0)
            r->st.write_errors++;
        if (r->file_bytes + (int64_t)len + extra > r->max_bytes) { /* too large for any file */
            free(rec);
            r->st.dropped++;
            return false;
        }
        tt_buf_append(&r->pending, rec, len);
        free(rec);
    } else {
        r->pending.len = start + len; /* the bytes are still there */
    }
    r->file_bytes += (int64_t)len + extra;
    r->st.records++;
    return true;
}

/* Room for one more record waiting for its answer: false at REC_WAITING_MAX, or without memory. */
static bool room_to_wait(rec_t *r)
{
    if (r->n_slots < r->cap_slots)
        return true;
    if (r->cap_slots == REC_WAITING_MAX)
        return false;
    size_t cap = r->cap_slots ? 2 * r->cap_slots : 16;
    slot_t *grown = realloc(r->slots, cap * sizeof(*grown));
    if (!grown)
        return false;
    r->slots = grown;
    r->cap_slots = cap;
    return true;
}

uint64_t rec_asked(rec_t *r, const door_decision_t *what, const door_verdict_t *v)
{
    if (!r || !sampled(r, what))
        return 0;
    if (!what->subject && (what->domain_len == 0 || what->domain_len > CFG_RULE_DOMAIN_MAX)) {
        r->st.dropped++; /* no config names such a domain: a replay could not read it */
        return 0;
    }
    size_t start = r->pending.len;
    pack_head(r, what, &r->pending);
    if (v || !room_to_wait(r)) { /* answered now, or no room to wait: whole (`pending` then) */
        msgpack_packer pk;
        msgpack_packer_init(&pk, &r->pending, pack_write);
        pack_tail(&pk, v);
        keep(r, start, what->now, 0);
        return 0;
    }
    size_t head_len = r->pending.len - start;
    if (!keep(r, start, what->now, TAIL_MAX))
        return 0;
    /* the head is pending's last bytes (keep may have begun a new file and put it first) */
    slot_t *sl = &r->slots[r->n_slots++];
    *sl = (slot_t){.id = r->next_id++,
                   .start = r->pending.len - head_len,
                   .head_end = r->pending.len,
                   .state = SLOT_WAITING};
    return sl->id;
}

void rec_answered(rec_t *r, uint64_t token, const door_verdict_t *v)
{
    if (!r || !r->n_slots || token < r->slots[0].id || token - r->slots[0].id >= r->n_slots)
        return; /* written `pending` already (a rotation) */
    slot_t *sl = &r->slots[token - r->slots[0].id];
    if (sl->state != SLOT_WAITING)
        return;
    if (v) {
        answer_slot(r, sl, v);
        return;
    }
    sl->state = SLOT_GONE; /* an error, not a decision */
    r->file_bytes -= (int64_t)(sl->head_end - sl->start) + TAIL_MAX;
    r->st.records--;
}

int rec_flush(rec_t *r)
{
    if (!r || r->pending.len == 0)
        return 0;
    /* pending's bytes with each answered record's tail after its head, up to the first record
     * still waiting: what follows it waits with it, so the file keeps the order asked */
    r->out.len = 0;
    size_t from = 0, done = 0;
    for (; done < r->n_slots && r->slots[done].state != SLOT_WAITING; done++) {
        const slot_t *sl = &r->slots[done];
        tt_buf_append(&r->out, r->pending.data + from, sl->start - from);
        if (sl->state == SLOT_ANSWERED) {
            tt_buf_append(&r->out, r->pending.data + sl->start, sl->head_end - sl->start);
            tt_buf_append(&r->out, sl->tail, sl->tail_len);
        }
        from = sl->head_end;
    }
    size_t upto = done < r->n_slots ? r->slots[done].start : r->pending.len;
    tt_buf_append(&r->out, r->pending.data + from, upto - from);
    int rc = -1;
    if (!r->out.failed && r->fd >= 0)
        rc = r->out.len ? tt_write_all(r->fd, r->out.data, r->out.len) : 0;
    if (rc != 0)
        r->st.write_errors++;
    r->out.failed = false;
    if (r->out.cap > 64 * 1024) /* a burst's buffer need not stay */
        tt_buf_free(&r->out);
    /* what waits moves to the front */
    memmove(r->pending.data, r->pending.data + upto, r->pending.len - upto);
    r->pending.len -= upto;
    if (done) {
        memmove(r->slots, r->slots + done, (r->n_slots - done) * sizeof(*r->slots));
        r->n_slots -= done;
    }
    for (size_t i = 0; i < r->n_slots; i++) {
        r->slots[i].start -= upto;
        r->slots[i].head_end -= upto;
    }
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
    if (version >= 1 && version <= REC_VERSION) /* 1: before gRPC requests were recorded */
        return 0;
    if (version > REC_VERSION)
        snprintf(why, size,
                 "a traffic file of version %lld; this tokentriage reads versions 1 to %d",
                 (long long)version, REC_VERSION);
    else
        snprintf(why, size, "not a tokentriage traffic file (its header)");
    return -1;
}

/* A subject's map at rd into s: 1..GOV_SUBJECT_MAX pairs, names of 1..name_max bytes, ids of
 * id_min..GOV_ID_MAX. 0, or -1 with why (`field` named: "s", "a[2].s"). */
static int read_subject(wire_reader_t *rd, gov_subject_t *s, size_t name_max, size_t id_min,
                        const char *field, char *why, size_t size)
{
    uint32_t n;
    if (wire_read_map(rd, &n) || n < 1 || n > GOV_SUBJECT_MAX)
        return snprintf(why, size, "%s: a map of 1 to %d levels", field, GOV_SUBJECT_MAX), -1;
    s->n = 0;
    for (uint32_t j = 0; j < n; j++) {
        wire_str_t name, id;
        if (wire_read_str(rd, &name) || name.len < 1 || name.len > name_max ||
            wire_read_str(rd, &id) || id.len < id_min || id.len > GOV_ID_MAX)
            return snprintf(why, size,
                            "%s: level %u: a name of 1 to %zu bytes and an id of %zu to %d", field,
                            j + 1, name_max, id_min, GOV_ID_MAX),
                   -1;
        s->pairs[s->n++] = (gov_pair_t){name.ptr, name.len, id.ptr, id.len};
    }
    return 0;
}

/* A count at rd into *v: 0..GOV_TOKENS_MAX. */
static int read_count(wire_reader_t *rd, int64_t *v)
{
    return wire_read_int(rd, v) || *v < 0 || *v > GOV_TOKENS_MAX ? -1 : 0;
}

/* A gRPC request's descriptors at rd: 1..GOV_ASKS_MAX maps of s, n and u with r. */
static int read_asks(wire_reader_t *rd, rec_entry_t *out, char *why, size_t size)
{
    uint32_t n;
    if (wire_read_array(rd, &n) || n < 1 || n > GOV_ASKS_MAX)
        return snprintf(why, size, "a: an array of 1 to %d descriptors", GOV_ASKS_MAX), -1;
    for (uint32_t i = 0; i < n; i++) {
        gov_ask_t *a = &out->asks[i];
        *a = (gov_ask_t){.cost = -1};
        char field[16];
        snprintf(field, sizeof(field), "a[%u].s", i);
        uint32_t k;
        if (wire_read_map(rd, &k))
            return snprintf(why, size, "a[%u]: not a map", i), -1;
        bool have_s = false, have_r = false;
        for (uint32_t j = 0; j < k; j++) {
            wire_str_t key;
            int64_t v;
            if (wire_read_str(rd, &key))
                return snprintf(why, size, "a[%u]: a key that is not a string", i), -1;
            if (wire_str_eq(key, "s")) {
                if (read_subject(rd, &a->subject, CFG_RULE_KEY_MAX, 0, field, why, size))
                    return -1;
                have_s = true;
            } else if (wire_str_eq(key, "n")) {
                if (read_count(rd, &a->cost))
                    return snprintf(why, size, "a[%u].n: a cost from 0 to 2^40", i), -1;
            } else if (wire_str_eq(key, "u")) {
                if (wire_read_int(rd, &v) || v < INT32_MIN || v > INT32_MAX ||
                    !cfg_unit_of_number((int)v))
                    return snprintf(why, size, "a[%u].u: not a unit of Envoy's API", i), -1;
                a->override_unit = (int)v;
            } else if (wire_str_eq(key, "r")) {
                if (wire_read_int(rd, &a->override_amount) || a->override_amount < 0 ||
                    a->override_amount > RA_ENVOY_CEILING)
                    return snprintf(why, size, "a[%u].r: from 0 to 2^32-1", i), -1;
                have_r = true;
            } else if (wire_skip(rd)) {
                return snprintf(why, size, "a[%u].%.*s: cut short", i, (int)key.len, key.ptr), -1;
            }
        }
        if (!have_s || a->cost < 0)
            return snprintf(why, size, "a[%u].%s: missing", i, have_s ? "n" : "s"), -1;
        if (have_r != (a->override_unit != 0))
            return snprintf(why, size, "a[%u]: u and r go together", i), -1;
    }
    out->n_asks = n;
    return 0;
}

int rec_read_entry(wire_reader_t *rd, rec_entry_t *out, char *why, size_t size)
{
    uint32_t n;
    out->t = 0;
    out->tokens = GOV_NO_TOKENS;
    out->s.n = 0;
    out->n_asks = 0;
    out->domain = out->verdict = out->limit = (wire_str_t){0};
    bool have_t = false;
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
            if (read_count(rd, &out->tokens))
                return snprintf(why, size, "n: tokens must be a whole number from 0 to %lld",
                                (long long)GOV_TOKENS_MAX),
                       -1;
        } else if (wire_str_eq(k, "s")) {
            if (read_subject(rd, &out->s, CFG_LEVEL_MAX, 1, "s", why, size))
                return -1;
        } else if (wire_str_eq(k, "d")) {
            if (wire_read_str(rd, &out->domain) || out->domain.len < 1 ||
                out->domain.len > CFG_RULE_DOMAIN_MAX)
                return snprintf(why, size, "d: a domain of 1 to %d bytes", CFG_RULE_DOMAIN_MAX), -1;
        } else if (wire_str_eq(k, "a")) {
            if (read_asks(rd, out, why, size))
                return -1;
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
    bool grpc = out->domain.len || out->n_asks;
    if (!have_t)
        return snprintf(why, size, "t: missing"), -1;
    if (grpc && (out->s.n || !out->domain.len || !out->n_asks))
        return snprintf(why, size, "%s",
                        out->s.n          ? "s and d: a decide or a gRPC request, not both"
                        : out->domain.len ? "a: missing"
                                          : "d: missing"),
               -1;
    if (!grpc && !out->s.n)
        return snprintf(why, size, "s: missing"), -1;
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
    give_up_waiting(r);
    rec_flush(r);
    if (r->fd >= 0)
        close(r->fd);
    tt_buf_free(&r->pending);
    tt_buf_free(&r->out);
    free(r->slots);
    sodium_memzero(r->key, sizeof(r->key));
    free(r);
}
