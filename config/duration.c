/* Parsing durations ("1h30m"). Shared by the config loader and `tokentriage simulate`. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

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

/* Calendar periods written as words, alone ("month", "daily") or after a number ("2weeks"):
 * refused with the calendar error, so the user learns to write hours, not just "bad unit". */
static int is_calendar_word(const char *p, size_t len)
{
    static const char *const words[] = {
        "day",      "days",   "daily",    "week",    "weeks",     "weekly",   "fortnight",
        "month",    "months", "monthly",  "year",    "years",     "yearly",   "annual",
        "annually", "hourly", "minutely", "quarter", "quarterly", "calendar", NULL};
    for (unsigned i = 0; words[i]; i++)
        if (strlen(words[i]) == len && strncasecmp(p, words[i], len) == 0)
            return 1;
    return 0;
}

/* Matches the unit spelled by the letters [p, p+len); returns its index or a code. */
static int unit_lookup(const char *p, size_t len)
{
    for (unsigned i = 0; i < NUNITS; i++)
        if (strlen(units[i].name) == len && memcmp(p, units[i].name, len) == 0)
            return (int)i;
    static const char *const calendar[] = {"d", "w", "mo", "y", "M", "D", "W", "Y", "mon", "q"};
    for (unsigned i = 0; i < sizeof(calendar) / sizeof(calendar[0]); i++)
        if (strlen(calendar[i]) == len && memcmp(p, calendar[i], len) == 0)
            return CFG_DURATION_ECALENDAR;
    return is_calendar_word(p, len) ? CFG_DURATION_ECALENDAR : CFG_DURATION_EUNIT;
}

int cfg_duration_parse(const char *s, int64_t *ns)
{
    if (s == NULL || *s == '\0')
        return CFG_DURATION_EEMPTY;
    if (is_calendar_word(s, strlen(s)))
        return CFG_DURATION_ECALENDAR;
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

char *cfg_duration_format(int64_t ns, char *buf, size_t size)
{
    static const struct unit parts[] = {{"h", INT64_C(3600000000000)}, {"m", INT64_C(60000000000)},
                                        {"s", INT64_C(1000000000)},    {"ms", INT64_C(1000000)},
                                        {"us", INT64_C(1000)},         {"ns", 1}};
    size_t used = 0;
    if (size == 0)
        return buf;
    snprintf(buf, size, "%s", ns == 0 ? "0s" : ns < 0 ? "-" : "");
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]) && ns > 0; i++) {
        int64_t v = ns / parts[i].ns;
        ns %= parts[i].ns;
        if (v == 0)
            continue;
        int n = snprintf(buf + used, size - used, "%lld%s", (long long)v, parts[i].name);
        if (n < 0 || (size_t)n >= size - used)
            break;
        used += (size_t)n;
    }
    return buf;
}
