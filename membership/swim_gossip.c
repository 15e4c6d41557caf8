/*
 * Dissemination, above the table: the broadcast queue piggybacked on every datagram, building
 * and sealing datagrams, random choices of members, gossip rounds, push-pull and the search for
 * islands. It calls the table (swim_table.c) and nothing above; the table tells it of reclaims
 * and deaths through the hooks swim_new wires. See swim.c.
 */
#include "swim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Seals (or frames) the body in c->body into the outbox, to `to`. */
static void push_frame(swim_core_t *c, const swim_addr_t *to, size_t blen)
{
    size_t flen = blen + (c->cfg.nkeys ? SWIM_SEAL_OVERHEAD : SWIM_FRAME_HEAD);
    if (flen > SWIM_DATAGRAM_MAX ||
        !swim__grow((void **)&c->arena, &c->arena_cap, c->arena_len + flen, 1) ||
        !swim__grow((void **)&c->out.dgram, &c->out_cap, c->out.n + 1, sizeof *c->out.dgram)) {
        c->ctr.tx_overflow++;
        return;
    }
    uint8_t *dst = c->arena + c->arena_len;
    if (c->cfg.nkeys) {
        uint8_t nonce[SWIM_NONCE_BYTES];
        for (int i = 0; i < 3; i++) {
            uint64_t r = swim__rnd(c);
            memcpy(nonce + 8 * i, &r, 8);
        }
        swim_seal(c->keys[0], c->label, c->label_len, nonce, c->body, blen, dst);
    } else {
        dst[0] = SWIM_WIRE_VERSION;
        dst[1] = SWIM_MODE_PLAIN;
        memcpy(dst + SWIM_FRAME_HEAD, c->body, blen);
    }
    swim_datagram_t *d = &c->out.dgram[c->out.n++];
    d->to = *to;
    d->off = (uint32_t)c->arena_len;
    d->len = (uint32_t)flen;
    c->arena_len += flen;
    c->out.arena = c->arena;
    c->ctr.tx_packets++;
    c->ctr.tx_bytes += flen;
}

static int retransmit_limit(const swim_core_t *c)
{
    int n = c->last_live, digits = 1; /* ceil(log10(n + 1)) = decimal digits of n */
    while (n >= 10) {
        n /= 10;
        digits++;
    }
    int lim = c->cfg.retransmit_mult * digits;
    return lim < BC_BUCKETS - 1 ? lim : BC_BUCKETS - 1;
}

void swim__bc_unlink(swim_core_t *c, int32_t i)
{
    member_t *m = &c->m[i];
    if (m->bc_tx < 0)
        return;
    int b = m->bc_tx;
    if (m->bc_prev >= 0)
        c->m[m->bc_prev].bc_next = m->bc_next;
    else
        c->bc_head[b] = m->bc_next;
    if (m->bc_next >= 0)
        c->m[m->bc_next].bc_prev = m->bc_prev;
    else
        c->bc_tail[b] = m->bc_prev;
    m->bc_tx = -1;
    m->bc_prev = m->bc_next = -1;
}

static void bc_insert(swim_core_t *c, int32_t i, int b, bool at_head)
{
    member_t *m = &c->m[i];
    m->bc_tx = b;
    if (at_head) {
        m->bc_prev = -1;
        m->bc_next = c->bc_head[b];
        if (c->bc_head[b] >= 0)
            c->m[c->bc_head[b]].bc_prev = i;
        else
            c->bc_tail[b] = i;
        c->bc_head[b] = i;
    } else {
        m->bc_next = -1;
        m->bc_prev = c->bc_tail[b];
        if (c->bc_tail[b] >= 0)
            c->m[c->bc_tail[b]].bc_next = i;
        else
            c->bc_head[b] = i;
        c->bc_tail[b] = i;
    }
}

