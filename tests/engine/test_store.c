/* The store hooks: a fake redis (asynchronous, out of order, unavailable), a fake share
 * provider, the members count, and what `fleet` shows for each store. */
#include "fake_redis.h"

/* An engine over `ls` with the fake as its redis store. */
static gov_engine_t *with_redis(const cfg_limit_t *ls, size_t n, fake_redis_t *f)
{
    gov_engine_t *e = mk_engine(ls, n, true);
    gov_engine_set_redis(e, &fake_ops, f);
    return e;
}

/* One decision at T0 through the fake: it goes pending, then its op is answered (or reported
 * unavailable) and the callback has run. */
static gov_result_t via_redis(gov_engine_t *e, fake_redis_t *f, const gov_subject_t *s,
                              int64_t tokens, bool unavailable)
{
    gov_result_t r;
    done_log_t d = {0};
    int i = f->n;
    cr_assert_eq(gov_decide(e, NULL, s, tokens, T0, &r, on_done, &d), GOV_PENDING);
    if (unavailable)
        fake_unavailable(f, i, T0);
    else
        fake_answer(f, i, T0);
    cr_assert_eq(d.calls, 1);
    return r;
}

static cfg_limit_t redis_rpm(const char *id, const char *level, int64_t amount, bool open)
{
    cfg_limit_t l = rpm(id, level, amount, 60 * S, amount);
    l.store = CFG_STORE_REDIS;
    l.posture.fail_open = open;
    return l;
}

Test(redis, a_redis_limit_answers_through_the_callback)
{
    cfg_limit_t ls[] = {rpm("local", "key", 10, 60 * S, 10), redis_rpm("shared", "team", 1, true)};
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(ls, 2, &f);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    gov_result_t r;
    done_log_t d = {0};
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, on_done, &d), GOV_PENDING);
    cr_assert_eq(f.n, 1);
    cr_assert_eq(f.ops[0]->key_len, 1);
    cr_assert_eq(memcmp(f.ops[0]->key, "t", 1), 0);
    cr_assert_eq(f.ops[0]->cost, 1);
    fake_answer(&f, 0, T0);
    cr_assert_eq(d.calls, 1);
    cr_assert_eq(d.last, &r);
    cr_assert(r.admit);
    gov_result_render(&r);
    /* the local limit alone is disclosed; the redis one never */
    cr_assert_str_eq(hdr(&r, "Ratelimit-Policy"), "\"local\";q=10;w=60");
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "9");
    /* second request: redis denies, so nothing is committed locally */
    gov_result_t r2;
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r2, on_done, &d), GOV_PENDING);
    fake_answer(&f, 1, T0);
    cr_assert_eq(d.calls, 2);
    cr_assert_eq(r2.verdict, GOV_DENY);
    cr_assert_str_eq(r2.limit, "shared");
    cr_assert_eq(r2.retry_after_s, 60);
    /* the header reads the state the decision found, so it cannot tell: a request naming the
     * key alone reads the local counter itself, charged once before this one */
    gov_subject_t k;
    gov_result_t r3 = decide(e, subj(&k, "key", "k", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(r3.limit, "local");
    cr_assert_eq(r3.remaining, 8, "the local limit was charged by a decision redis denied");
    gov_engine_destroy(e);
}

Test(redis, a_local_denial_never_asks_redis)
{
    cfg_limit_t ls[] = {rpm("local", "key", 1, 60 * S, 1), redis_rpm("shared", "team", 100, true)};
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(ls, 2, &f);
    gov_subject_t s;
    subj(&s, "team", "t", "key", "k", NULL);
    cr_assert(via_redis(e, &f, &s, GOV_NO_TOKENS, false).admit);
    gov_result_t r;
    done_log_t d = {0};
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, on_done, &d), 0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_str_eq(r.limit, "local");
    cr_assert_eq(f.submitted, 1);
    gov_engine_destroy(e);
}

Test(redis, completions_out_of_order_each_reach_their_own_result)
{
    cfg_limit_t l = redis_rpm("shared", "team", 100, true);
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(&l, 1, &f);
    gov_subject_t a, b;
    subj(&a, "team", "a", NULL);
    subj(&b, "team", "bb", NULL);
    gov_result_t ra, rb;
    done_log_t da = {0}, db = {0};
    cr_assert_eq(gov_decide(e, NULL, &a, GOV_NO_TOKENS, T0, &ra, on_done, &da), GOV_PENDING);
    cr_assert_eq(gov_decide(e, NULL, &b, GOV_NO_TOKENS, T0, &rb, on_done, &db), GOV_PENDING);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.pending, 2);
    fake_answer(&f, 1, T0);
    cr_assert_eq(db.calls, 1);
    cr_assert_eq(da.calls, 0);
    fake_answer(&f, 0, T0);
    cr_assert_eq(da.calls, 1);
    cr_assert(ra.admit && rb.admit);
    cr_assert_eq(ra.remaining, 99);
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.pending, 0);
    gov_engine_destroy(e);
}

