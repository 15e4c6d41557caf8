/* The libuv shell: several members on one loop, on loopback, with real sockets. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mb.h"

#define MAXN 4

typedef struct fleet {
    uv_loop_t loop;
    mb_t *mb[MAXN];
    int n;
    int ups, lefts, live_changes;
    char keyring[256];
} fleet_t;

static void on_event(void *ud, mb_t *mb, const swim_event_t *ev)
{
    fleet_t *f = ud;
    f->ups += ev->type == SWIM_EV_UP;
    f->lefts += ev->type == SWIM_EV_LEFT;
    f->live_changes += ev->type == SWIM_EV_LIVE_COUNT;
}

static void share_cfg(cfg_share_t *c, const char *id, const char *seed, const char *keyring)
{
    memset(c, 0, sizeof *c);
    c->present = true;
    snprintf(c->node_id, sizeof c->node_id, "%s", id);
    snprintf(c->bind, sizeof c->bind, "127.0.0.1:0");
    if (seed) {
        snprintf(c->seeds[0], sizeof c->seeds[0], "%s", seed);
        c->n_seeds = 1;
    }
    if (keyring)
        snprintf(c->keyring_file, sizeof c->keyring_file, "%s", keyring);
    snprintf(c->cluster, sizeof c->cluster, "test");
    c->join_timeout_ns = INT64_C(10) * 1000000000;
}

/* Node 0 starts alone; the others know it as their seed, by its address or, with by_name,
 * as localhost:port (resolved on every try). */
static void start_seeded(fleet_t *f, int n, const char *keyring, bool by_name)
{
    uv_loop_init(&f->loop);
    f->n = n;
    for (int i = 0; i < n; i++) {
        cfg_share_t c;
        char id[16], seed[64];
        snprintf(id, sizeof id, "node-%d", i);
        if (i)
            snprintf(seed, sizeof seed, "%s%s", by_name ? "localhost" : "",
                     by_name ? strrchr(mb_advertise(f->mb[0]), ':') : mb_advertise(f->mb[0]));
        share_cfg(&c, id, i ? seed : NULL, keyring);
        tt_err_t err;
        cr_assert_eq(mb_start(&f->mb[i], &f->loop, &c, &err), 0, "%s", err.message);
        mb_subscribe(f->mb[i], on_event, f);
    }
}

static void start(fleet_t *f, int n, const char *keyring)
{
    start_seeded(f, n, keyring, false);
}

static void on_tick(uv_timer_t *t) {}

/* Runs the loop until pred holds, for at most `ms` of real time: the loop wakes on I/O or
 * on a 10 ms timer, then the predicate is checked. */
static bool run_until(fleet_t *f, bool (*pred)(fleet_t *), int ms)
{
    uv_timer_t tick;
    uv_timer_init(&f->loop, &tick);
    uv_timer_start(&tick, on_tick, 10, 10);
    uint64_t deadline = uv_now(&f->loop) + (uint64_t)ms;
    bool ok;
    while (!(ok = pred(f)) && uv_now(&f->loop) < deadline)
        uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    return ok;
}

static bool all_alive(fleet_t *f)
{
    for (int i = 0; i < f->n; i++)
        if (mb_live_count(f->mb[i]) != f->n)
            return false;
    return true;
}

static bool others_see_left(fleet_t *f)
{
    for (int i = 1; i < f->n; i++) {
        swim_member_view_t v;
        bool found = false;
        for (size_t k = 0; k < mb_member_count(f->mb[i]); k++)
            if (mb_member_get(f->mb[i], k, &v) == 0 && strcmp(v.id, "node-0") == 0)
                found = v.state == SWIM_LEFT;
        if (!found)
            return false;
    }
    return true;
}

static void on_closed(void *ud, mb_t *mb)
{
    (*(int *)ud)++;
}

static void stop(fleet_t *f)
{
    int closed = 0;
    for (int i = 0; i < f->n; i++)
        mb_close(f->mb[i], on_closed, &closed);
    while (closed < f->n)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (int i = 0; i < f->n; i++)
        mb_free(f->mb[i]);
    cr_assert_eq(uv_loop_close(&f->loop), 0);
}

static void on_left(void *ud, mb_t *mb)
{
    *(bool *)ud = true;
}

