/*
 * libFuzzer target for the socket codec: any bytes as a stream of requests, framed and decoded
 * the way the server does it. Properties beyond "no crash, no UB": a framed message lies within
 * the input and the 64 KiB bound; every decoded request respects the documented bounds; every
 * error carries a code and a message; a decoded request re-encodes (client encoder) to bytes
 * that decode to the same request; every answer encoder's output frames as one message; the
 * unframed fast path (proto_decode_first) accepts exactly the valid requests.
 * Run longer, from a fuzz build tree:
 *   tests/fuzz/fuzz_proto -max_total_time=600 -dict=../tests/fuzz/proto.dict corpus/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "proto.h"

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
    check(req->reserved >= 0 && req->reserved <= PROTO_MAX_COUNT);
    check(req->actual >= 0 && req->actual <= PROTO_MAX_COUNT);

    /* round trip through the client's encoder */
    proto_out_t out = {0};
    check(proto_enc_request(&out, req) == 0);
    size_t n;
    bool deep;
    check(proto_frame(out.data, out.len, &n, &deep) == 0 && n == out.len && !deep);
    proto_request_t again;
    proto_error_t err;
    check(proto_decode_request(out.data, n, &again, &err) == 0);
    check(again.op == req->op && again.seq == req->seq && again.nsubject == req->nsubject);
    for (uint32_t i = 0; i < req->nsubject; i++)
        check(same_str(again.subject[i].level, req->subject[i].level) &&
              same_str(again.subject[i].id, req->subject[i].id));
    proto_out_free(&out);
}

/* Echo the request's strings through the answer encoders: each must frame as one message. */
static void check_answers(const proto_request_t *req)
{
    proto_out_t out = {0};
    proto_header_t h[PROTO_MAX_LEVELS];
    for (uint32_t i = 0; i < req->nsubject; i++)
        h[i] = (proto_header_t){req->subject[i].level, req->subject[i].id};
    proto_str_t soft[PROTO_MAX_LEVELS];
    for (uint32_t i = 0; i < req->nsubject; i++)
        soft[i] = req->subject[i].id;
    proto_decision_t d = {.admit = req->tokens & 1,
                          .verdict = {"deny", 4},
                          .limit = req->nsubject ? req->subject[0].level : (proto_str_t){"", 0},
                          .remaining = req->tokens - 1,
                          .retry_after = req->reserved,
                          .reset_after = -req->actual,
                          .nsoft = req->nsubject,
                          .soft_denied = soft,
                          .nheaders = req->nsubject,
                          .headers = h,
                          .has_lease = req->lease != 0,
                          .lease = req->lease};
    check(proto_enc_decision(&out, req->seq, &d) == 0);
    check(proto_enc_settled(&out, req->seq, req->actual - req->reserved) == 0);
    check(proto_enc_error(&out, req->seq, "bad_value", "x") == 0);
    size_t off = 0, n;
    bool deep;
    for (int i = 0; i < 3; i++) {
        check(proto_frame(out.data + off, out.len - off, &n, &deep) == 0);
        wire_reader_t r = {.pos = out.data + off, .end = out.data + off + n};
        proto_out_t json = {0};
        check(json_from_msgpack(&r, &json) == 0 && r.pos == out.data + off + n);
        proto_out_free(&json);
        off += n;
    }
    check(off == out.len);
    proto_out_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    while (off < size) {
        size_t n;
        bool deep;
        int rc = proto_frame(data + off, size - off, &n, &deep);
        if (rc == PROTO_EMORE || rc == PROTO_EFRAME || rc == PROTO_ETOOBIG)
            break; /* the server waits for more, or answers once and closes */
        check(rc == 0 && n > 0 && n <= size - off && n <= PROTO_MAX_MESSAGE);
        proto_request_t req;
        proto_error_t err;
        rc = proto_decode_request(data + off, n, &req, &err);
        /* the unframed fast path takes exactly the valid requests, and reads them the same */
        proto_request_t fast;
        proto_error_t ferr;
        size_t used;
        int frc = proto_decode_first(data + off, size - off, &used, &fast, &ferr);
        check((frc == 0) == (rc == 0 && !deep));
        if (frc == 0)
            check(used == n && fast.op == req.op && fast.seq == req.seq &&
                  fast.nsubject == req.nsubject && fast.tokens == req.tokens);
        if (rc == 0) {
            check(!deep);
            check_request(&req);
            check_answers(&req);
        } else {
            check(rc < 0 && err.code == rc && err.message[0] != 0);
            check(strcmp(tt_err_name(rc), "error") != 0);
        }
        /* any value skips exactly as the framer measured it */
        wire_reader_t r = {.pos = data + off, .end = data + off + n};
        check(wire_skip(&r) == 0 && r.pos == data + off + n);
        off += n;
    }
    return 0;
}
