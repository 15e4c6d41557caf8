/*
 * The state directory, in the daemon.
 *
 * Taking a snapshot: fork, as Redis's BGSAVE does. The child sees the counter table frozen at
 * the instant of the fork (the kernel copies a page only when the parent writes it), walks it
 * with gov_engine_each_counter, writes the file aside, fsyncs it, renames it over the last one
 * and fsyncs the directory, then exits with its result in a shared page. The loop stands still
 * only for the fork itself: the kernel copies the page tables, one entry per 4 KiB page, about
 * 2.5 ms for the 60 MB of a million counters on our VM, against the 1 ms SPEC §11 allows. The
 * alternative, a copy of the table in slices on the loop, would need the table to hold still
 * between slices (reclamation shifts keys backwards, growth moves them to a new array), which
 * would reach into the table's every mutation; fork needs nothing from it.
 *
 * So before each fork a libuv worker asks the kernel to hold the table's big memory (its slot
 * arrays and full key blocks, gov_engine_regions) in transparent huge pages (madvise
 * MADV_COLLAPSE, Linux 6.1): the fork then copies one entry per 2 MiB there, and stops the loop
 * for about 0.3 ms at a million counters. It has to be asked every time: the parent's first
 * write to a huge page the child still shares splits it back into 4 KiB entries. The collapse
 * copies each split 2 MiB into a new huge page (about 0.35 ms of the worker's CPU each); a
 * decision that touches the 2 MiB being copied waits for that copy. Where the kernel cannot (no
 * THP, or THP disabled for the process: probed once at start) the event says so and the forks
 * cost what they did. Tables whose slot array is under 2 MiB (below about 50,000 counters) skip
 * the worker: their fork is short as it is.
 *
 * The child may only do what is safe after a fork in a process that has threads (libuv's pool):
 * no allocation, no stdio, no locks. The encoder writes into a buffer allocated at open, the
 * CRC tables are built at open, the paths are fixed names under the directory's descriptor.
 * Signals are blocked across the fork so no handler of the parent (libuv's writes to its signal
 * pipe) runs in the child; the child resets them, asks to die with its parent and closes every
 * descriptor but the directory's, so a parent killed mid-snapshot leaves no process holding its
 * sockets or its lock.
 *
 * At stop the snapshot is written in-process, after the server has stopped answering: nothing
 * decided before the stop is forgotten.
 */
#define _GNU_SOURCE
#include "state.h"
#include "tt_clock.h"
#include "tt_io.h"
#include "tt_path.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BUF_SIZE ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define POLL_MS 20 /* how often a running child is looked at */

/* What a writer found, in a page the child shares with the parent. */
typedef struct st_result {
    int rc;            /* 0 or ST_E* */
    int sys_errno;     /* errno of the step that failed */
    const char *stage; /* a static string: the same address in both processes */
    uint64_t counters, bytes;
    int64_t done_mono_ns;
} st_result_t;

/* The ranges a worker collapses before a fork, read on the loop (uv_queue_work orders the two). */
#define REGIONS_MAX 256 /* the slot arrays and 508 MB of keys */

typedef struct st_collapse {
    uv_work_t req;
    void *addr[REGIONS_MAX];
    size_t len[REGIONS_MAX], n;
} st_collapse_t;

struct st_node {
    uv_loop_t *loop;
    uv_timer_t interval, poll;
    bool timers;
    st_collapse_t collapse;
    bool collapsing, huge_pages; /* huge_pages: this process may collapse (probed at start) */
    st_event_fn ev;
    void *ctx;
    char dir[CFG_PATH_MAX + 1];
    char file[CFG_PATH_MAX + 32];
    int dirfd, lockfd; /* -1 when the directory is unusable */
    int64_t interval_ns;
    char scope[ST_SCOPE_MAX + 1];
    size_t scope_len;
    uint64_t fingerprint;
    uint8_t *buf;
    st_result_t *shared;
    gov_engine_t *engine;
    cfg_config_t *const *cfgp;
    pid_t parent, child;
    int64_t child_wall_ns, child_mono_ns, child_pause_ns, child_pause_cpu_ns;
    /* disclosure */
    int open_err, restore_err;
    uint64_t restored, idle, dropped, refused, out_of_range;
    int64_t last_good_ns; /* written_ns of the last good snapshot, 0: none */
    uint64_t snapshots, failures[ST_REASONS], skipped;
    uint64_t last_counters, last_bytes;
    int64_t last_took_ns, last_pause_ns, max_pause_ns;
};

static int64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void emit(st_node_t *n, st_event_t ev)
{
    if (n->ev)
        n->ev(n->ctx, &ev);
}

/* ---- open --------------------------------------------------------------------------------------
 */

static void open_failed(st_node_t *n, int err, const char *detail)
{
    n->open_err = err;
    if (n->lockfd >= 0)
        close(n->lockfd);
    if (n->dirfd >= 0)
        close(n->dirfd);
    n->lockfd = n->dirfd = -1;
    emit(n, (st_event_t){.kind = ST_EV_OPEN_FAILED, .err = err, .path = n->dir, .detail = detail});
}

/* open_failed for a system call that failed: `what` and errno. */
static void open_failed_errno(st_node_t *n, int err, const char *what)
{
    char detail[160];
    snprintf(detail, sizeof(detail), "%s: %s", what, strerror(errno));
    open_failed(n, err, detail);
}

