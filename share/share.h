/*
 * share: the share store's pure core. A fleet cap divided across the live replicas.
 *
 * Input: this replica's membership view (every member's state and gossiped metadata) and `now`.
 * Output: the divisor N this replica runs with, its state (unarmed | armed | held), the effective
 * limiter of each share limit, the metadata payload to gossip, and the fleet bounds its view
 * implies. No clock, no I/O, no allocation: the shell (share/share_node.c) feeds it and reads it.
 * The design and the accuracy model are in share.c's opening essay and docs/share.md.
 */
#ifndef TT_SHARE_H
#define TT_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limit.h"
#include "ratealg.h"
#include "tt_err.h"

/* Errors: rows of the one error table (common/tt_err.h). They used to be -1..-4, the values of
 * the RA_E* codes share_limiter passes through: SHARE_EUNARMED and RA_EAMOUNT were one value. */
enum {
    SHARE_EUNARMED = TT_ERR_UNARMED,     /* not armed yet: the limit's posture.fail decides */
    SHARE_EMETA = TT_ERR_SHARE_META,     /* a metadata payload that does not decode */
    SHARE_ELIMIT = TT_ERR_SHARE_LIMIT,   /* not a rate-class gcra limit on store share */
    SHARE_ECONFIG = TT_ERR_SHARE_CONFIG, /* a negative duration or a zero multiplier */
};

typedef enum share_state {
    SHARE_UNARMED = 0, /* membership has not joined yet: posture.fail decides */
    SHARE_ARMED,       /* dividing by the live count */
    SHARE_HELD,        /* lost at least half the view: dividing by the recent largest N */
} share_state_t;

/* A member's state as this replica's membership view has it. */
typedef enum share_member_state {
    SHARE_MEMBER_ALIVE = 0,
    SHARE_MEMBER_SUSPECT, /* still counted: counting too few over-admits */
    SHARE_MEMBER_DEAD,    /* failure detected (or cut off: from here the two look alike) */
    SHARE_MEMBER_LEFT,    /* left gracefully (SIGTERM): never part of a partition drop */
} share_member_state_t;

/* One member of the view. `meta` is borrowed for the duration of the call it is passed to. */
typedef struct share_member {
    share_member_state_t state;
    bool is_self;        /* this replica: counted once whatever its entry says */
    const uint8_t *meta; /* its gossiped metadata payload (share_meta_encode), may be NULL */
    size_t meta_len;
} share_member_t;

/*
 * A snapshot of the membership view. `left_total` counts the graceful leaves membership has
 * reported since this replica started (monotone; the shell counts its "left" callbacks): the
 * partition hold discounts them, so a rolling update never holds.
 */
typedef struct share_view {
    const share_member_t *members;
    size_t count;
    bool joined; /* membership has joined the cluster (or has no seed to join) */
    uint64_t left_total;
    /* Members this replica knew before its restart (share_remember) that the view does not
     * hold in any state: the fleet it left, not found yet (membership's mb_known_missing). */
    uint32_t unheard;
} share_view_t;

/*
 * The failure detector's timings, read only to derive detect_within_s. Defaults (SPEC §7,
 * memberlist's LAN profile) come from share_config_default.
 */
typedef struct share_swim_timing {
    int64_t probe_interval_ns;   /* 1 s */
    uint32_t suspicion_mult;     /* 4: min suspicion = mult x max(1, log10 n) x interval */
    uint32_t suspicion_max_mult; /* 6: max suspicion = max_mult x min suspicion */
    uint32_t probe_retries;      /* 2: above retry_above members a failed probe is retried */
    uint32_t retry_above;        /* 32: (an interval each) before the member is suspected */
} share_swim_timing_t;

typedef struct share_config {
    int64_t partition_hold_ns; /* 60 s; 0 turns the hold off */
    int64_t join_timeout_ns;   /* after this long without joining, arm solo */
    share_swim_timing_t swim;
} share_config_t;

/* The divisor is bounded so every bound below stays exact in 64-bit arithmetic. */
#define SHARE_DIVISOR_MAX 1000000u
/* Distinct divisors tracked per view; members beyond are counted as divisor 1 (see share.c). */
#define SHARE_GROUPS_MAX 16
/* Window peaks the partition hold remembers; see share.c on what happens when it fills. */
#define SHARE_PEAKS_MAX 32

/* Metadata payload, version 1: [version = 1][state: 0 unarmed, 1 armed, 2 held][divisor: u32 BE].
 * A later version keeps these 6 bytes and may append; a decoder reads the prefix it knows. */
#define SHARE_META_VERSION 1
#define SHARE_META_LEN 6

/* What a peer gossips about itself. divisor is 0 exactly when state is SHARE_UNARMED. */
typedef struct share_meta {
    share_state_t state;
    uint32_t divisor;
} share_meta_t;

/* A window peak of the hold: the value (live + left_total) and when it was last in effect. */
typedef struct share_peak {
    uint64_t value;
    int64_t seen_ns;
} share_peak_t;

/* Divisors seen among the live peers, grouped: `count` peers publish `divisor`. */
typedef struct share_group {
    uint32_t divisor;
    uint32_t count;
} share_group_t;

/*
 * The core's state. Plain data owned by the caller; share_init fills it, share_update advances it.
 * Everything below `cfg` is derived: read it through the accessors and share_disclose.
 */
