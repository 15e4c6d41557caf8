/*
 * The mapping core of the gRPC front door: RateLimitRequest → the door's engine call
 * (gov_decide_asks) → RateLimitResponse. See rls.h for the mapping; docs/clients.md for what
 * callers see.
 */
#include "rls.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.pb-c.h"
#include "pbwrite.h"
#include "rls.pb-c.h"

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest request_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitDescriptor descriptor_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse response_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus status_t;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse__RateLimit limit_t;
typedef Envoy__Service__Ratelimit__V3__HeaderValue header_t;
typedef Tokentriage__Wire__Duration duration_t;

#define RLS_SERVICE "envoy.service.ratelimit.v3.RateLimitService"

static int failf(rls_answer_t *out, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int failf(rls_answer_t *out, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->message, sizeof(out->message), fmt, ap);
    va_end(ap);
    out->status = status;
    return status;
}

void rls_answer_free(rls_answer_t *a)
{
    free(a->body);
    a->body = NULL;
    a->len = 0;
}

int rls_method(const char *path, size_t len)
{
    static const char *const paths[] = {
        [RLS_METHOD_SHOULD_RATE_LIMIT] = "/" RLS_SERVICE "/ShouldRateLimit",
        [RLS_METHOD_HEALTH_CHECK] = "/grpc.health.v1.Health/Check",
    };
    for (int i = 0; i < (int)(sizeof(paths) / sizeof(paths[0])); i++)
        if (strlen(paths[i]) == len && memcmp(paths[i], path, len) == 0)
            return i;
    return -1;
}

static bool listed(const char (*names)[CFG_NAME_MAX + 1], size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return true;
    return false;
}

/* A gRPC status for an engine error: the request's fault, or the daemon's. */
static int status_of(int gov_err)
{
    switch (gov_err) {
    case GOV_ENOMEM:
        return RLS_RESOURCE_EXHAUSTED;
    case GOV_EINVAL:
        return RLS_FAILED_PRECONDITION; /* a redis-backed limit among levels' descriptors */
    case TT_ERR_UNAUTHENTICATED:
        return RLS_UNAUTHENTICATED; /* over TCP without a token server.tokens_file holds */
    case TT_ERR_FORBIDDEN:
    case TT_ERR_PEER:
        return RLS_PERMISSION_DENIED; /* a subject the token may not name; a peer not allowed */
    default:
        return RLS_INVALID_ARGUMENT;
    }
}

int rls_domain_flags(const cfg_server_t *srv, const char *domain, unsigned *flags)
{
    if (srv->n_grpc_domains && !listed(srv->grpc_domains, srv->n_grpc_domains, domain))
        return RLS_NOT_FOUND;
    *flags = GOV_ASK_EXACT;
    if (listed(srv->grpc_charge_domains, srv->n_grpc_charge_domains, domain))
        *flags |= GOV_ASK_CHARGE;
    if (!srv->grpc_stop_cache_key_increment_when_overlimit) /* envoy ratelimit's default */
        *flags |= GOV_ASK_CHARGE;
    return RLS_OK;
}

