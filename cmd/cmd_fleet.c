/*
 * tokentriage fleet [-s SOCK] [--json] [--wide] [--all [--timeout MS] [--port P]]: every
 * rate-class limit with the fleet-wide bound its store discloses (SPEC §6): local counts alone on
 * each replica (N x amount), redis is one counter, share divides by N; and the concurrency
 * limits, which only acquire reaches.
 *
 * For people, one table per store with the columns that mean something for it (a local limit has
 * no divisors, no convergence); --wide prints every column in one table, as --json has them.
 *
 * --all gathers every replica's own view into one table: this replica's from its socket, the
 * others' over their HTTP listeners (GET /v1/fleet, the same answer as msgpack), every member this
 * replica knows that has not left, dead ones too (a member dead here may be alive on the other
 * side of a split: its view is what finds the split). Why HTTP and not gossip metadata: a view
 * holds every limit's row, which does not fit the few bytes a member gossips about itself, and
 * gossip carries what a member said seconds ago, where a view asked now is first-hand. The
 * listener's address is the member's gossip address with --port (default 9464, the port of the
 * shipped DaemonSet: every replica of one config listens on the same one). Bounded: one
 * --timeout for all (default 2000 ms), 1 MiB an answer, and only an answer of the fleet's shape
 * is used (peers.h); a replica that fails is a row saying why, and the exit code is 69.
 * A replica whose N differs from the N most replicas see is marked with '*'.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd.h"
#include "json.h"
#include "peers.h"
#include "proto.h"

/* Why a replica's N is more than the members it hears: the unheard members its restart
 * remembered (docs/share.md, "A restart's memory"). Nothing when there are none. */
static void unheard(const char *node, int node_len, int64_t n)
{
    if (n > 0)
        printf("%.*s's N counts %lld unheard: members it knew before its restart and has not heard "
               "from since, until they are found or a detection window has passed (tokentriage "
               "members lists them)\n",
               node_len, node, (long long)n);
}

/* The answer's "node", "n", "unheard", "n_in_doubt", "snapshot_age_ms" and "acquire_only",
 * above the table. */
static void summary(const tt_response_t *r)
{
    wire_reader_t rd = {.pos = r->raw, .end = r->raw + r->raw_len};
    uint32_t n;
    proto_str_t node = {"?", 1}, doubt = {"", 0};
    int64_t replicas = 0, age_ms = -1;
    char acquire_only[512] = "";
    size_t used = 0;
    if (wire_read_map(&rd, &n))
        return;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, id;
        uint32_t ids;
        if (wire_read_str(&rd, &k))
            return;
        if (wire_str_eq(k, "acquire_only") && wire_read_array(&rd, &ids) == 0) {
            for (uint32_t j = 0; j < ids; j++) {
                if (wire_read_str(&rd, &id))
                    return;
                int w = snprintf(acquire_only + used, sizeof(acquire_only) - used, "%s%.*s",
                                 j ? ", " : "", (int)id.len, id.ptr);
                if (w > 0 && used + (size_t)w < sizeof(acquire_only))
                    used += (size_t)w;
            }
            continue;
        }
        if (wire_str_eq(k, "node") && wire_read_str(&rd, &node) == 0)
            continue;
        if (wire_str_eq(k, "n") && wire_read_int(&rd, &replicas) == 0)
            continue;
        if (wire_str_eq(k, "n_in_doubt") && wire_read_str(&rd, &doubt) == 0)
            continue;
        if (wire_str_eq(k, "snapshot_age_ms") && wire_read_int(&rd, &age_ms) == 0)
            continue;
        if (wire_skip(&rd))
            return;
    }
    printf("node %.*s sees %lld replica%s\n", (int)node.len, node.ptr, (long long)replicas,
           replicas == 1 ? "" : "s");
    unheard(node.ptr, (int)node.len, cli_head_int(r->raw, r->raw_len, "unheard", 0));
    if (doubt.len) /* the row an operator must not miss */
        printf("N IN DOUBT: %.*s\n", (int)doubt.len, doubt.ptr);
    if (age_ms >= 0)
        printf("last snapshot of the counters %.1f s ago: an unclean stop now forgets at most the "
               "admissions since\n",
               (double)age_ms / 1000);
    else
        printf("no snapshot of the counters (server.state_dir off, or none yet)\n");
    if (acquire_only[0]) /* not in the table: they have no rate and no fleet bound */
        printf("concurrency limits, which only acquire reaches (decide never counts them): %s\n",
               acquire_only);
    printf("\n");
}

