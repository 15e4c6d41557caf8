/*
 * record.c on its own: what a recording file holds, read back with its own reader. A decision the
 * engine answers later keeps its place in the file and gets the verdict it was answered; a gRPC
 * request is recorded whole (domain, descriptors, costs, own limits); the reader refuses what no
 * recorder writes.
 */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "record.h"

#define T0 INT64_C(1700000000000000000)

static char dir[] = "/tmp/tt-rec-XXXXXX";
static char file[64];
static cfg_record_t cfg;
static rec_t *rec;

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(file, sizeof(file), "%s/t.ttr", dir);
    cfg = (cfg_record_t){.max_bytes = 1 << 20, .files = 2, .sample = 1, .hash_subjects = false};
    snprintf(cfg.file, sizeof(cfg.file), "%s", file);
    tt_err_t err;
    cr_assert_eq(rec_open(&rec, &cfg, "n1", T0, &err), 0, "%s", err.message);
}

static void teardown(void)
{
    rec_close(rec);
    char path[96];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), i ? "%s.%d" : "%s", file, i);
        unlink(path);
    }
    rmdir(dir);
}

TestSuite(record, .init = setup, .fini = teardown);

static gov_subject_t subject(const char *team)
{
    return (gov_subject_t){.n = 1, .pairs = {{"team", 4, team, strlen(team)}}};
}

/* A decide of team `team` at T0 + i. */
static door_decision_t decide(const gov_subject_t *s, int i)
{
    return (door_decision_t){.now = T0 + i, .subject = s, .tokens = GOV_NO_TOKENS};
}

static uint8_t bytes[1 << 16];
static size_t nbytes;

/* The file's records after the header, as "team:verdict:limit " each (a gRPC request's: the
 * domain for the team). */
static const char *records(void)
{
    static char out[4096];
    FILE *f = fopen(file, "rb");
    cr_assert_not_null(f);
    nbytes = fread(bytes, 1, sizeof(bytes), f);
    fclose(f);
    wire_reader_t rd = {.pos = bytes, .end = bytes + nbytes};
    bool hashed;
    char why[160];
    cr_assert_eq(rec_read_header(&rd, &hashed, why, sizeof(why)), 0, "%s", why);
    out[0] = '\0';
    while (rd.pos < rd.end) {
        static rec_entry_t e;
        cr_assert_eq(rec_read_entry(&rd, &e, why, sizeof(why)), 0, "%s", why);
        size_t at = strlen(out);
        const char *who = e.s.n ? e.s.pairs[0].id : e.domain.ptr;
        int who_len = (int)(e.s.n ? e.s.pairs[0].id_len : e.domain.len);
        snprintf(out + at, sizeof(out) - at, "%.*s:%.*s:%.*s ", who_len, who, (int)e.verdict.len,
                 e.verdict.ptr, (int)e.limit.len, e.limit.ptr);
    }
    return out;
}

static const door_verdict_t admit = {GOV_ADMIT, "team_rpm"}, deny = {GOV_DENY, "team_redis"};

/* A decide of team `team` at T0 + i asked, answered v (NULL: later): rec_asked's token. */
static uint64_t ask(const char *team, int i, const door_verdict_t *v)
{
    gov_subject_t s = subject(team);
    door_decision_t d = decide(&s, i);
    return rec_asked(rec, &d, v);
}

static uint64_t recorded(void)
{
    rec_stats_t st;
    rec_stats(rec, &st);
    return st.records;
}

/* A decision Redis answers later is written where it was asked, with the verdict it got: the
 * records after it wait until it is answered. */
Test(record, a_later_answer_keeps_its_place_and_its_verdict)
{
    uint64_t ta = ask("a", 1, NULL);
    cr_assert_neq(ta, 0);
    cr_assert_eq(ask("b", 2, &admit), 0, "answered at once: no token");
    cr_assert_eq(rec_flush(rec), 0);
    cr_assert_str_eq(records(), "", "b waits behind a");
    rec_answered(rec, ta, &deny);
    uint64_t tc = ask("c", 3, NULL);
    cr_assert_eq(rec_flush(rec), 0);
    cr_assert_str_eq(records(), "a:deny:team_redis b:admit:team_rpm ", "c waits");
    rec_answered(rec, tc, &admit);
    rec_answered(rec, tc, &deny);  /* told twice: the first stands */
    rec_answered(rec, ta, &admit); /* written already */
    cr_assert_eq(rec_flush(rec), 0);
    cr_assert_str_eq(records(), "a:deny:team_redis b:admit:team_rpm c:admit:team_rpm ");
    cr_assert_eq(recorded(), 3);
}

/* An answer that was an error is no decision: its record goes, the others keep their order. */
Test(record, a_later_error_takes_its_record_back)
{
    uint64_t ta = ask("a", 1, NULL);
    ask("b", 2, &admit);
    rec_answered(rec, ta, NULL);
    cr_assert_eq(rec_flush(rec), 0);
    cr_assert_str_eq(records(), "b:admit:team_rpm ");
    cr_assert_eq(recorded(), 1);
}

/* At the stop (and at a rotation) a record still waiting is written `pending`, as before. */
Test(record, a_record_still_waiting_at_the_stop_is_written_pending)
{
    ask("a", 1, NULL);
    ask("b", 2, &admit);
    rec_close(rec);
    rec = NULL;
    cr_assert_str_eq(records(), "a:pending: b:admit:team_rpm ");
}

/* Files rotate by size with records waiting: each file stays whole (every record complete, its
 * header first) and no file passes max_bytes. */
