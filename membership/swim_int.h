/*
 * What the files of the protocol core share (swim.c, swim_table.c, swim_gossip.c,
 * swim_detect.c, swim_recv.c): the member record, the core's state and the helpers they call
 * across. Not for anything outside the core.
 */
#ifndef TT_SWIM_INT_H
#define TT_SWIM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "swim.h"
#include "swim_proto.h"

#define BC_BUCKETS 33      /* broadcast queue buckets: transmit counts 0..32 */
#define SUSP_CONFIRM_MAX 8 /* independent confirmations a suspicion counts */
#define RELAY_MAX 16       /* indirect probes we relay at once */
#define FETCH_RECENT 8     /* record fetches remembered (fetch_sender) */
#define MS INT64_C(1000000)

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

/* A member known before our restart (swim_remember). */
typedef struct remembered {
    uint64_t gen;
    swim_addr_t addr;
    uint8_t id_len;
    char id[SWIM_ID_MAX + 1];
} remembered_t;

/* What the table (the bottom layer) tells the layers above of the members they keep state for;
 * swim_new wires them. */
typedef struct swim_hooks {
    /* member i is no longer suspect: its suspicion timer ends (failure detection) */
    void (*unsuspect)(swim_core_t *c, int32_t i);
    /* member i is dead or left at now: a place an island may grow (dissemination) */
    void (*not_live)(swim_core_t *c, int64_t now, int32_t i);
    /* member i is reclaimed: out of the dissemination queue */
    void (*dropped)(swim_core_t *c, int32_t i);
    /* the reclaim renumbered the members (map: old index -> new, -1 gone; old_n before) */
    void (*renumbered_queue)(swim_core_t *c, const int32_t *map);
    void (*renumbered_probes)(swim_core_t *c, const int32_t *map, size_t old_n);
} swim_hooks_t;

struct swim_core {
    swim_config_t cfg;
    swim_hooks_t hooks;
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
    /* islands (swim_gossip.c, swim__rejoin_tick) */
    int64_t started;      /* swim_new's now */
    int64_t rejoin_until; /* we look for islands until then */
    int64_t next_rejoin;
    unsigned rejoin_round;
    uint32_t rejoin_seq; /* the probe sequence of our last rejoin ping; 0 none */
    remembered_t *known; /* swim_remember */
    size_t n_known, known_cap;

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

typedef bool (*pick_fn)(const swim_core_t *c, const member_t *m, int64_t now);

/* A member's id: NUL-terminated, valid until the next member is added or reclaimed. */
static inline const char *swim__id_of(const swim_core_t *c, const member_t *m)
{
    return c->ids + m->id_off;
}

static inline uint64_t swim__rnd(swim_core_t *c)
{
    /* splitmix64: deterministic for a seed, which the simulator relies on */
    uint64_t z = (c->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline int64_t swim__rnd_below(swim_core_t *c, int64_t n)
{
    return n > 0 ? (int64_t)(swim__rnd(c) % (uint64_t)n) : 0;
}

static inline bool swim__is_live(swim_state_t s)
{
    return s == SWIM_ALIVE || s == SWIM_SUSPECT;
}

static inline int64_t swim__scaled(const swim_core_t *c, int64_t d)
{
    return d * (c->awareness + 1);
}

static inline const uint8_t *swim__meta_of(const member_t *m)
{
    static const uint8_t none[1];
    return m->meta ? m->meta : none;
}

/*
 * The layers, each calling only the ones below it (swim.c's essay, "Files"):
 *   swim.c          the core's life, its timers, its public surface
 *   swim_recv.c     admitting and applying what arrives
 *   swim_detect.c   probing, suspicion, local health, and what detection ends in
 *   swim_gossip.c   dissemination, sending, push-pull, the search for islands
 *   swim_table.c    the member records, their index and states, the event queue
 * The table tells the layers above what they keep per member through c->hooks.
 */

/* swim_table.c */
bool swim__grow(void **p, size_t *cap, size_t need, size_t elem);
swim_event_t *swim__emit(swim_core_t *c, swim_event_type_t type, const member_t *m);
void swim__note_live(swim_core_t *c);
int32_t swim__find(const swim_core_t *c, const char *id, size_t len);
int swim__reserve(swim_core_t *c);
bool swim__meta_room(member_t *m, size_t len);
int32_t swim__add_member(swim_core_t *c, int64_t now, const char *id, size_t len, size_t meta_len);
void swim__set_state(swim_core_t *c, int64_t now, int32_t i, swim_state_t s);
void swim__reclaim(swim_core_t *c, int64_t now);

/* swim_gossip.c */
void swim__bc_unlink(swim_core_t *c, int32_t i);
void swim__bc_renumber(swim_core_t *c, const int32_t *map);
void swim__broadcast(swim_core_t *c, int32_t i, uint64_t from);
void swim__member_update(const swim_core_t *c, const member_t *m, swim_update_t *u);
void swim__send_msg_with(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                         const swim_update_t *first, int32_t skip);
void swim__send_msg(swim_core_t *c, int64_t now, const swim_addr_t *to, const swim_msg_t *om,
                    int32_t first);
void swim__send_simple(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                       uint32_t probe_seq, int32_t first);
void swim__send_probe(swim_core_t *c, int64_t now, const swim_addr_t *to, swim_kind_t kind,
                      uint32_t probe_seq, const char *id, size_t id_len, uint64_t gen,
                      const swim_addr_t *addr, int32_t first);
size_t swim__pick(swim_core_t *c, int64_t now, size_t k, int32_t not, pick_fn ok);
bool swim__ok_alive(const swim_core_t *c, const member_t *m, int64_t now);
void swim__tell_live(swim_core_t *c, int64_t now, size_t max);
void swim__want_pushpull(swim_core_t *c, int64_t now);
void swim__gossip_tick(swim_core_t *c, int64_t now);
void swim__announce(swim_core_t *c, int64_t now);
void swim__rejoin_note(swim_core_t *c, int64_t now, int32_t i);
void swim__rejoin_tick(swim_core_t *c, int64_t now);
void swim__rejoin_answered(swim_core_t *c, int64_t now, const swim_addr_t *from);

/* swim_detect.c */
void swim__health(swim_core_t *c, int delta);
bool swim__susp_room(swim_core_t *c);
void swim__susp_cancel(swim_core_t *c, int32_t i);
void swim__susp_start(swim_core_t *c, int64_t now, int32_t i, uint64_t from);
bool swim__susp_confirm(susp_t *x, uint64_t from);
void swim__detect_renumber(swim_core_t *c, const int32_t *map, size_t old_n);
void swim__suspect(swim_core_t *c, int64_t now, int32_t i, uint32_t inc, uint64_t from);
void swim__declare(swim_core_t *c, int64_t now, int32_t i, swim_state_t s, uint64_t from);
void swim__on_ack(swim_core_t *c, int64_t now, uint32_t seq, bool nack);
void swim__on_ping_req(swim_core_t *c, int64_t now, const swim_msg_t *msg, const swim_addr_t *from);
void swim__detect_tick(swim_core_t *c, int64_t now);
int64_t swim__detect_deadline(const swim_core_t *c, int64_t t);

/* swim_recv.c */
void swim__apply(swim_core_t *c, int64_t now, const swim_update_t *u);

#endif