Test(redis, unavailable_and_fail_open_runs_the_local_fallback_limiter)
{
    cfg_limit_t l = redis_rpm("shared", "team", 1, true);
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(&l, 1, &f);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = via_redis(e, &f, &s, GOV_NO_TOKENS, true);
    cr_assert(r.admit);
    cr_assert_not(r.disclosed.has_policy || r.disclosed.has_requests || r.disclosed.has_tokens,
                  "the fallback is not disclosed either");
    r = via_redis(e, &f, &s, GOV_NO_TOKENS, true);
    cr_assert_eq(r.verdict, GOV_DENY, "the fallback counts: amount 1");
    cr_assert_eq(r.retry_after_s, 60);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.store_errors, 2);
    gov_fleet_entry_t fl;
    cr_assert_eq(gov_fleet(e, T0, &fl, 1), 1);
    cr_assert(fl.fallback);
    cr_assert_eq(fl.sustained_bound, 1, "N = 1 without a members hook: 1 x amount");
    gov_engine_destroy(e);
}

Test(redis, unavailable_and_fail_closed_denies_with_retry_one)
{
    cfg_limit_t l = redis_rpm("shared", "team", 100, false);
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(&l, 1, &f);
    gov_subject_t s;
    gov_result_t r = via_redis(e, &f, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, true);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(r.retry_after_s, 1);
    cr_assert(r.unavailable);
    cr_assert_str_eq(r.code, "unavailable", "every door says why: the store could not answer");
    gov_result_render(&r);
    cr_assert_str_eq(hdr(&r, "Retry-After"), "1");
    gov_limit_metrics_t lm;
    gov_engine_limit_metrics(e, &lm, 1);
    cr_assert_eq(lm.outcomes[GOV_OUT_FAIL_CLOSED], 1);
    cr_assert_eq(lm.store_errors, 1);
    gov_engine_destroy(e);
}

/* fleet shows the store's state per limit: down while it cannot decide (issue 30 item 4), the
 * fail-open limit counted alone on every replica meanwhile (its fallback decides), the
 * fail-closed one not. */
Test(redis, fleet_says_down_while_the_store_cannot_decide)
{
    cfg_limit_t ls[] = {redis_rpm("open", "team", 100, true),
                        redis_rpm("closed", "key", 100, false)};
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(ls, 2, &f);
    gov_fleet_entry_t fl[2];
    cr_assert_eq(gov_fleet(e, T0, fl, 2), 2);
    for (int i = 0; i < 2; i++) {
        cr_assert_str_eq(fl[i].state, "armed");
        cr_assert_not(fl[i].fallback);
        cr_assert_eq(fl[i].sustained_bound, 100);
    }
    f.down = true;
    gov_fleet(e, T0, fl, 2);
    cr_assert_str_eq(fl[0].state, "down");
    cr_assert_str_eq(fl[1].state, "down");
    cr_assert(fl[0].fallback, "fail open: the fallback decides while the store is down");
    cr_assert_not(fl[1].fallback, "fail closed: denied, no fallback");
    f.down = false;
    gov_fleet(e, T0, fl, 2);
    cr_assert_str_eq(fl[0].state, "armed");
    cr_assert_not(fl[0].fallback);
    gov_engine_destroy(e);
}

Test(redis, no_store_wired_or_a_refused_submit_answers_synchronously)
{
    cfg_limit_t l = redis_rpm("shared", "team", 100, false);
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r;
    done_log_t d = {0};
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, on_done, &d), 0);
    cr_assert_eq(r.retry_after_s, 1);
    fake_redis_t f = {.refuse = true};
    gov_engine_set_redis(e, &fake_ops, &f);
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, on_done, &d), 0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(d.calls, 0);
    gov_engine_destroy(e);
}

