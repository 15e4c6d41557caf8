/*
 * engine: the decision engine (prefix gov_). A pure core: no I/O, no clock, no threads. Every
 * call takes `now` (int64 ns since the Unix epoch) and the caller's buffers; the server's libuv
 * shell moves bytes and fires the tick timer.
 *
 * What it holds: the armed limits of one config (swapped by gov_engine_reload), the counter
 * table (one int64 per (limit identity, subject id)), the concurrency leases, and the metrics.
 *
 * Ownership: the engine copies the limits it is given; subjects are borrowed for the duration
 * of a call (the engine copies what an asynchronous decision needs); results are written into
 * the caller's gov_result_t, which holds everything by value (no pointer into the engine
 * except `code`, which points at a static string), so it may be copied or kept freely.
 *
 * Threads: none. One engine belongs to one thread (the server's event loop); nothing in it
 * locks.
 *
 * Return values: 0 (result ready in *out), GOV_PENDING (a redis-backed limit is involved; the
 * completion callback will be called later with the same `out`), or a negative GOV_E* code
 * (out->status carries it too and out->err says what was wrong: the code, the path of the field,
 * a message; tt_err_format renders "path: message"). Bad input
 * changes nothing.
 */
#ifndef TT_ENGINE_H
#define TT_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "limit.h"
#include "ratehdr.h"
#include "tt_err.h"

#define GOV_SUBJECT_MAX 16            /* (level, id) pairs in one subject */
#define GOV_ID_MAX 256                /* bytes in one subject id */
#define GOV_LIMITS_MAX CFG_LIMITS_MAX /* limits in one config: validate refuses more */
#define GOV_APPLY_MAX 128             /* limits that apply to one request */
#define GOV_SOFT_MAX 16               /* soft-denied ids reported in one result (more: truncated) */
#define GOV_HEADERS_MAX PROTO_RATE_HEADERS_MAX /* disclosure headers in one result */
#define GOV_HEADER_VALUE_MAX PROTO_HEADER_VALUE_MAX
#define GOV_TOKENS_MAX (INT64_C(1) << 40) /* tokens, reserved, actual: 0 ..= 2^40 */
#define GOV_NO_TOKENS INT64_C(-1)         /* `tokens` absent from the request */

/* gov_decide/gov_settle will answer through the completion callback. Positive: not an error. */
#define GOV_PENDING 1

/* The engine's codes: rows of the one error table (common/tt_err.h), which names them. */
enum {
    GOV_EINVAL = TT_ERR_INVAL,             /* a bad argument (the message names it) */
    GOV_ESUBJECT = TT_ERR_SUBJECT,         /* subject malformed: too many levels, id too long */
    GOV_ETOKENS = TT_ERR_TOKENS,           /* a tpm limit applies and `tokens` is absent */
    GOV_ERANGE = TT_ERR_RANGE,             /* tokens/reserved/actual negative or above 2^40 */
    GOV_ENOTPM = TT_ERR_NOTPM,             /* settle: no tpm limit applies to the subject */
    GOV_ENOLEASE = TT_ERR_NOLEASE,         /* release: no such lease of this owner */
    GOV_ENOMEM = TT_ERR_NOMEM,             /* allocation failed */
    GOV_ELIMITS = TT_ERR_LIMITS,           /* config: too many limits, or a limit not armed */
    GOV_ELEASES = TT_ERR_LEASES,           /* acquire: the lease cap is reached */
    GOV_ERESERVATION = TT_ERR_RESERVATION, /* settle: no such reservation */
};

typedef struct gov_engine gov_engine_t;

/* One (level, id) pair of a subject, borrowed: pointer + length, not NUL-terminated. */
typedef struct gov_pair {
    const char *level;
    size_t level_len;
    const char *id;
    size_t id_len;
} gov_pair_t;

typedef struct gov_subject {
    gov_pair_t pairs[GOV_SUBJECT_MAX];
    size_t n;
} gov_subject_t;

