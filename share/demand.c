/*
 * Demand-aware division: the whole fleet cap usable wherever the traffic lands (SPEC §6b).
 *
 * Equal division runs every replica at amount / N, so a key whose traffic reaches 2 of 10
 * replicas can use 2/10 of its limit. Here each (limit identity, key) has an owner that divides
 * the amount among the replicas that actually see demand for it, and the replicas step GCRA in
 * the effective-rate form with the share they were leased. There is no central server (owners
 * are spread over the fleet by rendezvous hashing) and no network hop on the decision path
 * (demand_arrive is a table look-up; the exchange runs beside it, once per demand interval).
 *
 * Shares are fractions of the amount with the fixed denominator DEMAND_SHARE_DEN = 2^20, the
 * form ra_limiter_effective takes (num / den). Demands are in the same unit: a demand of 2^20
 * is arrivals at the whole amount per period.
 *
 * Ownership. score(m, k) = fmix64(h(m) ^ h(k)) with h(m) the hash of a member id and h(k) the
 * hash of (identity, key) (FNV-1a finished by murmur3's fmix64, fixed so every replica computes
 * the same); the owner is the live member with the highest score. A membership change moves only
 * the keys whose owner came or went. Both sides check ownership against their own view: an owner
 * grants only keys it owns in its view, a replica accepts a grant only from the member it takes
 * for the owner. So a replica holds at most one lease per key, and a replica and an owner whose
 * views disagree produce no lease (the replica falls back to the cold share) rather than two.
 *
 * Demand measurement (replica side). Every arrival, admitted or denied, adds its cost to the
 * key's open bucket. demand_tick closes the bucket as a rate (cost x period x 2^20 /
 * (elapsed x amount)) into a ring of window / interval buckets (4 with the defaults: 2 s). The
 * smoothed demand is the ring's mean, except that a rise is followed at once: the estimate is
 * max(mean, newest bucket). Under-estimating a rising demand costs admissions; over-estimating a
 * falling one only lends the surplus for at most the window (a sliding mean forgets in finite
 * time, an EWMA never quite does). A stop is the exception: a bucket the cold share covers
 * empties the ring, so a site whose traffic went elsewhere releases at its next tick instead of
 * holding half the amount while its mean fades (the price: traffic that pauses for a whole
 * interval starts its next burst on the cold share until its next report is answered).
 *
 * Who reports. A key reports when its smoothed demand exceeds the cold share c / N, or while it
 * holds a lease. A leased key whose demand falls to the cold share or below drops its lease at
 * once (stepping down is always safe) and sends one release (demand 0) so the owner can give the
 * share to the others. A key that sees nothing for a whole window and holds no lease is
 * forgotten. So a long tail of quiet keys costs a table slot while active and no traffic ever.
 *
 * The owner's division. With N the divisor (share core: live members, or the held peak) and R
 * the replicas reporting a key, every replica not in R may run on cold = floor(c x 2^20 / N),
 * so the owner divides A = 2^20 - (N - |R|) x cold among R by max-min fairness (water-filling:
 * raise every share together, freezing a reporter when its demand is met), never below cold,
 * and spreads what the demands leave over evenly; the shares sum to exactly A, so with the cold
 * replicas the fleet sums to at most the whole amount. Each reporter gets a lease: its share and
 * a lifetime of lease_intervals demand intervals (3), counted from receipt on the replica's own
 * clock (clocks need not agree). Reports arrive every interval, so a live lease is refreshed
 * every interval; a lease that is not refreshed lapses and the replica steps down to the cold
 * share. A reporter that has not reported for a lease lifetime leaves R.
 *
 * Timing. A demand change is in the next report (at most one interval), and in the owner's next
 * grants (at most one more): shares follow a reported demand within two intervals. A change in
 * who reports a key (a new reporter, a release) is answered at once rather than at the owner's
 * tick (demand_flush; passes at least interval / 8 apart). So when demand moves from site A to
 * site B, B reports at its first tick, A releases at its second (its first bucket with no
 * arrivals) and the owner hands B the released share on receipt: within two intervals of the
 * move, plus the network. A partial fall follows the mean (at most the window).
 *
 * The bound. Within one owner's grants the fleet stays within the amount (up to grants in
 * flight: a lowered and a raised lease do not arrive at the same instant). When ownership moves,
 * the old owner's leases stay valid beside the new owner's until they lapse: at most 2 x the
 * amount, for at most one lease lifetime after the change (plus one interval for a grant in
 * flight). demand_disclose says `moving` for that long after every member-set change this
 * replica sees, and discloses the doubled bound. While the replicas' views differ, two owners can
 * each divide the amount among the replicas that agree with them (never both for one replica):
 * the same 2 x, for as long as the views differ plus a lease lifetime. Each replica's `moving`
 * starts when it sees the change, so the union over the fleet covers that; a single replica's
 * disclosure does not cover another replica's lateness (SWIM spreads a change in about a second).
 *
 * Bounds. Every table is sized at demand_new and never grows:
 *   keys_max    keys measured here. A new key beyond it runs on the cold share unmeasured
 *               (untracked_arrivals) until an idle key frees a slot.
 *   owned_max   keys owned here with reporters; leases_max (key, reporter) pairs. A report
 *               beyond either is refused (reports_refused): that reporter keeps the cold share,
 *               which the division already counts it at, so the sum still holds.
 *   members_max members considered for ownership; the rest are left out and counted.
 *   datagram_max payload bytes; reports and grants are batched up to it (and 255 items).
 */
