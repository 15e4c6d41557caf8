/*
 * libFuzzer target for the decision socket's input path: the server's own stream unit
 * (server/stream.c: reassembly, framing, decoding, answers in order) fed real byte streams,
 * good, bad and pipelined, split at random points into random-sized reads. The first 8 bytes
 * of an input seed the splits; the rest is the stream.
 *
 * Properties beyond "no crash, no leak, no UB": the stream cut into random reads (and paused
 * and resumed by a small answer limit) gets exactly the answers, byte for byte, and hands
 * exactly the requests to its handler, that it gets in one read; the reassembly buffer stays
 * within STREAM_IN_CAP; every request handed up respects the documented bounds and
 * re-encodes (client encoder) to bytes that decode to the same request; every answer
 * encoder's output frames as one message and reads back; the framer ends a message where
 * wire_skip does.
 * Run longer, from a fuzz build tree:
 *   tests/fuzz/fuzz_proto -max_total_time=600 -dict=../tests/fuzz/proto.dict corpus/
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "proto.h"
#include "stream.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static bool same_str(proto_str_t a, proto_str_t b)
{
    return a.len == b.len && memcmp(a.ptr, b.ptr, a.len) == 0;
}

static void check_request(const proto_request_t *req)
{
    check((unsigned)req->op < PROTO_OP_COUNT_);
    check(req->nsubject <= PROTO_MAX_LEVELS);
    for (uint32_t i = 0; i < req->nsubject; i++) {
        check(req->subject[i].level.len >= 1 && req->subject[i].level.len <= PROTO_MAX_LEVEL_NAME);
        check(req->subject[i].id.len >= 1 && req->subject[i].id.len <= PROTO_MAX_ID);
    }
    check(req->tokens >= 0 && req->tokens <= PROTO_MAX_COUNT);
    check(req->op != PROTO_OP_SETTLE || req->reservation != 0);
    check(req->actual >= 0 && req->actual <= PROTO_MAX_COUNT);

    /* round trip through the client's encoder */
    tt_buf_t out = {0};
    check(proto_enc_request(&out, req) == 0);
    size_t n;
    bool deep;
    check(proto_frame(out.data, out.len, &n, &deep) == 0 && n == out.len && !deep);
    proto_request_t again;
    tt_err_t err;
    check(proto_decode_request(out.data, n, &again, &err) == 0);
    check(again.op == req->op && again.seq == req->seq && again.nsubject == req->nsubject);
    check(again.version == req->version && again.headers == req->headers);
    check(again.reservation == req->reservation && again.actual == req->actual);
    for (uint32_t i = 0; i < req->nsubject; i++)
        check(same_str(again.subject[i].level, req->subject[i].level) &&
              same_str(again.subject[i].id, req->subject[i].id));
    tt_buf_free(&out);
}