typedef enum gov_verdict {
    GOV_ADMIT = 0,
    GOV_DENY,
    GOV_UNFITTABLE,
} gov_verdict_t;

/* One rendered header: a static name ("Ratelimit-Policy") and its value. */
typedef proto_rate_header_t gov_header_t;

/* The answer to any request. Written by value; `code` points at a static string or is NULL. */
typedef struct gov_result {
    int status;   /* 0, or the negative GOV_E* code (then only `err` is meaningful) */
    tt_err_t err; /* when status < 0: err.code == status, the field's path, what was wrong; not
                     set otherwise */
    bool admit;
    gov_verdict_t verdict;
    char limit[CFG_ID_MAX + 1]; /* the denying limit (largest retry) or, on admit, the tightest;
                                   "" when no limit applied */
    int64_t remaining;          /* of `limit`; -1 when no limit applied */
    int64_t retry_after_s;
    int64_t reset_after_s;
    /* "quota_cost_unfittable" on an unfittable verdict: do not retry the same cost;
     * "unavailable" on a deny that only posture.fail closed made (`unavailable` below): a store
     * could not answer; else NULL */
    const char *code;
    uint32_t n_soft_denied;
    bool soft_truncated; /* more than GOV_SOFT_MAX soft denials: the list is cut */
    char soft_denied[GOV_SOFT_MAX][CFG_ID_MAX + 1];
    proto_disclosed_t disclosed; /* what the headers say, as numbers (wire/ratehdr.h) */
    uint32_t n_headers;          /* the headers rendered from `disclosed`: only once
                                    gov_result_render has been called, else 0 */
    gov_header_t headers[GOV_HEADERS_MAX];
    bool unavailable;     /* a deny that only posture.fail closed made: every limit that denied
                             did so because its store could not answer */
    int64_t settled;      /* gov_settle, gov_charge: the number of tpm limits corrected */
    bool already_settled; /* gov_settle: the reservation was settled before; nothing changed */
    uint64_t lease;       /* gov_acquire: the lease id, on admit (never 0) */
    uint64_t reservation; /* gov_decide: on an admitted decision that charged a tpm limit, the id
                             to settle it with (opaque, not guessable); 0 when none */
    /* The limit `limit` names, as a status reports it (Envoy's current_limit): its amount per
     * period (a descriptor's own limit: that one). 0 and 0 when no limit is named. */
    int64_t limit_amount, limit_period_ns;
    /* gov_decide_domain, on a domain with rules: what the ask met (GOV_MET_*), the rule's flags
     * (CFG_RULE_QUOTA, CFG_RULE_DETAILED) and its name ("" when unnamed). */
    uint8_t met;
    uint8_t rule_flags;
    char rule_name[CFG_RULE_NAME_MAX + 1];
} gov_result_t;

/* What a descriptor of a domain with rules met (gov_result_t.met). */
enum {
    GOV_MET_NONE = 0,  /* no rule (or a domain without rules: then the levels decided) */
    GOV_MET_LIMIT,     /* a rule with a limit: verdict, remaining and reset are its own */
    GOV_MET_UNLIMITED, /* a rule with unlimited: true: OK, nothing counted */
    GOV_MET_ALLOW,     /* a rule without a limit (allow: true, envoy's whitelisted descriptor) */
    GOV_MET_REPLACED,  /* a rule another descriptor's rule replaces: switched off, not counted */
    GOV_MET_OVERRIDE,  /* the descriptor's own limit (RateLimitDescriptor.limit) */
};

/* Renders out->headers from out->disclosed (nothing for an error). The engine itself only
 * fills the numbers: a caller that hands out header strings renders them once, here. */
void gov_result_render(gov_result_t *r);

/*
 * Who a decision or a settle is for, as the server's door established it (SPEC §9; the door
 * checks that the caller may spend at all, the engine only keeps reservations apart). NULL where
 * a gov_client_t is asked for is the anonymous client {0, 0}.
 */
typedef struct gov_client {
    uint64_t account; /* whose share of the reservation pool a reservation takes */
    uint64_t owner;   /* who may settle it: a settle of another owner is told the id is unknown */
} gov_client_t;

