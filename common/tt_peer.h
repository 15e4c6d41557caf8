/*
 * The peer of a unix stream socket as the kernel says it (SO_PEERCRED: the effective uid and gid
 * at connect, not forgeable by the peer). Every door on a unix socket reads it the same way; who
 * may spend is server/door.c's to decide.
 */
#ifndef TT_PEER_H
#define TT_PEER_H

#ifndef _GNU_SOURCE
#error "tt_peer.h needs _GNU_SOURCE (struct ucred) defined before any include"
#endif

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

/* True with *uid and *gid set when fd is a unix socket whose peer the kernel names. */
static inline bool tt_peer_cred(int fd, uint32_t *uid, uint32_t *gid)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
        return false;
    *uid = cred.uid;
    *gid = cred.gid;
    return true;
}

#endif
