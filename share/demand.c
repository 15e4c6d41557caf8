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
 *
 * Files. This one: the core's life, the member list and ownership, the decision path and the
 * disclosure. demand_exchange.c: the reports, the owner's division and grants, early grants and
 * receiving. demand_int.h: the state both share; demand_index.h: the key index; demand_wire.c:
 * the payloads.
 */
#include "demand.h"

#include <stdlib.h>
#include <string.h>

#include "demand_int.h"

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

/* ---- the decision path --------------------------------------------------------------------- */

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
