/* The in-process fleet of demand cores; see demand_fleet.h. */
#include "demand_fleet.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "limit_helper.h"
#include "ratealg.h"

void df_init(dfleet_t *f, int n, const demand_config_t *cfg)
{
    demand_config_t def;
    if (!cfg) {
        demand_config_default(&def);
        cfg = &def;
    }
    memset(f, 0, sizeof(*f));
    cr_assert(n >= 1 && n <= DF_MAX);
    f->n = n;
    f->now = DF_T0;
    f->delay_ns = DF_MS;
    f->rng = 88172645463325252u;
    f->wire = calloc(DF_INFLIGHT, sizeof(df_packet_t));
    cr_assert(f->wire);
    for (int i = 0; i < n; i++) {
        tt_err_t err = {0};
        snprintf(f->id[i], sizeof(f->id[i]), "r%d", i);
        cr_assert_eq(demand_new(&f->core[i], cfg, f->id[i], strlen(f->id[i]), &err), 0, "%s: %s",
                     err.path, err.message);
        f->next_tick[i] = DF_T0 + cfg->interval_ns * i / n + cfg->interval_ns / (2 * n);
    }
    bool all[DF_MAX];
    for (int i = 0; i < DF_MAX; i++)
        all[i] = true;
    for (int i = 0; i < n; i++)
        df_view(f, i, all);
}

void df_free(dfleet_t *f)
{
    for (int i = 0; i < f->n; i++)
        demand_free(f->core[i]);
    free(f->wire);
}

void df_view(dfleet_t *f, int i, const bool *live)
{
    demand_member_t m[DF_MAX];
    size_t k = 0;
    for (int j = 0; j < f->n; j++)
        if (live[j] || j == i)
            m[k++] = (demand_member_t){.id = f->id[j], .id_len = strlen(f->id[j])};
    demand_set_members(f->core[i], m, k, (uint32_t)k, f->now);
}

void df_kill(dfleet_t *f, int i)
{
    f->dead[i] = true;
}

static void emit(void *ctx, const char *to, size_t to_len, const uint8_t *bytes, size_t len)
{
    dfleet_t *f = ctx;
    int dst = -1;
    for (int j = 0; j < f->n; j++)
        if (strlen(f->id[j]) == to_len && memcmp(f->id[j], to, to_len) == 0)
            dst = j;
    cr_assert(dst >= 0, "sent to an unknown member");
    cr_assert(len <= 1400);
    cr_assert(f->nwire < DF_INFLIGHT, "fake network full");
    f->bytes_sent[f->sender] += len;
    if (f->loss_permille) {
        f->rng ^= f->rng << 13, f->rng ^= f->rng >> 7, f->rng ^= f->rng << 17;
        if (f->rng % 1000 < f->loss_permille) {
            f->lost++;
            f->packets_sent[f->sender]++;
            return;
        }
    }
    f->packets_sent[f->sender]++;
    if (len > f->largest_packet)
        f->largest_packet = (uint32_t)len;
    df_packet_t *p = &f->wire[f->nwire++];
    p->from = f->sender;
    p->to = dst;
    p->at = f->now + f->delay_ns;
    p->len = (uint32_t)len;
    memcpy(p->bytes, bytes, len);
}

/* The earliest pending event time. */
static int64_t next_event(const dfleet_t *f)
{
    int64_t t = INT64_MAX;
    for (uint32_t k = 0; k < f->nwire; k++)
        if (f->wire[k].at < t)
            t = f->wire[k].at;
    for (int i = 0; i < f->n; i++) {
        if (f->dead[i])
            continue;
        if (f->next_tick[i] < t)
            t = f->next_tick[i];
        if (demand_flush_deadline(f->core[i]) < t)
            t = demand_flush_deadline(f->core[i]);
    }
    return t;
}

