/*
 * proto: the decision socket's wire, SPEC §5. Pure: bytes in, structs out, and back. The
 * daemon decodes requests and encodes answers with it; the client library, the other way round.
 *
 * Every message is one msgpack map with string keys. A stream is a sequence of such maps, so
 * a reader first frames (finds where one message ends without interpreting it), then decodes
 * the framed bytes into a proto_request_t whose strings point into those bytes (no copy).
 * Encoders append responses to a caller-owned tt_buf_t (common/tt_buf.h), writing each value in
 * place in its smallest msgpack form (msgpack-c's packer costs an indirect call per item, a quarter
 * of a decision's time; the tests read every encoder's output back with msgpack-c's unpacker).
 *
 * The decoder is hand-written over (pos, end) rather than msgpack-c's object unpacker, which
 * allocates an object array as soon as it reads an array or map header: a 6-byte message
 * announcing 2^32 elements would cost a huge allocation before the missing bytes are noticed.
 * Here nothing is allocated at all, every header is checked against the bytes that can still
 * follow within the 64 KiB message bound, and nesting is walked with a counter, not recursion.
 */
#ifndef TT_WIRE_PROTO_H
#define TT_WIRE_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ratehdr.h"
#include "tt_buf.h"
#include "wire.h"

#define PROTO_MAX_MESSAGE (64u * 1024u)    /* bytes in one request or response */
#define PROTO_MAX_LEVELS 16                /* subject (level, id) pairs */
#define PROTO_MAX_LEVEL_NAME 64            /* bytes in a level name */
#define PROTO_MAX_ID 256                   /* bytes in a subject id */
#define PROTO_MAX_DEPTH 16                 /* nesting of maps and arrays in a request */
#define PROTO_MAX_COUNT (INT64_C(1) << 40) /* tokens, actual */

/* Protocol versions (a request's "v"; absent: 1). Version 2 answers a decision with the numbers
 * its rate headers are rendered from, and the rendered map only when asked ("headers": true);
 * version 1 answers with the map alone, as before versions existed. docs/protocol.md. */
#define PROTO_V1 1
#define PROTO_V2 2
#define PROTO_V_MAX PROTO_V2

/* Results of framing and decoding, in the one error table (tt_err.h; the wire names are in
 * brackets). PROTO_EMORE is not an error: the message is incomplete. PROTO_EFRAME and
 * PROTO_ETOOBIG are fatal to a stream (its message boundaries are lost). */
enum {
    PROTO_EMORE = TT_ERR_MORE,
    PROTO_EFRAME = TT_ERR_FRAME,     /* "bad_frame": not a map, or bytes no value starts with */
    PROTO_ETOOBIG = TT_ERR_TOOBIG,   /* "too_large": beyond PROTO_MAX_MESSAGE, or a header that
                                        cannot fit */
    PROTO_EDEEP = TT_ERR_DEEP,       /* "too_deep": nesting beyond PROTO_MAX_DEPTH */
    PROTO_ETYPE = TT_ERR_TYPE,       /* "wrong_type" */
    PROTO_EOP = TT_ERR_OP,           /* "unknown_op" */
    PROTO_EMISSING = TT_ERR_MISSING, /* "missing_field" */
    PROTO_EVALUE = TT_ERR_VALUE,     /* "bad_value": out of range, too long, duplicated */
    PROTO_EFIELD = TT_ERR_FIELD,     /* "unknown_field", or a field the op does not take */
};

typedef enum proto_op {
    PROTO_OP_DECIDE = 0,
    PROTO_OP_SETTLE,
    PROTO_OP_ACQUIRE,
    PROTO_OP_RELEASE,
    PROTO_OP_PING,
    PROTO_OP_FLEET,
    PROTO_OP_MEMBERS,
    PROTO_OP_CHARGE,
    PROTO_OP_COUNT_,
} proto_op_t;

const char *proto_op_name(proto_op_t op);

/* Bytes that are not NUL-terminated: a pointer into a message, and a length. */
typedef wire_str_t proto_str_t;

