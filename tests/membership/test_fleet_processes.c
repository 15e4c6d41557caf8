/*
 * Membership across real processes: eight `tokentriage serve` replicas gossiping on loopback
 * ports (sealed, one keyring), observed with `tokentriage members --json` as a user would;
 * and bad datagrams thrown at a replica, read back from its /metrics. Every wait polls for the
 * expected state with a deadline.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "procs.h"
#include "swim_proto.h"

#define N 8
#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n"

static tt_daemon_t d[N];
static char keyring[320];

static void stop_all(void)
{
    for (int i = 0; i < N; i++)
        if (d[i].dir[0])
            tt_daemon_stop(&d[i]);
    unlink(keyring);
}

TestSuite(fleet, .fini = stop_all, .timeout = 240);

static int members_json(int i, char *out, size_t cap)
{
    return fp_cli_json(&d[i], "members", out, cap);
}

static bool alive[N];

/* True when every running replica sees `target` in `want` (for target < 0: every running
 * replica alive) and counts exactly the running replicas live. */
static bool everyone_sees(int target, const char *want)
{
    static char out[1 << 16];
    int running = 0;
    for (int i = 0; i < N; i++)
        running += alive[i];
    char live[32];
    snprintf(live, sizeof live, "\"live\":%d,", running);
    for (int i = 0; i < N; i++) {
        if (!alive[i])
            continue;
        if (members_json(i, out, sizeof out) != 0 || !strstr(out, live))
            return false;
        for (int j = 0; j < N; j++) {
            if (target >= 0 && j != target)
                continue;
            char st[16], id[16];
            snprintf(id, sizeof id, "r%d", j);
            fp_field(out, id, "state", st, sizeof st);
            if (strcmp(st, target >= 0 ? want : (alive[j] ? "alive" : st)) != 0)
                return false;
        }
    }
    return true;
}

typedef struct sight {
    int target;
    const char *want;
} sight_t;

static bool sees(void *arg)
{
    const sight_t *s = arg;
    return everyone_sees(s->target, s->want);
}

/* Each check asks every replica (a CLI process each): 100 ms apart. */
static bool poll_until(int target, const char *want, int ms)
{
    return fp_poll(sees, &(sight_t){target, want}, ms, 100);
}

typedef struct child {
    pid_t pid;
    int status;
} child_t;

static bool exited(void *arg)
{
    child_t *c = arg;
    return waitpid(c->pid, &c->status, WNOHANG) != 0;
}

Test(fleet, eight_replicas_converge_see_a_kill_as_dead_and_a_term_as_left)
{
    fp_temp_file(keyring, sizeof keyring, "fleet-keys",
                 "# primary\nERERERERERERERERERERERERERERERERERERERERERE=\n");
    /* every replica lets the kernel pick its port; the first one's is the others' seed */
    int port0 = 0;
    for (int i = 0; i < N; i++) {
        /* the shared_state section goes after the server lines; the first replica starts
         * alone (no seed), the others seed to it */
        char extra[1024], seeds[64] = "";
        if (i > 0)
            snprintf(seeds, sizeof seeds, "    seeds: [\"127.0.0.1:%d\"]\n", port0);
        snprintf(extra, sizeof extra,
                 "shared_state:\n  share:\n    node_id: r%d\n    bind: 127.0.0.1:0\n%s"
                 "    keyring_file: %s\n    cluster: itest\n",
                 i, seeds, keyring);
        cr_assert_eq(tt_daemon_start(&d[i], LIMITS, extra), 0, "replica %d did not start", i);
        if (i == 0)
            port0 = fp_bound_port(&d[0], "membership started");
        alive[i] = true;
    }
    cr_assert(poll_until(-1, NULL, 60000), "the eight replicas did not converge");

    static char view[1 << 16];
    char gen_before[32], gen_after[32];
    cr_assert_eq(members_json(0, view, sizeof view), 0);
    fp_field(view, "r3", "generation", gen_before, sizeof gen_before);

    /* SIGKILL: detected by failure detection, dead everywhere */
    kill(d[3].pid, SIGKILL);
    waitpid(d[3].pid, NULL, 0);
    d[3].pid = 0;
    alive[3] = false;
    long long t0 = tt_now_ms();
    cr_assert(poll_until(3, "dead", 60000), "the killed replica was not marked dead everywhere");
    fprintf(stderr, "fleet: SIGKILL seen dead by every survivor after %lld ms\n", tt_now_ms() - t0);

    /* SIGTERM: a graceful leave, seen within about 2 s */
    kill(d[5].pid, SIGTERM);
    alive[5] = false;
    t0 = tt_now_ms();
    cr_assert(poll_until(5, "left", 3000), "the leave was not seen everywhere within 3 s");
    fprintf(stderr, "fleet: SIGTERM seen left by every survivor after %lld ms\n", tt_now_ms() - t0);
    child_t c = {d[5].pid, 0};
    cr_assert(fp_poll(exited, &c, 5000, 10), "serve did not exit within 5 s of its leave");
    d[5].pid = 0;
    cr_assert(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0,
              "serve exits 0 after a graceful leave");

    /* the killed replica restarts under the same name on a new port: a new generation,
     * alive everywhere and counted once */
    cr_assert_eq(tt_daemon_spawn(&d[3], true), 0);
    alive[3] = true;
    cr_assert(poll_until(3, "alive", 60000), "the restarted replica was not seen alive");
    cr_assert_eq(members_json(0, view, sizeof view), 0);
    fp_field(view, "r3", "generation", gen_after, sizeof gen_after);
    cr_assert_str_neq(gen_before, gen_after);
}

