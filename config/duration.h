/*
 * Durations as users write them: an integer and a unit (ms, s, m, h), compounded from the
 * largest unit to the smallest, each unit at most once: "1m", "1500ms", "1h30m", "2m30s".
 * Calendar periods (d, w, mo, y) do not compile: their length is not a fixed number of
 * seconds, and a rate window must be one.
 */
#ifndef TT_CONFIG_DURATION_H
#define TT_CONFIG_DURATION_H

#include <stdint.h>

enum {
    CFG_DURATION_EEMPTY = -1,    /* "" */
    CFG_DURATION_ESYNTAX = -2,   /* not digits followed by a unit */
    CFG_DURATION_EUNIT = -3,     /* a unit other than ms, s, m, h */
    CFG_DURATION_ECALENDAR = -4, /* d, w, mo, y: calendar periods */
    CFG_DURATION_EORDER = -5,    /* a unit repeated, or smaller before larger ("30m1h") */
    CFG_DURATION_ERANGE = -6,    /* leaves int64 nanoseconds */
};

/* Parses `s` (NUL-terminated, nothing around it: no sign, no spaces) into nanoseconds.
 * Returns 0 and sets *ns, or a negative CFG_DURATION_E* code and leaves *ns untouched. */
int cfg_duration_parse(const char *s, int64_t *ns);

/* A sentence saying what was wrong, for "<path>: <message>" errors. */
const char *cfg_duration_strerror(int err);

#endif
