/*
 * Structured logs on stderr: logfmt by default (`ts=... level=info msg="listening" socket=...`),
 * one JSON object per line with --log-format json. Every line is written with one write(2), so
 * lines from several sources never interleave.
 */
#ifndef TT_SERVER_LOG_H
#define TT_SERVER_LOG_H

typedef enum srv_log_level {
    SRV_LOG_DEBUG = 0,
    SRV_LOG_INFO,
    SRV_LOG_WARN,
    SRV_LOG_ERROR,
} srv_log_level_t;

typedef enum srv_log_format {
    SRV_LOG_LOGFMT = 0,
    SRV_LOG_JSON,
} srv_log_format_t;

/* Process-wide settings, set once at start. Parses "logfmt" or "json"; returns 0 or -1. */
int srv_log_parse_format(const char *name, srv_log_format_t *out);
void srv_log_set_format(srv_log_format_t f);

/*
 * Logs one line: msg, then key/value string pairs, ended by NULL:
 *   srv_log(SRV_LOG_INFO, "listening", "socket", path, "mode", "0660", NULL);
 * A NULL value is skipped with its key. Values are quoted and escaped as the format needs.
 */
void srv_log(srv_log_level_t level, const char *msg, ...) __attribute__((sentinel));

#endif
