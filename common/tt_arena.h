/*
 * tt_arena: a bump allocator over malloc'd chunks, for objects that die together (a parsed
 * document, a Redis reply). An allocation is never freed alone: tt_arena_reset forgets them
 * all and keeps the oldest chunk for the next round, tt_arena_free returns everything. A zeroed
 * tt_arena_t is an empty arena.
 */
#ifndef TT_ARENA_H
#define TT_ARENA_H

#include <stddef.h>
#include <stdlib.h>

#define TT_ARENA_CHUNK 16384 /* bytes per chunk; a larger allocation gets a chunk of its own */

typedef struct tt_arena_chunk {
    struct tt_arena_chunk *next; /* older */
    size_t used, size;
    max_align_t data[];
} tt_arena_chunk_t;

typedef struct tt_arena {
    tt_arena_chunk_t *head; /* the newest chunk */
} tt_arena_t;

/* n bytes aligned for any object, valid until the next reset or free; NULL when out of memory. */
static inline void *tt_arena_alloc(tt_arena_t *a, size_t n)
{
    n = (n + _Alignof(max_align_t) - 1) / _Alignof(max_align_t) * _Alignof(max_align_t);
    tt_arena_chunk_t *c = a->head;
    if (c == NULL || c->size - c->used < n) {
        size_t size = n > TT_ARENA_CHUNK ? n : TT_ARENA_CHUNK;
        if ((c = malloc(sizeof(*c) + size)) == NULL)
            return NULL;
        c->used = 0;
        c->size = size;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

/* Forgets every allocation; the oldest chunk stays for the next ones. */
static inline void tt_arena_reset(tt_arena_t *a)
{
    tt_arena_chunk_t *c = a->head;
    while (c != NULL && c->next != NULL) {
        tt_arena_chunk_t *older = c->next;
        free(c);
        c = older;
    }
    a->head = c;
    if (c != NULL)
        c->used = 0;
}

static inline void tt_arena_free(tt_arena_t *a)
{
    tt_arena_reset(a);
    free(a->head);
    a->head = NULL;
}

#endif