/* Called once for every GOV_PENDING answer, with the `out` the request was given. */
typedef void (*gov_done_fn)(gov_result_t *res, void *ctx);

typedef struct gov_options {
    size_t max_counters;        /* cap on counters held; 0 = GOV_DEFAULT_MAX_COUNTERS */
    size_t max_leases;          /* cap on concurrency leases; 0 = GOV_DEFAULT_MAX_LEASES */
    size_t initial_counters;    /* pre-size the table (avoids growth pauses); 0 = small */
    uint64_t hash_seed[2];      /* random per process (the server draws it): keeps clients from
                                   aiming collisions at the table, and keys the lease and
                                   reservation ids */
    size_t max_reservations;    /* reservations held at once; 0 = GOV_DEFAULT_MAX_RESERVATIONS */
    size_t reservation_bytes;   /* their records' memory; 0 = GOV_DEFAULT_RESERVATION_BYTES */
    int64_t reservation_ttl_ns; /* how long a reservation may be settled; 0 = the default */
} gov_options_t;

#define GOV_DEFAULT_MAX_COUNTERS ((size_t)4 << 20)
#define GOV_DEFAULT_MAX_LEASES ((size_t)1 << 20)
#define GOV_DEFAULT_MAX_RESERVATIONS ((size_t)1 << 17)
#define GOV_DEFAULT_RESERVATION_BYTES ((size_t)16 << 20)
#define GOV_DEFAULT_RESERVATION_TTL_NS (INT64_C(900) * 1000000000) /* 15 minutes */

/*
 * Builds an engine over `n` armed limits (cfg_limit_arm done on each; copied). `disclose` is
 * governance.keys.disclose_limits. Returns 0, or a negative code (GOV_ELIMITS, GOV_ENOMEM)
 * described in *err (path: the limit, "governance.limits[i]").
 */
int gov_engine_create(gov_engine_t **out, const gov_options_t *opt, const cfg_limit_t *limits,
                      size_t n, bool disclose, tt_err_t *err);

/* The same from an armed compiled config (cfg_arm done): its limits, disclose_limits and
 * server.max_counters (used when opt->max_counters is 0). The engine keeps no pointer into it. */
int gov_engine_create_config(gov_engine_t **out, const gov_options_t *opt, const cfg_config_t *cfg,
                             tt_err_t *err);

/* Frees everything. Every GOV_PENDING request must have completed (the redis store completes
 * its outstanding operations as unavailable when it shuts down). */
void gov_engine_destroy(gov_engine_t *e);

typedef enum gov_reload_action {
    GOV_RELOAD_KEPT = 0, /* same identity: counters kept */
    GOV_RELOAD_RESET,    /* same id, new identity: counters dropped */
    GOV_RELOAD_ADDED,
    GOV_RELOAD_REMOVED,
} gov_reload_action_t;

const char *gov_reload_action_name(gov_reload_action_t a);

/* Called once per limit of the old and the new config, new ones first in config order. */
typedef void (*gov_reload_fn)(void *ctx, const char *limit_id, gov_reload_action_t action);

/*
 * Reload in two steps, as nginx's cycle, so that the engine can be one part of a reload that
 * other parts may still refuse. gov_engine_reload_prepare builds the next generation of armed
 * limits aside and binds it to the counter table (fresh identities reserved for the limits that
 * changed, seen by no decision yet): it may fail, and then nothing changed. Exactly one of the
 * two ends follows, with nothing else run on the engine in between: gov_engine_reload_commit
 * swaps the generation in (it cannot fail; `report` is told each limit's fate) and
 * gov_engine_reload_abort gives the reservation back. Both free *r. Counters whose identity is
 * unchanged are kept; the others are dropped (reclaimed incrementally). Asynchronous decisions
 * in flight finish against the generation they started with.
 */
typedef struct gov_reload gov_reload_t;
int gov_engine_reload_prepare(gov_engine_t *e, const cfg_limit_t *limits, size_t n, bool disclose,
                              gov_reload_t **r, tt_err_t *err);
