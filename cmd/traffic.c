/*
 * tokentriage simulate --config NEW.yaml --traffic FILE...: recorded decisions (server.record,
 * server/record.h has the format) replayed through every limit of a new configuration, with the
 * real engine, offline: what it would have admitted and denied, beside what was.
 *
 * Every file is mapped and checked whole before anything is replayed (record.c's reader: a
 * hostile file is refused with its name, the record, the field and the byte, and nothing is
 * printed on stdout). Files are replayed in the order given (the oldest first: FILE.1 before
 * FILE).
 *
 * The engine is the daemon's (gov_decide; a recorded gRPC request: gov_decide_domain with the
 * flags the gRPC door would use under NEW.yaml, rls_domain_flags), armed from NEW.yaml as serve
 * arms it. Limits of the share and redis stores are replayed as one local counter each: the
 * recording is one replica's traffic, and the fleet's other members, Redis' other clients are
 * not in it. Per limit (and per rule of the gRPC door's, when the recording holds gRPC
 * requests), with the deciding limit of each answer (the `limit` a denial names):
 *   applied       recorded decisions the limit applies to (the subject names its levels; of a
 *                 gRPC request: it answered one of its descriptors)
 *   was_admitted  of those, admitted when recorded;  was_denied: recorded denials it decided
 *   now_admitted  of those, admitted by the new config; now_denied: new denials it decides
 * and a chart of denials over the recording's time, as it was and as it would be.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "config.h"
#include "engine.h"
#include "record.h"
#include "rls.h" /* how the gRPC door decides a request's descriptors */
#include "wire.h"

#define FILES_MAX 16
#define FILE_MAX (INT64_C(1) << 30) /* bytes of one traffic file */
#define BUCKETS 48                  /* the chart's width */

#define HELP                                                                                       \
    "usage: tokentriage simulate --config NEW.yaml --traffic FILE [--traffic FILE...] [--json]\n"  \
    "\n"                                                                                           \
    "Replays decisions a daemon recorded (server.record) through every limit of NEW.yaml, with\n"  \
    "the daemon's own engine: per limit, how many the new config would admit and deny beside\n"    \
    "what was admitted and denied, and a chart of the denials over time. Files are replayed in\n"  \
    "the order given: the oldest first (traffic.ttr.1, then traffic.ttr). Share and redis\n"       \
    "limits replay as one local counter (the recording is one replica's traffic).\n"               \
    "\n"                                                                                           \
    "options:\n"                                                                                   \
    "  --config FILE        the configuration to try (armed as serve arms it)\n"                   \
    "  --traffic FILE       a recording; up to 16, oldest first\n"                                 \
    "  --json               one JSON object per limit, then one for all decisions\n"               \
    "  -h, --help           this text\n"                                                           \
    "\n"                                                                                           \
    "exit status: 0 replayed, 64 usage, 65 a traffic file refused (named, with the record and\n"   \
    "what was wrong), 66 a file that cannot be read, 78 a config that does not load or arm.\n"

typedef struct tfile {
    const char *path;
    const uint8_t *data; /* mapped */
    size_t len;
    const uint8_t *first; /* the first record */
    bool hashed;
} tfile_t;

/* Maps and checks one file whole. 0, or an exit code after saying why on stderr. */
static int open_file(tfile_t *f, int64_t *t_min, int64_t *t_max, size_t *count)
{
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "Error: %s: %s\n", f->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return EX_NOINPUT_;
    }
    if (!S_ISREG(st.st_mode) || st.st_size > FILE_MAX) {
        fprintf(stderr, "Error: %s: %s\n", f->path,
                S_ISREG(st.st_mode) ? "larger than 1 GiB: not a recording this reads"
                                    : "not a regular file");
        close(fd);
        return EX_DATAERR_;
    }
    f->len = (size_t)st.st_size;
    void *m = f->len ? mmap(NULL, f->len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "Error: %s: %s\n", f->path, strerror(errno));
        return EX_NOINPUT_;
    }
    f->data = m;
    wire_reader_t rd = {.pos = f->data, .end = f->data + f->len};
    char why[160];
    if (rec_read_header(&rd, &f->hashed, why, sizeof(why))) {
        fprintf(stderr, "Error: %s: %s\n", f->path, why);
        return EX_DATAERR_;
    }
    f->first = rd.pos;
    for (size_t k = 1; rd.pos < rd.end; k++) {
        size_t at = (size_t)(rd.pos - f->data);
        rec_entry_t r;
        if (rec_read_entry(&rd, &r, why, sizeof(why))) {
            fprintf(stderr, "Error: %s: record %zu: %s (at byte %zu)\n", f->path, k, why, at);
            return EX_DATAERR_;
        }
        *t_min = r.t < *t_min ? r.t : *t_min;
        *t_max = r.t > *t_max ? r.t : *t_max;
        (*count)++;
    }
    return 0;
}

