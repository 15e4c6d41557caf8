/*
 * Requests to the engine, answers to the wire: the decision socket's request handler. The
 * connection layer (srv.c) is given dispatch_handler() and knows nothing of this file; this
 * file knows a connection only as its stream (stream.h).
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

#include <uv.h>

#include "dispatch.h"
#include "engine.h"

/* How a decision is answered (SPEC §5 "Answer forms"): protocol 2's numbers, the rendered
 * headers (protocol 1, or "headers": true), or both. */
enum { FORM_NUMBERS = 1, FORM_HEADERS = 2 };

static unsigned form_of(const proto_request_t *req)
{
    return (req->version >= PROTO_V2 ? FORM_NUMBERS : 0) | (req->headers ? FORM_HEADERS : 0);
}

/* A slot and the result the engine writes into; the slot first, so free(slot) frees both. */
typedef struct pending {
    stream_slot_t slot;
    unsigned form; /* the request's answer form, kept for an answer made later */
    gov_result_t result;
} pending_t;

struct dispatch {
    stream_handler_t handler;
    struct gov_engine *engine;
    srv_metrics_t *metrics;
    char *node, *address, *version;
    dispatch_members_fn members; /* membership's member list; NULL: self alone */
    void *members_ud;
    dispatch_doubt_fn doubt; /* NULL: N is never in doubt */
    void *doubt_ud;
    dispatch_snapshot_age_fn snapshot_age; /* the state directory's; NULL: no state */
    void *snapshot_age_ud;
    pending_t *spare;                         /* the slot and result the next engine call gets */
    proto_str_t verdicts[GOV_UNFITTABLE + 1]; /* gov_verdict_name's, measured once */
    uint64_t batch_decisions;                 /* answered within the batch, observed at its end */
};

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

/* Encodes a decision (decide, acquire) in `form` or the error the engine reported. */
static int encode_result(const dispatch_t *s, proto_out_t *out, uint64_t seq, proto_op_t op,
                         unsigned form, gov_result_t *r)
{
    if (r->status < 0) {
        char text[TT_ERR_TEXT_MAX];
        return proto_enc_error(out, seq, gov_strcode(r->status),
                               tt_err_format(&r->err, text, sizeof(text)));
    }
    if (op == PROTO_OP_SETTLE)
        return proto_enc_settled(out, seq, r->settled, r->already_settled);
    if (op == PROTO_OP_CHARGE)
        return proto_enc_charged(out, seq, r->settled);
    proto_str_t soft[GOV_SOFT_MAX];
    proto_header_t headers[GOV_HEADERS_MAX];
    for (uint32_t i = 0; i < r->n_soft_denied && i < GOV_SOFT_MAX; i++)
        soft[i] = cstr(r->soft_denied[i]);
    if (form & FORM_HEADERS) {
        gov_result_render(r);
        for (uint32_t i = 0; i < r->n_headers && i < GOV_HEADERS_MAX; i++)
            headers[i] = (proto_header_t){cstr(r->headers[i].name), cstr(r->headers[i].value)};
    }
    proto_decision_t d = {
        .admit = r->admit,
        .verdict = s->verdicts[r->verdict <= GOV_UNFITTABLE ? r->verdict : GOV_ADMIT],
        .limit = cstr(r->limit),
        .remaining = r->remaining,
        .retry_after = r->retry_after_s,
        .reset_after = r->reset_after_s,
        .code = r->code ? cstr(r->code) : (proto_str_t){"", 0},
        .nsoft = r->n_soft_denied < GOV_SOFT_MAX ? r->n_soft_denied : GOV_SOFT_MAX,
        .soft_denied = soft,
        .send_headers = form & FORM_HEADERS,
        .nheaders = !(form & FORM_HEADERS)           ? 0
                    : r->n_headers < GOV_HEADERS_MAX ? r->n_headers
                                                     : GOV_HEADERS_MAX,
        .headers = headers,
        .disclosed = form & FORM_NUMBERS ? &r->disclosed : NULL,
        .has_lease = op == PROTO_OP_ACQUIRE && r->admit,
        .lease = r->lease,
        .reservation = op == PROTO_OP_DECIDE ? r->reservation : 0,
    };
    return proto_enc_decision(out, seq, &d);
}

static srv_verdict_t verdict_of(const gov_result_t *r)
{
    return r->verdict == GOV_DENY         ? SRV_VERDICT_DENY
           : r->verdict == GOV_UNFITTABLE ? SRV_VERDICT_UNFITTABLE
                                          : SRV_VERDICT_ADMIT;
}

