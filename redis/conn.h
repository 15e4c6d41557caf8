/*
 * rds conn: one RESP connection on the daemon's libuv loop, plain or TLS, with the store's
 * arena-built replies (reply.c). Commands go out as RESP bytes the caller formatted and come
 * back in order to the function each was sent with; what the connection is told beyond that
 * (it is up, it is gone and why, a pub/sub message) goes up through the handler it was given.
 *
 * Why our own and not hiredis' async context: Debian 12's hiredis (0.14) speaks no TLS, and its
 * libuv adapter loses connect errors (a dead port is noticed only by a deadline) and lets a
 * socket's descriptor be reused while libuv still polls it. The parts of hiredis kept are the
 * ones that are good at their job: the reply reader (redisReader, fed here, building its
 * objects in the arena) and the command formatter. See docs/redis.md, "Credentials and TLS".
 *
 * Bounds: at most max_out bytes of commands wait to be written (a send past that is refused:
 * the caller's bound on calls in flight comes first), and a reply still incomplete may hold at
 * most max_in bytes of the connection's input: a server that sends an endless bulk string is
 * dropped, not buffered. An array header is bounded by reply.c as it is read.
 */
#ifndef TT_REDIS_CONN_H
#define TT_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <uv.h>

#include "tls.h"

typedef struct rds_conn rds_conn_t;

/* The connection's events, told to ctx. After `closed` (or rds_conn_close) the connection is
 * the library's: it frees itself once libuv has closed its handles. */
typedef struct rds_conn_handler {
    /* Connected (and the TLS handshake done): commands sent so far are on their way. */
    void (*connected)(void *ctx, rds_conn_t *c);
    /* Gone, for the reason in why ("redis: connection to host:port lost: ..."): every command
     * still waiting was answered NULL before this. Not told after rds_conn_close. */
    void (*closed)(void *ctx, rds_conn_t *c, const char *why);
    /* A reply no command waits for, on a connection that subscribed (rds_conn_subscribed). */
    void (*message)(void *ctx, rds_conn_t *c, const redisReply *reply);
} rds_conn_handler_t;

/* A command's answer: the reply (valid during the call only), or NULL when the connection went
 * first. The function may send on, or close, this connection or another. */
typedef void rds_conn_reply_fn(void *arg, rds_conn_t *c, const redisReply *reply);

typedef struct rds_conn_options {
    const char *host; /* a name or an address; with port 0, a unix socket path */
    int port;
    const char *name; /* how messages name it: "host:port" or the path */
    rds_tls_t *tls;   /* NULL: plain; else a TLS context, which the connection references */
    size_t max_out;   /* bytes waiting to be written; 0 = 64 MiB */
    size_t max_in;    /* bytes of one reply not yet complete; 0 = 64 MiB */
    /* a name resolving to several addresses: the time to connect to one of them, which each
     * address but the last may take an equal share of (0: each until it fails) */
    uint64_t connect_ms;
} rds_conn_options_t;

/* Starts connecting (a name is resolved off the loop, by libuv's threadpool, and each address
 * it resolves to is tried in turn until one connects). Returns 0 and the connection, which tells
 * `connected` or `closed` later, never from inside this call; or -1 (out of memory) with nothing to
 * free. */
int rds_conn_open(uv_loop_t *loop, const rds_conn_options_t *o, const rds_conn_handler_t *h,
                  void *ctx, rds_conn_t **out);

/* Queues one command (RESP bytes, copied) whose reply goes to fn(arg) (fn NULL: the reply is
 * read and dropped, as ASKING's). May be called before the connection is up. 0, or -1 when the
 * connection is closing or max_out would be passed (fn is then never called). */
int rds_conn_send(rds_conn_t *c, const char *cmd, size_t len, rds_conn_reply_fn *fn, void *arg);

/* The same for a command given as arguments (formatted with hiredis' redisFormatCommandArgv; a
 * password in it is wiped from every buffer it passed through). */
int rds_conn_send_argv(rds_conn_t *c, int argc, const char **argv, const size_t *argvlen,
                       rds_conn_reply_fn *fn, void *arg);

/* From now on a reply no command waits for is a message for the handler, not an error (after
 * SUBSCRIBE). */
void rds_conn_subscribed(rds_conn_t *c);

/* Where it is, for a message: "connecting", "in the TLS handshake", "waiting for the replies". */
const char *rds_conn_stage(const rds_conn_t *c);

/* "" while the first address of the name is tried (or reached); once it failed, the address
 * tried or reached now and those that failed before, for a message: "127.0.0.1:6379, after
 * [::1]:6379: connection refused". */
const char *rds_conn_route(const rds_conn_t *c);

/* Closes it: every command waiting is answered NULL (now, or after the reply being handled when
 * called from inside a reply function), `closed` is not told, and the connection frees itself
 * later. The caller forgets c. */
void rds_conn_close(rds_conn_t *c);

#endif
