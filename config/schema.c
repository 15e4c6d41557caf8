/* The schema's readers of one field (shapes, scalars, integers, durations, addresses, names with
 * suggestions) and the report of one finding; see schema.h. */
#include "schema.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const cfg__store_names[] = {"local", "share", "redis", NULL};

static void add(struct cfg__ctx *c, bool warning, const char *path, const cfg_node_t *at,
                const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (!warning)
        c->errors++;
    cfg_pos_t pos = {c->file, at ? at->line : 1, at ? at->col : 1};
    if (cfg__report_add(c->report, warning, CFG_EINVALID, path, &pos, "%s", msg) < 0)
        c->oom = 1;
}

__attribute__((format(printf, 4, 5))) void cfg__err(struct cfg__ctx *c, const char *path,
                                                    const cfg_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(c, false, path, at, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 5))) void cfg__warn(struct cfg__ctx *c, const char *path,
                                                     const cfg_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(c, true, path, at, fmt, ap);
    va_end(ap);
}

const char *cfg__join(char *buf, const char *base, const char *key)
{
    if (!*key)
        key = "\"\""; /* an empty key: a path must name something the operator can find */
    if (snprintf(buf, PATH_SIZE, "%s%s%s", base, *base ? "." : "", key) >= PATH_SIZE)
        memcpy(buf + PATH_SIZE - 4, "...", 4); /* paths are short; a key may not be */
    return buf;
}

/* ---- suggestions ---- */

/* Optimal string alignment distance (Levenshtein plus adjacent transpositions), on the
 * first 63 bytes: "brust" is one edit from "burst". */
static size_t distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 63), lb = strnlen(b, 63);
    size_t d[64][64];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v)
                v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    }
    return d[la][lb];
}

/* The closest candidate within two edits (and closer than the word's own length), or NULL. */
const char *cfg_suggest(const char *word, const char *const *cands)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; cands[i]; i++) {
        size_t d = distance(word, cands[i]);
        if (d < best_d && d < strlen(cands[i])) {
            best = cands[i];
            best_d = d;
        }
    }
    return best;
}

/* "a, b, c" into buf. */
const char *cfg__list(char *buf, size_t size, const char *const *cands)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; cands[i] && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", cands[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return buf;
}

/* ---- shapes and scalars ---- */

const char *cfg__kind_name(const cfg_node_t *n)
{
    return n->kind == CFG_NODE_MAP   ? "a mapping"
           : n->kind == CFG_NODE_SEQ ? "a sequence"
                                     : "a scalar";
}

/* Returns the node if it is a mapping whose keys are all in `keys`; reports otherwise (and
 * still returns a mapping, so its known keys are checked too). */
const cfg_node_t *cfg__want_map(struct cfg__ctx *c, const cfg_node_t *n, const char *path,
                                const char *const *keys)
{
    if (n->failed)
        return NULL;
    if (n->kind != CFG_NODE_MAP) {
        cfg__err(c, path, n, "expected a mapping, got %s",
                 n->null ? "an empty value" : cfg__kind_name(n));
        return NULL;
    }
    for (size_t i = 0; i < n->n; i++) {
        const cfg_node_t *key = n->items[2 * i];
        char kp[PATH_SIZE], all[512];
        size_t k = 0;
        while (keys[k] && strcmp(keys[k], key->text) != 0)
            k++;
        if (keys[k])
            continue;
        const char *s = cfg_suggest(key->text, keys);
        if (s)
            cfg__err(c, cfg__join(kp, path, key->text), key, "unknown key; did you mean \"%s\"?",
                     s);
        else
            cfg__err(c, cfg__join(kp, path, key->text), key, "unknown key; expected one of: %s",
                     cfg__list(all, sizeof(all), keys));
    }
    return n;
}

/* The text of a scalar value, or NULL after reporting. */
const char *cfg__want_scalar(struct cfg__ctx *c, const cfg_node_t *n, const char *path)
{
    if (n->failed)
        return NULL;
    if (n->kind != CFG_NODE_SCALAR) {
        cfg__err(c, path, n, "expected a scalar value, got %s", cfg__kind_name(n));
        return NULL;
    }
    if (n->null) {
        cfg__err(c, path, n, "the value is empty");
        return NULL;
    }
    return n->text;
}

/* A string of at most max bytes, every byte accepted by ok() (NULL: any printable). */
int cfg__get_string(struct cfg__ctx *c, const cfg_node_t *n, const char *path, char *out,
                    size_t max, bool allow_empty, int (*ok)(int), const char *what)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    size_t len = strlen(s);
    if (len == 0 && !allow_empty) {
        cfg__err(c, path, n, "must not be empty");
        return -1;
    }
    if (len > max) {
        cfg__err(c, path, n, "is %zu bytes long; at most %zu", len, max);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (ok ? !ok((unsigned char)s[i]) : iscntrl((unsigned char)s[i])) {
            cfg__err(c, path, n, "\"%s\" is not %s", s, what);
            return -1;
        }
    }
    memcpy(out, s, len + 1);
    return 0;
}

int cfg__id_char(int ch)
{
    return islower(ch) || isdigit(ch) || ch == '_';
}

int cfg__level_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
}

