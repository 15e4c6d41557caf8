/* The subcommands' help and usage errors, one way for all; see cmd.h. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"

int cmd_help(const char *help)
{
    fputs(help, stdout);
    return EX_OK_;
}

int cmd_usage_error(const char *help, const char *fmt, ...)
{
    char name[32] = "";
    sscanf(help, "usage: tokentriage %31[a-z]", name);
    fprintf(stderr, "tokentriage %s: ", name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    const char *end = strstr(help, "\n\n");
    fwrite(help, 1, end ? (size_t)(end - help) + 1 : strlen(help), stderr);
    fprintf(stderr, "(tokentriage %s --help: what it does, its options, their defaults)\n", name);
    return EX_USAGE_;
}

/* Whether the long option spelled in `word` ("--name" or "--name=value") is longopts' `val`. */
static bool spelled(const char *word, const struct option *longopts, int val)
{
    size_t len = strcspn(word + 2, "=");
    for (const struct option *o = longopts; o && o->name; o++)
        if (o->val == val && strncmp(o->name, word + 2, len) == 0)
            return true;
    return false;
}

/* A long option getopt did not take: unknown, or an abbreviation of several. */
static int unknown_long(const char *word, const struct option *longopts, const char *help)
{
    size_t len = strcspn(word + 2, "=");
    char names[160] = "";
    size_t at = 0, n = 0;
    for (const struct option *o = longopts; o && o->name; o++)
        if (strncmp(o->name, word + 2, len) == 0 && at < sizeof(names)) {
            at +=
                (size_t)snprintf(names + at, sizeof(names) - at, "%s--%s", n ? ", " : "", o->name);
            n++;
        }
    if (n > 1)
        return cmd_usage_error(help, "option '--%.*s' is ambiguous (%s)", (int)len, word + 2,
                               names);
    return cmd_usage_error(help, "unknown option '--%.*s'", (int)len, word + 2);
}

int cmd_getopt(int argc, char *const argv[], const char *optstring, const struct option *longopts,
               const char *help)
{
    /* ':' after the ordering flag ('+' stops at the first word that is no option): a missing
     * argument is told from an unknown option; opterr 0: getopt itself says nothing */
    char spec[64];
    bool ordered = optstring[0] == '+';
    snprintf(spec, sizeof(spec), "%s:%s", ordered ? "+" : "", optstring + ordered);
    opterr = 0;
    int ch = getopt_long(argc, argv, spec, longopts, NULL);
    if (ch != '?' && ch != ':')
        return ch;
    /* the word getopt stopped at: the long option it refused (optopt 0: none it knows, else
     * the option's val), or a short one's, whose letter is optopt */
    const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    bool is_long = strncmp(word, "--", 2) == 0 && (optopt == 0 || spelled(word, longopts, optopt));
    size_t len = is_long ? strcspn(word + 2, "=") : 0;
    if (is_long && optopt == 0)
        unknown_long(word, longopts, help);
    else if (is_long)
        cmd_usage_error(help,
                        ch == ':' ? "option '--%.*s' needs an argument"
                                  : "option '--%.*s' takes no argument",
                        (int)len, word + 2);
    else
        cmd_usage_error(help, ch == ':' ? "option '-%c' needs an argument" : "unknown option '-%c'",
                        optopt);
    return CMD_OPT_BAD;
}
