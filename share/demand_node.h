/*
 * demand_node: demand-aware division (demand.h) in a running daemon.
 *
 * Owns a demand core and moves things in and out of it, as share_node does for the share core:
 * the live members and the share core's divisor in, the payloads to and from the gossip port,
 * a timer every demand_interval, the engine's per-key hook, `fleet` and /metrics out.
 *
 * Two layers. demand_node_refresh / demand_node_receive / the hooks are pure apart from reading
 * the member table they are handed, so tests drive them without sockets. demand_node_attach is
 * the libuv glue: it subscribes to the membership shell, ticks the core every demand_interval
 * and sends through the `send` function it is given; the daemon passes an adapter over
 * mb_send_app and routes membership's APP payloads (mb_set_app_handler) to
 * demand_node_receive. Everything runs on the daemon's loop thread.
 */
#ifndef TT_SHARE_DEMAND_NODE_H
#define TT_SHARE_DEMAND_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "demand.h"
#include "share_node.h"

typedef struct demand_node demand_node_t;

/* Builds a node from shared_state.share (node_id, demand_interval, cold_share, demand_keys).
 * Returns 0, DEMAND_ECONFIG (err's path names the setting: `shared_state.share.demand_keys`) or
 * DEMAND_ENOMEM; err may be NULL. Free with demand_node_free (after demand_node_close, if it was
 * attached). */
int demand_node_new(demand_node_t **out, const cfg_share_t *cfg, tt_err_t *err);
void demand_node_free(demand_node_t *node);

demand_core_t *demand_node_core(demand_node_t *node);

/* Re-reads the member table (alive and suspect members count; self is always in) and the share
 * core's divisor at `now`. */
void demand_node_refresh(demand_node_t *node, const share_members_t *members, uint32_t divisor,
                         int64_t now);

/* A payload membership received from member `from` (authenticated by the seal). Returns 0 or
 * the core's error (counted in its counters; logged by the caller if it likes). */
int demand_node_receive(demand_node_t *node, const char *from, size_t from_len,
                        const uint8_t *bytes, size_t len, int64_t now);

/*
 * The daemon's glue: refreshes from `mb` and `share` now and on every membership event, ticks
 * the core every demand_interval (re-reading the divisor first), and hands each payload to
 * `send`. Returns 0 or a negative libuv code.
 */
int demand_node_attach(demand_node_t *node, uv_loop_t *loop, mb_t *mb, const share_node_t *share,
                       demand_emit_fn send, void *send_ctx);
/* Closes the timer; free the node once the loop has run the close. Membership must be closed
 * first (it has no unsubscribe). */
void demand_node_close(demand_node_t *node);

/*
 * The engine's hook for a demand-mode share limit, per key (ctx is the demand_node_t): counts
 * the arrival of `cost` and writes the limiter for the key's share (gov_share_ops_t's
 * key_limiter, in demand_node_ops). *armed is false while the
 * share store is unarmed (posture.fail decides). Returns 0 or a RA_E* code.
 */
int demand_node_limiter(void *ctx, const cfg_limit_t *limit, const char *key, size_t key_len,
                        int64_t cost, int64_t now, ra_limiter_t *out, bool *armed);

/* Overwrites the bounds of a share limit's fleet entry with demand mode's (demand_disclose) and
 * fills its demand fields (keys leased and owned, largest lease age, moving). */
void demand_node_fleet(const demand_node_t *node, const cfg_limit_t *limit, int64_t now,
                       gov_fleet_entry_t *out);

/* The engine's hooks in demand mode (ctx: the attached demand_node_t): the per-key limiter, and
 * fleet entries that are the share node's with demand_node_fleet over them. */
extern const gov_share_ops_t demand_node_ops;

/* Appends the demand gauges of every share limit among `limits`, and the core's counters, in
 * Prometheus text through `emit` (whole lines). */
void demand_node_metrics(const demand_node_t *node, const cfg_limit_t *limits, size_t n,
                         int64_t now, share_emit_fn emit, void *ctx);

#endif
