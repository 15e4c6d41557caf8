/*
 * swim: the membership protocol core (SWIM with Lifeguard), pure.
 *
 * No sockets, no clock, no threads: the caller passes `now` (int64 ns on a monotonic clock:
 * every protocol timer runs on it, so a wall-clock step fires none) to every call and tells
 * the core the wall clock beside it with swim_set_wall (sealing stamps wall time), feeds received
 * datagrams to swim_receive, calls swim_tick when swim_next_deadline comes, and after each call
 * drains two caller-visible queues: the outbox (datagrams to send, already sealed, each <=
 * SWIM_DATAGRAM_MAX) and the events (member up, down, left, updated, live count changed). The libuv
 * shell (mb.h) does that with real sockets; the simulator in tests/membership does it with a
 * virtual network and clock.
 *
 * Memory: the core allocates its member table (and the outbox/event queues sized with it)
 * when a new member is first heard of; nothing else allocates. See swim.c for the design.
 */
#ifndef TT_SWIM_H
#define TT_SWIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tt_err.h"

#define SWIM_ID_MAX 128
#define SWIM_META_MAX 64
#define SWIM_LABEL_MAX 64
#define SWIM_DATAGRAM_MAX 1400
#define SWIM_KEY_BYTES 32
#define SWIM_KEYRING_MAX 16
/* An application payload (SWIM_APP): with the frame (<= 164 bytes with a 128-byte id) and the
 * seal (42) it stays within one datagram. */
#define SWIM_APP_MAX 1150
/* A push-pull message carries the whole table; this bounds what a receiver accepts. */
#define SWIM_PUSHPULL_MAX (8u << 20)

/* Errors: rows of the one error table (common/tt_err.h), which names them. The receive drops
 * map onto counters. */
enum {
    SWIM_EINVAL = TT_ERR_INVAL,                /* a bad argument or configuration */
    SWIM_ENOMEM = TT_ERR_NOMEM,                /* the member table could not grow */
    SWIM_EOVERSIZE = TT_ERR_GOSSIP_OVERSIZE,   /* a datagram above SWIM_DATAGRAM_MAX */
    SWIM_ETRUNCATED = TT_ERR_GOSSIP_TRUNCATED, /* shorter than its frame */
    SWIM_EVERSION = TT_ERR_GOSSIP_VERSION,     /* an unknown wire version */
    SWIM_EMODE = TT_ERR_GOSSIP_MODE,           /* plaintext while keyed, or sealed while not */
    SWIM_EAUTH = TT_ERR_GOSSIP_AUTH,           /* opens under no key: forged, wrong key or label */
    SWIM_EMALFORMED = TT_ERR_GOSSIP_MALFORMED, /* the body does not decode; the field is named */
    SWIM_ESTALE = TT_ERR_GOSSIP_STALE,         /* sent outside the replay window */
    SWIM_EREPLAY = TT_ERR_GOSSIP_REPLAY,       /* a sequence number already seen from the sender */
    SWIM_ESELF = TT_ERR_GOSSIP_SELF,           /* our own datagram came back (or an impostor) */
    SWIM_EKEYRING = TT_ERR_KEYRING,            /* a keyring file that does not parse */
    SWIM_ESPACE = TT_ERR_SPACE,                /* the caller's buffer is too small */
};

/* A failure's detail is a tt_err_t (common/tt_err.h): the code, the field or line that was
 * wrong as its path ("updates[3].meta", "sent_ns", "line 2"), and a message. Every err below
 * may be NULL: then nothing is formatted. */

/* What a SWIM_E* code means ("authentication failed"): its message in the one error table. */
const char *swim_strerror(int code);

/* A transport address, opaque to the core except for equality. family is 4 or 6. */
typedef struct swim_addr {
    uint8_t family;
    uint8_t pad_;
    uint16_t port; /* host order */
    uint8_t ip[16];
} swim_addr_t;

bool swim_addr_eq(const swim_addr_t *a, const swim_addr_t *b);

typedef enum swim_state {
    SWIM_ALIVE = 0,
    SWIM_SUSPECT = 1,
    SWIM_DEAD = 2,
    SWIM_LEFT = 3,
} swim_state_t;

