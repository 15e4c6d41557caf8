/*
 * `tokentriage serve -c FILE` with one fault injected, named by $TT_FAULT: the daemon is the
 * product's own (srv_daemon_run and all it links); only the answer of the function the fault
 * names is replaced, at link time (-Wl,--wrap). Without $TT_FAULT every call goes through.
 *
 *   keyring   membership refuses every keyring a reload brings (one that reads and parses can
 *             still be refused: a replica started sealed stays sealed, the core's own checks)
 *   dispatch  the request handler cannot be made (out of memory)
 *   getrandom the kernel gives no random bytes (ENOSYS: a seccomp filter, an old kernel)
 *   getrandom_eintr  the first two calls are interrupted by a signal (EINTR), then it answers
 *   inotify   no directory can be watched (uv_fs_event_start: ENOSPC, max_user_watches spent)
 *
 * test_reload.c and test_start.c show what the daemon must do then.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <uv.h>

#include "daemon.h"
#include "dispatch.h"
#include "mb.h"

static bool fault(const char *name)
{
    const char *f = getenv("TT_FAULT");
    return f && strcmp(f, name) == 0;
}

int __real_mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, tt_err_t *err);
int __wrap_mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, tt_err_t *err);
int __wrap_mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, tt_err_t *err)
{
    if (!fault("keyring"))
        return __real_mb_keyring_prepare(mb, path, out, err);
    out->n = 0;
    return tt_err_set(err, SWIM_EINVAL, "shared_state.share.keyring_file", "refused (test fault)");
}

int __real_dispatch_new(dispatch_t **out, struct gov_engine *engine, struct door *door,
                        srv_metrics_t *metrics, const char *node, const char *address,
                        const char *version);
int __wrap_dispatch_new(dispatch_t **out, struct gov_engine *engine, struct door *door,
                        srv_metrics_t *metrics, const char *node, const char *address,
                        const char *version);
int __wrap_dispatch_new(dispatch_t **out, struct gov_engine *engine, struct door *door,
                        srv_metrics_t *metrics, const char *node, const char *address,
                        const char *version)
{
    if (!fault("dispatch"))
        return __real_dispatch_new(out, engine, door, metrics, node, address, version);
    *out = NULL;
    return -1;
}

ssize_t __real_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags)
{
    static int interrupted;
    if (fault("getrandom")) {
        errno = ENOSYS;
        return -1;
    }
    if (fault("getrandom_eintr") && interrupted < 2) {
        interrupted++;
        errno = EINTR;
        return -1;
    }
    return __real_getrandom(buf, len, flags);
}

int __real_uv_fs_event_start(uv_fs_event_t *h, uv_fs_event_cb cb, const char *path, unsigned flags);
int __wrap_uv_fs_event_start(uv_fs_event_t *h, uv_fs_event_cb cb, const char *path, unsigned flags);
int __wrap_uv_fs_event_start(uv_fs_event_t *h, uv_fs_event_cb cb, const char *path, unsigned flags)
{
    if (fault("inotify"))
        return UV_ENOSPC;
    return __real_uv_fs_event_start(h, cb, path, flags);
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "serve") != 0 || strcmp(argv[2], "-c") != 0) {
        fprintf(stderr, "usage: tt_fault_daemon serve -c FILE\n");
        return 64;
    }
    srv_daemon_options_t opt = {.config_path = argv[3], .version = "test"};
    return srv_daemon_run(&opt);
}
