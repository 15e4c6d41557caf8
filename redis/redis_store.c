/*
 * The redis store's calls, on the daemon's libuv loop. Connections are node.c's (each one a
 * conn.c: plain or TLS), which node serves a key is topology.c's (store_int.h). This file is on
 * top and calls both; neither calls it by name: a node's events come up through the
 * rds_node_events_t table, topology's CLUSTER SLOTS through the rds_topology_hooks_t one, both
 * handed down from here, and topology's errors come back as return values.
 *
 * Batches. A caller's operation joins the open batch of its node, script and (in a cluster)
 * slot, or opens one; a batch is sent when the loop turn ends (an idle handle: the flush runs
 * before the loop next waits, so nothing waits on an event that may never come), or at once
 * when full (RDS_BATCH_MAX operations, or RDS_BATCH_KEY_BYTES of keys). Pipelined callers thus
 * share one script call, which runs their operations one after the other exactly as separate
 * calls in that order would, and answers each its own result or its own error. The command is
 * written once per batch, as RESP (rds_batch_format), and handed to the connection as it is.
 * Per key, order is kept: at most one batch per (node, slot, script) is open, batches are sent
 * in the order they opened, and a connection sends in order.
 *
 * Life of a call. A call is a slot holding its own copy of the command's data. The connection
 * owns the slot from the moment the command is queued until its reply function runs (with the
 * reply, or with NULL when the connection goes), and only then is the slot released. Independently
 * each caller is answered exactly once: by the reply, or by the timeout, or with RDS_EUNAVAILABLE
 * when its node went between the operation and the flush. Every sent call sits on a waiting
 * list in send order, which is deadline order since the timeout is one constant, so one uv
 * timer armed for the head serves them all; a call that is redirected keeps its place and its
 * deadline. When the head expires its callers get RDS_ETIMEDOUT and the slot stays with the
 * connection until the late reply (discarded) arrives. If nothing at all has been read on the
 * call's connection for a whole timeout when it expires, that connection is stalled: it is
 * dropped (its slots come back through the NULL replies) and re-made.
 *
 * Redirects (Redis Cluster). A batch's keys share a slot, so a MOVED or ASK moves all of it.
 * MOVED: the slot now lives elsewhere; the route is updated, a map refresh is asked for, and the
 * call re-sent there. ASK: the slot is migrating; the call is re-sent to the target after
 * ASKING, and the route stays. At most RDS_REDIRECTS_MAX per call. TRYAGAIN and CLUSTERDOWN are
 * Redis' errors like any other: every caller of the batch gets it, and its posture decides.
 *
 * Bounds: at most max_in_flight operations per node (open, sent, and timed out but unanswered
 * by Redis), so a Redis that stops answering cannot make us buffer without bound; past that,
 * operations are refused at once. While the node a key routes to is not ready, operations are
 * refused at once (RDS_EUNAVAILABLE) so the caller's posture decides without waiting.
 *
 * NOSCRIPT (a SCRIPT FLUSH, a failover to a node that never saw the script): the call is
 * re-sent once as EVAL with the full body, which also puts the script back into Redis' cache.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

#define DEFAULT_TIMEOUT_NS (INT64_C(50) * 1000000)
#define DEFAULT_BACKOFF_MIN_NS (INT64_C(25) * 1000000)
#define DEFAULT_BACKOFF_MAX_NS (INT64_C(2000) * 1000000)
#define DEFAULT_MAX_IN_FLIGHT 4096

/* ---- slots, the waiting list, the deadline timer ------------------------------------------ */

static void set_error(rds_store_t *s, const char *what)
{
    snprintf(s->stats.last_error, sizeof(s->stats.last_error), "%s", what);
}

/* Tells RDS_EVENT_UP/DOWN when rds_store_ready changed since last told. */
static void check_ready(rds_store_t *s)
{
    bool ready = rds__topology_ready(s);
    if (s->closing || ready == s->told_ready)
        return;
    s->told_ready = ready;
    if (s->on_event != NULL)
        s->on_event(s->data, ready ? RDS_EVENT_UP : RDS_EVENT_DOWN, "",
                    ready ? "" : s->stats.last_error);
}

/* A node's transition (up: NULL why; down: why, or NULL when dropped on purpose): told to the
 * owner once per change, and the store's own up/down after it. */
