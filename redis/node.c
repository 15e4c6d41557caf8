/*
 * One connection of the redis store (see store_int.h): a Redis primary that runs the scripts,
 * or a Sentinel that says where the primary is.
 *
 * connect() starts a non-blocking connect and, in the same breath, pipelines the handshake:
 * SCRIPT LOAD for both assets (and ROLE in Sentinel mode) on a Redis; on a Sentinel,
 * SENTINEL get-master-addr-by-name and SUBSCRIBE +switch-master. A node is *ready* only once
 * the whole handshake answered: a connection that accepts but never answers (a stopped Redis,
 * a port some other program holds) is never used for decisions. A lost connection, a failed
 * handshake or a stall drops it, and a timer reconnects a node still wanted after a backoff
 * that doubles from backoff_min to backoff_max with jitter, and resets once a handshake
 * completes. (hiredis 0.14's libuv adapter drops poll errors, so a connect to a dead port is
 * often never reported: the handshake's deadline is what notices it.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>

#include "store_int.h"

static void connect_now(rds_node_t *n);

static void on_reconnect(uv_timer_t *t)
{
    connect_now(t->data);
}

static void schedule_reconnect(rds_node_t *n)
{
    rds_store_t *s = n->store;
    if (s->closing || !n->wanted || uv_is_active((uv_handle_t *)&n->reconnect))
        return;
    s->jitter ^= s->jitter << 13;
    s->jitter ^= s->jitter >> 7;
    s->jitter ^= s->jitter << 17;
    uint64_t delay = n->backoff_ms / 2 + s->jitter % (n->backoff_ms / 2 + 1); /* [b/2, b] */
    n->backoff_ms = n->backoff_ms * 2 > s->backoff_max_ms ? s->backoff_max_ms : n->backoff_ms * 2;
    uv_timer_start(&n->reconnect, on_reconnect, delay, 0);
}

/* The connection is gone (or never came): the topology hears of it, then a reconnect. */
static void gone(rds_node_t *n)
{
    n->ready = false;
    rds__node_lost(n);
    schedule_reconnect(n);
}

/* Drops the connection: its calls come back through NULL replies. hiredis reports the end
 * (on_disconnect) only for a connection that completed its connect, so the rest is done here. */
void rds__node_drop(rds_node_t *n, const char *why)
{
    if (why != NULL)
        rds__set_error(n->store, why);
    if (n->ac != NULL) {
        redisAsyncContext *ac = n->ac;
        n->ac = NULL;
        n->store->stats.disconnects++;
        redisAsyncFree(ac); /* deferred by hiredis when called from one of its callbacks */
    }
    gone(n);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    rds_node_t *n = ac->data;
    if (status == REDIS_OK)
        return; /* ready comes with the handshake */
    char err[RDS_NODE_NAME_MAX + 160];
    snprintf(err, sizeof(err), "redis: connect %s: %.120s", n->at.host, ac->errstr);
    rds__set_error(n->store, err);
    if (n->ac == ac) { /* hiredis frees the context after this callback */
        n->ac = NULL;
        n->store->stats.disconnects++;
        gone(n);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    rds_node_t *n = ac->data;
    if (status != REDIS_OK) {
        /* a reply refused by reply.c fails hiredis' reader as out of memory: say what it was */
        const char *why = n->replies.refused[0] ? n->replies.refused : ac->errstr;
        char err[RDS_NODE_NAME_MAX + 160];
        snprintf(err, sizeof(err), "redis: connection to %s lost: %.120s", n->at.host, why);
        rds__set_error(n->store, err);
    }
    if (n->ac == ac) {
        n->ac = NULL;
        n->store->stats.disconnects++;
        gone(n);
    }
}

int rds__node_send(rds_node_t *n, rds_call_kind_t kind, int script, int argc, const char **argv,
                   const size_t *argvlen)
{
    rds_call_t *c = rds__acquire(n->store);
    if (c == NULL)
        return -1;
    c->kind = kind;
    c->script = script;
    c->node = n;
    c->conn = n->ac;
    rds__push_waiting(c);
    if (redisAsyncCommandArgv(n->ac, rds__on_reply, c, argc, argv, argvlen) != REDIS_OK) {
        rds__release(c);
        return -1;
    }
    return 0;
}

/* Queues one handshake command on the new connection. */
static int queue(rds_node_t *n, rds_call_kind_t kind, int script, int argc, const char **argv,
                 const size_t *argvlen)
{
    if (rds__node_send(n, kind, script, argc, argv, argvlen) < 0)
        return -1;
    n->handshake_left++;
    return 0;
}

static int send_handshake(rds_node_t *n)
{
    rds_store_t *s = n->store;
    n->handshake_left = 0;
    if (n->sentinel) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", s->master};
        const size_t len[] = {8, 23, strlen(s->master)};
        if (queue(n, RDS_CALL_SENTINEL_ADDR, 0, 3, argv, len) < 0)
            return -1;
        /* its messages come to rds__on_switch_master for as long as the connection lives */
        return redisAsyncCommand(n->ac, rds__on_switch_master, n, "SUBSCRIBE +switch-master") ==
                       REDIS_OK
                   ? 0
                   : -1;
    }
    for (int i = 0; i < RDS_SCRIPT_COUNT; i++) {
        const rds_script_t *script = rds_script((rds_script_id_t)i);
        const char *argv[] = {"SCRIPT", "LOAD", script->body};
        const size_t len[] = {6, 4, script->len};
        if (queue(n, RDS_CALL_SCRIPT_LOAD, i, 3, argv, len) < 0)
            return -1;
    }
    if (s->mode == RDS_MODE_SENTINEL) {
        const char *argv[] = {"ROLE"};
        const size_t len[] = {4};
        if (queue(n, RDS_CALL_ROLE, 0, 1, argv, len) < 0)
            return -1;
    }
    return 0;
}

