/* The gossip wire: codec, seal, keyring, and bad input of every kind against a live core. */
#include <criterion/criterion.h>
#include <sodium.h>
#include <string.h>

#include "swim.h"
#include "swim_proto.h"

#define NOW (INT64_C(1700000000) * 1000000000)

static uint8_t key1[SWIM_KEY_BYTES], key2[SWIM_KEY_BYTES];

static void keys_init(void)
{
    memset(key1, 0x11, sizeof key1);
    memset(key2, 0x22, sizeof key2);
}

static swim_addr_t addr(int last)
{
    swim_addr_t a = {.family = 4, .port = 7946};
    a.ip[0] = 10;
    a.ip[3] = (uint8_t)last;
    return a;
}

/* A receiving core "rx" that knows one peer "peer" (so replays are tracked per sender). */
static swim_core_t *receiver(const uint8_t (*keys)[SWIM_KEY_BYTES], size_t nkeys, const char *label)
{
    swim_config_t cfg;
    swim_config_default(&cfg);
    cfg.id = "rx";
    cfg.generation = 1;
    cfg.addr = addr(1);
    cfg.keys = keys;
    cfg.nkeys = nkeys;
    cfg.label = label;
    swim_core_t *c;
    tt_err_t err;
    cr_assert_eq(swim_new(&c, &cfg, NOW, &err), 0, "%s", err.message);
    return c;
}

/* A receiver sealed with key1 under the label "prod". */
static swim_core_t *keyed(void)
{
    uint8_t ring[1][SWIM_KEY_BYTES];
    memcpy(ring[0], key1, SWIM_KEY_BYTES);
    return receiver((const uint8_t(*)[SWIM_KEY_BYTES])ring, 1, "prod");
}

typedef struct craft {
    swim_kind_t kind;
    int64_t sent_ns;
    uint64_t seq;
    const char *sender;
    uint8_t meta_len;
    int n_updates;
    size_t app_len; /* APP: 0 = a small valid payload */
} craft_t;

/* Encodes a body of the given kind carrying n alive updates "m0".. (and the sender's). */
static size_t body(const craft_t *k, uint8_t *out, size_t cap)
{
    wire_pack_t w = {out, 0, cap, false};
    const char *sender = k->sender ? k->sender : "peer";
    swim_enc_head(&w, sender, strlen(sender), 7, k->sent_ns ? k->sent_ns : NOW, k->seq ? k->seq : 1,
                  k->kind);
    static const uint8_t app[] = {0x93, 1, 2, 0x90};
    swim_msg_t om = {.kind = k->kind,
                     .probe_seq = 9,
                     .target = "rx",
                     .target_len = 2,
                     .target_gen = 1,
                     .target_addr = addr(1),
                     .join = true,
                     .app = app,
                     .app_len = k->app_len ? k->app_len : sizeof app};
    uint8_t big[SWIM_APP_MAX + 1] = {0};
    if (k->app_len)
        om.app = big;
    swim_enc_msg(&w, &om);
    size_t at = swim_enc_array_open(&w);
    uint8_t meta[80] = {0};
    for (int i = 0; i < k->n_updates; i++) {
        char id[16];
        if (i == 0) /* the sender's own record, then strangers */
            snprintf(id, sizeof id, "%s", sender);
        else
            snprintf(id, sizeof id, "m%d", i);
        swim_update_t u = {.state = SWIM_ALIVE,
                           .id = id,
                           .id_len = strlen(id),
                           .generation = 7,
                           .incarnation = 3,
                           .addr = addr(2 + i),
                           .meta_version = 1,
                           .meta_len = k->meta_len,
                           .meta = meta};
        swim_enc_update(&w, &u);
    }
    swim_enc_array_close(&w, at, (uint32_t)k->n_updates);
    cr_assert_not(w.overflow);
    return w.len;
}

static size_t sealed(const craft_t *k, const uint8_t *key, const char *label, uint8_t *out)
{
    uint8_t b[SWIM_DATAGRAM_MAX * 2], nonce[SWIM_NONCE_BYTES];
    size_t blen = body(k, b, sizeof b);
    randombytes_buf(nonce, sizeof nonce);
    return swim_seal(key, label, strlen(label), nonce, b, blen, out);
}

