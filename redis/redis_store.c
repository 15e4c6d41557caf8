/*
 * The redis store's shell: hiredis' async API on the daemon's libuv loop.
 *
 * Life of a connection. connect() starts a non-blocking connect and, in the same breath,
 * pipelines SCRIPT LOAD for both assets. The store is *ready* only once both loads have
 * answered with a SHA1: a connection that accepts but never answers (a stopped Redis, a port
 * some other program holds) is never used for decisions. A lost connection, a failed
 * handshake or a stall (below) drops it, and a timer reconnects after a backoff that doubles
 * from backoff_min to backoff_max with jitter, and resets once a handshake completes. While
 * not ready, calls are refused at once (RDS_EUNAVAILABLE) so the caller's posture decides
 * without waiting.
 *
 * Life of a call. A call is a slot holding its own copy of the command. hiredis owns the slot
 * from the moment the command is queued until its reply callback runs (with the reply, or
 * with NULL when the connection goes), and only then is the slot released. Independently the
 * caller is answered exactly once: by the reply, or by the timeout. Every call sits on a
 * waiting list in send order, which is deadline order since the timeout is one constant, so
 * one uv timer armed for the head serves them all. When the head expires its caller gets
 * RDS_ETIMEDOUT and the slot stays with hiredis until the late reply (discarded) arrives.
 * If nothing at all has been read for a whole timeout when a call expires, the connection is
 * stalled: it is dropped (its slots come back through the NULL replies) and re-made.
 *
 * Bounds: at most max_in_flight slots exist, timed-out ones included, so a Redis that stops
 * answering cannot make us buffer without bound; past that, calls are refused at once.
 *
 * NOSCRIPT (a SCRIPT FLUSH, a Redis restarted behind a proxy): the call is re-sent once as
 * EVAL with the full body, which also puts the script back into Redis' cache.
 */
#include "redis_store.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>

#define DEFAULT_TIMEOUT_NS (INT64_C(50) * 1000000)
#define DEFAULT_BACKOFF_MIN_NS (INT64_C(25) * 1000000)
#define DEFAULT_BACKOFF_MAX_NS (INT64_C(2000) * 1000000)
#define DEFAULT_MAX_IN_FLIGHT 4096

typedef struct rds_call rds_call_t;
struct rds_call {
    rds_store_t *store;
    rds_call_t *prev, *next; /* the waiting list, or (next only) the free list */
    uint64_t deadline_ms;
    rds_done_fn *done; /* NULL once the caller has been answered */
    void *arg;
    bool waiting;   /* on the waiting list */
    bool retried;   /* NOSCRIPT already answered with an EVAL */
    bool handshake; /* a SCRIPT LOAD of cmd.script, not a caller's call */
    rds_command_t cmd;
};

struct rds_store {
    uv_loop_t *loop;
    redisAsyncContext *ac; /* NULL while disconnected */
    uv_timer_t deadline;   /* armed for the head of the waiting list */
    uv_timer_t reconnect;
    char host[256];
    int port; /* 0: host is a unix socket path */
    uint64_t timeout_ms, backoff_min_ms, backoff_max_ms, backoff_ms;
    uint32_t max_in_flight, live; /* slots allocated, in use */
    rds_call_t *head, *tail;      /* waiting list, oldest first */
    rds_call_t *free_slots;
    uint64_t last_read_ms; /* when a reply last arrived on this connection */
    int handshake_left;
    bool ready, closing;
    int handles_open;
    uint64_t jitter;
    void *data;
    char sha[RDS_SCRIPT_COUNT][RDS_SHA_LEN + 1];
    rds_stats_t stats;
};

static void connect_now(rds_store_t *s);

/* ---- slots, the waiting list, the deadline timer ------------------------------------------ */

static void set_error(rds_store_t *s, const char *what)
{
    snprintf(s->stats.last_error, sizeof(s->stats.last_error), "%s", what);
}

static void free_store_if_done(rds_store_t *s)
{
    if (!s->closing || s->live > 0 || s->handles_open > 0)
        return;
    while (s->free_slots) {
        rds_call_t *c = s->free_slots;
        s->free_slots = c->next;
        free(c);
    }
    free(s);
}

static rds_call_t *acquire(rds_store_t *s)
{
    rds_call_t *c = s->free_slots;
    if (c != NULL)
        s->free_slots = c->next;
    else if ((c = malloc(sizeof(*c))) == NULL)
        return NULL;
    memset(c, 0, offsetof(rds_call_t, cmd));
    c->store = s;
    s->live++;
    return c;
}

