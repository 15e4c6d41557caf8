/*
 * Recorded traffic replayed against a new config (issue 30 item 10): a real daemon records its
 * decisions' inputs (server.record), `tokentriage simulate --config NEW --traffic FILE` replays
 * them through the real engine; the recording's bounds; a hostile traffic file refused.
 */
#define _GNU_SOURCE /* memmem */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "engine.h"
#include "h2raw.h"
#include "harness.h" /* tests/redis: a real redis-server */
#include "httpc.h"
#include "runcmd.h"

#define BIN TT_BINARY_DIR "/cmd/tokentriage"

/* Loose: the daemon admits everything. */
#define LOOSE                                                                                      \
    "    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 1000, period: 1h }\n"       \
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 1000, period: 1h }\n"
/* Tight: the same limits, far fewer admitted. */
#define TIGHT                                                                                      \
    "governance:\n  limits:\n"                                                                     \
    "    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 12, period: 1h }\n"         \
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 4, period: 1h }\n"

#define DECISIONS 60

static tt_daemon_t d;
static char dir[] = "/tmp/tt-record-XXXXXX";
static runcmd_t r;

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
}

static void fini(void)
{
    tt_daemon_stop(&d);
    runcmd_free(&r);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)system(cmd);
}

TestSuite(record, .init = setup, .fini = fini, .timeout = 60);

static void subject_of(int i, char *team, char *key)
{
    sprintf(team, "t-%d", i % 3);
    sprintf(key, "k-%d", i % 7);
}

