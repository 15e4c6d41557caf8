/* The credentials read from their files (auth.h). */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int rds_auth_read(const char *user, const char *file, const char *field, rds_auth_t *out,
                  tt_err_t *err)
{
    explicit_bzero(out, sizeof(*out));
    snprintf(out->user, sizeof(out->user), "%s", user ? user : "");
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tt_err_set(err, RDS_ESECRET, field, "cannot read %.200s: %s", file, strerror(errno));
    /* one byte more than a password and its "\r\n" may take: a longer file is refused */
    size_t len = 0, cap = sizeof(out->password) - 1;
    char buf[RDS_PASSWORD_MAX + 3];
    for (;;) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            explicit_bzero(buf, sizeof(buf));
            return tt_err_set(err, RDS_ESECRET, field, "cannot read %.200s: %s", file, strerror(e));
        }
        if (n == 0 || (len += (size_t)n) == sizeof(buf))
            break;
    }
    close(fd);
    const char *why = NULL;
    if (len > 0 && buf[len - 1] == '\n')
        len--;
    if (len > 0 && buf[len - 1] == '\r')
        len--;
    if (len == 0)
        why = "it is empty";
    else if (len > cap)
        why = "it holds more than 4096 bytes";
    else if (memchr(buf, '\n', len) || memchr(buf, '\r', len))
        why = "it holds more than one line";
    else if (memchr(buf, '\0', len))
        why = "it holds a NUL byte";
    if (why != NULL) {
        explicit_bzero(buf, sizeof(buf));
        explicit_bzero(out, sizeof(*out));
        return tt_err_set(err, RDS_ESECRET, field, "%.200s: %s (one line: the password)", file,
                          why);
    }
    memcpy(out->password, buf, len);
    out->password_len = len;
    explicit_bzero(buf, sizeof(buf));
    return 0;
}

void rds_credentials_wipe(rds_credentials_t *c)
{
    explicit_bzero(c, sizeof(*c));
}
