/* The connection's bytes without the socket: any split of any stream, answers in order. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

/* A handler: ping answers at once; decide waits in a slot until complete_all(). */
typedef struct pend {
    stream_slot_t slot;
} pend_t;
static pend_t *waiting[64];
static int nwaiting;

static void on_request(void *ud, stream_t *st, const proto_request_t *req)
{
    if (req->op == PROTO_OP_DECIDE) {
        pend_t *p = malloc(sizeof(*p));
        stream_slot_link(st, &p->slot, req->seq, req->op, 0);
        waiting[nwaiting++] = p;
        return;
    }
    tt_buf_t *out = stream_answer_buf(st);
    cr_assert_not_null(out);
    proto_enc_pong(out, req->seq, "t");
}

static void complete_all(void)
{
    for (int i = 0; i < nwaiting; i++) {
        proto_enc_settled(&waiting[i]->slot.bytes, waiting[i]->slot.seq, 1, false);
        stream_slot_ready(&waiting[i]->slot);
    }
    nwaiting = 0;
}

static const stream_handler_t handler = {.request = on_request};
static uint8_t shared[64 * 1024];

/* Feeds bytes as reads of at most `piece` bytes each, as the shell would. */
static void feed(stream_t *st, const uint8_t *p, size_t n, size_t piece)
{
    while (n > 0 && !st->draining) {
        uint8_t *buf;
        size_t cap;
        stream_read_buf(st, shared, sizeof(shared), &buf, &cap);
        size_t k = n < piece ? n : piece;
        cr_assert_leq(k, cap);
        memcpy(buf, p, k);
        cr_assert_eq(stream_feed(st, buf, k, 1, 1), 0);
        p += k;
        n -= k;
    }
}

/* The answers written so far, as "seq:kind" words ("9:pong 0:bad_frame"). */
static void answers(stream_t *st, char *text, size_t size)
{
    text[0] = 0;
    wire_reader_t r = {.pos = st->fill.data, .end = st->fill.data + st->fill.len};
    while (r.pos < r.end) {
        uint32_t n;
        uint64_t seq = 0;
        char kind[32] = "?";
        cr_assert_eq(wire_read_map(&r, &n), 0);
        for (uint32_t i = 0; i < n; i++) {
            wire_str_t k, v;
            cr_assert_eq(wire_read_str(&r, &k), 0);
            if (wire_str_eq(k, "seq")) {
                cr_assert_eq(wire_read_uint(&r, &seq), 0);
            } else if (wire_str_eq(k, "error")) {
                uint32_t m;
                cr_assert_eq(wire_read_map(&r, &m), 0);
                for (uint32_t j = 0; j < m; j++) {
                    cr_assert_eq(wire_read_str(&r, &k), 0);
                    cr_assert_eq(wire_read_str(&r, &v), 0);
                    if (wire_str_eq(k, "code"))
                        snprintf(kind, sizeof(kind), "%.*s", (int)v.len, v.ptr);
                }
            } else {
                if (wire_str_eq(k, "pong") || wire_str_eq(k, "settled"))
                    snprintf(kind, sizeof(kind), "%.*s", (int)k.len, k.ptr);
                cr_assert_eq(wire_skip(&r), 0);
            }
        }
        size_t len = strlen(text);
        snprintf(text + len, size - len, "%s%llu:%s", len ? " " : "", (unsigned long long)seq,
                 kind);
    }
}

static tt_buf_t msg;

static void fini(void)
{
    tt_buf_free(&msg);
}

TestSuite(stream, .fini = fini);

static void ping(uint64_t seq)
{
    proto_request_t req = {.op = PROTO_OP_PING, .seq = seq};
    cr_assert_eq(proto_enc_request(&msg, &req), 0);
}

static void decide(uint64_t seq)
{
    proto_request_t req = {.op = PROTO_OP_DECIDE, .seq = seq, .nsubject = 1};
    req.subject[0] = (proto_pair_t){{"team", 4}, {"t", 1}};
    cr_assert_eq(proto_enc_request(&msg, &req), 0);
}

/* Issue 16, defect 1: a lost frame in bytes kept from a cut read. */
Test(stream, a_framing_error_after_a_cut_read_answers_once_and_keeps_nothing)
{
    stream_t st;
    stream_init(&st, &handler, 1 << 20);
    ping(9);
    tt_buf_append(&msg, "\xc1", 1);
    feed(&st, msg.data, 5, 5);
    cr_assert_eq(st.in_len, 5, "the cut ping is kept");
    feed(&st, msg.data + 5, msg.len - 5, msg.len);
    char text[256];
    answers(&st, text, sizeof(text));
    cr_assert_str_eq(text, "9:pong 0:bad_frame");
    cr_assert(st.draining);
    cr_assert_eq(st.in_len, 0);
    cr_assert_null(st.in);
    stream_free(&st);
}