/* Does limit l apply to subject s (SPEC §5: the subject names its levels, or it is global)? */
static bool applies(const cfg_limit_t *l, const gov_subject_t *s)
{
    if (!cfg_type_is_rate(l->type) || !l->posture.on || cfg_limit_is_rule(l))
        return false;
    if (strcmp(l->level, "global") == 0)
        return true;
    for (const char *lv = l->level; *lv;) {
        size_t len = strcspn(lv, ",");
        bool named = false;
        for (size_t i = 0; i < s->n && !named; i++)
            named = s->pairs[i].level_len == len && memcmp(s->pairs[i].level, lv, len) == 0;
        if (!named)
            return false;
        lv += len + (lv[len] == ',');
    }
    return true;
}

typedef struct tally {
    uint64_t applied, was_admitted, was_denied, now_admitted, now_denied;
    uint32_t was[BUCKETS], now[BUCKETS]; /* denials it decided, per bucket of time */
} tally_t;

/* A row for limit l: every rate limit attached to levels; the gRPC door's rules too when the
 * recording held gRPC requests. */
static bool listed(const cfg_limit_t *l, bool grpc)
{
    return cfg_type_is_rate(l->type) && (grpc || !cfg_limit_is_rule(l));
}

/* Whether one of a gRPC request's n results was answered by limit `id`. */
static bool answered_by(const gov_result_t *res, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(res[i].limit, id) == 0)
            return true;
    return false;
}

static bool denied(wire_str_t v)
{
    return wire_str_eq(v, "deny") || wire_str_eq(v, "unfittable");
}

/* One row of the chart: each bucket's count as a block of eight heights. */
static void spark(const char *label, const uint32_t *v, uint32_t max)
{
    static const char *const blocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    int last = BUCKETS;
    while (last > 0 && v[last - 1] == 0) /* no trailing blanks */
        last--;
    printf("    %-10s%s", label, last ? "" : "  (none)");
    for (int b = 0; b < last; b++)
        printf("%s", blocks[v[b] == 0 ? 0 : 1 + (int)((uint64_t)(v[b] - 1) * 7 / (max ? max : 1))]);
    printf("\n");
}

static void print_human(const cfg_config_t *cfg, const tally_t *t, size_t nfiles, size_t count,
                        int64_t t_min, int64_t t_max, const uint64_t *totals, uint64_t refused,
                        bool hashed, bool grpc)
{
    printf("replayed %zu decision%s from %zu file%s over %.0f s%s\n", count, count == 1 ? "" : "s",
           nfiles, nfiles == 1 ? "" : "s", count ? (double)(t_max - t_min) / 1e9 : 0.0,
           hashed ? " (subjects hashed)" : "");
    printf("as recorded: %llu admitted, %llu denied; with the new config: %llu admitted, %llu "
           "denied\n",
           (unsigned long long)totals[0], (unsigned long long)totals[1],
           (unsigned long long)totals[2], (unsigned long long)totals[3]);
    if (refused)
        printf("%llu decision%s the new config refuses as a request (e.g. a tpm limit now "
               "applies and the request named no tokens)\n",
               (unsigned long long)refused, refused == 1 ? "" : "s");
    printf("\n%-20s %9s %9s %9s %9s %9s\n", "LIMIT", "APPLIED", "WAS_ADMIT", "WAS_DENY",
           "NOW_ADMIT", "NOW_DENY");
    for (size_t i = 0; i < cfg->n_limits; i++) {
        const cfg_limit_t *l = &cfg->limits[i];
        if (!listed(l, grpc))
            continue;
        printf("%-20s %9llu %9llu %9llu %9llu %9llu%s\n", l->id, (unsigned long long)t[i].applied,
               (unsigned long long)t[i].was_admitted, (unsigned long long)t[i].was_denied,
               (unsigned long long)t[i].now_admitted, (unsigned long long)t[i].now_denied,
               l->store != CFG_STORE_LOCAL ? "  (replayed as one local counter)" : "");
        uint32_t max = 0;
        for (int b = 0; b < BUCKETS; b++) {
            max = t[i].was[b] > max ? t[i].was[b] : max;
            max = t[i].now[b] > max ? t[i].now[b] : max;
        }
        if (max) { /* one row each, on one scale: the higher row's tallest block is `max` */
            spark("denied was", t[i].was, max);
            spark("denied now", t[i].now, max);
            printf("    %-10s%-*s%s\n", "", BUCKETS - 13, "first decision", "last decision");
        }
    }
}