const char *swim_state_name(swim_state_t s);

/* How much earlier than our start a datagram may be sealed and still be read: the clock
 * difference tolerated between a restarted replica and its peers for its first seconds. */
#define SWIM_START_SKEW_NS (INT64_C(2) * 1000000000)

/* Tunables; swim_config_default fills memberlist's LAN profile (SPEC §7). */
typedef struct swim_config {
    const char *id;               /* node id, 1..SWIM_ID_MAX bytes, unique in the cluster */
    uint64_t generation;          /* differs per process start (the shell uses the start time) */
    swim_addr_t addr;             /* advertised address */
    int64_t probe_interval_ns;    /* 1 s */
    int64_t probe_timeout_ns;     /* 500 ms */
    int64_t gossip_interval_ns;   /* 200 ms */
    int64_t pushpull_interval_ns; /* 30 s, scaled up above 32 members like memberlist, and */
                                  /* stretched to keep within pushpull_bytes_per_s */
    int64_t gossip_to_dead_ns;    /* 30 s: dead members still get gossip, to refute */
    int64_t reclaim_ns;           /* 60 s: dead/left members leave the table */
    int64_t replay_window_ns;     /* 30 s: accepted skew between sender and receiver */
    int indirect_checks;          /* k = 3 */
    int gossip_nodes;             /* 3 */
    int retransmit_mult;          /* 4 */
    int suspicion_mult;           /* 4 */
    int suspicion_max_mult;       /* 6 */
    int awareness_max;            /* 8 */
    int probe_retries;            /* 2: above probe_retry_above live members, a failed probe of */
    int probe_retry_above;        /* 32: a member alive to us is retried this often first */
    int pushpull_bytes_per_s;     /* 256: push-pull's share of a member's bytes (see above) */
    int64_t rejoin_window_ns;     /* 60 s: after our start, and after a member dies or leaves, */
    int64_t rejoin_interval_ns;   /* 1 s: we look for an island once an interval (swim.c) */
    /* Keyring: keys[0] seals, every key opens. nkeys 0 = plaintext. */
    const uint8_t (*keys)[SWIM_KEY_BYTES];
    size_t nkeys;
    const char *label; /* cluster label, associated data; may be "" */
    uint64_t seed;     /* PRNG seed: the shell takes it from libsodium */
    /* This process's start on the wall clock (the shell's; 0: unchecked). A datagram sealed more
     * than SWIM_START_SKEW_NS before it is refused as stale: nothing recorded before a restart
     * can be replayed into the new process, whose replay windows start empty. */
    int64_t start_wall_ns;
} swim_config_t;

void swim_config_default(swim_config_t *cfg);

typedef struct swim_core swim_core_t;

/* A member as the core sees it. Pointers are valid until the next call into the core. */
typedef struct swim_member_view {
    const char *id;
    size_t id_len;
    uint64_t generation;
    uint32_t incarnation;
    swim_state_t state;
    swim_addr_t addr;
    int64_t last_heard_ns;  /* last datagram from it (self: now), on the core's clock */
    int64_t state_since_ns; /* when its state last changed, on the core's clock */
    uint32_t meta_version;
    size_t meta_len;
    const uint8_t *meta;
    bool self;
} swim_member_view_t;

typedef enum swim_event_type {
    SWIM_EV_UP = 1,     /* a member became alive (joined, came back, or a new generation) */
    SWIM_EV_DOWN,       /* declared dead */
    SWIM_EV_LEFT,       /* left gracefully */
    SWIM_EV_UPDATE,     /* alive member changed metadata or address */
    SWIM_EV_LIVE_COUNT, /* alive + suspect (self included) changed */
    SWIM_EV_DUPLICATE,  /* another live process claims our id (its generation in the event) */
} swim_event_type_t;

typedef struct swim_event {
    swim_event_type_t type;
    int live_count;
    uint64_t generation;
    size_t id_len;
    char id[SWIM_ID_MAX + 1];
} swim_event_t;

/* One datagram to send: bytes live in the outbox arena until swim_outbox_clear. */
typedef struct swim_datagram {
    swim_addr_t to;
    uint32_t off;
    uint32_t len;
} swim_datagram_t;