static size_t plain(const craft_t *k, uint8_t *out)
{
    out[0] = SWIM_WIRE_VERSION;
    out[1] = SWIM_MODE_PLAIN;
    return 2 + body(k, out + 2, SWIM_DATAGRAM_MAX * 2);
}

/* Everything a datagram could change in the receiver's view, as one comparable string. */
static void snapshot(swim_core_t *c, char *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < swim_member_count(c); i++) {
        swim_member_view_t v;
        swim_member_get(c, i, &v);
        n += (size_t)snprintf(out + n, cap - n, "%s/%llu/%u/%d/%u;", v.id,
                              (unsigned long long)v.generation, v.incarnation, v.state,
                              v.meta_version);
    }
    n += (size_t)snprintf(out + n, cap - n, "out=%zu", swim_outbox(c)->n);
}

static const swim_kind_t kinds[] = {SWIM_PING,     SWIM_ACK,    SWIM_NACK,
                                    SWIM_PING_REQ, SWIM_GOSSIP, SWIM_APP};

TestSuite(swim_proto, .init = keys_init);

Test(swim_proto, a_sealed_datagram_of_every_kind_is_accepted_once)
{
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        swim_core_t *c = keyed();
        uint8_t d[SWIM_DATAGRAM_MAX * 2];
        craft_t cr = {.kind = kinds[k], .n_updates = 3};
        size_t len = sealed(&cr, key1, "prod", d);
        swim_addr_t from = addr(2);
        tt_err_t err;
        cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
        cr_assert_eq(swim_member_count(c), 4);
        cr_assert_eq(swim_live_count(c), 4);
        /* the very same bytes again: a replay */
        cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), SWIM_EREPLAY);
        cr_assert_eq(swim_counters(c)->drop_replay, 1);
        swim_free(c);
    }
}

Test(swim_proto, forged_truncated_oversized_wrong_key_and_wrong_label_datagrams_change_nothing)
{
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        swim_core_t *c = keyed();
        char before[2048], after[2048];
        snapshot(c, before, sizeof before);
        craft_t cr = {.kind = kinds[k], .n_updates = 2};
        uint8_t d[SWIM_DATAGRAM_MAX * 2], bad[SWIM_DATAGRAM_MAX * 2];
        size_t len = sealed(&cr, key1, "prod", d);
        swim_addr_t from = addr(2);
        tt_err_t err;
        /* every truncation */
        for (size_t l = 0; l < len; l++)
            cr_assert_lt(swim_receive(c, NOW, &from, d, l, &err), 0, "kept %zu of %zu", l, len);
        /* every single flipped bit position (one per byte) */
        for (size_t i = 0; i < len; i++) {
            memcpy(bad, d, len);
            bad[i] ^= 0x40;
            cr_assert_lt(swim_receive(c, NOW, &from, bad, len, &err), 0, "byte %zu", i);
        }
        /* another key, another label */
        size_t l2 = sealed(&cr, key2, "prod", bad);
        cr_assert_eq(swim_receive(c, NOW, &from, bad, l2, &err), SWIM_EAUTH);
        l2 = sealed(&cr, key1, "staging", bad);
        cr_assert_eq(swim_receive(c, NOW, &from, bad, l2, &err), SWIM_EAUTH);
        /* plaintext to a keyed receiver */
        l2 = plain(&cr, bad);
        cr_assert_eq(swim_receive(c, NOW, &from, bad, l2, &err), SWIM_EMODE);
        /* oversized: refused before reading */
        memset(bad, 0, sizeof bad);
        cr_assert_eq(swim_receive(c, NOW, &from, bad, SWIM_DATAGRAM_MAX + 1, &err), SWIM_EOVERSIZE);
        /* sent far outside the replay window */
        craft_t old = cr;
        old.sent_ns = NOW - 3600 * INT64_C(1000000000);
        l2 = sealed(&old, key1, "prod", bad);
        cr_assert_eq(swim_receive(c, NOW, &from, bad, l2, &err), SWIM_ESTALE);
        snapshot(c, after, sizeof after);
        cr_assert_str_eq(before, after);
        const swim_counters_t *ct = swim_counters(c);
        cr_assert_eq(ct->rx_packets, 0);
        cr_assert_gt(ct->drop_truncated, 0);
        cr_assert_geq(ct->drop_auth, len); /* flips + wrong key + wrong label */
        cr_assert_gt(ct->drop_version + ct->drop_mode, 0);
        cr_assert_eq(ct->drop_oversize, 1);
        cr_assert_eq(ct->drop_stale, 1);
        swim_free(c);
    }
}

