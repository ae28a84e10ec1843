/* Prefetch across files, the pure policy (include/objmount/prefetch.h):
 * how far ahead a directory-order stream fetches, how a stride is found
 * and lost, and who may have a hinted file fetched. */
#include <check.h>
#include <sys/stat.h>

#include "objmount/prefetch.h"

#include "check_main.h"

START_TEST(test_window_grows_slowly_and_is_capped)
{
    ck_assert_int_eq(om_prefetch_window(0, 64), 0);
    ck_assert_int_eq(om_prefetch_window(1, 64), 0);
    ck_assert_int_eq(om_prefetch_window(2, 64), 1);
    ck_assert_int_eq(om_prefetch_window(2 + OM_PREFETCH_WINDOW_HITS - 1, 64), 1);
    ck_assert_int_eq(om_prefetch_window(2 + OM_PREFETCH_WINDOW_HITS, 64), 2);
    ck_assert_int_eq(om_prefetch_window(1000000, 64), 64);
    ck_assert_int_eq(om_prefetch_window(4000000000u, 64), 64);
    ck_assert_int_eq(om_prefetch_window(100, 0), 0);
}
END_TEST

/* The bound on waste: whenever a reader stops, the files fetched ahead and
 * never opened are few against those it opened. */
START_TEST(test_window_is_a_small_share_of_the_hits)
{
    for (uint32_t hits = 20; hits < 5000; hits++) {
        int w = om_prefetch_window(hits, 1 << 20);
        ck_assert_msg((double)w <= 1.0 + (double)hits / OM_PREFETCH_WINDOW_HITS,
                      "hits %u window %d", hits, w);
        ck_assert_msg((double)w / (double)(hits + (uint32_t)w) < 0.1, "hits %u window %d", hits,
                      w);
    }
}
END_TEST

/* Opens at 0, 1, 2, ... : every position ahead is asked for once, in order,
 * and never one that was already opened. */
START_TEST(test_in_order_fetches_each_position_once)
{
    struct om_prefetch_stream s = {0};
    uint64_t next_expected = 0; /* the first position not yet asked for */
    int asked[400] = {0};
    for (uint64_t pos = 0; pos < 300; pos++) {
        struct om_prefetch_step st = om_prefetch_next(&s, pos, 64);
        ck_assert(!st.missed);
        if (!st.count)
            continue;
        ck_assert_uint_eq(st.stride, 1);
        ck_assert_uint_gt(st.first, pos);
        if (next_expected)
            ck_assert_uint_eq(st.first, next_expected);
        for (int i = 0; i < st.count; i++)
            asked[st.first + (uint64_t)i]++;
        next_expected = st.first + (uint64_t)st.count;
    }
    ck_assert_uint_ge(next_expected, 300);
    for (int i = 0; i < 400; i++)
        ck_assert_int_le(asked[i], 1);
    /* the ones opened before the stream was sure were not asked for */
    ck_assert_int_eq(asked[0], 0);
    ck_assert_int_eq(asked[1], 0);
}
END_TEST

/* One of four workers: positions 3, 7, 11, ... */
START_TEST(test_stride_of_a_worker)
{
    struct om_prefetch_stream s = {0};
    struct om_prefetch_step st = {0};
    for (uint64_t pos = 3; pos < 3 + 4 * 50; pos += 4) {
        st = om_prefetch_next(&s, pos, 64);
        if (st.count) {
            ck_assert_uint_eq(st.stride, 4);
            ck_assert_uint_eq((st.first - 3) % 4, 0);
        }
    }
    ck_assert_uint_eq(s.stride, 4);
    ck_assert_uint_ge(s.hits, 40);
}
END_TEST

START_TEST(test_a_miss_collapses_the_window)
{
    struct om_prefetch_stream s = {0};
    for (uint64_t pos = 0; pos < 100; pos++)
        om_prefetch_next(&s, pos, 64);
    ck_assert_int_gt(om_prefetch_window(s.hits, 64), 1);
    struct om_prefetch_step st = om_prefetch_next(&s, 500, 64);
    ck_assert(st.missed);
    ck_assert_int_eq(st.count, 0);
    ck_assert_uint_le(s.hits, 1);
    /* and grows again from nothing on the new run */
    st = om_prefetch_next(&s, 501, 64);
    ck_assert_int_le(st.count, 1);
}
END_TEST

/* Shuffled opens: no stride holds, nothing (or next to nothing) is fetched. */
START_TEST(test_random_opens_fetch_next_to_nothing)
{
    struct om_prefetch_stream s = {0};
    uint64_t x = 12345;
    int fetched = 0;
    for (int i = 0; i < 1000; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        struct om_prefetch_step st = om_prefetch_next(&s, (x >> 33) % 5000, 64);
        fetched += st.count;
    }
    ck_assert_int_le(fetched, 20);
}
END_TEST

/* Strides too large to be an order are not followed. */
START_TEST(test_huge_steps_are_no_order)
{
    struct om_prefetch_stream s = {0};
    int fetched = 0;
    for (uint64_t pos = 0; pos < 100000; pos += 1000)
        fetched += om_prefetch_next(&s, pos, 64).count;
    ck_assert_int_eq(fetched, 0);
}
END_TEST

START_TEST(test_may_read_follows_the_mode_bits)
{
    /* owner */
    ck_assert(om_prefetch_may_read(0400, 1000, 1000, 1000, 1000));
    ck_assert(!om_prefetch_may_read(0044, 1000, 1000, 1000, 1000));
    /* group */
    ck_assert(om_prefetch_may_read(0040, 1000, 50, 2000, 50));
    ck_assert(!om_prefetch_may_read(0404, 1000, 50, 2000, 50));
    /* others */
    ck_assert(om_prefetch_may_read(0004, 1000, 50, 2000, 60));
    ck_assert(!om_prefetch_may_read(0640, 1000, 50, 2000, 60));
    /* root */
    ck_assert(om_prefetch_may_read(0000, 1000, 50, 0, 0));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("prefetch");
    TCase *tc = tcase_create("policy");
    tcase_add_test(tc, test_window_grows_slowly_and_is_capped);
    tcase_add_test(tc, test_window_is_a_small_share_of_the_hits);
    tcase_add_test(tc, test_in_order_fetches_each_position_once);
    tcase_add_test(tc, test_stride_of_a_worker);
    tcase_add_test(tc, test_a_miss_collapses_the_window);
    tcase_add_test(tc, test_random_opens_fetch_next_to_nothing);
    tcase_add_test(tc, test_huge_steps_are_no_order);
    tcase_add_test(tc, test_may_read_follows_the_mode_bits);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
