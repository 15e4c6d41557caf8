/*
 * share_node: the share store in a running daemon. It owns a share core (share.h), feeds it
 * the membership view, publishes this replica's divisor in its membership metadata, and
 * answers the engine (the gov_share_ops_t of engine/store.h), /readyz and /metrics.
 *
 * Membership is read through the swim core (membership/swim.h): the member table, the joined
 * flag and the "left" events. The caller (the daemon's membership shell) calls
 * share_node_refresh after every membership event, and share_node_deadline says when to call
 * it again without one (a hold expiring, the join timeout). Everything here runs on the
 * daemon's loop thread.
 */
#ifndef TT_SHARE_NODE_H
#define TT_SHARE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "share.h"
#include "store.h"
#include "swim.h"

typedef struct share_node share_node_t;

/* Builds a node from shared_state.share (partition_hold, join_timeout, whether there is any
 * seed to join) at `now`. Returns 0, SHARE_ECONFIG or -ENOMEM; *out is freed with
 * share_node_free. */
int share_node_new(share_node_t **out, const cfg_share_t *cfg, int64_t now);
void share_node_free(share_node_t *node);

/*
 * Re-reads the view from `swim` (members, states, metadata, joined) at `now`, advances the
 * core, and when this replica's divisor or state changed, sets its metadata in `swim`.
 * `left_events` is how many SWIM_EV_LEFT events the caller saw since the last call.
 * Returns 0 or a negative swim error from setting the metadata.
 */
int share_node_refresh(share_node_t *node, swim_core_t *swim, size_t left_events, int64_t now);

/* When share_node_refresh must run again with no membership event, or INT64_MAX. */
int64_t share_node_deadline(const share_node_t *node);

const share_core_t *share_node_core(const share_node_t *node);

/* The engine's hooks; ctx is the share_node_t. Install with gov_engine_set_share. */
extern const gov_share_ops_t share_node_ops;

/* /readyz: true once the share store is armed; otherwise *why says why not. */
bool share_node_ready(const share_node_t *node, const char **why);

/* Appends the share gauges of every share limit among `limits` (Prometheus text) through
 * `emit`, which receives whole lines. */
typedef void (*share_emit_fn)(void *ctx, const char *text);
void share_node_metrics(const share_node_t *node, const cfg_limit_t *limits, size_t n,
                        share_emit_fn emit, void *ctx);

#endif
