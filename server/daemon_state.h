/*
 * The daemon's state directory (SPEC §11): state/'s node wired to the daemon's logs and
 * /metrics. Kept beside daemon.c so that the daemon's life reads in one place.
 */
#ifndef TT_SERVER_DAEMON_STATE_H
#define TT_SERVER_DAEMON_STATE_H

#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "state.h"

/*
 * With server.state_dir set: opens the directory, restores its snapshot into `e` (armed with
 * *cfgp) and starts the interval snapshots; every outcome is logged and counted. *out stays
 * NULL when state is off. Returns 0, or -1 when out of memory. Never fails on bad state.
 */
int srv_state_open(st_node_t **out, uv_loop_t *loop, gov_engine_t *e, cfg_config_t *const *cfgp,
                   srv_metrics_t *metrics);

/* `fleet`'s snapshot age (srv_set_snapshot_age; ud is the st_node_t). */
int64_t srv_state_age_ms(void *ud, int64_t now);

#endif
