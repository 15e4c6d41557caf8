/*
 * demand_exchange: what runs beside the decision path (design in demand.c's essay). Every demand
 * interval a replica closes its arrival buckets and reports its hot keys to their owners; an
 * owner divides each key it owns among its reporters (max-min water-filling) and grants the
 * leases, early when a reporter joins or leaves (demand_flush); and the datagrams received are
 * applied: reports to the owned keys, grants to the leases. Messages for self skip the network.
 */
#include "demand.h"

#include <stdlib.h>
#include <string.h>

#include "demand_int.h"

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