/* Echo the request's strings through the answer encoders: each must frame as one message. */
static void check_answers(const proto_request_t *req)
{
    tt_buf_t out = {0};
    proto_header_t h[PROTO_MAX_LEVELS];
    for (uint32_t i = 0; i < req->nsubject; i++)
        h[i] = (proto_header_t){req->subject[i].level, req->subject[i].id};
    proto_str_t soft[PROTO_MAX_LEVELS];
    for (uint32_t i = 0; i < req->nsubject; i++)
        soft[i] = req->subject[i].id;
    /* protocol 2's numbers, from whatever the request carried */
    proto_disclosed_t disc = {.has_policy = req->nsubject > 0,
                              .policy_tpm = req->tokens & 2,
                              .has_requests = req->actual & 1,
                              .has_tokens = req->lease & 1,
                              .period_ms = req->actual,
                              .quota = req->tokens,
                              .remaining = -req->tokens,
                              .t_s = (int64_t)req->lease,
                              .requests = {req->tokens, req->actual, (int64_t)req->seq},
                              .tokens = {(int64_t)req->reservation, 0, -1},
                              .retry_s = req->tokens - 5};
    if (req->nsubject)
        snprintf(disc.policy_id, sizeof(disc.policy_id), "%.*s", (int)req->subject[0].id.len,
                 req->subject[0].id.ptr);
    proto_decision_t d = {.admit = req->tokens & 1,
                          .verdict = {"deny", 4},
                          .limit = req->nsubject ? req->subject[0].level : (proto_str_t){"", 0},
                          .remaining = req->tokens - 1,
                          .retry_after = (int64_t)(req->reservation >> 1),
                          .reset_after = -req->actual,
                          .nsoft = req->nsubject,
                          .soft_denied = soft,
                          .send_headers = req->headers,
                          .nheaders = req->headers ? req->nsubject : 0,
                          .headers = h,
                          .disclosed = req->version >= PROTO_V2 ? &disc : NULL,
                          .has_lease = req->lease != 0,
                          .lease = req->lease,
                          .reservation = req->reservation};
    check(proto_enc_decision(&out, req->seq, &d) == 0);
    proto_rate_header_t rh[PROTO_RATE_HEADERS_MAX];
    uint32_t nh = proto_render_headers(&disc, rh);
    check(nh <= PROTO_RATE_HEADERS_MAX);
    for (uint32_t i = 0; i < nh; i++)
        check(memchr(rh[i].value, 0, sizeof(rh[i].value)) != NULL);
    check(proto_enc_settled(&out, req->seq, req->actual, req->reservation & 1) == 0);
    check(proto_enc_charged(&out, req->seq, -req->tokens) == 0);
    check(proto_enc_error(&out, req->seq, "bad_value", "x") == 0);
    size_t off = 0, n;
    bool deep;
    for (int i = 0; i < 4; i++) {
        check(proto_frame(out.data + off, out.len - off, &n, &deep) == 0);
        wire_reader_t r = {.pos = out.data + off, .end = out.data + off + n};
        tt_buf_t json = {0};
        check(json_from_msgpack(&r, &json) == 0 && r.pos == out.data + off + n);
        tt_buf_free(&json);
        off += n;
    }
    check(off == out.len);
    tt_buf_free(&out);
}

/* One run: what the handler saw and what the stream wrote. */
typedef struct run {
    tt_buf_t seen;                /* op and seq of each request handed up */
    tt_buf_t written;             /* every answer, in order */
    stream_slot_t *pending[8192]; /* more than a 64 KiB input can hold decides */
    int npending;
} run_t;

static void complete(run_t *run)
{
    for (int i = 0; i < run->npending; i++) {
        stream_slot_t *s = run->pending[i];
        check(proto_enc_settled(&s->bytes, s->seq, 7, false) == 0);
        stream_slot_ready(s); /* frees an orphan */
    }
    run->npending = 0;
}

/* decide waits in a slot (completed after the read, as the engine would later); the rest are
 * answered at once. */
static void on_request(void *ud, stream_t *st, const proto_request_t *req)
{
    run_t *run = ud;
    check_request(req);
    tt_buf_append(&run->seen, &req->op, sizeof(req->op));
    tt_buf_append(&run->seen, &req->seq, sizeof(req->seq));
    if (req->op == PROTO_OP_DECIDE) {
        check(run->npending < 8192);
        stream_slot_t *s = malloc(sizeof(*s));
        check(s != NULL);
        stream_slot_link(st, s, req->seq, req->op, 0);
        run->pending[run->npending++] = s;
        return;
    }
    check_answers(req);
    tt_buf_t *out = stream_answer_buf(st);
    check(out && proto_enc_pong(out, req->seq, "fuzz") == 0);
}

/* Writes out what the stream has, as the shell does after each read, and resumes it. */
static void drain(stream_t *st, run_t *run)
{
    const uint8_t *p;
    size_t n;
    for (;;) {
        complete(run);
        if (stream_flush_begin(st, &p, &n)) {
            tt_buf_append(&run->written, p, n);
            stream_flush_end(st);
        }
        if (!st->paused || st->draining || st->failed)
            break;
        stream_resume(st, 1, 1); /* may take more and pause again: write that out too */
    }
}

