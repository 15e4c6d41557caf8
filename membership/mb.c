/*
 * The libuv shell around the SWIM core; see mb.h. It only moves bytes and fires timers:
 * after every call into the core, mb__pump() sends the outbox, starts the push-pull the core
 * asked for, hands the events to the subscribers and re-arms the one timer.
 *
 * Push-pull over TCP lives in mb_pushpull.c.
 */
#include "mb.h"
#include "mb_int.h"
#include "tt_buf.h"
#include "tt_clock.h"
#include "tt_log.h"

#include <errno.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define JOIN_RETRY_MS 1000
#define JOIN_FANOUT 3 /* seed addresses dialled per try before the join (on_resolved) */
#define LEAVE_GRACE_MS 500
#define KEYRING_FILE_MAX 65536
/* The kernel's queue of connections not yet accepted: a flood that fills it drops a joining
 * peer's SYN, which it then resends only a second later. */
#define LISTEN_BACKLOG 1024

/* ---- addresses ---- */

int mb_parse_addr(const char *s, struct sockaddr_storage *ss)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || !colon[1])
        return -1;
    size_t hl = (size_t)(colon - s);
    const char *h = s;
    if (s[0] == '[' && colon[-1] == ']') {
        h = s + 1;
        hl -= 2;
    }
    if (hl >= sizeof host)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof *ss);
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0)
        return 0;
    if (uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0)
        return 0;
    return -1;
}

int mb_want_addr(const char *s, const char *field, struct sockaddr_storage *ss, tt_err_t *err)
{
    if (mb_parse_addr(s, ss) == 0)
        return 0;
    return tt_err_set(
        err, SWIM_EINVAL, field,
        "\"%s\" is not a numeric ip:port (names are not resolved for an address to bind or "
        "advertise)",
        s);
}

void mb_addr_format(const swim_addr_t *a, char *out, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    uv_inet_ntop(a->family == 6 ? AF_INET6 : AF_INET, a->ip, ip, sizeof ip);
    snprintf(out, cap, a->family == 6 ? "[%s]:%u" : "%s:%u", ip, a->port);
}

/* ---- pumping the core ---- */

static void on_timer(uv_timer_t *t);
static void resolve_seed(mb_t *mb, size_t seed, bool absent);

/* The address membership has for member `id`, "" when it has none. */
static void member_address(const mb_t *mb, const char *id, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0, n = mb_member_count(mb); i < n; i++) {
        swim_member_view_t v;
        if (mb_member_get(mb, i, &v) == 0 && strcmp(v.id, id) == 0) {
            mb_addr_format(&v.addr, out, cap);
            return;
        }
    }
}

/*
 * One line per change of the view an operator waits for (docs/membership.md, "What the log
 * says"): a member joined (or came back, or restarted as a new generation), left, was declared
 * dead, and another process claiming our id. n is the live count (alive and suspect, self
 * included) once the core has taken the change in: the N an equal division divides by.
 */
static void log_event(mb_t *mb, const swim_event_t *ev)
{
    char addr[80] = "";
    switch (ev->type) {
    case SWIM_EV_UP:
        member_address(mb, ev->id, addr, sizeof addr);
        tt_log(TT_LOG_INFO, "member joined", TT_STR("member", ev->id),
               TT_UINT("generation", ev->generation), TT_STR("address", addr[0] ? addr : NULL),
               TT_INT("n", mb_live_count(mb)));
        return;
    case SWIM_EV_LEFT:
        tt_log(TT_LOG_INFO, "member left", TT_STR("member", ev->id),
               TT_UINT("generation", ev->generation), TT_INT("n", mb_live_count(mb)));
        return;
    case SWIM_EV_DOWN: /* N fell by a failure */
        tt_log(TT_LOG_WARN, "member dead", TT_STR("member", ev->id),
               TT_UINT("generation", ev->generation), TT_INT("n", mb_live_count(mb)));
        return;
    case SWIM_EV_DUPLICATE: {
        char other[80] = "?";
        mb_duplicate(mb, NULL, other, sizeof other);
        tt_log(TT_LOG_ERROR,
               "duplicate node id: another live process claims it; every view counts the id "
               "once, so N is in doubt (short by one)",
               TT_STR("member", ev->id), TT_UINT("generation", ev->generation),
               TT_STR("address", other));
        return;
    }
    case SWIM_EV_UPDATE:
    case SWIM_EV_LIVE_COUNT:
        return; /* metadata (a divisor) changes often; N's changes are the share store's lines */
    }
}