void df_run(dfleet_t *f, int64_t until)
{
    for (;;) {
        int64_t t = next_event(f);
        if (t > until)
            break;
        f->now = t;
        /* deliveries first, in send order */
        for (uint32_t k = 0; k < f->nwire;) {
            df_packet_t *p = &f->wire[k];
            if (p->at != t) {
                k++;
                continue;
            }
            if (!f->dead[p->to] && !f->dead[p->from]) {
                tt_err_t err = {0};
                int rc = demand_receive(f->core[p->to], t, f->id[p->from], strlen(f->id[p->from]),
                                        p->bytes, p->len, &err);
                cr_assert(rc == 0 || rc == DEMAND_ESENDER, "r%d: %s: %s", p->to, err.path,
                          err.message);
            }
            memmove(p, p + 1, (f->nwire - k - 1) * sizeof(*p));
            f->nwire--;
        }
        for (int i = 0; i < f->n; i++) {
            if (f->dead[i])
                continue;
            f->sender = i;
            demand_flush(f->core[i], t, emit, f); /* early grants, when due */
            if (f->next_tick[i] != t)
                continue;
            demand_tick(f->core[i], t, emit, f);
            f->next_tick[i] = demand_next_deadline(f->core[i]);
        }
    }
    f->now = until;
}

int df_owner(const dfleet_t *f, int i, const cfg_limit_t *l, const char *key)
{
    const char *id;
    size_t len;
    if (!demand_owner(f->core[i], l->identity, key, strlen(key), &id, &len))
        return -1;
    for (int j = 0; j < f->n; j++)
        if (strlen(f->id[j]) == len && memcmp(f->id[j], id, len) == 0)
            return j;
    return -1;
}

cfg_limit_t df_limit(int64_t amount, int64_t period_ns, int64_t burst)
{
    return share_test_limit(CFG_TYPE_RPM, amount, period_ns, burst);
}

void df_key_owned_by(const dfleet_t *f, const cfg_limit_t *l, int owner, char *key, size_t size)
{
    for (int k = 0; k < 10000; k++) {
        snprintf(key, size, "k%d", k);
        if (df_owner(f, 0, l, key) == owner)
            return;
    }
    cr_assert_fail("no key owned by r%d", owner);
}

void df_load_init(df_load_t *ld, const cfg_limit_t *limit, const char *key)
{
    memset(ld, 0, sizeof(*ld));
    ld->limit = limit;
    ld->key = key;
}

void df_load_rate(dfleet_t *f, df_load_t *ld, int i, int64_t per_s)
{
    ld->rate[i] = per_s;
    ld->started[i] = f->now;
    ld->done[i] = 0;
}

void df_load_hot(dfleet_t *f, df_load_t *ld, const cfg_limit_t *limit, int owner, char *key,
                 size_t size, int64_t per_s)
{
    df_key_owned_by(f, limit, owner, key, size);
    df_load_init(ld, limit, key);
    df_load_rate(f, ld, 0, per_s);
}

/* One arrival at replica i: the share it is given, then a real gcra step with it. */
static bool arrive(dfleet_t *f, df_load_t *ld, int i)
{
    const cfg_limit_t *l = ld->limit;
    uint32_t num = demand_arrive(f->core[i], l, ld->key, strlen(ld->key), 1, f->now);
    cr_assert(num >= 1 && num <= DEMAND_SHARE_DEN, "r%d: share %u", i, num);
    ra_limiter_t eff;
    cr_assert_eq(
        ra_limiter_effective(&l->limiter, num, DEMAND_SHARE_DEN, cfg_type_unit(l->type), &eff), 0);
    ra_result_t r = ra_step(&eff, ld->state[i], f->now, 1);
    ld->offered[i]++;
    if (r.admit) {
        ld->state[i] = r.next_state;
        ld->admitted[i]++;
    }
    return r.admit;
}

void df_drive(dfleet_t *f, df_load_t *loads, int nloads, int64_t until, df_observe_fn observe,
              void *ctx)
{
    while (f->now < until) {
        df_run(f, f->now + DF_MS);
        uint64_t admitted = 0;
        for (int k = 0; k < nloads; k++) {
            df_load_t *ld = &loads[k];
            for (int i = 0; i < f->n; i++) {
                if (f->dead[i] || ld->rate[i] == 0)
                    continue;
                /* arrivals due by now: floor(rate x elapsed) */
                uint64_t due =
                    (uint64_t)((__int128)ld->rate[i] * (f->now - ld->started[i]) / (1000 * DF_MS));
                for (; ld->done[i] < due; ld->done[i]++)
                    admitted += arrive(f, ld, i);
            }
        }
        if (observe)
            observe(ctx, f, admitted);
    }
}