typedef struct share_core {
    share_config_t cfg;
    int64_t started_ns;
    share_state_t state;
    uint32_t live;    /* alive + suspect members, self included */
    uint32_t divisor; /* what this replica divides by now: 0 unarmed, the held peak when held */
    uint64_t left_total;
    /* The partition hold's sliding-window maximum: values strictly decreasing from the front. */
    share_peak_t peaks[SHARE_PEAKS_MAX];
    uint32_t npeaks;
    bool have_prev;
    uint64_t prev_value;
    /* Live members' divisors, self included, ascending; `unknown` members had none usable. */
    share_group_t groups[SHARE_GROUPS_MAX];
    uint32_t ngroups;
    uint32_t unknown;
    int health; /* this replica's Lifeguard score (share_set_health): its probes run (health + 1)x
                 */
    /* A restart's memory of the fleet (share_remember): until recall_until, the remembered
     * members the view does not hold count in N and keep the view from claiming the fleet. */
    uint32_t remembered;
    int64_t recall_until;
    uint32_t unheard; /* of them, not in the view now (0 once recall_until has passed) */
} share_core_t;

/* What `fleet` and /metrics disclose for one share limit. Units are the limit's (requests or
 * tokens); per-period figures are per the limit's period. */
typedef struct share_disclosure {
    share_state_t state;
    uint32_t n;                /* the divisor in use: 0 when unarmed */
    uint32_t live;             /* alive + suspect in this view, self included */
    int64_t local_share;       /* floor(amount / n) per period; 0 when unarmed */
    int64_t local_burst;       /* units this replica admits at once: floor(tau_s / T_s) */
    uint32_t divisor_min;      /* over the live members with a known divisor, self included */
    uint32_t divisor_max;      /* (both 0 when none is known) */
    uint32_t divisors_unknown; /* live members without a usable divisor: bounded as 1 */
    int64_t sustained_bound;   /* sum over live members of amount / N_m, rounded up per divisor */
    int64_t burst_bound;       /* sum over live members of max(ceil(burst / N_m), unit) */
    int64_t detect_within_s;   /* how long a dead peer's share can go unused */
    bool converged;            /* every live member divides by the live count */
    uint32_t unheard;          /* members known before a restart, not found yet: in n, unknown */
} share_disclosure_t;

/* Fills the defaults: partition_hold 60 s, join_timeout 5 s, SWIM per SPEC §7. */
void share_config_default(share_config_t *cfg);

/* Starts a core at `now`, unarmed, alone. Returns 0 or SHARE_ECONFIG (core zeroed) with err's path
 * naming the field of cfg (`swim.probe_interval_ns`); err may be NULL. */
int share_init(share_core_t *core, const share_config_t *cfg, int64_t now, tt_err_t *err);

/*
 * Advances the core to `now` with a fresh view. Call it on every membership change and at
 * share_next_deadline. Idempotent for an unchanged view and `now`. `now` must not go back
 * (an earlier `now` is treated as the last one seen).
 */
void share_update(share_core_t *core, const share_view_t *view, int64_t now);

/*
 * A restart with state: this replica knew `members` peers when it stopped (membership keeps
 * them in the state directory). Until they are in the view (in any state: alive, suspect, dead
 * or left; share_view_t.unheard counts the rest), or until the detection window of a fleet that
 * size has passed from `now`, each one not found counts in N (as a suspect does: counting too
 * many only under-uses) with an unknown divisor in the bounds, so the view is not `converged`:
 * a replica that rejoined only part of the fleet (another island) does not claim the fleet's
 * bound. Call once, after share_init and before the first share_update.
 */
void share_remember(share_core_t *core, uint32_t members, int64_t now);

/* When share_update must next run even if the view does not change (a hold expiring, the join
 * timeout, the end of a restart's recall), or INT64_MAX when nothing is pending. */
int64_t share_next_deadline(const share_core_t *core);

static inline share_state_t share_state(const share_core_t *core)
{
    return core->state;
}

static inline uint32_t share_divisor(const share_core_t *core)
{
    return core->divisor;
}

/* How many members a restart remembered N counts now without having heard from them (0 once
 * every one is found or the recall is over), and in *until (may be NULL) when the recall ends
 * at the latest, on the clock of share_update's `now`. */
static inline uint32_t share_unheard(const share_core_t *core, int64_t *until)
{
    if (until)
        *until = core->recall_until;
    return core->unheard;
}

const char *share_state_name(share_state_t s);

/*
 * The limiter a share limit steps with now: ra_limiter_effective(plain, 1, N, unit of its type).
 * Returns 0, SHARE_EUNARMED (posture.fail decides; *out zeroed), SHARE_ELIMIT, or a RA_E* code.
 */
int share_limiter(const share_core_t *core, const cfg_limit_t *limit, ra_limiter_t *out);

/* Fills the disclosure of one share limit. Returns 0 or SHARE_ELIMIT. */
int share_disclose(const share_core_t *core, const cfg_limit_t *limit, share_disclosure_t *out);

/* Writes this replica's metadata payload into buf (at least SHARE_META_LEN bytes).
 * Returns the length written or SHARE_EMETA when buf is too small. */
int share_meta_encode(const share_core_t *core, uint8_t *buf, size_t size);

/* Decodes a peer's payload. Returns 0 or SHARE_EMETA with err's path naming the field (may be
 * NULL): short (the whole payload, path ""), version 0, unknown state, a divisor of 0 while armed
 * or held, a divisor above SHARE_DIVISOR_MAX, a divisor while unarmed. */
int share_meta_decode(const uint8_t *buf, size_t len, share_meta_t *out, tt_err_t *err);

/* detect_within for a view of `live` members under these timings, in nanoseconds, for a replica
 * whose Lifeguard health score is `health` (0 healthy; its probe interval runs health + 1 times
 * longer, at most 8 times). */
int64_t share_detect_within_ns(const share_swim_timing_t *t, uint32_t live, int health);

/* This replica's Lifeguard health score now (membership's; 0 healthy), which stretches the
 * disclosed detect_within. */
void share_set_health(share_core_t *core, int health);

const char *share_strerror(int err);

#endif