/* Checks the request and builds one ask per descriptor. Returns 0 or a status. */
static int build_asks(const request_t *req, gov_ask_t *asks, rls_answer_t *out)
{
    if (!req->domain[0])
        return failf(out, RLS_INVALID_ARGUMENT, "domain: required");
    if (req->n_descriptors == 0)
        return failf(out, RLS_INVALID_ARGUMENT, "descriptors: at least one is required");
    if (req->n_descriptors > GOV_ASKS_MAX)
        return failf(out, RLS_INVALID_ARGUMENT, "descriptors: %zu, at most %d", req->n_descriptors,
                     GOV_ASKS_MAX);
    int64_t cost = req->hits_addend ? req->hits_addend : 1;
    for (size_t i = 0; i < req->n_descriptors; i++) {
        const descriptor_t *d = req->descriptors[i];
        gov_ask_t *a = &asks[i];
        if (d->n_entries == 0)
            return failf(out, RLS_INVALID_ARGUMENT, "descriptors[%zu]: no entries", i);
        if (d->n_entries > GOV_SUBJECT_MAX)
            return failf(out, RLS_INVALID_ARGUMENT, "descriptors[%zu]: %zu entries, at most %d", i,
                         d->n_entries, GOV_SUBJECT_MAX);
        a->subject.n = d->n_entries;
        for (size_t k = 0; k < d->n_entries; k++) {
            const char *key = d->entries[k]->key, *value = d->entries[k]->value;
            if (!key[0] || !value[0])
                return failf(out, RLS_INVALID_ARGUMENT,
                             "descriptors[%zu].entries[%zu]: key and value must not be empty", i,
                             k);
            a->subject.pairs[k] = (gov_pair_t){key, strlen(key), value, strlen(value)};
        }
        a->cost = cost;
        a->override_unit = 0;
        a->override_amount = 0;
        if (d->limit) { /* the descriptor's own limit (RateLimitDescriptor.limit) */
            if (!cfg_unit_of_number(d->limit->unit))
                return failf(out, RLS_INVALID_ARGUMENT,
                             "descriptors[%zu].limit.unit: %d is not a unit (SECOND .. YEAR, WEEK)",
                             i, (int)d->limit->unit);
            a->override_unit = (int)d->limit->unit;
            a->override_amount = d->limit->requests_per_unit;
        }
        if (d->hits_addend) {
            if (d->hits_addend->value > (uint64_t)GOV_TOKENS_MAX)
                return failf(out, RLS_INVALID_ARGUMENT,
                             "descriptors[%zu].hits_addend: %llu, at most 2^40", i,
                             (unsigned long long)d->hits_addend->value);
            a->cost = (int64_t)d->hits_addend->value;
        }
    }
    return RLS_OK;
}

/*
 * The current limit as Envoy states it: requests_per_unit per unit. A period of exactly one
 * unit (envoy's: second, minute, hour, day, week, month of 30 days, year of 365) is reported as
 * is; any other is reported in the largest of second, minute, hour and day not longer than the
 * period, at the sustained rate amount x unit / period rounded down: 100 per 30 s reads as 3 per
 * SECOND, 150 per 90 s as 100 per MINUTE. The exact policy is in the Ratelimit-Policy header.
 */
static void current_limit(int64_t amount, int64_t period_ns, limit_t *rl)
{
    static const struct {
        int64_t s;
        int unit;
    } units[] = {
        {86400, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__DAY},
        {3600, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__HOUR},
        {60, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__MINUTE},
        {1, ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__RATE_LIMIT__UNIT__SECOND},
    };
    const cfg_unit_t *exact = cfg_unit_of_period(period_ns);
    if (exact) {
        rl->requests_per_unit = amount > UINT32_MAX ? UINT32_MAX : (uint32_t)amount;
        rl->unit = exact->number;
        return;
    }
    size_t u = 0;
    while (u + 1 < sizeof(units) / sizeof(units[0]) && units[u].s * RA_NS_PER_S > period_ns)
        u++;
    __int128 per = (__int128)amount * units[u].s * RA_NS_PER_S / period_ns;
    rl->requests_per_unit = per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
    rl->unit = units[u].unit;
}

/* Which result's headers travel: the denial with the longest retry, else the admitted ask
 * with the lowest remaining. -1 when no ask met a limit. */
static int headers_from(const gov_result_t *r, size_t n)
{
    int best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].limit[0])
            continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        const gov_result_t *b = &r[best];
        bool tighter = !r[i].admit ? b->admit || r[i].retry_after_s > b->retry_after_s
                                   : b->admit && r[i].remaining < b->remaining;
        if (tighter)
            best = (int)i;
    }
    return best;
}

/* envoy ratelimit's response headers (LIMIT_RESPONSE_HEADERS_ENABLED): of the status closest
 * to its limit, the lowest remaining among those with a current limit, an OVER_LIMIT one of a
 * rate (not quota) limit taking it whatever its remaining (the last such), as its service picks
 * it. -1 when no status has a current limit. */