static void write_file(const char *name, const void *bytes, size_t len, char *path)
{
    sprintf(path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(bytes, 1, len, f);
    fclose(f);
}

/* Runs `tokentriage` with the arguments (NULL-terminated) into r, freeing its last run. */
#define sim(...) (runcmd_free(&r), runcmdl(&r, NULL, BIN, __VA_ARGS__))

/* The number after "key": in the line of `limit` of simulate --json's output. */
static long long field(const char *out, const char *limit, const char *key)
{
    char want[96];
    snprintf(want, sizeof(want), "\"limit\":\"%s\"", limit);
    const char *line = strstr(out, want);
    cr_assert_not_null(line, "%s", out);
    snprintf(want, sizeof(want), "\"%s\":", key);
    const char *v = strstr(line, want);
    cr_assert(v && v < strchr(line, '\n'), "%s: %s", key, line);
    return atoll(v + strlen(want));
}

Test(record, a_recording_replayed_against_a_tighter_config_denies_as_the_engine_does)
{
    char server[512];
    snprintf(server, sizeof(server), "  record: { file: %s/traffic.ttr, hash_subjects: true }\n",
             dir);
    cr_assert_eq(tt_daemon_start(&d, LOOSE, server), 0);
    tt_client_t *c = tt_daemon_client(&d);
    cr_assert_not_null(c);
    int admitted = 0;
    for (int i = 0; i < DECISIONS; i++) {
        char team[16], key[16];
        subject_of(i, team, key);
        tt_pair_t s[] = {{"team", team}, {"key", key}};
        tt_response_t a;
        cr_assert_eq(tt_decide(c, s, 2, -1, &a), 0);
        admitted += a.admit;
    }
    tt_close(c);
    cr_assert_eq(admitted, DECISIONS);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0); /* the recording is flushed at stop */

    /* the subjects are not in the file as they were sent */
    char path[512], tight[512];
    snprintf(path, sizeof(path), "%s/traffic.ttr", dir);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "no recording at %s", path);
    static char bytes[1 << 16];
    size_t n = fread(bytes, 1, sizeof(bytes), f);
    fclose(f);
    cr_assert_gt(n, 0);
    cr_assert_null(memmem(bytes, n, "t-1", 3));
    cr_assert_null(memmem(bytes, n, "k-3", 3));

    write_file("tight.yaml", TIGHT, strlen(TIGHT), tight);
    cr_assert_eq(sim("simulate", "--config", tight, "--traffic", path, "--json", NULL), 0, "%s",
                 r.err);

    /* the same inputs straight through the engine, armed from the same file */
    cfg_config_t *cfg;
    cfg_report_t rep = {0};
    cr_assert_eq(cfg_load_file(tight, &cfg, &rep), 0);
    cr_assert_eq(cfg_arm(cfg, &rep), 0);
    cfg_report_free(&rep);
    gov_engine_t *e;
    gov_options_t opt = {0};
    tt_err_t err;
    cr_assert_eq(gov_engine_create_config(&e, &opt, cfg, &err), 0);
    int denied_team = 0, denied_key = 0;
    int64_t now = INT64_C(1700000000000000000);
    for (int i = 0; i < DECISIONS; i++) {
        char team[16], key[16];
        subject_of(i, team, key);
        gov_subject_t s = {
            .n = 2, .pairs = {{"team", 4, team, strlen(team)}, {"key", 3, key, strlen(key)}}};
        gov_result_t res;
        cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, now + i * 1000000, &res, NULL, NULL),
                     0);
        if (!res.admit) {
            denied_team += strcmp(res.limit, "team_rpm") == 0;
            denied_key += strcmp(res.limit, "key_rpm") == 0;
        }
    }
    gov_engine_destroy(e);
    cfg_free(cfg);
    cr_assert_gt(denied_team + denied_key, 0, "the tight config must deny some");
    cr_assert_eq(field(r.out, "team_rpm", "now_denied"), denied_team, "%s", r.out);
    cr_assert_eq(field(r.out, "key_rpm", "now_denied"), denied_key, "%s", r.out);
    cr_assert_eq(field(r.out, "team_rpm", "applied"), DECISIONS, "%s", r.out);
    cr_assert_eq(field(r.out, "team_rpm", "was_admitted"), DECISIONS, "%s", r.out);
    cr_assert_eq(field(r.out, "key_rpm", "was_denied"), 0, "%s", r.out);
    cr_assert_eq(field(r.out, "key_rpm", "now_admitted"), DECISIONS - denied_team - denied_key,
                 "%s", r.out);

    /* against the config it was recorded under, the replay answers what the daemon answered */
    char loose[512];
    static const char loose_yaml[] = "governance:\n  limits:\n" LOOSE;
    write_file("loose.yaml", loose_yaml, sizeof(loose_yaml) - 1, loose);
    cr_assert_eq(sim("simulate", "--config", loose, "--traffic", path, "--json", NULL), 0, "%s",
                 r.err);
    cr_assert(strstr(r.out, "{\"decisions\":60,\"was_admitted\":60,\"was_denied\":0,"
                            "\"now_admitted\":60,\"now_denied\":0,"),
              "%s", r.out);

    /* for people: a line per limit, and its chart */
    cr_assert_eq(sim("simulate", "--config", tight, "--traffic", path, NULL), 0, "%s", r.err);
    cr_assert(strstr(r.out, "team_rpm") && strstr(r.out, "key_rpm"), "%s", r.out);
    cr_assert(strstr(r.out, "denied now"), "%s", r.out);
}

