/*
 * The config watch (see watch.h): fingerprints by content, inotify and a poll to say when to
 * look, one debounce between them and the check.
 *
 * Why both. inotify answers within milliseconds and costs nothing while nothing changes, but
 * it is not always there: its watches are a per-user budget (fs.inotify.max_user_watches,
 * max_user_instances) that a busy node's other pods may have spent; some file systems never
 * send events (NFS, FUSE, 9p); and a watch on a directory that is removed (the kubelet removes
 * the old version's directory of a ConfigMap) dies with it. The poll looks at the few watched
 * files every config_poll (5 s by default): a stat each, and their bytes only when the stat
 * moved (see meta_of), so a change is never missed for longer than that, and inotify only makes
 * it sooner.
 */
#define _GNU_SOURCE
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_log.h"
#include "tt_clock.h"
#include "tt_hash.h"

#define CHUNK 65536
#define RACY_NS (INT64_C(2) * 1000000000) /* a file changed this recently is read again */
#define DEBOUNCE_CAP 10 /* events keep postponing the check at most this many debounces */

enum { BY_INOTIFY = 0, BY_POLL, BY_COUNT };
static const char *const by_name[BY_COUNT] = {"inotify", "poll"};

/* One watched path and its (up to) two inotify watches: the directory that holds it, and the
 * one its symbolic links lead to when that is another. */
typedef struct entry {
    srv_watch_t *w;
    char path[PATH_MAX];
    bool dir;
    uint64_t seen; /* the fingerprint last read */
    uint64_t meta; /* what stat said then (0: unknown, or too recent to trust: read again) */
    srv_watch_fn fn;
    void *ctx;
    uv_fs_event_t ev[2];
    char want[2][PATH_MAX]; /* the directory each watch should be on; "" for none */
    char on[2][PATH_MAX];   /* the directory it is on; "" when not started */
} entry_t;

struct srv_watch {
    uv_loop_t *loop;
    uv_timer_t debounce, poll;
    int64_t debounce_ns, poll_ns;
    entry_t *e[SRV_WATCH_ENTRIES_MAX];
    size_t n;
    int by;           /* what started the pending debounce */
    int64_t first_ns; /* when it started (monotonic) */
    uint64_t changes[BY_COUNT];
    srv_watch_stats_t stats;
    bool warned, closed;
};

/* ---- fingerprints ------------------------------------------------------------------------- */

static uint64_t hash_str(uint64_t h, const char *s)
{
    return tt_fnv1a64(h, s, strlen(s) + 1);
}

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
    return tt_fnv1a64(h, &v, sizeof v);
}

/* A file's bytes (at most SRV_WATCH_FILE_BYTES_MAX) and size, or why it cannot be read. Opened
 * non-blocking: a fifo's open would wait for a writer, and anything but a regular file is
 * named by its type, never read. */
static uint64_t hash_file(uint64_t h, const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        h = hash_u64(hash_str(h, "error"), (uint64_t)errno);
        if (fd >= 0)
            close(fd);
        return h;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return hash_u64(hash_str(h, "type"), (uint64_t)(sb.st_mode & S_IFMT));
    }
    h = hash_u64(h, (uint64_t)sb.st_size);
    static uint8_t buf[CHUNK]; /* the loop's thread only */
    for (int64_t left = SRV_WATCH_FILE_BYTES_MAX; left > 0;) {
        ssize_t k = read(fd, buf, left < CHUNK ? (size_t)left : CHUNK);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            h = hash_u64(hash_str(h, "error"), (uint64_t)errno);
        if (k <= 0)
            break;
        h = tt_fnv1a64(h, buf, (size_t)k);
        left -= k;
    }
    close(fd);
    return h;
}