static void print_json(const cfg_config_t *cfg, const tally_t *t, size_t count,
                       const uint64_t *totals, uint64_t refused, bool grpc)
{
    for (size_t i = 0; i < cfg->n_limits; i++) {
        const cfg_limit_t *l = &cfg->limits[i];
        if (!listed(l, grpc))
            continue;
        printf("{\"limit\":\"%s\",\"store\":\"%s\",\"applied\":%llu,\"was_admitted\":%llu,"
               "\"was_denied\":%llu,\"now_admitted\":%llu,\"now_denied\":%llu}\n",
               l->id, cfg_store_name(l->store), (unsigned long long)t[i].applied,
               (unsigned long long)t[i].was_admitted, (unsigned long long)t[i].was_denied,
               (unsigned long long)t[i].now_admitted, (unsigned long long)t[i].now_denied);
    }
    printf("{\"decisions\":%zu,\"was_admitted\":%llu,\"was_denied\":%llu,\"now_admitted\":%llu,"
           "\"now_denied\":%llu,\"refused\":%llu}\n",
           count, (unsigned long long)totals[0], (unsigned long long)totals[1],
           (unsigned long long)totals[2], (unsigned long long)totals[3],
           (unsigned long long)refused);
}

/* Loads and arms NEW.yaml as serve does; share and redis limits become local counters. */
static cfg_config_t *load_config(const char *path)
{
    cfg_report_t rep = {0};
    cfg_config_t *cfg = NULL;
    int rc = cfg_load_file(path, &cfg, &rep);
    if (rc == 0)
        rc = cfg_arm(cfg, &rep);
    for (size_t i = 0; i < rep.n; i++)
        fprintf(stderr, "%s: %s\n", rep.items[i].warning ? "Warning" : "Error", rep.items[i].text);
    cfg_report_free(&rep);
    if (rc != 0) {
        cfg_free(cfg);
        return NULL;
    }
    for (size_t i = 0; i < cfg->n_limits; i++)
        if (cfg->limits[i].store != CFG_STORE_LOCAL && cfg_type_is_rate(cfg->limits[i].type))
            cfg->limits[i].store = CFG_STORE_LOCAL;
    return cfg;
}

/* A recorded gRPC request decided again as the gRPC door would under cfg: its results, whether
 * it is admitted (not refused) and the limit of its first descriptor denied ("" none). 0, or a
 * negative code: a request the new config refuses (its domain not served, a descriptor it does
 * not take). */
static int decide_request(gov_engine_t *e, const cfg_config_t *cfg, const rec_entry_t *r,
                          gov_result_t *res, bool *admit, const char **limit)
{
    char domain[CFG_RULE_DOMAIN_MAX + 1];
    memcpy(domain, r->domain.ptr, r->domain.len);
    domain[r->domain.len] = '\0';
    unsigned flags;
    gov_verdict_t overall = GOV_ADMIT;
    if (rls_domain_flags(&cfg->server, domain, &flags) != RLS_OK)
        return GOV_EINVAL;
    int rc = gov_decide_domain(e, domain, r->domain.len, r->asks, r->n_asks, flags, r->t, res,
                               &overall, NULL, NULL);
    *admit = overall == GOV_ADMIT;
    *limit = "";
    for (size_t i = 0; i < r->n_asks && !*admit; i++)
        if (!res[i].admit && res[i].limit[0]) {
            *limit = res[i].limit;
            break;
        }
    return rc;
}

