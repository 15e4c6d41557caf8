/* tokentriage: one binary, one subcommand per file. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "config.h" /* cfg_suggest: the one "did you mean" */
#include "tt_commit.h"

#define VERSION_HELP                                                                               \
    "usage: tokentriage version\n"                                                                 \
    "       tokentriage --version\n"                                                               \
    "\n"                                                                                           \
    "Prints the version and the commit this binary was built from (\"unknown\" when it was\n"      \
    "built outside a git checkout without -DTT_COMMIT).\n"

static int cmd_version(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))
        return cmd_help(VERSION_HELP);
    if (argc > 1)
        return cmd_usage_error(VERSION_HELP, "unexpected argument \"%s\"", argv[1]);
    printf("tokentriage %s (commit %s)\n", TT_VERSION, TT_COMMIT);
    return EX_OK_;
}

static const struct command {
    const char *name;
    cmd_fn run;
    const char *summary;
} commands[] = {
    {"serve", cmd_serve, "run the daemon"},
    {"validate", cmd_validate, "check a configuration file (--arm: as serve would take it)"},
    {"decide", cmd_decide, "ask once whether a request may go"},
    {"settle", cmd_settle, "correct a tpm reservation with the tokens really used"},
    {"charge", cmd_charge, "count tokens known after the fact"},
    {"acquire", cmd_acquire, "run a command holding a concurrency lease"},
    {"fleet", cmd_fleet, "every limit with the fleet-wide bound its store discloses"},
    {"members", cmd_members, "the replicas this one knows"},
    {"simulate", cmd_simulate,
     "replay arrivals through one limit, or recorded traffic through a config"},
    {"state", cmd_state, "what a snapshot of the counters holds"},
    {"bench", cmd_bench, "load the decision socket and measure it"},
    {"version", cmd_version, "the version and the commit"},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static int usage(FILE *to)
{
    fprintf(to, "usage: tokentriage <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(to, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(to, "\n`tokentriage <command> --help` (or `tokentriage help <command>`) says what a "
                "command does,\nits options and their defaults.\n");
    return to == stdout ? EX_OK_ : EX_USAGE_;
}

static const struct command *find(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    return NULL;
}

/* An unknown command, with the closest known one when there is one. */
static int unknown(const char *name)
{
    const char *names[NCOMMANDS + 1];
    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    names[NCOMMANDS] = NULL;
    const char *guess = cfg_suggest(name, names);
    if (guess)
        fprintf(stderr, "tokentriage: unknown command \"%s\"; did you mean \"%s\"?\n", name, guess);
    else
        fprintf(stderr, "tokentriage: unknown command \"%s\" (tokentriage --help lists them)\n",
                name);
    return EX_USAGE_;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return usage(stderr);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        (strcmp(argv[1], "help") == 0 && argc == 2))
        return usage(stdout);
    if (strcmp(argv[1], "--version") == 0) /* what every other tool answers to */
        return cmd_version(argc - 1, argv + 1);
    if (strcmp(argv[1], "help") == 0) { /* help COMMAND: its --help */
        const struct command *c = find(argv[2]);
        if (!c || argc > 3)
            return c ? usage(stderr) : unknown(argv[2]);
        static char help_opt[] = "--help";
        char *help_argv[] = {argv[2], help_opt, NULL};
        return c->run(2, help_argv);
    }
    const struct command *c = find(argv[1]);
    return c ? c->run(argc - 1, argv + 1) : unknown(argv[1]);
}
