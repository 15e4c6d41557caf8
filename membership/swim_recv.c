/*
 * Receiving, above failure detection: opening and admitting a datagram or a push-pull frame
 * (seal, replay window), applying the claims it carries, and answering it. It calls detection
 * (swim_detect.c), dissemination and the table, and nothing above. See swim.c.
 */
#include "swim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define REPLAY_BITS 64

static void refute(swim_core_t *c, uint32_t inc, bool penalize)
{
    member_t *self = &c->m[0];
    self->inc = (inc > self->inc ? inc : self->inc) + 1;
    c->ctr.refutes++;
    if (penalize)
        swim__health(c, 1);
    swim__broadcast(c, 0, 0);
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

/* A report from a peer: another live process claims our id. Emits SWIM_EV_DUPLICATE when it is
 * news (the first report, or the first after a quiet SWIM_DUPLICATE_HOLD_NS). */
static void duplicate_reported(swim_core_t *c, int64_t now, const swim_update_t *u)
{
    bool news = !c->dup.seen || now - c->dup.at >= SWIM_DUPLICATE_HOLD_NS;
    c->dup.seen = true;
    c->dup.at = now;
    c->dup.gen = u->generation;
    c->dup.addr = u->addr;
    swim_event_t *e = news ? swim__emit(c, SWIM_EV_DUPLICATE, &c->m[0]) : NULL;
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
    if (msg->sender_gen >= m->gen || !swim__is_live(m->state) ||
        now - m->gen_since < DUP_SETTLE_NS ||
        (m->dup_told && now - m->dup_told < c->cfg.probe_interval_ns))
        return;
    m->dup_told = now;
    c->ctr.dup_reports++;
    swim_msg_t om = {.kind = SWIM_GOSSIP};
    swim_update_t u;
    swim__member_update(c, m, &u);
    u.state = SWIM_ALIVE;
    u.from = c->m[0].hash;
    swim__send_msg_with(c, now, from, &om, &u, -1); /* the older claimant hears of the newer */
    u.generation = msg->sender_gen;
    u.incarnation = 0;
    u.addr = *from;
    u.meta_len = 0;
    swim__send_msg_with(c, now, &m->addr, &om, &u, -1); /* and the newer of the older */
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
        (swim__is_live(u->state) && !swim_addr_eq(&u->addr, &self->addr)))
        return false;
    self->gen = u->generation + 1;
    swim__broadcast(c, 0, 0);
    return true;
}