Test(mb, three_members_on_loopback_join_and_see_a_graceful_leave)
{
    fleet_t f = {0};
    start(&f, 3, NULL);
    cr_assert(run_until(&f, all_alive, 10000), "the three did not converge");
    cr_assert(mb_joined(f.mb[1]));
    bool left = false;
    mb_leave(f.mb[0], on_left, &left);
    cr_assert(run_until(&f, others_see_left, 2000), "the leave was not seen within 2 s");
    cr_assert_geq(f.lefts, 2);
    stop(&f);
}

static bool meta_seen(fleet_t *f)
{
    swim_member_view_t v;
    for (size_t k = 0; k < mb_member_count(f->mb[1]); k++)
        if (mb_member_get(f->mb[1], k, &v) == 0 && strcmp(v.id, "node-0") == 0)
            return v.meta_len == 3 && memcmp(v.meta, "N=2", 3) == 0;
    return false;
}

Test(mb, a_sealed_pair_converges_and_gossips_metadata)
{
    fleet_t f = {0};
    char path[] = "/tmp/tt_mb_keyringXXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *ring = "# primary first\nERERERERERERERERERERERERERERERERERERERERERE=\n";
    cr_assert_eq(write(fd, ring, strlen(ring)), (ssize_t)strlen(ring));
    close(fd);
    start(&f, 2, path);
    cr_assert(run_until(&f, all_alive, 10000));
    cr_assert_eq(mb_set_meta(f.mb[0], (const uint8_t *)"N=2", 3), 0);
    cr_assert(run_until(&f, meta_seen, 5000));
    cr_assert_eq(mb_counters(f.mb[1])->drop_auth, 0);
    cr_assert_gt(mb_counters(f.mb[1])->pushpull_in + mb_counters(f.mb[0])->pushpull_in, 0);
    stop(&f);
    unlink(path);
}

/* ---- every event delivered once ----------------------------------------------------------------
 * A subscriber that republishes its metadata on every change of the live count, as the share
 * store does with its divisor (share_node.c: mb_set_meta from its event handler), and a second
 * one behind it that counts what it is handed: on each member, one UP per peer and one LEFT of
 * the leaver, however the first subscriber calls back into membership. */

typedef struct tally {
    mb_t *self;
    int ups[MAXN], lefts[MAXN]; /* by member index (node-I) */
    uint8_t published;          /* republish's last metadata */
} tally_t;

static tally_t tallies[MAXN];

static void republish(void *ud, mb_t *mb, const swim_event_t *ev)
{
    (void)ev;
    tally_t *t = ud;
    uint8_t meta[1] = {(uint8_t)mb_live_count(mb)};
    if (meta[0] != t->published) { /* as the share store: only a changed divisor */
        t->published = meta[0];
        mb_set_meta(mb, meta, sizeof meta);
    }
}

static void count(void *ud, mb_t *mb, const swim_event_t *ev)
{
    tally_t *t = ud;
    int i;
    cr_assert_eq(mb, t->self);
    if (sscanf(ev->id, "node-%d", &i) != 1 || i < 0 || i >= MAXN)
        return;
    t->ups[i] += ev->type == SWIM_EV_UP;
    t->lefts[i] += ev->type == SWIM_EV_LEFT;
}

static bool three_alive_and_republished(fleet_t *f)
{
    if (!all_alive(f))
        return false;
    for (int i = 0; i < f->n; i++)
        for (int j = 0; j < f->n; j++) {
            swim_member_view_t v;
            if (mb_member_get(f->mb[i], (size_t)j, &v) != 0 || v.meta_len != 1 || v.meta[0] != f->n)
                return false;
        }
    return true;
}

Test(mb, a_subscriber_that_sets_metadata_does_not_make_the_others_see_events_twice)
{
    fleet_t f = {0};
    uv_loop_init(&f.loop);
    f.n = 3;
    memset(tallies, 0, sizeof tallies);
    for (int i = 0; i < f.n; i++) {
        cfg_share_t c;
        char id[16];
        snprintf(id, sizeof id, "node-%d", i);
        share_cfg(&c, id, i ? mb_advertise(f.mb[0]) : NULL, NULL);
        tt_err_t err;
        cr_assert_eq(mb_start(&f.mb[i], &f.loop, &c, &err), 0, "%s", err.message);
        tallies[i].self = f.mb[i];
        cr_assert_eq(mb_subscribe(f.mb[i], republish, &tallies[i]), 0);
        cr_assert_eq(mb_subscribe(f.mb[i], count, &tallies[i]), 0);
    }
    cr_assert(run_until(&f, three_alive_and_republished, 10000), "the three did not converge");
    bool left = false;
    mb_leave(f.mb[0], on_left, &left);
    cr_assert(run_until(&f, others_see_left, 2000), "the leave was not seen within 2 s");
    for (int i = 0; i < f.n; i++)
        for (int j = 0; j < f.n; j++) {
            if (j == i)
                continue;
            cr_expect_eq(tallies[i].ups[j], 1, "node-%d saw node-%d come up %d times", i, j,
                         tallies[i].ups[j]);
            if (j == 0)
                cr_expect_eq(tallies[i].lefts[0], 1, "node-%d saw node-0 leave %d times", i,
                             tallies[i].lefts[0]);
        }
    stop(&f);
}