int cfg__get_int(struct cfg__ctx *c, const cfg_node_t *n, const char *path, int64_t min,
                 int64_t max, int64_t *out)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    const char *p = s + (*s == '-');
    int64_t v = 0;
    int overflow = 0;
    if (!isdigit((unsigned char)*p)) {
        cfg__err(c, path, n, "\"%s\" is not an integer", s);
        return -1;
    }
    for (; isdigit((unsigned char)*p); p++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
            overflow = 1;
    if (*p) {
        cfg__err(c, path, n, "\"%s\" is not an integer", s);
        return -1;
    }
    if (*s == '-' && !overflow)
        v = -v;
    if (overflow || v < min || v > max) {
        if (min == 1 && (*s == '-' || v == 0))
            cfg__err(c, path, n, "must be greater than 0, got %s", s);
        else if (min == 0 && *s == '-')
            cfg__err(c, path, n, "must not be negative, got %s", s);
        else
            cfg__err(c, path, n, "%s is out of range [%lld, %lld]", s, (long long)min,
                     (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

int cfg__get_bool(struct cfg__ctx *c, const cfg_node_t *n, const char *path, bool *out)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
        *out = true;
        return 0;
    }
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
        *out = false;
        return 0;
    }
    cfg__err(c, path, n, "\"%s\" is not a boolean; write true or false", s);
    return -1;
}

/* One of `names` (NULL-terminated); its index in *out. */
int cfg__get_enum(struct cfg__ctx *c, const cfg_node_t *n, const char *path, const char *what,
                  const char *const *names, int *out)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    for (int i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char all[256];
    const char *guess = cfg_suggest(s, names);
    if (guess)
        cfg__err(c, path, n, "unknown %s \"%s\"; did you mean \"%s\"?", what, s, guess);
    else
        cfg__err(c, path, n, "unknown %s \"%s\"; expected one of: %s", what, s,
                 cfg__list(all, sizeof(all), names));
    return -1;
}

int cfg__get_duration(struct cfg__ctx *c, const cfg_node_t *n, const char *path, int64_t min,
                      int64_t max, int64_t *out)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    int64_t ns = 0;
    int rc = cfg_duration_parse(s, &ns);
    char lo[48], hi[48];
    size_t digits = strspn(s, "0123456789");
    if (rc < 0 && s[digits] == '\0' && strspn(s, "0") < digits) {
        cfg__err(c, path, n, "\"%s\" has no unit; write a duration such as %ss (units ms, s, m, h)",
                 s, s);
        return -1;
    }
    if (rc < 0 && s[digits] == '\0')
        rc = 0; /* "0": no time at all, which the range check below names */
    else if (rc < 0 && s[0] == '-') {
        cfg__err(c, path, n,
                 min > 0 ? "must be greater than 0, got %s" : "must not be negative, got %s", s);
        return -1;
    }
    if (rc < 0) {
        cfg__err(c, path, n, "\"%s\": %s", s, cfg_duration_strerror(rc));
        return -1;
    }
    if (ns < min || ns > max) {
        if (min > 0 && ns == 0)
            cfg__err(c, path, n, "must be greater than 0, got %s", s);
        else if (ns < min)
            cfg__err(c, path, n, "%s is shorter than the shortest allowed, %s", s,
                     cfg_duration_format(min, lo, sizeof(lo)));
        else
            cfg__err(c, path, n, "%s is longer than the longest allowed, %s", s,
                     cfg_duration_format(max, hi, sizeof(hi)));
        return -1;
    }
    *out = ns;
    return 0;
}

/* host:port (host a name, an IPv4 address or a bracketed IPv6 one). Port 0 (pick one) only
 * where a listener may take any port. */
int cfg__get_address(struct cfg__ctx *c, const cfg_node_t *n, const char *path, char *out,
                     bool allow_empty, bool allow_port0)
{
    const char *s = cfg__want_scalar(c, n, path);
    if (!s)
        return -1;
    if (!*s && allow_empty) {
        out[0] = '\0';
        return 0;
    }
    const char *colon = strrchr(s, ':');
    size_t hostlen = colon ? (size_t)(colon - s) : 0;
    int ok = colon && hostlen > 0 && strlen(s) <= CFG_ADDR_MAX;
    for (size_t i = 0; ok && i < hostlen; i++)
        ok = isalnum((unsigned char)s[i]) || strchr("-._[]:%", s[i]);
    if (ok && (s[0] == '[') != (s[hostlen - 1] == ']'))
        ok = 0;
    if (ok && s[0] != '[' && memchr(s, ':', hostlen))
        ok = 0; /* an IPv6 address needs brackets */
    long port = -1;
    if (ok) {
        char *end;
        errno = 0;
        port = isdigit((unsigned char)colon[1]) ? strtol(colon + 1, &end, 10) : -1;
        ok = port >= 0 && !*end && errno == 0 && port <= 65535 && (port > 0 || allow_port0);
    }
    if (!ok) {
        cfg__err(c, path, n, "\"%s\" is not a host:port address%s", s,
                 allow_port0 ? " (port 0-65535)" : " (port 1-65535)");
        return -1;
    }
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* The node of `key` in map, when present (and the map itself valid). */
const cfg_node_t *cfg__at(const cfg_node_t *map, const char *key)
{
    return map ? cfg__map_get(map, key) : NULL;
}
