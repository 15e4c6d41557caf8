/*
 * What the client subcommands (decide, settle, fleet, members, bench) share: the common
 * options, connecting with a clear error, --subject parsing, and printing answers as JSON or
 * as tables.
 */
#ifndef TT_CMD_CLI_H
#define TT_CMD_CLI_H

#include <stdbool.h>
#include <stddef.h>

#include "tokentriage.h"

/* --subject LEVEL=ID, collected in order; the strings point into argv (split at '='). */
typedef struct cli_subject {
    tt_pair_t pairs[TT_MAX_LEVELS];
    size_t n;
} cli_subject_t;

/* Adds one LEVEL=ID. Returns 0, or -1 after printing why to stderr. */
int cli_subject_add(cli_subject_t *s, char *arg, const char *cmd);

/* Parses a non-negative integer option. Returns 0 or -1 after printing why. */
int cli_parse_count(const char *arg, const char *opt, const char *cmd, long long max,
                    long long *out);

/* Connects (sock NULL: the resolved default); on failure prints where it tried and returns
 * NULL. */
tt_client_t *cli_connect(const char *sock, const char *cmd);

/* Maps a client error to an exit code, printing it (and the daemon's message) to stderr. */
int cli_fail(int rc, const tt_response_t *r, const char *cmd);

/* Prints the answer map as one line of JSON on stdout. Returns an exit code. */
int cli_print_json(const tt_response_t *r);

/* Prints the array of maps under `key` of the answer as an aligned table, columns in the
 * first row's key order. */
void cli_print_table(const tt_response_t *r, const char *key);

/* The whole of `fleet` and `members`: [-s SOCK] [--json], one blocking call, then the array
 * under `key` as a table (after the `summary` line) or the answer as JSON. */
typedef int (*cli_call_fn)(tt_client_t *c, tt_response_t *r);
int cli_run_listing(int argc, char **argv, const char *cmd, cli_call_fn call, const char *key,
                    void (*summary)(const tt_response_t *r));

#endif
