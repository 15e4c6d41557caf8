/*
 * State across restarts (SPEC §11), the daemon's side (prefix st_node_): the state directory,
 * its lock, the snapshot taken every interval from a forked child and once more at stop, and
 * the restore at start. The format is snap.h's.
 *
 * Nothing here blocks a start: a directory that cannot be made, opened or locked, a snapshot
 * that is missing, truncated, corrupt, of another version or written for another node, all
 * become an event (the daemon logs it) and a metric, and the daemon serves without that state.
 *
 * Threads: the loop's, and a libuv worker that only calls madvise on the table's memory (see
 * state.c). Ownership: the node borrows the loop, the engine and the config pointer
 * it is given for its whole life.
 */
#ifndef TT_STATE_STATE_H
#define TT_STATE_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "engine.h"
#include "snap.h"

#define ST_FILE "counters.snap"         /* the snapshot in the state directory */
#define ST_FILE_TMP "counters.snap.tmp" /* written aside, renamed over ST_FILE */
#define ST_LOCK "lock"                  /* flock'ed by the daemon that owns the directory */

typedef struct st_node st_node_t;

typedef enum st_event_kind {
    ST_EV_OPEN_FAILED = 0, /* the directory is unusable (err, detail): no state this run */
    ST_EV_RESTORED,        /* counts filled */
    ST_EV_RESTORE_FAILED,  /* err, detail; ST_EMISSING on a first start */
    ST_EV_DROPPED,         /* one limit of the snapshot that the armed config no longer has */
    ST_EV_SNAPSHOT,        /* a snapshot is in place: counters, bytes, took_ns, pause_ns */
    ST_EV_SNAPSHOT_FAILED, /* err, detail: the previous snapshot is still in place */
    ST_EV_NO_HUGE_PAGES,   /* detail: the kernel will not hold the counter table in huge pages,
                              so each fork copies its page tables (once per node) */
    ST_EV_OUT_OF_RANGE,    /* one limit of the snapshot whose counters held states its
                              algorithm cannot reach: limit, counters (not restored) */
    ST_EV_WARNING,         /* path, detail: read all the same, but an operator should know (a
                              snapshot others than the daemon could have written) */
} st_event_kind_t;

typedef struct st_event {
    st_event_kind_t kind;
    int err;            /* ST_E* when something failed */
    const char *path;   /* the file or directory concerned */
    const char *detail; /* what exactly (a field, a system error) */
    const char *limit;  /* ST_EV_DROPPED, _OUT_OF_RANGE: the limit's id in the snapshot */
    uint64_t counters;  /* snapshot: counters written; dropped, out of range: of that limit */
    uint64_t bytes;
    uint64_t restored, idle, dropped, refused, out_of_range; /* ST_EV_RESTORED */
    int64_t age_ns;       /* ST_EV_RESTORED: how old the snapshot was */
    int64_t took_ns;      /* snapshot: from the fork to the rename */
    int64_t pause_ns;     /* snapshot: how long the loop stood for the fork (wall clock) */
    int64_t pause_cpu_ns; /* the same in the loop thread's CPU time: the fork's own cost,
                             without the time the scheduler gave to others */
    bool at_stop;         /* snapshot taken in-process at stop */
} st_event_t;

typedef void (*st_event_fn)(void *ctx, const st_event_t *ev);

typedef struct st_options {
    const char *dir;          /* server.state_dir, not empty */
    int64_t interval_ns;      /* server.snapshot_interval; 0: only at stop */
    const cfg_share_t *share; /* the scope: node id and cluster label (may be absent) */
} st_options_t;

/*
 * Whether `dir` can be the state directory, changing nothing: it is a directory that
 * check_directory accepts (owned by root or this user, written by its owner alone) and this
 * user may write in, or it is missing and its parent lets this user make it. 0, or ST_EUNSAFE /
 * ST_EIO with the reason in `detail`. st_node_open runs it first; `validate --arm` runs it
 * through srv_preflight (as the daemon's user, it answers for the daemon).
 */
