/* The duration grammar: integer + ms|s|m|h, compounds largest first, no calendar units. */
#include <criterion/criterion.h>

#include <string.h>

#include "config.h"

#define MS INT64_C(1000000)
#define S INT64_C(1000000000)

static int64_t parse_ok(const char *s)
{
    int64_t ns = -1;
    int err = cfg_duration_parse(s, &ns);
    cr_assert_eq(err, 0, "\"%s\": %s", s, cfg_duration_strerror(err));
    return ns;
}

static void parse_err(const char *s, int want)
{
    int64_t ns = 12345;
    cr_assert_eq(cfg_duration_parse(s, &ns), want, "\"%s\"", s);
    cr_assert_eq(ns, 12345, "\"%s\" wrote its output on error", s);
}

Test(duration, single_units_scale_to_nanoseconds)
{
    cr_assert_eq(parse_ok("1500ms"), 1500 * MS);
    cr_assert_eq(parse_ok("8s"), 8 * S);
    cr_assert_eq(parse_ok("1m"), 60 * S);
    cr_assert_eq(parse_ok("2h"), 7200 * S);
    cr_assert_eq(parse_ok("0s"), 0);
}

Test(duration, compounds_add_up_largest_first)
{
    cr_assert_eq(parse_ok("1h30m"), 5400 * S);
    cr_assert_eq(parse_ok("2m30s"), 150 * S);
    cr_assert_eq(parse_ok("1h0m1s500ms"), 3601 * S + 500 * MS);
    cr_assert_eq(parse_ok("1m1ms"), 60 * S + MS);
}

Test(duration, calendar_periods_do_not_compile)
{
    parse_err("1d", CFG_DURATION_ECALENDAR);
    parse_err("1w", CFG_DURATION_ECALENDAR);
    parse_err("1mo", CFG_DURATION_ECALENDAR);
    parse_err("1y", CFG_DURATION_ECALENDAR);
    parse_err("1h1d", CFG_DURATION_ECALENDAR);
}

Test(duration, malformed_text_is_rejected_with_its_reason)
{
    parse_err("", CFG_DURATION_EEMPTY);
    parse_err("60", CFG_DURATION_ESYNTAX);
    parse_err("m", CFG_DURATION_ESYNTAX);
    parse_err("-1s", CFG_DURATION_ESYNTAX);
    parse_err(" 1s", CFG_DURATION_ESYNTAX);
    parse_err("1s ", CFG_DURATION_ESYNTAX);
    parse_err("1.5s", CFG_DURATION_ESYNTAX);
    parse_err("1us", CFG_DURATION_EUNIT);
    parse_err("1sec", CFG_DURATION_EUNIT);
    parse_err("30m1h", CFG_DURATION_EORDER);
    parse_err("1s1s", CFG_DURATION_EORDER);
    parse_err("1ms1s", CFG_DURATION_EORDER);
}

Test(duration, values_beyond_int64_nanoseconds_are_range_errors)
{
    /* INT64_MAX ns = 2562047h 47m 16.854775807s */
    cr_assert_eq(parse_ok("2562047h47m16s854ms"), INT64_C(9223372036854000000));
    parse_err("2562047h47m17s", CFG_DURATION_ERANGE);
    parse_err("2562048h", CFG_DURATION_ERANGE);
    parse_err("9223372036854775807ms", CFG_DURATION_ERANGE);
    parse_err("99999999999999999999s", CFG_DURATION_ERANGE);
}

Test(duration, calendar_words_alone_or_after_a_number_are_calendar_periods)
{
    parse_err("month", CFG_DURATION_ECALENDAR);
    parse_err("daily", CFG_DURATION_ECALENDAR);
    parse_err("Weekly", CFG_DURATION_ECALENDAR);
    parse_err("yearly", CFG_DURATION_ECALENDAR);
    parse_err("2weeks", CFG_DURATION_ECALENDAR);
    parse_err("1month", CFG_DURATION_ECALENDAR);
    parse_err("1mon", CFG_DURATION_ECALENDAR);
    parse_err("1q", CFG_DURATION_ECALENDAR);
    parse_err("monthx", CFG_DURATION_ESYNTAX);
}

static void formats_as(int64_t ns, const char *want)
{
    char buf[64];
    cr_assert_str_eq(cfg_duration_format(ns, buf, sizeof(buf)), want);
}

Test(duration, format_writes_what_the_parser_reads_back)
{
    formats_as(0, "0s");
    formats_as(200 * MS, "200ms");
    formats_as(5400 * S, "1h30m");
    formats_as(3601 * S + 500 * MS, "1h1s500ms");
    formats_as(60000, "60us");
    formats_as(INT64_MAX, "2562047h47m16s854ms775us807ns");
    const char *round_trip[] = {"1h30m", "8s", "1m1ms", "8760h"};
    for (size_t i = 0; i < sizeof(round_trip) / sizeof(round_trip[0]); i++) {
        char buf[64];
        cr_assert_str_eq(cfg_duration_format(parse_ok(round_trip[i]), buf, sizeof(buf)),
                         round_trip[i]);
    }
}

Test(duration, format_truncates_safely_into_a_small_buffer)
{
    char buf[4];
    cfg_duration_format(5400 * S, buf, sizeof(buf));
    cr_assert_eq(strlen(buf) < sizeof(buf), 1);
}
