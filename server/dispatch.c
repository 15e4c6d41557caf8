/*
 * Requests to the engine, answers to the wire: the decision socket's request handler. The
 * connection layer (srv.c) is given dispatch_handler() and knows nothing of this file; this
 * file knows a connection only as its stream (stream.h). Decisions go through the door
 * (door.h), the engine call every way in shares.
 *
 * The engine writes each answer into the door_req_t the server passes in, and keeps that very
 * struct when it answers later (GOV_PENDING, a redis limit). So every call is handed the request
 * of a spare slot: answered at once, the spare is encoded and reused (no allocation on the
 * common path); pending, the spare joins the connection's queue of answers in order, the engine
 * owns it until its callback, and a new spare is made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "door.h"
#include "engine.h"

/* How a decision is answered (SPEC §5 "Answer forms"): protocol 2's numbers, the rendered
 * headers (protocol 1, or "headers": true), or both. */
enum { FORM_NUMBERS = 1, FORM_HEADERS = 2 };

static unsigned form_of(const proto_request_t *req)
{
    return (req->version >= PROTO_V2 ? FORM_NUMBERS : 0) | (req->headers ? FORM_HEADERS : 0);
}

/* A slot and the engine call answered into it; the slot first, so free(slot) frees both. */
typedef struct pending {
    stream_slot_t slot;
    unsigned form; /* the request's answer form, kept for an answer made later */
    door_req_t req;
} pending_t;

struct dispatch {
    stream_handler_t handler;
    struct gov_engine *engine; /* fleet and leases; decisions go through the door */
    door_t *door;
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

/* Encodes a finished engine answer (the door has counted it): a decision (decide, acquire) in
 * `form`, a settle or charge, or the error the engine reported. */
static int encode_result(const dispatch_t *s, tt_buf_t *out, uint64_t seq, proto_op_t op,
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

static void on_done(gov_result_t *res, void *ctx)
{
    stream_slot_t *slot = ctx;
    dispatch_t *s = slot->st ? slot->st->h->ud : NULL;
    unsigned form = ((pending_t *)slot)->form; /* the slot is its first member */
    if (s && encode_result(s, &slot->bytes, slot->seq, slot->op, form, res) != 0)
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
    tt_buf_t *out = stream_answer_buf(c);
    if (!out || encode_result(s, out, req->seq, req->op, form_of(req), r))
        c->failed = true;
}

/* decide, settle, charge and acquire through the door; the first three may answer later. */
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
    door_caller_t who = {.door = SRV_DOOR_SOCKET,
                         .conn = c->id,
                         .cred = c->peer_cred,
                         .uid = c->peer_uid,
                         .gid = c->peer_gid};
    door_args_t a = {
        .op = req->op,
        .subject = &subj,
        .tokens = req->op == PROTO_OP_SETTLE                       ? req->actual
                  : req->op == PROTO_OP_DECIDE && !req->has_tokens ? GOV_NO_TOKENS
                                                                   : req->tokens,
        .reservation = req->reservation,
        .now = c->now_wall_ns,
        .start_ns = c->now_mono_ns,
        .batched = true,
    };
    if (door_call(s->door, &who, &a, &p->req, on_done, &p->slot) == GOV_PENDING) {
        s->spare = NULL; /* the engine owns it until on_done */
        return;
    }
    stream_slot_unlink(c, &p->slot); /* answered at once: it never waits in the queue */
    answer(s, c, req, &p->req.result);
}

int dispatch_fleet(dispatch_t *s, tt_buf_t *out, uint64_t seq, int64_t now)
{
    static gov_fleet_entry_t entries[GOV_LIMITS_MAX];
    static proto_fleet_limit_t rows[GOV_LIMITS_MAX];
    size_t n = gov_fleet(s->engine, now, entries, GOV_LIMITS_MAX);
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
    proto_members_head_t head = {0};
    if (s->members) /* the count only: N's unheard members */
        s->members(s->members_ud, NULL, 0, &head);
    int64_t age = s->snapshot_age ? s->snapshot_age(s->snapshot_age_ud, now) : -1;
    const char *doubt = s->doubt ? s->doubt(s->doubt_ud) : NULL;
    static const char *acquire_only[GOV_LIMITS_MAX];
    size_t na = gov_fleet_acquire_only(s->engine, acquire_only, GOV_LIMITS_MAX);
    if (na > GOV_LIMITS_MAX)
        na = GOV_LIMITS_MAX;
    return proto_enc_fleet(out, seq, s->node, replicas, head.unheard, doubt, age, rows, (uint32_t)n,
                           acquire_only, (uint32_t)na);
}

static void fleet(dispatch_t *s, stream_t *c, uint64_t seq)
{
    tt_buf_t *out = stream_answer_buf(c);
    if (!out || dispatch_fleet(s, out, seq, c->now_wall_ns))
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
    proto_members_head_t head = {.live = 1};
    size_t n = 1;
    if (s->members) {
        size_t cap = s->members(s->members_ud, NULL, 0, &head);
        if (!(rows = calloc(cap ? cap : 1, sizeof *rows))) {
            c->failed = true;
            return;
        }
        n = s->members(s->members_ud, rows, cap, &head);
        if (n > cap)
            n = cap;
    }
    tt_buf_t *out = stream_answer_buf(c);
    if (!out || proto_enc_members(out, seq, &head, rows, (uint32_t)n))
        c->failed = true;
    if (rows != &self)
        free(rows);
}

static void on_request(void *ud, stream_t *c, const proto_request_t *req)
{
    dispatch_t *s = ud;
    tt_buf_t *out;
    switch (req->op) {
    case PROTO_OP_DECIDE:
    case PROTO_OP_SETTLE:
    case PROTO_OP_CHARGE:
    case PROTO_OP_ACQUIRE:
        engine_call(s, c, req); /* the door counts it */
        return;
    default:
        break;
    }
    srv_metrics_request(s->metrics, SRV_DOOR_SOCKET, req->op);
    switch (req->op) {
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
    srv_metrics_error(s->metrics, SRV_DOOR_SOCKET, code);
}

/* The batch's decisions share one latency: the time from its read to its end. */
static void on_batch_end(void *ud, stream_t *c)
{
    dispatch_t *s = ud;
    door_batch_end(s->door, SRV_DOOR_SOCKET, c->now_mono_ns);
}

/* The connection is closing: release what the engine holds for it. */
static void on_closed(void *ud, stream_t *c)
{
    dispatch_t *s = ud;
    gov_release_owner(s->engine, c->id);
}

int dispatch_new(dispatch_t **out, struct gov_engine *engine, door_t *door, srv_metrics_t *metrics,
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
    s->door = door;
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