/* What a name in the directory is, when it is no regular file. */
static const char *file_kind(mode_t m)
{
    return S_ISREG(m)                 ? "a regular file"
           : S_ISLNK(m)               ? "a symbolic link"
           : S_ISFIFO(m)              ? "a fifo"
           : S_ISDIR(m)               ? "a directory"
           : S_ISSOCK(m)              ? "a socket"
           : S_ISCHR(m) || S_ISBLK(m) ? "a device"
                                      : "of an unknown type";
}

/*
 * Opens `name` in the state directory: relative to its descriptor, never through a symbolic link
 * (O_NOFOLLOW), so whoever could put a name in the directory cannot make the daemon read, write
 * or create anything elsewhere; and a regular file only, seen without blocking (O_NONBLOCK, then
 * fstat), as the config loader does: opened for reading, a fifo would wait for a writer, and
 * bad state never blocks a start. Returns the descriptor (*sb filled), or ST_EMISSING (no such
 * name), ST_EUNSAFE (a symbolic link, a fifo, a directory, ...; what it is in `detail`) or
 * ST_EIO (the system error in `detail`, errno kept).
 */
static int open_in(const st_node_t *n, const char *name, int flags, struct stat *sb, char *detail,
                   size_t size)
{
    int fd = openat(n->dirfd, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        struct stat lsb;
        if (e == ENOENT)
            return ST_EMISSING;
        if (fstatat(n->dirfd, name, &lsb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(lsb.st_mode)) {
            snprintf(detail, size, "not a regular file (%s)", file_kind(lsb.st_mode));
            return ST_EUNSAFE;
        }
        snprintf(detail, size, "%s", strerror(e));
        errno = e;
        return ST_EIO;
    }
    if (fstat(fd, sb) != 0) {
        int e = errno;
        snprintf(detail, size, "fstat: %s", strerror(e));
        close(fd);
        errno = e;
        return ST_EIO;
    }
    if (!S_ISREG(sb->st_mode)) {
        snprintf(detail, size, "not a regular file (%s)", file_kind(sb->st_mode));
        close(fd);
        return ST_EUNSAFE;
    }
    return fd;
}

/*
 * The directory may be owned by root or by the daemon's own user, and written by its owner
 * alone: as OpenSSH refuses a key file or an authorized_keys others may write, since anyone who
 * can write the directory can replace the snapshot (a fresh budget for everyone, or a crafted
 * one) or plant names in it. 0 or ST_EUNSAFE with the reason in `detail`.
 */
static int check_directory(const struct stat *sb, char *detail, size_t size)
{
    uid_t me = geteuid();
    if (sb->st_uid != me && sb->st_uid != 0) {
        snprintf(detail, size,
                 "owned by uid %u; only root or the daemon's own user (uid %u) may own it",
                 (unsigned)sb->st_uid, (unsigned)me);
        return ST_EUNSAFE;
    }
    mode_t w = sb->st_mode & (S_IWGRP | S_IWOTH);
    if (w) {
        snprintf(detail, size,
                 "writable by %s (mode %04o); only its owner may write it (chmod go-w)",
                 w == S_IWOTH   ? "every user"
                 : w == S_IWGRP ? "its group"
                                : "its group and every user",
                 (unsigned)(sb->st_mode & 07777));
        return ST_EUNSAFE;
    }
    return 0;
}

int st_dir_check(const char *dir, char *detail, size_t size)
{
    struct stat sb;
    if (stat(dir, &sb) != 0) {
        if (errno != ENOENT) {
            snprintf(detail, size, "cannot read the directory: %s", strerror(errno));
            return ST_EIO;
        }
        /* st_node_open makes it, one level: its parent must be there and writable */
        char parent[CFG_PATH_MAX + 1];
        const char *why = tt_path_cannot_make(dir, parent, sizeof(parent));
        if (why) {
            snprintf(detail, size, "cannot make the directory: %s: %s", parent, why);
            return ST_EIO;
        }
        return 0;
    }
    if (!S_ISDIR(sb.st_mode)) {
        snprintf(detail, size, "not a directory (%s)", file_kind(sb.st_mode));
        return ST_EIO; /* as opening it would fail: ENOTDIR */
    }
    int rc = check_directory(&sb, detail, size);
    if (rc)
        return rc;
    if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0) {
        snprintf(detail, size, "cannot write in it: %s", strerror(errno));
        return ST_EIO;
    }
    return 0;
}