int dispatch_count(srv_metrics_t *metrics, proto_op_t op, uint64_t start_ns,
                   const struct gov_result *r)
{
    if (r->status < 0) {
        srv_metrics_error(metrics, gov_strcode(r->status));
        return 0;
    }
    if (op != PROTO_OP_DECIDE && op != PROTO_OP_ACQUIRE)
        return 0;
    srv_metrics_decision(metrics, verdict_of(r));
    if (!start_ns)
        return 1;
    srv_metrics_latency(metrics, uv_hrtime() - start_ns, 1);
    return 0;
}

/* Counts and encodes a finished engine answer. start_ns is 0 for an answer made within the
 * current batch: its latency is the batch's, observed once when the batch ends; a later
 * completion measures its own. */
static int finish(dispatch_t *s, proto_out_t *out, uint64_t seq, proto_op_t op, unsigned form,
                  uint64_t start_ns, gov_result_t *r)
{
    s->batch_decisions += (uint64_t)dispatch_count(s->metrics, op, start_ns, r);
    return encode_result(s, out, seq, op, form, r);
}

static void on_done(gov_result_t *res, void *ctx)
{
    stream_slot_t *slot = ctx;
    dispatch_t *s = slot->st ? slot->st->h->ud : NULL;
    unsigned form = ((pending_t *)slot)->form; /* the slot is its first member */
    if (s && finish(s, &slot->bytes, slot->seq, slot->op, form, slot->start_ns, res) != 0)
        slot->st->failed = true; /* written or not, the connection cannot go on */
    stream_slot_ready(slot);
}

/* The spare result the next engine call writes into. */
static pending_t *spare(dispatch_t *s)
{
    if (!s->spare)
        s->spare = malloc(sizeof(pending_t));
    return s->spare;
}

static void answer(dispatch_t *s, stream_t *c, const proto_request_t *req, gov_result_t *r)
{
    proto_out_t *out = stream_answer_buf(c);
    if (!out || finish(s, out, req->seq, req->op, form_of(req), 0, r))
        c->failed = true;
}

/* decide, settle and charge, which may answer later. */
static void engine_call(dispatch_t *s, stream_t *c, const proto_request_t *req)
{
    pending_t *p = spare(s);
    if (!p) {
        c->failed = true;
        return;
    }
    /* queued before the call: a completion may come from inside it */
    stream_slot_link(c, &p->slot, req->seq, req->op, c->now_mono_ns);
    p->form = form_of(req);
    gov_subject_t subj;
    to_subject(req, &subj);
    int rc;
    if (req->op == PROTO_OP_DECIDE)
        rc = gov_decide(s->engine, &subj, req->has_tokens ? req->tokens : GOV_NO_TOKENS,
                        c->now_wall_ns, &p->result, on_done, &p->slot);
    else if (req->op == PROTO_OP_SETTLE)
        rc = gov_settle(s->engine, req->reservation, req->actual, c->now_wall_ns, &p->result,
                        on_done, &p->slot);
    else
        rc = gov_charge(s->engine, &subj, req->tokens, c->now_wall_ns, &p->result, on_done,
                        &p->slot);
    if (rc == GOV_PENDING) {
        s->spare = NULL; /* the engine owns it until on_done */
        return;
    }
    stream_slot_unlink(c, &p->slot); /* answered at once: it never waits in the queue */
    answer(s, c, req, &p->result);
}

static void fleet(dispatch_t *s, stream_t *c, uint64_t seq)
{
    static gov_fleet_entry_t entries[GOV_LIMITS_MAX];
    static proto_fleet_limit_t rows[GOV_LIMITS_MAX];
    size_t n = gov_fleet(s->engine, c->now_wall_ns, entries, GOV_LIMITS_MAX);
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
    int64_t age = s->snapshot_age ? s->snapshot_age(s->snapshot_age_ud, c->now_wall_ns) : -1;
    proto_out_t *out = stream_answer_buf(c);
    const char *doubt = s->doubt ? s->doubt(s->doubt_ud) : NULL;
    if (!out || proto_enc_fleet(out, seq, s->node, replicas, doubt, age, rows, (uint32_t)n))
        c->failed = true;
}

void dispatch_set_members(dispatch_t *s, dispatch_members_fn fn, void *ud)
{
    s->members = fn;
    s->members_ud = ud;
}

void dispatch_set_doubt(dispatch_t *s, dispatch_doubt_fn fn, void *ud)
{
    s->doubt = fn;
    s->doubt_ud = ud;
}

