/*
 * Replies read into an arena. hiredis builds every reply as a tree of malloc'd objects (one per
 * element, one per string) and frees them after the reply's callback: for a batch of k
 * decisions that is 8 or so allocations and frees per decision, a fifth of the daemon's work
 * per redis answer. Here each connection's reader builds its replies, with the same redisReply
 * layout, in the node's arena instead, and the arena is reset once the reply callback has run
 * (tt_arena_reset): hiredis delivers one complete reply at a time and starts the next only
 * after the callback returns, so nothing else lives there then. hiredis' freeObject is a no-op;
 * the arena's memory is the node's, freed with it.
 */
#include <string.h>

#include "store_int.h"

/* A new object of `type`, linked into its parent array as hiredis' own functions do. */
static redisReply *object(const redisReadTask *task, int type)
{
    redisReply *r = tt_arena_alloc(task->privdata, sizeof(*r));
    if (r == NULL)
        return NULL;
    memset(r, 0, sizeof(*r));
    r->type = type;
    if (task->parent != NULL) {
        redisReply *parent = task->parent->obj;
        parent->element[task->idx] = r;
    }
    return r;
}

static void *create_string(const redisReadTask *task, char *str, size_t len)
{
    char *copy = tt_arena_alloc(task->privdata, len + 1);
    redisReply *r = copy ? object(task, task->type) : NULL;
    if (r == NULL)
        return NULL;
    memcpy(copy, str, len);
    copy[len] = '\0';
    r->str = copy;
    r->len = len;
    return r;
}

static void *create_array(const redisReadTask *task, int elements)
{
    redisReply **element = NULL;
    if (elements > 0) {
        element = tt_arena_alloc(task->privdata, (size_t)elements * sizeof(*element));
        if (element == NULL)
            return NULL;
        memset(element, 0, (size_t)elements * sizeof(*element));
    }
    redisReply *r = object(task, REDIS_REPLY_ARRAY);
    if (r == NULL)
        return NULL;
    r->element = element;
    r->elements = elements > 0 ? (size_t)elements : 0;
    return r;
}

static void *create_integer(const redisReadTask *task, long long value)
{
    redisReply *r = object(task, REDIS_REPLY_INTEGER);
    if (r != NULL)
        r->integer = value;
    return r;
}

static void *create_nil(const redisReadTask *task)
{
    return object(task, REDIS_REPLY_NIL);
}

static void free_object(void *reply)
{
    (void)reply; /* the arena is reset after the callback */
}

static redisReplyObjectFunctions functions = {create_string, create_array, create_integer,
                                              create_nil, free_object};

void rds__arena_attach(tt_arena_t *a, redisReader *reader)
{
    reader->fn = &functions;
    reader->privdata = a;
}
