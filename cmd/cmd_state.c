/*
 * tokentriage state inspect FILE [--json]: what a snapshot holds (SPEC §11), read with the
 * daemon's own decoder, so an operator sees what a node would restore before it starts: the
 * header, the scope it was written for, and per limit its counter identity and how many
 * counters it holds. A file the daemon would refuse is refused here with the same reason.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cmd.h"
#include "config.h"
#include "snap.h"
#include "tt_clock.h"
#include "tt_json.h"

#define HELP                                                                                       \
    "usage: tokentriage state inspect FILE [--json]\n"                                             \
    "\n"                                                                                           \
    "Shows what a snapshot of the counters holds (server.state_dir/counters.snap), read with "     \
    "the\n"                                                                                        \
    "daemon's own decoder, so an operator sees what a node would restore before it starts: the\n"  \
    "header, the node and cluster it was written for, and per limit its counter identity and "     \
    "how\n"                                                                                        \
    "many counters it holds. A file the daemon would refuse is refused here with the same "        \
    "reason.\n"                                                                                    \
    "\n"                                                                                           \
    "options:\n"                                                                                   \
    "  --json               one JSON object on stdout instead of the text\n"                       \
    "  -h, --help           this text\n"                                                           \
    "\n"                                                                                           \
    "exit status: 0 read, 64 usage, 65 a snapshot the daemon would refuse (the reason on\n"        \
    "stderr), 66 the file cannot be read.\n"
#define FILE_MAX ((size_t)4 << 30) /* bytes read at most */

typedef struct seen {
    char scope[ST_SCOPE_MAX + 1];
    st_limit_t limits[ST_LIMITS_MAX];
    uint64_t counters[ST_LIMITS_MAX];
} seen_t;

static void on_scope(void *ctx, const char *s, size_t len)
{
    memcpy(((seen_t *)ctx)->scope, s, len);
}

static void on_limit(void *ctx, uint32_t i, const st_limit_t *l)
{
    ((seen_t *)ctx)->limits[i] = *l;
}

static void on_counter(void *ctx, uint32_t limit, const char *key, size_t len, int64_t state)
{
    ((seen_t *)ctx)->counters[limit]++;
}

/* The whole file, at most FILE_MAX bytes; NULL after printing why. */
static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f || fstat(fileno(f), &sb) != 0) {
        fprintf(stderr, "Error: %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return NULL;
    }
    uint8_t *buf = (size_t)sb.st_size <= FILE_MAX ? malloc((size_t)sb.st_size + 1) : NULL;
    if (!buf) {
        fprintf(stderr, "Error: %s: %lld bytes, more than this command reads\n", path,
                (long long)sb.st_size);
        fclose(f);
        return NULL;
    }
    *len = fread(buf, 1, (size_t)sb.st_size, f);
    fclose(f);
    return buf;
}

static const char *name_of(const char *(*fn)(int), int v, int max)
{
    return v >= 0 && v <= max ? fn(v) : "?";
}

static const char *type_name(int v)
{
    return cfg_type_name((cfg_type_t)v);
}
static const char *store_name(int v)
{
    return cfg_store_name((cfg_store_t)v);
}
static const char *alg_name(int v)
{
    return ra_algorithm_name((ra_algorithm_t)v);
}

/* A JSON string through the one escaper (a crafted file is not trusted to hold only the
 * characters ids and labels allow). */
static void json_str(const char *p)
{
    tt_buf_t b = {0};
    if (tt_json_str(&b, p, strlen(p)) == 0)
        fwrite(b.data, 1, b.len, stdout);
    else
        fputs("\"\"", stdout);
    tt_buf_free(&b);
}

static void print_json(const char *path, size_t len, const st_header_t *h, const seen_t *s,
                       int64_t now)
{
    printf("{\"file\":");
    json_str(path);
    printf(",\"version\":%u,\"written_ns\":%" PRId64 ",\"age_s\":%.3f,\"scope\":", h->version,
           h->written_ns, (double)(now - h->written_ns) / 1e9);
    json_str(s->scope);
    printf(",\"fingerprint\":\"%016" PRIx64 "\",\"bytes\":%zu,\"counters\":%" PRIu64
           ",\"limits\":[",
           h->fingerprint, len, h->n_counters);
    for (uint32_t i = 0; i < h->n_limits; i++) {
        const st_limit_t *l = &s->limits[i];
        printf("%s{\"id\":", i ? "," : "");
        json_str(l->id);
        printf(",\"identity\":\"%016" PRIx64 "\",\"type\":\"%s\",\"store\":\"%s\","
               "\"algorithm\":\"%s\",\"counters\":%" PRIu64 "}",
               l->identity, name_of(type_name, l->type, CFG_TYPE_QUOTA_REQUESTS),
               name_of(store_name, l->store, CFG_STORE_REDIS),
               name_of(alg_name, l->algorithm, RA_ENVOY_WINDOW), s->counters[i]);
    }
    printf("]}\n");
}

static void print_human(const char *path, size_t len, const st_header_t *h, const seen_t *s,
                        int64_t now)
{
    time_t secs = (time_t)(h->written_ns / 1000000000);
    struct tm tm;
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&secs, &tm));
    printf("file         %s\nversion      %u\nwritten      %s (%.1f s ago)\nscope        %s\n"
           "fingerprint  %016" PRIx64 "\nbytes        %zu\ncounters     %" PRIu64 "\n\n",
           path, h->version, when, (double)(now - h->written_ns) / 1e9, s->scope, h->fingerprint,
           len, h->n_counters);
    printf("%-24s %-16s %-12s %-6s %-14s %s\n", "limit", "identity", "type", "store", "algorithm",
           "counters");
    for (uint32_t i = 0; i < h->n_limits; i++) {
        const st_limit_t *l = &s->limits[i];
        printf("%-24s %016" PRIx64 " %-12s %-6s %-14s %" PRIu64 "\n", l->id, l->identity,
               name_of(type_name, l->type, CFG_TYPE_QUOTA_REQUESTS),
               name_of(store_name, l->store, CFG_STORE_REDIS),
               name_of(alg_name, l->algorithm, RA_ENVOY_WINDOW), s->counters[i]);
    }
}

int cmd_state(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    bool json = false;
    int ch;
    optind = 1;
    while ((ch = cmd_getopt(argc, argv, "jh", opts, HELP)) != -1) {
        if (ch == 'j')
            json = true;
        else
            return ch == 'h' ? cmd_help(HELP) : EX_USAGE_;
    }
    if (argc - optind != 2 || strcmp(argv[optind], "inspect") != 0)
        return cmd_usage_error(HELP, "the form is `state inspect FILE`");
    const char *path = argv[optind + 1];
    size_t len = 0;
    uint8_t *buf = slurp(path, &len);
    if (!buf)
        return EX_NOINPUT_;
    seen_t *s = calloc(1, sizeof(*s));
    st_header_t h;
    tt_err_t err;
    st_visit_t v = {on_scope, on_limit, on_counter};
    int rc = s ? st_decode(buf, len, &v, s, &h, &err) : ST_EIO;
    if (rc == 0) {
        (json ? print_json : print_human)(path, len, &h, s, tt_wall_ns());
    } else {
        char text[TT_ERR_TEXT_MAX];
        fprintf(stderr, "Error: %s: %s: %s\n", path, st_reason(rc),
                s ? tt_err_format(&err, text, sizeof(text)) : "out of memory");
    }
    free(s);
    free(buf);
    return rc == 0 ? EX_OK_ : EX_DATAERR_;
}
