/* Small I/O helpers the shells share (header-only). */
#ifndef TT_COMMON_IO_H
#define TT_COMMON_IO_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* Writes all of p[0, len) to fd, again after EINTR and short writes: 0, or -1 with errno (0
 * bytes written reads as EIO). */
static inline int tt_write_all(int fd, const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        ssize_t k = write(fd, b, len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        b += k;
        len -= (size_t)k;
    }
    return 0;
}

#endif
