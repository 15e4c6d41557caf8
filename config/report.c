/* The findings of a load or an arm: formatted lines the report owns. */
#include "internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int cfg__report_add(cfg_report_t *r, bool warning, const char *fmt, ...)
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
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n < 0 ? NULL : malloc((size_t)n + 1);
    if (!text)
        return CFG_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
    r->items[r->n++] = (cfg_finding_t){.warning = warning, .text = text};
    if (warning)
        r->n_warnings++;
    else
        r->n_errors++;
    return 0;
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
