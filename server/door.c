/* The one engine call behind every door; see door.h. */
#include "door.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#define AUTH_MAX 600 /* bytes of an `authorization` value read: "Bearer " and a 512-byte token */

struct door {
    gov_engine_t *engine;
    srv_metrics_t *metrics;
    uint64_t batch[SRV_DOOR_COUNT_]; /* answered at once within the batch, observed at its end */
    rls_door_t rls;
    door_observer_t observer;
    uint32_t allow_uids[DOOR_ALLOW_MAX], allow_gids[DOOR_ALLOW_MAX];
    size_t n_allow_uids, n_allow_gids;
    cfg_config_t *const *cfg;
};

void door_set_observer(door_t *d, const door_observer_t *o)
{
    d->observer = o ? *o : (door_observer_t){0};
}

/* The observer (there is one) told of a decision asked: its answer now (status >= 0), or a
 * token for later (pending); an error is no decision. */
static uint64_t observe(const door_t *d, const door_decision_t *what, int status, bool pending,
                        const door_verdict_t *v)
{
    if (!pending && status < 0)
        return 0;
    return d->observer.asked(d->observer.ud, what, pending ? NULL : v);
}

/* The observer told of token's later answer (NULL: an error). */
static void observe_answer(const door_t *d, uint64_t token, int status, const door_verdict_t *v)
{
    if (token)
        d->observer.answered(d->observer.ud, token, status < 0 ? NULL : v);
}

/* What a caller turned out to be: whose call it is for the engine, and, over TCP, its token. */
typedef struct admitted {
    gov_client_t client;
    const cfg_tokens_t *tokens;
    const cfg_token_t *token; /* NULL for a unix caller */
} admitted_t;

bool door_peer_allowed(const door_t *d, const door_caller_t *who)
{
    if (!d || (d->n_allow_uids == 0 && d->n_allow_gids == 0))
        return true;
    if (!who->cred)
        return false;
    for (size_t i = 0; i < d->n_allow_uids; i++)
        if (d->allow_uids[i] == who->uid)
            return true;
    for (size_t i = 0; i < d->n_allow_gids; i++)
        if (d->allow_gids[i] == who->gid)
            return true;
    return false;
}

/* The token of "Bearer <token>" (RFC 6750: the scheme case-insensitive, one or more spaces). */
static bool bearer(const char *v, size_t len, const char **tok, size_t *tok_len)
{
    static const char scheme[] = "Bearer ";
    if (len > AUTH_MAX || len < sizeof(scheme) || strncasecmp(v, scheme, sizeof(scheme) - 1) != 0)
        return false;
    size_t at = sizeof(scheme) - 1;
    while (at < len && v[at] == ' ')
        at++;
    *tok = v + at;
    *tok_len = len - at;
    return *tok_len > 0;
}

/* Who the caller is, checked: a unix peer against the allow-list, a TCP caller by its token.
 * 0, or a negative code described in *err. */
static int admit(const door_t *d, const door_caller_t *who, admitted_t *a, tt_err_t *err)
{
    *a = (admitted_t){0};
    if (!who->tcp) {
        if (!door_peer_allowed(d, who))
            return tt_err_set(err, TT_ERR_PEER, "",
                              who->cred ? "uid %u, gid %u: not in server.allow_uids or "
                                          "server.allow_gids"
                                        : "the peer's uid and gid are unknown",
                              who->uid, who->gid);
        /* the socket's callers are one owner; each uid its own share of the pool */
        if (who->cred)
            a->client.account = UINT64_C(1) << 32 | who->uid;
        return 0;
    }
    const char *tok;
    size_t tok_len;
    const cfg_config_t *cfg = d->cfg ? *d->cfg : NULL;
    if (!who->authorization)
        return tt_err_set(err, TT_ERR_UNAUTHENTICATED, "authorization",
                          "a decision over TCP needs a bearer token "
                          "(authorization: Bearer <token>)");
    if (!bearer(who->authorization, who->authorization_len, &tok, &tok_len))
        return tt_err_set(err, TT_ERR_UNAUTHENTICATED, "authorization",
                          "expected \"Bearer <token>\" (RFC 6750), at most %d bytes", AUTH_MAX);
    if (!cfg || !cfg->server.tokens_file[0])
        return tt_err_set(err, TT_ERR_UNAUTHENTICATED, "authorization",
                          "no token is accepted: server.tokens_file is not set");
    a->tokens = &cfg->tokens;
    if (!(a->token = cfg_token_find(a->tokens, tok, tok_len)))
        return tt_err_set(err, TT_ERR_UNAUTHENTICATED, "authorization",
                          "the bearer token is not one of server.tokens_file's");
    a->client = (gov_client_t){.account = a->token->client, .owner = a->token->client};
    return 0;
}

