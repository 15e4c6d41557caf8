/* The subcommands of the tokentriage binary. Each returns a process exit code (sysexits). */
#ifndef TT_CMD_H
#define TT_CMD_H

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
 * prints all of it on stdout (cmd_help, exit 0); a usage error prints the usage lines and where
 * the rest is on stderr (cmd_usage_error, exit 64).
 */
int cmd_help(const char *help);
int cmd_usage_error(const char *help);

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