/* ---- bad datagrams against a real replica, read back from /metrics ---- */

Test(fleet, bad_datagrams_are_dropped_and_counted_in_metrics)
{
    tt_daemon_t *r = &d[0];
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/tt-test-XXXXXX");
    cr_assert_not_null(mkdtemp(r->dir));
    snprintf(r->config, sizeof r->config, "%s/config.yaml", r->dir);
    snprintf(r->socket, sizeof r->socket, "%s/tt.sock", r->dir);
    snprintf(r->log, sizeof r->log, "%s/stderr.log", r->dir);
    snprintf(keyring, sizeof keyring, "%s/gossip.keys", r->dir);
    uint8_t key[SWIM_KEY_BYTES], other[SWIM_KEY_BYTES];
    memset(key, 0x11, sizeof key);
    memset(other, 0x22, sizeof other);
    fp_write_file(keyring, "ERERERERERERERERERERERERERERERERERERERERERE=\n");
    FILE *f = fopen(r->config, "w");
    fprintf(f,
            "server:\n  socket: %s\n  http: 127.0.0.1:0\n"
            "shared_state:\n  share:\n    node_id: solo\n    bind: 127.0.0.1:0\n"
            "    keyring_file: %s\n    cluster: itest\n"
            "governance:\n  limits:\n" LIMITS,
            r->socket, keyring);
    fclose(f);
    cr_assert_eq(tt_daemon_spawn(r, true), 0);
    int gport = fp_bound_port(r, "membership started"), hport = fp_bound_port(r, "http listening");

    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)gport),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    uint8_t b[2048];
    size_t len;
#define SEND(p, n) sendto(s, p, n, 0, (struct sockaddr *)&to, sizeof to)
    memset(b, 0, sizeof b);
    SEND(b, SWIM_DATAGRAM_MAX + 1); /* oversize */
    b[0] = SWIM_WIRE_VERSION;
    b[1] = SWIM_MODE_SEALED;
    SEND(b, 10); /* truncated */
    b[0] = 9;
    SEND(b, 100); /* version */
    b[0] = SWIM_WIRE_VERSION;
    b[1] = SWIM_MODE_PLAIN;
    SEND(b, 100); /* plaintext to a keyed replica: mode */
    len = fp_datagram(b, key, "itest", "peer", 7, 1, fp_wall_ns(), 9);
    b[len - 1] ^= 1;
    SEND(b, len); /* forged */
    len = fp_datagram(b, other, "itest", "peer", 7, 2, fp_wall_ns(), 9);
    SEND(b, len); /* another key */
    len = fp_datagram(b, key, "staging", "peer", 7, 3, fp_wall_ns(), 9);
    SEND(b, len); /* another label */
    len = fp_datagram(b, key, "itest", "peer", 7, 4, fp_wall_ns(), 9);
    SEND(b, len); /* good: "peer" joins the view */
    SEND(b, len); /* replayed */
