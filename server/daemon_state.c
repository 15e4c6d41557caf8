/* See daemon_state.h. */
#include "daemon_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_clock.h"
#include "tt_log.h"

static void log_event(void *ctx, const st_event_t *ev)
{
    (void)ctx;
    switch (ev->kind) {
    case ST_EV_OPEN_FAILED:
        tt_log(TT_LOG_ERROR, "state: directory unusable; serving without state",
               TT_STR("dir", ev->path), TT_STR("reason", st_reason(ev->err)),
               TT_STR("detail", ev->detail));
        return;
    case ST_EV_RESTORE_FAILED:
        tt_log(ev->err == ST_EMISSING ? TT_LOG_INFO : TT_LOG_ERROR,
               ev->err == ST_EMISSING ? "state: no snapshot to restore; starting empty"
                                      : "state: snapshot not restored; starting empty",
               TT_STR("file", ev->path), TT_STR("reason", st_reason(ev->err)),
               TT_STR("detail", ev->detail));
        return;
    case ST_EV_DROPPED:
        tt_log(TT_LOG_WARN, "state: counters dropped, their limit is not in the config",
               TT_STR("file", ev->path), TT_STR("limit", ev->limit),
               TT_UINT("counters", ev->counters));
        return;
    case ST_EV_OUT_OF_RANGE:
        tt_log(TT_LOG_WARN, "state: counters out of range for their algorithm, not restored",
               TT_STR("file", ev->path), TT_STR("limit", ev->limit),
               TT_UINT("counters", ev->counters));
        return;
    case ST_EV_RESTORED:
        tt_log(TT_LOG_INFO, "state: restored", TT_STR("file", ev->path),
               TT_UINT("restored", ev->restored), TT_UINT("idle", ev->idle),
               TT_UINT("dropped", ev->dropped), TT_UINT("refused", ev->refused),
               TT_UINT("out_of_range", ev->out_of_range), TT_NUM("age_s", ev->age_ns / 1e9),
               TT_UINT("bytes", ev->bytes));
        return;
    case ST_EV_SNAPSHOT:
        tt_log(ev->at_stop ? TT_LOG_INFO : TT_LOG_DEBUG, "state: snapshot written",
               TT_STR("file", ev->path), TT_UINT("counters", ev->counters),
               TT_UINT("bytes", ev->bytes), TT_NUM("took_ms", ev->took_ns / 1e6),
               TT_NUM("pause_ms", ev->pause_ns / 1e6), TT_BOOL("at_stop", ev->at_stop));
        return;
    case ST_EV_SNAPSHOT_FAILED:
        tt_log(TT_LOG_ERROR, "state: snapshot failed; the previous one stays",
               TT_STR("file", ev->path), TT_STR("reason", st_reason(ev->err)),
               TT_STR("detail", ev->detail));
        return;
    case ST_EV_WARNING:
        tt_log(TT_LOG_WARN, "state: a file others could have written; read all the same",
               TT_STR("file", ev->path), TT_STR("detail", ev->detail));
        return;
    case ST_EV_NO_HUGE_PAGES:
        tt_log(TT_LOG_WARN,
               "state: no huge pages for the counter table; each snapshot's fork stops the loop "
               "about 2.5 ms per million counters",
               TT_STR("dir", ev->path), TT_STR("detail", ev->detail));
        return;
    }
}

static void metrics_line(void *ctx, const char *text)
{
    srv_metrics_printf(ctx, "%s", text);
}

static void state_metrics(tt_buf_t *out, void *ud)
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

/* ---- the members membership last knew ---------------------------------------------------- */

/* The largest file SWIM_REMEMBER_MAX members can make (an id, a generation, an address each). */
#define MEMBERS_FILE_MAX (256 + (size_t)SWIM_REMEMBER_MAX * (SWIM_ID_MAX + 40))

struct srv_members {
    st_node_t *state;
    mb_t *mb;
    uv_timer_t timer;
    uv_work_t work;
    bool writing, stopped;
    uint8_t *last; /* what the file holds (as far as we wrote it) */
    size_t last_len;
    uint8_t *next; /* what the worker writes */
    size_t next_len;
    int rc;
    tt_err_t err;
    int logged; /* the last failure logged, so a full disk says so once, not every 5 s */
};

