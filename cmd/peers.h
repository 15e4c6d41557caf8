/*
 * peers: every other replica's `fleet` answer, for `tokentriage fleet --all`. Each replica
 * serves the answer its socket gives as GET /v1/fleet on its HTTP listener (msgpack); this asks
 * all of them at once and bounds each: one deadline for the whole gathering, at most
 * PEER_ANSWER_MAX bytes an answer, and an answer is used only when it is one whole msgpack map
 * with a `node` string, an `n` integer and a `limits` array of maps. A peer that fails any of
 * these gets its reason, and the others are not held up.
 */
#ifndef TT_CMD_PEERS_H
#define TT_CMD_PEERS_H

#include <stddef.h>
#include <stdint.h>

#define PEER_ANSWER_MAX (1024 * 1024)

typedef struct peer {
    char id[160];    /* the member's node id, from the local replica's `members` */
    char state[16];  /* its state in that view */
    char host[64];   /* the member's address without its gossip port */
    int port;        /* where its HTTP listener is */
    char error[160]; /* "" when it answered; else what went wrong */
    uint8_t *body;   /* the answer (owned: peers_free), when error is "" */
    size_t len;
} peer_t;

/* Asks every peer for GET /v1/fleet, all within timeout_ms. Each ends with an answer or an
 * error. Returns 0, or -1 when memory ran out. */
int peers_fetch(peer_t *peers, size_t n, int timeout_ms);

/* Checks a fleet answer's shape (see above): NULL when it is one, else what is wrong. */
const char *peers_check_answer(const uint8_t *body, size_t len);

void peers_free(peer_t *peers, size_t n);

#endif
