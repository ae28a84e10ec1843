/* The multipart layout on its own: which part a byte falls in, how many
 * parts a size needs, where parts start and how many of their bytes a file
 * holds, tier by tier up to the 10,000th part. */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "objmount/part_layout.h"
#include "objmount/store.h"

#include "check_main.h"

#define MiB (1024 * 1024ULL)
#define GiB (1024 * MiB)

static const uint64_t P = 8 * MiB;

/* The first byte of tier t (0-based): P * 1000 * (2^t - 1). */
static uint64_t tier_start(uint64_t part_size, int t)
{
    return part_size * OM_PARTS_PER_TIER * ((1ULL << t) - 1);
}

/* om_part_of(part_size, off) returns number and sets start and len. */
static void assert_part(uint64_t part_size, uint64_t off, int number, uint64_t start, uint64_t len)
{
    uint64_t s = 0, l = 0;
    ck_assert_int_eq(om_part_of(part_size, off, &s, &l), number);
    ck_assert_uint_eq(s, start);
    ck_assert_uint_eq(l, len);
}

START_TEST(test_offset_zero_is_part_one)
{
    assert_part(P, 0, 1, 0, P);
    assert_part(5 * MiB, 0, 1, 0, 5 * MiB);
}
END_TEST

START_TEST(test_part_boundaries)
{
    assert_part(P, P - 1, 1, 0, P);
    assert_part(P, P, 2, P, P);
    assert_part(P, P + 1, 2, P, P);
    assert_part(P, 2 * P - 1, 2, P, P);
    assert_part(P, 999 * P + 5, 1000, 999 * P, P);
}
END_TEST

START_TEST(test_parts_double_every_thousand)
{
    /* the last byte of part 1000, then part 1001 twice as long */
    assert_part(P, 1000 * P - 1, 1000, 999 * P, P);
    assert_part(P, 1000 * P, 1001, 1000 * P, 2 * P);
    assert_part(P, 1000 * P + 2 * P - 1, 1001, 1000 * P, 2 * P);
    assert_part(P, 1000 * P + 2 * P, 1002, 1002 * P, 2 * P);
    for (int t = 1; t < OM_PART_TIERS; t++) {
        uint64_t at = tier_start(P, t), len = P << t;
        assert_part(P, at - 1, t * OM_PARTS_PER_TIER, at - (len / 2), len / 2);
        assert_part(P, at, t * OM_PARTS_PER_TIER + 1, at, len);
    }
}
END_TEST

START_TEST(test_last_part_and_past_it)
{
    uint64_t end = tier_start(P, OM_PART_TIERS); /* 1023000 parts of P */
    ck_assert_uint_eq(end, 1023000 * P);
    uint64_t last = P << (OM_PART_TIERS - 1);
    assert_part(P, end - 1, OM_PART_MAX, end - last, last);
    uint64_t s = 7, l = 9;
    ck_assert_int_eq(om_part_of(P, end, &s, &l), -EFBIG);
    ck_assert_int_eq(om_part_of(P, UINT64_MAX, &s, &l), -EFBIG);
    ck_assert_uint_eq(s, 7); /* untouched */
    ck_assert_uint_eq(l, 9);
}
END_TEST

START_TEST(test_largest_part_size_does_not_overflow)
{
    uint64_t big = 5 * GiB, end = tier_start(big, OM_PART_TIERS);
    ck_assert_uint_eq(end / 1023000, big);
    assert_part(big, end - 1, OM_PART_MAX, end - (big << 9), big << 9);
    uint64_t s, l;
    ck_assert_int_eq(om_part_of(big, end, &s, &l), -EFBIG);
}
END_TEST