static void node_event(rds_node_t *n, bool up, const char *why)
{
    rds_store_t *s = n->store;
    char name[RDS_NODE_NAME_MAX];
    rds__node_name(n, name, sizeof(name));
    if (up) {
        n->told_up = true;
        n->told[0] = '\0';
        if (s->on_event != NULL)
            s->on_event(s->data, RDS_EVENT_NODE_UP, name, rds_conn_route(n->conn));
    } else if (why != NULL && !s->closing &&
               (n->told_up || strncmp(n->told, why, sizeof(n->told) - 1) != 0)) {
        n->told_up = false;
        snprintf(n->told, sizeof(n->told), "%s", why);
        if (s->on_event != NULL)
            s->on_event(s->data, RDS_EVENT_NODE_DOWN, name, why);
    }
    check_ready(s);
}

static void free_store_if_done(rds_store_t *s)
{
    if (!s->closing || s->live > 0 || s->handles_open > 0)
        return;
    while (s->free_slots) {
        rds_call_t *c = s->free_slots;
        s->free_slots = c->next_free;
        free(c);
    }
    for (uint32_t i = 0; i < s->n_nodes; i++)
        free(s->nodes[i]);
    free(s->scratch);
    free(s->out);
    rds_credentials_wipe(&s->cred);
    rds_tls_free(s->tls);
    free(s);
}

static rds_call_t *acquire(rds_store_t *s)
{
    rds_call_t *c = s->free_slots;
    if (c != NULL)
        s->free_slots = c->next_free;
    else if ((c = malloc(sizeof(*c))) == NULL)
        return NULL;
    memset(c, 0, offsetof(rds_call_t, caller));
    tt_queue_init(&c->wait);
    c->slot = -1;
    c->store = s;
    s->live++;
    return c;
}

static void unlink_waiting(rds_call_t *c)
{
    tt_queue_remove(&c->wait);
}

/* The oldest call on the waiting list, NULL when none. */
static rds_call_t *oldest_waiting(const rds_store_t *s)
{
    return tt_queue_empty(&s->waiting)
               ? NULL
               : tt_queue_data(tt_queue_head(&s->waiting), rds_call_t, wait);
}

/* Returns the slot to the free list; the store may be freed here when it is closing. */
static void release(rds_call_t *c)
{
    rds_store_t *s = c->store;
    unlink_waiting(c);
    c->next_free = s->free_slots;
    s->free_slots = c;
    s->live--;
    free_store_if_done(s);
}

static void on_deadline(uv_timer_t *t);

static void arm_deadline(rds_store_t *s)
{
    rds_call_t *head = oldest_waiting(s);
    if (s->closing || head == NULL)
        return;
    uint64_t now = uv_now(s->loop);
    uint64_t wait = head->deadline_ms > now ? head->deadline_ms - now : 0;
    uv_timer_start(&s->deadline, on_deadline, wait, 0);
}

static void push_waiting(rds_call_t *c)
{
    rds_store_t *s = c->store;
    c->deadline_ms = uv_now(s->loop) + s->timeout_ms;
    tt_queue_insert_tail(&s->waiting, &c->wait);
    if (!uv_is_active((uv_handle_t *)&s->deadline))
        arm_deadline(s);
}

/* Answers caller i of a batch (once) and counts the outcome. The slot stays where it is. */
static void answer_one(rds_call_t *c, uint32_t i, int status, const ra_result_t *result,
                       const char *error)
{
    rds_store_t *s = c->store;
    rds_done_fn *done = c->caller[i].done;
    if (done == NULL)
        return;
    c->caller[i].done = NULL;
    if (--c->unanswered == 0)
        unlink_waiting(c);
    switch (status) {
    case 0:
        s->stats.decided++;
        break;
    case RDS_ETIMEDOUT:
        s->stats.timeouts++;
        break;
    case RDS_ECONN:
    case RDS_ECLOSED:
        s->stats.lost++;
        break;
    case RDS_EUNAVAILABLE:
        s->stats.unavailable++;
        break;
    default:
        s->stats.errors++;
        break;
    }
    if (status < 0) {
        set_error(s, error);
        if (c->node != NULL && status != RDS_ECLOSED)
            c->node->stats.errors++;
    }
    rds_outcome_t out = {.status = status, .error = error, .data = s->data};
    if (result)
        out.result = *result;
    done(c->caller[i].arg, &out);
}

/* Answers every caller of a batch not answered yet with the same reason. */
static void answer_all(rds_call_t *c, int status, const char *error)
{
    unlink_waiting(c);
    for (uint32_t i = 0; i < c->batch.n; i++)
        answer_one(c, i, status, NULL, error);
}

