/*
 * One connection of the redis store (see store_int.h): a Redis primary that runs the scripts,
 * or a Sentinel that says where the primary is.
 *
 * connect() opens a connection (conn.c: TCP or a unix socket, TLS when the store has it) and, in
 * the same breath, pipelines the handshake: AUTH when the store has credentials for this kind of
 * server, then SCRIPT LOAD for both assets (and ROLE in Sentinel mode) on a Redis; on a
 * Sentinel, SENTINEL get-master-addr-by-name and SUBSCRIBE +switch-master. A node is *ready*
 * only once the whole handshake answered, within the handshake's deadline: a connection that
 * accepts but never answers (a stopped Redis, a port some other program holds, a TLS peer that
 * never finishes) is never used for decisions. A lost connection, a failed handshake or a stall
 * drops it, and a timer reconnects a node still wanted after a backoff that doubles from
 * backoff_min to backoff_max with jitter, and resets once a handshake completes.
 *
 * The node tells the store what happened through the events table the store handed it
 * (rds_node_events_t): ready, lost (with why), a Sentinel's primary, a Sentinel's message.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The connection is gone (or never came), `why` (NULL: dropped on purpose): the store hears of
 * it, then a reconnect. */
static void gone(rds_node_t *n, const char *why)
{
    n->ready = false;
    uv_timer_stop(&n->reconnect); /* the handshake's deadline */
    n->events->lost(n, why);
    schedule_reconnect(n);
}

/* Drops the connection: its commands waiting are answered NULL at once (conn.c). */
void rds__node_drop(rds_node_t *n, const char *why)
{
    if (n->conn != NULL) {
        rds_conn_t *c = n->conn;
        n->conn = NULL;
        n->store->stats.disconnects++;
        rds_conn_close(c);
    }
    gone(n, why);
}

void rds__node_name(const rds_node_t *n, char *out, size_t size)
{
    if (n->at.port)
        snprintf(out, size, "%s:%d", n->at.host, n->at.port);
    else
        snprintf(out, size, "%s", n->at.host);
}

/* ---- the connection's events -------------------------------------------------------------- */

static void on_conn_connected(void *ctx, rds_conn_t *c)
{
    (void)ctx;
    (void)c; /* ready comes with the handshake */
}

static void on_conn_closed(void *ctx, rds_conn_t *c, const char *why)
{
    rds_node_t *n = ctx;
    if (n->conn != c)
        return;
    n->conn = NULL;
    n->store->stats.disconnects++;
    gone(n, why);
}

static void on_conn_message(void *ctx, rds_conn_t *c, const redisReply *reply)
{
    rds_node_t *n = ctx;
    if (n->conn != c)
        return;
    n->last_read_ms = uv_now(n->store->loop);
    n->events->message(n, reply);
}

static const rds_conn_handler_t conn_handler = {
    .connected = on_conn_connected, .closed = on_conn_closed, .message = on_conn_message};

/* ---- the handshake ------------------------------------------------------------------------ */

/* Fails the handshake step `step` with Redis' (or our parser's) words: "redis: 10.0.0.1:6379:
 * AUTH as tokentriage: WRONGPASS invalid username-password pair or user is disabled.": the
 * address, the step and the reason, never a secret. */
static void refuse(rds_node_t *n, rds_call_kind_t step, const tt_err_t *err)
{
    static const char *const names[] = {[RDS_CALL_AUTH] = "AUTH",
                                        [RDS_CALL_SCRIPT_LOAD] = "SCRIPT LOAD",
                                        [RDS_CALL_ROLE] = "ROLE",
                                        [RDS_CALL_SENTINEL_ADDR] = "SENTINEL get-master-addr"};
    const rds_auth_t *a = n->sentinel ? &n->store->cred.sentinel : &n->store->cred.redis;
    char name[RDS_NODE_NAME_MAX], why[1024];
    rds__node_name(n, name, sizeof(name));
    const char *text = strncmp(err->message, "redis: ", 7) == 0 ? err->message + 7 : err->message;
    bool as = step == RDS_CALL_AUTH && a->user[0];
    snprintf(why, sizeof(why), "redis: %s%s: %s%s%s: %s", n->sentinel ? "Sentinel " : "", name,
             names[step], as ? " as " : "", as ? a->user : "", text);
    /* NOAUTH, or Redis 7 refusing an unauthenticated client's long SCRIPT LOAD ("ERR Protocol
     * error: unauthenticated bulk length") before it would say NOAUTH */
    if (strncmp(text, "NOAUTH", 6) == 0 || strstr(text, "unauthenticated"))
        snprintf(why + strlen(why), sizeof(why) - strlen(why),
                 " (NOAUTH: the server wants a password: set %s)",
                 n->sentinel ? "sentinel_password_file" : "password_file");
    rds__node_drop(n, why);
}

