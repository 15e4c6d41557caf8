/* Counters kept by the server and the /metrics text; see metrics.h. */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define MAX_SOURCES 16
#define NBUCKETS 14

/* Upper bounds of the latency histogram, in nanoseconds (printed in seconds). */
static const uint64_t bucket_ns[NBUCKETS] = {
    1000,   2500,   5000,    10000,   25000,    50000,     100000,
    250000, 500000, 1000000, 2500000, 10000000, 100000000, 1000000000,
};

static const char *const verdict_names[SRV_VERDICT_COUNT_] = {"admit", "deny", "unfittable"};
static const char *const door_names[SRV_DOOR_COUNT_] = {"socket", "http", "grpc"};
/* The ops each door serves: requests_total shows only these (HTTP: /v1/decide and /v1/settle;
 * gRPC: ShouldRateLimit, a decide). */
static const uint32_t door_ops[SRV_DOOR_COUNT_] = {
    UINT32_MAX,
    1u << PROTO_OP_DECIDE | 1u << PROTO_OP_SETTLE,
    1u << PROTO_OP_DECIDE,
};
static const char *const close_names[SRV_CLOSE_COUNT_] = {
    "evicted", "preface_timeout", "request_timeout", "idle", "calm", "flow_control", "protocol"};
/* The reasons each door closes a connection for: connections_closed_total shows only these (the
 * socket refuses at accept instead, counted as the error too_many_connections). */
static const uint32_t door_closes[SRV_DOOR_COUNT_] = {
    0,
    1u << SRV_CLOSE_EVICTED | 1u << SRV_CLOSE_REQUEST_TIMEOUT | 1u << SRV_CLOSE_IDLE |
        1u << SRV_CLOSE_PROTOCOL,
    1u << SRV_CLOSE_EVICTED | 1u << SRV_CLOSE_PREFACE_TIMEOUT | 1u << SRV_CLOSE_IDLE |
        1u << SRV_CLOSE_CALM | 1u << SRV_CLOSE_FLOW_CONTROL | 1u << SRV_CLOSE_PROTOCOL,
};
/* The codes counted apart; any other (the engine's own) counts as "other", the last. The gRPC
 * door's own refusals add bad_request (a RateLimitRequest it does not take), deadline_exceeded
 * (the call's grpc-timeout passed first), request_timeout (the request was not whole in time)
 * and refused_stream (a stream past SETTINGS_MAX_CONCURRENT_STREAMS). HTTP's (hreq.h) add
 * uri_too_long (414) and headers_too_large (431); its 400, 413 and 408 are bad_request,
 * too_large and request_timeout. */
static const char *const error_codes[] = {
    "bad_frame",         "too_large",       "too_deep",
    "wrong_type",        "unknown_op",      "missing_field",
    "bad_value",         "unknown_field",   "too_many_connections",
    "unavailable",       "unauthenticated", "forbidden",
    "peer_not_allowed",  "bad_request",     "deadline_exceeded",
    "request_timeout",   "refused_stream",  "uri_too_long",
    "headers_too_large", "other",
};
#define NERRORS (sizeof(error_codes) / sizeof(error_codes[0]))

/* One door's decision metrics. */
typedef struct door_counts {
    uint64_t verdicts[SRV_VERDICT_COUNT_];
    uint64_t buckets[NBUCKETS + 1]; /* the last is +Inf */
    uint64_t latency_sum_ns;
    uint64_t latency_count;
    uint64_t requests[PROTO_OP_COUNT_];
    uint64_t errors[NERRORS];
    uint64_t closed[SRV_CLOSE_COUNT_];
} door_counts_t;

struct srv_metrics {
    door_counts_t door[SRV_DOOR_COUNT_];
    uint64_t reloads[2]; /* failed, ok */
    int64_t connections;
    struct {
        srv_metrics_source_fn fn;
        void *ud;
    } sources[MAX_SOURCES];
    int nsources;
};

srv_metrics_t *srv_metrics_new(void)
{
    return calloc(1, sizeof(srv_metrics_t));
}

void srv_metrics_free(srv_metrics_t *m)
{
    free(m);
}

const char *srv_door_name(srv_door_t door)
{
    return (unsigned)door < SRV_DOOR_COUNT_ ? door_names[door] : "unknown";
}

void srv_metrics_decision(srv_metrics_t *m, srv_door_t door, srv_verdict_t verdict)
{
    m->door[door].verdicts[verdict]++;
}

void srv_metrics_latency(srv_metrics_t *m, srv_door_t door, uint64_t latency_ns, uint64_t count)
{
    door_counts_t *d = &m->door[door];
    int b = 0;
    while (b < NBUCKETS && latency_ns > bucket_ns[b])
        b++;
    d->buckets[b] += count;
    d->latency_sum_ns += latency_ns * count;
    d->latency_count += count;
}

void srv_metrics_request(srv_metrics_t *m, srv_door_t door, proto_op_t op)
{
    if ((unsigned)op < PROTO_OP_COUNT_)
        m->door[door].requests[op]++;
}

void srv_metrics_error(srv_metrics_t *m, srv_door_t door, const char *code)
{
    size_t i = 0;
    while (i < NERRORS - 1 && strcmp(error_codes[i], code) != 0)
        i++;
    m->door[door].errors[i]++;
}

const char *srv_close_name(srv_close_t why)
{
    return (unsigned)why < SRV_CLOSE_COUNT_ ? close_names[why] : "unknown";
}

