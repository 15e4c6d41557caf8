/*
 * rls_conn, the gRPC door's HTTP/2 connection without a socket (rls/h2.c): what one client may
 * cost it (issue 34). The client is tests/support/h2raw.c on one end of a socketpair; the test
 * moves the bytes (pump), the clock is an argument.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "door_fixture.h"
#include "fake_redis.h" /* T0 */
#include "h2.h"
#include "h2raw.h"
#define FIELD_MAX (65536 + 32) /* nghttp2 refuses a longer field (NGHTTP2_HD_MAX_NV) */

static const char yaml[] =
    "governance:\n"
    "  limits:\n"
    "    - { id: key_rpm, attach: { level: key }, type: rpm, amount: 60000, period: 8760h,\n"
    "        algorithm: fixed_window }\n";

static cfg_config_t *cfg;
static gov_engine_t *eng;
static door_fixture_t fx;
static rls_conn_t *srv;
static h2raw_conn_t cl;
static int sv[2];
static int64_t now;
static rls_conn_stats_t st;

/* What the connection told of its refusals (rls_events_t): their codes, each followed by ' '. */
static char told[4096];

static void on_refused(void *ud, const char *code)
{
    (void)ud;
    size_t at = strlen(told);
    snprintf(told + at, sizeof(told) - at, "%s ", code);
}

static const rls_events_t events = {.refused = on_refused};

/* An engine over cfg, a door over it, and a connection over a socketpair to the raw client. */
static void open_conn(void)
{
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create_config(&eng, &o, cfg, &err), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    now = T0;
    rls_conn_config_t cc = {
        .door = door_rls(door_fixture_open(&fx, eng)), .cfg = &cfg, .events = &events};
    told[0] = '\0';
    rls_caller_t who = {.tcp = false};
    srv = rls_conn_new(&cc, &who, now);
    cr_assert_not_null(srv);
    cr_assert_eq(h2raw_open_fd(&cl, sv[0]), 0);
}

static void setup(void)
{
    cfg_report_t r = {0};
    cr_assert_eq(cfg_load_string("t.yaml", yaml, sizeof(yaml) - 1, &cfg, &r), 0);
    cr_assert_eq(cfg_arm(cfg, &r), 0);
    cfg_report_free(&r);
    open_conn();
}

static void teardown(void)
{
    rls_conn_free(srv);
    h2raw_close(&cl);
    close(sv[1]);
    door_fixture_close(&fx);
    gov_engine_destroy(eng);
    cfg_free(cfg);
}

TestSuite(h2, .init = setup, .fini = teardown);

/* The connection's output, to the client. */
static void drain(void)
{
    const uint8_t *out;
    ssize_t n;
    while ((n = rls_conn_send(srv, &out)) > 0)
        cr_assert_eq(write(sv[1], out, (size_t)n), n);
    cr_assert_geq(n, 0);
}

/* Feeds in[0, len) a turn at a time, draining between turns, checking each turn's work.
 * Returns the turns taken, or -1 when the connection refused the input. */
static int feed(const uint8_t *in, size_t len)
{
    int turns = 0;
    for (;;) {
        size_t used;
        int rc = rls_conn_recv(srv, in, len, now, &used);
        turns++;
        rls_conn_stats(srv, &st);
        cr_assert_leq(st.turn_work, RLS_TURN_WORK + FIELD_MAX + RLS_CALL_WORK + RLS_STREAM_WORK,
                      "a turn did %zu units of work", st.turn_work);
        cr_assert_leq(used, RLS_TURN_INPUT);
        drain();
        if (rc < 0)
            return -1;
        if (rc == RLS_RECV_DONE)
            return turns;
        in += used;
        len -= used;
    }
}

/* What the client wrote, into the connection; its answers back. */
static int pump(void)
{
    static uint8_t buf[1 << 16];
    int turns = 0;
    drain();
    for (ssize_t n; (n = read(sv[1], buf, sizeof(buf))) > 0;) {
        int t = feed(buf, (size_t)n);
        if (t < 0)
            return -1;
        turns += t;
    }
    return turns;
}