Test(record, the_recording_is_bounded_and_rotates)
{
    char server[512];
    snprintf(server, sizeof(server),
             "  record: { file: %s/traffic.ttr, max_bytes: 4096, files: 3 }\n", dir);
    cr_assert_eq(tt_daemon_start(&d, LOOSE, server), 0);
    tt_client_t *c = tt_daemon_client(&d);
    for (int i = 0; i < 600; i++) {
        char team[16], key[16];
        subject_of(i, team, key);
        tt_pair_t s[] = {{"team", team}, {"key", key}};
        tt_response_t a;
        cr_assert_eq(tt_decide(c, s, 2, -1, &a), 0);
    }
    tt_close(c);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    static const char *const names[] = {"traffic.ttr", "traffic.ttr.1", "traffic.ttr.2"};
    for (size_t i = 0; i < 3; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0, "%s is missing", path);
        cr_assert_leq(st.st_size, 4096, "%s holds %lld bytes", path, (long long)st.st_size);
        cr_assert_gt(st.st_size, 0);
        /* each file stands alone: its own header, whole records */
        char tight[512];
        write_file("tight.yaml", TIGHT, strlen(TIGHT), tight);
        cr_assert_eq(sim("simulate", "--config", tight, "--traffic", path, "--json", NULL), 0,
                     "%s: %s", path, r.err);
        long long applied = field(r.out, "team_rpm", "applied");
        cr_assert(applied > 0 && applied < 600, "%s: %lld", path, applied);
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/traffic.ttr.3", dir);
    cr_assert_neq(access(path, F_OK), 0, "files: 3 keeps three files");
}

/* What a traffic file must not get through: each is refused, naming the file and the record. */
Test(record, a_hostile_traffic_file_is_refused_with_a_clear_error)
{
    char tight[512], path[512];
    write_file("tight.yaml", TIGHT, strlen(TIGHT), tight);
#define HEADER "\x82\xb3tokentriage_traffic\x01\xa6hashed\xc2"
#define CASE(name, bytes, want)                                                                    \
    {                                                                                              \
        name, bytes, sizeof(bytes) - 1, want                                                       \
    }
    static const struct {
        const char *name, *bytes;
        size_t len;
        const char *want;
    } cases[] = {
        CASE("empty", "", "not a tokentriage traffic file"),
        CASE("garbage", "GET / HTTP/1.1\r\n\r\n", "not a tokentriage traffic file"),
        CASE("version", "\x81\xb3tokentriage_traffic\x09", "version 9"),
        /* a record cut short: a map of 3 with one key and half a value */
        CASE("truncated", HEADER "\x83\xa1t\xcf", "record 1"),
        /* a record that is no map */
        CASE("not_a_map", HEADER "\x93\x01\x02\x03", "record 1"),
        /* tokens below zero */
        CASE("tokens", HEADER "\x83\xa1t\x01\xa1s\x81\xa4team\xa1x\xa1n\xff", "record 1: n"),
        /* 17 subject levels */
        CASE("levels",
             HEADER "\x82\xa1t\x01\xa1s\xde\x00\x11"
                    "\xa1\x61\xa1x\xa1\x62\xa1x\xa1\x63\xa1x\xa1\x64\xa1x\xa1\x65\xa1x"
                    "\xa1\x66\xa1x\xa1\x67\xa1x\xa1\x68\xa1x\xa1\x69\xa1x\xa1\x6a\xa1x"
                    "\xa1\x6b\xa1x\xa1\x6c\xa1x\xa1\x6d\xa1x\xa1\x6e\xa1x\xa1\x6f\xa1x"
                    "\xa1\x70\xa1x\xa1\x71\xa1x",
             "record 1: s"),
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(cases[i].name, cases[i].bytes, cases[i].len, path);
        int rc = sim("simulate", "--config", tight, "--traffic", path, NULL);
        cr_assert_eq(rc, 65, "%s: rc %d, %s%s", cases[i].name, rc, r.out, r.err);
        cr_assert(strstr(r.err, path), "%s: %s", cases[i].name, r.err);
        cr_assert(strstr(r.err, cases[i].want), "%s: want \"%s\" in %s", cases[i].name,
                  cases[i].want, r.err);
        cr_assert_eq(r.out_len, 0, "%s: nothing on stdout: %s", cases[i].name, r.out);
    }
}

/* The hashes are keyed: one key file gives the same hash of an id at every start (recordings of
 * two days replay as one), no key file a new key each start; and a key file that cannot serve
 * stops the start, naming it. */
