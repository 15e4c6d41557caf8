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
 *  - Islands (issue 35). A fleet can split into two that each know nothing of the other: a
 *    rolling restart took every static seed down at once, the first seed back found only other
 *    restarted members, and they made a second fleet that grew as the first shrank, each side
 *    converged on itself. Three things keep one fleet. A restart with state remembers the
 *    members it knew (swim_known_load; the shell keeps the file) and the join dials them beside
 *    the seeds. For rejoin_window_ns after our start and after any member dies or leaves, once
 *    a rejoin interval and with probability 4 / live (about four tries a second fleet-wide,
 *    whatever N), we ping one member dead or left within the window, or remembered and not in
 *    the table, at its address, or push-pull with a seed address no live member holds; a ping
 *    answered by a process the table did not hold live has found another island, and a
 *    push-pull with it merges the tables (swim__rejoin_tick). Serf reconnects to failed
 *    members the same way (reconnect.go), and memberlist gossips to the dead for a while. And
 *    a leave of a member we never knew is kept (not counted, no event): a restarted member
 *    learns which of the members it remembers left while it was down.
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
 * Files, in layers, each calling only the ones below it (issue 33: they used to call each other
 * both ways over the one swim_core_t): swim_table.c at the bottom (the member records, their
 * index and states, reclaiming, the event queue), then swim_gossip.c (dissemination and
 * sending, push-pull, the search for islands), swim_detect.c (probing, suspicion, local
 * health, and what a detection ends in: swim__suspect, swim__declare), swim_recv.c (admitting
 * and applying what arrives), and swim.c on top (this: the core's life, its timers, its public
 * surface). What the layers above keep per member hears from the table through the hooks
 * swim_new wires (c->hooks: a suspicion ends, a member dies or leaves, a member is reclaimed,
 * members are renumbered). swim_int.h is what they share. The split changed no behaviour: the
 * simulator's traces for the same seeds are the same before and after (docs/membership.md).
 *
 * Costs: the member table is a dense array of lean records (self first) with an
 * open-addressing index by id hash; the broadcast queue is intrusive, bucketed by transmit
 * count, newest first in a bucket, so choosing the updates for a datagram costs what it sends.
 * Nothing allocates except the table (its index, its id arena, a member's metadata, the
 * running suspicions) as members arrive, and the outbox/event queues when they must grow.
 */
#include "swim_int.h"

#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECLAIM_EVERY_NS INT64_C(1000000000)
#define OUTBOX_KEEP (64u << 10) /* outbox arena (and event queue) bytes kept between calls */
#define META_DIRECT_MAX 64      /* members told of a metadata change directly (swim_set_meta) */

const char *swim_strerror(int code)
{
    return code == 0 ? "ok" : tt_err_message(code);
}

const char *swim_state_name(swim_state_t s)
{
    static const char *names[] = {"alive", "suspect", "dead", "left"};
    return (unsigned)s < 4 ? names[s] : "?";
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
    cfg->rejoin_window_ns = 60000 * MS;
    cfg->rejoin_interval_ns = 1000 * MS;
    cfg->label = "";
}

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
             cfg->pushpull_interval_ns <= 0 || cfg->rejoin_window_ns < 0 ||
             cfg->rejoin_interval_ns <= 0)
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
    /* the table, the bottom layer, tells the layers above through these (swim_int.h) */
    c->hooks = (swim_hooks_t){.unsuspect = swim__susp_cancel,
                              .not_live = swim__rejoin_note,
                              .dropped = swim__bc_unlink,
                              .renumbered_queue = swim__bc_renumber,
                              .renumbered_probes = swim__detect_renumber};
    for (int b = 0; b < BC_BUCKETS; b++)
        c->bc_head[b] = c->bc_tail[b] = -1;
    if (swim__reserve(c) || swim__add_member(c, now, cfg->id, id_len, 0) != 0) {
        swim_free(c);
        return SWIM_ENOMEM;
    }
    c->cfg.id = NULL; /* the caller's; ours is in c->ids */
    c->m[0].gen = cfg->generation;
    c->m[0].addr = cfg->addr;
    c->last_live = 1;
    swim__broadcast(c, 0, 0);
    /* staggered, so a fleet started together does not probe in lockstep */
    c->next_probe = now + swim__rnd_below(c, cfg->probe_interval_ns);
    c->next_gossip = now + swim__rnd_below(c, cfg->gossip_interval_ns);
    c->next_pushpull =
        now + cfg->pushpull_interval_ns + swim__rnd_below(c, cfg->pushpull_interval_ns);
    c->next_reclaim = now + RECLAIM_EVERY_NS;
    c->reclaim_due = INT64_MAX;
    c->started = now;
    c->rejoin_until = now + cfg->rejoin_window_ns;
    c->next_rejoin = now + cfg->rejoin_interval_ns + swim__rnd_below(c, cfg->rejoin_interval_ns);
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
    free(c->known);
    free(c);
}