void gov_engine_reload_commit(gov_engine_t *e, gov_reload_t *r, gov_reload_fn report, void *ctx);
void gov_engine_reload_abort(gov_engine_t *e, gov_reload_t *r);

/* Prepare and commit at once: all or nothing, on error nothing changed. */
int gov_engine_reload(gov_engine_t *e, const cfg_limit_t *limits, size_t n, bool disclose,
                      gov_reload_fn report, void *ctx, tt_err_t *err);

/*
 * One decision for `who`. rpm limits present cost 1; tpm limits present `tokens` (GOV_NO_TOKENS
 * when the request had none: an error if a tpm limit applies). `done`/`ctx` are used only on
 * GOV_PENDING. An admitted decision that charged a tpm limit opens a reservation
 * (out->reservation), `who`'s to settle, unless memory runs out, in which case its estimate
 * simply stays charged.
 */
int gov_decide(gov_engine_t *e, const gov_client_t *who, const gov_subject_t *s, int64_t tokens,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx);

/* ---- several asks decided as one (the gRPC front door's descriptors) -------------------- */

#define GOV_ASKS_MAX 32 /* asks in one gov_decide_asks */

/* One ask: a subject (its levels in the caller's order) and the cost every rate limit that
 * applies to it is presented, rpm and tpm alike (0 ..= 2^40; 0 is a check that consumes
 * nothing). */
typedef struct gov_ask {
    gov_subject_t subject;
    int64_t cost;
    /* The descriptor's own limit (Envoy's RateLimitDescriptor.limit), read by gov_decide_domain
     * on a domain with rules: its unit's proto number (cfg_units; 0: none) and requests per
     * unit. It is counted per domain and descriptor in the rls_override_<unit> counters. */
    int override_unit;
    int64_t override_amount;
} gov_ask_t;

enum {
    /* Apply to an ask only the limits attached to exactly its levels, in its order (Envoy's
     * descriptor matching): `level: team` answers [team], `levels: [a, b]` answers [a, b];
     * global limits never. Without it an ask applies what gov_decide would. */
    GOV_ASK_EXACT = 1,
    /* Counted whatever the verdicts: everything is charged, a denied limit's cost as settle
     * charges an overrun (gcra/token_bucket, envoy_window; the catalogue's windows keep what
     * they hold). The verdicts still report every denial. Used for counts taken after the fact
     * (server.grpc_charge_domains) and for envoy ratelimit's default, which increments every
     * matched descriptor even when one is over (grpc_stop_cache_key_increment_when_overlimit:
     * false). */
    GOV_ASK_CHARGE = 2,
};

/*
 * Decides `n` asks (1 ..= GOV_ASKS_MAX) as one request, two-phase across all of them: only when
 * no ask is denied by a hard limit is anything kept, so a denial anywhere consumes nothing
 * anywhere (GOV_ASK_CHARGE aside). A counter two asks share is stepped by both in order.
 * results[i] answers asks[i] as gov_decide would (verdict, limit, remaining, reset, headers,
 * each observed on the state kept); an ask whose own limits admit keeps GOV_ADMIT even when
 * another ask's denial kept nothing. Returns 0, or a negative code with the error in the
 * result of the ask it concerns (results[0] for the request as a whole); then nothing changed.
 * Redis-backed limits are refused (they answer asynchronously, one decision at a time).
 */
int gov_decide_asks(gov_engine_t *e, const gov_ask_t *asks, size_t n, unsigned flags, int64_t now,
                    gov_result_t *results);

