/*
 * The engine's internals, shared by its files (not installed; the API is engine.h and store.h).
 * Cross-file helpers carry the gov__ prefix (libuv's uv__), file-local ones none.
 *
 * The files, one seam each, each calling only files below it in this list (none calls back up;
 * scripts/check_includes.py reads the calls from the objects and fails on a circle):
 *   engine.c   create, destroy, hooks, tick, names, metrics
 *   domain.c   a domain's descriptors decided by the rule language (gov_decide_domain)
 *   asks.c     several asks decided as one (the gRPC front door)
 *   acquire.c  concurrency leases
 *   decide.c   the two-phase decision
 *   settle.c   reservations, settle and charge
 *   pending.c  requests waiting on the redis store
 *   gen.c      configuration generations: building, binding to counter identities, reload
 *   match.c    the rule language's matching tree, built per generation
 *   probe.c    subjects to applicable limits, the limiter in force, the local counter
 *   fleet.c    the fleet bounds
 *   disclose.c what a decision discloses, as numbers; a limiter's depth
 *   detail.c   the rule language's detailed series
 *   persist.c  counters read out for a snapshot and put back at start (state/ does the files)
 *   lease.c    the lease pool; resv.c the reservation pool
 *   ticket.c   sealed lease and reservation ids
 *   table.c    the counter table
 *   result.c   a result's start and its failure (gov__result_init, gov__fail)
 */
#ifndef TT_ENGINE_INT_H
#define TT_ENGINE_INT_H

#include "disclose.h"
#include "engine.h"
#include "lease.h"
#include "match.h"
#include "resv.h"
#include "store.h"
#include "table.h"

#define RECLAIM_PER_OP 4    /* slots examined after every operation (decide: per counter added) */
#define RECLAIM_AT_CAP 1024 /* slots examined before an operation at the cap */
/* A combination's counter key: each id as a 2-byte big-endian length and its bytes. */
#define COMBO_KEY_MAX (CFG_ATTACH_LEVELS_MAX * (2 + GOV_ID_MAX))
#define GOV_KEY_DIGEST 32 /* bytes of the BLAKE2b that ends a folded counter key */
_Static_assert(GOV_ID_MAX == GOV_KEY_MAX, "a subject id fits the counter table as it is");

#define TYPE_BIT(t) (1u << (t))
#define RATE_TYPES (TYPE_BIT(CFG_TYPE_RPM) | TYPE_BIT(CFG_TYPE_TPM))

/*
 * A counter identity as something that outlives a call must find it again: the table index
 * and the generation that index had when the configuration was bound. Indices are reused once
 * a reload dropped an identity and its counters were reclaimed, so the index alone may name
 * another limit by the time a deferred completion (a redis answer, a reservation, a lease)
 * comes back; the generation tells. index -1: the limit holds no counters (ledger types).
 */
typedef struct gov_handle {
    int index;
    uint32_t gen;
} gov_handle_t;

typedef struct gov_limit {
    cfg_limit_t cfg;
    gov_handle_t ident; /* its counter identity in the table */
    uint8_t n_levels;   /* 0: global; 1: attach.level; more: an attach.levels combination */
    uint16_t levels[CFG_ATTACH_LEVELS_MAX]; /* indexes into gov_set_t.levels, in order */
    bool fallback; /* redis: the last answer was "unavailable" and the fallback decided */
    bool rule;     /* a rule of the rule language: matched by the tree, never by levels */
    /* a rule: the entries whose value keys its counter (bit i: entry i; a key-only entry, or a
     * glob whose values do not share one counter) */
    uint16_t key_mask;
    uint64_t outcomes[GOV_OUT_COUNT];
    uint64_t store_errors;
} gov_limit_t;

typedef struct gov_level {
    char name[CFG_LEVEL_MAX + 1];
    size_t len;
} gov_level_t;

/* One configuration generation: its limits and the distinct levels they attach to. Reference
 * counted: the engine holds the live one, every pending request the one it started under. */
typedef struct gov_set {
    unsigned refs;
    bool disclose;
    size_t n, n_levels;
    gov_level_t levels[GOV_LIMITS_MAX * CFG_ATTACH_LEVELS_MAX];
    /* GOV_APPLY_MAX x COMBO_KEY_MAX when a limit counts a combination: the keys of one call's
     * combinations (calls run one at a time, each building its keys before it steps) */
    char *combo_keys;
    /* A subject of one level (the usual request) meets the global limits, index[0, n_global),
     * and those of its level k, index[n_global + level_at[k], n_global + level_at[k + 1]), each
     * in config order: resolved once per generation (gov__set_index), not per request. */
    uint16_t *index;
    size_t n_global;
    uint32_t *level_at;
    gov_rules_t *rules; /* the rule language's tree (match.h); NULL: no rule */
    gov_limit_t limits[];
} gov_set_t;

