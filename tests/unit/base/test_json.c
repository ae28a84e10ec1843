/* The JSON writer behind objmountctl's --json output: escaping of every
 * byte a key, a path or an error message can hold, and nesting. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/json.h"

#include "check_main.h"

static char *escaped(const char *s)
{
    struct om_buf b = {0};
    ck_assert_int_eq(om_json_escape(&b, s), 0);
    return om_buf_steal(&b);
}

START_TEST(test_escape_quotes_backslashes_and_control_bytes)
{
    char *e = escaped("a\"b\\c\nd\re\tf\x01g\x1f");
    ck_assert_str_eq(e, "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g\\u001f\"");
    free(e);
    e = escaped("");
    ck_assert_str_eq(e, "\"\"");
    free(e);
}
END_TEST

START_TEST(test_escape_keeps_utf8_and_replaces_invalid_bytes)
{
    char *e = escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    ck_assert_str_eq(e, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    free(e);
    /* a lone continuation byte, a truncated sequence, an overlong '/', a surrogate */
    e = escaped("a\200b\303c\300\257d\355\240\200e");
    ck_assert_str_eq(e, "\"a\\ufffdb\\ufffdc\\ufffd\\ufffdd\\ufffd\\ufffd\\ufffde\"");
    free(e);
}
END_TEST

START_TEST(test_writer_nests_objects_and_arrays_with_commas)
{
    struct om_buf b = {0};
    struct om_json j;
    om_json_init(&j, &b);
    om_json_array(&j, NULL);
    om_json_object(&j, NULL);
    om_json_str(&j, "mountpoint", "/mnt/a b");
    om_json_u64(&j, "n", 18446744073709551615ULL);
    om_json_i64(&j, "neg", -5);
    om_json_double(&j, "ms", 1.5);
    om_json_double(&j, "nan", 0.0 / 0.0);
    om_json_bool(&j, "ok", true);
    om_json_str(&j, "none", NULL);
    om_json_array(&j, "empty");
    om_json_end(&j, ']');
    om_json_end(&j, '}');
    om_json_raw(&j, NULL, "{\"x\":1}");
    om_json_end(&j, ']');
    ck_assert_int_eq(j.rc, 0);
    ck_assert_int_eq(j.depth, 0);
    ck_assert_str_eq(b.data, "[{\"mountpoint\":\"/mnt/a b\",\"n\":18446744073709551615,"
                             "\"neg\":-5,\"ms\":1.5,\"nan\":null,\"ok\":true,\"none\":null,"
                             "\"empty\":[]},{\"x\":1}]");
    om_buf_free(&b);
}
END_TEST

START_TEST(test_writer_refuses_unbalanced_and_too_deep)
{
    struct om_buf b = {0};
    struct om_json j;
    om_json_init(&j, &b);
    om_json_end(&j, '}');
    ck_assert_int_eq(j.rc, -EINVAL);
    om_json_str(&j, "k", "v"); /* the error sticks */
    ck_assert_int_eq(j.rc, -EINVAL);
    om_buf_free(&b);
    om_json_init(&j, &b);
    for (int i = 0; i <= OM_JSON_MAX_DEPTH; i++)
        om_json_array(&j, NULL);
    ck_assert_int_eq(j.rc, -EINVAL);
    om_buf_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json");
    TCase *tc = tcase_create("json");
    tcase_add_test(tc, test_escape_quotes_backslashes_and_control_bytes);
    tcase_add_test(tc, test_escape_keeps_utf8_and_replaces_invalid_bytes);
    tcase_add_test(tc, test_writer_nests_objects_and_arrays_with_commas);
    tcase_add_test(tc, test_writer_refuses_unbalanced_and_too_deep);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
