/* The snapshot codec: what it writes reads back whole, and every kind of damage is named. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snap.h"

/* An in-memory sink: the encoder's stream, header placeholder first. */
typedef struct mem {
    uint8_t *p;
    size_t len, cap;
} mem_t;

static int mem_sink(void *ctx, const uint8_t *bytes, size_t len)
{
    mem_t *m = ctx;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->p = realloc(m->p, m->cap);
        cr_assert_not_null(m->p);
    }
    memcpy(m->p + m->len, bytes, len);
    m->len += len;
    return 0;
}

static const char scope[] = "node=n1 cluster=c";

/* A snapshot of two limits and `n` counters of the first (keys "k0", "k1", ...), built through a
 * small buffer so that it flushes many times. */
static mem_t build(int n)
{
    mem_t m = {0};
    static uint8_t buf[ST_HEADER_SIZE + 512];
    st_enc_t w;
    st_enc_init(&w, buf, sizeof(buf), mem_sink, &m);
    cr_assert_eq(st_enc_scope(&w, scope, strlen(scope)), 0);
    st_limit_t a = {.identity = 0x1111, .type = 0, .store = 0, .algorithm = 0, .id = "team_rpm"};
    st_limit_t b = {.identity = 0x2222, .type = 1, .store = 1, .algorithm = 0, .id = "team_tpm"};
    cr_assert_eq(st_enc_limit(&w, &a), 0);
    cr_assert_eq(st_enc_limit(&w, &b), 0);
    for (int i = 0; i < n; i++) {
        char key[16];
        int len = snprintf(key, sizeof(key), "k%d", i);
        cr_assert_eq(st_enc_counter(&w, 0, key, (size_t)len, 1000 + i), 0);
    }
    cr_assert_eq(st_enc_counter(&w, 1, "", 0, -5), 0); /* the global level's empty key */
    uint8_t header[ST_HEADER_SIZE];
    cr_assert_eq(st_enc_finish(&w, 123456789, st_fingerprint(scope, strlen(scope)), header), 0);
    memcpy(m.p, header, sizeof(header));
    return m;
}

typedef struct seen {
    char scope[ST_SCOPE_MAX + 1];
    st_limit_t limits[4];
    uint32_t n_limits;
    uint64_t n_counters, sum_state;
    uint32_t last_limit;
    size_t last_len;
} seen_t;

static void on_scope(void *ctx, const char *s, size_t len)
{
    memcpy(((seen_t *)ctx)->scope, s, len);
}

static void on_limit(void *ctx, uint32_t i, const st_limit_t *l)
{
    seen_t *s = ctx;
    cr_assert_eq(i, s->n_limits);
    s->limits[s->n_limits++] = *l;
}

static void on_counter(void *ctx, uint32_t limit, const char *key, size_t len, int64_t state)
{
    seen_t *s = ctx;
    s->n_counters++;
    s->sum_state += (uint64_t)state;
    s->last_limit = limit;
    s->last_len = len;
}

static const st_visit_t visit = {on_scope, on_limit, on_counter};

static int decode(const mem_t *m, size_t len, seen_t *s, tt_err_t *err)
{
    st_header_t h;
    memset(s, 0, sizeof(*s));
    return st_decode(m->p, len, &visit, s, &h, err);
}

Test(snap, what_is_written_reads_back_whole)
{
    mem_t m = build(1000);
    seen_t s;
    tt_err_t err;
    st_header_t h;
    memset(&s, 0, sizeof(s));
    cr_assert_eq(st_decode(m.p, m.len, &visit, &s, &h, &err), 0, "%s", err.message);
    cr_assert_eq(h.version, ST_VERSION);
    cr_assert_eq(h.written_ns, 123456789);
    cr_assert_eq(h.fingerprint, st_fingerprint(scope, strlen(scope)));
    cr_assert_eq(h.n_counters, 1001);
    cr_assert_eq(h.body_len, m.len - ST_HEADER_SIZE);
    cr_assert_str_eq(s.scope, scope);
    cr_assert_eq(s.n_limits, 2);
    cr_assert_str_eq(s.limits[1].id, "team_tpm");
    cr_assert_eq(s.limits[1].identity, 0x2222);
    cr_assert_eq(s.limits[1].store, 1);
    cr_assert_eq(s.n_counters, 1001);
    cr_assert_eq(s.sum_state, 1000 * 1000 + 999 * 1000 / 2 - 5);
    cr_assert_eq(s.last_limit, 1);
    cr_assert_eq(s.last_len, 0);
    free(m.p);
}

