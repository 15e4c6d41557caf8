/*
 * One connection's bytes: reassembly, framing, decoding, answers in order. See stream.h.
 *
 * The input is taken by one function, take(), that never touches the kept buffer: it is given
 * bytes and says how many it consumed, all of them when the stream drains. keep() alone moves
 * the rest into the reassembly buffer. (Issue 16, defect 1: a lost frame once emptied the
 * buffer inside the loop while the caller still kept "the rest" of the old length.)
 *
 * A message cut by a read is framed as far as its bytes go, and the framer's state is kept
 * with the tail; the next read frames on from there (wire/proto.h, proto_frame_resume), so a
 * message dripped a byte at a time costs its length once, not its length per read (issue 23
 * item 8). Whole messages take the fast path: decoded in one pass, without framing first.
 */
#include "stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void stream_init(stream_t *st, const stream_handler_t *h, size_t out_limit)
{
    *st = (stream_t){.h = h, .out_limit = out_limit};
}

void stream_free(stream_t *st)
{
    if (st->h->closed)
        st->h->closed(st->h->ud, st);
    /* answers still owed are orphaned; the ready ones die with the stream */
    for (stream_slot_t *sl = st->head, *next; sl; sl = next) {
        next = sl->next;
        sl->prev = sl->next = NULL;
        sl->st = NULL;
        if (sl->ready) {
            tt_buf_free(&sl->bytes);
            free(sl);
        }
    }
    st->head = st->tail = NULL;
    st->nslots = 0;
    free(st->in);
    st->in = NULL;
    st->in_len = 0;
    tt_buf_free(&st->fill);
    tt_buf_free(&st->flight);
}

static bool over_limit(const stream_t *st)
{
    return st->fill.len + st->flight.len > st->out_limit || st->nslots >= STREAM_MAX_SLOTS;
}

tt_buf_t *stream_answer_buf(stream_t *st)
{
    if (st->head == NULL)
        return &st->fill;
    stream_slot_t *s = malloc(sizeof(*s));
    if (!s) {
        st->failed = true;
        return NULL;
    }
    stream_slot_link(st, s, 0, PROTO_OP_PING, 0);
    s->ready = true;
    return &s->bytes;
}

void stream_error(stream_t *st, uint64_t seq, const char *code, const char *message)
{
    if (st->h->error)
        st->h->error(st->h->ud, code);
    tt_buf_t *out = stream_answer_buf(st);
    if (!out || proto_enc_error(out, seq, code, message))
        st->failed = true;
}

void stream_slot_link(stream_t *st, stream_slot_t *s, uint64_t seq, proto_op_t op,
                      uint64_t start_ns)
{
    *s = (stream_slot_t){.prev = st->tail, .st = st, .seq = seq, .op = op, .start_ns = start_ns};
    if (st->tail)
        st->tail->next = s;
    else
        st->head = s;
    st->tail = s;
    st->nslots++;
}

void stream_slot_unlink(stream_t *st, stream_slot_t *s)
{
    if (s->prev)
        s->prev->next = NULL;
    else
        st->head = NULL;
    st->tail = s->prev;
    st->nslots--;
}

void stream_slot_ready(stream_slot_t *s)
{
    s->ready = true;
    stream_t *st = s->st;
    if (!st) {
        tt_buf_free(&s->bytes);
        free(s);
        return;
    }
    while (st->head && st->head->ready) {
        stream_slot_t *h = st->head;
        st->head = h->next;
        if (st->head)
            st->head->prev = NULL;
        else
            st->tail = NULL;
        st->nslots--;
        tt_buf_append(&st->fill, h->bytes.data, h->bytes.len);
        tt_buf_free(&h->bytes);
        free(h);
    }
    if (st->fill.failed)
        st->failed = true;
    if (st->wake)
        st->wake(st);
}

/* The stream cannot be framed any more: answer once, take nothing more. */
static void lost_frame(stream_t *st, int code)
{
    const char *why = code == PROTO_ETOOBIG
                          ? "a message longer than 65536 bytes, or announcing more elements "
                            "than that can hold; closing"
                          : "the stream is not a sequence of msgpack maps; closing";
    stream_error(st, 0, tt_err_name(code), why);
    st->draining = true;
}

/* A framed message the fast path refused: answer its specific error (or, rarely, a request
 * the fast path could not take whole). */
static void take_framed(stream_t *st, const uint8_t *msg, size_t len, bool deep)
{
    proto_request_t req;
    tt_err_t err;
    st->stats.decodes++;
    int rc = proto_decode_request(msg, len, &req, &err);
    if (deep) {
        char m[64];
        snprintf(m, sizeof(m), "nesting deeper than %d levels", PROTO_MAX_DEPTH);
        stream_error(st, req.seq, tt_err_name(PROTO_EDEEP), m);
        return;
    }
    if (rc) {
        char text[TT_ERR_TEXT_MAX];
        stream_error(st, req.seq, tt_err_name(rc), tt_err_format(&err, text, sizeof(text)));
        return;
    }
    st->h->request(st->h->ud, st, &req);
}

