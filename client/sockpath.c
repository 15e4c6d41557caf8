/*
 * Where the decision socket lives (SPEC §8), one function for the daemon and its clients so
 * the two always meet: flag, then $TOKENTRIAGE_SOCKET, then the config, then the default.
 *
 * The default, /run/tokentriage/tokentriage.sock, needs root (or a prepared directory, as the
 * DaemonSet's hostPath is). A daemon started by an ordinary user falls back to a directory it
 * owns, and a client looks there when the default socket does not exist.
 */
#include "tokentriage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_DIR "/run/tokentriage"

static int put(char *buf, size_t size, const char *path)
{
    if (!buf || strlen(path) >= size)
        return TT_EARG;
    strcpy(buf, path);
    return 0;
}

/* The per-user fallback: $XDG_RUNTIME_DIR/tokentriage/, else /tmp/tokentriage-<uid>/. */
static void fallback(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && *xdg)
        snprintf(buf, size, "%s/tokentriage/tokentriage.sock", xdg);
    else
        snprintf(buf, size, "/tmp/tokentriage-%u/tokentriage.sock", (unsigned)geteuid());
}

static int is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Can a daemon create its socket in the default directory (or the directory itself)? */
static int default_usable(void)
{
    struct stat st;
    if (stat(DEFAULT_DIR, &st) == 0)
        return S_ISDIR(st.st_mode) && access(DEFAULT_DIR, W_OK | X_OK) == 0;
    return access("/run", W_OK | X_OK) == 0;
}

int tt_socket_path(char *buf, size_t size, const char *flag, const char *config, int for_server)
{
    const char *env = getenv(TT_SOCKET_ENV);
    if (flag && *flag)
        return put(buf, size, flag);
    if (env && *env)
        return put(buf, size, env);
    if (config && *config)
        return put(buf, size, config);
    char alt[512];
    fallback(alt, sizeof(alt));
    if (for_server ? default_usable() : (is_socket(TT_DEFAULT_SOCKET) || !is_socket(alt)))
        return put(buf, size, TT_DEFAULT_SOCKET);
    return put(buf, size, alt);
}
