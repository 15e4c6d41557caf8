/*
 * Replies read into an arena. hiredis builds every reply as a tree of malloc'd objects (one per
 * element, one per string) and frees them after the reply's callback: for a batch of k
 * decisions that is 8 or so allocations and frees per decision, a fifth of the daemon's work
 * per redis answer. Here each connection's reader builds its replies, with the same redisReply
 * layout, in the connection's arena instead (conn.c), and the arena is reset once the reply has
 * been handled (rds__replies_done): the reader builds one complete reply at a time and starts
 * the next only when asked, so nothing else lives there then. hiredis' freeObject is a no-op;
 * the arena's memory is the connection's, freed with it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store_int.h"

/* n bytes of the reply being built, or NULL (the reader fails, refused says why) past
 * RDS_REPLY_BYTES_MAX: nested arrays of bounded headers could otherwise still multiply. */
static void *alloc(rds_replies_t *r, size_t n)
{
    if (r->used + n > RDS_REPLY_BYTES_MAX) {
        snprintf(r->refused, sizeof(r->refused), "a reply of more than %d bytes",
                 RDS_REPLY_BYTES_MAX);
        return NULL;
    }
    r->used += n;
    return tt_arena_alloc(&r->arena, n);
}

/* A new object of `type`, linked into its parent array as hiredis' own functions do. */
static redisReply *object(const redisReadTask *task, int type)
{
    rds_replies_t *replies = task->privdata;
    redisReply *r = alloc(replies, sizeof(*r));
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
    rds_replies_t *replies = task->privdata;
    char *copy = alloc(replies, len + 1);
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
    rds_replies_t *replies = task->privdata;
    /* the header is the server's word: hiredis 0.14 refuses only lengths past INT_MAX, and
     * "*2147483647" would have us allocate and clear 16 GB before any element came. NULL fails
     * the reader ("Out of memory"), which drops the connection; refused says why. */
    if (elements > RDS_REPLY_ELEMENTS_MAX) {
        snprintf(replies->refused, sizeof(replies->refused),
                 "a reply header announced an array of %d elements (at most %d)", elements,
                 RDS_REPLY_ELEMENTS_MAX);
        return NULL;
    }
    redisReply **element = NULL;
    if (elements > 0) {
        element = alloc(replies, (size_t)elements * sizeof(*element));
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

void rds__replies_attach(rds_replies_t *r, redisReader *reader)
{
    reader->fn = &functions;
    reader->privdata = r;
    r->refused[0] = '\0';
    r->used = 0;
}

void rds__replies_done(rds_replies_t *r)
{
    tt_arena_reset(&r->arena);
    r->used = 0;
}
