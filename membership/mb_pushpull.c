/*
 * Push-pull over TCP: each side sends one frame, a 4-byte big-endian length then the sealed
 * message (swim_pushpull_encode), and the responder answers with its own. A connection lives
 * at most 5 s and carries at most SWIM_PUSHPULL_MAX bytes each way. An accepted connection is
 * a stranger until its frame has arrived whole and opened (admit): it has FIRST_FRAME_MS to
 * get there, one address holds at most UNAUTH_PER_SOURCE of the UNAUTH_MAX places, and a
 * stranger that arrives when they are full takes the place of the oldest, so a flood of
 * connections that send nothing cannot keep a joining replica out (issue #23 item 6).
 */
#include "mb_int.h"
#include "tt_log.h"

#include <stdlib.h>
#include <sys/socket.h>

#define CONN_TIMEOUT_MS 5000
/* Every push-pull connection at once, authenticated or not, ours included. */
#define CONNS_MAX 64

struct conn {
    mb_t *mb;
    conn_t *next, **pprev;
    uv_tcp_t tcp;
    uv_timer_t timeout;
    uv_connect_t connect;
    uv_write_t write;
    bool initiator, closing;
    bool authed;     /* accepted: its frame has arrived and opened */
    swim_addr_t src; /* accepted: the peer's address, port 0 */
    int open;
    uint8_t *out;
    size_t out_len;
    uint8_t *in;
    size_t in_len, in_cap;
};

static void conn_closed(uv_handle_t *h)
{
    conn_t *c = h->data;
    if (--c->open > 0)
        return;
    mb_t *mb = c->mb;
    free(c->out);
    free(c->in);
    free(c);
    mb->pending--;
    if (mb->closing && mb->open_handles == 0 && mb->pending == 0 && mb->closed)
        mb->closed(mb->closed_ud, mb);
}

void mb__conn_close(conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    if (c->next)
        c->next->pprev = c->pprev;
    *c->pprev = c->next;
    c->mb->n_conns--;
    uv_close((uv_handle_t *)&c->tcp, conn_closed);
    uv_close((uv_handle_t *)&c->timeout, conn_closed);
}

static void conn_timeout(uv_timer_t *t)
{
    conn_t *c = t->data;
    if (!c->initiator && !c->authed)
        c->mb->pp_refused[PP_DEADLINE]++;
    mb__conn_close(c);
}

static conn_t *conn_new(mb_t *mb, bool initiator)
{
    conn_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->mb = mb;
    c->initiator = initiator;
    uv_tcp_init(mb->loop, &c->tcp);
    uv_timer_init(mb->loop, &c->timeout);
    c->tcp.data = c->timeout.data = c->connect.data = c->write.data = c;
    c->open = 2;
    mb->pending++;
    mb->n_conns++;
    c->next = mb->conns;
    c->pprev = &mb->conns;
    if (mb->conns)
        mb->conns->pprev = &c->next;
    mb->conns = c;
    uv_timer_start(&c->timeout, conn_timeout, CONN_TIMEOUT_MS, 0);
    return c;
}

static void on_written(uv_write_t *w, int status)
{
    conn_t *c = w->data;
    if (status || !c->initiator)
        mb__conn_close(c); /* the responder is done once its answer is out */
}

/* Encodes our state into one frame and writes it. */
static int conn_send_state(conn_t *c)
{
    mb_t *mb = c->mb;
    size_t cap = 4 + swim_pushpull_bound(mb->core), len;
    c->out = malloc(cap);
    if (!c->out || swim_pushpull_encode(mb->core, mb__now(mb), !swim_joined(mb->core), c->out + 4,
                                        cap - 4, &len))
        return -1;
    c->out[0] = (uint8_t)(len >> 24);
    c->out[1] = (uint8_t)(len >> 16);
    c->out[2] = (uint8_t)(len >> 8);
    c->out[3] = (uint8_t)len;
    c->out_len = 4 + len;
    uv_buf_t b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
    return uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written);
}

static void conn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    if (c->in_cap - c->in_len < 65536) {
        size_t nc = c->in_cap ? c->in_cap * 2 : 65536;
        uint8_t *p = realloc(c->in, nc);
        if (!p) {
            *buf = uv_buf_init(NULL, 0);
            return;
        }
        c->in = p;
        c->in_cap = nc;
    }
    *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