int st_dir_check(const char *dir, char *detail, size_t size);

/*
 * Makes the directory (mode 0700 when it is created), checks it (owned by root or the daemon's
 * user, written by its owner alone: ST_EUNSAFE otherwise), locks it and gets ready. Returns 0,
 * or ST_EIO only when out of memory; an unusable directory is reported through `ev` and leaves
 * a node that does nothing but count.
 */
int st_node_open(st_node_t **out, uv_loop_t *loop, const st_options_t *o, st_event_fn ev,
                 void *ctx);

/* Restores the snapshot into `e`, whose armed config is *cfg: counters of limits that still
 * exist (same counter identity, local or share) come back, others are dropped and reported. */
void st_node_restore(st_node_t *n, gov_engine_t *e, const cfg_config_t *cfg, int64_t now);

/* Starts the interval snapshots of `e`; *cfgp is read at each one (a reload swaps it). */
void st_node_start(st_node_t *n, gov_engine_t *e, cfg_config_t *const *cfgp);

/* Writes a snapshot now, in-process (the loop waits for it): what st_node_stop does; for
 * bench_state. Ends a forked one under way first. */
void st_node_snapshot_now(st_node_t *n);

/* Where the interval snapshot is: idle, a worker collapsing the counter table into huge pages
 * before the fork, or a forked child writing (until the loop has reaped it). */
typedef enum st_phase { ST_PHASE_IDLE = 0, ST_PHASE_COLLAPSING, ST_PHASE_WRITING } st_phase_t;
st_phase_t st_node_phase(const st_node_t *n);

/* At stop, once no decision can run any more: ends a snapshot under way, writes one in-process
 * when `snapshot` (not after a start that failed) and closes the timers. Free the node once the
 * loop has run the closes. NULL is ignored. */
void st_node_stop(st_node_t *n, bool snapshot, int64_t now);

void st_node_free(st_node_t *n);

/*
 * One more file of the state directory, for another part of the daemon (membership's last known
 * members): `name` is a plain name of 1 to ST_NAME_MAX bytes ([A-Za-z0-9._-], not first '.'),
 * neither the node's own (ST_FILE, ST_LOCK) nor an aside one (ending in ".tmp"); else
 * TT_ERR_INVAL. It is kept with the snapshot's discipline: opened relative to the directory's
 * descriptor, never through a symbolic link, a regular file only (a fifo is refused without
 * blocking); written aside (`name`.tmp, created anew), fsynced, renamed into place, the
 * directory fsynced, so a crash leaves the old content or the new one whole. Both block for
 * their I/O on the caller's thread; one writer per name at a time. Without a usable directory
 * (state off: n NULL, or refused) they fail with the reason the directory was refused.
 *
 * st_node_read_file: the whole file into *out (the caller frees it), at most `max` bytes.
 * 0, or ST_EMISSING (no such file yet), ST_EUNSAFE (not a regular file), ST_ETOOBIG, ST_EIO, with
 * err's path the name and its message what was wrong. A file others could have written is read
 * all the same and reported as ST_EV_WARNING (on the caller's thread).
 * st_node_write_file: 0, or ST_EIO (err says which step: create, write, fsync, rename); the
 * previous content then stays in place.
 */
#define ST_NAME_MAX 64
int st_node_read_file(st_node_t *n, const char *name, size_t max, uint8_t **out, size_t *len,
                      tt_err_t *err);
int st_node_write_file(st_node_t *n, const char *name, const void *data, size_t len, tt_err_t *err);

/* Age of the last snapshot known good (written here, or restored), -1 when there is none. */
int64_t st_node_age_ns(const st_node_t *n, int64_t now);

/* Appends the state families (Prometheus text) through `emit`, whole lines. */
typedef void (*st_emit_fn)(void *ctx, const char *text);
void st_node_metrics(const st_node_t *n, int64_t now, st_emit_fn emit, void *ctx);

#endif
