/*
 * tt_queue: the one intrusive doubly linked list, after libuv's queue.h (uv__queue): a node is
 * embedded in its owner, the head is a node of the list's owner, and a list is circular, so
 * insertion and removal need no test for an end. tt_queue_data() finds the owner of a node.
 * A node removed with tt_queue_remove points at itself again, so tt_queue_linked() says whether
 * it is on a list and removing it twice is harmless. Nothing is allocated or freed here.
 */
#ifndef TT_QUEUE_H
#define TT_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tt_queue {
    struct tt_queue *next;
    struct tt_queue *prev;
} tt_queue_t;

/* The struct of `type` whose member `field` is the node q. */
#define tt_queue_data(q, type, field) ((type *)((char *)(q)-offsetof(type, field)))

/* Walks the list at head: q is each node in order. Do not remove q while walking this way
 * (tt_queue_foreach_safe does: it reads the next node first). */
#define tt_queue_foreach(q, head) for ((q) = (head)->next; (q) != (head); (q) = (q)->next)
#define tt_queue_foreach_safe(q, tmp, head)                                                        \
    for ((q) = (head)->next, (tmp) = (q)->next; (q) != (head); (q) = (tmp), (tmp) = (q)->next)

/* An empty list, or a node on none. */
static inline void tt_queue_init(tt_queue_t *q)
{
    q->next = q;
    q->prev = q;
}

static inline bool tt_queue_empty(const tt_queue_t *head)
{
    return head->next == head;
}

/* Whether node q is on a list (after tt_queue_init or tt_queue_remove: not). */
static inline bool tt_queue_linked(const tt_queue_t *q)
{
    return q->next != q;
}

/* The first and last nodes; the head itself when the list is empty. */
static inline tt_queue_t *tt_queue_head(const tt_queue_t *head)
{
    return head->next;
}

static inline tt_queue_t *tt_queue_tail(const tt_queue_t *head)
{
    return head->prev;
}

static inline void tt_queue_insert_tail(tt_queue_t *head, tt_queue_t *q)
{
    q->next = head;
    q->prev = head->prev;
    q->prev->next = q;
    head->prev = q;
}

static inline void tt_queue_insert_head(tt_queue_t *head, tt_queue_t *q)
{
    q->next = head->next;
    q->prev = head;
    q->next->prev = q;
    head->next = q;
}

/* Moves every node of `from` to `to` in order (what `to` held is forgotten: an unused head);
 * `from` is empty after. For walking a list that the walk itself may add to: move it aside
 * first, and what is added meanwhile waits on `from` for the next walk. */
static inline void tt_queue_move(tt_queue_t *from, tt_queue_t *to)
{
    if (tt_queue_empty(from)) {
        tt_queue_init(to);
        return;
    }
    to->next = from->next;
    to->prev = from->prev;
    to->next->prev = to;
    to->prev->next = to;
    tt_queue_init(from);
}

/* Takes q off its list (nothing when it is on none); q is a list of one again. */
static inline void tt_queue_remove(tt_queue_t *q)
{
    q->prev->next = q->next;
    q->next->prev = q->prev;
    tt_queue_init(q);
}

#endif
