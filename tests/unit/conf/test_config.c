/* Option strings, sources, environment and the documentation of options. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/config.h"

#include "check_main.h"

static void clear_env(void)
{
    static const char *const vars[] = {"AWS_ENDPOINT_URL", "AIS_ENDPOINT", "AWS_REGION",
                                       "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

START_TEST(test_option_string_parsed)
{
    struct om_config c;
    om_config_init(&c);
    char err[256];
    ck_assert_int_eq(om_config_parse_opts(&c,
                                          "endpoint=http://h:1/s3,region=eu-west-1,path_style,"
                                          "retries=3,connect_timeout=500ms,stall_timeout=2m,"
                                          "log_level=debug,anonymous",
                                          err, sizeof(err)),
                     0);
    ck_assert_str_eq(c.endpoint, "http://h:1/s3");
    ck_assert_str_eq(c.region, "eu-west-1");
    ck_assert_int_eq(c.addressing, OM_ADDR_PATH);
    ck_assert_uint_eq(c.retries, 3);
    ck_assert_uint_eq(c.connect_timeout_ms, 500);
    ck_assert_uint_eq(c.stall_timeout_ms, 120000);
    ck_assert_int_eq(c.log_level, OM_LOG_DEBUG);
    ck_assert(c.anonymous);
    struct om_http_config h;
    om_config_http(&c, &h);
    ck_assert_int_eq(h.max_attempts, 4);
    om_config_free(&c);
}
END_TEST

START_TEST(test_unknown_option_rejected_by_name)
{
    struct om_config c;
    om_config_init(&c);
    char err[256];
    ck_assert_int_eq(om_config_parse_opts(&c, "region=x,colour=blue", err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, "'colour'"));
    om_config_free(&c);
}
END_TEST

START_TEST(test_bad_values_rejected)
{
    struct om_config c;
    om_config_init(&c);
    char err[256];
    ck_assert_int_eq(om_config_parse_opts(&c, "retries=abc", err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "retries"));
    ck_assert_int_eq(om_config_parse_opts(&c, "retries=1000", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_parse_opts(&c, "connect_timeout=-1", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_parse_opts(&c, "log_level=loud", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_parse_opts(&c, "endpoint=", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_parse_opts(&c, "anonymous=maybe", err, sizeof(err)), -EINVAL);
    om_config_free(&c);
}
END_TEST

START_TEST(test_escaped_comma)
{
    struct om_config c;
    om_config_init(&c);
    char err[256];
    ck_assert_int_eq(om_config_parse_opts(&c, "credentials=/a\\,b,region=r", err, sizeof(err)), 0);
    ck_assert_str_eq(c.credentials, "/a,b");
    ck_assert_str_eq(c.region, "r");
    om_config_free(&c);
}
END_TEST

START_TEST(test_sources)
{
    struct om_config c;
    om_config_init(&c);
    char err[256];
    ck_assert_int_eq(om_config_set_source(&c, "bkt:/train/set1", err, sizeof(err)), 0);
    ck_assert_str_eq(c.bucket, "bkt");
    ck_assert_str_eq(c.prefix, "train/set1/");
    ck_assert_int_eq(om_config_set_source(&c, "bkt:data/", err, sizeof(err)), 0);
    ck_assert_str_eq(c.prefix, "data/");
    ck_assert_int_eq(om_config_set_source(&c, "bkt", err, sizeof(err)), 0);
    ck_assert_str_eq(c.prefix, "");
    ck_assert_int_eq(om_config_set_source(&c, "a/b", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_set_source(&c, ":x", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_config_set_source(&c, "b:x//y", err, sizeof(err)), -EINVAL);
    om_config_free(&c);
}
END_TEST

START_TEST(test_endpoint_and_region_from_environment)
{
    clear_env();
    struct om_config c;
    char err[256];
    om_config_init(&c);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000", 1);
    setenv("AWS_REGION", "eu-north-1", 1);
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.endpoint, "http://127.0.0.1:9000");
    ck_assert_str_eq(c.endpoint_source, "AWS_ENDPOINT_URL");
    ck_assert_str_eq(c.region, "eu-north-1");
    om_config_free(&c);

    clear_env();
    om_config_init(&c);
    setenv("AIS_ENDPOINT", "http://ais-gw:51080/", 1);
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.endpoint, "http://ais-gw:51080/s3");
    ck_assert_int_eq(c.addressing, OM_ADDR_PATH);
    ck_assert_str_eq(c.region, "us-east-1");
    om_config_free(&c);

    clear_env();
    om_config_init(&c);
    setenv("AWS_DEFAULT_REGION", "sa-east-1", 1);
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.endpoint, "https://s3.sa-east-1.amazonaws.com");
    om_config_free(&c);

    /* the option beats the environment */
    clear_env();
    om_config_init(&c);
    setenv("AWS_ENDPOINT_URL", "http://env:1", 1);
    om_config_parse_opts(&c, "endpoint=http://opt:2", err, sizeof(err));
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), 0);
    ck_assert_str_eq(c.endpoint, "http://opt:2");
    om_config_free(&c);

    /* an endpoint objmount could not send to the host it names is refused
     * at the start, saying why */
    static const char *const bad[] = {"endpoint=ftp://h:1", "endpoint=h:9000",
                                      "endpoint=http://gw%2539:9000/", "endpoint=http://a b/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        clear_env();
        om_config_init(&c);
        om_config_parse_opts(&c, bad[i], err, sizeof(err));
        ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, "is not an http:// or https:// URL with a host name"), "%s: %s",
                      bad[i], err);
        om_config_free(&c);
    }
}
END_TEST

