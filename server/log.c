/* logfmt and JSON lines on stderr; see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static srv_log_format_t format = SRV_LOG_LOGFMT;
static const srv_log_level_t min_level = SRV_LOG_INFO;

int srv_log_parse_format(const char *name, srv_log_format_t *out)
{
    if (strcmp(name, "logfmt") == 0)
        *out = SRV_LOG_LOGFMT;
    else if (strcmp(name, "json") == 0)
        *out = SRV_LOG_JSON;
    else
        return -1;
    return 0;
}

void srv_log_set_format(srv_log_format_t f)
{
    format = f;
}

/* A line being built; overflow truncates (the line still ends in a newline). */
struct line {
    char buf[2048];
    size_t len;
};

static void put(struct line *l, const char *s, size_t n)
{
    size_t room = sizeof(l->buf) - 1 - l->len; /* keep one byte for the newline */
    if (n > room)
        n = room;
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

static int needs_quotes(const char *v)
{
    if (!*v)
        return 1;
    for (const char *p = v; *p; p++)
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p == 0x7f)
            return 1;
    return 0;
}

/* Escapes a value for a double-quoted logfmt or JSON string. */
static void escaped(struct line *l, const char *v)
{
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p;
            put(l, esc, 2);
        } else if (*p == '\n') {
            put(l, "\\n", 2);
        } else if (*p < 0x20) {
            put(l, esc, (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *p));
        } else {
            put(l, (const char *)p, 1);
        }
    }
}

static void field(struct line *l, const char *k, const char *v, int first)
{
    if (format == SRV_LOG_JSON) {
        puts_(l, first ? "{\"" : ",\"");
        escaped(l, k);
        puts_(l, "\":\"");
        escaped(l, v);
        puts_(l, "\"");
        return;
    }
    if (!first)
        puts_(l, " ");
    puts_(l, k);
    puts_(l, "=");
    if (needs_quotes(v)) {
        puts_(l, "\"");
        escaped(l, v);
        puts_(l, "\"");
    } else {
        puts_(l, v);
    }
}

void srv_log(srv_log_level_t level, const char *msg, ...)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    if (level < min_level)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    size_t n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + n, sizeof(when) - n, ".%03ldZ", ts.tv_nsec / 1000000);

    struct line l = {.len = 0};
    field(&l, "ts", when, 1);
    field(&l, "level", names[level], 0);
    field(&l, "msg", msg, 0);
    va_list ap;
    va_start(ap, msg);
    for (const char *k; (k = va_arg(ap, const char *));) {
        const char *v = va_arg(ap, const char *);
        if (v)
            field(&l, k, v, 0);
    }
    va_end(ap);
    if (format == SRV_LOG_JSON)
        put(&l, "}", 1);
    l.buf[l.len++] = '\n';
    ssize_t w = write(STDERR_FILENO, l.buf, l.len);
    (void)w;
}
