/*
 * libFuzzer target for the gossip datagram decoder and the core behind it: any bytes through
 * swim_msg_decode, swim_receive and swim_pushpull_receive of a fresh plaintext core (sealed
 * input would only exercise the AEAD's rejection). The clock is set to the datagram's own
 * sent_ns when it decodes, so the fuzzer reaches the state machine, not just the replay check.
 * Properties beyond "no crash, no leak, no UB": a refused datagram changes nothing (same
 * table, nothing sent); an accepted one leaves a consistent table and datagrams <= 1400 bytes.
 * Seeds: tests/fuzz/gossip/ (one datagram of each kind). Run longer, from a fuzz build tree:
 *   tests/fuzz/fuzz_gossip -max_total_time=600 corpus/ ../tests/fuzz/gossip
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_swim.h"
#include "swim_proto.h"

static void consistent(swim_core_t *c)
{
    int live = 0;
    for (size_t i = 0; i < swim_member_count(c); i++) {
        swim_member_view_t v;
        check(swim_member_get(c, i, &v) == 0);
        check(v.id_len >= 1 && v.id_len <= SWIM_ID_MAX && v.meta_len <= SWIM_META_MAX);
        live += v.state == SWIM_ALIVE || v.state == SWIM_SUSPECT;
    }
    check(live == swim_live_count(c));
    const swim_outbox_t *ob = swim_outbox(c);
    for (size_t k = 0; k < ob->n; k++)
        check(ob->dgram[k].len <= SWIM_DATAGRAM_MAX);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int64_t now = T0;
    swim_msg_t m;
    tt_err_t err;
    if (size > SWIM_FRAME_HEAD && swim_msg_decode(&m, data + 2, size - 2, &err) == 0)
        if (m.sent_ns > T0 / 2 && m.sent_ns < T0 * 2) /* a sane clock: the core assumes one */
            now = m.sent_ns;
    swim_core_t *c = fuzz_core();
    swim_addr_t from = {.family = 4, .port = 7946, .ip = {10, 0, 0, 2}};
    int rc = swim_receive(c, now, &from, data, size, &err);
    const char *from_id;
    const uint8_t *payload;
    size_t from_len, len;
    if (rc < 0)
        check(swim_member_count(c) == 1 && swim_outbox(c)->n == 0 &&
              !swim_app_take(c, &from_id, &from_len, &payload, &len));
    else if (swim_app_take(c, &from_id, &from_len, &payload, &len))
        check(len <= SWIM_APP_MAX && from_len >= 1 && from_len <= SWIM_ID_MAX);
    consistent(c);
    swim_tick(c, now + 1000000000);
    consistent(c);
    swim_free(c);

    c = fuzz_core();
    rc = swim_pushpull_receive(c, now, data, size, &err);
    if (rc < 0)
        check(swim_member_count(c) == 1);
    consistent(c);
    swim_free(c);
    return 0;
}
