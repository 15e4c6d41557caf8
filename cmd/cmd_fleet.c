/*
 * tokentriage fleet [-s SOCK] [--json]: every rate-class limit with the fleet-wide bound its
 * store discloses (SPEC §6): local counts alone on each replica (N x amount), redis is one
 * counter, share divides by N.
 */
#include <stdio.h>

#include "cli.h"
#include "cmd.h"
#include "proto.h"

/* The answer's "node" and "n", above the table. */
static void summary(const tt_response_t *r)
{
    wire_reader_t rd = {.pos = r->raw, .end = r->raw + r->raw_len};
    uint32_t n;
    proto_str_t node = {"?", 1};
    int64_t replicas = 0;
    if (wire_read_map(&rd, &n))
        return;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k;
        if (wire_read_str(&rd, &k))
            return;
        if (wire_str_eq(k, "node") && wire_read_str(&rd, &node) == 0)
            continue;
        if (wire_str_eq(k, "n") && wire_read_int(&rd, &replicas) == 0)
            continue;
        if (wire_skip(&rd))
            return;
    }
    printf("node %.*s sees %lld replica%s\n\n", (int)node.len, node.ptr, (long long)replicas,
           replicas == 1 ? "" : "s");
}

int cmd_fleet(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "fleet", tt_fleet, "limits", summary);
}