static int by_name_order(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names (not hidden) and bytes of a directory's regular files, in name order. */
static uint64_t hash_dir(uint64_t h, const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return hash_u64(hash_str(h, "error"), (uint64_t)errno);
    char **names = calloc(SRV_WATCH_DIR_FILES_MAX, sizeof(*names));
    size_t n = 0, more = 0;
    for (struct dirent *de; names && (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        if (n == SRV_WATCH_DIR_FILES_MAX || !(names[n] = strdup(de->d_name))) {
            more++; /* past the bound (or out of memory): counted, so a change of it shows */
            continue;
        }
        n++;
    }
    closedir(d);
    if (!names)
        return hash_str(h, "out of memory");
    qsort(names, n, sizeof(*names), by_name_order);
    h = hash_u64(h, more);
    for (size_t i = 0; i < n; i++) {
        char file[PATH_MAX];
        struct stat sb;
        if (snprintf(file, sizeof file, "%s/%s", path, names[i]) < (int)sizeof file &&
            stat(file, &sb) == 0 && S_ISREG(sb.st_mode))
            h = hash_file(hash_str(h, names[i]), file);
        free(names[i]);
    }
    free(names);
    return h;
}

uint64_t srv_watch_fingerprint(const char *path, bool dir)
{
    return dir ? hash_dir(TT_FNV1A64_BASIS, path) : hash_file(TT_FNV1A64_BASIS, path);
}

/*
 * What stat says of a path, so that a check reads a file's bytes only when it may have changed:
 * the poll then costs a stat per file (about 23 us of the loop per poll, measured with the links'
 * resolution), not a read of a config of up to 1 MiB (3.9 ms of FNV-1a on the loop for one,
 * measured on the loaded development VM; 6.6 us for 4 KiB). Any write moves the file's ctime, a
 * ConfigMap update gives the path a new inode. A time stamp coarser than the writes (one second on
 * some file systems) could hide a second write of the same size in the same tick, so, as git does
 * with its racy entries, a file changed within the last 2 s is not trusted: its signature is 0 and
 * the next check reads it again.
 */
static uint64_t meta_one(uint64_t h, const char *path, int64_t now_ns, bool *recent)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return hash_u64(hash_str(h, "error"), (uint64_t)errno);
    int64_t m = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    int64_t c = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec;
    *recent |= now_ns - (m > c ? m : c) < RACY_NS;
    uint64_t f[6] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino, (uint64_t)sb.st_size,
                     (uint64_t)m,         (uint64_t)c,         (uint64_t)sb.st_mode};
    return tt_fnv1a64(h, f, sizeof f);
}

static uint64_t meta_of(const entry_t *e)
{
    bool recent = false;
    int64_t now = tt_wall_ns();
    uint64_t h = meta_one(TT_FNV1A64_BASIS, e->path, now, &recent);
    if (e->dir) {
        DIR *d = opendir(e->path);
        if (!d)
            return 0;
        size_t n = 0;
        for (struct dirent *de; (de = readdir(d)) && n < SRV_WATCH_DIR_FILES_MAX;) {
            char file[PATH_MAX];
            if (de->d_name[0] == '.' ||
                snprintf(file, sizeof file, "%s/%s", e->path, de->d_name) >= (int)sizeof file)
                continue;
            /* readdir's order is the directory's own and stable while it is unchanged; a change
             * of order is a change of the directory, whose times moved with it */
            h = meta_one(hash_str(h, de->d_name), file, now, &recent);
            n++;
        }
        closedir(d);
    }
    return recent || h == 0 ? 0 : h;
}

/* Whether the entry holds something else than it last did; takes the new as seen. */
static bool differs(entry_t *e)
{
    uint64_t meta = meta_of(e);
    if (meta && meta == e->meta)
        return false;
    e->meta = meta;
    e->w->stats.reads++;
    uint64_t now = srv_watch_fingerprint(e->path, e->dir);
    if (now == e->seen)
        return false;
    e->seen = now;
    return true;
}

/* ---- inotify ------------------------------------------------------------------------------ */

/* The directory that holds `path` (trailing slashes ignored): "." for a bare name. */
static void parent_of(char *dst, size_t size, const char *path)
{
    snprintf(dst, size, "%s", path);
    size_t len = strlen(dst);
    while (len > 1 && dst[len - 1] == '/')
        dst[--len] = 0;
    char *slash = strrchr(dst, '/');
    if (!slash)
        snprintf(dst, size, ".");
    else if (slash == dst)
        slash[1] = 0;
    else
        *slash = 0;
}

/* The directories an entry's watches should be on. A file: the directory that holds it (where
 * a ConfigMap's ..data is renamed), and the one its links lead to when that is another (a link
 * to a file edited in place elsewhere). A directory: itself (its files), and its parent (a
 * rename of the directory itself, or of a link to it). */