/* The detailed series (detail.c): GOV_DETAIL_MAX in a table of twice as many slots. */
#define GOV_DETAIL_SLOTS (2 * GOV_DETAIL_MAX)
typedef struct gov_details gov_details_t;

struct gov_engine {
    gov_set_t *set;
    gov_details_t *details; /* NULL until a rule counts its first detailed series */
    gov_table_t table;
    gov_leases_t leases;
    gov_resv_t resv;
    gov_metrics_t m;
    size_t pending; /* asynchronous requests in flight */
    gov_share_ops_t share;
    void *share_ctx;
    gov_redis_ops_t redis;
    void *redis_ctx;
    gov_members_fn members;
    void *members_ctx;
};

/* One applicable limit in one request. */
typedef struct probe {
    gov_limit_t *l;
    int pair; /* the subject pair holding the key; -1 for a global limit or a combination */
    const char *key;
    size_t key_len;
    size_t slot; /* the local counter, GOV_SLOT_NONE when none was read */
    ra_limiter_t lim;
    int64_t state;
    ra_result_t r;
    gov_outcome_t outcome;
    bool evaluated; /* r holds an answer or a posture.fail verdict */
    bool observed;  /* r came from a local counter that may be disclosed */
    bool unit_step; /* r is the step of one unit on `state`: what a unit probe reads there */
    int64_t cost;   /* gov_decide_asks: its ask's cost */
    int64_t amount; /* gov_decide_domain: a descriptor's own limit's amount; -1 otherwise */
    bool local;     /* settle: a redis limit whose decision was counted by its local fallback
                       limiter, so the correction goes there, not to redis */
} probe_t;

/* Whether a probe's store is asked through redis. */
static inline bool gov__via_redis(const probe_t *p)
{
    return p->l->cfg.store == CFG_STORE_REDIS && !p->local;
}

/* ---- result.c (below every other file) ---------------------------------------------------- */

