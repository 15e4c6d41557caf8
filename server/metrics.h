/*
 * The daemon's Prometheus metrics (text format 0.0.4, prefix tokentriage_). The server counts
 * what passes through it; other parts (engine, membership, share store) register a source that
 * appends their own families when /metrics is scraped.
 */
#ifndef TT_SERVER_METRICS_H
#define TT_SERVER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

typedef struct srv_metrics srv_metrics_t;

/* The ways in (SPEC §9: who may spend is the same on every door), a label on the decision
 * metrics: the decision socket (msgpack), HTTP (on the socket and on TCP), Envoy's gRPC. */
typedef enum srv_door {
    SRV_DOOR_SOCKET = 0,
    SRV_DOOR_HTTP,
    SRV_DOOR_GRPC,
    SRV_DOOR_COUNT_,
} srv_door_t;

/* The label value: "socket", "http", "grpc". */
const char *srv_door_name(srv_door_t door);

typedef enum srv_verdict {
    SRV_VERDICT_ADMIT = 0,
    SRV_VERDICT_DENY,
    SRV_VERDICT_UNFITTABLE,
    SRV_VERDICT_COUNT_,
} srv_verdict_t;

/* Why a door closed a connection on its own (tokentriage_connections_closed_total's `reason`):
 * at server.max_connections, to make room; no preface within its deadline (gRPC); a request not
 * whole within its deadline (HTTP's 408); nothing asked for its idle time; a client that kept
 * sending what it was told not to (gRPC: header lists past the advertised bound, a flood of
 * control frames: GOAWAY ENHANCE_YOUR_CALM); request bodies past the connection's flow-control
 * window (gRPC); any other breach of the protocol (bytes that are not HTTP). */
typedef enum srv_close {
    SRV_CLOSE_EVICTED = 0,
    SRV_CLOSE_PREFACE_TIMEOUT,
    SRV_CLOSE_REQUEST_TIMEOUT,
    SRV_CLOSE_IDLE,
    SRV_CLOSE_CALM,
    SRV_CLOSE_FLOW_CONTROL,
    SRV_CLOSE_PROTOCOL,
    SRV_CLOSE_COUNT_,
} srv_close_t;

/* The label value ("evicted", ...), and back: the reason a name gives, or -1. */
const char *srv_close_name(srv_close_t why);
int srv_close_parse(const char *name);

/* Appends Prometheus text (# HELP, # TYPE and samples) to out when /metrics is scraped. */
typedef void (*srv_metrics_source_fn)(tt_buf_t *out, void *ud);

srv_metrics_t *srv_metrics_new(void);
void srv_metrics_free(srv_metrics_t *m);

/* One decision answered on `door`, by verdict. (Per-limit outcomes are the engine's, rendered by
 * its source.) */
void srv_metrics_decision(srv_metrics_t *m, srv_door_t door, srv_verdict_t verdict);
/* `count` decisions on `door` that each took at most latency_ns from the read of their request
 * (a batch of them is observed once, at its end: the clock is read once per batch). */
void srv_metrics_latency(srv_metrics_t *m, srv_door_t door, uint64_t latency_ns, uint64_t count);
void srv_metrics_request(srv_metrics_t *m, srv_door_t door, proto_op_t op);
/* A request on `door` answered with an error, by its wire code ("wrong_type", ...). */
void srv_metrics_error(srv_metrics_t *m, srv_door_t door, const char *code);
/* A connection `door` closed on its own, for `why`. */
void srv_metrics_closed(srv_metrics_t *m, srv_door_t door, srv_close_t why);
void srv_metrics_reload(srv_metrics_t *m, bool ok);
void srv_metrics_connections(srv_metrics_t *m, int delta);
/* Registers a source; at most 16. Returns 0 or -1. */
int srv_metrics_add_source(srv_metrics_t *m, srv_metrics_source_fn fn, void *ud);

/* Appends every family, the server's first, then each source's. */
void srv_metrics_render(srv_metrics_t *m, tt_buf_t *out);

/* printf into out; for sources. */
void srv_metrics_printf(tt_buf_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
