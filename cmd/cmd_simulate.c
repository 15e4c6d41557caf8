/*
 * tokentriage simulate: replays arrivals through one limit, offline (SPEC section 8).
 *
 * A user's what-if tool and the conformance harness at once: the limit is built as a
 * cfg_limit_t and armed by cfg_limit_arm, so a limit that `validate --arm` would turn down
 * is turned down here with the same message; then every `<t_ms> <cost>` line of the input
 * becomes one ratealg step and one JSON line on stdout. --replicas N (or --share NUM/DEN)
 * arms the limit as store "share" and steps gcra's effective-rate form, as one replica of N
 * would. Exit codes: 64 usage, 65 a bad input line (named by number), 78 a limit that does
 * not arm.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "duration.h"
#include "limit.h"
#include "ratealg.h"

#define HELP                                                                                       \
    "usage: tokentriage simulate --algorithm A --amount R --period D [--burst B]\n"                \
    "                            [--type rpm|tpm] [--replicas N | --share NUM/DEN] [FILE]\n"       \
    "\n"                                                                                           \
    "Replays arrivals through one limit, offline, with the daemon's own arithmetic: a what-if\n"   \
    "before a limit ships. Reads `<t_ms> <cost>` lines (non-decreasing milliseconds since the\n"   \
    "epoch; blank lines and #-comments skipped) from FILE or stdin and writes one JSON object\n"   \
    "per line: t_ms cost admit unfittable remaining retry_after reset_after state. The limit is\n" \
    "armed first, and refused with the messages of `validate --arm`. Recorded traffic through a\n" \
    "whole config: tokentriage simulate --config NEW.yaml --traffic FILE (--help there).\n"        \
    "\n"                                                                                           \
    "options:\n"                                                                                   \
    "  --algorithm A        gcra, token_bucket, fixed_window or sliding_window (required)\n"       \
    "  --amount R           requests (rpm) or tokens (tpm) per period (required)\n"                \
    "  --period D           a duration: ms s m h, compound as 1h30m (required)\n"                  \
    "  --burst B            gcra and token_bucket's burst (default: the amount; the windows do\n"  \
    "                       not read it)\n"                                                        \
    "  --type T             rpm or tpm (default rpm)\n"                                            \
    "  --replicas N         step as one replica of N sharing the limit (store share, gcra's\n"     \
    "                       effective-rate form; default 1: the whole limit)\n"                    \
    "  --share NUM/DEN      the same with any share of the amount, instead of --replicas\n"        \
    "  -h, --help           this text\n"                                                           \
    "\n"                                                                                           \
    "exit status: 0 replayed, 64 usage, 65 a bad input line (named by number), 78 a limit that\n"  \
    "does not arm.\n"

#define LINE_MAX_ 256
#define MS INT64_C(1000000)

/* Parses a whole decimal int64; returns 0 or -1. */
static int parse_i64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

struct sim {
    cfg_limit_t limit;
    int64_t share_num, share_den; /* 0 0: plain */
    const char *input;            /* NULL: stdin */
};

