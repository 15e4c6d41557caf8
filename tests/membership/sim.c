/* The deterministic simulator; see sim.h. */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EV_TICK, EV_DGRAM, EV_PP_REQ, EV_PP_REPLY };

typedef struct ev {
    int64_t at;
    uint64_t order;
    int kind;
    int from, to;
    uint32_t to_gen; /* the process (start count) the datagram was addressed to */
    uint8_t *bytes;
    size_t len;
} ev_t;

typedef struct node {
    swim_core_t *core;
    swim_addr_t addr;
    uint64_t gen;
    uint32_t starts;
    bool up;
    int64_t paused_until;
    int64_t lag;      /* a slow member: what it receives waits this long, its timers do not */
    int64_t exit_at;  /* a leaver exits then */
    int64_t deadline; /* the core's next deadline as last pushed; older ticks are stale */
    uint64_t tx_bytes;
} node_t;

struct sim {
    sim_opts_t o;
    uint64_t rng;
    int64_t now;
    uint64_t order;
    node_t *nodes;
    int n, cap;
    int *group;
    uint8_t *cut; /* cap x cap, from-major */
    int *by_addr; /* address number -> node */
    size_t n_addr, addr_cap;
    ev_t *evs;
    size_t n_evs, evs_cap;
    uint64_t trace;
    uint64_t datagrams;
    uint8_t key[SWIM_KEY_BYTES];
};

static uint64_t rnd(sim_t *s)
{
    uint64_t z = (s->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static double unit(sim_t *s)
{
    return (double)(rnd(s) >> 11) / 9007199254740992.0;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "sim: out of memory\n");
        abort();
    }
    return q;
}

/* ---- one binary heap of events: deliveries and timers ---- */

/* Timers run before deliveries at the same instant, as libuv runs timers before polling. */
static bool ev_less(const ev_t *a, const ev_t *b)
{
    if (a->at != b->at)
        return a->at < b->at;
    if ((a->kind == EV_TICK) != (b->kind == EV_TICK))
        return a->kind == EV_TICK;
    return a->order < b->order;
}