START_TEST(test_ca_bundle_applies_to_https_only)
{
    clear_env();
    struct om_config c;
    char err[256];
    setenv("AWS_CA_BUNDLE", "/nonexistent/ca.pem", 1);
    om_config_init(&c);
    om_config_parse_opts(&c, "endpoint=http://127.0.0.1:1", err, sizeof(err));
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), 0);
    ck_assert_ptr_null(c.ca_bundle);
    om_config_free(&c);
    om_config_init(&c);
    om_config_parse_opts(&c, "endpoint=https://127.0.0.1:1", err, sizeof(err));
    ck_assert_int_eq(om_config_finalize(&c, NULL, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/ca.pem"));
    om_config_free(&c);
}
END_TEST

START_TEST(test_metadata_memory_default_and_values)
{
    uint64_t v = 1;
    const uint64_t gib = 1ULL << 30;
    ck_assert_int_eq(om_config_metadata_memory(NULL, 24 * gib, &v), 0);
    ck_assert_uint_eq(v, 3 * gib); /* RAM/8 */
    ck_assert_int_eq(om_config_metadata_memory(NULL, 1 * gib, &v), 0);
    ck_assert_uint_eq(v, 256ULL << 20); /* at least 256 MiB */
    ck_assert_int_eq(om_config_metadata_memory(NULL, 512 * gib, &v), 0);
    ck_assert_uint_eq(v, 8 * gib); /* at most 8 GiB */
    ck_assert_int_eq(om_config_metadata_memory("64M", gib, &v), 0);
    ck_assert_uint_eq(v, 64ULL << 20);
    ck_assert_int_eq(om_config_metadata_memory("off", gib, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(om_config_metadata_memory("0", gib, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(om_config_metadata_memory("100K", gib, &v), -EINVAL); /* below 1M */
    ck_assert_int_eq(om_config_metadata_memory("lots", gib, &v), -EINVAL);
}
END_TEST

/* Finalize opts; the result, with err. */
static int finalized(struct om_config *c, const char *opts, char *err, size_t errlen)
{
    clear_env();
    om_config_init(c);
    ck_assert_int_eq(om_config_parse_opts(c, opts, err, errlen), 0);
    return om_config_finalize(c, NULL, err, errlen);
}

START_TEST(test_manifest_is_read_only_and_trusts_metadata)
{
    struct om_config c;
    char err[256];
    ck_assert_int_eq(finalized(&c, "endpoint=http://h:1,manifest=/m", err, sizeof(err)), 0);
    ck_assert(c.ro);
    ck_assert_str_eq(c.metadata, "listing");
    ck_assert_uint_eq(c.attr_timeout_ms, 31536000000ULL);
    ck_assert_uint_eq(c.entry_timeout_ms, 31536000000ULL);
    ck_assert_uint_eq(c.negative_timeout_ms, 31536000000ULL);
    ck_assert(c.keep_cache);
    om_config_free(&c);
    /* a timeout given stays */
    ck_assert_int_eq(
        finalized(&c, "endpoint=http://h:1,manifest=s3:m,attr_timeout=60", err, sizeof(err)), 0);
    ck_assert_uint_eq(c.attr_timeout_ms, 60000);
    om_config_free(&c);
    static const char *const refused[][2] = {
        {"endpoint=http://h:1,manifest=/m,rw", "read-only"},
        {"endpoint=http://h:1,manifest=/m,metadata=head", "metadata=head"},
        {"endpoint=http://h:1,manifest=s3:", "needs a key"},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ck_assert_int_eq(finalized(&c, refused[i][0], err, sizeof(err)), -EINVAL);
        ck_assert_msg(strstr(err, refused[i][1]), "%s: %s", refused[i][0], err);
        om_config_free(&c);
    }
}
END_TEST

START_TEST(test_every_option_is_documented)
{
    const char *src = getenv("OBJMOUNT_SOURCE_DIR");
    ck_assert_msg(src != NULL, "OBJMOUNT_SOURCE_DIR not set");
    char path[1024];
    snprintf(path, sizeof(path), "%s/doc/options.md", src);
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    size_t count;
    const struct om_option_info *o = om_config_options(&count);
    for (size_t i = 0; i < count; i++) {
        char needle[128];
        snprintf(needle, sizeof(needle), "`%s", o[i].name);
        ck_assert_msg(strstr(text, needle) != NULL, "option %s is not in doc/options.md",
                      o[i].name);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("options");
    tcase_add_test(tc, test_option_string_parsed);
    tcase_add_test(tc, test_unknown_option_rejected_by_name);
    tcase_add_test(tc, test_bad_values_rejected);
    tcase_add_test(tc, test_escaped_comma);
    tcase_add_test(tc, test_sources);
    tcase_add_test(tc, test_endpoint_and_region_from_environment);
    tcase_add_test(tc, test_ca_bundle_applies_to_https_only);
    tcase_add_test(tc, test_manifest_is_read_only_and_trusts_metadata);
    tcase_add_test(tc, test_every_option_is_documented);
    tcase_add_test(tc, test_metadata_memory_default_and_values);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
