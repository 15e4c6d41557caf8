/* logfmt and JSON lines on stderr; see tt_log.h. */
#include "tt_log.h"

#include "tt_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *const tt_log_level_names[] = {"debug", "info", "warn", "error", NULL};

static tt_log_format_t log_format = TT_LOG_LOGFMT;
static tt_log_level_t log_level = TT_LOG_INFO;

int tt_log_parse_format(const char *name, tt_log_format_t *out)
{
    if (strcmp(name, "logfmt") == 0)
        *out = TT_LOG_LOGFMT;
    else if (strcmp(name, "json") == 0)
        *out = TT_LOG_JSON;
    else
        return -1;
    return 0;
}

int tt_log_parse_level(const char *name, tt_log_level_t *out)
{
    for (int i = 0; tt_log_level_names[i]; i++)
        if (strcmp(name, tt_log_level_names[i]) == 0) {
            *out = (tt_log_level_t)i;
            return 0;
        }
    return -1;
}

void tt_log_set_format(tt_log_format_t format)
{
    log_format = format;
}

void tt_log_set_level(tt_log_level_t level)
{
    log_level = level;
}

tt_log_level_t tt_log_level(void)
{
    return log_level;
}

bool tt_log_enabled(tt_log_level_t level)
{
    return level >= log_level;
}

/* ---- one line ------------------------------------------------------------------------------ */

/* What every line keeps free for its end: the truncation mark, the closing brace, the newline. */
#define TAIL_RESERVE 24

/* A line being built. A write that does not fit sets `over` and writes nothing more: the caller
 * takes the field back whole. */
struct line {
    char *buf;
    size_t len, cap; /* cap: what fields may use, TAIL_RESERVE short of the buffer */
    bool over;
    tt_log_format_t format;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (l->over || n > l->cap - l->len) {
        l->over = true;
        return;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

/* A logfmt value goes bare only when it is printable ASCII without a space, a quote, an equals
 * sign or a backslash (and is not empty). */
static bool needs_quotes(const char *v)
{
    if (!*v)
        return true;
    for (const unsigned char *p = (const unsigned char *)v; *p; p++)
        if (*p <= ' ' || *p >= 0x7f || *p == '"' || *p == '=' || *p == '\\')
            return true;
    return false;
}

/* A string's bytes inside double quotes, escaped by the one JSON escaper (logfmt readers take
 * the same escapes): at most TT_LOG_VALUE_MAX bytes of it as written, then "...". */
static void escaped(struct line *l, const char *v)
{
    if (l->over)
        return;
    size_t n = strlen(v), room = l->cap - l->len, used;
    size_t cap = room < TT_LOG_VALUE_MAX ? room : TT_LOG_VALUE_MAX;
    l->len += tt_json_escape(l->buf + l->len, cap, v, n, &used);
    if (used == n)
        return;
    if (cap == room) /* the line is full: the caller drops the field */
        l->over = true;
    else
        puts_(l, "...");
}

static void key(struct line *l, const char *k, bool first)
{
    if (l->format == TT_LOG_JSON) {
        puts_(l, first ? "{\"" : ",\"");
        escaped(l, k);
        puts_(l, "\":");
    } else {
        if (!first)
            puts_(l, " ");
        puts_(l, k);
        puts_(l, "=");
    }
}

static void string_value(struct line *l, const char *v)
{
    if (l->format == TT_LOG_LOGFMT && !needs_quotes(v) && strlen(v) <= TT_LOG_VALUE_MAX) {
        puts_(l, v);
        return;
    }
    puts_(l, "\"");
    escaped(l, v);
    puts_(l, "\"");
}

static void value(struct line *l, const tt_log_field_t *f)
{
    char num[40];
    switch (f->type) {
    case TT_LOG_T_STR:
        string_value(l, f->v.s);
        return;
    case TT_LOG_T_INT:
        snprintf(num, sizeof num, "%" PRId64, f->v.i);
        break;
    case TT_LOG_T_UINT:
        snprintf(num, sizeof num, "%" PRIu64, f->v.u);
        break;
    case TT_LOG_T_BOOL:
        snprintf(num, sizeof num, "%s", f->v.b ? "true" : "false");
        break;
    case TT_LOG_T_NUM:
        if (isfinite(f->v.d))
            snprintf(num, sizeof num, "%.10g", f->v.d);
        else
            snprintf(num, sizeof num, "%s",
                     l->format == TT_LOG_JSON ? "null"
                     : isnan(f->v.d)          ? "NaN"
                                              : "Inf");
        break;
    default:
        snprintf(num, sizeof num, "%s", l->format == TT_LOG_JSON ? "null" : "?");
        break;
    }
    puts_(l, num);
}

size_t tt_log_render(char *buf, tt_log_format_t format, int64_t now_ns, tt_log_level_t level,
                     const char *msg, const tt_log_field_t *fields, size_t n)
{
    struct line l = {.buf = buf, .cap = TT_LOG_LINE_MAX - TAIL_RESERVE, .format = format};
    time_t secs = (time_t)(now_ns / 1000000000);
    long ms = (long)(now_ns % 1000000000 / 1000000);
    if (ms < 0) {
        secs--;
        ms += 1000;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    char when[48];
    size_t w = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + w, sizeof(when) - w, ".%03ldZ", ms);
    unsigned lv = (unsigned)level <= TT_LOG_ERROR ? (unsigned)level : TT_LOG_ERROR;

    key(&l, "ts", true);
    string_value(&l, when);
    key(&l, "level", false);
    string_value(&l, tt_log_level_names[lv]);
    key(&l, "msg", false);
    string_value(&l, msg ? msg : ""); /* always fits: a value is cut at TT_LOG_VALUE_MAX */
    bool truncated = false;
    for (size_t i = 0; i < n; i++) {
        const tt_log_field_t *f = &fields[i];
        if (!f->key || (f->type == TT_LOG_T_STR && !f->v.s))
            continue;
        size_t mark = l.len;
        key(&l, f->key, false);
        value(&l, f);
        if (l.over) { /* the field whole, or not at all */
            l.len = mark;
            l.over = false;
            truncated = true;
        }
    }
    /* the tail always fits: cap keeps TAIL_RESERVE bytes */
    const char *tail = format == TT_LOG_JSON ? (truncated ? ",\"truncated\":true}\n" : "}\n")
                                             : (truncated ? " truncated=true\n" : "\n");
    size_t tl = strlen(tail);
    memcpy(buf + l.len, tail, tl);
    return l.len + tl;
}

void tt_log_fields(tt_log_level_t level, const char *msg, const tt_log_field_t *fields, size_t n)
{
    if (!tt_log_enabled(level))
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char buf[TT_LOG_LINE_MAX];
    size_t len = tt_log_render(buf, log_format, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec, level,
                               msg, fields, n);
    ssize_t wr = write(STDERR_FILENO, buf, len);
    (void)wr;
}

uint64_t tt_log_every(tt_log_every_t *e, int64_t now_ns, int64_t interval_ns)
{
    e->pending++;
    if (e->started && now_ns - e->last_ns < interval_ns)
        return 0;
    uint64_t n = e->pending;
    *e = (tt_log_every_t){.last_ns = now_ns, .started = true};
    return n;
}