static void ev_push(sim_t *s, ev_t e)
{
    if (s->n_evs == s->evs_cap) {
        s->evs_cap = s->evs_cap ? 2 * s->evs_cap : 1024;
        s->evs = xrealloc(s->evs, s->evs_cap * sizeof *s->evs);
    }
    e.order = s->order++;
    size_t i = s->n_evs++;
    while (i > 0 && ev_less(&e, &s->evs[(i - 1) / 2])) {
        s->evs[i] = s->evs[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->evs[i] = e;
}

static ev_t ev_pop(sim_t *s)
{
    ev_t top = s->evs[0], last = s->evs[--s->n_evs];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        const ev_t *cand = &last;
        if (l < s->n_evs && ev_less(&s->evs[l], cand))
            m = l, cand = &s->evs[l];
        if (l + 1 < s->n_evs && ev_less(&s->evs[l + 1], cand))
            m = l + 1;
        if (m == i)
            break;
        s->evs[i] = s->evs[m];
        i = m;
    }
    if (s->n_evs)
        s->evs[i] = last;
    return top;
}

static void dl_push(sim_t *s, int node, int64_t at)
{
    ev_push(s, (ev_t){.at = at, .kind = EV_TICK, .to = node});
}

/* ---- the shell's part: draining a core ---- */

static int node_by_addr(const sim_t *s, const swim_addr_t *a)
{
    uint32_t k = (uint32_t)a->ip[1] << 16 | (uint32_t)a->ip[2] << 8 | a->ip[3];
    if (a->family != 4 || a->ip[0] != 10 || k >= s->n_addr)
        return -1;
    int i = s->by_addr[k];
    return swim_addr_eq(&s->nodes[i].addr, a) ? i : -1;
}

static bool link_ok(const sim_t *s, int from, int to)
{
    return s->group[from] == s->group[to] && !s->cut[(size_t)from * s->cap + to];
}

static void trace(sim_t *s, uint64_t x)
{
    s->trace = (s->trace ^ x) * UINT64_C(1099511628211);
}

/* When a datagram sent now after `delay` reaches node `to`: a slow member reads it late. */
static int64_t arrival(const sim_t *s, int to, int64_t delay)
{
    return s->now + delay + s->nodes[to].lag;
}

static void start_pushpull(sim_t *s, int i, int to, bool join)
{
    node_t *n = &s->nodes[i];
    size_t cap = swim_pushpull_bound(n->core), len;
    uint8_t *buf = xrealloc(NULL, cap);
    if (swim_pushpull_encode(n->core, s->now, join, buf, cap, &len)) {
        free(buf);
        return;
    }
    n->tx_bytes += len;
    ev_push(s, (ev_t){.at = arrival(s, to, s->o.delay_max + 1 * SIM_MS),
                      .kind = EV_PP_REQ,
                      .from = i,
                      .to = to,
                      .to_gen = s->nodes[to].starts,
                      .bytes = buf,
                      .len = len});
}

static void after_call(sim_t *s, int i);

static void drain(sim_t *s, int i)
{
    node_t *n = &s->nodes[i];
    const swim_outbox_t *ob = swim_outbox(n->core);
    for (size_t k = 0; k < ob->n; k++) {
        const swim_datagram_t *d = &ob->dgram[k];
        n->tx_bytes += d->len;
        int to = node_by_addr(s, &d->to);
        if (to < 0 || !link_ok(s, i, to) || unit(s) < s->o.loss)
            continue;
        int copies = unit(s) < s->o.dup ? 2 : 1;
        for (int c = 0; c < copies; c++) {
            int64_t delay = s->o.delay_min;
            if (s->o.delay_max > s->o.delay_min)
                delay += (int64_t)(rnd(s) % (uint64_t)(s->o.delay_max - s->o.delay_min + 1));
            uint8_t *b = xrealloc(NULL, d->len);
            memcpy(b, ob->arena + d->off, d->len);
            ev_push(s, (ev_t){.at = arrival(s, to, delay),
                              .kind = EV_DGRAM,
                              .from = i,
                              .to = to,
                              .to_gen = s->nodes[to].starts,
                              .bytes = b,
                              .len = d->len});
        }
    }
    int pp_to = -1;
    if (ob->pp_wanted) {
        if (!ob->pp_seed)
            pp_to = node_by_addr(s, &ob->pp_to);
        else if (s->o.seeds_all)
            pp_to = (int)(rnd(s) % (uint64_t)s->n);
        else
            pp_to = 0;
        /* a seed no live member holds, as the shell picks one: none when it is held */
        if (ob->pp_seed && ob->pp_absent && pp_to >= 0 &&
            swim_addr_live(n->core, &s->nodes[pp_to].addr))
            pp_to = -1;
    }
    swim_outbox_clear(n->core);
    if (pp_to >= 0 && pp_to != i)
        start_pushpull(s, i, pp_to, false);
    size_t ne;
    const swim_event_t *evs = swim_events(n->core, &ne);
    if (s->o.on_event)
        for (size_t k = 0; k < ne; k++)
            s->o.on_event(s->o.ud, s, i, &evs[k]);
    swim_events_clear(n->core);
}

static void after_call(sim_t *s, int i)
{
    drain(s, i);
    node_t *n = &s->nodes[i];
    int64_t d = swim_next_deadline(n->core);
    if (n->exit_at && n->exit_at < d)
        d = n->exit_at;
    if (d != n->deadline) {
        n->deadline = d;
        dl_push(s, i, d);
    }
}

static void deliver(sim_t *s, ev_t *e)
{
    node_t *n = &s->nodes[e->to];
    if (n->exit_at && s->now >= n->exit_at)
        n->up = false;
    if (!n->up || n->starts != e->to_gen)
        return; /* the process it was sent to is gone */
    if (n->paused_until > s->now) {
        /* a stopped process: the kernel holds the datagram until it runs again */
        ev_t again = *e;
        again.at = n->paused_until;
        ev_push(s, again);
        e->bytes = NULL;
        return;
    }
    trace(s, (uint64_t)e->at);
    trace(s, (uint64_t)e->from << 32 | (uint64_t)e->to);
    trace(s, e->len);
    switch (e->kind) {
    case EV_DGRAM:
        s->datagrams++;
        swim_receive(n->core, s->now, &s->nodes[e->from].addr, e->bytes, e->len, NULL);
        break;
    case EV_PP_REQ: {
        /* TCP: both directions must work and the initiator must still be there */
        if (!link_ok(s, e->from, e->to) || !link_ok(s, e->to, e->from))
            return;
        if (swim_pushpull_receive(n->core, s->now, e->bytes, e->len, NULL) == 0 &&
            s->nodes[e->from].up) {
            size_t cap = swim_pushpull_bound(n->core), len;
            uint8_t *buf = xrealloc(NULL, cap);
            if (swim_pushpull_encode(n->core, s->now, false, buf, cap, &len) == 0) {
                n->tx_bytes += len;
                ev_push(s, (ev_t){.at = arrival(s, e->from, s->o.delay_max + 1 * SIM_MS),
                                  .kind = EV_PP_REPLY,
                                  .from = e->to,
                                  .to = e->from,
                                  .to_gen = s->nodes[e->from].starts,
                                  .bytes = buf,
                                  .len = len});
            } else {
                free(buf);
            }
        }
        break;
    }
    case EV_PP_REPLY:
        swim_pushpull_receive(n->core, s->now, e->bytes, e->len, NULL);
        break;
    }
    after_call(s, e->to);
}

/* One step: the earliest event, if it is due by t. */
static bool step(sim_t *s, int64_t t)
{
    if (!s->n_evs || s->evs[0].at > t)
        return false;
    ev_t e = ev_pop(s);
    s->now = e.at > s->now ? e.at : s->now;
    if (e.kind != EV_TICK) {
        deliver(s, &e);
        free(e.bytes);
        return true;
    }
    node_t *n = &s->nodes[e.to];
    if (e.at != n->deadline || !n->up)
        return true; /* stale: the node's deadline moved since, or it is gone */
    n->deadline = INT64_MIN;
    if (n->exit_at && s->now >= n->exit_at) {
        n->up = false;
        return true;
    }
    if (n->paused_until > s->now) {
        n->deadline = n->paused_until;
        dl_push(s, e.to, n->paused_until);
        return true;
    }
    swim_tick(n->core, s->now);
    after_call(s, e.to);
    return true;
}

void sim_run_until(sim_t *s, int64_t t)
{
    while (step(s, t)) {
    }
    if (s->now < t)
        s->now = t;
}

bool sim_run_while_not(sim_t *s, int64_t deadline, bool (*pred)(sim_t *, void *), void *arg)
{
    /* the predicate is checked at most every 100 ms of virtual time: it may be O(N^2) */
    while (!pred(s, arg)) {
        if (s->now >= deadline)
            return false;
        int64_t next = s->now + 100 * SIM_MS;
        sim_run_until(s, next < deadline ? next : deadline);
    }
    return true;
}

/* ---- building and driving the cluster ---- */

void sim_opts_default(sim_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->delay_min = 1 * SIM_MS;
    o->delay_max = 5 * SIM_MS;
}

sim_t *sim_new(const sim_opts_t *o)
{
    sim_t *s = xrealloc(NULL, sizeof *s);
    memset(s, 0, sizeof *s);
    s->o = *o;
    s->rng = o->seed;
    s->now = INT64_C(1700000000) * SIM_S; /* a realistic epoch: sent_ns must look sane */
    s->trace = UINT64_C(14695981039346656037);
    for (int k = 0; k < SWIM_KEY_BYTES; k++)
        s->key[k] = (uint8_t)(rnd(s) >> 56);
    return s;
}

void sim_free(sim_t *s)
{
    for (int i = 0; i < s->n; i++)
        swim_free(s->nodes[i].core);
    for (size_t k = 0; k < s->n_evs; k++)
        free(s->evs[k].bytes);
    free(s->nodes);
    free(s->group);
    free(s->cut);
    free(s->by_addr);
    free(s->evs);
    free(s);
}

static void grow_nodes(sim_t *s)
{
    if (s->n < s->cap)
        return;
    int nc = s->cap ? 2 * s->cap : 16;
    s->nodes = xrealloc(s->nodes, (size_t)nc * sizeof *s->nodes);
    s->group = xrealloc(s->group, (size_t)nc * sizeof *s->group);
    uint8_t *cut = xrealloc(NULL, (size_t)nc * (size_t)nc);
    memset(cut, 0, (size_t)nc * (size_t)nc);
    for (int a = 0; a < s->n; a++)
        memcpy(cut + (size_t)a * nc, s->cut + (size_t)a * s->cap, (size_t)s->n);
    free(s->cut);
    s->cut = cut;
    s->cap = nc;
}

static swim_addr_t new_addr(sim_t *s, int node)
{
    if (s->n_addr == s->addr_cap) {
        s->addr_cap = s->addr_cap ? 2 * s->addr_cap : 64;
        s->by_addr = xrealloc(s->by_addr, s->addr_cap * sizeof *s->by_addr);
    }
    uint32_t k = (uint32_t)s->n_addr++;
    s->by_addr[k] = node;
    swim_addr_t a = {.family = 4, .port = 7946};
    a.ip[0] = 10;
    a.ip[1] = (uint8_t)(k >> 16);
    a.ip[2] = (uint8_t)(k >> 8);
    a.ip[3] = (uint8_t)k;
    return a;
}

static void boot(sim_t *s, int i, int seed, bool in_place)
{
    node_t *n = &s->nodes[i];
    char id[32];
    snprintf(id, sizeof id, "n%d", i);
    swim_config_t cfg;
    swim_config_default(&cfg);
    cfg.id = id;
    cfg.generation = ++n->gen;
    cfg.addr = n->addr = in_place ? n->addr : new_addr(s, i);
    cfg.seed = rnd(s);
    const uint8_t(*keys)[SWIM_KEY_BYTES] = (const uint8_t(*)[SWIM_KEY_BYTES])s->key;
    if (s->o.sealed) {
        cfg.keys = keys;
        cfg.nkeys = 1;
        cfg.label = "sim";
    }
    tt_err_t err;
    if (swim_new(&n->core, &cfg, s->now, &err)) {
        fprintf(stderr, "sim: swim_new: %s: %s\n", err.path, err.message);
        abort();
    }
    n->starts++;
    n->up = true;
    n->paused_until = 0;
    n->exit_at = 0;
    n->deadline = INT64_MIN;
    after_call(s, i);
    if (seed >= 0 && seed != i)
        start_pushpull(s, i, seed, true);
}

int sim_add(sim_t *s, int seed)
{
    grow_nodes(s);
    int i = s->n++;
    memset(&s->nodes[i], 0, sizeof s->nodes[i]);
    s->group[i] = 0;
    boot(s, i, seed, false);
    return i;
}

void sim_add_many(sim_t *s, int n)
{
    for (int k = 0; k < n; k++)
        sim_add(s, s->n ? 0 : -1);
}

void sim_kill(sim_t *s, int i)
{
    s->nodes[i].up = false;
}

void sim_restart(sim_t *s, int i, int seed)
{
    swim_free(s->nodes[i].core);
    s->nodes[i].core = NULL;
    boot(s, i, seed, false);
}

void sim_restart_in_place(sim_t *s, int i, int seed)
{
    swim_free(s->nodes[i].core);
    s->nodes[i].core = NULL;
    boot(s, i, seed, true);
}

void sim_leave(sim_t *s, int i)
{
    node_t *n = &s->nodes[i];
    swim_leave(n->core, s->now);
    n->exit_at = s->now + 500 * SIM_MS;
    after_call(s, i);
}

void sim_pause(sim_t *s, int i, int64_t d)
{
    s->nodes[i].paused_until = s->now + d;
}

void sim_lag(sim_t *s, int i, int64_t d)
{
    s->nodes[i].lag = d;
}

void sim_group(sim_t *s, int i, int g)
{
    s->group[i] = g;
}

void sim_cut(sim_t *s, int from, int to, bool on)
{
    s->cut[(size_t)from * s->cap + to] = on;
}

void sim_set_loss(sim_t *s, double loss)
{
    s->o.loss = loss;
}

int64_t sim_now(const sim_t *s)
{
    return s->now;
}

int sim_size(const sim_t *s)
{
    return s->n;
}

bool sim_up(const sim_t *s, int i)
{
    return s->nodes[i].up && !s->nodes[i].exit_at;
}

swim_core_t *sim_core(sim_t *s, int i)
{
    return s->nodes[i].core;
}

int sim_state(sim_t *s, int observer, int target)
{
    char id[32];
    snprintf(id, sizeof id, "n%d", target);
    swim_member_view_t v;
    if (swim_member_find(s->nodes[observer].core, id, &v))
        return -1;
    return (int)v.state;
}

/* Each view is read once, through its table (a lookup per pair cost O(N^2) finds a check: at
 * 5,000 members most of a join's CPU). A view is right when it holds every live node alive
 * under its current generation (ids are unique in a table, so counting them does) and holds
 * nothing else alive. */
bool sim_converged(sim_t *s, void *unused)
{
    int live = 0;
    for (int i = 0; i < s->n; i++)
        live += sim_up(s, i);
    for (int i = 0; i < s->n; i++) /* the cheap test first: it fails most of the time */
        if (sim_up(s, i) && swim_live_count(s->nodes[i].core) != live)
            return false;
    for (int i = 0; i < s->n; i++) {
        if (!sim_up(s, i))
            continue;
        const swim_core_t *c = s->nodes[i].core;
        int right = 0;
        for (size_t k = 0; k < swim_member_count(c); k++) {
            swim_member_view_t v;
            swim_member_get(c, k, &v);
            if (v.state != SWIM_ALIVE)
                continue;
            int j = atoi(v.id + 1); /* "n<j>" */
            if (j < 0 || j >= s->n || !sim_up(s, j) || v.generation != s->nodes[j].gen)
                return false;
            right++;
        }
        if (right != live)
            return false;
    }
    return true;
}

uint64_t sim_trace(const sim_t *s)
{
    return s->trace;
}

uint64_t sim_tx_bytes(const sim_t *s, int i)
{
    return s->nodes[i].tx_bytes;
}

uint64_t sim_datagrams(const sim_t *s)
{
    return s->datagrams;
}
