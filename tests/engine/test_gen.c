/* Configuration generations in two steps (gen.c): a prepared reload is invisible until its
 * commit, and an aborted one leaves no trace, not even a counter identity held. */
#include "helpers.h"
#include "table.h"

typedef struct seen {
    int n;
} seen_t;

static void count_report(void *ctx, const char *id, gov_reload_action_t a)
{
    (void)id;
    (void)a;
    ((seen_t *)ctx)->n++;
}

Test(gen, a_prepared_reload_changes_nothing_until_its_commit)
{
    cfg_limit_t l = rpm("team_rpm", "team", 10, 60 * S, 2);
    cfg_limit_t wider = rpm("team_rpm", "team", 10, 60 * S, 5); /* a new identity */
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_reload_t *r;
    tt_err_t err;
    cr_assert_eq(gov_engine_reload_prepare(e, &wider, 1, true, &r, &err), 0, "%s", err.message);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit, "the old burst of 2 still serves");
    cr_assert_not(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    seen_t seen = {0};
    gov_engine_reload_commit(e, r, count_report, &seen);
    cr_assert_eq(seen.n, 1);
    for (int i = 0; i < 5; i++)
        cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit, "request %d under the new burst", i);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.reloads, 1);
    gov_engine_destroy(e);
}

/* More aborted reloads of a changed limit than the table has identities: each gives its fresh
 * identity back, so none runs out, and the old limit's counter is untouched throughout. */
Test(gen, an_aborted_reload_leaves_no_trace)
{
    cfg_limit_t l = rpm("team_rpm", "team", 10, 60 * S, 3);
    cfg_limit_t changed = rpm("team_rpm", "team", 20, 60 * S, 3);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    tt_err_t err;
    for (int i = 0; i < 2 * GOV_IDENTS_MAX; i++) {
        gov_reload_t *r;
        cr_assert_eq(gov_engine_reload_prepare(e, &changed, 1, true, &r, &err), 0, "prepare %d: %s",
                     i, err.message);
        gov_engine_reload_abort(e, r);
    }
    gov_result_t res = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert(res.admit);
    cr_assert_str_eq(hdr(&res, "Ratelimit-Policy"), "\"team_rpm\";q=10;w=60", "the old limit");
    cr_assert_eq(res.remaining, 1, "its counter kept both requests");
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.reloads, 0);
    gov_engine_destroy(e);
}

/* A limit set the engine cannot take is refused by code, with the path of the limit at fault;
 * at create nothing is built, at prepare nothing changed. */
Test(gen, a_bad_limit_set_is_refused_naming_the_limit)
{
    cfg_limit_t l = rpm("team_rpm", "team", 10, 60 * S, 2);
    cfg_limit_t bad[] = {l, rpm("key_rpm", "key", 10, 60 * S, 2)};
    bad[1].limiter.amount = 0; /* not armed */
    gov_engine_t *e = NULL;
    tt_err_t err;
    gov_options_t o = {.hash_seed = {1, 2}};
    cr_assert_eq(gov_engine_create(&e, &o, bad, 2, true, &err), GOV_ELIMITS);
    cr_assert_null(e);
    cr_assert_eq(err.code, GOV_ELIMITS);
    cr_assert_str_eq(err.path, "governance.limits[1]");
    cr_assert_str_eq(err.message, "limit \"key_rpm\" not armed");

    e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_reload_t *r = NULL;
    static cfg_limit_t many[GOV_LIMITS_MAX + 1]; /* only their number is looked at */
    cr_assert_eq(gov_engine_reload_prepare(e, many, GOV_LIMITS_MAX + 1, true, &r, &err),
                 GOV_ELIMITS);
    cr_assert_str_eq(err.path, "governance.limits");
    bad[0].level[0] = '\0';
    cr_assert_eq(gov_engine_reload_prepare(e, bad, 2, true, &r, &err), GOV_ELIMITS);
    cr_assert_null(r);
    cr_assert_str_eq(err.path, "governance.limits[0]");
    cr_assert_str_eq(err.message, "id or level empty or too long");
    cr_assert(decide(e, &s, GOV_NO_TOKENS, T0).admit, "the old limit still serves");
    cr_assert_not(decide(e, &s, GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}

/* The admissions each limit counted, in config order. */
static void admitted(gov_engine_t *e, uint64_t *out, size_t n)
{
    gov_limit_metrics_t m[8];
    cr_assert_eq(gov_engine_limit_metrics(e, m, 8), n);
    for (size_t i = 0; i < n; i++)
        out[i] = m[i].outcomes[GOV_OUT_ADMIT];
}

/* A subject of one level reads the generation's index (probe.c) instead of walking every limit:
 * it meets the global limits and its level's (a combination never), merged in config order,
 * which names the tightest of equals: the first. Unknown levels meet the global ones alone. */
Test(gen, a_one_level_subject_meets_its_limits_in_config_order)
{
    cfg_limit_t l[] = {
        rpm("team_rpm", "team", 10, 60 * S, 10), rpm("all", "global", 10, 60 * S, 10),
        rpm("key_a", "key", 10, 60 * S, 10),     rpm("pair", "team,key", 10, 60 * S, 10),
        rpm("key_b", "key", 10, 60 * S, 10),     rpm("all_2", "global", 10, 60 * S, 10),
    };
    gov_engine_t *e = mk_engine(l, 6, true);
    gov_subject_t s;
    uint64_t n[6];
    gov_result_t r = decide(e, subj(&s, "key", "k", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(r.limit, "all", "the first of equals in config order");
    admitted(e, n, 6);
    uint64_t key[6] = {0, 1, 1, 0, 1, 1};
    cr_assert_arr_eq(n, key, sizeof(n));
    gov_engine_t *fresh = mk_engine(l, 6, true);
    r = decide(fresh, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(r.limit, "team_rpm", "a level's limit before the global ones after it");
    gov_engine_destroy(fresh);
    r = decide(e, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0);
    admitted(e, n, 6);
    uint64_t team[6] = {1, 2, 1, 0, 1, 2};
    cr_assert_arr_eq(n, team, sizeof(n));
    r = decide(e, subj(&s, "model", "m", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(r.limit, "all", "a level no limit names: the global ones");
    admitted(e, n, 6);
    uint64_t other[6] = {1, 3, 1, 0, 1, 3};
    cr_assert_arr_eq(n, other, sizeof(n));
    r = decide(e, subj(&s, "team", "t", "key", "k", NULL), GOV_NO_TOKENS, T0);
    admitted(e, n, 6);
    uint64_t both[6] = {2, 4, 2, 1, 2, 4}; /* two levels: the walk, the combination too */
    cr_assert_arr_eq(n, both, sizeof(n));
    gov_engine_destroy(e);
}