/* Whether the admitted caller may name every (level, id) of s: a token its grant's alone. */
static int grant(const admitted_t *a, const gov_subject_t *s, tt_err_t *err)
{
    for (size_t i = 0; a->token && i < s->n; i++) {
        const gov_pair_t *p = &s->pairs[i];
        if (cfg_token_allows(a->tokens, a->token, p->level, p->level_len, p->id, p->id_len))
            continue;
        char path[TT_ERR_PATH_MAX];
        snprintf(path, sizeof(path), "subject.%.*s", (int)(p->level_len < 64 ? p->level_len : 64),
                 p->level);
        return tt_err_set(err, TT_ERR_FORBIDDEN, path,
                          "token \"%s\" may not name this id (server.tokens_file)", a->token->name);
    }
    return 0;
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
    observe_answer(req->door, req->observed, res->status,
                   &(door_verdict_t){res->verdict, res->limit});
    req->done(res, req->ctx);
}

/* A call the door answers itself (the caller may not spend, or there is no such call): n
 * results cleared, as results the engine never started, and results[at] carrying the error.
 * Returns rc. */
static int refuse(gov_result_t *results, size_t n, size_t at, int rc, const tt_err_t *err)
{
    for (size_t i = 0; i < n; i++)
        results[i] = (gov_result_t){0};
    results[at].status = rc;
    results[at].err = *err;
    return rc;
}

