/*
 * tokentriage.h: the C client of the tokentriage decision daemon.
 *
 * One tt_client_t is one connection to the daemon's unix socket. It is not thread-safe: use
 * one per thread (connections are cheap). Two ways to talk:
 *
 *  - blocking: tt_decide(), tt_settle(), ... send one request and wait for its answer;
 *  - pipelined: tt_send_*() queue requests (nothing is written until tt_flush() or tt_recv()),
 *    tt_recv() returns the answers one by one, in the order the requests were sent.
 *
 * The blocking calls refuse (TT_EBUSY) while pipelined answers are still outstanding.
 * Every function returns 0 or a negative TT_E* code; tt_strerror() names it. When the daemon
 * answers a request with an error, the call returns TT_ESERVER and the response carries the
 * daemon's code and message (docs/protocol.md lists them).
 *
 * Link with `pkg-config --libs tokentriage`.
 */
#ifndef TOKENTRIAGE_H
#define TOKENTRIAGE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TT_EXPORT __attribute__((visibility("default")))
#else
#define TT_EXPORT
#endif

/* The built-in socket path, shared by the daemon and every client. */
#define TT_DEFAULT_SOCKET "/run/tokentriage/tokentriage.sock"
/* The environment variable that overrides it. */
#define TT_SOCKET_ENV "TOKENTRIAGE_SOCKET"

#define TT_MAX_LEVELS 16  /* subject (level, id) pairs */
#define TT_MAX_ID 256     /* bytes in a subject id */
#define TT_MAX_SOFT 16    /* soft-denied limit ids kept in a response */
#define TT_MAX_HEADERS 16 /* disclosure headers kept in a response */

enum {
    TT_OK = 0,
    TT_EARG = -1,     /* an argument is out of range (NULL, too many levels, id too long) */
    TT_ECONNECT = -2, /* cannot connect: no daemon listening on the path */
    TT_EIO = -3,      /* the connection failed or was closed by the daemon */
    TT_ETIMEDOUT = -4,
    TT_EPROTO = -5,  /* the daemon's answer could not be read */
    TT_ESERVER = -6, /* the daemon answered with an error: see error_code / error_message */
    TT_EBUSY = -7,   /* a blocking call while pipelined answers are outstanding */
    TT_ENOMEM = -8,
};

TT_EXPORT const char *tt_strerror(int err);

/*
 * Resolves the socket path, as the daemon does (SPEC §8): `flag` if given, else
 * $TOKENTRIAGE_SOCKET, else `config` (the server.socket of a config file, NULL for clients), else
 * the built-in default. When /run/tokentriage cannot be used (a daemon not running as root), the
 * default falls back to $XDG_RUNTIME_DIR/tokentriage/tokentriage.sock, or /tmp/tokentriage-<uid>/
 * tokentriage.sock without XDG_RUNTIME_DIR: a daemon picks the first whose directory it can
 * write (for_server != 0), a client the first where a socket exists. Writes a NUL-terminated
 * path to buf; returns 0 or TT_EARG when it does not fit.
 */
TT_EXPORT int tt_socket_path(char *buf, size_t size, const char *flag, const char *config,
                             int for_server);

typedef struct tt_client tt_client_t;

/* Connects to the daemon at `path` (NULL: tt_socket_path's choice). On success *out is a
 * client the caller releases with tt_close(). */
TT_EXPORT int tt_connect(tt_client_t **out, const char *path);
/* Closes the connection (ending its concurrency leases) and frees the client. NULL is a no-op. */
TT_EXPORT void tt_close(tt_client_t *c);
/* How long a call may wait for the daemon, in milliseconds; negative waits for ever (the
 * default). */
TT_EXPORT void tt_set_timeout(tt_client_t *c, int timeout_ms);

/* One level of a subject: {"team": "t-42"}. Both strings are NUL-terminated. */
typedef struct tt_pair {
    const char *level;
    const char *id;
} tt_pair_t;

typedef enum tt_kind {
    TT_KIND_ERROR = 0,
    TT_KIND_DECISION, /* decide, acquire */
    TT_KIND_SETTLED,
    TT_KIND_RELEASED,
    TT_KIND_PONG,
    TT_KIND_FLEET,
    TT_KIND_MEMBERS,
    TT_KIND_CHARGED,
} tt_kind_t;

typedef struct tt_header {
    char name[64];
    char value[192];
} tt_header_t;

/* A limit's quota, what is left of it and when it is whole again (X-Ratelimit-*). */
typedef struct tt_trio {
    int64_t quota;
    int64_t remaining;
    int64_t reset_ms;
} tt_trio_t;

/*
 * What a decision discloses, as numbers (protocol 2; docs/protocol.md): the limit shown in
 * Ratelimit-Policy and RateLimit, the tightest rpm and tpm trios, and the retry. The library
 * renders the headers from them (tt_render_headers) into the response's `headers`; each field
 * is the line of the same name in the shared vector table tests/vectors/headers.txt.
 */
typedef struct tt_disclosed {
    int has_policy;
    char policy_id[65];
    int policy_tpm;    /* the policy counts tokens */
    int64_t period_ms; /* the policy's period */
    int64_t quota;     /* units per period */
    int64_t remaining; /* RateLimit r */
    int64_t t_s;       /* RateLimit t: seconds until remaining grows */
    int has_requests;
    tt_trio_t requests; /* the tightest rpm limit */
    int has_tokens;
    tt_trio_t tokens; /* the tightest tpm limit */
    int64_t retry_s;  /* Retry-After (raised to t when a policy is shown); -1: none */
} tt_disclosed_t;