static void on_step(void *arg, rds_conn_t *c, const redisReply *reply)
{
    rds_node_t *n = arg;
    rds_store_t *s = n->store;
    if (n->conn != c || reply == NULL || n->step_next >= n->n_steps)
        return; /* an old connection's; the connection's end is told by on_conn_closed */
    n->last_read_ms = uv_now(s->loop);
    rds_call_kind_t step = n->steps[n->step_next++];
    tt_err_t err = {0};
    int rc = 0;
    switch (step) {
    case RDS_CALL_AUTH:
        rc = rds_reply_ok(reply, &err);
        break;
    case RDS_CALL_SCRIPT_LOAD: /* the SHA1 of an asset is the same on every node */
        rc = rds_reply_sha(reply, s->sha[n->step_next - 1 - (n->steps[0] == RDS_CALL_AUTH)], &err);
        break;
    case RDS_CALL_ROLE:
        rc = rds_role_is_primary(reply, &err);
        break;
    case RDS_CALL_SENTINEL_ADDR:
        rc = n->events->primary(n, reply, &err);
        if (n->conn != c)
            return; /* the store dropped it meanwhile */
        break;
    default:
        break;
    }
    if (rc < 0) {
        refuse(n, step, &err);
        return;
    }
    if (n->step_next == n->n_steps) {
        n->ready = true;
        uv_timer_stop(&n->reconnect);
        n->backoff_ms = s->backoff_min_ms;
        if (!n->sentinel)
            s->stats.connects++;
        n->events->ready(n);
    }
}

static int queue(rds_node_t *n, rds_call_kind_t kind, int argc, const char **argv,
                 const size_t *argvlen)
{
    if (n->n_steps == RDS_HANDSHAKE_MAX ||
        rds_conn_send_argv(n->conn, argc, argv, argvlen, on_step, n) < 0)
        return -1;
    n->steps[n->n_steps++] = kind;
    return 0;
}

/* AUTH first, when the store has credentials for this kind of server: the commands pipelined
 * after it are refused (NOAUTH) if it fails, and its own error is the one reported. */
static int queue_auth(rds_node_t *n)
{
    const rds_auth_t *a = n->sentinel ? &n->store->cred.sentinel : &n->store->cred.redis;
    if (a->password_len == 0)
        return 0;
    const char *argv[] = {"AUTH", a->user, a->password};
    const size_t len[] = {4, strlen(a->user), a->password_len};
    if (a->user[0] != '\0')
        return queue(n, RDS_CALL_AUTH, 3, argv, len);
    return queue(n, RDS_CALL_AUTH, 2, (const char *[]){"AUTH", a->password},
                 (const size_t[]){4, a->password_len});
}