void mb__pump(mb_t *mb)
{
    if (mb->closing)
        return;
    const swim_outbox_t *ob = swim_outbox(mb->core);
    for (size_t k = 0; k < ob->n; k++) {
        const swim_datagram_t *d = &ob->dgram[k];
        struct sockaddr_storage ss;
        mb__from_swim(&d->to, &ss);
        uv_buf_t b = uv_buf_init((char *)ob->arena + d->off, d->len);
        uv_udp_try_send(&mb->udp, &b, 1, (const struct sockaddr *)&ss); /* UDP: loss is fine */
    }
    bool pp = ob->pp_wanted, pp_seed = ob->pp_seed, pp_absent = ob->pp_absent;
    swim_addr_t pp_to = ob->pp_to;
    swim_outbox_clear(mb->core);
    if (pp && !mb->leaving) {
        if (!pp_seed) {
            struct sockaddr_storage ss;
            mb__from_swim(&pp_to, &ss);
            mb__pushpull_to(mb, (const struct sockaddr *)&ss);
        } else if (mb->cfg.n_seeds) {
            resolve_seed(mb, (size_t)randombytes_uniform((uint32_t)mb->cfg.n_seeds), pp_absent);
        }
    }
    /* Events go out from the outermost pump only. A subscriber may call back into membership
     * (the share store republishes its divisor with mb_set_meta), which pumps again: that inner
     * pump sends what the call queued and leaves the events to this loop, which reads the queue
     * afresh at every step, so an event the call added is handed out once too, after the
     * others. Each event is copied out first: the call may grow (move) the queue. */
    if (mb->delivering)
        goto rearm;
    mb->delivering = true;
    for (size_t k = 0;; k++) {
        size_t n;
        const swim_event_t *queue = swim_events(mb->core, &n);
        if (k >= n)
            break;
        swim_event_t ev = queue[k];
        log_event(mb, &ev);
        for (int s = 0; s < mb->n_subs && !mb->closing; s++)
            mb->subs[s].fn(mb->subs[s].ud, mb, &ev);
    }
    swim_events_clear(mb->core);
    mb->delivering = false;
    if (mb->closing) /* a subscriber closed membership: no timer to re-arm */
        return;
rearm:;
    int64_t wait = swim_next_deadline(mb->core) - tt_mono_ns();
    uint64_t ms = wait <= 0 ? 0 : (uint64_t)((wait + 999999) / 1000000);
    uv_timer_start(&mb->timer, on_timer, ms, 0);
}

static void on_timer(uv_timer_t *t)
{
    mb_t *mb = t->data;
    swim_tick(mb->core, mb__now(mb));
    mb__pump(mb);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    mb_t *mb = h->data;
    *buf = uv_buf_init((char *)mb->rxbuf, sizeof mb->rxbuf);
}

static void on_udp(uv_udp_t *udp, ssize_t nread, const uv_buf_t *buf, const struct sockaddr *sa,
                   unsigned flags)
{
    mb_t *mb = udp->data;
    if (nread <= 0 || !sa || mb->closing)
        return;
    swim_addr_t from;
    mb__to_swim(sa, &from);
    /* a datagram the kernel truncated was above our buffer: the core counts it oversized */
    size_t len = (flags & UV_UDP_PARTIAL) ? SWIM_DATAGRAM_MAX + 1 : (size_t)nread;
    const char *app_from;
    const uint8_t *payload;
    size_t from_len, plen;
    if (swim_receive(mb->core, mb__now(mb), &from, (const uint8_t *)buf->base, len, NULL) == 0 &&
        swim_app_take(mb->core, &app_from, &from_len, &payload, &plen) && mb->app)
        mb->app(mb->app_ud, mb, app_from, from_len, payload, plen);
    mb__pump(mb);
}

/* ---- seeds: resolved on every try ---- */

typedef struct resolve {
    uv_getaddrinfo_t req;
    mb_t *mb;
    size_t seed; /* its index in cfg.seeds */
    bool absent; /* only an address no live member holds (the core looks for an island) */
} resolve_t;

