/*
 * tokentriage validate [--arm [--offline]] [--explain] FILE: `nginx -t` for a config.
 *
 * Validate resolves names and checks coherence; --arm also compiles every limit, as serve
 * does at start and on reload, so the seed's domain checks run, and then runs every check serve
 * runs on this host before it listens (srv_preflight: the keyring, the socket's directory, the
 * listeners' addresses, the state directory), unless --offline (CI away from the node);
 * --explain (implies --arm) prints each compiled limit with the counter identity an edit would
 * keep or reset.
 * Errors and warnings go to stderr, one per line; the verdict line and --explain to stdout.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "json.h"
#include "preflight.h"

static void explain_limit(FILE *to, const cfg_limit_t *l)
{
    char a[48], b[48], c[48];
    fprintf(to, "limit \"%s\"\n", l->id);
    fprintf(to, "  identity   %016" PRIx64 "\n", l->identity);
    fprintf(to, "  type       %s  level %s  store %s  posture %s/%s/%s\n", cfg_type_name(l->type),
            l->level, cfg_store_name(l->store), l->posture.on ? "on" : "off",
            l->posture.enforce_hard ? "hard" : "soft", l->posture.fail_open ? "open" : "closed");
    if (!cfg_type_is_rate(l->type)) {
        fprintf(to, "  amount     %lld%s\n", (long long)l->amount,
                l->type == CFG_TYPE_CONCURRENCY ? " in flight per key (a live gauge)"
                                                : " (ledger type: not enforced by this daemon)");
        fprintf(to, "  identity reads: id type level store algorithm amount\n");
        return;
    }
    const ra_limiter_t *r = &l->limiter;
    bool reads_burst = l->algorithm == RA_GCRA || l->algorithm == RA_TOKEN_BUCKET;
    fprintf(to, "  algorithm  %s  amount %lld per %s\n", ra_algorithm_name(l->algorithm),
            (long long)l->amount, cfg_duration_format(l->period_ns, a, sizeof(a)));
    if (reads_burst) {
        fprintf(to, "  burst      %lld\n", (long long)l->burst);
        fprintf(to, "  T          %s (%lld ns)  tau %s (%lld ns)\n",
                cfg_duration_format(r->emission_ns, b, sizeof(b)), (long long)r->emission_ns,
                cfg_duration_format(r->tolerance_ns, c, sizeof(c)), (long long)r->tolerance_ns);
        fprintf(to, "  ceilings   no counter ceiling; a single cost above %lld is unfittable%s\n",
                (long long)(r->tolerance_ns / r->emission_ns),
                l->type == CFG_TYPE_TPM ? "; the reserve cap 16384 always fits" : "");
        fprintf(to, "  identity reads: id type level store algorithm amount period burst\n");
    } else {
        fprintf(to, "  burst      %lld (inert: %s does not read it)\n", (long long)l->burst,
                ra_algorithm_name(l->algorithm));
        fprintf(to, "  window     %s aligned to the epoch\n", a);
        fprintf(to, "  ceilings   amount %lld of the packed window-counter ceiling 65535\n",
                (long long)l->amount);
        fprintf(to, "  identity reads: id type level store algorithm amount period (editing "
                    "burst keeps the counter)\n");
    }
}

#define HELP                                                                                       \
    "usage: tokentriage validate [--arm [--offline]] [--explain] [--json] FILE\n"                  \
    "\n"                                                                                           \
    "Checks a configuration file before it ships, as `nginx -t` does: names and coherence\n"       \
    "(unknown keys, with a suggestion; types, durations, algorithms, store bindings). Every\n"     \
    "problem is one line on stderr, \"Error: PATH: MESSAGE (FILE:LINE:COL)\"; warnings go "        \
    "beside;\n"                                                                                    \
    "\"OK: configuration is valid\" goes to stdout when there is no error. With no option it\n"    \
    "neither compiles the limits nor looks at this host: --arm does both.\n"                       \
    "\n"                                                                                           \
    "options:\n"                                                                                   \
    "  --arm                also compile every limit, as serve does at start and on reload (the\n" \
    "                       algorithms' domain checks), then run the checks serve runs on this\n"  \
    "                       host before it listens: the keyring file, the socket's directory,\n"   \
    "                       the listeners' addresses, the state directory (run it where and as\n"  \
    "                       whom the daemon runs)\n"                                               \
    "  --offline            with --arm: compile only, leave the host alone (CI away from the\n"    \
    "                       node)\n"                                                               \
    "  --explain            --arm, then print each compiled limit: its counter identity, T and\n"  \
    "                       tau, its ceilings, what an edit would keep or reset\n"                 \
    "  --json               print one JSON object on stdout instead of the lines: file, valid,\n"  \
    "                       errors, warnings, findings [{severity, code, path, line, column,\n"    \
    "                       message}] (line and column null for findings without a position)\n"    \
    "  -h, --help           this text\n"                                                           \
    "\n"                                                                                           \
    "exit status: 0 valid (warnings allowed), 64 usage, 66 the file cannot be read, 70 out of\n"   \
    "memory, 78 errors found.\n"

/* Appends a C string; nonzero when memory ran out. */
static int put(tt_buf_t *out, const char *s)
{
    return tt_buf_append(out, s, strlen(s));
}

