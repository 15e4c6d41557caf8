/*
 * demand: demand-aware division of a share limit (SPEC §6b), the pure core.
 *
 * Equal division gives every replica amount / N. In demand mode each (limit, key) has an owner
 * (the live member with the highest rendezvous hash); replicas that see real demand for a key
 * report it to the owner, the owner divides the fleet amount among them by max-min fairness and
 * answers with leases, and every other replica runs on the cold share c / N. The decision path
 * is one table look-up (demand_arrive): no network hop, no allocation.
 *
 * The core takes `now` as an argument and does no I/O: the shell (or the simulator) feeds it the
 * live member list, the datagrams it receives, and calls demand_tick every demand interval; the
 * tick hands the datagrams to send to a callback. All memory is allocated once by demand_new,
 * sized by demand_config_t; nothing grows afterwards. The design is in demand.c's essay, the wire
 * layout in demand_wire.h, the figures in docs/share.md ("Demand-aware division").
 */
#ifndef TT_SHARE_DEMAND_H
#define TT_SHARE_DEMAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "limit.h"
#include "ratealg.h"
#include "tt_err.h"

/* A share is num / DEMAND_SHARE_DEN of the fleet amount: the replica steps with
 * ra_limiter_effective(plain, num, DEMAND_SHARE_DEN, unit). 2^20 resolves a millionth. */
#define DEMAND_SHARE_DEN (UINT32_C(1) << 20)
/* Demands are in the same units (fractions of the amount per period), capped here (1024 x the
 * whole amount): more than that is "everything", and the cap keeps every sum in 64 bits. */
#define DEMAND_DEMAND_CAP (UINT32_C(1) << 30)
#define DEMAND_KEY_MAX 256  /* subject ids, as on the decision socket (SPEC §5) */
#define DEMAND_ID_MAX 128   /* member ids, as in membership (SWIM_ID_MAX) */
#define DEMAND_WINDOW_MAX 8 /* smoothing buckets per key (window / interval, rounded up) */

/* Errors: rows of the one error table (common/tt_err.h), which names them. */
enum {
    DEMAND_ECONFIG = TT_ERR_DEMAND_CONFIG,   /* a field of demand_config_t out of range (named) */
    DEMAND_ENOMEM = TT_ERR_NOMEM,            /* demand_new could not allocate its tables */
    DEMAND_EWIRE = TT_ERR_DEMAND_WIRE,       /* a datagram that does not decode (field named) */
    DEMAND_ESENDER = TT_ERR_DEMAND_SENDER,   /* a datagram from a member not in the live list */
    DEMAND_EMEMBERS = TT_ERR_DEMAND_MEMBERS, /* live members above members_max (rest left out) */
    DEMAND_EUNARMED = TT_ERR_UNARMED,        /* the share store is not armed: posture.fail */
};
typedef struct demand_config {
    int64_t interval_ns;      /* demand_interval: 500 ms. Reports, grants, smoothing buckets */
    int64_t window_ns;        /* demand smoothing window: 2 s (at most DEMAND_WINDOW_MAX buckets) */
    uint32_t lease_intervals; /* lease lifetime in intervals: 3 */
    uint32_t cold_num;        /* c as num / DEMAND_SHARE_DEN: 0.05 = 52429 */
    uint32_t keys_max;        /* keys tracked per replica (arrivals measured): 4096 */
    uint32_t owned_max;       /* keys with reporters held by this replica as owner: 4096 */
    uint32_t leases_max;      /* (key, reporter) pairs held as owner: 16384 */
    uint32_t members_max;     /* live members considered for ownership: 1024 */
    uint32_t datagram_max;    /* payload bytes per datagram, before the gossip seal: 1150 */
} demand_config_t;

/* One live member (alive or suspect), as the shell passes it. `id` is borrowed for the call. */
typedef struct demand_member {
    const char *id;
    size_t id_len;
} demand_member_t;

/* Sends `len` bytes to member `to` (its id) on the gossip port. Bytes are valid for the call. */
typedef void (*demand_emit_fn)(void *ctx, const char *to, size_t to_len, const uint8_t *bytes,
                               size_t len);