/* The table renumbered its members (reclaim): the queue's links follow. */
void swim__bc_renumber(swim_core_t *c, const int32_t *map)
{
    for (size_t i = 0; i < c->n; i++) {
        member_t *m = &c->m[i];
        if (m->bc_prev >= 0)
            m->bc_prev = map[m->bc_prev];
        if (m->bc_next >= 0)
            m->bc_next = map[m->bc_next];
    }
    for (int b = 0; b < BC_BUCKETS; b++) {
        if (c->bc_head[b] >= 0)
            c->bc_head[b] = map[c->bc_head[b]];
        if (c->bc_tail[b] >= 0)
            c->bc_tail[b] = map[c->bc_tail[b]];
    }
}

/* Queues member i's current record for dissemination, newest first; `from` is the accuser. */
void swim__broadcast(swim_core_t *c, int32_t i, uint64_t from)
{
    swim__bc_unlink(c, i);
    c->m[i].bc_from = from;
    bc_insert(c, i, 0, true);
}

void swim__member_update(const swim_core_t *c, const member_t *m, swim_update_t *u)
{
    u->state = m->state;
    u->id = swim__id_of(c, m);
    u->id_len = m->id_len;
    u->generation = m->gen;
    u->incarnation = m->inc;
    u->addr = m->addr;
    u->meta_version = m->meta_version;
    u->meta_len = m->meta_len;
    u->meta = swim__meta_of(m);
    u->from = m->bc_from;
}

/* Appends member i's record if it fits; false (and w unchanged) if not. */
static bool put_update(const swim_core_t *c, wire_pack_t *w, const member_t *m)
{
    swim_update_t u;
    size_t save = w->len;
    swim__member_update(c, m, &u);
    swim_enc_update(w, &u);
    if (w->overflow) {
        w->overflow = false;
        w->len = save;
        return false;
    }
    return true;
}

/* Fills the rest of a datagram with queued broadcasts, fewest transmits and newest first. */
static uint32_t fill_updates(swim_core_t *c, wire_pack_t *w, int32_t skip)
{
    int limit = retransmit_limit(c);
    int32_t sent[SWIM_DATAGRAM_MAX / 16];
    uint32_t n = 0;
    bool full = false;
    for (int b = 0; b < BC_BUCKETS && !full; b++) {
        for (int32_t i = c->bc_head[b]; i >= 0 && !full;) {
            int32_t next = c->m[i].bc_next;
            if (b >= limit) {
                swim__bc_unlink(c, i); /* the limit fell as the cluster shrank */
            } else if (i != skip) {
                if (put_update(c, w, &c->m[i]) && n < sizeof sent / sizeof sent[0])
                    sent[n++] = i;
                else
                    full = true;
            }
            i = next;
        }
    }
    /* moved after the walk, so one datagram never carries the same update twice */
    for (uint32_t k = 0; k < n; k++) {
        int b = c->m[sent[k]].bc_tx + 1;
        swim__bc_unlink(c, sent[k]);
        if (b < limit)
            bc_insert(c, sent[k], b, false);
    }
    return n;
}

static bool bc_pending(const swim_core_t *c)
{
    for (int b = 0; b < BC_BUCKETS; b++)
        if (c->bc_head[b] >= 0)
            return true;
    return false;
}

/*
 * Builds and queues one datagram of om->kind (om's fields for that kind; the head and the
 * updates are ours). `first` is a member whose record goes before the queued ones (the
 * suspicion told to a suspect, or our own record to a prober that still knows an older
 * generation of us), -1 for none.
 */
void swim__send_msg_with(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                         const swim_update_t *first, int32_t skip)
{
    size_t cap = SWIM_DATAGRAM_MAX - (c->cfg.nkeys ? SWIM_SEAL_OVERHEAD : SWIM_FRAME_HEAD);
    wire_pack_t w = {c->body, 0, cap, false};
    const member_t *self = &c->m[0];
    swim_enc_head(&w, c->ids, self->id_len, self->gen, now + c->wall_off, ++c->tx_seq, om->kind);
    swim_enc_msg(&w, om);
    size_t at = swim_enc_array_open(&w);
    uint32_t n = 0;
    if (first) { /* one update (<= SWIM_UPDATE_MAX) always fits after the head */
        swim_enc_update(&w, first);
        n++;
    }
    n += fill_updates(c, &w, skip);
    swim_enc_array_close(&w, at, n);
    if (w.overflow) { /* cannot happen: the head and an app payload fit below the cap */
        c->ctr.tx_overflow++;
        return;
    }
    push_frame(c, to, w.len);
}

