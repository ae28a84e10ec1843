/* The admin socket protocol and whom a client trusts. */
#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "objmount/ctl.h"

#include "check_main.h"

static int parse(const char *s, struct om_ctl_cmd *c)
{
    return om_ctl_parse(s, strlen(s), c);
}

START_TEST(test_requests_parse_strictly)
{
    struct om_ctl_cmd c;
    ck_assert_int_eq(parse("status", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_STATUS);
    ck_assert_int_eq(parse("stats prometheus\r", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_STATS_PROMETHEUS);
    ck_assert_int_eq(parse("drain 30", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_DRAIN);
    ck_assert_uint_eq(c.drain_s, 30);
    ck_assert_int_eq(parse("drain -1", &c), -EINVAL);
    ck_assert_int_eq(parse("drain 99999999999999999999", &c), -EINVAL);
    ck_assert_int_eq(parse("drain ", &c), -EINVAL);
    ck_assert_int_eq(parse("statusx", &c), -EINVAL);
    ck_assert_int_eq(parse("", &c), -EINVAL);
    ck_assert_int_eq(om_ctl_parse("ping\0x", 6, &c), -EINVAL);
}
END_TEST

START_TEST(test_cache_requests)
{
    struct om_ctl_cmd c;
    ck_assert_int_eq(parse("cache stats", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_CACHE_STATS);
    ck_assert_int_eq(parse("cache drop", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_CACHE_DROP);
    ck_assert_str_eq(c.path, "");
    ck_assert_int_eq(parse("cache drop ds/a b/x.jpg", &c), 0);
    ck_assert_int_eq(c.kind, OM_CTL_CACHE_DROP);
    ck_assert_str_eq(c.path, "ds/a b/x.jpg");
    ck_assert_int_eq(parse("cache drop ..data/x..", &c), 0); /* dots inside names are names */
    const char *bad[] = {"cache drop ", "cache drop ../x", "cache drop a/../b", "cache drop a//b",
                         "cache drop a/", "cache drop /a", "cache drop ./a", "cache drop a\x1b[m",
                         "cache stats x", "cache", "cache dropx"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(parse(bad[i], &c) == -EINVAL, "%s", bad[i]);
    ck_assert_int_eq(om_ctl_parse("cache drop a\0b", 14, &c), -EINVAL);
}
END_TEST

START_TEST(test_socket_trust_needs_owner_and_private_directory)
{
    struct stat dir = {.st_mode = S_IFDIR | 0700, .st_uid = 1000};
    struct stat sock = {.st_mode = S_IFSOCK | 0600, .st_uid = 1000};
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), 0);
    dir.st_uid = 0;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), 0); /* /run/objmount */
    dir.st_uid = 1001;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
    dir.st_uid = 1000;
    dir.st_mode = S_IFDIR | 01777; /* /tmp itself, or a planted directory */
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
    dir.st_mode = S_IFDIR | 0770;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
    dir.st_mode = S_IFLNK | 0777;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
    dir.st_mode = S_IFDIR | 0755;
    sock.st_uid = 1001;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
    sock.st_uid = 1000;
    sock.st_mode = S_IFREG | 0600;
    ck_assert_int_eq(om_ctl_trust(&dir, &sock, 1000), -EPERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl");
    TCase *tc = tcase_create("ctl");
    tcase_add_test(tc, test_requests_parse_strictly);
    tcase_add_test(tc, test_cache_requests);
    tcase_add_test(tc, test_socket_trust_needs_owner_and_private_directory);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