#define HELP                                                                                       \
    "usage: tokentriage fleet [-s SOCKET] [--json] [--wide]\n"                                     \
    "       tokentriage fleet --all [-s SOCKET] [--json] [--wide] [--timeout MS] [--port PORT]\n"  \
    "\n"                                                                                           \
    "Shows what this replica knows of the fleet: how many replicas it sees, the age of its last\n" \
    "snapshot of the counters, and every limit with the fleet-wide bound its store discloses\n"    \
    "(local: each replica counts alone, N x amount; redis: one counter; share: the cap divided\n"  \
    "by N, with the bounds the replicas' views imply). One table per store, with the columns\n"    \
    "that mean something for it.\n"                                                                \
    "\n"                                                                                           \
    "options:\n" CLI_HELP_SOCKET CLI_HELP_JSON                                                     \
    "  --wide               every column, in one table\n"                                          \
    "  --all                every replica's view, asked over its HTTP listener (GET /v1/fleet);\n" \
    "                       a replica whose N differs from most is marked '*'\n"                   \
    "  --timeout MS         --all: how long to wait for the replicas, all together (2000)\n"       \
    "  --port PORT          --all: the replicas' HTTP port (9464, the "                            \
    "DaemonSet's)\n" CLI_HELP_HELP "\n" CLI_HELP_EXIT                                              \
    "  69 with --all also when a replica did not answer (its row says why)\n"

/* Columns a store's limits have no use for: divisors, convergence and detection are the share
 * store's, the demand columns demand division's. */
static bool meaningless(const char *store, const char *column, bool demand)
{
    static const char *const share_only[] = {"LOCAL_SHARE", "DIVISOR_MIN", "DIVISOR_MAX",
                                             "DETECT_WITHIN_S", "CONVERGED"};
    static const char *const demand_only[] = {
        "DIVISION", "KEYS_LEASED", "KEYS_OWNED", "LARGEST_LEASE_AGE_MS", "LARGEST_LEASE", "MOVING"};
    if (strcmp(column, "STORE") == 0) /* the table's title */
        return true;
    for (size_t i = 0; i < sizeof(demand_only) / sizeof(demand_only[0]); i++)
        if (strcmp(column, demand_only[i]) == 0)
            return !demand;
    for (size_t i = 0; i < sizeof(share_only) / sizeof(share_only[0]); i++)
        if (strcmp(column, share_only[i]) == 0)
            return strcmp(store, "share") != 0;
    return false;
}

/* One table per store, in the order the stores first appear. */
static void print_by_store(const cli_table_t *t)
{
    bool *rows = calloc(t->n ? t->n : 1, sizeof(bool)), *done = calloc(t->n ? t->n : 1, 1);
    bool cols[CLI_COLS];
    if (!rows || !done) {
        cli_table_print(t, NULL, NULL);
        free(rows);
        free(done);
        return;
    }
    for (size_t first = 0; first < t->n; first++) {
        if (done[first])
            continue;
        const char *store = cli_table_get(t, first, "store");
        bool demand = false;
        for (size_t r = 0; r < t->n; r++) {
            rows[r] = strcmp(cli_table_get(t, r, "store"), store) == 0;
            done[r] |= rows[r];
            demand |= rows[r] && strcmp(cli_table_get(t, r, "division"), "demand") == 0;
        }
        for (size_t c = 0; c < t->cols; c++)
            cols[c] = !meaningless(store, t->head[c], demand);
        printf("%s%s limits\n", first ? "\n" : "", store);
        cli_table_print(t, rows, cols);
    }
    free(rows);
    free(done);
}

static bool wide;

static void human(const tt_response_t *r)
{
    summary(r);
    cli_table_t t = {0};
    cli_table_read(&t, r->raw, r->raw_len, "limits");
    if (wide)
        cli_table_print(&t, NULL, NULL);
    else
        print_by_store(&t);
    cli_table_free(&t);
}

/* ---- --all ------------------------------------------------------------------------------- */

/* A copy of an answer's bytes (the client reuses its buffer). */
static uint8_t *copy(const tt_response_t *r)
{
    uint8_t *b = malloc(r->raw_len ? r->raw_len : 1);
    if (b)
        memcpy(b, r->raw, r->raw_len);
    return b;
}