static void on_deadline(uv_timer_t *t)
{
    rds_store_t *s = t->data;
    uint64_t now = uv_now(s->loop);
    rds_call_t *c;
    while ((c = oldest_waiting(s)) != NULL && c->deadline_ms <= now) {
        rds_node_t *n = c->node;
        unlink_waiting(c);
        if (n != NULL && n->conn != NULL && n->conn == c->conn &&
            now - n->last_read_ms >= s->timeout_ms)
            n->stalled = true;
        if (c->kind == RDS_CALL_DECIDE) /* the connection keeps the slot until the reply or drop */
            answer_all(c, RDS_ETIMEDOUT, "redis: no reply within the timeout");
        else if (c->kind == RDS_CALL_SLOTS)
            rds__refresh_failed(s);
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        rds_node_t *n = s->nodes[i];
        if (n->stalled) {
            n->stalled = false;
            char name[RDS_NODE_NAME_MAX], why[RDS_NODE_NAME_MAX + 96];
            rds__node_name(n, name, sizeof(name));
            snprintf(why, sizeof(why),
                     "redis: %s: nothing read for a whole timeout: connection dropped as stalled",
                     name);
            rds__node_drop(n, why);
        }
    }
    arm_deadline(s);
}

/* ---- sending and replies ------------------------------------------------------------------ */

/* Sends (or re-sends) a batch on node n, after ASKING when asking, as EVAL once retried after
 * NOSCRIPT. 0 or -1. */
static void on_reply(void *arg, rds_conn_t *conn, const redisReply *reply);

static int send_on(rds_call_t *c, rds_node_t *n, bool asking)
{
    static const char asking_cmd[] = "*1\r\n$6\r\nASKING\r\n";
    rds_store_t *s = c->store;
    if (n->conn == NULL || n->pending >= s->max_in_flight)
        return -1;
    size_t need = rds_batch_bound(&c->batch, c->retried);
    if (need > s->out_cap) {
        char *out = realloc(s->out, need);
        if (out == NULL)
            return -1;
        s->out = out;
        s->out_cap = need;
    }
    size_t len = rds_batch_format(&c->batch, s->sha[c->batch.script], c->retried, s->out);
    if (asking && rds_conn_send(n->conn, asking_cmd, sizeof(asking_cmd) - 1, NULL, NULL) < 0)
        return -1;
    if (rds_conn_send(n->conn, s->out, len, on_reply, c) < 0)
        return -1;
    c->node = n;
    c->conn = n->conn;
    c->sent_ns = uv_hrtime();
    n->pending += c->batch.n;
    n->stats.calls++;
    return 0;
}

/* A MOVED or ASK reply: follows it when the call may still go somewhere. Returns true when the
 * call was re-sent (a connection holds the slot again). */
static bool follow(rds_call_t *c, const redisReply *reply, tt_err_t *err)
{
    rds_store_t *s = c->store;
    rds_redirect_t rd;
    if (rds_redirect_parse(reply->str, reply->len, &c->node->at, &rd, err) < 0 ||
        rd.kind == RDS_REDIRECT_NONE)
        return false;
    c->node->stats.redirects++;
    s->stats.redirects++;
    rds_node_t *to = rds__node_get(s, &rd.to, false);
    if (to != NULL && !to->wanted) {
        to->wanted = true;
        rds__node_connect(to);
    }
    if (rd.kind == RDS_REDIRECT_MOVED)
        rds__moved(s, rd.slot, to);
    if (to == NULL) {
        tt_err_set(err, RDS_EREDIS, "",
                   "redis: redirected to %.80s:%d, beyond the connections a store holds",
                   rd.to.host, rd.to.port);
        return false;
    }
    if (c->redirects >= RDS_REDIRECTS_MAX) {
        tt_err_set(err, RDS_EREDIS, "", "redis: still redirected after %d redirects (slot %d)",
                   RDS_REDIRECTS_MAX, rd.slot);
        return false;
    }
    c->redirects++;
    if (send_on(c, to, rd.kind == RDS_REDIRECT_ASK) == 0)
        return true;
    tt_err_set(err, RDS_EREDIS, "", "redis: redirected to %.80s:%d, which is not connected",
               rd.to.host, rd.to.port);
    return false;
}