START_TEST(test_part_count_of_a_size)
{
    ck_assert_int_eq(om_part_count(P, 0), 0);
    ck_assert_int_eq(om_part_count(P, 1), 1);
    ck_assert_int_eq(om_part_count(P, P), 1);
    ck_assert_int_eq(om_part_count(P, P + 1), 2);
    ck_assert_int_eq(om_part_count(P, 1000 * P), 1000);
    ck_assert_int_eq(om_part_count(P, 1000 * P + 1), 1001);
    ck_assert_int_eq(om_part_count(P, 1002 * P), 1001);
    uint64_t end = tier_start(P, OM_PART_TIERS);
    ck_assert_int_eq(om_part_count(P, end), OM_PART_MAX);
    ck_assert_int_eq(om_part_count(P, end + 1), -EFBIG);
    ck_assert_int_eq(om_part_count(P, UINT64_MAX), -EFBIG);
}
END_TEST

/* om_part_span(part_size, size, number) gives off and len. */
static void assert_span(uint64_t part_size, uint64_t size, int number, uint64_t off, uint64_t len)
{
    uint64_t o = 1, l = 1;
    om_part_span(part_size, size, number, &o, &l);
    ck_assert_uint_eq(o, off);
    ck_assert_uint_eq(l, len);
}

START_TEST(test_span_is_cut_at_the_end_of_the_file)
{
    assert_span(P, 0, 1, 0, 0); /* an empty file keeps its part 1 empty */
    assert_span(P, 1, 1, 0, 1);
    assert_span(P, P, 1, 0, P);
    assert_span(P, P, 2, P, 0);
    uint64_t size = 2 * P + P / 2;
    assert_span(P, size, 1, 0, P);
    assert_span(P, size, 2, P, P);
    assert_span(P, size, 3, 2 * P, P / 2);
    assert_span(P, size, 4, 3 * P, 0); /* past the end: length 0 */
    assert_span(P, size, 5, 4 * P, 0);
    /* the first part of the second tier, shorter than its 2 * P */
    assert_span(P, 1001 * P, 1001, 1000 * P, P);
    assert_span(P, 1002 * P, 1001, 1000 * P, 2 * P);
    assert_span(P, 1002 * P, 1002, 1002 * P, 0);
}
END_TEST

START_TEST(test_last_span_of_the_largest_file)
{
    uint64_t end = tier_start(P, OM_PART_TIERS), last = P << (OM_PART_TIERS - 1);
    assert_span(P, end, OM_PART_MAX, end - last, last);
    assert_span(P, end - 1, OM_PART_MAX, end - last, last - 1);
    assert_span(P, end - last, OM_PART_MAX, end - last, 0);
}
END_TEST

/* Spans tile the file: each starts where the one before ended at full
 * length, and agrees with om_part_of on its first byte. */
START_TEST(test_spans_tile_the_file_and_agree_with_part_of)
{
    static const int numbers[] = {1,    2,    999,  1000, 1001, 1002, 1999,
                                  2000, 2001, 5000, 9000, 9001, 9999, 10000};
    uint64_t end = tier_start(P, OM_PART_TIERS);
    for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
        int n = numbers[i];
        uint64_t off, len, start, full;
        om_part_span(P, end, n, &off, &len);
        ck_assert_int_eq(om_part_of(P, off, &start, &full), n);
        ck_assert_uint_eq(start, off);
        ck_assert_uint_eq(len, full);
        ck_assert_int_eq(om_part_of(P, off + len - 1, &start, &full), n);
        if (n < OM_PART_MAX) {
            uint64_t next, next_len;
            om_part_span(P, end, n + 1, &next, &next_len);
            ck_assert_uint_eq(next, off + len);
        }
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("part_layout");
    TCase *tc = tcase_create("part_layout");
    tcase_add_test(tc, test_offset_zero_is_part_one);
    tcase_add_test(tc, test_part_boundaries);
    tcase_add_test(tc, test_parts_double_every_thousand);
    tcase_add_test(tc, test_last_part_and_past_it);
    tcase_add_test(tc, test_largest_part_size_does_not_overflow);
    tcase_add_test(tc, test_part_count_of_a_size);
    tcase_add_test(tc, test_span_is_cut_at_the_end_of_the_file);
    tcase_add_test(tc, test_last_span_of_the_largest_file);
    tcase_add_test(tc, test_spans_tile_the_file_and_agree_with_part_of);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