/* The members this replica knows that have not left, as peers to ask (itself not among them). */
static size_t read_members(const uint8_t *raw, size_t len, int port, peer_t **out)
{
    wire_reader_t rd = {.pos = raw, .end = raw + len};
    uint32_t n, rows = 0;
    *out = NULL;
    if (wire_read_map(&rd, &n))
        return 0;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k;
        if (wire_read_str(&rd, &k))
            return 0;
        if (!wire_str_eq(k, "members")) {
            if (wire_skip(&rd))
                return 0;
            continue;
        }
        if (wire_read_array(&rd, &rows) || !(*out = calloc(rows ? rows : 1, sizeof(peer_t))))
            return 0;
        size_t k2 = 0;
        for (uint32_t r = 0; r < rows; r++) {
            uint32_t nf;
            proto_str_t id = {"", 0}, addr = {"", 0}, state = {"", 0};
            bool self = false;
            if (wire_read_map(&rd, &nf))
                return k2;
            for (uint32_t f = 0; f < nf; f++) {
                proto_str_t name;
                if (wire_read_str(&rd, &name))
                    return k2;
                int rc = wire_str_eq(name, "id")        ? wire_read_str(&rd, &id)
                         : wire_str_eq(name, "address") ? wire_read_str(&rd, &addr)
                         : wire_str_eq(name, "state")   ? wire_read_str(&rd, &state)
                         : wire_str_eq(name, "self")    ? wire_read_bool(&rd, &self)
                                                        : wire_skip(&rd);
                if (rc)
                    return k2;
            }
            if (self || wire_str_eq(state, "left"))
                continue;
            peer_t *p = &(*out)[k2++];
            snprintf(p->id, sizeof(p->id), "%.*s", (int)id.len, id.ptr);
            snprintf(p->state, sizeof(p->state), "%.*s", (int)state.len, state.ptr);
            /* host:port or [v6]:port: the host without its gossip port */
            size_t hl = addr.len;
            while (hl > 0 && addr.ptr[hl - 1] != ':')
                hl--;
            hl = hl ? hl - 1 : addr.len;
            if (hl >= 2 && addr.ptr[0] == '[' && addr.ptr[hl - 1] == ']')
                snprintf(p->host, sizeof(p->host), "%.*s", (int)(hl - 2), addr.ptr + 1);
            else
                snprintf(p->host, sizeof(p->host), "%.*s", (int)hl, addr.ptr);
            p->port = port;
        }
        return k2;
    }
    return 0;
}

/* One replica's view: its fleet answer (NULL: the error says why). */
typedef struct view {
    const char *node, *address, *state, *error;
    const uint8_t *raw;
    size_t len;
    int64_t n;
} view_t;

static int64_t answer_n(const uint8_t *raw, size_t len, char *node, size_t node_size)
{
    wire_reader_t rd = {.pos = raw, .end = raw + len};
    uint32_t n;
    int64_t v = -1;
    if (wire_read_map(&rd, &n))
        return -1;
    for (uint32_t i = 0; i < n; i++) {
        proto_str_t k, s;
        if (wire_read_str(&rd, &k))
            return -1;
        if (wire_str_eq(k, "n") && wire_read_int(&rd, &v) == 0)
            continue;
        if (node && wire_str_eq(k, "node") && wire_read_str(&rd, &s) == 0) {
            snprintf(node, node_size, "%.*s", (int)s.len, s.ptr);
            continue;
        }
        if (wire_skip(&rd))
            return -1;
    }
    return v;
}

/* The N most views answered (the larger on a tie), or -1 when none did. */
static int64_t most_n(const view_t *v, size_t n)
{
    int64_t best = -1;
    size_t best_count = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].error)
            continue;
        size_t count = 0;
        for (size_t j = 0; j < n; j++)
            count += !v[j].error && v[j].n == v[i].n;
        if (count > best_count || (count == best_count && v[i].n > best)) {
            best = v[i].n;
            best_count = count;
        }
    }
    return best;
}

