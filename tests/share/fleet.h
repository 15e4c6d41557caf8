/*
 * fleet: real tokentriage replicas for multi-process tests, run the way pods run.
 *
 * Each replica gets its own network namespace with its own address on one bridge (itself in a
 * namespace of its own, so the host's network is never touched), and every
 * replica binds the same gossip port; the test process stays in the root namespace and talks
 * to each replica over its unix socket (a filesystem path, reachable from any namespace). A
 * replica's link can be cut (its bridge-side veth set down) and healed. Where namespaces cannot
 * be made (no CAP_NET_ADMIN), the replicas run on loopback, each on an address of its own in
 * 127.0.0.0/8 (chosen from the test's pid, so concurrent runs never share one) with the same
 * ports, and cutting a link is not available; TT_FLEET_LOOPBACK=1 in the environment, or
 * fleet_setup_on, asks for loopback.
 *
 * Names carry the test's pid, so concurrent runs never collide; fleet_setup first removes what
 * a dead run (a pid no longer alive) left behind, and fleet_teardown removes everything this
 * run made. Replicas are spawned with PR_SET_PDEATHSIG, so they die with the test process.
 */
#ifndef TT_TESTS_FLEET_H
#define TT_TESTS_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tokentriage.h"

#define FLEET_MAX 128
#define FLEET_GOSSIP_PORT 7946
#define FLEET_HTTP_PORT 9464

typedef struct fleet_replica {
    pid_t pid;      /* 0 when not running */
    char name[16];  /* node id: r0, r1, ... */
    char ns[32];    /* network namespace; "" on loopback */
    char veth[24];  /* the bridge-side end of its link, in the hub */
    char ip[32];    /* its address */
    int port;       /* its gossip port */
    char dir[256];  /* its directory: config, socket, log */
    char sock[300]; /* its decision socket */
    char http[48];  /* its HTTP listener (inside its namespace) */
} fleet_replica_t;

typedef struct fleet {
    int n;
    bool netns;                 /* false: loopback fallback */
    char hub[32];               /* the namespace holding the bridge */
    char dir[256];              /* the run's temporary directory */
    char join_timeout[16];      /* shared_state.share.join_timeout written by fleet_start ("2s") */
    char share_extra[128];      /* more lines under shared_state.share ("    division: demand\n") */
    char shared_extra[160];     /* more sections under shared_state ("  redis: { ... }\n") */
    bool state;                 /* each replica keeps its counters in its directory's state/ */
    char snapshot_interval[16]; /* server.snapshot_interval with state ("1s") */
    int n_seeds; /* 0: every other replica is a seed (a headless Service); k: replicas 0..k-1,
                    the same list everywhere (a hand-written or systemd fleet's static seeds) */
    bool sealed; /* gossip sealed with a keyring of one key, made in the run's directory */
    fleet_replica_t r[FLEET_MAX];
} fleet_t;

/* Makes the namespaces, links and bridge for n replicas (or the loopback layout) and a
 * temporary directory. Returns 0 or -1 with a reason on stderr. */
int fleet_setup(fleet_t *f, int n);
/* The same, on loopback when `loopback` (no namespaces, whatever the environment says). */
int fleet_setup_on(fleet_t *f, int n, bool loopback);

/* Writes replica i's config (the server section, shared_state.share with every replica as a
 * seed, then `limits_yaml`: the text under governance.limits) and starts
 * `tokentriage serve -c` in its namespace. Returns 0 or -1. */
int fleet_start(fleet_t *f, int i, const char *limits_yaml);

/* Sends sig to replica i; for SIGKILL/SIGTERM waits for it to exit (bounded). */
void fleet_signal(fleet_t *f, int i, int sig);
/* Sends sig to replica i and returns at once; fleet_exited reaps it. */
void fleet_kill(fleet_t *f, int i, int sig);
/* True when replica i is not running (reaped now, or never started). */
bool fleet_exited(fleet_t *f, int i);

/* True when replica i's /readyz answers 200 (curl, inside its namespace). */
bool fleet_ready(fleet_t *f, int i);

/* GETs `path` from replica i's HTTP listener into buf (NUL-terminated). Returns 0 or -1. */
int fleet_http_get(fleet_t *f, int i, const char *path, char *buf, size_t size);

/* Cuts (up = false) or heals replica i's link. Returns 0, or -1 on loopback. */
int fleet_link(fleet_t *f, int i, bool up);

/* Stops every replica and removes what fleet_setup made. Safe to call twice. */
void fleet_teardown(fleet_t *f);

/* What a replica's `fleet` answer says about one limit. */
typedef struct fleet_row {
    int64_t n, local_share, sustained_bound, burst_bound, detect_within_s;
    bool converged;
    char state[16];
    /* demand mode (-1 otherwise) */
    int64_t keys_leased, keys_owned, largest_lease_age_ms, largest_lease;
    bool moving;
} fleet_row_t;

/* Asks the replica on `c` for its `fleet` answer and reads limit `id`'s row. Returns 0, or -1
 * when it did not answer or has no such limit. */
int fleet_query(tt_client_t *c, const char *id, fleet_row_t *out);

/* Asks the replica on `c` for its `members` answer: bit i of live[i / 64] set for each member
 * named r<i> that is alive or suspect in its view (itself included). Returns the live count it
 * reports, or -1. */
int fleet_members(tt_client_t *c, uint64_t live[FLEET_MAX / 64]);

/* Monotonic milliseconds, for deadlines. */
int64_t fleet_now_ms(void);

/* Runs a command (argv, NULL-terminated) and returns its exit status, or -1. */
int fleet_run(const char *const *argv);

#endif