int st_node_open(st_node_t **out, uv_loop_t *loop, const st_options_t *o, st_event_fn ev, void *ctx)
{
    st_node_t *n = calloc(1, sizeof(*n));
    if (!n)
        return ST_EIO;
    n->buf = malloc(BUF_SIZE);
    n->shared =
        mmap(NULL, sizeof(st_result_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!n->buf || n->shared == MAP_FAILED) {
        free(n->buf);
        free(n);
        return ST_EIO;
    }
    n->loop = loop;
    n->ev = ev;
    n->ctx = ctx;
    n->dirfd = n->lockfd = -1;
    n->collapse.req.data = n;
    n->interval_ns = o->interval_ns;
    n->parent = getpid();
    snprintf(n->dir, sizeof(n->dir), "%s", o->dir);
    snprintf(n->file, sizeof(n->file), "%s/%s", o->dir, ST_FILE);
    int len = snprintf(n->scope, sizeof(n->scope), "node=%s cluster=%s",
                       o->share && o->share->present ? o->share->node_id : "",
                       o->share && o->share->present ? o->share->cluster : "");
    n->scope_len = len < 0 ? 0 : (size_t)len < sizeof(n->scope) ? (size_t)len : ST_SCOPE_MAX;
    n->fingerprint = st_fingerprint(n->scope, n->scope_len);
    (void)st_crc32c(0, "", 0); /* builds the tables here, never in a child */
    uv_timer_init(loop, &n->interval);
    uv_timer_init(loop, &n->poll);
    n->interval.data = n->poll.data = n;
    n->timers = true;
    *out = n;

    /* The directory's own path is the administrator's (server.state_dir) and may be a symbolic
     * link; what it leads to is checked once it is open, and every name in it is opened
     * relative to that descriptor. */
    char detail[200], what[240];
    int rc = st_dir_check(n->dir, detail, sizeof(detail)); /* what validate --arm checks too */
    if (rc) {
        open_failed(n, rc, detail);
        return 0;
    }
    if (mkdir(n->dir, 0700) != 0 && errno != EEXIST) {
        open_failed_errno(n, ST_EIO, "cannot make the directory");
        return 0;
    }
    if ((n->dirfd = open(n->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        open_failed_errno(n, ST_EIO, "cannot open the directory");
        return 0;
    }
    struct stat sb;
    if (fstat(n->dirfd, &sb) != 0) {
        open_failed_errno(n, ST_EIO, "cannot read the directory's owner and mode");
        return 0;
    }
    if ((rc = check_directory(&sb, detail, sizeof(detail))) != 0) {
        open_failed(n, rc, detail);
        return 0;
    }
    if ((rc = open_in(n, ST_LOCK, O_RDWR | O_CREAT, &sb, detail, sizeof(detail))) < 0) {
        snprintf(what, sizeof(what), "%s: %s%s", ST_LOCK, detail,
                 rc == ST_EIO ? " (is the directory writable?)" : "");
        open_failed(n, rc, what);
        return 0;
    }
    n->lockfd = rc;
    if (flock(n->lockfd, LOCK_EX | LOCK_NB) != 0) {
        open_failed_errno(n, errno == EWOULDBLOCK ? ST_ELOCKED : ST_EIO,
                          "another daemon holds the lock; running without state");
        return 0;
    }
    return 0;
}

/* ---- writing -----------------------------------------------------------------------------------
 */

typedef struct writer {
    int fd;
    st_enc_t enc;
} writer_t;

/* Writes all of p: 0 or ST_EIO (errno kept). */
static int write_all(int fd, const uint8_t *p, size_t len)
{
    return tt_write_all(fd, p, len) ? ST_EIO : 0;
}

static int sink_write(void *ctx, const uint8_t *p, size_t len)
{
    return write_all(((writer_t *)ctx)->fd, p, len);
}

static void enc_counter(void *ctx, size_t limit, const char *key, size_t len, int64_t state)
{
    (void)st_enc_counter(&((writer_t *)ctx)->enc, (uint32_t)limit, key, len, state);
}

static int failed(st_result_t *r, const char *stage)
{
    r->rc = ST_EIO;
    r->sys_errno = errno;
    r->stage = stage;
    return r->rc;
}

/*
 * Creates `tmp` in the directory for writing aside: a new file of our own (O_EXCL), never what a
 * name already there leads to (O_NOFOLLOW). A name already there is a stale one (a crash
 * mid-write) or one planted: it is removed first, and unlinkat removes the name itself, never
 * what a symbolic link points at. Returns the descriptor or -1 (errno). Allocates nothing.
 */
static int create_aside(int dirfd, const char *tmp)
{
    for (int tries = 0;; tries++) {
        int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST || tries == 1)
            return fd;
        if (unlinkat(dirfd, tmp, 0) != 0)
            return -1;
    }
}

/*
 * Puts a file written aside into place: fsync, close, rename over `name`, fsync of the directory,
 * so a crash at any moment leaves the old file or the new one whole. The aside file is removed
 * when it cannot be put in place. Returns NULL, or the stage that failed (errno kept).
 * Allocates nothing.
 */
static const char *commit_aside(int dirfd, int fd, const char *tmp, const char *name)
{
    const char *stage = fsync(fd) != 0 ? "fsync" : NULL;
    int e = errno;
    close(fd);
    if (!stage && renameat(dirfd, tmp, dirfd, name) != 0) {
        stage = "rename";
        e = errno;
    }
    if (stage) {
        unlinkat(dirfd, tmp, 0);
        errno = e;
        return stage;
    }
    return fsync(dirfd) != 0 ? "fsync of the directory" : NULL;
}

/*
 * Writes the snapshot of `e` (armed with `cfg`) aside, fsyncs, renames it into place and fsyncs
 * the directory. Allocates nothing (the child runs it). Fills r; returns r->rc.
 */
static int write_snapshot(st_node_t *n, gov_engine_t *e, const cfg_config_t *cfg, int64_t now,
                          st_result_t *r)
{
    *r = (st_result_t){0};
    writer_t w = {.fd = create_aside(n->dirfd, ST_FILE_TMP)};
    if (w.fd < 0)
        return failed(r, "create");
    st_enc_init(&w.enc, n->buf, BUF_SIZE, sink_write, &w);
    st_enc_scope(&w.enc, n->scope, n->scope_len);
    for (size_t i = 0; i < cfg->n_limits; i++) {
        const cfg_limit_t *l = &cfg->limits[i];
        st_limit_t sl = {.identity = l->identity,
                         .type = (uint8_t)l->type,
                         .store = (uint8_t)l->store,
                         .algorithm = (uint8_t)l->algorithm};
        memcpy(sl.id, l->id, sizeof(sl.id));
        st_enc_limit(&w.enc, &sl);
    }
    gov_engine_each_counter(e, now, enc_counter, &w);
    uint8_t header[ST_HEADER_SIZE];
    if (st_enc_finish(&w.enc, now, n->fingerprint, header) != 0 ||
        pwrite(w.fd, header, sizeof(header), 0) != (ssize_t)sizeof(header)) {
        failed(r, "write");
        close(w.fd);
        unlinkat(n->dirfd, ST_FILE_TMP, 0);
        return r->rc;
    }
    const char *stage = commit_aside(n->dirfd, w.fd, ST_FILE_TMP, ST_FILE);
    if (stage)
        return failed(r, stage);
    r->counters = w.enc.n_counters;
    r->bytes = ST_HEADER_SIZE + w.enc.body_len;
    r->done_mono_ns = tt_mono_ns();
    return 0;
}

/* Accounts one finished snapshot and tells the daemon. */
static void finished(st_node_t *n, const st_result_t *r, int64_t taken_ns, int64_t took_ns,
                     int64_t pause_ns, int64_t pause_cpu_ns, bool at_stop)
{
    char detail[160] = "";
    if (r->rc) {
        snprintf(detail, sizeof(detail), "%s: %s", r->stage ? r->stage : "child",
                 r->sys_errno ? strerror(r->sys_errno) : "exited abnormally");
        n->failures[st_reason_index(r->rc)]++;
        emit(n, (st_event_t){.kind = ST_EV_SNAPSHOT_FAILED,
                             .err = r->rc,
                             .path = n->file,
                             .detail = detail,
                             .at_stop = at_stop});
        return;
    }
    n->snapshots++;
    n->last_good_ns = taken_ns;
    n->last_counters = r->counters;
    n->last_bytes = r->bytes;
    n->last_took_ns = took_ns;
    n->last_pause_ns = pause_ns;
    if (pause_ns > n->max_pause_ns)
        n->max_pause_ns = pause_ns;
    emit(n, (st_event_t){.kind = ST_EV_SNAPSHOT,
                         .path = n->file,
                         .counters = r->counters,
                         .bytes = r->bytes,
                         .took_ns = took_ns,
                         .pause_ns = pause_ns,
                         .pause_cpu_ns = pause_cpu_ns,
                         .at_stop = at_stop});
}

/* ---- the forked child --------------------------------------------------------------------------
 */

static void on_poll(uv_timer_t *t)
{
    st_node_t *n = t->data;
    int st;
    pid_t got = waitpid(n->child, &st, WNOHANG);
    if (got == 0 || (got < 0 && errno == EINTR))
        return;
    uv_timer_stop(&n->poll);
    n->child = 0;
    st_result_t r = *n->shared;
    if (got < 0 || !WIFEXITED(st) || (WEXITSTATUS(st) != 0 && r.rc == 0))
        r = (st_result_t){.rc = ST_EIO, .stage = "child"};
    int64_t end = r.done_mono_ns ? r.done_mono_ns : tt_mono_ns();
    finished(n, &r, n->child_wall_ns, end - n->child_mono_ns, n->child_pause_ns,
             n->child_pause_cpu_ns, false);
}

static void child(st_node_t *n, const cfg_config_t *cfg, int64_t now, const sigset_t *mask)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &dfl, NULL); /* SIGKILL, SIGSTOP and the reserved ones fail: fine */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != n->parent)
        _exit(1);
    sigprocmask(SIG_SETMASK, mask, NULL);
    /* the daemon's loop comes first: the child takes what CPU is left (a little even on a busy
     * node, so the snapshot still ends; its age in /metrics shows when it does not) */
    setpriority(PRIO_PROCESS, 0, 10);
    if (n->dirfd > 0)
        close_range(0, (unsigned)n->dirfd - 1, 0);
    close_range((unsigned)n->dirfd + 1, ~0u, 0);
    _exit(write_snapshot(n, n->engine, cfg, now, n->shared) == 0 ? 0 : 1);
}

