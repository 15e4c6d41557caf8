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
    char err[256];
    cr_assert_eq(gov_engine_reload_prepare(e, &wider, 1, true, &r, err, sizeof(err)), 0, "%s", err);
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
    char err[256];
    for (int i = 0; i < 2 * GOV_IDENTS_MAX; i++) {
        gov_reload_t *r;
        cr_assert_eq(gov_engine_reload_prepare(e, &changed, 1, true, &r, err, sizeof(err)), 0,
                     "prepare %d: %s", i, err);
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