#include "demand.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demand_wire.h"

#define NIL UINT32_MAX
#define MS INT64_C(1000000)

/* ---- hashing ------------------------------------------------------------------------------- */

static uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= UINT64_C(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k *= UINT64_C(0xc4ceb9fe1a85ec53);
    k ^= k >> 33;
    return k;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t len)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    return h;
}

#define FNV_BASIS UINT64_C(0xcbf29ce484222325)

static uint64_t member_hash(const char *id, size_t len)
{
    return fmix64(fnv1a(FNV_BASIS, id, len));
}

static uint64_t key_hash(uint64_t identity, const void *key, size_t len)
{
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(identity >> (8 * i)); /* little endian on every host */
    return fmix64(fnv1a(fnv1a(FNV_BASIS, id, 8), key, len));
}

/* ---- records and their index --------------------------------------------------------------- */

/* What identifies a key; the first member of both record types, so one index serves both. */
typedef struct keyref {
    uint64_t identity;
    uint64_t hash; /* key_hash(identity, key) */
    uint32_t key_len;
    uint8_t key[DEMAND_KEY_MAX];
} keyref_t;

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

/* Open addressing with linear probing over a record array; slot = record index + 1, 0 empty.
 * Capacity is a power of two at least twice the records, so a probe always ends. */
typedef struct index {
    uint32_t *slot;
    uint32_t mask;
    const char *base; /* the records; the keyref is at the start of each */
    size_t stride;
} index_t;

static const keyref_t *rec_key(const index_t *x, uint32_t rec)
{
    return (const keyref_t *)(x->base + (size_t)rec * x->stride);
}

static bool key_eq(const keyref_t *k, uint64_t identity, uint64_t hash, const void *key, size_t len)
{
    return k->hash == hash && k->identity == identity && k->key_len == len &&
           memcmp(k->key, key, len) == 0;
}

static uint32_t index_find(const index_t *x, uint64_t identity, uint64_t hash, const void *key,
                           size_t len)
{
    for (uint32_t b = (uint32_t)hash & x->mask;; b = (b + 1) & x->mask) {
        uint32_t s = x->slot[b];
        if (s == 0)
            return NIL;
        if (key_eq(rec_key(x, s - 1), identity, hash, key, len))
            return s - 1;
    }
}

static void index_put(index_t *x, uint32_t rec)
{
    uint32_t b = (uint32_t)rec_key(x, rec)->hash & x->mask;
    while (x->slot[b])
        b = (b + 1) & x->mask;
    x->slot[b] = rec + 1;
}

