/*
 * What mb.c and mb_pushpull.c share inside the membership shell: the shell's state and the
 * helpers both call. Not for anything outside membership/.
 */
#ifndef TT_MB_INT_H
#define TT_MB_INT_H

#include <sys/socket.h>

#include "mb.h"

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
    char advertise[80];
    mb_keyring_t keyring; /* n 0: plaintext */
    uint8_t rxbuf[65536];
};

/* The core's clock (monotonic), with the wall clock handed to the core beside it. */
int64_t mb__now(mb_t *mb);
/* After every call into the core: the outbox sent, push-pull started, events handed out,
 * the timer re-armed. */
void mb__pump(mb_t *mb);
void mb__to_swim(const struct sockaddr *sa, swim_addr_t *a);
void mb__from_swim(const swim_addr_t *a, struct sockaddr_storage *ss);

/* mb_pushpull.c: a push-pull we start to sa, and the listener's connection callback. */
void mb__pushpull_to(mb_t *mb, const struct sockaddr *sa);
void mb__on_connection(uv_stream_t *server, int status);
/* Closes c (once); the shell's pending count drops when its handles have closed. */
void mb__conn_close(conn_t *c);

#endif
