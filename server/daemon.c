/*
 * The daemon: config → engine → server, then signals.
 *
 * Reload follows nginx's cycle: prepare, then commit. Prepare builds every part the reload
 * changes aside and checks it — the file loaded and armed, the engine's next generation bound
 * to the counter table, membership's next keyring read and accepted — and may fail without a
 * side effect. Commit swaps them all in at once and cannot fail. So a reload is applied whole
 * ("reload applied") or refused whole ("reload refused: <reason>, old config still serving"),
 * and tokentriage_reloads_total counts which. The server section (listeners, caps) and
 * shared_state (membership, division, Redis) are read at start only: a reload that changes
 * them says which and keeps the old values until a restart (cfg_restart_sections). The one
 * exception is the keyring file's content, read again on every reload so keys rotate without
 * restarts, and the Redis password files' (shared_state.redis.password_file,
 * sentinel_password_file) and TLS files' (shared_state.redis.tls), read again so a rotated
 * password, certificate or CA reaches the next connection.
 */
#include "daemon.h"

#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "config.h"
#include "daemon_state.h"
#include "daemon_status.h"
#include "demand_node.h"
#include "dispatch.h"
#include "door.h"
#include "engine.h"
#include "gov.h" /* redis/: the redis store as the engine's hook */
#include "info_metrics.h"
#include "record.h"
#include "mb.h"
#include "preflight.h"
#include "refused.h"
#include "share_node.h"
#include "listen.h" /* rls/: the gRPC front door */
#include "srv.h"
#include "tt_clock.h"
#include "tt_fmt.h"
#include "tt_log.h"
#include "tokentriage.h"
#include "watch.h"

#define EX_OK_ 0
#define EX_UNAVAILABLE_ 69
#define EX_SOFTWARE_ 70
#define EX_OSERR_ 71
#define EX_CONFIG_ 78
#define TICK_MS 100

typedef struct daemon {
    uv_loop_t loop;
    const srv_daemon_options_t *opt;
    cfg_config_t *cfg;
    gov_engine_t *engine;
    srv_metrics_t *metrics;
    srv_refused_t refused; /* what the HTTP and gRPC doors turn away: counted and logged */
    srv_t *srv;
    rls_srv_t *grpc; /* server.grpc, when set */
    door_t *door;    /* the engine call of every way in */
    dispatch_t *dispatch;
    uv_signal_t sighup, sigterm, sigint;
    uv_timer_t tick;
    char node[256];
    mb_t *mb;              /* membership, when shared_state.share is configured */
    share_node_t *share;   /* the share store, with membership */
    demand_node_t *demand; /* beside it when shared_state.share.division is demand */
    rds_gov_t redis;       /* the redis store, when shared_state.redis is configured */
    st_node_t *state;      /* the state directory, when server.state_dir is set */
    srv_watch_t *watch;    /* the config and keyring files, when server.config_watch */
    srv_members_t *known;  /* the members membership last knew, kept there */
    char (*addrs)[64];     /* the members answer's address strings */
    size_t addrs_cap;
    char doubt[400];         /* the last n_in_doubt text */
    srv_info_metrics_t info; /* build, process and configured limits on /metrics */
    srv_status_src_t status; /* GET /status */
    rec_t *record;           /* server.record, when set */
} daemon_t;

static void flush_record(daemon_t *d);

/* Logs every finding of a load or an arm, errors and warnings alike. */
static void log_report(const cfg_report_t *rep, const char *msg)
{
    for (size_t i = 0; i < rep->n; i++)
        tt_log(rep->items[i].warning ? TT_LOG_WARN : TT_LOG_ERROR, msg,
               TT_STR("detail", rep->items[i].text));
}

/* Loads and arms the configuration: the file, or the embedded default. NULL on error, with the
 * first error in why (every finding is logged). */
static cfg_config_t *load(const char *path, const char *what, char *why, size_t why_size)
{
    cfg_report_t rep = {0};
    cfg_config_t *cfg = NULL;
    int rc = path
                 ? cfg_load_file(path, &cfg, &rep)
                 : cfg_load_string("<default>", cfg_default_yaml, cfg_default_yaml_len, &cfg, &rep);
    if (rc == 0 && (rc = cfg_arm(cfg, &rep)) != 0) {
        cfg_free(cfg);
        cfg = NULL;
    }
    log_report(&rep, what);
    snprintf(why, why_size, "the configuration does not load");
    for (size_t i = 0; i < rep.n; i++)
        if (!rep.items[i].warning) {
            snprintf(why, why_size, "%s", rep.items[i].text);
            break;
        }
    cfg_report_free(&rep);
    return rc == 0 ? cfg : NULL;
}

static void log_reload(void *ctx, const char *limit_id, gov_reload_action_t action)
{
    tt_log(TT_LOG_INFO, "reload", TT_STR("limit", limit_id),
           TT_STR("counters", gov_reload_action_name(action)));
}

/* A sealed replica whose keyring file is still the same path reads it again on reload (key
 * rotation, docs/membership.md); another path, or sealing switched on or off, needs a restart. */
static bool rereads_keyring(const daemon_t *d, const cfg_config_t *cfg)
{
    return d->mb && d->cfg->share.keyring_file[0] &&
           strcmp(d->cfg->share.keyring_file, cfg->share.keyring_file) == 0;
}