/* Removes a record and shifts the probe chain back over the hole (no tombstones). */
static void index_del(index_t *x, uint32_t rec)
{
    uint32_t i = (uint32_t)rec_key(x, rec)->hash & x->mask;
    while (x->slot[i] != rec + 1)
        i = (i + 1) & x->mask;
    x->slot[i] = 0;
    for (uint32_t j = (i + 1) & x->mask; x->slot[j]; j = (j + 1) & x->mask) {
        uint32_t home = (uint32_t)rec_key(x, x->slot[j] - 1)->hash & x->mask;
        /* move j into the hole unless its home lies cyclically in (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            x->slot[i] = x->slot[j];
            x->slot[j] = 0;
            i = j;
        }
    }
}

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

void demand_config_default(demand_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->interval_ns = 500 * MS;
    cfg->window_ns = 2000 * MS;
    cfg->lease_intervals = 3;
    cfg->cold_num = 52429; /* 0.05 x 2^20, rounded */
    cfg->keys_max = 4096;
    cfg->owned_max = 4096;
    cfg->leases_max = 16384;
    cfg->members_max = 1024;
    cfg->datagram_max = 1150;
}

void demand_config_from_share(demand_config_t *out, const cfg_share_t *share)
{
    demand_config_default(out);
    out->interval_ns = share->demand_interval_ns;
    double c = share->cold_share * DEMAND_SHARE_DEN + 0.5;
    out->cold_num = c < 1 ? 1 : c >= DEMAND_SHARE_DEN ? DEMAND_SHARE_DEN : (uint32_t)c;
    int64_t w = 2000 * MS;
    if (w < out->interval_ns)
        w = out->interval_ns;
    if (w > DEMAND_WINDOW_MAX * out->interval_ns)
        w = DEMAND_WINDOW_MAX * out->interval_ns;
    out->window_ns = w;
    /* shared_state.share.demand_keys: keys measured and keys owned; four reporters per owned
     * key on average before reports are refused */
    out->keys_max = out->owned_max = (uint32_t)share->demand_keys;
    out->leases_max = 4 * out->keys_max;
}

/* Names the field of demand_config_t that is out of range (the path) and its range. */
static int check_config(const demand_config_t *c, tt_err_t *err)
{
    if (c->interval_ns < MS || c->interval_ns > 60 * 1000 * MS)
        return tt_err_set(err, DEMAND_ECONFIG, "interval_ns", "between 1 ms and 60 s");
    if (c->window_ns < c->interval_ns || c->window_ns > DEMAND_WINDOW_MAX * c->interval_ns)
        return tt_err_set(err, DEMAND_ECONFIG, "window_ns", "between 1 and 8 intervals");
    if (c->lease_intervals < 2 || c->lease_intervals * c->interval_ns > DEMAND_WIRE_TTL_MAX_MS * MS)
        return tt_err_set(err, DEMAND_ECONFIG, "lease_intervals",
                          "at least 2, a lifetime of at most 180 s");
    if (c->cold_num < 1 || c->cold_num > DEMAND_SHARE_DEN)
        return tt_err_set(err, DEMAND_ECONFIG, "cold_num", "1 .. 2^20 (c in (0, 1])");
    if (c->keys_max < 1 || c->keys_max > (1u << 24))
        return tt_err_set(err, DEMAND_ECONFIG, "keys_max", "1 .. 2^24");
    if (c->owned_max < 1 || c->owned_max > (1u << 24))
        return tt_err_set(err, DEMAND_ECONFIG, "owned_max", "1 .. 2^24");
    if (c->leases_max < 1 || c->leases_max > (1u << 26))
        return tt_err_set(err, DEMAND_ECONFIG, "leases_max", "1 .. 2^26");
    if (c->members_max < 1 || c->members_max > 65536)
        return tt_err_set(err, DEMAND_ECONFIG, "members_max", "1 .. 65536");
    if (c->datagram_max <
            DEMAND_WIRE_HEAD_MAX + demand_wire_item_max(DEMAND_GRANT, DEMAND_KEY_MAX) ||
        c->datagram_max > DEMAND_WIRE_DATAGRAM_MAX)
        return tt_err_set(err, DEMAND_ECONFIG, "datagram_max",
                          "room for one item of a 256-byte key, at most 1400");
    return 0;
}

static uint32_t pow2_above(uint32_t n)
{
    uint32_t p = 16;
    while (p < 2 * n)
        p <<= 1;
    return p;
}

static void *alloc_n(size_t n, size_t size, bool *ok)
{
    void *p = calloc(n ? n : 1, size);
    if (!p)
        *ok = false;
    return p;
}

static void freelist_fill(freelist_t *f, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        f->idx[i] = n - 1 - i; /* pops 0 first */
    f->n = n;
}

int demand_new(demand_core_t **out, const demand_config_t *cfg, const char *self_id,
               size_t self_len, tt_err_t *err)
{
    *out = NULL;
    int rc = check_config(cfg, err);
    if (rc < 0)
        return rc;
    if (self_len < 1 || self_len > DEMAND_ID_MAX)
        return tt_err_set(err, DEMAND_ECONFIG, "self_id", "%zu bytes, 1 .. 128", self_len);
    demand_core_t *c = calloc(1, sizeof(*c));
    if (!c)
        return tt_err_set(err, DEMAND_ENOMEM, "", "the demand core");
    c->cfg = *cfg;
    c->nbuckets = (uint32_t)((cfg->window_ns + cfg->interval_ns - 1) / cfg->interval_ns);
    c->lease_ns = cfg->lease_intervals * cfg->interval_ns;
    c->epoch = 1;
    c->flush_at = INT64_MAX;
    c->flush_quiet_until = INT64_MIN;

    bool ok = true;
    uint32_t pend = cfg->keys_max > cfg->leases_max ? cfg->keys_max : cfg->leases_max;
    c->members = alloc_n(cfg->members_max, sizeof(member_t), &ok);
    c->entries = alloc_n(cfg->keys_max, sizeof(entry_t), &ok);
    c->entry_ix = (index_t){.mask = pow2_above(cfg->keys_max) - 1,
                            .base = (const char *)c->entries,
                            .stride = sizeof(entry_t)};
    c->entry_ix.slot = alloc_n(c->entry_ix.mask + 1u, sizeof(uint32_t), &ok);
    c->entry_free.idx = alloc_n(cfg->keys_max, sizeof(uint32_t), &ok);
    c->owned = alloc_n(cfg->owned_max, sizeof(owned_t), &ok);
    c->owned_ix = (index_t){.mask = pow2_above(cfg->owned_max) - 1,
                            .base = (const char *)c->owned,
                            .stride = sizeof(owned_t)};
    c->owned_ix.slot = alloc_n(c->owned_ix.mask + 1u, sizeof(uint32_t), &ok);
    c->owned_free.idx = alloc_n(cfg->owned_max, sizeof(uint32_t), &ok);
    c->reporters = alloc_n(cfg->leases_max, sizeof(reporter_t), &ok);
    c->rep_free.idx = alloc_n(cfg->leases_max, sizeof(uint32_t), &ok);
    c->pend = alloc_n(pend, sizeof(pending_t), &ok);
    c->need = alloc_n(cfg->members_max, sizeof(uint32_t), &ok);
    c->share = alloc_n(cfg->members_max, sizeof(uint32_t), &ok);
    c->order = alloc_n(cfg->members_max, sizeof(uint64_t), &ok);
    c->rep_of = alloc_n(cfg->members_max, sizeof(uint32_t), &ok);
    c->txbuf = alloc_n(cfg->datagram_max, 1, &ok);
    if (!ok) {
        demand_free(c);
        return tt_err_set(err, DEMAND_ENOMEM, "", "the demand core's tables");
    }
    freelist_fill(&c->entry_free, cfg->keys_max);
    freelist_fill(&c->owned_free, cfg->owned_max);
    freelist_fill(&c->rep_free, cfg->leases_max);
    c->self_hash = member_hash(self_id, self_len);
    c->members[0].hash = c->self_hash;
    c->members[0].id_len = (uint32_t)self_len;
    memcpy(c->members[0].id, self_id, self_len);
    c->nmembers = 1;
    *out = c;
    return 0;
}

void demand_free(demand_core_t *c)
{
    if (!c)
        return;
    free(c->members);
    free(c->entries);
    free(c->entry_ix.slot);
    free(c->entry_free.idx);
    free(c->owned);
    free(c->owned_ix.slot);
    free(c->owned_free.idx);
    free(c->reporters);
    free(c->rep_free.idx);
    free(c->pend);
    free(c->need);
    free(c->share);
    free(c->order);
    free(c->rep_of);
    free(c->txbuf);
    free(c);
}

const demand_counters_t *demand_counters(const demand_core_t *c)
{
    return &c->counters;
}

int64_t demand_units(int64_t amount, uint32_t num)
{
    return amount <= 0 ? 0 : (int64_t)((__int128)amount * num / DEMAND_SHARE_DEN);
}

uint32_t demand_cold_num(uint32_t c_num, uint32_t divisor)
{
    uint32_t n = divisor ? c_num / divisor : c_num;
    return n ? n : 1;
}

/* ---- members and ownership ----------------------------------------------------------------- */

static int cmp_member(const void *a, const void *b)
{
    uint64_t x = ((const member_t *)a)->hash, y = ((const member_t *)b)->hash;
    return x < y ? -1 : x > y;
}

/* The index of the member with this hash, or NIL. */
static uint32_t member_find(const demand_core_t *c, uint64_t hash)
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

int demand_set_members(demand_core_t *c, const demand_member_t *m, size_t n, uint32_t divisor,
                       int64_t now)
{
    /* The old set's fingerprint (its size and an order-free sum of mixed hashes) is taken before
     * the list is rewritten in place: self first, then the members given, sorted, deduplicated. */
    uint64_t old_sum = 0, new_sum = 0;
    uint32_t old_n = c->nmembers;
    for (uint32_t i = 0; i < old_n; i++)
        old_sum += fmix64(c->members[i].hash);
    c->members[0] = c->members[member_find(c, c->self_hash)];
    uint32_t k = 1;
    uint64_t left_out = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].id_len < 1 || m[i].id_len > DEMAND_ID_MAX)
            continue;
        uint64_t h = member_hash(m[i].id, m[i].id_len);
        if (h == c->self_hash)
            continue;
        if (k == c->cfg.members_max) {
            left_out++;
            continue;
        }
        c->members[k].hash = h;
        c->members[k].id_len = (uint32_t)m[i].id_len;
        memcpy(c->members[k].id, m[i].id, m[i].id_len);
        k++;
    }
    qsort(c->members, k, sizeof(member_t), cmp_member);
    uint32_t u = 0;
    for (uint32_t i = 0; i < k; i++)
        if (u == 0 || c->members[i].hash != c->members[u - 1].hash)
            c->members[u++] = c->members[i];
    c->nmembers = u;
    for (uint32_t i = 0; i < u; i++)
        new_sum += fmix64(c->members[i].hash);
    c->counters.members_left_out = left_out;
    /* A set differs from the old one iff the size or the sum does; a collision of both is 2^-64
     * and would only delay `moving` to the next change. */
    if (u != old_n || new_sum != old_sum) {
        c->epoch++;
        c->moved_ns = now;
        c->ever_moved = true;
    }
    c->divisor = divisor;
    return left_out ? DEMAND_EMEMBERS : 0;
}