#undef SEND
    close(s);

    static char text[1 << 16];
    cr_assert_eq(fp_poll_metric(hport, "tokentriage_gossip_dropped_total{reason=\"replay\"} ", 1, 1,
                                10000, text, sizeof text),
                 1, "no replay counted:\n%s", text);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_dropped_total{reason=\"oversize\"} "), 1);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_dropped_total{reason=\"truncated\"} "), 1);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_dropped_total{reason=\"version\"} "), 1);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_dropped_total{reason=\"mode\"} "), 1);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_dropped_total{reason=\"auth\"} "), 3);
    cr_assert_eq(fp_counter(text, "tokentriage_gossip_packets_total{direction=\"rx\"} "), 1);
    /* still serving, and the one good datagram is the only change to the view */
    cr_assert_eq(fp_counter(text, "tokentriage_members{state=\"alive\"} "), 2);
}

/* True when the first `replicas` replicas all count `live` live members. */
typedef struct count {
    int live, replicas;
} count_t;

static bool all_count_now(void *arg)
{
    const count_t *c = arg;
    for (int i = 0; i < c->replicas; i++)
        if (fp_live(&d[i]) != c->live)
            return false;
    return true;
}

static bool all_count(int live, int replicas, int ms)
{
    return fp_poll(all_count_now, &(count_t){live, replicas}, ms, 50);
}

static bool both_count_two(int ms)
{
    return all_count(2, 2, ms);
}

#define AUTH_DROPS "tokentriage_gossip_dropped_total{reason=\"auth\"} "
#define KEY_A "ERERERERERERERERERERERERERERERERERERERERERE=" /* 32 x 0x11 */
#define KEY_B "IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiI=" /* 32 x 0x22 */

static char rings[3][64];

/* Replica i's config: node k<i>, its own keyring, seeded to `seed` (0: none). */
static void replica_config(int i, int seed, char *out, size_t cap)
{
    fp_replica_config(out, cap, "k", i, 0, seed, rings[i]);
}

/* Makes replica i's keyring file holding `text`. */
static void make_ring(int i, const char *text)
{
    fp_temp_file(rings[i], sizeof rings[i], "ring", text);
}

/* Starts replicas 0 and 1 on their keyrings, 1 seeded to 0, and waits until both count 2 live.
 * Returns replica 0's gossip port. */
static int start_pair(void)
{
    char extra[1024];
    replica_config(0, 0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_start(&d[0], LIMITS, extra), 0);
    int port0 = fp_bound_port(&d[0], "membership started");
    replica_config(1, port0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_start(&d[1], LIMITS, extra), 0);
    cr_assert(both_count_two(30000), "the keyed pair did not converge");
    return port0;
}

static void unlink_rings(void)
{
    stop_all();
    for (int i = 0; i < 3; i++)
        if (rings[i][0])
            unlink(rings[i]);
}

/* The security of the gossip on real processes: an outsider with another key is refused (its
 * datagrams fail authentication, nobody's view changes); then the key rotates on the live pair
 * by restarts (add the new key, make it primary, remove the old) and the pair is whole (each
 * counts 2 live) after every single restart. */
Test(fleet, an_outsider_cannot_join_and_a_key_rotates_without_a_split, .fini = unlink_rings)
{
    for (int i = 0; i < 3; i++)
        make_ring(i, i < 2 ? KEY_A "\n" : KEY_B "\n");
    int port0 = start_pair();
    char extra[1024];
    replica_config(2, port0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_start(&d[2], LIMITS, extra), 0);
    int hport0 = fp_bound_port(&d[0], "http listening");
    static char text[1 << 16];
    cr_assert_gt(fp_poll_metric(hport0, AUTH_DROPS, 1, LLONG_MAX, 20000, text, sizeof text), 0,
                 "the outsider's datagrams were never refused:\n%s", text);
    cr_assert_eq(fp_live(&d[0]), 2);
    cr_assert_eq(fp_live(&d[1]), 2);
    cr_assert_eq(fp_live(&d[2]), 1, "the outsider sees someone");
    tt_daemon_stop(&d[2]);

    static const char *const steps[] = {
        "# primary\n" KEY_A "\n" KEY_B "\n", /* add the new key */
        "# primary\n" KEY_B "\n" KEY_A "\n", /* make it primary */
        KEY_B "\n",                          /* remove the old */
    };
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++)
        for (int i = 0; i < 2; i++) {
            fp_write_file(rings[i], steps[s]);
            kill(d[i].pid, SIGTERM);
            waitpid(d[i].pid, NULL, 0);
            int other = fp_bound_port(&d[1 - i], "membership started");
            replica_config(i, other, extra, sizeof extra);
            FILE *f = fopen(d[i].config, "w");
            cr_assert_not_null(f);
            fprintf(f, "server:\n  socket: %s\n%sgovernance:\n  limits:\n" LIMITS, d[i].socket,
                    extra);
            fclose(f);
            cr_assert_eq(tt_daemon_spawn(&d[i], true), 0);
            cr_assert(both_count_two(30000), "split after step %zu, replica %d restarted", s, i);
        }
}

