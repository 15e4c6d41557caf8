/* A rolling restart of a share fleet under load, and its checker; see roll.h. */
#define _GNU_SOURCE
#include "roll.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet.h"
#include "tokentriage.h"

/* The run's one share limit, under governance.limits. */
static void limit_yaml(char *out, size_t cap, int64_t amount, int64_t burst)
{
    snprintf(out, cap,
             "    - id: " ROLL_LIMIT "\n      attach: { level: global }\n      type: rpm\n"
             "      amount: %lld\n      period: 1m\n      burst: %lld\n      store: share\n"
             "      posture: { mode: \"on\", enforce: hard, fail: closed }\n",
             (long long)amount, (long long)burst);
}

#define WORDS (FLEET_MAX / 64)

/* One replica's answers in one poll round. */
typedef struct sample {
    int64_t t_ms; /* monotonic, as fleet_now_ms */
    int32_t round;
    int16_t replica;
    bool converged;
    int64_t n, sustained, burst;
    uint64_t live[WORDS];
} sample_t;

typedef struct run {
    const roll_options_t *o;
    int64_t amount, burst;
    char limits[512];
    fleet_t fleet;
    int64_t t0; /* monotonic ms: the load's start */
    atomic_bool stop_load, stop_poll;
    /* the load thread's */
    int64_t *admits; /* admission times, us from t0, in order */
    size_t n_admits, cap_admits;
    int64_t asked;
    /* the poller's; rounds and the latest round's rows under mu */
    pthread_mutex_t mu;
    sample_t *samples;
    size_t n_samples, cap_samples;
    int32_t rounds;
    int last_converged_at_n; /* replicas converged at n in the last whole round */
    int last_answered;
} run_t;

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    if (us <= 0)
        return;
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t nc = *cap ? *cap * 2 : 4096;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return false;
    *p = q;
    *cap = nc;
    return true;
}

static tt_client_t *connect_to(const fleet_replica_t *r)
{
    tt_client_t *c;
    if (tt_connect(&c, r->sock) != 0)
        return NULL;
    tt_set_timeout(c, 500);
    return c;
}

/* ---- the load: each replica asked ask x its share, paced by due times -------------------- */

static void *load_main(void *arg)
{
    run_t *R = arg;
    const roll_options_t *o = R->o;
    int n = o->n;
    /* share = amount / n a period; each replica asked ask x that */
    int64_t gap_us = (int64_t)((double)ROLL_PERIOD_MS * 1000.0 * n / ((double)R->amount * o->ask));
    tt_client_t *c[FLEET_MAX] = {0};
    int64_t due[FLEET_MAX], retry[FLEET_MAX] = {0};
    for (int i = 0; i < n; i++)
        due[i] = R->t0 * 1000 + gap_us * i / n; /* spread over one gap */
    tt_pair_t subject = {.level = "team", .id = "t-1"};
    while (!atomic_load(&R->stop_load)) {
        int k = 0;
        for (int i = 1; i < n; i++)
            if (due[i] < due[k])
                k = i;
        sleep_us(due[k] - now_us());
        int64_t now = now_us();
        due[k] = (due[k] + gap_us < now - 1000000 ? now : due[k] + gap_us);
        if (!c[k] && now >= retry[k]) {
            c[k] = connect_to(&R->fleet.r[k]);
            retry[k] = now + 100000;
        }
        if (!c[k])
            continue; /* down: this request is not asked */
        tt_response_t r;
        if (tt_decide(c[k], &subject, 1, -1, &r) != 0) {
            tt_close(c[k]);
            c[k] = NULL;
            continue;
        }
        R->asked++;
        if (r.admit && grow((void **)&R->admits, &R->cap_admits, R->n_admits + 1, sizeof(int64_t)))
            R->admits[R->n_admits++] = now_us() - R->t0 * 1000;
    }
    for (int i = 0; i < n; i++)
        tt_close(c[i]);
    return NULL;
}

/* ---- the poller: every replica's fleet row and view, every poll_ms ----------------------- */