/* The owner (a member index) of key hash kh: the highest rendezvous score. */
static uint32_t owner_of(const demand_core_t *c, uint64_t kh)
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

bool demand_owner(const demand_core_t *c, uint64_t identity, const void *key, size_t key_len,
                  const char **id, size_t *id_len)
{
    if (c->nmembers == 0 || key_len > DEMAND_KEY_MAX)
        return false;
    const member_t *m = &c->members[owner_of(c, key_hash(identity, key, key_len))];
    *id = m->id;
    *id_len = m->id_len;
    return true;
}

/* The entry's owner hash, recomputed when the member set changed since. */
static uint64_t entry_owner(const demand_core_t *c, entry_t *e)
{
    if (e->owner_epoch != c->epoch) {
        e->owner = c->members[owner_of(c, e->k.hash)].hash;
        e->owner_epoch = c->epoch;
    }
    return e->owner;
}

/* ---- the decision path --------------------------------------------------------------------- */

static uint32_t cold(const demand_core_t *c)
{
    return demand_cold_num(c->cfg.cold_num, c->divisor);
}

/* A lease is live from its grant to its lapse; a clock that went back before the grant ends it
 * (it must not stretch a lease by the jump). */
static bool lease_live(const entry_t *e, int64_t now)
{
    return e->lease && now >= e->lease_at && now < e->lease_until;
}

static uint32_t entry_share(const demand_core_t *c, const entry_t *e, int64_t now)
{
    return lease_live(e, now) ? e->lease : cold(c);
}

