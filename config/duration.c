/* Parsing durations ("1h30m"). Shared by the config loader and `tokentriage simulate`. */
#include "duration.h"

#include <string.h>

static const struct unit {
    const char *name;
    int64_t ns;
} units[] = {
    /* largest first: a compound must follow this order, which is also the match order
     * ("ms" before "m" is handled by matching the longest name at each position) */
    {"h", INT64_C(3600000000000)},
    {"m", INT64_C(60000000000)},
    {"s", INT64_C(1000000000)},
    {"ms", INT64_C(1000000)},
};

#define NUNITS (sizeof(units) / sizeof(units[0]))

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Matches the unit spelled by the letters [p, p+len); returns its index or a code. */
static int unit_lookup(const char *p, size_t len)
{
    for (unsigned i = 0; i < NUNITS; i++)
        if (strlen(units[i].name) == len && memcmp(p, units[i].name, len) == 0)
            return (int)i;
    static const char *const calendar[] = {"d", "w", "mo", "y", "M", "D", "W", "Y"};
    for (unsigned i = 0; i < sizeof(calendar) / sizeof(calendar[0]); i++)
        if (strlen(calendar[i]) == len && memcmp(p, calendar[i], len) == 0)
            return CFG_DURATION_ECALENDAR;
    return CFG_DURATION_EUNIT;
}

int cfg_duration_parse(const char *s, int64_t *ns)
{
    if (s == NULL || *s == '\0')
        return CFG_DURATION_EEMPTY;
    int64_t total = 0;
    int next_unit = 0; /* the largest unit still allowed */
    const char *p = s;
    while (*p) {
        if (!is_digit(*p))
            return CFG_DURATION_ESYNTAX;
        int64_t n = 0;
        for (; is_digit(*p); p++)
            if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, *p - '0', &n))
                return CFG_DURATION_ERANGE;
        const char *u = p;
        while (is_alpha(*p))
            p++;
        if (p == u)
            return CFG_DURATION_ESYNTAX;
        int k = unit_lookup(u, (size_t)(p - u));
        if (k < 0)
            return k;
        if (k < next_unit)
            return CFG_DURATION_EORDER;
        next_unit = k + 1;
        int64_t part;
        if (__builtin_mul_overflow(n, units[k].ns, &part) ||
            __builtin_add_overflow(total, part, &total))
            return CFG_DURATION_ERANGE;
    }
    *ns = total;
    return 0;
}

const char *cfg_duration_strerror(int err)
{
    switch (err) {
    case CFG_DURATION_EEMPTY:
        return "empty duration";
    case CFG_DURATION_ESYNTAX:
        return "a duration is an integer and a unit, ms, s, m or h, compounded largest first "
               "(e.g. 1m, 1500ms, 1h30m)";
    case CFG_DURATION_EUNIT:
        return "unknown duration unit: use ms, s, m or h";
    case CFG_DURATION_ECALENDAR:
        return "calendar periods (days, weeks, months, years) are not durations: write hours, "
               "e.g. 24h";
    case CFG_DURATION_EORDER:
        return "compound duration units go from largest to smallest, each once (e.g. 1h30m)";
    case CFG_DURATION_ERANGE:
        return "duration overflows int64 nanoseconds (about 292 years)";
    default:
        return "invalid duration";
    }
}