/*
 * The descriptors of `domain` decided as one request (the gRPC door, SPEC §12). On a domain the
 * live configuration has rules for, each ask meets at most one rule through the matching tree
 * (engine/match.h; its subject's pairs are the descriptor's entries, key and value, in order),
 * or its own limit (override_unit) in the rls_override_<unit> counter of its domain and entries.
 * A rule's `replaces` switches off, for this request, the rules of the other asks named so
 * (results[i].met GOV_MET_REPLACED, nothing counted). Then two-phase as gov_decide_asks: nothing
 * is kept when a hard rule is over, or when every quota_mode rule met is over (quota rules alone
 * do not block); GOV_ASK_CHARGE counts everything, over or not (envoy ratelimit's default). A soft
 * (shadow) rule never blocks; its status is its own (admitted, remaining 0 and its reset when
 * over). results[i] says what the ask met (met, rule_flags, rule_name, limit_amount,
 * limit_period_ns). *overall (when not NULL) is the request's verdict: deny when it was refused (a
 * hard rule over, or every quota rule), else admit. On a domain without rules: gov_decide_asks with
 * GOV_ASK_EXACT (and `flags`), met GOV_MET_NONE, *overall the first verdict that is not admit.
 *
 * Rules of store redis: their steps go to Redis at once, all in the same loop turn (the store
 * pipelines what shares a node), and the call answers GOV_PENDING; done(results, ctx) runs when
 * the last answer is in, with results and *overall written then (both must stay valid until
 * then), the local rules stepped at that time. Two-phase across stores: when the request is
 * refused, what Redis admitted is given back (a settle that refunds it: gcra, envoy_window; the
 * catalogue's windows keep it, best effort); with GOV_ASK_CHARGE what Redis refused is charged.
 * Redis down or slow: posture.fail, as for any decision. With done NULL such a request is
 * refused (GOV_EINVAL in results[0]) and nothing is counted.
 */
int gov_decide_domain(gov_engine_t *e, const char *domain, size_t domain_len, const gov_ask_t *asks,
                      size_t n, unsigned flags, int64_t now, gov_result_t *results,
                      gov_verdict_t *overall, gov_done_fn done, void *ctx);

/*
 * Settles a reservation (SPEC section 5) for `who`: every tpm limit the decision charged
 * (admitted and counted; the same counters, as long as a reload kept their limits) is corrected
 * by (actual - reserved) x T: a refund never below `now`, an overrun always charged. Once: a
 * repeat answers 0 with out->already_settled and changes nothing. An id never issued, expired
 * (not settled within the reservation ttl: it stays charged), evicted (the pool was full) or
 * open for another owner than who->owner is GOV_ERESERVATION and changes nothing. out->settled =
 * limits corrected.
 */
int gov_settle(gov_engine_t *e, const gov_client_t *who, uint64_t reservation, int64_t actual,
               int64_t now, gov_result_t *out, gov_done_fn done, void *ctx);

/*
 * Charges `tokens` counted after the fact, with no reservation, to every tpm limit that applies
 * to the subject: the TAT moves forward by tokens x T, never back. GOV_ENOTPM when no tpm limit
 * applies. out->settled = limits charged.
 */
int gov_charge(gov_engine_t *e, const gov_subject_t *s, int64_t tokens, int64_t now,
               gov_result_t *out, gov_done_fn done, void *ctx);

/*
 * Takes one slot of every concurrency limit that applies, all or none. On admit out->lease is
 * the lease id (also when no concurrency limit applies: the lease then holds nothing): opaque,
 * never 0, and not guessable (a keyed permutation of the pool slot, see engine/ticket.h).
 * `owner` tags the lease with the connection: only that owner may release it, and
 * gov_release_owner ends them all when the connection closes.
 */
int gov_acquire(gov_engine_t *e, const gov_subject_t *s, uint64_t owner, int64_t now,
                gov_result_t *out);

/* Ends a lease of `owner`. Returns 0, or GOV_ENOLEASE when `owner` holds no such lease (never
 * issued, already released, or another owner's: the answer does not say which). */
int gov_release(gov_engine_t *e, uint64_t owner, uint64_t lease);

/* Ends every lease of `owner` (a connection that closed). Returns how many. */
size_t gov_release_owner(gov_engine_t *e, uint64_t owner);

/* Housekeeping the server calls from a timer (every 100 ms or so): a bounded slice of counter
 * reclamation. Never a full sweep. */