Test(swim_proto, every_key_of_the_ring_opens_so_keys_rotate_without_a_split)
{
    const uint8_t ring[2][SWIM_KEY_BYTES];
    memcpy((void *)ring[0], key1, SWIM_KEY_BYTES); /* primary: still the old key */
    memcpy((void *)ring[1], key2, SWIM_KEY_BYTES); /* the new key, already accepted */
    swim_core_t *c = receiver(ring, 2, "prod");
    craft_t cr = {.kind = SWIM_GOSSIP, .n_updates = 1};
    uint8_t d[SWIM_DATAGRAM_MAX * 2];
    swim_addr_t from = addr(2);
    tt_err_t err;
    size_t len = sealed(&cr, key2, "prod", d); /* a peer already sealing with the new key */
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
    cr.seq = 2;
    len = sealed(&cr, key1, "prod", d);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
    swim_free(c);
}

Test(swim_proto, a_keyring_replaced_in_place_opens_only_its_own_keys_and_sealing_stays_decided)
{
    swim_core_t *c = keyed(); /* key1 */
    uint8_t ring[1][SWIM_KEY_BYTES];
    memcpy(ring[0], key2, SWIM_KEY_BYTES);
    cr_assert_eq(swim_set_keys(c, (const uint8_t(*)[SWIM_KEY_BYTES])ring, 0), SWIM_EINVAL);
    cr_assert_eq(swim_set_keys(c, (const uint8_t(*)[SWIM_KEY_BYTES])ring, 1), 0);
    craft_t cr = {.kind = SWIM_GOSSIP, .n_updates = 1};
    uint8_t d[SWIM_DATAGRAM_MAX * 2];
    swim_addr_t from = addr(2);
    tt_err_t err;
    size_t len = sealed(&cr, key1, "prod", d);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), SWIM_EAUTH, "the old key was removed");
    cr.seq = 2;
    len = sealed(&cr, key2, "prod", d);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
    swim_free(c);
    c = receiver(NULL, 0, "prod"); /* plaintext stays plaintext until a restart */
    cr_assert_eq(swim_set_keys(c, (const uint8_t(*)[SWIM_KEY_BYTES])ring, 1), SWIM_EINVAL);
    swim_free(c);
}

Test(swim_proto, an_application_payload_is_handed_over_once_with_its_sender)
{
    swim_core_t *c = keyed();
    craft_t cr = {.kind = SWIM_APP, .n_updates = 1};
    uint8_t d[SWIM_DATAGRAM_MAX * 2];
    size_t len = sealed(&cr, key1, "prod", d);
    swim_addr_t from = addr(2);
    tt_err_t err;
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
    const char *who;
    const uint8_t *p;
    size_t who_len, plen;
    cr_assert(swim_app_take(c, &who, &who_len, &p, &plen));
    cr_assert_eq(who_len, 4);
    cr_assert_eq(memcmp(who, "peer", 4), 0);
    cr_assert_eq(plen, 4);
    cr_assert_eq(p[0], 0x93);
    cr_assert_not(swim_app_take(c, &who, &who_len, &p, &plen), "handed over once");
    /* replayed: refused, and nothing to take */
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), SWIM_EREPLAY);
    cr_assert_not(swim_app_take(c, &who, &who_len, &p, &plen));
    /* sending: to a live member only, within the bound */
    uint8_t big[SWIM_APP_MAX + 1] = {0};
    cr_assert_eq(swim_send_app(c, NOW, "peer", 4, big, SWIM_APP_MAX), 0);
    cr_assert_eq(swim_send_app(c, NOW, "peer", 4, big, SWIM_APP_MAX + 1), SWIM_EINVAL);
    cr_assert_eq(swim_send_app(c, NOW, "nobody", 6, big, 4), SWIM_EINVAL);
    cr_assert_eq(swim_send_app(c, NOW, "rx", 2, big, 4), SWIM_EINVAL, "not to ourselves");
    const swim_outbox_t *ob = swim_outbox(c);
    cr_assert_leq(ob->dgram[ob->n - 1].len, SWIM_DATAGRAM_MAX);
    swim_free(c);
}