static void unlink_waiting(rds_call_t *c)
{
    rds_store_t *s = c->store;
    if (!c->waiting)
        return;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        s->tail = c->prev;
    c->prev = c->next = NULL;
    c->waiting = false;
}

/* Returns the slot to the free list; the store may be freed here when it is closing. */
static void release(rds_call_t *c)
{
    rds_store_t *s = c->store;
    unlink_waiting(c);
    c->next = s->free_slots;
    s->free_slots = c;
    s->live--;
    free_store_if_done(s);
}

static void on_deadline(uv_timer_t *t);

static void arm_deadline(rds_store_t *s)
{
    if (s->closing || s->head == NULL)
        return;
    uint64_t now = uv_now(s->loop);
    uint64_t wait = s->head->deadline_ms > now ? s->head->deadline_ms - now : 0;
    uv_timer_start(&s->deadline, on_deadline, wait, 0);
}

static void push_waiting(rds_call_t *c)
{
    rds_store_t *s = c->store;
    c->deadline_ms = uv_now(s->loop) + s->timeout_ms;
    c->prev = s->tail;
    c->next = NULL;
    if (s->tail)
        s->tail->next = c;
    else
        s->head = c;
    s->tail = c;
    c->waiting = true;
    if (!uv_is_active((uv_handle_t *)&s->deadline))
        arm_deadline(s);
}

/* Answers the caller (once) and counts the outcome. The slot stays where it is. */
static void answer(rds_call_t *c, int status, const ra_result_t *result, const char *error)
{
    rds_store_t *s = c->store;
    rds_done_fn *done = c->done;
    unlink_waiting(c);
    if (done == NULL)
        return;
    c->done = NULL;
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
    default:
        s->stats.errors++;
        break;
    }
    if (status < 0)
        set_error(s, error);
    rds_outcome_t out = {.status = status, .error = error, .data = s->data};
    if (result)
        out.result = *result;
    done(c->arg, &out);
}

/* ---- the connection ----------------------------------------------------------------------- */

static void schedule_reconnect(rds_store_t *s);

/* Drops the connection: its slots come back through NULL replies. hiredis reports the end
 * (on_disconnect) only for a connection that completed its connect, so the reconnect is
 * scheduled here too: a connect that never completes is dropped by the handshake's deadline. */
static void drop(rds_store_t *s, const char *why)
{
    set_error(s, why);
    s->ready = false;
    if (s->ac != NULL) {
        redisAsyncContext *ac = s->ac;
        s->ac = NULL;
        redisAsyncFree(ac); /* deferred by hiredis when called from one of its callbacks */
    }
    schedule_reconnect(s);
}

static void on_reconnect(uv_timer_t *t)
{
    connect_now(t->data);
}

static void schedule_reconnect(rds_store_t *s)
{
    if (s->closing || uv_is_active((uv_handle_t *)&s->reconnect))
        return;
    s->jitter ^= s->jitter << 13;
    s->jitter ^= s->jitter >> 7;
    s->jitter ^= s->jitter << 17;
    uint64_t delay = s->backoff_ms / 2 + s->jitter % (s->backoff_ms / 2 + 1); /* [b/2, b] */
    s->backoff_ms = s->backoff_ms * 2 > s->backoff_max_ms ? s->backoff_max_ms : s->backoff_ms * 2;
    uv_timer_start(&s->reconnect, on_reconnect, delay, 0);
}

static void on_deadline(uv_timer_t *t)
{
    rds_store_t *s = t->data;
    uint64_t now = uv_now(s->loop);
    bool expired = false;
    while (s->head != NULL && s->head->deadline_ms <= now) {
        rds_call_t *c = s->head;
        unlink_waiting(c);
        expired = true;
        if (!c->handshake) /* hiredis keeps the slot until the reply or the drop */
            answer(c, RDS_ETIMEDOUT, NULL, "redis: no reply within the timeout");
    }
    if (expired && s->ac != NULL && now - s->last_read_ms >= s->timeout_ms)
        drop(s, "redis: nothing read for a whole timeout: connection dropped as stalled");
    arm_deadline(s);
}