static void on_decide_reply(const rds_conn_t *conn, rds_call_t *c, const redisReply *reply)
{
    rds_node_t *n = c->node;
    tt_err_t err = {0};
    if (reply != NULL) {
        n->stats.replies++;
        n->stats.latency_ns += uv_hrtime() - c->sent_ns;
    }
    if (reply != NULL && reply->type == REDIS_REPLY_ERROR && n->conn == conn) {
        if (follow(c, reply, &err))
            return;
        if (reply->len >= 11 && memcmp(reply->str, "CLUSTERDOWN", 11) == 0)
            rds__refresh_soon(c->store);
    }
    int rc = err.code < 0 ? err.code : rds_batch_reply(reply, c->batch.n, &err);
    if (rc == RDS_ENOSCRIPT && !c->retried && n->conn == conn) {
        c->retried = true;
        c->store->stats.reloads++;
        if (send_on(c, n, false) == 0)
            return; /* the slot stays with the connection */
    }
    if (rc < 0) {
        answer_all(c, rc, err.message);
    } else {
        for (uint32_t i = 0; i < c->batch.n; i++) {
            ra_result_t result;
            int one = rds_reply_read(reply->element[i], &result, &err);
            answer_one(c, i, one, one == 0 ? &result : NULL, err.message);
        }
    }
    release(c);
}

static void on_reply(void *arg, rds_conn_t *conn, const redisReply *reply)
{
    rds_call_t *c = arg;
    rds_node_t *n = c->node;
    if (reply != NULL && n->conn == conn)
        n->last_read_ms = uv_now(c->store->loop);
    if (c->kind == RDS_CALL_DECIDE) {
        n->pending -= c->batch.n;
        if (c->unanswered > 0)
            on_decide_reply(conn, c, reply);
        else
            release(c);
        return;
    }
    unlink_waiting(c);
    tt_err_t err;
    if (reply == NULL || n->conn != conn) /* NULL: the connection went, node.c has it */
        rds__refresh_failed(c->store);
    else if (rds__on_slots(c, reply, &err) < 0)
        set_error(c->store, err.message);
    else
        check_ready(c->store); /* a new route */
    release(c);
}

/* topology.c's hook: a command of the store's own (CLUSTER SLOTS), answered in on_reply. */
static int send_own(rds_node_t *n, rds_call_kind_t kind, int argc, const char **argv,
                    const size_t *argvlen)
{
    rds_call_t *c = acquire(n->store);
    if (c == NULL)
        return -1;
    c->kind = kind;
    c->node = n;
    c->conn = n->conn;
    push_waiting(c);
    if (rds_conn_send_argv(n->conn, argc, argv, argvlen, on_reply, c) < 0) {
        release(c);
        return -1;
    }
    return 0;
}

/* ---- the nodes' events (the table handed to each node) ------------------------------------ */

static void node_ready(rds_node_t *n)
{
    rds__topology_node_ready(n);
    node_event(n, true, NULL);
}

static void node_lost(rds_node_t *n, const char *why)
{
    if (why != NULL)
        set_error(n->store, why);
    node_event(n, false, why);
    rds__topology_node_lost(n);
}

static void node_message(rds_node_t *n, const redisReply *reply)
{
    tt_err_t err;
    if (rds__topology_message(n, reply, &err) < 0)
        set_error(n->store, err.message);
}

static const rds_node_events_t node_events = {.ready = node_ready,
                                              .lost = node_lost,
                                              .primary = rds__topology_primary,
                                              .message = node_message};

static const rds_topology_hooks_t topology_hooks = {.send = send_own};

/* ---- the public face ---------------------------------------------------------------------- */

static uint64_t ms_of(int64_t ns, int64_t fallback)
{
    if (ns <= 0)
        ns = fallback;
    uint64_t ms = (uint64_t)(ns + 999999) / 1000000;
    return ms ? ms : 1;
}