typedef struct swim_outbox {
    swim_datagram_t *dgram;
    size_t n;
    const uint8_t *arena;
    /* The core wants a push-pull exchange: with a member at pp_to, or with a seed; with
     * pp_absent, only with a seed address no live member holds (swim_addr_live), and none when
     * every one is held: looking for an island, not refreshing a neighbour. */
    bool pp_wanted;
    bool pp_seed;
    bool pp_absent;
    swim_addr_t pp_to;
} swim_outbox_t;

/* Datagram accounting; the server exports these to /metrics. */
typedef struct swim_counters {
    uint64_t rx_packets, rx_bytes, tx_packets, tx_bytes;
    uint64_t drop_oversize, drop_truncated, drop_version, drop_mode, drop_auth;
    uint64_t drop_malformed, drop_stale, drop_replay, drop_self;
    uint64_t tx_overflow; /* datagrams not queued: outbox full */
    uint64_t pushpull_in, pushpull_out;
    uint64_t refutes, suspicions;
    uint64_t downs;         /* live members declared dead in this view (SWIM_EV_DOWN) */
    uint64_t dup_reports;   /* two live processes with one id seen here, each told */
    uint64_t rejoin_pings;  /* pings to a recently dead, left or remembered member's address */
    uint64_t rejoin_seeds;  /* push-pulls asked with a seed address no live member holds */
    uint64_t rejoin_merges; /* push-pulls with a process one of those pings found (an island) */
} swim_counters_t;

/* Builds a core; *out is owned by the caller and freed with swim_free. */
int swim_new(swim_core_t **out, const swim_config_t *cfg, int64_t now, tt_err_t *err);
void swim_free(swim_core_t *core);

/* The wall clock (ns since the epoch) at `now`: datagrams carry wall time (sent_ns) and the
 * replay window compares it with ours, while every timer stays on `now`. The shell calls this
 * before each call into the core; until the first call the wall clock is taken to be `now`. */
void swim_set_wall(swim_core_t *core, int64_t now, int64_t wall_ns);

/* Runs every timer due at `now`. */
int swim_tick(swim_core_t *core, int64_t now);
/* When swim_tick next has something to do. */
int64_t swim_next_deadline(const swim_core_t *core);
/* A datagram from `from`. Returns 0 or the (negative) reason it was dropped and counted. */
int swim_receive(swim_core_t *core, int64_t now, const swim_addr_t *from, const uint8_t *bytes,
                 size_t len, tt_err_t *err);

/* The push-pull message (sealed like a datagram, not size-limited). out must hold
 * swim_pushpull_bound(core) bytes; *len receives the length. */
size_t swim_pushpull_bound(const swim_core_t *core);
int swim_pushpull_encode(swim_core_t *core, int64_t now, bool join, uint8_t *out, size_t cap,
                         size_t *len);
/* Merges a peer's push-pull message (0 or a negative drop reason, counted). */
int swim_pushpull_receive(swim_core_t *core, int64_t now, const uint8_t *bytes, size_t len,
                          tt_err_t *err);
/* True once one push-pull exchange completed (or a peer reached us). */
bool swim_joined(const swim_core_t *core);

/* Sets this node's metadata (<= SWIM_META_MAX bytes); bumps its version and gossips it. */
int swim_set_meta(swim_core_t *core, int64_t now, const uint8_t *meta, size_t len);
/*
 * Sends an application payload (<= SWIM_APP_MAX bytes) to a live member, sealed and
 * replay-checked like every datagram (queued updates ride along). SWIM_EINVAL for an unknown,
 * dead or left member, or a payload too long.
 */
int swim_send_app(swim_core_t *core, int64_t now, const char *to, size_t to_len,
                  const uint8_t *payload, size_t len);
/*
 * After a swim_receive that returned 0: the application payload it carried, if any. Sets the
 * sender's id and the payload (both valid until the next call into the core) and returns true
 * once per payload.
 */
bool swim_app_take(swim_core_t *core, const char **from, size_t *from_len, const uint8_t **payload,
                   size_t *len);

