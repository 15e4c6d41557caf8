/*
 * Requests to the engine, answers to the wire.
 *
 * The engine writes each answer into a gov_result_t the server passes in, and keeps that very
 * struct when it answers later (GOV_PENDING, a redis limit). So every call is handed the result
 * of a spare slot: answered at once, the spare is encoded and reused (no allocation on the
 * common path); pending, the spare joins the connection's queue of answers in order, the engine
 * owns it until its callback, and a new spare is made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "srv_int.h"

/* A slot and the result the engine writes into; the slot first, so free(slot) frees both. */
typedef struct pending {
    srv_slot_t slot;
    gov_result_t result;
} pending_t;

static void to_subject(const proto_request_t *req, gov_subject_t *s)
{
    s->n = req->nsubject;
    for (uint32_t i = 0; i < req->nsubject; i++)
        s->pairs[i] = (gov_pair_t){req->subject[i].level.ptr, req->subject[i].level.len,
                                   req->subject[i].id.ptr, req->subject[i].id.len};
}

static proto_str_t cstr(const char *s)
{
    return (proto_str_t){s, (uint32_t)strlen(s)};
}

/* Encodes a decision (decide, acquire) or the error the engine reported. */
static int encode_result(proto_out_t *out, uint64_t seq, proto_op_t op, const gov_result_t *r)
{
    if (r->status < 0)
        return proto_enc_error(out, seq, gov_strcode(r->status), r->error);
    if (op == PROTO_OP_SETTLE)
        return proto_enc_settled(out, seq, r->settled);
    proto_str_t soft[GOV_SOFT_MAX];
    proto_header_t headers[GOV_HEADERS_MAX];
    for (uint32_t i = 0; i < r->n_soft_denied && i < GOV_SOFT_MAX; i++)
        soft[i] = cstr(r->soft_denied[i]);
    for (uint32_t i = 0; i < r->n_headers && i < GOV_HEADERS_MAX; i++)
        headers[i] = (proto_header_t){cstr(r->headers[i].name), cstr(r->headers[i].value)};
    proto_decision_t d = {
        .admit = r->admit,
        .verdict = cstr(gov_verdict_name(r->verdict)),
        .limit = cstr(r->limit),
        .remaining = r->remaining,
        .retry_after = r->retry_after_s,
        .reset_after = r->reset_after_s,
        .code = r->code ? cstr(r->code) : (proto_str_t){"", 0},
        .nsoft = r->n_soft_denied < GOV_SOFT_MAX ? r->n_soft_denied : GOV_SOFT_MAX,
        .soft_denied = soft,
        .nheaders = r->n_headers < GOV_HEADERS_MAX ? r->n_headers : GOV_HEADERS_MAX,
        .headers = headers,
        .has_lease = op == PROTO_OP_ACQUIRE && r->admit,
        .lease = r->lease,
    };
    return proto_enc_decision(out, seq, &d);
}

static srv_verdict_t verdict_of(const gov_result_t *r)
{
    return r->verdict == GOV_DENY         ? SRV_VERDICT_DENY
           : r->verdict == GOV_UNFITTABLE ? SRV_VERDICT_UNFITTABLE
                                          : SRV_VERDICT_ADMIT;
}

void srv__count(srv_t *s, proto_op_t op, uint64_t start_ns, const gov_result_t *r)
{
    if (r->status < 0)
        srv_metrics_error(s->metrics, gov_strcode(r->status));
    else if (op == PROTO_OP_DECIDE || op == PROTO_OP_ACQUIRE) {
        srv_metrics_decision(s->metrics, verdict_of(r));
        if (start_ns)
            srv_metrics_latency(s->metrics, uv_hrtime() - start_ns, 1);
        else
            s->batch_decisions++;
    }
}

/* Counts and encodes a finished engine answer. */
static int finish(srv_t *s, proto_out_t *out, uint64_t seq, proto_op_t op, uint64_t start_ns,
                  const gov_result_t *r)
{
    srv__count(s, op, start_ns, r);
    return encode_result(out, seq, op, r);
}

static void on_done(gov_result_t *res, void *ctx)
{
    srv_slot_t *slot = ctx;
    if (slot->conn &&
        finish(slot->conn->srv, &slot->bytes, slot->seq, slot->op, slot->start_ns, res) != 0) {
        srv_conn_t *c = slot->conn;
        srv__slot_ready(slot); /* written or not, the connection cannot go on */
        srv__fail(c);
        return;
    }
    srv__slot_ready(slot);
}

/* The spare result the next engine call writes into. */
static pending_t *spare(srv_t *s)
{
    if (!s->spare)
        s->spare = malloc(sizeof(pending_t));
    return s->spare;
}

static void answer(srv_conn_t *c, const proto_request_t *req, const gov_result_t *r)
{
    proto_out_t *out = srv__answer_buf(c);
    if (!out || finish(c->srv, out, req->seq, req->op, 0, r))
        srv__fail(c);
}

