/*
 * Reading a whole config-like file (the config, envoy ratelimit's rule files, the tokens file),
 * one way for all of them: regular files only, opened without blocking (a FIFO cannot hold a
 * reload), at most CFG_FILE_MAX bytes however large the file says it is. Its own file, so that
 * the readers of those files (load.c, envoy.c, tokens.c) call down to it and not to each other.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cfg__read_file(const char *path, char **out, size_t *out_len, cfg_report_t *report)
{
    *out = NULL;
    *out_len = 0;
    /* non-blocking: opening a FIFO without a writer would otherwise block (on the daemon's
     * loop, at a reload) until one appears; anything but a regular file is refused below */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "cannot open the file: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return CFG_EINVALID;
    }
    if (S_ISDIR(st.st_mode)) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "is a directory, not a config file");
        close(fd);
        return CFG_EINVALID;
    }
    if (!S_ISREG(st.st_mode)) {
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "not a regular file (a FIFO, socket or device); a config must be a "
                        "regular file");
        close(fd);
        return CFG_EINVALID;
    }
    /* Read at most one byte past the cap: enough to know it is too large, whatever the file
     * claims (a /proc file has no honest size). */
    size_t cap = CFG_FILE_MAX + 1, len = 0;
    if (S_ISREG(st.st_mode) && st.st_size > CFG_FILE_MAX) {
        close(fd);
        cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                        "the file is larger than 1 MiB (%lld bytes; the limit is %d)",
                        (long long)st.st_size, CFG_FILE_MAX);
        return CFG_EINVALID;
    }
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        cfg__report_add(report, false, CFG_ENOMEM, "(root)", NULL, "out of memory");
        return CFG_ENOMEM;
    }
    while (len < cap) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            cfg__report_add(report, false, CFG_EINVALID, "(root)", &(cfg_pos_t){path, 1, 1},
                            "cannot read the file: %s", strerror(errno));
            free(buf);
            close(fd);
            return CFG_EINVALID;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    *out = buf;
    *out_len = len;
    return 0;
}
