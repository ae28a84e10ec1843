/* S3 layer pieces that need no server: addressing, error mapping, ETag math,
 * metadata headers. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/s3.h"

#include "check_main.h"

static struct om_s3 *client(const char *endpoint, const char *bucket, enum om_addressing a)
{
    struct om_creds c = {.anonymous = true};
    struct om_store_config cfg = {.endpoint = endpoint, .bucket = bucket, .addressing = a};
    char err[256];
    struct om_s3 *s3 = om_s3_new(NULL, &cfg, &c, err, sizeof(err));
    ck_assert_msg(s3 != NULL, "%s", err);
    return s3;
}

START_TEST(test_path_style_urls)
{
    struct om_s3 *s3 = client("http://127.0.0.1:9000", "data", OM_ADDR_AUTO);
    char *u = om_s3_url(s3, "train/a b+c.jpg", NULL);
    ck_assert_str_eq(u, "http://127.0.0.1:9000/data/train/a%20b%2Bc.jpg");
    free(u);
    u = om_s3_url(s3, NULL, "list-type=2&prefix=a%2F");
    ck_assert_str_eq(u, "http://127.0.0.1:9000/data?list-type=2&prefix=a%2F");
    free(u);
    om_s3_free(s3);
}
END_TEST

START_TEST(test_endpoint_path_prefix_for_aistore)
{
    struct om_s3 *s3 = client("http://gw:51080/s3/", "ais-bucket", OM_ADDR_AUTO);
    char *u = om_s3_url(s3, "x/y", "uploads=");
    ck_assert_str_eq(u, "http://gw:51080/s3/ais-bucket/x/y?uploads=");
    free(u);
    om_s3_free(s3);
}
END_TEST

START_TEST(test_virtual_host_urls)
{
    struct om_s3 *s3 = client("https://s3.eu-west-1.amazonaws.com", "my-bucket", OM_ADDR_AUTO);
    char *u = om_s3_url(s3, "k", NULL);
    ck_assert_str_eq(u, "https://my-bucket.s3.eu-west-1.amazonaws.com/k");
    free(u);
    u = om_s3_url(s3, NULL, "list-type=2");
    ck_assert_str_eq(u, "https://my-bucket.s3.eu-west-1.amazonaws.com/?list-type=2");
    free(u);
    om_s3_free(s3);
    /* dotted names cannot be virtual hosts under TLS: path style */
    s3 = client("https://s3.amazonaws.com", "my.bucket", OM_ADDR_AUTO);
    u = om_s3_url(s3, "k", NULL);
    ck_assert_str_eq(u, "https://s3.amazonaws.com/my.bucket/k");
    free(u);
    om_s3_free(s3);
    /* forced either way */
    s3 = client("http://minio.local:9000", "b1", OM_ADDR_VHOST);
    u = om_s3_url(s3, "k", NULL);
    ck_assert_str_eq(u, "http://b1.minio.local:9000/k");
    free(u);
    om_s3_free(s3);
    s3 = client("https://s3.amazonaws.com", "bucket1", OM_ADDR_PATH);
    u = om_s3_url(s3, "k", NULL);
    ck_assert_str_eq(u, "https://s3.amazonaws.com/bucket1/k");
    free(u);
    om_s3_free(s3);
}
END_TEST

START_TEST(test_bad_endpoints_rejected)
{
    struct om_creds c = {.anonymous = true};
    char err[256];
    struct om_store_config cfg = {.endpoint = "s3.example.com", .bucket = "b"};
    ck_assert_ptr_null(om_s3_new(NULL, &cfg, &c, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "invalid endpoint"));
    cfg.endpoint = "http://h/?x=1";
    ck_assert_ptr_null(om_s3_new(NULL, &cfg, &c, err, sizeof(err)));
    cfg.endpoint = "http://h";
    cfg.bucket = "a/b";
    ck_assert_ptr_null(om_s3_new(NULL, &cfg, &c, err, sizeof(err)));
    ck_assert_ptr_nonnull(strstr(err, "bucket"));
}
END_TEST