static void send_bytes(const h2raw_buf_t *b)
{
    cr_assert_eq(h2raw_send(&cl, b->p, b->len), 0);
    pump();
}

/* The client resets stream id (RST_STREAM CANCEL). */
static void cancel_stream(uint32_t id)
{
    h2raw_buf_t out = {0};
    static const uint8_t cancel[4] = {0, 0, 0, 8};
    h2raw_frame(&out, H2_RST_STREAM, 0, id, cancel, 4);
    send_bytes(&out);
    h2raw_buf_free(&out);
}

/* A PING and its ACK: every frame the connection queued before it has been read by then. */
static void ping(uint64_t opaque)
{
    uint8_t data[8] = {0};
    memcpy(data, &opaque, sizeof(data));
    h2raw_buf_t b = {0};
    h2raw_frame(&b, H2_PING, 0, 0, data, 8);
    send_bytes(&b);
    h2raw_buf_free(&b);
    h2raw_frame_t f;
    for (;;) {
        cr_assert_eq(h2raw_next(&cl, &f, 1000), 1, "no PING ACK");
        if (f.type == H2_PING && (f.flags & H2_ACK) && !memcmp(f.payload, data, 8))
            return;
        pump();
    }
}

static void greet(void)
{
    h2raw_buf_t b = {0};
    h2raw_preface(&b);
    send_bytes(&b);
    h2raw_buf_free(&b);
    h2raw_frame_t f;
    cr_assert_eq(h2raw_next(&cl, &f, 1000), 1);
    cr_assert_eq(f.type, H2_SETTINGS, "the server's SETTINGS come first");
    pump(); /* the client's ACK */
}

/* Waits for stream id's end: the client reads what pump wrote. */
static h2raw_result_t wait_stream(uint32_t id)
{
    h2raw_result_t r;
    pump();
    cr_assert_eq(h2raw_wait(&cl, id, 1000, &r), 0, "stream %u did not end", id);
    return r;
}

static size_t list_size(const char *const *names, const char *const *values, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += strlen(names[i]) + strlen(values[i]) + 32;
    return total;
}

/* A call's fields, then x-f with a value making the list exactly `list` bytes as RFC 9113
 * §6.5.2 counts them; the message for key=`key`; END_STREAM. */
static void call_with_list(uint32_t id, size_t list, const char *key)
{
    static const char *const names[] = {":method",    ":scheme",      ":path",
                                        ":authority", "content-type", "te"};
    static const char *const values[] = {"POST",    "http", H2RAW_RLS, "tt", "application/grpc",
                                         "trailers"};
    size_t base = list_size(names, values, 6) + strlen("x-f") + 32;
    cr_assert_geq(list, base);
    char *v = malloc(list - base + 1);
    memset(v, 'v', list - base);
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_hpack_literal(&block, "x-f", v, list - base, false);
    h2raw_headers(&out, id, &block, false);
    size_t len;
    uint8_t *msg = h2raw_rls_request("edge", "key", key, &len);
    h2raw_grpc_data(&out, id, msg, len, true);
    send_bytes(&out);
    free(msg);
    free(v);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

Test(h2, the_server_announces_its_bounds)
{
    greet();
    cr_assert_eq(cl.max_header_list, RLS_HEADER_LIST_MAX);
    cr_assert_eq(cl.max_streams, RLS_MAX_STREAMS);
    cr_assert_eq(cl.initial_window, RLS_STREAM_WINDOW);
    ping(7);
    cr_assert_eq(cl.conn_window, RLS_CONN_BODY_MAX, "the connection's window: %lld",
                 (long long)cl.conn_window);
}

/* RFC 9113 §6.5.2: name + value + 32 per field. A list of exactly the bound is a call like any
 * other; one byte more resets the stream with ENHANCE_YOUR_CALM and decides nothing. */
Test(h2, a_header_list_at_the_bound_is_served_and_one_byte_more_is_refused)
{
    greet();
    call_with_list(1, RLS_HEADER_LIST_MAX, "bound");
    h2raw_result_t r = wait_stream(1);
    cr_assert_eq(r.grpc_status, 0, "%d %s", r.grpc_status, r.grpc_message);
    cr_assert_eq(h2raw_rls_remaining(r.message, r.message_len), 59999);
    free(r.message);
    call_with_list(3, RLS_HEADER_LIST_MAX + 1, "bound");
    r = wait_stream(3);
    cr_assert(r.reset);
    cr_assert_eq(r.rst_code, NGHTTP2_ENHANCE_YOUR_CALM);
    call_with_list(5, 500, "bound");
    r = wait_stream(5);
    cr_assert_eq(h2raw_rls_remaining(r.message, r.message_len), 59998,
                 "the refused call spent nothing, the next is served");
    free(r.message);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.header_list_max, RLS_HEADER_LIST_MAX);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(st.calls, 2);
    cr_assert_str_eq(told, "too_large ", "the refusal is told, the calls answered are not");
    cr_assert_null(rls_conn_ended(srv));
}