static void fork_child(st_node_t *n)
{
    *n->shared = (st_result_t){.rc = ST_EIO, .stage = "child"};
    int64_t now = tt_wall_ns();
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int64_t t0 = tt_mono_ns(), c0 = thread_cpu_ns();
    pid_t pid = fork();
    if (pid == 0)
        child(n, *n->cfgp, now, &old);
    int64_t t1 = tt_mono_ns(), c1 = thread_cpu_ns();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        st_result_t r = {0};
        failed(&r, "fork");
        finished(n, &r, now, 0, t1 - t0, c1 - c0, false);
        return;
    }
    n->child = pid;
    n->child_wall_ns = now;
    n->child_mono_ns = t0;
    n->child_pause_ns = t1 - t0;
    n->child_pause_cpu_ns = c1 - c0;
    uv_timer_start(&n->poll, on_poll, POLL_MS, POLL_MS);
}

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older headers lack it, older kernels answer EINVAL */
#endif

/* Best effort: a range the kernel will not collapse now (no huge page free, unmapped by a
 * growth meanwhile) is forked in 4 KiB entries this once. */
static void collapse_work(uv_work_t *req)
{
    st_collapse_t *c = (st_collapse_t *)req;
    for (size_t i = 0; i < c->n; i++)
        (void)madvise(c->addr[i], c->len[i], MADV_COLLAPSE);
}

