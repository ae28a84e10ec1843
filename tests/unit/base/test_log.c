/* Log lines cannot be forged by keys or server text; URLs lose their query. */
#include <check.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/url.h"

#include "check_main.h"

static const char *esc(const char *s, size_t len)
{
    static char out[256];
    om_log_escape(s, len, out, sizeof(out));
    return out;
}

START_TEST(test_control_bytes_and_bad_utf8_are_escaped)
{
    ck_assert_str_eq(esc("plain key.jpg", 13), "plain key.jpg");
    ck_assert_str_eq(esc("a\nb\rc\x1b[31m", 10), "a\\x0ab\\x0dc\\x1b[31m");
    ck_assert_str_eq(esc("back\\slash", 10), "back\\\\slash");
    ck_assert_str_eq(esc("d\xc3\xa9j\xc3\xa0 \xe6\x97\xa5", 10), "d\xc3\xa9j\xc3\xa0 \xe6\x97\xa5");
    ck_assert_str_eq(esc("\xff\xc3", 2), "\\xff\\xc3");
    ck_assert_str_eq(esc("\xc2\x9b", 2), "\\xc2\\x9b");          /* C1 CSI */
    ck_assert_str_eq(esc("\xed\xa0\x80", 3), "\\xed\\xa0\\x80"); /* surrogate */
    ck_assert_str_eq(esc("\xc0\xaf", 2), "\\xc0\\xaf");          /* overlong */
    ck_assert_str_eq(esc("a\0b", 3), "a\\x00b");
    char small[5];
    ck_assert_uint_eq(om_log_escape("\n\n", 2, small, sizeof(small)), 8);
    ck_assert_str_eq(small, "\\x0a");
}
END_TEST

START_TEST(test_redacted_urls_keep_no_query)
{
    char out[128];
    om_url_redact("http://t:1/s3/b/k?pid=1&X-Amz-Signature=abc", out, sizeof(out));
    ck_assert_str_eq(out, "http://t:1/s3/b/k?...");
    om_url_redact("http://t/k", out, sizeof(out));
    ck_assert_str_eq(out, "http://t/k");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("log");
    tcase_add_test(tc, test_control_bytes_and_bad_utf8_are_escaped);
    tcase_add_test(tc, test_redacted_urls_keep_no_query);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