START_TEST(test_error_table)
{
    ck_assert_int_eq(om_store_errno(404, "NoSuchKey"), -ENOENT);
    ck_assert_int_eq(om_store_errno(404, "NoSuchBucket"), -ENOENT);
    ck_assert_int_eq(om_store_errno(403, "AccessDenied"), -EACCES);
    ck_assert_int_eq(om_store_errno(403, "SignatureDoesNotMatch"), -EACCES);
    ck_assert_int_eq(om_store_errno(403, "RequestTimeTooSkewed"), -EACCES);
    ck_assert_int_eq(om_store_errno(412, "PreconditionFailed"), -ESTALE);
    ck_assert_int_eq(om_store_errno(400, "BadDigest"), -EBADMSG);
    ck_assert_int_eq(om_store_errno(400, "EntityTooLarge"), -EFBIG);
    ck_assert_int_eq(om_store_errno(400, "KeyTooLongError"), -ENAMETOOLONG);
    ck_assert_int_eq(om_store_errno(503, "SlowDown"), -EAGAIN);
    ck_assert_int_eq(om_store_errno(501, "NotImplemented"), -ENOSYS);
    /* without a code, the status decides */
    ck_assert_int_eq(om_store_errno(404, ""), -ENOENT);
    ck_assert_int_eq(om_store_errno(403, NULL), -EACCES);
    ck_assert_int_eq(om_store_errno(412, ""), -ESTALE);
    ck_assert_int_eq(om_store_errno(416, ""), -ERANGE);
    ck_assert_int_eq(om_store_errno(500, ""), -EIO);
    ck_assert_int_eq(om_store_errno(307, ""), -EREMOTE);
    ck_assert_int_eq(om_store_errno(418, "SomethingNew"), -EIO);
    /* a file and a key under it at once, on stores that keep files */
    ck_assert_int_eq(om_store_errno(409, "ObjectParentIsFile"), -ENOTDIR);
    ck_assert_int_eq(om_store_errno(409, "ExistingObjectIsDirectory"), -EEXIST);
}
END_TEST

START_TEST(test_multipart_etag)
{
    unsigned char md5s[2][OM_MD5_LEN];
    om_md5("part1", 5, md5s[0]);
    om_md5("part2", 5, md5s[1]);
    struct om_sum sum;
    om_sum_of_parts((const unsigned char(*)[OM_MD5_LEN])md5s, 2, &sum);
    ck_assert_int_eq(sum.type, OM_SUM_MD5_PARTS);
    ck_assert_int_eq(sum.parts, 2);
    ck_assert_str_eq(sum.hex, "620e8b191a353bdc9189840bb3904928");
}
END_TEST

START_TEST(test_etag_shapes_give_digests_never_firm)
{
    struct om_sum s;
    om_s3_sum_from_etag("D41D8CD98F00B204E9800998ECF8427E", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_MD5);
    ck_assert(!s.firm);
    ck_assert_str_eq(s.hex, "d41d8cd98f00b204e9800998ecf8427e");
    /* SSE-KMS and SSE-C ETags are not MD5s */
    om_s3_sum_from_etag("d41d8cd98f00b204e9800998ecf8427e", true, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("620e8b191a353bdc9189840bb3904928-2", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_MD5_PARTS);
    ck_assert_int_eq(s.parts, 2);
    ck_assert_str_eq(s.hex, "620e8b191a353bdc9189840bb3904928");
    /* not a part count */
    om_s3_sum_from_etag("620e8b191a353bdc9189840bb3904928-0", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("620e8b191a353bdc9189840bb3904928-02", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("620e8b191a353bdc9189840bb3904928-10001", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    /* AIStore: "v1-<checksum>-<mtime in base 36>" (core/lom.go) */
    om_s3_sum_from_etag("v1-26c7827d889f6da3-dne297nd9gj2", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_XXH64);
    ck_assert_str_eq(s.hex, "26c7827d889f6da3");
    ck_assert(!s.firm);
    om_s3_sum_from_etag("v1-26c7827d-dne297nd9gj2", false, &s); /* crc32c: not ours */
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("v1-zz", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
    om_s3_sum_from_etag("W/\"abc\"", false, &s);
    ck_assert_int_eq(s.type, OM_SUM_NONE);
}
END_TEST

START_TEST(test_a_digest_proves_only_what_it_can)
{
    struct om_local_sums have = {.have_md5 = true};
    om_md5("hello", 5, have.md5);
    struct om_sum s;
    om_s3_sum_from_etag("5d41402abc4b2a76b9719d911017c592", false, &s);
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MATCH);
    /* a 32-hex ETag that differs proves nothing: it may not be an MD5 */
    om_s3_sum_from_etag("00000000000000000000000000000000", false, &s);
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_NONE);
    /* a firm digest that differs is another content */
    s.firm = true;
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MISMATCH);
    /* a digest the writer lacks must be computed */
    om_s3_sum_from_etag("v1-26c7827d889f6da3-dne297nd9gj2", false, &s);
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MISSING);
    struct om_digest d;
    unsigned char x[OM_XXH64_LEN];
    ck_assert_int_eq(om_digest_init(&d, OM_DIGEST_XXH64), 0);
    om_digest_update(&d, "hello", 5);
    ck_assert_int_eq(om_digest_final(&d, x), 0);
    om_local_sums_set(&have, OM_DIGEST_XXH64, x);
    /* XXH64("hello") is what AIStore stored for "hello" */
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MATCH);
    /* MD5 of parts: only the same cut into parts compares */
    struct om_local_sums parts = {.have_parts = true, .nparts = 3};
    om_s3_sum_from_etag("620e8b191a353bdc9189840bb3904928-2", false, &s);
    ck_assert_int_eq(om_sum_check(&s, &parts), OM_PROOF_NONE);
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_MISSING);
    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(om_sum_check(&s, &have), OM_PROOF_NONE);
}
END_TEST

