/*
 * fleetctl: tests/share/fleet.c's real replicas, driven one line at a time, for the monitoring
 * tests (written in Python: they turn scrapes into promtool input and query a Prometheus).
 *
 * usage: fleetctl LIMITS_FILE   (LIMITS_FILE: the text under governance.limits)
 * Commands on stdin, one answer line each on stdout ("ok ..." or "err ..."):
 *   setup N [state] [redis=HOST:PORT]   N replicas in network namespaces (each HTTP listener on
 *                                       its own address, port 9464, so a scraper on the bridge
 *                                       reaches it); state: snapshots every second; redis: the
 *                                       shared_state.redis address   -> ok netns|loopback HUB|-
 *   start I | signal I SIGNUM | link I up|down
 *   ready I                             -> ok 1|0 (/readyz answers 200)
 *   info I                              -> ok NAME IP HTTP DIR SOCK NS|-
 *   quit                                (tears everything down; so does end of input)
 * The replicas die with this process (PR_SET_PDEATHSIG), and fleet_setup removes what a dead
 * run left behind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fleet.h"

static fleet_t fleet;
static char *limits;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Replica index from a command's argument, or -1 (and an err line). */
static int replica(const char *arg)
{
    int i = arg ? atoi(arg) : -1;
    if (!arg || i < 0 || i >= fleet.n) {
        printf("err no replica %s\n", arg ? arg : "(none)");
        return -1;
    }
    return i;
}

static void setup(char *args)
{
    char *tok = strtok(args, " ");
    int n = tok ? atoi(tok) : 0;
    bool state = false;
    const char *redis = NULL;
    while ((tok = strtok(NULL, " "))) {
        if (strcmp(tok, "state") == 0)
            state = true;
        else if (strncmp(tok, "redis=", 6) == 0)
            redis = tok + 6;
    }
    if (fleet_setup(&fleet, n) != 0) {
        printf("err setup %d failed\n", n);
        return;
    }
    fleet.state = state;
    if (redis)
        snprintf(fleet.shared_extra, sizeof(fleet.shared_extra),
                 "  redis: { address: \"%.64s\", timeout: 100ms }\n", redis);
    for (int i = 0; fleet.netns && i < n; i++) {
        /* through a copy: gcc's -Wrestrict (the Debug sanitizer build) cannot tell two members
         * of one replica apart when the replica is indexed */
        char ip[sizeof(fleet.r[i].ip)];
        memcpy(ip, fleet.r[i].ip, sizeof(ip));
        snprintf(fleet.r[i].http, sizeof(fleet.r[i].http), "%s:9464", ip);
    }
    printf("ok %s %s\n", fleet.netns ? "netns" : "loopback", fleet.netns ? fleet.hub : "-");
}

int main(int argc, char **argv)
{
    if (argc != 2 || !(limits = slurp(argv[1]))) {
        fprintf(stderr, "usage: fleetctl LIMITS_FILE\n");
        return 64;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    char line[512];
    while (fgets(line, sizeof(line), stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char *rest = strchr(line, ' ');
        if (rest)
            *rest++ = '\0';
        if (strcmp(line, "setup") == 0) {
            setup(rest ? rest : (char[]){""});
            continue;
        }
        char *a = rest ? strtok(rest, " ") : NULL, *b = a ? strtok(NULL, " ") : NULL;
        int i;
        if (strcmp(line, "quit") == 0) {
            break;
        } else if (strcmp(line, "start") == 0) {
            if ((i = replica(a)) >= 0)
                printf(fleet_start(&fleet, i, limits) == 0 ? "ok\n" : "err start\n");
        } else if (strcmp(line, "signal") == 0) {
            if ((i = replica(a)) >= 0) {
                fleet_signal(&fleet, i, b ? atoi(b) : SIGTERM);
                printf("ok\n");
            }
        } else if (strcmp(line, "link") == 0) {
            if ((i = replica(a)) >= 0)
                printf(fleet_link(&fleet, i, b && strcmp(b, "up") == 0) == 0 ? "ok\n"
                                                                             : "err link\n");
        } else if (strcmp(line, "ready") == 0) {
            if ((i = replica(a)) >= 0)
                printf("ok %d\n", fleet_ready(&fleet, i));
        } else if (strcmp(line, "info") == 0) {
            if ((i = replica(a)) >= 0) {
                const fleet_replica_t *r = &fleet.r[i];
                printf("ok %s %s %s %s %s %s\n", r->name, r->ip, r->http, r->dir, r->sock,
                       r->ns[0] ? r->ns : "-");
            }
        } else {
            printf("err unknown command %s\n", line);
        }
    }
    fleet_teardown(&fleet);
    printf("ok\n");
    return 0;
}