static void record_one(const char *server, char *hash)
{
    cr_assert_eq(tt_daemon_start(&d, LOOSE, server), 0);
    tt_client_t *c = tt_daemon_client(&d);
    tt_response_t a;
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t-1"}}, 1, -1, &a), 0);
    tt_close(c);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    tt_daemon_stop(&d);
    char path[512];
    snprintf(path, sizeof(path), "%s/traffic.ttr", dir);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    static char bytes[4096];
    size_t n = fread(bytes, 1, sizeof(bytes), f);
    fclose(f);
    /* the record's id: "team" then a 32-byte string of hex (0xd9 0x20 or 0xb? prefix) */
    const char *p = memmem(bytes, n, "\xa4team", 5);
    cr_assert_not_null(p);
    p += 5;
    cr_assert(p[0] == '\xd9' && p[1] == 32, "a 32-character hash");
    memcpy(hash, p + 2, 32);
    hash[32] = 0;
}

Test(record, hashes_are_keyed)
{
    char key[512], server[1024], h1[33], h2[33], h3[33], h4[33];
    write_file("key", "0123456789abcdef0123456789abcdef", 32, key);
    snprintf(server, sizeof(server), "  record: { file: %s/traffic.ttr, hash_key_file: %s }\n", dir,
             key);
    record_one(server, h1);
    record_one(server, h2);
    cr_assert_str_eq(h1, h2, "one key, one hash");
    snprintf(server, sizeof(server), "  record: { file: %s/traffic.ttr }\n", dir);
    record_one(server, h3);
    record_one(server, h4);
    cr_assert_str_neq(h3, h4, "no key file: a new key each start");
    cr_assert_str_neq(h1, h3);
    /* a key file too short to be a key */
    write_file("short", "abc", 3, key);
    snprintf(server, sizeof(server), "  record: { file: %s/traffic.ttr, hash_key_file: %s }\n", dir,
             key);
    cr_assert_neq(tt_daemon_start(&d, LOOSE, server), 0);
    cr_assert(tt_daemon_log_has(&d, "server.record.hash_key_file", 5000));
}

/* A limit per door's subject, one in Redis (1 an hour: admit, then deny), and a rule of the gRPC
 * door in Redis (the same). */
#define DOORS_LIMITS                                                                               \
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 1000, period: 1h }\n"         \
    "    - { id: team_redis, attach: { level: team }, type: rpm, amount: 1, period: 1h,\n"         \
    "        store: redis }\n"                                                                     \
    "    - { id: edge_user, domain: edge, descriptor: [{ key: user }], type: rpm, amount: 1,\n"    \
    "        period: 1h, store: redis }\n"

/* Every door's decisions are recorded through the one door call, and a decision a Redis limit
 * answers later with the verdict it got (brief grpcops item 2). On main the gRPC requests were
 * not recorded and the Redis limit's two decisions were recorded `pending`: the replay read 3
 * decisions, 3 admitted and none denied, key_rpm applied to 1. Now: 6 decisions (two on the
 * socket, one HTTP, three gRPC: one decided by levels, two by a rule in Redis), the second of
 * each Redis pair denied as it was answered, key_rpm applied to the HTTP and the levels' gRPC
 * request, the rule to its two; replayed against the config they were recorded under (the Redis
 * limit and rule as local counters), the answers are the same. */
