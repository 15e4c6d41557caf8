/* The one engine call behind every door; see door.h. */
#include "door.h"

#include <stdlib.h>

#include <uv.h>

struct door {
    gov_engine_t *engine;
    srv_metrics_t *metrics;
    uint64_t batch[SRV_DOOR_COUNT_]; /* answered at once within the batch, observed at its end */
    rls_door_t rls;
    door_observe_fn observe;
    void *observe_ud;
};

void door_set_observer(door_t *d, door_observe_fn fn, void *ud)
{
    d->observe = fn;
    d->observe_ud = ud;
}

static srv_verdict_t verdict_of(gov_verdict_t v)
{
    return v == GOV_DENY         ? SRV_VERDICT_DENY
           : v == GOV_UNFITTABLE ? SRV_VERDICT_UNFITTABLE
                                 : SRV_VERDICT_ADMIT;
}

/* Counts a finished answer: an error by its code, a decision (decide, acquire) by its verdict
 * and latency. `batched`: observed with its batch, at door_batch_end. */
static void count(door_t *d, srv_door_t door, proto_op_t op, uint64_t start_ns, bool batched,
                  int status, gov_verdict_t verdict)
{
    if (status < 0) {
        srv_metrics_error(d->metrics, door, gov_strcode(status));
        return;
    }
    if (op != PROTO_OP_DECIDE && op != PROTO_OP_ACQUIRE)
        return;
    srv_metrics_decision(d->metrics, door, verdict_of(verdict));
    if (batched)
        d->batch[door]++;
    else
        srv_metrics_latency(d->metrics, door, uv_hrtime() - start_ns, 1);
}

/* The engine's later answer: counted (its own latency), then handed to the caller. */
static void on_done(gov_result_t *res, void *ctx)
{
    door_req_t *req = ctx;
    count(req->door, req->kind, req->op, req->start_ns, false, res->status, res->verdict);
    req->done(res, req->ctx);
}

int door_call(door_t *d, const door_caller_t *who, const door_args_t *a, door_req_t *req,
              gov_done_fn done, void *ctx)
{
    *req = (door_req_t){.door = d,
                        .kind = who->door,
                        .op = a->op,
                        .start_ns = a->start_ns,
                        .done = done,
                        .ctx = ctx};
    gov_result_t *out = &req->result;
    srv_metrics_request(d->metrics, who->door, a->op);
    int rc;
    switch (a->op) {
    case PROTO_OP_DECIDE:
        rc = gov_decide(d->engine, NULL, a->subject, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_SETTLE:
        rc = gov_settle(d->engine, NULL, a->reservation, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_CHARGE:
        rc = gov_charge(d->engine, a->subject, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_ACQUIRE:
        rc = gov_acquire(d->engine, a->subject, who->conn, a->now, out);
        break;
    default:
        *out = (gov_result_t){0};
        rc = out->status = tt_err_set(&out->err, GOV_EINVAL, "op", "not an engine call");
        break;
    }
    if (rc != GOV_PENDING)
        count(d, who->door, a->op, a->start_ns, a->batched, out->status, out->verdict);
    if (d->observe && a->op == PROTO_OP_DECIDE)
        d->observe(d->observe_ud, a->now, a->subject, a->tokens, rc == GOV_PENDING ? NULL : out);
    return rc;
}

/* A domain decision that waits on Redis: what its count needs when the answer comes. */
typedef struct domain_wait {
    door_t *door;
    srv_door_t kind;
    uint64_t start_ns;
    size_t n;
    gov_verdict_t overall;
    gov_done_fn done;
    void *ctx;
} domain_wait_t;

/* A domain decision's status: the engine's code, or the first ask's error when it is one. */
static int asks_status(int rc, const gov_result_t *results, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (results[i].status < 0)
            return results[i].status;
    return rc;
}

static void on_domain_done(gov_result_t *results, void *ctx)
{
    domain_wait_t *w = ctx;
    count(w->door, w->kind, PROTO_OP_DECIDE, w->start_ns, false, asks_status(0, results, w->n),
          w->overall);
    w->done(results, w->ctx);
    free(w);
}

int door_decide_asks(door_t *d, const door_caller_t *who, const char *domain, size_t domain_len,
                     const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                     gov_result_t *results, gov_done_fn done, void *ctx)
{
    uint64_t start = uv_hrtime();
    srv_metrics_request(d->metrics, who->door, PROTO_OP_DECIDE);
    domain_wait_t *w = NULL;
    if (done && n) { /* it may wait on Redis: the count's state outlives this call */
        w = malloc(sizeof(*w));
        if (!w) {
            for (size_t i = 0; i < n; i++)
                results[i] = (gov_result_t){0};
            int rc = results[0].status = tt_err_set(&results[0].err, GOV_ENOMEM, "request",
                                                    "out of memory starting the decision");
            count(d, who->door, PROTO_OP_DECIDE, start, false, rc, GOV_ADMIT);
            return rc;
        }
        *w = (domain_wait_t){.door = d,
                             .kind = who->door,
                             .start_ns = start,
                             .n = n,
                             .overall = GOV_ADMIT,
                             .done = done,
                             .ctx = ctx};
    }
    gov_verdict_t v = GOV_ADMIT;
    int rc = gov_decide_domain(d->engine, domain, domain_len, asks, n, flags, now, results,
                               w ? &w->overall : &v, w ? on_domain_done : NULL, w);
    if (rc == GOV_PENDING)
        return rc;
    if (w) {
        v = w->overall;
        free(w);
    }
    count(d, who->door, PROTO_OP_DECIDE, start, false, rc < 0 ? asks_status(rc, results, n) : rc,
          v);
    return rc;
}

void door_batch_end(door_t *d, srv_door_t door, uint64_t start_ns)
{
    if (!d->batch[door])
        return;
    srv_metrics_latency(d->metrics, door, uv_hrtime() - start_ns, d->batch[door]);
    d->batch[door] = 0;
}

bool door_level_known(const door_t *d, const char *level, size_t len)
{
    return gov_level_known(d->engine, level, len);
}

static int rls_decide(void *ud, const rls_caller_t *who, const char *domain, size_t domain_len,
                      const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                      gov_result_t *results, gov_done_fn done, void *ctx)
{
    (void)who;
    door_caller_t caller = {.door = SRV_DOOR_GRPC};
    return door_decide_asks(ud, &caller, domain, domain_len, asks, n, flags, now, results, done,
                            ctx);
}

int door_new(door_t **out, gov_engine_t *engine, srv_metrics_t *metrics)
{
    door_t *d = calloc(1, sizeof(*d));
    *out = d;
    if (!d)
        return -1;
    d->engine = engine;
    d->metrics = metrics;
    d->rls = (rls_door_t){.decide = rls_decide, .ud = d};
    return 0;
}

const rls_door_t *door_rls(door_t *d)
{
    return &d->rls;
}

void door_free(door_t *d)
{
    free(d);
}