/* SIGHUP replica i and wait until its /metrics counts `want` reloads with `result`. */
static void reload_and_wait(int i, int hport, const char *result, long long want)
{
    char name[96];
    snprintf(name, sizeof name, "tokentriage_reloads_total{result=\"%s\"} ", result);
    kill(d[i].pid, SIGHUP);
    cr_assert_eq(fp_poll_metric(hport, name, want, want, 10000, NULL, 0), want,
                 "replica %d: reloads %s", i, result);
}

/* The same rotation with no restart at all: each step is a keyring file edit and a SIGHUP. Not
 * one datagram is refused on the way, and the pair stays whole; then the reload is shown to have
 * taken effect (a replica back on the removed key is refused), and a bad keyring fails the
 * reload whole. */
Test(fleet, a_key_rotates_by_reload_without_a_restart_or_a_refused_datagram, .fini = unlink_rings)
{
    for (int i = 0; i < 2; i++)
        make_ring(i, KEY_A "\n");
    start_pair();
    int hport[2] = {fp_bound_port(&d[0], "http listening"), fp_bound_port(&d[1], "http listening")};
    pid_t pid[2] = {d[0].pid, d[1].pid};

    static const char *const steps[] = {
        "# primary\n" KEY_A "\n" KEY_B "\n", /* add the new key */
        "# primary\n" KEY_B "\n" KEY_A "\n", /* make it primary */
        KEY_B "\n",                          /* remove the old */
    };
    long long ok = 0;
    for (size_t s = 0; s < sizeof steps / sizeof *steps; s++) {
        ok++;
        for (int i = 0; i < 2; i++) {
            fp_write_file(rings[i], steps[s]);
            reload_and_wait(i, hport[i], "ok", ok);
            cr_assert(both_count_two(5000), "split after step %zu at replica %d", s, i);
        }
    }
    cr_assert(tt_daemon_log_has(&d[0], "keyring reloaded: the first key seals\" keys=1", 0));
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(d[i].pid, pid[i], "replica %d was restarted", i);
        cr_assert_eq(fp_metric(hport[i], AUTH_DROPS), 0, "replica %d refused a datagram", i);
    }

    /* replica 1 back on the removed key alone: replica 0 now refuses what it sends */
    fp_write_file(rings[1], KEY_A "\n");
    reload_and_wait(1, hport[1], "ok", ok + 1);
    cr_assert_gt(fp_poll_metric(hport[0], AUTH_DROPS, 1, LLONG_MAX, 10000, NULL, 0), 0,
                 "the reloaded key was not in use");

    /* a keyring that does not parse fails the reload whole; the replica keeps serving */
    fp_write_file(rings[0], "not base64\n");
    reload_and_wait(0, hport[0], "failed", 1);
    cr_assert(tt_daemon_log_has(&d[0], "reason=\"shared_state.share.keyring_file", 0));
    cr_assert_eq(fp_live(&d[0]) >= 1, true, "replica 0 stopped answering");
}

static char faketime_file[64];

/* Replica r (a tt_daemon_t) holds k0 suspect. Asked as fast as the CLI answers: the fault
 * below must start early in the suspicion. */
static bool state_is_suspect(void *r)
{
    char st[16];
    fp_state(r, "k0", st, sizeof st);
    return strcmp(st, "suspect") == 0;
}

static void clock_fini(void)
{
    unlink_rings();
    if (faketime_file[0])
        unlink(faketime_file);
}