static void members_failed(srv_members_t *m, int rc, const tt_err_t *err)
{
    if (rc == m->logged)
        return;
    m->logged = rc;
    char detail[TT_ERR_TEXT_MAX];
    tt_log(TT_LOG_WARN,
           "membership: the members file was not written; a restart will join "
           "through the seeds alone",
           TT_STR("reason", st_reason(rc)),
           TT_STR("detail", tt_err_format(err, detail, sizeof(detail))));
}

/* The members now, when they differ from what the file holds; NULL otherwise. */
static uint8_t *members_changed(srv_members_t *m, size_t *len)
{
    uint8_t *b;
    if (mb_known_save(m->mb, &b, len) != 0)
        return NULL;
    if (m->last && *len == m->last_len && memcmp(b, m->last, *len) == 0) {
        free(b);
        return NULL;
    }
    return b;
}

static void members_written(srv_members_t *m, int rc, const tt_err_t *err, uint8_t *b, size_t len)
{
    if (rc != 0) {
        members_failed(m, rc, err);
        free(b);
        return;
    }
    m->logged = 0;
    free(m->last);
    m->last = b;
    m->last_len = len;
}

static void write_work(uv_work_t *w)
{
    srv_members_t *m = w->data;
    m->rc = st_node_write_file(m->state, SRV_MEMBERS_FILE, m->next, m->next_len, &m->err);
}

static void write_done(uv_work_t *w, int status)
{
    srv_members_t *m = w->data;
    m->writing = false;
    members_written(m, status ? status : m->rc, &m->err, m->next, m->next_len);
    m->next = NULL;
}

static void members_tick(uv_timer_t *t)
{
    srv_members_t *m = t->data;
    if (m->writing || m->stopped)
        return;
    if (!(m->next = members_changed(m, &m->next_len)))
        return;
    m->err = (tt_err_t){0};
    m->writing = uv_queue_work(t->loop, &m->work, write_work, write_done) == 0;
    if (!m->writing) {
        free(m->next);
        m->next = NULL;
    }
}

int srv_members_open(srv_members_t **out, uv_loop_t *loop, st_node_t *state, mb_t *mb)
{
    *out = NULL;
    if (!state)
        return 0;
    srv_members_t *m = calloc(1, sizeof(*m));
    if (!m)
        return 0;
    m->state = state;
    m->mb = mb;
    m->work.data = m;
    uint8_t *b = NULL;
    size_t len = 0;
    tt_err_t err = {0};
    char detail[TT_ERR_TEXT_MAX];
    int n = 0, rc = st_node_read_file(state, SRV_MEMBERS_FILE, MEMBERS_FILE_MAX, &b, &len, &err);
    if (rc == ST_EMISSING)
        tt_log(TT_LOG_INFO, "membership: no members file; joining through the seeds");
    else if (rc != 0)
        tt_log(TT_LOG_WARN, "membership: the members file was not read; joining through the seeds",
               TT_STR("reason", st_reason(rc)),
               TT_STR("detail", tt_err_format(&err, detail, sizeof(detail))));
    else if ((n = mb_known_load(mb, b, len, &err)) < 0)
        tt_log(TT_LOG_WARN, "membership: the members file does not load; joining through the seeds",
               TT_STR("detail", tt_err_format(&err, detail, sizeof(detail))));
    free(b);
    uv_timer_init(loop, &m->timer);
    m->timer.data = m;
    uv_timer_start(&m->timer, members_tick, SRV_MEMBERS_EVERY_MS, SRV_MEMBERS_EVERY_MS);
    *out = m;
    return n > 0 ? n : 0;
}

void srv_members_stop(srv_members_t *m, bool save)
{
    if (!m || m->stopped)
        return;
    m->stopped = true;
    uv_close((uv_handle_t *)&m->timer, NULL);
    size_t len;
    uint8_t *b;
    if (!save || m->writing || !(b = members_changed(m, &len)))
        return; /* a write under way holds members of the last few seconds */
    tt_err_t err = {0};
    members_written(m, st_node_write_file(m->state, SRV_MEMBERS_FILE, b, len, &err), &err, b, len);
}

void srv_members_free(srv_members_t *m)
{
    if (!m)
        return;
    free(m->last);
    free(m->next);
    free(m);
}
