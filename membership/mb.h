/*
 * mb: the membership shell. A thin libuv layer around the SWIM core (swim.h): one UDP socket
 * for datagrams, one TCP listener (same port) and short-lived TCP connections for push-pull,
 * one timer at the core's next deadline, and uv_getaddrinfo re-resolving the seeds on every
 * try. It decides nothing: the core does.
 *
 * Lifecycle: mb_start attaches to the caller's loop and starts joining (push-pull with a
 * seed; retried every second, re-resolving, until one answers or join_timeout passes, then
 * it runs solo and keeps trying the seeds at every push-pull round). mb_leave leaves
 * gracefully (SIGTERM) and calls back once peers have been told; mb_close closes the
 * handles and calls back when the memory may be freed (mb_free).
 */
#ifndef TT_MB_H
#define TT_MB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "swim.h"

typedef struct mb mb_t;

/* A subscriber sees every event of the core once, in order: SWIM_EV_UP, _DOWN, _LEFT, _UPDATE,
 * _LIVE_COUNT, _DUPLICATE. It may call back into mb_* from the handler (mb_set_meta); events
 * that call causes are handed out after the current one. The event is valid for the call. */
typedef void (*mb_event_fn)(void *ud, mb_t *mb, const swim_event_t *ev);
typedef void (*mb_done_fn)(void *ud, mb_t *mb);

#define MB_SUBSCRIBERS_MAX 8

/*
 * Starts membership for shared_state.share on `loop`: binds cfg->bind (UDP and TCP), loads
 * the keyring (none: plaintext, with a warning on stderr), and begins the join. The config
 * is copied. Returns 0 or a negative code with err's path naming the field (e.g.
 * "shared_state.share.bind").
 */
int mb_start(mb_t **out, uv_loop_t *loop, const cfg_share_t *cfg, tt_err_t *err);

/* Adds a subscriber (up to MB_SUBSCRIBERS_MAX). */
int mb_subscribe(mb_t *mb, mb_event_fn fn, void *ud);

/* The member table: index 0 is this node. Views are valid until the loop runs again; their
 * times are wall clock (ns since the epoch). */
size_t mb_member_count(const mb_t *mb);
int mb_member_get(const mb_t *mb, size_t i, swim_member_view_t *v);
/* Alive + suspect, self included: the share store's N. */
int mb_live_count(const mb_t *mb);
/* This node's Lifeguard health score, 0 (healthy) .. 7: its probes run score + 1 times slower. */
int mb_health(const mb_t *mb);
/* Another live process claims our node id (reported by a peer within the last minute): N is
 * short by one everywhere. Fills the other's generation and "ip:port" (addr may be NULL). */
bool mb_duplicate(const mb_t *mb, uint64_t *gen, char *addr, size_t cap);
/* Sets this node's metadata payload (<= SWIM_META_MAX bytes); gossiped with a new version. */
int mb_set_meta(mb_t *mb, const uint8_t *meta, size_t len);
/*
 * The members this node knew, to keep in its state directory so a restart finds the fleet it
 * left (the daemon writes and reads the file; swim_proto.h draws it). mb_known_save: this node's
 * live members now, into a new buffer (the caller frees it); 0 or SWIM_ENOMEM. mb_known_load:
 * remembers the members of such a file, written by this node (id and cluster label checked),
 * before the loop runs: the join dials them beside the seeds, and for a minute after the start
 * the members it does not find are looked for at their addresses. Returns how many, or a
 * negative code with err naming what was wrong (a bad file remembers nothing).
 * mb_known_missing: remembered members the table does not hold (the share store's gate), the
 * first `cap` of them into out (swim_known_missing).
 */
int mb_known_save(const mb_t *mb, uint8_t **out, size_t *len);
int mb_known_load(mb_t *mb, const uint8_t *bytes, size_t len, tt_err_t *err);
size_t mb_known_missing(const mb_t *mb, swim_known_t *out, size_t cap);
/* The addresses the seeds named at their last lookups, this node's own left out: the peers its
 * configuration expects (0 without seeds, or with seeds that name only this node, as a headless
 * Service does on a one-node cluster). A lookup that fails leaves the last count. */