Test(snap, crc32c_matches_the_standard_check_value)
{
    cr_assert_eq(st_crc32c(0, "123456789", 9), 0xe3069283u);
    /* continued in pieces, the same */
    cr_assert_eq(st_crc32c(st_crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
}

Test(snap, every_truncation_is_refused_and_reports_nothing)
{
    mem_t m = build(20);
    tt_err_t err;
    seen_t s;
    for (size_t len = 0; len < m.len; len++) {
        int rc = decode(&m, len, &s, &err);
        cr_assert(rc == ST_ETRUNCATED || rc == ST_EMAGIC, "length %zu: %d %s", len, rc,
                  err.message);
        cr_assert_eq(err.code, rc);
        cr_assert(strcmp(err.path, "header") == 0 || strcmp(err.path, "body") == 0,
                  "length %zu: %s", len, err.path);
        cr_assert_eq(s.n_limits + s.n_counters, 0, "length %zu: a callback ran", len);
    }
    free(m.p);
}

Test(snap, a_flipped_bit_anywhere_is_caught)
{
    mem_t m = build(20);
    tt_err_t err;
    seen_t s;
    for (size_t i = 0; i < m.len; i++) {
        m.p[i] ^= 0x10;
        int rc = decode(&m, m.len, &s, &err);
        cr_assert_lt(rc, 0, "byte %zu flipped, still accepted", i);
        cr_assert_eq(err.code, rc);
        cr_assert_eq(s.n_counters, 0);
        m.p[i] ^= 0x10;
    }
    free(m.p);
}

/* Rewrites a header field and its checksum, as a file of another build would carry. */
static void set_u32(mem_t *m, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        m->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    uint32_t crc = st_crc32c(0, m->p, 60);
    for (int i = 0; i < 4; i++)
        m->p[60 + i] = (uint8_t)(crc >> (8 * i));
}

Test(snap, another_version_is_named_as_such)
{
    mem_t m = build(3);
    set_u32(&m, 8, ST_VERSION + 1);
    tt_err_t err;
    seen_t s;
    cr_assert_eq(decode(&m, m.len, &s, &err), ST_EVERSION);
    cr_assert_eq(err.code, ST_EVERSION);
    cr_assert_str_eq(err.path, "header.version");
    cr_assert_str_eq(err.message, "2, this build reads 1");
    cr_assert_str_eq(st_reason(ST_EVERSION), "wrong_version");
    free(m.p);
}

Test(snap, not_a_snapshot_is_named_as_such)
{
    mem_t m = {.p = (uint8_t *)strdup("server:\n  socket: /x\n"), .len = 20};
    tt_err_t err;
    seen_t s;
    cr_assert_eq(decode(&m, m.len, &s, &err), ST_EMAGIC);
    cr_assert_str_eq(err.path, "header");
    cr_assert_str_eq(err.message, "no snapshot magic");
    free(m.p);
}

/* A body whose checksum matches but whose fields do not: the walk names the field. */
Test(snap, a_counter_of_a_limit_that_is_not_there_is_malformed)
{
    mem_t m = build(1);
    set_u32(&m, 32, 1); /* one limit announced, two in the body, counters of the second */
    tt_err_t err;
    seen_t s;
    int rc = decode(&m, m.len, &s, &err);
    cr_assert_eq(rc, ST_EFORMAT, "%d %s", rc, err.message);
    cr_assert_str_eq(err.path, "counters[0].limit", "%s: %s", err.path, err.message);
    cr_assert_eq(s.n_counters, 0);
    free(m.p);
}

Test(snap, bytes_after_the_body_are_refused)
{
    mem_t m = build(1);
    m.p = realloc(m.p, m.len + 1);
    m.p[m.len] = 0;
    tt_err_t err;
    seen_t s;
    cr_assert_eq(decode(&m, m.len + 1, &s, &err), ST_EFORMAT);
    cr_assert_str_eq(err.path, "body");
    cr_assert_str_eq(err.message, "1 bytes after its end");
    free(m.p);
}

static int refuse(void *ctx, const uint8_t *bytes, size_t len)
{
    (void)ctx;
    (void)bytes;
    (void)len;
    return ST_EIO;
}

Test(snap, a_sink_error_stops_the_encoder_and_is_returned)
{
    static uint8_t buf[ST_HEADER_SIZE + 512];
    st_enc_t w;
    st_enc_init(&w, buf, sizeof(buf), refuse, NULL);
    st_enc_scope(&w, scope, strlen(scope));
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++)
        rc = st_enc_counter(&w, 0, "key", 3, i);
    cr_assert_eq(rc, ST_EIO);
    uint8_t header[ST_HEADER_SIZE];
    cr_assert_eq(st_enc_finish(&w, 0, 0, header), ST_EIO);
}
