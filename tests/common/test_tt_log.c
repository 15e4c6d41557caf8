/* The one logger: lines as rendered (typed values, quoting, escaping, bounds), and as written. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tt_log.h"

/* 2026-12-06T01:43:56.830Z */
#define NOW (INT64_C(1796521436) * 1000000000 + 830123456)

static char line[TT_LOG_LINE_MAX + 1];

#define RENDER(fmt, level, msg, ...)                                                               \
    do {                                                                                           \
        const tt_log_field_t f_[] = {{.key = NULL}, __VA_ARGS__};                                  \
        size_t n_ =                                                                                \
            tt_log_render(line, (fmt), NOW, (level), (msg), f_ + 1, sizeof f_ / sizeof f_[0] - 1); \
        line[n_] = 0;                                                                              \
    } while (0)

Test(tt_log, a_line_begins_with_ts_level_and_msg_in_both_formats)
{
    RENDER(TT_LOG_LOGFMT, TT_LOG_INFO, "stopped");
    cr_assert_str_eq(line, "ts=2026-12-06T01:43:56.830Z level=info msg=stopped\n");
    RENDER(TT_LOG_JSON, TT_LOG_WARN, "stopped");
    cr_assert_str_eq(line, "{\"ts\":\"2026-12-06T01:43:56.830Z\",\"level\":\"warn\","
                           "\"msg\":\"stopped\"}\n");
}

Test(tt_log, values_are_typed_in_json)
{
    RENDER(TT_LOG_JSON, TT_LOG_INFO, "state: restored", TT_STR("file", "/var/x.snap"),
           TT_UINT("restored", 12), TT_INT("delta", -3), TT_BOOL("at_stop", true),
           TT_NUM("age_s", 0.25), TT_NUM("nan", NAN), TT_STR("absent", NULL));
    cr_assert_str_eq(line, "{\"ts\":\"2026-12-06T01:43:56.830Z\",\"level\":\"info\",\"msg\":"
                           "\"state: restored\",\"file\":\"/var/x.snap\",\"restored\":12,"
                           "\"delta\":-3,\"at_stop\":true,\"age_s\":0.25,\"nan\":null}\n");
}

Test(tt_log, logfmt_quotes_only_what_needs_it)
{
    RENDER(TT_LOG_LOGFMT, TT_LOG_WARN, "reload refused", TT_STR("limit", "team_rpm"),
           TT_STR("why", "a \"b\"\nc=d"), TT_STR("skipped", NULL), TT_STR("empty", ""),
           TT_STR("utf8", "caf\xc3\xa9"), TT_INT("n", 3), TT_BOOL("held", false),
           TT_NUM("inf", INFINITY));
    cr_assert_str_eq(line, "ts=2026-12-06T01:43:56.830Z level=warn msg=\"reload refused\" "
                           "limit=team_rpm why=\"a \\\"b\\\"\\nc=d\" empty=\"\" "
                           "utf8=\"caf\xc3\xa9\" n=3 held=false inf=Inf\n");
}

Test(tt_log, control_bytes_are_escaped_and_bytes_not_utf8_replaced_by_the_one_escaper)
{
    /* a lone continuation byte, an overlong form, a surrogate, a cut sequence at the end */
    RENDER(TT_LOG_JSON, TT_LOG_ERROR, "x",
           TT_STR("v", "\x01\t\x7f\\ \x80 \xc0\xaf \xed\xa0\x80 \xe2\x82\xac \xf0\x9f\x98"));
    const char *v = strstr(line, "\"v\":");
    cr_assert_not_null(v);
    cr_assert_str_eq(v, "\"v\":\"\\u0001\\t\\u007f\\\\ \\ufffd \\ufffd\\ufffd "
                        "\\ufffd\\ufffd\\ufffd \xe2\x82\xac \\ufffd\\ufffd\\ufffd\"}\n");
}

Test(tt_log, a_long_value_is_cut_and_marked)
{
    static char big[3 * TT_LOG_VALUE_MAX];
    memset(big, 'a', sizeof big - 1);
    RENDER(TT_LOG_JSON, TT_LOG_INFO, "x", TT_STR("big", big), TT_INT("after", 1));
    const char *v = strstr(line, "\"big\":\"");
    cr_assert_not_null(v);
    const char *end = strstr(v, "...\",\"after\":1}\n");
    cr_assert_not_null(end, "%s", line);
    cr_assert_eq(end - (v + 7), TT_LOG_VALUE_MAX);
}