static void *poll_main(void *arg)
{
    run_t *R = arg;
    const roll_options_t *o = R->o;
    tt_client_t *c[FLEET_MAX] = {0};
    while (!atomic_load(&R->stop_poll)) {
        int64_t start = fleet_now_ms();
        int32_t round = R->rounds;
        int at_n = 0, answered = 0, converged = 0;
        for (int i = 0; i < o->n; i++) {
            if (!c[i])
                c[i] = connect_to(&R->fleet.r[i]);
            sample_t s = {.round = round, .replica = (int16_t)i};
            fleet_row_t row;
            if (!c[i] || fleet_query(c[i], ROLL_LIMIT, &row) != 0 ||
                fleet_members(c[i], s.live) < 0) {
                tt_close(c[i]);
                c[i] = NULL;
                continue;
            }
            s.t_ms = fleet_now_ms();
            s.converged = row.converged;
            s.n = row.n;
            s.sustained = row.sustained_bound;
            s.burst = row.burst_bound;
            answered++;
            converged += s.converged;
            at_n += s.converged && s.n == o->n;
            pthread_mutex_lock(&R->mu);
            if (grow((void **)&R->samples, &R->cap_samples, R->n_samples + 1, sizeof(s)))
                R->samples[R->n_samples++] = s;
            pthread_mutex_unlock(&R->mu);
        }
        pthread_mutex_lock(&R->mu);
        R->rounds++;
        R->last_converged_at_n = at_n;
        R->last_answered = answered;
        pthread_mutex_unlock(&R->mu);
        if (o->verbose)
            fprintf(stderr, "roll: t=%.1fs round %d: %d answered, %d converged (%d at n=%d)\n",
                    (double)(start - R->t0) / 1000, round, answered, converged, at_n, o->n);
        sleep_us((start + o->poll_ms - fleet_now_ms()) * 1000);
    }
    for (int i = 0; i < o->n; i++)
        tt_close(c[i]);
    return NULL;
}

static bool all_converged(run_t *R)
{
    pthread_mutex_lock(&R->mu);
    bool ok = R->rounds > 0 && R->last_converged_at_n == R->o->n;
    pthread_mutex_unlock(&R->mu);
    return ok;
}

/* Waits for the poller's next whole round, then says whether every replica converged at n. */
static bool wait_converged(run_t *R, int64_t within_ms)
{
    int64_t deadline = fleet_now_ms() + within_ms;
    while (fleet_now_ms() < deadline) {
        pthread_mutex_lock(&R->mu);
        int32_t r0 = R->rounds;
        pthread_mutex_unlock(&R->mu);
        for (;;) {
            sleep_us(20000);
            pthread_mutex_lock(&R->mu);
            bool next = R->rounds > r0;
            pthread_mutex_unlock(&R->mu);
            if (next || fleet_now_ms() >= deadline)
                break;
        }
        if (all_converged(R))
            return true;
    }
    return false;
}

/* ---- gossip bytes ------------------------------------------------------------------------- */

/* Replica i's gossip datagram bytes sent so far, or -1. */
static int64_t tx_bytes(fleet_t *f, int i)
{
    static char text[1 << 16];
    if (fleet_http_get(f, i, "/metrics", text, sizeof(text)) != 0)
        return -1;
    const char *name = "tokentriage_gossip_bytes_total{direction=\"tx\"} ";
    const char *p = strstr(text, name);
    return p ? atoll(p + strlen(name)) : -1;
}

/* ---- the checks --------------------------------------------------------------------------- */

/* The bound of a sample over a window of e_ms. */
static double sample_bound(const sample_t *s, int64_t e_ms)
{
    return (double)s->burst + (double)s->sustained * (double)e_ms / ROLL_PERIOD_MS;
}

static void check_windows(const run_t *R, int64_t e_ms, roll_window_t *w)
{
    memset(w, 0, sizeof(*w));
    w->e_ms = e_ms;
    double worst = -1e18;
    size_t lo = 0, slo = 0;
    for (size_t j = 0; j < R->n_admits; j++) {
        int64_t end = R->admits[j], begin = end - e_ms * 1000; /* (begin, end] */
        while (R->admits[lo] <= begin)
            lo++;
        while (slo < R->n_samples && (R->samples[slo].t_ms - R->t0) * 1000 < begin)
            slo++;
        double conv = -1, any = -1;
        for (size_t s = slo; s < R->n_samples && (R->samples[s].t_ms - R->t0) * 1000 <= end; s++) {
            double b = sample_bound(&R->samples[s], e_ms);
            if (R->samples[s].converged && b > conv)
                conv = b;
            if (b > any)
                any = b;
        }
        if (conv < 0 && any < 0)
            continue; /* no replica answered in it */
        double bound = conv >= 0 ? conv : any;
        int64_t count = (int64_t)(j - lo + 1);
        w->unbounded += conv < 0;
        w->violations += (double)count > bound;
        if ((double)count - bound > worst) {
            worst = (double)count - bound;
            w->count = count;
            w->bound = bound;
            w->at_ms = end / 1000;
        }
    }
}

