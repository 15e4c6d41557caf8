/*
 * record: the decisions' inputs written to a bounded, rotating file (server.record), so that a
 * new configuration can be tried on real traffic before it is rolled out (`tokentriage simulate
 * --config NEW --traffic FILE`, cmd/traffic.c reads it back).
 *
 * What is kept of a decision: its time (the `now` the engine decided at, ns), its subject
 * (levels and ids), its tokens, and what was answered (the verdict and the deciding limit), so
 * that a replay can set what a new config would do beside what was done. Decisions of the socket
 * and HTTP doors are recorded; gRPC descriptors are not (their exact-level matching and costs
 * are another engine call, gov_decide_asks). A decision a Redis limit answers later is recorded
 * when it is asked, with the verdict `pending`.
 *
 * Privacy: with hash_subjects (the default) every id is written as a keyed hash, BLAKE2b-128 in
 * hex, whose key is drawn at each start or derived from server.record.hash_key_file: equal ids
 * stay equal (what a replay needs), and without the key a hash cannot be reversed by hashing
 * guesses. Levels (the config's names) are kept as they are.
 *
 * Bounds: no file grows past max_bytes (a record that could not fit a file alone is dropped and
 * counted); when the next record would pass it, the file is renamed aside (file -> file.1 ->
 * ... up to files - 1, the oldest gone) and a new one begins with its own header. A start begins
 * a new file the same way. Records wait in memory (at most REC_PENDING_MAX bytes, beyond which
 * they are dropped and counted) and are written by rec_flush, on the daemon's tick: small
 * appends of a few kilobytes, synchronous on the loop.
 *
 * The file (msgpack, one value after another):
 *   header  {"tokentriage_traffic": 1, "hashed": bool, "sample": N, "node": str, "started": ns}
 *   record  {"t": ns, "s": {level: id, ...}, "n": tokens (absent: none), "v": verdict,
 *            "l": deciding limit (absent: none)}
 * sample N > 1 keeps the decisions of one subject in N (chosen by the keyed hash of the whole
 * subject), so a recorded subject's traffic is whole: per-subject limits replay exactly, limits
 * on coarser levels see the sampled subjects only.
 */
#ifndef TT_SERVER_RECORD_H
#define TT_SERVER_RECORD_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "tt_err.h"
#include "wire.h"

#define REC_VERSION 1
#define REC_PENDING_MAX (1024 * 1024)
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

/* One decision's inputs and answer (res NULL: answered later). Never fails: what cannot be kept
 * is counted in dropped. */
void rec_decision(rec_t *r, int64_t now, const gov_subject_t *s, int64_t tokens,
                  const gov_result_t *res);

/* Writes what waits. Returns 0, or -1 when the file refused a write (counted; the next flush
 * tries again with the next records). */
int rec_flush(rec_t *r);

void rec_stats(const rec_t *r, rec_stats_t *out);

/* The file written (server.record.file as it was at the start). */
const char *rec_path(const rec_t *r);

/* Flushes and closes. NULL is fine. */
void rec_close(rec_t *r);

/* ---- reading it back (simulate --traffic): pure, bytes in, every field checked ---------- */

/* One record, its strings pointing into the bytes read. tokens GOV_NO_TOKENS when absent;
 * verdict and limit empty when absent. */
typedef struct rec_entry {
    int64_t t, tokens;
    gov_subject_t s;
    wire_str_t verdict, limit;
} rec_entry_t;

/* Reads the header at rd: 0 (with *hashed), or -1 with why: not a traffic file, or another
 * version. */
int rec_read_header(wire_reader_t *rd, bool *hashed, char *why, size_t size);

/* Reads the record at rd: 0, or -1 with why ("FIELD: what is wrong"): not a map, `t` not a time
 * (an int64 >= 0), `s` not 1..GOV_SUBJECT_MAX levels of 1..CFG_LEVEL_MAX bytes with ids of
 * 1..GOV_ID_MAX, `n` outside 0..GOV_TOKENS_MAX, `v` or `l` longer than CFG_ID_MAX, a field cut
 * short. Fields it does not know are skipped (a later version's). */
int rec_read_entry(wire_reader_t *rd, rec_entry_t *out, char *why, size_t size);

#endif
