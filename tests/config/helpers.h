/* Shared by the config tests: load a config from text and read back what was reported. */
#ifndef TT_TESTS_CONFIG_HELPERS_H
#define TT_TESTS_CONFIG_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* Everything the report holds, printed as validate prints it; caller frees. */
static inline char *report_text(const cfg_report_t *r)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cfg_report_print(r, f);
    fclose(f);
    return text;
}

/* Loads `yaml` (named "t.yaml"), arms it when `arm` and the load succeeded; returns the
 * printed report (caller frees) and the model in *out (NULL on error). */
static inline char *load_text(const char *yaml, int arm, cfg_config_t **out)
{
    cfg_report_t r = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_string("t.yaml", yaml, strlen(yaml), &cfg, &r);
    if (rc == 0 && arm && cfg_arm(cfg, &r) < 0) {
        cfg_free(cfg);
        cfg = NULL;
    }
    char *text = report_text(&r);
    cfg_report_free(&r);
    if (out)
        *out = cfg;
    else
        cfg_free(cfg);
    return text;
}

/* Reads a whole file into a malloc'd buffer; *len its size. */
static inline char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap + 1);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

#endif