void swim__send_msg(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                    int32_t first)
{
    swim_update_t u;
    if (first >= 0)
        swim__member_update(c, &c->m[first], &u);
    swim__send_msg_with(c, now, to, om, first >= 0 ? &u : NULL, first);
}

void swim__send_simple(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                       uint32_t probe_seq, int32_t first)
{
    swim_msg_t om = {.kind = kind, .probe_seq = probe_seq};
    swim__send_msg(c, now, to, &om, first);
}

/* A PING or PING_REQ about a member (given by its fields: a relay knows no member record). */
void swim__send_probe(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                      uint32_t probe_seq, const char *id, size_t id_len, uint64_t gen,
                      const swim_addr_t *addr, int32_t first)
{
    swim_msg_t om = {.kind = kind,
                     .probe_seq = probe_seq,
                     .target = id,
                     .target_len = id_len,
                     .target_gen = gen,
                     .target_addr = addr ? *addr : (swim_addr_t){0}};
    swim__send_msg(c, now, to, &om, first);
}

/* Up to k distinct random members (never self, never `not`) accepted by ok; into c->scratch. */
size_t swim__pick(swim_core_t *c, int64_t now, size_t k, int32_t not, pick_fn ok)
{
    size_t n = 0;
    if (c->n > 64) {
        /* big table: random slots, so a gossip round does not cost O(N) */
        for (size_t tries = 0; tries < 8 * k && n < k; tries++) {
            int32_t i = 1 + (int32_t)swim__rnd_below(c, (int64_t)c->n - 1);
            bool dup = i == not || !ok(c, &c->m[i], now);
            for (size_t j = 0; j < n && !dup; j++)
                dup = c->scratch[j] == i;
            if (!dup)
                c->scratch[n++] = i;
        }
        if (n == k)
            return k;
        n = 0; /* too few eligible among random slots: count them all */
    }
    for (size_t i = 1; i < c->n; i++)
        if ((int32_t)i != not &&ok(c, &c->m[i], now))
            c->scratch[n++] = (int32_t)i;
    if (k > n)
        k = n;
    for (size_t i = 0; i < k; i++) {
        size_t j = i + (size_t)swim__rnd_below(c, (int64_t)(n - i));
        int32_t t = c->scratch[i];
        c->scratch[i] = c->scratch[j];
        c->scratch[j] = t;
    }
    return k;
}

bool swim__ok_alive(const swim_core_t *c, const member_t *m, int64_t now)
{
    return m->state == SWIM_ALIVE;
}

static bool ok_live(const swim_core_t *c, const member_t *m, int64_t now)
{
    return swim__is_live(m->state);
}

static bool ok_dead(const swim_core_t *c, const member_t *m, int64_t now)
{
    return m->state == SWIM_DEAD;
}

static bool ok_gossip(const swim_core_t *c, const member_t *m, int64_t now)
{
    return swim__is_live(m->state) ||
           (m->state == SWIM_DEAD && now - m->state_since < c->cfg.gossip_to_dead_ns);
}

/* Our own record straight to up to `max` live members (random ones when there are more): a
 * join, and a metadata change (twice), must not wait for a straggler's push-pull. Sending does
 * not touch c->scratch. */
void swim__tell_live(swim_core_t *c, int64_t now, size_t max)
{
    if (max + 1 >= c->n) { /* every one: no need to draw (pick would cost O(N^2) here) */
        for (size_t i = 1; i < c->n; i++)
            if (swim__is_live(c->m[i].state))
                swim__send_simple(c, now, &c->m[i].addr, SWIM_GOSSIP, 0, 0);
        return;
    }
    size_t k = swim__pick(c, now, max, -1, ok_live);
    for (size_t j = 0; j < k; j++)
        swim__send_simple(c, now, &c->m[c->scratch[j]].addr, SWIM_GOSSIP, 0, 0);
}