static void check_islands(const run_t *R, roll_result_t *out)
{
    out->island_first_ms = out->island_last_ms = -1;
    for (size_t a = 0; a < R->n_samples;) {
        size_t b = a;
        while (b < R->n_samples && R->samples[b].round == R->samples[a].round)
            b++;
        bool island = false;
        for (size_t x = a; x < b && !island; x++)
            for (size_t y = x + 1; y < b && !island; y++) {
                const sample_t *p = &R->samples[x], *q = &R->samples[y];
                bool shared = false;
                for (int k = 0; k < WORDS; k++)
                    shared |= (p->live[k] & q->live[k]) != 0;
                island = p->converged && q->converged && !shared;
            }
        if (island) {
            out->island_rounds++;
            if (out->island_first_ms < 0)
                out->island_first_ms = R->samples[a].t_ms - R->t0;
            out->island_last_ms = R->samples[b - 1].t_ms - R->t0;
        }
        a = b;
    }
    for (size_t j = 0; j < R->n_admits && out->island_first_ms >= 0; j++)
        out->island_admitted += R->admits[j] >= out->island_first_ms * 1000 &&
                                R->admits[j] <= out->island_last_ms * 1000;
}

/* ---- the run ------------------------------------------------------------------------------ */

static int fail(roll_result_t *out, const char *fmt, const char *detail)
{
    snprintf(out->failed, sizeof(out->failed), fmt, detail);
    return -1;
}

int roll_run(const roll_options_t *o, roll_result_t *out)
{
    memset(out, 0, sizeof(*out));
    run_t *R = calloc(1, sizeof(*R));
    if (!R)
        return fail(out, "%s", "out of memory");
    R->o = o;
    R->amount = o->amount ? o->amount : ROLL_AMOUNT;
    R->burst = o->burst ? o->burst : ROLL_BURST;
    limit_yaml(R->limits, sizeof(R->limits), R->amount, R->burst);
    pthread_mutex_init(&R->mu, NULL);
    int rc = -1;
    pthread_t load, poll;
    bool load_on = false, poll_on = false;
    fleet_t *f = &R->fleet;
    if (fleet_setup_on(f, o->n, true) != 0) {
        fail(out, "%s", "fleet set-up failed");
        goto done;
    }
    f->state = true;
    f->sealed = true;
    f->n_seeds = o->seeds;
    snprintf(f->join_timeout, sizeof(f->join_timeout), "10s");
    snprintf(f->snapshot_interval, sizeof(f->snapshot_interval), "5s");
    for (int i = 0; i < o->n; i++)
        if (fleet_start(f, i, R->limits) != 0) {
            fail(out, "cannot start a replica in %.200s", f->dir);
            goto done;
        }
    R->t0 = fleet_now_ms();
    pthread_create(&poll, NULL, poll_main, R);
    poll_on = true;
    if (!wait_converged(R, 60000)) {
        fail(out, "the fleet did not converge within 60 s (logs in %.180s/r*/log)", f->dir);
        goto done;
    }

    /* steady load, then the roll */
    R->t0 = fleet_now_ms();
    pthread_create(&load, NULL, load_main, R);
    load_on = true;
    int64_t tx0[FLEET_MAX], tx1[FLEET_MAX], txk[FLEET_MAX];
    for (int i = 0; i < o->n; i++)
        tx0[i] = tx_bytes(f, i);
    int64_t t_steady = fleet_now_ms();
    sleep_us((int64_t)o->steady_ms * 1000 - (fleet_now_ms() - R->t0) * 1000);
    int64_t roll0 = fleet_now_ms();
    for (int i = 0; i < o->n; i++)
        tx1[i] = tx_bytes(f, i);
    int64_t stopped_at[FLEET_MAX];
    bool restarted[FLEET_MAX] = {0};
    int next = 0, done_restarts = 0, restarts = o->no_roll ? 0 : o->n;
    while (done_restarts < restarts) {
        int64_t now = fleet_now_ms();
        int down = 0;
        for (int i = 0; i < next; i++) {
            if (restarted[i])
                continue;
            if (now >= stopped_at[i] + o->down_ms && fleet_exited(f, i)) {
                if (fleet_start(f, i, R->limits) != 0) {
                    fail(out, "cannot restart a replica in %.200s", f->dir);
                    goto done;
                }
                restarted[i] = true;
                done_restarts++;
            } else {
                down++;
            }
        }
        if (next < restarts && now >= roll0 + (int64_t)next * o->step_ms) {
            txk[next] = tx_bytes(f, next);
            fleet_kill(f, next, SIGTERM);
            stopped_at[next] = roll0 + (int64_t)next * o->step_ms; /* as scheduled */
            next++;
            down++;
        }
        if (down > out->down_max)
            out->down_max = down;
        sleep_us(10000);
    }
    int64_t last_restart = fleet_now_ms();
    bool whole = wait_converged(R, 120000);
    int64_t roll1 = fleet_now_ms();
    out->roll_ms = roll1 - roll0;
    out->converged_ms = whole ? roll1 - last_restart : -1;
    double tx_steady = 0, tx_roll = 0;
    for (int i = 0; i < o->n; i++) {
        int64_t t = tx_bytes(f, i);
        tx_steady += (double)(tx1[i] - tx0[i]);
        tx_roll +=
            o->no_roll ? (double)(t - tx1[i]) : (double)(txk[i] - tx1[i]) + (double)(t > 0 ? t : 0);
    }
    out->tx_steady = tx_steady / o->n / ((double)(roll0 - t_steady) / 1000);
    out->tx_roll = roll1 > roll0 ? tx_roll / o->n / ((double)(roll1 - roll0) / 1000) : 0;
    sleep_us((int64_t)o->settle_ms * 1000);
    out->load_ms = fleet_now_ms() - R->t0;
    rc = 0;
done:
    if (load_on) {
        atomic_store(&R->stop_load, true);
        pthread_join(load, NULL);
    }
    if (poll_on) {
        atomic_store(&R->stop_poll, true);
        pthread_join(poll, NULL);
    }
    if (rc == 0) {
        out->asked = R->asked;
        out->admitted = (int64_t)R->n_admits;
        out->admitted_of_ideal =
            (double)out->admitted /
            ((double)R->burst + (double)R->amount * (double)out->load_ms / ROLL_PERIOD_MS);
        out->rounds = R->rounds;
        check_windows(R, 10000, &out->win[0]);
        check_windows(R, 60000, &out->win[1]);
        check_islands(R, out);
    }
    if (rc == 0 || !getenv("TT_ROLL_KEEP"))
        fleet_teardown(f);
    free(R->admits);
    free(R->samples);
    pthread_mutex_destroy(&R->mu);
    free(R);
    return rc;
}