static int send_handshake(rds_node_t *n)
{
    rds_store_t *s = n->store;
    n->n_steps = n->step_next = 0;
    if (queue_auth(n) < 0)
        return -1;
    if (n->sentinel) {
        const char *argv[] = {"SENTINEL", "get-master-addr-by-name", s->master};
        const size_t len[] = {8, 23, strlen(s->master)};
        if (queue(n, RDS_CALL_SENTINEL_ADDR, 3, argv, len) < 0)
            return -1;
        /* its messages come to events->message for as long as the connection lives */
        const char *sub[] = {"SUBSCRIBE", "+switch-master"};
        const size_t sublen[] = {9, 14};
        if (rds_conn_send_argv(n->conn, 2, sub, sublen, NULL, NULL) < 0)
            return -1;
        rds_conn_subscribed(n->conn);
        return 0;
    }
    for (int i = 0; i < RDS_SCRIPT_COUNT; i++) {
        const rds_script_t *script = rds_script((rds_script_id_t)i);
        const char *argv[] = {"SCRIPT", "LOAD", script->body};
        const size_t len[] = {6, 4, script->len};
        if (queue(n, RDS_CALL_SCRIPT_LOAD, 3, argv, len) < 0)
            return -1;
    }
    if (s->mode == RDS_MODE_SENTINEL) {
        const char *argv[] = {"ROLE"};
        const size_t len[] = {4};
        if (queue(n, RDS_CALL_ROLE, 1, argv, len) < 0)
            return -1;
    }
    return 0;
}

static void on_handshake_deadline(uv_timer_t *t)
{
    rds_node_t *n = t->data;
    if (n->conn == NULL || n->ready)
        return;
    char name[RDS_NODE_NAME_MAX], why[RDS_NODE_NAME_MAX + 640];
    rds__node_name(n, name, sizeof(name));
    const char *stage = rds_conn_stage(n->conn), *route = rds_conn_route(n->conn);
    snprintf(why, sizeof(why), "redis: %s%s: no handshake within %llu ms (still %s%s%s%s)",
             n->sentinel ? "Sentinel " : "", name, (unsigned long long)n->store->handshake_ms,
             stage, route[0] ? ", at " : "", route,
             strcmp(stage, "in the TLS handshake") == 0 ? ": is it a TLS port?" : "");
    rds__node_drop(n, why);
}

static void connect_now(rds_node_t *n)
{
    rds_store_t *s = n->store;
    if (s->closing || n->conn != NULL || !n->wanted)
        return;
    uv_timer_stop(&n->reconnect);
    char name[RDS_NODE_NAME_MAX];
    rds__node_name(n, name, sizeof(name));
    rds_conn_options_t o = {
        .host = n->at.host,
        .port = n->at.port,
        .name = name,
        .tls = s->tls,
        .connect_ms = s->handshake_ms}; /* a name's addresses share the handshake's deadline */
    if (rds_conn_open(s->loop, &o, &conn_handler, n, &n->conn) < 0) {
        char err[RDS_NODE_NAME_MAX + 64];
        snprintf(err, sizeof(err), "redis: connect %s: cannot start a connection", name);
        n->conn = NULL;
        gone(n, err);
        return;
    }
    n->last_read_ms = uv_now(s->loop);
    if (send_handshake(n) < 0) {
        rds__node_drop(n, "redis: cannot queue the handshake");
        return;
    }
    uv_timer_start(&n->reconnect, on_handshake_deadline, s->handshake_ms, 0);
}

void rds__node_connect(rds_node_t *n)
{
    connect_now(n);
}

bool rds__node_usable(const rds_node_t *n)
{
    return n != NULL && n->ready && n->conn != NULL;
}

static bool same(const rds_endpoint_t *a, const rds_endpoint_t *b)
{
    return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* The node for `at`: an existing one, a new one, or one no longer wanted re-pointed (never one
 * that a connection still holds calls of). NULL when all RDS_CONNS_MAX are in use. Not connected
 * here: the caller sets wanted and calls rds__node_connect. */
rds_node_t *rds__node_get(rds_store_t *s, const rds_endpoint_t *at, bool sentinel)
{
    rds_node_t *spare = NULL;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        rds_node_t *n = s->nodes[i];
        if (n->sentinel == sentinel && same(&n->at, at))
            return n;
        if (spare == NULL && !n->wanted && n->conn == NULL && n->pending == 0 && n->queued == 0)
            spare = n;
    }
    if (spare == NULL && s->n_nodes < RDS_CONNS_MAX) {
        if ((spare = calloc(1, sizeof(*spare))) == NULL)
            return NULL;
        spare->store = s;
        spare->events = s->node_events;
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
        spare->told_up = false;
        spare->told[0] = '\0';
        memset(&spare->stats, 0, sizeof(spare->stats));
    }
    return spare;
}