/* One reload: every part it changes, built and checked aside. */
typedef struct reload {
    cfg_config_t *cfg;                         /* the new file, loaded and armed */
    gov_reload_t *engine;                      /* its limits, bound to the counter table */
    bool rekey;                                /* membership takes `keyring` */
    mb_keyring_t keyring;                      /* membership's next keyring */
    const char *restart[CFG_RESTART_SECTIONS]; /* sections that apply after a restart */
    size_t n_restart;
    bool recred;                  /* the redis store takes `redis_cred` and `redis_tls` */
    rds_tls_t *redis_tls;         /* its next TLS context (NULL: plain), the files read again */
    rds_credentials_t redis_cred; /* its next credentials, read from the files again */
} reload_t;

/* Builds and checks every part; changes nothing. 0, or -1 with the reason in why (what
 * prepare had built is given back). */
static int reload_prepare(daemon_t *d, reload_t *r, char *why, size_t why_size)
{
    const char *path = d->opt->config_path;
    if (!(r->cfg = load(path, "reload: config", why, why_size)))
        return -1;
    const cfg_config_t *c = r->cfg;
    tt_err_t gerr;
    if (gov_engine_reload_prepare(d->engine, c->limits, c->n_limits, c->disclose_limits, &r->engine,
                                  &gerr) != 0) {
        tt_err_format(&gerr, why, why_size);
        cfg_free(r->cfg);
        return -1;
    }
    tt_err_t merr;
    r->rekey = rereads_keyring(d, c);
    if (r->rekey && mb_keyring_prepare(d->mb, c->share.keyring_file, &r->keyring, &merr) != 0) {
        tt_err_format(&merr, why, why_size);
        gov_engine_reload_abort(d->engine, r->engine);
        cfg_free(r->cfg);
        return -1;
    }
    /* a store running since the start reads its password files again (a rotated Secret) */
    r->recred = d->redis.store != NULL && c->redis.present;
    if (r->recred && (rds_credentials_from_config(&c->redis, &r->redis_cred, &merr) != 0 ||
                      rds_tls_from_config(&c->redis, &r->redis_tls, &merr) != 0)) {
        tt_err_format(&merr, why, why_size);
        rds_credentials_wipe(&r->redis_cred);
        gov_engine_reload_abort(d->engine, r->engine);
        cfg_free(r->cfg);
        return -1;
    }
    r->n_restart = cfg_restart_sections(d->cfg, c, r->restart);
    return 0;
}

/* Puts every prepared part in force at once. Cannot fail. */
static void reload_commit(daemon_t *d, reload_t *r)
{
    gov_engine_reload_commit(d->engine, r->engine, log_reload, d);
    if (r->rekey)
        mb_keyring_commit(d->mb, &r->keyring);
    if (r->recred) {
        rds_gov_set_credentials(&d->redis, &r->redis_cred);
        rds_credentials_wipe(&r->redis_cred);
        rds_gov_set_tls(&d->redis, r->redis_tls); /* the store takes the reference */
    }
    for (size_t i = 0; i < r->n_restart; i++)
        tt_log(TT_LOG_WARN, "reload: a section changed that applies after a restart",
               TT_STR("section", r->restart[i]));
    if (!d->opt->log_level_set) /* server.log_level applies at once */
        tt_log_set_level(r->cfg->server.log_level);
    cfg_free(d->cfg);
    d->cfg = r->cfg;
    d->status.generation++;
    d->status.applied_ns = tt_wall_ns();
}

/* One reload, asked for by `trigger` (SIGHUP, or the watch that saw `changed` change). */
static void reload(daemon_t *d, const char *trigger, const char *changed)
{
    const char *path = d->opt->config_path;
    tt_log(TT_LOG_INFO, "reload requested", TT_STR("config", path ? path : "<default>"),
           TT_STR("trigger", trigger), TT_STR("changed", changed));
    reload_t r = {0};
    char why[320];
    bool ok = reload_prepare(d, &r, why, sizeof(why)) == 0;
    srv_metrics_reload(d->metrics, ok);
    /* what was just read is what the watch has seen, applied or refused: a refused file is not
     * tried again until it changes */
    srv_watch_sync(d->watch);
    if (!ok) {
        mb_keyring_wipe(&r.keyring);
        d->status.refused++;
        tt_log(TT_LOG_ERROR, "reload refused, old config still serving", TT_STR("reason", why),
               TT_UINT("generation", d->status.generation));
        return;
    }
    reload_commit(d, &r);
    tt_log(TT_LOG_INFO, "reload applied", TT_UINT("limits", d->cfg->n_limits),
           TT_UINT("tokens", d->cfg->tokens.n), /* how many, never which */
           TT_UINT("generation", d->status.generation));
}

/* Peers have been told we leave: close membership; the loop ends when its handles are. */
static void left(void *ud, mb_t *mb)
{
    daemon_t *d = ud;
    mb_close(mb, NULL, NULL);
    share_node_close(d->share);
    if (d->demand)
        demand_node_close(d->demand);
}

static void on_signal(uv_signal_t *h, int signum)
{
    daemon_t *d = h->data;
    if (signum == SIGHUP) {
        reload(d, "SIGHUP", NULL);
        return;
    }
    tt_log(TT_LOG_INFO, "stopping", TT_STR("signal", signum == SIGTERM ? "SIGTERM" : "SIGINT"));
    rds_gov_close(&d->redis); /* first: what is in flight completes while the server answers */
    srv_stop(d->srv);
    rls_srv_stop(d->grpc);
    flush_record(d);                            /* what the last decisions recorded */
    st_node_stop(d->state, true, tt_wall_ns()); /* no decision runs any more: nothing is lost */
    srv_watch_close(d->watch);
    srv_members_stop(d->known, true); /* the members of the moment, before we leave them */
    if (d->mb)
        mb_leave(d->mb, left, d);
    uv_close((uv_handle_t *)&d->sighup, NULL);
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->tick, NULL);
}

