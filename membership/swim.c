/*
 * SWIM with Lifeguard: the membership protocol core.
 *
 * SWIM (Das, Gupta, Motivala 2002) splits membership into failure detection and
 * dissemination. Failure detection: once per probe interval this node pings one member,
 * chosen round-robin over a list reshuffled every round, so every member is probed within
 * two rounds and the load is one ping per node per interval whatever the cluster size. With
 * no ack within the probe timeout it asks k = 3 other members to ping the target for it
 * (PING_REQ); with no ack, direct or relayed, by the end of the interval the target becomes
 * SUSPECT, not dead: a suspect has a suspicion timeout to refute. Dissemination: every change
 * of a member's state is queued as a broadcast and piggybacked, newest first, on every
 * datagram this node sends (pings, acks, gossip to 3 random members every 200 ms), each one
 * retransmitted 4 x ceil(log10(N + 1)) times, which carries it to every member with high
 * probability (infection-style). Incarnation numbers order the claims about one member: a
 * member that hears it is suspected or declared dead bumps its own incarnation and gossips
 * itself alive again (refutation), which overrides every older claim.
 *
 * Lifeguard (Dadgar et al. 2018, as in hashicorp/memberlist) makes the detector robust to a
 * slow *prober*, which plain SWIM takes for a dead target:
 *  - local health: a score 0..7 raised when our probes fail without the relays' NACKs we
 *    expected (the relays answer NACK when they, too, got no ack, which shows they are
 *    reachable and the target is not), and when we must refute a suspicion of ourselves; it
 *    falls on each successful probe. The probe interval and timeout are scaled by score + 1,
 *    so a starved node probes less and waits longer instead of accusing healthy peers.
 *  - dogpile suspicion: the timeout starts at 6 x the minimum, 4 x max(1, log10 N) x
 *    interval, and falls towards the minimum (logarithmically) as independent members confirm
 *    the suspicion; with too few members to confirm it is the minimum.
 *  - buddy system: a ping to a member we suspect carries that suspicion first, so the
 *    suspect learns of it at once and can refute.
 *
 * Where this departs from the paper or memberlist:
 *  - A member is a node id plus a generation (the process start, from the shell). Any
 *    record with a higher generation supersedes the old one at once, whatever its
 *    incarnation: a restarted pod with the same name and a new address replaces its ghost
 *    without waiting for the ghost to be detected dead, and is counted once.
 *  - Graceful leave is its own state (LEFT), sent directly to every live member once and
 *    then gossiped, so peers drop a leaver within a gossip interval or two.
 *  - Anti-entropy is memberlist's push-pull: the whole table is exchanged with one member
 *    (or a seed) at join and every 30 s (scaled up above 32 members). The core builds and
 *    merges the message; the shell carries it over TCP. A peer's DEAD becomes our SUSPECT
 *    (it must still time out here), as in memberlist.
 *  - The buddy system is persistent: every probe interval, each member we suspect gets a
 *    ping carrying our suspicion, and a member that hears a suspicion it already refuted
 *    gossips its alive record again (the ack carries it back). Epidemic dissemination with a
 *    finite retransmit limit leaves a straggler now and then (at 20% loss about one member
 *    in 600 misses a given refutation); without this a straggler holds its stale suspicion
 *    until its timer kills a healthy member (86 false deaths in 100 simulated seconds at 20%
 *    loss, 64 members, before; none in a simulated hour after).
 *  - Slow members (their received datagrams lag seconds while their timers run) are
 *    suspected and refute over and over. A suspicion of a newer incarnation restarts the
 *    timer instead of confirming the old one; a suspicion whose timer runs out after the
 *    suspect sent us a datagram starts again from that sign of life; and the buddy pings run
 *    every probe interval unscaled by local health. Without these, 4 of 64 members reading
 *    3 s late made thousands of false deaths per simulated hour; with them, none.
 *  - A suspicion (or death) of a member we never knew is ignored, as in memberlist.
 *  - Updates are applied before a ping is answered, so the ack carries a fresh refutation.
 *  - No TCP fallback ping; the simulator shows the indirect probes and the buddy pings
 *    suffice at 20% loss. The indirect stage pings the target directly once more.
 *  - Scale: a false suspicion is a fleet-wide event (it and the refutation reach every member),
 *    so at 20% loss, where about one probe in 14 failed by bad luck, each member's bytes grew
 *    with N (5.5 KiB/s at 256). Above probe_retry_above (32) live members a failed member is
 *    probed probe_retries (2) more times at once, in a second probe slot, before it is
 *    suspected (probe_finish). Push-pull's interval is stretched to keep it within
 *    pushpull_bytes_per_s, as its message grows with N (pushpull_interval).
 *  - Application payloads (APP) ride the same sealed datagrams, for the share store.
 *  - Dead and left members stay in the table for `reclaim_ns` (60 s): long enough that a
 *    replayed old datagram (the replay window is 30 s) cannot resurrect them, and that a
 *    healed partition can still gossip to them (and push-pull alternates with the seeds).
 *
 * Security: every datagram is sealed (swim_proto.c); inside the seal, the sender's id,
 * generation, send time and a per-sender sequence number. A receiver drops datagrams sent
 * more than replay_window_ns away from its own clock, and, per known sender, keeps the
 * highest sequence seen with a 64-wide bitmap below it (as IPsec and WireGuard do): a
 * sequence already seen, or older than the bitmap, is a replay. Push-pull frames, numbered from
 * the same counter, have a window of their own: one can spend longer on its TCP connection than
 * 64 of the sender's datagrams take to arrive. A restarted process has no windows at all, so
 * it also drops datagrams sealed before it started (a dead member's old datagrams would count
 * it live again). A sender we do not know yet has no window: its replays are bounded by the
 * time window and by our start, and carry claims no older than what a push-pull at our join
 * brought.
 *
 * Costs: the member table is a dense array (self first) with an open-addressing index by id
 * hash; the broadcast queue is intrusive, bucketed by transmit count, newest first in a
 * bucket, so choosing the updates for a datagram costs what it sends. Nothing allocates
 * except the table, the index, and the outbox/event queues when they must grow.
 */
#include "swim.h"
#include "swim_proto.h"

#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BC_BUCKETS 33
#define SUSP_CONFIRM_MAX 8
#define RELAY_MAX 16
#define REPLAY_BITS 64
#define RECLAIM_EVERY_NS INT64_C(1000000000)
#define MS INT64_C(1000000)
#define FETCH_RECENT 8
#define OUTBOX_KEEP (64u << 10) /* outbox arena (and event queue) bytes kept between calls */
#define META_DIRECT_MAX 64      /* members told of a metadata change directly (swim_set_meta) */

/* A replay window over one sender's sequence numbers: the highest seen, a bitmap below it.
 * {0, 0} is an empty window: the first sequence number lands in it as in any other. */
typedef struct window {
    uint64_t max, bits;
} window_t;

/*
 * One member, as lean as the hot path allows: every core holds one per member, so a simulated
 * fleet of N holds N^2 of them (440 bytes each made 5,000 members need 11 GB). Inline: what
 * probing, dissemination and the replay check read. Out of line: the id (interned in the
 * core's id arena, NUL-terminated), the metadata (allocated when first non-empty), the
 * suspicion (a slot in c->susp while suspect).
 */
typedef struct member {
    /* what a lookup and a claim read first, together */
    uint64_t hash;
    uint64_t gen;
    uint32_t inc;
    uint32_t id_off; /* the id in c->ids */
    uint8_t state;   /* swim_state_t */
    uint8_t id_len;
    int8_t bc_tx; /* its bucket in the dissemination queue; -1 = not queued */
    uint8_t meta_len;
    uint8_t probe_fails;      /* our probes of it that failed in a row, while it was alive to us */
    int32_t susp;             /* its slot in c->susp while suspect, else -1 */
    int32_t bc_prev, bc_next; /* dissemination queue links */
    uint32_t meta_version;
    swim_addr_t addr;
    int64_t last_heard, state_since;
    int64_t gen_since; /* when we adopted this generation */
    int64_t dup_told;  /* when we last told two claimants of this id of each other; 0 never */
    /* replay windows over this member's sequence numbers: its datagrams, and apart from them
     * its push-pull frames, which may spend longer on their TCP connection than 64 of its
     * datagrams (to anyone) take to reach us (issue #17 item 6) */
    window_t rx, pp;
    uint64_t bc_from; /* the accuser's id hash sent with this member's suspect/dead record */
    uint8_t *meta;    /* SWIM_META_MAX bytes once the member had metadata; NULL before */
} member_t;

/* A running suspicion (Lifeguard's dogpile timer), for c->m[member]. */
typedef struct susp {
    int32_t member;
    int k, n, nconf;
    int64_t start, min, max, deadline;
    uint64_t conf[SUSP_CONFIRM_MAX];
} susp_t;

typedef struct probe {
    bool active, acked, indirect_sent;
    int32_t target;
    uint64_t target_gen;
    uint32_t seq;
    int64_t t_indirect, t_end;
    int expected_nacks, nacks;
} probe_t;

typedef struct relay {
    bool used, nacked;
    uint32_t my_seq, their_seq;
    swim_addr_t requester;
    int64_t nack_at, expire;
} relay_t;

