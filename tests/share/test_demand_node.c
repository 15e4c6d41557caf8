/* demand_node: the member table in, the per-key hook, payloads, fleet and /metrics out. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "demand_node.h"
#include "limit_helper.h"

#define MS INT64_C(1000000)
#define S (1000 * MS)
#define T0 (INT64_C(1700000000) * S)

/* A fake member table: ids and states, self first. */
typedef struct table {
    const char *id[8];
    swim_state_t state[8];
    size_t n;
} table_t;

static int table_get(const void *ctx, size_t i, swim_member_view_t *v)
{
    const table_t *t = ctx;
    memset(v, 0, sizeof(*v));
    v->id = t->id[i];
    v->id_len = strlen(t->id[i]);
    v->state = t->state[i];
    v->self = i == 0;
    return 0;
}

static demand_node_t *node_for(const char *self)
{
    cfg_share_t cfg = {
        .cold_share = 0.05, .demand_interval_ns = 500 * MS, .demand_keys = CFG_DEFAULT_DEMAND_KEYS};
    snprintf(cfg.node_id, sizeof(cfg.node_id), "%s", self);
    demand_node_t *n;
    tt_err_t err = {0};
    cr_assert_eq(demand_node_new(&n, &cfg, &err), 0, "%s: %s", err.path, err.message);
    return n;
}

static void refresh(demand_node_t *n, const table_t *t, uint32_t divisor)
{
    share_members_t m = {.ctx = t, .count = t->n, .get = table_get};
    demand_node_refresh(n, &m, divisor, T0);
}

Test(demand_node, a_setting_out_of_range_is_named_as_the_operator_wrote_it)
{
    static const struct {
        int64_t interval_ns;
        int64_t keys;
        const char *node_id, *path;
    } cases[] = {
        {0, CFG_DEFAULT_DEMAND_KEYS, "a", "shared_state.share.demand_interval"},
        {61 * S, CFG_DEFAULT_DEMAND_KEYS, "a", "shared_state.share.demand_interval"},
        {500 * MS, 0, "a", "shared_state.share.demand_keys"},
        {500 * MS, (1u << 24) + 1, "a", "shared_state.share.demand_keys"},
        {500 * MS, CFG_DEFAULT_DEMAND_KEYS, "", "shared_state.share.node_id"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cfg_share_t cfg = {.cold_share = 0.05,
                           .demand_interval_ns = cases[i].interval_ns,
                           .demand_keys = cases[i].keys};
        snprintf(cfg.node_id, sizeof(cfg.node_id), "%s", cases[i].node_id);
        demand_node_t *n = (demand_node_t *)&cfg; /* not NULL: demand_node_new must clear it */
        tt_err_t err = {0};
        cr_expect_eq(demand_node_new(&n, &cfg, &err), DEMAND_ECONFIG, "case %zu", i);
        cr_expect_eq(err.code, DEMAND_ECONFIG, "case %zu", i);
        cr_expect_str_eq(err.path, cases[i].path, "case %zu: %s", i, err.message);
        cr_expect_null(n, "case %zu", i);
    }
}

Test(demand_node, only_alive_and_suspect_members_can_own_a_key)
{
    demand_node_t *n = node_for("a");
    table_t t = {{"a", "b", "c", "d"}, {SWIM_ALIVE, SWIM_SUSPECT, SWIM_DEAD, SWIM_LEFT}, 4};
    refresh(n, &t, 2);
    cfg_limit_t l = share_test_limit(CFG_TYPE_RPM, 1000, S, 100);
    for (int k = 0; k < 200; k++) {
        char key[16];
        const char *id;
        size_t len;
        snprintf(key, sizeof(key), "k%d", k);
        cr_assert(demand_owner(demand_node_core(n), l.identity, key, strlen(key), &id, &len));
        cr_assert(len == 1 && (*id == 'a' || *id == 'b'), "k%d owned by %.*s", k, (int)len, id);
    }
    demand_node_free(n);
}

Test(demand_node, the_hook_is_unarmed_until_there_is_a_divisor_then_steps_the_cold_share)
{
    demand_node_t *n = node_for("a");
    cfg_limit_t l = share_test_limit(CFG_TYPE_TPM, 100000, 60 * S, 100000);
    ra_limiter_t got, want;
    bool armed = true;
    cr_expect_eq(demand_node_limiter(n, &l, "t", 1, 1000, T0, &got, &armed), 0);
    cr_expect_not(armed);
    table_t t = {{"a", "b"}, {SWIM_ALIVE, SWIM_ALIVE}, 2};
    refresh(n, &t, 2);
    cr_expect_eq(demand_node_limiter(n, &l, "t", 1, 1000, T0, &got, &armed), 0);
    cr_expect(armed);
    cr_assert_eq(ra_limiter_effective(&l.limiter, demand_cold_num(52429, 2), DEMAND_SHARE_DEN,
                                      RA_RESERVE_CAP, &want),
                 0);
    cr_expect_eq(memcmp(&got, &want, sizeof(got)), 0, "tpm keeps its reserve-cap unit");
    demand_node_free(n);
}

Test(demand_node, a_bad_payload_is_refused_and_counted)
{
    demand_node_t *n = node_for("a");
    table_t t = {{"a", "b"}, {SWIM_ALIVE, SWIM_ALIVE}, 2};
    refresh(n, &t, 2);
    const uint8_t junk[] = {0xc1};
    cr_expect_eq(demand_node_receive(n, "b", 1, junk, sizeof(junk), T0), DEMAND_EWIRE);
    cr_expect_eq(demand_node_receive(n, "c", 1, junk, sizeof(junk), T0), DEMAND_ESENDER);
    cr_expect_eq(demand_counters(demand_node_core(n))->rx_bad, 2);
    demand_node_free(n);
}

static void collect(void *ctx, const char *text)
{
    strncat(ctx, text, 16383 - strlen(ctx));
}

Test(demand_node, metrics_and_fleet_disclose_each_share_limit)
{
    demand_node_t *n = node_for("a");
    table_t t = {{"a", "b"}, {SWIM_ALIVE, SWIM_ALIVE}, 2};
    refresh(n, &t, 2);
    cfg_limit_t l[2] = {share_test_limit(CFG_TYPE_RPM, 1000, S, 100),
                        share_test_limit(CFG_TYPE_RPM, 50, S, 50)};
    strcpy(l[1].id, "local_rpm");
    l[1].store = CFG_STORE_LOCAL;
    bool armed;
    ra_limiter_t lim;
    demand_node_limiter(n, &l[0], "t", 1, 1, T0, &lim, &armed);
    static char out[16384];
    out[0] = '\0';
    demand_node_metrics(n, l, 2, T0 + S, collect, out);
    cr_expect(strstr(out, "tokentriage_demand_keys_tracked{limit=\"team_rpm\"} 1\n"), "%s", out);
    cr_expect(strstr(out, "tokentriage_demand_sustained_bound{limit=\"team_rpm\"} 2000\n"),
              "moving right after the first member list: %s", out);
    cr_expect(strstr(out, "# TYPE tokentriage_demand_rx_bad_total counter\n"));
    cr_expect_null(strstr(out, "local_rpm"));
    gov_fleet_entry_t f = {0};
    demand_node_fleet(n, &l[0], T0 + 10 * S, &f);
    cr_expect_eq(f.sustained_bound, 1000);
    cr_expect_eq(f.burst_bound, 100 + 2);
    demand_node_free(n);
}
