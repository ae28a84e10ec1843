/* Sidecars of staged and recovered data: round trips, hostile input, and
 * the check that keeps `recover push` from overwriting a newer object. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "objmount/sidecar.h"

#include "check_main.h"

static void sample(struct om_sidecar *s)
{
    memset(s, 0, sizeof(*s));
    strcpy(s->state, "failed");
    strcpy(s->bucket, "data");
    strcpy(s->key, "dir/a b%c\n\x1b[31mred\xc3\xa9=x");
    strcpy(s->endpoint, "http://127.0.0.1:9000/s3");
    s->size = 9223372036854775807ULL;
    strcpy(s->md5, "0123456789abcdef0123456789abcdef");
    s->has_base = true;
    s->base_exists = true;
    strcpy(s->base_etag, "abc-3");
    strcpy(s->upload_id, "u/1=2");
    strcpy(s->time, "2026-12-02T10:00:00Z");
    s->pid = 1234;
    strcpy(s->last_error, "PutObject: Input/output error\r\n");
    s->has_mode = true;
    s->mode = 0100644;
}

START_TEST(test_round_trip_keeps_every_field_and_escapes_control_bytes)
{
    struct om_sidecar a, b;
    sample(&a);
    struct om_buf out = {0};
    ck_assert_int_eq(om_sidecar_format(&a, &out), 0);
    /* one line per field: the newline and escape inside the key are encoded */
    int lines = 0;
    for (size_t i = 0; i < out.len; i++) {
        lines += out.data[i] == '\n';
        ck_assert(out.data[i] == '\n' || (out.data[i] >= 0x20 && out.data[i] < 0x7f));
    }
    ck_assert_int_eq(lines, 14);
    ck_assert_ptr_nonnull(strstr(out.data, "key=dir/a%20b%25c%0A%1B[31mred%C3%A9=x\n"));
    ck_assert_int_eq(om_sidecar_parse(out.data, out.len, &b), 0);
    ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
    om_buf_free(&out);
}
END_TEST

static int parse(const char *text, struct om_sidecar *s)
{
    return om_sidecar_parse(text, strlen(text), s);
}

START_TEST(test_bad_input_is_refused)
{
    struct om_sidecar s;
    ck_assert_int_eq(parse("", &s), -EINVAL);
    ck_assert_int_eq(parse("{\"key\": \"a\"}\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\n", &s), -EINVAL); /* no key */
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nnoequals\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a%2\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a%zz\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a%00b\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nsize=-1\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nsize=9223372036854775808\n", &s),
                     -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nsize=1e3\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nbase_exists=2\n", &s), -EINVAL);
    ck_assert_int_eq(parse("objmount-sidecar 1\nkey=a\nmd5=0123456789abcdef0123456789abcdef0\n",
                           &s),
                     -EINVAL); /* longer than its field */
    /* unknown fields are skipped, whatever their length */
    char big[6000];
    snprintf(big, sizeof(big), "objmount-sidecar 1\nkey=k\nfuture=%05000d\nsize=7", 1);
    ck_assert_int_eq(parse(big, &s), 0);
    ck_assert_str_eq(s.key, "k");
    ck_assert_uint_eq(s.size, 7);
    ck_assert(!s.has_base);
}
END_TEST

START_TEST(test_base_check)
{
    struct om_sidecar s;
    sample(&s);
    ck_assert_int_eq(om_sidecar_base_check(&s, true, "abc-3"), OM_BASE_UNCHANGED);
    ck_assert_int_eq(om_sidecar_base_check(&s, true, "abc-4"), OM_BASE_CHANGED);
    ck_assert_int_eq(om_sidecar_base_check(&s, false, ""), OM_BASE_REMOVED);
    s.base_exists = false;
    s.base_etag[0] = '\0';
    ck_assert_int_eq(om_sidecar_base_check(&s, false, ""), OM_BASE_UNCHANGED);
    ck_assert_int_eq(om_sidecar_base_check(&s, true, "x"), OM_BASE_CREATED);
    s.has_base = false;
    ck_assert_int_eq(om_sidecar_base_check(&s, false, ""), OM_BASE_UNKNOWN);
}
END_TEST

START_TEST(test_write_is_atomic_and_read_refuses_symlinks)
{
    char dir[] = "/tmp/om-sidecar-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[256], tmp[300], link_path[256];
    snprintf(path, sizeof(path), "%s/x.sidecar", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    snprintf(link_path, sizeof(link_path), "%s/l.sidecar", dir);
    struct om_sidecar a, b;
    sample(&a);
    ck_assert_int_eq(om_sidecar_write(path, &a, true), 0);
    ck_assert_int_eq(access(tmp, F_OK), -1);
    ck_assert_int_eq(om_sidecar_read(path, &b), 0);
    ck_assert_str_eq(b.key, a.key);
    ck_assert_int_eq(symlink(path, link_path), 0);
    ck_assert_int_eq(om_sidecar_read(link_path, &b), -ELOOP);
    char *side = om_sidecar_path("/r/1-2-3.data");
    ck_assert_str_eq(side, "/r/1-2-3.sidecar");
    free(side);
    ck_assert_ptr_null(om_sidecar_path("/r/1-2-3.json"));
    unlink(link_path);
    unlink(path);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sidecar");
    TCase *tc = tcase_create("sidecar");
    tcase_add_test(tc, test_round_trip_keeps_every_field_and_escapes_control_bytes);
    tcase_add_test(tc, test_bad_input_is_refused);
    tcase_add_test(tc, test_base_check);
    tcase_add_test(tc, test_write_is_atomic_and_read_refuses_symlinks);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