static char got[64];

static void on_app(void *ud, mb_t *mb, const char *from, size_t from_len, const uint8_t *p,
                   size_t len)
{
    snprintf(got, sizeof got, "%.*s:%.*s", (int)from_len, from, (int)len, (const char *)p);
}

static bool app_seen(fleet_t *f)
{
    return got[0] != 0;
}

Test(mb, an_application_payload_reaches_its_member)
{
    fleet_t f = {0};
    start(&f, 2, NULL);
    cr_assert(run_until(&f, all_alive, 10000));
    mb_set_app_handler(f.mb[1], on_app, NULL);
    cr_assert_eq(mb_send_app(f.mb[0], "node-1", 6, (const uint8_t *)"demand", 6), 0);
    cr_assert_eq(mb_send_app(f.mb[0], "node-9", 6, (const uint8_t *)"demand", 6), SWIM_EINVAL);
    cr_assert(run_until(&f, app_seen, 5000));
    cr_assert_str_eq(got, "node-0:demand");
    stop(&f);
}

Test(mb, a_seed_given_by_name_is_resolved_and_joined)
{
    fleet_t f = {0};
    start_seeded(&f, 3, NULL, true);
    cr_assert(run_until(&f, all_alive, 10000), "the three did not converge through localhost");
    stop(&f);
}

/* A loopback port free for both UDP and TCP now (the kernel's pick for TCP, released): the
 * membership binds both on its port. Another process may still take it before mb_start
 * binds, so the caller retries with another. */
static int free_port(void)
{
    for (;;) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int t = socket(AF_INET, SOCK_STREAM, 0), u = socket(AF_INET, SOCK_DGRAM, 0);
        cr_assert(t >= 0 && u >= 0 && bind(t, (struct sockaddr *)&a, sizeof a) == 0 &&
                  getsockname(t, (struct sockaddr *)&a, &len) == 0);
        bool both = bind(u, (struct sockaddr *)&a, sizeof a) == 0;
        close(t);
        close(u);
        if (both)
            return ntohs(a.sin_port);
    }
}

static void append(void *ud, const char *text)
{
    strncat(ud, text, 16383 - strlen(ud));
}

static bool second_counts_one_seed_peer(fleet_t *f)
{
    return all_alive(f) && mb_seed_peers(f->mb[1]) == 1;
}

Test(mb, the_seed_peers_are_the_addresses_the_seeds_name_but_its_own)
{
    fleet_t f = {0};
    uv_loop_init(&f.loop);
    f.n = 2;
    for (int i = 0; i < 2; i++) {
        cfg_share_t c;
        share_cfg(&c, i ? "node-1" : "node-0", NULL, NULL);
        tt_err_t err;
        int rc = -1;
        for (int attempt = 0; attempt < 5 && rc != 0; attempt++) {
            if (i) { /* its own address first, then node-0's */
                int port = free_port();
                snprintf(c.bind, sizeof c.bind, "127.0.0.1:%d", port);
                snprintf(c.seeds[0], sizeof c.seeds[0], "127.0.0.1:%d", port);
                snprintf(c.seeds[1], sizeof c.seeds[1], "%s", mb_advertise(f.mb[0]));
                c.n_seeds = 2;
            }
            rc = mb_start(&f.mb[i], &f.loop, &c, &err);
        }
        cr_assert_eq(rc, 0, "%s", err.message);
    }
    cr_assert(run_until(&f, second_counts_one_seed_peer, 10000), "seed peers %llu",
              (unsigned long long)mb_seed_peers(f.mb[1]));
    cr_assert_eq(mb_seed_peers(f.mb[0]), 0, "no seeds: no peer expected");
    static char text[16384];
    text[0] = 0;
    mb_metrics_write(f.mb[1], append, text);
    cr_assert(strstr(text, "\ntokentriage_membership_seed_peers 1\n"), "%s", text);
    stop(&f);
}

