/*
 * status: the page `GET /status` answers (SPEC §9 "What an operator sees"), as a pure core: a
 * view of this replica in, one self-contained HTML document out. No socket, no clock, no engine:
 * the shell (status_node.c) gathers the view, http.c moves the bytes.
 *
 * The page is what a person wants at a glance: who this replica is and which configuration it
 * serves (its generation, when applied), the members it sees and their states, N, every
 * rate-class limit with its store, share, bounds and its recent admissions and denials drawn
 * as small charts, the health of its stores (Redis, the state snapshot). It has no script and
 * fetches nothing: the charts are inline SVG drawn here, the style is one inline block whose
 * hash the Content-Security-Policy names (STATUS_CSP forbids everything else), and a
 * <meta http-equiv="refresh"> reloads it every few seconds.
 *
 * Everything from outside (member ids and addresses come from gossip, limit ids from the
 * config) is escaped for HTML text and attributes: &, <, >, ", ' as entities, control bytes and
 * bytes that are not UTF-8 as U+FFFD, so no id can end an element or an attribute.
 *
 * The charts come from a ring of recent per-limit counts (status_rates_t): every
 * STATUS_INTERVAL_NS the shell hands it the engine's cumulative per-limit outcomes, and it keeps
 * the differences of the last STATUS_SLOTS intervals, by limit id (a limit a reload keeps keeps
 * its history). Bounded: at most GOV_LIMITS_MAX series of STATUS_SLOTS slots.
 */
#ifndef TT_SERVER_STATUS_H
#define TT_SERVER_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "proto.h"

#define STATUS_SLOTS 60                              /* intervals a chart draws */
#define STATUS_INTERVAL_NS (INT64_C(5) * 1000000000) /* one slot: 5 s, so 5 minutes a chart */
#define STATUS_REFRESH_S 5                           /* the page reloads itself this often */

/* The response headers /status is served with: nothing may be fetched or run, but the one
 * style block (by its hash), no framing, no referrer, never cached. Whole header lines. */
extern const char STATUS_HEADERS[];

/* One limit's recent history: admitted and denied decisions per interval, oldest first in
 * ring order (see status_series_at). */
typedef struct status_series {
    char id[CFG_ID_MAX + 1];
    uint64_t last_admit, last_deny; /* the cumulative counts at the last sample */
    uint32_t admit[STATUS_SLOTS], deny[STATUS_SLOTS];
    uint32_t valid; /* slots with data, the newest ones (a new limit has none) */
    bool seen;      /* in the latest sample (a series not seen is dropped at the next) */
} status_series_t;

typedef struct status_rates {
    status_series_t *series; /* owned; n in use */
    size_t n, cap;
    size_t head;     /* the slot the next sample writes */
    int64_t last_ns; /* when the last sample was taken; 0: none yet */
    int64_t interval_ns;
} status_rates_t;

/* An empty ring sampling every interval_ns (0: STATUS_INTERVAL_NS). */
void status_rates_init(status_rates_t *r, int64_t interval_ns);
void status_rates_free(status_rates_t *r);

/* True when a sample is due at `now`. */
bool status_rates_due(const status_rates_t *r, int64_t now);

/* Takes one sample: the engine's per-limit metrics (gov_engine_limit_metrics, config order) at
 * `now`. A limit's admissions are its admit, soft_deny and fail_open outcomes, its denials its
 * deny, unfittable and fail_closed ones. The first sample of a limit only sets its baseline;
 * a limit gone from the config is forgotten. Returns 0 or -1 (out of memory: nothing changed). */
int status_rates_sample(status_rates_t *r, const gov_limit_metrics_t *lm, size_t n, int64_t now);

/* The series of limit `id`, or NULL. */
const status_series_t *status_rates_find(const status_rates_t *r, const char *id);

/* The i-th slot of s from the oldest (0) to the newest (STATUS_SLOTS - 1). */
void status_series_at(const status_rates_t *r, const status_series_t *s, size_t i, uint32_t *admit,
                      uint32_t *deny);

/* A store's health as the page shows it. */
typedef enum status_health {
    STATUS_NONE = 0, /* not configured */
    STATUS_UP,
    STATUS_DOWN,
} status_health_t;

/* Everything the page shows; the shell fills it, borrowed for the call. */
typedef struct status_view {
    const char *node;    /* this replica's node id */
    const char *version; /* tokentriage's version and commit */
    int64_t now;         /* wall clock, ns */
    bool ready;          /* /readyz's answer, with why when not */
    const char *not_ready;
    /* the configuration: how many have been applied since the start (1: the one it started
     * with), when the last was, its source */
    uint64_t generation;
    int64_t applied_ns;
    const char *config;
    uint64_t reloads_refused;
    /* membership (membership false: this replica runs alone) */
    bool membership;
    int64_t live; /* alive + suspect, self included */
    /* members a restart remembered and has not heard from, counted in N for at most
     * unheard_for_ms more: N = live + unheard (their rows say "unheard") */
    int64_t unheard, unheard_for_ms;
    const char *n_in_doubt;
    const proto_member_t *members;
    size_t n_members;
    /* the rate-class limits (gov_fleet), their recent rates */
    const gov_fleet_entry_t *limits;
    size_t n_limits;
    const status_rates_t *rates;
    /* stores */
    status_health_t redis;
    const char *redis_detail; /* what it says when down */
    int64_t snapshot_age_ms;  /* -1: no snapshot (state off, or none yet) */
    bool state_dir;           /* server.state_dir is set */
} status_view_t;

/* Appends the page to out. Returns 0 or -1 (out->failed). */
int status_render(const status_view_t *v, tt_buf_t *out);

/* Appends s[0, n) escaped for HTML text and attribute values (see above). */
void status_html_escape(tt_buf_t *out, const char *s, size_t n);

#endif
