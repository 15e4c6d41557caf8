/*
 * The daemon's state directory (SPEC §11): state/'s node wired to the daemon's logs and
 * /metrics. Kept beside daemon.c so that the daemon's life reads in one place.
 */
#ifndef TT_SERVER_DAEMON_STATE_H
#define TT_SERVER_DAEMON_STATE_H

#include "config.h"
#include "engine.h"
#include "mb.h"
#include "metrics.h"
#include "state.h"

/*
 * With server.state_dir set: opens the directory, restores its snapshot into `e` (armed with
 * *cfgp) and starts the interval snapshots; every outcome is logged and counted. *out stays
 * NULL when state is off. Returns 0, or -1 when out of memory. Never fails on bad state.
 */
int srv_state_open(st_node_t **out, uv_loop_t *loop, gov_engine_t *e, cfg_config_t *const *cfgp,
                   srv_metrics_t *metrics);

/*
 * The members membership last knew, kept beside the snapshot as the state directory's file
 * SRV_MEMBERS_FILE (docs/membership.md, "Restarts"), so that a restart rejoins the fleet it
 * left, not only the seeds. srv_members_open reads it into `mb` (before the loop runs: the join
 * dials them) and returns how many members it remembered (0 without a file, with state off or a
 * file that does not load, each logged); then it writes the file again whenever the live members
 * changed, at most every SRV_MEMBERS_EVERY_MS, on a libuv worker (an fsync never stalls the
 * loop). srv_members_stop stops the timer and, with `save` (at SIGTERM, before the leave; not
 * after a start that failed), writes the members of the moment on the loop, unless a write is
 * under way; free once the loop has ended.
 */
#define SRV_MEMBERS_FILE "members"
#define SRV_MEMBERS_EVERY_MS 5000
typedef struct srv_members srv_members_t;
int srv_members_open(srv_members_t **out, uv_loop_t *loop, st_node_t *state, mb_t *mb);
void srv_members_stop(srv_members_t *m, bool save);
void srv_members_free(srv_members_t *m);

/* `fleet`'s snapshot age (srv_set_snapshot_age; ud is the st_node_t). */
int64_t srv_state_age_ms(void *ud, int64_t now);

#endif