/* Answers every whole message in data[0, len) until the stream must pause. Returns the bytes
 * consumed: all of them when the stream drains. data[0] starts the message st->framer holds
 * when st->framing. */
static size_t take(stream_t *st, const uint8_t *data, size_t len)
{
    size_t off = 0;
    while (off < len && !st->draining && !st->failed) {
        if (over_limit(st)) {
            st->paused = true;
            break;
        }
        size_t n;
        bool deep;
        if (!st->framing) {
            proto_request_t req;
            tt_err_t err;
            st->stats.decodes++;
            if (proto_decode_first(data + off, len - off, &n, &req, &err) == 0) {
                st->h->request(st->h->ud, st, &req);
                off += n;
                continue;
            }
            proto_framer_init(&st->framer);
            st->framing = true;
        }
        uint64_t steps = st->framer.steps;
        int rc = proto_frame_resume(&st->framer, data + off, len - off, &n, &deep);
        st->stats.frame_steps += st->framer.steps - steps;
        if (rc == PROTO_EMORE)
            break; /* the framer goes on when more of this message comes */
        st->framing = false;
        if (rc < 0) {
            lost_frame(st, rc);
            return len;
        }
        take_framed(st, data + off, n, deep);
        off += n;
    }
    return off;
}

/* Keeps data[0, len) as the stream's input not yet taken (nothing, once draining). */
static int keep(stream_t *st, const uint8_t *data, size_t len)
{
    if (len == 0 || st->draining) {
        free(st->in);
        st->in = NULL;
        st->in_len = 0;
        st->framing = false;
        return 0;
    }
    if (!st->in && !(st->in = malloc(STREAM_IN_CAP))) {
        st->failed = true;
        return STREAM_ENOMEM;
    }
    memmove(st->in, data, len);
    st->in_len = len;
    return 0;
}

/* Takes data[0, len) as one batch and keeps what is left. */
static int batch(stream_t *st, const uint8_t *data, size_t len, int64_t now_wall_ns,
                 uint64_t now_mono_ns)
{
    st->now_wall_ns = now_wall_ns;
    st->now_mono_ns = now_mono_ns;
    size_t used = take(st, data, len);
    if (st->h->batch_end)
        st->h->batch_end(st->h->ud, st);
    if (keep(st, data + used, len - used) != 0 || st->failed)
        return STREAM_ENOMEM;
    return 0;
}

void stream_read_buf(stream_t *st, uint8_t *shared, size_t shared_cap, uint8_t **buf, size_t *cap)
{
    if (st->in_len > 0) {
        *buf = st->in + st->in_len;
        *cap = STREAM_IN_CAP - st->in_len;
    } else {
        *buf = shared;
        *cap = shared_cap;
    }
}

int stream_feed(stream_t *st, const uint8_t *buf, size_t n, int64_t now_wall_ns,
                uint64_t now_mono_ns)
{
    if (n == 0)
        return st->failed ? STREAM_ENOMEM : 0;
    if (st->in_len > 0 && buf == st->in + st->in_len) {
        st->in_len += n;
        return batch(st, st->in, st->in_len, now_wall_ns, now_mono_ns);
    }
    return batch(st, buf, n, now_wall_ns, now_mono_ns);
}

bool stream_resume(stream_t *st, int64_t now_wall_ns, uint64_t now_mono_ns)
{
    if (!st->paused || st->draining || st->failed)
        return false;
    if (st->fill.len + st->flight.len > st->out_limit / 2 || st->nslots >= STREAM_MAX_SLOTS / 2)
        return false;
    st->paused = false;
    if (st->in_len > 0 && batch(st, st->in, st->in_len, now_wall_ns, now_mono_ns) != 0)
        return false;
    return !st->paused && !st->draining && !st->failed;
}

void stream_end(stream_t *st)
{
    st->draining = true;
    keep(st, NULL, 0);
}

bool stream_finished(const stream_t *st)
{
    return st->draining && !st->writing && st->fill.len == 0 && st->head == NULL;
}

bool stream_flush_begin(stream_t *st, const uint8_t **data, size_t *len)
{
    if (st->writing || st->fill.len == 0)
        return false;
    tt_buf_t t = st->flight;
    st->flight = st->fill;
    st->fill = t;
    st->fill.len = 0;
    st->writing = true;
    *data = st->flight.data;
    *len = st->flight.len;
    return true;
}

void stream_flush_end(stream_t *st)
{
    st->writing = false;
    st->flight.len = 0;
}