Test(swim_proto, without_a_keyring_plaintext_is_read_and_sealed_is_refused)
{
    swim_core_t *c = receiver(NULL, 0, "");
    craft_t cr = {.kind = SWIM_PING, .n_updates = 1};
    uint8_t d[SWIM_DATAGRAM_MAX * 2];
    swim_addr_t from = addr(2);
    tt_err_t err;
    size_t len = sealed(&cr, key1, "", d);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), SWIM_EMODE);
    len = plain(&cr, d);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "%s", err.message);
    /* the ping was for us: it is answered */
    cr_assert_eq(swim_outbox(c)->n, 1);
    swim_free(c);
}

/* Decodes a plaintext body and returns the error text. */
static const char *decode_error(const uint8_t *b, size_t len)
{
    static char text[256];
    tt_err_t err;
    swim_msg_t m;
    memset(&err, 0, sizeof err);
    cr_assert_eq(swim_msg_decode(&m, b, len, &err), SWIM_EMALFORMED);
    cr_assert_eq(err.code, SWIM_EMALFORMED);
    return tt_err_format(&err, text, sizeof text);
}

Test(swim_proto, decoders_name_the_field_that_was_wrong)
{
    uint8_t b[4096];
    craft_t cr = {.kind = SWIM_GOSSIP, .n_updates = 3, .meta_len = 65};
    size_t len = body(&cr, b, sizeof b);
    cr_assert_str_eq(decode_error(b, len), "updates[0].meta: 65 bytes, at most 64");
    cr.meta_len = 0;
    len = body(&cr, b, sizeof b);
    b[len] = 0xc0;
    cr_assert_str_eq(decode_error(b, len + 1), "body: 1 trailing bytes");
    cr_assert_str_eq(decode_error(b, len - 1), "updates[2].from: truncated");
    cr.sender = "";
    len = body(&cr, b, sizeof b);
    cr_assert_str_eq(decode_error(b, len), "sender_id: 0 bytes, at least 1");
    /* kind 9 */
    cr.sender = NULL;
    len = body(&cr, b, sizeof b);
    uint8_t *kind = memchr(b + 1, SWIM_GOSSIP, 32);
    *kind = 9;
    cr_assert_str_eq(decode_error(b, len), "kind: 9, at most 7");
    /* an application payload above its bound */
    cr.kind = SWIM_APP;
    cr.app_len = SWIM_APP_MAX + 1;
    len = body(&cr, b, sizeof b);
    cr_assert_str_eq(decode_error(b, len), "msg.payload: 1151 bytes, at most 1150");
    /* an array claiming more updates than its bytes can hold */
    const uint8_t huge[] = {0x97, 0xa1, 'p', 1, 1, 1, 5, 0x90, 0xdd, 0x7f, 0xff, 0xff, 0xff};
    cr_assert_str_eq(decode_error(huge, sizeof huge),
                     "updates: 2147483647 elements cannot fit in 0 bytes");
}

Test(swim_proto, push_pull_bad_input_is_dropped_and_counted)
{
    swim_core_t *c = keyed();
    craft_t cr = {.kind = SWIM_PUSHPULL, .n_updates = 4};
    uint8_t d[SWIM_DATAGRAM_MAX * 2];
    size_t len = sealed(&cr, key1, "prod", d);
    tt_err_t err;
    for (size_t l = 0; l < len; l++)
        cr_assert_lt(swim_pushpull_receive(c, NOW, d, l, &err), 0);
    cr_assert_eq(swim_member_count(c), 1);
    cr_assert_not(swim_joined(c));
    /* a push-pull message sent as a datagram is refused too */
    swim_addr_t from = addr(2);
    cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), SWIM_EMALFORMED);
    cr_assert_eq(swim_pushpull_receive(c, NOW, d, len, &err), 0, "%s", err.message);
    cr_assert_eq(swim_member_count(c), 5);
    cr_assert(swim_joined(c));
    swim_free(c);
}

