/* A fake redis store for the engine tests: ops queue up until the test answers them (in any
 * order, or as unavailable), each answered as the Lua script would, on a counter of its own per
 * limit and key. */
#ifndef TT_TESTS_ENGINE_FAKE_REDIS_H
#define TT_TESTS_ENGINE_FAKE_REDIS_H

#include "helpers.h"

#define FAKE_COUNTERS 16

typedef struct fake_counter {
    char id[CFG_ID_MAX + 1];
    char key[GOV_ID_MAX];
    size_t key_len;
    int64_t state;
} fake_counter_t;

typedef struct fake_redis {
    gov_redis_op_t *ops[64];
    int n;
    int submitted;
    bool refuse; /* submit fails synchronously */
    bool answer_now;
    gov_redis_reply_t now_reply;
    bool down;                              /* the store's ready hook says it cannot decide */
    fake_counter_t counters[FAKE_COUNTERS]; /* as the Lua script keeps them */
    size_t n_counters;
} fake_redis_t;

/* The counter of limit `id` and `key` (key_len bytes), made at 0 when new. */
static inline int64_t *fake_counter(fake_redis_t *f, const char *id, const char *key,
                                    size_t key_len)
{
    for (size_t i = 0; i < f->n_counters; i++) {
        fake_counter_t *c = &f->counters[i];
        if (strcmp(c->id, id) == 0 && c->key_len == key_len && memcmp(c->key, key, key_len) == 0)
            return &c->state;
    }
    cr_assert_lt(f->n_counters, FAKE_COUNTERS, "the fake's counters are full");
    fake_counter_t *c = &f->counters[f->n_counters++];
    snprintf(c->id, sizeof(c->id), "%s", id);
    memcpy(c->key, key, key_len);
    c->key_len = key_len;
    c->state = 0;
    return &c->state;
}

/* The counter of limit `id` for the subject id `key`. */
static inline int64_t *fake_state(fake_redis_t *f, const char *id, const char *key)
{
    return fake_counter(f, id, key, strlen(key));
}

static inline int fake_submit(void *ctx, gov_redis_op_t *op)
{
    fake_redis_t *f = ctx;
    f->submitted++;
    if (f->refuse)
        return -1;
    if (f->answer_now) {
        gov_redis_complete(op, &f->now_reply, op->now);
        return 0;
    }
    cr_assert_lt(f->n, 64, "the fake's queue is full");
    f->ops[f->n++] = op;
    return 0;
}

static inline bool fake_ready(void *ctx)
{
    return !((fake_redis_t *)ctx)->down;
}

static const gov_redis_ops_t fake_ops = {.submit = fake_submit, .ready = fake_ready};

/* Answers op i as the Lua script would: a step (or a settle) of its counter. */
static inline void fake_answer(fake_redis_t *f, int i, int64_t now)
{
    gov_redis_op_t *op = f->ops[i];
    cr_assert_not_null(op, "op %d: not queued, or answered already", i);
    const ra_limiter_t *lim = op->limiter ? op->limiter : &op->limit->limiter;
    int64_t *st = fake_counter(f, op->limit->id, op->key, op->key_len);
    gov_redis_reply_t rep = {0};
    if (op->kind == GOV_REDIS_STEP) {
        rep.r = ra_step(lim, *st, now, op->cost);
        if (rep.r.admit)
            *st = rep.r.next_state;
    } else {
        *st = ra_settle(lim, *st, now, op->reserved, op->actual);
    }
    f->ops[i] = NULL;
    gov_redis_complete(op, &rep, now);
}

static inline void fake_unavailable(fake_redis_t *f, int i, int64_t now)
{
    gov_redis_op_t *op = f->ops[i];
    f->ops[i] = NULL;
    gov_redis_reply_t rep = {.unavailable = true};
    gov_redis_complete(op, &rep, now);
}

typedef struct done_log {
    int calls;
    gov_result_t *last;
} done_log_t;

static inline void on_done(gov_result_t *r, void *ctx)
{
    done_log_t *d = ctx;
    d->calls++;
    d->last = r;
}

#endif
