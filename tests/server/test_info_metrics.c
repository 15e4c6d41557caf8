/* The build, process and configured-limit families of /metrics (info_metrics.c), in-process. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "info_metrics.h"

static const char yaml[] =
    "governance:\n"
    "  limits:\n"
    "    - { id: team_rpm, attach: { level: team }, type: rpm, amount: 300,"
    " period: 1m, burst: 60 }\n"
    "    - { id: win, attach: { level: key }, type: rpm, amount: 10,"
    " period: 1500ms, algorithm: fixed_window }\n"
    "    - { id: org_tpm, attach: { level: org }, type: tpm, amount: 90000,"
    " period: 1h, store: redis, posture: { mode: \"off\" } }\n"
    "    - { id: conc, attach: { level: key }, type: concurrency, amount: 5 }\n"
    "shared_state:\n"
    "  redis: { address: 127.0.0.1:6379 }\n";

static cfg_config_t *load(const char *text)
{
    cfg_config_t *cfg = NULL;
    cfg_report_t rep = {0};
    int rc = cfg_load_string("test", text, strlen(text), &cfg, &rep);
    cr_assert_eq(rc, 0, "%s", rep.n ? rep.items[0].text : "");
    cfg_report_free(&rep);
    return cfg;
}

/* Renders the families into a NUL-terminated string (the caller frees it). */
static char *render(srv_info_metrics_t *im)
{
    tt_buf_t out = {0};
    srv_info_metrics_render(&out, im);
    cr_assert(!out.failed);
    char *s = strndup((const char *)out.data, out.len);
    tt_buf_free(&out);
    return s;
}

/* The value of the sample line that starts with `series ` (name and labels), or -1. */
static double sample(const char *text, const char *series)
{
    char key[256];
    snprintf(key, sizeof key, "\n%s ", series);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

Test(info_metrics, build_info_names_the_version_and_the_commit)
{
    srv_info_metrics_t im = {.version = "1.2.3", .commit = "0123456789ab"};
    char *s = render(&im);
    cr_assert(strstr(s, "# TYPE tokentriage_build_info gauge\n"
                        "tokentriage_build_info{version=\"1.2.3\",commit=\"0123456789ab\"} 1\n"),
              "%s", s);
    free(s);
    im.commit = NULL;
    s = render(&im);
    cr_assert(strstr(s, "tokentriage_build_info{version=\"1.2.3\",commit=\"unknown\"} 1\n"), "%s",
              s);
    free(s);
}

Test(info_metrics, every_limit_shows_its_amount_and_rate_limits_their_period)
{
    cfg_config_t *cfg = load(yaml);
    srv_info_metrics_t im = {.version = "v", .commit = "c", .cfg = &cfg};
    char *s = render(&im);
    cr_assert(strstr(s, "tokentriage_limit_info{limit=\"team_rpm\",type=\"rpm\",store=\"local\","
                        "algorithm=\"gcra\",mode=\"on\"} 1\n"),
              "%s", s);
    cr_assert(strstr(s, "tokentriage_limit_info{limit=\"org_tpm\",type=\"tpm\",store=\"redis\","
                        "algorithm=\"gcra\",mode=\"off\"} 1\n"),
              "%s", s);
    cr_assert(strstr(s,
                     "tokentriage_limit_info{limit=\"conc\",type=\"concurrency\",store=\"local\","
                     "algorithm=\"none\",mode=\"on\"} 1\n"),
              "%s", s);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"team_rpm\"}"), 300);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"win\"}"), 10);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"org_tpm\"}"), 90000);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"conc\"}"), 5);
    cr_assert_eq(sample(s, "tokentriage_limit_period_seconds{limit=\"team_rpm\"}"), 60);
    cr_assert_eq(sample(s, "tokentriage_limit_period_seconds{limit=\"win\"}"), 1.5);
    cr_assert_eq(sample(s, "tokentriage_limit_period_seconds{limit=\"org_tpm\"}"), 3600);
    cr_assert_null(strstr(s, "tokentriage_limit_period_seconds{limit=\"conc\"}"), "no period");
    /* burst: as written for gcra, the amount by default; none for a window algorithm */
    cr_assert_eq(sample(s, "tokentriage_limit_burst{limit=\"team_rpm\"}"), 60);
    cr_assert_eq(sample(s, "tokentriage_limit_burst{limit=\"org_tpm\"}"), 90000);
    cr_assert_null(strstr(s, "tokentriage_limit_burst{limit=\"win\"}"), "%s", s);
    free(s);
    cfg_free(cfg);
}

Test(info_metrics, a_reload_shows_the_new_limits_at_the_next_scrape)
{
    cfg_config_t *cfg = load(yaml);
    srv_info_metrics_t im = {.version = "v", .commit = "c", .cfg = &cfg};
    char *s = render(&im);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"team_rpm\"}"), 300);
    free(s);
    cfg_config_t *old = cfg;
    cfg = load("governance:\n  limits:\n    - { id: team_rpm, attach: { level: team }, type: rpm,"
               " amount: 450, period: 30s }\n");
    cfg_free(old);
    s = render(&im);
    cr_assert_eq(sample(s, "tokentriage_limit_amount{limit=\"team_rpm\"}"), 450);
    cr_assert_eq(sample(s, "tokentriage_limit_period_seconds{limit=\"team_rpm\"}"), 30);
    cr_assert_null(strstr(s, "limit=\"conc\""), "%s", s);
    free(s);
    cfg_free(cfg);
}

Test(info_metrics, the_process_families_follow_the_process)
{
    srv_info_metrics_t im = {.version = "v", .commit = "c"};
    char *s = render(&im);
    double fds = sample(s, "process_open_fds");
    double start = sample(s, "process_start_time_seconds");
    cr_assert_gt(sample(s, "process_resident_memory_bytes"), 0, "%s", s);
    cr_assert_geq(sample(s, "process_virtual_memory_bytes"),
                  sample(s, "process_resident_memory_bytes"));
    cr_assert_gt(sample(s, "process_max_fds"), 0, "%s", s);
    cr_assert_geq(sample(s, "process_cpu_seconds_total"), 0, "%s", s);
    /* this process started within the last minute (Criterion forks each test's process) */
    double now = (double)time(NULL);
    cr_assert(start > now - 60 && start <= now + 1, "start %.2f, now %.0f", start, now);
    free(s);
    int fd[3] = {open("/dev/null", O_RDONLY), open("/dev/null", O_RDONLY),
                 open("/dev/null", O_RDONLY)};
    s = render(&im);
    cr_assert_eq(sample(s, "process_open_fds"), fds + 3, "%s", s);
    free(s);
    for (int i = 0; i < 3; i++)
        close(fd[i]);
}
