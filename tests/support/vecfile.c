/* The vector-file reader shared by the ratealg runner and the simulate integration test. */
#include "vecfile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFIELDS 16

static int parse_i64(const char *tok, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(tok, &end, 10);
    if (errno != 0 || end == tok || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int parse_line(char *line, vec_step_t *s, const char **why)
{
    char *tok[NFIELDS + 1];
    int n = 0;
    for (char *t = strtok(line, " \t\r\n"); t && n <= NFIELDS; t = strtok(NULL, " \t\r\n"))
        tok[n++] = t;
    if (n != NFIELDS) {
        *why = "expected 16 whitespace-separated fields";
        return -1;
    }
    if (strlen(tok[0]) >= sizeof(s->algorithm)) {
        *why = "algorithm name too long";
        return -1;
    }
    strcpy(s->algorithm, tok[0]);
    int64_t *ints[] = {
        &s->amount, &s->period_ns,    &s->burst,         &s->share_num,     &s->share_den,
        &s->unit,   &s->state_before, &s->now,           &s->cost,          NULL,
        NULL,       &s->remaining,    &s->retry_after_s, &s->reset_after_s, &s->state_after};
    for (int i = 1; i < NFIELDS; i++) {
        int64_t v;
        if (parse_i64(tok[i], &v) < 0) {
            *why = "a field is not a decimal int64";
            return -1;
        }
        if (ints[i - 1]) {
            *ints[i - 1] = v;
        } else if (v == 0 || v == 1) {
            if (i == 10)
                s->admit = v;
            else
                s->unfittable = v;
        } else {
            *why = "admit and unfittable must be 0 or 1";
            return -1;
        }
    }
    return 0;
}

int vec_load(const char *path, vec_file_t *out, char *err, size_t err_size)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->path, sizeof(out->path), "%s", path);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_size, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    char buf[1024];
    int lineno = 0;
    bool opens = true;
    while (fgets(buf, sizeof(buf), f)) {
        lineno++;
        char *p = buf + strspn(buf, " \t\r\n");
        if (*p == '\0') {
            opens = true;
            continue;
        }
        if (*p == '#')
            continue;
        if (out->n == cap) {
            cap = cap ? 2 * cap : 64;
            out->steps = realloc(out->steps, cap * sizeof(*out->steps));
        }
        vec_step_t *s = &out->steps[out->n];
        memset(s, 0, sizeof(*s));
        const char *why = NULL;
        if (parse_line(p, s, &why) < 0) {
            snprintf(err, err_size, "%s:%d: %s", path, lineno, why);
            fclose(f);
            vec_free(out);
            return -1;
        }
        s->line = lineno;
        s->opens_sequence = opens;
        opens = false;
        out->n++;
    }
    fclose(f);
    return 0;
}

void vec_free(vec_file_t *f)
{
    free(f->steps);
    f->steps = NULL;
    f->n = 0;
}

static int cmp_path(const void *a, const void *b)
{
    return strcmp(a, b);
}

size_t vec_list(const char *dir, char paths[][512], size_t max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".vec") == 0)
            snprintf(paths[n++], 512, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(paths, n, 512, cmp_path);
    return n;
}

int vec_limiter(const vec_step_t *s, ra_limiter_t *out)
{
    ra_algorithm_t alg;
    int err = ra_algorithm_parse(s->algorithm, &alg);
    if (err == 0)
        err = ra_limiter_init(out, alg, s->amount, s->period_ns, s->burst);
    if (err == 0 && !(s->share_num == 1 && s->share_den == 1 && s->unit == 1)) {
        ra_limiter_t plain = *out;
        err = ra_limiter_effective(&plain, s->share_num, s->share_den, s->unit, out);
    }
    return err;
}

bool vec_same_limiter(const vec_step_t *a, const vec_step_t *b)
{
    return strcmp(a->algorithm, b->algorithm) == 0 && a->amount == b->amount &&
           a->period_ns == b->period_ns && a->burst == b->burst && a->share_num == b->share_num &&
           a->share_den == b->share_den && a->unit == b->unit;
}