static int replay(const cfg_config_t *cfg, tfile_t *files, size_t nfiles, size_t count,
                  int64_t t_min, int64_t t_max, bool json)
{
    gov_engine_t *e;
    gov_options_t opt = {0};
    tt_err_t err;
    if (gov_engine_create_config(&e, &opt, cfg, &err) != 0) {
        char text[TT_ERR_TEXT_MAX];
        fprintf(stderr, "Error: %s\n", tt_err_format(&err, text, sizeof(text)));
        return EX_CONFIG_;
    }
    tally_t *t = calloc(cfg->n_limits ? cfg->n_limits : 1, sizeof(*t));
    gov_result_t *res = malloc(GOV_ASKS_MAX * sizeof(*res)); /* a gRPC request's, or a decide's */
    if (!t || !res) {
        free(t);
        free(res);
        gov_engine_destroy(e);
        return EX_SOFTWARE_;
    }
    bool grpc = false;
    uint64_t totals[4] = {0}, refused = 0; /* was admit, was deny, now admit, now deny */
    int64_t span = t_max - t_min + 1;
    bool hashed = false;
    for (size_t f = 0; f < nfiles; f++) {
        hashed |= files[f].hashed;
        wire_reader_t rd = {.pos = files[f].first, .end = files[f].data + files[f].len};
        while (rd.pos < rd.end) {
            rec_entry_t r;
            char why[160];
            if (rec_read_entry(&rd, &r, why, sizeof(why))) /* checked already: never */
                break;
            int b = (int)((__int128)(r.t - t_min) * BUCKETS / span);
            bool was_denied = denied(r.verdict);
            totals[was_denied]++;
            bool admit = false;
            const char *limit = ""; /* the limit that decided it now */
            int rc;
            if (r.n_asks) {
                rc = decide_request(e, cfg, &r, res, &admit, &limit);
            } else {
                rc = gov_decide(e, NULL, &r.s, r.tokens, r.t, res, NULL, NULL);
                admit = res->admit;
                limit = res->limit;
            }
            grpc |= r.n_asks > 0;
            if (rc < 0) {
                refused++;
                continue;
            }
            totals[2 + !admit]++;
            for (size_t i = 0; i < cfg->n_limits; i++) {
                const cfg_limit_t *l = &cfg->limits[i];
                if (r.n_asks ? !answered_by(res, r.n_asks, l->id) : !applies(l, &r.s))
                    continue;
                t[i].applied++;
                t[i].was_admitted += wire_str_eq(r.verdict, "admit");
                if (was_denied && wire_str_eq(r.limit, l->id)) {
                    t[i].was_denied++;
                    t[i].was[b]++;
                }
                t[i].now_admitted += admit;
                if (!admit && strcmp(limit, l->id) == 0) {
                    t[i].now_denied++;
                    t[i].now[b]++;
                }
            }
        }
    }
    if (json)
        print_json(cfg, t, count, totals, refused, grpc);
    else
        print_human(cfg, t, nfiles, count, t_min, t_max, totals, refused, hashed, grpc);
    free(t);
    free(res);
    gov_engine_destroy(e);
    return EX_OK_;
}

int cmd_simulate_traffic(int argc, char **argv)
{
    static const struct option opts[] = {{"config", required_argument, NULL, 'c'},
                                         {"traffic", required_argument, NULL, 't'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *config = NULL;
    tfile_t files[FILES_MAX] = {0};
    size_t nfiles = 0;
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "h", opts, HELP)) != -1) {
        if (ch == 'c')
            config = optarg;
        else if (ch == 't' && nfiles == FILES_MAX)
            return cmd_usage_error(HELP, "at most %d --traffic files", FILES_MAX);
        else if (ch == 't')
            files[nfiles++].path = optarg;
        else if (ch == 'j')
            json = true;
        else if (ch == 'h')
            return cmd_help(HELP);
        else
            return EX_USAGE_; /* CMD_OPT_BAD: said */
    }
    if (optind != argc)
        return cmd_usage_error(HELP, "unexpected argument \"%s\"", argv[optind]);
    if (!config || nfiles == 0)
        return cmd_usage_error(HELP, "--config and at least one --traffic are needed");
    int64_t t_min = INT64_MAX, t_max = INT64_MIN;
    size_t count = 0;
    int rc = EX_OK_;
    for (size_t i = 0; i < nfiles && rc == EX_OK_; i++)
        rc = open_file(&files[i], &t_min, &t_max, &count);
    cfg_config_t *cfg = rc == EX_OK_ ? load_config(config) : NULL;
    if (rc == EX_OK_ && !cfg)
        rc = EX_CONFIG_;
    if (rc == EX_OK_)
        rc = replay(cfg, files, nfiles, count, count ? t_min : 0, count ? t_max : 0, json);
    cfg_free(cfg);
    for (size_t i = 0; i < nfiles; i++)
        if (files[i].data)
            munmap((void *)files[i].data, files[i].len);
    if (fflush(stdout) != 0 && rc == EX_OK_)
        rc = EX_SOFTWARE_;
    return rc;
}