void gov_engine_tick(gov_engine_t *e, int64_t now);

/* True when a limit of the live configuration attaches to `level` (in any of its levels). The
 * HTTP front door refuses query parameters that name no such level: a misspelt level would
 * otherwise escape every limit. */
bool gov_level_known(const gov_engine_t *e, const char *level, size_t len);

/* ---- fleet ------------------------------------------------------------------------------- */

typedef struct gov_fleet_entry {
    char id[CFG_ID_MAX + 1];
    cfg_type_t type;
    cfg_store_t store;
    ra_algorithm_t algorithm;
    int64_t amount, period_ns, burst;
    int64_t n;               /* replicas counted (local: the members hook, 1 without one) */
    int64_t local_share;     /* units per period this replica admits (share: amount / N) */
    int64_t sustained_bound; /* units per period the fleet may admit at most */
    int64_t burst_bound;     /* the one-time allowance the fleet may admit at most */
    bool fallback;           /* redis: the local fallback limiter is deciding */
    const char *state; /* share: "unarmed" | "armed" | "held"; redis: "armed" | "down" (the store
                          cannot decide: each limit follows its posture); local: "armed" */
    /* share only (filled by the share store): */
    int64_t divisor_min, divisor_max, detect_within_s;
    bool converged;
    /* share in demand mode only (SPEC §6b; filled by the demand store): */
    bool demand;
    int64_t keys_leased, keys_owned; /* keys holding a lease here; keys owned here */
    int64_t largest_lease_age_ms;    /* the oldest live lease here since its grant; 0: none */
    int64_t largest_lease;           /* units per period of the largest live lease here; 0: none */
    bool moving; /* within one lease lifetime of an ownership change (bounds doubled) */
} gov_fleet_entry_t;

/* Fills up to `cap` entries, one per rate-class limit in config order. Returns how many the
 * config has (may exceed cap). */
size_t gov_fleet(gov_engine_t *e, int64_t now, gov_fleet_entry_t *out, size_t cap);

/* The limits only acquire reaches (type concurrency, posture on: decide and the HTTP and gRPC
 * doors never count them), in config order: up to `cap` ids (valid until the next reload).
 * Returns how many the config has. fleet lists them; serve logs them at start. */
size_t gov_fleet_acquire_only(const gov_engine_t *e, const char **ids, size_t cap);

/* ---- metrics ----------------------------------------------------------------------------- */

/* What happened to one limit in a decision, counted per limit. */
typedef enum gov_outcome {
    GOV_OUT_ADMIT = 0,
    GOV_OUT_DENY,
    GOV_OUT_UNFITTABLE,
    GOV_OUT_SOFT_DENY,   /* enforce soft: would have denied */
    GOV_OUT_FAIL_OPEN,   /* store could not answer; posture.fail open let it through */
    GOV_OUT_FAIL_CLOSED, /* store could not answer; posture.fail closed denied */
    GOV_OUT_COUNT,
} gov_outcome_t;

const char *gov_outcome_name(gov_outcome_t o);

typedef struct gov_limit_metrics {
    char id[CFG_ID_MAX + 1];
    cfg_type_t type;
    cfg_store_t store;
    uint64_t outcomes[GOV_OUT_COUNT];
    uint64_t store_errors; /* the store could not answer (cap reached, redis unavailable, share
                              unarmed) */
    uint64_t counters;     /* counters held for this limit now */
} gov_limit_metrics_t;

typedef struct gov_metrics {
    uint64_t decisions[3]; /* by gov_verdict_t */
    uint64_t settles, charges, acquires, releases;
    uint64_t counters;     /* held now */
    uint64_t counters_max; /* the cap */
    uint64_t counters_reclaimed;
    uint64_t cap_hits; /* a new counter was refused at the cap */
    uint64_t leases;   /* held now */
    uint64_t store_errors;
    uint64_t reloads;
    uint64_t table_bytes;          /* memory of the counter table (slots + key arena) */
    uint64_t pending;              /* asynchronous (redis) requests in flight */
    uint64_t reservations;         /* open (not settled, not expired) now */
    uint64_t reservations_expired; /* not settled in time: stayed charged */
    uint64_t reservations_evicted; /* ended early to make room (the pool was full): charged */
} gov_metrics_t;