static int envoy_headers_from(const status_t *const *st, const gov_result_t *r, size_t n)
{
    int best = -1;
    uint32_t lowest = UINT32_MAX;
    for (size_t i = 0; i < n; i++) {
        if (!st[i]->current_limit)
            continue;
        if (st[i]->code == ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT &&
            !(r[i].rule_flags & CFG_RULE_QUOTA)) {
            best = (int)i;
            lowest = 0;
        } else if (st[i]->limit_remaining < lowest) {
            best = (int)i;
            lowest = st[i]->limit_remaining;
        }
    }
    return best;
}

/* One status from what its descriptor met (rls.h has the table). */
static void status_of_result(const gov_result_t *r, status_t *s, limit_t *lim, duration_t *reset)
{
    s->code = r->admit ? ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK
                       : ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT;
    if (r->met == GOV_MET_UNLIMITED) { /* as envoy ratelimit: OK, the most there is, no limit */
        s->limit_remaining = UINT32_MAX;
        return;
    }
    if (!r->limit[0] || r->met == GOV_MET_REPLACED || r->met == GOV_MET_ALLOW)
        return; /* no limit met: OK with no current limit, as envoy ratelimit answers */
    envoy__service__ratelimit__v3__rate_limit_response__rate_limit__init(lim);
    current_limit(r->limit_amount, r->limit_period_ns, lim);
    /* a rule's name as written (envoy's current_limit.name, "" when unnamed); a limit attached
     * to levels is named by its id */
    lim->name = (char *)(r->met == GOV_MET_NONE ? r->limit : r->rule_name);
    s->current_limit = lim;
    int64_t rem = !r->admit || r->remaining < 0 ? 0 : r->remaining; /* OVER_LIMIT: 0, as envoy */
    s->limit_remaining = rem > UINT32_MAX ? UINT32_MAX : (uint32_t)rem;
    tokentriage__wire__duration__init(reset);
    reset->seconds = r->reset_after_s;
    s->duration_until_reset = reset;
}

/* Packs the response for `n` results. Returns 0 or a status. */
static int respond(const cfg_config_t *cfg, gov_result_t *r, size_t n, rls_answer_t *out)
{
    /* A descriptor denied only because its limit's store could not answer (Redis down, the share
     * store not armed) and its posture fails closed: the call fails UNAVAILABLE, as envoy
     * ratelimit's fails when Redis does, and Envoy's failure_mode_deny decides (docs/clients.md) */
    for (size_t i = 0; i < n; i++)
        if (r[i].unavailable)
            return failf(out, RLS_UNAVAILABLE,
                         "descriptors[%zu]: limit \"%s\": its store cannot answer, and its "
                         "posture fails closed",
                         i, r[i].limit);
    response_t resp = ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__INIT;
    status_t st[GOV_ASKS_MAX], *stp[GOV_ASKS_MAX];
    limit_t lim[GOV_ASKS_MAX];
    duration_t reset[GOV_ASKS_MAX];
    header_t hv[GOV_HEADERS_MAX + 3], *hvp[GOV_HEADERS_MAX + 3];
    char values[3][24];
    size_t over = 0, quota = 0, quota_over = 0;
    for (size_t i = 0; i < n; i++) {
        status_t *s = &st[i];
        envoy__service__ratelimit__v3__rate_limit_response__descriptor_status__init(s);
        stp[i] = s;
        status_of_result(&r[i], s, &lim[i], &reset[i]);
        bool is_over =
            s->code == ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT;
        if (r[i].rule_flags & CFG_RULE_QUOTA) {
            quota++;
            quota_over += is_over;
        } else {
            over += is_over;
        }
    }
    /* OVER_LIMIT when a rate limit is over, or every quota_mode rule is; never in shadow mode */
    bool refused =
        (over > 0 || (quota > 0 && quota_over == quota)) && !cfg->server.grpc_shadow_mode;
    resp.overall_code = refused
                            ? ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OVER_LIMIT
                            : ENVOY__SERVICE__RATELIMIT__V3__RATE_LIMIT_RESPONSE__CODE__OK;
    resp.n_statuses = n;
    resp.statuses = stp;
    size_t k = 0;
    int h = headers_from(r, n);
    if (h >= 0) /* the strings of the one result whose headers travel */
        gov_result_render(&r[h]);
    for (uint32_t j = 0; h >= 0 && j < r[h].n_headers; j++, k++) {
        envoy__service__ratelimit__v3__header_value__init(&hv[k]);
        hv[k].key = (char *)r[h].headers[j].name;
        hv[k].value = (char *)r[h].headers[j].value;
        hvp[k] = &hv[k];
    }
    int e = cfg->server.grpc_limit_headers ? envoy_headers_from((const status_t *const *)stp, r, n)
                                           : -1;
    if (e >= 0) { /* envoy ratelimit's three, beside ours */
        snprintf(values[0], sizeof(values[0]), "%u", st[e].current_limit->requests_per_unit);
        snprintf(values[1], sizeof(values[1]), "%u", st[e].limit_remaining);
        snprintf(values[2], sizeof(values[2]), "%lld",
                 (long long)st[e].duration_until_reset->seconds);
        for (size_t j = 0; j < 3; j++, k++) {
            envoy__service__ratelimit__v3__header_value__init(&hv[k]);
            hv[k].key = (char *)cfg->server.grpc_limit_header[j];
            hv[k].value = values[j];
            hvp[k] = &hv[k];
        }
    }
    resp.n_response_headers_to_add = k;
    resp.response_headers_to_add = hvp;
    out->len = rls_response_size(&resp);
    out->body = malloc(out->len ? out->len : 1);
    if (!out->body)
        return failf(out, RLS_RESOURCE_EXHAUSTED, "out of memory packing the response");
    rls_response_write(&resp, out->body);
    return RLS_OK;
}

