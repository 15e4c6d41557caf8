/*
 * Membership across restarts, on real `tokentriage serve` replicas (sealed, loopback ports):
 * what a restarted replica accepts, and what its peers accept from it. Every wait polls for the
 * expected state with a deadline.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"
#include "procs.h"
#include "swim_proto.h"

#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n"
#define KEY_A "ERERERERERERERERERERERERERERERERERERERERERE=" /* 32 x 0x11 */
#define STALE "tokentriage_gossip_dropped_total{reason=\"stale\"} "
#define REPLAY "tokentriage_gossip_dropped_total{reason=\"replay\"} "
#define RX "tokentriage_gossip_packets_total{direction=\"rx\"} "

static tt_daemon_t d[3];
static char ring[64];

static void stop_all(void)
{
    for (int i = 0; i < 3; i++)
        if (d[i].dir[0])
            tt_daemon_stop(&d[i]);
    if (ring[0])
        unlink(ring);
}

TestSuite(restart, .fini = stop_all, .timeout = 240);

static void make_ring(void)
{
    fp_temp_file(ring, sizeof ring, "ring", KEY_A "\n");
}

/* Replica i's server and shared_state lines: node k<i>, gossip on `gport` (0: the kernel's
 * pick), seeded to `seed` (0: none). */
static void replica_config(int i, int gport, int seed, char *out, size_t cap)
{
    fp_replica_config(out, cap, "k", i, gport, seed, ring);
}

/* The datagrams the replica on hport has read: received, or dropped as stale or replayed (-1
 * when it does not answer). */
static long long seen(int hport)
{
    long long rx = fp_metric(hport, RX), st = fp_metric(hport, STALE),
              rp = fp_metric(hport, REPLAY);
    return rx < 0 || st < 0 || rp < 0 ? -1 : rx + st + rp;
}

typedef struct seen_wait {
    int hport;
    long long want;
} seen_wait_t;

static bool seen_enough(void *arg)
{
    const seen_wait_t *w = arg;
    return seen(w->hport) >= w->want;
}

/* Polls until the replica on hport has read `want` datagrams (seen), for at most ms. */
static bool poll_seen(int hport, long long want, int ms)
{
    return fp_poll(seen_enough, &(seen_wait_t){hport, want}, ms, 20);
}

#define REPLAYS 3

/* Replays `n` recorded datagrams to 127.0.0.1:gport. */
static void replay(int s, int gport, uint8_t rec[][SWIM_DATAGRAM_MAX], const size_t *len, int n)
{
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)gport),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int k = 0; k < n; k++)
        cr_assert_eq(sendto(s, rec[k], len[k], 0, (struct sockaddr *)&to, sizeof to),
                     (ssize_t)len[k]);
}

/*
 * Replayed datagrams must not bring a dead peer back into N (issue #23 item 7). The peer
 * "ghost" is played by the test: a UDP socket that sends three sealed datagrams carrying its
 * own record (recorded as an eavesdropper on the path would) and never answers, so replica k0
 * counts it, then declares it dead. The recorded datagrams replayed to k0 change nothing (its
 * replay window knows them). Then k0 restarts: its new process knows nothing of the ghost, and
 * the same replays, still inside the 30 s time window, must not add it either (before: the
 * restarted k0 counted the dead ghost live until it detected it dead again).
 */
Test(restart, replayed_datagrams_bring_no_dead_peer_back_even_after_a_restart)
{
    make_ring();
    char extra[1024];
    replica_config(0, 0, 0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_start(&d[0], LIMITS, extra), 0);
    int gport = fp_bound_port(&d[0], "membership started");
    int hport = fp_bound_port(&d[0], "http listening");

    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t ml = sizeof me;
    cr_assert_eq(bind(s, (struct sockaddr *)&me, sizeof me), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&me, &ml), 0);
    uint8_t key[SWIM_KEY_BYTES], rec[REPLAYS][SWIM_DATAGRAM_MAX];
    size_t len[REPLAYS];
    memset(key, 0x11, sizeof key);
    uint64_t gen = (uint64_t)fp_wall_ns();
    long long recorded = tt_now_ms();
    for (int k = 0; k < REPLAYS; k++)
        len[k] = fp_datagram(rec[k], key, "itest", "ghost", gen, (uint64_t)k + 1, fp_wall_ns(),
                             ntohs(me.sin_port));
    replay(s, gport, rec, len, REPLAYS); /* the ghost's only datagrams, as it sent them */
    cr_assert(fp_poll_state(&d[0], "ghost", "alive", 10000), "k0 never counted the ghost");
    cr_assert(fp_poll_state(&d[0], "ghost", "dead", 30000),
              "k0 never declared the silent ghost dead");

    long long base = seen(hport);
    replay(s, gport, rec, len, REPLAYS);
    cr_assert(poll_seen(hport, base + REPLAYS, 10000), "k0 did not read the replays");
    cr_assert_eq(fp_metric(hport, REPLAY), REPLAYS, "the replays were not refused as replays");
    cr_assert_eq(fp_live(&d[0]), 1, "a replay brought the dead ghost back");

    /* k0 restarts (a new process, a new port); the replays are still inside the time window */
    cr_assert_eq(tt_daemon_kill(&d[0], SIGKILL), -1);
    cr_assert_eq(tt_daemon_spawn(&d[0], true), 0);
    gport = fp_bound_port(&d[0], "membership started");
    hport = fp_bound_port(&d[0], "http listening");
    cr_assert_lt(tt_now_ms() - recorded, 25000,
                 "precondition: the replays must be younger than the 30 s time window, or the "
                 "time window alone refuses them and this proves nothing");
    base = seen(hport);
    cr_assert_geq(base, 0);
    replay(s, gport, rec, len, REPLAYS);
    cr_assert(poll_seen(hport, base + REPLAYS, 10000), "the restarted k0 did not read the replays");
    char st[16];
    fp_state(&d[0], "ghost", st, sizeof st);
    int live = fp_live(&d[0]);
    cr_assert(
        strcmp(st, "alive") != 0 && strcmp(st, "suspect") != 0 && live == 1,
        "replays from before k0's restart brought the dead ghost back (state \"%s\", live %d)", st,
        live);
    close(s);
}

