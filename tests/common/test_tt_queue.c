/* The one intrusive list (common/tt_queue.h). */
#include <criterion/criterion.h>

#include "tt_queue.h"

typedef struct item {
    int v;
    tt_queue_t node;
} item_t;

/* The values on the list, in order, as digits ("132"), walked both ways. */
static const char *order(tt_queue_t *head)
{
    static char fwd[16];
    char back[16];
    size_t n = 0, m = 0;
    tt_queue_t *q;
    tt_queue_foreach(q, head) fwd[n++] = (char)('0' + tt_queue_data(q, item_t, node)->v);
    fwd[n] = '\0';
    for (q = tt_queue_tail(head); q != head; q = q->prev)
        back[m++] = (char)('0' + tt_queue_data(q, item_t, node)->v);
    cr_assert_eq(n, m);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(fwd[i], back[n - 1 - i], "the links disagree: %s", fwd);
    return fwd;
}

Test(tt_queue, nodes_go_in_at_either_end_and_come_out_anywhere)
{
    tt_queue_t head;
    item_t a = {.v = 1}, b = {.v = 2}, c = {.v = 3};
    tt_queue_init(&head);
    cr_assert(tt_queue_empty(&head));
    tt_queue_insert_tail(&head, &a.node);
    tt_queue_insert_tail(&head, &b.node);
    tt_queue_insert_head(&head, &c.node);
    cr_assert_str_eq(order(&head), "312");
    cr_assert_eq(tt_queue_data(tt_queue_head(&head), item_t, node), &c);
    cr_assert_eq(tt_queue_data(tt_queue_tail(&head), item_t, node), &b);
    tt_queue_remove(&a.node); /* the middle */
    cr_assert_str_eq(order(&head), "32");
    cr_assert_not(tt_queue_linked(&a.node));
    tt_queue_remove(&a.node); /* twice: nothing */
    cr_assert_str_eq(order(&head), "32");
    tt_queue_remove(&c.node); /* the head */
    tt_queue_remove(&b.node); /* the last */
    cr_assert(tt_queue_empty(&head));
    cr_assert_str_eq(order(&head), "");
}

Test(tt_queue, the_safe_walk_may_remove_the_node_it_stands_on)
{
    tt_queue_t head, *q, *tmp;
    item_t it[5];
    tt_queue_init(&head);
    for (int i = 0; i < 5; i++) {
        it[i].v = i;
        tt_queue_insert_tail(&head, &it[i].node);
        cr_assert(tt_queue_linked(&it[i].node));
    }
    tt_queue_foreach_safe(q, tmp, &head)
    {
        if (tt_queue_data(q, item_t, node)->v % 2 == 0)
            tt_queue_remove(q);
    }
    cr_assert_str_eq(order(&head), "13");
}

Test(tt_queue, a_list_moved_aside_keeps_its_order_and_the_old_head_starts_empty)
{
    tt_queue_t head, aside;
    item_t it[3] = {{.v = 1}, {.v = 2}, {.v = 3}};
    tt_queue_init(&head);
    tt_queue_move(&head, &aside); /* empty to empty */
    cr_assert(tt_queue_empty(&aside));
    for (int i = 0; i < 3; i++)
        tt_queue_insert_tail(&head, &it[i].node);
    tt_queue_move(&head, &aside);
    cr_assert(tt_queue_empty(&head));
    cr_assert_str_eq(order(&aside), "123");
    tt_queue_remove(&it[1].node); /* a node leaves whichever list it is on */
    tt_queue_insert_tail(&head, &it[1].node);
    cr_assert_str_eq(order(&aside), "13");
    cr_assert_str_eq(order(&head), "2");
}
