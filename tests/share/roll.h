/*
 * roll: a rolling restart of a share fleet of real replicas under load, and the checker that
 * holds the fleet to what its replicas disclose. Shared by tests/share/test_roll.c (the suite)
 * and bench/fleet_roll.c (the figures at 64 and 128 replicas).
 *
 * The fleet (tests/share/fleet.h, on loopback): n `tokentriage serve` replicas with the shipped
 * DaemonSet's membership settings (sealed gossip, a state directory with a snapshot every 5 s,
 * partition_hold 60 s, join_timeout 10 s), static seeds or every replica a seed, and one share
 * limit, ROLL_AMOUNT a minute with burst ROLL_BURST (or the options'), posture.fail closed. Each
 * replica is asked `ask` times its share, paced by one thread over the decision sockets.
 *
 * The roll: after `steady_ms` of load, replica k gets SIGTERM at k x step_ms and is started
 * again (same node id, address and state directory) down_ms after it; then `settle_ms` more of
 * load. A second thread polls every replica's `fleet` and `members` answers every poll_ms.
 *
 * The checks, after the run:
 *  - windows: for every sliding window of 10 s and of 60 s (ending at each admission), the
 *    fleet's admissions against the bound the replicas disclosed within it: the largest
 *    burst_bound + sustained_bound x E / period among the replicas that reported
 *    `converged: true` (converged is the state in which a replica says its bound is the
 *    fleet's); a window in which none did is held to the largest bound any replica disclosed.
 *  - islands: a poll round in which two replicas both report `converged: true` while their
 *    views (the members alive or suspect in each) share no member.
 */
#ifndef TT_TESTS_ROLL_H
#define TT_TESTS_ROLL_H

#include <stdbool.h>
#include <stdint.h>

#define ROLL_LIMIT "fleet_rpm"
#define ROLL_AMOUNT 3200
#define ROLL_PERIOD_MS 60000
#define ROLL_BURST 64

typedef struct roll_options {
    int n;                 /* replicas, 2..FLEET_MAX */
    int seeds;             /* static seeds: replicas 0..seeds-1; 0: every replica is a seed */
    int step_ms;           /* one replica stopped every step_ms */
    int down_ms;           /* each one started again down_ms after its SIGTERM */
    int steady_ms;         /* load before the roll */
    int settle_ms;         /* load after the last restart */
    int poll_ms;           /* the poller's round */
    double ask;            /* each replica is asked ask x its share (amount / n) */
    bool verbose;          /* a line per poll round on stderr */
    int64_t amount, burst; /* the limit a minute; 0: ROLL_AMOUNT, ROLL_BURST */
    bool no_roll; /* steady load only, for steady_ms + settle_ms (the bench's burst runs) */
} roll_options_t;

/* The worst window of one length. */
typedef struct roll_window {
    int64_t e_ms;
    int64_t count;      /* admissions in the worst window (by count - bound) */
    double bound;       /* its bound */
    int64_t at_ms;      /* its end, from the start of the load */
    int64_t violations; /* windows (ends) above their bound */
    int64_t unbounded;  /* windows held to a non-converged bound (no converged replica in it) */
} roll_window_t;

typedef struct roll_result {
    int64_t asked, admitted;
    int64_t load_ms; /* how long the load ran */
    double
        admitted_of_ideal; /* admitted / (burst + amount x load / period): under 1, under-admits */
    roll_window_t win[2];  /* 10 s, 60 s */
    int64_t rounds;
    int64_t island_rounds; /* rounds with two converged replicas of disjoint views */
    int64_t island_first_ms, island_last_ms;
    int64_t island_admitted;   /* admissions from the first island round to the last */
    int64_t roll_ms;           /* first SIGTERM to the last replica armed and converged again */
    int64_t converged_ms;      /* after the roll: until every replica reported converged at n */
    double tx_roll, tx_steady; /* gossip datagram bytes sent per replica per second */
    int64_t down_max;          /* replicas down at once, at most */
    char failed[256];          /* the run could not be made (set-up), or "" */
} roll_result_t;

/* Runs the scenario and fills *out. Returns 0, or -1 with out->failed saying why it could not
 * run (the checks' verdicts are in the figures, for the caller to assert). */
int roll_run(const roll_options_t *o, roll_result_t *out);

/* Prints the figures on one line each to stderr, prefixed with `tag`. */
void roll_report(const char *tag, const roll_options_t *o, const roll_result_t *r);

#endif
