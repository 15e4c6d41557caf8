/*
 * ceiling: what this machine can do for the daemon's shape, with no rate logic at all.
 *
 *   ceiling SOCKET_PATH
 *
 * A single-threaded libuv server on a unix stream socket, like the daemon: it reads the
 * decision socket's msgpack requests, frames each with the daemon's own proto_frame (so a
 * message cut by a read is carried over exactly as the daemon carries it), and answers each
 * with one fixed small map, {"seq":0,"admit":true,"verdict":"admit"}. It neither decodes the
 * request nor looks anything up. The answers to one read go out in one write, tried at once
 * (uv_try_write); what the socket does not take is queued with uv_write and reading pauses
 * until it has gone, so a client that does not read cannot grow the server's memory.
 *
 * Whatever the daemon costs above this is protocol decoding, the decision itself, encoding
 * the real answer and its bookkeeping. bench/run.sh compares the two with one load generator.
 * SIGINT or SIGTERM closes the socket, removes its file and exits 0.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "proto.h"

#define IN_CAP (2 * PROTO_MAX_MESSAGE)
#define OUT_CAP (256 * 1024)

static const uint8_t answer[] = "\x83\xa3seq\x00\xa5"
                                "admit\xc3\xa7verdict\xa5"
                                "admit";
#define ANSWER_LEN (sizeof(answer) - 1)

typedef struct conn {
    uv_pipe_t pipe;
    uv_write_t wr;
    bool writing; /* a uv_write is in flight: reading and processing wait for it */
    size_t in_len;
    size_t out_len;
    uint8_t in[IN_CAP];
    uint8_t out[OUT_CAP];
} conn_t;

static uv_loop_t *loop;
static uv_pipe_t listener;
static uv_signal_t sigint, sigterm;
static const char *path;

static void on_closed(uv_handle_t *h)
{
    free(h->data);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    *buf = uv_buf_init((char *)c->in + c->in_len, (unsigned)(IN_CAP - c->in_len));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void process(conn_t *c);

static void on_write(uv_write_t *req, int status)
{
    conn_t *c = req->data;
    c->writing = false;
    c->out_len = 0;
    if (status < 0 || uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0) {
        uv_close((uv_handle_t *)&c->pipe, on_closed);
        return;
    }
    process(c); /* what the full buffer held back */
}

/* Sends what is in out: at once if the socket takes it, else queued with reading paused. */
static void send_out(conn_t *c)
{
    uv_buf_t b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
    int n = uv_try_write((uv_stream_t *)&c->pipe, &b, 1);
    if (n == (int)c->out_len) {
        c->out_len = 0;
        return;
    }
    if (n < 0 && n != UV_EAGAIN) {
        uv_close((uv_handle_t *)&c->pipe, on_closed);
        c->writing = true; /* nothing more for this connection */
        return;
    }
    if (n > 0) {
        memmove(c->out, c->out + n, c->out_len - (size_t)n);
        c->out_len -= (size_t)n;
    }
    uv_read_stop((uv_stream_t *)&c->pipe);
    b = uv_buf_init((char *)c->out, (unsigned)c->out_len);
    c->wr.data = c;
    c->writing = true;
    if (uv_write(&c->wr, (uv_stream_t *)&c->pipe, &b, 1, on_write) != 0)
        uv_close((uv_handle_t *)&c->pipe, on_closed);
}

/* Answers every whole message in the input, then sends the answers in one write. */
static void process(conn_t *c)
{
    size_t off = 0;
    while (!c->writing) {
        size_t n;
        bool deep;
        int rc = proto_frame(c->in + off, c->in_len - off, &n, &deep);
        if (rc == PROTO_EMORE)
            break;
        if (rc < 0) {
            uv_close((uv_handle_t *)&c->pipe, on_closed);
            return;
        }
        if (c->out_len + ANSWER_LEN > OUT_CAP) {
            send_out(c); /* empties out, or pauses until on_write */
            continue;
        }
        off += n;
        memcpy(c->out + c->out_len, answer, ANSWER_LEN);
        c->out_len += ANSWER_LEN;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    if (c->out_len && !c->writing)
        send_out(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = s->data;
    if (nread < 0) {
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    c->in_len += (size_t)nread;
    process(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    conn_t *c = malloc(sizeof(*c));
    if (!c)
        return;
    c->in_len = c->out_len = 0;
    c->writing = false;
    uv_pipe_init(loop, &c->pipe, 0);
    c->pipe.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0 ||
        uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) != 0)
        uv_close((uv_handle_t *)&c->pipe, on_closed);
}

static void close_any(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h))
        uv_close(h, h->data && h != (uv_handle_t *)&listener && h->type == UV_NAMED_PIPE ? on_closed
                                                                                         : NULL);
}

static void on_signal(uv_signal_t *sig, int signum)
{
    unlink(path);
    uv_walk(loop, close_any, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ceiling SOCKET_PATH\n");
        return 64;
    }
    path = argv[1];
    loop = uv_default_loop();
    unlink(path);
    uv_pipe_init(loop, &listener, 0);
    int rc = uv_pipe_bind(&listener, path);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&listener, 1024, on_connection);
    if (rc != 0) {
        fprintf(stderr, "ceiling: cannot listen on %s: %s\n", path, uv_strerror(rc));
        return 69;
    }
    uv_signal_init(loop, &sigint);
    uv_signal_init(loop, &sigterm);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    signal(SIGPIPE, SIG_IGN);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    return 0;
}