static void on_handshake(rds_store_t *s, rds_call_t *c, redisReply *reply)
{
    char err[256];
    if (reply == NULL) /* the connection went: on_disconnect or on_connect has it */
        return;
    if (rds_reply_sha(reply, s->sha[c->cmd.script], err, sizeof(err)) < 0) {
        drop(s, err);
        return;
    }
    if (--s->handshake_left == 0 && s->ac != NULL) {
        s->ready = true;
        s->backoff_ms = s->backoff_min_ms;
        s->stats.connects++;
    }
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    rds_call_t *c = privdata;
    rds_store_t *s = c->store;
    redisReply *reply = r;
    if (reply != NULL)
        s->last_read_ms = uv_now(s->loop);
    if (c->handshake) {
        unlink_waiting(c);
        if (s->ac == ac)
            on_handshake(s, c, reply);
        release(c);
        return;
    }
    if (c->done != NULL) {
        ra_result_t result;
        char err[256];
        int rc = rds_reply_read(reply, &result, err, sizeof(err));
        if (rc == RDS_ENOSCRIPT && !c->retried && s->ac == ac) {
            c->retried = true;
            s->stats.reloads++;
            rds_command_to_eval(&c->cmd);
            if (redisAsyncCommandArgv(ac, on_reply, c, c->cmd.argc, c->cmd.argv, c->cmd.argvlen) ==
                REDIS_OK)
                return; /* the slot stays with hiredis */
        }
        answer(c, rc, rc == 0 ? &result : NULL, err);
    }
    release(c);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    rds_store_t *s = ac->data;
    if (status == REDIS_OK)
        return; /* ready comes with the handshake */
    char err[256];
    snprintf(err, sizeof(err), "redis: connect: %s", ac->errstr);
    set_error(s, err);
    if (s->ac == ac) { /* hiredis frees the context after this callback */
        s->ac = NULL;
        s->ready = false;
        s->stats.disconnects++;
    }
    schedule_reconnect(s);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    rds_store_t *s = ac->data;
    if (status != REDIS_OK) {
        char err[256];
        snprintf(err, sizeof(err), "redis: connection lost: %s", ac->errstr);
        set_error(s, err);
    }
    if (s->ac == ac)
        s->ac = NULL;
    s->ready = false;
    s->stats.disconnects++;
    schedule_reconnect(s);
}

/* Queues SCRIPT LOAD for every asset on the new connection. */
static int send_handshake(rds_store_t *s)
{
    s->handshake_left = RDS_SCRIPT_COUNT;
    for (int i = 0; i < RDS_SCRIPT_COUNT; i++) {
        rds_call_t *c = acquire(s);
        if (c == NULL)
            return -1;
        const rds_script_t *script = rds_script(i);
        c->handshake = true;
        c->cmd.script = i;
        c->cmd.argc = 3;
        c->cmd.argv[0] = "SCRIPT";
        c->cmd.argvlen[0] = 6;
        c->cmd.argv[1] = "LOAD";
        c->cmd.argvlen[1] = 4;
        c->cmd.argv[2] = script->body;
        c->cmd.argvlen[2] = script->len;
        push_waiting(c);
        if (redisAsyncCommandArgv(s->ac, on_reply, c, 3, c->cmd.argv, c->cmd.argvlen) != REDIS_OK) {
            release(c);
            return -1;
        }
    }
    return 0;
}

static void connect_now(rds_store_t *s)
{
    if (s->closing || s->ac != NULL)
        return;
    redisAsyncContext *ac =
        s->port ? redisAsyncConnect(s->host, s->port) : redisAsyncConnectUnix(s->host);
    if (ac == NULL || ac->err) {
        char err[256];
        snprintf(err, sizeof(err), "redis: connect %.120s: %.100s", s->host,
                 ac ? ac->errstr : "out of memory");
        set_error(s, err);
        if (ac)
            redisAsyncFree(ac);
        schedule_reconnect(s);
        return;
    }
    ac->data = s;
    if (redisLibuvAttach(ac, s->loop) != REDIS_OK) {
        set_error(s, "redis: cannot attach to the event loop");
        redisAsyncFree(ac);
        schedule_reconnect(s);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    s->ac = ac;
    s->last_read_ms = uv_now(s->loop);
    if (send_handshake(s) < 0)
        drop(s, "redis: cannot queue the script handshake");
}

/* ---- the public face ---------------------------------------------------------------------- */

int rds_address_parse(const char *address, char *host, size_t hostsz, int *port, char *err,
                      size_t errsz)
{
    const char *path = strncmp(address, "unix:", 5) == 0 ? address + 5 : address;
    size_t n = strlen(address);
    if (path[0] == '/') {
        if (strlen(path) >= hostsz || strlen(path) >= 108) /* sun_path */
            goto bad;
        snprintf(host, hostsz, "%s", path);
        *port = 0;
        return 0;
    }
    const char *colon = strrchr(address, ':');
    if (colon == NULL || colon == address || n == 0)
        goto bad;
    const char *h = address, *h_end = colon;
    if (address[0] == '[') { /* [v6]:port */
        if (colon[-1] != ']')
            goto bad;
        h++;
        h_end--;
    }
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p < 1 || p > 65535 || h_end <= h ||
        (size_t)(h_end - h) >= hostsz)
        goto bad;
    memcpy(host, h, (size_t)(h_end - h));
    host[h_end - h] = '\0';
    *port = (int)p;
    return 0;
bad:
    snprintf(err, errsz,
             "shared_state.redis.address: \"%.*s\" is neither host:port nor a unix socket path "
             "(/path or unix:/path)",
             (int)(n > 120 ? 120 : n), address);
    return RDS_EADDRESS;
}

