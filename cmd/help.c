/* The subcommands' help and usage errors, one way for all; see cmd.h. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"

int cmd_help(const char *help)
{
    fputs(help, stdout);
    return EX_OK_;
}

int cmd_usage_error(const char *help)
{
    const char *end = strstr(help, "\n\n");
    fwrite(help, 1, end ? (size_t)(end - help) + 1 : strlen(help), stderr);
    char name[32] = "";
    if (sscanf(help, "usage: tokentriage %31[a-z]", name) == 1)
        fprintf(stderr, "(tokentriage %s --help: what it does, its options, their defaults)\n",
                name);
    return EX_USAGE_;
}
