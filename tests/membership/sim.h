/*
 * sim: a deterministic network and clock for many swim cores in one process.
 *
 * The simulator plays the libuv shell for every node: it drains each core's outbox into a
 * virtual network and calls swim_tick at each core's next deadline, jumping the virtual clock
 * from one event to the next (no sleeps, no wall clock). The network is seeded: loss,
 * duplication, a random delay per datagram (which reorders), one-way cuts between nodes,
 * partitions (groups that cannot talk), slow nodes (what
 * they receive is read late, their timers run on time), paused nodes (their datagrams wait, their
 * timers stall, like a stopped process) and killed nodes. Push-pull runs as a request and a reply
 * over the same links, failing like a TCP connect when either direction is cut.
 *
 * Same seed, same trace: every random choice comes from the simulator's own PRNG or from
 * the cores' seeded PRNGs, and simultaneous events are ordered by insertion. sim_trace()
 * hashes every delivery so a test can compare two runs.
 */
#ifndef TT_SIM_H
#define TT_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "swim.h"

#define SIM_S INT64_C(1000000000)
#define SIM_MS INT64_C(1000000)

typedef struct sim sim_t;

/* Called for every event a node's core reports (after the call that produced it). */
typedef void (*sim_event_fn)(void *ud, sim_t *s, int node, const swim_event_t *ev);

typedef struct sim_opts {
    uint64_t seed;
    double loss;                  /* per datagram, every link */
    double dup;                   /* probability a datagram arrives twice */
    int64_t delay_min, delay_max; /* uniform per datagram: reorders */
    bool sealed;                  /* give every node a keyring (one key, label "sim") */
    bool seeds_all;               /* seeds resolve to any node's address (headless DNS) */
    sim_event_fn on_event;
    void *ud;
} sim_opts_t;

void sim_opts_default(sim_opts_t *o);
sim_t *sim_new(const sim_opts_t *o);
void sim_free(sim_t *s);

/* Starts a node named "n<i>" (i = its index) and returns the index; it joins via node
 * `seed` (push-pull) unless seed < 0. */
int sim_add(sim_t *s, int seed);
/* Starts n nodes joining through node 0. */
void sim_add_many(sim_t *s, int n);
/* Kills a node (SIGKILL): it stops answering at once. */
void sim_kill(sim_t *s, int i);
/* Restarts a killed or live node: same id, new generation, new address; joins via seed. */
void sim_restart(sim_t *s, int i, int seed);
/* The same on the node's own address (a process restarted on its host, a static seed). */
void sim_restart_in_place(sim_t *s, int i, int seed);
/* Graceful leave; the process exits half a second later. */
void sim_leave(sim_t *s, int i);
/* Pauses a node until now + d. */
void sim_pause(sim_t *s, int i, int64_t d);
/* A slow member (a CPU-starved process): every datagram it receives from now on is read d
 * late, while its own timers still fire on time; d 0 ends it. */
void sim_lag(sim_t *s, int i, int64_t d);
/* Partition group of a node: nodes in different groups cannot talk. All start in 0. */
void sim_group(sim_t *s, int i, int g);
/* One-way cut: datagrams from -> to are lost (on) or flow again (off). */
void sim_cut(sim_t *s, int from, int to, bool on);
void sim_set_loss(sim_t *s, double loss);

/* Runs the network until the virtual clock reaches t (absolute). */
void sim_run_until(sim_t *s, int64_t t);
/* Runs until pred holds (checked after each event) or the deadline passes; true if held. */
bool sim_run_while_not(sim_t *s, int64_t deadline, bool (*pred)(sim_t *s, void *arg), void *arg);
int64_t sim_now(const sim_t *s);
int sim_size(const sim_t *s);
bool sim_up(const sim_t *s, int i);
swim_core_t *sim_core(sim_t *s, int i);
/* The state observer sees target in; -1 if it does not know it. */
int sim_state(sim_t *s, int observer, int target);
/* True when every live node sees exactly the live nodes alive (and nothing else live). */
bool sim_converged(sim_t *s, void *unused);
uint64_t sim_trace(const sim_t *s);
/* Bytes sent by node i over UDP (and push-pull), since start. */
uint64_t sim_tx_bytes(const sim_t *s, int i);
uint64_t sim_datagrams(const sim_t *s);

#endif
