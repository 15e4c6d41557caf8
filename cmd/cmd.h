/* The subcommands of the tokentriage binary. Each returns a process exit code (sysexits). */
#ifndef TT_CMD_H
#define TT_CMD_H

#include <getopt.h>

#define EX_OK_ 0
#define EX_USAGE_ 64
#define EX_DATAERR_ 65
#define EX_NOINPUT_ 66
#define EX_UNAVAILABLE_ 69
#define EX_SOFTWARE_ 70
#define EX_CONFIG_ 78

typedef int (*cmd_fn)(int argc, char **argv);

/*
 * A subcommand's help text is its usage line(s), a blank line, a paragraph of what it does,
 * then its options with their defaults (and its exit status where it has its own). --help
 * prints all of it on stdout (cmd_help, exit 0); a usage error prints on stderr what was wrong,
 * `tokentriage SUB: ` and the printf-formatted message, then the usage lines and where the rest
 * is (cmd_usage_error, which returns EX_USAGE_, 64).
 */
int cmd_help(const char *help);
int cmd_usage_error(const char *help, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What cmd_getopt returns for an option it refused, after saying why. */
#define CMD_OPT_BAD '?'

/* getopt_long for a subcommand whose help text is `help`: an unknown or ambiguous option, a
 * missing argument or one given to an option that takes none is said as every usage error is
 * (cmd_usage_error: "tokentriage decide: unknown option '--bogus'", the usage, the hint), not in
 * getopt's words, and returns CMD_OPT_BAD: the caller returns EX_USAGE_. optstring as getopt's
 * ('+' first: options end at the first word that is not one). */
int cmd_getopt(int argc, char *const argv[], const char *optstring, const struct option *longopts,
               const char *help);

int cmd_validate(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
/* simulate --config NEW --traffic FILE: recorded decisions replayed (traffic.c). */
int cmd_simulate_traffic(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_decide(int argc, char **argv);
int cmd_settle(int argc, char **argv);
int cmd_charge(int argc, char **argv);
int cmd_fleet(int argc, char **argv);
int cmd_members(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_state(int argc, char **argv);
int cmd_acquire(int argc, char **argv);

#endif