/* Issue #17 item 6: a push-pull frame carries the sender's sequence number like a datagram, and
 * shared the 64-wide datagram window: a push-pull that took longer on its TCP connection than 64
 * of the sender's datagrams (to anyone) took to reach us was dropped as a replay. Push-pull has
 * its own window; each still refuses its own replays. */
Test(swim_proto, a_push_pull_delayed_behind_64_datagrams_is_not_a_replay)
{
    swim_core_t *c = keyed();
    uint8_t pp[SWIM_DATAGRAM_MAX * 2], d[SWIM_DATAGRAM_MAX * 2], early[SWIM_DATAGRAM_MAX * 2];
    craft_t cr = {.kind = SWIM_PUSHPULL, .seq = 2, .n_updates = 2};
    size_t pp_len = sealed(&cr, key1, "prod", pp); /* sealed before the datagrams below */
    swim_addr_t from = addr(2);
    tt_err_t err;
    size_t early_len = 0;
    for (uint64_t seq = 1; seq <= 100; seq += seq == 1 ? 2 : 1) {
        craft_t g = {.kind = SWIM_GOSSIP, .seq = seq, .n_updates = 1};
        size_t len = sealed(&g, key1, "prod", d);
        cr_assert_eq(swim_receive(c, NOW, &from, d, len, &err), 0, "seq %llu: %s",
                     (unsigned long long)seq, err.message);
        if (seq == 50)
            memcpy(early, d, early_len = len);
    }
    cr_assert_eq(swim_pushpull_receive(c, NOW, pp, pp_len, &err), 0, "%s", err.message);
    cr_assert_eq(swim_member_count(c), 3);
    /* each window still refuses its own replays */
    cr_assert_eq(swim_pushpull_receive(c, NOW, pp, pp_len, &err), SWIM_EREPLAY);
    cr_assert_eq(swim_receive(c, NOW, &from, early, early_len, &err), SWIM_EREPLAY);
    /* and a push-pull older than the push-pull window is one */
    craft_t old = {.kind = SWIM_PUSHPULL, .seq = 1, .n_updates = 1};
    uint8_t pp2[SWIM_DATAGRAM_MAX * 2];
    size_t pp2_len = sealed(&old, key1, "prod", pp2);
    cr_assert_eq(swim_pushpull_receive(c, NOW, pp2, pp2_len, &err), 0, "within 64: %s",
                 err.message);
    cr_assert_eq(swim_pushpull_receive(c, NOW, pp2, pp2_len, &err), SWIM_EREPLAY);
    cr_assert_eq(swim_counters(c)->drop_replay, 3);
    swim_free(c);
}

Test(swim_proto, a_datagram_built_by_the_core_never_exceeds_1400_bytes)
{
    /* a core with hundreds of pending broadcasts of maximal size */
    swim_core_t *c = receiver(NULL, 0, "");
    uint8_t meta[SWIM_META_MAX];
    memset(meta, 7, sizeof meta);
    for (int i = 0; i < 300; i++) {
        uint8_t d[SWIM_DATAGRAM_MAX];
        wire_pack_t w = {d + 2, 0, sizeof d - 2, false};
        char sender[SWIM_ID_MAX + 1];
        memset(sender, 'a' + i % 26, SWIM_ID_MAX);
        snprintf(sender + SWIM_ID_MAX - 4, 5, "%04d", i);
        swim_enc_head(&w, sender, SWIM_ID_MAX, 1, NOW, 1, SWIM_GOSSIP);
        swim_msg_t om = {.kind = SWIM_GOSSIP};
        swim_enc_msg(&w, &om);
        size_t at = swim_enc_array_open(&w);
        swim_update_t u = {.state = SWIM_ALIVE,
                           .id = sender,
                           .id_len = SWIM_ID_MAX,
                           .generation = UINT64_MAX,
                           .incarnation = UINT32_MAX,
                           .addr = {.family = 6, .port = 1},
                           .meta_version = UINT32_MAX,
                           .meta_len = SWIM_META_MAX,
                           .meta = meta,
                           .from = UINT64_MAX};
        swim_enc_update(&w, &u);
        swim_enc_array_close(&w, at, 1);
        cr_assert_leq(w.len, SWIM_UPDATE_MAX + 200);
        d[0] = SWIM_WIRE_VERSION;
        d[1] = SWIM_MODE_PLAIN;
        swim_addr_t from = addr(2);
        tt_err_t err;
        cr_assert_eq(swim_receive(c, NOW, &from, d, w.len + 2, &err), 0, "%s", err.message);
    }
    swim_outbox_clear(c);
    for (int64_t t = NOW; t < NOW + 5 * INT64_C(1000000000); t += 100000000) {
        swim_tick(c, t);
        const swim_outbox_t *ob = swim_outbox(c);
        for (size_t k = 0; k < ob->n; k++)
            cr_assert_leq(ob->dgram[k].len, SWIM_DATAGRAM_MAX);
        swim_outbox_clear(c);
    }
    swim_free(c);
}

