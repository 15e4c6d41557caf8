/*
 * The schema: from the node tree to a cfg_config_t, reporting every error on the way.
 *
 * This is the seed's "validate" phase: names resolve (keys, types, algorithms, stores),
 * values are in range, and the parts agree with each other (the algorithm knob per the
 * seed's table, a rate-class limit has a period, a store binding names a declared section,
 * ids are unique). It does not compile a limit type: the domain checks (window ceiling, tau,
 * tpm reserve cap) belong to arming, exactly as the seed orders them, which is why a
 * sliding_window limit of 100000 on redis validates and then fails to arm.
 *
 * The walk never stops at the first error: each field is checked on its own, a field that
 * fails is left at its default, and checks that depend on a failed field are skipped so one
 * mistake gives one line. The model being built is new and private until the whole load
 * succeeds, which is what makes a reload all-or-nothing.
 */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_SIZE 256

struct ctx {
    const char *file;
    cfg_report_t *report;
    cfg_config_t *cfg;
    int errors;
    int oom;
};

static void add(struct ctx *c, bool warning, const char *path, const cfg_node_t *at,
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

__attribute__((format(printf, 4, 5))) static void err(struct ctx *c, const char *path,
                                                      const cfg_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(c, false, path, at, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 4, 5))) static void warn(struct ctx *c, const char *path,
                                                       const cfg_node_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(c, true, path, at, fmt, ap);
    va_end(ap);
}

static const char *join(char *buf, const char *base, const char *key)
{
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
static const char *suggest(const char *word, const char *const *cands)
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
static const char *list(char *buf, size_t size, const char *const *cands)
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

static const char *kind_name(const cfg_node_t *n)
{
    return n->kind == CFG_NODE_MAP   ? "a mapping"
           : n->kind == CFG_NODE_SEQ ? "a sequence"
                                     : "a scalar";
}

/* Returns the node if it is a mapping whose keys are all in `keys`; reports otherwise (and
 * still returns a mapping, so its known keys are checked too). */
static const cfg_node_t *want_map(struct ctx *c, const cfg_node_t *n, const char *path,
                                  const char *const *keys)
{
    if (n->failed)
        return NULL;
    if (n->kind != CFG_NODE_MAP) {
        err(c, path, n, "expected a mapping, got %s", n->null ? "an empty value" : kind_name(n));
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
        const char *s = suggest(key->text, keys);
        if (s)
            err(c, join(kp, path, key->text), key, "unknown key; did you mean \"%s\"?", s);
        else
            err(c, join(kp, path, key->text), key, "unknown key; expected one of: %s",
                list(all, sizeof(all), keys));
    }
    return n;
}

/* The text of a scalar value, or NULL after reporting. */
static const char *want_scalar(struct ctx *c, const cfg_node_t *n, const char *path)
{
    if (n->failed)
        return NULL;
    if (n->kind != CFG_NODE_SCALAR) {
        err(c, path, n, "expected a scalar value, got %s", kind_name(n));
        return NULL;
    }
    if (n->null) {
        err(c, path, n, "the value is empty");
        return NULL;
    }
    return n->text;
}

/* A string of at most max bytes, every byte accepted by ok() (NULL: any printable). */
static int get_string(struct ctx *c, const cfg_node_t *n, const char *path, char *out, size_t max,
                      bool allow_empty, int (*ok)(int), const char *what)
{
    const char *s = want_scalar(c, n, path);
    if (!s)
        return -1;
    size_t len = strlen(s);
    if (len == 0 && !allow_empty) {
        err(c, path, n, "must not be empty");
        return -1;
    }
    if (len > max) {
        err(c, path, n, "is %zu bytes long; at most %zu", len, max);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if (ok ? !ok((unsigned char)s[i]) : iscntrl((unsigned char)s[i])) {
            err(c, path, n, "\"%s\" is not %s", s, what);
            return -1;
        }
    }
    memcpy(out, s, len + 1);
    return 0;
}

static int id_char(int ch)
{
    return islower(ch) || isdigit(ch) || ch == '_';
}

static int level_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.';
}