Test(redis, an_answer_from_inside_submit_is_synchronous)
{
    cfg_limit_t l = redis_rpm("shared", "team", 100, false);
    gov_engine_t *e = mk_engine(&l, 1, true);
    fake_redis_t f = {.answer_now = true,
                      .now_reply = {.r = {.admit = true, .remaining = 42, .reset_after_s = 1}}};
    gov_engine_set_redis(e, &fake_ops, &f);
    gov_subject_t s;
    gov_result_t r;
    done_log_t d = {0};
    cr_assert_eq(
        gov_decide(e, NULL, subj(&s, "team", "t", NULL), GOV_NO_TOKENS, T0, &r, on_done, &d), 0);
    cr_assert(r.admit);
    cr_assert_eq(r.remaining, 42);
    cr_assert_eq(d.calls, 0);
    gov_engine_destroy(e);
}

Test(redis, a_reload_while_pending_finishes_against_the_old_config)
{
    cfg_limit_t ls[] = {rpm("local", "key", 10, 60 * S, 10), redis_rpm("shared", "team", 5, true)};
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(ls, 2, &f);
    gov_subject_t s;
    gov_result_t r;
    done_log_t d = {0};
    cr_assert_eq(gov_decide(e, NULL, subj(&s, "team", "t", "key", "k", NULL), GOV_NO_TOKENS, T0, &r,
                            on_done, &d),
                 GOV_PENDING);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, NULL, 0, true, NULL, NULL, &err), 0);
    fake_answer(&f, 0, T0);
    cr_assert_eq(d.calls, 1);
    cr_assert_eq(r.status, 0);
    /* "local" was dropped by the reload: its store cannot answer, fail open lets it through */
    cr_assert(r.admit);
    gov_engine_destroy(e);
}

Test(redis, a_late_answer_after_two_reloads_never_commits_a_reused_identity)
{
    /* issue 16, defect 2: "old" is dropped by the first reload, its counters reclaimed, and the
     * second reload gives its table identity to "new". The decision that started under the
     * first config must not step "new"'s counter with "old"'s settings when redis answers. */
    cfg_limit_t first[] = {rpm("old", "key", 1000, 60 * S, 1000),
                           redis_rpm("shared", "team", 5, true)};
    cfg_limit_t second[] = {redis_rpm("shared", "team", 5, true)};
    cfg_limit_t third[] = {rpm("new", "key", 10, 60 * S, 10), redis_rpm("shared", "team", 5, true)};
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(first, 2, &f);
    gov_subject_t s, k;
    gov_result_t r;
    done_log_t d = {0};
    subj(&s, "team", "t", "key", "k", NULL);
    cr_assert_eq(gov_decide(e, NULL, &s, GOV_NO_TOKENS, T0, &r, on_done, &d), GOV_PENDING);
    tt_err_t err;
    cr_assert_eq(gov_engine_reload(e, second, 1, true, NULL, NULL, &err), 0, "%s", err.message);
    gov_engine_tick(e, T0); /* "old"'s counter is reclaimed: its identity is free again */
    cr_assert_eq(gov_engine_reload(e, third, 2, true, NULL, NULL, &err), 0, "%s", err.message);
    fake_answer(&f, 0, T0);
    cr_assert_eq(d.calls, 1);
    cr_assert_eq(r.status, 0);
    cr_assert(r.admit, "\"old\" is gone: its store cannot answer, fail open lets it through");
    /* "new" has seen no request: the first one leaves 10 - 1 */
    r = decide(e, subj(&k, "key", "k", NULL), GOV_NO_TOKENS, T0);
    cr_assert_str_eq(r.limit, "new");
    cr_assert_eq(r.remaining, 9, "the late answer committed \"new\"'s counter");
    gov_engine_destroy(e);
}

Test(redis, settle_goes_to_redis_and_counts_it)
{
    cfg_limit_t ls[] = {tpm("local_tpm", "team", 100000, 60 * S, 20000),
                        tpm("shared_tpm", "team", 100000, 60 * S, 20000)};
    ls[1].store = CFG_STORE_REDIS;
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(ls, 2, &f);
    gov_subject_t s;
    gov_result_t r;
    done_log_t d = {0};
    subj(&s, "team", "t", NULL);
    cr_assert_eq(gov_decide(e, NULL, &s, 16384, T0, &r, on_done, &d), GOV_PENDING);
    fake_answer(&f, 0, T0);
    cr_assert(r.admit);
    cr_assert_neq(r.reservation, 0);
    cr_assert_eq(gov_settle(e, NULL, r.reservation, 1000, T0, &r, on_done, &d), GOV_PENDING);
    cr_assert_eq(f.ops[1]->kind, GOV_REDIS_SETTLE);
    cr_assert_eq(f.ops[1]->reserved, 16384);
    cr_assert_eq(f.ops[1]->actual, 1000);
    fake_answer(&f, 1, T0);
    cr_assert_eq(r.settled, 2);
    /* the redis side agrees with the local side step for step */
    cr_assert_eq(ra_observe_remaining(&ls[1].limiter, *fake_state(&f, "shared_tpm", "t"), T0),
                 19000);
    gov_engine_destroy(e);
}

