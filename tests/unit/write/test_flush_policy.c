/* What a FLUSH does, case by case: the programs of issue 22 (dd, a shell's
 * redirection, a child holding a descriptor, a failed write) as facts. */
#include <check.h>

#include "objmount/flush_policy.h"

#include "check_main.h"

static enum om_flush_action decide(enum om_flusher who, bool error, bool dirty, bool trunc_only)
{
    struct om_flush_facts f = {
        .flusher = who, .write_error = error, .dirty = dirty, .trunc_only = trunc_only};
    return om_flush_decide(&f);
}

START_TEST(test_opener_close_after_writing_commits)
{
    ck_assert_int_eq(decide(OM_FLUSHER_OPENER, false, true, false), OM_FLUSH_COMMIT);
}
END_TEST

START_TEST(test_clean_file_flush_does_nothing)
{
    ck_assert_int_eq(decide(OM_FLUSHER_OPENER, false, false, false), OM_FLUSH_NOTHING);
    ck_assert_int_eq(decide(OM_FLUSHER_OTHER, false, false, false), OM_FLUSH_NOTHING);
}
END_TEST

/* dd of=f and `cmd > f` over a stored object: the original descriptor's
 * close after dup2 comes before any write */
START_TEST(test_dup2_close_after_o_trunc_defers)
{
    ck_assert_int_eq(decide(OM_FLUSHER_OPENER, false, true, true), OM_FLUSH_DEFER);
}
END_TEST

/* a child's exit (or close) with an inherited descriptor */
START_TEST(test_child_exit_defers)
{
    ck_assert_int_eq(decide(OM_FLUSHER_OTHER, false, true, false), OM_FLUSH_DEFER);
    ck_assert_int_eq(decide(OM_FLUSHER_OTHER, false, true, true), OM_FLUSH_DEFER);
}
END_TEST

/* a failed write sticks, whoever flushes and whatever committed between */
START_TEST(test_failed_write_error_sticks)
{
    ck_assert_int_eq(decide(OM_FLUSHER_OPENER, true, true, false), OM_FLUSH_ERROR);
    ck_assert_int_eq(decide(OM_FLUSHER_OPENER, true, false, false), OM_FLUSH_ERROR);
    ck_assert_int_eq(decide(OM_FLUSHER_OTHER, true, false, false), OM_FLUSH_ERROR);
    ck_assert_int_eq(decide(OM_FLUSHER_UNKNOWN, true, true, true), OM_FLUSH_ERROR);
}
END_TEST

/* no pid to compare: the flush is taken as the opener's */
START_TEST(test_unknown_flusher_is_the_opener)
{
    ck_assert_int_eq(decide(OM_FLUSHER_UNKNOWN, false, true, false), OM_FLUSH_COMMIT);
    ck_assert_int_eq(decide(OM_FLUSHER_UNKNOWN, false, true, true), OM_FLUSH_DEFER);
}
END_TEST

START_TEST(test_unlinked_file_stores_nothing)
{
    struct om_flush_facts f = {.flusher = OM_FLUSHER_OPENER, .discarded = true, .dirty = true,
                               .write_error = true};
    ck_assert_int_eq(om_flush_decide(&f), OM_FLUSH_NOTHING);
}
END_TEST

START_TEST(test_action_names)
{
    ck_assert_str_eq(om_flush_action_name(OM_FLUSH_COMMIT), "commit");
    ck_assert_str_eq(om_flush_action_name(OM_FLUSH_DEFER), "defer");
    ck_assert_str_eq(om_flush_action_name(OM_FLUSH_ERROR), "error");
    ck_assert_str_eq(om_flush_action_name(OM_FLUSH_NOTHING), "nothing");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("flush_policy");
    TCase *tc = tcase_create("decide");
    tcase_add_test(tc, test_opener_close_after_writing_commits);
    tcase_add_test(tc, test_clean_file_flush_does_nothing);
    tcase_add_test(tc, test_dup2_close_after_o_trunc_defers);
    tcase_add_test(tc, test_child_exit_defers);
    tcase_add_test(tc, test_failed_write_error_sticks);
    tcase_add_test(tc, test_unknown_flusher_is_the_opener);
    tcase_add_test(tc, test_unlinked_file_stores_nothing);
    tcase_add_test(tc, test_action_names);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
