/*
 * libFuzzer target for the HTTP front door's input path: the server's own request reader
 * (server/hreq.c on libhttp-parser) and router (server/hdoor.c) fed byte streams split at
 * random points into random-sized reads, as a socket delivers them. The first 8 bytes of an
 * input seed the splits; the rest is the stream.
 *
 * Properties beyond "no crash, no leak, no UB": cut into random reads, the stream yields the
 * same requests, routes and answer bytes as in one read, and fails where one read fails; every call
 * routed to the engine respects the documented bounds (a subject of 1..16 levels with ids of 1..256
 * bytes, tokens within 0..2^40, a settle's reservation non-zero); every answer is one HTTP/1.1
 * response whose Content-Length is its body's. Run longer, from a fuzz build tree:
 *   tests/fuzz/fuzz_http -max_total_time=600 corpus/ ../tests/fuzz/http
 */
#define _GNU_SOURCE /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hdoor.h"
#include "hreq.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static hdoor_map_t map = {
    .subject = {{"team", "X-Team"}, {"key", "X-Api-Key"}}, .n_subject = 2, .tokens = "X-Tokens"};

static bool known(void *ud, const char *level, size_t len)
{
    (void)ud;
    return (len == 4 && memcmp(level, "team", 4) == 0) ||
           (len == 3 && memcmp(level, "key", 3) == 0);
}

/* Each response in out[from, len) is a status line, headers, and a body of Content-Length. */
static void check_answers(const tt_buf_t *out, size_t from, bool head_only)
{
    if (from == out->len)
        return;
    const char *p = (const char *)out->data + from, *end = (const char *)out->data + out->len;
    while (p < end) {
        check(end - p > 12 && memcmp(p, "HTTP/1.1 ", 9) == 0);
        const char *blank = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
        check(blank != NULL);
        const char *cl = memmem(p, (size_t)(blank - p), "\r\nContent-Length: ", 18);
        check(cl != NULL);
        long n = strtol(cl + 18, NULL, 10);
        check(n >= 0);
        p = blank + 4 + (head_only ? 0 : n);
        check(p <= end);
    }
}

/* A decision result shaped by the call, to render through the answer code. */
static void answer_call(const hdoor_call_t *call, hdoor_route_t route, tt_buf_t *out,
                        hdoor_frame_t f)
{
    gov_result_t r = {0};
    if (route == HDOOR_SETTLE) {
        r.settled = (int64_t)(call->reservation & 3);
        r.already_settled = call->tokens & 1;
        if (call->reservation & 4) {
            r.status = GOV_ERESERVATION;
            tt_err_set(&r.err, GOV_ERESERVATION, "", "no such reservation");
        }
        check(hdoor_respond_settled(out, &r, f) == 0);
        return;
    }
    r.admit = call->tokens & 1;
    r.verdict = r.admit ? GOV_ADMIT : GOV_DENY;
    r.reservation = r.admit ? (uint64_t)call->tokens * 2654435761u : 0;
    const gov_pair_t *p = &call->subject.pairs[0];
    snprintf(r.limit, sizeof(r.limit), "%.*s", (int)p->id_len, p->id);
    r.headers[0].name = "RateLimit";
    snprintf(r.headers[0].value, GOV_HEADER_VALUE_MAX, "\"%.*s\";r=1;t=1", (int)p->level_len,
             p->level);
    r.n_headers = 1;
    check(hdoor_respond_decision(out, &r, call->deny_status, f) == 0);
}

static void check_call(const hdoor_call_t *call, hdoor_route_t route)
{
    if (route == HDOOR_SETTLE) {
        check(call->reservation != 0);
        check(call->tokens >= 0 && call->tokens <= GOV_TOKENS_MAX);
        return;
    }
    check(call->subject.n >= 1 && call->subject.n <= GOV_SUBJECT_MAX);
    for (size_t i = 0; i < call->subject.n; i++) {
        const gov_pair_t *p = &call->subject.pairs[i];
        check(p->level_len >= 1 && p->id_len >= 1 && p->id_len <= GOV_ID_MAX);
        for (size_t j = 0; j < i; j++)
            check(p->level_len != call->subject.pairs[j].level_len ||
                  memcmp(p->level, call->subject.pairs[j].level, p->level_len) != 0);
    }
    check(call->tokens == GOV_NO_TOKENS || (call->tokens >= 0 && call->tokens <= GOV_TOKENS_MAX));
    check(call->deny_status == 401 || call->deny_status == 403 || call->deny_status == 429);
}

/* Feeds data in reads whose sizes come from seed (0: one read); returns the last status. */
static int run(const uint8_t *data, size_t len, uint64_t seed, tt_buf_t *out)
{
    static hdoor_call_t call;
    hreq_reader_t rd;
    hreq_init(&rd, hdoor_want, &map);
    hdoor_env_t env = {.map = &map, .decide = true, .known = known};
    size_t off = 0;
    int rc = 0;
    while (off < len) {
        size_t cut = len - off;
        if (seed) {
            seed = seed * 6364136223846793005u + 1442695040888963407u;
            cut = 1 + (size_t)(seed >> 33) % (cut < 64 ? cut : 64);
        }
        size_t end = off + cut;
        while (off < end) { /* one read: every request it completes */
            size_t used;
            const hreq_request_t *req;
            rc = hreq_feed(&rd, data + off, end - off, &used, &req);
            off += used;
            if (rc < 0) {
                hreq_free(&rd);
                return rc;
            }
            if (rc == 0)
                break;
            hdoor_frame_t f = {.keep_alive = req->keep_alive,
                               .head_only = req->method == HTTP_HEAD};
            size_t from = out->len;
            hdoor_route_t route = hdoor_route(&env, req, &call, out, f);
            if (route == HDOOR_DECIDE || route == HDOOR_SETTLE) {
                check_call(&call, route);
                answer_call(&call, route, out, f);
            }
            check_answers(out, from, f.head_only);
            hreq_next(&rd);
        }
    }
    hreq_free(&rd);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t seed;
    memcpy(&seed, data, 8);
    data += 8;
    size -= 8;
    tt_buf_t whole = {0}, split = {0};
    int rc_whole = run(data, size, 0, &whole);
    int rc_split = run(data, size, seed | 1, &split);
    /* Both fail, or neither. Which error can depend on the cuts: libhttp-parser hands a
     * header's bytes over when the header ends or the read does, so a kept-header bound (431)
     * can fire in a cut read before the parser reaches a bad byte further on (400). */
    check((rc_whole < 0) == (rc_split < 0));
    check(whole.len == split.len && (!whole.len || memcmp(whole.data, split.data, whole.len) == 0));
    tt_buf_free(&whole);
    tt_buf_free(&split);
    return 0;
}
