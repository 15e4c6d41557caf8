/*
 * libFuzzer target for the gRPC front door's input path: the first byte picks the layer.
 *   even: the bytes are a RateLimitRequest (or, byte 1 odd, a HealthCheckRequest) handed to
 *         the mapping core (rls.c) over a small config: protobuf-c decoding, the request's
 *         bounds, the engine's asks through the daemon's door (server/door.c).
 *   odd:  the bytes follow a client preface and an empty SETTINGS on one HTTP/2 connection
 *         (h2.c on nghttp2), cut into reads at every 0xF5 byte, with the clock advancing and
 *         deadlines ticked between reads; whatever the connection writes is drained.
 * Properties beyond "no crash, no UB, no leak": an answer is OK with a body or an error status
 * with a message, never both; an error answer changed no counter (the engine's held counters
 * before and after agree); the connection's output never grows without being drained. And what
 * one client may cost (issue 34), after every turn: no field block past RLS_HEADER_LIST_MAX was
 * accepted (RFC 9113's count); a turn took at most RLS_TURN_INPUT bytes and did at most
 * RLS_TURN_WORK plus one field, one stream and one decision; the bodies held stay within the
 * connection's window (RLS_CONN_BODY_MAX); the streams open within max_streams.
 * Run longer, from a fuzz build tree:
 *   tests/fuzz/fuzz_grpc -max_total_time=600 -max_len=65536 corpus/ ../tests/fuzz/grpc
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "door.h"
#include "h2.h"
#include "rls.h"

#define T0 (INT64_C(1700000000) * RA_NS_PER_S)

static const char yaml[] =
    "server: { grpc_domains: [edge, tokens], grpc_charge_domains: [tokens] }\n"
    "governance:\n"
    "  limits:\n"
    "    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 3, period: 1m }\n"
    "    - { id: pair, attach: { levels: [generic_key, team] }, type: rpm, amount: 5,\n"
    "        period: 90s, algorithm: sliding_window }\n"
    "    - { id: tenant_tpm, attach: { level: tenant }, type: tpm, amount: 100000,\n"
    "        period: 1m, burst: 20000 }\n";

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static cfg_config_t *cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    cfg_report_t r = {0};
    check(cfg_load_string("fuzz.yaml", yaml, sizeof(yaml) - 1, &cfg, &r) == 0);
    check(cfg_arm(cfg, &r) == 0);
    cfg_report_free(&r);
    return 0;
}

static const rls_caller_t who = {.tcp = false};

static void one_message(gov_engine_t *e, door_t *door, const uint8_t *data, size_t size)
{
    rls_answer_t a;
    gov_metrics_t before, after;
    gov_engine_metrics(e, &before);
    int st = size && (data[0] & 1)
                 ? rls_health_check(data + 1, size - 1, &a)
                 : rls_should_rate_limit(door_rls(door), &who, &cfg, data, size, T0, &a);
    gov_engine_metrics(e, &after);
    check(st == a.status);
    check(st == RLS_OK ? a.body != NULL && a.message[0] == '\0' : a.body == NULL && a.message[0]);
    if (st != RLS_OK)
        check(before.counters == after.counters);
    rls_answer_free(&a);
}

static void drain(rls_conn_t *c)
{
    const uint8_t *out;
    ssize_t n;
    size_t total = 0;
    while ((n = rls_conn_send(c, &out)) > 0)
        total += (size_t)n;
    check(n == 0 || n == -1);
    check(total < (64u << 20));
}

#define MAX_STREAMS 64
#define FIELD_MAX (65536 + 32) /* nghttp2 refuses a longer field (NGHTTP2_HD_MAX_NV) */

/* What a connection may hold and do, checked after every turn. */
static void check_bounds(const rls_conn_t *c, size_t used)
{
    rls_conn_stats_t st;
    rls_conn_stats(c, &st);
    check(used <= RLS_TURN_INPUT);
    check(st.turn_work <= RLS_TURN_WORK + FIELD_MAX + RLS_STREAM_WORK + RLS_CALL_WORK);
    check(st.header_list_max <= RLS_HEADER_LIST_MAX);
    check(st.body_held <= RLS_CONN_BODY_MAX);
    check(st.streams <= MAX_STREAMS);
}

/* Feeds in[0, len) a turn at a time, as the shell does, draining between turns. */
static int feed(rls_conn_t *c, const uint8_t *in, size_t len, int64_t now)
{
    for (;;) {
        size_t used;
        int rc = rls_conn_recv(c, in, len, now, &used);
        check(used <= len);
        check_bounds(c, used);
        drain(c);
        if (rc != RLS_RECV_MORE)
            return rc;
        in += used;
        len -= used;
    }
}

static void connection(door_t *door, const uint8_t *data, size_t size)
{
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
    cfg_config_t *live = cfg;
    rls_conn_config_t cc = {.door = door_rls(door), .cfg = &live, .max_streams = MAX_STREAMS};
    int64_t now = T0;
    rls_conn_t *c = rls_conn_new(&cc, &who, now);
    check(c != NULL);
    int rc = feed(c, preface, sizeof(preface) - 1, now);
    drain(c);
    size_t at = 0;
    while (rc == 0 && at < size) {
        const uint8_t *cut = memchr(data + at, 0xF5, size - at);
        size_t len = cut ? (size_t)(cut - (data + at)) : size - at;
        rc = feed(c, data + at, len, now);
        now += 7 * 1000000; /* 7 ms a read: deadlines do expire */
        rls_conn_tick(c, now);
        drain(c);
        at += len + (cut != NULL);
    }
    (void)rls_conn_done(c);
    rls_conn_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    check(gov_engine_create_config(&e, &o, cfg, &err) == 0);
    srv_metrics_t *m = srv_metrics_new();
    door_t *door = NULL;
    check(m && door_new(&door, e, m, NULL, &err) == 0);
    if (data[0] & 1)
        connection(door, data + 1, size - 1);
    else
        one_message(e, door, data + 1, size - 1);
    door_free(door);
    srv_metrics_free(m);
    gov_engine_destroy(e);
    return 0;
}
