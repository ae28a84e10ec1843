/* AIStore backend pieces that need no cluster: its JSON listing pages, its
 * checksum properties as digests, its endpoints. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/ais.h"

#include "check_main.h"

struct seen {
    int n;
    char keys[8][64];
    bool dir[8];
    uint64_t size[8];
    char etag[8][OM_ETAG_MAX];
    time_t mtime[8];
};

static int collect(void *ud, const struct om_list_entry *e)
{
    struct seen *s = ud;
    ck_assert_int_lt(s->n, 8);
    snprintf(s->keys[s->n], sizeof(s->keys[0]), "%s", e->key);
    s->dir[s->n] = e->is_prefix;
    s->size[s->n] = e->size;
    snprintf(s->etag[s->n], OM_ETAG_MAX, "%s", e->etag);
    s->mtime[s->n] = e->mtime;
    s->n++;
    return 0;
}

#define PAGE(s) (s), strlen(s)

START_TEST(test_a_page_as_aistore_sends_it)
{
    /* verbatim from aisnode 5.0: a root listing without recursion */
    const char *page =
        "{\"uuid\":\"aK-LBlPat\",\"continuation_token\":\"\",\"entries\":[{\"name\":\"a/\","
        "\"flags\":256},{\"name\":\"e\",\"checksum\":\"57923984d6f88141\",\"atime\":"
        "\"2026-12-07T00:35:29.530199313Z\",\"version\":\"1\",\"size\":\"6\",\"flags\":64},"
        "{\"name\":\"empty\",\"checksum\":\"ef46db3751d8e999\",\"version\":\"2\",\"flags\":64,"
        "\"custom-md\":\"[mode:33188 mtime:1700000000]\"}],\"flags\":0}";
    struct seen s = {0};
    char *next = (char *)1;
    bool partial = true;
    ck_assert_int_eq(om_ais_parse_list(PAGE(page), NULL, collect, &s, &next, &partial), 0);
    ck_assert_ptr_null(next);
    ck_assert(!partial);
    ck_assert_int_eq(s.n, 3);
    ck_assert_str_eq(s.keys[0], "a/");
    ck_assert(s.dir[0]);
    ck_assert_str_eq(s.keys[1], "e");
    ck_assert(!s.dir[1]);
    ck_assert_uint_eq(s.size[1], 6);
    ck_assert_str_eq(s.etag[1], "1:57923984d6f88141");
    ck_assert_int_eq(s.mtime[1], 1796603729); /* its access time: the listing has no other */
    /* a 0-byte object has no size; objmount's own mtime wins */
    ck_assert_uint_eq(s.size[2], 0);
    ck_assert_str_eq(s.etag[2], "2:ef46db3751d8e999");
    ck_assert_int_eq(s.mtime[2], 1700000000);
}
END_TEST

START_TEST(test_custom_metadata_with_the_s3_prefix)
{
    /* as aisnode v1.5.0 lists what objmount now stores: the S3 API shows
     * keys that begin X-Amz-Meta- as user metadata */
    const char *page = "{\"entries\":[{\"name\":\"k\",\"custom-md\":\"[X-Amz-Meta-Mode:33188 "
                       "X-Amz-Meta-Mtime:1700000001]\",\"size\":\"3\",\"flags\":64},"
                       "{\"name\":\"l\",\"custom-md\":\"[X-Amz-Meta-Xmtime:5 notmtime:6]\","
                       "\"size\":\"1\",\"atime\":\"2026-12-07T00:35:29Z\",\"flags\":64}],\"flags\":0}";
    struct seen s = {0};
    ck_assert_int_eq(om_ais_parse_list(PAGE(page), NULL, collect, &s, NULL, NULL), 0);
    ck_assert_int_eq(s.n, 2);
    ck_assert_int_eq(s.mtime[0], 1700000001);
    ck_assert_int_eq(s.mtime[1], 1796603729); /* no key of ours: the access time */
}
END_TEST

START_TEST(test_pages_go_on_and_repeat_no_name)
{
    const char *page = "{\"continuation_token\":\"b\",\"entries\":[{\"name\":\"a\",\"size\":\"1\"},"
                       "{\"name\":\"b\",\"size\":\"2\"},{\"name\":\"c\",\"size\":\"3\"}],"
                       "\"flags\":1}";
    struct seen s = {0};
    char *next = NULL;
    bool partial = false;
    /* AIStore may start the next page at a name the last one had */
    ck_assert_int_eq(om_ais_parse_list(PAGE(page), "b", collect, &s, &next, &partial), 0);
    ck_assert_int_eq(s.n, 1);
    ck_assert_str_eq(s.keys[0], "c");
    ck_assert_str_eq(next, "b");
    ck_assert(partial); /* flags 1: a rebalance runs, the listing may miss names */
    free(next);
    /* nothing matched: entries is null */
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(om_ais_parse_list(PAGE("{\"continuation_token\":\"\",\"entries\":null}"),
                                       NULL, collect, &s, &next, NULL),
                     0);
    ck_assert_int_eq(s.n, 0);
    ck_assert_ptr_null(next);
}
END_TEST