/* What `fleet` and /metrics disclose for one demand-mode limit. */
typedef struct demand_disclosure {
    uint32_t keys_tracked;        /* keys of this limit with measured arrivals here */
    uint32_t keys_hot;            /* ... whose demand is above the cold share (they report) */
    uint32_t keys_leased;         /* ... holding a live lease here */
    uint32_t keys_owned;          /* keys of this limit owned here with at least one reporter */
    uint32_t leases_granted;      /* (key, reporter) pairs this replica grants as owner */
    int64_t largest_lease_age_ns; /* oldest live lease here since its last grant; 0 if none */
    uint32_t largest_lease_num;   /* the largest live lease here, num / DEMAND_SHARE_DEN; 0: none */
    uint32_t cold_num;            /* the cold share c / N in use, num / DEMAND_SHARE_DEN */
    /* Fleet-wide units per period: amount, or 2 x amount while ownership moves (an old owner's
     * leases still valid beside the new owner's, for at most one lease lifetime). */
    int64_t sustained_bound;
    /* What the fleet may admit at once: each replica holds max(burst x share, unit), and the
     * shares sum to 1 (2 while moving): burst (x 2 while moving) + N x unit. */
    int64_t burst_bound;
    bool moving;             /* within one lease lifetime of an ownership change */
    int64_t moving_until_ns; /* when the double allocation can last have ended */
} demand_disclosure_t;

/* Core-wide counters, for /metrics. Every refusal at a bound is counted, never silent. */
typedef struct demand_counters {
    uint64_t tx_packets, tx_bytes, rx_packets, rx_bytes;
    uint64_t reports_sent, grants_sent, reports_received, grants_received;
    uint64_t rx_bad;             /* datagrams that did not decode or came from a non-member */
    uint64_t grants_ignored;     /* grants from a non-owner, or for a key no longer hot here */
    uint64_t reports_misrouted;  /* reports for a key this replica does not own in its view */
    uint64_t untracked_arrivals; /* keys_max full: the arrival ran on the cold share unmeasured */
    uint64_t reports_refused;    /* owned_max or leases_max full: the reporter stays cold */
    uint64_t members_left_out;   /* live members beyond members_max at the last update */
} demand_counters_t;

typedef struct demand_core demand_core_t;

/* Fills the defaults above. */
void demand_config_default(demand_config_t *cfg);

/*
 * The demand settings of shared_state.share (SPEC §4, §6b): demand_interval, cold_share as the
 * nearest num / 2^20 (at least 1), and demand_keys as keys_max = owned_max (leases_max four
 * times that). The smoothing window is 2 s clamped to 1 .. 8 intervals; the lease lifetime
 * stays 3 intervals.
 */
void demand_config_from_share(demand_config_t *out, const cfg_share_t *share);

/*
 * Builds a core for this replica (`self_id`), alone, unarmed (divisor 0). All memory is
 * allocated here, sized by cfg. Returns 0, DEMAND_ECONFIG (err's path names the field of cfg,
 * or "self_id") or DEMAND_ENOMEM; err may be NULL. The caller owns *out and frees it with
 * demand_free.
 */
int demand_new(demand_core_t **out, const demand_config_t *cfg, const char *self_id,
               size_t self_len, tt_err_t *err);
void demand_free(demand_core_t *core);

/*
 * The live members (alive + suspect; self may be listed or not, it is always included) and the
 * divisor N the share core uses (share_divisor: 0 while unarmed). Call on every membership
 * change. Ownership is recomputed lazily; a changed member set starts one lease lifetime of
 * `moving` (the disclosed double allocation). Returns 0 or DEMAND_EMEMBERS when more than
 * members_max were passed (the rest are left out of ownership and counted).
 */
int demand_set_members(demand_core_t *core, const demand_member_t *members, size_t n,
                       uint32_t divisor, int64_t now);

/*
 * The decision path: counts an arrival of `cost` units (admitted or not) for (limit, key) at
 * `now` and returns the share to step with, as num / DEMAND_SHARE_DEN: the live lease, else the
 * cold share. Returns 0 only while unarmed (divisor 0): the caller follows posture.fail. The
 * key is borrowed. No allocation; when keys_max keys are tracked already, a new key runs on the
 * cold share unmeasured (counted in untracked_arrivals) until a slot frees.
 */