/* The list is counted per field block: trailers have a bound of their own. */
Test(h2, trailers_past_the_bound_are_refused_too)
{
    greet();
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_headers(&out, 1, &block, false);
    block.len = 0;
    static char v[RLS_HEADER_LIST_MAX];
    memset(v, 'v', sizeof(v));
    h2raw_hpack_literal(&block, "x-trailer", v, sizeof(v), false);
    h2raw_headers(&out, 1, &block, true);
    send_bytes(&out);
    h2raw_result_t r = wait_stream(1);
    cr_assert(r.reset);
    cr_assert_eq(r.rst_code, NGHTTP2_ENHANCE_YOUR_CALM);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* A client that ignores the advertised bound again and again loses the connection. */
Test(h2, the_fourth_header_list_past_the_bound_ends_the_connection)
{
    greet();
    for (uint32_t i = 0; i < RLS_REFUSED_MAX; i++)
        call_with_list(1 + 2 * i, RLS_HEADER_LIST_MAX + 1, "again");
    h2raw_frame_t f;
    int resets = 0;
    pump();
    while (!cl.goaway && h2raw_next(&cl, &f, 1000) == 1)
        resets += f.type == H2_RST_STREAM;
    cr_assert(cl.goaway, "no GOAWAY");
    cr_assert_eq(cl.goaway_code, NGHTTP2_ENHANCE_YOUR_CALM);
    cr_assert_eq(resets, RLS_REFUSED_MAX - 1);
    drain();
    cr_assert(rls_conn_done(srv));
    cr_assert_str_eq(told, "too_large too_large too_large too_large ",
                     "each list past the bound is told, the last one's reset unsent too");
    cr_assert_str_eq(rls_conn_ended(srv), "calm");
}

/* A block of 12,000 references to a 4 KB field (48 MB decoded from 12 KB, issue 34 item 1):
 * validated only up to the bound, the rest decoded for the HPACK table alone, and read a
 * bounded turn at a time. */
Test(h2, an_amplified_block_costs_a_bounded_turn)
{
    greet();
    static char pad[4000];
    memset(pad, 'a', sizeof(pad));
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_hpack_literal(&block, "x-pad", pad, sizeof(pad), true);
    for (int i = 0; i < 12000; i++)
        h2raw_hpack_indexed(&block, 62);
    h2raw_headers(&out, 1, &block, true);
    int turns = feed(out.p, out.len); /* checks every turn's work */
    cr_assert_geq(turns, (int)(out.len / RLS_TURN_INPUT), "%d turns for %zu bytes", turns, out.len);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(st.calls, 0);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* Header lists just under the bound on 40 calls, each 12 KB decoded from a few bytes (three
 * 4 KB fields, references to one entry): taken over several turns, none doing more than a turn's
 * work, and every call answered as if it had come in one read. */
Test(h2, heavy_but_lawful_headers_are_taken_a_turn_at_a_time)
{
    greet();
    static char pad[4000];
    memset(pad, 'a', sizeof(pad));
    h2raw_buf_t block = {0}, out = {0};
    for (uint32_t s = 0; s < 40; s++) {
        block.len = 0;
        h2raw_grpc_fields(&block, H2RAW_RLS);
        if (s == 0)
            h2raw_hpack_literal(&block, "x-pad", pad, sizeof(pad), true);
        for (int i = s == 0; i < 3; i++) /* four 4 KB fields each, the literal counted */
            h2raw_hpack_indexed(&block, 62);
        h2raw_headers(&out, 1 + 2 * s, &block, false);
        size_t len;
        uint8_t *msg = h2raw_rls_request("edge", "key", "heavy", &len);
        h2raw_grpc_data(&out, 1 + 2 * s, msg, len, true);
        free(msg);
    }
    int turns = feed(out.p, out.len);
    /* 40 x (3 x 4037 + 256 + 8192) units of work, at most a turn's and a field's each turn */
    cr_assert_geq(turns, 40 * (3 * 4037 + RLS_STREAM_WORK + RLS_CALL_WORK) /
                             (RLS_TURN_WORK + FIELD_MAX + RLS_CALL_WORK));
    cr_assert_gt(turns, 1);
    for (uint32_t s = 0; s < 40; s++) {
        h2raw_result_t r;
        cr_assert_eq(h2raw_wait(&cl, 1 + 2 * s, 1000, &r), 0);
        cr_assert_eq(r.grpc_status, 0, "call %u: %d %s", s, r.grpc_status, r.grpc_message);
        cr_assert_eq(h2raw_rls_remaining(r.message, r.message_len), 59999 - (long)s);
        free(r.message);
    }
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* Sends `n` bytes of a message that announces 65536 on stream id (HEADERS first when `open`). */
static void partial_body(uint32_t id, size_t n, bool open)
{
    h2raw_buf_t block = {0}, out = {0};
    if (open) {
        h2raw_grpc_fields(&block, H2RAW_RLS);
        h2raw_headers(&out, id, &block, false);
    }
    uint8_t *body = calloc(1, n);
    body[1] = 1; /* the prefix: 65536 bytes to come */
    for (size_t at = 0; at < n; at += H2RAW_FRAME_MAX) {
        size_t k = n - at < H2RAW_FRAME_MAX ? n - at : H2RAW_FRAME_MAX;
        h2raw_frame(&out, H2_DATA, 0, id, body + at, k);
        h2raw_sent(&cl, id, k);
    }
    send_bytes(&out);
    free(body);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* Issue 34 item 2: bodies count against the connection's window from their arrival until
 * their call is over (decided, answered, reset), so a connection holds at most
 * RLS_CONN_BODY_MAX of them, and the window comes back as they go. */
Test(h2, bodies_are_held_no_longer_than_their_call_and_no_more_than_the_window)
{
    greet();
    ping(1);
    partial_body(1, 64000, true);
    partial_body(3, 64000, true);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.body_held, 128000);
    cr_assert_eq(st.streams, 2);
    cr_assert_eq(h2raw_can_send(&cl, 5), RLS_CONN_BODY_MAX - 128000, "what is left of the window");
    /* the client gives up on stream 1: its bytes go back */
    cancel_stream(1);
    h2raw_buf_t out = {0};
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.body_held, 64000);
    cr_assert_eq(st.streams, 1);
    /* stream 3 ends short of what its prefix announced: an error answer, its bytes back too */
    h2raw_frame(&out, H2_DATA, H2_END_STREAM, 3, NULL, 0);
    send_bytes(&out);
    h2raw_result_t r = wait_stream(3);
    cr_assert_eq(r.grpc_status, RLS_INVALID_ARGUMENT);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.body_held, 0);
    ping(2);
    cr_assert_eq(cl.conn_window, RLS_CONN_BODY_MAX, "the window came back: %lld",
                 (long long)cl.conn_window);
    h2raw_buf_free(&out);
    cr_assert_str_eq(told, "bad_frame ", "the message cut short is told; the cancel is not");
}

/* A client that sends bodies past the connection's window (the server gave it at most
 * RLS_CONN_BODY_MAX) breaks HTTP/2's flow control: nghttp2 ends the connection with GOAWAY
 * FLOW_CONTROL_ERROR, and the connection says why it ended. */
Test(h2, bodies_past_the_connection_window_end_it_for_flow_control)
{
    greet();
    ping(1);
    partial_body(1, 64000, true);
    partial_body(3, 64000, true);
    cr_assert_null(rls_conn_ended(srv), "within the window");
    partial_body(5, 64000, true);
    pump();
    h2raw_frame_t f;
    while (!cl.goaway && h2raw_next(&cl, &f, 1000) == 1)
        ;
    cr_assert(cl.goaway, "no GOAWAY");
    cr_assert_eq(cl.goaway_code, NGHTTP2_FLOW_CONTROL_ERROR);
    cr_assert_str_eq(rls_conn_ended(srv), "flow_control");
}

/* Streams past SETTINGS_MAX_CONCURRENT_STREAMS: before the client has acknowledged our SETTINGS
 * nghttp2 refuses each (RST_STREAM REFUSED_STREAM), and each is told; once it has, they break
 * the protocol and end the connection (GOAWAY PROTOCOL_ERROR). */
Test(h2, streams_past_the_concurrent_streams_are_refused_then_end_the_connection)
{
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_preface(&out); /* and the streams at once, before our SETTINGS can be acknowledged */
    for (uint32_t i = 0; i < RLS_MAX_STREAMS + 2; i++)
        h2raw_headers(&out, 1 + 2 * i, &block, false);
    send_bytes(&out);
    h2raw_result_t r = wait_stream(1 + 2 * RLS_MAX_STREAMS);
    cr_assert(r.reset);
    cr_assert_eq(r.rst_code, NGHTTP2_REFUSED_STREAM);
    ping(1);
    cr_assert_str_eq(told, "refused_stream refused_stream ");
    cr_assert_null(rls_conn_ended(srv), "the connection serves on");

    out.len = 0;
    h2raw_headers(&out, 1 + 2 * (RLS_MAX_STREAMS + 2), &block, false);
    send_bytes(&out);
    h2raw_frame_t f;
    while (!cl.goaway && h2raw_next(&cl, &f, 1000) == 1)
        pump();
    cr_assert_eq(cl.goaway_code, NGHTTP2_PROTOCOL_ERROR);
    cr_assert_str_eq(rls_conn_ended(srv), "protocol");
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* A message past the bound is answered RESOURCE_EXHAUSTED as soon as it passes it, then
 * RST_STREAM NO_ERROR tells the client to stop sending (RFC 9113 §8.1); the stream's bytes
 * are back in the window. */
Test(h2, an_answer_before_the_request_is_whole_is_followed_by_a_reset_without_error)
{
    greet();
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_headers(&out, 1, &block, false);
    static uint8_t body[RLS_STREAM_WINDOW];
    body[1] = 2; /* the prefix: 131072 bytes */
    for (size_t at = 0; at < sizeof(body); at += H2RAW_FRAME_MAX) {
        size_t k = sizeof(body) - at < H2RAW_FRAME_MAX ? sizeof(body) - at : H2RAW_FRAME_MAX;
        h2raw_frame(&out, H2_DATA, 0, 1, body + at, k);
    }
    send_bytes(&out);
    pump();
    h2raw_frame_t f;
    int status = -1;
    uint32_t rst = 99;
    while (h2raw_next(&cl, &f, 1000) == 1) {
        if (f.type == H2_HEADERS && f.stream == 1)
            status = f.grpc_status;
        if (f.type == H2_RST_STREAM && f.stream == 1) {
            rst = (uint32_t)f.payload[3];
            break;
        }
        pump();
    }
    cr_assert_eq(status, RLS_RESOURCE_EXHAUSTED);
    cr_assert_eq(rst, NGHTTP2_NO_ERROR);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.body_held, 0);
    cr_assert_eq(st.streams, 0);
    cr_assert_str_eq(told, "too_large ", "told once: the reset without error is no refusal");
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* Issue 34 item 3: the preface and first SETTINGS must come within RLS_PREFACE_NS. */
Test(h2, a_connection_that_does_not_greet_in_time_is_done)
{
    cr_assert_eq(rls_conn_deadline(srv), T0 + RLS_PREFACE_NS);
    rls_conn_tick(srv, T0 + RLS_PREFACE_NS - 1);
    cr_assert(!rls_conn_done(srv));
    cr_assert_null(rls_conn_ended(srv));
    rls_conn_tick(srv, T0 + RLS_PREFACE_NS);
    cr_assert(rls_conn_done(srv));
    cr_assert_str_eq(rls_conn_ended(srv), "preface_timeout");
}

/* Once greeted, a connection with no open stream for RLS_IDLE_NS gets a GOAWAY notice (last
 * stream 2^31-1: nothing refused yet), a call sent meanwhile is still answered, and after
 * RLS_GRACE_NS the final GOAWAY names the last stream served; then it is done. An open call
 * keeps the idle clock from running. */
Test(h2, an_idle_connection_is_shut_down_gracefully)
{
    greet();
    cr_assert_eq(rls_conn_deadline(srv), T0 + RLS_IDLE_NS);
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_headers(&out, 1, &block, false);
    send_bytes(&out); /* an open call: no idle deadline while it lasts, only its request's */
    cr_assert_eq(rls_conn_deadline(srv), T0 + RLS_REQUEST_NS);
    now = T0 + 1000;
    cancel_stream(1);
    cr_assert_eq(rls_conn_deadline(srv), now + RLS_IDLE_NS, "idle from when the call ended");

    now += RLS_IDLE_NS;
    rls_conn_tick(srv, now);
    pump();
    h2raw_frame_t f;
    while (h2raw_next(&cl, &f, 1000) == 1 && f.type != H2_GOAWAY)
        ;
    cr_assert_eq(f.type, H2_GOAWAY);
    cr_assert_eq(
        (uint32_t)(f.payload[0] << 24 | f.payload[1] << 16 | f.payload[2] << 8 | f.payload[3]),
        0x7fffffffu, "a notice first");
    cr_assert_eq(cl.goaway_code, NGHTTP2_NO_ERROR);
    cr_assert_str_eq(rls_conn_ended(srv), "idle", "from the notice: a client may close on it");
    cr_assert_eq(rls_conn_deadline(srv), now + RLS_GRACE_NS);
    cr_assert(!rls_conn_done(srv));

    call_with_list(3, 500, "late"); /* sent before the client saw the notice */
    h2raw_result_t r = wait_stream(3);
    cr_assert_eq(r.grpc_status, 0);
    free(r.message);

    now += RLS_GRACE_NS;
    rls_conn_tick(srv, now);
    pump();
    while (h2raw_next(&cl, &f, 1000) == 1 && f.type != H2_GOAWAY)
        ;
    cr_assert_eq(f.type, H2_GOAWAY);
    cr_assert_eq(f.payload[3], 3, "the final GOAWAY names the last stream served");
    drain();
    cr_assert(rls_conn_done(srv));
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* A call whose request does not come whole within RLS_REQUEST_NS of its HEADERS (no
 * grpc-timeout, a body dripped or never ended) is answered DEADLINE_EXCEEDED, as the HTTP door
 * answers 408, then reset without error; its stream and body are gone. */
Test(h2, a_request_not_whole_in_time_is_answered_deadline_exceeded)
{
    greet();
    partial_body(1, 100, true);
    cr_assert_eq(rls_conn_deadline(srv), T0 + RLS_REQUEST_NS);
    rls_conn_tick(srv, T0 + RLS_REQUEST_NS - 1);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.calls, 0);
    now = T0 + RLS_REQUEST_NS;
    rls_conn_tick(srv, now);
    h2raw_result_t r = wait_stream(1);
    cr_assert_eq(r.grpc_status, RLS_DEADLINE_EXCEEDED, "%d %s", r.grpc_status, r.grpc_message);
    cr_assert(strstr(r.grpc_message, "did not arrive whole"), "%s", r.grpc_message);
    ping(3); /* the reset that followed the answer has been read */
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.streams, 0);
    cr_assert_eq(st.body_held, 0);
    cr_assert_eq(rls_conn_deadline(srv), now + RLS_IDLE_NS, "idle from then on");
    cr_assert_str_eq(told, "request_timeout ");
}

/* ---- calls whose rules live in Redis: answered when Redis is ------------------------------ */

static fake_redis_t fake;
static int readies;

static void on_ready(void *ctx)
{
    (void)ctx;
    readies++;
}

/* Domain edge's rule on key, 1 a minute, in Redis (the fake: it answers when told). */
static void setup_redis(void)
{
    const char *files[] = {"domain: edge\ndescriptors: [{ key: key, rate_limit: { unit: minute, "
                           "requests_per_unit: 1 } }]\n"};
    cfg = envoy_config_on("server: { grpc_config_store: redis }\n"
                          "shared_state:\n  redis: { address: 127.0.0.1:6379 }\n",
                          files, 1);
    open_conn();
    fake = (fake_redis_t){0};
    gov_engine_set_redis(eng, &fake_ops, &fake);
    readies = 0;
    rls_conn_on_ready(srv, on_ready, NULL);
}

TestSuite(h2_redis, .init = setup_redis, .fini = teardown);

/* The stream stays open without its body while Redis decides; the answer is queued when Redis
 * answers, and the shell is told (not from inside rls_conn_recv: it sends then anyway). */
Test(h2_redis, a_call_is_answered_when_redis_has_answered)
{
    greet();
    call_with_list(1, 500, "a");
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.calls, 0);
    cr_assert_eq(st.streams, 1);
    cr_assert_eq(st.body_held, 0, "the body went back when the call started");
    cr_assert_eq(fake.n, 1);
    fake_answer(&fake, 0, now);
    cr_assert_eq(readies, 1);
    h2raw_result_t r = wait_stream(1);
    cr_assert_eq(r.grpc_status, 0, "%d %s", r.grpc_status, r.grpc_message);
    cr_assert_eq(h2raw_rls_remaining(r.message, r.message_len), 0, "1 a minute, 1 used");
    free(r.message);
    call_with_list(3, 500, "a");
    fake_answer(&fake, 1, now);
    r = wait_stream(3);
    cr_assert_eq(r.grpc_status, 0);
    free(r.message);
    cr_assert_eq(readies, 2);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.streams, 0);
}