static int get_int(struct ctx *c, const cfg_node_t *n, const char *path, int64_t min, int64_t max,
                   int64_t *out)
{
    const char *s = want_scalar(c, n, path);
    if (!s)
        return -1;
    const char *p = s + (*s == '-');
    int64_t v = 0;
    int overflow = 0;
    if (!isdigit((unsigned char)*p)) {
        err(c, path, n, "\"%s\" is not an integer", s);
        return -1;
    }
    for (; isdigit((unsigned char)*p); p++)
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *p - '0', &v))
            overflow = 1;
    if (*p) {
        err(c, path, n, "\"%s\" is not an integer", s);
        return -1;
    }
    if (*s == '-' && !overflow)
        v = -v;
    if (overflow || v < min || v > max) {
        if (min == 1 && (*s == '-' || v == 0))
            err(c, path, n, "must be greater than 0, got %s", s);
        else if (min == 0 && *s == '-')
            err(c, path, n, "must not be negative, got %s", s);
        else
            err(c, path, n, "%s is out of range [%lld, %lld]", s, (long long)min, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static int get_bool(struct ctx *c, const cfg_node_t *n, const char *path, bool *out)
{
    const char *s = want_scalar(c, n, path);
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
    err(c, path, n, "\"%s\" is not a boolean; write true or false", s);
    return -1;
}

/* One of `names` (NULL-terminated); its index in *out. */
static int get_enum(struct ctx *c, const cfg_node_t *n, const char *path, const char *what,
                    const char *const *names, int *out)
{
    const char *s = want_scalar(c, n, path);
    if (!s)
        return -1;
    for (int i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;
            return 0;
        }
    }
    char all[256];
    const char *guess = suggest(s, names);
    if (guess)
        err(c, path, n, "unknown %s \"%s\"; did you mean \"%s\"?", what, s, guess);
    else
        err(c, path, n, "unknown %s \"%s\"; expected one of: %s", what, s,
            list(all, sizeof(all), names));
    return -1;
}

static int get_duration(struct ctx *c, const cfg_node_t *n, const char *path, int64_t min,
                        int64_t max, int64_t *out)
{
    const char *s = want_scalar(c, n, path);
    if (!s)
        return -1;
    int64_t ns = 0;
    int rc = cfg_duration_parse(s, &ns);
    char lo[48], hi[48];
    size_t digits = strspn(s, "0123456789");
    if (rc < 0 && s[digits] == '\0' && strspn(s, "0") < digits) {
        err(c, path, n, "\"%s\" has no unit; write a duration such as %ss (units ms, s, m, h)", s,
            s);
        return -1;
    }
    if (rc < 0 && s[digits] == '\0')
        rc = 0; /* "0": no time at all, which the range check below names */
    else if (rc < 0 && s[0] == '-') {
        err(c, path, n, min > 0 ? "must be greater than 0, got %s" : "must not be negative, got %s",
            s);
        return -1;
    }
    if (rc < 0) {
        err(c, path, n, "\"%s\": %s", s, cfg_duration_strerror(rc));
        return -1;
    }
    if (ns < min || ns > max) {
        if (min > 0 && ns == 0)
            err(c, path, n, "must be greater than 0, got %s", s);
        else if (ns < min)
            err(c, path, n, "%s is shorter than the shortest allowed, %s", s,
                cfg_duration_format(min, lo, sizeof(lo)));
        else
            err(c, path, n, "%s is longer than the longest allowed, %s", s,
                cfg_duration_format(max, hi, sizeof(hi)));
        return -1;
    }
    *out = ns;
    return 0;
}

/* host:port (host a name, an IPv4 address or a bracketed IPv6 one). Port 0 (pick one) only
 * where a listener may take any port. */
static int get_address(struct ctx *c, const cfg_node_t *n, const char *path, char *out,
                       bool allow_empty, bool allow_port0)
{
    const char *s = want_scalar(c, n, path);
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
        err(c, path, n, "\"%s\" is not a host:port address%s", s,
            allow_port0 ? " (port 0-65535)" : " (port 1-65535)");
        return -1;
    }
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* The node of `key` in map, when present (and the map itself valid). */
static const cfg_node_t *at(const cfg_node_t *map, const char *key)
{
    return map ? cfg__map_get(map, key) : NULL;
}

/* ---- sections ---- */

static const char *const server_keys[] = {"socket",
                                          "socket_mode",
                                          "socket_group",
                                          "http",
                                          "http_decide",
                                          "http_subject",
                                          "http_tokens",
                                          "max_counters",
                                          "max_connections",
                                          "allow_uids",
                                          "allow_gids",
                                          "state_dir",
                                          "snapshot_interval",
                                          "grpc",
                                          "grpc_domains",
                                          "grpc_charge_domains",
                                          NULL};
static const char *const http_decide_names[] = {"loopback", "on", "off", NULL};

/* An HTTP header name: an RFC 9110 token. */
static int header_char(int ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* server.http_subject: level -> header, and server.http_tokens: one header; no header twice. */
static void load_http_mapping(struct ctx *c, const cfg_node_t *subject, const cfg_node_t *tokens)
{
    cfg_server_t *s = &c->cfg->server;
    char p[PATH_SIZE];
    if (subject && !subject->failed && subject->kind != CFG_NODE_MAP)
        err(c, "server.http_subject", subject,
            "expected a mapping of subject levels to header names, got %s",
            subject->null ? "an empty value" : kind_name(subject));
    else if (subject && subject->n > CFG_HTTP_SUBJECT_MAX)
        err(c, "server.http_subject", subject, "%zu levels; at most %d", subject->n,
            CFG_HTTP_SUBJECT_MAX);
    else if (subject && !subject->failed) {
        for (size_t i = 0; i < subject->n; i++) {
            const cfg_node_t *k = subject->items[2 * i], *v = subject->items[2 * i + 1];
            cfg_http_level_t *e = &s->http_subject[s->n_http_subject];
            join(p, "server.http_subject", k->text);
            if (get_string(c, k, p, e->level, CFG_LEVEL_MAX, false, level_char, "a level name") ||
                get_string(c, v, p, e->header, CFG_HEADER_MAX, false, header_char,
                           "an HTTP header name"))
                continue;
            if (strcmp(e->level, "global") == 0) {
                err(c, p, k, "\"global\" is one counter for every request; it takes no id");
                continue;
            }
            size_t j = 0;
            while (j < s->n_http_subject && strcasecmp(s->http_subject[j].header, e->header) != 0)
                j++;
            if (j < s->n_http_subject) {
                err(c, p, v, "header %s already names level %s", e->header,
                    s->http_subject[j].level);
                continue;
            }
            s->n_http_subject++;
        }
    }
    if (!tokens || get_string(c, tokens, "server.http_tokens", s->http_tokens, CFG_HEADER_MAX,
                              false, header_char, "an HTTP header name"))
        return;
    for (size_t j = 0; j < s->n_http_subject; j++) {
        if (strcasecmp(s->http_subject[j].header, s->http_tokens) == 0) {
            err(c, "server.http_tokens", tokens, "header %s already names level %s", s->http_tokens,
                s->http_subject[j].level);
            s->http_tokens[0] = '\0';
        }
    }
}

/* server.allow_uids / allow_gids: a sequence of numeric ids (names would need NSS at load). */
static void get_ids(struct ctx *c, const cfg_node_t *v, const char *key, uint32_t *ids, size_t *n)
{
    char p[PATH_SIZE];
    snprintf(p, sizeof(p), "server.%s", key);
    if (v->kind != CFG_NODE_SEQ) {
        err(c, p, v, "expected a sequence of numeric ids, got %s",
            v->null ? "an empty value" : kind_name(v));
        return;
    }
    if (v->n > CFG_ALLOW_MAX) {
        err(c, p, v, "%zu ids; at most %d", v->n, CFG_ALLOW_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        int64_t id;
        snprintf(p, sizeof(p), "server.%s[%zu]", key, i);
        if (get_int(c, v->items[i], p, 0, UINT32_MAX - 1, &id) == 0)
            ids[(*n)++] = (uint32_t)id;
    }
}

static int domain_char(int ch)
{
    return isgraph(ch);
}

/* server.grpc_domains / grpc_charge_domains: Envoy rate limit domains (printable, no spaces). */
static void get_domains(struct ctx *c, const cfg_node_t *v, const char *key,
                        char (*out)[CFG_NAME_MAX + 1], size_t *n)
{
    char p[PATH_SIZE];
    snprintf(p, sizeof(p), "server.%s", key);
    if (v->kind != CFG_NODE_SEQ) {
        err(c, p, v, "expected a sequence of domain names, got %s",
            v->null ? "an empty value" : kind_name(v));
        return;
    }
    if (v->n > CFG_DOMAINS_MAX) {
        err(c, p, v, "%zu domains; at most %d", v->n, CFG_DOMAINS_MAX);
        return;
    }
    for (size_t i = 0; i < v->n; i++) {
        snprintf(p, sizeof(p), "server.%s[%zu]", key, i);
        if (get_string(c, v->items[i], p, out[*n], CFG_NAME_MAX, false, domain_char,
                       "a domain name (printable, no spaces)") == 0)
            (*n)++;
    }
}

/* server.grpc: host:port, or an absolute unix socket path; "" is off. */
static void get_grpc(struct ctx *c, const cfg_node_t *v, char *out)
{
    const char *s = want_scalar(c, v, "server.grpc");
    if (s && s[0] == '/')
        get_string(c, v, "server.grpc", out, CFG_SOCKET_PATH_MAX, false, NULL, "a path");
    else if (s && *s && !strchr(s, ':'))
        err(c, "server.grpc", v, "\"%s\" is neither host:port nor an absolute unix socket path", s);
    else if (s)
        get_address(c, v, "server.grpc", out, true, true);
}

static void load_server(struct ctx *c, const cfg_node_t *n)
{
    cfg_server_t *s = &c->cfg->server;
    char p[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, "server", server_keys), *v;
    if ((v = at(m, "socket")) &&
        get_string(c, v, "server.socket", s->socket, CFG_SOCKET_PATH_MAX, false, NULL, "a path") ==
            0 &&
        s->socket[0] != '/')
        err(c, "server.socket", v, "\"%s\" must be an absolute path", s->socket);
    if ((v = at(m, "socket_mode"))) {
        const char *t = want_scalar(c, v, "server.socket_mode");
        char *end;
        long mode = t ? strtol(t, &end, 8) : -1;
        if (t && (!*t || *end || mode < 0 || mode > 0777 || !isdigit((unsigned char)*t)))
            err(c, "server.socket_mode", v, "\"%s\" is not an octal file mode (0000-0777)", t);
        else if (t)
            s->socket_mode = (uint32_t)mode;
    }
    if ((v = at(m, "socket_group")))
        get_string(c, v, "server.socket_group", s->socket_group, CFG_NAME_MAX, true, level_char,
                   "a group name");
    if ((v = at(m, "http")))
        get_address(c, v, "server.http", s->http, true, true);
    int decide;
    if ((v = at(m, "http_decide")) &&
        get_enum(c, v, "server.http_decide", "setting", http_decide_names, &decide) == 0)
        s->http_decide = (cfg_http_decide_t)decide;
    load_http_mapping(c, at(m, "http_subject"), at(m, "http_tokens"));
    if ((v = at(m, "max_counters")))
        get_int(c, v, join(p, "server", "max_counters"), 1, 100000000, &s->max_counters);
    if ((v = at(m, "max_connections")))
        get_int(c, v, join(p, "server", "max_connections"), 1, 65536, &s->max_connections);
    if ((v = at(m, "state_dir")) &&
        get_string(c, v, "server.state_dir", s->state_dir, CFG_PATH_MAX, true, NULL, "a path") ==
            0 &&
        s->state_dir[0] && s->state_dir[0] != '/')
        err(c, "server.state_dir", v, "\"%s\" must be an absolute path (or \"\" for no state)",
            s->state_dir);
    if ((v = at(m, "snapshot_interval")) &&
        get_duration(c, v, "server.snapshot_interval", 0, INT64_C(3600) * 1000000000,
                     &s->snapshot_interval_ns) == 0 &&
        s->snapshot_interval_ns > 0 && s->snapshot_interval_ns < CFG_SNAPSHOT_INTERVAL_MIN_NS)
        err(c, "server.snapshot_interval", v,
            "must be 0 (a snapshot only at stop) or at least 100ms");
    if ((v = at(m, "allow_uids")))
        get_ids(c, v, "allow_uids", s->allow_uids, &s->n_allow_uids);
    if ((v = at(m, "allow_gids")))
        get_ids(c, v, "allow_gids", s->allow_gids, &s->n_allow_gids);
    if ((v = at(m, "grpc")))
        get_grpc(c, v, s->grpc);
    if ((v = at(m, "grpc_domains")))
        get_domains(c, v, "grpc_domains", s->grpc_domains, &s->n_grpc_domains);
    if ((v = at(m, "grpc_charge_domains")))
        get_domains(c, v, "grpc_charge_domains", s->grpc_charge_domains, &s->n_grpc_charge_domains);
}

/* A sequence of host:port (gossip seeds, Redis Cluster seeds, Sentinels): at most `max`, each
 * checked as an address and named by its index. */
static void get_address_list(struct ctx *c, const cfg_node_t *v, const char *base, const char *key,
                             char (*out)[CFG_ADDR_MAX + 1], size_t max, size_t *n)
{
    char p[PATH_SIZE];
    if (v->kind != CFG_NODE_SEQ) {
        err(c, join(p, base, key), v, "expected a sequence of host:port, got %s",
            v->null ? "an empty value" : kind_name(v));
    } else if (v->n > max) {
        err(c, join(p, base, key), v, "%zu entries; at most %zu", v->n, max);
    } else {
        for (size_t i = 0; i < v->n; i++) {
            snprintf(p, sizeof(p), "%s.%s[%zu]", base, key, i);
            if (get_address(c, v->items[i], p, out[*n], false, false) == 0)
                (*n)++;
        }
    }
}

static const char *const share_keys[] = {"node_id",
                                         "bind",
                                         "advertise",
                                         "seeds",
                                         "keyring_file",
                                         "cluster",
                                         "partition_hold",
                                         "join_timeout",
                                         "division",
                                         "cold_share",
                                         "demand_interval",
                                         "demand_keys",
                                         NULL};
static const char *const division_names[] = {"equal", "demand", NULL};

static void load_share(struct ctx *c, const cfg_node_t *n)
{
    cfg_share_t *s = &c->cfg->share;
    const char *base = "shared_state.share";
    char p[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, share_keys), *v;
    if (!m)
        return;
    s->present = true;
    if (!(v = at(m, "node_id")))
        err(c, join(p, base, "node_id"), m,
            "missing; every replica needs a unique node id "
            "(e.g. node_id: ${NODE_NAME})");
    else
        get_string(c, v, join(p, base, "node_id"), s->node_id, CFG_NAME_MAX, false, level_char,
                   "a node id (letters, digits, _ - .)");
    if ((v = at(m, "bind")))
        get_address(c, v, join(p, base, "bind"), s->bind, false, true);
    if ((v = at(m, "advertise")))
        get_address(c, v, join(p, base, "advertise"), s->advertise, true, false);
    if ((v = at(m, "seeds")))
        get_address_list(c, v, base, "seeds", s->seeds, CFG_SEEDS_MAX, &s->n_seeds);
    if ((v = at(m, "keyring_file")))
        get_string(c, v, join(p, base, "keyring_file"), s->keyring_file, CFG_PATH_MAX, true, NULL,
                   "a path");
    if ((v = at(m, "cluster")))
        get_string(c, v, join(p, base, "cluster"), s->cluster, CFG_NAME_MAX, true, level_char,
                   "a cluster label (letters, digits, _ - .)");
    if ((v = at(m, "partition_hold")))
        get_duration(c, v, join(p, base, "partition_hold"), 0, INT64_C(3600) * 1000000000,
                     &s->partition_hold_ns);
    if ((v = at(m, "join_timeout")))
        get_duration(c, v, join(p, base, "join_timeout"), 1000000, INT64_C(600) * 1000000000,
                     &s->join_timeout_ns);
    int division;
    if ((v = at(m, "division")) &&
        get_enum(c, v, join(p, base, "division"), "division", division_names, &division) == 0)
        s->division = (cfg_division_t)division;
    if ((v = at(m, "cold_share"))) {
        const char *t = want_scalar(c, v, join(p, base, "cold_share"));
        char *end;
        double d = t ? strtod(t, &end) : 0;
        if (t && (end == t || *end || !(d > 0 && d < 1)))
            err(c, p, v, "\"%s\" is not a fraction strictly between 0 and 1 (e.g. 0.05)", t);
        else if (t)
            s->cold_share = d;
    }
    if ((v = at(m, "demand_interval")))
        get_duration(c, v, join(p, base, "demand_interval"), INT64_C(10) * 1000000,
                     INT64_C(60) * 1000000000, &s->demand_interval_ns);
    if ((v = at(m, "demand_keys")))
        get_int(c, v, join(p, base, "demand_keys"), CFG_DEMAND_KEYS_MIN, CFG_DEMAND_KEYS_MAX,
                &s->demand_keys);
}

static const char *const redis_keys[] = {"address", "cluster", "sentinels",
                                         "master",  "timeout", NULL};

/* shared_state.redis names one topology: address (one Redis), cluster (seed nodes of a Redis
 * Cluster) or sentinels with master (a primary that Sentinel fails over). */
static void load_redis(struct ctx *c, const cfg_node_t *n)
{
    cfg_redis_t *r = &c->cfg->redis;
    const char *base = "shared_state.redis", *s;
    char p[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, redis_keys), *v;
    if (!m)
        return;
    r->present = true;
    const char *topologies[] = {"address", "cluster", "sentinels"};
    const cfg_node_t *given[3];
    const char *first = NULL;
    for (int i = 0; i < 3; i++) {
        given[i] = at(m, topologies[i]);
        if (given[i] && first)
            err(c, join(p, base, topologies[i]), given[i],
                "give one of address, cluster or sentinels, not %s and %s", first, topologies[i]);
        else if (given[i])
            first = topologies[i];
    }
    if (!first)
        err(c, join(p, base, "address"), m,
            "missing; write the Redis host:port (or cluster: [seed host:port, ...], or "
            "sentinels: [host:port, ...] with master: NAME)");
    const char *path = "shared_state.redis.address";
    if ((v = given[0]) == NULL)
        v = NULL; /* another topology, or none (reported above) */
    else if (v->kind == CFG_NODE_SCALAR && !v->null && !v->failed && (s = v->text) &&
             (s[0] == '/' || strncmp(s, "unix:", 5) == 0)) {
        /* a unix socket path (redis/: rds_address_parse); sun_path holds 107 bytes */
        const char *sock = s[0] == '/' ? s : s + 5;
        if (sock[0] != '/' || strlen(sock) > 107 || sock[strlen(sock) - 1] == '/')
            err(c, path, v, "\"%s\" is not a unix socket path (absolute, at most 107 bytes)", s);
        else
            memcpy(r->address, s, strlen(s) + 1);
    } else
        get_address(c, v, path, r->address, false, false);
    for (int i = 1; i < 3; i++) {
        size_t *count = i == 1 ? &r->n_cluster : &r->n_sentinels;
        if (given[i])
            get_address_list(c, given[i], base, topologies[i], i == 1 ? r->cluster : r->sentinels,
                             CFG_REDIS_NODES_MAX, count);
        if (given[i] && given[i]->kind == CFG_NODE_SEQ && given[i]->n == 0)
            err(c, join(p, base, topologies[i]), given[i], "empty; name at least one host:port");
    }
    if ((v = at(m, "master"))) {
        if (!given[2])
            err(c, join(p, base, "master"), v,
                "only with sentinels (the name Sentinel knows the primary by)");
        else
            get_string(c, v, join(p, base, "master"), r->master, CFG_NAME_MAX, false, level_char,
                       "a master name (letters, digits, _ - .)");
    } else if (given[2]) {
        err(c, join(p, base, "master"), m,
            "missing; Sentinel needs the name it monitors the primary by (e.g. master: mymaster)");
    }
    if ((v = at(m, "timeout")))
        get_duration(c, v, "shared_state.redis.timeout", 1000000, INT64_C(60) * 1000000000,
                     &r->timeout_ns);
}

static const char *const shared_state_keys[] = {"share", "redis", NULL};

static void load_shared_state(struct ctx *c, const cfg_node_t *n)
{
    const cfg_node_t *m = want_map(c, n, "shared_state", shared_state_keys), *v;
    if ((v = at(m, "share")))
        load_share(c, v);
    if ((v = at(m, "redis")))
        load_redis(c, v);
}

/* ---- limits ---- */

static const char *const limit_keys[] = {"id",        "attach", "type",  "amount",  "period",
                                         "algorithm", "burst",  "store", "posture", NULL};
static const char *const type_names[] = {
    "rpm", "tpm", "concurrency", "budget_usd", "quota_tokens", "quota_requests", NULL};
static const char *const store_names[] = {"local", "share", "redis", NULL};
static const char *const algorithm_names[] = {"gcra", "fixed_window", "sliding_window",
                                              "token_bucket", NULL};
static const char *const attach_keys[] = {"level", "levels", NULL};
static const char *const posture_keys[] = {"mode", "enforce", "fail", NULL};
static const char *const mode_names[] = {"off", "on", NULL};
static const char *const enforce_names[] = {"soft", "hard", NULL};
static const char *const fail_names[] = {"closed", "open", NULL};

/* Why a type takes no algorithm, period or burst: the seed's table. */
static const char *no_rate_reason(cfg_type_t t)
{
    return t == CFG_TYPE_CONCURRENCY ? "a live gauge, not a windowed rate"
                                     : "folded from ledger rows";
}

static void load_posture(struct ctx *c, const cfg_node_t *n, const char *base, cfg_posture_t *p)
{
    char path[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, posture_keys), *v;
    int i;
    if ((v = at(m, "mode")) &&
        get_enum(c, v, join(path, base, "mode"), "mode", mode_names, &i) == 0)
        p->on = (uint8_t)i;
    if ((v = at(m, "enforce")) &&
        get_enum(c, v, join(path, base, "enforce"), "enforce", enforce_names, &i) == 0)
        p->enforce_hard = (uint8_t)i;
    if ((v = at(m, "fail")) &&
        get_enum(c, v, join(path, base, "fail"), "fail", fail_names, &i) == 0)
        p->fail_open = (uint8_t)i;
}

/* The period of a limit. Rate-class: a required duration. Ledger types: a duration or a
 * calendar period, checked but not compiled (this daemon does not fold ledgers). */
static void load_period(struct ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                        bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = at(m, "period");
    join(path, base, "period");
    if (!type_ok)
        return;
    if (cfg_type_is_rate(l->type)) {
        if (!v) {
            err(c, path, m,
                "missing; a rate-class limit (%s) needs a period, written as a duration (1s, "
                "1m, 1h)",
                cfg_type_name(l->type));
            return;
        }
        const char *s = v->kind == CFG_NODE_SCALAR && !v->null && !v->failed ? v->text : NULL;
        int64_t ns;
        if (s && cfg_duration_parse(s, &ns) == CFG_DURATION_ECALENDAR) {
            err(c, path, v,
                "\"%s\" is a calendar period, which does not compile for a rate-class limit; "
                "write a duration (ms, s, m, h), e.g. 24h",
                s);
            return;
        }
        get_duration(c, v, path, 1, CFG_PERIOD_MAX_NS, &l->period_ns);
    } else if (v && l->type == CFG_TYPE_CONCURRENCY) {
        err(c, path, v, "concurrency takes no period (%s)", no_rate_reason(l->type));
    } else if (v) {
        const char *s = want_scalar(c, v, path);
        int64_t ns;
        if (s && cfg_duration_parse(s, &ns) != CFG_DURATION_ECALENDAR)
            get_duration(c, v, path, 1, CFG_PERIOD_MAX_NS, &ns);
    }
}

/* The algorithm knob, per the seed's table. Returns 0 when l->algorithm is usable. */
static int load_algorithm(struct ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                          bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = at(m, "algorithm");
    ra_algorithm_t alg;
    l->algorithm = RA_GCRA; /* the empty value, filled in before the identity is computed */
    if (!v || !type_ok)
        return type_ok ? 0 : -1;
    join(path, base, "algorithm");
    if (!cfg_type_is_rate(l->type)) {
        err(c, path, v, "type %s takes no algorithm (%s)", cfg_type_name(l->type),
            no_rate_reason(l->type));
        return -1;
    }
    const char *name = want_scalar(c, v, path);
    if (!name)
        return -1;
    if (ra_algorithm_parse(name, &alg) < 0) {
        const char *guess = suggest(name, algorithm_names);
        char all[128];
        if (guess)
            err(c, path, v, "unregistered algorithm \"%s\"; did you mean \"%s\"?", name, guess);
        else
            err(c, path, v, "unregistered algorithm \"%s\"; registered: %s", name,
                list(all, sizeof(all), algorithm_names));
        return -1;
    }
    char why[128];
    if (cfg_type_algorithm_check(l->type, alg, why, sizeof(why)) < 0) {
        err(c, path, v, "%s", why);
        return -1;
    }
    l->algorithm = alg;
    return 0;
}

static void load_burst(struct ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                       bool type_ok, bool alg_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = at(m, "burst");
    join(path, base, "burst");
    if (!type_ok) {
        int64_t ignored;
        if (v)
            get_int(c, v, path, 1, INT64_MAX, &ignored);
        return;
    }
    if (!cfg_type_is_rate(l->type)) {
        if (v)
            err(c, path, v, "type %s takes no burst (%s)", cfg_type_name(l->type),
                no_rate_reason(l->type));
        return;
    }
    l->burst = l->amount; /* the default */
    if (!v || get_int(c, v, path, 1, INT64_MAX, &l->burst) < 0)
        return;
    if (alg_ok && (l->algorithm == RA_FIXED_WINDOW || l->algorithm == RA_SLIDING_WINDOW))
        warn(c, path, v,
             "%s does not read burst; this value has no effect (and is not part of "
             "the counter identity)",
             ra_algorithm_name(l->algorithm));
}

static void load_store(struct ctx *c, const cfg_node_t *m, const char *base, cfg_limit_t *l,
                       bool type_ok)
{
    char path[PATH_SIZE];
    const cfg_node_t *v = at(m, "store");
    int store;
    if (!v || get_enum(c, v, join(path, base, "store"), "store", store_names, &store) < 0)
        return;
    l->store = (cfg_store_t)store;
    if (type_ok && l->type == CFG_TYPE_CONCURRENCY && l->store != CFG_STORE_LOCAL)
        err(c, path, v,
            "concurrency is a live gauge per key on this replica: store \"local\" "
            "only, not \"%s\"",
            store_names[store]);
    else if (l->store == CFG_STORE_SHARE && !c->cfg->share.present)
        err(c, path, v, "store \"share\" needs shared_state.share, which is not declared");
    else if (l->store == CFG_STORE_REDIS && !c->cfg->redis.present)
        err(c, path, v, "store \"redis\" needs shared_state.redis, which is not declared");
    else if (l->store == CFG_STORE_REDIS && strchr(l->level, ','))
        err(c, path, v,
            "store \"redis\" counts one level per key; attach.levels combinations are "
            "counted by store \"local\" or \"share\"");
}

/*
 * attach: { level: L } or attach: { levels: [a, b, ...] } (a counter per combination of ids,
 * as Envoy's nested descriptors count). The levels are stored joined by ',' in order.
 */
static void load_attach(struct ctx *c, const cfg_node_t *n, const char *path, cfg_limit_t *l)
{
    char p[PATH_SIZE + 32]; /* room for "[i]" after a full path */
    const cfg_node_t *a = want_map(c, n, path, attach_keys), *v, *vs;
    if (!a)
        return;
    v = at(a, "level");
    vs = at(a, "levels");
    if (v && vs) {
        err(c, path, a, "level and levels both given; write one");
        return;
    }
    if (v) {
        get_string(c, v, join(p, path, "level"), l->level, CFG_LEVEL_MAX, false, level_char,
                   "a level name (letters, digits, _ - .)");
        return;
    }
    if (!vs) {
        err(c, join(p, path, "level"), a, "missing; name a subject level (or \"global\")");
        return;
    }
    join(p, path, "levels");
    if (vs->kind != CFG_NODE_SEQ) {
        err(c, p, vs, "expected a sequence of level names, got %s",
            vs->null ? "an empty value" : kind_name(vs));
        return;
    }
    if (vs->n == 0 || vs->n > CFG_ATTACH_LEVELS_MAX) {
        err(c, p, vs, "%zu levels; a combination names 1 to %d", vs->n, CFG_ATTACH_LEVELS_MAX);
        return;
    }
    char names[CFG_ATTACH_LEVELS_MAX][CFG_LEVEL_MAX + 1];
    size_t len = 0;
    for (size_t i = 0; i < vs->n; i++) {
        snprintf(p, sizeof(p), "%.*s.levels[%zu]", PATH_SIZE, path, i);
        if (get_string(c, vs->items[i], p, names[i], CFG_LEVEL_MAX, false, level_char,
                       "a level name (letters, digits, _ - .)") < 0)
            return;
        if (strcmp(names[i], "global") == 0) {
            err(c, p, vs->items[i], "\"global\" cannot be part of a combination");
            return;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0) {
                err(c, p, vs->items[i], "level \"%s\" given twice", names[i]);
                return;
            }
        }
        len += (size_t)snprintf(l->level + len, sizeof(l->level) - len, "%s%s", i ? "," : "",
                                names[i]);
    }
}

/* The decimal digits of v, in a static buffer (for one message at a time). */
static const char *u128_str(unsigned __int128 v)
{
    static char buf[40];
    char *p = buf + sizeof(buf) - 1;
    *p = '\0';
    do
        *--p = (char)('0' + (int)(v % 10));
    while ((v /= 10));
    return p;
}

/*
 * A disclosed limit's headers carry its amount (q, times the window's scale: cfg_policy_window)
 * and its remaining (r, at most burst for gcra and token_bucket, amount for the windows) as
 * Structured Field Integers, which have at most 15 digits: a limit they cannot carry is refused
 * here rather than disclosed as a header every parser rejects. Redis limits are never disclosed.
 */
static void check_disclosable(struct ctx *c, const cfg_node_t *m, const char *base,
                              const cfg_limit_t *l)
{
    char path[PATH_SIZE];
    if (!c->cfg->disclose_limits || !cfg_type_is_rate(l->type) || l->store == CFG_STORE_REDIS ||
        l->amount <= 0 || l->period_ns <= 0)
        return;
    int64_t w, scale, q;
    cfg_policy_window(l->period_ns, &w, &scale);
    bool reads_burst = l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET;
    if (__builtin_mul_overflow(l->amount, scale, &q) || q > CFG_SF_INT_MAX) {
        char scaled[96] = "";
        if (scale > 1) /* at most 1000 x INT64_MAX: 128 bits hold it */
            snprintf(scaled, sizeof(scaled), " per %lldms is advertised as q=%s per w=%llds,",
                     (long long)(l->period_ns / 1000000),
                     u128_str((unsigned __int128)l->amount * (unsigned __int128)scale),
                     (long long)w);
        err(c, join(path, base, "amount"), at(m, "amount"),
            "%lld%s more than a RateLimit-Policy header can carry (q is an RFC 9651 Integer: at "
            "most %lld); lower it, or set governance.keys.disclose_limits: false",
            (long long)l->amount, scale > 1 ? scaled : " is", (long long)CFG_SF_INT_MAX);
    } else if (reads_burst && l->burst > CFG_SF_INT_MAX)
        err(c, join(path, base, "burst"), at(m, "burst"),
            "%lld is more than a RateLimit header can carry (r, up to burst, is an RFC 9651 "
            "Integer: at most %lld); lower it, or set governance.keys.disclose_limits: false",
            (long long)l->burst, (long long)CFG_SF_INT_MAX);
}

static void load_limit(struct ctx *c, const cfg_node_t *n, const char *base, cfg_limit_t *l)
{
    char path[PATH_SIZE];
    const cfg_node_t *m = want_map(c, n, base, limit_keys), *v;
    if (!m)
        return;
    l->posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    if (!(v = at(m, "id")))
        err(c, join(path, base, "id"), m, "missing; every limit needs an id ([a-z0-9_]+)");
    else
        get_string(c, v, join(path, base, "id"), l->id, CFG_ID_MAX, false, id_char,
                   "an id ([a-z0-9_]+)");
    if (!(v = at(m, "attach")))
        err(c, join(path, base, "attach"), m,
            "missing; write attach: { level: <subject level> } "
            "(\"global\" for one counter for all)");
    else
        load_attach(c, v, join(path, base, "attach"), l);
    int type = -1;
    if (!(v = at(m, "type")))
        err(c, join(path, base, "type"), m,
            "missing; one of rpm, tpm, concurrency, budget_usd, "
            "quota_tokens, quota_requests");
    else if (get_enum(c, v, join(path, base, "type"), "type", type_names, &type) == 0)
        l->type = (cfg_type_t)type;
    bool type_ok = type >= 0;
    bool amount_ok = false;
    if (!(v = at(m, "amount")))
        err(c, join(path, base, "amount"), m, "missing; the units a limit allows are required");
    else
        amount_ok = get_int(c, v, join(path, base, "amount"), 1, INT64_MAX, &l->amount) == 0;
    /* burst is still checked when amount failed: only its default needs amount */
    load_period(c, m, base, l, type_ok);
    bool alg_ok = load_algorithm(c, m, base, l, type_ok) == 0;
    load_burst(c, m, base, l, type_ok && amount_ok, alg_ok);
    load_store(c, m, base, l, type_ok);
    if ((v = at(m, "posture")))
        load_posture(c, v, join(path, base, "posture"), &l->posture);
    check_disclosable(c, m, base, l);
}

static const char *const governance_keys[] = {"keys", "limits", NULL};
static const char *const keys_keys[] = {"disclose_limits", NULL};

static void load_governance(struct ctx *c, const cfg_node_t *n)
{
    const cfg_node_t *m = want_map(c, n, "governance", governance_keys), *v;
    if ((v = at(m, "keys"))) {
        const cfg_node_t *k = want_map(c, v, "governance.keys", keys_keys);
        if ((v = at(k, "disclose_limits")))
            get_bool(c, v, "governance.keys.disclose_limits", &c->cfg->disclose_limits);
    }
    const cfg_node_t *ls = at(m, "limits");
    if (!ls)
        return;
    if (ls->kind != CFG_NODE_SEQ) {
        err(c, "governance.limits", ls, "expected a sequence of limits, got %s",
            ls->null ? "an empty value" : kind_name(ls));
        return;
    }
    if (ls->n > CFG_LIMITS_MAX) {
        err(c, "governance.limits", ls, "%zu limits; at most %d", ls->n, CFG_LIMITS_MAX);
        return;
    }
    cfg_limit_t *limits = ls->n ? calloc(ls->n, sizeof(*limits)) : NULL;
    if (ls->n && !limits) {
        c->oom = 1;
        return;
    }
    c->cfg->limits = limits;
    c->cfg->n_limits = ls->n;
    for (size_t i = 0; i < ls->n; i++) {
        char base[PATH_SIZE], path[PATH_SIZE];
        snprintf(base, sizeof(base), "governance.limits[%zu]", i);
        load_limit(c, ls->items[i], base, &limits[i]);
        for (size_t j = 0; limits[i].id[0] && j < i; j++) {
            if (strcmp(limits[i].id, limits[j].id) == 0) {
                const cfg_node_t *first = cfg__map_get(ls->items[j], "id");
                err(c, join(path, base, "id"), cfg__map_get(ls->items[i], "id"),
                    "duplicate id \"%s\" (first at governance.limits[%zu], line %d)", limits[i].id,
                    j, first->line);
                break;
            }
        }
    }
}

/* ---- the model ---- */

static void set_defaults(cfg_config_t *cfg)
{
    snprintf(cfg->server.socket, sizeof(cfg->server.socket), "%s", CFG_DEFAULT_SOCKET);
    cfg->server.socket_mode = CFG_DEFAULT_SOCKET_MODE;
    snprintf(cfg->server.http, sizeof(cfg->server.http), "%s", CFG_DEFAULT_HTTP);
    cfg->server.max_counters = CFG_DEFAULT_MAX_COUNTERS;
    cfg->server.max_connections = CFG_DEFAULT_MAX_CONNECTIONS;
    cfg->server.snapshot_interval_ns = CFG_DEFAULT_SNAPSHOT_INTERVAL_NS;
    cfg->disclose_limits = true;
    snprintf(cfg->share.bind, sizeof(cfg->share.bind), "%s", CFG_DEFAULT_SHARE_BIND);
    cfg->share.partition_hold_ns = CFG_DEFAULT_PARTITION_HOLD_NS;
    cfg->share.join_timeout_ns = CFG_DEFAULT_JOIN_TIMEOUT_NS;
    cfg->share.cold_share = CFG_DEFAULT_COLD_SHARE;
    cfg->share.demand_interval_ns = CFG_DEFAULT_DEMAND_INTERVAL_NS;
    cfg->share.demand_keys = CFG_DEFAULT_DEMAND_KEYS;
    cfg->redis.timeout_ns = CFG_DEFAULT_REDIS_TIMEOUT_NS;
}

static const char *const root_keys[] = {"server", "governance", "shared_state", NULL};

int cfg_load_string(const char *name, const char *text, size_t len, cfg_config_t **out,
                    cfg_report_t *report)
{
    *out = NULL;
    cfg_doc_t doc;
    int rc = cfg__yaml_load(name, text, len, &doc, report);
    if (rc < 0) {
        cfg__doc_free(&doc);
        return rc;
    }
    cfg_config_t *cfg = calloc(1, sizeof(*cfg));
    if (!cfg) {
        cfg__doc_free(&doc);
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return CFG_ENOMEM;
    }
    snprintf(cfg->source, sizeof(cfg->source), "%s", name);
    set_defaults(cfg);
    struct ctx c = {.file = name, .report = report, .cfg = cfg, .errors = doc.errors};
    const cfg_node_t *root = doc.root, *v;
    if (!root || (root->kind == CFG_NODE_SCALAR && root->null)) {
        err(&c, "(root)", root,
            "the configuration is empty; expected a mapping with server, "
            "governance and shared_state");
    } else if (root->kind != CFG_NODE_MAP) {
        err(&c, "(root)", root,
            "expected a mapping with server, governance and shared_state, "
            "got %s",
            kind_name(root));
    } else {
        want_map(&c, root, "", root_keys);
        /* shared_state first: store bindings in governance resolve against it */
        if ((v = cfg__map_get(root, "server")))
            load_server(&c, v);
        if ((v = cfg__map_get(root, "shared_state")))
            load_shared_state(&c, v);
        if ((v = cfg__map_get(root, "governance")))
            load_governance(&c, v);
    }
    cfg__doc_free(&doc);
    if (c.oom) {
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        cfg_free(cfg);
        return CFG_ENOMEM;
    }
    if (c.errors) {
        cfg_free(cfg);
        return CFG_EINVALID;
    }
    *out = cfg;
    return 0;
}

int cfg_load_file(const char *path, cfg_config_t **out, cfg_report_t *report)
{
    *out = NULL;
    /* non-blocking: opening a FIFO without a writer would otherwise block (on the daemon's
     * loop, at a reload) until one appears; anything but a regular file is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "cannot open the file: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return CFG_EINVALID;
    }
    if (S_ISDIR(st.st_mode)) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "is a directory, not a config file");
        close(fd);
        return CFG_EINVALID;
    }
    if (!S_ISREG(st.st_mode)) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "not a regular file (a FIFO, socket or device); a config must be a "
                        "regular file");
        close(fd);
        return CFG_EINVALID;
    }
    /* Read at most one byte past the cap: enough to know it is too large, whatever the file
     * claims (a /proc file has no honest size). */
    size_t cap = CFG_FILE_MAX + 1, len = 0;
    if (S_ISREG(st.st_mode) && st.st_size > CFG_FILE_MAX) {
        close(fd);
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "the file is larger than 1 MiB (%lld bytes; the limit is %d)",
                        (long long)st.st_size, CFG_FILE_MAX);
        return CFG_EINVALID;
    }
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return CFG_ENOMEM;
    }
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                            "cannot read the file: %s", strerror(errno));
            free(buf);
            close(fd);
            return CFG_EINVALID;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    int rc = cfg_load_string(path, buf, len, out, report);
    free(buf);
    return rc;
}

void cfg_free(cfg_config_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->limits);
    free(cfg);
}

const cfg_limit_t *cfg_find_limit(const cfg_config_t *cfg, const char *id)
{
    for (size_t i = 0; i < cfg->n_limits; i++)
        if (strcmp(cfg->limits[i].id, id) == 0)
            return &cfg->limits[i];
    return NULL;
}