/* decide and settle, which may answer later. */
static void engine_call(srv_conn_t *c, const proto_request_t *req)
{
    srv_t *s = c->srv;
    pending_t *p = spare(s);
    if (!p) {
        srv__fail(c);
        return;
    }
    /* queued before the call: a completion may come from inside it */
    srv__slot_link(c, &p->slot, req->seq, req->op, s->batch_mono_ns);
    gov_subject_t subj;
    to_subject(req, &subj);
    int rc = req->op == PROTO_OP_DECIDE
                 ? gov_decide(s->engine, &subj, req->has_tokens ? req->tokens : GOV_NO_TOKENS,
                              s->batch_wall_ns, &p->result, on_done, &p->slot)
                 : gov_settle(s->engine, &subj, req->reserved, req->actual, s->batch_wall_ns,
                              &p->result, on_done, &p->slot);
    if (rc == GOV_PENDING) {
        s->spare = NULL; /* the engine owns it until on_done */
        return;
    }
    srv__slot_unlink(c, &p->slot); /* answered at once: it never waits in the queue */
    answer(c, req, &p->result);
}

static void fleet(srv_conn_t *c, uint64_t seq)
{
    srv_t *s = c->srv;
    static gov_fleet_entry_t entries[GOV_LIMITS_MAX];
    static proto_fleet_limit_t rows[GOV_LIMITS_MAX];
    size_t n = gov_fleet(s->engine, s->batch_wall_ns, entries, GOV_LIMITS_MAX);
    if (n > GOV_LIMITS_MAX)
        n = GOV_LIMITS_MAX;
    int64_t replicas = 1;
    for (size_t i = 0; i < n; i++) {
        const gov_fleet_entry_t *e = &entries[i];
        if (e->n > replicas)
            replicas = e->n;
        rows[i] = (proto_fleet_limit_t){
            .id = cstr(e->id),
            .type = cstr(cfg_type_name(e->type)),
            .store = cstr(cfg_store_name(e->store)),
            .algorithm = cstr(ra_algorithm_name(e->algorithm)),
            .amount = e->amount,
            .period_s = e->period_ns / 1000000000,
            .burst = e->burst,
            .n = e->n,
            .sustained_bound = e->sustained_bound,
            .burst_bound = e->burst_bound,
            .state = cstr(e->state ? e->state : ""),
            .local_share = e->local_share,
            .divisor_min = e->divisor_min,
            .divisor_max = e->divisor_max,
            .detect_within_s = e->detect_within_s,
            .converged = e->converged,
            .demand = e->demand,
            .keys_leased = e->keys_leased,
            .keys_owned = e->keys_owned,
            .largest_lease_age_ms = e->largest_lease_age_ms,
            .largest_lease = e->largest_lease,
            .moving = e->moving,
        };
    }
    proto_out_t *out = srv__answer_buf(c);
    const char *doubt = s->doubt ? s->doubt(s->doubt_ud) : NULL;
    if (!out || proto_enc_fleet(out, seq, s->node, replicas, doubt, rows, (uint32_t)n))
        srv__fail(c);
}

void srv_set_members(srv_t *s, srv_members_fn fn, void *ud)
{
    s->members = fn;
    s->members_ud = ud;
}

void srv_set_doubt(srv_t *s, srv_doubt_fn fn, void *ud)
{
    s->doubt = fn;
    s->doubt_ud = ud;
}

/* The members membership knows; without membership, the replica knows itself alone. */
static void members(srv_conn_t *c, uint64_t seq)
{
    srv_t *s = c->srv;
    proto_member_t self = {
        .id = cstr(s->node), .address = cstr(s->path), .state = cstr("alive"), .self = true};
    proto_member_t *rows = &self;
    int64_t live = 1;
    size_t n = 1;
    if (s->members) {
        size_t cap = s->members(s->members_ud, NULL, 0, &live);
        if (!(rows = calloc(cap ? cap : 1, sizeof *rows))) {
            srv__fail(c);
            return;
        }
        n = s->members(s->members_ud, rows, cap, &live);
        if (n > cap)
            n = cap;
    }
    proto_out_t *out = srv__answer_buf(c);
    if (!out || proto_enc_members(out, seq, live, rows, (uint32_t)n))
        srv__fail(c);
    if (rows != &self)
        free(rows);
}

void srv__dispatch(srv_conn_t *c, const proto_request_t *req)
{
    srv_t *s = c->srv;
    proto_out_t *out;
    gov_subject_t subj;
    pending_t *p;
    switch (req->op) {
    case PROTO_OP_DECIDE:
    case PROTO_OP_SETTLE:
        engine_call(c, req);
        return;
    case PROTO_OP_ACQUIRE:
        if (!(p = spare(s))) {
            srv__fail(c);
            return;
        }
        to_subject(req, &subj);
        gov_acquire(s->engine, &subj, c->id, s->batch_wall_ns, &p->result);
        answer(c, req, &p->result);
        return;
    case PROTO_OP_RELEASE:
        out = srv__answer_buf(c);
        if (!out ||
            proto_enc_released(out, req->seq, gov_release(s->engine, c->id, req->lease) == 0))
            srv__fail(c);
        return;
    case PROTO_OP_PING:
        out = srv__answer_buf(c);
        if (!out || proto_enc_pong(out, req->seq, s->version))
            srv__fail(c);
        return;
    case PROTO_OP_FLEET:
        fleet(c, req->seq);
        return;
    case PROTO_OP_MEMBERS:
        members(c, req->seq);
        return;
    default:
        srv__error(c, req->seq, tt_err_name(PROTO_EOP), "unknown op");
        return;
    }
}

void srv__conn_released(srv_conn_t *c)
{
    gov_release_owner(c->srv->engine, c->id);
}

void srv__dispatch_free(srv_t *s)
{
    free(s->spare);
    s->spare = NULL;
}
