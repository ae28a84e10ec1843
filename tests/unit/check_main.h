/* The main() every unit test program shares: run one suite, fail when any
 * check failed. */
#ifndef OBJMOUNT_CHECK_MAIN_H
#define OBJMOUNT_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

static inline int om_check_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
