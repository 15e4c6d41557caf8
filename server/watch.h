/*
 * Files and directories the daemon reloads when they change (prefix srv_watch_): the config file
 * and the keyring file (SPEC §4 reload; issue 31 item 2), and any directory another part adds
 * (Envoy rate limit rule files, server.grpc_config_dir).
 *
 * What changed is decided by content, not by events: each entry has a fingerprint (FNV-1a 64 of
 * what it holds, read through symbolic links), taken when it is added and again after each
 * reload. An event only says "look now". Two sources say it:
 *
 *   - inotify (libuv's uv_fs_event) on the directory that holds the file, where a ConfigMap's
 *     update lands as a rename of `..data`, and on the directory its symbolic links lead to
 *     (re-resolved after each event: the kubelet removes the old version's directory);
 *   - a poll every `poll_ns`, for what inotify does not see: file systems that send no events
 *     (NFS, FUSE, some overlay setups), a directory replaced under a watch, and no watch at all
 *     where fs.inotify.max_user_watches or max_user_instances is spent.
 *
 * Either starts a debounce of `debounce_ns` (restarted by every further event), so a writer's
 * several steps (a truncate and a write, a rename and a removal) make one check. The check reads
 * every entry; the entries that differ take their new fingerprint, and each distinct callback
 * among them is called once. A file that changes back and forth between two checks is no
 * change. Nothing here reads a file more than once per check or holds its content: a keyring's
 * keys are hashed as they are read, never kept.
 *
 * Ownership: the watch borrows the loop; paths are copied. Everything runs on the loop's thread.
 */
#ifndef TT_SERVER_WATCH_H
#define TT_SERVER_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define SRV_WATCH_DEBOUNCE_NS (INT64_C(500) * 1000000) /* quiet time before a check */
#define SRV_WATCH_ENTRIES_MAX 16
#define SRV_WATCH_DIR_FILES_MAX 1024 /* files of a directory entry that count, by name order */
#define SRV_WATCH_FILE_BYTES_MAX                                                                   \
    (INT64_C(4) << 20) /* bytes of one file read for its fingerprint                               \
                        */

typedef struct srv_watch srv_watch_t;

/* An entry changed (`path` as it was added); called on the loop, after the debounce. */
typedef void (*srv_watch_fn)(void *ctx, const char *path);

typedef struct srv_watch_options {
    int64_t poll_ns;     /* > 0: the poll's period (server.config_poll) */
    int64_t debounce_ns; /* 0: SRV_WATCH_DEBOUNCE_NS */
} srv_watch_options_t;

/* A new watch with no entries, its timers on `loop`. 0, or -1 when out of memory. */
int srv_watch_new(srv_watch_t **out, uv_loop_t *loop, const srv_watch_options_t *o);

/*
 * The fingerprint of what `path` holds now: a file's bytes (through symbolic links; a fifo or
 * device is not read), or with `dir` the names and bytes of the directory's regular files (not
 * those whose name starts with '.': the kubelet's ..data, an editor's swap file), at most
 * SRV_WATCH_DIR_FILES_MAX of them. A path that cannot be read has a fingerprint too (of why),
 * so appearing and vanishing are changes.
 */
uint64_t srv_watch_fingerprint(const char *path, bool dir);

/*
 * Watches `path` (a file, or with `dir` a directory's files) and calls fn(ctx, path) after each
 * change. `baseline`: the fingerprint the caller's last read of the path saw (take it with
 * srv_watch_fingerprint before reading, so a change between the two is not lost); NULL takes
 * it now. Returns 0, or -1 (more than SRV_WATCH_ENTRIES_MAX entries, the path too long, out of
 * memory). A directory inotify cannot watch is logged once; the poll covers it.
 */
int srv_watch_add(srv_watch_t *w, const char *path, bool dir, const uint64_t *baseline,
                  srv_watch_fn fn, void *ctx);

/* Takes every entry's fingerprint as seen: after a reload that read the files (SIGHUP's), so
 * the watch does not reload again for what was just read. */
void srv_watch_sync(srv_watch_t *w);

/* What the watch has done so far: checks (debounces that ended in looking at the entries),
 * polls, and reads of an entry's bytes (the rest is stat). For tests, which wait for the next
 * check or poll rather than for time. */
typedef struct srv_watch_stats {
    uint64_t checks, polls, reads;
} srv_watch_stats_t;
srv_watch_stats_t srv_watch_stats(const srv_watch_t *w);

/* True while every directory that should be watched by inotify is. */
bool srv_watch_inotify(const srv_watch_t *w);

/* Appends the watch's families (Prometheus text) through emit. */
typedef void (*srv_watch_emit_fn)(void *ctx, const char *text);
void srv_watch_metrics(const srv_watch_t *w, srv_watch_emit_fn emit, void *ctx);

/* Stops the watch and closes its handles; free it once the loop has run the closes. NULL is
 * ignored. */
void srv_watch_close(srv_watch_t *w);
void srv_watch_free(srv_watch_t *w);

#endif