/* ---- a fake share provider ---------------------------------------------------------------- */

typedef struct fake_share {
    int64_t n;
    bool armed;
    int fleet_calls;
} fake_share_t;

static int share_limiter(void *ctx, const cfg_limit_t *l, int64_t now, ra_limiter_t *out,
                         bool *armed)
{
    fake_share_t *f = ctx;
    *armed = f->armed;
    return ra_limiter_effective(&l->limiter, 1, f->n, cfg_type_unit(l->type), out);
}

static void share_fleet(void *ctx, const cfg_limit_t *l, int64_t now, gov_fleet_entry_t *out)
{
    fake_share_t *f = ctx;
    f->fleet_calls++;
    out->n = f->n;
    out->state = "armed";
}

static const gov_share_ops_t share_ops = {.limiter = share_limiter, .fleet = share_fleet};

Test(share, decisions_run_the_effective_limiter_in_force)
{
    cfg_limit_t l = rpm("fleet_rpm", "team", 300, 60 * S, 60);
    l.store = CFG_STORE_SHARE;
    gov_engine_t *e = mk_engine(&l, 1, true);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    /* not wired yet: the plain limiter, N = 1 */
    gov_result_t r = decide(e, &s, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.remaining, 59);
    fake_share_t f = {.n = 3, .armed = true};
    gov_engine_set_share(e, &share_ops, &f);
    /* N = 3: T_s = 600 ms, tau stays 12 s: 20 units of depth, one spent */
    r = decide(e, &s, GOV_NO_TOKENS, T0 + 3600 * S);
    cr_assert_eq(r.remaining, 19);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Requests"), "19");
    gov_fleet_entry_t fl;
    gov_fleet(e, T0, &fl, 1);
    cr_assert_eq(f.fleet_calls, 1);
    cr_assert_eq(fl.n, 3);
    gov_engine_destroy(e);
}

Test(share, an_unarmed_store_follows_posture_fail)
{
    cfg_limit_t ls[] = {rpm("open", "team", 1, 60 * S, 1), rpm("closed", "key", 1, 60 * S, 1)};
    ls[0].store = ls[1].store = CFG_STORE_SHARE;
    ls[1].posture.fail_open = 0;
    gov_engine_t *e = mk_engine(ls, 2, true);
    fake_share_t f = {.n = 1, .armed = false};
    gov_engine_set_share(e, &share_ops, &f);
    gov_subject_t a, b;
    subj(&a, "team", "t", NULL);
    subj(&b, "key", "k", NULL);
    for (int i = 0; i < 3; i++)
        cr_assert(decide(e, &a, GOV_NO_TOKENS, T0).admit, "open: uncounted");
    gov_result_t r = decide(e, &b, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.verdict, GOV_DENY);
    cr_assert_eq(r.retry_after_s, 1);
    gov_metrics_t m;
    gov_engine_metrics(e, &m);
    cr_assert_eq(m.counters, 0);
    f.armed = true;
    cr_assert(decide(e, &a, GOV_NO_TOKENS, T0).admit);
    cr_assert_not(decide(e, &a, GOV_NO_TOKENS, T0).admit);
    gov_engine_destroy(e);
}

Test(share, settle_uses_the_share_in_force)
{
    cfg_limit_t l = tpm("fleet_tpm", "team", 100000, 60 * S, 20000);
    l.store = CFG_STORE_SHARE;
    gov_engine_t *e = mk_engine(&l, 1, true);
    fake_share_t f = {.n = 2, .armed = true};
    gov_engine_set_share(e, &share_ops, &f);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    /* N = 2: T_s = 1.2 ms; tau_s = max(12 s, T_s x 16384) = 19.66 s: depth 16384 tokens */
    gov_result_t r = decide(e, &s, 8000, T0);
    cr_assert(r.admit);
    cr_assert_eq(gov_settle(e, NULL, r.reservation, 1000, T0, &r, NULL, NULL), 0);
    cr_assert_eq(r.settled, 1);
    r = decide(e, &s, 0, T0);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Tokens"), "15384");
    gov_engine_destroy(e);
}