uint32_t demand_share(const demand_core_t *c, const cfg_limit_t *limit, const void *key,
                      size_t key_len, int64_t now)
{
    if (c->divisor == 0)
        return 0;
    if (key_len > DEMAND_KEY_MAX)
        return cold(c);
    uint64_t h = key_hash(limit->identity, key, key_len);
    uint32_t i = index_find(&c->entry_ix, limit->identity, h, key, key_len);
    return i == NIL ? cold(c) : entry_share(c, &c->entries[i], now);
}

uint32_t demand_arrive(demand_core_t *c, const cfg_limit_t *limit, const void *key, size_t key_len,
                       int64_t cost, int64_t now)
{
    if (c->divisor == 0)
        return 0;
    if (key_len > DEMAND_KEY_MAX || limit->amount <= 0 || limit->period_ns <= 0) {
        c->counters.untracked_arrivals++;
        return cold(c);
    }
    uint64_t h = key_hash(limit->identity, key, key_len);
    uint32_t i = index_find(&c->entry_ix, limit->identity, h, key, key_len);
    if (i == NIL) {
        if (c->entry_free.n == 0) {
            c->counters.untracked_arrivals++;
            return cold(c);
        }
        i = c->entry_free.idx[--c->entry_free.n];
        entry_t *e = &c->entries[i];
        memset(e, 0, sizeof(*e));
        e->k.identity = limit->identity;
        e->k.hash = h;
        e->k.key_len = (uint32_t)key_len;
        memcpy(e->k.key, key, key_len);
        e->used = true;
        e->amount = limit->amount;
        e->period_ns = limit->period_ns;
        index_put(&c->entry_ix, i);
    }
    entry_t *e = &c->entries[i];
    if (cost > 0)
        e->count = (uint64_t)cost > UINT64_MAX - e->count ? UINT64_MAX : e->count + (uint64_t)cost;
    return entry_share(c, e, now);
}

int demand_limiter(demand_core_t *c, const cfg_limit_t *limit, const void *key, size_t key_len,
                   int64_t cost, int64_t now, ra_limiter_t *out)
{
    *out = limit->limiter;
    uint32_t num = demand_arrive(c, limit, key, key_len, cost, now);
    if (num == 0)
        return DEMAND_EUNARMED;
    return ra_limiter_effective(&limit->limiter, num, DEMAND_SHARE_DEN, cfg_type_unit(limit->type),
                                out);
}

/* ---- the owner ----------------------------------------------------------------------------- */

static void owned_release(demand_core_t *c, uint32_t oi)
{
    owned_t *o = &c->owned[oi];
    for (uint32_t r = o->head; r != NIL; r = c->reporters[r].next)
        c->rep_free.idx[c->rep_free.n++] = r;
    index_del(&c->owned_ix, oi);
    o->used = false;
    c->owned_free.idx[c->owned_free.n++] = oi;
}

/* The gap between two early grant passes: changes closer together wait for one pass, so churn
 * at the cold-share threshold costs at most interval / gap extra passes per interval. */
#define FLUSH_GAPS_PER_INTERVAL 8

/* A reporter of `o` joined or left: its reporters' shares change, so grants go out early (at once,
 * or when the quiet gap after the last early pass ends) rather than at the next tick. */
static void owner_changed(demand_core_t *c, owned_t *o, int64_t now)
{
    int64_t gap = c->cfg.interval_ns / FLUSH_GAPS_PER_INTERVAL;
    /* the quiet gap, clamped so a clock that went back cannot push the pass past one gap */
    int64_t wait = c->flush_quiet_until > now ? c->flush_quiet_until - now : 0;
    int64_t at = now + (wait < gap ? wait : gap);
    o->changed = true;
    if (at < c->flush_at)
        c->flush_at = at;
}

