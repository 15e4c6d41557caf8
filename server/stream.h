/*
 * stream: one decision-socket connection's bytes, without the socket. Pure: no libuv, no clock
 * (the shell passes the batch's `now`), so its tests and its fuzz target drive it with any
 * split of any byte stream.
 *
 * In: the bytes of each read are framed and decoded; every whole request goes to the
 * handler the shell gave (libuv's uv_read_cb style: the stream calls up only through it), every
 * bad one is answered with its error, and the tail of a message cut by the read is kept (the
 * reassembly buffer) and framed on from where it stopped when more comes. A stream whose
 * message boundaries are lost gets one error answer and drains: it takes no more input.
 *
 * Out: answers in request order. An answer is written into `fill` at once, or, when an earlier
 * one is still pending (the engine answers later), into a slot queued behind it; a completion
 * moves every ready slot from the head of the queue into `fill`. The shell writes `fill` out
 * (stream_flush_begin/end) and is told (wake) when a completion made answers to write.
 *
 * Bounds: the reassembly buffer holds at most STREAM_IN_CAP bytes (one 64 KiB message and one
 * more read); past out_limit unsent answer bytes or STREAM_MAX_SLOTS queued answers the stream
 * pauses: it stops taking requests, keeps what it had read, and the shell stops reading.
 */
#ifndef TT_SERVER_STREAM_H
#define TT_SERVER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "tt_err.h"

#define STREAM_IN_CAP (2 * PROTO_MAX_MESSAGE)
#define STREAM_MAX_SLOTS 4096 /* answers waiting behind a pending one */

enum {
    STREAM_ENOMEM = TT_ERR_NOMEM, /* an answer or the reassembly buffer could not be allocated */
};

typedef struct stream stream_t;

/*
 * An answer that cannot be written yet: one a handler will complete later, or any answer
 * queued behind such a one. A pending slot belongs to whoever completes it; if its stream goes
 * first the slot is orphaned (st = NULL) and freed on completion. The slot is the first member
 * of what is allocated for it: free(slot) frees it all.
 */
typedef struct stream_slot {
    struct stream_slot *prev, *next;
    stream_t *st;
    bool ready;
    tt_buf_t bytes; /* the encoded answer, once ready */
    uint64_t seq;
    proto_op_t op;
    uint64_t start_ns; /* when the request was read, for the latency histogram */
} stream_slot_t;

/* What the stream calls up to. */
typedef struct stream_handler {
    /* One decoded request: answer it through stream_answer_buf() or a slot, now or later. */
    void (*request)(void *ud, stream_t *st, const proto_request_t *req);
    /* The stream answered an error of its own (a bad request, a lost frame): its code. */
    void (*error)(void *ud, const char *code);
    /* Every request of one read has gone to `request`. */
    void (*batch_end)(void *ud, stream_t *st);
    /* The stream ends (stream_free): release what is held for it. */
    void (*closed)(void *ud, stream_t *st);
    void *ud;
} stream_handler_t;

typedef struct stream_stats {
    uint64_t frame_steps; /* msgpack values walked by framing: each once however it is cut */
    uint64_t decodes;     /* decode attempts */
} stream_stats_t;

struct stream {
    const stream_handler_t *h;
    void (*wake)(stream_t *st);  /* the shell: a completion left answers to write */
    void *shell;                 /* the shell's own pointer (its connection) */
    uint64_t id;                 /* the shell's name for the connection (the lease owner tag) */
    bool peer_cred;              /* the shell's word for who is at the other end: the kernel's */
    uint32_t peer_uid, peer_gid; /* uid and gid of the peer (SO_PEERCRED), when peer_cred */
    size_t out_limit;
    int64_t now_wall_ns; /* the batch's clocks, read once per read by the shell */
    uint64_t now_mono_ns;
    uint8_t *in; /* bytes read but not yet taken (NULL when none): whole messages while paused,
                    then the start of a cut one */
    size_t in_len;
    proto_framer_t framer; /* the cut message at in[0], framed this far */
    bool framing;          /* framer holds that message's progress */
    tt_buf_t fill;         /* answers gathered for the next write */
    tt_buf_t flight;       /* answers being written */
    bool writing;
    bool paused;   /* over a limit: takes no requests until answers drain */
    bool draining; /* takes no more input: the shell closes once every answer is written */
    bool failed;   /* out of memory: the shell closes */
    stream_slot_t *head, *tail;
    unsigned nslots;
    stream_stats_t stats;
};

void stream_init(stream_t *st, const stream_handler_t *h, size_t out_limit);
/* Tells the handler (closed), frees the buffers and orphans the pending slots (the ready ones
 * are freed). */
void stream_free(stream_t *st);

/* Where the next read goes: behind the kept tail, or (none kept) into the caller's shared
 * buffer, so an idle stream owns no input buffer. */
void stream_read_buf(stream_t *st, uint8_t *shared, size_t shared_cap, uint8_t **buf, size_t *cap);
/* n bytes arrived in the buffer stream_read_buf gave. Answers every whole request, keeps the
 * rest. Returns 0 or STREAM_ENOMEM. */
int stream_feed(stream_t *st, const uint8_t *buf, size_t n, int64_t now_wall_ns,
                uint64_t now_mono_ns);
/* After answers drained: takes the kept requests again when no longer over a limit. Returns
 * true when the stream can read again. */
bool stream_resume(stream_t *st, int64_t now_wall_ns, uint64_t now_mono_ns);
/* No more input will come (EOF): answer what came, then finish. */
void stream_end(stream_t *st);
/* True once draining and nothing is left to write: the shell closes. */
bool stream_finished(const stream_t *st);

/* Where the next answer goes: `fill`, or a new ready slot when answers wait ahead of it. NULL
 * when out of memory (failed is set). */
tt_buf_t *stream_answer_buf(stream_t *st);
/* Answers an error in order. */
void stream_error(stream_t *st, uint64_t seq, const char *code, const char *message);
/* Queues a pending slot (the caller's allocation) and takes it out again (the tail only, when
 * it was answered at once after all). */
void stream_slot_link(stream_t *st, stream_slot_t *s, uint64_t seq, proto_op_t op,
                      uint64_t start_ns);
void stream_slot_unlink(stream_t *st, stream_slot_t *s);
/* s->bytes holds the answer: every ready answer from the head goes to `fill` and the shell is
 * woken; an orphan is freed. */
void stream_slot_ready(stream_slot_t *s);

/* Writing: hands out `fill` as the bytes to write (false: nothing to write, or a write is in
 * flight), and takes back the buffer once written. */
bool stream_flush_begin(stream_t *st, const uint8_t **data, size_t *len);
void stream_flush_end(stream_t *st);

#endif