uint64_t mb_seed_peers(const mb_t *mb);
/* True once a push-pull completed or a peer reached us; solo: join_timeout passed without. */
bool mb_joined(const mb_t *mb);
bool mb_solo(const mb_t *mb);
const swim_counters_t *mb_counters(const mb_t *mb);
/* The address peers dial, "ip:port". */
const char *mb_advertise(const mb_t *mb);

/*
 * Application payloads on the gossip port (the share store's demand reports and grants):
 * sealed, authenticated and replay-checked like every datagram. mb_send_app sends up to
 * SWIM_APP_MAX bytes to a live member by id (SWIM_EINVAL for an unknown, dead or left one);
 * the handler receives each payload with its sender's id, after the seal and the replay
 * window accepted it (bytes valid for the call). One handler; NULL removes it.
 */
typedef void (*mb_app_fn)(void *ud, mb_t *mb, const char *from_id, size_t from_len,
                          const uint8_t *payload, size_t len);
int mb_send_app(mb_t *mb, const char *to_id, size_t to_len, const uint8_t *payload, size_t len);
void mb_set_app_handler(mb_t *mb, mb_app_fn fn, void *ud);

/*
 * The keyring file, read again for a reload (SIGHUP): rotation without a restart, in the
 * reload's two steps. mb_keyring_prepare reads and parses `path` (the checks and messages of
 * the start) into *out and checks that this replica can take it, changing nothing: a replica
 * started plaintext stays plaintext, and one started sealed stays sealed (the daemon asks only
 * a sealed one whose keyring path did not change). mb_keyring_commit puts a prepared keyring in
 * use (the first key seals from now on); it cannot fail, and wipes *kr. mb_keyring_wipe zeroes
 * *kr (a prepared keyring the reload did not commit).
 */
typedef struct mb_keyring {
    uint8_t keys[SWIM_KEYRING_MAX][SWIM_KEY_BYTES];
    size_t n;
} mb_keyring_t;
int mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, tt_err_t *err);
void mb_keyring_commit(mb_t *mb, mb_keyring_t *kr);
void mb_keyring_wipe(mb_keyring_t *kr);

/* Writes the membership families in Prometheus text (tokentriage_members, _gossip_*): one
 * call of emit per line, newline included. The server's /metrics source relays them. */
void mb_metrics_write(const mb_t *mb, void (*emit)(void *ud, const char *line), void *ud);

/* Graceful leave: tells every live member, keeps gossiping for half a second, then calls
 * done (once). Datagrams are still answered (with the leave) until mb_close. */
void mb_leave(mb_t *mb, mb_done_fn done, void *ud);
/* Closes every handle; closed is called when mb may be freed with mb_free. */
void mb_close(mb_t *mb, mb_done_fn closed, void *ud);
void mb_free(mb_t *mb);

/* Parses "ip:port" / "[ip6]:port" (numeric only) into a sockaddr; 0 or -1. */
int mb_parse_addr(const char *s, struct sockaddr_storage *ss);
/* The same for an address a listener binds or advertises: 0, or SWIM_EINVAL with err naming
 * `field` ("\"localhost:7946\" is not a numeric ip:port"). mb_start reads bind and advertise
 * with it, the HTTP listener server.http, and srv_preflight all three before anything listens. */
int mb_want_addr(const char *s, const char *field, struct sockaddr_storage *ss, tt_err_t *err);

/* Reads and parses a keyring file (one base64 key a line; docs/membership.md) into *out: what
 * mb_start does with shared_state.share.keyring_file, for srv_preflight to check the file before
 * the daemon listens. 0, or a negative code with err naming the field, the file and the line.
 * The caller wipes *out (mb_keyring_wipe). */
int mb_keyring_read(const char *path, mb_keyring_t *out, tt_err_t *err);
/* Writes "ip:port" for a swim address. */
void mb_addr_format(const swim_addr_t *a, char *out, size_t cap);

#endif