/* The findings as one JSON object (--json), for CI annotations. 0, or -1 out of memory. */
static int print_json(const char *file, const cfg_report_t *r, int rc)
{
    tt_buf_t out = {0};
    char num[64];
    int bad = put(&out, "{\"file\":") | tt_json_str(&out, file, strlen(file));
    snprintf(num, sizeof(num), ",\"valid\":%s,\"errors\":%zu,\"warnings\":%zu,\"findings\":[",
             rc == 0 ? "true" : "false", r->n_errors, r->n_warnings);
    bad |= put(&out, num);
    for (size_t i = 0; i < r->n; i++) {
        const cfg_finding_t *f = &r->items[i];
        const char *code = f->warning ? NULL : tt_err_name(f->code);
        bad |= put(&out, i ? ",{\"severity\":\"" : "{\"severity\":\"");
        bad |= put(&out, f->warning ? "warning\",\"code\":" : "error\",\"code\":");
        bad |= code ? tt_json_str(&out, code, strlen(code)) : put(&out, "null");
        bad |= put(&out, ",\"path\":") | tt_json_str(&out, f->path, strlen(f->path));
        if (f->line > 0)
            snprintf(num, sizeof(num), ",\"line\":%d,\"column\":%d", f->line, f->col);
        else
            snprintf(num, sizeof(num), ",\"line\":null,\"column\":null");
        bad |= put(&out, num) | put(&out, ",\"message\":");
        bad |= tt_json_str(&out, f->message, strlen(f->message)) | put(&out, "}");
    }
    bad |= put(&out, "]}\n");
    if (!bad)
        fwrite(out.data, 1, out.len, stdout);
    tt_buf_free(&out);
    return bad ? -1 : 0;
}

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {
        {"arm", no_argument, NULL, 'a'},     {"explain", no_argument, NULL, 'e'},
        {"offline", no_argument, NULL, 'o'}, {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},    {NULL, 0, NULL, 0}};
    int arm = 0, explain = 0, offline = 0, json = 0, ch;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "aeh", opts, HELP)) != -1) {
        switch (ch) {
        case 'a':
            arm = 1;
            break;
        case 'e':
            explain = arm = 1;
            break;
        case 'o':
            offline = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            return cmd_help(HELP);
        default: /* CMD_OPT_BAD: said */
            return EX_USAGE_;
        }
    }
    if (optind == argc)
        return cmd_usage_error(HELP, "FILE is required");
    if (optind != argc - 1)
        return cmd_usage_error(HELP, "one FILE, got \"%s\" too", argv[optind + 1]);
    const char *file = argv[optind];
    struct stat st; /* 66 as `state inspect`: no file to read is not a config with errors */
    bool noinput = stat(file, &st) != 0 || !S_ISREG(st.st_mode) || access(file, R_OK) != 0;
    cfg_report_t report = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_file(file, &cfg, &report);
    if (rc == 0 && arm)
        rc = cfg_arm(cfg, &report);
    if (rc == 0 && arm && !offline) /* what serve checks on this host before it listens */
        rc = srv_preflight(cfg, NULL, false, &report);
    if (json && print_json(file, &report, rc) != 0) {
        fprintf(stderr, "tokentriage validate: out of memory\n");
        rc = CFG_ENOMEM;
    } else if (!json)
        cfg_report_print(&report, stderr);
    if (rc == 0) {
        if (explain && !json)
            for (size_t i = 0; i < cfg->n_limits; i++)
                explain_limit(stdout, &cfg->limits[i]);
        if (!json)
            printf("OK: configuration is valid\n");
    }
    cfg_report_free(&report);
    cfg_free(cfg);
    return rc == 0 ? EX_OK_ : rc == CFG_ENOMEM ? EX_SOFTWARE_ : noinput ? EX_NOINPUT_ : EX_CONFIG_;
}