START_TEST(test_object_headers)
{
    struct om_header_list h = {0};
    om_headers_add(&h, "Content-Length", "1024");
    om_headers_add(&h, "ETag", "\"d41d8cd98f00b204e9800998ecf8427e\"");
    om_headers_add(&h, "Last-Modified", "Wed, 12 Oct 2009 17:50:00 GMT");
    om_headers_add(&h, "Content-Type", "image/jpeg");
    om_headers_add(&h, "x-amz-meta-mode", "33188"); /* s3fs: decimal 0100644 */
    om_headers_add(&h, "x-amz-meta-uid", "1000");
    om_headers_add(&h, "x-amz-meta-gid", "100");
    om_headers_add(&h, "x-amz-meta-mtime", "1700000000.5");
    struct om_object o;
    om_s3_object_from_headers(&h, &o);
    ck_assert_uint_eq(o.size, 1024);
    ck_assert_str_eq(o.etag, "d41d8cd98f00b204e9800998ecf8427e");
    ck_assert_int_eq(o.mtime, 1255369800);
    ck_assert_str_eq(o.content_type, "image/jpeg");
    ck_assert(o.has_mode && o.mode == 0100644);
    ck_assert(o.has_uid && o.uid == 1000);
    ck_assert(o.has_gid && o.gid == 100);
    ck_assert(o.has_mtime && o.meta_mtime.tv_sec == 1700000000);
    ck_assert_int_ge(o.meta_mtime.tv_nsec, 499999000);
    om_headers_free(&h);
    /* a ranged answer names the whole size in Content-Range */
    om_headers_add(&h, "Content-Length", "10");
    om_headers_add(&h, "Content-Range", "bytes 0-9/5000");
    om_headers_add(&h, "x-amz-meta-mode", "garbage");
    om_s3_object_from_headers(&h, &o);
    ck_assert_uint_eq(o.size, 5000);
    ck_assert(!o.has_mode);
    om_headers_free(&h);
}
END_TEST

START_TEST(test_aistore_states_two_digests)
{
    /* AIStore's S3 HEAD of a multipart object: the MD5-of-parts ETag and
     * its own checksum of the whole, crc32c when the parts came out of
     * order (seen on v1.5.0 with md5 buckets) */
    struct om_header_list h = {0};
    om_headers_add(&h, "Content-Length", "17825792");
    om_headers_add(&h, "ETag", "\"682c7a3001e1a413282fc6aa7916659b-4\"");
    om_headers_add(&h, "x-amz-meta-ais-cksum-type", "crc32c");
    om_headers_add(&h, "x-amz-meta-ais-cksum-val", "46e7764a");
    struct om_object o;
    om_s3_object_from_headers(&h, &o);
    ck_assert_int_eq(o.sum.type, OM_SUM_CRC32C);
    ck_assert(o.sum.firm);
    ck_assert_str_eq(o.sum.hex, "46e7764a");
    ck_assert_int_eq(o.etag_sum.type, OM_SUM_MD5_PARTS);
    ck_assert_int_eq(o.etag_sum.parts, 4);
    ck_assert_str_eq(o.etag_sum.hex, "682c7a3001e1a413282fc6aa7916659b");
    om_headers_free(&h);
    /* a checksum of a size that is not its type's is no checksum: the
     * ETag's digest is the only one, where a digest always was */
    om_headers_add(&h, "ETag", "\"682c7a3001e1a413282fc6aa7916659b-4\"");
    om_headers_add(&h, "x-amz-meta-ais-cksum-type", "md5");
    om_headers_add(&h, "x-amz-meta-ais-cksum-val", "cd08b8bd");
    om_s3_object_from_headers(&h, &o);
    ck_assert_int_eq(o.sum.type, OM_SUM_MD5_PARTS);
    ck_assert_int_eq(o.etag_sum.type, OM_SUM_NONE);
    om_headers_free(&h);
    /* any other server: one digest */
    om_headers_add(&h, "ETag", "\"d41d8cd98f00b204e9800998ecf8427e\"");
    om_s3_object_from_headers(&h, &o);
    ck_assert_int_eq(o.sum.type, OM_SUM_MD5);
    ck_assert_int_eq(o.etag_sum.type, OM_SUM_NONE);
    om_headers_free(&h);
}
END_TEST