static int64_t pushpull_interval(const swim_core_t *c)
{
    /* memberlist's pushPullScale: slower above 32 members, the message grows with N */
    int n = c->last_live;
    int64_t t = c->cfg.pushpull_interval_ns;
    if (n > 32)
        t *= (int)ceil(log2((double)n) - log2(32.0)) + 1;
    /* But the message grows linearly and that scale logarithmically: at 5,000 members push-pull
     * alone came to about 1 KiB/s per member. Each member sends its table about twice an
     * interval (its own round, and an answer to someone else's), so the interval is stretched
     * to keep that within pushpull_bytes_per_s. The fleet still runs n of them an interval:
     * anti-entropy between some pair stays frequent. */
    int64_t per_s = c->cfg.pushpull_bytes_per_s;
    int64_t budget = ((int64_t)c->pp_len * 2 * 1000000000 + per_s - 1) / per_s;
    return budget > t ? budget : t;
}

void swim__want_pushpull(swim_core_t *c, int64_t now)
{
    c->next_pushpull = now + pushpull_interval(c);
    unsigned round = c->pushpull_round++;
    size_t k = 0;
    /* odd rounds go to a seed (heals partitions older than the reclaim time); even rounds to
     * a live member, or to a dead one half of the time (heals younger ones) */
    if (!(round & 1)) {
        if (round & 2)
            k = swim__pick(c, now, 1, -1, ok_dead);
        if (k == 0)
            k = swim__pick(c, now, 1, -1, ok_live);
    }
    c->out.pp_wanted = true;
    c->out.pp_seed = k == 0;
    if (k)
        c->out.pp_to = c->m[c->scratch[0]].addr;
}

/*
 * Islands (issue 35; see swim.c). For rejoin_window_ns after our start and after any member
 * died or left, once a rejoin interval: a ping to one member dead or left within the window, or
 * known before our restart and absent from the table (swim_remember), at its address; or, every
 * other time, a push-pull with a seed address no live member holds. A ping that a process our
 * table does not hold live answers (swim__rejoin_answered) found another island: the push-pull
 * with it merges the two tables, and each side's gossip carries the other's members on.
 * Each member tries with probability REJOIN_FLEET / live, so the fleet makes about
 * REJOIN_FLEET tries an interval whatever its size, and a member's cost falls with N.
 */
#define REJOIN_FLEET 4

/* A member (or we) died or left: a place an island may grow, so we look for one for a window. */
void swim__rejoin_note(swim_core_t *c, int64_t now, int32_t i)
{
    (void)i;
    if (now + c->cfg.rejoin_window_ns > c->rejoin_until)
        c->rejoin_until = now + c->cfg.rejoin_window_ns;
}

static bool rejoin_member(const swim_core_t *c, const member_t *m, int64_t now)
{
    return (m->state == SWIM_DEAD || m->state == SWIM_LEFT) &&
           now - m->state_since < c->cfg.rejoin_window_ns;
}

void swim__rejoin_tick(swim_core_t *c, int64_t now)
{
    c->next_rejoin = now + c->cfg.rejoin_interval_ns;
    if (c->leaving || !c->joined || now >= c->rejoin_until ||
        (c->live > REJOIN_FLEET && swim__rnd_below(c, c->live) >= REJOIN_FLEET))
        return;
    if (c->rejoin_round++ & 1) {
        if (!c->out.pp_wanted) {
            c->out.pp_wanted = c->out.pp_seed = c->out.pp_absent = true;
            c->ctr.rejoin_seeds++;
        }
        return;
    }
    /* one candidate, each as likely (reservoir sampling over the table and the remembered) */
    int32_t pick = -1;
    size_t seen = 0, known = SIZE_MAX;
    for (size_t i = 1; i < c->n; i++)
        if (rejoin_member(c, &c->m[i], now) && swim__rnd_below(c, (int64_t)++seen) == 0)
            pick = (int32_t)i;
    for (size_t k = 0; now - c->started < c->cfg.rejoin_window_ns && k < c->n_known; k++)
        if (swim__find(c, c->known[k].id, c->known[k].id_len) < 0 &&
            swim__rnd_below(c, (int64_t)++seen) == 0)
            known = k;
    if (!seen)
        return;
    c->rejoin_seq = ++c->probe_seq;
    c->ctr.rejoin_pings++;
    if (known != SIZE_MAX) {
        const remembered_t *k = &c->known[known];
        swim__send_probe(c, now, &k->addr, SWIM_PING, c->rejoin_seq, k->id, k->id_len, k->gen, NULL,
                         -1);
    } else {
        const member_t *m = &c->m[pick];
        swim__send_probe(c, now, &m->addr, SWIM_PING, c->rejoin_seq, swim__id_of(c, m), m->id_len,
                         m->gen, NULL, -1);
    }
}