/* A call being decided: the request (its strings are the asks'), the asks, the results, and who
 * to tell when an answer that waits on Redis comes in. One allocation, sized by the request. */
struct rls_call {
    cfg_config_t *const *cfg; /* the config in force when the answer is made */
    request_t *req;
    size_t n;
    rls_done_fn done;
    void *ctx;
    bool abandoned; /* the stream went away: free, answer nobody */
    gov_ask_t *asks;
    gov_result_t res[];
};

static void call_free(rls_call_t *call)
{
    envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(call->req, NULL);
    free(call);
}

/* The answer of a decided call: the engine's error if it gave one, else the response. */
static int finish(rls_call_t *call, int g, rls_answer_t *out)
{
    size_t at = 0;
    if (g >= 0)
        while (at < call->n && call->res[at].status == 0)
            at++;
    if (g < 0 || at < call->n) { /* a failure, of the request or found when Redis answered */
        if (g < 0)
            while (at + 1 < call->n && call->res[at].status == 0)
                at++;
        char text[TT_ERR_TEXT_MAX];
        if (g == TT_ERR_UNAUTHENTICATED || g == TT_ERR_PEER) /* the caller, not a descriptor */
            return failf(out, status_of(g), "%s",
                         tt_err_format(&call->res[0].err, text, sizeof(text)));
        return failf(out, status_of(g < 0 ? g : call->res[at].status), "descriptors[%zu]: %s", at,
                     tt_err_format(&call->res[at].err, text, sizeof(text)));
    }
    return respond(*call->cfg, call->res, call->n, out);
}

/* The engine's answer to a call that waited on Redis. */
static void decided(gov_result_t *res, void *ctx)
{
    (void)res;
    rls_call_t *call = ctx;
    if (!call->abandoned) {
        rls_answer_t ans = {0};
        finish(call, 0, &ans);
        call->done(&ans, call->ctx); /* the answer's body is the callee's now */
    }
    call_free(call);
}

void rls_call_abandon(rls_call_t *call)
{
    if (call)
        call->abandoned = true;
}