static uint64_t rng;
static size_t next_piece(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t r = (uint32_t)(rng >> 33);
    return (r & 3) == 0 ? 1 + (r >> 2) % 3 : 1 + (r >> 2) % 8192; /* drips and bulk */
}

static void feed(const uint8_t *data, size_t size, bool split, size_t out_limit, run_t *run)
{
    static uint8_t shared[64 * 1024];
    stream_handler_t h = {.request = on_request, .ud = run};
    stream_t st;
    stream_init(&st, &h, out_limit);
    size_t off = 0;
    while (off < size && !st.draining && !st.failed) {
        uint8_t *buf;
        size_t cap;
        stream_read_buf(&st, shared, sizeof(shared), &buf, &cap);
        size_t k = split ? next_piece() : size - off;
        if (k > size - off)
            k = size - off;
        if (k > cap)
            k = cap;
        check(k > 0); /* a paused stream is resumed by drain() before the next read */
        memcpy(buf, data + off, k);
        check(stream_feed(&st, buf, k, 1, 1) == 0);
        check(st.in_len <= STREAM_IN_CAP);
        off += k;
        drain(&st, run);
    }
    stream_end(&st);
    drain(&st, run);
    stream_free(&st);
    complete(run);
}

static bool same_bytes(const tt_buf_t *a, const tt_buf_t *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
}

/* The one-pass decoder (its specialised decide path included) against framing then decoding:
 * whatever the first accepts, the second accepts alike, field by field. */
static void check_first_matches_general(const uint8_t *data, size_t size)
{
    proto_request_t a, b;
    tt_err_t err;
    size_t used, n;
    bool deep;
    if (proto_decode_first(data, size, &used, &a, &err) != 0)
        return;
    check(proto_frame(data, size, &n, &deep) == 0 && n == used && !deep);
    check(proto_decode_request(data, n, &b, &err) == 0);
    check(a.op == b.op && a.seq == b.seq && a.version == b.version && a.headers == b.headers);
    check(a.has_tokens == b.has_tokens && a.tokens == b.tokens && a.nsubject == b.nsubject);
    check(a.reservation == b.reservation && a.actual == b.actual && a.lease == b.lease);
    for (uint32_t i = 0; i < a.nsubject; i++)
        check(same_str(a.subject[i].level, b.subject[i].level) &&
              same_str(a.subject[i].id, b.subject[i].id));
}

/* The framer (its table of fixed forms, its resumable stack) against wire_skip, which frames by
 * wire_head alone: within the 64 KiB bound, one frames a message exactly when the other skips
 * it, to the same end. */
static void check_frame_matches_skip(const uint8_t *data, size_t size)
{
    size_t n;
    bool deep;
    int rc = proto_frame(data, size, &n, &deep);
    wire_reader_t r = {.pos = data,
                       .end = data + (size < PROTO_MAX_MESSAGE ? size : PROTO_MAX_MESSAGE)};
    int sk = size > 0 && wire_is_map_byte(data[0]) ? wire_skip(&r) : TT_ERR_FRAME;
    check((rc == 0) == (sk == 0));
    check(rc != 0 || (size_t)(r.pos - data) == n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    memcpy(&rng, data, 8);
    data += 8, size -= 8;
    check_first_matches_general(data, size);
    check_frame_matches_skip(data, size);
    static run_t whole, cut;
    whole = (run_t){0}, cut = (run_t){0};
    feed(data, size, false, 1 << 30, &whole);
    feed(data, size, true, 256 + (size_t)(rng & 0xfff), &cut);
    check(same_bytes(&whole.seen, &cut.seen));
    check(same_bytes(&whole.written, &cut.written));
    tt_buf_free(&whole.seen);
    tt_buf_free(&whole.written);
    tt_buf_free(&cut.seen);
    tt_buf_free(&cut.written);
    return 0;
}