static void wanted(entry_t *e)
{
    e->want[1][0] = 0;
    if (e->dir) {
        snprintf(e->want[0], sizeof e->want[0], "%s", e->path);
        parent_of(e->want[1], sizeof e->want[1], e->path);
        return;
    }
    parent_of(e->want[0], sizeof e->want[0], e->path);
    char real[PATH_MAX], holder[PATH_MAX], target[PATH_MAX];
    if (!realpath(e->path, real) || !realpath(e->want[0], holder))
        return;
    parent_of(target, sizeof target, real);
    if (strcmp(holder, target) != 0)
        snprintf(e->want[1], sizeof e->want[1], "%s", target);
}

static void on_event(uv_fs_event_t *h, const char *filename, int events, int status);

/* Puts each of the entry's watches on the directory it should be on. */
static void arm(entry_t *e)
{
    wanted(e);
    for (int i = 0; i < 2; i++) {
        if (e->on[i][0] && strcmp(e->on[i], e->want[i]) == 0)
            continue;
        if (e->on[i][0])
            uv_fs_event_stop(&e->ev[i]);
        e->on[i][0] = 0;
        if (!e->want[i][0])
            continue;
        int rc = uv_fs_event_start(&e->ev[i], on_event, e->want[i], 0);
        if (rc == 0) {
            snprintf(e->on[i], sizeof e->on[i], "%s", e->want[i]);
        } else if (!e->w->warned) {
            tt_log(TT_LOG_WARN, "config watch: no inotify for a directory; the poll covers it",
                   TT_STR("dir", e->want[i]), TT_STR("detail", uv_strerror(rc)),
                   TT_NUM("poll_s", e->w->poll_ns / 1e9));
            e->w->warned = true;
        }
    }
}

bool srv_watch_inotify(const srv_watch_t *w)
{
    for (size_t k = 0; k < w->n; k++)
        for (int i = 0; i < 2; i++)
            if (w->e[k]->want[i][0] && !w->e[k]->on[i][0])
                return false;
    return true;
}

/* ---- checks ------------------------------------------------------------------------------- */

static void on_debounce(uv_timer_t *t);

/* Something may have changed: look once the writer has been quiet for the debounce. */
static void schedule(srv_watch_t *w, int by)
{
    if (w->closed)
        return;
    int64_t now = tt_mono_ns();
    if (!uv_is_active((uv_handle_t *)&w->debounce)) {
        w->by = by;
        w->first_ns = now;
    } else if (now - w->first_ns > DEBOUNCE_CAP * w->debounce_ns) {
        return; /* a writer that never stops: look when the first debounce's cap ends */
    }
    uv_timer_start(&w->debounce, on_debounce, (uint64_t)((w->debounce_ns + 999999) / 1000000), 0);
}

static void on_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
    (void)filename, (void)events, (void)status;
    entry_t *e = h->data;
    schedule(e->w, BY_INOTIFY);
}

static void on_debounce(uv_timer_t *t)
{
    srv_watch_t *w = t->data;
    entry_t *changed[SRV_WATCH_ENTRIES_MAX];
    size_t n = 0;
    w->stats.checks++;
    for (size_t k = 0; k < w->n; k++) {
        entry_t *e = w->e[k];
        arm(e); /* the links may lead elsewhere now */
        if (differs(e))
            changed[n++] = e;
    }
    if (!n)
        return;
    w->changes[w->by]++;
    for (size_t k = 0; k < n; k++)
        tt_log(TT_LOG_INFO, "config watch: changed", TT_STR("path", changed[k]->path),
               TT_STR("detected_by", by_name[w->by]));
    /* each callback once, for the first of its entries that changed */
    for (size_t k = 0; k < n; k++) {
        bool again = false;
        for (size_t j = 0; j < k; j++)
            again |= changed[j]->fn == changed[k]->fn && changed[j]->ctx == changed[k]->ctx;
        if (!again)
            changed[k]->fn(changed[k]->ctx, changed[k]->path);
    }
}