typedef struct proto_pair {
    proto_str_t level;
    proto_str_t id;
} proto_pair_t;

/* A decoded request. Strings point into the framed message, which must outlive it. */
typedef struct proto_request {
    proto_op_t op;
    uint64_t seq;    /* 0 when absent */
    uint8_t version; /* PROTO_V1 when absent */
    bool headers;    /* decide, acquire: the answer carries the rendered headers (always in v1) */
    uint32_t nsubject;
    proto_pair_t subject[PROTO_MAX_LEVELS];
    bool has_tokens;
    int64_t tokens;       /* decide, charge: 0..2^40 */
    uint64_t reservation; /* settle: the id a tpm decision answered (never 0) */
    int64_t actual;       /* settle: 0..2^40 */
    uint64_t lease;       /* release */
} proto_request_t;

/*
 * Frames the first message of a stream. Returns 0 and sets *msg_len when data[0..*msg_len)
 * holds one whole message; PROTO_EMORE when more bytes are needed; PROTO_EFRAME or
 * PROTO_ETOOBIG when the stream cannot be framed (the connection must be closed). Sets *deep
 * when the message nests beyond PROTO_MAX_DEPTH (it is still framed, so it can be skipped).
 */
int proto_frame(const uint8_t *data, size_t len, size_t *msg_len, bool *deep);

/*
 * Framing that resumes: a message that arrives in pieces is walked once, not again from its
 * start on every piece (which costs a dripping client's message quadratic work). Each call
 * passes the same message's bytes from its start, with more appended since the last call;
 * the framer goes on from the last value it finished. proto_framer_init before each message.
 */
typedef struct proto_framer {
    size_t pos;       /* bytes of the message framed so far */
    uint64_t pending; /* values still to read in the whole message */
    int depth;
    uint64_t left[PROTO_MAX_DEPTH]; /* values still to read in each open container */
    bool deep;
    uint64_t steps; /* values framed, for the tests: each is framed once */
} proto_framer_t;

void proto_framer_init(proto_framer_t *f);
/* As proto_frame, from where the last call on this message stopped. */
int proto_frame_resume(proto_framer_t *f, const uint8_t *data, size_t len, size_t *msg_len,
                       bool *deep);

/* Decodes one framed message. Returns 0, or a negative PROTO_E* code with err filled in (the
 * path of the field, `subject.team`, and what was wrong with it: tt_err_format renders
 * `subject.team: id of 300 bytes, must be 1 to 256`, the answer's error.message); req->seq is
 * set whenever the message carries a readable seq, even on error. */
int proto_decode_request(const uint8_t *msg, size_t len, proto_request_t *req, tt_err_t *err);

/*
 * The fast path of a stream reader: decodes the first message of data[0, len) without framing
 * it first (one pass instead of two). Returns 0 with the message's length in *used when it is
 * a whole, valid request (which is always within the bounds and never deep); -1 for anything
 * else, when the caller frames first (the message may be cut, malformed or invalid) and then
 * decodes for the specific error.
 */
int proto_decode_first(const uint8_t *data, size_t len, size_t *used, proto_request_t *req,
                       tt_err_t *err);

/* What a decision response carries (SPEC §5). Strings need not be NUL-terminated. */
typedef struct proto_header {
    proto_str_t name;
    proto_str_t value;
} proto_header_t;

typedef struct proto_decision {
    bool admit;
    proto_str_t verdict; /* "admit" | "deny" | "unfittable" */
    proto_str_t limit;   /* empty: no limit applied */
    int64_t remaining;   /* -1: no limit applied (encoded as absent) */
    int64_t retry_after;
    int64_t reset_after;
    proto_str_t code; /* e.g. "quota_cost_unfittable"; empty: none */
    uint32_t nsoft;
    const proto_str_t *soft_denied;
    bool send_headers; /* the "headers" map (protocol 1, or "headers": true) */
    uint32_t nheaders;
    const proto_header_t *headers;
    /* protocol 2: the numbers ("policy", "requests", "tokens", "retry"), and soft_denied left
     * out when empty; NULL: protocol 1 */
    const proto_disclosed_t *disclosed;
    bool has_lease; /* acquire */
    uint64_t lease;
    uint64_t reservation; /* decide: a tpm decision's reservation; 0: none (absent) */
} proto_decision_t;