int rds_store_new(uv_loop_t *loop, const rds_options_t *o, rds_store_t **out, tt_err_t *err)
{
    *out = NULL;
    rds_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return tt_err_set(err, TT_ERR_NOMEM, "", "redis: out of memory");
    tt_queue_init(&s->waiting);
    int rc = rds__topology_parse(s, o, err);
    if (rc < 0) {
        free(s->scratch);
        free(s);
        return rc;
    }
    s->loop = loop;
    s->data = o->data;
    s->timeout_ms = ms_of(o->timeout_ns, DEFAULT_TIMEOUT_NS);
    s->handshake_ms = s->timeout_ms > 1000 ? s->timeout_ms : 1000;
    s->backoff_min_ms = ms_of(o->backoff_min_ns, DEFAULT_BACKOFF_MIN_NS);
    s->backoff_max_ms = ms_of(o->backoff_max_ns, DEFAULT_BACKOFF_MAX_NS);
    if (s->backoff_max_ms < s->backoff_min_ms)
        s->backoff_max_ms = s->backoff_min_ms;
    s->max_in_flight = o->max_in_flight ? o->max_in_flight : DEFAULT_MAX_IN_FLIGHT;
    if (o->credentials != NULL)
        s->cred = *o->credentials;
    s->on_event = o->on_event;
    s->node_events = &node_events;
    s->topology_hooks = &topology_hooks;
    if (o->tls != NULL && (rc = rds_tls_new(o->tls, &s->tls, err)) < 0) {
        rds_credentials_wipe(&s->cred);
        free(s->scratch);
        free(s);
        return rc;
    }
    s->jitter = uv_hrtime() | 1;
    /* a store is often made before its loop runs (a daemon's start): the loop's now is then when
     * it last ran, maybe seconds ago, and the first handshake's deadline would pass at once */
    uv_update_time(loop);
    uv_timer_init(loop, &s->deadline);
    uv_timer_init(loop, &s->refresh);
    uv_idle_init(loop, &s->flush);
    s->deadline.data = s->refresh.data = s->flush.data = s;
    s->handles_open = 3;
    rds__topology_start(s);
    *out = s;
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    rds_store_t *s = ((rds_node_t *)h->data)->store;
    s->handles_open--;
    free_store_if_done(s);
}

static void on_store_handle_closed(uv_handle_t *h)
{
    rds_store_t *s = h->data;
    s->handles_open--;
    free_store_if_done(s);
}

void rds_store_close(rds_store_t *s)
{
    if (s == NULL || s->closing)
        return;
    s->closing = true;
    memset(s->bucket, 0, sizeof(s->bucket));
    while (s->open_head != NULL) { /* never sent: nothing holds them */
        rds_call_t *c = s->open_head;
        s->open_head = c->open_next;
        c->node->queued -= c->batch.n;
        answer_all(c, RDS_ECLOSED, "redis: store closed");
        release(c);
    }
    for (rds_call_t *c; (c = oldest_waiting(s)) != NULL;) {
        unlink_waiting(c);
        if (c->kind == RDS_CALL_DECIDE)
            answer_all(c, RDS_ECLOSED, "redis: store closed");
    }
    uint32_t n_nodes = s->n_nodes; /* the store may be freed by the last close callback */
    for (uint32_t i = 0; i < n_nodes; i++) {
        rds_node_t *n = s->nodes[i];
        n->wanted = false;
        rds__node_drop(n, "redis: store closed");
    }
    uv_close((uv_handle_t *)&s->deadline, on_store_handle_closed);
    uv_close((uv_handle_t *)&s->refresh, on_store_handle_closed);
    uv_close((uv_handle_t *)&s->flush, on_store_handle_closed);
    for (uint32_t i = 0; i < n_nodes; i++)
        uv_close((uv_handle_t *)&s->nodes[i]->reconnect, on_handle_closed);
}

/* ---- batching ----------------------------------------------------------------------------- */

static uint32_t bucket_of(const rds_node_t *n, int slot, int script)
{
    return ((uint32_t)slot * 31u + n->index * 7u + (uint32_t)script) & (RDS_OPEN_BUCKETS - 1);
}

/* Sends an open batch (already off the open list and its bucket), or answers its callers when
 * its node went meanwhile. */
static void flush_one(rds_call_t *c)
{
    rds_store_t *s = c->store;
    rds_node_t *n = c->node;
    n->queued -= c->batch.n;
    if (!rds__node_usable(n) || send_on(c, n, false) < 0) {
        answer_all(c, RDS_EUNAVAILABLE, "redis: the connection went before the call was sent");
        release(c);
        return;
    }
    push_waiting(c);
    s->stats.calls += c->batch.n;
    s->stats.batches++;
}

/* The end of a loop turn: sends every open batch, oldest first. Callers answered from here (a
 * node gone) may open new batches: those go in the next turn. */
static void on_flush(uv_idle_t *h)
{
    rds_store_t *s = h->data;
    uv_idle_stop(h);
    rds_call_t *c = s->open_head;
    for (rds_call_t *o = c; o != NULL; o = o->open_next)
        s->bucket[o->bucket_hash] = NULL;
    s->open_head = s->open_tail = NULL;
    while (c != NULL) {
        rds_call_t *next = c->open_next;
        flush_one(c);
        c = next;
    }
}

