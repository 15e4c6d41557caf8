/* Log lines: logfmt quoting and escaping, JSON objects, one line per call. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static char line[4096];

/* Runs one srv_log call with stderr sent to a file, and reads back what it wrote. */
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

Test(log, logfmt_quotes_only_what_needs_it)
{
    srv_log_set_format(SRV_LOG_LOGFMT);
    CAPTURE(srv_log(SRV_LOG_WARN, "reload failed", "limit", "team_rpm", "why", "a \"b\"\nc",
                    "skipped", NULL, "empty", "", NULL));
    const char *rest = strstr(line, " level=");
    cr_assert_not_null(rest, "%s", line);
    cr_assert(strncmp(line, "ts=20", 5) == 0, "%s", line);
    cr_assert_str_eq(rest,
                     " level=warn msg=\"reload failed\" limit=team_rpm why=\"a \\\"b\\\"\\nc\" "
                     "empty=\"\"\n");
}

Test(log, json_lines_are_one_object_each)
{
    srv_log_format_t f;
    cr_assert_eq(srv_log_parse_format("json", &f), 0);
    cr_assert_eq(srv_log_parse_format("xml", &f), -1);
    srv_log_set_format(SRV_LOG_JSON);
    CAPTURE(srv_log(SRV_LOG_INFO, "serving", "socket", "/run/x.sock", NULL));
    const char *rest = strstr(line, "\",\"level\"");
    cr_assert(strncmp(line, "{\"ts\":\"20", 9) == 0, "%s", line);
    cr_assert_str_eq(rest,
                     "\",\"level\":\"info\",\"msg\":\"serving\",\"socket\":\"/run/x.sock\"}\n");
}

Test(log, levels_below_the_threshold_are_dropped)
{
    srv_log_set_format(SRV_LOG_LOGFMT);
    CAPTURE(srv_log(SRV_LOG_DEBUG, "noise", NULL));
    cr_assert_str_eq(line, "");
}
