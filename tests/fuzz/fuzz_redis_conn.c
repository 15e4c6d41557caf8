/*
 * libFuzzer target for the redis store's connection (redis/conn.c) reading what a server sends:
 * RESP bytes, in chunks the input chooses, through hiredis' reader into the arena (redis/reply.c,
 * with its bounds) and out to the commands waiting, a subscription's handler, or a reason to
 * drop the connection. The real objects: a connection opened on a loop (to a socket path that
 * does not exist; it is closed before the loop runs) with a few commands queued, the bytes fed
 * as if read. Properties beyond "no crash, no leak, no UB": each command is answered at most
 * once, in the order sent, and exactly once when the connection closes; a closed connection
 * calls nothing more, and says why once; a message reaches the handler only when subscribed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

#define CMDS 8

typedef struct state {
    int answered[CMDS];
    int order[CMDS], n_order;
    int closed, messages;
    bool subscribed;
} state_t;

typedef struct cmd {
    state_t *st;
    int i;
} cmd_t;

static void on_reply(void *arg, rds_conn_t *c, const redisReply *reply)
{
    (void)c;
    cmd_t *cmd = arg;
    state_t *st = cmd->st;
    check(st->closed == 0 || reply == NULL);
    st->answered[cmd->i]++;
    st->order[st->n_order++] = cmd->i;
    if (reply != NULL) /* a reply is whole: every element there, strings terminated */
        check(reply->type != REDIS_REPLY_ARRAY || reply->elements == 0 ||
              reply->element[reply->elements - 1] != NULL);
}

static void on_closed(void *ctx, rds_conn_t *c, const char *why)
{
    (void)c;
    state_t *st = ctx;
    st->closed++;
    check(why != NULL && strncmp(why, "redis: ", 7) == 0);
}

static void on_message(void *ctx, rds_conn_t *c, const redisReply *reply)
{
    (void)c;
    (void)reply;
    state_t *st = ctx;
    check(st->subscribed);
    st->messages++;
}

static const rds_conn_handler_t handler = {.closed = on_closed, .message = on_message};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uv_loop_t loop;
    static bool loop_ready;
    if (!loop_ready)
        loop_ready = uv_loop_init(&loop) == 0;
    if (size < 2)
        return 0;
    state_t st = {0};
    cmd_t cmds[CMDS];
    int n = data[0] % (CMDS + 1);
    st.subscribed = data[1] & 1;
    size_t max_in = data[1] & 2 ? 64 : 0; /* a small bound, or the default */
    data += 2;
    size -= 2;
    rds_conn_options_t o = {
        .host = "/nonexistent/tt-fuzz.sock", .port = 0, .name = "fuzz", .max_in = max_in};
    rds_conn_t *c;
    check(rds_conn_open(&loop, &o, &handler, &st, &c) == 0);
    for (int i = 0; i < n; i++) {
        cmds[i] = (cmd_t){&st, i};
        check(rds_conn_send(c, "*1\r\n$4\r\nPING\r\n", 14, on_reply, &cmds[i]) == 0);
    }
    if (st.subscribed)
        rds_conn_subscribed(c);
    while (size > 0 && st.closed == 0) {
        size_t chunk = 1 + data[0] % 97; /* the chunk's length, then its bytes */
        data++;
        size--;
        if (chunk > size)
            chunk = size;
        rds__conn_feed(c, (const char *)data, chunk);
        data += chunk;
        size -= chunk;
    }
    check(st.closed <= 1);
    for (int i = 0; i < st.n_order; i++)
        check(st.order[i] == i); /* in the order sent */
    if (st.closed == 0)
        rds_conn_close(c);
    for (int i = 0; i < n; i++)
        check(st.answered[i] == 1); /* closing answered the rest, once */
    uv_run(&loop, UV_RUN_DEFAULT);  /* the handle's close: the connection frees itself */
    return 0;
}
