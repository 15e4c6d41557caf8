/*
 * tokentriage members [-s SOCK] [--json]: the replicas this one knows, with their state
 * (SPEC §7). A replica without membership knows itself alone.
 */
#include <stdio.h>

#include "cli.h"
#include "cmd.h"

int cmd_members(int argc, char **argv)
{
    return cli_run_listing(argc, argv, "members", tt_members, "members", NULL);
}
