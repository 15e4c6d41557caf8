/*
 * demand_int: the demand core's state and the look-ups that demand.c (the core's life, members,
 * the decision path, the disclosure) and demand_exchange.c (reports, the owner's division,
 * grants, receiving) share. Private to those two files; the design is in demand.c's essay.
 */
#ifndef TT_SHARE_DEMAND_INT_H
#define TT_SHARE_DEMAND_INT_H

#include "demand.h"
#include "demand_index.h"
#include "demand_wire.h"

#define MS INT64_C(1000000)

/* ---- records ------------------------------------------------------------------------------- */

/* A key measured here (replica side). */
typedef struct entry {
    keyref_t k;
    bool used;
    bool hot; /* reported at the last tick */
    uint8_t ring_pos;
    int64_t amount, period_ns;
    uint64_t count;                    /* cost units since the last tick, saturating */
    uint32_t rates[DEMAND_WINDOW_MAX]; /* closed buckets, DEMAND_SHARE_DEN units */
    uint32_t estimate;                 /* smoothed demand, same units */
    uint32_t lease;                    /* 0: none */
    int64_t lease_until, lease_at;
    uint64_t owner; /* member hash, valid while owner_epoch == core epoch */
    uint32_t owner_epoch;
} entry_t;

/* A key owned here with reporters (owner side). */
typedef struct owned {
    keyref_t k;
    bool used;
    uint32_t head; /* reporter list, NIL-terminated */
    uint32_t nrep;
    uint32_t epoch; /* ownership checked at this member epoch */
    bool changed;   /* a reporter joined or left since the last grants: answer early */
} owned_t;

/* One reporter of an owned key: one lease this owner grants. */
typedef struct reporter {
    uint64_t member;
    uint32_t need, share;
    int64_t heard_ns;
    uint32_t next;
} reporter_t;

/* A stack of free record indices. */
typedef struct freelist {
    uint32_t *idx;
    uint32_t n;
} freelist_t;

/* ---- the core ------------------------------------------------------------------------------ */

typedef struct member {
    uint64_t hash;
    uint32_t id_len;
    char id[DEMAND_ID_MAX];
} member_t;

/* One pending report or grant: to member `to`, about record `rec`, with `value`. */
typedef struct pending {
    uint32_t to, rec, value;
} pending_t;

struct demand_core {
    demand_config_t cfg;
    uint32_t nbuckets;
    int64_t lease_ns;
    uint64_t self_hash;

    member_t *members; /* sorted by hash; self always present */
    uint32_t nmembers;
    uint32_t epoch; /* bumped when the member set changes; starts at 1 */
    int64_t moved_ns;
    bool ever_moved;
    uint32_t divisor;

    entry_t *entries;
    index_t entry_ix;
    freelist_t entry_free;

    owned_t *owned;
    index_t owned_ix;
    freelist_t owned_free;
    reporter_t *reporters;
    freelist_t rep_free;

    int64_t last_tick, next_tick;
    bool ticked;
    /* Early grants (demand_flush): when they are due (INT64_MAX: nothing changed), and when the
     * last early pass's quiet gap ends (at most one pass per flush gap). */
    int64_t flush_at, flush_quiet_until;

    /* scratch, sized at demand_new */
    pending_t *pend; /* max(keys_max, leases_max) */
    uint32_t *need, *share;
    uint64_t *order;
    uint32_t *rep_of; /* reporter index per water-fill slot */
    demand_item_t items[DEMAND_WIRE_ITEMS_MAX];
    uint8_t *txbuf;
    demand_msg_t rx;

    demand_counters_t counters;
};

/* ---- look-ups both files use --------------------------------------------------------------- */

/* The index of the member with this hash, or NIL. */
static inline uint32_t member_find(const demand_core_t *c, uint64_t hash)
{
    uint32_t lo = 0, hi = c->nmembers;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->members[mid].hash < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < c->nmembers && c->members[lo].hash == hash ? lo : NIL;
}

/* The owner (a member index) of key hash kh: the highest rendezvous score. */
static inline uint32_t owner_of(const demand_core_t *c, uint64_t kh)
{
    uint32_t best = 0;
    uint64_t best_score = 0;
    for (uint32_t i = 0; i < c->nmembers; i++) {
        uint64_t s = fmix64(c->members[i].hash ^ kh);
        if (i == 0 || s > best_score) {
            best = i;
            best_score = s;
        }
    }
    return best;
}

/* The entry's owner hash, recomputed when the member set changed since. */
static inline uint64_t entry_owner(const demand_core_t *c, entry_t *e)
{
    if (e->owner_epoch != c->epoch) {
        e->owner = c->members[owner_of(c, e->k.hash)].hash;
        e->owner_epoch = c->epoch;
    }
    return e->owner;
}

/* The cold share c / N in use, num / DEMAND_SHARE_DEN. */
static inline uint32_t cold(const demand_core_t *c)
{
    return demand_cold_num(c->cfg.cold_num, c->divisor);
}

/* A lease is live from its grant to its lapse; a clock that went back before the grant ends it
 * (it must not stretch a lease by the jump). */
static inline bool lease_live(const entry_t *e, int64_t now)
{
    return e->lease && now >= e->lease_at && now < e->lease_until;
}

#endif
