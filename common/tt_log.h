/*
 * tt_log: the one logger of every component (server, membership, share, redis, state). Lines go
 * to stderr, one write(2) each, so lines from several sources never interleave:
 *
 *   logfmt (the default)  ts=2026-12-06T01:43:56.830Z level=warn msg="member dead" member=r2 n=2
 *   json                  {"ts":"2026-12-06T01:43:56.830Z","level":"warn","msg":"member dead",
 *                          "member":"r2","n":2}
 *
 * Every line has ts (UTC, milliseconds), level and msg first, then its fields in the order given.
 * A field is typed: strings are quoted and escaped as the format needs (logfmt quotes only what
 * needs it), integers, booleans and numbers are written bare in both formats, so a JSON reader
 * gets numbers where there are numbers. The format and the level are process-wide, set by the
 * daemon (serve's --log-format and --log-level, server.log_level) before and while it runs; the
 * modules only say what happened:
 *
 *   tt_log(TT_LOG_WARN, "member dead", TT_STR("member", id), TT_INT("n", live));
 *
 * A msg is a constant sentence (what happened), the particulars are fields: an operator greps
 * the msg and reads the fields. Bounds: a string value is cut at TT_LOG_VALUE_MAX bytes (marked
 * "..."), a line at TT_LOG_LINE_MAX; a field that does not fit is dropped whole and the line ends
 * with truncated=true, so a JSON line always parses. Strings are escaped by tt_json_escape (the
 * one escaper: control bytes escaped, bytes that are not UTF-8 written \ufffd).
 */
#ifndef TT_COMMON_TT_LOG_H
#define TT_COMMON_TT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum tt_log_level {
    TT_LOG_DEBUG = 0,
    TT_LOG_INFO,
    TT_LOG_WARN,
    TT_LOG_ERROR,
} tt_log_level_t;

typedef enum tt_log_format {
    TT_LOG_LOGFMT = 0,
    TT_LOG_JSON,
} tt_log_format_t;

#define TT_LOG_LINE_MAX 4096  /* bytes of a line, its newline included */
#define TT_LOG_VALUE_MAX 1024 /* bytes of one string value before it is cut */

/* The level names, in level order and NULL-ended ("debug", "info", "warn", "error"): what
 * --log-level and server.log_level take. */
extern const char *const tt_log_level_names[];

/* "logfmt" or "json" / a level name into *out: 0, or -1 (nothing set) for anything else. */
int tt_log_parse_format(const char *name, tt_log_format_t *out);
int tt_log_parse_level(const char *name, tt_log_level_t *out);

/* Process-wide, on the thread that logs: the format (default logfmt) and the lowest level
 * written (default info). */
void tt_log_set_format(tt_log_format_t format);
void tt_log_set_level(tt_log_level_t level);
tt_log_level_t tt_log_level(void);
/* Whether a line at `level` would be written: for a caller that must work to make its fields. */
bool tt_log_enabled(tt_log_level_t level);

typedef enum tt_log_type {
    TT_LOG_T_STR = 1, /* a NULL string drops the field: an optional field reads naturally */
    TT_LOG_T_INT,
    TT_LOG_T_UINT,
    TT_LOG_T_BOOL,
    TT_LOG_T_NUM, /* a double, %.6g; not finite: null in JSON, NaN/Inf in logfmt */
} tt_log_type_t;

/* One field: a key ([A-Za-z0-9_], chosen by the caller, written as given) and a typed value. */
typedef struct tt_log_field {
    const char *key;
    tt_log_type_t type;
    union {
        const char *s;
        int64_t i;
        uint64_t u;
        bool b;
        double d;
    } v;
} tt_log_field_t;

#define TT_STR(k, x) ((tt_log_field_t){.key = (k), .type = TT_LOG_T_STR, .v.s = (x)})
#define TT_INT(k, x) ((tt_log_field_t){.key = (k), .type = TT_LOG_T_INT, .v.i = (int64_t)(x)})
#define TT_UINT(k, x) ((tt_log_field_t){.key = (k), .type = TT_LOG_T_UINT, .v.u = (uint64_t)(x)})
#define TT_BOOL(k, x) ((tt_log_field_t){.key = (k), .type = TT_LOG_T_BOOL, .v.b = (x)})
#define TT_NUM(k, x) ((tt_log_field_t){.key = (k), .type = TT_LOG_T_NUM, .v.d = (double)(x)})

/* Writes one line (when level is enabled): msg, then the n fields. */
void tt_log_fields(tt_log_level_t level, const char *msg, const tt_log_field_t *fields, size_t n);

/* tt_log(level, msg, TT_STR(..), TT_INT(..), ...): the fields as a compound literal (its first
 * element a placeholder, so a line without fields is a call with none). */
#define tt_log(level, msg, ...)                                                                    \
    tt_log_fields(                                                                                 \
        (level), (msg), (const tt_log_field_t[]){{.key = NULL}, __VA_ARGS__} + 1,                  \
        sizeof((const tt_log_field_t[]){{.key = NULL}, __VA_ARGS__}) / sizeof(tt_log_field_t) - 1)

/*
 * An event that can recur without bound (what a door refuses: an attack makes thousands a
 * second) is logged at most once per interval, so the log cannot be flooded: the first line at
 * once, then one per interval at most, each saying how many came since the line before.
 * tt_log_every counts one occurrence at monotonic `now_ns`; it returns 0 when no line is due,
 * else the occurrences to report (those held back since the last line, and this one).
 */
typedef struct tt_log_every {
    int64_t last_ns;  /* when the last line was due */
    uint64_t pending; /* occurrences since */
    bool started;     /* a line was due once */
} tt_log_every_t;

uint64_t tt_log_every(tt_log_every_t *e, int64_t now_ns, int64_t interval_ns);

/* Renders one line into buf (at least TT_LOG_LINE_MAX bytes) as tt_log_fields would write it at
 * wall time `now_ns`, newline included; returns its length. For tests and the fuzzer. */
size_t tt_log_render(char *buf, tt_log_format_t format, int64_t now_ns, tt_log_level_t level,
                     const char *msg, const tt_log_field_t *fields, size_t n);

#endif
