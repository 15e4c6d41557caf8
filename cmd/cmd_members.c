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
    "(alive, suspect, dead, left). A replica without shared_state.share knows itself alone.\n"     \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET CLI_HELP_JSON CLI_HELP_HELP "\n" CLI_HELP_EXIT

int cmd_members(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "members", HELP, tt_members, "members", NULL);
}
