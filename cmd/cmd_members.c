/*
 * tokentriage members [-s SOCK] [--json]: the replicas this one knows, with their state
 * (SPEC §7). A replica without membership knows itself alone.
 */
#include <stdio.h>

#include "cli.h"
#include "cmd.h"

#define HELP                                                                                       \
    "usage: tokentriage members [-s SOCKET] [--json]\n"                                            \
    "\n"                                                                                           \
    "Lists the replicas this one knows through gossip, with their address, generation and state\n" \
    "(alive, suspect, dead, left), and after a restart the members it knew before and has not\n"   \
    "heard from yet (unheard), which its N counts for a while. A replica without\n"                \
    "shared_state.share knows itself alone.\n"                                                     \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET CLI_HELP_JSON CLI_HELP_HELP "\n" CLI_HELP_EXIT

/* Above the table while a restart's unheard members are counted: why N is more than the live
 * rows (docs/share.md, "A restart's memory"). */
static void summary(const tt_response_t *r)
{
    int64_t live = cli_head_int(r->raw, r->raw_len, "live", 0),
            unheard = cli_head_int(r->raw, r->raw_len, "unheard", 0),
            for_ms = cli_head_int(r->raw, r->raw_len, "unheard_for_ms", 0);
    if (unheard <= 0)
        return;
    printf("N = %lld: %lld live (alive or suspect, this one included) and %lld unheard: members "
           "this replica knew before its restart and has not heard from since, counted in N until "
           "they are found, for at most %.0f s more\n\n",
           (long long)(live + unheard), (long long)live, (long long)unheard, (double)for_ms / 1000);
}

int cmd_members(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "members", HELP, tt_members, "members", summary);
}