/* One row of `fleet`: a rate-class limit and the bound its store discloses (SPEC §6). */
typedef struct proto_fleet_limit {
    proto_str_t id;
    proto_str_t type;  /* rpm | tpm */
    proto_str_t store; /* local | share | redis */
    proto_str_t algorithm;
    int64_t amount;
    int64_t period_s;
    int64_t burst;
    int64_t n;               /* replicas counted */
    int64_t sustained_bound; /* fleet-wide units per period this view implies */
    int64_t burst_bound;
    proto_str_t state; /* share: unarmed | armed | held; others: empty (absent) */
    /* the share store's disclosure (docs/share.md); local and redis: amount, 1, 1, 0, true */
    int64_t local_share; /* units per period this replica admits */
    int64_t divisor_min, divisor_max, detect_within_s;
    bool converged;
    /* share in demand mode only (SPEC §6b), sent when `demand`: "division": "demand", then
     * keys_leased, keys_owned, largest_lease_age_ms, largest_lease, moving */
    bool demand;
    int64_t keys_leased, keys_owned, largest_lease_age_ms, largest_lease;
    bool moving;
} proto_fleet_limit_t;

/* One row of `members`. */
typedef struct proto_member {
    proto_str_t id;
    proto_str_t address;
    proto_str_t state; /* alive | suspect | dead | left | unheard (see proto_members_head_t) */
    uint64_t incarnation;
    uint64_t generation;
    int64_t last_heard_ms; /* milliseconds ago; 0 for self; -1 never (unheard) */
    bool self;
    /* self only: another live process claims this id (its generation); 0: none, not sent */
    uint64_t duplicate_generation;
} proto_member_t;

/* The head of `members`. live: alive + suspect, self included. unheard: members this replica
 * remembers from before its restart and has not heard from since, which its N counts for at most
 * unheard_for_ms more (docs/share.md, "A restart's memory"); they are the rows in state
 * "unheard", after the member table's. */
typedef struct proto_members_head {
    int64_t live, unheard, unheard_for_ms;
} proto_members_head_t;

/* Response encoders: each appends one whole message to out. Return 0 or -1 (out->failed). */
int proto_enc_decision(tt_buf_t *out, uint64_t seq, const proto_decision_t *d);
int proto_enc_settled(tt_buf_t *out, uint64_t seq, int64_t settled, bool already_settled);
int proto_enc_charged(tt_buf_t *out, uint64_t seq, int64_t charged);
int proto_enc_released(tt_buf_t *out, uint64_t seq, bool released);
int proto_enc_pong(tt_buf_t *out, uint64_t seq, const char *version);
int proto_enc_error(tt_buf_t *out, uint64_t seq, const char *code, const char *message);
/* unheard: of the n replicas, members remembered from before a restart and not heard from yet
 * (proto_members_head_t). doubt: why n may be wrong ("duplicate node id ..."), sent as
 * n_in_doubt; NULL: not sent. snapshot_age_ms: the age of the last good snapshot of the counters
 * (SPEC §11), -1 for none (state off, or nothing written or restored yet). */
int proto_enc_fleet(tt_buf_t *out, uint64_t seq, const char *node, int64_t n, int64_t unheard,
                    const char *doubt, int64_t snapshot_age_ms, const proto_fleet_limit_t *rows,
                    uint32_t nrows, const char *const *acquire_only, uint32_t n_acquire_only);
int proto_enc_members(tt_buf_t *out, uint64_t seq, const proto_members_head_t *head,
                      const proto_member_t *rows, uint32_t nrows);

/* Request encoder (the client side): only the fields req->op takes are written; "v" when
 * req->version is above 1, "headers" when req->headers is set. */
int proto_enc_request(tt_buf_t *out, const proto_request_t *req);

#endif