static int print_all_json(const view_t *v, size_t n, bool agree)
{
    tt_buf_t out = {0};
    tt_buf_append(&out, "{\"replicas\":[", 13);
    for (size_t i = 0; i < n; i++) {
        tt_buf_append(&out, i ? ",{\"node\":" : "{\"node\":", i ? 9 : 8);
        tt_json_str(&out, v[i].node, strlen(v[i].node));
        tt_buf_append(&out, ",\"address\":", 11);
        tt_json_str(&out, v[i].address, strlen(v[i].address));
        tt_buf_append(&out, ",\"state\":", 9);
        tt_json_str(&out, v[i].state, strlen(v[i].state));
        if (v[i].error) {
            tt_buf_append(&out, ",\"error\":", 9);
            tt_json_str(&out, v[i].error, strlen(v[i].error));
        } else {
            wire_reader_t rd = {.pos = v[i].raw, .end = v[i].raw + v[i].len};
            tt_buf_append(&out, ",\"fleet\":", 9);
            if (json_from_msgpack(&rd, &out) != 0)
                tt_buf_append(&out, "null", 4);
        }
        tt_buf_append(&out, "}", 1);
    }
    tt_buf_append(&out, agree ? "],\"n_agree\":true}" : "],\"n_agree\":false}", agree ? 17 : 18);
    if (out.failed)
        return EX_SOFTWARE_;
    printf("%.*s\n", (int)out.len, (const char *)out.data);
    tt_buf_free(&out);
    return EX_OK_;
}

static void print_all(const view_t *v, size_t n, int64_t most)
{
    cli_table_t t = {0};
    /* SEEN: the member's state in this replica's view; one that answers while dead here is
     * on the other side of a split */
    int c_replica = cli_table_column(&t, "replica", 7), c_seen = cli_table_column(&t, "seen", 4),
        c_n = cli_table_column(&t, "n", 1);
    for (size_t i = 0; i < n; i++) {
        char nbuf[32];
        snprintf(nbuf, sizeof(nbuf), "%lld%s", (long long)v[i].n, v[i].n != most ? "*" : "");
        if (v[i].error) {
            int row = cli_table_row(&t);
            char why[CLI_CELL];
            snprintf(why, sizeof(why), "error: %s", v[i].error);
            cli_table_set(&t, row, c_replica, v[i].node);
            cli_table_set(&t, row, c_seen, v[i].state);
            cli_table_set(&t, row, c_n, "-");
            cli_table_set(&t, row, cli_table_column(&t, "id", 2), why);
            continue;
        }
        size_t before = t.n;
        cli_table_read(&t, v[i].raw, v[i].len, "limits");
        for (size_t r = before; r < t.n; r++) {
            cli_table_set(&t, (int)r, c_replica, v[i].node);
            cli_table_set(&t, (int)r, c_seen, i == 0 ? "self" : v[i].state);
            cli_table_set(&t, (int)r, c_n, nbuf);
            for (size_t c = 0; !wide && c < t.cols; c++) /* blank what the store has no use for */
                if (strcmp(t.head[c], "STORE") != 0 &&
                    meaningless(t.rows[r][cli_table_column(&t, "store", 5)], t.head[c],
                                strcmp(cli_table_get(&t, r, "division"), "demand") == 0))
                    t.rows[r][c][0] = '\0';
        }
    }
    /* the limit's own n is the replica's N: one column of it */
    bool cols[CLI_COLS];
    for (size_t c = 0; c < t.cols; c++) {
        static const char *const brief[] = {
            "REPLICA",         "SEEN",        "N",        "ID", "STORE", "STATE", "LOCAL_SHARE",
            "SUSTAINED_BOUND", "BURST_BOUND", "CONVERGED"};
        cols[c] = wide && (int)c != c_n ? true : false;
        for (size_t k = 0; !wide && k < sizeof(brief) / sizeof(brief[0]); k++)
            cols[c] |= strcmp(t.head[c], brief[k]) == 0;
    }
    cols[c_n] = true;
    /* the limits' own "n" column is the first N: the replica's N (marked) replaces it */
    cli_table_print(&t, NULL, cols);
    cli_table_free(&t);
}