void gov_engine_metrics(gov_engine_t *e, gov_metrics_t *out);

/* The rule language's detailed series (detailed_metric, value_to_metric): per rule and the key
 * envoy ratelimit names its stats with (domain.key_value...), at most GOV_DETAIL_MAX of them for
 * the process's life. */
#define GOV_DETAIL_MAX 2048
#define GOV_DETAIL_KEY_MAX 256 /* bytes of a series' key, cut there */

typedef struct gov_detail {
    const char *limit; /* the rule's limit id */
    const char *key;   /* its stats key, not NUL-terminated */
    size_t key_len;
    uint64_t outcomes[GOV_OUT_COUNT];
} gov_detail_t;

typedef void (*gov_detail_fn)(void *ctx, const gov_detail_t *d);

/* Calls fn for every detailed series (borrowed for the call); returns how many counts found no
 * room for their series. */
uint64_t gov_engine_each_detail(gov_engine_t *e, gov_detail_fn fn, void *ctx);

/* Fills up to `cap` entries in config order. Returns how many limits the config has. Counts
 * of a limit kept across a reload carry over. */
size_t gov_engine_limit_metrics(gov_engine_t *e, gov_limit_metrics_t *out, size_t cap);

/* ---- state across restarts (SPEC §11; the snapshot itself is state/) ------------------- */

/* The limits whose counters a snapshot keeps: rate-class, store local or share. Redis limits
 * keep their state in Redis; concurrency leases die with their connections. */
bool gov_limit_persists(const cfg_limit_t *l);

typedef void (*gov_counter_fn)(void *ctx, size_t limit, const char *key, size_t key_len,
                               int64_t state);

/* Calls fn for every counter of a persisting limit of the armed config that still holds
 * information at `now`; `limit` is the limit's index in config order, `key` is borrowed for the
 * call. Reads only and allocates nothing, so it may run in a forked child. */
void gov_engine_each_counter(gov_engine_t *e, int64_t now, gov_counter_fn fn, void *ctx);

/* The counter table's big memory (slot arrays and full key blocks), most of what a snapshot's
 * fork copies the page tables of: up to `cap` ranges, returns how many it filled. The addresses
 * are read now; the next operation may unmap some of them. */
size_t gov_engine_regions(const gov_engine_t *e, void **addr, size_t *len, size_t cap);

/* Puts one counter back (overwriting one already held). `limit` indexes the armed config.
 * Returns 0 when restored, 1 when the state is idle at `now` (nothing to keep), GOV_ERANGE for a
 * state the limit's algorithm cannot reach (ra_state_reachable: not put back), GOV_EINVAL for
 * a limit that does not persist, GOV_ESUBJECT for a key too long, GOV_ELIMITS at the counter
 * cap, GOV_ENOMEM. */
int gov_engine_restore(gov_engine_t *e, size_t limit, const char *key, size_t key_len,
                       int64_t state, int64_t now);
/* The same for a counter of a snapshot taken at written_ns (wall clock): a share counter
 * resumes the debt it had then (its TAT as far ahead of now as it was of written_ns), since its
 * peers spent its share of the downtime; a local one's downtime counts as elapsed (SPEC §11).
 * gov_engine_restore is this with written_ns = now. */
int gov_engine_restore_at(gov_engine_t *e, size_t limit, const char *key, size_t key_len,
                          int64_t state, int64_t written_ns, int64_t now);

/* ---- errors ------------------------------------------------------------------------------ */

/* A short snake_case code for the wire ("bad_subject", "tokens_required", ...): "ok" for 0,
 * else the code's name in the one error table (tt_err_name). */
const char *gov_strcode(int err);
const char *gov_verdict_name(gov_verdict_t v);

#endif