/* A report from `member` about a key: records its demand (0 removes it). */
static void owner_accept(demand_core_t *c, uint64_t member, const demand_item_t *it, int64_t now)
{
    uint64_t h = key_hash(it->identity, it->key, it->key_len);
    uint32_t oi = index_find(&c->owned_ix, it->identity, h, it->key, it->key_len);
    if (oi == NIL) {
        if (it->value == 0)
            return; /* a release for a key we hold nothing of */
        if (c->members[owner_of(c, h)].hash != c->self_hash) {
            c->counters.reports_misrouted++; /* the views disagree on the owner */
            return;
        }
        if (c->owned_free.n == 0 || c->rep_free.n == 0) {
            c->counters.reports_refused++;
            return;
        }
        oi = c->owned_free.idx[--c->owned_free.n];
        owned_t *o = &c->owned[oi];
        memset(o, 0, sizeof(*o));
        o->k.identity = it->identity;
        o->k.hash = h;
        o->k.key_len = it->key_len;
        memcpy(o->k.key, it->key, it->key_len);
        o->used = true;
        o->head = NIL;
        o->epoch = c->epoch;
        index_put(&c->owned_ix, oi);
    }
    owned_t *o = &c->owned[oi];
    uint32_t *link = &o->head;
    while (*link != NIL && c->reporters[*link].member != member)
        link = &c->reporters[*link].next;
    if (it->value == 0) {
        if (*link != NIL) {
            uint32_t r = *link;
            *link = c->reporters[r].next;
            c->rep_free.idx[c->rep_free.n++] = r;
            if (--o->nrep == 0)
                owned_release(c, oi);
            else
                owner_changed(c, o, now);
        }
        return;
    }
    if (*link == NIL) {
        if (c->rep_free.n == 0 || o->nrep >= c->cfg.members_max) {
            c->counters.reports_refused++;
            return;
        }
        uint32_t r = c->rep_free.idx[--c->rep_free.n];
        c->reporters[r] = (reporter_t){.member = member, .next = o->head};
        o->head = r;
        o->nrep++;
        owner_changed(c, o, now);
    }
    reporter_t *rp = &c->reporters[*link == NIL ? o->head : *link];
    rp->need = it->value > DEMAND_SHARE_DEN ? DEMAND_SHARE_DEN : it->value;
    rp->heard_ns = now;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void demand_waterfill(const uint32_t *need, uint32_t n, uint64_t amount, uint32_t floor,
                      uint32_t *share, uint64_t *order)
{
    if (n == 0)
        return;
    for (uint32_t i = 0; i < n; i++)
        order[i] = (uint64_t)(need[i] > floor ? need[i] : floor) << 32 | i;
    qsort(order, n, sizeof(order[0]), cmp_u64);
    uint64_t remaining = amount;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t want = order[k] >> 32, left = n - k, fair = remaining / left;
        if (want <= fair) {
            share[(uint32_t)order[k]] = (uint32_t)want;
            remaining -= want;
            continue;
        }
        /* the rest all want more than an even split: the water level, remainder to the first */
        uint64_t extra = remaining % left;
        for (uint32_t j = k; j < n; j++)
            share[(uint32_t)order[j]] = (uint32_t)(fair + (j - k < extra));
        return;
    }
    /* every demand met: spread what is left evenly */
    for (uint32_t j = 0; j < n; j++)
        share[(uint32_t)order[j]] += (uint32_t)(remaining / n + (j < remaining % n));
}

/* ---- sending ------------------------------------------------------------------------------- */

typedef struct batch {
    demand_kind_t kind;
    uint32_t to; /* member index, NIL when empty */
    uint32_t n;
    size_t size;
    demand_emit_fn emit;
    void *ctx;
} batch_t;

static void batch_flush(demand_core_t *c, batch_t *b)
{
    if (b->n == 0)
        return;
    int len = demand_wire_encode(b->kind, c->items, b->n, c->txbuf, c->cfg.datagram_max);
    if (len > 0) { /* the batch is sized to fit, so this always holds */
        const member_t *m = &c->members[b->to];
        b->emit(b->ctx, m->id, m->id_len, c->txbuf, (size_t)len);
        c->counters.tx_packets++;
        c->counters.tx_bytes += (uint64_t)len;
        if (b->kind == DEMAND_REPORT)
            c->counters.reports_sent += b->n;
        else
            c->counters.grants_sent += b->n;
    }
    b->n = 0;
    b->size = DEMAND_WIRE_HEAD_MAX;
}

static void batch_add(demand_core_t *c, batch_t *b, uint32_t to, const demand_item_t *it)
{
    size_t need = demand_wire_item_max(b->kind, it->key_len);
    if (b->n &&
        (to != b->to || b->n == DEMAND_WIRE_ITEMS_MAX || b->size + need > c->cfg.datagram_max))
        batch_flush(c, b);
    b->to = to;
    c->items[b->n++] = *it;
    b->size += need;
}

static int cmp_pending(const void *a, const void *b)
{
    const pending_t *x = a, *y = b;
    if (x->to != y->to)
        return x->to < y->to ? -1 : 1;
    return x->rec < y->rec ? -1 : x->rec > y->rec;
}

/* Applies a grant from member `from` to the entry it names. */
static void lease_apply(demand_core_t *c, uint64_t from, const demand_item_t *it, int64_t now)
{
    uint64_t h = key_hash(it->identity, it->key, it->key_len);
    uint32_t i = index_find(&c->entry_ix, it->identity, h, it->key, it->key_len);
    entry_t *e = i == NIL ? NULL : &c->entries[i];
    /* only the owner in this view, and only for a key still hot here (not just released) */
    if (!e || !e->hot || entry_owner(c, e) != from) {
        c->counters.grants_ignored++;
        return;
    }
    int64_t ttl = (int64_t)it->ttl_ms * MS;
    e->lease = it->value;
    e->lease_at = now;
    e->lease_until = now + (ttl < c->lease_ns ? ttl : c->lease_ns);
}

/* ---- the tick ------------------------------------------------------------------------------ */

/* The rate of `count` units over `elapsed` ns, in DEMAND_SHARE_DEN units of amount per period. */
static uint32_t bucket_rate(const entry_t *e, int64_t elapsed)
{
    unsigned __int128 x = (unsigned __int128)e->count * (uint64_t)e->period_ns / (uint64_t)elapsed;
    unsigned __int128 cap = ((unsigned __int128)DEMAND_DEMAND_CAP * (uint64_t)e->amount) >> 20;
    if (x > cap)
        return DEMAND_DEMAND_CAP;
    x = x * DEMAND_SHARE_DEN / (uint64_t)e->amount;
    return x > DEMAND_DEMAND_CAP ? DEMAND_DEMAND_CAP : (uint32_t)x;
}

