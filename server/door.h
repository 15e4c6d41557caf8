/*
 * door: the one call into the engine behind every way in (SPEC §9, §12). The decision socket
 * (dispatch.c), HTTP on the socket and on TCP (http.c) and Envoy's gRPC (rls/, through the
 * handler door_rls gives) each establish who is calling (door_caller_t) and hand the call here.
 * Here, and nowhere else, the engine is called for a decision (decide, settle, charge, acquire,
 * a gRPC request's asks), a later answer (GOV_PENDING, a redis limit) is handed back through
 * the caller's callback, and every answer is counted on /metrics by door (verdicts, latency,
 * requests, errors). The shells move bytes; what a request means is theirs to read.
 *
 * Who may spend (SPEC §9) is checked here too, before the engine, the same for every door:
 *   - a caller on a unix socket (the decision socket, HTTP on it, gRPC on a unix path) by its
 *     peer credentials: with server.allow_uids / allow_gids set, its uid or gid must be listed
 *     (the socket also refuses such a peer at accept, through door_peer_allowed);
 *   - a caller over TCP (HTTP on server.http, gRPC on host:port) by its bearer token
 *     (`Authorization: Bearer <token>`, gRPC metadata `authorization`): one of
 *     server.tokens_file's (compared in constant time), and every (level, id) its request names
 *     must be granted to that token. No token, no decision.
 * The engine is then told whose call it is (gov_client_t): a unix caller's account is its uid
 * (the socket's callers are one owner: an nginx decides, the application behind it settles), a
 * token's client (its name) is its account and its owner, so it settles its own reservations
 * alone and one client cannot take the whole reservation pool from the others.
 *
 * Memory: a call's result lives in a door_req_t the caller embeds in what it allocates (its
 * answer slot). The engine writes it, and keeps it from a GOV_PENDING return until `done` runs;
 * a call answered at once leaves it the caller's, to reuse. So the common path allocates
 * nothing.
 */
#ifndef TT_SERVER_DOOR_H
#define TT_SERVER_DOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "metrics.h"
#include "proto.h"
#include "rls.h"

typedef struct door door_t;

/* Who is calling, as the shell that read the request knows it. */
typedef struct door_caller {
    srv_door_t door;
    uint64_t conn; /* the connection: its leases are its own (gov_acquire's owner) */
    bool tcp;      /* over TCP: a bearer token decides what it may spend */
    bool cred;     /* uid and gid are the kernel's (SO_PEERCRED), for a unix socket's peer */
    uint32_t uid, gid;
    /* the request's `authorization` value as sent ("Bearer <token>"), not NUL-terminated;
     * NULL when it sent none. Borrowed for the call. */
    const char *authorization;
    size_t authorization_len;
} door_caller_t;

#define DOOR_ALLOW_MAX 32 /* entries in each allow list (server.allow_uids, allow_gids) */

/* What the door checks callers against. */
typedef struct door_options {
    /* the peer allow-list of the unix doors (copied): with either non-empty, a peer is served
     * only when its uid is in allow_uids or its gid in allow_gids */
    const uint32_t *allow_uids, *allow_gids;
    size_t n_allow_uids, n_allow_gids;
    /* the armed config in force, read at each call for its tokens (server.tokens_file; the
     * daemon swaps the pointer on reload); NULL: no token is accepted */
    cfg_config_t *const *cfg;
} door_options_t;

/* One engine call's memory (see above). door_call fills everything but `result`'s use. */
typedef struct door_req {
    gov_result_t result; /* the answer */
    door_t *door;
    srv_door_t kind;
    proto_op_t op;
    uint64_t start_ns;
    gov_done_fn done;
    void *ctx;
    uint64_t observed; /* the observer's token for the later answer (0: none) */
} door_req_t;

/* What is asked. */
typedef struct door_args {
    proto_op_t op;                /* PROTO_OP_DECIDE, _SETTLE, _CHARGE or _ACQUIRE */
    const gov_subject_t *subject; /* decide, charge, acquire (borrowed for the call) */
    int64_t tokens;       /* decide: the estimate or GOV_NO_TOKENS; charge: the tokens; settle:
                             the actual count */
    uint64_t reservation; /* settle: the id to settle */
    int64_t now;          /* the wall clock (SPEC §2) */
    uint64_t start_ns;    /* the monotonic time (uv_hrtime) the request was read */
    bool batched;         /* answered at once, its latency is its batch's, observed once at
                             door_batch_end; otherwise (and when the engine answers later) it is
                             measured when the answer is made */
} door_args_t;