static void connect_now(rds_node_t *n)
{
    rds_store_t *s = n->store;
    if (s->closing || n->ac != NULL || !n->wanted)
        return;
    uv_timer_stop(&n->reconnect);
    redisAsyncContext *ac =
        n->at.port ? redisAsyncConnect(n->at.host, n->at.port) : redisAsyncConnectUnix(n->at.host);
    if (ac == NULL || ac->err) {
        char err[RDS_NODE_NAME_MAX + 160];
        snprintf(err, sizeof(err), "redis: connect %.200s: %.100s", n->at.host,
                 ac ? ac->errstr : "out of memory");
        rds__set_error(s, err);
        if (ac)
            redisAsyncFree(ac);
        gone(n);
        return;
    }
    ac->data = n;
    rds__replies_attach(&n->replies, ac->c.reader, ac);
    if (redisLibuvAttach(ac, s->loop) != REDIS_OK) {
        rds__set_error(s, "redis: cannot attach to the event loop");
        redisAsyncFree(ac);
        gone(n);
        return;
    }
    if (n->at.port != 0) /* TCP keepalive: a Sentinel subscription sends nothing for hours */
        redisEnableKeepAlive(&ac->c);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    n->ac = ac;
    n->last_read_ms = uv_now(s->loop);
    if (send_handshake(n) < 0)
        rds__node_drop(n, "redis: cannot queue the handshake");
}

void rds__node_connect(rds_node_t *n)
{
    connect_now(n);
}

void rds__node_handshake_done(rds_node_t *n, rds_call_t *c, const redisReply *reply)
{
    rds_store_t *s = n->store;
    tt_err_t err;
    int rc = 0;
    if (c->kind == RDS_CALL_SCRIPT_LOAD) {
        /* the SHA1 of an asset is the same on every node */
        rc = rds_reply_sha(reply, s->sha[c->script], &err);
    } else if (c->kind == RDS_CALL_ROLE) {
        rc = rds_role_is_primary(reply, &err);
    }
    if (rc < 0) {
        rds__node_drop(n, err.message);
        return;
    }
    if (--n->handshake_left == 0 && n->ac != NULL) {
        n->ready = true;
        n->backoff_ms = s->backoff_min_ms;
        if (!n->sentinel)
            s->stats.connects++;
        rds__node_ready(n);
    }
}

bool rds__node_usable(const rds_node_t *n)
{
    return n != NULL && n->ready && n->ac != NULL;
}

static bool same(const rds_endpoint_t *a, const rds_endpoint_t *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* The node for `at`: an existing one, a new one, or one no longer wanted re-pointed (never one
 * that hiredis still holds calls of). NULL when all RDS_CONNS_MAX are in use. Not connected
 * here: the caller sets wanted and calls rds__node_connect. */
rds_node_t *rds__node_get(rds_store_t *s, const rds_endpoint_t *at, bool sentinel)
{
    rds_node_t *spare = NULL;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        rds_node_t *n = s->nodes[i];
        if (n->sentinel == sentinel && same(&n->at, at))
            return n;
        if (spare == NULL && !n->wanted && n->ac == NULL && n->pending == 0 && n->queued == 0)
            spare = n;
    }
    if (spare == NULL && s->n_nodes < RDS_CONNS_MAX) {
        if ((spare = calloc(1, sizeof(*spare))) == NULL)
            return NULL;
        spare->store = s;
        spare->index = s->n_nodes;
        uv_timer_init(s->loop, &spare->reconnect);
        spare->reconnect.data = spare;
        s->handles_open++;
        s->nodes[s->n_nodes++] = spare;
    }
    if (spare != NULL) {
        uv_timer_stop(&spare->reconnect);
        spare->at = *at;
        spare->sentinel = sentinel;
        spare->backoff_ms = s->backoff_min_ms;
        memset(&spare->stats, 0, sizeof(spare->stats));
    }
    return spare;
}