static void conn_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    mb_t *mb = c->mb;
    if (nread < 0) {
        mb__conn_close(c);
        return;
    }
    c->in_len += (size_t)nread;
    if (c->in_len < 4)
        return;
    size_t need =
        (size_t)c->in[0] << 24 | (size_t)c->in[1] << 16 | (size_t)c->in[2] << 8 | c->in[3];
    if (need > SWIM_PUSHPULL_MAX) {
        tt_log(TT_LOG_WARN, "push-pull frame refused: longer than the bound",
               TT_UINT("bytes", need), TT_UINT("bound", SWIM_PUSHPULL_MAX));
        mb__conn_close(c);
        return;
    }
    if (c->in_len < 4 + need)
        return;
    uv_read_stop(s);
    tt_err_t err;
    int rc = swim_pushpull_receive(mb->core, mb__now(mb), c->in + 4, need, &err);
    char detail[sizeof err.path + sizeof err.message + 2];
    if (rc)
        tt_log(TT_LOG_WARN, "push-pull dropped", TT_STR("reason", swim_strerror(rc)),
               TT_STR("detail", tt_err_format(&err, detail, sizeof detail)));
    else if (!c->initiator) { /* no longer a stranger: the answer may take the usual time */
        c->authed = true;
        uv_timer_start(&c->timeout, conn_timeout, CONN_TIMEOUT_MS, 0);
    }
    mb->pump(mb);
    if (c->initiator || rc || conn_send_state(c))
        mb__conn_close(c);
}

static void on_connected(uv_connect_t *req, int status)
{
    conn_t *c = req->data;
    if (status || c->closing || conn_send_state(c) ||
        uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read))
        mb__conn_close(c);
}

void mb__pushpull_to(mb_t *mb, const struct sockaddr *sa)
{
    conn_t *c = conn_new(mb, true);
    if (c && uv_tcp_connect(&c->connect, &c->tcp, sa, on_connected))
        mb__conn_close(c);
}

/*
 * Admits an accepted connection as a stranger, c being the newest: refused (-1) when its address
 * already holds UNAUTH_PER_SOURCE places; when all UNAUTH_MAX are taken, the oldest stranger is
 * closed to make room (it has had the longest to send its frame; a peer of the cluster sends
 * its frame as soon as it is connected). Then the first-frame deadline starts.
 */
static int admit(mb_t *mb, conn_t *c)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len))
        return -1;
    mb__to_swim((const struct sockaddr *)&ss, &c->src);
    c->src.port = 0;
    int strangers = 0, same = 0;
    conn_t *oldest = NULL;
    for (conn_t *o = c->next; o; o = o->next)
        if (!o->initiator && !o->authed) {
            strangers++;
            same += swim_addr_eq(&o->src, &c->src);
            oldest = o;
        }
    if (same >= UNAUTH_PER_SOURCE) {
        mb->pp_refused[PP_SOURCE]++;
        return -1;
    }
    if (strangers >= UNAUTH_MAX) {
        mb->pp_refused[PP_EVICTED]++;
        mb__conn_close(oldest);
    }
    uv_timer_start(&c->timeout, conn_timeout, FIRST_FRAME_MS, 0);
    return 0;
}

void mb__on_connection(uv_stream_t *server, int status)
{
    mb_t *mb = server->data;
    if (status || mb->closing)
        return;
    conn_t *c = conn_new(mb, false);
    if (!c)
        return;
    /* accepted even when refused (libuv stops listening until a connection is accepted), then
     * closed at once */
    if (uv_accept(server, (uv_stream_t *)&c->tcp) || mb->n_conns > CONNS_MAX || admit(mb, c)) {
        mb__conn_close(c);
        return;
    }
    /* What came with the handshake is read now: a peer of the cluster writes its frame as soon
     * as it is connected, so it leaves the strangers before libuv accepts the connections queued
     * behind it, any of which could otherwise evict it unread. */
    uv_os_fd_t fd;
    uv_buf_t b;
    conn_alloc((uv_handle_t *)&c->tcp, 0, &b);
    ssize_t n = b.len && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0
                    ? recv(fd, b.base, b.len, MSG_DONTWAIT)
                    : -1;
    if (n > 0)
        conn_read((uv_stream_t *)&c->tcp, n, &b);
    if (!c->closing && !c->authed && uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_read))
        mb__conn_close(c);
}
