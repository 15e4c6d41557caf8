/*
 * refused: what the doors turn away on their own, before any engine call, where an operator sees
 * it. A request the door's shell answers with an error (the gRPC door: a stream reset, a call its
 * core refuses, rls/h2.h's codes; HTTP: what hreq.h refuses, and the 408) is counted in
 * tokentriage_request_errors_total by door and code; a connection a door closes on its own (HTTP
 * and gRPC: evicted at server.max_connections, a deadline, idleness, a client that broke the
 * protocol) in tokentriage_connections_closed_total by door and reason. Both are logged (warn), but
 * an attack makes thousands a second, so at most one line every SRV_REFUSED_LOG_NS per door for
 * requests and per door and reason for connections (tt_log_every), each with how many came since
 * the line before; idle closes, the ordinary end of a kept connection, are counted and not logged.
 */
#ifndef TT_SERVER_REFUSED_H
#define TT_SERVER_REFUSED_H

#include "h2.h"
#include "metrics.h"
#include "tt_log.h"

#define SRV_REFUSED_LOG_NS (INT64_C(10) * 1000000000)

typedef struct srv_refused {
    srv_metrics_t *metrics; /* the caller's, outliving this */
    tt_log_every_t requests[SRV_DOOR_COUNT_];
    tt_log_every_t closes[SRV_DOOR_COUNT_][SRV_CLOSE_COUNT_];
    rls_events_t rls; /* the gRPC door's events, into this */
} srv_refused_t;

/* Ready to count into `metrics`. */
void srv_refused_init(srv_refused_t *r, srv_metrics_t *metrics);

/* A request `door` answered with an error of wire code `code` before any engine call. */
void srv_refused_request(srv_refused_t *r, srv_door_t door, const char *code);

/* The same refusal counted where it was answered (the socket's stream counts each error it
 * answers, its refusals at accept too): logged only. */
void srv_refused_logged(srv_refused_t *r, srv_door_t door, const char *code);

/* A connection `door` closed on its own, for `why`. */
void srv_refused_conn(srv_refused_t *r, srv_door_t door, srv_close_t why);

/* The gRPC door's events (rls_conn_config_t.events): its refusals as the gRPC door's. Valid
 * while r is. */
const rls_events_t *srv_refused_rls(srv_refused_t *r);

#endif
