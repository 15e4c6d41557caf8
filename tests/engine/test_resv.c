/* The reservation pool: ids, expiry, eviction, the byte budget, settled entries. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "resv.h"

static int dropped;

static void drop(void *record)
{
    dropped++;
    free(record);
}

static gov_resv_t pool(size_t max, size_t max_bytes, int64_t ttl)
{
    static const uint64_t seed[2] = {7, 8};
    gov_resv_t r;
    dropped = 0;
    cr_assert_eq(gov_resv_init(&r, max, max_bytes, ttl, seed, drop), 0);
    return r;
}

/* An entry of account `who`. */
static uint64_t add_as(gov_resv_t *r, uint64_t who, size_t bytes, int64_t now)
{
    uint64_t id = gov_resv_add(r, who, malloc(bytes), bytes, now);
    cr_assert_neq(id, 0);
    return id;
}

static uint64_t add(gov_resv_t *r, size_t bytes, int64_t now)
{
    return add_as(r, 0, bytes, now);
}

static int state(const gov_resv_t *r, uint64_t id, int64_t now)
{
    void *record;
    return gov_resv_find(r, id, now, &record);
}

Test(resv, an_entry_is_open_then_settled_then_gone_at_its_time)
{
    gov_resv_t r = pool(8, 1 << 20, 100);
    uint64_t a = add(&r, 16, 0);
    cr_assert_eq(state(&r, a, 0), GOV_RESV_OPEN);
    gov_resv_settle(&r, a);
    cr_assert_eq(dropped, 1, "the record goes when settled");
    cr_assert_eq(state(&r, a, 99), GOV_RESV_SETTLED, "a repeat is told so until its time");
    cr_assert_eq(state(&r, a, 100), GOV_RESV_UNKNOWN);
    cr_assert_eq(gov_resv_expire(&r, 100, 10), 1);
    cr_assert_eq(r.expired, 0, "a settled entry does not count as expired");
    cr_assert_eq(r.count, 0);
    gov_resv_free(&r);
}

Test(resv, expiry_ends_the_oldest_first_in_bounded_slices)
{
    gov_resv_t r = pool(64, 1 << 20, 100);
    uint64_t ids[10];
    for (int i = 0; i < 10; i++)
        ids[i] = add(&r, 8, i);
    cr_assert_eq(gov_resv_expire(&r, 104, 3), 3, "a slice ends at most its budget");
    cr_assert_eq(gov_resv_expire(&r, 104, 100), 2, "then only those whose time has come");
    cr_assert_eq(state(&r, ids[4], 104), GOV_RESV_UNKNOWN);
    cr_assert_eq(state(&r, ids[5], 104), GOV_RESV_OPEN);
    cr_assert_eq(r.expired, 5);
    cr_assert_eq(r.open, 5);
    gov_resv_free(&r);
    cr_assert_eq(dropped, 10, "freeing the pool drops what it still holds");
}

Test(resv, a_full_pool_evicts_its_oldest_open_entry)
{
    gov_resv_t r = pool(3, 1 << 20, 1000);
    uint64_t a = add(&r, 8, 0), b = add(&r, 8, 0), c = add(&r, 8, 0);
    gov_resv_settle(&r, b);
    uint64_t d = add(&r, 8, 1), e = add(&r, 8, 1);
    cr_assert_eq(state(&r, a, 1), GOV_RESV_UNKNOWN);
    cr_assert_eq(state(&r, b, 1), GOV_RESV_UNKNOWN);
    cr_assert_eq(state(&r, c, 1), GOV_RESV_OPEN);
    cr_assert_eq(state(&r, d, 1), GOV_RESV_OPEN);
    cr_assert_eq(state(&r, e, 1), GOV_RESV_OPEN);
    cr_assert_eq(r.evicted, 1, "only the open one counts: it stays charged");
    cr_assert_eq(r.count, 3);
    gov_resv_free(&r);
}

Test(resv, the_byte_budget_evicts_too)
{
    gov_resv_t r = pool(100, 100, 1000);
    uint64_t a = add(&r, 60, 0), b = add(&r, 60, 0);
    cr_assert_eq(state(&r, a, 0), GOV_RESV_UNKNOWN);
    cr_assert_eq(state(&r, b, 0), GOV_RESV_OPEN);
    cr_assert_eq(r.bytes, 60);
    gov_resv_free(&r);
}

Test(resv, a_reused_entry_does_not_answer_to_its_old_id)
{
    gov_resv_t r = pool(1, 1 << 20, 1000);
    uint64_t a = add(&r, 8, 0), b = add(&r, 8, 0); /* b takes a's entry */
    cr_assert_neq(a, b);
    cr_assert_eq(state(&r, a, 0), GOV_RESV_UNKNOWN);
    cr_assert_eq(state(&r, b, 0), GOV_RESV_OPEN);
    cr_assert_eq(state(&r, 0, 0), GOV_RESV_UNKNOWN);
    gov_resv_free(&r);
}

/* ---- accounts (issue 34 item 9) --------------------------------------------------------- */

/* The account of `id` in the pool, or NULL. */
static const gov_resv_account_t *account_of(const gov_resv_t *r, uint64_t id)
{
    for (uint32_t k = 0; k < r->n_heap; k++)
        if (r->acct[r->heap[k]].id == id)
            return &r->acct[r->heap[k]];
    return NULL;
}

/* What the pool holds agrees with itself: each account's weight is what its entries weigh, the
 * heap is a heap, the map finds every account, and every queued entry is on its account's list. */
