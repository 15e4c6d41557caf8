/* Build, process and configured-limit families of /metrics; see info_metrics.h. */
#include "info_metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "limit.h"
#include "metrics.h"
#include "ratealg.h"

#define P srv_metrics_printf

/* Reads the whole of a small /proc file into buf (NUL-terminated). Returns its length or -1. */
static long read_small(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* The process's start, in seconds since the epoch, as client_golang's procfs collector reads
 * it: /proc/self/stat's starttime (clock ticks after boot) plus /proc/stat's btime. -1 when
 * either cannot be read. */
static double start_time_s(void)
{
    char buf[1024];
    unsigned long long ticks = 0, btime = 0;
    if (read_small("/proc/self/stat", buf, sizeof(buf)) < 0)
        return -1;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    /* after ')': state is field 3, starttime field 22, so 19 fields are skipped */
    if (!p || sscanf(p + 1,
                     " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                     "%*d %*d %llu",
                     &ticks) != 1)
        return -1;
    static char stat[8192]; /* /proc/stat grows with the cores; btime follows the cpu lines */
    if (read_small("/proc/stat", stat, sizeof(stat)) < 0)
        return -1;
    const char *b = strstr(stat, "\nbtime ");
    long hz = sysconf(_SC_CLK_TCK);
    if (!b || sscanf(b, "\nbtime %llu", &btime) != 1 || hz <= 0)
        return -1;
    return (double)btime + (double)ticks / (double)hz;
}

/* Open descriptors: the entries of /proc/self/fd, less the one that lists them. -1 on error. */
static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    long n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1;
}

static void process_families(tt_buf_t *out)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        P(out,
          "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n"
          "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n",
          (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
    char statm[256];
    unsigned long long size = 0, resident = 0;
    long page = sysconf(_SC_PAGESIZE);
    if (read_small("/proc/self/statm", statm, sizeof(statm)) > 0 &&
        sscanf(statm, "%llu %llu", &size, &resident) == 2 && page > 0)
        P(out,
          "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
          "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %llu\n"
          "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
          "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %llu\n",
          size * (unsigned long long)page, resident * (unsigned long long)page);
    long fds = open_fds();
    if (fds >= 0)
        P(out,
          "# HELP process_open_fds Number of open file descriptors.\n"
          "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
          fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        P(out,
          "# HELP process_max_fds Maximum number of open file descriptors.\n"
          "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
          (unsigned long long)rl.rlim_cur);
    double start = start_time_s();
    if (start >= 0)
        P(out,
          "# HELP process_start_time_seconds Start time of the process since unix epoch in "
          "seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
          start);
}

static void limit_families(tt_buf_t *out, const cfg_config_t *cfg)
{
    size_t n = cfg ? cfg->n_limits : 0;
    P(out, "# HELP tokentriage_limit_info A configured limit: its type, store, algorithm and "
           "posture mode (on, off).\n# TYPE tokentriage_limit_info gauge\n");
    for (size_t i = 0; i < n; i++) {
        const cfg_limit_t *l = &cfg->limits[i];
        P(out,
          "tokentriage_limit_info{limit=\"%s\",type=\"%s\",store=\"%s\",algorithm=\"%s\","
          "mode=\"%s\"} 1\n",
          l->id, cfg_type_name(l->type), cfg_store_name(l->store),
          cfg_type_is_rate(l->type) ? ra_algorithm_name(l->algorithm) : "none",
          l->posture.on ? "on" : "off");
    }
    P(out, "# HELP tokentriage_limit_amount A configured limit's amount: requests or tokens per "
           "period for the whole fleet (rpm, tpm), leases held at once (concurrency), or the "
           "ledger quota.\n# TYPE tokentriage_limit_amount gauge\n");
    for (size_t i = 0; i < n; i++)
        P(out, "tokentriage_limit_amount{limit=\"%s\"} %lld\n", cfg->limits[i].id,
          (long long)cfg->limits[i].amount);
    P(out, "# HELP tokentriage_limit_period_seconds A rate-class limit's period.\n"
           "# TYPE tokentriage_limit_period_seconds gauge\n");
    for (size_t i = 0; i < n; i++)
        if (cfg_type_is_rate(cfg->limits[i].type))
            P(out, "tokentriage_limit_period_seconds{limit=\"%s\"} %.9g\n", cfg->limits[i].id,
              (double)cfg->limits[i].period_ns / 1e9);
    P(out, "# HELP tokentriage_limit_burst A gcra or token_bucket limit's burst (the window "
           "algorithms read none).\n# TYPE tokentriage_limit_burst gauge\n");
    for (size_t i = 0; i < n; i++) {
        const cfg_limit_t *l = &cfg->limits[i];
        if (cfg_type_is_rate(l->type) &&
            (l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET))
            P(out, "tokentriage_limit_burst{limit=\"%s\"} %lld\n", l->id, (long long)l->burst);
    }
}

void srv_info_metrics_render(tt_buf_t *out, void *ud)
{
    const srv_info_metrics_t *im = ud;
    P(out,
      "# HELP tokentriage_build_info The version and source commit of the running binary.\n"
      "# TYPE tokentriage_build_info gauge\n"
      "tokentriage_build_info{version=\"%s\",commit=\"%s\"} 1\n",
      im->version ? im->version : "", im->commit ? im->commit : "unknown");
    process_families(out);
    limit_families(out, im->cfg ? *im->cfg : NULL);
}
