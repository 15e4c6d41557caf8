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

static uint64_t add(gov_resv_t *r, size_t bytes, int64_t now)
{
    uint64_t id = gov_resv_add(r, malloc(bytes), bytes, now);
    cr_assert_neq(id, 0);
    return id;
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
