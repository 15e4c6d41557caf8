/*
 * hdoor: the HTTP front door's pure core (SPEC §12): what a parsed request asks for, and the
 * bytes of the answer. No socket, no clock, no engine; the libuv shell (http.c) calls the
 * engine and moves the bytes.
 *
 * Routes: GET|HEAD /healthz, /readyz, /metrics, /status (the page, status.h), /v1/fleet (the
 * socket's `fleet` answer, msgpack); /v1/decide and POST /v1/settle.
 *
 * /v1/decide reads its subject from the query (`?team=t-1&key=k-1&tokens=1200`) and from the
 * request headers server.http_subject maps to levels (`X-Team` -> team), its tokens from
 * `tokens` or the server.http_tokens header. `deny_status=401|403` answers a denial with that
 * status instead of 429, for nginx's auth_request, which takes nothing else for a denial. Any
 * method is taken: forward-auth proxies send the client's (Envoy's ext_authz) or their own. A path
 * below it, `/v1/decide/<anything>`, is a forwarded request (Envoy's path_prefix puts the client's
 * path and query there): its query is the client's, so it is not read, and the subject comes from
 * headers alone.
 *
 * An admitted decision that charged a tpm limit carries its reservation id in the JSON body and
 * in a `Tokentriage-Reservation` header (a forward-auth proxy can copy it to its upstream);
 * `POST /v1/settle?reservation=ID&actual=A` settles it, once. Both routes spend, so both are
 * served where /v1/decide is: always on the socket, on the TCP listener only with
 * server.http_decide on. The request's `Tokentriage-Authorization` (when sent, so a forward-auth
 * proxy need not replace its client's own Authorization) or `Authorization` goes to the door
 * (door.h), which decides who may spend: over TCP its bearer token must be one of
 * server.tokens_file's, granted every level and id the request names (401 without one, 403 for
 * a subject it may not name).
 *
 * Never a decision on doubtful input: a query parameter that names no configured level (a
 * typo would escape every limit), a level given twice, an empty or oversized id, a tokens
 * value that is not a whole number within 0..2^40, bad percent-encoding, no level at all:
 * each is a 400 whose JSON body names what was wrong, and nothing is spent.
 */
#ifndef TT_SERVER_HDOOR_H
#define TT_SERVER_HDOOR_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "engine.h"
#include "hreq.h"
#include "proto.h"

/* An answer's framing: close the connection after it (keep_alive false) or not; a HEAD
 * request gets the head alone. */
typedef struct hdoor_frame {
    bool keep_alive;
    bool head_only;
} hdoor_frame_t;

/*
 * Appends one whole response: the status line, Content-Type and Content-Length, Connection,
 * then `extra` (whole header lines, each ending in CRLF, or NULL), then the body unless
 * head_only. Returns 0 or -1 (out->failed).
 */
int hdoor_respond(tt_buf_t *out, int status, const char *reason, const char *type,
                  const char *extra, const void *body, size_t len, hdoor_frame_t f);

/* The same with a text/plain body. */
int hdoor_respond_text(tt_buf_t *out, int status, const char *reason, const char *text,
                       hdoor_frame_t f);

/* A JSON error answer: {"error":{"code":...,"message":...}}. */
int hdoor_respond_error(tt_buf_t *out, int status, const char *reason, const char *code,
                        const char *message, hdoor_frame_t f);

/* The request headers that name subject levels and tokens (server.http_subject and
 * server.http_tokens, copied). */
typedef struct hdoor_map {
    cfg_http_level_t subject[CFG_HTTP_SUBJECT_MAX];
    size_t n_subject;
    char tokens[CFG_HEADER_MAX + 1]; /* "" = none */
} hdoor_map_t;

/* hreq's filter: keeps the mapped headers, Authorization and Tokentriage-Authorization (ud is
 * the hdoor_map_t). */
bool hdoor_want(void *ud, const char *name, size_t len);

/* Is `level` a level some limit attaches to? (The shell asks the engine.) */
typedef bool (*hdoor_known_fn)(void *ud, const char *level, size_t len);

typedef enum hdoor_route {
    HDOOR_ANSWERED = 0, /* the answer (a 4xx) is already written */
    HDOOR_HEALTHZ,
    HDOOR_READYZ,
    HDOOR_METRICS,
    HDOOR_STATUS,
    HDOOR_FLEET,
    HDOOR_DECIDE,
    HDOOR_SETTLE,
} hdoor_route_t;

/* What a request asks, read by hdoor_route. The subject's strings point into `scratch` and
 * into the request: valid while both are. */
typedef struct hdoor_call {
    gov_subject_t subject;
    int64_t tokens;       /* GOV_NO_TOKENS when the request named none; settle: actual */
    uint64_t reservation; /* settle: the id to settle */
    int deny_status;      /* 429, or what ?deny_status= asked for (401, 403: nginx auth_request) */
    hreq_str_t authorization; /* Tokentriage-Authorization's value, else Authorization's, for the
                                 door; {NULL, 0}: none */
    char scratch[HREQ_TARGET_MAX];
} hdoor_call_t;

typedef struct hdoor_env {
    const hdoor_map_t *map;
    bool decide;          /* /v1/decide is served on this listener */
    hdoor_known_fn known; /* with known_ud */
    void *known_ud;
} hdoor_env_t;

/*
 * Routes req. For HDOOR_DECIDE the call is filled; for HDOOR_ANSWERED the answer (400, 403,
 * 404, 405) has been appended to out, framed by f.
 */
hdoor_route_t hdoor_route(const hdoor_env_t *env, const hreq_request_t *req, hdoor_call_t *call,
                          tt_buf_t *out, hdoor_frame_t f);

/* The answer to a decision: 200 admit, deny_status (429 unless the request asked otherwise)
 * for a deny or unfittable (Retry-After on deny), 503 for a deny only posture.fail closed made,
 * the disclosure headers on each, a JSON body; an engine error is a 400 naming it (503 when out
 * of memory); a caller the door refused is 401 (no bearer token the daemon holds, with
 * WWW-Authenticate: Bearer) or 403 (a subject its token may not name, a peer not allowed). */
int hdoor_respond_decision(tt_buf_t *out, const gov_result_t *r, int deny_status, hdoor_frame_t f);

/* The answer to a settle: 200 with {"settled": N, "already_settled": bool} (a repeat is 200 and
 * changed nothing), 404 unknown_reservation (another client's included), 401 and 403 as for a
 * decision, 400 naming any other engine error, 503 when out of memory. */
int hdoor_respond_settled(tt_buf_t *out, const gov_result_t *r, hdoor_frame_t f);

#endif
