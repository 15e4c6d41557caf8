/*
 * Paths on this host, for the checks made before a daemon creates something: whether a
 * directory can be made where a config says (the socket's, the state directory). One answer for
 * every shell that makes one (server/srv.c, state/state.c), and for `validate --arm`, which asks
 * the same question through them.
 */
#ifndef TT_COMMON_TT_PATH_H
#define TT_COMMON_TT_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* Cuts path to its directory in place ("/a/b" -> "/a", "/a" -> "/"); false (path untouched)
 * when it has no '/'. */
bool tt_path_dirname(char *path);

/* Why this process (its effective ids) cannot make the directory `dir`, one level: its parent
 * is missing, not a directory, or not writable and searchable. NULL when it can. The parent's
 * path goes into parent[size] either way; the reason is static text or strerror's. */
const char *tt_path_cannot_make(const char *dir, char *parent, size_t size);

#endif