/* Fails `out` with code, the path of the field and a message (tt_err_set); returns code. */
int gov__fail(gov_result_t *out, int code, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void gov__result_init(gov_result_t *out);

/* ---- disclose.c (below decide.c and fleet.c) ------------------------------------------------ */

/* A limiter's depth: the units a fresh counter holds (gcra: tau / T; windows: the amount). */
int64_t gov__depth_of(const ra_limiter_t *lim);

/* Whether a reading of remaining ra out of depth da is tighter than rb out of db: a lower
 * remaining / depth, compared exactly (128-bit cross products). The one rule gov_obs_tighter
 * and decide.c's choice of the tightest admitted probe both apply. */
static inline bool gov__tighter(int64_t ra, int64_t da, int64_t rb, int64_t db)
{
    return (__int128)ra * db < (__int128)rb * da;
}

/* ---- gen.c ------------------------------------------------------------------------------- */

/* True while `h` still names the identity it was bound to (alive, same generation). Inline:
 * probe.c, decide.c and acquire.c ask it before they touch a counter, and gen.c calls down
 * into probe.c. */
static inline bool gov__handle_live(const gov_table_t *t, gov_handle_t h)
{
    return h.index >= 0 && t->idents[h.index].alive && t->idents[h.index].gen == h.gen;
}

/* Copies and checks limits into a new generation *out (refs 1): 0, or GOV_ELIMITS (the path
 * names the limit) or GOV_ENOMEM, described in err. */
int gov__set_build(const cfg_limit_t *limits, size_t n, bool disclose, gov_set_t **out,
                   tt_err_t *err);
/* Binds every counting limit of `set` to a table identity, keeping those of `old` with the same
 * id and identity. All or nothing: GOV_ELIMITS in err, the fresh identities released. */
int gov__set_bind(gov_engine_t *e, gov_set_t *set, const gov_set_t *old,
                  gov_reload_action_t *actions, tt_err_t *err);
void gov__set_unref(gov_set_t *set);

/* ---- probe.c ----------------------------------------------------------------------------- */

/* The bytes of a subject's levels and ids, and a copy of it whose pointers go into `bytes`
 * (gov__subject_bytes of them; the subject must have been checked by gov__prepare first). */
size_t gov__subject_bytes(const gov_subject_t *s);
void gov__subject_copy(gov_subject_t *dst, char *bytes, const gov_subject_t *src);

/* A subject packed into one flat record (reservations keep it): its size, the packing, and a
 * view of a packed one whose pointers go into `src`. */
size_t gov__subject_pack_size(const gov_subject_t *s);
void gov__subject_pack(uint8_t *dst, const gov_subject_t *s);
void gov__subject_unpack(gov_subject_t *s, const uint8_t *src);

/* Probes of one request as a bit set over their order (at most GOV_APPLY_MAX). */
typedef struct gov_probe_set {
    uint64_t bits[(GOV_APPLY_MAX + 63) / 64];
} gov_probe_set_t;

static inline void gov__probe_set_add(gov_probe_set_t *set, size_t i)
{
    set->bits[i / 64] |= UINT64_C(1) << (i % 64);
}

/* Marks the probes in `local` (p->local) and keeps those in `keep`, compacted in place; both
 * sets are over the order of p as collected. */
void gov__probes_select(probe_t *p, size_t *n, const gov_probe_set_t *keep,
                        const gov_probe_set_t *local);

/* Builds set->index from its limits and levels; -1 when out of memory. */
int gov__set_index(gov_set_t *set);

/*
 * A counter key longer than the counter table holds (GOV_ID_MAX bytes: its id arena's largest
 * chunk, the snapshot's key bound) is folded in place to exactly GOV_ID_MAX bytes: its first
 * GOV_ID_MAX - GOV_KEY_DIGEST bytes and a BLAKE2b of all of it (libsodium's generichash, the
 * same on every replica and across restarts). Two long keys share a counter only if BLAKE2b
 * collides. Returns the length to use; shorter keys are left as they are.
 */
size_t gov__key_fold(char *key, size_t len);

/* Resolves the subject against `set` and collects the limits of `types` that apply, in config
 * order. A negative GOV_E* code with out->error on a malformed subject. */
int gov__prepare(gov_set_t *set, const gov_subject_t *s, unsigned types, probe_t *p, size_t *n,
                 gov_result_t *out);
/* The same appending after p[*n], and with `exact` only the limits attached to exactly the
 * subject's levels in its order (gov_decide_asks with GOV_ASK_EXACT; global ones never). */
int gov__prepare_at(gov_set_t *set, const gov_subject_t *s, unsigned types, bool exact, probe_t *p,
                    size_t *n, gov_result_t *out);
/* Room for `n` new counters, so slot numbers stay valid for the whole call. */
int gov__reserve(gov_engine_t *e, size_t n, int64_t now, gov_result_t *out);
/* Sets p->lim to the limiter in force (share: the store's effective one, counting `cost` when
 * the store counts arrivals). -1 when the share store is unarmed or cannot say. */
int gov__limiter_in_force(gov_engine_t *e, probe_t *p, int64_t cost, int64_t now);
/* Finds (or, with create, makes) the local counter into p->slot. -1 when the table cannot hold
 * it or the limit's identity is no longer the one it was bound to. */
int gov__local_slot(gov_engine_t *e, probe_t *p, bool create);
/* posture.fail for a limit whose store could not answer, with or without counting an error. */
void gov__posture_fail(probe_t *p);
void gov__store_failed(gov_engine_t *e, probe_t *p);
/* A non-committing step of the local counter (r.next_state is what a commit writes). */
void gov__local_step(gov_engine_t *e, probe_t *p, int64_t now, int64_t cost);

/* ---- decide.c ---------------------------------------------------------------------------- */

/* A redis limit's answer into its probe: Redis's verdict (true), or when it had none the store
 * error counted and posture.fail's: closed, a denial (true); open, false: the caller steps the
 * local fallback limiter built from the same limit. */
bool gov__redis_answer(gov_engine_t *e, probe_t *q, const gov_redis_reply_t *rep);
/* True when a probe's denial blocks the decision (hard, evaluated, denied). */
bool gov__blocks(const probe_t *p);
/* What a non-committing unit probe reads on the state after the decision. */
gov_obs_t gov__observe(const probe_t *p, bool committed, int64_t now);
/* How many counters a decision over p[0..n) may add (fewer at the cap). */
size_t gov__counters_needed(gov_engine_t *e, const probe_t *p, size_t n);

/* What gov__decide_finish does with the table: commit the admitted probes when the verdict
 * admits (gov_decide), or nothing, the caller having written (or restored) every state. */
typedef enum gov_finish_mode {
    GOV_FINISH_COMMIT = 0,
    GOV_FINISH_WRITTEN, /* the admitted probes' states are in the table */
    GOV_FINISH_UNDONE,  /* nothing was kept */
} gov_finish_mode_t;

/* One probe of gov_decide_asks or gov_decide_domain stepped at once: its admitted state written
 * (the old one in *undo), or with `charge` its denied cost charged too (asks.c). */
void gov__asks_step(gov_engine_t *e, probe_t *q, bool charge, int64_t now, int64_t *undo);

/* Verdict, commit, metrics, result and disclosure over the evaluated probes. */
void gov__decide_finish(gov_engine_t *e, gov_set_t *set, probe_t *p, size_t n, int64_t now,
                        gov_finish_mode_t mode, gov_result_t *out);
void gov__add_soft(gov_result_t *out, const gov_limit_t *l);
/* The result's limit, remaining, retry and reset from one probe. */
void gov__fill_from(gov_result_t *out, const probe_t *p);

/* ---- settle.c ---------------------------------------------------------------------------- */

/* Opens `who`'s reservation for a decision admitted under `set` that charged the tpm probes in
 * `charged` (bits over the subject's tpm limits in `set`, in order) `reserved` tokens each,
 * those in `local` on a redis limit's local fallback. Returns its id, or 0 when memory runs
 * out. */
uint64_t gov__reservation_open(gov_engine_t *e, const gov_client_t *who, gov_set_t *set,
                               const gov_subject_t *s, int64_t reserved,
                               const gov_probe_set_t *charged, const gov_probe_set_t *local,
                               int64_t now);
/* Frees a reservation's record (the pool's drop). */
void gov__reservation_drop(void *record);

/* ---- detail.c ---------------------------------------------------------------------------- */

/* Counts one outcome of rule l for the descriptor s under its stats key, when the rule keeps
 * detailed series (detailed_metric, value_to_metric); nothing otherwise. */
void gov__detail_count(gov_engine_t *e, const gov_limit_t *l, const gov_subject_t *s,
                       gov_outcome_t outcome);
void gov__details_free(gov_engine_t *e);

/* ---- pending.c --------------------------------------------------------------------------- */

typedef struct gov_pending gov_pending_t;

/* Runs the end of an asynchronous request once every reply is in: re-collects the probes of
 * pd->types on pd->set (same subject, same config: the order of the first pass) and writes
 * pd->out; with types 0 it is called with no probes (gov_decide_domain rebuilds its own). */
typedef void (*gov_finish_fn)(gov_pending_t *pd, probe_t *p, size_t n, int64_t now);

struct gov_pending {
    gov_engine_t *e;
    gov_set_t *set; /* the generation the request started under (a reference) */
    unsigned types;
    gov_finish_fn finish;
    int64_t tokens, reserved, actual;
    gov_client_t who; /* decide: whose reservation it opens */
    int64_t settled;  /* settle: limits corrected before redis was asked */
    bool select;      /* a reservation's: only the probes in `keep`, those in `local` marked */
    gov_probe_set_t keep, local;
    gov_result_t *out;
    gov_done_fn done;
    void *ctx;
    uint32_t outstanding, n_ops;
    gov_subject_t subject; /* a copy: its bytes follow the replies */
    gov_redis_op_t *ops;
    gov_redis_reply_t *replies; /* in the order of the redis probes */
};

/* Allocates an asynchronous request over generation `set` from `tmpl` (its scalar fields),
 * copying the subject. NULL when out of memory (nothing changed). */
gov_pending_t *gov__pending_new(gov_engine_t *e, gov_set_t *set, const gov_subject_t *s,
                                size_t n_ops, const gov_pending_t *tmpl, gov_result_t *out);
/* Gives back the reference a request holds while it submits its ops (outstanding counts one
 * more than the ops until then): GOV_PENDING while answers are due, or 0 when every one is in:
 * then the request is finished and freed here and no callback runs. */
int gov__pending_release(gov_pending_t *pd, int64_t now);
/* Submits one op per redis probe (kind STEP or SETTLE). Returns GOV_PENDING, or 0 when every op
 * finished (or failed to start) before this returned: then the request is finished and freed
 * here and no callback runs. */
int gov__pending_start(gov_pending_t *pd, gov_redis_kind_t kind, const probe_t *p, size_t n,
                       int64_t now);

#endif
