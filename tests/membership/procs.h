/*
 * Helpers for membership tests on real `tokentriage serve` replicas (prefix fp_): the ports a
 * replica bound, its CLI answers, its /metrics, and sealed datagrams from a peer played by the
 * test itself with the product's codec and seal.
 */
#ifndef TT_TESTS_MEMBERSHIP_PROCS_H
#define TT_TESTS_MEMBERSHIP_PROCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon.h"

/* The port a replica bound on 127.0.0.1, read from its last log line containing `after`, then
 * "127.0.0.1:" (replicas are given port 0, so no port is picked here and raced for). Asserts. */
int fp_bound_port(const tt_daemon_t *r, const char *after);

/* `tokentriage SUB --json` (members or fleet) against r; the output in out; the exit status. */
int fp_cli_json(const tt_daemon_t *r, const char *sub, char *out, size_t cap);

/* Field `key` of member `id`'s row in a members answer, into out ("" if absent; strings
 * without their quotes). */
void fp_field(const char *json, const char *id, const char *key, char *out, size_t cap);

/* The live count in r's members answer, or -1. */
int fp_live(const tt_daemon_t *r);

/* r's view of member `id`: its state into st ("" when absent or r did not answer). */
void fp_state(const tt_daemon_t *r, const char *id, char *st, size_t cap);

/*
 * The one wait of these tests: calls until(arg) at once, then every pause_ms and a last time at
 * the deadline, `ms` from now, until it returns true. True when it did; false at the deadline
 * (or at once when ms <= 0). No blind sleep stands in for a state: the caller names the state.
 */
bool fp_poll(bool (*until)(void *arg), void *arg, int ms, int pause_ms);

/* Polls until r's view of `id` is in state `want` ("alive", "dead", ...), for at most ms. */
bool fp_poll_state(const tt_daemon_t *r, const char *id, const char *want, int ms);

/* Polls /metrics on hport until the value after `name` is within [min, max], for at most ms.
 * Returns the last value read (-1: absent or unreachable); the last text scraped is left in
 * text when it is not NULL. */
long long fp_poll_metric(int hport, const char *name, long long min, long long max, int ms,
                         char *text, size_t cap);

/* GET /metrics on 127.0.0.1:port into out; 0 or -1. */
int fp_scrape(int port, char *out, size_t cap);

/* The value after `name` in a metrics text, or -1 when absent. */
long long fp_counter(const char *text, const char *name);

/* Scrapes port and reads `name` (-1 when absent or unreachable). */
long long fp_metric(int hport, const char *name);

/* A temporary file /tmp/tt-NAME-XXXXXX holding `text`; its path into path (cap bytes). Asserts. */
void fp_temp_file(char *path, size_t cap, const char *name, const char *text);

/* Replaces the contents of the file at path with `text`. Asserts. */
void fp_write_file(const char *path, const char *text);

/* A sealed replica's lines for tt_daemon_start's server_extra, into out: HTTP on a port the kernel
 * picks, node PREFIX<i>, gossip on 127.0.0.1:gport (0: the kernel's pick), seeded to
 * 127.0.0.1:seed (0: no seed), the keyring file `keyring`, cluster itest. */
void fp_replica_config(char *out, size_t cap, const char *prefix, int i, int gport, int seed,
                       const char *keyring);

/* Starts r (tt_daemon_start with limits and extra) under libfaketime, its wall-clock offset read
 * from `file` at every call (CLOCK_MONOTONIC left alone); with limits NULL, spawns it again on
 * its directory (tt_daemon_spawn). Asserts. */
void fp_start_faked(tt_daemon_t *r, const char *file, const char *limits, const char *extra);

/* Wall clock, ns since the epoch. */
int64_t fp_wall_ns(void);

/* A sealed GOSSIP datagram from `id` (generation gen, sequence seq, sent at sent_ns) carrying its
 * own alive record at addr 127.0.0.1:port; into out (room for SWIM_DATAGRAM_MAX). The length. */
size_t fp_datagram(uint8_t *out, const uint8_t *key, const char *label, const char *id,
                   uint64_t gen, uint64_t seq, int64_t sent_ns, uint16_t port);

#endif