/* Reads the command line into s->limit (not yet armed). Returns 0 or an exit code. */
static int parse_args(int argc, char **argv, struct sim *s)
{
    static const struct option opts[] = {{"algorithm", required_argument, NULL, 'a'},
                                         {"amount", required_argument, NULL, 'r'},
                                         {"period", required_argument, NULL, 'p'},
                                         {"burst", required_argument, NULL, 'b'},
                                         {"type", required_argument, NULL, 't'},
                                         {"replicas", required_argument, NULL, 'n'},
                                         {"share", required_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    cfg_limit_t *l = &s->limit;
    memset(s, 0, sizeof(*s));
    snprintf(l->id, sizeof(l->id), "simulate");
    snprintf(l->level, sizeof(l->level), "global");
    l->posture = (cfg_posture_t){.on = 1, .enforce_hard = 1, .fail_open = 1};
    int have_alg = 0, have_amount = 0, have_period = 0, have_burst = 0, ch;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "h", opts, HELP)) != -1) {
        int64_t v;
        switch (ch) {
        case 'a':
            if (ra_algorithm_parse(optarg, &l->algorithm) < 0)
                return cmd_usage_error(HELP,
                                       "--algorithm: unregistered algorithm \"%s\" (gcra, "
                                       "fixed_window, sliding_window, token_bucket)",
                                       optarg);
            have_alg = 1;
            break;
        case 'r':
            if (parse_i64(optarg, &l->amount) < 0)
                return cmd_usage_error(HELP, "--amount: not an integer: \"%s\"", optarg);
            have_amount = 1;
            break;
        case 'b':
            if (parse_i64(optarg, &l->burst) < 0)
                return cmd_usage_error(HELP, "--burst: not an integer: \"%s\"", optarg);
            have_burst = 1;
            break;
        case 'p': {
            int err = cfg_duration_parse(optarg, &l->period_ns);
            if (err < 0)
                return cmd_usage_error(HELP, "--period: \"%s\": %s", optarg,
                                       cfg_duration_strerror(err));
            have_period = 1;
            break;
        }
        case 't':
            if (strcmp(optarg, "rpm") == 0)
                l->type = CFG_TYPE_RPM;
            else if (strcmp(optarg, "tpm") == 0)
                l->type = CFG_TYPE_TPM;
            else
                return cmd_usage_error(HELP, "--type: \"%s\": rpm or tpm (the rate-class types)",
                                       optarg);
            break;
        case 'n':
            if (s->share_den || parse_i64(optarg, &v) < 0 || v < 1)
                return cmd_usage_error(HELP,
                                       "--replicas: \"%s\": a positive integer, and not together "
                                       "with --share",
                                       optarg);
            s->share_num = 1;
            s->share_den = v;
            break;
        case 's': {
            char num[32], den[32], extra;
            if (s->share_den || sscanf(optarg, "%31[0-9]/%31[0-9]%c", num, den, &extra) != 2 ||
                parse_i64(num, &s->share_num) < 0 || parse_i64(den, &s->share_den) < 0 ||
                s->share_num < 1 || s->share_num > s->share_den)
                return cmd_usage_error(HELP,
                                       "--share: \"%s\": NUM/DEN with 0 < NUM <= DEN, and not "
                                       "together with --replicas",
                                       optarg);
            break;
        }
        case 'h':
            cmd_help(HELP);
            return -1;
        default: /* CMD_OPT_BAD: said */
            return EX_USAGE_;
        }
    }
    if (!have_alg || !have_amount || !have_period)
        return cmd_usage_error(HELP, "%s", "--algorithm, --amount and --period are required");
    if (optind < argc - 1)
        return cmd_usage_error(HELP, "one input FILE at most, got \"%s\" too", argv[optind + 1]);
    s->input = optind < argc ? argv[optind] : NULL;
    if (!have_burst)
        l->burst = l->amount; /* the stored default */
    else if (l->algorithm == RA_FIXED_WINDOW || l->algorithm == RA_SLIDING_WINDOW)
        fprintf(stderr, "Warning: --burst: %s does not read burst; this value has no effect\n",
                ra_algorithm_name(l->algorithm)); /* validate's warning, beside, not instead */
    if (s->share_den)
        l->store = CFG_STORE_SHARE;
    return 0;
}

/*
 * Arms the limit as validate --arm would, and derives the limiter a replica steps. The one
 * validate-phase check that can apply here (tpm takes gcra only) is the config loader's own
 * (cfg_type_algorithm_check). Returns 0 or EX_CONFIG_ after printing the error.
 */
static int arm(struct sim *s, ra_limiter_t *out)
{
    cfg_limit_t *l = &s->limit;
    tt_err_t pairing;
    if (cfg_type_algorithm_check(l->type, l->algorithm, &pairing) < 0) {
        fprintf(stderr, "Error: --algorithm: %s\n", pairing.message);
        return EX_CONFIG_;
    }
    char msg[512];
    if (cfg_limit_arm(l, msg, sizeof(msg)) < 0) {
        fprintf(stderr, "Error: %s\n", msg);
        return EX_CONFIG_;
    }
    *out = l->limiter;
    if (s->share_den) {
        int err = ra_limiter_effective(&l->limiter, s->share_num, s->share_den,
                                       cfg_type_unit(l->type), out);
        if (err < 0) {
            fprintf(stderr, "Error: share %lld/%lld: %s\n", (long long)s->share_num,
                    (long long)s->share_den, ra_strerror(err));
            return EX_CONFIG_;
        }
    }
    return 0;
}