static void consistent(const gov_resv_t *r)
{
    size_t entries = 0;
    for (uint32_t k = 0; k < r->n_heap; k++) {
        uint32_t a = r->heap[k];
        const gov_resv_account_t *ac = &r->acct[a];
        cr_assert_eq(ac->heap, k);
        if (k)
            cr_assert_leq(ac->weight, r->acct[r->heap[(k - 1) / 2]].weight, "heap order");
        uint64_t w = 0;
        size_t n = 0;
        for (uint32_t i = ac->head; i != UINT32_MAX; i = r->e[i].anext, n++) {
            cr_assert_eq(r->e[i].acct, a);
            w += r->entry_cost + (r->e[i].state == GOV_RESV_OPEN ? r->e[i].bytes : 0);
        }
        cr_assert_gt(n, 0, "an account without entries is forgotten");
        cr_assert_eq(ac->weight, w, "account %llu", (unsigned long long)ac->id);
        entries += n;
        bool mapped = false;
        for (uint32_t m = 0; m < r->map_cap; m++)
            mapped = mapped || r->map[m] == a + 1;
        cr_assert(mapped);
    }
    cr_assert_eq(entries, r->count);
}

Test(resv, a_full_pool_takes_from_the_account_holding_the_most)
{
    gov_resv_t r = pool(1000, 1000, 10000); /* an entry weighs 1 besides its bytes */
    uint64_t mine = add_as(&r, 1, 50, 0);
    uint64_t flood[100];
    for (int i = 0; i < 100; i++)
        flood[i] = add_as(&r, 2, 50, i);
    cr_assert_eq(state(&r, mine, 100), GOV_RESV_OPEN, "the small holder keeps its entry");
    cr_assert_eq(state(&r, flood[0], 100), GOV_RESV_UNKNOWN, "the flood ends its own oldest");
    cr_assert_eq(state(&r, flood[99], 100), GOV_RESV_OPEN);
    cr_assert_eq(r.evicted, 100 - 19, "19 x 50 bytes fit beside account 1's 50");
    consistent(&r);
    gov_resv_free(&r);
}

/* Two clients each flooding end with the pool split between them; a third with less than its
 * share loses nothing. */
Test(resv, heavy_accounts_share_the_pool_and_a_light_one_keeps_its_own)
{
    gov_resv_t r = pool(1000, 3000, 10000);
    uint64_t light[5];
    for (int i = 0; i < 5; i++)
        light[i] = add_as(&r, 3, 10, 0);
    for (int i = 0; i < 500; i++) {
        add_as(&r, 1, 20, i);
        add_as(&r, 2, 20, i);
    }
    for (int i = 0; i < 5; i++)
        cr_assert_eq(state(&r, light[i], 500), GOV_RESV_OPEN, "light entry %d", i);
    const gov_resv_account_t *a = account_of(&r, 1), *b = account_of(&r, 2);
    cr_assert(a && b);
    int64_t diff = (int64_t)a->weight - (int64_t)b->weight, one = 20 + (int64_t)r.entry_cost;
    cr_assert(diff >= -one && diff <= one, "within one entry: a %llu b %llu",
              (unsigned long long)a->weight, (unsigned long long)b->weight);
    consistent(&r);
    gov_resv_free(&r);
}

/* A settled entry keeps its place (a repeat is told "already settled") but weighs only its
 * entry; an account whose entries all ended is forgotten. */
Test(resv, settled_entries_weigh_their_entry_and_empty_accounts_go)
{
    gov_resv_t r = pool(100, 1 << 20, 100);
    uint64_t a = add_as(&r, 7, 500, 0);
    add_as(&r, 7, 500, 1);
    cr_assert_eq(account_of(&r, 7)->weight, 2 * (r.entry_cost + 500));
    gov_resv_settle(&r, a);
    cr_assert_eq(account_of(&r, 7)->weight, 2 * r.entry_cost + 500);
    cr_assert_eq(gov_resv_expire(&r, 200, 10), 2);
    cr_assert_null(account_of(&r, 7));
    cr_assert_eq(r.n_heap, 0);
    consistent(&r);
    gov_resv_free(&r);
}

/* Many accounts coming and going in random order: the map (linear probing, backward-shift
 * deletion), the heap and the weights stay true throughout. */
Test(resv, accounts_stay_consistent_through_any_order_of_adds_settles_and_ends)
{
    gov_resv_t r = pool(200, 20000, 50);
    uint64_t ids[4096];
    size_t n = 0;
    uint64_t rng = 12345;
    for (int step = 0; step < 20000; step++) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        unsigned op = (unsigned)(rng >> 33) % 10;
        int64_t now = step / 8;
        if (op < 7) {
            uint64_t who = (rng >> 40) % 97 * UINT64_C(0x100000001); /* collide in the map */
            uint64_t id = add_as(&r, who, 1 + (rng >> 20) % 300, now);
            if (n < sizeof(ids) / sizeof(ids[0]))
                ids[n++] = id;
        } else if (op < 9 && n) {
            uint64_t id = ids[(rng >> 24) % n];
            void *rec;
            if (gov_resv_find(&r, id, now, &rec) == GOV_RESV_OPEN)
                gov_resv_settle(&r, id);
        } else {
            gov_resv_expire(&r, now, 1 + (rng >> 50) % 8);
        }
        if (step % 97 == 0)
            consistent(&r);
    }
    consistent(&r);
    gov_resv_free(&r);
}