Test(swim_proto, a_keyring_is_one_base64_key_per_line_and_errors_name_the_line)
{
    uint8_t keys[4][SWIM_KEY_BYTES];
    size_t n;
    tt_err_t err;
    const char *ok = "# gossip keys, primary first\n"
                     "ERERERERERERERERERERERERERERERERERERERERERE=\n"
                     "\n"
                     "  IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiI=  \r\n";
    cr_assert_eq(swim_keyring_parse(ok, strlen(ok), keys, 4, &n, &err), 0, "%s", err.message);
    cr_assert_eq(n, 2);
    cr_assert_eq(memcmp(keys[0], key1, SWIM_KEY_BYTES), 0);
    cr_assert_eq(memcmp(keys[1], key2, SWIM_KEY_BYTES), 0);
    const char *bad = "ERERERERERERERERERERERERERERERERERERERERERE=\nnot-base64\n";
    cr_assert_eq(swim_keyring_parse(bad, strlen(bad), keys, 4, &n, &err), SWIM_EKEYRING);
    cr_assert_str_eq(err.path, "line 2");
    cr_assert_eq(err.code, SWIM_EKEYRING);
    const char *short_key = "AAAA\n";
    cr_assert_eq(swim_keyring_parse(short_key, strlen(short_key), keys, 4, &n, &err),
                 SWIM_EKEYRING);
    cr_assert_str_eq(err.path, "line 1");
}

/* ---- the members file (a restart's memory of the fleet) -------------------------------------- */

/* A core "rx" under `label` that has heard of three peers: p1 and p2 alive, p3 left. */
static swim_core_t *knowing(const char *label)
{
    swim_core_t *c = receiver(NULL, 0, label);
    const char *ids[] = {"p1", "p2", "p3"};
    for (int i = 0; i < 3; i++) {
        swim_update_t u = {.state = SWIM_ALIVE,
                           .id = ids[i],
                           .id_len = 2,
                           .generation = 10 + (uint64_t)i,
                           .addr = addr(2 + i)};
        uint8_t dgram[SWIM_DATAGRAM_MAX] = {SWIM_WIRE_VERSION, SWIM_MODE_PLAIN};
        wire_pack_t w = {dgram + 2, 0, sizeof dgram - 2, false};
        swim_enc_head(&w, ids[i], 2, u.generation, NOW, 1, SWIM_GOSSIP);
        swim_msg_t om = {.kind = SWIM_GOSSIP};
        swim_enc_msg(&w, &om);
        size_t at = swim_enc_array_open(&w);
        swim_enc_update(&w, &u);
        if (i == 2) { /* p3 says it leaves */
            u.state = SWIM_LEFT;
            u.incarnation = 1;
            swim_enc_update(&w, &u);
        }
        swim_enc_array_close(&w, at, i == 2 ? 2 : 1);
        cr_assert_eq(swim_receive(c, NOW, &u.addr, dgram, 2 + w.len, NULL), 0);
    }
    return c;
}