START_TEST(test_what_is_not_a_page_is_refused)
{
    static const char *const bad[] = {
        "", "[]", "{\"entries\":{}}", "{\"entries\":[{\"size\":\"1\"}]}",
        "{\"entries\":[{\"name\":\"\"}]}", "{\"entries\":[{\"name\":\"a\",\"size\":7}]}",
        "{\"entries\":[{\"name\":\"a\",\"size\":\"-1\"}]}",
        "{\"entries\":[{\"name\":\"a\",\"size\":\"99999999999999999999\"}]}",
        "{\"entries\":[],\"continuation_token\":5}", "{\"entries\":[\"a\"]}",
        "{\"entries\":[{\"name\":\"a\",\"flags\":\"256\"}]}", "{\"entries\":[",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct seen s = {0};
        char *next = NULL;
        ck_assert_msg(om_ais_parse_list(PAGE(bad[i]), NULL, collect, &s, &next, NULL) == -EBADMSG,
                      "%s", bad[i]);
        ck_assert_ptr_null(next);
    }
}
END_TEST

static int stop_at_first(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(int *)ud)++;
    return OM_LIST_STOP;
}

START_TEST(test_a_callback_can_stop_the_page)
{
    int n = 0;
    char *next = NULL;
    const char *page = "{\"continuation_token\":\"b\",\"entries\":[{\"name\":\"a\"},{\"name\":\"b\"}]}";
    ck_assert_int_eq(om_ais_parse_list(PAGE(page), NULL, stop_at_first, &n, &next, NULL), 0);
    ck_assert_int_eq(n, 1);
    ck_assert_ptr_null(next); /* the caller has what it wanted */
}
END_TEST

START_TEST(test_checksum_properties_are_firm_digests)
{
    struct om_sum s;
    ck_assert(om_sum_from_ais("xxhash2", "26C7827D889F6DA3", &s));
    ck_assert_int_eq(s.type, OM_SUM_XXH64);
    ck_assert(s.firm);
    ck_assert_str_eq(s.hex, "26c7827d889f6da3");
    ck_assert(om_sum_from_ais("xxhash", "26c7827d889f6da3", &s));
    ck_assert_int_eq(s.type, OM_SUM_XXH64);
    ck_assert(om_sum_from_ais("md5", "5d41402abc4b2a76b9719d911017c592", &s));
    ck_assert_int_eq(s.type, OM_SUM_MD5);
    /* AIStore's multipart objects carry a CRC-32C combined from the parts */
    ck_assert(om_sum_from_ais("crc32c", "a52fa6f7", &s));
    ck_assert_int_eq(s.type, OM_SUM_CRC32C);
    struct om_local_sums have = {0};
    unsigned char c[OM_CRC32C_LEN];
    struct om_digest d;
    ck_assert_int_eq(om_digest_init(&d, OM_DIGEST_CRC32C), 0);
    om_digest_update(&d, "AAAAA", 5); /* in two parts, as it came */
    om_digest_update(&d, "BBB", 3);
    ck_assert_int_eq(om_digest_final(&d, c), 0);
    om_local_sums_set(&have, OM_DIGEST_CRC32C, c);
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MATCH);
    /* the standard check value of CRC-32C */
    ck_assert_uint_eq(om_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(om_crc32c(om_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    /* another type, and values that do not fit their type */
    ck_assert(!om_sum_from_ais("none", "", &s));
    ck_assert(!om_sum_from_ais("md5", "5d41402abc4b2a76", &s));
    ck_assert(!om_sum_from_ais("xxhash2", "26c7827d889f6dzz", &s));
    ck_assert(!om_sum_from_ais(NULL, "x", &s));
    ck_assert(!om_sum_from_ais("MD5", "5d41402abc4b2a76b9719d911017c592", &s));
}
END_TEST

START_TEST(test_endpoints_and_buckets)
{
    struct om_creds c = {.anonymous = true};
    char err[256];
    struct om_store_config cfg = {.kind = OM_STORE_AIS, .endpoint = "gw:51080", .bucket = "b"};
    ck_assert_ptr_null(om_ais_new(NULL, &cfg, &c, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "invalid endpoint"));
    cfg.endpoint = "http://gw:51080";
    cfg.bucket = "a/b";
    ck_assert_ptr_null(om_ais_new(NULL, &cfg, &c, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "bucket"));
    cfg.bucket = "data";
    struct om_ais *ais = om_ais_new(NULL, &cfg, &c, err, sizeof(err));
    ck_assert_ptr_nonnull(ais);
    const struct om_store_caps *caps = om_ais_caps(ais);
    ck_assert(!caps->dir_marker && !caps->part_replace && !caps->part_copy && caps->rename);
    ck_assert_int_eq(caps->max_parts, 9999);
    om_ais_free(ais);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ais");
    TCase *tc = tcase_create("ais");
    tcase_add_test(tc, test_a_page_as_aistore_sends_it);
    tcase_add_test(tc, test_custom_metadata_with_the_s3_prefix);
    tcase_add_test(tc, test_pages_go_on_and_repeat_no_name);
    tcase_add_test(tc, test_what_is_not_a_page_is_refused);
    tcase_add_test(tc, test_a_callback_can_stop_the_page);
    tcase_add_test(tc, test_checksum_properties_are_firm_digests);
    tcase_add_test(tc, test_endpoints_and_buckets);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