START_TEST(test_numbers_from_the_server_are_checked)
{
    uint64_t v = 7;
    ck_assert_int_eq(om_parse_uint("0", OM_UINT_MAX, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(om_parse_uint("9223372036854775807", OM_UINT_MAX, &v), 0);
    ck_assert_uint_eq(v, 9223372036854775807ULL);
    ck_assert_int_eq(om_parse_uint("9223372036854775808", OM_UINT_MAX, &v), -ERANGE);
    ck_assert_int_eq(om_parse_uint("18446744073709551615", UINT64_MAX, &v), -ERANGE);
    ck_assert_int_eq(om_parse_uint("99999999999999999999999", OM_UINT_MAX, &v), -ERANGE);
    ck_assert_int_eq(om_parse_uint("-1", OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint("+1", OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint(" 1", OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint("1x", OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint("", OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint(NULL, OM_UINT_MAX, &v), -EINVAL);
    ck_assert_int_eq(om_parse_uint("256", 255, &v), -ERANGE);
    ck_assert_int_eq(om_parse_uint("5", 3, &v), -ERANGE);
    ck_assert_int_eq(om_parse_uint("3", 3, &v), 0);

    uint64_t a, b, t;
    ck_assert_int_eq(om_http_parse_content_range("bytes 0-9/100", &a, &b, &t), 0);
    ck_assert(a == 0 && b == 9 && t == 100);
    ck_assert_int_eq(om_http_parse_content_range("bytes 5-5/*", &a, &b, &t), 0);
    ck_assert(t == UINT64_MAX);
    ck_assert_int_eq(om_http_parse_content_range("bytes 9-0/100", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range("bytes 0-100/100", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range("bytes -1-5/100", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range("bytes 0-5/-1", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range("bytes 0-5/", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range("bytes */100", &a, &b, &t), -EINVAL);
    ck_assert_int_eq(om_http_parse_content_range(NULL, &a, &b, &t), -EINVAL);

    time_t when;
    ck_assert_int_eq(om_parse_http_date("Wed, 12 Oct 2009 17:50:00 GMT", &when), 0);
    ck_assert_int_eq(when, 1255369800);
    ck_assert_int_eq(om_parse_http_date("not a date", &when), -EINVAL);
}
END_TEST

START_TEST(test_bad_sizes_and_mtimes_are_ignored)
{
    struct om_header_list h = {0};
    struct om_object o;
    om_headers_add(&h, "Content-Length", "-1");
    om_headers_add(&h, "x-amz-meta-mtime", "1e300");
    om_s3_object_from_headers(&h, &o);
    ck_assert_uint_eq(o.size, 0);
    ck_assert(!o.has_mtime);
    om_headers_free(&h);
    om_headers_add(&h, "Content-Length", "18446744073709551615");
    om_headers_add(&h, "x-amz-meta-mtime", "1700000000.5");
    om_s3_object_from_headers(&h, &o);
    ck_assert_uint_eq(o.size, 0);
    ck_assert(o.has_mtime && o.meta_mtime.tv_sec == 1700000000);
    om_headers_free(&h);
    ck_assert(om_region_valid("eu-west-1"));
    ck_assert(!om_region_valid("evil.com/x"));
    ck_assert(!om_region_valid("EU"));
    ck_assert(!om_region_valid(""));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("s3");
    TCase *tc = tcase_create("s3");
    tcase_add_test(tc, test_path_style_urls);
    tcase_add_test(tc, test_endpoint_path_prefix_for_aistore);
    tcase_add_test(tc, test_virtual_host_urls);
    tcase_add_test(tc, test_bad_endpoints_rejected);
    tcase_add_test(tc, test_error_table);
    tcase_add_test(tc, test_multipart_etag);
    tcase_add_test(tc, test_etag_shapes_give_digests_never_firm);
    tcase_add_test(tc, test_a_digest_proves_only_what_it_can);
    tcase_add_test(tc, test_object_headers);
    tcase_add_test(tc, test_aistore_states_two_digests);
    tcase_add_test(tc, test_numbers_from_the_server_are_checked);
    tcase_add_test(tc, test_bad_sizes_and_mtimes_are_ignored);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