/* swim_counters as mb.c calls it (linked with --wrap): the core's, or every count at its
 * widest while `widest` is set. */
static bool widest;
const swim_counters_t *__real_swim_counters(const swim_core_t *core);
const swim_counters_t *__wrap_swim_counters(const swim_core_t *core);
const swim_counters_t *__wrap_swim_counters(const swim_core_t *core)
{
    static swim_counters_t all;
    if (!widest)
        return __real_swim_counters(core);
    memset(&all, 0xff, sizeof all);
    return &all;
}

/* Each piece mb_metrics_write emits must be whole lines. */
static void whole_lines(void *ud, const char *text)
{
    size_t n = strlen(text);
    cr_assert(n > 0 && text[n - 1] == '\n', "a piece that does not end a line: %s", text);
    append(ud, text);
}

Test(mb, every_metric_family_is_whole_lines_whatever_its_counts)
{
    fleet_t f = {0};
    start(&f, 1, NULL);
    static char text[16384];
    text[0] = 0;
    widest = true;
    mb_metrics_write(f.mb[0], whole_lines, text);
    widest = false;
    cr_assert(strstr(text, "tokentriage_gossip_rejoin_total{kind=\"merge\"} 18446744073709551615\n"
                           "# HELP tokentriage_members_down_total "),
              "%s", text);
    for (const char *l = text; *l; l = strchr(l, '\n') + 1) { /* a comment, or name value */
        const char *nl = strchr(l, '\n'), *sp = nl;
        while (sp && sp > l && *sp != ' ')
            sp--;
        cr_assert(nl && (strncmp(l, "# HELP ", 7) == 0 || strncmp(l, "# TYPE ", 7) == 0 ||
                         (strncmp(l, "tokentriage_", 12) == 0 && *sp == ' ' &&
                          strspn(sp + 1, "0123456789") == (size_t)(nl - sp - 1))),
                  "not a line of the exposition: %.*s", nl ? (int)(nl - l) : 80, l);
    }
    stop(&f);
}

Test(mb, bad_settings_are_refused_naming_the_field)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    cfg_share_t c;
    mb_t *mb;
    tt_err_t err;
    share_cfg(&c, "x", NULL, NULL);
    snprintf(c.bind, sizeof c.bind, "nowhere:7946");
    cr_assert_lt(mb_start(&mb, &loop, &c, &err), 0);
    cr_assert_str_eq(err.path, "shared_state.share.bind");
    cr_assert_eq(err.code, SWIM_EINVAL);
    share_cfg(&c, "x", NULL, "/nonexistent/gossip.keys");
    cr_assert_lt(mb_start(&mb, &loop, &c, &err), 0);
    cr_assert_str_eq(err.path, "shared_state.share.keyring_file");
    cr_assert(strncmp(err.message, "/nonexistent/gossip.keys: ", 26) == 0, "%s", err.message);
    share_cfg(&c, "x", NULL, NULL);
    snprintf(c.advertise, sizeof c.advertise, "somewhere");
    cr_assert_lt(mb_start(&mb, &loop, &c, &err), 0);
    cr_assert_str_eq(err.path, "shared_state.share.advertise");
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
}

Test(mb, addresses_parse_numeric_v4_and_v6_only)
{
    struct sockaddr_storage ss;
    cr_assert_eq(mb_parse_addr("10.1.2.3:7946", &ss), 0);
    cr_assert_eq(ss.ss_family, AF_INET);
    cr_assert_eq(mb_parse_addr("[::1]:7946", &ss), 0);
    cr_assert_eq(ss.ss_family, AF_INET6);
    cr_assert_eq(mb_parse_addr("host:7946", &ss), -1);
    cr_assert_eq(mb_parse_addr("10.1.2.3", &ss), -1);
    cr_assert_eq(mb_parse_addr("10.1.2.3:99999", &ss), -1);
    swim_addr_t a = {.family = 4, .port = 7946, .ip = {10, 0, 0, 9}};
    char buf[64];
    mb_addr_format(&a, buf, sizeof buf);
    cr_assert_str_eq(buf, "10.0.0.9:7946");
}