int door_call(door_t *d, const door_caller_t *who, const door_args_t *a, door_req_t *req,
              gov_done_fn done, void *ctx)
{
    /* Not req->result: every engine call starts it (gov__result_init, each field an answer
     * reads), refuse() clears it. Zero-filling its 3.4 KB first cost ~440 instructions a
     * decision. */
    req->door = d;
    req->kind = who->door;
    req->op = a->op;
    req->start_ns = a->start_ns;
    req->done = done;
    req->ctx = ctx;
    req->observed = 0;
    gov_result_t *out = &req->result;
    srv_metrics_request(d->metrics, who->door, a->op);
    admitted_t ad;
    tt_err_t err;
    int rc = admit(d, who, &ad, &err);
    if (rc == 0 && a->op != PROTO_OP_SETTLE)
        rc = grant(&ad, a->subject, &err);
    if (rc < 0) {
        count(d, who->door, a->op, a->start_ns, a->batched, refuse(out, 1, 0, rc, &err), GOV_ADMIT);
        return rc;
    }
    switch (a->op) {
    case PROTO_OP_DECIDE:
        rc = gov_decide(d->engine, &ad.client, a->subject, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_SETTLE:
        rc =
            gov_settle(d->engine, &ad.client, a->reservation, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_CHARGE:
        rc = gov_charge(d->engine, a->subject, a->tokens, a->now, out, on_done, req);
        break;
    case PROTO_OP_ACQUIRE:
        rc = gov_acquire(d->engine, a->subject, who->conn, a->now, out);
        break;
    default:
        rc = refuse(out, 1, 0, tt_err_set(&err, GOV_EINVAL, "op", "not an engine call"), &err);
        break;
    }
    if (rc != GOV_PENDING)
        count(d, who->door, a->op, a->start_ns, a->batched, out->status, out->verdict);
    if (d->observer.asked && a->op == PROTO_OP_DECIDE) /* the recording's */
        req->observed = observe(
            d, &(door_decision_t){.now = a->now, .subject = a->subject, .tokens = a->tokens},
            out->status, rc == GOV_PENDING, &(door_verdict_t){out->verdict, out->limit});
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
    uint64_t observed; /* the observer's token for the answer (0: none) */
} domain_wait_t;

/* A domain decision's status: the engine's code, or the first ask's error when it is one. */
static int asks_status(int rc, const gov_result_t *results, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (results[i].status < 0)
            return results[i].status;
    return rc;
}

/* A gRPC request's answer as it is counted: its verdict, and the limit of the first ask denied
 * ("" when none was). */
static door_verdict_t domain_verdict(gov_verdict_t overall, const gov_result_t *results, size_t n)
{
    door_verdict_t v = {overall, ""};
    for (size_t i = 0; i < n && overall != GOV_ADMIT; i++)
        if (!results[i].admit && results[i].limit[0]) {
            v.limit = results[i].limit;
            break;
        }
    return v;
}

static void on_domain_done(gov_result_t *results, void *ctx)
{
    domain_wait_t *w = ctx;
    int status = asks_status(0, results, w->n);
    count(w->door, w->kind, PROTO_OP_DECIDE, w->start_ns, false, status, w->overall);
    if (w->observed) {
        door_verdict_t v = domain_verdict(w->overall, results, w->n);
        observe_answer(w->door, w->observed, status, &v);
    }
    w->done(results, w->ctx);
    free(w);
}

int door_decide_asks(door_t *d, const door_caller_t *who, const char *domain, size_t domain_len,
                     const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                     gov_result_t *results, gov_done_fn done, void *ctx)
{
    uint64_t start = uv_hrtime();
    srv_metrics_request(d->metrics, who->door, PROTO_OP_DECIDE);
    admitted_t ad;
    tt_err_t err;
    size_t at = 0; /* the ask a refusal concerns; the caller's own is told in results[0] */
    int rc = n ? admit(d, who, &ad, &err) : 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if ((rc = grant(&ad, &asks[i].subject, &err)) < 0)
            at = i;
    domain_wait_t *w = NULL;
    if (rc == 0 && done && n) { /* it may wait on Redis: the count's state outlives this call */
        if ((w = malloc(sizeof(*w))))
            *w = (domain_wait_t){.door = d,
                                 .kind = who->door,
                                 .start_ns = start,
                                 .n = n,
                                 .overall = GOV_ADMIT,
                                 .done = done,
                                 .ctx = ctx};
        else
            rc = tt_err_set(&err, GOV_ENOMEM, "request", "out of memory starting the decision");
    }
    if (rc < 0) { /* the engine's results are its own to start: only a refusal clears them */
        count(d, who->door, PROTO_OP_DECIDE, start, false, refuse(results, n, at, rc, &err),
              GOV_ADMIT);
        return rc;
    }
    gov_verdict_t v = GOV_ADMIT;
    rc = gov_decide_domain(d->engine, domain, domain_len, asks, n, flags, now, results,
                           w ? &w->overall : &v, w ? on_domain_done : NULL, w);
    door_decision_t what = {.now = now,
                            .tokens = GOV_NO_TOKENS,
                            .domain = domain,
                            .domain_len = domain_len,
                            .asks = asks,
                            .n = n};
    if (rc == GOV_PENDING) {
        if (d->observer.asked)
            w->observed = observe(d, &what, 0, true, NULL);
        return rc;
    }
    if (w) {
        v = w->overall;
        free(w);
    }
    int status = rc < 0 ? asks_status(rc, results, n) : rc;
    count(d, who->door, PROTO_OP_DECIDE, start, false, status, v);
    if (d->observer.asked) {
        door_verdict_t dv = domain_verdict(v, results, n);
        observe(d, &what, status, false, &dv);
    }
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
    door_caller_t caller = {.door = SRV_DOOR_GRPC,
                            .tcp = who->tcp,
                            .cred = who->cred,
                            .uid = who->uid,
                            .gid = who->gid,
                            .authorization = who->authorization,
                            .authorization_len = who->authorization_len};
    return door_decide_asks(ud, &caller, domain, domain_len, asks, n, flags, now, results, done,
                            ctx);
}

int door_new(door_t **out, gov_engine_t *engine, srv_metrics_t *metrics, const door_options_t *opt,
             tt_err_t *err)
{
    static const door_options_t none = {0};
    if (!opt)
        opt = &none;
    *out = NULL;
    if (opt->n_allow_uids > DOOR_ALLOW_MAX || opt->n_allow_gids > DOOR_ALLOW_MAX)
        return tt_err_set(err, TT_ERR_INVAL,
                          opt->n_allow_uids > DOOR_ALLOW_MAX ? "server.allow_uids"
                                                             : "server.allow_gids",
                          "at most %d entries", DOOR_ALLOW_MAX);
    door_t *d = calloc(1, sizeof(*d));
    if (!d)
        return tt_err_set(err, TT_ERR_NOMEM, "", "out of memory");
    d->engine = engine;
    d->metrics = metrics;
    d->rls = (rls_door_t){.decide = rls_decide, .ud = d};
    d->n_allow_uids = opt->n_allow_uids;
    d->n_allow_gids = opt->n_allow_gids;
    if (d->n_allow_uids)
        memcpy(d->allow_uids, opt->allow_uids, d->n_allow_uids * sizeof(uint32_t));
    if (d->n_allow_gids)
        memcpy(d->allow_gids, opt->allow_gids, d->n_allow_gids * sizeof(uint32_t));
    d->cfg = opt->cfg;
    *out = d;
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