static char faketime_file[64];

static void clock_fini(void)
{
    stop_all();
    if (faketime_file[0])
        unlink(faketime_file);
}

/* Replica i's view of k<j>: its generation into gen ("" when absent) and whether it is alive. */
static bool alive_gen(int i, int j, char *gen, size_t cap)
{
    static char out[1 << 16];
    char id[8], st[16];
    snprintf(id, sizeof id, "k%d", j);
    gen[0] = st[0] = 0;
    if (fp_cli_json(&d[i], "members", out, sizeof out) != 0)
        return false;
    fp_field(out, id, "generation", gen, cap);
    fp_field(out, id, "state", st, sizeof st);
    return strcmp(st, "alive") == 0;
}

typedef struct gen_wait {
    char *gen; /* k0's view of k1's generation, as last read */
    size_t cap;
    const char *old; /* the generation k1 had before its restart */
} gen_wait_t;

/* k0 sees k1 alive and k1 counts 2 live. */
static bool pair_converged(void *arg)
{
    const gen_wait_t *w = arg;
    return alive_gen(0, 1, w->gen, w->cap) && fp_live(&d[1]) == 2;
}

/* k0 sees k1 alive under another generation than the old one, and both count 2 live. */
static bool k1_back(void *arg)
{
    const gen_wait_t *w = arg;
    return alive_gen(0, 1, w->gen, w->cap) && strcmp(w->gen, w->old) != 0 && fp_live(&d[0]) == 2 &&
           fp_live(&d[1]) == 2;
}

/*
 * A restart across a backward clock step (issue #17 item 6): the generation comes from the wall
 * clock, so k1, restarted after its clock (5 s ahead) was set right, got a lower one, and every
 * view kept its old record (here, on the same address, kept alive by the new process's own acks)
 * and ignored the new process. The restarted member must come back under a generation strictly
 * greater than the one it had, seen alive by its peer, both counting 2.
 */
Test(restart, a_restart_across_a_backward_clock_step_gets_a_greater_generation, .fini = clock_fini)
{
    fp_temp_file(faketime_file, sizeof faketime_file, "faketime",
                 "+5s\n"); /* k1's clock runs 5 s ahead... */
    make_ring();
    char extra[1024];
    replica_config(0, 0, 0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_start(&d[0], LIMITS, extra), 0);
    int port0 = fp_bound_port(&d[0], "membership started");
    replica_config(1, 0, port0, extra, sizeof extra);
    fp_start_faked(&d[1], faketime_file, LIMITS, extra);
    int port1 = fp_bound_port(&d[1], "membership started");
    char before[32], now[32] = "";
    cr_assert(fp_poll(pair_converged, &(gen_wait_t){before, sizeof before, NULL}, 30000, 50),
              "the pair did not converge");

    /* ...until it dies and comes back on the same address (a container restarted in its pod)
     * with its clock set right: 5 s back */
    cr_assert_eq(tt_daemon_kill(&d[1], SIGKILL), -1);
    fp_write_file(faketime_file, "+0\n");
    replica_config(1, port1, port0, extra, sizeof extra);
    cr_assert_eq(tt_daemon_rewrite(&d[1], LIMITS, extra), 0);
    fp_start_faked(&d[1], faketime_file, NULL, NULL);
    cr_assert(fp_poll(k1_back, &(gen_wait_t){now, sizeof now, before}, 30000, 50),
              "k0 still holds k1's old generation %s (now %s): the restart was ignored", before,
              now);
    cr_assert_gt(strtoull(now, NULL, 10), strtoull(before, NULL, 10),
                 "the restarted k1's generation is not greater than the one it had");
}
