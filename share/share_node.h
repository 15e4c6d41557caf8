/*
 * share_node: the share store in a running daemon. It owns a share core (share.h), feeds it
 * the membership view, publishes this replica's divisor in its membership metadata, and
 * answers the engine (the gov_share_ops_t of engine/store.h), /readyz and /metrics.
 *
 * Two layers. share_node_refresh is pure apart from reading the member table it is handed
 * (the membership shell's in the daemon, a swim core's in the simulator): it rebuilds the view,
 * advances the core and says whether the metadata must be republished. share_node_attach is
 * the libuv glue for the daemon: it subscribes to the membership shell's events, refreshes on
 * each, publishes the metadata, and keeps a timer at the core's next deadline (a hold expiring,
 * the join timeout). Everything runs on the daemon's loop thread.
 */
#ifndef TT_SHARE_SHARE_NODE_H
#define TT_SHARE_SHARE_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "mb.h"
#include "share.h"
#include "store.h"
#include "swim.h"

typedef struct share_node share_node_t;

/* Builds a node from shared_state.share (partition_hold, join_timeout, whether there is any
 * seed to join) at `now`. Returns 0, SHARE_ECONFIG (err's path names the setting:
 * `shared_state.share.partition_hold`) or TT_ERR_NOMEM; err may be NULL. *out is freed with
 * share_node_free (after share_node_close, if it was attached). */
int share_node_new(share_node_t **out, const cfg_share_t *cfg, int64_t now, tt_err_t *err);

/* Renames err's path, a field of a core's configuration, to the shared_state.share setting it
 * comes from (n pairs in `from`: field, setting), so that a failure names what the operator
 * wrote. A path not in `from` stays. */
void share_node_name_setting(tt_err_t *err, const char *const (*from)[2], size_t n);
void share_node_free(share_node_t *node);

/* A member table to read: `get` fills member i of `count` (0 is self); views are borrowed for
 * the duration of the refresh. `joined`: membership has joined, or has gone solo. */
typedef struct share_members {
    const void *ctx;
    size_t count;
    int (*get)(const void *ctx, size_t i, swim_member_view_t *v);
    bool joined;
    uint32_t unheard; /* members known before a restart the table does not hold (share.h) */
} share_members_t;

/*
 * Re-reads the view at `now` and advances the core. `left_events` is how many SWIM_EV_LEFT
 * events membership reported since the last refresh. Returns 1 when this replica's metadata
 * payload is to be published now (share_node_meta), else 0: a new state at once, a new divisor
 * once it has held for SHARE_NODE_PUBLISH_HOLD_NS (refresh again at share_node_deadline), and
 * not at all when it went back meanwhile.
 */
#define SHARE_NODE_PUBLISH_HOLD_NS (INT64_C(500) * 1000000)
int share_node_refresh(share_node_t *node, const share_members_t *members, size_t left_events,
                       int64_t now);

/* A restart with state: this replica knew `members` peers when it stopped (share_remember). Call
 * before share_node_attach. */
void share_node_remember(share_node_t *node, uint32_t members, int64_t now);

/* This replica's metadata payload, SHARE_META_LEN bytes (share.h documents the layout). */
const uint8_t *share_node_meta(const share_node_t *node);

/* When share_node_refresh must run again with no membership event, or INT64_MAX. */
int64_t share_node_deadline(const share_node_t *node);

const share_core_t *share_node_core(const share_node_t *node);

/* The membership shell's live table as the core's member view (borrowed: valid until the next
 * membership event). Shared by every share-side node that reads `mb`. */
share_members_t share_node_members(const mb_t *mb);

/* The daemon's glue: subscribes to `mb`, refreshes now and on every membership event and
 * deadline, publishes the metadata with mb_set_meta. Returns 0 or a negative code. */
int share_node_attach(share_node_t *node, uv_loop_t *loop, mb_t *mb);
/* Closes the deadline timer; free the node once the loop has run the close. Membership must be
 * closed first (it has no unsubscribe). */
void share_node_close(share_node_t *node);

/* The engine's hooks; ctx is the share_node_t. Install with gov_engine_set_share. */
extern const gov_share_ops_t share_node_ops;

/* /readyz: true once the share store is armed; otherwise *why says why not. */
bool share_node_ready(const share_node_t *node, const char **why);

/* Appends the share gauges of every share limit among `limits` (Prometheus text) through
 * `emit`, which receives whole lines. */
typedef void (*share_emit_fn)(void *ctx, const char *text);
void share_node_metrics(share_node_t *node, const cfg_limit_t *limits, size_t n, share_emit_fn emit,
                        void *ctx);

#endif
