/* What the doors turn away, counted and logged; see refused.h. */
#include "refused.h"

#include "tt_clock.h"

void srv_refused_init(srv_refused_t *r, srv_metrics_t *metrics)
{
    *r = (srv_refused_t){.metrics = metrics};
}

void srv_refused_request(srv_refused_t *r, srv_door_t door, const char *code)
{
    srv_metrics_error(r->metrics, door, code);
    srv_refused_logged(r, door, code);
}

void srv_refused_logged(srv_refused_t *r, srv_door_t door, const char *code)
{
    uint64_t n = tt_log_every(&r->requests[door], tt_mono_ns(), SRV_REFUSED_LOG_NS);
    if (n)
        tt_log(TT_LOG_WARN, "requests refused by the door", TT_STR("door", srv_door_name(door)),
               TT_STR("code", code), TT_UINT("count", n));
}

void srv_refused_conn(srv_refused_t *r, srv_door_t door, srv_close_t why)
{
    srv_metrics_closed(r->metrics, door, why);
    if (why == SRV_CLOSE_IDLE)
        return;
    uint64_t n = tt_log_every(&r->closes[door][why], tt_mono_ns(), SRV_REFUSED_LOG_NS);
    if (n)
        tt_log(TT_LOG_WARN, "connections closed by the door", TT_STR("door", srv_door_name(door)),
               TT_STR("reason", srv_close_name(why)), TT_UINT("count", n));
}

static void grpc_refused(void *ud, const char *code)
{
    srv_refused_request(ud, SRV_DOOR_GRPC, code);
}

static void grpc_closed(void *ud, const char *reason)
{
    int why = srv_close_parse(reason);
    if (why >= 0)
        srv_refused_conn(ud, SRV_DOOR_GRPC, (srv_close_t)why);
}

const rls_events_t *srv_refused_rls(srv_refused_t *r)
{
    r->rls = (rls_events_t){.refused = grpc_refused, .closed = grpc_closed, .ud = r};
    return &r->rls;
}