/* Closes the entry's bucket; returns the demand to report (UINT32_MAX: none, 0: a release). */
static uint32_t entry_close(demand_core_t *c, entry_t *e, int64_t elapsed, int64_t now)
{
    uint32_t rate = bucket_rate(e, elapsed);
    e->count = 0;
    /* A bucket the cold share covers ends the claim at once: the site's arrivals stopped (the
     * demand moved elsewhere) or fell to what c / N serves, and a lease kept while the mean
     * fades would hold share another site needs for up to the whole window. The ring restarts
     * from this bucket. */
    if (rate <= cold(c))
        memset(e->rates, 0, sizeof(e->rates));
    e->rates[e->ring_pos] = rate;
    e->ring_pos = (uint8_t)((e->ring_pos + 1) % c->nbuckets);
    uint64_t sum = 0;
    for (uint32_t b = 0; b < c->nbuckets; b++)
        sum += e->rates[b];
    uint32_t mean = (uint32_t)(sum / c->nbuckets);
    e->estimate = rate > mean ? rate : mean;
    if (!lease_live(e, now))
        e->lease = 0; /* lapsed: back to the cold share */
    bool was_leased = e->lease != 0;
    e->hot = e->estimate > cold(c);
    if (e->hot)
        return e->estimate;
    e->lease = 0;
    return was_leased ? 0 : UINT32_MAX;
}

static void entry_forget(demand_core_t *c, uint32_t i)
{
    index_del(&c->entry_ix, i);
    c->entries[i].used = false;
    c->entry_free.idx[c->entry_free.n++] = i;
}

static bool entry_idle(const demand_core_t *c, const entry_t *e)
{
    if (e->hot || e->lease || e->count)
        return false;
    for (uint32_t b = 0; b < c->nbuckets; b++)
        if (e->rates[b])
            return false;
    return true;
}

static demand_item_t item_of(const keyref_t *k, uint32_t value, uint32_t ttl_ms)
{
    return (demand_item_t){.identity = k->identity,
                           .key = k->key,
                           .key_len = k->key_len,
                           .value = value,
                           .ttl_ms = ttl_ms};
}

/* Replica side: measure, then report per owner (self directly). */
static void tick_reports(demand_core_t *c, int64_t elapsed, int64_t now, demand_emit_fn emit,
                         void *ctx)
{
    uint32_t np = 0, self = member_find(c, c->self_hash);
    for (uint32_t i = 0; i < c->cfg.keys_max; i++) {
        entry_t *e = &c->entries[i];
        if (!e->used)
            continue;
        uint32_t v = entry_close(c, e, elapsed, now);
        if (v != UINT32_MAX)
            c->pend[np++] =
                (pending_t){.to = member_find(c, entry_owner(c, e)), .rec = i, .value = v};
        else if (entry_idle(c, e))
            entry_forget(c, i);
    }
    qsort(c->pend, np, sizeof(pending_t), cmp_pending);
    batch_t b = {
        .kind = DEMAND_REPORT, .to = NIL, .size = DEMAND_WIRE_HEAD_MAX, .emit = emit, .ctx = ctx};
    for (uint32_t p = 0; p < np; p++) {
        demand_item_t it = item_of(&c->entries[c->pend[p].rec].k, c->pend[p].value, 0);
        if (c->pend[p].to == self)
            owner_accept(c, c->self_hash, &it, now);
        else
            batch_add(c, &b, c->pend[p].to, &it);
    }
    batch_flush(c, &b);
}

/* Owner side: drop what lapsed or moved away, divide, and grant per reporter (self directly).
 * Every owned key at a tick; only the keys whose reporters changed in an early pass. */
static void grant_pass(demand_core_t *c, int64_t now, bool changed_only, demand_emit_fn emit,
                       void *ctx)
{
    uint32_t np = 0, self = member_find(c, c->self_hash), cold_n = cold(c);
    uint32_t ttl_ms = (uint32_t)(c->lease_ns / MS);
    for (uint32_t oi = 0; oi < c->cfg.owned_max; oi++) {
        owned_t *o = &c->owned[oi];
        if (!o->used || (changed_only && !o->changed))
            continue;
        o->changed = false;
        if (o->epoch != c->epoch) {
            o->epoch = c->epoch;
            if (c->members[owner_of(c, o->k.hash)].hash != c->self_hash) {
                owned_release(c, oi); /* moved away: the new owner takes over */
                continue;
            }
        }
        uint32_t n = 0;
        for (uint32_t *link = &o->head; *link != NIL;) {
            reporter_t *r = &c->reporters[*link];
            uint32_t m = member_find(c, r->member);
            if (now - r->heard_ns >= c->lease_ns || m == NIL) { /* silent or gone */
                uint32_t dead = *link;
                *link = r->next;
                c->rep_free.idx[c->rep_free.n++] = dead;
                o->nrep--;
                continue;
            }
            c->need[n] = r->need;
            c->rep_of[n++] = *link;
            link = &r->next;
        }
        if (n == 0) {
            owned_release(c, oi);
            continue;
        }
        uint64_t amount = DEMAND_SHARE_DEN;
        if (c->divisor > n)
            amount -= (uint64_t)(c->divisor - n) * cold_n;
        uint32_t floor = cold_n < amount / n ? cold_n : (uint32_t)(amount / n);
        demand_waterfill(c->need, n, amount, floor, c->share, c->order);
        for (uint32_t j = 0; j < n; j++) {
            reporter_t *r = &c->reporters[c->rep_of[j]];
            r->share = c->share[j];
            c->pend[np++] =
                (pending_t){.to = member_find(c, r->member), .rec = oi, .value = r->share};
        }
    }
    qsort(c->pend, np, sizeof(pending_t), cmp_pending);
    batch_t b = {
        .kind = DEMAND_GRANT, .to = NIL, .size = DEMAND_WIRE_HEAD_MAX, .emit = emit, .ctx = ctx};
    for (uint32_t p = 0; p < np; p++) {
        demand_item_t it = item_of(&c->owned[c->pend[p].rec].k, c->pend[p].value, ttl_ms);
        if (c->pend[p].to == self)
            lease_apply(c, c->self_hash, &it, now);
        else
            batch_add(c, &b, c->pend[p].to, &it);
    }
    batch_flush(c, &b);
}