Test(record, every_door_is_recorded_and_a_redis_decision_with_the_verdict_it_got)
{
    rh_server_t redis = {0};
    cr_assert_eq(rh_start(&redis), 0, "redis-server did not start");
    char server[1024], limits[1024];
    snprintf(server, sizeof(server),
             "  record: { file: %s/traffic.ttr, hash_subjects: false }\n  grpc: %s/grpc.sock\n",
             dir, dir);
    snprintf(limits, sizeof(limits),
             DOORS_LIMITS "shared_state:\n  redis: { address: \"%s\", timeout: 1s }\n",
             redis.address);
    cr_assert_eq(tt_daemon_start(&d, limits, server), 0);
    cr_assert(tt_daemon_log_has(&d, "redis: store up", 10000 * tt_slowdown()),
              "the Redis store decides (not the fallback)");

    tt_client_t *c = tt_daemon_client(&d); /* the socket: Redis answers later */
    cr_assert_not_null(c);
    tt_response_t a;
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t-r"}}, 1, -1, &a), 0);
    cr_assert(a.admit, "%s", a.verdict);
    cr_assert_eq(tt_decide(c, (tt_pair_t[]){{"team", "t-r"}}, 1, -1, &a), 0);
    cr_assert(!a.admit && strcmp(a.limit, "team_redis") == 0, "%s %s", a.verdict, a.limit);
    tt_close(c);

    int fd = httpc_unix(d.socket); /* HTTP on the socket */
    cr_assert_geq(fd, 0);
    static const char get[] = "GET /v1/decide?key=k-h HTTP/1.1\r\nHost: tt\r\n\r\n";
    cr_assert_eq(httpc_send(fd, get, sizeof(get) - 1), 0);
    static httpc_response_t hr;
    httpc_reset();
    httpc_read(fd, &hr, 5000 * tt_slowdown());
    cr_assert_eq(hr.status, 200, "%s", hr.raw);
    close(fd);

    char grpc[300];
    snprintf(grpc, sizeof(grpc), "%s/grpc.sock", dir);
    h2raw_conn_t g; /* and gRPC */
    cr_assert_eq(h2raw_open_unix(&g, grpc), 0);
    h2raw_buf_t out = {0};
    h2raw_preface(&out);
    cr_assert_eq(h2raw_send(&g, out.p, out.len), 0);
    h2raw_buf_free(&out);
    size_t len;
    uint8_t *msg = h2raw_rls_request("levels", "key", "k-g", &len);
    h2raw_result_t gr;
    cr_assert_eq(h2raw_call(&g, 1, H2RAW_RLS, msg, len, 5000 * tt_slowdown(), &gr), 0);
    cr_assert_eq(gr.grpc_status, 0, "%s", gr.grpc_message);
    free(gr.message);
    free(msg);
    msg = h2raw_rls_request("edge", "user", "u-1", &len); /* the rule in Redis: OK, then over */
    for (uint32_t id = 3; id <= 5; id += 2) {
        cr_assert_eq(h2raw_call(&g, id, H2RAW_RLS, msg, len, 5000 * tt_slowdown(), &gr), 0);
        cr_assert_eq(gr.grpc_status, 0, "%s", gr.grpc_message);
        free(gr.message);
    }
    free(msg);
    h2raw_close(&g);
    cr_assert_eq(tt_daemon_kill(&d, SIGTERM), 0);
    rh_stop(&redis);

    char path[512], cfg[512], text[2048];
    snprintf(path, sizeof(path), "%s/traffic.ttr", dir);
    int n = snprintf(text, sizeof(text), "governance:\n  limits:\n%s", limits);
    write_file("doors.yaml", text, (size_t)n, cfg);
    cr_assert_eq(sim("simulate", "--config", cfg, "--traffic", path, "--json", NULL), 0, "%s",
                 r.err);
    cr_assert(strstr(r.out, "{\"decisions\":6,\"was_admitted\":4,\"was_denied\":2,"
                            "\"now_admitted\":4,\"now_denied\":2,"),
              "%s", r.out);
    cr_assert_eq(field(r.out, "team_redis", "was_denied"), 1, "%s", r.out);
    cr_assert_eq(field(r.out, "team_redis", "now_denied"), 1, "%s", r.out);
    cr_assert_eq(field(r.out, "key_rpm", "applied"), 2, "HTTP's and gRPC's: %s", r.out);
    cr_assert_eq(field(r.out, "edge_user", "applied"), 2, "%s", r.out);
    cr_assert_eq(field(r.out, "edge_user", "was_denied"), 1, "%s", r.out);
    cr_assert_eq(field(r.out, "edge_user", "now_denied"), 1, "%s", r.out);
}