void swim_set_wall(swim_core_t *c, int64_t now, int64_t wall_ns)
{
    c->wall_off = wall_ns - now;
}

int swim_tick(swim_core_t *c, int64_t now)
{
    if (c->leaving) { /* a leaver only keeps gossiping its departure */
        if (now >= c->next_gossip)
            swim__gossip_tick(c, now);
        return 0;
    }
    swim__detect_tick(c, now);
    if (c->meta_again && now >= c->meta_again) {
        c->meta_again = 0;
        swim__tell_live(c, now, META_DIRECT_MAX);
    }
    if (now >= c->next_gossip)
        swim__gossip_tick(c, now);
    if (now >= c->next_pushpull)
        swim__want_pushpull(c, now);
    if (now >= c->next_rejoin)
        swim__rejoin_tick(c, now);
    if (now >= c->next_reclaim) {
        c->next_reclaim = now + RECLAIM_EVERY_NS;
        swim__reclaim(c, now);
    }
    swim__note_live(c);
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
    MIN(c->next_rejoin);
    if (c->meta_again)
        MIN(c->meta_again);
#undef MIN
    return swim__detect_deadline(c, t);
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
    if (!swim__meta_room(self, len))
        return SWIM_ENOMEM;
    if (len)
        memcpy(self->meta, meta, len);
    self->meta_len = (uint8_t)len;
    self->meta_version++;
    self->inc++;
    swim__broadcast(c, 0, 0);
    /* Straight to the live members too, now and once more a probe interval later: gossip alone
     * left 6 of 400 divisor updates missing from some view after 2 s at 5% loss, the worst for
     * 15 s, until a push-pull; one direct datagram still left 1 in some seeds. */
    swim__tell_live(c, now, META_DIRECT_MAX);
    c->meta_again = now + c->cfg.probe_interval_ns;
    return 0;
}