uint32_t demand_arrive(demand_core_t *core, const cfg_limit_t *limit, const void *key,
                       size_t key_len, int64_t cost, int64_t now);

/*
 * The decision path in the shape of a per-key share hook: demand_arrive, then the limiter to step
 * with, ra_limiter_effective(limit->limiter, share, DEMAND_SHARE_DEN, unit of its type). Returns
 * 0, DEMAND_EUNARMED (*out is then the plain limiter; posture.fail decides) or a RA_E* code.
 */
int demand_limiter(demand_core_t *core, const cfg_limit_t *limit, const void *key, size_t key_len,
                   int64_t cost, int64_t now, ra_limiter_t *out);

/* The share (num / DEMAND_SHARE_DEN) of (limit, key) at `now` without counting an arrival. */
uint32_t demand_share(const demand_core_t *core, const cfg_limit_t *limit, const void *key,
                      size_t key_len, int64_t now);

/*
 * Every demand interval: closes the arrival buckets, sends the reports (batched per owner) and,
 * as owner, the grants (batched per reporter) through `emit`. Messages for self are applied
 * directly, without the network.
 */
void demand_tick(demand_core_t *core, int64_t now, demand_emit_fn emit, void *ctx);

/* When demand_tick should next run. */
int64_t demand_next_deadline(const demand_core_t *core);

/*
 * Early grants. When a reporter joins or leaves a key this replica owns (a datagram handed to
 * demand_receive), the key's shares change; the owner answers then, not at its next tick, so a
 * demand that moves is followed within the reporters' two ticks. demand_flush sends the grants
 * for those keys once demand_flush_deadline has come (INT64_MAX: nothing waits); passes are at
 * least interval / 8 apart, so churn costs a bounded number of extra grants. Call it after
 * demand_receive, and when the deadline comes.
 */
void demand_flush(demand_core_t *core, int64_t now, demand_emit_fn emit, void *ctx);
int64_t demand_flush_deadline(const demand_core_t *core);

/*
 * A datagram from member `from` (the id the sealed transport authenticated). It is decoded
 * completely before anything is applied: a bad one changes nothing. Returns 0, DEMAND_EWIRE
 * (err's path names the payload's field: `items[3].key`) or DEMAND_ESENDER (path "from"); err
 * may be NULL.
 */
int demand_receive(demand_core_t *core, int64_t now, const char *from, size_t from_len,
                   const uint8_t *bytes, size_t len, tt_err_t *err);

/* Fills the disclosure of one demand-mode limit at `now`. */
void demand_disclose(const demand_core_t *core, const cfg_limit_t *limit, int64_t now,
                     demand_disclosure_t *out);

const demand_counters_t *demand_counters(const demand_core_t *core);

/* The owner of (limit identity, key) among the current members: writes its id (borrowed until
 * the next demand_set_members) and returns true, or false while there is none. For tests, the
 * disclosure and the shell's logs. */
bool demand_owner(const demand_core_t *core, uint64_t identity, const void *key, size_t key_len,
                  const char **id, size_t *id_len);

/* What a share of num / DEMAND_SHARE_DEN of `amount` is, in whole units (rounded down). */
int64_t demand_units(int64_t amount, uint32_t num);

/* The cold share c / N as num / DEMAND_SHARE_DEN for divisor N >= 1 (never below 1). */
uint32_t demand_cold_num(uint32_t c_num, uint32_t divisor);

/*
 * Max-min fair water-filling, the owner's arithmetic, exposed for tests. Divides `amount` among
 * n reporters with demands need[i]: nobody gets below `floor`, nobody above its demand until
 * every demand is met, and what is left is spread evenly; the shares sum to exactly `amount`
 * (given n x floor <= amount). Ties break by index. order is scratch for n entries. Writes
 * share[i].
 */
void demand_waterfill(const uint32_t *need, uint32_t n, uint64_t amount, uint32_t floor,
                      uint32_t *share, uint64_t *order);

#endif