/* Our last rejoin ping was answered by a process the table did not hold live (a new generation,
 * or an id it did not have): push-pull with it, once. */
void swim__rejoin_answered(swim_core_t *c, int64_t now, const swim_addr_t *from)
{
    c->rejoin_seq = 0;
    c->ctr.rejoin_merges++;
    c->out.pp_wanted = true;
    c->out.pp_seed = c->out.pp_absent = false;
    c->out.pp_to = *from;
}

void swim__gossip_tick(swim_core_t *c, int64_t now)
{
    c->next_gossip = now + c->cfg.gossip_interval_ns;
    if (!bc_pending(c))
        return;
    size_t k = swim__pick(c, now, (size_t)c->cfg.gossip_nodes, -1, ok_gossip);
    int32_t targets[64];
    if (k > 64)
        k = 64;
    memcpy(targets, c->scratch, k * sizeof *targets);
    for (size_t j = 0; j < k && bc_pending(c); j++)
        swim__send_simple(c, now, &c->m[targets[j]].addr, SWIM_GOSSIP, 0, -1);
}

/*
 * After our first push-pull, our record goes to every live member directly, once (as a leave
 * does): gossip alone missed some member in 2 of 100 joins at 5% loss, which then waited for a
 * push-pull. One datagram per member per process start; a lost one is still covered by gossip
 * and by fetch_sender.
 */
void swim__announce(swim_core_t *c, int64_t now)
{
    if (c->announced)
        return;
    c->announced = true;
    swim__tell_live(c, now, c->n);
}

size_t swim_pushpull_bound(const swim_core_t *c)
{
    return SWIM_SEAL_OVERHEAD + 64 + SWIM_ID_MAX + c->n * SWIM_UPDATE_MAX;
}

int swim_pushpull_encode(swim_core_t *c, int64_t now, bool join, uint8_t *out, size_t cap,
                         size_t *len)
{
    if (cap < swim_pushpull_bound(c))
        return SWIM_ESPACE;
    /* the body goes after the frame header so sealing can read it from a second copy */
    size_t head = c->cfg.nkeys ? SWIM_FRAME_HEAD + SWIM_NONCE_BYTES : SWIM_FRAME_HEAD;
    wire_pack_t w = {out + head, 0, cap - head - SWIM_TAG_BYTES, false};
    const member_t *self = &c->m[0];
    swim_enc_head(&w, c->ids, self->id_len, self->gen, now + c->wall_off, ++c->tx_seq,
                  SWIM_PUSHPULL);
    swim_msg_t om = {.kind = SWIM_PUSHPULL, .join = join};
    swim_enc_msg(&w, &om);
    size_t at = swim_enc_array_open(&w);
    for (size_t i = 0; i < c->n; i++) {
        swim_update_t u;
        swim__member_update(c, &c->m[i], &u);
        swim_enc_update(&w, &u);
    }
    swim_enc_array_close(&w, at, (uint32_t)c->n);
    if (w.overflow)
        return SWIM_ESPACE;
    if (c->cfg.nkeys) {
        uint8_t nonce[SWIM_NONCE_BYTES];
        for (int i = 0; i < 3; i++) {
            uint64_t r = swim__rnd(c);
            memcpy(nonce + 8 * i, &r, 8);
        }
        /* libsodium encrypts in place when message and ciphertext start together */
        *len = swim_seal(c->keys[0], c->label, c->label_len, nonce, out + head, w.len, out);
    } else {
        out[0] = SWIM_WIRE_VERSION;
        out[1] = SWIM_MODE_PLAIN;
        *len = head + w.len;
    }
    c->ctr.pushpull_out++;
    c->pp_len = *len;
    return 0;
}
