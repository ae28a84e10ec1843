/* The data cache's policy on its own: admission against victims, aging,
 * and the access patterns of training (a cyclic scan larger than the
 * cache, a data set that replaces another). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "objmount/dcache_policy.h"

#include "check_main.h"

#define BLOCK 1000

/* A cache of cap blocks driven as objmount drives it: count the access,
 * serve a hit, or make room and insert when the policy admits. Returns
 * hits. */
struct sim {
    struct om_dpolicy *p;
    uint64_t cap, used;
};

static int sim_read(struct sim *s, uint64_t key)
{
    ck_assert_int_eq(om_dpolicy_access(s->p, key), 0);
    if (om_dpolicy_resident(s->p, key))
        return 1;
    uint64_t need = s->used + BLOCK > s->cap * BLOCK ? s->used + BLOCK - s->cap * BLOCK : 0;
    uint64_t victims[8], short_of;
    int n;
    if (!om_dpolicy_admit(s->p, key, need, victims, 8, &n, &short_of))
        return 0;
    for (int i = 0; i < n; i++) {
        om_dpolicy_remove(s->p, victims[i]);
        s->used -= BLOCK;
    }
    ck_assert_int_eq(om_dpolicy_insert(s->p, key, BLOCK), 0);
    s->used += BLOCK;
    ck_assert_uint_le(s->used, s->cap * BLOCK);
    return 0;
}

static double sim_epoch(struct sim *s, uint64_t first, uint64_t n)
{
    int hits = 0;
    for (uint64_t k = first; k < first + n; k++)
        hits += sim_read(s, k);
    return (double)hits / (double)n;
}

static struct sim sim_new(uint64_t cap)
{
    struct sim s = {.p = om_dpolicy_new(2 * cap), .cap = cap};
    ck_assert_ptr_nonnull(s.p);
    return s;
}

START_TEST(test_free_space_admits_and_lru_order)
{
    struct om_dpolicy *p = om_dpolicy_new(100);
    uint64_t v[4], short_of, key, bytes;
    int n;
    ck_assert(om_dpolicy_admit(p, 1, 0, v, 4, &n, &short_of));
    ck_assert_int_eq(n, 0);
    om_dpolicy_insert(p, 1, 10);
    om_dpolicy_insert(p, 2, 20);
    ck_assert(om_dpolicy_oldest(p, &key, &bytes));
    ck_assert_uint_eq(key, 1);
    om_dpolicy_access(p, 1); /* 1 is the most recent now */
    ck_assert(om_dpolicy_oldest(p, &key, &bytes));
    ck_assert_uint_eq(key, 2);
    ck_assert_uint_eq(bytes, 20);
    /* a block never seen does not displace a resident */
    ck_assert(!om_dpolicy_admit(p, 3, 10, v, 4, &n, &short_of));
    ck_assert_int_eq(n, 0);
    /* seen three times it does (2 was seen 0 times, 1 once) */
    for (int i = 0; i < 3; i++)
        om_dpolicy_access(p, 3);
    ck_assert(om_dpolicy_admit(p, 3, 25, v, 4, &n, &short_of));
    ck_assert_int_eq(n, 2);
    ck_assert_uint_eq(v[0], 2);
    ck_assert_uint_eq(v[1], 1);
    /* more than the residents hold */
    ck_assert(!om_dpolicy_admit(p, 3, 31, v, 4, &n, &short_of));
    ck_assert_uint_eq(short_of, 1);
    om_dpolicy_remove(p, 2);
    ck_assert(!om_dpolicy_resident(p, 2));
    struct om_dpolicy_stats st;
    om_dpolicy_get_stats(p, &st);
    ck_assert_uint_eq(st.resident, 1);
    ck_assert_uint_eq(st.resident_bytes, 10);
    om_dpolicy_free(p);
}
END_TEST

START_TEST(test_aging_halves_and_forgets_ghosts)
{
    struct om_dpolicy *p = om_dpolicy_new(10);
    for (int i = 0; i < 4; i++)
        om_dpolicy_access(p, 7);
    om_dpolicy_access(p, 8); /* a ghost seen once */
    ck_assert_uint_eq(om_dpolicy_frequency(p, 7), 4);
    for (int i = 0; i < 5; i++)
        om_dpolicy_access(p, 9); /* the 10th access halves */
    ck_assert_uint_eq(om_dpolicy_frequency(p, 7), 2);
    ck_assert_uint_eq(om_dpolicy_frequency(p, 8), 0);
    struct om_dpolicy_stats st;
    om_dpolicy_get_stats(p, &st);
    ck_assert_uint_eq(st.halvings, 1);
    ck_assert_uint_eq(st.tracked, 2); /* 8 is forgotten */
    om_dpolicy_free(p);
}
END_TEST

/* The case: each epoch scans a data set 1.5x the cache. LRU keeps
 * nothing; this policy must keep at least half of the bytes from epoch 2
 * on, every epoch. */
START_TEST(test_scan_larger_than_the_cache_keeps_half)
{
    const double ratios[] = {1.2, 1.5, 2.0};
    for (size_t r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++) {
        struct sim s = sim_new(1000);
        uint64_t n = (uint64_t)(1000 * ratios[r]);
        ck_assert(sim_epoch(&s, 0, n) == 0.0);
        for (int e = 2; e <= 12; e++) {
            double hit = sim_epoch(&s, 0, n);
            /* the best any policy can do is cap/n */
            ck_assert_msg(hit >= 0.95 * 1000.0 / (double)n, "ratio %.1f epoch %d: %.2f", ratios[r],
                          e, hit);
        }
        om_dpolicy_free(s.p);
    }
}
END_TEST

/* A data set that fits stays whole; a new one that fits replaces an old
 * one within a few epochs. */
START_TEST(test_new_data_set_replaces_an_old_one)
{
    struct sim s = sim_new(1000);
    for (int e = 1; e <= 10; e++) {
        double hit = sim_epoch(&s, 0, 900);
        ck_assert(e == 1 ? hit == 0.0 : hit == 1.0);
    }
    int full = 0;
    for (int e = 1; e <= 12 && !full; e++) {
        if (sim_epoch(&s, 100000, 1000) >= 0.99)
            full = e;
    }
    ck_assert_msg(full > 0 && full <= 8, "new data set fully cached at epoch %d", full);
    om_dpolicy_free(s.p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dcache_policy");
    TCase *tc = tcase_create("dcache_policy");
    tcase_add_test(tc, test_free_space_admits_and_lru_order);
    tcase_add_test(tc, test_aging_halves_and_forgets_ghosts);
    tcase_add_test(tc, test_scan_larger_than_the_cache_keeps_half);
    tcase_add_test(tc, test_new_data_set_replaces_an_old_one);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
