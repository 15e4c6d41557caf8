/* See daemon_state.h. */
#include "daemon_state.h"

#include <inttypes.h>
#include <stdio.h>

#include "log.h"
#include "tt_clock.h"

static void log_event(void *ctx, const st_event_t *ev)
{
    (void)ctx;
    char a[32], b[32], c[32], dd[32], e[32], f[32], g[32];
    switch (ev->kind) {
    case ST_EV_OPEN_FAILED:
        srv_log(SRV_LOG_ERROR, "state: directory unusable; serving without state", "dir", ev->path,
                "reason", st_reason(ev->err), "detail", ev->detail, NULL);
        return;
    case ST_EV_RESTORE_FAILED:
        srv_log(ev->err == ST_EMISSING ? SRV_LOG_INFO : SRV_LOG_ERROR,
                ev->err == ST_EMISSING ? "state: no snapshot to restore; starting empty"
                                       : "state: snapshot not restored; starting empty",
                "file", ev->path, "reason", st_reason(ev->err), "detail", ev->detail, NULL);
        return;
    case ST_EV_DROPPED:
        snprintf(a, sizeof(a), "%" PRIu64, ev->counters);
        srv_log(SRV_LOG_WARN, "state: counters dropped, their limit is not in the config", "file",
                ev->path, "limit", ev->limit, "counters", a, NULL);
        return;
    case ST_EV_OUT_OF_RANGE:
        snprintf(a, sizeof(a), "%" PRIu64, ev->counters);
        srv_log(SRV_LOG_WARN, "state: counters out of range for their algorithm, not restored",
                "file", ev->path, "limit", ev->limit, "counters", a, NULL);
        return;
    case ST_EV_RESTORED:
        snprintf(a, sizeof(a), "%" PRIu64, ev->restored);
        snprintf(b, sizeof(b), "%" PRIu64, ev->idle);
        snprintf(c, sizeof(c), "%" PRIu64, ev->dropped);
        snprintf(dd, sizeof(dd), "%" PRIu64, ev->refused);
        snprintf(e, sizeof(e), "%.3f", (double)ev->age_ns / 1e9);
        snprintf(f, sizeof(f), "%" PRIu64, ev->bytes);
        snprintf(g, sizeof(g), "%" PRIu64, ev->out_of_range);
        srv_log(SRV_LOG_INFO, "state: restored", "file", ev->path, "restored", a, "idle", b,
                "dropped", c, "refused", dd, "out_of_range", g, "age_s", e, "bytes", f, NULL);
        return;
    case ST_EV_SNAPSHOT:
        snprintf(a, sizeof(a), "%" PRIu64, ev->counters);
        snprintf(b, sizeof(b), "%" PRIu64, ev->bytes);
        snprintf(c, sizeof(c), "%.3f", (double)ev->took_ns / 1e6);
        snprintf(dd, sizeof(dd), "%.3f", (double)ev->pause_ns / 1e6);
        srv_log(ev->at_stop ? SRV_LOG_INFO : SRV_LOG_DEBUG, "state: snapshot written", "file",
                ev->path, "counters", a, "bytes", b, "took_ms", c, "pause_ms", dd, "at_stop",
                ev->at_stop ? "true" : "false", NULL);
        return;
    case ST_EV_SNAPSHOT_FAILED:
        srv_log(SRV_LOG_ERROR, "state: snapshot failed; the previous one stays", "file", ev->path,
                "reason", st_reason(ev->err), "detail", ev->detail, NULL);
        return;
    case ST_EV_WARNING:
        srv_log(SRV_LOG_WARN, "state: a file others could have written; read all the same", "file",
                ev->path, "detail", ev->detail, NULL);
        return;
    case ST_EV_NO_HUGE_PAGES:
        srv_log(SRV_LOG_WARN,
                "state: no huge pages for the counter table; each snapshot's fork stops the loop "
                "about 2.5 ms per million counters",
                "dir", ev->path, "detail", ev->detail, NULL);
        return;
    }
}

static void metrics_line(void *ctx, const char *text)
{
    srv_metrics_printf(ctx, "%s", text);
}

static void state_metrics(proto_out_t *out, void *ud)
{
    st_node_metrics(ud, tt_wall_ns(), metrics_line, out);
}

int64_t srv_state_age_ms(void *ud, int64_t now)
{
    int64_t ns = st_node_age_ns(ud, now);
    return ns < 0 ? -1 : ns / 1000000;
}

int srv_state_open(st_node_t **out, uv_loop_t *loop, gov_engine_t *e, cfg_config_t *const *cfgp,
                   srv_metrics_t *metrics)
{
    const cfg_config_t *cfg = *cfgp;
    *out = NULL;
    if (!cfg->server.state_dir[0])
        return 0;
    st_options_t o = {.dir = cfg->server.state_dir,
                      .interval_ns = cfg->server.snapshot_interval_ns,
                      .share = &cfg->share};
    if (st_node_open(out, loop, &o, log_event, NULL) != 0)
        return -1;
    st_node_restore(*out, e, cfg, tt_wall_ns());
    st_node_start(*out, e, cfgp);
    srv_metrics_add_source(metrics, state_metrics, *out);
    return 0;
}