void roll_report(const char *tag, const roll_options_t *o, const roll_result_t *r)
{
    fprintf(stderr,
            "%s: n=%d seeds=%d roll one every %d ms, each down %d ms (at most %lld at once)\n", tag,
            o->n, o->seeds, o->step_ms, o->down_ms, (long long)r->down_max);
    fprintf(stderr,
            "%s: asked %lld, admitted %lld in %.1f s of load: %.1f%% of burst + amount x load / "
            "period; %lld poll rounds\n",
            tag, (long long)r->asked, (long long)r->admitted, (double)r->load_ms / 1000,
            100 * r->admitted_of_ideal, (long long)r->rounds);
    for (int k = 0; k < 2; k++)
        fprintf(stderr,
                "%s: %2llds windows: worst %lld admitted against %.1f at %.1fs; %lld above their "
                "bound, %lld without a converged replica\n",
                tag, (long long)r->win[k].e_ms / 1000, (long long)r->win[k].count, r->win[k].bound,
                (double)r->win[k].at_ms / 1000, (long long)r->win[k].violations,
                (long long)r->win[k].unbounded);
    fprintf(stderr,
            "%s: islands: %lld rounds with two converged replicas of disjoint views (%.1fs to "
            "%.1fs, %lld admitted meanwhile)\n",
            tag, (long long)r->island_rounds, (double)r->island_first_ms / 1000,
            (double)r->island_last_ms / 1000, (long long)r->island_admitted);
    fprintf(stderr,
            "%s: roll took %.1fs, converged %.1fs after the last restart; gossip sent per "
            "replica %.0f B/s steady, %.0f B/s during the roll\n",
            tag, (double)r->roll_ms / 1000, (double)r->converged_ms / 1000, r->tx_steady,
            r->tx_roll);
}