/* An address worth dialling: not ours, and with `absent` not a live member's. */
static bool dialable(const mb_t *mb, const struct sockaddr *sa, bool absent)
{
    swim_addr_t a;
    mb__to_swim(sa, &a);
    return !swim_addr_eq(&a, &mb->self_addr) && !(absent && swim_addr_live(mb->core, &a));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    resolve_t *r = (resolve_t *)req;
    mb_t *mb = r->mb;
    mb->pending--;
    if (!mb->closing && status == 0) {
        /* A headless service resolves to every pod: dial addresses that are not us, chosen at
         * random. Before the join, JOIN_FANOUT of them: replicas that all start at once and
         * each dial a single peer can pair off into groups that know nothing of each other
         * until a later seed round (a 4-replica DaemonSet start split into two pairs for ~70 s
         * in tests/k8s); a random 3-out graph is connected with high probability. */
        int n = 0;
        uint32_t peers = 0;
        for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
            n += dialable(mb, ai->ai_addr, r->absent);
            peers += dialable(mb, ai->ai_addr, false);
        }
        mb->seed_peers[r->seed] = peers;
        int want = swim_joined(mb->core) ? 1 : JOIN_FANOUT;
        for (struct addrinfo *ai = res; ai && want > 0; ai = ai->ai_next)
            if (dialable(mb, ai->ai_addr, r->absent)) {
                if ((int)randombytes_uniform((uint32_t)n) < want) { /* selection sampling */
                    mb__pushpull_to(mb, ai->ai_addr);
                    want--;
                }
                n--;
            }
    } else if (!mb->closing) {
        tt_log(TT_LOG_WARN, "seed lookup failed", TT_STR("detail", uv_strerror(status)));
    }
    uv_freeaddrinfo(res);
    free(r);
    if (mb->closing && mb->open_handles == 0 && mb->pending == 0 && mb->closed)
        mb->closed(mb->closed_ud, mb);
}