struct swim_core {
    swim_config_t cfg;
    char label[SWIM_LABEL_MAX + 1];
    size_t label_len;
    uint8_t keys[SWIM_KEYRING_MAX][SWIM_KEY_BYTES];
    uint64_t rng;
    int64_t wall_off; /* wall clock - the core's monotonic clock (swim_set_wall) */
    uint64_t tx_seq;
    uint32_t probe_seq;
    int awareness;
    bool joined;
    bool leaving;       /* we left (swim_leave) */
    bool announced;     /* our record went to every member of the first push-pull */
    int64_t meta_again; /* when our changed metadata goes to the live members again; 0 none */
    struct {            /* another process claims our id: the last report of it */
        bool seen;
        int64_t at;
        uint64_t gen;
        swim_addr_t addr;
    } dup;

    member_t *m; /* m[0] is self */
    size_t n, cap;
    char *ids; /* the members' ids, NUL-terminated, in table order (reclaim compacts it) */
    size_t ids_len, ids_cap;
    uint32_t *index; /* open addressing by id hash (index_put) */
    size_t index_cap;
    int32_t *scratch; /* cap entries: random picks, compaction maps */
    int32_t *order;   /* probe round: member indexes */
    size_t order_len, order_pos;
    susp_t *susp; /* the running suspicions, in the order they started (swap-removed) */
    size_t n_susp, susp_cap;
    int64_t reclaim_due; /* no dead or left member is due for reclaim before this */

    int32_t bc_head[BC_BUCKETS], bc_tail[BC_BUCKETS];

    /* [0] the round-robin probe, [1] a retry of a member whose probe failed (probe_finish) */
    probe_t probe[2];
    relay_t relays[RELAY_MAX];
    int64_t next_probe, next_buddy, next_gossip, next_pushpull, next_reclaim;
    struct { /* recent record fetches (fetch_sender), so a chatty stranger costs one a second */
        uint64_t hash;
        int64_t at;
    } fetched[FETCH_RECENT];
    unsigned pushpull_round;
    size_t pp_len; /* our last push-pull message, in bytes */

    swim_outbox_t out;
    size_t out_cap;
    uint8_t *arena;
    size_t arena_len, arena_cap;
    swim_event_t *ev;
    size_t n_ev, ev_cap;
    int live; /* alive + suspect members, self included, kept by set_state */
    int last_live;
    swim_counters_t ctr;

    /* the application payload of the last datagram received, until taken */
    bool app_ready;
    const char *app_from;
    size_t app_from_len;
    const uint8_t *app;
    size_t app_len;

    uint8_t body[SWIM_DATAGRAM_MAX];
    uint8_t rxbuf[SWIM_DATAGRAM_MAX];
};

const char *swim_strerror(int code)
{
    return code == 0 ? "ok" : tt_err_message(code);
}

const char *swim_state_name(swim_state_t s)
{
    static const char *names[] = {"alive", "suspect", "dead", "left"};
    return (unsigned)s < 4 ? names[s] : "?";
}

bool swim_addr_eq(const swim_addr_t *a, const swim_addr_t *b)
{
    return a->family == b->family && a->port == b->port &&
           memcmp(a->ip, b->ip, a->family == 6 ? 16 : 4) == 0;
}

void swim_config_default(swim_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->probe_interval_ns = 1000 * MS;
    cfg->probe_timeout_ns = 500 * MS;
    cfg->gossip_interval_ns = 200 * MS;
    cfg->pushpull_interval_ns = 30000 * MS;
    cfg->gossip_to_dead_ns = 30000 * MS;
    cfg->reclaim_ns = 60000 * MS;
    cfg->replay_window_ns = 30000 * MS;
    cfg->indirect_checks = 3;
    cfg->gossip_nodes = 3;
    cfg->retransmit_mult = 4;
    cfg->suspicion_mult = 4;
    cfg->suspicion_max_mult = 6;
    cfg->awareness_max = 8;
    cfg->probe_retries = 2;
    cfg->probe_retry_above = 32;
    cfg->pushpull_bytes_per_s = 256;
    cfg->label = "";
}

/* ---- small helpers ---- */

/* A member's id: NUL-terminated, valid until the next member is added or reclaimed. */
static const char *id_of(const swim_core_t *c, const member_t *m)
{
    return c->ids + m->id_off;
}

