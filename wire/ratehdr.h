/*
 * ratehdr: the rate headers rendered from a decision's numbers (SPEC §5, "Answer forms"). One
 * renderer in C for every C caller: the daemon (answers to `"headers": true` and protocol 1
 * requests, the HTTP and gRPC front doors) and the client library (which renders what a
 * protocol 2 answer carries as numbers; the CLI prints what it rendered). The Python client
 * carries its own. All of them are checked against tests/vectors/headers.txt, whose lines are
 * the fields of proto_disclosed_t: `policy`, `requests`, `tokens`, `retry`.
 *
 * Pure formatting: no allocation, no snprintf (it runs on every decision that asks for it).
 * docs/engine.md ("Disclosure") says what each number means.
 */
#ifndef TT_WIRE_RATEHDR_H
#define TT_WIRE_RATEHDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_POLICY_ID_MAX 64     /* bytes in a disclosed limit id (config's CFG_ID_MAX) */
#define PROTO_RATE_HEADERS_MAX 10  /* headers one decision can carry */
#define PROTO_HEADER_VALUE_MAX 160 /* a rendered value, NUL included */
#define PROTO_SF_INT_MAX INT64_C(999999999999999) /* RFC 9651 Integers: 15 digits */

/* A limit's quota, what is left of it and when it is whole again (X-Ratelimit-*). */
typedef struct proto_trio {
    int64_t quota;     /* units per period */
    int64_t remaining; /* units a unit probe reads now */
    int64_t reset_ms;  /* until the key is as a fresh one, rounded up */
} proto_trio_t;

/* What a decision discloses, as numbers: the lines of tests/vectors/headers.txt. */
typedef struct proto_disclosed {
    bool has_policy;                         /* Ratelimit-Policy and RateLimit */
    bool policy_tpm;                         /* the policy counts tokens (qu="tokens") */
    bool has_requests;                       /* the X-Ratelimit-*-Requests trio */
    bool has_tokens;                         /* the X-Ratelimit-*-Tokens trio */
    char policy_id[PROTO_POLICY_ID_MAX + 1]; /* NUL-terminated */
    int64_t period_ms;                       /* the policy's period, whole milliseconds */
    int64_t quota, remaining, t_s;           /* RateLimit-Policy q (per period), r and t */
    proto_trio_t requests, tokens;
    int64_t retry_s; /* Retry-After (at least t when a policy is shown); -1: none */
} proto_disclosed_t;

typedef struct proto_rate_header {
    const char *name; /* a static string, e.g. "Ratelimit-Policy" */
    char value[PROTO_HEADER_VALUE_MAX];
} proto_rate_header_t;

/* Writes the headers d discloses into out (PROTO_RATE_HEADERS_MAX of room) in the table's
 * order and returns how many. */
uint32_t proto_render_headers(const proto_disclosed_t *d, proto_rate_header_t *out);

/* A Go-style duration (time.Duration's String) of whole milliseconds: 0s, 250ms, 1s, 1.5s,
 * 1m0s, 6m0.25s, 1h0m0s. Negative reads as 0s. Returns the length (NUL not counted). */
size_t proto_go_duration(char *buf, size_t size, int64_t ms);

#endif
