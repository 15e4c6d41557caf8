/* tokentriage: one binary, one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "tt_commit.h"

static int cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("tokentriage %s (commit %s)\n", TT_VERSION, TT_COMMIT);
    return EX_OK_;
}

static const struct command {
    const char *name;
    cmd_fn run;
    const char *usage;
} commands[] = {
    {"version", cmd_version, "version"},
    {"validate", cmd_validate, "validate [--arm [--offline]] [--explain] FILE"},
    {"simulate", cmd_simulate,
     "simulate --algorithm A --amount R --period D [--burst B] [--type rpm|tpm]\n"
     "                       [--replicas N | --share NUM/DEN] [FILE]"},
    {"serve", cmd_serve, "serve [-c FILE] [-s SOCKET] [--log-format logfmt|json]"},
    {"decide", cmd_decide, "decide [-s SOCKET] --subject LEVEL=ID... [--tokens N] [--json]"},
    {"settle", cmd_settle, "settle [-s SOCKET] --reservation ID --actual A [--json]"},
    {"charge", cmd_charge, "charge [-s SOCKET] --subject LEVEL=ID... --tokens N [--json]"},
    {"fleet", cmd_fleet, "fleet [-s SOCKET] [--json]"},
    {"members", cmd_members, "members [-s SOCKET] [--json]"},
    {"state", cmd_state, "state inspect FILE [--json]"},
    {"bench", cmd_bench, "bench [-s SOCKET] [-c CONNS] [-p DEPTH] [-k KEYS] [-d SECS | -n COUNT]"},
};

static int usage(FILE *to)
{
    fprintf(to, "usage: tokentriage <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(to, "  tokentriage %s\n", commands[i].usage);
    return to == stdout ? EX_OK_ : EX_USAGE_;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0)
        return usage(stdout);
    if (strcmp(argv[1], "--version") == 0) /* what every other tool answers to */
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "tokentriage: unknown command \"%s\"\n", argv[1]);
    return usage(stderr);
}