static int run_all(tt_client_t *c, const cli_common_t *o, int timeout_ms, int port)
{
    static tt_response_t r;
    int rc = tt_fleet(c, &r);
    uint8_t *local = rc == 0 ? copy(&r) : NULL;
    size_t local_len = r.raw_len;
    if (rc != 0 || !local) {
        free(local);
        return cli_answer(c, rc ? rc : -1, &r, o, "fleet", NULL);
    }
    rc = tt_members(c, &r);
    peer_t *peers = NULL;
    size_t np = rc == 0 ? read_members(r.raw, r.raw_len, port, &peers) : 0;
    tt_close(c);
    if (peers_fetch(peers, np, timeout_ms) != 0) {
        fprintf(stderr, "tokentriage fleet: out of memory\n");
        free(local);
        free(peers);
        return EX_SOFTWARE_;
    }
    view_t *v = calloc(np + 1, sizeof(*v));
    char self[160] = "?";
    int code = EX_OK_;
    if (!v) {
        code = EX_SOFTWARE_;
        goto out;
    }
    v[0] = (view_t){
        .node = self, .address = "(here)", .state = "alive", .raw = local, .len = local_len};
    v[0].n = answer_n(local, local_len, self, sizeof(self));
    for (size_t i = 0; i < np; i++) {
        v[i + 1] = (view_t){.node = peers[i].id,
                            .address = peers[i].host,
                            .state = peers[i].state,
                            .error = peers[i].error[0] ? peers[i].error : NULL,
                            .raw = peers[i].body,
                            .len = peers[i].len};
        if (!v[i + 1].error)
            v[i + 1].n = answer_n(peers[i].body, peers[i].len, NULL, 0);
        else
            code = EX_UNAVAILABLE_;
    }
    int64_t most = most_n(v, np + 1);
    bool agree = true;
    for (size_t i = 0; i <= np; i++)
        agree &= v[i].error || v[i].n == most;
    if (o->json) {
        int j = print_all_json(v, np + 1, agree);
        code = j != EX_OK_ ? j : code;
        goto out;
    }
    size_t answered = 0;
    for (size_t i = 0; i <= np; i++)
        answered += !v[i].error;
    printf("%zu replica%s asked (this one, %s, and the members it knows), %zu answered\n", np + 1,
           np ? "s" : "", self, answered);
    if (!agree) {
        printf("N DISAGREES:");
        for (size_t i = 0; i <= np; i++)
            if (!v[i].error)
                printf(" %s sees %lld%s", v[i].node, (long long)v[i].n, i < np ? "," : "");
        printf("\n(the replicas marked '*' see another N than most do: their views of the members "
               "differ; compare tokentriage members on each)\n");
    }
    for (size_t i = 0; i <= np; i++)
        if (!v[i].error)
            unheard(v[i].node, (int)strlen(v[i].node),
                    cli_head_int(v[i].raw, v[i].len, "unheard", 0));
    printf("\n");
    print_all(v, np + 1, most);
out:
    free(v);
    free(local);
    peers_free(peers, np);
    free(peers);
    return code;
}

int cmd_fleet(int argc, char **argv)
{
    static const struct option opts[] = {CLI_COMMON_OPTIONS,
                                         {"all", no_argument, NULL, 'a'},
                                         {"wide", no_argument, NULL, 'w'},
                                         {"timeout", required_argument, NULL, 't'},
                                         {"port", required_argument, NULL, 'p'},
                                         {NULL, 0, NULL, 0}};
    cli_common_t o = {0};
    bool all = false;
    long long timeout = 2000, port = 9464;
    int ch, rc;
    optind = 1;
    wide = false;
    while ((ch = cmd_getopt(argc, argv, "s:h", opts, HELP)) != -1) {
        if (ch == 'a')
            all = true;
        else if (ch == 'w')
            wide = true;
        else if (ch == 't') {
            if (cli_parse_count(optarg, "--timeout", 1, 600000, HELP, &timeout))
                return EX_USAGE_;
        } else if (ch == 'p') {
            if (cli_parse_count(optarg, "--port", 1, 65535, HELP, &port))
                return EX_USAGE_;
        } else if ((rc = cli_common_option(ch, &o, HELP)) != CLI_CONTINUE)
            return rc;
    }
    if (optind != argc)
        return cmd_usage_error(HELP, "unexpected argument \"%s\"", argv[optind]);
    tt_client_t *c = cli_connect(o.sock, "fleet");
    if (!c)
        return EX_UNAVAILABLE_;
    if (all)
        return run_all(c, &o, (int)timeout, (int)port);
    static tt_response_t r;
    return cli_answer(c, tt_fleet(c, &r), &r, &o, "fleet", human);
}