/* Writes the recorded decisions that wait; a file that refuses is logged once, until it takes
 * a write again. */
static void flush_record(daemon_t *d)
{
    static bool failing;
    if (!d->record)
        return;
    int rc = rec_flush(d->record);
    if (rc != 0 && !failing)
        tt_log(TT_LOG_ERROR, "record: cannot write the recording; its records are lost",
               TT_STR("file", rec_path(d->record)));
    else if (rc == 0 && failing)
        tt_log(TT_LOG_INFO, "record: writing again", TT_STR("file", rec_path(d->record)));
    failing = rc != 0;
}

/* /metrics: what the recording kept, dropped and began (server.record). */
static void record_metrics(tt_buf_t *out, void *ud)
{
    rec_stats_t st;
    rec_stats(ud, &st);
    srv_metrics_printf(
        out,
        "# HELP tokentriage_record_records_total Decisions recorded (server.record).\n"
        "# TYPE tokentriage_record_records_total counter\n"
        "tokentriage_record_records_total %llu\n"
        "# HELP tokentriage_record_dropped_total Decisions not recorded: more waiting than the "
        "recording holds, or a record no file could hold.\n"
        "# TYPE tokentriage_record_dropped_total counter\n"
        "tokentriage_record_dropped_total %llu\n"
        "# HELP tokentriage_record_files_total Recording files begun (a start, each rotation).\n"
        "# TYPE tokentriage_record_files_total counter\n"
        "tokentriage_record_files_total %llu\n"
        "# HELP tokentriage_record_write_errors_total Writes the recording's file refused.\n"
        "# TYPE tokentriage_record_write_errors_total counter\n"
        "tokentriage_record_write_errors_total %llu\n",
        (unsigned long long)st.records, (unsigned long long)st.dropped,
        (unsigned long long)st.rotations, (unsigned long long)st.write_errors);
}

/* The door's decisions, every door's, into the recording (server.record). */
static uint64_t record_asked(void *ud, const door_decision_t *what, const door_verdict_t *v)
{
    return rec_asked(ud, what, v);
}

static void record_answered(void *ud, uint64_t token, const door_verdict_t *v)
{
    rec_answered(ud, token, v);
}

static void on_tick(uv_timer_t *t)
{
    daemon_t *d = t->data;
    int64_t now = tt_wall_ns();
    gov_engine_tick(d->engine, now);
    srv_status_tick(&d->status, now);
    flush_record(d);
}

/* One detailed series of the rule language: its non-zero outcomes. */
static void detail_metric(void *ctx, const gov_detail_t *m)
{
    char key[2 * GOV_DETAIL_KEY_MAX + 8];
    tt_fmt_label(key, sizeof(key), m->key, m->key_len);
    for (int o = 0; o < GOV_OUT_COUNT; o++)
        if (m->outcomes[o])
            srv_metrics_printf(
                ctx,
                "tokentriage_rls_detailed_total{limit=\"%s\",key=\"%s\",verdict=\"%s\"} "
                "%llu\n",
                m->limit, key, gov_outcome_name((gov_outcome_t)o),
                (unsigned long long)m->outcomes[o]);
}

/* /metrics: the engine's families, decisions by limit and outcome first. */
static void engine_metrics(tt_buf_t *out, void *ud)
{
    daemon_t *d = ud;
    static gov_limit_metrics_t lm[GOV_LIMITS_MAX];
    size_t n = gov_engine_limit_metrics(d->engine, lm, GOV_LIMITS_MAX);
    if (n > GOV_LIMITS_MAX)
        n = GOV_LIMITS_MAX;
    srv_metrics_printf(out, "# HELP tokentriage_decisions_total Limit evaluations, by limit and "
                            "outcome (admit, deny, unfittable, soft_deny, fail_open, "
                            "fail_closed).\n# TYPE tokentriage_decisions_total counter\n");
    for (size_t i = 0; i < n; i++)
        for (int o = 0; o < GOV_OUT_COUNT; o++)
            srv_metrics_printf(
                out, "tokentriage_decisions_total{limit=\"%s\",verdict=\"%s\"} %llu\n", lm[i].id,
                gov_outcome_name((gov_outcome_t)o), (unsigned long long)lm[i].outcomes[o]);
    srv_metrics_printf(out, "# HELP tokentriage_counters Counters held, by limit.\n"
                            "# TYPE tokentriage_counters gauge\n");
    for (size_t i = 0; i < n; i++)
        srv_metrics_printf(out, "tokentriage_counters{limit=\"%s\"} %llu\n", lm[i].id,
                           (unsigned long long)lm[i].counters);
    srv_metrics_printf(out, "# HELP tokentriage_store_errors_total Decisions a limit's store "
                            "could not answer, by limit and store.\n"
                            "# TYPE tokentriage_store_errors_total counter\n");
    for (size_t i = 0; i < n; i++)
        srv_metrics_printf(out, "tokentriage_store_errors_total{limit=\"%s\",store=\"%s\"} %llu\n",
                           lm[i].id, cfg_store_name(lm[i].store),
                           (unsigned long long)lm[i].store_errors);
    srv_metrics_printf(out, "# HELP tokentriage_rls_detailed_total Evaluations of the gRPC "
                            "door's rules with detailed_metric or value_to_metric, by rule, the "
                            "key envoy ratelimit names its stats with, and outcome.\n"
                            "# TYPE tokentriage_rls_detailed_total counter\n");
    uint64_t dropped = gov_engine_each_detail(d->engine, detail_metric, out);
    srv_metrics_printf(out,
                       "# HELP tokentriage_rls_detailed_dropped_total Detailed counts that "
                       "found no room: the series are bounded (%d).\n"
                       "# TYPE tokentriage_rls_detailed_dropped_total counter\n"
                       "tokentriage_rls_detailed_dropped_total %llu\n",
                       GOV_DETAIL_MAX, (unsigned long long)dropped);
    gov_metrics_t g;
    gov_engine_metrics(d->engine, &g);
    srv_metrics_printf(
        out,
        "# HELP tokentriage_counters_max The cap on counters held.\n"
        "# TYPE tokentriage_counters_max gauge\ntokentriage_counters_max %llu\n"
        "# HELP tokentriage_counters_reclaimed_total Idle counters forgotten.\n"
        "# TYPE tokentriage_counters_reclaimed_total counter\n"
        "tokentriage_counters_reclaimed_total %llu\n"
        /* no "counter" in a name: promtool's lint refuses it (the old names: docs/operators.md) */
        "# HELP tokentriage_table_cap_hits_total New counters refused at the cap.\n"
        "# TYPE tokentriage_table_cap_hits_total counter\n"
        "tokentriage_table_cap_hits_total %llu\n"
        "# HELP tokentriage_table_bytes Memory of the counter table.\n"
        "# TYPE tokentriage_table_bytes gauge\n"
        "tokentriage_table_bytes %llu\n"
        "# HELP tokentriage_leases Concurrency leases held.\n"
        "# TYPE tokentriage_leases gauge\ntokentriage_leases %llu\n"
        "# HELP tokentriage_reservations Tpm reservations open (not settled, not expired).\n"
        "# TYPE tokentriage_reservations gauge\ntokentriage_reservations %llu\n"
        "# HELP tokentriage_reservations_ended_total Reservations never settled, which stayed "
        "charged: expired (not settled in time) or evicted (the pool was full).\n"
        "# TYPE tokentriage_reservations_ended_total counter\n"
        "tokentriage_reservations_ended_total{reason=\"expired\"} %llu\n"
        "tokentriage_reservations_ended_total{reason=\"evicted\"} %llu\n",
        (unsigned long long)g.counters_max, (unsigned long long)g.counters_reclaimed,
        (unsigned long long)g.cap_hits, (unsigned long long)g.table_bytes,
        (unsigned long long)g.leases, (unsigned long long)g.reservations,
        (unsigned long long)g.reservations_expired, (unsigned long long)g.reservations_evicted);
}