static void collapse_done(uv_work_t *req, int status)
{
    st_node_t *n = req->data;
    n->collapsing = false;
    if (status == 0 && n->timers) /* not cancelled, the node not stopped meanwhile */
        fork_child(n);
}

/*
 * Whether this process may have memory collapsed into huge pages: one huge page of its own, one
 * page touched, collapsed. What only this moment's memory refused counts as yes (madvise(2)):
 * ENOMEM (no huge page free just now), EBUSY (the cgroup at its limit), EAGAIN (a page busy).
 * Anything else is no: EINVAL from a kernel before 6.1 or without THP, or with THP disabled for
 * the process (an untouched range would say EINVAL too, hence the touch), EPERM from a seccomp
 * filter.
 */
static bool huge_pages_probe(st_node_t *n)
{
    char *raw =
        mmap(NULL, 2 * HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return false;
    char *p = raw + (HUGE_PAGE - (uintptr_t)raw % HUGE_PAGE) % HUGE_PAGE;
    p[0] = 1;
    bool ok = madvise(p, HUGE_PAGE, MADV_COLLAPSE) == 0 || errno == ENOMEM || errno == EBUSY ||
              errno == EAGAIN;
    if (!ok) {
        char detail[160];
        snprintf(detail, sizeof(detail), "madvise(MADV_COLLAPSE): %s", strerror(errno));
        emit(n, (st_event_t){.kind = ST_EV_NO_HUGE_PAGES, .path = n->dir, .detail = detail});
    }
    munmap(raw, 2 * HUGE_PAGE);
    return ok;
}

static void take(st_node_t *n)
{
    if (n->child > 0 || n->collapsing) { /* the last one is still under way: skip this one */
        n->skipped++;
        return;
    }
    st_collapse_t *c = &n->collapse;
    c->n = 0;
    if (n->huge_pages) {
        c->n = gov_engine_regions(n->engine, c->addr, c->len, REGIONS_MAX);
        if (c->n && c->len[0] < HUGE_PAGE) /* a small table: its fork is cheap as it is */
            c->n = 0;
    }
    if (c->n && uv_queue_work(n->loop, &c->req, collapse_work, collapse_done) == 0) {
        n->collapsing = true;
        return;
    }
    fork_child(n);
}

static void on_interval(uv_timer_t *t)
{
    take(t->data);
}

void st_node_start(st_node_t *n, gov_engine_t *e, cfg_config_t *const *cfgp)
{
    n->engine = e;
    n->cfgp = cfgp;
    if (n->dirfd < 0 || n->interval_ns <= 0)
        return;
    uint64_t ms = (uint64_t)((n->interval_ns + 999999) / 1000000);
    n->huge_pages = huge_pages_probe(n);
    uv_timer_start(&n->interval, on_interval, ms, ms);
}

st_phase_t st_node_phase(const st_node_t *n)
{
    return n->child > 0 ? ST_PHASE_WRITING : n->collapsing ? ST_PHASE_COLLAPSING : ST_PHASE_IDLE;
}

/* Ends a forked snapshot under way: the one about to be written in-process supersedes it. */
static void end_child(st_node_t *n)
{
    if (n->child <= 0)
        return;
    kill(n->child, SIGKILL);
    waitpid(n->child, NULL, 0);
    n->child = 0;
    uv_timer_stop(&n->poll);
}

static void snapshot_in_process(st_node_t *n, int64_t now)
{
    end_child(n);
    if (n->dirfd < 0 || !n->engine)
        return;
    st_result_t r;
    int64_t t0 = tt_mono_ns();
    write_snapshot(n, n->engine, *n->cfgp, now, &r);
    finished(n, &r, now, tt_mono_ns() - t0, 0, 0, true);
}

void st_node_snapshot_now(st_node_t *n)
{
    snapshot_in_process(n, tt_wall_ns());
}

void st_node_stop(st_node_t *n, bool snapshot, int64_t now)
{
    if (!n)
        return;
    end_child(n);
    if (n->collapsing) /* one not started yet ends here; a running one ends on its own */
        uv_cancel((uv_req_t *)&n->collapse.req);
    if (n->timers) {
        uv_close((uv_handle_t *)&n->interval, NULL);
        uv_close((uv_handle_t *)&n->poll, NULL);
        n->timers = false;
    }
    if (snapshot)
        snapshot_in_process(n, now);
}

void st_node_free(st_node_t *n)
{
    if (!n)
        return;
    if (n->lockfd >= 0)
        close(n->lockfd);
    if (n->dirfd >= 0)
        close(n->dirfd);
    munmap(n->shared, sizeof(st_result_t));
    free(n->buf);
    free(n);
}

/* ---- restore -----------------------------------------------------------------------------------
 */

typedef struct restore {
    st_node_t *n;
    gov_engine_t *e;
    const cfg_config_t *cfg;
    int64_t now;
    int64_t written; /* the snapshot's written_ns: a share counter resumes its debt of then */
    bool foreign;
    char scope[ST_SCOPE_MAX + 1];
    int16_t to[ST_LIMITS_MAX]; /* snapshot limit -> config index, -1: dropped */
    char ids[ST_LIMITS_MAX][ST_ID_MAX + 1];
    uint64_t dropped[ST_LIMITS_MAX];
    uint64_t out_of_range[ST_LIMITS_MAX];
} restore_t;

static void on_scope(void *ctx, const char *scope, size_t len)
{
    restore_t *r = ctx;
    memcpy(r->scope, scope, len);
    r->scope[len] = '\0';
    r->foreign = st_fingerprint(scope, len) != r->n->fingerprint;
}

static void on_limit(void *ctx, uint32_t i, const st_limit_t *l)
{
    restore_t *r = ctx;
    r->to[i] = -1;
    memcpy(r->ids[i], l->id, sizeof(r->ids[i]));
    for (size_t k = 0; !r->foreign && k < r->cfg->n_limits; k++)
        if (r->cfg->limits[k].identity == l->identity && gov_limit_persists(&r->cfg->limits[k]))
            r->to[i] = (int16_t)k;
}

static void on_counter(void *ctx, uint32_t limit, const char *key, size_t len, int64_t state)
{
    restore_t *r = ctx;
    if (r->foreign)
        return;
    if (r->to[limit] < 0) {
        r->dropped[limit]++;
        r->n->dropped++;
        return;
    }
    int rc = gov_engine_restore_at(r->e, (size_t)r->to[limit], key, len, state, r->written, r->now);
    if (rc == 0)
        r->n->restored++;
    else if (rc == 1)
        r->n->idle++;
    else if (rc == GOV_ERANGE) {
        r->out_of_range[limit]++;
        r->n->out_of_range++;
    } else
        r->n->refused++;
}

/* Says when a file others than the daemon could have written is read: the directory check
 * keeps them from replacing it, but not from writing into a file that lets them. */
static void warn_loose(st_node_t *n, const char *path, const struct stat *sb)
{
    char detail[160];
    uid_t me = geteuid();
    mode_t w = sb->st_mode & (S_IWGRP | S_IWOTH);
    if (w)
        snprintf(detail, sizeof(detail), "writable by %s (mode %04o)",
                 w & S_IWOTH ? "every user" : "its group", (unsigned)(sb->st_mode & 07777));
    else if (sb->st_uid != me)
        snprintf(detail, sizeof(detail), "owned by uid %u, not the daemon's uid %u",
                 (unsigned)sb->st_uid, (unsigned)me);
    else
        return;
    emit(n, (st_event_t){.kind = ST_EV_WARNING, .path = path, .detail = detail});
}

/* Reads the whole file `name` of the directory into a new buffer, at most `max` bytes: 0 or
 * ST_E*, with the reason in `detail`. */
static int read_file(st_node_t *n, const char *name, const char *path, size_t max, uint8_t **out,
                     size_t *len, char *detail, size_t size)
{
    struct stat sb;
    int fd = open_in(n, name, O_RDONLY, &sb, detail, size);
    if (fd < 0)
        return fd;
    warn_loose(n, path, &sb);
    int rc = 0;
    if ((uint64_t)sb.st_size > max) {
        snprintf(detail, size, "larger than %zu bytes, what the daemon reads", max);
        rc = ST_ETOOBIG;
    } else if (!(*out = malloc(sb.st_size ? (size_t)sb.st_size : 1))) {
        snprintf(detail, size, "out of memory");
        rc = ST_EIO;
    }
    size_t got = 0;
    while (rc == 0 && got < (size_t)sb.st_size) {
        ssize_t k = read(fd, *out + got, (size_t)sb.st_size - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            snprintf(detail, size, "read: %s", strerror(errno));
            rc = ST_EIO;
        }
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd);
    *len = got;
    return rc;
}

void st_node_restore(st_node_t *n, gov_engine_t *e, const cfg_config_t *cfg, int64_t now)
{
    if (n->dirfd < 0)
        return;
    /* the largest file max_counters counters can make */
    size_t max = ST_HEADER_SIZE + 2 + ST_SCOPE_MAX + (size_t)ST_LIMITS_MAX * (12 + ST_ID_MAX) +
                 (size_t)cfg->server.max_counters * (14 + ST_KEY_MAX);
    uint8_t *buf = NULL;
    size_t len = 0;
    char detail[TT_ERR_TEXT_MAX + 2 * ST_SCOPE_MAX + 64] = "";
    int rc = read_file(n, ST_FILE, n->file, max, &buf, &len, detail, sizeof(detail));
    if (rc == ST_ETOOBIG)
        snprintf(detail, sizeof(detail), "larger than %zu bytes, what server.max_counters holds",
                 max);
    restore_t *r = rc ? NULL : calloc(1, sizeof(*r));
    if (!rc && !r)
        rc = ST_EIO;
    st_header_t h;
    if (!rc) {
        *r = (restore_t){.n = n, .e = e, .cfg = cfg, .now = now, .written = now};
        st_header_t head;
        if (st_dec_header(buf, len, &head, NULL) == 0) /* st_decode checks it again, whole */
            r->written = head.written_ns;
        st_visit_t v = {.scope = on_scope, .limit = on_limit, .counter = on_counter};
        tt_err_t err;
        if ((rc = st_decode(buf, len, &v, r, &h, &err)) != 0) {
            tt_err_format(&err, detail, sizeof(detail));
        } else if (r->foreign) {
            rc = ST_EFOREIGN;
            snprintf(detail, sizeof(detail), "written for \"%s\", this daemon is \"%s\"", r->scope,
                     n->scope);
        }
    }
    if (rc) {
        n->restore_err = rc;
        emit(n, (st_event_t){.kind = ST_EV_RESTORE_FAILED,
                             .err = rc,
                             .path = n->file,
                             .detail = detail[0] ? detail : st_strerror(rc)});
    } else {
        for (uint32_t i = 0; i < h.n_limits; i++) {
            if (r->dropped[i])
                emit(n, (st_event_t){.kind = ST_EV_DROPPED,
                                     .path = n->file,
                                     .limit = r->ids[i],
                                     .counters = r->dropped[i]});
            if (r->out_of_range[i])
                emit(n, (st_event_t){.kind = ST_EV_OUT_OF_RANGE,
                                     .path = n->file,
                                     .limit = r->ids[i],
                                     .counters = r->out_of_range[i]});
        }
        n->last_good_ns = h.written_ns;
        emit(n, (st_event_t){.kind = ST_EV_RESTORED,
                             .path = n->file,
                             .bytes = len,
                             .restored = n->restored,
                             .idle = n->idle,
                             .dropped = n->dropped,
                             .refused = n->refused,
                             .out_of_range = n->out_of_range,
                             .age_ns = now - h.written_ns});
    }
    free(r);
    free(buf);
}

/* ---- other named files -------------------------------------------------------------------------
 */

/* A name another part may keep here: a plain name of its own, not the node's, not an aside
 * file. 0 or TT_ERR_INVAL in err. */
static int check_name(const char *name, tt_err_t *err)
{
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > ST_NAME_MAX)
        return tt_err_set(err, TT_ERR_INVAL, "name", "must be 1 to %d bytes", ST_NAME_MAX);
    if (name[0] == '.' || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789._-") != len)
        return tt_err_set(err, TT_ERR_INVAL, "name",
                          "\"%s\": letters, digits, '.', '_' and '-' only, not first '.'", name);
    if (strcmp(name, ST_FILE) == 0 || strcmp(name, ST_LOCK) == 0 ||
        (len >= 4 && strcmp(name + len - 4, ".tmp") == 0))
        return tt_err_set(err, TT_ERR_INVAL, "name", "\"%s\" is the state directory's own", name);
    return 0;
}

/* The directory is usable: 0, or its error in err. */
static int check_usable(const st_node_t *n, tt_err_t *err)
{
    if (n && n->dirfd >= 0)
        return 0;
    int code = n && n->open_err ? n->open_err : ST_EIO;
    return tt_err_set(err, code, "", "no usable state directory (%s)", st_reason(code));
}

int st_node_read_file(st_node_t *n, const char *name, size_t max, uint8_t **out, size_t *len,
                      tt_err_t *err)
{
    *out = NULL;
    *len = 0;
    int rc;
    if ((rc = check_name(name, err)) != 0 || (rc = check_usable(n, err)) != 0)
        return rc;
    char path[sizeof(n->dir) + ST_NAME_MAX + 2], detail[160] = "";
    snprintf(path, sizeof(path), "%s/%s", n->dir, name);
    if ((rc = read_file(n, name, path, max, out, len, detail, sizeof(detail))) != 0) {
        free(*out);
        *out = NULL;
        *len = 0;
        return tt_err_set(err, rc, name, "%s", detail[0] ? detail : st_strerror(rc));
    }
    return 0;
}

int st_node_write_file(st_node_t *n, const char *name, const void *data, size_t len, tt_err_t *err)
{
    int rc;
    if ((rc = check_name(name, err)) != 0 || (rc = check_usable(n, err)) != 0)
        return rc;
    char tmp[ST_NAME_MAX + 5];
    snprintf(tmp, sizeof(tmp), "%s.tmp", name);
    int fd = create_aside(n->dirfd, tmp);
    if (fd < 0)
        return tt_err_set(err, ST_EIO, name, "create %s: %s", tmp, strerror(errno));
    if (write_all(fd, data, len) != 0) {
        int e = errno;
        close(fd);
        unlinkat(n->dirfd, tmp, 0);
        return tt_err_set(err, ST_EIO, name, "write: %s", strerror(e));
    }
    const char *stage = commit_aside(n->dirfd, fd, tmp, name);
    if (stage)
        return tt_err_set(err, ST_EIO, name, "%s: %s", stage, strerror(errno));
    return 0;
}

/* ---- disclosure --------------------------------------------------------------------------------
 */

int64_t st_node_age_ns(const st_node_t *n, int64_t now)
{
    return n && n->last_good_ns ? now - n->last_good_ns : -1;
}

void st_node_metrics(const st_node_t *n, int64_t now, st_emit_fn out, void *ctx)
{
    char line[1024];
#define LINE(...)                                                                                  \
    do {                                                                                           \
        snprintf(line, sizeof(line), __VA_ARGS__);                                                 \
        out(ctx, line);                                                                            \
    } while (0)
    LINE("# HELP tokentriage_state_enabled 1 when the state directory is open and locked.\n"
         "# TYPE tokentriage_state_enabled gauge\ntokentriage_state_enabled %d\n",
         n->dirfd >= 0);
    if (n->last_good_ns)
        LINE("# HELP tokentriage_state_snapshot_age_seconds Age of the last good snapshot (what "
             "an unclean stop now would forget is at most this much of admissions).\n"
             "# TYPE tokentriage_state_snapshot_age_seconds gauge\n"
             "tokentriage_state_snapshot_age_seconds %.3f\n",
             (double)(now - n->last_good_ns) / 1e9);
    LINE("# HELP tokentriage_state_snapshots_total Snapshots written.\n"
         "# TYPE tokentriage_state_snapshots_total counter\n"
         "tokentriage_state_snapshots_total %llu\n"
         "# HELP tokentriage_state_snapshots_skipped_total Intervals skipped because the last "
         "snapshot was still being written.\n"
         "# TYPE tokentriage_state_snapshots_skipped_total counter\n"
         "tokentriage_state_snapshots_skipped_total %llu\n",
         (unsigned long long)n->snapshots, (unsigned long long)n->skipped);
    LINE("# HELP tokentriage_state_snapshot_failures_total Snapshots not written, by reason.\n"
         "# TYPE tokentriage_state_snapshot_failures_total counter\n");
    /* Every series a failure can land in is there from the start, at 0, so that increase()
     * sees the first failure. A snapshot fails only with io; a start, once, for any reason. */
    for (int i = 0; i < ST_REASONS; i++)
        if (n->failures[i] || st_reason_err(i) == ST_EIO)
            LINE("tokentriage_state_snapshot_failures_total{reason=\"%s\"} %llu\n",
                 st_reason(st_reason_err(i)), (unsigned long long)n->failures[i]);
    LINE("# HELP tokentriage_state_restore_failures_total A snapshot (or the directory) not "
         "restored at start, by reason (one start per process: 1 for the reason it failed).\n"
         "# TYPE tokentriage_state_restore_failures_total counter\n");
    int err = n->open_err ? n->open_err : n->restore_err;
    for (int i = 0; i < ST_REASONS; i++)
        LINE("tokentriage_state_restore_failures_total{reason=\"%s\"} %d\n",
             st_reason(st_reason_err(i)), err == st_reason_err(i));
    LINE("# HELP tokentriage_state_restored_counters Counters of the snapshot at start, by "
         "outcome (restored; idle: nothing left to keep; dropped: their limit is gone; refused: "
         "the counter cap; out_of_range: a state the algorithm cannot reach).\n"
         "# TYPE tokentriage_state_restored_counters gauge\n"
         "tokentriage_state_restored_counters{outcome=\"restored\"} %llu\n"
         "tokentriage_state_restored_counters{outcome=\"idle\"} %llu\n"
         "tokentriage_state_restored_counters{outcome=\"dropped\"} %llu\n"
         "tokentriage_state_restored_counters{outcome=\"refused\"} %llu\n"
         "tokentriage_state_restored_counters{outcome=\"out_of_range\"} %llu\n",
         (unsigned long long)n->restored, (unsigned long long)n->idle,
         (unsigned long long)n->dropped, (unsigned long long)n->refused,
         (unsigned long long)n->out_of_range);
    LINE("# HELP tokentriage_state_snapshot_counters Counters in the last snapshot.\n"
         "# TYPE tokentriage_state_snapshot_counters gauge\n"
         "tokentriage_state_snapshot_counters %llu\n"
         "# HELP tokentriage_state_snapshot_bytes Size of the last snapshot.\n"
         "# TYPE tokentriage_state_snapshot_bytes gauge\ntokentriage_state_snapshot_bytes %llu\n",
         (unsigned long long)n->last_counters, (unsigned long long)n->last_bytes);
    LINE("# HELP tokentriage_state_snapshot_seconds Time the last snapshot took to write.\n"
         "# TYPE tokentriage_state_snapshot_seconds gauge\n"
         "tokentriage_state_snapshot_seconds %.6f\n"
         "# HELP tokentriage_state_snapshot_pause_seconds How long the last snapshot stopped "
         "the loop (the fork), and the longest.\n"
         "# TYPE tokentriage_state_snapshot_pause_seconds gauge\n"
         "tokentriage_state_snapshot_pause_seconds{which=\"last\"} %.6f\n"
         "tokentriage_state_snapshot_pause_seconds{which=\"max\"} %.6f\n",
         (double)n->last_took_ns / 1e9, (double)n->last_pause_ns / 1e9,
         (double)n->max_pause_ns / 1e9);
#undef LINE
}
