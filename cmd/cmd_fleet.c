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
    proto_reader_t rd = {r->raw, r->raw + r->raw_len};
    uint32_t n;
    proto_str_t node = {"?", 1};
    int64_t replicas = 0;
    if (proto_read_map(&rd, &n))
        return;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k;
        if (proto_read_str(&rd, &k))
            return;
        if (proto_str_eq(k, "node") && proto_read_str(&rd, &node) == 0)
            continue;
        if (proto_str_eq(k, "n") && proto_read_int(&rd, &replicas) == 0)
            continue;
        if (proto_skip(&rd))
            return;
    }
    printf("node %.*s sees %lld replica%s\n\n", (int)node.len, node.ptr, (long long)replicas,
           replicas == 1 ? "" : "s");
}

int cmd_fleet(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "fleet", tt_fleet, "limits", summary);
}
