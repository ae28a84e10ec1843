/* The multipart layout on its own: which part a byte falls in, where parts
 * start and how long they are, tier by tier up to the 10,000th part. */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "objmount/part_layout.h"
#include "objmount/s3.h"

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
    assert_part(P, end - 1, OM_S3_MAX_PARTS, end - last, last);
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
    assert_part(big, end - 1, OM_S3_MAX_PARTS, end - (big << 9), big << 9);
    uint64_t s, l;
    ck_assert_int_eq(om_part_of(big, end, &s, &l), -EFBIG);
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
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