/*
 * A member this node knew before it restarted (the shell keeps them in its state directory):
 * for rejoin_window_ns after the start, while the table does not hold its id, it is pinged at
 * its address like a recently dead or left member (swim.c, "Islands"). At most
 * SWIM_REMEMBER_MAX; 0, SWIM_EINVAL (a bad id or address, or the list full) or SWIM_ENOMEM.
 */
#define SWIM_REMEMBER_MAX 4096
typedef struct swim_known { /* one member of the file (swim_proto.h) */
    const char *id;
    size_t id_len;
    uint64_t generation;
    swim_addr_t addr;
} swim_known_t;
int swim_remember(swim_core_t *core, const char *id, size_t len, uint64_t generation,
                  const swim_addr_t *addr);
/*
 * The members file (swim_proto.h draws it): swim_known_save writes this node's live members
 * (self excluded) into a new buffer *out (the caller frees it); swim_known_load remembers the
 * members of a file this node saved before (swim_remember each), after checking all of it, and
 * returns how many, or a negative code with err naming what was wrong (nothing remembered).
 */
int swim_known_save(const swim_core_t *core, uint8_t **out, size_t *len);
int swim_known_load(swim_core_t *core, const uint8_t *bytes, size_t len, tt_err_t *err);
/* Remembered members whose id the table does not hold, in any state: the fleet this node left,
 * not found yet. Returns how many; the first `cap` of them go into out (may be NULL with cap 0),
 * their ids borrowed from the core until the next call that changes it. */
size_t swim_known_missing(const swim_core_t *core, swim_known_t *out, size_t cap);
/* The address of a remembered member the table does not hold, chosen at random (the shell dials
 * it to join); false when there is none. */
bool swim_known_pick(swim_core_t *core, swim_addr_t *addr);
/* True when a live member (alive or suspect, self included) has address a. */
bool swim_addr_live(const swim_core_t *core, const swim_addr_t *a);

/* Graceful leave: marks self left and tells every live member at once. */
int swim_leave(swim_core_t *core, int64_t now);

size_t swim_member_count(const swim_core_t *core);
/* i in [0, swim_member_count): 0 or SWIM_EINVAL. Member 0 is self. */
int swim_member_get(const swim_core_t *core, size_t i, swim_member_view_t *v);
int swim_member_find(const swim_core_t *core, const char *id, swim_member_view_t *v);
/* Alive + suspect, self included (the share store's N). */
int swim_live_count(const swim_core_t *core);
/*
 * Two processes with one node id: peers that hear from both tell each of them of the other, so
 * each claimant learns it (N is short by one, since everyone counts the id once). True while
 * such a report came within the last SWIM_DUPLICATE_HOLD_NS; *gen and *addr are the other
 * claimant's (either may be NULL).
 */
#define SWIM_DUPLICATE_HOLD_NS (INT64_C(60) * 1000000000)
bool swim_duplicate(const swim_core_t *core, int64_t now, uint64_t *gen, swim_addr_t *addr);

/* The Lifeguard local-health score, 0 (healthy) .. awareness_max - 1. */
int swim_health(const swim_core_t *core);

const swim_outbox_t *swim_outbox(const swim_core_t *core);
void swim_outbox_clear(swim_core_t *core);
const swim_event_t *swim_events(const swim_core_t *core, size_t *n);
void swim_events_clear(swim_core_t *core);
const swim_counters_t *swim_counters(const swim_core_t *core);

/*
 * Keyring text: one key per line, base64 (standard alphabet, padded) of 32 bytes; blank lines
 * and lines starting with '#' are skipped; the first key seals (primary), every key opens.
 * Fills keys (room for max) and *n; errors name the line.
 */
int swim_keyring_parse(const char *text, size_t len, uint8_t (*keys)[SWIM_KEY_BYTES], size_t max,
                       size_t *n, tt_err_t *err);

/* Replaces a sealed core's keyring (rotation without a restart): 1..SWIM_KEYRING_MAX keys, the
 * first seals from now on, every one opens. A plaintext core stays plaintext and an empty ring
 * is refused (SWIM_EINVAL, nothing changed): sealing is decided at start. The old keys are
 * wiped. */
int swim_set_keys(swim_core_t *core, const uint8_t (*keys)[SWIM_KEY_BYTES], size_t n);

#endif