/* GET /v1/fleet: the socket's `fleet` answer, for `fleet --all` on another replica. */
static int fleet_http(void *ud, tt_buf_t *body)
{
    daemon_t *d = ud;
    return dispatch_fleet(d->dispatch, body, 0, tt_wall_ns());
}

static bool ready(void *ud, const char **why)
{
    daemon_t *d = ud;
    if (!d->cfg || !d->cfg->armed) {
        *why = "configuration not armed";
        return false;
    }
    if (d->mb && !mb_joined(d->mb) && !mb_solo(d->mb)) {
        *why = "membership not joined";
        return false;
    }
    return !d->share || share_node_ready(d->share, why);
}

static proto_str_t pstr(const char *s)
{
    return (proto_str_t){s, (uint32_t)strlen(s)};
}

/* The members answer: membership's table, then the members a restart remembered that N counts
 * without having heard from them (state "unheard"), so that the rows explain N. */
static size_t members_rows(void *ud, proto_member_t *rows, size_t cap, proto_members_head_t *head)
{
    daemon_t *d = ud;
    int64_t now = tt_wall_ns(), until;
    size_t n = mb_member_count(d->mb);
    uint32_t unheard = share_unheard(share_node_core(d->share), &until);
    size_t missing = unheard ? mb_known_missing(d->mb, NULL, 0) : 0;
    *head = (proto_members_head_t){.live = mb_live_count(d->mb),
                                   .unheard = unheard,
                                   .unheard_for_ms =
                                       unheard && until > now ? (until - now) / 1000000 : 0};
    if (cap > n + missing)
        cap = n + missing;
    if (!rows)
        return n + missing;
    if (cap > d->addrs_cap) {
        char(*a)[64] = realloc(d->addrs, cap * sizeof *a);
        if (!a)
            return 0;
        d->addrs = a;
        d->addrs_cap = cap;
    }
    swim_known_t *known = cap > n ? calloc(cap - n, sizeof *known) : NULL;
    if (cap > n && !known)
        cap = n;
    else if (known)
        mb_known_missing(d->mb, known, cap - n);
    for (size_t k = n; k < cap; k++) { /* never heard in this process: no incarnation */
        mb_addr_format(&known[k - n].addr, d->addrs[k], sizeof d->addrs[k]);
        rows[k] = (proto_member_t){.id = {known[k - n].id, (uint32_t)known[k - n].id_len},
                                   .address = pstr(d->addrs[k]),
                                   .state = pstr("unheard"),
                                   .generation = known[k - n].generation,
                                   .last_heard_ms = -1};
    }
    free(known);
    for (size_t i = 0; i < cap && i < n; i++) {
        swim_member_view_t v;
        mb_member_get(d->mb, i, &v);
        mb_addr_format(&v.addr, d->addrs[i], sizeof d->addrs[i]);
        const char *state = swim_state_name(v.state);
        rows[i] = (proto_member_t){
            .id = {v.id, (uint32_t)v.id_len},
            .address = {d->addrs[i], (uint32_t)strlen(d->addrs[i])},
            .state = {state, (uint32_t)strlen(state)},
            .incarnation = v.incarnation,
            .generation = v.generation,
            .last_heard_ms = v.self ? 0 : (now - v.last_heard_ns) / 1000000,
            .self = v.self,
        };
        if (v.self)
            mb_duplicate(d->mb, &rows[i].duplicate_generation, NULL, 0);
    }
    return cap;
}

