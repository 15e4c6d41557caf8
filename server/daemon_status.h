/*
 * The status page's shell (GET /status, status.h): the view gathered from the daemon's parts,
 * and the ring of recent rates sampled on the daemon's tick. Kept beside daemon.c, as
 * daemon_state.c is; the page itself is status.c's, pure.
 */
#ifndef TT_SERVER_DAEMON_STATUS_H
#define TT_SERVER_DAEMON_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "dispatch.h"
#include "engine.h"
#include "gov.h"
#include "srv.h"
#include "state.h"
#include "status.h"

/* What the page is made of: the daemon's parts, borrowed (each outlives the server), and what
 * the daemon counts for it. NULL hooks: the part is not there (no membership, no Redis, no
 * state directory). */
typedef struct srv_status_src {
    gov_engine_t *engine;
    const char *node, *version, *config; /* config: the file served, NULL: the default */
    srv_ready_fn ready;
    void *ready_ud;
    dispatch_members_fn members;
    void *members_ud;
    dispatch_doubt_fn doubt;
    void *doubt_ud;
    const rds_gov_t *redis;
    st_node_t *state;
    /* the configuration: 1 at the start, one more for every reload applied */
    uint64_t generation;
    int64_t applied_ns;
    uint64_t refused;
    status_rates_t rates; /* owned: srv_status_free */
} srv_status_src_t;

/* Samples the per-limit counts into the ring when a sample is due (STATUS_INTERVAL_NS). */
void srv_status_tick(srv_status_src_t *s, int64_t now);

/* The srv_status_fn (ud: the srv_status_src_t): the page at the wall clock's now. */
int srv_status_page(void *ud, tt_buf_t *body);

void srv_status_free(srv_status_src_t *s);

#endif