/* A client that resets its call, or whose grpc-timeout passes, while Redis decides: the answer,
 * when it comes, goes nowhere (the decision itself completes: Redis counted it). */
Test(h2_redis, a_call_gone_while_redis_decides_is_not_answered)
{
    greet();
    call_with_list(1, 500, "a");
    cancel_stream(1);
    rls_conn_stats(srv, &st);
    cr_assert_eq(st.streams, 0);
    fake_answer(&fake, 0, now);
    cr_assert_eq(readies, 0, "nobody to answer");

    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    h2raw_hpack_literal(&block, "grpc-timeout", "1S", 2, false);
    h2raw_headers(&out, 3, &block, false);
    size_t len;
    uint8_t *msg = h2raw_rls_request("edge", "key", "b", &len);
    h2raw_grpc_data(&out, 3, msg, len, true);
    send_bytes(&out);
    free(msg);
    cr_assert_eq(rls_conn_tick(srv, now), 1, "waiting on its deadline");
    now += RA_NS_PER_S;
    rls_conn_tick(srv, now);
    h2raw_result_t r = wait_stream(3);
    cr_assert_eq(r.grpc_status, RLS_DEADLINE_EXCEEDED);
    fake_answer(&fake, 1, now);
    cr_assert_eq(readies, 0);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
}

/* The connection closes while Redis decides: its calls' answers go nowhere. */
Test(h2_redis, a_connection_freed_while_redis_decides)
{
    greet();
    call_with_list(1, 500, "a");
    call_with_list(3, 500, "b");
    cr_assert_eq(fake.n, 2);
    rls_conn_free(srv);
    srv = NULL;
    fake_answer(&fake, 1, now);
    fake_answer(&fake, 0, now);
    cr_assert_eq(readies, 0);
}
