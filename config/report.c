/* The findings of a load or an arm: code, path, message and position, owned by the report. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int report_vadd(cfg_report_t *r, bool warning, int code, const char *path,
                       const cfg_pos_t *at, const char *fmt, va_list args)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 16;
        cfg_finding_t *items = realloc(r->items, cap * sizeof(*items));
        if (!items)
            return CFG_ENOMEM;
        r->items = items;
        r->cap = cap;
    }
    va_list ap;
    va_copy(ap, args);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char pos[64] = "";
    if (at)
        snprintf(pos, sizeof(pos), " (%s:%d:%d)", at->file, at->line, at->col);
    /* one block: the text ("path: message (file:line:col)"), then the path, then the message */
    size_t plen = strlen(path), tlen = plen + 2 + (size_t)n + strlen(pos);
    char *text = n < 0 ? NULL : malloc(tlen + 1 + plen + 1 + (size_t)n + 1);
    if (!text)
        return CFG_ENOMEM;
    char *p = text + tlen + 1, *message = p + plen + 1;
    memcpy(p, path, plen + 1);
    va_copy(ap, args);
    vsnprintf(message, (size_t)n + 1, fmt, ap);
    va_end(ap);
    char *t = text; /* "path: message (file:line:col)", from the pieces already in place */
    memcpy(t, path, plen);
    memcpy(t += plen, ": ", 2);
    memcpy(t += 2, message, (size_t)n);
    memcpy(t += n, pos, strlen(pos) + 1);
    r->items[r->n++] = (cfg_finding_t){.warning = warning,
                                       .code = warning ? 0 : code,
                                       .path = p,
                                       .message = message,
                                       .line = at ? at->line : 0,
                                       .col = at ? at->col : 0,
                                       .text = text};
    if (warning)
        r->n_warnings++;
    else
        r->n_errors++;
    return 0;
}

int cfg__report_add(cfg_report_t *r, bool warning, int code, const char *path, const cfg_pos_t *at,
                    const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report_vadd(r, warning, code, path, at, fmt, ap);
    va_end(ap);
    return rc;
}

int cfg_report_add(cfg_report_t *r, bool warning, int code, const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = report_vadd(r, warning, code, path, NULL, fmt, ap);
    va_end(ap);
    return rc;
}

void cfg_report_print(const cfg_report_t *r, FILE *to)
{
    for (size_t i = 0; i < r->n; i++)
        fprintf(to, "%s: %s\n", r->items[i].warning ? "Warning" : "Error", r->items[i].text);
}

void cfg_report_free(cfg_report_t *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->items[i].text);
    free(r->items);
    memset(r, 0, sizeof(*r));
}