/* Parses "<t_ms> <cost>" (surrounding blanks allowed). Returns NULL or what was wrong. */
static const char *parse_arrival(char *line, int64_t *t_ms, int64_t *cost)
{
    char *save, *a = strtok_r(line, " \t\r\n", &save), *b = strtok_r(NULL, " \t\r\n", &save);
    if (!a || !b || strtok_r(NULL, " \t\r\n", &save))
        return "expected two fields, \"<t_ms> <cost>\"";
    if (parse_i64(a, t_ms) < 0)
        return "t_ms is not a decimal int64";
    if (*t_ms > INT64_MAX / MS || *t_ms < INT64_MIN / MS)
        return "t_ms is out of range (nanoseconds must fit int64)";
    if (parse_i64(b, cost) < 0)
        return "cost is not a decimal int64";
    if (*cost < 0)
        return "cost must not be negative";
    return NULL;
}

static int replay(FILE *in, const ra_limiter_t *limiter)
{
    char buf[LINE_MAX_ + 2];
    int64_t state = 0, last_t = INT64_MIN;
    long lineno = 0;
    while (fgets(buf, sizeof(buf), in)) {
        lineno++;
        size_t len = strlen(buf);
        if (len > LINE_MAX_ && buf[len - 1] != '\n') {
            fprintf(stderr, "Error: line %ld: longer than %d bytes\n", lineno, LINE_MAX_);
            return EX_DATAERR_;
        }
        char *p = buf + strspn(buf, " \t\r\n");
        if (*p == '\0' || *p == '#')
            continue;
        int64_t t_ms, cost;
        const char *why = parse_arrival(p, &t_ms, &cost);
        if (!why && t_ms < last_t)
            why = "t_ms goes backwards; arrivals must be non-decreasing";
        if (why) {
            fprintf(stderr, "Error: line %ld: %s\n", lineno, why);
            return EX_DATAERR_;
        }
        last_t = t_ms;
        ra_result_t r = ra_step(limiter, state, t_ms * MS, cost);
        state = r.next_state;
        printf("{\"t_ms\":%lld,\"cost\":%lld,\"admit\":%s,\"unfittable\":%s,\"remaining\":%lld,"
               "\"retry_after\":%lld,\"reset_after\":%lld,\"state\":%lld}\n",
               (long long)t_ms, (long long)cost, r.admit ? "true" : "false",
               r.unfittable ? "true" : "false", (long long)r.remaining, (long long)r.retry_after_s,
               (long long)r.reset_after_s, (long long)state);
    }
    if (ferror(in)) {
        fprintf(stderr, "Error: reading input: %s\n", strerror(errno));
        return EX_DATAERR_;
    }
    return EX_OK_;
}

int cmd_simulate(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) /* the other form: recorded traffic through a whole config */
        if (strncmp(argv[i], "--traffic", 9) == 0 || strncmp(argv[i], "--config", 8) == 0)
            return cmd_simulate_traffic(argc, argv);
    struct sim s;
    int rc = parse_args(argc, argv, &s);
    if (rc)
        return rc < 0 ? EX_OK_ : rc;
    ra_limiter_t limiter;
    if ((rc = arm(&s, &limiter)))
        return rc;
    FILE *in = stdin;
    if (s.input && !(in = fopen(s.input, "r"))) {
        fprintf(stderr, "Error: %s: %s\n", s.input, strerror(errno));
        return EX_USAGE_;
    }
    rc = replay(in, &limiter);
    if (in != stdin)
        fclose(in);
    if (fflush(stdout) != 0 && rc == EX_OK_)
        rc = EX_SOFTWARE_;
    return rc;
}