static uint64_t ms_of(int64_t ns, int64_t fallback)
{
    if (ns <= 0)
        ns = fallback;
    uint64_t ms = (uint64_t)(ns + 999999) / 1000000;
    return ms ? ms : 1;
}

int rds_store_new(uv_loop_t *loop, const rds_options_t *o, rds_store_t **out, char *err,
                  size_t errsz)
{
    *out = NULL;
    rds_store_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errsz, "redis: out of memory");
        return RDS_EARG;
    }
    int rc = rds_address_parse(o->address ? o->address : "", s->host, sizeof(s->host), &s->port,
                               err, errsz);
    if (rc < 0) {
        free(s);
        return rc;
    }
    s->loop = loop;
    s->data = o->data;
    s->timeout_ms = ms_of(o->timeout_ns, DEFAULT_TIMEOUT_NS);
    s->backoff_min_ms = ms_of(o->backoff_min_ns, DEFAULT_BACKOFF_MIN_NS);
    s->backoff_max_ms = ms_of(o->backoff_max_ns, DEFAULT_BACKOFF_MAX_NS);
    if (s->backoff_max_ms < s->backoff_min_ms)
        s->backoff_max_ms = s->backoff_min_ms;
    s->backoff_ms = s->backoff_min_ms;
    s->max_in_flight = o->max_in_flight ? o->max_in_flight : DEFAULT_MAX_IN_FLIGHT;
    s->jitter = uv_hrtime() | 1;
    uv_timer_init(loop, &s->deadline);
    uv_timer_init(loop, &s->reconnect);
    s->deadline.data = s->reconnect.data = s;
    s->handles_open = 2;
    connect_now(s);
    *out = s;
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
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
    while (s->head != NULL) {
        rds_call_t *c = s->head;
        unlink_waiting(c);
        if (!c->handshake)
            answer(c, RDS_ECLOSED, NULL, "redis: store closed");
    }
    drop(s, "redis: store closed");
    uv_close((uv_handle_t *)&s->deadline, on_handle_closed);
    uv_close((uv_handle_t *)&s->reconnect, on_handle_closed);
}

int rds_store_call(rds_store_t *s, const ra_limiter_t *l, const char *key, size_t keylen,
                   const rds_op_t *op, rds_done_fn *done, void *arg)
{
    if (s->closing)
        return RDS_ECLOSED;
    if (!s->ready || s->ac == NULL || s->live >= s->max_in_flight) {
        s->stats.unavailable++;
        return s->ready && s->ac ? RDS_EFULL : RDS_EUNAVAILABLE;
    }
    int script = rds_script_for(l);
    if (script < 0)
        return RDS_EARG;
    rds_call_t *c = acquire(s);
    if (c == NULL)
        return RDS_EFULL;
    int rc = rds_command_build(&c->cmd, s->sha[script], l, key, keylen, op);
    if (rc < 0) {
        release(c);
        return rc;
    }
    c->done = done;
    c->arg = arg;
    if (redisAsyncCommandArgv(s->ac, on_reply, c, c->cmd.argc, c->cmd.argv, c->cmd.argvlen) !=
        REDIS_OK) {
        release(c);
        s->stats.unavailable++;
        return RDS_EUNAVAILABLE;
    }
    push_waiting(c);
    s->stats.calls++;
    return 0;
}

bool rds_store_ready(const rds_store_t *s)
{
    return s->ready && s->ac != NULL;
}

void rds_store_stats(const rds_store_t *s, rds_stats_t *out)
{
    *out = s->stats;
    out->ready = rds_store_ready(s);
}
