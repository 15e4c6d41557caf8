/*
 * libFuzzer target for the demand payload (share/demand_wire.h) and the core that applies it.
 * Properties beyond "no crash, no leak, no UB": a payload that decodes re-encodes (the encoder
 * accepts all the decoder does) to one that decodes to the same items; a payload that does not
 * decode leaves the receiving core's tables as they were.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "demand.h"
#include "demand_wire.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static demand_msg_t a, b;
static uint8_t buf[DEMAND_WIRE_DATAGRAM_MAX * 2];
static demand_core_t *core;
static int64_t now = 1;

/* What the core answers (early grants, ticks) must decode and fit the datagram. */
static void emitted(void *ctx, const char *to, size_t to_len, const uint8_t *bytes, size_t len)
{
    (void)ctx;
    check(to_len == 4 && memcmp(to, "peer", 4) == 0);
    check(len <= 1150 && demand_wire_decode(bytes, len, &b, NULL) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!core) {
        demand_config_t cfg;
        demand_config_default(&cfg);
        cfg.keys_max = cfg.owned_max = cfg.leases_max = 64;
        demand_member_t m[] = {{"self", 4}, {"peer", 4}};
        check(demand_new(&core, &cfg, "self", 4, NULL) == 0);
        demand_set_members(core, m, 2, 2, 0);
    }
    tt_err_t err = {0};
    int rc = demand_wire_decode(data, size, &a, &err);
    if (rc == 0) {
        int len = demand_wire_encode(a.kind, a.items, a.n, buf, sizeof(buf));
        check(len > 0);
        check(demand_wire_decode(buf, (size_t)len, &b, NULL) == 0);
        check(a.kind == b.kind && a.n == b.n);
        for (uint32_t i = 0; i < a.n; i++)
            check(a.items[i].identity == b.items[i].identity &&
                  a.items[i].key_len == b.items[i].key_len &&
                  memcmp(a.items[i].key, b.items[i].key, a.items[i].key_len) == 0 &&
                  a.items[i].value == b.items[i].value && a.items[i].ttl_ms == b.items[i].ttl_ms);
    } else {
        check(rc == DEMAND_EWIRE && a.n == 0 && err.code == DEMAND_EWIRE && err.path[0] &&
              err.message[0]);
    }
    uint64_t before =
        demand_counters(core)->reports_received + demand_counters(core)->grants_received;
    now += 1000000; /* 1 ms per input: early grant passes are 62.5 ms apart */
    rc = demand_receive(core, now, "peer", 4, data, size, NULL);
    if (rc < 0)
        check(demand_counters(core)->reports_received + demand_counters(core)->grants_received ==
              before);
    demand_flush(core, now, emitted, NULL);
    if (demand_flush_deadline(core) != INT64_MAX)
        check(demand_flush_deadline(core) <= now + 500000000 / 8);
    if (size && data[0] == 0x93 && (now / 1000000) % 64 == 0)
        demand_tick(core, now, emitted, NULL); /* now and then, the owner's tick */
    return 0;
}
