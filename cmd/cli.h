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
#include "wire.h"

#include <getopt.h>

/* The options every client command takes, first in its getopt_long table. */
#define CLI_COMMON_OPTIONS                                                                         \
    {"socket", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'},                    \
    {                                                                                              \
        "help", no_argument, NULL, 'h'                                                             \
    }
#define CLI_CONTINUE (-1) /* cli_common_option: handled, parse on */

/* The common options' lines of a client command's help (cmd.h), in one wording for all. */
#define CLI_HELP_SOCKET                                                                            \
    "  -s, --socket PATH    the daemon's socket (default: $" TT_SOCKET_ENV ", else\n"              \
    "                       /run/tokentriage/tokentriage.sock, or where a daemon run by an\n"      \
    "                       ordinary user serves: $XDG_RUNTIME_DIR/tokentriage/ or\n"              \
    "                       /tmp/tokentriage-UID/)\n"
#define CLI_HELP_JSON "  --json               print the daemon's answer as one line of JSON\n"
#define CLI_HELP_HELP "  -h, --help           this text\n"
#define CLI_HELP_EXIT                                                                              \
    "exit status: 0 answered, 64 usage, 65 the daemon refused the request (its error on\n"         \
    "stderr), 69 no daemon answers on the socket.\n"

typedef struct cli_common {
    const char *sock;
    bool json;
} cli_common_t;

/* Handles -s, --json and -h (the command's help, cmd.h); anything else is CMD_OPT_BAD, a usage
 * error cmd_getopt has said (commands handle their own options first). Returns CLI_CONTINUE, or
 * the exit code to return now. */
int cli_common_option(int ch, cli_common_t *o, const char *help);

/* --subject LEVEL=ID, collected in order; the strings point into argv (split at '='). */
typedef struct cli_subject {
    tt_pair_t pairs[TT_MAX_LEVELS];
    size_t n;
} cli_subject_t;

/* Adds one LEVEL=ID. Returns 0, or EX_USAGE_ after the usage error (cmd_usage_error with the
 * command's `help`). */
int cli_subject_add(cli_subject_t *s, char *arg, const char *help);

/* Parses option `opt`'s integer, min ..= max. Returns 0, or EX_USAGE_ after the usage error. */
int cli_parse_count(const char *arg, const char *opt, long long min, long long max,
                    const char *help, long long *out);

/* Connects (sock NULL: the resolved default); on failure prints where it tried and returns
 * NULL. */
tt_client_t *cli_connect(const char *sock, const char *cmd);

/* Maps a client error to an exit code, printing it (and the daemon's message) to stderr. */
int cli_fail(int rc, const tt_response_t *r, const char *cmd);

/* Prints the answer map as one line of JSON on stdout. Returns an exit code. */
int cli_print_json(const tt_response_t *r);

/* The integer under `key` of the answer map raw[0, len), or `absent` when it has none. */
int64_t cli_head_int(const uint8_t *raw, size_t len, const char *key, int64_t absent);

/* Prints the array of maps under `key` of the answer as an aligned table, columns in the
 * order their keys first appear. */
void cli_print_table(const tt_response_t *r, const char *key);

/* A table of text cells: a column per key (upper-cased), a row per map. Cells are cut at
 * CLI_CELL - 1 bytes; keys past CLI_COLS are dropped. */
#define CLI_CELL 64
#define CLI_COLS 32
typedef struct cli_table {
    size_t cols;
    char head[CLI_COLS][CLI_CELL];
    char (*rows)[CLI_COLS][CLI_CELL];
    size_t n, cap;
} cli_table_t;

/* The column named `name` (name[0, len)), added at the end if new; -1 when the table is full. */
int cli_table_column(cli_table_t *t, const char *name, size_t len);
/* Appends an empty row; its index, or -1 (out of memory). */
int cli_table_row(cli_table_t *t);
void cli_table_set(cli_table_t *t, int row, int col, const char *text);
/* Reads one msgpack map into `row`, a column per key. 0 or -1 (not a map). */
int cli_table_read_map(cli_table_t *t, int row, wire_reader_t *rd);
/* A row per map of the array under `key` of the answer map raw[0, len). 0 or -1. */
int cli_table_read(cli_table_t *t, const uint8_t *raw, size_t len, const char *key);
/* The cell of `column` (any case) in `row`; "" when there is no such column. */
const char *cli_table_get(const cli_table_t *t, size_t row, const char *column);
/* Prints the header and the rows: only rows[r] and cols[c] that are true (NULL: all). */
void cli_table_print(const cli_table_t *t, const bool *rows, const bool *cols);
void cli_table_free(cli_table_t *t);

/* Prints an answer (JSON with --json, else human(r)) or the error, closes c, and returns the
 * exit code. */
int cli_answer(tt_client_t *c, int rc, const tt_response_t *r, const cli_common_t *o,
               const char *cmd, void (*human)(const tt_response_t *r));

/* The whole of `fleet` and `members`: [-s SOCK] [--json], one blocking call, then the array
 * under `key` as a table (after the `summary` line) or the answer as JSON. */
typedef int (*cli_call_fn)(tt_client_t *c, tt_response_t *r);
int cli_run_listing(int argc, char **argv, const char *cmd, const char *help, cli_call_fn call,
                    const char *key, void (*summary)(const tt_response_t *r));

#endif