Test(record, a_rotation_with_records_waiting_leaves_whole_files_within_their_bound)
{
    rec_close(rec);
    cfg.max_bytes = 2048;
    tt_err_t err;
    cr_assert_eq(rec_open(&rec, &cfg, "n1", T0, &err), 0, "%s", err.message);
    uint64_t waiting[64];
    for (int i = 0; i < 64; i++) {
        waiting[i] =
            ask("a-rather-long-team-name-to-fill-the-file-sooner", i, i % 2 ? &admit : NULL);
        if (i % 8 == 7)
            rec_flush(rec);
    }
    for (int i = 0; i < 64; i += 2)
        rec_answered(rec, waiting[i], &deny);
    rec_close(rec);
    rec = NULL;
    char path[96];
    snprintf(path, sizeof(path), "%s.1", file);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "it rotated");
    cr_assert_leq(st.st_size, 2048);
    cr_assert_eq(stat(file, &st), 0);
    cr_assert_leq(st.st_size, 2048);
    const char *got = records(); /* the current file reads whole */
    cr_assert(strstr(got, ":deny:team_redis ") || strstr(got, ":pending: "), "%s", got);
}

/* A gRPC request is recorded whole: its domain, every descriptor's entries, cost and own limit;
 * its values hashed as ids are when the recording hashes. */
Test(record, a_grpc_request_is_recorded_whole)
{
    rec_close(rec);
    cfg.hash_subjects = true;
    tt_err_t err;
    cr_assert_eq(rec_open(&rec, &cfg, "n1", T0, &err), 0, "%s", err.message);
    gov_ask_t asks[2] = {
        {.subject = {.n = 2, .pairs = {{"generic_key", 11, "slowpath", 8}, {"user", 4, "u-9", 3}}},
         .cost = 3},
        {.subject = {.n = 1, .pairs = {{"remote_address", 14, "10.0.0.1", 8}}},
         .cost = 0,
         .override_unit = 2,
         .override_amount = 42},
    };
    door_decision_t what = {.now = T0,
                            .tokens = GOV_NO_TOKENS,
                            .domain = "edge",
                            .domain_len = 4,
                            .asks = asks,
                            .n = 2};
    rec_asked(rec, &what, &(door_verdict_t){GOV_DENY, "rls_edge_generic_key_slowpath"});
    rec_close(rec);
    rec = NULL;
    cr_assert_str_eq(records(), "edge:deny:rls_edge_generic_key_slowpath ");
    wire_reader_t rd = {.pos = bytes, .end = bytes + nbytes};
    bool hashed;
    char why[160];
    cr_assert_eq(rec_read_header(&rd, &hashed, why, sizeof(why)), 0);
    cr_assert(hashed);
    static rec_entry_t e;
    cr_assert_eq(rec_read_entry(&rd, &e, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(e.n_asks, 2);
    cr_assert_eq(e.s.n, 0);
    cr_assert_eq(e.asks[0].subject.n, 2);
    cr_assert_eq(e.asks[0].subject.pairs[1].level_len, 4, "keys kept");
    cr_assert_eq(e.asks[0].subject.pairs[1].id_len, 32, "values hashed");
    cr_assert_eq(e.asks[0].cost, 3);
    cr_assert_eq(e.asks[1].override_unit, 2);
    cr_assert_eq(e.asks[1].override_amount, 42);
    cr_assert_null(memmem(bytes, nbytes, "u-9", 3), "the value is not there as it came");
    cr_assert_not_null(memmem(bytes, nbytes, "remote_address", 14));
}

/* What the reader refuses of a gRPC request, by field. */
Test(record, a_grpc_record_out_of_bounds_is_refused_by_field)
{
#define R(bytes, want)                                                                             \
    {                                                                                              \
        bytes, sizeof(bytes) - 1, want                                                             \
    }
    static const struct {
        const char *bytes;
        size_t len;
        const char *want;
    } cases[] = {
        /* both a subject and a domain */
        R("\x84\xa1t\x01\xa1s\x81\xa1k\xa1v\xa1\x64\xa1\x65\xa1\x61\x91\x82\xa1s\x81\xa1k\xa1v\xa1n"
          "\x01",
          "not both"),
        /* a domain without descriptors */
        R("\x82\xa1t\x01\xa1\x64\xa1\x65", "a: missing"),
        /* a descriptor without its cost */
        R("\x83\xa1t\x01\xa1\x64\xa1\x65\xa1\x61\x91\x81\xa1s\x81\xa1k\xa1v", "a[0].n: missing"),
        /* a unit without its amount */
        R("\x83\xa1t\x01\xa1\x64\xa1\x65\xa1\x61\x91\x83\xa1s\x81\xa1k\xa1v\xa1n\x01\xa1u\x02",
          "u and r go together"),
        /* no unit of Envoy's */
        R("\x83\xa1t\x01\xa1\x64\xa1\x65\xa1\x61\x91\x84\xa1s\x81\xa1k\xa1v\xa1n\x01\xa1u\x63\xa1r"
          "\x01",
          "a[0].u"),
        /* an empty domain */
        R("\x83\xa1t\x01\xa1\x64\xa0\xa1\x61\x91\x82\xa1s\x81\xa1k\xa1v\xa1n\x01", "d:"),
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        wire_reader_t rd = {.pos = (const uint8_t *)cases[i].bytes,
                            .end = (const uint8_t *)cases[i].bytes + cases[i].len};
        static rec_entry_t e;
        char why[160] = "";
        cr_expect_eq(rec_read_entry(&rd, &e, why, sizeof(why)), -1, "case %zu read", i);
        cr_expect(strstr(why, cases[i].want), "case %zu: want \"%s\" in \"%s\"", i, cases[i].want,
                  why);
    }
}