int rls_call_start(rls_call_t **pending, const rls_door_t *door, const rls_caller_t *who,
                   cfg_config_t *const *cfg, const uint8_t *msg, size_t len, int64_t now,
                   rls_answer_t *out, rls_done_fn done, void *ctx)
{
    *out = (rls_answer_t){0};
    *pending = NULL;
    if (len > RLS_MESSAGE_MAX) {
        out->refused = "too_large";
        return failf(out, RLS_RESOURCE_EXHAUSTED, "message: %zu bytes, at most %d", len,
                     RLS_MESSAGE_MAX);
    }
    request_t *req = envoy__service__ratelimit__v3__rate_limit_request__unpack(NULL, len, msg);
    if (!req) {
        out->refused = "bad_frame";
        return failf(out, RLS_INVALID_ARGUMENT, "RateLimitRequest: not a valid protobuf message");
    }
    size_t n = req->n_descriptors <= GOV_ASKS_MAX ? req->n_descriptors : 0;
    rls_call_t *call = malloc(sizeof(*call) + n * (sizeof(gov_result_t) + sizeof(gov_ask_t)));
    if (!call) {
        envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(req, NULL);
        out->refused = "out_of_memory";
        return failf(out, RLS_RESOURCE_EXHAUSTED, "out of memory starting the call");
    }
    *call = (rls_call_t){.cfg = cfg,
                         .req = req,
                         .n = n,
                         .done = done,
                         .ctx = ctx,
                         .asks = (gov_ask_t *)(call->res + n)};
    unsigned flags = 0;
    int rc = build_asks(req, call->asks, out);
    if (rc == RLS_OK && rls_domain_flags(&(*cfg)->server, req->domain, &flags) != RLS_OK)
        rc = failf(out, RLS_NOT_FOUND, "domain \"%.64s\" is not served (server.grpc_domains)",
                   req->domain);
    if (rc != RLS_OK) { /* a request the door does not take */
        out->refused = "bad_request";
        call_free(call);
        return rc;
    }
    int g = door->decide(door->ud, who, req->domain, strlen(req->domain), call->asks, n, flags, now,
                         call->res, decided, call);
    if (g == GOV_PENDING) {
        *pending = call;
        return RLS_PENDING;
    }
    rc = finish(call, g, out);
    call_free(call);
    return rc;
}

int rls_should_rate_limit(const rls_door_t *door, const rls_caller_t *who, cfg_config_t *const *cfg,
                          const uint8_t *msg, size_t len, int64_t now, rls_answer_t *out)
{
    rls_call_t *pending;
    int rc = rls_call_start(&pending, door, who, cfg, msg, len, now, out, NULL, NULL);
    if (rc == RLS_PENDING) { /* a caller that cannot wait: the answer goes nowhere */
        rls_call_abandon(pending);
        return failf(out, RLS_UNAVAILABLE, "the decision waits on Redis; this caller cannot wait");
    }
    return rc;
}

int rls_health_check(const uint8_t *msg, size_t len, rls_answer_t *out)
{
    *out = (rls_answer_t){0};
    Grpc__Health__V1__HealthCheckRequest *req =
        grpc__health__v1__health_check_request__unpack(NULL, len, msg);
    if (!req) {
        out->refused = "bad_frame";
        return failf(out, RLS_INVALID_ARGUMENT, "HealthCheckRequest: not a valid protobuf message");
    }
    /* the names envoy ratelimit's deployments probe: "" (the server), "ratelimit" (its own
     * health checker's name) and the service's */
    bool known = !req->service[0] || strcmp(req->service, "ratelimit") == 0 ||
                 strcmp(req->service, RLS_SERVICE) == 0;
    if (!known)
        failf(out, RLS_NOT_FOUND, "service \"%.64s\" is not served here", req->service);
    grpc__health__v1__health_check_request__free_unpacked(req, NULL);
    if (!known)
        return out->status;
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    out->len = grpc__health__v1__health_check_response__get_packed_size(&resp);
    out->body = malloc(out->len ? out->len : 1);
    if (!out->body)
        return failf(out, RLS_RESOURCE_EXHAUSTED, "out of memory packing the response");
    grpc__health__v1__health_check_response__pack(&resp, out->body);
    return RLS_OK;
}