Test(tt_log, a_line_past_its_bound_drops_whole_fields_and_says_so)
{
    static char big[TT_LOG_VALUE_MAX];
    memset(big, 'b', sizeof big - 1);
    tt_log_field_t f[8];
    for (int i = 0; i < 8; i++)
        f[i] = TT_STR("k", big);
    for (int fmt = TT_LOG_LOGFMT; fmt <= TT_LOG_JSON; fmt++) {
        size_t n = tt_log_render(line, (tt_log_format_t)fmt, NOW, TT_LOG_INFO, "m", f, 8);
        line[n] = 0;
        cr_assert_leq(n, TT_LOG_LINE_MAX);
        const char *tail = fmt == TT_LOG_JSON ? ",\"truncated\":true}\n" : " truncated=true\n";
        cr_assert_str_eq(line + n - strlen(tail), tail, "%s", line + n - 40);
        /* whole fields only: every kept value is whole */
        size_t kept = 0;
        for (const char *p = line; (p = strstr(p, big)); p += sizeof big - 1)
            kept++;
        cr_assert(kept >= 2 && kept < 8, "%zu fields kept", kept);
    }
}

Test(tt_log, levels_and_formats_parse_by_name)
{
    tt_log_level_t l;
    tt_log_format_t f;
    cr_assert_eq(tt_log_parse_level("debug", &l), 0);
    cr_assert_eq(l, TT_LOG_DEBUG);
    cr_assert_eq(tt_log_parse_level("error", &l), 0);
    cr_assert_eq(l, TT_LOG_ERROR);
    cr_assert_eq(tt_log_parse_level("loud", &l), -1);
    cr_assert_eq(l, TT_LOG_ERROR, "a bad name sets nothing");
    cr_assert_eq(tt_log_parse_format("json", &f), 0);
    cr_assert_eq(f, TT_LOG_JSON);
    cr_assert_eq(tt_log_parse_format("xml", &f), -1);
}

/* Runs one tt_log call with stderr sent to a file, and reads back what it wrote. */
#define CAPTURE(call)                                                                              \
    do {                                                                                           \
        FILE *tmp = tmpfile();                                                                     \
        int saved = dup(2);                                                                        \
        dup2(fileno(tmp), 2);                                                                      \
        call;                                                                                      \
        dup2(saved, 2);                                                                            \
        close(saved);                                                                              \
        rewind(tmp);                                                                               \
        size_t n = fread(line, 1, sizeof(line) - 1, tmp);                                          \
        line[n] = 0;                                                                               \
        fclose(tmp);                                                                               \
    } while (0)

Test(tt_log, lines_below_the_level_are_not_written)
{
    tt_log_set_format(TT_LOG_JSON);
    tt_log_set_level(TT_LOG_INFO);
    CAPTURE(tt_log(TT_LOG_DEBUG, "noise", TT_INT("n", 1)));
    cr_assert_str_eq(line, "");
    cr_assert(!tt_log_enabled(TT_LOG_DEBUG) && tt_log_enabled(TT_LOG_INFO));
    CAPTURE(tt_log(TT_LOG_INFO, "member joined", TT_STR("member", "r2"), TT_INT("n", 3)));
    cr_assert(strncmp(line, "{\"ts\":\"20", 9) == 0, "%s", line);
    cr_assert_str_eq(strstr(line, "\"level\""),
                     "\"level\":\"info\",\"msg\":\"member joined\",\"member\":\"r2\",\"n\":3}\n");
    tt_log_set_level(TT_LOG_WARN);
    cr_assert_eq(tt_log_level(), TT_LOG_WARN);
    CAPTURE(tt_log(TT_LOG_INFO, "quiet"));
    cr_assert_str_eq(line, "");
    tt_log_set_level(TT_LOG_INFO);
    tt_log_set_format(TT_LOG_LOGFMT);
}

/* What a door refuses is logged at most once per interval: the first at once, then each line
 * with how many came since the one before. */
Test(tt_log, a_recurring_event_is_told_once_per_interval_with_how_many_came)
{
    tt_log_every_t e = {0};
    const int64_t s = 1000000000;
    cr_assert_eq(tt_log_every(&e, 100 * s, 10 * s), 1, "the first is told at once");
    uint64_t told = 0;
    for (int i = 1; i <= 999; i++) /* 999 more within the next 10 s */
        told += tt_log_every(&e, 100 * s + i * (s / 100), 10 * s);
    cr_assert_eq(told, 0, "none of them is told before the interval has passed");
    cr_assert_eq(tt_log_every(&e, 110 * s, 10 * s), 1000, "the next line tells the 999 and itself");
    cr_assert_eq(tt_log_every(&e, 115 * s, 10 * s), 0);
    cr_assert_eq(tt_log_every(&e, 500 * s, 10 * s), 2, "one held back, and this one, much later");
}