/* `fleet`'s n_in_doubt: another live process claims our node id, so every view counts the two
 * of us once. */
static const char *n_doubt(void *ud)
{
    daemon_t *d = ud;
    uint64_t gen;
    char addr[80];
    if (!mb_duplicate(d->mb, &gen, addr, sizeof addr))
        return NULL;
    snprintf(d->doubt, sizeof d->doubt,
             "duplicate node id %s: another live process (generation %llu at %s) claims it; "
             "N counts the two once",
             d->cfg->share.node_id, (unsigned long long)gen, addr);
    return d->doubt;
}

static void metrics_line(void *ud, const char *line)
{
    srv_metrics_printf(ud, "%s", line);
}

/* /metrics: membership's families (members by state, gossip packets, bytes and drops). */
static void membership_metrics(tt_buf_t *out, void *ud)
{
    daemon_t *d = ud;
    mb_metrics_write(d->mb, metrics_line, out);
    share_node_metrics(d->share, d->cfg->limits, d->cfg->n_limits, metrics_line, out);
    if (d->demand)
        demand_node_metrics(d->demand, d->cfg->limits, d->cfg->n_limits, tt_wall_ns(), metrics_line,
                            out);
}

/* Demand mode's datagrams ride membership's sealed APP datagrams, both ways. A send that
 * fails (the owner just died) is dropped: the reporter's lease lapses to the cold share. */
static void demand_send(void *ctx, const char *to, size_t to_len, const uint8_t *bytes, size_t len)
{
    (void)mb_send_app(ctx, to, to_len, bytes, len);
}

static void demand_received(void *ud, mb_t *mb, const char *from, size_t from_len,
                            const uint8_t *payload, size_t len)
{
    (void)mb;
    /* a bad payload changes nothing and is counted in demand_rx_bad_total */
    (void)demand_node_receive(ud, from, from_len, payload, len, tt_wall_ns());
}

/* The demand store beside the share store: -1 when it cannot start (logged). */
static int start_demand(daemon_t *d)
{
    tt_err_t err = {0};
    char detail[256];
    if (demand_node_new(&d->demand, &d->cfg->share, &err) != 0) {
        tt_log(TT_LOG_ERROR, "demand store",
               TT_STR("detail", tt_err_format(&err, detail, sizeof(detail))));
        return -1;
    }
    if (demand_node_attach(d->demand, &d->loop, d->mb, d->share, demand_send, d->mb) != 0) {
        tt_log(TT_LOG_ERROR, "demand store", TT_STR("detail", "cannot start"));
        return -1;
    }
    mb_set_app_handler(d->mb, demand_received, d->demand);
    gov_engine_set_share(d->engine, &demand_node_ops, d->demand);
    return 0;
}

/* The live replica count for the fleet bound of local and redis limits. */
static int64_t live_members(void *ud)
{
    return mb_live_count(ud);
}

/* server.socket_group: hand the socket to a group (its mode gives that group access). */
/* /metrics: the redis store's families (calls, errors, timeouts, fallbacks, up). */
static void redis_metrics(tt_buf_t *out, void *ud)
{
    daemon_t *d = ud;
    rds_gov_metrics(&d->redis, metrics_line, out);
}

static void chgrp_socket(const char *path, const char *group)
{
    if (!*group)
        return;
    struct group *g = getgrnam(group);
    if (!g || chown(path, (uid_t)-1, g->gr_gid) != 0)
        tt_log(TT_LOG_WARN, "cannot give the socket to its group", TT_STR("socket", path),
               TT_STR("group", group));
}

/* Envoy's rate limit service on server.grpc (SPEC §12), deciding through the same engine. */
static int start_grpc(daemon_t *d)
{
    tt_err_t err;
    rls_srv_options_t o = {
        .addr = d->cfg->server.grpc,
        .socket_mode = d->cfg->server.socket_mode,
        .max_connections = (unsigned)d->cfg->server.max_connections,
        .conn = {.door = door_rls(d->door), .cfg = &d->cfg, .events = srv_refused_rls(&d->refused)},
    };
    if (rls_srv_start(&d->grpc, &d->loop, &o, &err) != 0) {
        char text[TT_ERR_TEXT_MAX];
        tt_log(TT_LOG_ERROR, "cannot serve",
               TT_STR("detail", tt_err_format(&err, text, sizeof(text))));
        return -1;
    }
    tt_log(TT_LOG_INFO, "grpc listening", TT_STR("address", rls_srv_address(d->grpc)));
    return 0;
}

/*
 * The engine's secret: the seed of its tables' hashes (so clients cannot aim collisions at them)
 * and of the keys that seal reservation and lease ids (so one client cannot guess another's
 * and settle or release it). From the kernel, or no start: anything derived from the pid and the
 * clock is guessable by a local client. getrandom with no flags waits until the kernel's pool
 * is ready and then answers up to 256 bytes whole; a signal may interrupt it (EINTR), and the
 * draw goes on. 0, or -1 with errno.
 */