/* A door over engine and metrics (both the caller's, outliving it) checking callers as opt
 * says (copied; opt NULL: no allow-list, no tokens). Returns 0, or a negative code described
 * in *err: TT_ERR_INVAL (an allow list longer than DOOR_ALLOW_MAX, path server.allow_uids or
 * server.allow_gids), TT_ERR_NOMEM. */
int door_new(door_t **out, gov_engine_t *engine, srv_metrics_t *metrics, const door_options_t *opt,
             tt_err_t *err);
void door_free(door_t *d);

/* One decision as the door saw it asked, for an observer (the recording, server/record.h): a
 * decide's subject and tokens (the socket, HTTP), or a gRPC request's domain and asks. Borrowed
 * for the call. */
typedef struct door_decision {
    int64_t now;
    const gov_subject_t *subject; /* a decide's; NULL for a gRPC request */
    int64_t tokens;               /* a decide's, or GOV_NO_TOKENS */
    const char *domain;           /* a gRPC request's (asks[0, n)), not NUL-terminated */
    size_t domain_len;
    const gov_ask_t *asks;
    size_t n;
} door_decision_t;

/* What a decision was answered, as it is counted: its verdict (a gRPC request's: deny when it
 * was refused) and the limit that decided it ("" when none: an admission of a gRPC request). */
typedef struct door_verdict {
    gov_verdict_t verdict;
    const char *limit;
} door_verdict_t;

/*
 * Told of every decision the door makes, on every door the same way: `asked` with its inputs and,
 * when the engine answered at once, its verdict; when the engine answers later (a Redis limit)
 * `v` is NULL, and the token asked returns (0: none wanted) comes back to `answered` with the
 * verdict it got, or with NULL when it ended in an error. A call refused before the engine (the
 * caller may not spend, a malformed request) is no decision: nobody is told.
 */
typedef struct door_observer {
    uint64_t (*asked)(void *ud, const door_decision_t *what, const door_verdict_t *v);
    void (*answered)(void *ud, uint64_t token, const door_verdict_t *v);
    void *ud;
} door_observer_t;

/* o copied; NULL: none. */
void door_set_observer(door_t *d, const door_observer_t *o);

/*
 * The one engine call, for `who` once it may (see above). Answers into req->result and returns
 * 0 or a negative code (counted already: an engine's GOV_E*, or TT_ERR_UNAUTHENTICATED,
 * TT_ERR_FORBIDDEN, TT_ERR_PEER when the caller may not spend this), or GOV_PENDING: then
 * done(&req->result, ctx) runs once the engine answers, counted just before. req must stay valid
 * until then.
 */
int door_call(door_t *d, const door_caller_t *who, const door_args_t *a, door_req_t *req,
              gov_done_fn done, void *ctx);

/* Several asks decided as one (a gRPC request's descriptors of `domain`), as gov_decide_domain,
 * once `who` may name every ask's subject, counted as one decision on who->door with the
 * request's verdict (a domain with rules: deny when the request was refused; otherwise admit
 * when every ask is admitted, else deny, or unfittable when no ask is denied but one is
 * unfittable). A caller that may not is answered at once in results[0] (or the ask it may not
 * name). With `done`, rules of store redis make it answer GOV_PENDING: done(results, ctx) runs
 * once Redis has answered, counted just before (results must stay valid until then). Without,
 * such a request is refused as before. */
int door_decide_asks(door_t *d, const door_caller_t *who, const char *domain, size_t domain_len,
                     const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                     gov_result_t *results, gov_done_fn done, void *ctx);

/* The batched decisions answered on `door` since the last call took at most now - start_ns:
 * observed once, for the whole batch (the clock is read once per batch). */
void door_batch_end(door_t *d, srv_door_t door, uint64_t start_ns);

/* Whether a unix socket's peer passes the allow-list (the socket refuses the others at accept
 * with TT_ERR_PEER's name and closes). Callers over TCP are not this check's. */
bool door_peer_allowed(const door_t *d, const door_caller_t *who);

/* True when a limit of the live configuration attaches to `level` (gov_level_known): the HTTP
 * door refuses a query parameter that names no level. */
bool door_level_known(const door_t *d, const char *level, size_t len);

/* The gRPC door's handler (rls.h): door_decide_asks for the rls_caller_t the shell gives. Valid
 * while d is. */
const rls_door_t *door_rls(door_t *d);

#endif
