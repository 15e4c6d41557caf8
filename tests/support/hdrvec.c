/* The header vector table's reader. See hdrvec.h. */
#include "hdrvec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static bool num(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !s[0] || *end || errno)
        return false;
    *out = v;
    return true;
}

static bool trio(char **f, proto_trio_t *t)
{
    return num(f[0], &t->quota) && num(f[1], &t->remaining) && num(f[2], &t->reset_ms);
}

/* One "NAME ARGS..." line into c; false when it is not one of the table's. */
static bool field_line(char *buf, hdrvec_case_t *c, int line, bool *started)
{
    char *f[8] = {0};
    int n = 0;
    for (char *t = strtok(buf, " "); t && n < 8; t = strtok(NULL, " "))
        f[n++] = t;
    if (n == 2 && strcmp(f[0], "case") == 0) {
        *started = true;
        c->line = line;
        snprintf(c->name, sizeof(c->name), "%s", f[1]);
        return true;
    }
    if (!*started)
        return false;
    proto_disclosed_t *d = &c->d;
    if (n == 7 && strcmp(f[0], "policy") == 0 &&
        (strcmp(f[2], "rpm") == 0 || strcmp(f[2], "tpm") == 0)) {
        d->has_policy = true;
        snprintf(d->policy_id, sizeof(d->policy_id), "%s", f[1]);
        d->policy_tpm = f[2][0] == 't';
        return num(f[3], &d->period_ms) && num(f[4], &d->quota) && num(f[5], &d->remaining) &&
               num(f[6], &d->t_s);
    }
    if (n == 4 && strcmp(f[0], "requests") == 0)
        return (d->has_requests = true) && trio(f + 1, &d->requests);
    if (n == 4 && strcmp(f[0], "tokens") == 0)
        return (d->has_tokens = true) && trio(f + 1, &d->tokens);
    if (n == 2 && strcmp(f[0], "retry") == 0)
        return num(f[1], &d->retry_s);
    return false;
}

int hdrvec_next(FILE *in, hdrvec_case_t *c, int *line, char *err, size_t err_size)
{
    char buf[512];
    bool started = false;
    memset(c, 0, sizeof(*c));
    c->d.retry_s = -1;
    while (fgets(buf, sizeof(buf), in)) {
        ++*line;
        buf[strcspn(buf, "\n")] = '\0';
        if (buf[0] == '#')
            continue;
        if (!buf[0]) {
            if (started)
                return 1;
            continue;
        }
        if (buf[0] == '>') {
            char *colon = strstr(buf, ": ");
            if (!started || c->n_want > PROTO_RATE_HEADERS_MAX || buf[1] != ' ' || !colon ||
                strlen(colon + 2) >= sizeof(c->want[0][1])) {
                snprintf(err, err_size, "headers.txt:%d: want \"> Name: value\" in a case", *line);
                return -1;
            }
            *colon = '\0';
            snprintf(c->want[c->n_want][0], sizeof(c->want[0][0]), "%.64s", buf + 2);
            snprintf(c->want[c->n_want][1], sizeof(c->want[0][1]), "%.160s", colon + 2);
            c->n_want++;
            continue;
        }
        if (!field_line(buf, c, *line, &started)) {
            snprintf(err, err_size, "headers.txt:%d: not a line of the table", *line);
            return -1;
        }
    }
    return started ? 1 : 0;
}