int srv_close_parse(const char *name)
{
    for (int i = 0; i < SRV_CLOSE_COUNT_; i++)
        if (strcmp(close_names[i], name) == 0)
            return i;
    return -1;
}

void srv_metrics_closed(srv_metrics_t *m, srv_door_t door, srv_close_t why)
{
    if ((unsigned)why < SRV_CLOSE_COUNT_)
        m->door[door].closed[why]++;
}

void srv_metrics_reload(srv_metrics_t *m, bool ok)
{
    m->reloads[ok]++;
}

void srv_metrics_connections(srv_metrics_t *m, int delta)
{
    m->connections += delta;
}

int srv_metrics_add_source(srv_metrics_t *m, srv_metrics_source_fn fn, void *ud)
{
    if (m->nsources == MAX_SOURCES)
        return -1;
    m->sources[m->nsources].fn = fn;
    m->sources[m->nsources].ud = ud;
    m->nsources++;
    return 0;
}

void srv_metrics_printf(tt_buf_t *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tt_buf_vprintf(out, fmt, ap);
    va_end(ap);
}

#define P srv_metrics_printf

void srv_metrics_render(srv_metrics_t *m, tt_buf_t *out)
{
    P(out, "# HELP tokentriage_verdicts_total Decisions answered, by door (socket, http, grpc) "
           "and verdict.\n# TYPE tokentriage_verdicts_total counter\n");
    for (int d = 0; d < SRV_DOOR_COUNT_; d++)
        for (int v = 0; v < SRV_VERDICT_COUNT_; v++)
            P(out, "tokentriage_verdicts_total{door=\"%s\",verdict=\"%s\"} %llu\n", door_names[d],
              verdict_names[v], (unsigned long long)m->door[d].verdicts[v]);
    P(out, "# HELP tokentriage_decision_latency_seconds Time from reading a decision request (on "
           "the socket, with its batch) to having its answer, by door.\n"
           "# TYPE tokentriage_decision_latency_seconds histogram\n");
    for (int d = 0; d < SRV_DOOR_COUNT_; d++) {
        const door_counts_t *c = &m->door[d];
        uint64_t cum = 0;
        for (int b = 0; b <= NBUCKETS; b++) {
            cum += c->buckets[b];
            if (b < NBUCKETS)
                P(out, "tokentriage_decision_latency_seconds_bucket{door=\"%s\",le=\"%g\"} %llu\n",
                  door_names[d], (double)bucket_ns[b] / 1e9, (unsigned long long)cum);
            else
                P(out,
                  "tokentriage_decision_latency_seconds_bucket{door=\"%s\",le=\"+Inf\"} %llu\n",
                  door_names[d], (unsigned long long)cum);
        }
        P(out, "tokentriage_decision_latency_seconds_sum{door=\"%s\"} %.9f\n", door_names[d],
          (double)c->latency_sum_ns / 1e9);
        P(out, "tokentriage_decision_latency_seconds_count{door=\"%s\"} %llu\n", door_names[d],
          (unsigned long long)c->latency_count);
    }
    P(out, "# HELP tokentriage_requests_total Requests, by door and op.\n"
           "# TYPE tokentriage_requests_total counter\n");
    for (int d = 0; d < SRV_DOOR_COUNT_; d++)
        for (int op = 0; op < PROTO_OP_COUNT_; op++)
            if (door_ops[d] & 1u << op)
                P(out, "tokentriage_requests_total{door=\"%s\",op=\"%s\"} %llu\n", door_names[d],
                  proto_op_name((proto_op_t)op), (unsigned long long)m->door[d].requests[op]);
    P(out, "# HELP tokentriage_request_errors_total Requests answered with an error, by door and "
           "code.\n# TYPE tokentriage_request_errors_total counter\n");
    for (int d = 0; d < SRV_DOOR_COUNT_; d++)
        for (size_t i = 0; i < NERRORS; i++)
            P(out, "tokentriage_request_errors_total{door=\"%s\",code=\"%s\"} %llu\n",
              door_names[d], error_codes[i], (unsigned long long)m->door[d].errors[i]);
    P(out, "# HELP tokentriage_connections_closed_total Connections a door closed on its own, by "
           "door and reason.\n# TYPE tokentriage_connections_closed_total counter\n");
    for (int d = 0; d < SRV_DOOR_COUNT_; d++)
        for (int why = 0; why < SRV_CLOSE_COUNT_; why++)
            if (door_closes[d] & 1u << why)
                P(out, "tokentriage_connections_closed_total{door=\"%s\",reason=\"%s\"} %llu\n",
                  door_names[d], close_names[why], (unsigned long long)m->door[d].closed[why]);
    P(out,
      "# HELP tokentriage_reloads_total Configuration reloads, by result.\n"
      "# TYPE tokentriage_reloads_total counter\n"
      "tokentriage_reloads_total{result=\"ok\"} %llu\n"
      "tokentriage_reloads_total{result=\"failed\"} %llu\n",
      (unsigned long long)m->reloads[1], (unsigned long long)m->reloads[0]);
    P(out,
      "# HELP tokentriage_connections Open decision socket connections.\n"
      "# TYPE tokentriage_connections gauge\ntokentriage_connections %lld\n",
      (long long)m->connections);
    for (int i = 0; i < m->nsources; i++)
        m->sources[i].fn(out, m->sources[i].ud);
}