/* Applies one claim about a member. Returns nothing: stale claims are simply ignored. */
void swim__apply(swim_core_t *c, int64_t now, const swim_update_t *u)
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
            swim__broadcast(c, 0,
                            0); /* refuted already, but the claimant missed it: say it again */
        return;
    }
    int32_t i = swim__find(c, u->id, u->id_len);
    if (i < 0) {
        /* News of the death of a stranger, or a suspicion of one (a push-pull turns the
         * sender's DEAD into SUSPECT): counting it would add a dead member to N for a whole
         * suspicion timeout, with a spurious UP. memberlist ignores these too; if the member
         * lives, its own datagrams or its refutation bring it in. A leave is kept, quietly (no
         * event, not counted, not gossiped on, reclaimed as any): a member that left while we
         * were down is then known for what it is, not missing (a restarted replica's share
         * store waits for the members it last knew, and tries the addresses of those that
         * left: swim__rejoin_tick). */
        if (u->state != SWIM_ALIVE && u->state != SWIM_LEFT)
            return;
        i = swim__add_member(c, now, u->id, u->id_len, u->meta_len);
        if (i < 0)
            return;
        member_t *m = &c->m[i];
        m->gen = u->generation;
        m->inc = u->incarnation;
        copy_alive(m, u);
        if (u->state == SWIM_LEFT) {
            swim__set_state(c, now, i, SWIM_LEFT);
            return;
        }
        swim__broadcast(c, i, 0);
        swim__emit(c, SWIM_EV_UP, m);
        return;
    }
    member_t *m = &c->m[i];
    if (u->generation < m->gen)
        return;
    if (u->generation > m->gen) {
        /* a restart: the new generation replaces the old record at once */
        if (!swim__meta_room(m, u->meta_len) || (u->state == SWIM_SUSPECT && !swim__susp_room(c)))
            return; /* out of memory: as if lost, a later copy of it may fare better */
        bool was_live = swim__is_live(m->state);
        m->gen = u->generation;
        m->gen_since = now;
        m->inc = u->incarnation;
        m->rx = m->pp = (window_t){0, 0};
        copy_alive(m, u);
        swim__set_state(c, now, i, u->state);
        m->state_since = now;
        if (u->state == SWIM_SUSPECT)
            swim__susp_start(c, now, i, u->from);
        swim__broadcast(c, i, u->from);
        if (swim__is_live(u->state))
            swim__emit(c, SWIM_EV_UP, m);
        else if (was_live || u->state == SWIM_LEFT)
            swim__emit(c, u->state == SWIM_LEFT ? SWIM_EV_LEFT : SWIM_EV_DOWN, m);
        return;
    }
    switch (u->state) {
    case SWIM_ALIVE: {
        if (u->incarnation <= m->inc || !swim__meta_room(m, u->meta_len))
            return;
        swim_state_t was = m->state;
        bool changed = !swim_addr_eq(&m->addr, &u->addr) || m->meta_version != u->meta_version;
        m->inc = u->incarnation;
        copy_alive(m, u);
        swim__set_state(c, now, i, SWIM_ALIVE);
        swim__broadcast(c, i, 0);
        if (!swim__is_live(was))
            swim__emit(c, SWIM_EV_UP, m);
        else if (changed)
            swim__emit(c, SWIM_EV_UPDATE, m);
        return;
    }
    case SWIM_SUSPECT:
        swim__suspect(c, now, i, u->incarnation, u->from);
        return;
    case SWIM_DEAD:
    case SWIM_LEFT:
        if (u->incarnation < m->inc || m->state == SWIM_LEFT ||
            (m->state == SWIM_DEAD && u->state == SWIM_DEAD))
            return;
        m->inc = u->incarnation;
        swim__declare(c, now, i, u->state, u->from);
        return;
    }
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
    *sender = swim__find(c, msg->sender, msg->sender_len);
    if (*sender >= 0 && c->m[*sender].gen == msg->sender_gen) {
        if (!replay_ok(window_of(&c->m[*sender], msg), msg->seq)) {
            return drop(c,
                        tt_err_set(err, SWIM_EREPLAY, "seq", "%llu already seen from %s",
                                   (unsigned long long)msg->seq, swim__id_of(c, &c->m[*sender])));
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
    swim__send_probe(c, now, from, SWIM_PING, 0, msg->sender, msg->sender_len,
                     i >= 0 ? c->m[i].gen : 0, NULL, -1);
}

/* After the updates are applied: the sender's index (-1 if still unknown), known being the
 * one admit found (indexes do not move while updates are applied). A sender first heard of in
 * its own message gets its replay window now. */
static int32_t note_new_sender(swim_core_t *c, const swim_msg_t *msg, int32_t known)
{
    if (known >= 0)
        return known;
    int32_t i = swim__find(c, msg->sender, msg->sender_len);
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
        swim__apply(c, now, &u);
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
            swim__send_simple(c, now, from, SWIM_ACK, msg.probe_seq, 0);
        return 0;
    }
    /* whether the table held the sender live before what it says is applied (a rejoin ping's
     * answer from anyone else found an island) */
    bool held = sender >= 0 && c->m[sender].gen == msg.sender_gen &&
                swim__is_live((swim_state_t)c->m[sender].state);
    apply_all(c, now, &msg, false); /* first, so an ack carries our refutation */
    int32_t i = note_new_sender(c, &msg, sender);
    if (sender > 0)
        two_claimants(c, now, sender, &msg, from);
    fetch_sender(c, now, &msg, from, i);
    const member_t *self = &c->m[0]; /* after apply_all: the table may have moved */
    switch (msg.kind) {
    case SWIM_PING:
        if (is_self(c, msg.target, msg.target_len))
            swim__send_simple(c, now, from, SWIM_ACK, msg.probe_seq,
                              msg.target_gen == self->gen ? -1 : 0);
        break;
    case SWIM_ACK:
        /* an answer to our rejoin ping from a process the table did not hold live: an island */
        if (c->rejoin_seq && msg.probe_seq == c->rejoin_seq && !held)
            swim__rejoin_answered(c, now, from);
        swim__on_ack(c, now, msg.probe_seq, false);
        break;
    case SWIM_NACK:
        swim__on_ack(c, now, msg.probe_seq, true);
        break;
    case SWIM_PING_REQ:
        swim__on_ping_req(c, now, &msg, from);
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
    swim__note_live(c);
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
            swim__announce(c, now);
        }
        note_new_sender(c, &msg, sender);
        swim__note_live(c);
    }
    free(scratch);
    return rc;
}
