/*
 * rls: Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
 * SPEC §12) and grpc.health.v1.Health/Check, as a pure mapping core: protobuf bytes in, the
 * engine's decisions, protobuf bytes out. No socket, no clock: `now` is an argument. The HTTP/2
 * shell (rls_h2.h) frames the messages and calls these.
 *
 * Mapping (docs/clients.md): each descriptor is one ask of gov_decide_asks with exact matching:
 * its entries name subject levels (key = level, value = id), in order, and it applies the limits
 * attached to exactly those levels (`level: team` for [team], `levels: [generic_key, team]` for
 * that pair). The cost is the descriptor's hits_addend when set (a wrapper: 0 is a check that
 * consumes nothing), else the request's (0 means 1: proto3 cannot tell it from unset). All
 * descriptors are decided two-phase as one: an OVER_LIMIT consumes nothing, unless the domain is
 * in server.grpc_charge_domains (counted after the fact: everything charged, overruns included).
 */
#ifndef TT_RLS_H
#define TT_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"

#define RLS_MESSAGE_MAX (64 * 1024) /* bytes in one request message (as the socket's) */

/* gRPC status codes (grpc/doc/statuscodes.md) that the service answers. */
enum {
    RLS_OK = 0,
    RLS_CANCELLED = 1,
    RLS_INVALID_ARGUMENT = 3,
    RLS_DEADLINE_EXCEEDED = 4,
    RLS_NOT_FOUND = 5,
    RLS_PERMISSION_DENIED = 7,
    RLS_RESOURCE_EXHAUSTED = 8,
    RLS_FAILED_PRECONDITION = 9,
    RLS_UNIMPLEMENTED = 12,
    RLS_INTERNAL = 13,
    RLS_UNAUTHENTICATED = 16,
};

/* One answer: a packed response message on RLS_OK, else a status and its message. */
typedef struct rls_answer {
    int status;
    char message[256];
    uint8_t *body; /* malloc'd, owned by the caller (rls_answer_free); NULL when status != OK */
    size_t len;
    /* a call refused here before the door was asked (which then counted nothing): the code the
     * shell tells it by ("too_large", "bad_frame", "bad_request", h2.h; "out_of_memory");
     * NULL otherwise */
    const char *refused;
} rls_answer_t;

void rls_answer_free(rls_answer_t *a);

/* Who sent a call, as the shells know it (listen.c: the connection; h2.c: the call's metadata).
 * The door decides what it may spend. */
typedef struct rls_caller {
    bool tcp;  /* the connection came over TCP (not a unix socket) */
    bool cred; /* uid and gid are the kernel's (SO_PEERCRED: a unix socket's peer) */
    uint32_t uid, gid;
    const char *authorization; /* the call's `authorization` metadata, or NULL; borrowed */
    size_t authorization_len;
} rls_caller_t;

/* The engine call a request's descriptors are decided with: `decide` answers the asks of
 * `domain` for `who` as gov_decide_domain does (0, a negative code with the error in the
 * result of the ask it concerns, or GOV_PENDING: done(results, ctx) follows once Redis has
 * answered). The daemon's is server/door.c's (door_rls). */
typedef struct rls_door {
    int (*decide)(void *ud, const rls_caller_t *who, const char *domain, size_t domain_len,
                  const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                  gov_result_t *results, gov_done_fn done, void *ctx);
    void *ud;
} rls_door_t;

/* rls_call_start's answer when the call waits on Redis: not a gRPC status. */
#define RLS_PENDING (-1)
/* a limit's store could not answer and its posture fails closed; or a caller that cannot wait */
#define RLS_UNAVAILABLE 14

typedef struct rls_call rls_call_t;

/* A call's answer when it came after rls_call_start returned: *ans is the callee's (its body
 * freed with rls_answer_free). */
typedef void (*rls_done_fn)(rls_answer_t *ans, void *ctx);

/*
 * Decodes a RateLimitRequest (`len` bytes, at most RLS_MESSAGE_MAX), decides it through `door`
 * for `who` at `now`, and packs the RateLimitResponse into out. `*cfg` is the armed config in
 * force (read again when a late answer is made: the daemon swaps it on reload): its
 * server.grpc_* settings. Bad input gets a status and its message and changes nothing. Returns
 * out->status, or RLS_PENDING with *pending set when rules of store redis are met: then
 * done(ans, ctx) runs once they have answered, unless rls_call_abandon(*pending) came first.
 * A descriptor denied only because its limit's store could not answer (posture.fail closed:
 * Redis down, the share store not armed) fails the call RLS_UNAVAILABLE, the error Envoy's
 * failure_mode_deny acts on.
 */
int rls_call_start(rls_call_t **pending, const rls_door_t *door, const rls_caller_t *who,
                   cfg_config_t *const *cfg, const uint8_t *msg, size_t len, int64_t now,
                   rls_answer_t *out, rls_done_fn done, void *ctx);

/* The caller of a pending call is gone (its stream reset, its connection closed): the call is
 * freed when its decision completes, and nobody is told. */
void rls_call_abandon(rls_call_t *call);

/* rls_call_start for a caller that cannot wait: a call that would wait on Redis is answered
 * UNAVAILABLE (its decision still completes). */
int rls_should_rate_limit(const rls_door_t *door, const rls_caller_t *who, cfg_config_t *const *cfg,
                          const uint8_t *msg, size_t len, int64_t now, rls_answer_t *out);

/* How a request of `domain` (NUL-terminated) is decided under the server settings `srv`: RLS_OK
 * with *flags for gov_decide_domain (GOV_ASK_EXACT; GOV_ASK_CHARGE for server.grpc_charge_domains
 * and unless grpc_stop_cache_key_increment_when_overlimit), or RLS_NOT_FOUND when
 * server.grpc_domains does not serve it. rls_call_start's rule, and the replay's of a recorded
 * request (simulate --traffic). */
int rls_domain_flags(const cfg_server_t *srv, const char *domain, unsigned *flags);

/* grpc.health.v1.Health/Check: SERVING for "" and the RLS service's name, else NOT_FOUND. */
int rls_health_check(const uint8_t *msg, size_t len, rls_answer_t *out);

/* The method a gRPC :path names, or -1. */
enum { RLS_METHOD_SHOULD_RATE_LIMIT = 0, RLS_METHOD_HEALTH_CHECK = 1 };
int rls_method(const char *path, size_t len);

#endif
