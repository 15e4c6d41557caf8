/*
 * Requests waiting on the redis store. One allocation per request holds the request, one
 * operation and one reply per redis limit, and a copy of the subject; it holds a reference to
 * the generation the request started under, so a reload meanwhile leaves it whole. When the
 * last reply is in, the request's own finish (decide.c, settle.c) runs against that generation.
 */
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

gov_pending_t *gov__pending_new(gov_engine_t *e, gov_set_t *set, const gov_subject_t *s,
                                size_t n_ops, const gov_pending_t *tmpl, gov_result_t *out)
{
    size_t bytes = gov__subject_bytes(s);
    gov_pending_t *pd = calloc(
        1, sizeof(*pd) + n_ops * (sizeof(gov_redis_op_t) + sizeof(gov_redis_reply_t)) + bytes);
    if (!pd)
        return NULL;
    *pd = *tmpl;
    pd->out = out;
    pd->e = e;
    pd->set = set;
    set->refs++;
    e->pending++;
    pd->n_ops = (uint32_t)n_ops;
    pd->ops = (gov_redis_op_t *)(pd + 1);
    pd->replies = (gov_redis_reply_t *)(pd->ops + n_ops);
    gov__subject_copy(&pd->subject, (char *)(pd->replies + n_ops), s);
    return pd;
}

static void pending_free(gov_pending_t *pd)
{
    pd->e->pending--;
    gov__set_unref(pd->set);
    free(pd);
}

static void pending_finish(gov_pending_t *pd, int64_t now)
{
    probe_t p[GOV_APPLY_MAX];
    size_t n = 0;
    if (pd->types == 0) { /* its own probes (gov_decide_domain's): it rebuilds them */
        pd->finish(pd, NULL, 0, now);
        return;
    }
    gov__result_init(pd->out);
    /* checked on the first pass, against the same generation: cannot fail now */
    (void)gov__prepare(pd->set, &pd->subject, pd->types, p, &n, pd->out);
    if (pd->select)
        gov__probes_select(p, &n, &pd->keep, &pd->local);
    pd->finish(pd, p, n, now);
}

int gov__pending_release(gov_pending_t *pd, int64_t now)
{
    if (--pd->outstanding > 0)
        return GOV_PENDING;
    pending_finish(pd, now);
    pending_free(pd);
    return 0;
}

int gov__pending_start(gov_pending_t *pd, gov_redis_kind_t kind, const probe_t *p, size_t n,
                       int64_t now)
{
    gov_engine_t *e = pd->e;
    uint32_t k = 0;
    pd->outstanding = pd->n_ops + 1; /* +1: no completion inside submit may finish it */
    for (size_t i = 0; i < n; i++) {
        if (!gov__via_redis(&p[i]))
            continue;
        gov_redis_op_t *op = &pd->ops[k];
        *op = (gov_redis_op_t){
            .kind = kind,
            .limit = &p[i].l->cfg,
            .key = p[i].pair >= 0 ? pd->subject.pairs[p[i].pair].id : p[i].key, /* ours */
            .key_len = p[i].key_len,
            .now = now,
            .cost = p[i].l->cfg.type == CFG_TYPE_TPM ? pd->tokens : 1,
            .reserved = pd->reserved,
            .actual = pd->actual,
            .engine_private_ = pd,
            .index_ = k,
        };
        k++;
        if (!e->redis.submit || e->redis.submit(e->redis_ctx, op) < 0) {
            pd->replies[op->index_] = (gov_redis_reply_t){.unavailable = true};
            pd->outstanding--;
        }
    }
    return gov__pending_release(pd, now);
}

void gov_redis_complete(gov_redis_op_t *op, const gov_redis_reply_t *reply, int64_t now)
{
    gov_pending_t *pd = op->engine_private_;
    pd->replies[op->index_] = *reply;
    if (--pd->outstanding > 0)
        return;
    pending_finish(pd, now);
    gov_done_fn done = pd->done;
    gov_result_t *out = pd->out;
    void *ctx = pd->ctx;
    pending_free(pd);
    done(out, ctx);
}
