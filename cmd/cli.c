/* Helpers of the client subcommands; see cli.h. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd.h"
#include "json.h"
#include "proto.h"

int cli_common_option(int ch, cli_common_t *o, const char *help)
{
    switch (ch) {
    case 's':
        o->sock = optarg;
        return CLI_CONTINUE;
    case 'j':
        o->json = true;
        return CLI_CONTINUE;
    case 'h':
        return cmd_help(help);
    default: /* CMD_OPT_BAD: cmd_getopt has said what was wrong */
        return EX_USAGE_;
    }
}

int cli_answer(tt_client_t *c, int rc, const tt_response_t *r, const cli_common_t *o,
               const char *cmd, void (*human)(const tt_response_t *r))
{
    int code = EX_OK_;
    if (rc == 0 && o->json)
        code = cli_print_json(r);
    else if (rc == 0)
        human(r);
    else
        code = cli_fail(rc, r, cmd);
    tt_close(c);
    return code;
}

int cli_subject_add(cli_subject_t *s, char *arg, const char *help)
{
    char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return cmd_usage_error(help, "--subject wants LEVEL=ID, got \"%s\"", arg);
    if (s->n == TT_MAX_LEVELS)
        return cmd_usage_error(help, "at most %d --subject levels", TT_MAX_LEVELS);
    *eq = 0;
    s->pairs[s->n].level = arg;
    s->pairs[s->n].id = eq + 1;
    s->n++;
    return 0;
}

int cli_parse_count(const char *arg, const char *opt, long long min, long long max,
                    const char *help, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (errno || *end || end == arg || v < min || v > max)
        return cmd_usage_error(help, "%s wants an integer from %lld to %lld, got \"%s\"", opt, min,
                               max, arg);
    *out = v;
    return 0;
}

tt_client_t *cli_connect(const char *sock, const char *cmd)
{
    char path[256];
    if (tt_socket_path(path, sizeof(path), sock, NULL, 0) != 0) {
        fprintf(stderr, "tokentriage %s: socket path too long\n", cmd);
        return NULL;
    }
    tt_client_t *c;
    int rc = tt_connect(&c, path);
    if (rc != 0) {
        fprintf(stderr,
                "tokentriage %s: %s at %s (is `tokentriage serve` running? -s or $%s "
                "choose another socket)\n",
                cmd, tt_strerror(rc), path, TT_SOCKET_ENV);
        return NULL;
    }
    tt_set_timeout(c, 10000);
    return c;
}

int cli_fail(int rc, const tt_response_t *r, const char *cmd)
{
    if (rc == TT_ESERVER) {
        fprintf(stderr, "tokentriage %s: %s: %s\n", cmd, r->error_code, r->error_message);
        return EX_DATAERR_;
    }
    fprintf(stderr, "tokentriage %s: %s\n", cmd, tt_strerror(rc));
    return rc == TT_EARG ? EX_USAGE_ : EX_UNAVAILABLE_;
}

/* Whether the answer map msg carries `key` at its top level. */
static bool has_key(const uint8_t *msg, size_t len, const char *key)
{
    wire_reader_t rd = {.pos = msg, .end = msg + len};
    uint32_t n;
    proto_str_t k;
    if (wire_read_map(&rd, &n))
        return false;
    for (uint32_t i = 0; i < n; i++) {
        if (wire_read_str(&rd, &k) || wire_skip(&rd))
            return false;
        if (wire_str_eq(k, key))
            return true;
    }
    return false;
}

/* The answer as JSON. A protocol 2 decision carries its rate headers as numbers: the JSON also
 * has the "headers" map the library rendered from them, as a protocol 1 answer had. */
int cli_print_json(const tt_response_t *r)
{
    tt_buf_t out = {0};
    wire_reader_t rd = {.pos = r->raw, .end = r->raw + r->raw_len};
    int rc = r->raw ? json_from_msgpack(&rd, &out) : -1;
    if (rc == 0 && r->kind == TT_KIND_DECISION && !has_key(r->raw, r->raw_len, "headers") &&
        out.len > 0 && out.data[out.len - 1] == '}') {
        out.len--; /* reopen the map */
        tt_buf_append(&out, ",\"headers\":{", 12);
        for (unsigned i = 0; i < r->nheaders; i++) {
            if (i)
                tt_buf_append(&out, ",", 1);
            tt_json_str(&out, r->headers[i].name, strlen(r->headers[i].name));
            tt_buf_append(&out, ":", 1);
            tt_json_str(&out, r->headers[i].value, strlen(r->headers[i].value));
        }
        tt_buf_append(&out, "}}", 2);
    }
    if (rc || tt_buf_append(&out, "", 1)) {
        tt_buf_free(&out);
        fprintf(stderr, "tokentriage: cannot render the answer as JSON\n");
        return EX_SOFTWARE_;
    }
    printf("%s\n", (char *)out.data);
    tt_buf_free(&out);
    return EX_OK_;
}

/* One scalar as text: strings as they are, other values as their JSON. */
static void cell_text(wire_reader_t *rd, char *cell)
{
    proto_str_t s;
    if (wire_read_str(rd, &s) == 0) {
        snprintf(cell, CLI_CELL, "%.*s", (int)s.len, s.ptr);
        return;
    }
    tt_buf_t out = {0};
    if (json_from_msgpack(rd, &out) == 0 && tt_buf_append(&out, "", 1) == 0)
        snprintf(cell, CLI_CELL, "%s", (char *)out.data);
    else
        snprintf(cell, CLI_CELL, "?");
    tt_buf_free(&out);
}