Test(swim_proto, the_members_file_keeps_the_live_members_and_a_restart_remembers_them)
{
    swim_core_t *c = knowing("");
    uint8_t *file;
    size_t len;
    cr_assert_eq(swim_known_save(c, &file, &len), 0);
    /* the next process of rx: a fresh core, which holds none of them yet */
    swim_core_t *next = receiver(NULL, 0, "");
    tt_err_t err;
    cr_assert_eq(swim_known_load(next, file, len, &err), 2, "p1 and p2: p3 had left");
    swim_known_t missing[3];
    cr_assert_eq(swim_known_missing(next, missing, 3), 2);
    for (int k = 0; k < 2; k++) { /* as the file has them, in the order of the table saved */
        char id[3] = {'p', (char)('1' + k), 0};
        swim_addr_t want = addr(k + 2);
        cr_assert(missing[k].id_len == 2 && memcmp(missing[k].id, id, 2) == 0);
        cr_assert(swim_addr_eq(&missing[k].addr, &want) &&
                  missing[k].generation == 10 + (uint64_t)k);
    }
    cr_assert_eq(swim_known_missing(next, missing, 1), 2, "the count whatever the room");
    swim_addr_t a;
    cr_assert(swim_known_pick(next, &a));
    swim_addr_t a2 = addr(2), a3 = addr(3);
    cr_assert(swim_addr_eq(&a, &a2) || swim_addr_eq(&a, &a3));
    free(file);
    swim_free(c);
    swim_free(next);
}

Test(swim_proto, a_members_file_of_another_node_or_cluster_or_damaged_remembers_nothing)
{
    swim_core_t *c = knowing("prod");
    uint8_t *file;
    size_t len;
    cr_assert_eq(swim_known_save(c, &file, &len), 0);
    tt_err_t err;
    swim_core_t *other = receiver(NULL, 0, "staging");
    cr_assert_eq(swim_known_load(other, file, len, &err), SWIM_EMALFORMED);
    cr_assert_str_eq(err.path, "cluster");
    cr_assert(strstr(err.message, "\"prod\""), "%s", err.message);
    for (size_t cut = 0; cut < len; cut++) /* every truncation */
        cr_assert_lt(swim_known_load(other, file, cut, NULL), 0, "cut at %zu", cut);
    file[len - 1] ^= 0xff; /* the last address's last byte: still decodes, a valid address */
    file[0] = 0x95;        /* five elements, not four */
    cr_assert_eq(swim_known_load(other, file, len, &err), SWIM_EMALFORMED);
    cr_assert(strstr(err.message, "5 elements"), "%s", err.message);
    cr_assert_eq(swim_known_missing(other, NULL, 0), 0, "nothing remembered");
    free(file);
    swim_free(c);
    swim_free(other);
}

static void one_member(const void *ctx, size_t i, swim_known_t *m)
{
    *m = (swim_known_t){.id = "p1", .id_len = 2, .generation = 1, .addr = addr(2)};
}

Test(swim_proto, the_members_file_names_the_field_that_was_wrong)
{
    uint8_t b[256];
    wire_pack_t w = {b, 0, sizeof b, false};
    swim_known_encode(&w, "rx", 2, "", 0, 1, one_member, NULL);
    swim_core_t *c = receiver(NULL, 0, "");
    tt_err_t err;
    b[w.len - 7] = 9; /* the address's family byte, first of its 7 */
    cr_assert_eq(swim_known_load(c, b, w.len, &err), SWIM_EMALFORMED);
    cr_assert_str_eq(err.path, "members[0].addr", "%s: %s", err.path, err.message);
    cr_assert_str_eq(err.message, "family 9 with 7 bytes");
    b[w.len - 7] = 4;
    b[1] = 2; /* version 2 */
    cr_assert_eq(swim_known_load(c, b, w.len, &err), SWIM_EMALFORMED);
    cr_assert_str_eq(err.path, "version");
    b[1] = 1;
    cr_assert_eq(swim_known_load(c, b, w.len, &err), 1);
    swim_free(c);
}

/* An id's hash is on the wire (a datagram's `from`) and keys the member index on every replica:
 * it is FNV-1a 64, pinned to the published values so replicas of two versions agree. */
Test(swim_proto, an_ids_hash_is_fnv1a_64)
{
    cr_assert_eq(swim_id_hash("", 0), UINT64_C(0xcbf29ce484222325));
    cr_assert_eq(swim_id_hash("a", 1), UINT64_C(0xaf63dc4c8601ec8c));
    cr_assert_eq(swim_id_hash("foobar", 6), UINT64_C(0x85944171f73967e8));
}