/* A wall-clock step on one replica kills no one (issue #17 finding 2): replica 2 runs under
 * libfaketime with its offset read from a file (CLOCK_MONOTONIC left alone). Replica 0 is
 * stopped until replica 2 suspects it; then replica 2's wall clock jumps 20 s forward and
 * replica 0 resumes 0.3 s later, with most of the 4 s suspicion timeout left to refute. A timer on
 * the wall clock fires at the step and declares replica 0 dead; no peer may. */
Test(fleet, a_wall_clock_step_on_one_replica_kills_no_one, .fini = clock_fini)
{
    fp_temp_file(faketime_file, sizeof faketime_file, "faketime", "+0\n");
    for (int i = 0; i < 3; i++)
        make_ring(i, KEY_A "\n");
    int port0 = start_pair();
    char extra[1024];
    replica_config(2, port0, extra, sizeof extra);
    fp_start_faked(&d[2], faketime_file, LIMITS, extra);
    cr_assert(all_count(3, 3, 30000), "the three did not converge");

    kill(d[0].pid, SIGSTOP);
    /* asserted once replica 0 runs again */
    bool suspected = fp_poll(state_is_suspect, &d[2], 10000, 10);
    fp_write_file(faketime_file, "+20s\n");
    /* the fault: replica 0 stays stopped 0.3 s more, past replica 2's next tick (gossip runs
     * every 0.2 s), then resumes with over 3 s of the suspicion left to refute */
    struct timespec hold = {0, 300 * 1000000L};
    nanosleep(&hold, NULL);
    kill(d[0].pid, SIGCONT);
    cr_assert(suspected, "replica 2 never suspected the stopped replica");
    /* replica 0 refutes; the three agree again, and neither peer ever declared it dead (a
     * death refuted at once shows only in the counter) */
    cr_assert(all_count(3, 3, 10000), "the three did not agree again");
    for (int i = 1; i < 3; i++) {
        int hport = fp_bound_port(&d[i], "http listening");
        cr_assert_eq(fp_metric(hport, "\ntokentriage_members_down_total "), 0,
                     "replica %d declared the stopped replica dead", i);
    }
}

/* Replica i says what a claimant of a duplicate id must say: the log line, the metric, the
 * field in `members` and N in doubt in `fleet`. */
static bool reports_duplicate(int i, int hport)
{
    static char out[1 << 16];
    return tt_daemon_log_has(&d[i], "duplicate node id", 0) &&
           fp_metric(hport, "\ntokentriage_membership_duplicate_id ") == 1 &&
           members_json(i, out, sizeof out) == 0 && strstr(out, "\"duplicate_generation\":") &&
           fp_cli_json(&d[i], "fleet", out, sizeof out) == 0 && strstr(out, "\"n_in_doubt\":\"");
}

static bool both_report_duplicate(void *hport)
{
    const int *h = hport;
    return reports_duplicate(1, h[1]) && reports_duplicate(2, h[2]);
}

/* Two live processes with one node id (issue #17 finding 3): replicas 1 and 2 both claim "k1".
 * Every view counts the id once, so N is short by one; both claimants must say so, in words an
 * operator can grep for. */
Test(fleet, a_duplicate_node_id_is_reported_on_both_claimants, .fini = unlink_rings)
{
    for (int i = 0; i < 3; i++)
        make_ring(i, KEY_A "\n");
    int port0 = start_pair();
    char extra[1024];
    replica_config(2, port0, extra, sizeof extra);
    char *id = strstr(extra, "node_id: k2");
    cr_assert_not_null(id);
    id[strlen("node_id: k")] = '1'; /* a mis-templated config: replica 2 says it is k1 too */
    cr_assert_eq(tt_daemon_start(&d[2], LIMITS, extra), 0);
    int hport[3];
    for (int i = 0; i < 3; i++)
        hport[i] = fp_bound_port(&d[i], "http listening");
    cr_assert(fp_poll(both_report_duplicate, hport, 30000, 100),
              "a claimant did not report the duplicate id (replica 1: %d, replica 2: %d)",
              reports_duplicate(1, hport[1]), reports_duplicate(2, hport[2]));
    cr_assert_eq(fp_metric(hport[0], "\ntokentriage_membership_duplicate_id "), 0,
                 "replica 0 claims no duplicated id");
}