/* ---- a fake per-key share provider (demand mode) ------------------------------------------ */

typedef struct fake_keyed {
    int calls;
    char key[32];
    size_t key_len;
    int64_t counted; /* the sum of the costs it was handed */
    int64_t n_hot;   /* the divisor for key "hot"; every other key runs on 1/10 */
} fake_keyed_t;

static int keyed_limiter(void *ctx, const cfg_limit_t *l, const char *key, size_t key_len,
                         int64_t cost, int64_t now, ra_limiter_t *out, bool *armed)
{
    fake_keyed_t *f = ctx;
    f->calls++;
    cr_assert(key_len < sizeof(f->key));
    memcpy(f->key, key, key_len);
    f->key_len = key_len;
    f->counted += cost;
    *armed = true;
    int64_t n = key_len == 3 && memcmp(key, "hot", 3) == 0 ? f->n_hot : 10;
    return ra_limiter_effective(&l->limiter, 1, n, cfg_type_unit(l->type), out);
}

/* Both hooks set: the per-key one wins; the per-limit one would fail the test. */
static int limiter_never(void *ctx, const cfg_limit_t *l, int64_t now, ra_limiter_t *out,
                         bool *armed)
{
    cr_assert_fail("the per-limit hook was asked while a per-key hook is installed");
    return -1;
}

static const gov_share_ops_t keyed_ops = {.limiter = limiter_never, .key_limiter = keyed_limiter};

Test(share, a_per_key_hook_sees_each_key_and_the_decision_cost)
{
    cfg_limit_t l = rpm("fleet_rpm", "team", 300, 60 * S, 60);
    l.store = CFG_STORE_SHARE;
    gov_engine_t *e = mk_engine(&l, 1, true);
    fake_keyed_t f = {.n_hot = 1};
    gov_engine_set_share(e, &keyed_ops, &f);
    gov_subject_t hot, cold;
    subj(&hot, "team", "hot", NULL);
    subj(&cold, "team", "cold", NULL);
    /* the whole amount for "hot": 60 of depth, one spent */
    gov_result_t r = decide(e, &hot, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.remaining, 59);
    cr_assert_eq(f.key_len, 3);
    cr_assert_eq(memcmp(f.key, "hot", 3), 0);
    /* 1/10 for "cold": tau stays 12 s, T = 2 s: 6 of depth, one spent */
    r = decide(e, &cold, GOV_NO_TOKENS, T0);
    cr_assert_eq(r.remaining, 5);
    cr_assert_eq(memcmp(f.key, "cold", 4), 0);
    cr_assert_eq(f.calls, 2, "once per decision per share limit");
    cr_assert_eq(f.counted, 2, "rpm: each decision counts 1");
    gov_engine_destroy(e);
}

Test(share, a_per_key_hook_counts_tokens_on_decide_and_nothing_on_settle)
{
    cfg_limit_t l = tpm("fleet_tpm", "team", 100000, 60 * S, 20000);
    l.store = CFG_STORE_SHARE;
    gov_engine_t *e = mk_engine(&l, 1, true);
    fake_keyed_t f = {.n_hot = 2};
    gov_engine_set_share(e, &keyed_ops, &f);
    gov_subject_t s;
    subj(&s, "team", "hot", NULL);
    gov_result_t r = decide(e, &s, 8000, T0);
    cr_assert(r.admit);
    cr_assert_eq(f.counted, 8000);
    cr_assert_eq(gov_settle(e, NULL, r.reservation, 1000, T0, &r, NULL, NULL), 0);
    cr_assert_eq(r.settled, 1);
    cr_assert_eq(f.calls, 2);
    cr_assert_eq(f.counted, 8000, "settle counts nothing");
    /* the settle ran on the key's share (N = 2), as in settle_uses_the_share_in_force */
    r = decide(e, &s, 0, T0);
    cr_assert_str_eq(hdr(&r, "X-Ratelimit-Remaining-Tokens"), "15384");
    gov_engine_destroy(e);
}

