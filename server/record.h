/*
 * record: the decisions' inputs written to a bounded, rotating file (server.record), so that a
 * new configuration can be tried on real traffic before it is rolled out (`tokentriage simulate
 * --config NEW --traffic FILE`, cmd/traffic.c reads it back).
 *
 * What is kept of a decision: its time (the `now` the engine decided at, ns), its inputs and
 * what was answered (the verdict and the deciding limit), so that a replay can set what a new
 * config would do beside what was done. Every door is recorded the same way, through the door's
 * observer (server/door.h): a decide of the socket or HTTP is its subject and tokens; a gRPC
 * request its domain and descriptors (their entries, cost and own limit), decided again as one
 * request (gov_decide_domain) by the replay.
 *
 * A decision a Redis limit answers later is placed in the file's order when it is asked and
 * completed with the verdict it got when the answer comes: its head waits in memory with the
 * records after it (a flush writes up to the first record still waiting), and an entry of
 * SLOT_BYTES holds its place until then, at most REC_WAITING_MAX of them (the redis store's
 * in-flight bound per node is 4096). Past that, or when a file must rotate, or at the stop, a
 * record still waiting is written with the verdict `pending`, as every such record was before.
 *
 * Privacy: with hash_subjects (the default) every id (a descriptor's value too) is written as a
 * keyed hash, BLAKE2b-128 in hex, whose key is drawn at each start or derived from
 * server.record.hash_key_file: equal ids stay equal (what a replay needs), and without the key a
 * hash cannot be reversed by hashing guesses. Levels, entry keys and domains (the config's
 * names) are kept as they are.
 *
 * Bounds: no file grows past max_bytes (a record that could not fit a file alone is dropped and
 * counted, and so is a gRPC request whose domain is longer than any config can name); when the
 * next record would pass it, the file is renamed aside (file -> file.1 -> ... up to files - 1,
 * the oldest gone) and a new one begins with its own header. A start begins a new file the same
 * way. Records wait in memory (at most REC_PENDING_MAX bytes, beyond which they are dropped and
 * counted) and are written by rec_flush, on the daemon's tick: small appends of a few kilobytes,
 * synchronous on the loop.
 *
 * The file (msgpack, one value after another):
 *   header  {"tokentriage_traffic": 2, "hashed": bool, "sample": N, "node": str, "started": ns}
 *   record  {"t": ns, "s": {level: id, ...}, "n": tokens (absent: none), "v": verdict,
 *            "l": deciding limit ("" or absent: none)}
 *   or, a gRPC request:
 *           {"t": ns, "d": domain, "a": [{"s": {key: value, ...}, "n": cost, "u": unit and
 *            "r": requests_per_unit (its own limit; absent: none)}, ...], "v": verdict, "l": ...}
 * Version 1 (before gRPC requests were recorded) is read as well. sample N > 1 keeps the
 * decisions of one subject in N (chosen by the keyed hash of the whole subject, or of a gRPC
 * request's domain and entries), so a recorded subject's traffic is whole: per-subject limits
 * replay exactly, limits on coarser levels see the sampled subjects only.
 */
#ifndef TT_SERVER_RECORD_H
#define TT_SERVER_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "door.h"
#include "engine.h"
#include "tt_err.h"
#include "wire.h"

#define REC_VERSION 2
#define REC_PENDING_MAX (1024 * 1024)
#define REC_WAITING_MAX 4096 /* records waiting for their answer */
#define REC_KEY_BYTES 32

typedef struct rec rec_t;

typedef struct rec_stats {
    uint64_t records;      /* written or waiting */
    uint64_t dropped;      /* not kept: more waiting than REC_PENDING_MAX, or too large a file */
    uint64_t rotations;    /* files begun */
    uint64_t write_errors; /* writes the file refused (the records in them are lost) */
} rec_stats_t;

/*
 * Opens the recording per `cfg` (its file set), beginning a new file (the one there is rotated
 * aside). node names the replica in the header. Returns 0, or a negative code with err naming
 * the setting (server.record.file, server.record.hash_key_file) and what went wrong.
 */
int rec_open(rec_t **out, const cfg_record_t *cfg, const char *node, int64_t now, tt_err_t *err);

/* What rec_open checks before it writes anything, changing nothing: the key file (16 to 4096
 * bytes, readable), the file's directory (there, a directory, writable here), the file (absent
 * or a regular file). 0, or the code with err naming the setting and what is wrong: what
 * `validate --arm` reports (srv_preflight) in serve's words. */
int rec_check(const cfg_record_t *cfg, tt_err_t *err);

/* One decision asked (the door's observer, door.h): its inputs and its answer, or v NULL when
 * the engine answers later: then the token returned (0: none, the record is not kept or was
 * written `pending`) goes to rec_answered with the answer. Never fails: what cannot be kept is
 * counted in dropped. */
uint64_t rec_asked(rec_t *r, const door_decision_t *what, const door_verdict_t *v);

/* The later answer of token's decision: its verdict, or NULL when it ended in an error (not a
 * decision: its record goes). */
void rec_answered(rec_t *r, uint64_t token, const door_verdict_t *v);

/* Writes what waits. Returns 0, or -1 when the file refused a write (counted; the next flush
 * tries again with the next records). */
int rec_flush(rec_t *r);

void rec_stats(const rec_t *r, rec_stats_t *out);

/* The file written (server.record.file as it was at the start). */
const char *rec_path(const rec_t *r);

/* Flushes and closes. NULL is fine. */
void rec_close(rec_t *r);

/* ---- reading it back (simulate --traffic): pure, bytes in, every field checked ---------- */

/* One record, its strings pointing into the bytes read: a decide's subject (s.n > 0) and tokens
 * (GOV_NO_TOKENS when absent), or a gRPC request's domain and asks (n_asks > 0). verdict and
 * limit empty when absent. */
typedef struct rec_entry {
    int64_t t, tokens;
    gov_subject_t s;
    wire_str_t domain;
    gov_ask_t asks[GOV_ASKS_MAX];
    size_t n_asks;
    wire_str_t verdict, limit;
} rec_entry_t;

/* Reads the header at rd: 0 (with *hashed), or -1 with why: not a traffic file, or a version
 * this build does not read (1 and 2 it does). */
int rec_read_header(wire_reader_t *rd, bool *hashed, char *why, size_t size);

/* Reads the record at rd: 0, or -1 with why ("FIELD: what is wrong"): not a map, `t` not a time
 * (an int64 >= 0), `s` not 1..GOV_SUBJECT_MAX levels of 1..CFG_LEVEL_MAX bytes with ids of
 * 1..GOV_ID_MAX, `n` outside 0..GOV_TOKENS_MAX, `v` or `l` longer than CFG_ID_MAX, a field cut
 * short; a gRPC request's `d` not 1..CFG_RULE_DOMAIN_MAX bytes, `a` not 1..GOV_ASKS_MAX maps
 * each with `s` (1..GOV_SUBJECT_MAX entries, keys of 1..CFG_RULE_KEY_MAX bytes, values of at
 * most GOV_ID_MAX), `n` (0..GOV_TOKENS_MAX), and `u` (a unit of Envoy's API) with `r`
 * (0..2^32-1) or neither; both `s` and `d`, or neither. Fields it does not know are skipped (a
 * later version's). */
int rec_read_entry(wire_reader_t *rd, rec_entry_t *out, char *why, size_t size);

#endif