/*
 * One answer. Strings are copied in (truncated to fit, always NUL-terminated); `raw` points at
 * the answer's msgpack bytes and stays valid until the next tt_recv() or blocking call on the
 * same client (fleet and members are read from it).
 */
typedef struct tt_response {
    uint64_t seq;
    tt_kind_t kind;
    /* TT_KIND_ERROR */
    char error_code[32];
    char error_message[256];
    /* TT_KIND_DECISION */
    int admit;
    char verdict[16];  /* admit | deny | unfittable */
    char limit[65];    /* the denying limit, or on admit the tightest; "" when none applied */
    int64_t remaining; /* -1 when no limit applied */
    int64_t retry_after;
    int64_t reset_after;
    /* "quota_cost_unfittable": do not retry the same cost; "unavailable": a deny because a limit's
     * store could not answer (Redis down, the share store not armed) and its posture fails
     * closed; "" otherwise. A daemon from before "unavailable" sends no code on such a deny. */
    char code[32];
    unsigned nsoft;
    char soft_denied[TT_MAX_SOFT][65];
    unsigned nheaders;
    tt_header_t headers[TT_MAX_HEADERS];
    uint64_t lease;       /* acquire: the lease to release; 0 when none was granted */
    uint64_t reservation; /* decide: an admitted tpm decision's id for tt_settle(); 0: none */
    /* TT_KIND_SETTLED */
    int64_t settled;     /* tpm limits corrected */
    int already_settled; /* the reservation had been settled before: nothing changed */
    /* TT_KIND_CHARGED */
    int64_t charged; /* tpm limits charged */
    /* TT_KIND_RELEASED */
    int released;
    const uint8_t *raw;
    size_t raw_len;
    /* TT_KIND_DECISION: the numbers `headers` was rendered from (all 0, retry_s -1, when the
     * daemon sent only rendered headers: a protocol 1 daemon) */
    tt_disclosed_t disclosed;
} tt_response_t;

/*
 * Renders the rate headers of `d` into out (room for `cap`), in the order of
 * tests/vectors/headers.txt, and returns how many there are (at most 10; more than cap are not
 * written). The library does it for every decision; this is for callers holding the numbers.
 */
TT_EXPORT unsigned tt_render_headers(const tt_disclosed_t *d, tt_header_t *out, unsigned cap);

/* The value of header `name` (case-insensitive) in a decision, or NULL. */
TT_EXPORT const char *tt_header(const tt_response_t *r, const char *name);

/* ---- pipelined ---- */

/* Queue one request; *seq (optional) receives the seq its answer will echo. tokens < 0 leaves
 * "tokens" out. */
TT_EXPORT int tt_send_decide(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                             uint64_t *seq);
/* Corrects what a tpm decision charged to the `actual` tokens used, by its reservation (once). */
TT_EXPORT int tt_send_settle(tt_client_t *c, uint64_t reservation, int64_t actual, uint64_t *seq);
/* Charges tokens counted with no reservation to every tpm limit of the subject (never refunds). */
TT_EXPORT int tt_send_charge(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                             uint64_t *seq);
TT_EXPORT int tt_send_acquire(tt_client_t *c, const tt_pair_t *subject, size_t n, uint64_t *seq);
TT_EXPORT int tt_send_release(tt_client_t *c, uint64_t lease, uint64_t *seq);
TT_EXPORT int tt_send_ping(tt_client_t *c, uint64_t *seq);
TT_EXPORT int tt_send_fleet(tt_client_t *c, uint64_t *seq);
TT_EXPORT int tt_send_members(tt_client_t *c, uint64_t *seq);
/* Writes everything queued (reading answers meanwhile, so a full socket never deadlocks). */
TT_EXPORT int tt_flush(tt_client_t *c);
/* Flushes, then waits for the next answer in request order. Returns 0, TT_ESERVER (an error
 * answer, in *r) or a transport error. */
TT_EXPORT int tt_recv(tt_client_t *c, tt_response_t *r);
/* Requests sent or queued whose answers have not been received yet. */
TT_EXPORT size_t tt_outstanding(const tt_client_t *c);

/* ---- blocking: one request, one answer ---- */

TT_EXPORT int tt_decide(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                        tt_response_t *r);
TT_EXPORT int tt_settle(tt_client_t *c, uint64_t reservation, int64_t actual, tt_response_t *r);
TT_EXPORT int tt_charge(tt_client_t *c, const tt_pair_t *subject, size_t n, int64_t tokens,
                        tt_response_t *r);
TT_EXPORT int tt_acquire(tt_client_t *c, const tt_pair_t *subject, size_t n, tt_response_t *r);
TT_EXPORT int tt_release(tt_client_t *c, uint64_t lease, tt_response_t *r);
TT_EXPORT int tt_ping(tt_client_t *c, tt_response_t *r);
TT_EXPORT int tt_fleet(tt_client_t *c, tt_response_t *r);
TT_EXPORT int tt_members(tt_client_t *c, tt_response_t *r);

#ifdef __cplusplus
}
#endif

#endif
