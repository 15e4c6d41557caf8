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

#include "cmd.h"
#include "config.h"
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

int cmd_validate(int argc, char **argv)
{
    static const struct option opts[] = {{"arm", no_argument, NULL, 'a'},
                                         {"explain", no_argument, NULL, 'e'},
                                         {"offline", no_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int arm = 0, explain = 0, offline = 0, ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "aeh", opts, NULL)) != -1) {
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
        case 'h':
            printf("usage: tokentriage validate [--arm [--offline]] [--explain] FILE\n");
            return EX_OK_;
        default:
            fprintf(stderr, "usage: tokentriage validate [--arm [--offline]] [--explain] FILE\n");
            return EX_USAGE_;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "usage: tokentriage validate [--arm [--offline]] [--explain] FILE\n");
        return EX_USAGE_;
    }
    cfg_report_t report = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_file(argv[optind], &cfg, &report);
    if (rc == 0 && arm)
        rc = cfg_arm(cfg, &report);
    if (rc == 0 && arm && !offline) /* what serve checks on this host before it listens */
        rc = srv_preflight(cfg, NULL, false, &report);
    cfg_report_print(&report, stderr);
    if (rc == 0) {
        if (explain)
            for (size_t i = 0; i < cfg->n_limits; i++)
                explain_limit(stdout, &cfg->limits[i]);
        printf("OK: configuration is valid\n");
    }
    cfg_report_free(&report);
    cfg_free(cfg);
    return rc == 0 ? EX_OK_ : rc == CFG_ENOMEM ? EX_SOFTWARE_ : EX_CONFIG_;
}
