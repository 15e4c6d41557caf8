/*
 * What mb.c and mb_pushpull.c share inside the membership shell: the shell's state and the
 * helpers both call. mb_pushpull.c is below mb.c: it calls back only through mb->pump. Not for
 * anything outside membership/.
 */
#ifndef TT_MB_INT_H
#define TT_MB_INT_H

#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "mb.h"
#include "tt_clock.h"

#define FIRST_FRAME_MS 500
/* Accepted connections whose frame has not opened yet: each may buffer up to
 * SWIM_PUSHPULL_MAX before the seal is checked, so this bounds what strangers can make us
 * hold; and at most this many of them from one address. */
#define UNAUTH_MAX 16
#define UNAUTH_PER_SOURCE 4

/* Why an accepted connection was closed before its frame opened (the metric's reasons). */
enum { PP_DEADLINE, PP_SOURCE, PP_EVICTED, PP_REASONS };

typedef struct conn conn_t;

struct mb {
    uv_loop_t *loop;
    cfg_share_t cfg;
    swim_core_t *core;
    uv_udp_t udp;
    uv_tcp_t listener;
    uv_timer_t timer;      /* the core's next deadline */
    uv_timer_t join_timer; /* join retries, then the leave grace */
    int open_handles;
    int pending; /* getaddrinfo requests and connections still holding mb */
    bool closing, leaving;
    bool delivering; /* mb__pump is handing out events: a nested pump leaves them */
    bool solo;
    int64_t join_deadline;
    mb_done_fn leave_done, closed;
    void *leave_ud, *closed_ud;
    struct {
        mb_event_fn fn;
        void *ud;
    } subs[MB_SUBSCRIBERS_MAX];
    int n_subs;
    conn_t *conns; /* newest first */
    int n_conns;
    uint64_t pp_refused[PP_REASONS];
    mb_app_fn app;
    void *app_ud;
    swim_addr_t self_addr;
    /* per seed, the addresses its last lookup gave that are not ours: the peers the config
     * expects (a DaemonSet's headless Service names only this pod on a one-node cluster) */
    uint32_t seed_peers[CFG_SEEDS_MAX];
    char advertise[80];
    mb_keyring_t keyring;   /* n 0: plaintext */
    void (*pump)(mb_t *mb); /* mb__pump, for the file below mb.c (mb_pushpull.c) */
    uint8_t rxbuf[65536];
};

/* After every call into the core: the outbox sent, push-pull started, events handed out, the
 * timer re-armed (mb.c). mb_pushpull.c, below mb.c, reaches it through mb->pump. */
void mb__pump(mb_t *mb);

/* The core's clock: monotonic, so a wall-clock step fires no timer (SPEC §7); the wall clock
 * goes beside it for sealing and the replay window. */
static inline int64_t mb__now(mb_t *mb)
{
    int64_t now = tt_mono_ns();
    swim_set_wall(mb->core, now, tt_wall_ns());
    return now;
}

/* A socket address as the core's. */
static inline void mb__to_swim(const struct sockaddr *sa, swim_addr_t *a)
{
    memset(a, 0, sizeof *a);
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        a->family = 6;
        a->port = ntohs(s6->sin6_port);
        memcpy(a->ip, &s6->sin6_addr, 16);
    } else {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        a->family = 4;
        a->port = ntohs(s4->sin_port);
        memcpy(a->ip, &s4->sin_addr, 4);
    }
}

/* The core's address as a socket address. */
static inline void mb__from_swim(const swim_addr_t *a, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (a->family == 6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(a->port);
        memcpy(&s6->sin6_addr, a->ip, 16);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(a->port);
        memcpy(&s4->sin_addr, a->ip, 4);
    }
}

/* mb_pushpull.c, below mb.c (it calls back only through mb->pump): a push-pull we start to sa,
 * and the listener's connection callback. */
void mb__pushpull_to(mb_t *mb, const struct sockaddr *sa);
void mb__on_connection(uv_stream_t *server, int status);
/* Closes c (once); the shell's pending count drops when its handles have closed. */
void mb__conn_close(conn_t *c);

#endif