int swim_send_app(swim_core_t *c, int64_t now, const char *to, size_t to_len,
                  const uint8_t *payload, size_t len)
{
    int32_t i = swim__find(c, to, to_len);
    if (i <= 0 || !swim__is_live(c->m[i].state) || len > SWIM_APP_MAX || (len && !payload) ||
        c->leaving)
        return SWIM_EINVAL;
    swim_msg_t om = {.kind = SWIM_APP, .app = payload, .app_len = len};
    swim__send_msg(c, now, &c->m[i].addr, &om, -1);
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

int swim_remember(swim_core_t *c, const char *id, size_t len, uint64_t generation,
                  const swim_addr_t *addr)
{
    if (!id || len < 1 || len > SWIM_ID_MAX || memchr(id, 0, len) || !addr ||
        (addr->family != 4 && addr->family != 6) || c->n_known >= SWIM_REMEMBER_MAX)
        return SWIM_EINVAL;
    if (!swim__grow((void **)&c->known, &c->known_cap, c->n_known + 1, sizeof *c->known))
        return SWIM_ENOMEM;
    remembered_t *k = &c->known[c->n_known++];
    k->gen = generation;
    k->addr = *addr;
    k->id_len = (uint8_t)len;
    memcpy(k->id, id, len);
    k->id[len] = 0;
    return 0;
}

static void known_of_table(const void *ctx, size_t i, swim_known_t *k)
{
    const swim_core_t *c = ctx;
    const member_t *m = &c->m[c->scratch[i]];
    *k = (swim_known_t){
        .id = swim__id_of(c, m), .id_len = m->id_len, .generation = m->gen, .addr = m->addr};
}

int swim_known_save(const swim_core_t *c, uint8_t **out, size_t *len)
{
    swim_core_t *w = (swim_core_t *)c; /* scratch only: the table is not changed */
    size_t n = 0;
    for (size_t i = 1; i < c->n && n < SWIM_REMEMBER_MAX; i++)
        if (swim__is_live(c->m[i].state))
            w->scratch[n++] = (int32_t)i;
    size_t cap = 64 + 2 * SWIM_ID_MAX + SWIM_LABEL_MAX + n * (SWIM_ID_MAX + 40);
    wire_pack_t b = {malloc(cap), 0, cap, false};
    if (!b.p)
        return SWIM_ENOMEM;
    swim_known_encode(&b, c->ids, c->m[0].id_len, c->label, c->label_len, n, known_of_table, c);
    if (b.overflow) { /* cannot happen: cap bounds every entry */
        free(b.p);
        return SWIM_ESPACE;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

typedef struct load_ctx {
    swim_core_t *c;
    int rc, n;
} load_ctx_t;

static void remember_one(void *ud, const swim_known_t *k)
{
    load_ctx_t *l = ud;
    int rc = l->rc ? l->rc : swim_remember(l->c, k->id, k->id_len, k->generation, &k->addr);
    l->rc = rc;
    l->n += rc == 0;
}

int swim_known_load(swim_core_t *c, const uint8_t *bytes, size_t len, tt_err_t *err)
{
    load_ctx_t l = {c, 0, 0};
    int rc = swim_known_decode(bytes, len, c->ids, c->m[0].id_len, c->label, c->label_len,
                               remember_one, &l, err);
    if (rc == 0 && l.rc)
        rc = tt_err_set(err, l.rc, "members", "%d remembered, then: %s", l.n, swim_strerror(l.rc));
    return rc ? rc : l.n;
}

size_t swim_known_missing(const swim_core_t *c, swim_known_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t k = 0; k < c->n_known; k++) {
        const remembered_t *r = &c->known[k];
        if (swim__find(c, r->id, r->id_len) >= 0)
            continue;
        if (n < cap)
            out[n] = (swim_known_t){
                .id = r->id, .id_len = r->id_len, .generation = r->gen, .addr = r->addr};
        n++;
    }
    return n;
}

bool swim_known_pick(swim_core_t *c, swim_addr_t *addr)
{
    size_t seen = 0;
    for (size_t k = 0; k < c->n_known; k++)
        if (swim__find(c, c->known[k].id, c->known[k].id_len) < 0 &&
            swim__rnd_below(c, (int64_t)++seen) == 0)
            *addr = c->known[k].addr;
    return seen > 0;
}

bool swim_addr_live(const swim_core_t *c, const swim_addr_t *a)
{
    for (size_t i = 0; i < c->n; i++)
        if (swim__is_live(c->m[i].state) && swim_addr_eq(&c->m[i].addr, a))
            return true;
    return false;
}

int swim_leave(swim_core_t *c, int64_t now)
{
    member_t *self = &c->m[0];
    if (c->leaving)
        return 0;
    self->inc++;
    swim__set_state(c, now, 0, SWIM_LEFT);
    swim__broadcast(c, 0, self->hash);
    /* tell every live member at once; gossip carries it to any this misses */
    for (size_t i = 1; i < c->n; i++)
        if (swim__is_live(c->m[i].state))
            swim__send_simple(c, now, &c->m[i].addr, SWIM_GOSSIP, 0, 0);
    c->leaving = true;
    c->probe[0].active = c->probe[1].active = false;
    swim__note_live(c);
    return 0;
}

size_t swim_member_count(const swim_core_t *c)
{
    return c->n;
}

static void view(const swim_core_t *c, size_t i, swim_member_view_t *v)
{
    const member_t *m = &c->m[i];
    v->id = swim__id_of(c, m);
    v->id_len = m->id_len;
    v->generation = m->gen;
    v->incarnation = m->inc;
    v->state = m->state;
    v->addr = m->addr;
    v->last_heard_ns = m->last_heard;
    v->state_since_ns = m->state_since;
    v->meta_version = m->meta_version;
    v->meta_len = m->meta_len;
    v->meta = swim__meta_of(m);
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
    int32_t i = swim__find(c, id, strlen(id));
    if (i < 0)
        return SWIM_EINVAL;
    view(c, (size_t)i, v);
    return 0;
}

int swim_live_count(const swim_core_t *c)
{
    return c->live;
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
    c->out.pp_wanted = c->out.pp_absent = false;
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
