/*
 * tokentriage fleet [-s SOCK] [--json]: every rate-class limit with the fleet-wide bound its
 * store discloses (SPEC §6): local counts alone on each replica (N x amount), redis is one
 * counter, share divides by N; and the concurrency limits, which only acquire reaches.
 */
#include <stdio.h>

#include "cli.h"
#include "cmd.h"
#include "proto.h"

/* The answer's "node", "n", "n_in_doubt", "snapshot_age_ms" and "acquire_only", above the
 * table. */
static void summary(const tt_response_t *r)
{
    wire_reader_t rd = {.pos = r->raw, .end = r->raw + r->raw_len};
    uint32_t n;
    proto_str_t node = {"?", 1}, doubt = {"", 0};
    int64_t replicas = 0, age_ms = -1;
    char acquire_only[512] = "";
    size_t used = 0;
    if (wire_read_map(&rd, &n))
        return;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, id;
        uint32_t ids;
        if (wire_read_str(&rd, &k))
            return;
        if (wire_str_eq(k, "acquire_only") && wire_read_array(&rd, &ids) == 0) {
            for (uint32_t j = 0; j < ids; j++) {
                if (wire_read_str(&rd, &id))
                    return;
                int w = snprintf(acquire_only + used, sizeof(acquire_only) - used, "%s%.*s",
                                 j ? ", " : "", (int)id.len, id.ptr);
                if (w > 0 && used + (size_t)w < sizeof(acquire_only))
                    used += (size_t)w;
            }
            continue;
        }
        if (wire_str_eq(k, "node") && wire_read_str(&rd, &node) == 0)
            continue;
        if (wire_str_eq(k, "n") && wire_read_int(&rd, &replicas) == 0)
            continue;
        if (wire_str_eq(k, "n_in_doubt") && wire_read_str(&rd, &doubt) == 0)
            continue;
        if (wire_str_eq(k, "snapshot_age_ms") && wire_read_int(&rd, &age_ms) == 0)
            continue;
        if (wire_skip(&rd))
            return;
    }
    printf("node %.*s sees %lld replica%s\n", (int)node.len, node.ptr, (long long)replicas,
           replicas == 1 ? "" : "s");
    if (doubt.len) /* the row an operator must not miss */
        printf("N IN DOUBT: %.*s\n", (int)doubt.len, doubt.ptr);
    if (age_ms >= 0)
        printf("last snapshot of the counters %.1f s ago: an unclean stop now forgets at most the "
               "admissions since\n",
               (double)age_ms / 1000);
    else
        printf("no snapshot of the counters (server.state_dir off, or none yet)\n");
    if (acquire_only[0]) /* not in the table: they have no rate and no fleet bound */
        printf("concurrency limits, which only acquire reaches (decide never counts them): %s\n",
               acquire_only);
    printf("\n");
}

#define HELP                                                                                       \
    "usage: tokentriage fleet [-s SOCKET] [--json]\n"                                              \
    "\n"                                                                                           \
    "Shows what this replica knows of the fleet: how many replicas it sees, the age of its last\n" \
    "snapshot of the counters, and every limit with the fleet-wide bound its store discloses\n"    \
    "(local: each replica counts alone, N x amount; redis: one counter; share: the cap divided\n"  \
    "by N, with the bounds the replicas' views imply).\n"                                          \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET CLI_HELP_JSON CLI_HELP_HELP "\n" CLI_HELP_EXIT

int cmd_fleet(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "fleet", HELP, tt_fleet, "limits", summary);
}
