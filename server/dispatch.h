/*
 * dispatch: the decision socket's request handler. Each decoded decision goes to the engine
 * through the door (door.h: decide, settle, charge, acquire), the rest is answered here (ping,
 * fleet, members, release), and every answer goes back through the stream, in order. The daemon
 * makes one and gives dispatch_handler() to the server.
 */
#ifndef TT_SERVER_DISPATCH_H
#define TT_SERVER_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "proto.h"
#include "stream.h"

struct gov_engine;
struct door;

typedef struct dispatch dispatch_t;

/* The `members` answer (membership/): returns how many rows there are, fills up to cap of them
 * when rows is not NULL (strings valid until the loop runs again) and sets *head (the live
 * count, and the unheard members a restart remembered that N counts: proto_members_head_t).
 * Without one the replica knows itself alone. */
typedef size_t (*dispatch_members_fn)(void *ud, proto_member_t *rows, size_t cap,
                                      proto_members_head_t *head);

/* A handler over engine (fleet, leases), door (decisions) and metrics (all the caller's,
 * outliving it). node names this replica in fleet and members, address is its socket (its own
 * members row), version goes in pong; the strings are copied. Returns 0 or -1 (out of memory). */
int dispatch_new(dispatch_t **out, struct gov_engine *engine, struct door *door,
                 srv_metrics_t *metrics, const char *node, const char *address,
                 const char *version);
const stream_handler_t *dispatch_handler(dispatch_t *d);
void dispatch_set_members(dispatch_t *d, dispatch_members_fn fn, void *ud);
/* Why the fleet's N may be wrong (a duplicate node id), for `fleet`; NULL when it is not. */
typedef const char *(*dispatch_doubt_fn)(void *ud);
void dispatch_set_doubt(dispatch_t *d, dispatch_doubt_fn fn, void *ud);
/* The age in ms of the last good snapshot of the counters (SPEC §11) at `now`, -1 for none;
 * `fleet` discloses it. Without one, fleet says -1. */
typedef int64_t (*dispatch_snapshot_age_fn)(void *ud, int64_t now);
void dispatch_set_snapshot_age(dispatch_t *d, dispatch_snapshot_age_fn fn, void *ud);
/* Appends the `fleet` answer at `now` (one msgpack map, as the socket answers `seq`); the HTTP
 * listener's /v1/fleet serves it too. 0 or -1 (out->failed). */
int dispatch_fleet(dispatch_t *d, tt_buf_t *out, uint64_t seq, int64_t now);
/* After every stream using the handler has been freed. */
void dispatch_free(dispatch_t *d);

#endif