int cli_table_column(cli_table_t *t, const char *name, size_t len)
{
    char head[CLI_CELL];
    snprintf(head, sizeof(head), "%.*s", (int)len, name);
    for (char *p = head; *p; p++)
        *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    for (size_t c = 0; c < t->cols; c++)
        if (strcmp(t->head[c], head) == 0)
            return (int)c;
    if (t->cols == CLI_COLS)
        return -1;
    memcpy(t->head[t->cols], head, sizeof(head));
    return (int)t->cols++;
}

int cli_table_row(cli_table_t *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        void *rows = realloc(t->rows, cap * sizeof(*t->rows));
        if (!rows)
            return -1;
        t->rows = rows;
        t->cap = cap;
    }
    memset(t->rows[t->n], 0, sizeof(*t->rows));
    return (int)t->n++;
}

void cli_table_set(cli_table_t *t, int row, int col, const char *text)
{
    if (row >= 0 && col >= 0)
        snprintf(t->rows[row][col], CLI_CELL, "%s", text);
}

int cli_table_read_map(cli_table_t *t, int row, wire_reader_t *rd)
{
    uint32_t nf;
    if (wire_read_map(rd, &nf))
        return -1;
    for (uint32_t f = 0; f < nf; f++) {
        proto_str_t name;
        if (wire_read_str(rd, &name))
            return -1;
        int col = cli_table_column(t, name.ptr, name.len);
        if (col >= 0)
            cell_text(rd, t->rows[row][col]);
        else if (wire_skip(rd))
            return -1;
    }
    return 0;
}

int cli_table_read(cli_table_t *t, const uint8_t *raw, size_t len, const char *key)
{
    wire_reader_t rd = {.pos = raw, .end = raw + len};
    uint32_t n;
    if (wire_read_map(&rd, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k;
        if (wire_read_str(&rd, &k))
            return -1;
        if (!wire_str_eq(k, key)) {
            if (wire_skip(&rd))
                return -1;
            continue;
        }
        uint32_t nrows;
        if (wire_read_array(&rd, &nrows))
            return -1;
        for (uint32_t r = 0; r < nrows; r++) {
            int row = cli_table_row(t);
            if (row < 0 || cli_table_read_map(t, row, &rd))
                return -1;
        }
        return 0;
    }
    return 0;
}

const char *cli_table_get(const cli_table_t *t, size_t row, const char *column)
{
    for (size_t c = 0; c < t->cols; c++)
        if (strcasecmp(t->head[c], column) == 0)
            return t->rows[row][c];
    return "";
}

void cli_table_print(const cli_table_t *t, const bool *rows, const bool *cols)
{
    size_t width[CLI_COLS] = {0};
    for (size_t c = 0; c < t->cols; c++) {
        if (cols && !cols[c])
            continue;
        width[c] = strlen(t->head[c]);
        for (size_t r = 0; r < t->n; r++)
            if ((!rows || rows[r]) && strlen(t->rows[r][c]) > width[c])
                width[c] = strlen(t->rows[r][c]);
    }
    size_t last = 0;
    for (size_t c = 0; c < t->cols; c++)
        if (!cols || cols[c])
            last = c;
    char line[CLI_COLS * (CLI_CELL + 2) + 1];
    for (size_t r = 0; r <= t->n; r++) {
        if (r > 0 && rows && !rows[r - 1])
            continue;
        size_t k = 0;
        for (size_t c = 0; c <= last && c < t->cols; c++) {
            if (cols && !cols[c])
                continue;
            const char *cell = r == 0 ? t->head[c] : t->rows[r - 1][c];
            k += (size_t)snprintf(line + k, sizeof(line) - k, "%-*s", (int)width[c] + 2, cell);
        }
        while (k > 0 && line[k - 1] == ' ') /* no trailing blanks after empty cells */
            k--;
        printf("%.*s\n", (int)k, line);
    }
}

void cli_table_free(cli_table_t *t)
{
    free(t->rows);
    *t = (cli_table_t){0};
}

int64_t cli_head_int(const uint8_t *raw, size_t len, const char *key, int64_t absent)
{
    wire_reader_t rd = {.pos = raw, .end = raw + len};
    uint32_t n;
    if (wire_read_map(&rd, &n))
        return absent;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k;
        int64_t v;
        if (wire_read_str(&rd, &k))
            return absent;
        if (wire_str_eq(k, key))
            return wire_read_int(&rd, &v) == 0 ? v : absent;
        if (wire_skip(&rd))
            return absent;
    }
    return absent;
}

void cli_print_table(const tt_response_t *r, const char *key)
{
    cli_table_t t = {0};
    cli_table_read(&t, r->raw, r->raw_len, key);
    cli_table_print(&t, NULL, NULL);
    cli_table_free(&t);
}

/* The listing being printed by cli_run_listing's human form. */
static const char *listing_key;
static void (*listing_summary)(const tt_response_t *r);

static void print_listing(const tt_response_t *r)
{
    if (listing_summary)
        listing_summary(r);
    cli_print_table(r, listing_key);
}

int cli_run_listing(int argc, char **argv, const char *cmd, const char *help, cli_call_fn call,
                    const char *key, void (*summary)(const tt_response_t *r))
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS, {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    int ch, rc;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "s:h", opts, help)) != -1)
        if ((rc = cli_common_option(ch, &o, help)) != CLI_CONTINUE)
            return rc;
    if (optind != argc)
        return cmd_usage_error(help, "unexpected argument \"%s\"", argv[optind]);
    tt_client_t *c = cli_connect(o.sock, cmd);
    if (!c)
        return EX_UNAVAILABLE_;
    static tt_response_t r;
    listing_key = key;
    listing_summary = summary;
    return cli_answer(c, call(c, &r), &r, &o, cmd, print_listing);
}