/* Issue 23 item 8: a message dripped two bytes per read is framed once, not once per read. */
Test(stream, a_dripped_message_is_framed_once_not_once_per_read)
{
    /* {"op": "ping", "seq": 1, "x": [1, 1, ... 60000 of them]}: 60 KB of small values */
    enum { N = 60000 };
    uint8_t head[] = {0x83, 0xa2, 'o',  'p',  0xa4, 'p',  'i', 'n', 'g',    0xa3,    's',
                      'e',  'q',  0x01, 0xa1, 'x',  0xdd, 0,   0,   N >> 8, N & 0xff};
    tt_buf_append(&msg, head, sizeof(head));
    for (int i = 0; i < N; i++)
        tt_buf_append(&msg, "\x01", 1);
    ping(2);
    stream_t once, drip;
    stream_init(&once, &handler, 1 << 20);
    stream_init(&drip, &handler, 1 << 20);
    feed(&once, msg.data, msg.len, msg.len);
    feed(&drip, msg.data, msg.len, 2);
    char a[256], b[256];
    answers(&once, a, sizeof(a));
    answers(&drip, b, sizeof(b));
    cr_assert_str_eq(a, "1:unknown_field 2:pong");
    cr_assert_str_eq(b, a);
    cr_log_info(
        "framing steps: %llu in one read, %llu dripped 2 bytes per read; decodes %llu, %llu",
        (unsigned long long)once.stats.frame_steps, (unsigned long long)drip.stats.frame_steps,
        (unsigned long long)once.stats.decodes, (unsigned long long)drip.stats.decodes);
    /* the trailing ping, cut too, is framed instead of decoded at once: a few more steps */
    cr_assert_leq(drip.stats.frame_steps, once.stats.frame_steps + 64,
                  "%llu framing steps for %d values", (unsigned long long)drip.stats.frame_steps,
                  N + 7);
    cr_assert_leq(drip.stats.decodes, once.stats.decodes + 2);
    stream_free(&once);
    stream_free(&drip);
}

/* Good, bad and pipelined messages cut at every point: the same answers as in one read. */
Test(stream, every_split_of_a_pipelined_stream_gets_the_same_answers)
{
    ping(1);
    decide(2);
    uint8_t unknown_op[] = {0x82, 0xa2, 'o', 'p', 0xa1, 'x', 0xa3, 's', 'e', 'q', 0x03};
    tt_buf_append(&msg, unknown_op, sizeof(unknown_op));
    ping(4);
    uint8_t deep[40] = {0x83, 0xa2, 'o', 'p', 0xa4, 'p', 'i',  'n',
                        'g',  0xa3, 's', 'e', 'q',  5,   0xa1, 'x'};
    for (int i = 16; i < 39; i++)
        deep[i] = 0x91;
    deep[39] = 0xc0;
    tt_buf_append(&msg, deep, sizeof(deep));
    ping(6);
    const char *want = "1:pong 2:settled 3:unknown_op 4:pong 5:too_deep 6:pong";
    for (size_t cut = 0; cut <= msg.len; cut++) {
        stream_t st;
        stream_init(&st, &handler, 1 << 20);
        feed(&st, msg.data, cut, cut ? cut : 1);
        feed(&st, msg.data + cut, msg.len - cut, msg.len);
        complete_all();
        char text[256];
        answers(&st, text, sizeof(text));
        cr_assert_str_eq(text, want, "cut at %zu", cut);
        cr_assert_eq(st.in_len, 0);
        stream_free(&st);
    }
}

Test(stream, answers_wait_behind_a_pending_one_and_an_orphan_is_freed)
{
    stream_t st;
    stream_init(&st, &handler, 1 << 20);
    ping(1);
    decide(2);
    ping(3);
    feed(&st, msg.data, msg.len, msg.len);
    char text[256];
    answers(&st, text, sizeof(text));
    cr_assert_str_eq(text, "1:pong");
    cr_assert_eq(st.nslots, 2, "the decide, and the ping behind it");
    complete_all();
    answers(&st, text, sizeof(text));
    cr_assert_str_eq(text, "1:pong 2:settled 3:pong");
    cr_assert_eq(st.nslots, 0);
    /* a stream that goes before its pending answer: the slot is orphaned, then freed */
    msg.len = 0;
    decide(4);
    feed(&st, msg.data, msg.len, msg.len);
    cr_assert_eq(nwaiting, 1);
    stream_free(&st);
    cr_assert_null(waiting[0]->slot.st);
    complete_all(); /* frees it: valgrind and ASan see no leak */
}

Test(stream, past_the_answer_limit_it_pauses_keeps_the_rest_and_resumes)
{
    stream_t st;
    stream_init(&st, &handler, 64);
    for (int i = 1; i <= 20; i++)
        ping((uint64_t)i);
    feed(&st, msg.data, msg.len, msg.len);
    cr_assert(st.paused);
    cr_assert_gt(st.in_len, 0);
    const uint8_t *data;
    size_t len;
    int rounds = 0;
    while (st.paused && rounds++ < 100) {
        cr_assert(stream_flush_begin(&st, &data, &len));
        stream_flush_end(&st);
        stream_resume(&st, 2, 2);
    }
    cr_assert_not(st.paused);
    cr_assert_eq(st.in_len, 0);
    stream_free(&st);
}
