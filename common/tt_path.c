/* See tt_path.h. */
#define _GNU_SOURCE
#include "tt_path.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool tt_path_dirname(char *path)
{
    char *slash = strrchr(path, '/');
    if (!slash)
        return false;
    slash[slash == path] = 0; /* keep the root's own slash */
    return true;
}

const char *tt_path_cannot_make(const char *dir, char *parent, size_t size)
{
    snprintf(parent, size, "%s", dir);
    if (!tt_path_dirname(parent))
        snprintf(parent, size, ".");
    struct stat st;
    if (stat(parent, &st) != 0)
        return strerror(errno);
    if (!S_ISDIR(st.st_mode))
        return "not a directory";
    if (faccessat(AT_FDCWD, parent, W_OK | X_OK, AT_EACCESS) != 0)
        return strerror(errno);
    return NULL;
}