Test(share, a_decision_that_waits_for_redis_counts_its_share_arrival_once)
{
    cfg_limit_t ls[] = {rpm("fleet_rpm", "team", 300, 60 * S, 60),
                        redis_rpm("shared", "team", 100, true)};
    ls[0].store = CFG_STORE_SHARE;
    fake_redis_t fr = {0};
    gov_engine_t *e = with_redis(ls, 2, &fr);
    fake_keyed_t f = {.n_hot = 1};
    gov_engine_set_share(e, &keyed_ops, &f);
    gov_subject_t s;
    subj(&s, "team", "hot", NULL);
    gov_result_t r = via_redis(e, &fr, &s, GOV_NO_TOKENS, false);
    cr_assert(r.admit);
    cr_assert_eq(f.calls, 2, "asked on both passes");
    cr_assert_eq(f.counted, 1, "but the arrival counted on the first only");
    gov_engine_destroy(e);
}

/* ---- fleet -------------------------------------------------------------------------------- */

static int64_t five(void *ctx)
{
    return 5;
}

Test(fleet, local_limits_disclose_n_times_amount)
{
    cfg_limit_t ls[] = {rpm("a", "team", 300, 60 * S, 60), conc("c", "key", 3),
                        tpm("b", "team", 100000, 60 * S, 20000), redis_rpm("r", "team", 7, true)};
    gov_engine_t *e = mk_engine(ls, 4, true);
    gov_fleet_entry_t fl[4];
    cr_assert_eq(gov_fleet(e, T0, fl, 4), 3, "rate-class limits only");
    cr_assert_str_eq(fl[0].id, "a");
    cr_assert_eq(fl[0].n, 1);
    cr_assert_eq(fl[0].sustained_bound, 300);
    cr_assert_eq(fl[0].burst_bound, 60);
    gov_engine_set_members(e, five, NULL);
    gov_fleet(e, T0, fl, 4);
    cr_assert_eq(fl[0].n, 5);
    cr_assert_eq(fl[0].sustained_bound, 1500);
    cr_assert_eq(fl[1].sustained_bound, 500000);
    cr_assert_str_eq(fl[2].id, "r");
    cr_assert_eq(fl[2].sustained_bound, 7, "redis: one counter while redis answers");
    cr_assert_not(fl[2].fallback);
    cr_assert_eq(gov_fleet(e, T0, fl, 1), 3, "the count even when cut");
    gov_engine_destroy(e);
}

Test(redis, a_decision_the_fallback_counted_is_settled_on_the_fallback)
{
    cfg_limit_t l = tpm("shared_tpm", "team", 100000, 60 * S, 20000);
    l.store = CFG_STORE_REDIS;
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(&l, 1, &f);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = via_redis(e, &f, &s, 20000, true);
    cr_assert(r.admit, "the fallback admitted 20000");
    uint64_t id = r.reservation;
    cr_assert_neq(id, 0);
    cr_assert_not(via_redis(e, &f, &s, 1, true).admit, "and is now empty");
    /* redis is back, but it never counted those 20000: the refund goes where they were counted,
     * at once, and redis is not asked */
    int submitted = f.submitted;
    cr_assert_eq(gov_settle(e, NULL, id, 5000, T0, &r, NULL, NULL), 0);
    cr_assert_eq(r.settled, 1);
    cr_assert_eq(f.submitted, submitted);
    cr_assert(via_redis(e, &f, &s, 15000, true).admit, "the refund reached the fallback");
    cr_assert_eq(*fake_state(&f, "shared_tpm", "t"), 0, "redis's own counter untouched");
    gov_engine_destroy(e);
}

Test(redis, settle_while_unavailable_corrects_the_fallback_counter_when_open)
{
    cfg_limit_t l = tpm("shared_tpm", "team", 100000, 60 * S, 20000);
    l.store = CFG_STORE_REDIS;
    fake_redis_t f = {0};
    gov_engine_t *e = with_redis(&l, 1, &f);
    gov_subject_t s;
    subj(&s, "team", "t", NULL);
    gov_result_t r = via_redis(e, &f, &s, 20000, false);
    cr_assert(r.admit, "redis admitted 20000");
    uint64_t id = r.reservation;
    /* redis goes away: the fallback's own counter spends its burst too */
    cr_assert(via_redis(e, &f, &s, 20000, true).admit);
    done_log_t d = {0};
    cr_assert_eq(gov_settle(e, NULL, id, 5000, T0, &r, on_done, &d), GOV_PENDING);
    cr_assert_eq(f.ops[2]->kind, GOV_REDIS_SETTLE);
    fake_unavailable(&f, 2, T0);
    cr_assert_eq(d.calls, 1);
    cr_assert_eq(r.settled, 1);
    cr_assert(via_redis(e, &f, &s, 15000, true).admit, "the refund reached the fallback");
    gov_engine_destroy(e);
}