void dispatch_set_snapshot_age(dispatch_t *s, dispatch_snapshot_age_fn fn, void *ud)
{
    s->snapshot_age = fn;
    s->snapshot_age_ud = ud;
}

/* The members membership knows; without membership, the replica knows itself alone. */
static void members(dispatch_t *s, stream_t *c, uint64_t seq)
{
    proto_member_t self = {
        .id = cstr(s->node), .address = cstr(s->address), .state = cstr("alive"), .self = true};
    proto_member_t *rows = &self;
    int64_t live = 1;
    size_t n = 1;
    if (s->members) {
        size_t cap = s->members(s->members_ud, NULL, 0, &live);
        if (!(rows = calloc(cap ? cap : 1, sizeof *rows))) {
            c->failed = true;
            return;
        }
        n = s->members(s->members_ud, rows, cap, &live);
        if (n > cap)
            n = cap;
    }
    proto_out_t *out = stream_answer_buf(c);
    if (!out || proto_enc_members(out, seq, live, rows, (uint32_t)n))
        c->failed = true;
    if (rows != &self)
        free(rows);
}

static void on_request(void *ud, stream_t *c, const proto_request_t *req)
{
    dispatch_t *s = ud;
    proto_out_t *out;
    gov_subject_t subj;
    pending_t *p;
    srv_metrics_request(s->metrics, req->op);
    switch (req->op) {
    case PROTO_OP_DECIDE:
    case PROTO_OP_SETTLE:
    case PROTO_OP_CHARGE:
        engine_call(s, c, req);
        return;
    case PROTO_OP_ACQUIRE:
        if (!(p = spare(s))) {
            c->failed = true;
            return;
        }
        to_subject(req, &subj);
        gov_acquire(s->engine, &subj, c->id, c->now_wall_ns, &p->result);
        answer(s, c, req, &p->result);
        return;
    case PROTO_OP_RELEASE:
        out = stream_answer_buf(c);
        if (!out ||
            proto_enc_released(out, req->seq, gov_release(s->engine, c->id, req->lease) == 0))
            c->failed = true;
        return;
    case PROTO_OP_PING:
        out = stream_answer_buf(c);
        if (!out || proto_enc_pong(out, req->seq, s->version))
            c->failed = true;
        return;
    case PROTO_OP_FLEET:
        fleet(s, c, req->seq);
        return;
    case PROTO_OP_MEMBERS:
        members(s, c, req->seq);
        return;
    default:
        stream_error(c, req->seq, tt_err_name(PROTO_EOP), "unknown op");
        return;
    }
}

static void on_error(void *ud, const char *code)
{
    dispatch_t *s = ud;
    srv_metrics_error(s->metrics, code);
}

/* The batch's decisions share one latency: the time from its read to its end. */
static void on_batch_end(void *ud, stream_t *c)
{
    dispatch_t *s = ud;
    if (s->batch_decisions) {
        srv_metrics_latency(s->metrics, uv_hrtime() - c->now_mono_ns, s->batch_decisions);
        s->batch_decisions = 0;
    }
}

/* The connection is closing: release what the engine holds for it. */
static void on_closed(void *ud, stream_t *c)
{
    dispatch_t *s = ud;
    gov_release_owner(s->engine, c->id);
}

int dispatch_new(dispatch_t **out, struct gov_engine *engine, srv_metrics_t *metrics,
                 const char *node, const char *address, const char *version)
{
    dispatch_t *s = calloc(1, sizeof(*s));
    *out = s;
    if (!s)
        return -1;
    for (int v = GOV_ADMIT; v <= GOV_UNFITTABLE; v++)
        s->verdicts[v] = cstr(gov_verdict_name((gov_verdict_t)v));
    s->handler = (stream_handler_t){
        .request = on_request,
        .error = on_error,
        .batch_end = on_batch_end,
        .closed = on_closed,
        .ud = s,
    };
    s->engine = engine;
    s->metrics = metrics;
    s->node = strdup(node ? node : "localhost");
    s->address = strdup(address ? address : "");
    s->version = strdup(version ? version : "");
    if (!s->node || !s->address || !s->version) {
        dispatch_free(s);
        *out = NULL;
        return -1;
    }
    return 0;
}

const stream_handler_t *dispatch_handler(dispatch_t *s)
{
    return &s->handler;
}

void dispatch_free(dispatch_t *s)
{
    if (!s)
        return;
    free(s->spare);
    free(s->node);
    free(s->address);
    free(s->version);
    free(s);
}