static void on_poll(uv_timer_t *t)
{
    srv_watch_t *w = t->data;
    w->stats.polls++;
    if (uv_is_active((uv_handle_t *)&w->debounce))
        return; /* a check is coming */
    for (size_t k = 0; k < w->n; k++) {
        arm(w->e[k]); /* a watch that failed may be possible now */
        entry_t *e = w->e[k];
        uint64_t meta = meta_of(e);
        if (meta && meta == e->meta)
            continue;
        w->stats.reads++;
        if (srv_watch_fingerprint(e->path, e->dir) != e->seen) {
            schedule(w, BY_POLL); /* the check after the debounce takes it as seen */
            return;
        }
        e->meta = meta; /* the same bytes: no need to read them again */
    }
}

/* ---- life --------------------------------------------------------------------------------- */

int srv_watch_new(srv_watch_t **out, uv_loop_t *loop, const srv_watch_options_t *o)
{
    srv_watch_t *w = calloc(1, sizeof(*w));
    if (!(*out = w))
        return -1;
    w->loop = loop;
    w->poll_ns = o->poll_ns;
    w->debounce_ns = o->debounce_ns > 0 ? o->debounce_ns : SRV_WATCH_DEBOUNCE_NS;
    uv_timer_init(loop, &w->debounce);
    uv_timer_init(loop, &w->poll);
    w->debounce.data = w->poll.data = w;
    uint64_t ms = (uint64_t)((w->poll_ns + 999999) / 1000000);
    uv_timer_start(&w->poll, on_poll, ms, ms);
    return 0;
}

int srv_watch_add(srv_watch_t *w, const char *path, bool dir, const uint64_t *baseline,
                  srv_watch_fn fn, void *ctx)
{
    if (w->n == SRV_WATCH_ENTRIES_MAX || strlen(path) >= PATH_MAX)
        return -1;
    entry_t *e = calloc(1, sizeof(*e));
    if (!e)
        return -1;
    e->w = w;
    snprintf(e->path, sizeof e->path, "%s", path);
    e->dir = dir;
    e->fn = fn;
    e->ctx = ctx;
    e->seen = baseline ? *baseline : srv_watch_fingerprint(path, dir);
    e->meta = baseline ? 0 : meta_of(e); /* the caller's baseline is older than any stat now */
    for (int i = 0; i < 2; i++) {
        uv_fs_event_init(w->loop, &e->ev[i]);
        e->ev[i].data = e;
    }
    w->e[w->n++] = e;
    arm(e);
    return 0;
}

srv_watch_stats_t srv_watch_stats(const srv_watch_t *w)
{
    return w->stats;
}

void srv_watch_sync(srv_watch_t *w)
{
    for (size_t k = 0; w && k < w->n; k++)
        (void)differs(w->e[k]);
}

void srv_watch_metrics(const srv_watch_t *w, srv_watch_emit_fn emit, void *ctx)
{
    char text[768];
    snprintf(text, sizeof text,
             "# HELP tokentriage_config_watch_changes_total Changes the config watch found in "
             "the files it watches (each one reloads), by what saw them first.\n"
             "# TYPE tokentriage_config_watch_changes_total counter\n"
             "tokentriage_config_watch_changes_total{detected_by=\"inotify\"} %llu\n"
             "tokentriage_config_watch_changes_total{detected_by=\"poll\"} %llu\n"
             "# HELP tokentriage_config_watch_inotify 1 while inotify watches every directory "
             "the config watch needs; 0: changes are seen by the poll alone.\n"
             "# TYPE tokentriage_config_watch_inotify gauge\n"
             "tokentriage_config_watch_inotify %d\n",
             (unsigned long long)w->changes[BY_INOTIFY], (unsigned long long)w->changes[BY_POLL],
             srv_watch_inotify(w));
    emit(ctx, text);
}

void srv_watch_close(srv_watch_t *w)
{
    if (!w || w->closed)
        return;
    w->closed = true;
    uv_close((uv_handle_t *)&w->debounce, NULL);
    uv_close((uv_handle_t *)&w->poll, NULL);
    for (size_t k = 0; k < w->n; k++)
        for (int i = 0; i < 2; i++)
            uv_close((uv_handle_t *)&w->e[k]->ev[i], NULL);
}

void srv_watch_free(srv_watch_t *w)
{
    if (!w)
        return;
    for (size_t k = 0; k < w->n; k++)
        free(w->e[k]);
    free(w);
}
