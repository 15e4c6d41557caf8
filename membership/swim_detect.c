/*
 * Failure detection, above dissemination: the probe round, indirect probes and relays,
 * Lifeguard's suspicion timers and local health, the persistent buddy pings, and what a
 * detection ends in (a suspicion, a death). It calls dissemination (swim_gossip.c) and the table
 * and nothing above; the table tells it of a state change and a renumbering through the hooks
 * swim_new wires. See swim.c.
 */
#include "swim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void swim__health(swim_core_t *c, int delta)
{
    c->awareness += delta;
    if (c->awareness < 0)
        c->awareness = 0;
    if (c->awareness > c->cfg.awareness_max - 1)
        c->awareness = c->cfg.awareness_max - 1;
}

/* Room for one more running suspicion; false out of memory. */
bool swim__susp_room(swim_core_t *c)
{
    return swim__grow((void **)&c->susp, &c->susp_cap, c->n_susp + 1, sizeof *c->susp);
}

void swim__susp_cancel(swim_core_t *c, int32_t i)
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
void swim__susp_start(swim_core_t *c, int64_t now, int32_t i, uint64_t from)
{
    int n = c->last_live;
    int k = c->cfg.suspicion_mult - 2;
    if (n - 2 < k)
        k = 0;
    if (k > SUSP_CONFIRM_MAX - 1)
        k = SUSP_CONFIRM_MAX - 1;
    double scale = n > 10 ? log10((double)n) : 1.0;
    swim__susp_cancel(c, i);
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
bool swim__susp_confirm(susp_t *x, uint64_t from)
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

/* The table renumbered its members (reclaim): the suspicions and the probes follow, and the
 * probe round starts again. */
void swim__detect_renumber(swim_core_t *c, const int32_t *map, size_t old_n)
{
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
}

/* A suspicion of member i at incarnation inc, by `from`: a new one when i is alive to us (or
 * suspected at an older incarnation), a confirmation when it is suspect already. */
void swim__suspect(swim_core_t *c, int64_t now, int32_t i, uint32_t inc, uint64_t from)
{
    member_t *m = &c->m[i];
    if (inc < m->inc)
        return;
    /* A suspicion of a newer incarnation is a new suspicion (the member refuted the old
     * one), never a confirmation: confirming would keep the old timer running and let the
     * DEAD it declares carry the newest incarnation, beating the member's next refutation
     * everywhere (slow members died so, refuting in time). memberlist likewise never
     * lets a confirmation raise the incarnation its timer declares. */
    if (m->state == SWIM_ALIVE || (m->state == SWIM_SUSPECT && inc > m->inc)) {
        if (!swim__susp_room(c))
            return;
        m->inc = inc;
        swim__set_state(c, now, i, SWIM_SUSPECT);
        swim__susp_start(c, now, i, from);
        c->ctr.suspicions++;
        swim__broadcast(c, i, from);
    } else if (m->state == SWIM_SUSPECT) {
        if (swim__susp_confirm(&c->susp[m->susp], from))
            swim__broadcast(c, i, from);
    }
}

/* Member i is dead (or has left): the state, the broadcast, and the event if it was live. */
void swim__declare(swim_core_t *c, int64_t now, int32_t i, swim_state_t s, uint64_t from)
{
    bool was_live = swim__is_live(c->m[i].state);
    swim__set_state(c, now, i, s);
    swim__broadcast(c, i, from);
    if (was_live || s == SWIM_LEFT)
        swim__emit(c, s == SWIM_LEFT ? SWIM_EV_LEFT : SWIM_EV_DOWN, &c->m[i]);
}

static bool probe_candidate(const member_t *m)
{
    return swim__is_live(m->state);
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
            size_t j = (size_t)swim__rnd_below(c, (int64_t)i);
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
            swim__send_probe(c, now, &m->addr, SWIM_PING, 0, swim__id_of(c, m), m->id_len, m->gen,
                             NULL, i);
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
    p->t_indirect = now + swim__scaled(c, c->cfg.probe_timeout_ns);
    p->t_end = now + swim__scaled(c, c->cfg.probe_interval_ns);
    p->expected_nacks = p->nacks = 0;
    swim__send_probe(c, now, &m->addr, SWIM_PING, p->seq, swim__id_of(c, m), m->id_len, m->gen,
                     NULL, m->state == SWIM_SUSPECT ? t : -1);
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
    size_t k = swim__pick(c, now, (size_t)c->cfg.indirect_checks, p->target, swim__ok_alive);
    for (size_t j = 0; j < k; j++)
        swim__send_probe(c, now, &c->m[c->scratch[j]].addr, SWIM_PING_REQ, p->seq,
                         swim__id_of(c, m), m->id_len, m->gen, &m->addr, -1);
    p->expected_nacks = (int)k;
    /* and the direct ping once more (memberlist tries TCP here): a lost ping or ack is the
     * commonest failure under loss, and a second try costs one small datagram */
    swim__send_probe(c, now, &m->addr, SWIM_PING, p->seq, swim__id_of(c, m), m->id_len, m->gen,
                     NULL, m->state == SWIM_SUSPECT ? p->target : -1);
}

static void probe_finish(swim_core_t *c, int64_t now, probe_t *p)
{
    p->active = false;
    if (p->acked)
        return;
    /* Lifeguard: missing nacks say the fault may be ours */
    int delta = p->expected_nacks > 0 ? p->expected_nacks - p->nacks : 1;
    swim__health(c, delta);
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
    swim__suspect(c, now, p->target, m->inc, c->m[0].hash);
}

void swim__on_ack(swim_core_t *c, int64_t now, uint32_t seq, bool nack)
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
            swim__health(c, -1);
        }
        return;
    }
    if (nack)
        return;
    for (int k = 0; k < RELAY_MAX; k++) {
        relay_t *r = &c->relays[k];
        if (r->used && r->my_seq == seq) {
            swim__send_simple(c, now, &r->requester, SWIM_ACK, r->their_seq, -1);
            r->used = false;
            return;
        }
    }
}

void swim__on_ping_req(swim_core_t *c, int64_t now, const swim_msg_t *msg, const swim_addr_t *from)
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
        swim__send_probe(c, now, &msg->target_addr, SWIM_PING, r->my_seq, msg->target,
                         msg->target_len, msg->target_gen, NULL, -1);
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
            swim__send_simple(c, now, &r->requester, SWIM_NACK, r->their_seq, -1);
        }
        if (now >= r->expire)
            r->used = false;
    }
}

/* Failure detection's timers: the probes, the relays, the buddy pings, the suspicions. */
void swim__detect_tick(swim_core_t *c, int64_t now)
{
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
            swim__declare(c, now, x->member, SWIM_DEAD, c->m[0].hash); /* ends the suspicion */
        }
    }
}

/* The earlier of t and failure detection's next deadline. */
int64_t swim__detect_deadline(const swim_core_t *c, int64_t t)
{
#define MIN(x) (t = (x) < t ? (x) : t)
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
    for (size_t k = 0; k < c->n_susp; k++)
        MIN(c->susp[k].deadline);
#undef MIN
    return t;
}