static int draw_seed(uint64_t seed[2])
{
    uint8_t *p = (uint8_t *)seed;
    size_t got = 0, want = 2 * sizeof(uint64_t);
    while (got < want) {
        ssize_t k = getrandom(p + got, want - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (k == 0)
                errno = EIO;
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

/* The redis store's transitions, one log line each (docs/redis.md): a node's connection up or
 * failing (with the reason: an AUTH refused, a certificate, a lost connection), and the store as a
 * whole able to decide or leaving decisions to each limit's posture. */
static void redis_event(void *data, rds_event_t event, const char *node, const char *detail)
{
    (void)data;
    switch (event) {
    case RDS_EVENT_NODE_UP:
        tt_log(TT_LOG_INFO, "redis: connected", TT_STR("node", node),
               TT_STR("detail", detail[0] ? detail : NULL));
        break;
    case RDS_EVENT_NODE_DOWN:
        tt_log(TT_LOG_WARN, "redis: connection failed", TT_STR("node", node),
               TT_STR("detail", detail));
        break;
    case RDS_EVENT_UP:
        tt_log(TT_LOG_INFO, "redis: store up");
        break;
    case RDS_EVENT_DOWN:
        tt_log(TT_LOG_WARN, "redis: store down: decisions follow each limit's posture",
               TT_STR("detail", detail));
        break;
    }
}

static void on_watch(void *ctx, const char *changed)
{
    reload(ctx, "watch", changed);
}

static void watch_metrics(tt_buf_t *out, void *ud)
{
    srv_watch_metrics(ud, metrics_line, out);
}

/*
 * server.config_watch: the config file, and every other file a reload reads again (a sealed
 * replica's keyring file, the Redis password files, server.tokens_file), reload when they
 * change. Called before any of them is read but the config (and the tokens file, read when it
 * was armed), whose fingerprint `seen` was taken before it was read, so an update racing the
 * start is not lost. -1 when out of memory.
 */
static int start_watch(daemon_t *d, uint64_t seen)
{
    const cfg_config_t *c = d->cfg;
    if (!c->server.config_watch || !d->opt->config_path)
        return 0;
    const char *also[] = {c->share.present ? c->share.keyring_file : "",
                          c->redis.present ? c->redis.password_file : "",
                          c->redis.present ? c->redis.sentinel_password_file : "",
                          c->server.tokens_file};
    srv_watch_options_t o = {.poll_ns = c->server.config_poll_ns};
    if (srv_watch_new(&d->watch, &d->loop, &o) != 0 ||
        srv_watch_add(d->watch, d->opt->config_path, false, &seen, on_watch, d) != 0)
        return -1;
    for (size_t i = 0; i < sizeof also / sizeof also[0]; i++)
        if (also[i][0] && srv_watch_add(d->watch, also[i], false, NULL, on_watch, d) != 0)
            return -1;
    /* envoy ratelimit's config files (the gRPC door's rules): a ConfigMap's ..data swap there
     * reloads as the config's own change does (the directory a reload may name instead is
     * watched after a restart) */
    const char *rules = c->server.grpc_config_dir;
    if (rules[0] && srv_watch_add(d->watch, rules, true, NULL, on_watch, d) != 0)
        return -1;
    srv_metrics_add_source(d->metrics, watch_metrics, d->watch);
    tt_log(TT_LOG_INFO, "config watch", TT_STR("config", d->opt->config_path),
           TT_STR("keyring", also[0][0] ? also[0] : "none"),
           TT_STR("redis_password", also[1][0] ? also[1] : "none"),
           TT_STR("sentinel_password", also[2][0] ? also[2] : "none"),
           TT_STR("tokens", also[3][0] ? also[3] : "none"),
           TT_STR("grpc_config_dir", rules[0] ? rules : "none"),
           TT_BOOL("inotify", srv_watch_inotify(d->watch)),
           TT_NUM("poll_s", c->server.config_poll_ns / 1e9));
    return 0;
}

static int start(daemon_t *d)
{
    const srv_daemon_options_t *opt = d->opt;
    char why[320];
    /* before the file is read: a change while it is read is a change the watch then sees */
    uint64_t seen = opt->config_path ? srv_watch_fingerprint(opt->config_path, false) : 0;
    if (!(d->cfg = load(opt->config_path, "config", why, sizeof(why))))
        return EX_CONFIG_;
    if (!opt->log_level_set)
        tt_log_set_level(d->cfg->server.log_level);
    /* what validate --arm checks too: the keyring, the socket's directory, the listeners'
     * addresses, before anything listens (the state directory: st_node_open's own check) */
    cfg_report_t host = {0};
    int pre = srv_preflight(d->cfg, opt->socket, true, &host);
    log_report(&host, "config");
    cfg_report_free(&host);
    if (pre != 0)
        return pre == CFG_ENOMEM ? EX_SOFTWARE_ : EX_CONFIG_;
    gov_options_t gopt = {0};
    char err[512] = "";
    if (draw_seed(gopt.hash_seed) != 0) {
        snprintf(err, sizeof(err),
                 "getrandom: %s; the reservation and lease ids need a key no client can guess, "
                 "and the kernel gave no random bytes",
                 strerror(errno));
        tt_log(TT_LOG_ERROR, "cannot start", TT_STR("detail", err));
        return EX_OSERR_;
    }
    tt_err_t gerr;
    if (gov_engine_create_config(&d->engine, &gopt, d->cfg, &gerr) != 0) {
        tt_log(TT_LOG_ERROR, "engine", TT_STR("detail", tt_err_format(&gerr, err, sizeof(err))));
        return EX_CONFIG_;
    }
    if (!(d->metrics = srv_metrics_new())) {
        tt_log(TT_LOG_ERROR, "cannot start", TT_STR("detail", "metrics: out of memory"));
        return EX_SOFTWARE_;
    }
    srv_metrics_add_source(d->metrics, engine_metrics, d);
    srv_refused_init(&d->refused, d->metrics);
    if (start_watch(d, seen) != 0) {
        tt_log(TT_LOG_ERROR, "cannot start", TT_STR("detail", "config watch: out of memory"));
        return EX_SOFTWARE_;
    }
    d->info = (srv_info_metrics_t){.version = opt->version, .commit = opt->commit, .cfg = &d->cfg};
    srv_metrics_add_source(d->metrics, srv_info_metrics_render, &d->info);
    door_options_t dopt = {.allow_uids = d->cfg->server.allow_uids,
                           .n_allow_uids = d->cfg->server.n_allow_uids,
                           .allow_gids = d->cfg->server.allow_gids,
                           .n_allow_gids = d->cfg->server.n_allow_gids,
                           .cfg = &d->cfg};
    if (door_new(&d->door, d->engine, d->metrics, &dopt, &gerr) != 0) {
        tt_log(TT_LOG_ERROR, "cannot start",
               TT_STR("detail", tt_err_format(&gerr, err, sizeof(err))));
        return EX_SOFTWARE_;
    }
    if (d->cfg->server.record.file[0]) {
        char node[256];
        if (d->cfg->share.present && d->cfg->share.node_id[0])
            snprintf(node, sizeof(node), "%s", d->cfg->share.node_id);
        else if (gethostname(node, sizeof(node)) != 0)
            snprintf(node, sizeof(node), "localhost");
        if (rec_open(&d->record, &d->cfg->server.record, node, tt_wall_ns(), &gerr) != 0) {
            tt_log(TT_LOG_ERROR, "cannot start",
                   TT_STR("detail", tt_err_format(&gerr, err, sizeof(err))));
            return EX_CONFIG_;
        }
        door_set_observer(d->door, &(door_observer_t){.asked = record_asked,
                                                      .answered = record_answered,
                                                      .ud = d->record});
        srv_metrics_add_source(d->metrics, record_metrics, d->record);
        tt_log(TT_LOG_INFO, "recording decisions", TT_STR("file", d->cfg->server.record.file),
               TT_BOOL("hashed", d->cfg->server.record.hash_subjects));
    }
    if (d->cfg->redis.present) { /* connects in the background; posture.fail covers the wait */
        rds_options_t ro;
        rds_tls_options_t tls;
        rds_credentials_t cred;
        rds_options_from_config(&d->cfg->redis, &ro, &tls);
        ro.credentials = &cred;
        ro.on_event = redis_event;
        int rc = rds_credentials_from_config(&d->cfg->redis, &cred, &gerr);
        if (rc == 0)
            rc = rds_gov_attach(&d->redis, d->engine, &d->loop, &ro, &gerr);
        rds_credentials_wipe(&cred);
        if (rc != 0) {
            tt_log(TT_LOG_ERROR, "redis", TT_STR("detail", tt_err_format(&gerr, err, sizeof(err))));
            return EX_CONFIG_;
        }
        srv_metrics_add_source(d->metrics, redis_metrics, d);
    }
    /* the counters come back before the socket is served */
    if (srv_state_open(&d->state, &d->loop, d->engine, &d->cfg, d->metrics) != 0) {
        tt_log(TT_LOG_ERROR, "cannot start", TT_STR("detail", "state: out of memory"));
        return EX_SOFTWARE_;
    }

    char path[256];
    if (srv_socket_resolve(d->cfg, opt->socket, path, sizeof(path)) != 0)
        return EX_CONFIG_; /* srv_preflight said why */
    if (d->cfg->share.present && d->cfg->share.node_id[0])
        snprintf(d->node, sizeof(d->node), "%s", d->cfg->share.node_id);
    else if (gethostname(d->node, sizeof(d->node)) != 0)
        snprintf(d->node, sizeof(d->node), "localhost");
    srv_options_t so = {
        .door = d->door,
        .socket_path = path,
        .socket_mode = d->cfg->server.socket_mode,
        .http = d->cfg->server.http,
        .http_decide = d->cfg->server.http_decide,
        .http_subject = d->cfg->server.http_subject,
        .n_http_subject = d->cfg->server.n_http_subject,
        .http_tokens = d->cfg->server.http_tokens,
        .max_connections = (unsigned)d->cfg->server.max_connections,
        .refused = &d->refused,
    };
    if (dispatch_new(&d->dispatch, d->engine, d->door, d->metrics, d->node, path, opt->version) !=
        0) {
        tt_log(TT_LOG_ERROR, "cannot start", TT_STR("detail", "request handler: out of memory"));
        return EX_SOFTWARE_;
    }
    int rc = srv_start(&d->srv, &d->loop, &so, dispatch_handler(d->dispatch), d->metrics, &gerr);
    if (rc != 0) {
        tt_log(TT_LOG_ERROR, "cannot serve",
               TT_STR("detail", tt_err_format(&gerr, err, sizeof(err))));
        return rc == SRV_ENOMEM ? EX_SOFTWARE_ : EX_UNAVAILABLE_;
    }
    chgrp_socket(path, d->cfg->server.socket_group);
    if (d->state)
        dispatch_set_snapshot_age(d->dispatch, srv_state_age_ms, d->state);
    if (d->cfg->server.grpc[0] && start_grpc(d) != 0)
        return EX_UNAVAILABLE_;
    srv_set_ready(d->srv, ready, d);
    d->status = (srv_status_src_t){.engine = d->engine,
                                   .node = d->node,
                                   .version = opt->version,
                                   .config = opt->config_path,
                                   .ready = ready,
                                   .ready_ud = d,
                                   .redis = d->cfg->redis.present ? &d->redis : NULL,
                                   .state = d->state,
                                   .generation = 1,
                                   .applied_ns = tt_wall_ns()};
    status_rates_init(&d->status.rates, 0);
    srv_status_tick(&d->status, d->status.applied_ns); /* the baseline */
    srv_set_status(d->srv, srv_status_page, &d->status);
    srv_set_fleet(d->srv, fleet_http, d);
    if (d->cfg->share.present) {
        tt_err_t merr;
        char detail[sizeof merr.path + sizeof merr.message + 2];
        if (mb_start(&d->mb, &d->loop, &d->cfg->share, &merr) != 0) {
            tt_log(TT_LOG_ERROR, "membership",
                   TT_STR("detail", tt_err_format(&merr, detail, sizeof detail)));
            return EX_CONFIG_;
        }
        /* a restart finds the fleet it left: the members it knew, beside the seeds */
        int known = srv_members_open(&d->known, &d->loop, d->state, d->mb);
        dispatch_set_doubt(d->dispatch, n_doubt, d);
        d->status.members = members_rows;
        d->status.members_ud = d;
        d->status.doubt = n_doubt;
        d->status.doubt_ud = d;
        srv_metrics_add_source(d->metrics, membership_metrics, d);
        gerr = (tt_err_t){0};
        dispatch_set_members(d->dispatch, members_rows, d);
        if (share_node_new(&d->share, &d->cfg->share, tt_wall_ns(), &gerr) == 0)
            share_node_remember(d->share, (uint32_t)known, tt_wall_ns());
        if (!d->share || share_node_attach(d->share, &d->loop, d->mb)) {
            tt_log(TT_LOG_ERROR, "share store",
                   TT_STR("detail",
                          gerr.code ? tt_err_format(&gerr, err, sizeof(err)) : "cannot start"));
            return EX_SOFTWARE_;
        }
        gov_engine_set_share(d->engine, &share_node_ops, d->share);
        gov_engine_set_members(d->engine, live_members, d->mb);
        if (d->cfg->share.division == CFG_DIVISION_DEMAND && start_demand(d) != 0)
            return EX_SOFTWARE_;
    }

    uv_signal_t *sigs[] = {&d->sighup, &d->sigterm, &d->sigint};
    int signums[] = {SIGHUP, SIGTERM, SIGINT};
    for (int i = 0; i < 3; i++) {
        uv_signal_init(&d->loop, sigs[i]);
        sigs[i]->data = d;
        uv_signal_start(sigs[i], on_signal, signums[i]);
    }
    uv_timer_init(&d->loop, &d->tick);
    d->tick.data = d;
    uv_timer_start(&d->tick, on_tick, TICK_MS, TICK_MS);

    char mode[16];
    snprintf(mode, sizeof(mode), "%04o", so.socket_mode ? so.socket_mode : SRV_DEFAULT_MODE);
    tt_log(TT_LOG_INFO, "serving", TT_STR("socket", path), TT_STR("mode", mode),
           TT_STR("http", d->cfg->server.http[0] ? d->cfg->server.http : "off"),
           TT_STR("config", opt->config_path ? opt->config_path : "<default>"),
           TT_UINT("limits", d->cfg->n_limits), TT_UINT("tokens", d->cfg->tokens.n),
           TT_UINT("generation", d->status.generation), TT_STR("version", opt->version));
    char hint[512];
    snprintf(hint, sizeof(hint),
             "tokentriage decide -s %s --subject key=demo --subject team=demo "
             "--tokens 1000",
             path);
    tt_log(TT_LOG_INFO, "try", TT_STR("command", hint));
    const char *acquire_only[16];
    size_t na = gov_fleet_acquire_only(d->engine, acquire_only, 16);
    char ids[512] = "";
    for (size_t i = 0, used = 0; i < na && i < 16; i++) {
        int w = snprintf(ids + used, sizeof(ids) - used, "%s%s", i ? "," : "", acquire_only[i]);
        if (w > 0 && used + (size_t)w < sizeof(ids))
            used += (size_t)w;
    }
    if (na) /* the surprise of issue 31: decide never counts these */
        tt_log(TT_LOG_INFO,
               "reached only by acquire: concurrency limits that decide, /v1/decide and gRPC "
               "never count (tokentriage acquire, the clients' acquire)",
               TT_STR("limits", ids));
    return EX_OK_;
}

int srv_daemon_run(const srv_daemon_options_t *opt)
{
    daemon_t d = {.opt = opt};
    uv_loop_init(&d.loop);
    int rc = start(&d);
    if (rc == EX_OK_)
        uv_run(&d.loop, UV_RUN_DEFAULT);
    else if (d.srv)
        srv_stop(d.srv);
    if (rc != EX_OK_)
        rls_srv_stop(d.grpc);
    if (rc != EX_OK_ && d.mb)
        mb_close(d.mb, NULL, NULL);
    if (rc != EX_OK_ && d.share)
        share_node_close(d.share);
    if (rc != EX_OK_ && d.demand)
        demand_node_close(d.demand);
    if (rc != EX_OK_)
        rds_gov_close(&d.redis);
    if (rc != EX_OK_)
        st_node_stop(d.state, false, 0);
    if (rc != EX_OK_)
        srv_watch_close(d.watch);
    if (rc != EX_OK_)
        srv_members_stop(d.known, false);
    /* let every handle finish closing, then free what they pointed at */
    uv_run(&d.loop, UV_RUN_DEFAULT);
    uv_loop_close(&d.loop);
    srv_free(d.srv);
    dispatch_free(d.dispatch);
    door_free(d.door);
    mb_free(d.mb);
    share_node_free(d.share);
    demand_node_free(d.demand);
    srv_members_free(d.known);
    st_node_free(d.state);
    srv_status_free(&d.status);
    srv_watch_free(d.watch);
    rec_close(d.record);
    free(d.addrs);
    gov_engine_destroy(d.engine);
    srv_metrics_free(d.metrics);
    cfg_free(d.cfg);
    if (rc == EX_OK_)
        tt_log(TT_LOG_INFO, "stopped");
    return rc;
}