/* Takes the open batch for (n, slot, script) off its bucket: it stays on the open list, to be
 * sent in its turn, and the next operation for that key opens a new one. */
static void seal(rds_store_t *s, rds_call_t *c)
{
    rds_call_t **at = &s->bucket[c->bucket_hash];
    while (*at != c)
        at = &(*at)->bucket_next;
    *at = c->bucket_next;
}

/* The open batch that takes an operation for (n, slot, script): the one there is, or a new one.
 * NULL when out of memory. */
static rds_call_t *open_batch(rds_store_t *s, rds_node_t *n, int slot, int script)
{
    uint32_t h = bucket_of(n, slot, script);
    for (rds_call_t *c = s->bucket[h]; c != NULL; c = c->bucket_next)
        if (c->node == n && c->slot == slot && (int)c->batch.script == script)
            return c;
    rds_call_t *c = acquire(s);
    if (c == NULL)
        return NULL;
    c->kind = RDS_CALL_DECIDE;
    c->node = n;
    c->slot = slot;
    c->bucket_hash = h;
    rds_batch_init(&c->batch, (rds_script_id_t)script);
    c->bucket_next = s->bucket[h];
    s->bucket[h] = c;
    if (s->open_tail)
        s->open_tail->open_next = c;
    else
        s->open_head = c;
    s->open_tail = c;
    if (!uv_is_active((uv_handle_t *)&s->flush))
        uv_idle_start(&s->flush, on_flush);
    return c;
}

int rds_store_call(rds_store_t *s, const ra_limiter_t *l, const char *key, size_t keylen,
                   const rds_op_t *op, rds_done_fn *done, void *arg)
{
    if (s->closing)
        return RDS_ECLOSED;
    int script = rds_script_for(l);
    if (script < 0 || keylen > RDS_KEY_MAX ||
        (op->settle && script != RDS_SCRIPT_GCRA && l->algorithm != RA_ENVOY_WINDOW))
        return RDS_EARG;
    int slot = s->mode == RDS_MODE_CLUSTER ? rds_key_slot(key, keylen) : -1;
    rds_node_t *n = rds__route(s, slot);
    if (!rds__node_usable(n) || n->pending + n->queued >= s->max_in_flight) {
        s->stats.unavailable++;
        return rds__node_usable(n) ? RDS_EFULL : RDS_EUNAVAILABLE;
    }
    rds_call_t *c = open_batch(s, n, slot, script);
    if (c != NULL && rds_batch_add(&c->batch, l, key, keylen, op) < 0) {
        seal(s, c); /* full (its keys' bytes): it goes as it is, a new one takes this operation */
        c = open_batch(s, n, slot, script);
        if (c != NULL)
            rds_batch_add(&c->batch, l, key, keylen, op); /* an empty batch takes any key */
    }
    if (c == NULL)
        return RDS_EFULL;
    c->caller[c->batch.n - 1] = (rds_caller_t){done, arg};
    c->unanswered++;
    n->queued++;
    if (c->batch.n == RDS_BATCH_MAX)
        seal(s, c);
    return 0;
}

void rds_store_set_credentials(rds_store_t *s, const rds_credentials_t *c)
{
    rds_credentials_wipe(&s->cred);
    s->cred = *c;
}

void rds_store_set_tls(rds_store_t *s, rds_tls_t *tls)
{
    rds_tls_t *old = s->tls;
    s->tls = tls;
    rds_tls_free(old);
}

bool rds_store_ready(const rds_store_t *s)
{
    return rds__topology_ready(s);
}

void rds_store_stats(const rds_store_t *s, rds_stats_t *out)
{
    *out = s->stats;
    out->ready = rds_store_ready(s);
}

size_t rds_store_nodes(const rds_store_t *s, rds_node_stats_t *out, size_t max)
{
    size_t k = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const rds_node_t *n = s->nodes[i];
        if (!n->wanted)
            continue;
        if (k < max) {
            out[k] = n->stats;
            if (n->at.port)
                snprintf(out[k].node, sizeof(out[k].node), "%s:%d", n->at.host, n->at.port);
            else
                snprintf(out[k].node, sizeof(out[k].node), "%s", n->at.host);
            out[k].ready = rds__node_usable(n);
            out[k].sentinel = n->sentinel;
        }
        k++;
    }
    return k;
}