static void resolve_seed(mb_t *mb, size_t seed, bool absent)
{
    const char *s = mb->cfg.seeds[seed];
    char host[CFG_ADDR_MAX + 1];
    const char *colon = strrchr(s, ':');
    if (!colon)
        return;
    size_t hl = (size_t)(colon - s);
    const char *h = s;
    if (s[0] == '[' && hl >= 2 && colon[-1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    resolve_t *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->mb = mb;
    r->seed = seed;
    r->absent = absent;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM};
    if (uv_getaddrinfo(mb->loop, &r->req, on_resolved, host, colon + 1, &hints)) {
        free(r);
        return;
    }
    mb->pending++;
}

static void on_join_timer(uv_timer_t *t)
{
    mb_t *mb = t->data;
    if (mb->leaving) { /* the leave grace is over */
        if (mb->leave_done) {
            mb_done_fn done = mb->leave_done;
            mb->leave_done = NULL;
            done(mb->leave_ud, mb);
        }
        return;
    }
    if (swim_joined(mb->core))
        return;
    if (!mb->solo && tt_mono_ns() >= mb->join_deadline) {
        mb->solo = true;
        tt_log(TT_LOG_WARN, "no seed answered within the join timeout: running solo, still trying",
               TT_UINT("seeds", mb->cfg.n_seeds));
    }
    if (!mb->solo) {
        for (size_t s = 0; s < mb->cfg.n_seeds; s++)
            resolve_seed(mb, s, false);
        /* and members this node knew before its restart (mb_known_load): with the seeds down
         * together, a restarted seed that dialled only the seeds found only other restarted
         * members, and they made a second fleet beside the first (issue 35) */
        for (int k = 0; k < JOIN_FANOUT; k++) {
            swim_addr_t a;
            struct sockaddr_storage ss;
            if (!swim_known_pick(mb->core, &a))
                break;
            mb__from_swim(&a, &ss);
            mb__pushpull_to(mb, (const struct sockaddr *)&ss);
        }
        uv_timer_start(&mb->join_timer, on_join_timer, JOIN_RETRY_MS, 0);
    }
}

/* ---- the public surface ---- */

#define KEYRING_FIELD "shared_state.share.keyring_file"

void mb_keyring_wipe(mb_keyring_t *kr)
{
    sodium_memzero(kr, sizeof *kr);
}

int mb_keyring_read(const char *path, mb_keyring_t *out, tt_err_t *err)
{
    out->n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tt_err_set(err, SWIM_EKEYRING, KEYRING_FIELD, "%s: %s", path, strerror(errno));
    char *text = malloc(KEYRING_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, KEYRING_FILE_MAX + 1, f) : 0;
    fclose(f);
    if (!text)
        return SWIM_ENOMEM;
    tt_err_t e;
    int rc = len > KEYRING_FILE_MAX
                 ? SWIM_EKEYRING
                 : swim_keyring_parse(text, len, out->keys, SWIM_KEYRING_MAX, &out->n, &e);
    sodium_memzero(text, KEYRING_FILE_MAX + 1);
    free(text);
    if (rc)
        mb_keyring_wipe(out); /* a line that parsed before the bad one is no keyring */
    if (len > KEYRING_FILE_MAX)
        return tt_err_set(err, rc, KEYRING_FIELD, "%s: above %d bytes", path, KEYRING_FILE_MAX);
    if (rc)
        return tt_err_set(err, rc, KEYRING_FIELD, "%s: %s: %s", path, e.path, e.message);
    if (out->n == 0)
        return tt_err_set(err, SWIM_EKEYRING, KEYRING_FIELD, "%s: no key", path);
    return 0;
}

int mb_keyring_prepare(const mb_t *mb, const char *path, mb_keyring_t *out, tt_err_t *err)
{
    /* what swim_set_keys checks, asked before anything changes */
    if (mb->keyring.n == 0)
        return tt_err_set(err, SWIM_EINVAL, KEYRING_FIELD,
                          "a replica started plaintext stays so until a restart");
    return mb_keyring_read(path, out, err);
}

void mb_keyring_commit(mb_t *mb, mb_keyring_t *kr)
{
    /* cannot fail: prepare saw a sealed replica and 1..SWIM_KEYRING_MAX keys */
    (void)swim_set_keys(mb->core, (const uint8_t(*)[SWIM_KEY_BYTES])kr->keys, kr->n);
    mb_keyring_wipe(&mb->keyring);
    mb->keyring = *kr;
    mb_keyring_wipe(kr);
    tt_log(TT_LOG_INFO, "keyring reloaded: the first key seals", TT_UINT("keys", mb->keyring.n));
}

static int load_keyring(mb_t *mb, tt_err_t *err)
{
    if (!mb->cfg.keyring_file[0]) {
        tt_log(TT_LOG_WARN, "GOSSIP IS NOT ENCRYPTED: shared_state.share.keyring_file is not set; "
                            "any host that can reach the gossip port can join or forge membership");
        return 0;
    }
    return mb_keyring_read(mb->cfg.keyring_file, &mb->keyring, err);
}

/* The advertised address: configured, or the bind address, or (bound to any) the first
 * non-loopback IPv4 interface. */
static int pick_advertise(mb_t *mb, const struct sockaddr_storage *bound, tt_err_t *err)
{
    struct sockaddr_storage ss = *bound;
    if (mb->cfg.advertise[0]) {
        int rc = mb_want_addr(mb->cfg.advertise, "shared_state.share.advertise", &ss, err);
        if (rc)
            return rc;
    } else if (ss.ss_family == AF_INET &&
               ((struct sockaddr_in *)&ss)->sin_addr.s_addr == htonl(INADDR_ANY)) {
        uv_interface_address_t *ifs;
        int n;
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (uv_interface_addresses(&ifs, &n) == 0) {
            for (int i = 0; i < n; i++)
                if (!ifs[i].is_internal && ifs[i].address.address4.sin_family == AF_INET) {
                    ((struct sockaddr_in *)&ss)->sin_addr = ifs[i].address.address4.sin_addr;
                    break;
                }
            uv_free_interface_addresses(ifs, n);
        }
    }
    mb__to_swim((const struct sockaddr *)&ss, &mb->self_addr);
    mb_addr_format(&mb->self_addr, mb->advertise, sizeof mb->advertise);
    return 0;
}

/*
 * Port 0: a port free for both UDP and TCP. The kernel picks the UDP one; TCP may already use
 * it, so the pair is tried on plain sockets and handed to libuv bound (no window between the
 * check and the bind). Fills the chosen port into *bind.
 */
static int pick_port(uv_udp_t *udp, uv_tcp_t *tcp, struct sockaddr_storage *bind_addr)
{
    socklen_t len =
        bind_addr->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    for (int tries = 0; tries < 32; tries++) {
        struct sockaddr_storage a = *bind_addr;
        socklen_t alen = len;
        int u = socket(a.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        int t = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (u >= 0 && t >= 0 && bind(u, (struct sockaddr *)&a, len) == 0 &&
            getsockname(u, (struct sockaddr *)&a, &alen) == 0 &&
            setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            bind(t, (struct sockaddr *)&a, len) == 0) {
            int rc = uv_udp_open(udp, u);
            if (rc) {
                close(u);
                close(t);
                return rc;
            }
            if ((rc = uv_tcp_open(tcp, t))) /* u belongs to the handle now */
                close(t);
            else
                *bind_addr = a;
            return rc;
        }
        if (u >= 0)
            close(u);
        if (t >= 0)
            close(t);
    }
    return UV_EADDRINUSE;
}

int mb_start(mb_t **out, uv_loop_t *loop, const cfg_share_t *cfg, tt_err_t *err)
{
    *out = NULL;
    if (sodium_init() < 0)
        return tt_err_set(err, SWIM_EINVAL, "", "libsodium: initialisation failed");
    mb_t *mb = calloc(1, sizeof *mb);
    if (!mb)
        return SWIM_ENOMEM;
    mb->loop = loop;
    mb->cfg = *cfg;
    mb->pump = mb__pump;
    struct sockaddr_storage bind;
    int rc;
    if ((rc = mb_want_addr(cfg->bind, "shared_state.share.bind", &bind, err)))
        goto fail_free;
    if ((rc = load_keyring(mb, err)))
        goto fail_free;
    uv_udp_init(loop, &mb->udp);
    uv_tcp_init(loop, &mb->listener);
    uv_timer_init(loop, &mb->timer);
    uv_timer_init(loop, &mb->join_timer);
    mb->open_handles = 4;
    mb->udp.data = mb->listener.data = mb->timer.data = mb->join_timer.data = mb;
    bool any_port = (bind.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bind)->sin6_port
                                                : ((struct sockaddr_in *)&bind)->sin_port) == 0;
    if (any_port && (rc = pick_port(&mb->udp, &mb->listener, &bind)) == 0)
        rc = uv_listen((uv_stream_t *)&mb->listener, LISTEN_BACKLOG, mb__on_connection);
    else if (!any_port &&
             !(rc = uv_udp_bind(&mb->udp, (const struct sockaddr *)&bind, UV_UDP_REUSEADDR)) &&
             !(rc = uv_tcp_bind(&mb->listener, (const struct sockaddr *)&bind, 0)))
        rc = uv_listen((uv_stream_t *)&mb->listener, LISTEN_BACKLOG, mb__on_connection);
    if (rc) {
        rc = tt_err_set(err, TT_ERR_LISTEN, "shared_state.share.bind", "%s: %s", cfg->bind,
                        uv_strerror(rc));
        goto fail_close;
    }
    if ((rc = pick_advertise(mb, &bind, err)))
        goto fail_close;
    swim_config_t sc;
    swim_config_default(&sc);
    sc.id = cfg->node_id;
    sc.start_wall_ns = tt_wall_ns();
    sc.generation = (uint64_t)sc.start_wall_ns; /* a restart is a new generation */
    sc.addr = mb->self_addr;
    sc.keys = (const uint8_t(*)[SWIM_KEY_BYTES])mb->keyring.keys;
    sc.nkeys = mb->keyring.n;
    sc.label = cfg->cluster;
    randombytes_buf(&sc.seed, sizeof sc.seed);
    tt_err_t se;
    if ((rc = swim_new(&mb->core, &sc, tt_mono_ns(), &se))) {
        tt_err_set(err, rc, "shared_state.share", "%s: %s", se.path, se.message);
        goto fail_close;
    }
    uv_udp_recv_start(&mb->udp, on_alloc, on_udp);
    mb->join_deadline = tt_mono_ns() + cfg->join_timeout_ns;
    if (cfg->n_seeds == 0)
        mb->solo = true;
    tt_log(TT_LOG_INFO, "membership started", TT_STR("node", cfg->node_id),
           TT_STR("address", mb->advertise), TT_BOOL("sealed", mb->keyring.n > 0),
           TT_UINT("seeds", cfg->n_seeds));
    /* the first try when the loop runs: the caller may hand over the members it knew first */
    uv_timer_start(&mb->join_timer, on_join_timer, 0, 0);
    mb__pump(mb);
    *out = mb;
    return 0;
fail_close:
    /* the handles were never used: close them and run the loop's close callbacks now */
    mb->closing = true;
    uv_close((uv_handle_t *)&mb->udp, NULL);
    uv_close((uv_handle_t *)&mb->listener, NULL);
    uv_close((uv_handle_t *)&mb->timer, NULL);
    uv_close((uv_handle_t *)&mb->join_timer, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
fail_free:
    mb_keyring_wipe(&mb->keyring);
    swim_free(mb->core);
    free(mb);
    return rc < 0 ? rc : SWIM_EINVAL;
}

int mb_subscribe(mb_t *mb, mb_event_fn fn, void *ud)
{
    if (mb->n_subs == MB_SUBSCRIBERS_MAX || !fn)
        return SWIM_EINVAL;
    mb->subs[mb->n_subs].fn = fn;
    mb->subs[mb->n_subs].ud = ud;
    mb->n_subs++;
    return 0;
}

size_t mb_member_count(const mb_t *mb)
{
    return swim_member_count(mb->core);
}

int mb_member_get(const mb_t *mb, size_t i, swim_member_view_t *v)
{
    int rc = swim_member_get(mb->core, i, v);
    if (rc == 0) { /* the core's times are monotonic; callers get wall time */
        int64_t mono = tt_mono_ns(), wall = tt_wall_ns();
        v->last_heard_ns = v->self ? wall : v->last_heard_ns - mono + wall;
        v->state_since_ns += wall - mono;
    }
    return rc;
}

int mb_live_count(const mb_t *mb)
{
    return swim_live_count(mb->core);
}

int mb_health(const mb_t *mb)
{
    return swim_health(mb->core);
}

bool mb_duplicate(const mb_t *mb, uint64_t *gen, char *addr, size_t cap)
{
    swim_addr_t a;
    if (!swim_duplicate(mb->core, tt_mono_ns(), gen, &a))
        return false;
    if (addr)
        mb_addr_format(&a, addr, cap);
    return true;
}

int mb_set_meta(mb_t *mb, const uint8_t *meta, size_t len)
{
    int rc = swim_set_meta(mb->core, mb__now(mb), meta, len);
    if (rc == 0)
        mb__pump(mb);
    return rc;
}

int mb_known_save(const mb_t *mb, uint8_t **out, size_t *len)
{
    return swim_known_save(mb->core, out, len);
}

int mb_known_load(mb_t *mb, const uint8_t *bytes, size_t len, tt_err_t *err)
{
    int n = swim_known_load(mb->core, bytes, len, err);
    if (n >= 0)
        tt_log(TT_LOG_INFO, "remembered the members of the fleet this node left; joining them too",
               TT_INT("members", n));
    return n;
}

uint64_t mb_seed_peers(const mb_t *mb)
{
    uint64_t n = 0;
    for (size_t s = 0; s < mb->cfg.n_seeds; s++)
        n += mb->seed_peers[s];
    return n;
}

size_t mb_known_missing(const mb_t *mb, swim_known_t *out, size_t cap)
{
    return swim_known_missing(mb->core, out, cap);
}

int mb_send_app(mb_t *mb, const char *to_id, size_t to_len, const uint8_t *payload, size_t len)
{
    if (mb->closing)
        return SWIM_EINVAL;
    int rc = swim_send_app(mb->core, mb__now(mb), to_id, to_len, payload, len);
    if (rc == 0)
        mb__pump(mb);
    return rc;
}

void mb_set_app_handler(mb_t *mb, mb_app_fn fn, void *ud)
{
    mb->app = fn;
    mb->app_ud = ud;
}

bool mb_joined(const mb_t *mb)
{
    return swim_joined(mb->core);
}

bool mb_solo(const mb_t *mb)
{
    return mb->solo && !swim_joined(mb->core);
}

const swim_counters_t *mb_counters(const mb_t *mb)
{
    return swim_counters(mb->core);
}

const char *mb_advertise(const mb_t *mb)
{
    return mb->advertise;
}

static void metric(void (*emit)(void *, const char *), void *ud, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One family's lines, whatever their length (a fixed buffer cut the rejoin family, and so the
 * next family's HELP ran into its last sample, as soon as two of its counts had two digits). */
static void metric(void (*emit)(void *, const char *), void *ud, const char *fmt, ...)
{
    tt_buf_t text = {0};
    va_list ap;
    va_start(ap, fmt);
    int rc = tt_buf_vprintf(&text, fmt, ap);
    va_end(ap);
    if (rc == 0 && tt_buf_append(&text, "", 1) == 0)
        emit(ud, (const char *)text.data);
    tt_buf_free(&text);
}

void mb_metrics_write(const mb_t *mb, void (*emit)(void *ud, const char *line), void *ud)
{
    uint64_t by_state[4] = {0};
    for (size_t i = 0; i < swim_member_count(mb->core); i++) {
        swim_member_view_t v;
        swim_member_get(mb->core, i, &v);
        by_state[v.state]++;
    }
    metric(emit, ud,
           "# HELP tokentriage_members Members in this replica's view, by state.\n"
           "# TYPE tokentriage_members gauge\n");
    for (int s = 0; s < 4; s++)
        metric(emit, ud, "tokentriage_members{state=\"%s\"} %llu\n",
               swim_state_name((swim_state_t)s), (unsigned long long)by_state[s]);
    const swim_counters_t *c = swim_counters(mb->core);
    metric(emit, ud,
           "# HELP tokentriage_gossip_packets_total Gossip datagrams, by direction.\n"
           "# TYPE tokentriage_gossip_packets_total counter\n"
           "tokentriage_gossip_packets_total{direction=\"rx\"} %llu\n"
           "tokentriage_gossip_packets_total{direction=\"tx\"} %llu\n",
           (unsigned long long)c->rx_packets, (unsigned long long)c->tx_packets);
    metric(emit, ud,
           "# HELP tokentriage_gossip_bytes_total Gossip datagram bytes, by direction.\n"
           "# TYPE tokentriage_gossip_bytes_total counter\n"
           "tokentriage_gossip_bytes_total{direction=\"rx\"} %llu\n"
           "tokentriage_gossip_bytes_total{direction=\"tx\"} %llu\n",
           (unsigned long long)c->rx_bytes, (unsigned long long)c->tx_bytes);
    const struct {
        const char *reason;
        uint64_t n;
    } drops[] = {{"oversize", c->drop_oversize}, {"truncated", c->drop_truncated},
                 {"version", c->drop_version},   {"mode", c->drop_mode},
                 {"auth", c->drop_auth},         {"malformed", c->drop_malformed},
                 {"stale", c->drop_stale},       {"replay", c->drop_replay},
                 {"self", c->drop_self}};
    metric(emit, ud,
           "# HELP tokentriage_gossip_dropped_total Gossip messages dropped, by "
           "reason (auth: forged, another key or another cluster label).\n"
           "# TYPE tokentriage_gossip_dropped_total counter\n");
    for (size_t k = 0; k < sizeof drops / sizeof drops[0]; k++)
        metric(emit, ud, "tokentriage_gossip_dropped_total{reason=\"%s\"} %llu\n", drops[k].reason,
               (unsigned long long)drops[k].n);
    metric(emit, ud,
           "# HELP tokentriage_gossip_pushpull_total Push-pull state exchanges, by direction.\n"
           "# TYPE tokentriage_gossip_pushpull_total counter\n"
           "tokentriage_gossip_pushpull_total{direction=\"in\"} %llu\n"
           "tokentriage_gossip_pushpull_total{direction=\"out\"} %llu\n",
           (unsigned long long)c->pushpull_in, (unsigned long long)c->pushpull_out);
    metric(emit, ud,
           "# HELP tokentriage_gossip_pushpull_refused_total Push-pull connections closed before "
           "their frame opened, by reason (deadline: no whole frame within %d ms; source: more "
           "than %d from one address; evicted: the oldest, to make room for a newer one).\n"
           "# TYPE tokentriage_gossip_pushpull_refused_total counter\n"
           "tokentriage_gossip_pushpull_refused_total{reason=\"deadline\"} %llu\n"
           "tokentriage_gossip_pushpull_refused_total{reason=\"source\"} %llu\n"
           "tokentriage_gossip_pushpull_refused_total{reason=\"evicted\"} %llu\n",
           FIRST_FRAME_MS, UNAUTH_PER_SOURCE, (unsigned long long)mb->pp_refused[PP_DEADLINE],
           (unsigned long long)mb->pp_refused[PP_SOURCE],
           (unsigned long long)mb->pp_refused[PP_EVICTED]);
    metric(emit, ud,
           "# HELP tokentriage_gossip_rejoin_total Looking for another island of the fleet (for "
           "a minute after the start and after a member dies or leaves): pings to the address of a "
           "member recently dead, left or known before the restart, push-pulls asked of a seed no "
           "live member holds, and merges with a process such a ping found.\n"
           "# TYPE tokentriage_gossip_rejoin_total counter\n"
           "tokentriage_gossip_rejoin_total{kind=\"ping\"} %llu\n"
           "tokentriage_gossip_rejoin_total{kind=\"seed\"} %llu\n"
           "tokentriage_gossip_rejoin_total{kind=\"merge\"} %llu\n",
           (unsigned long long)c->rejoin_pings, (unsigned long long)c->rejoin_seeds,
           (unsigned long long)c->rejoin_merges);
    metric(emit, ud,
           "# HELP tokentriage_members_down_total Live members declared dead in this "
           "replica's view (failure detection; leaves are not counted).\n"
           "# TYPE tokentriage_members_down_total counter\n"
           "tokentriage_members_down_total %llu\n",
           (unsigned long long)c->downs);
    metric(emit, ud,
           "# HELP tokentriage_membership_suspicions_total Suspicions begun in this replica's "
           "view (a probe it sent failed, or a peer's suspicion reached it).\n"
           "# TYPE tokentriage_membership_suspicions_total counter\n"
           "tokentriage_membership_suspicions_total %llu\n"
           "# HELP tokentriage_membership_refutations_total Suspicions or deaths of this "
           "replica it refuted (a higher incarnation gossiped): peers were slow to hear it.\n"
           "# TYPE tokentriage_membership_refutations_total counter\n"
           "tokentriage_membership_refutations_total %llu\n",
           (unsigned long long)c->suspicions, (unsigned long long)c->refutes);
    metric(emit, ud,
           "# HELP tokentriage_membership_duplicate_id 1 while another live process claims this "
           "replica's node id (N is short by one).\n"
           "# TYPE tokentriage_membership_duplicate_id gauge\n"
           "tokentriage_membership_duplicate_id %d\n",
           mb_duplicate(mb, NULL, NULL, 0));
    metric(emit, ud,
           "# HELP tokentriage_membership_health_score Lifeguard local health (0 is "
           "healthy).\n# TYPE tokentriage_membership_health_score gauge\n"
           "tokentriage_membership_health_score %d\n",
           swim_health(mb->core));
    metric(emit, ud,
           "# HELP tokentriage_membership_seed_peers Addresses the seeds named at their last "
           "lookup, this replica's own left out: the peers its configuration expects.\n"
           "# TYPE tokentriage_membership_seed_peers gauge\n"
           "tokentriage_membership_seed_peers %llu\n",
           (unsigned long long)mb_seed_peers(mb));
}

void mb_leave(mb_t *mb, mb_done_fn done, void *ud)
{
    if (mb->leaving || mb->closing)
        return;
    mb->leaving = true;
    mb->leave_done = done;
    mb->leave_ud = ud;
    swim_leave(mb->core, mb__now(mb));
    mb__pump(mb);
    uv_timer_start(&mb->join_timer, on_join_timer, LEAVE_GRACE_MS, 0);
    tt_log(TT_LOG_INFO, "left the cluster gracefully", TT_STR("node", mb->cfg.node_id));
}

static void handle_closed(uv_handle_t *h)
{
    mb_t *mb = h->data;
    if (--mb->open_handles == 0 && mb->pending == 0 && mb->closed)
        mb->closed(mb->closed_ud, mb);
}

void mb_close(mb_t *mb, mb_done_fn closed, void *ud)
{
    if (mb->closing)
        return;
    mb->closing = true;
    mb->closed = closed;
    mb->closed_ud = ud;
    while (mb->conns)
        mb__conn_close(mb->conns);
    uv_close((uv_handle_t *)&mb->udp, handle_closed);
    uv_close((uv_handle_t *)&mb->listener, handle_closed);
    uv_close((uv_handle_t *)&mb->timer, handle_closed);
    uv_close((uv_handle_t *)&mb->join_timer, handle_closed);
}

void mb_free(mb_t *mb)
{
    if (!mb)
        return;
    mb_keyring_wipe(&mb->keyring);
    swim_free(mb->core);
    free(mb);
}
