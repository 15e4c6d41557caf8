/*
 * Membership across real processes: eight `tokentriage serve` replicas gossiping on loopback
 * ports (sealed, one keyring), observed with `tokentriage members --json` as a user would.
 * Every wait polls for the expected state with a deadline.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

#define N 8
#define LIMITS                                                                                     \
    "    - id: team_rpm\n      attach: { level: team }\n      type: rpm\n      amount: 300\n"      \
    "      period: 1m\n"

static tt_daemon_t d[N];
static char keyring[64];

static void stop_all(void)
{
    for (int i = 0; i < N; i++)
        if (d[i].dir[0])
            tt_daemon_stop(&d[i]);
    unlink(keyring);
}

TestSuite(fleet, .fini = stop_all, .timeout = 120);

/* A port free for both UDP and TCP on loopback, as the kernel hands one out. */
static int free_port(void)
{
    for (int tries = 0; tries < 20; tries++) {
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof a;
        int u = socket(AF_INET, SOCK_DGRAM, 0);
        bind(u, (struct sockaddr *)&a, sizeof a);
        getsockname(u, (struct sockaddr *)&a, &len);
        int t = socket(AF_INET, SOCK_STREAM, 0);
        int ok = bind(t, (struct sockaddr *)&a, sizeof a) == 0;
        close(u);
        close(t);
        if (ok)
            return ntohs(a.sin_port);
    }
    return -1;
}

/* `tokentriage members --json` against replica i; the output in out. */
static int members_json(int i, char *out, size_t cap)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/cmd/tokentriage members -s %s --json 2>/dev/null", TT_BINARY_DIR,
             d[i].socket);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The state replica i's view gives replica `target`, copied into state ("" if absent). */
static void state_of(const char *json, int target, char *state, size_t cap)
{
    char needle[32];
    snprintf(needle, sizeof needle, "\"id\":\"r%d\"", target);
    state[0] = 0;
    const char *p = strstr(json, needle), *s;
    if (!p || !(s = strstr(p, "\"state\":\"")))
        return;
    s += strlen("\"state\":\"");
    size_t n = strcspn(s, "\"");
    snprintf(state, cap, "%.*s", (int)(n < cap ? n : cap - 1), s);
}

static bool alive[N];

/* True when every live replica sees `target` in `want` (for target < 0: all live alive). */
static bool everyone_sees(int target, const char *want)
{
    static char out[1 << 16];
    for (int i = 0; i < N; i++) {
        if (!alive[i])
            continue;
        if (members_json(i, out, sizeof out) != 0)
            return false;
        for (int j = 0; j < N; j++) {
            if (target >= 0 && j != target)
                continue;
            char st[16];
            state_of(out, j, st, sizeof st);
            if (strcmp(st, target >= 0 ? want : (alive[j] ? "alive" : st)) != 0)
                return false;
        }
        if (target < 0 && !strstr(out, "\"live\":8"))
            return false;
    }
    return true;
}

static bool poll_until(int target, const char *want, int ms)
{
    struct timespec pause = {0, 100 * 1000000L};
    for (long long deadline = tt_now_ms() + ms; tt_now_ms() < deadline; nanosleep(&pause, NULL))
        if (everyone_sees(target, want))
            return true;
    return everyone_sees(target, want);
}

Test(fleet, eight_replicas_converge_see_a_kill_as_dead_and_a_term_as_left)
{
    snprintf(keyring, sizeof keyring, "/tmp/tt-fleet-keys-XXXXXX");
    int fd = mkstemp(keyring);
    cr_assert_geq(fd, 0);
    const char *key = "# primary\nERERERERERERERERERERERERERERERERERERERERERE=\n";
    cr_assert_eq(write(fd, key, strlen(key)), (ssize_t)strlen(key));
    close(fd);
    /* the first replica needs a known port (the others' seed); the rest let the kernel pick */
    int port0 = free_port();
    cr_assert_gt(port0, 0);
    for (int i = 0; i < N; i++) {
        /* the shared_state section goes after the server lines; the seed list includes the
         * first replica itself */
        char extra[1024];
        snprintf(extra, sizeof extra,
                 "shared_state:\n  share:\n    node_id: r%d\n    bind: 127.0.0.1:%d\n"
                 "    seeds: [\"127.0.0.1:%d\"]\n    keyring_file: %s\n    cluster: itest\n",
                 i, i ? 0 : port0, port0, keyring);
        cr_assert_eq(tt_daemon_start(&d[i], LIMITS, extra), 0, "replica %d did not start", i);
        alive[i] = true;
    }
    cr_assert(poll_until(-1, NULL, 30000), "the eight replicas did not converge");

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
    int st = 0;
    struct timespec pause = {0, 10 * 1000000L};
    for (long long deadline = tt_now_ms() + 5000;
         waitpid(d[5].pid, &st, WNOHANG) == 0 && tt_now_ms() < deadline;)
        nanosleep(&pause, NULL);
    d[5].pid = 0;
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "serve exits 0 after a graceful leave");
}