void demand_tick(demand_core_t *c, int64_t now, demand_emit_fn emit, void *ctx)
{
    int64_t elapsed = c->ticked ? now - c->last_tick : c->cfg.interval_ns;
    if (elapsed < MS)
        elapsed = c->cfg.interval_ns; /* twice at once, or the clock went back: nominal length */
    c->ticked = true;
    c->last_tick = now;
    c->next_tick = now + c->cfg.interval_ns;
    if (c->divisor == 0)
        return; /* unarmed: nothing is measured, nothing is owned */
    tick_reports(c, elapsed, now, emit, ctx);
    grant_pass(c, now, false, emit, ctx);
    c->flush_at = INT64_MAX; /* every change is answered */
}

int64_t demand_next_deadline(const demand_core_t *c)
{
    return c->ticked ? c->next_tick : INT64_MIN;
}

void demand_flush(demand_core_t *c, int64_t now, demand_emit_fn emit, void *ctx)
{
    if (now < c->flush_at)
        return;
    c->flush_at = INT64_MAX;
    c->flush_quiet_until = now + c->cfg.interval_ns / FLUSH_GAPS_PER_INTERVAL;
    grant_pass(c, now, true, emit, ctx);
}

int64_t demand_flush_deadline(const demand_core_t *c)
{
    return c->flush_at;
}

/* ---- receiving ----------------------------------------------------------------------------- */

int demand_receive(demand_core_t *c, int64_t now, const char *from, size_t from_len,
                   const uint8_t *bytes, size_t len, tt_err_t *err)
{
    c->counters.rx_packets++;
    c->counters.rx_bytes += len;
    uint64_t fh = from_len >= 1 && from_len <= DEMAND_ID_MAX ? member_hash(from, from_len) : 0;
    if (!fh || member_find(c, fh) == NIL || fh == c->self_hash) {
        c->counters.rx_bad++;
        return tt_err_set(err, DEMAND_ESENDER, "from", "\"%.*s\" is not a live peer",
                          (int)(from_len > DEMAND_ID_MAX ? DEMAND_ID_MAX : from_len), from);
    }
    int rc = demand_wire_decode(bytes, len, &c->rx, err);
    if (rc < 0) {
        c->counters.rx_bad++;
        return rc;
    }
    if (c->divisor == 0)
        return 0; /* unarmed: not taking part yet */
    for (uint32_t i = 0; i < c->rx.n; i++) {
        if (c->rx.kind == DEMAND_REPORT) {
            c->counters.reports_received++;
            owner_accept(c, fh, &c->rx.items[i], now);
        } else {
            c->counters.grants_received++;
            lease_apply(c, fh, &c->rx.items[i], now);
        }
    }
    return 0;
}

/* ---- disclosure ---------------------------------------------------------------------------- */

void demand_disclose(const demand_core_t *c, const cfg_limit_t *limit, int64_t now,
                     demand_disclosure_t *out)
{
    memset(out, 0, sizeof(*out));
    uint64_t id = limit->identity;
    for (uint32_t i = 0; i < c->cfg.keys_max; i++) {
        const entry_t *e = &c->entries[i];
        if (!e->used || e->k.identity != id)
            continue;
        out->keys_tracked++;
        out->keys_hot += e->hot;
        if (lease_live(e, now)) {
            out->keys_leased++;
            if (e->lease > out->largest_lease_num)
                out->largest_lease_num = e->lease;
            if (now - e->lease_at > out->largest_lease_age_ns)
                out->largest_lease_age_ns = now - e->lease_at;
        }
    }
    for (uint32_t i = 0; i < c->cfg.owned_max; i++) {
        const owned_t *o = &c->owned[i];
        if (o->used && o->k.identity == id) {
            out->keys_owned++;
            out->leases_granted += o->nrep;
        }
    }
    out->cold_num = c->divisor ? cold(c) : 0;
    out->moving_until_ns = c->ever_moved ? c->moved_ns + c->lease_ns + c->cfg.interval_ns : 0;
    out->moving = c->ever_moved && now < out->moving_until_ns;
    int64_t amount = limit->amount;
    int64_t times = out->moving ? 2 : 1, b;
    out->sustained_bound = __builtin_mul_overflow(amount, times, &b) ? INT64_MAX : b;
    if (__builtin_mul_overflow(limit->burst, times, &b) ||
        __builtin_add_overflow(b, (int64_t)c->divisor * cfg_type_unit(limit->type), &b))
        b = INT64_MAX;
    out->burst_bound = b;
}