static uint64_t rnd(swim_core_t *c)
{
    /* splitmix64: deterministic for a seed, which the simulator relies on */
    uint64_t z = (c->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int64_t rnd_below(swim_core_t *c, int64_t n)
{
    return n > 0 ? (int64_t)(rnd(c) % (uint64_t)n) : 0;
}

static bool is_live(swim_state_t s)
{
    return s == SWIM_ALIVE || s == SWIM_SUSPECT;
}

static int64_t scaled(const swim_core_t *c, int64_t d)
{
    return d * (c->awareness + 1);
}

static void health(swim_core_t *c, int delta)
{
    c->awareness += delta;
    if (c->awareness < 0)
        c->awareness = 0;
    if (c->awareness > c->cfg.awareness_max - 1)
        c->awareness = c->cfg.awareness_max - 1;
}

static int live_count(const swim_core_t *c)
{
    return c->live;
}

/* ---- event and outbox queues (grow on demand) ---- */

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static swim_event_t *emit(swim_core_t *c, swim_event_type_t type, const member_t *m)
{
    if (!grow((void **)&c->ev, &c->ev_cap, c->n_ev + 1, sizeof *c->ev))
        return NULL;
    if (type == SWIM_EV_DOWN)
        c->ctr.downs++;
    swim_event_t *e = &c->ev[c->n_ev++];
    memset(e, 0, offsetof(swim_event_t, id));
    e->type = type;
    e->live_count = c->last_live;
    if (m) {
        e->generation = m->gen;
        e->id_len = m->id_len;
        memcpy(e->id, id_of(c, m), m->id_len + 1u);
    } else {
        e->id[0] = 0;
    }
    return e;
}

static void note_live(swim_core_t *c)
{
    int live = live_count(c);
    if (live != c->last_live) {
        c->last_live = live;
        emit(c, SWIM_EV_LIVE_COUNT, NULL);
    }
}

/* Seals (or frames) the body in c->body into the outbox, to `to`. */
static void push_frame(swim_core_t *c, const swim_addr_t *to, size_t blen)
{
    size_t flen = blen + (c->cfg.nkeys ? SWIM_SEAL_OVERHEAD : SWIM_FRAME_HEAD);
    if (flen > SWIM_DATAGRAM_MAX ||
        !grow((void **)&c->arena, &c->arena_cap, c->arena_len + flen, 1) ||
        !grow((void **)&c->out.dgram, &c->out_cap, c->out.n + 1, sizeof *c->out.dgram)) {
        c->ctr.tx_overflow++;
        return;
    }
    uint8_t *dst = c->arena + c->arena_len;
    if (c->cfg.nkeys) {
        uint8_t nonce[SWIM_NONCE_BYTES];
        for (int i = 0; i < 3; i++) {
            uint64_t r = rnd(c);
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

/* ---- the member table and its index ---- */

/* The member index: open addressing, at most half full. A slot holds the member's position + 1
 * in its low IDX_BITS (0: empty) and 12 more bits of its hash above them, so a probe that meets
 * another member does not read that member's record (a cache miss each: a third of the
 * simulator's lookups at 5,000 members). */
#define IDX_BITS 20
#define IDX_POS ((UINT32_C(1) << IDX_BITS) - 1)
#define MEMBERS_MAX (1u << (IDX_BITS - 1)) /* a table's capacity doubles up to this */

static uint64_t index_mix(uint64_t h)
{
    h ^= h >> 33; /* murmur3's finalizer: FNV's low bits cluster on similar ids */
    h *= UINT64_C(0xff51afd7ed558ccd);
    return h ^ (h >> 33);
}

static uint32_t index_tag(uint64_t mixed)
{
    return (uint32_t)(mixed >> 52) << IDX_BITS;
}

static int32_t find(const swim_core_t *c, const char *id, size_t len)
{
    uint64_t h = swim_id_hash(id, len), x = index_mix(h);
    uint32_t tag = index_tag(x);
    for (size_t s = (size_t)x & (c->index_cap - 1);; s = (s + 1) & (c->index_cap - 1)) {
        uint32_t e = c->index[s];
        if (!e)
            return -1;
        if ((e & ~IDX_POS) != tag)
            continue;
        int32_t i = (int32_t)(e & IDX_POS) - 1;
        const member_t *m = &c->m[i];
        if (m->hash == h && m->id_len == len && memcmp(id_of(c, m), id, len) == 0)
            return i;
    }
}

static void index_put(swim_core_t *c, int32_t i)
{
    uint64_t x = index_mix(c->m[i].hash);
    size_t s = (size_t)x & (c->index_cap - 1);
    while (c->index[s])
        s = (s + 1) & (c->index_cap - 1);
    c->index[s] = index_tag(x) | (uint32_t)(i + 1);
}

static void index_rebuild(swim_core_t *c)
{
    memset(c->index, 0, c->index_cap * sizeof *c->index);
    for (size_t i = 0; i < c->n; i++)
        index_put(c, (int32_t)i);
}

/* Room for one more member: grows the table, its index and the per-member arrays. */
static int reserve(swim_core_t *c)
{
    if (c->n < c->cap)
        return 0;
    size_t nc = c->cap ? c->cap * 2 : 16;
    if (nc > MEMBERS_MAX)
        return SWIM_ENOMEM;
    member_t *m = realloc(c->m, nc * sizeof *m);
    if (!m)
        return SWIM_ENOMEM;
    c->m = m;
    int32_t *scratch = realloc(c->scratch, nc * sizeof *scratch);
    if (!scratch)
        return SWIM_ENOMEM;
    c->scratch = scratch;
    int32_t *order = realloc(c->order, nc * sizeof *order);
    if (!order)
        return SWIM_ENOMEM;
    c->order = order;
    /* at most half full: a miss costs about 2.5 probes (4x cost 16 bytes a member, 5,000
     * cores of 5,000 members 650 MB, for 1.3 probes) */
    uint32_t *idx = malloc(2 * nc * sizeof *idx);
    if (!idx)
        return SWIM_ENOMEM;
    free(c->index);
    c->index = idx;
    c->index_cap = 2 * nc;
    c->cap = nc;
    index_rebuild(c);
    return 0;
}

/* A member's room for metadata, allocated the first time it has any. */
static bool meta_room(member_t *m, size_t len)
{
    if (len && !m->meta)
        m->meta = malloc(SWIM_META_MAX);
    return !len || m->meta;
}

static const uint8_t *meta_of(const member_t *m)
{
    static const uint8_t none[1];
    return m->meta ? m->meta : none;
}

/* A new member (alive, zeroed), with room for meta_len bytes of metadata; -1 out of memory. */
static int32_t add_member(swim_core_t *c, int64_t now, const char *id, size_t len, size_t meta_len)
{
    uint8_t *meta = meta_len ? malloc(SWIM_META_MAX) : NULL;
    if ((meta_len && !meta) || reserve(c) ||
        !grow((void **)&c->ids, &c->ids_cap, c->ids_len + len + 1, 1)) {
        free(meta);
        return -1;
    }
    int32_t i = (int32_t)c->n++;
    member_t *m = &c->m[i];
    memset(m, 0, sizeof *m);
    m->meta = meta;
    m->id_off = (uint32_t)c->ids_len;
    memcpy(c->ids + c->ids_len, id, len);
    c->ids[c->ids_len + len] = 0;
    c->ids_len += len + 1;
    m->id_len = (uint8_t)len;
    m->hash = swim_id_hash(id, len);
    m->bc_tx = -1;
    m->susp = -1;
    m->bc_prev = m->bc_next = -1;
    m->state_since = m->last_heard = m->gen_since = now;
    m->state = SWIM_ALIVE;
    c->live++;
    index_put(c, i);
    return i;
}

/* ---- the broadcast queue ---- */

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

static void bc_unlink(swim_core_t *c, int32_t i)
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

/* Queues member i's current record for dissemination, newest first; `from` is the accuser. */
static void broadcast(swim_core_t *c, int32_t i, uint64_t from)
{
    bc_unlink(c, i);
    c->m[i].bc_from = from;
    bc_insert(c, i, 0, true);
}

static void member_update(const swim_core_t *c, const member_t *m, swim_update_t *u)
{
    u->state = m->state;
    u->id = id_of(c, m);
    u->id_len = m->id_len;
    u->generation = m->gen;
    u->incarnation = m->inc;
    u->addr = m->addr;
    u->meta_version = m->meta_version;
    u->meta_len = m->meta_len;
    u->meta = meta_of(m);
    u->from = m->bc_from;
}

/* Appends member i's record if it fits; false (and w unchanged) if not. */
static bool put_update(const swim_core_t *c, swim_wbuf_t *w, const member_t *m)
{
    swim_update_t u;
    size_t save = w->len;
    member_update(c, m, &u);
    swim_enc_update(w, &u);
    if (w->overflow) {
        w->overflow = false;
        w->len = save;
        return false;
    }
    return true;
}

/* Fills the rest of a datagram with queued broadcasts, fewest transmits and newest first. */
static uint32_t fill_updates(swim_core_t *c, swim_wbuf_t *w, int32_t skip)
{
    int limit = retransmit_limit(c);
    int32_t sent[SWIM_DATAGRAM_MAX / 16];
    uint32_t n = 0;
    bool full = false;
    for (int b = 0; b < BC_BUCKETS && !full; b++) {
        for (int32_t i = c->bc_head[b]; i >= 0 && !full;) {
            int32_t next = c->m[i].bc_next;
            if (b >= limit) {
                bc_unlink(c, i); /* the limit fell as the cluster shrank */
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
        bc_unlink(c, sent[k]);
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
static void send_msg_with(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                          const swim_update_t *first, int32_t skip)
{
    size_t cap = SWIM_DATAGRAM_MAX - (c->cfg.nkeys ? SWIM_SEAL_OVERHEAD : SWIM_FRAME_HEAD);
    swim_wbuf_t w = {c->body, 0, cap, false};
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

static void send_msg(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                     int32_t first)
{
    swim_update_t u;
    if (first >= 0)
        member_update(c, &c->m[first], &u);
    send_msg_with(c, now, to, om, first >= 0 ? &u : NULL, first);
}

static void send_simple(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                        uint32_t probe_seq, int32_t first)
{
    swim_msg_t om = {.kind = kind, .probe_seq = probe_seq};
    send_msg(c, now, to, &om, first);
}

/* A PING or PING_REQ about a member (given by its fields: a relay knows no member record). */
static void send_probe(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                       uint32_t probe_seq, const char *id, size_t id_len, uint64_t gen,
                       const swim_addr_t *addr, int32_t first)
{
    swim_msg_t om = {.kind = kind,
                     .probe_seq = probe_seq,
                     .target = id,
                     .target_len = id_len,
                     .target_gen = gen,
                     .target_addr = addr ? *addr : (swim_addr_t){0}};
    send_msg(c, now, to, &om, first);
}

/* ---- random choices ---- */

typedef bool (*pick_fn)(const swim_core_t *c, const member_t *m, int64_t now);

/* Up to k distinct random members (never self, never `not`) accepted by ok; into c->scratch. */
static size_t pick(swim_core_t *c, int64_t now, size_t k, int32_t not, pick_fn ok)
{
    size_t n = 0;
    if (c->n > 64) {
        /* big table: random slots, so a gossip round does not cost O(N) */
        for (size_t tries = 0; tries < 8 * k && n < k; tries++) {
            int32_t i = 1 + (int32_t)rnd_below(c, (int64_t)c->n - 1);
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
        size_t j = i + (size_t)rnd_below(c, (int64_t)(n - i));
        int32_t t = c->scratch[i];
        c->scratch[i] = c->scratch[j];
        c->scratch[j] = t;
    }
    return k;
}

static bool ok_alive(const swim_core_t *c, const member_t *m, int64_t now)
{
    return m->state == SWIM_ALIVE;
}

static bool ok_live(const swim_core_t *c, const member_t *m, int64_t now)
{
    return is_live(m->state);
}

static bool ok_dead(const swim_core_t *c, const member_t *m, int64_t now)
{
    return m->state == SWIM_DEAD;
}

static bool ok_gossip(const swim_core_t *c, const member_t *m, int64_t now)
{
    return is_live(m->state) ||
           (m->state == SWIM_DEAD && now - m->state_since < c->cfg.gossip_to_dead_ns);
}

/* Our own record straight to up to `max` live members (random ones when there are more): a
 * join, and a metadata change (twice), must not wait for a straggler's push-pull. Sending does
 * not touch c->scratch. */
static void tell_live(swim_core_t *c, int64_t now, size_t max)
{
    if (max + 1 >= c->n) { /* every one: no need to draw (pick would cost O(N^2) here) */
        for (size_t i = 1; i < c->n; i++)
            if (is_live(c->m[i].state))
                send_simple(c, now, &c->m[i].addr, SWIM_GOSSIP, 0, 0);
        return;
    }
    size_t k = pick(c, now, max, -1, ok_live);
    for (size_t j = 0; j < k; j++)
        send_simple(c, now, &c->m[c->scratch[j]].addr, SWIM_GOSSIP, 0, 0);
}

/* ---- suspicion (Lifeguard) ---- */

/* Room for one more running suspicion; false out of memory. */
static bool susp_room(swim_core_t *c)
{
    return grow((void **)&c->susp, &c->susp_cap, c->n_susp + 1, sizeof *c->susp);
}

static void susp_cancel(swim_core_t *c, int32_t i)
{
    int32_t k = c->m[i].susp;
    if (k < 0)
        return;
    c->m[i].susp = -1;
    c->susp[k] = c->susp[--c->n_susp];
    if ((size_t)k < c->n_susp)
        c->m[c->susp[k].member].susp = k;
}

static int64_t susp_timeout(const susp_t *x)
{
    if (x->k < 1)
        return x->min;
    double frac = log((double)x->n + 1.0) / log((double)x->k + 1.0);
    double raw = (double)x->max - frac * (double)(x->max - x->min);
    int64_t t = (int64_t)floor(raw / (double)MS) * MS;
    return t < x->min ? x->min : t;
}

/* Starts (or restarts) member i's suspicion timer; the caller made room (susp_room). */
static void susp_start(swim_core_t *c, int64_t now, int32_t i, uint64_t from)
{
    int n = c->last_live;
    int k = c->cfg.suspicion_mult - 2;
    if (n - 2 < k)
        k = 0;
    if (k > SUSP_CONFIRM_MAX - 1)
        k = SUSP_CONFIRM_MAX - 1;
    double scale = n > 10 ? log10((double)n) : 1.0;
    susp_cancel(c, i);
    susp_t *x = &c->susp[c->n_susp];
    c->m[i].susp = (int32_t)c->n_susp++;
    x->member = i;
    x->min = (int64_t)((double)c->cfg.suspicion_mult * scale * (double)c->cfg.probe_interval_ns);
    x->max = c->cfg.suspicion_max_mult * x->min;
    x->k = k;
    x->n = 0;
    x->nconf = 1;
    x->conf[0] = from;
    x->start = now;
    x->deadline = now + susp_timeout(x);
}

/* An independent confirmation: true if it was new (then it is worth re-gossiping). */
static bool susp_confirm(susp_t *x, uint64_t from)
{
    if (x->n >= x->k)
        return false;
    for (int k = 0; k < x->nconf; k++)
        if (x->conf[k] == from)
            return false;
    x->conf[x->nconf++] = from;
    x->n++;
    x->deadline = x->start + susp_timeout(x);
    return true;
}

/* ---- state changes ---- */

static void set_state(swim_core_t *c, int64_t now, int32_t i, swim_state_t s)
{
    member_t *m = &c->m[i];
    if (m->state != SWIM_SUSPECT || s != SWIM_SUSPECT)
        susp_cancel(c, i);
    if (m->state != s)
        m->state_since = now;
    if (!is_live(s) && m->state_since + c->cfg.reclaim_ns < c->reclaim_due)
        c->reclaim_due = m->state_since + c->cfg.reclaim_ns;
    c->live += (int)is_live(s) - (int)is_live(m->state);
    m->state = s;
}

static void refute(swim_core_t *c, uint32_t inc, bool penalize)
{
    member_t *self = &c->m[0];
    self->inc = (inc > self->inc ? inc : self->inc) + 1;
    c->ctr.refutes++;
    if (penalize)
        health(c, 1);
    broadcast(c, 0, 0);
}

/* The caller made room for the metadata (meta_room) before changing anything. */
static void copy_alive(member_t *m, const swim_update_t *u)
{
    m->addr = u->addr;
    m->meta_version = u->meta_version;
    m->meta_len = (uint8_t)u->meta_len;
    if (u->meta_len)
        memcpy(m->meta, u->meta, u->meta_len);
}

static void declare(swim_core_t *c, int64_t now, int32_t i, swim_state_t s, uint64_t from)
{
    bool was_live = is_live(c->m[i].state);
    set_state(c, now, i, s);
    broadcast(c, i, from);
    if (was_live || s == SWIM_LEFT)
        emit(c, s == SWIM_LEFT ? SWIM_EV_LEFT : SWIM_EV_DOWN, &c->m[i]);
}

/* ---- two processes with one id ---- */

/* A report from a peer: another live process claims our id. Emits SWIM_EV_DUPLICATE when it is
 * news (the first report, or the first after a quiet SWIM_DUPLICATE_HOLD_NS). */
static void duplicate_reported(swim_core_t *c, int64_t now, const swim_update_t *u)
{
    bool news = !c->dup.seen || now - c->dup.at >= SWIM_DUPLICATE_HOLD_NS;
    c->dup.seen = true;
    c->dup.at = now;
    c->dup.gen = u->generation;
    c->dup.addr = u->addr;
    swim_event_t *e = news ? emit(c, SWIM_EV_DUPLICATE, &c->m[0]) : NULL;
    if (e)
        e->generation = u->generation;
}

/*
 * A datagram from member i's id under an older generation than the one we hold live, adopted
 * more than DUP_SETTLE_NS ago (a killed process sends nothing after its successor appears): two
 * live processes claim one id, and every view counts it once. Each claimant hears of the other
 * from us, as an ALIVE record of its own id carrying our id hash in `from` (which an ALIVE record
 * never carries otherwise), at most once per probe interval.
 */
#define DUP_SETTLE_NS (INT64_C(2) * 1000000000)

static void two_claimants(swim_core_t *c, int64_t now, int32_t i, const swim_msg_t *msg,
                          const swim_addr_t *from)
{
    member_t *m = &c->m[i];
    if (msg->sender_gen >= m->gen || !is_live(m->state) || now - m->gen_since < DUP_SETTLE_NS ||
        (m->dup_told && now - m->dup_told < c->cfg.probe_interval_ns))
        return;
    m->dup_told = now;
    c->ctr.dup_reports++;
    swim_msg_t om = {.kind = SWIM_GOSSIP};
    swim_update_t u;
    member_update(c, m, &u);
    u.state = SWIM_ALIVE;
    u.from = c->m[0].hash;
    send_msg_with(c, now, from, &om, &u, -1); /* the older claimant hears of the newer */
    u.generation = msg->sender_gen;
    u.incarnation = 0;
    u.addr = *from;
    u.meta_len = 0;
    send_msg_with(c, now, &m->addr, &om, &u, -1); /* and the newer of the older */
}

bool swim_duplicate(const swim_core_t *c, int64_t now, uint64_t *gen, swim_addr_t *addr)
{
    if (!c->dup.seen || now - c->dup.at >= SWIM_DUPLICATE_HOLD_NS)
        return false;
    if (gen)
        *gen = c->dup.gen;
    if (addr)
        *addr = c->dup.addr;
    return true;
}

static bool is_self(const swim_core_t *c, const char *id, size_t len)
{
    return len == c->m[0].id_len && memcmp(id, c->ids, len) == 0;
}

/*
 * A record of our own id under a newer generation than ours that is dead, left, or at our own
 * address is a previous process of ours that started when the wall clock read later than it
 * reads for us (the clock stepped back across the restart). Every view holds that generation and
 * ignores ours (on our address, our own acks to its probes even keep it alive), so we take the
 * next generation above it, which replaces it everywhere at once. A newer generation alive
 * elsewhere is another live process: the duplicate report's business, not ours to outbid.
 */
static bool outgrow_ghost(swim_core_t *c, const swim_update_t *u)
{
    member_t *self = &c->m[0];
    if (u->generation <= self->gen || u->generation == UINT64_MAX || c->leaving ||
        (is_live(u->state) && !swim_addr_eq(&u->addr, &self->addr)))
        return false;
    self->gen = u->generation + 1;
    broadcast(c, 0, 0);
    return true;
}

/* Applies one claim about a member. Returns nothing: stale claims are simply ignored. */
static void apply(swim_core_t *c, int64_t now, const swim_update_t *u)
{
    member_t *self = &c->m[0];
    if (is_self(c, u->id, u->id_len)) {
        if (outgrow_ghost(c, u))
            return;
        if (u->generation != self->gen && u->state == SWIM_ALIVE && u->from && !c->leaving)
            duplicate_reported(c, now, u);
        if (u->generation != self->gen || c->leaving)
            return; /* a ghost of an older us, or a newer impostor: ours is the record */
        if (u->state == SWIM_ALIVE ? u->incarnation > self->inc : u->incarnation >= self->inc)
            refute(c, u->incarnation, u->state != SWIM_ALIVE); /* accused: the fault may be ours */
        else if (u->state != SWIM_ALIVE)
            broadcast(c, 0, 0); /* refuted already, but the claimant missed it: say it again */
        return;
    }
    int32_t i = find(c, u->id, u->id_len);
    if (i < 0) {
        /* News of the death of a stranger, or a suspicion of one (a push-pull turns the
         * sender's DEAD into SUSPECT): counting it would add a dead member to N for a whole
         * suspicion timeout, with a spurious UP. memberlist ignores these too; if the member
         * lives, its own datagrams or its refutation bring it in. */
        if (u->state != SWIM_ALIVE)
            return;
        i = add_member(c, now, u->id, u->id_len, u->meta_len);
        if (i < 0)
            return;
        member_t *m = &c->m[i];
        m->gen = u->generation;
        m->inc = u->incarnation;
        copy_alive(m, u);
        broadcast(c, i, 0);
        emit(c, SWIM_EV_UP, m);
        return;
    }
    member_t *m = &c->m[i];
    if (u->generation < m->gen)
        return;
    if (u->generation > m->gen) {
        /* a restart: the new generation replaces the old record at once */
        if (!meta_room(m, u->meta_len) || (u->state == SWIM_SUSPECT && !susp_room(c)))
            return; /* out of memory: as if lost, a later copy of it may fare better */
        bool was_live = is_live(m->state);
        m->gen = u->generation;
        m->gen_since = now;
        m->inc = u->incarnation;
        m->rx = m->pp = (window_t){0, 0};
        copy_alive(m, u);
        set_state(c, now, i, u->state);
        m->state_since = now;
        if (u->state == SWIM_SUSPECT)
            susp_start(c, now, i, u->from);
        broadcast(c, i, u->from);
        if (is_live(u->state))
            emit(c, SWIM_EV_UP, m);
        else if (was_live || u->state == SWIM_LEFT)
            emit(c, u->state == SWIM_LEFT ? SWIM_EV_LEFT : SWIM_EV_DOWN, m);
        return;
    }
    switch (u->state) {
    case SWIM_ALIVE: {
        if (u->incarnation <= m->inc || !meta_room(m, u->meta_len))
            return;
        swim_state_t was = m->state;
        bool changed = !swim_addr_eq(&m->addr, &u->addr) || m->meta_version != u->meta_version;
        m->inc = u->incarnation;
        copy_alive(m, u);
        set_state(c, now, i, SWIM_ALIVE);
        broadcast(c, i, 0);
        if (!is_live(was))
            emit(c, SWIM_EV_UP, m);
        else if (changed)
            emit(c, SWIM_EV_UPDATE, m);
        return;
    }
    case SWIM_SUSPECT:
        if (u->incarnation < m->inc)
            return;
        /* A suspicion of a newer incarnation is a new suspicion (the member refuted the old
         * one), never a confirmation: confirming would keep the old timer running and let the
         * DEAD it declares carry the newest incarnation, beating the member's next refutation
         * everywhere (slow members died so, refuting in time). memberlist likewise never
         * lets a confirmation raise the incarnation its timer declares. */
        if (m->state == SWIM_ALIVE || (m->state == SWIM_SUSPECT && u->incarnation > m->inc)) {
            if (!susp_room(c))
                return;
            m->inc = u->incarnation;
            set_state(c, now, i, SWIM_SUSPECT);
            susp_start(c, now, i, u->from);
            c->ctr.suspicions++;
            broadcast(c, i, u->from);
        } else if (m->state == SWIM_SUSPECT) {
            if (susp_confirm(&c->susp[m->susp], u->from))
                broadcast(c, i, u->from);
        }
        return;
    case SWIM_DEAD:
    case SWIM_LEFT:
        if (u->incarnation < m->inc || m->state == SWIM_LEFT ||
            (m->state == SWIM_DEAD && u->state == SWIM_DEAD))
            return;
        m->inc = u->incarnation;
        declare(c, now, i, u->state, u->from);
        return;
    }
}

/* ---- failure detection ---- */

static bool probe_candidate(const member_t *m)
{
    return is_live(m->state);
}

static int32_t next_target(swim_core_t *c)
{
    for (int pass = 0; pass < 2; pass++) {
        while (c->order_pos < c->order_len) {
            int32_t i = c->order[c->order_pos++];
            if (i > 0 && (size_t)i < c->n && probe_candidate(&c->m[i]))
                return i;
        }
        /* a new round: every live member once, in a fresh random order */
        c->order_len = c->order_pos = 0;
        for (size_t i = 1; i < c->n; i++)
            if (probe_candidate(&c->m[i]))
                c->order[c->order_len++] = (int32_t)i;
        for (size_t i = c->order_len; i > 1; i--) {
            size_t j = (size_t)rnd_below(c, (int64_t)i);
            int32_t t = c->order[i - 1];
            c->order[i - 1] = c->order[j];
            c->order[j] = t;
        }
    }
    return -1;
}

/*
 * Lifeguard's buddy system, made persistent: every member we suspect (besides the probe
 * target) gets a ping carrying our suspicion each probe interval. Dissemination reaches all
 * but a few members; one that missed the refutation would otherwise hold its suspicion to
 * the end. The suspect answers with its refutation on the ack. The ack is not awaited:
 * failure accounting stays with the regular probe.
 */
static void buddy_pings(swim_core_t *c, int64_t now)
{
    /* not scaled by local health: a slow peer's refutation comes back on these acks, and a
     * starved prober probing every 8 s would wait out its suspicion before hearing it */
    c->next_buddy = now + c->cfg.probe_interval_ns;
    for (size_t k = 0; k < c->n_susp && k < 8; k++) {
        int32_t i = c->susp[k].member;
        const member_t *m = &c->m[i];
        if (!(c->probe[0].active && i == c->probe[0].target))
            send_probe(c, now, &m->addr, SWIM_PING, 0, id_of(c, m), m->id_len, m->gen, NULL, i);
    }
}

static void probe_begin(swim_core_t *c, int64_t now, probe_t *p, int32_t t)
{
    member_t *m = &c->m[t];
    p->active = true;
    p->acked = p->indirect_sent = false;
    p->target = t;
    p->target_gen = m->gen;
    p->seq = ++c->probe_seq;
    p->t_indirect = now + scaled(c, c->cfg.probe_timeout_ns);
    p->t_end = now + scaled(c, c->cfg.probe_interval_ns);
    p->expected_nacks = p->nacks = 0;
    send_probe(c, now, &m->addr, SWIM_PING, p->seq, id_of(c, m), m->id_len, m->gen, NULL,
               m->state == SWIM_SUSPECT ? t : -1);
}

static void probe_start(swim_core_t *c, int64_t now)
{
    int32_t t = next_target(c);
    if (t < 0) {
        c->next_probe = now + c->cfg.probe_interval_ns;
        return;
    }
    probe_begin(c, now, &c->probe[0], t);
    c->next_probe = c->probe[0].t_end;
}

static void probe_indirect(swim_core_t *c, int64_t now, probe_t *p)
{
    p->indirect_sent = true;
    const member_t *m = &c->m[p->target];
    size_t k = pick(c, now, (size_t)c->cfg.indirect_checks, p->target, ok_alive);
    for (size_t j = 0; j < k; j++)
        send_probe(c, now, &c->m[c->scratch[j]].addr, SWIM_PING_REQ, p->seq, id_of(c, m), m->id_len,
                   m->gen, &m->addr, -1);
    p->expected_nacks = (int)k;
    /* and the direct ping once more (memberlist tries TCP here): a lost ping or ack is the
     * commonest failure under loss, and a second try costs one small datagram */
    send_probe(c, now, &m->addr, SWIM_PING, p->seq, id_of(c, m), m->id_len, m->gen, NULL,
               m->state == SWIM_SUSPECT ? p->target : -1);
}

static void probe_finish(swim_core_t *c, int64_t now, probe_t *p)
{
    p->active = false;
    if (p->acked)
        return;
    /* Lifeguard: missing nacks say the fault may be ours */
    int delta = p->expected_nacks > 0 ? p->expected_nacks - p->nacks : 1;
    health(c, delta);
    member_t *m = &c->m[p->target];
    if (m->gen != p->target_gen)
        return; /* it restarted meanwhile: the new generation is not the one we probed */
    /* A suspicion is a fleet-wide event (it and the refutation reach every member), so at 20%
     * loss on every link the probes that failed by bad luck (about 1 in 14, direct and
     * indirect) made the bytes per member grow with N: 5.5 KiB/s at 256 members. Above
     * probe_retry_above live members, a member alive to us is suspected only when it fails
     * probe_retries more probes in a row: they follow at once, one probe interval each, beside
     * the round-robin probe so they do not slow it (one retry at a time; a failure that finds
     * it busy counts towards the next). One we already suspect is confirmed by one failure.
     * Small clusters keep the quicker suspicion: there a false one costs little. */
    int retries = c->last_live > c->cfg.probe_retry_above ? c->cfg.probe_retries : 0;
    if (m->state == SWIM_ALIVE && m->probe_fails++ < retries) {
        if (!c->probe[1].active)
            probe_begin(c, now, &c->probe[1], p->target);
        return;
    }
    m->probe_fails = 0;
    swim_update_t u;
    member_update(c, m, &u);
    u.state = SWIM_SUSPECT;
    u.from = c->m[0].hash;
    apply(c, now, &u);
}

static void on_ack(swim_core_t *c, int64_t now, uint32_t seq, bool nack)
{
    for (int k = 0; k < 2; k++) {
        probe_t *p = &c->probe[k];
        if (!p->active || seq != p->seq)
            continue;
        if (nack) {
            p->nacks++;
        } else if (!p->acked) {
            p->acked = true;
            p->active = false;
            c->m[p->target].last_heard = now;
            c->m[p->target].probe_fails = 0;
            health(c, -1);
        }
        return;
    }
    if (nack)
        return;
    for (int k = 0; k < RELAY_MAX; k++) {
        relay_t *r = &c->relays[k];
        if (r->used && r->my_seq == seq) {
            send_simple(c, now, &r->requester, SWIM_ACK, r->their_seq, -1);
            r->used = false;
            return;
        }
    }
}

static void on_ping_req(swim_core_t *c, int64_t now, const swim_msg_t *msg, const swim_addr_t *from)
{
    for (int k = 0; k < RELAY_MAX; k++) {
        relay_t *r = &c->relays[k];
        if (r->used)
            continue;
        r->used = true;
        r->nacked = false;
        r->my_seq = ++c->probe_seq;
        r->their_seq = msg->probe_seq;
        r->requester = *from;
        r->nack_at = now + c->cfg.probe_timeout_ns * 4 / 5;
        r->expire = now + c->cfg.probe_timeout_ns;
        send_probe(c, now, &msg->target_addr, SWIM_PING, r->my_seq, msg->target, msg->target_len,
                   msg->target_gen, NULL, -1);
        return;
    }
    /* every relay slot busy: say nothing, the requester counts it as a missed nack */
}

static void relays_tick(swim_core_t *c, int64_t now)
{
    for (int k = 0; k < RELAY_MAX; k++) {
        relay_t *r = &c->relays[k];
        if (!r->used)
            continue;
        if (!r->nacked && now >= r->nack_at) {
            r->nacked = true;
            send_simple(c, now, &r->requester, SWIM_NACK, r->their_seq, -1);
        }
        if (now >= r->expire)
            r->used = false;
    }
}

/* ---- reclaiming dead and left members ---- */

/*
 * Drops the members dead or left for reclaim_ns. Only when one may be due (c->reclaim_due,
 * kept by set_state): scanning every table every second was the simulator's largest cost at
 * 1,000 members (each of N cores reading N records a second).
 */
static void reclaim(swim_core_t *c, int64_t now)
{
    if (now < c->reclaim_due)
        return;
    size_t keep = 1;
    bool any = false;
    c->reclaim_due = INT64_MAX;
    for (size_t i = 1; i < c->n; i++) {
        const member_t *m = &c->m[i];
        if (is_live(m->state))
            continue;
        int64_t due = m->state_since + c->cfg.reclaim_ns;
        if (now >= due)
            any = true;
        else if (due < c->reclaim_due)
            c->reclaim_due = due;
    }
    if (!any)
        return;
    int32_t *map = c->scratch;
    map[0] = 0;
    for (size_t i = 1; i < c->n; i++) {
        member_t *m = &c->m[i];
        if (!is_live(m->state) && now - m->state_since >= c->cfg.reclaim_ns) {
            bc_unlink(c, (int32_t)i);
            free(m->meta);
            map[i] = -1;
        } else {
            map[i] = (int32_t)keep++;
        }
    }
    for (size_t i = 1; i < c->n; i++)
        if (map[i] >= 0 && (size_t)map[i] != i)
            c->m[map[i]] = c->m[i];
    size_t old_n = c->n;
    c->n = keep;
    /* the id arena is in table order (members are appended to both), so it compacts in place */
    c->ids_len = 0;
    for (size_t i = 0; i < c->n; i++) {
        member_t *m = &c->m[i];
        memmove(c->ids + c->ids_len, c->ids + m->id_off, m->id_len + 1u);
        m->id_off = (uint32_t)c->ids_len;
        c->ids_len += m->id_len + 1u;
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
    for (size_t k = 0; k < c->n_susp; k++)
        c->susp[k].member = map[c->susp[k].member];
    for (int k = 0; k < 2; k++) {
        probe_t *p = &c->probe[k];
        if (p->active && (size_t)p->target < old_n && map[p->target] >= 0)
            p->target = map[p->target];
        else
            p->active = false;
    }
    c->order_len = c->order_pos = 0;
    index_rebuild(c);
}

/* ---- the public surface ---- */

int swim_new(swim_core_t **out, const swim_config_t *cfg, int64_t now, tt_err_t *err)
{
    *out = NULL;
    size_t id_len = cfg->id ? strlen(cfg->id) : 0;
    size_t label_len = cfg->label ? strlen(cfg->label) : 0;
    const char *field = NULL, *why = NULL;
    if (id_len < 1 || id_len > SWIM_ID_MAX)
        field = "id", why = "must be 1..128 bytes";
    else if (label_len > SWIM_LABEL_MAX)
        field = "label", why = "at most 64 bytes";
    else if (cfg->nkeys > SWIM_KEYRING_MAX || (cfg->nkeys && !cfg->keys))
        field = "keys", why = "at most 16";
    else if (cfg->probe_interval_ns <= 0 || cfg->probe_timeout_ns <= 0 ||
             cfg->probe_timeout_ns > cfg->probe_interval_ns || cfg->gossip_interval_ns <= 0 ||
             cfg->pushpull_interval_ns <= 0)
        field = "intervals", why = "must be positive, probe timeout within the probe interval";
    else if (cfg->indirect_checks < 0 || cfg->gossip_nodes < 0 || cfg->retransmit_mult < 1 ||
             cfg->suspicion_mult < 1 || cfg->suspicion_max_mult < 1 || cfg->awareness_max < 1 ||
             cfg->probe_retries < 0 || cfg->probe_retries > 255 || cfg->pushpull_bytes_per_s < 1)
        field = "multipliers", why = "out of range";
    else if (cfg->addr.family != 4 && cfg->addr.family != 6)
        field = "addr", why = "family must be 4 or 6";
    if (field)
        return tt_err_set(err, SWIM_EINVAL, field, "%s", why);
    swim_core_t *c = calloc(1, sizeof *c);
    if (!c)
        return SWIM_ENOMEM;
    c->cfg = *cfg;
    memcpy(c->label, cfg->label ? cfg->label : "", label_len);
    c->label_len = label_len;
    c->cfg.label = c->label;
    for (size_t k = 0; k < cfg->nkeys; k++)
        memcpy(c->keys[k], cfg->keys[k], SWIM_KEY_BYTES);
    c->cfg.keys = (const uint8_t(*)[SWIM_KEY_BYTES])c->keys;
    c->rng = cfg->seed;
    for (int b = 0; b < BC_BUCKETS; b++)
        c->bc_head[b] = c->bc_tail[b] = -1;
    if (reserve(c) || add_member(c, now, cfg->id, id_len, 0) != 0) {
        swim_free(c);
        return SWIM_ENOMEM;
    }
    c->cfg.id = NULL; /* the caller's; ours is in c->ids */
    c->m[0].gen = cfg->generation;
    c->m[0].addr = cfg->addr;
    c->last_live = 1;
    broadcast(c, 0, 0);
    /* staggered, so a fleet started together does not probe in lockstep */
    c->next_probe = now + rnd_below(c, cfg->probe_interval_ns);
    c->next_gossip = now + rnd_below(c, cfg->gossip_interval_ns);
    c->next_pushpull = now + cfg->pushpull_interval_ns + rnd_below(c, cfg->pushpull_interval_ns);
    c->next_reclaim = now + RECLAIM_EVERY_NS;
    c->reclaim_due = INT64_MAX;
    *out = c;
    return 0;
}

int swim_set_keys(swim_core_t *c, const uint8_t (*keys)[SWIM_KEY_BYTES], size_t n)
{
    if (c->cfg.nkeys == 0 || n == 0 || n > SWIM_KEYRING_MAX)
        return SWIM_EINVAL;
    sodium_memzero(c->keys, sizeof c->keys);
    memcpy(c->keys, keys, n * SWIM_KEY_BYTES);
    c->cfg.nkeys = n;
    return 0;
}

void swim_free(swim_core_t *c)
{
    if (!c)
        return;
    sodium_memzero(c->keys, sizeof c->keys);
    for (size_t i = 0; i < c->n; i++)
        free(c->m[i].meta);
    free(c->m);
    free(c->index);
    free(c->scratch);
    free(c->order);
    free(c->susp);
    free(c->ids);
    free(c->out.dgram);
    free(c->arena);
    free(c->ev);
    free(c);
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

static void want_pushpull(swim_core_t *c, int64_t now)
{
    c->next_pushpull = now + pushpull_interval(c);
    unsigned round = c->pushpull_round++;
    size_t k = 0;
    /* odd rounds go to a seed (heals partitions older than the reclaim time); even rounds to
     * a live member, or to a dead one half of the time (heals younger ones) */
    if (!(round & 1)) {
        if (round & 2)
            k = pick(c, now, 1, -1, ok_dead);
        if (k == 0)
            k = pick(c, now, 1, -1, ok_live);
    }
    c->out.pp_wanted = true;
    c->out.pp_seed = k == 0;
    if (k)
        c->out.pp_to = c->m[c->scratch[0]].addr;
}

static void gossip_tick(swim_core_t *c, int64_t now)
{
    c->next_gossip = now + c->cfg.gossip_interval_ns;
    if (!bc_pending(c))
        return;
    size_t k = pick(c, now, (size_t)c->cfg.gossip_nodes, -1, ok_gossip);
    int32_t targets[64];
    if (k > 64)
        k = 64;
    memcpy(targets, c->scratch, k * sizeof *targets);
    for (size_t j = 0; j < k && bc_pending(c); j++)
        send_simple(c, now, &c->m[targets[j]].addr, SWIM_GOSSIP, 0, -1);
}

void swim_set_wall(swim_core_t *c, int64_t now, int64_t wall_ns)
{
    c->wall_off = wall_ns - now;
}

int swim_tick(swim_core_t *c, int64_t now)
{
    if (c->leaving) { /* a leaver only keeps gossiping its departure */
        if (now >= c->next_gossip)
            gossip_tick(c, now);
        return 0;
    }
    for (int k = 0; k < 2; k++) {
        probe_t *p = &c->probe[k];
        if (p->active && !p->acked && !p->indirect_sent && now >= p->t_indirect)
            probe_indirect(c, now, p);
        if (p->active && now >= p->t_end)
            probe_finish(c, now, p);
    }
    if (!c->probe[0].active && now >= c->next_probe)
        probe_start(c, now);
    relays_tick(c, now);
    if (c->n_susp && now >= c->next_buddy)
        buddy_pings(c, now);
    for (size_t k = 0; k < c->n_susp;) {
        susp_t *x = &c->susp[k];
        int64_t heard = c->m[x->member].last_heard;
        if (now < x->deadline) {
            k++;
        } else if (heard > x->start) {
            /* it sent us a datagram since we suspected it: slow, not dead. The clock starts
             * again from that sign of life (a dead member sends nothing). */
            x->deadline += heard - x->start;
            x->start = heard;
            k++;
        } else {
            declare(c, now, x->member, SWIM_DEAD, c->m[0].hash); /* ends the suspicion */
        }
    }
    if (c->meta_again && now >= c->meta_again) {
        c->meta_again = 0;
        tell_live(c, now, META_DIRECT_MAX);
    }
    if (now >= c->next_gossip)
        gossip_tick(c, now);
    if (now >= c->next_pushpull)
        want_pushpull(c, now);
    if (now >= c->next_reclaim) {
        c->next_reclaim = now + RECLAIM_EVERY_NS;
        reclaim(c, now);
    }
    note_live(c);
    return 0;
}

int64_t swim_next_deadline(const swim_core_t *c)
{
    int64_t t = c->next_gossip;
#define MIN(x) (t = (x) < t ? (x) : t)
    if (c->leaving)
        return t;
    MIN(c->next_pushpull);
    MIN(c->next_reclaim);
    if (!c->probe[0].active)
        MIN(c->next_probe);
    for (int k = 0; k < 2; k++) {
        const probe_t *p = &c->probe[k];
        if (p->active && !p->acked && !p->indirect_sent)
            MIN(p->t_indirect);
        if (p->active)
            MIN(p->t_end);
    }
    for (int k = 0; k < RELAY_MAX; k++)
        if (c->relays[k].used)
            MIN(c->relays[k].nacked ? c->relays[k].expire : c->relays[k].nack_at);
    if (c->n_susp)
        MIN(c->next_buddy);
    if (c->meta_again)
        MIN(c->meta_again);
    for (size_t k = 0; k < c->n_susp; k++)
        MIN(c->susp[k].deadline);
#undef MIN
    return t;
}

/* The replay check for a sender we know (same generation); true = fresh. */
static bool replay_ok(window_t *w, uint64_t seq)
{
    if (seq > w->max) {
        uint64_t shift = seq - w->max;
        w->bits = shift >= REPLAY_BITS ? 1 : (w->bits << shift) | 1;
        w->max = seq;
        return true;
    }
    uint64_t back = w->max - seq;
    if (back >= REPLAY_BITS || (w->bits >> back) & 1)
        return false;
    w->bits |= UINT64_C(1) << back;
    return true;
}

/* The window a message of the sender's is checked against: push-pull frames have their own. */
static window_t *window_of(member_t *m, const swim_msg_t *msg)
{
    return msg->kind == SWIM_PUSHPULL ? &m->pp : &m->rx;
}

static int drop(swim_core_t *c, int rc)
{
    uint64_t *ctr[] = {
        [-SWIM_EOVERSIZE] = &c->ctr.drop_oversize, [-SWIM_ETRUNCATED] = &c->ctr.drop_truncated,
        [-SWIM_EVERSION] = &c->ctr.drop_version,   [-SWIM_EMODE] = &c->ctr.drop_mode,
        [-SWIM_EAUTH] = &c->ctr.drop_auth,         [-SWIM_EMALFORMED] = &c->ctr.drop_malformed,
        [-SWIM_ESTALE] = &c->ctr.drop_stale,       [-SWIM_EREPLAY] = &c->ctr.drop_replay,
        [-SWIM_ESELF] = &c->ctr.drop_self,
    };
    if (-rc > 0 && (size_t)-rc < sizeof ctr / sizeof ctr[0] && ctr[-rc])
        (*ctr[-rc])++;
    return rc;
}

/* Opens, decodes and authenticates the sender of a frame (a datagram, or a push-pull frame:
 * each kind only on its own transport, so neither can spend the other's replay window). */
static int admit(swim_core_t *c, int64_t now, bool pushpull, const uint8_t *bytes, size_t len,
                 uint8_t *scratch, swim_msg_t *msg, int32_t *sender, tt_err_t *err)
{
    const uint8_t *body;
    size_t blen;
    int rc = swim_open((const uint8_t(*)[SWIM_KEY_BYTES])c->keys, c->cfg.nkeys, c->label,
                       c->label_len, bytes, len, scratch, &body, &blen, err);
    if (rc)
        return drop(c, rc);
    if ((rc = swim_msg_decode(msg, body, blen, err)))
        return drop(c, rc);
    if ((msg->kind == SWIM_PUSHPULL) != pushpull) {
        if (pushpull)
            tt_err_set(err, SWIM_EMALFORMED, "kind", "%d where push-pull was expected", msg->kind);
        else
            tt_err_set(err, SWIM_EMALFORMED, "kind", "push-pull arrives over TCP, not UDP");
        return drop(c, SWIM_EMALFORMED);
    }
    const member_t *self = &c->m[0];
    if (is_self(c, msg->sender, msg->sender_len) && msg->sender_gen == self->gen) {
        return drop(c, tt_err_set(err, SWIM_ESELF, "sender_id", "our own id and generation"));
    }
    int64_t skew;
    if (__builtin_sub_overflow(now + c->wall_off, msg->sent_ns, &skew) ||
        skew > c->cfg.replay_window_ns || skew < -c->cfg.replay_window_ns) {
        return drop(c, tt_err_set(err, SWIM_ESTALE, "sent_ns",
                                  "%lld is more than %lld ns from our clock",
                                  (long long)msg->sent_ns, (long long)c->cfg.replay_window_ns));
    }
    if (c->cfg.start_wall_ns && msg->sent_ns < c->cfg.start_wall_ns - SWIM_START_SKEW_NS) {
        /* recorded before we started: our replay windows cannot know it, and a dead member's
         * old datagrams would count it live again until we detected it anew */
        return drop(c, tt_err_set(err, SWIM_ESTALE, "sent_ns",
                                  "%lld is from before this process started",
                                  (long long)msg->sent_ns));
    }
    *sender = find(c, msg->sender, msg->sender_len);
    if (*sender >= 0 && c->m[*sender].gen == msg->sender_gen) {
        if (!replay_ok(window_of(&c->m[*sender], msg), msg->seq)) {
            return drop(c, tt_err_set(err, SWIM_EREPLAY, "seq", "%llu already seen from %s",
                                      (unsigned long long)msg->seq, id_of(c, &c->m[*sender])));
        }
        c->m[*sender].last_heard = now;
    }
    return 0;
}

/*
 * A datagram from a sender missing from our table, or newer than the generation we hold (a join
 * or a restart whose gossip missed us, which otherwise waits for a push-pull: 2 of 100 joins at
 * 5% loss for up to 43 s): ask the sender for its record at once. A ping naming it with a
 * generation it does not have is answered by an ack that carries its own record first. At most
 * one fetch a probe interval per sender id.
 */
static void fetch_sender(swim_core_t *c, int64_t now, const swim_msg_t *msg,
                         const swim_addr_t *from, int32_t i)
{
    if (msg->kind == SWIM_ACK || (i >= 0 && c->m[i].gen >= msg->sender_gen))
        return; /* known, or an ack: an ack to a fetch that did not carry the record */
    uint64_t h = swim_id_hash(msg->sender, msg->sender_len);
    int slot = 0;
    for (int k = 0; k < FETCH_RECENT; k++) {
        if (c->fetched[k].hash == h && now - c->fetched[k].at < c->cfg.probe_interval_ns)
            return;
        if (c->fetched[k].at < c->fetched[slot].at)
            slot = k;
    }
    c->fetched[slot].hash = h;
    c->fetched[slot].at = now;
    send_probe(c, now, from, SWIM_PING, 0, msg->sender, msg->sender_len, i >= 0 ? c->m[i].gen : 0,
               NULL, -1);
}

/* After the updates are applied: the sender's index (-1 if still unknown), known being the
 * one admit found (indexes do not move while updates are applied). A sender first heard of in
 * its own message gets its replay window now. */
static int32_t note_new_sender(swim_core_t *c, const swim_msg_t *msg, int32_t known)
{
    if (known >= 0)
        return known;
    int32_t i = find(c, msg->sender, msg->sender_len);
    if (i > 0 && c->m[i].gen == msg->sender_gen)
        replay_ok(window_of(&c->m[i], msg), msg->seq);
    return i;
}

static void apply_all(swim_core_t *c, int64_t now, const swim_msg_t *msg, bool pushpull)
{
    const uint8_t *pos = msg->updates;
    uint64_t sender_hash = swim_id_hash(msg->sender, msg->sender_len);
    for (uint32_t k = 0; k < msg->n_updates; k++) {
        swim_update_t u;
        if (swim_update_next(&pos, msg->end, &u, NULL))
            return; /* validated already: unreachable */
        if (pushpull && u.state == SWIM_DEAD && !is_self(c, u.id, u.id_len)) {
            u.state = SWIM_SUSPECT; /* their dead is our suspect: it must time out here */
            u.from = sender_hash;
        }
        apply(c, now, &u);
    }
}

int swim_receive(swim_core_t *c, int64_t now, const swim_addr_t *from, const uint8_t *bytes,
                 size_t len, tt_err_t *err)
{
    c->app_ready = false;
    if (len > SWIM_DATAGRAM_MAX)
        return drop(c, tt_err_set(err, SWIM_EOVERSIZE, "datagram", "%zu bytes, at most %d", len,
                                  SWIM_DATAGRAM_MAX));
    swim_msg_t msg;
    int32_t sender;
    int rc = admit(c, now, false, bytes, len, c->rxbuf, &msg, &sender, err);
    if (rc)
        return rc;
    c->ctr.rx_packets++;
    c->ctr.rx_bytes += len;
    c->joined = true;
    if (c->leaving) { /* a prober that missed our leave learns it from the ack */
        if (msg.kind == SWIM_PING)
            send_simple(c, now, from, SWIM_ACK, msg.probe_seq, 0);
        return 0;
    }
    apply_all(c, now, &msg, false); /* first, so an ack carries our refutation */
    int32_t i = note_new_sender(c, &msg, sender);
    if (sender > 0)
        two_claimants(c, now, sender, &msg, from);
    fetch_sender(c, now, &msg, from, i);
    const member_t *self = &c->m[0]; /* after apply_all: the table may have moved */
    switch (msg.kind) {
    case SWIM_PING:
        if (is_self(c, msg.target, msg.target_len))
            send_simple(c, now, from, SWIM_ACK, msg.probe_seq,
                        msg.target_gen == self->gen ? -1 : 0);
        break;
    case SWIM_ACK:
    case SWIM_NACK:
        on_ack(c, now, msg.probe_seq, msg.kind == SWIM_NACK);
        break;
    case SWIM_PING_REQ:
        on_ping_req(c, now, &msg, from);
        break;
    case SWIM_APP: /* points into rxbuf: valid until the next call */
        c->app_ready = true;
        c->app_from = msg.sender;
        c->app_from_len = msg.sender_len;
        c->app = msg.app;
        c->app_len = msg.app_len;
        break;
    default:
        break;
    }
    note_live(c);
    return 0;
}

/*
 * After our first push-pull, our record goes to every live member directly, once (as a leave
 * does): gossip alone missed some member in 2 of 100 joins at 5% loss, which then waited for a
 * push-pull. One datagram per member per process start; a lost one is still covered by gossip
 * and by fetch_sender.
 */
static void announce(swim_core_t *c, int64_t now)
{
    if (c->announced)
        return;
    c->announced = true;
    tell_live(c, now, c->n);
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
    swim_wbuf_t w = {out + head, 0, cap - head - SWIM_TAG_BYTES, false};
    const member_t *self = &c->m[0];
    swim_enc_head(&w, c->ids, self->id_len, self->gen, now + c->wall_off, ++c->tx_seq,
                  SWIM_PUSHPULL);
    swim_msg_t om = {.kind = SWIM_PUSHPULL, .join = join};
    swim_enc_msg(&w, &om);
    size_t at = swim_enc_array_open(&w);
    for (size_t i = 0; i < c->n; i++) {
        swim_update_t u;
        member_update(c, &c->m[i], &u);
        swim_enc_update(&w, &u);
    }
    swim_enc_array_close(&w, at, (uint32_t)c->n);
    if (w.overflow)
        return SWIM_ESPACE;
    if (c->cfg.nkeys) {
        uint8_t nonce[SWIM_NONCE_BYTES];
        for (int i = 0; i < 3; i++) {
            uint64_t r = rnd(c);
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

int swim_pushpull_receive(swim_core_t *c, int64_t now, const uint8_t *bytes, size_t len,
                          tt_err_t *err)
{
    if (len > SWIM_PUSHPULL_MAX)
        return drop(c, tt_err_set(err, SWIM_EOVERSIZE, "push-pull", "%zu bytes, at most %u", len,
                                  SWIM_PUSHPULL_MAX));
    uint8_t *scratch = malloc(len ? len : 1);
    if (!scratch)
        return SWIM_ENOMEM;
    swim_msg_t msg;
    int32_t sender;
    int rc = admit(c, now, true, bytes, len, scratch, &msg, &sender, err);
    if (!rc) {
        c->ctr.pushpull_in++;
        c->joined = true;
        if (!c->leaving) {
            apply_all(c, now, &msg, true);
            announce(c, now);
        }
        note_new_sender(c, &msg, sender);
        note_live(c);
    }
    free(scratch);
    return rc;
}

bool swim_joined(const swim_core_t *c)
{
    return c->joined;
}

int swim_set_meta(swim_core_t *c, int64_t now, const uint8_t *meta, size_t len)
{
    if (len > SWIM_META_MAX || (len && !meta))
        return SWIM_EINVAL;
    member_t *self = &c->m[0];
    if (!meta_room(self, len))
        return SWIM_ENOMEM;
    if (len)
        memcpy(self->meta, meta, len);
    self->meta_len = (uint8_t)len;
    self->meta_version++;
    self->inc++;
    broadcast(c, 0, 0);
    /* Straight to the live members too, now and once more a probe interval later: gossip alone
     * left 6 of 400 divisor updates missing from some view after 2 s at 5% loss, the worst for
     * 15 s, until a push-pull; one direct datagram still left 1 in some seeds. */
    tell_live(c, now, META_DIRECT_MAX);
    c->meta_again = now + c->cfg.probe_interval_ns;
    return 0;
}

int swim_send_app(swim_core_t *c, int64_t now, const char *to, size_t to_len,
                  const uint8_t *payload, size_t len)
{
    int32_t i = find(c, to, to_len);
    if (i <= 0 || !is_live(c->m[i].state) || len > SWIM_APP_MAX || (len && !payload) || c->leaving)
        return SWIM_EINVAL;
    swim_msg_t om = {.kind = SWIM_APP, .app = payload, .app_len = len};
    send_msg(c, now, &c->m[i].addr, &om, -1);
    return 0;
}

bool swim_app_take(swim_core_t *c, const char **from, size_t *from_len, const uint8_t **payload,
                   size_t *len)
{
    if (!c->app_ready)
        return false;
    c->app_ready = false;
    *from = c->app_from;
    *from_len = c->app_from_len;
    *payload = c->app;
    *len = c->app_len;
    return true;
}

int swim_leave(swim_core_t *c, int64_t now)
{
    member_t *self = &c->m[0];
    if (c->leaving)
        return 0;
    self->inc++;
    set_state(c, now, 0, SWIM_LEFT);
    broadcast(c, 0, self->hash);
    /* tell every live member at once; gossip carries it to any this misses */
    for (size_t i = 1; i < c->n; i++)
        if (is_live(c->m[i].state))
            send_simple(c, now, &c->m[i].addr, SWIM_GOSSIP, 0, 0);
    c->leaving = true;
    c->probe[0].active = c->probe[1].active = false;
    note_live(c);
    return 0;
}

size_t swim_member_count(const swim_core_t *c)
{
    return c->n;
}

static void view(const swim_core_t *c, size_t i, swim_member_view_t *v)
{
    const member_t *m = &c->m[i];
    v->id = id_of(c, m);
    v->id_len = m->id_len;
    v->generation = m->gen;
    v->incarnation = m->inc;
    v->state = m->state;
    v->addr = m->addr;
    v->last_heard_ns = m->last_heard;
    v->state_since_ns = m->state_since;
    v->meta_version = m->meta_version;
    v->meta_len = m->meta_len;
    v->meta = meta_of(m);
    v->self = i == 0;
}

int swim_member_get(const swim_core_t *c, size_t i, swim_member_view_t *v)
{
    if (i >= c->n)
        return SWIM_EINVAL;
    view(c, i, v);
    return 0;
}

int swim_member_find(const swim_core_t *c, const char *id, swim_member_view_t *v)
{
    int32_t i = find(c, id, strlen(id));
    if (i < 0)
        return SWIM_EINVAL;
    view(c, (size_t)i, v);
    return 0;
}

int swim_live_count(const swim_core_t *c)
{
    return live_count(c);
}

int swim_health(const swim_core_t *c)
{
    return c->awareness;
}

const swim_outbox_t *swim_outbox(const swim_core_t *c)
{
    return &c->out;
}

void swim_outbox_clear(swim_core_t *c)
{
    c->out.n = 0;
    c->arena_len = 0;
    c->out.pp_wanted = false;
    if (c->arena_cap > OUTBOX_KEEP) {
        /* a burst (a join announced to every member: up to N datagrams) is not kept for good */
        free(c->arena);
        free(c->out.dgram);
        c->arena = NULL;
        c->out.dgram = NULL;
        c->out.arena = NULL;
        c->arena_cap = c->out_cap = 0;
    }
}

const swim_event_t *swim_events(const swim_core_t *c, size_t *n)
{
    *n = c->n_ev;
    return c->ev;
}

void swim_events_clear(swim_core_t *c)
{
    c->n_ev = 0;
    if (c->ev_cap * sizeof *c->ev > OUTBOX_KEEP) { /* a join's push-pull: an UP per member */
        free(c->ev);
        c->ev = NULL;
        c->ev_cap = 0;
    }
}

const swim_counters_t *swim_counters(const swim_core_t *c)
{
    return &c->ctr;
}
