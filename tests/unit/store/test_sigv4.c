/* SigV4 against the examples AWS publishes for S3 (Signature Calculations for
 * the Authorization Header: Transferring Payload in a Single Chunk). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/digest.h"
#include "objmount/sigv4.h"

#include "check_main.h"

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define HOST "examplebucket.s3.amazonaws.com"
#define T_20130524 1369353600 /* 2013-05-24T00:00:00Z */

static struct om_sigv4_input base(const char *method, const char *path, const char *query)
{
    struct om_sigv4_input in = {
        .method = method,
        .host = HOST,
        .path = path,
        .query = query,
        .payload_hash = OM_EMPTY_SHA256,
        .region = "us-east-1",
        .service = "s3",
        .now = T_20130524,
    };
    return in;
}

START_TEST(test_get_object_with_range)
{
    struct om_header h[] = {{"Range", "bytes=0-9"}};
    struct om_sigv4_input in = base("GET", "/test.txt", NULL);
    in.headers = h;
    in.nheaders = 1;
    struct om_sigv4_output out;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), 0);
    ck_assert_str_eq(out.amz_date, "20130524T000000Z");
    ck_assert_str_eq(out.authorization,
                     "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
                     "aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                     "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    free(out.authorization);
}
END_TEST

START_TEST(test_put_object_with_body_and_encoded_key)
{
    const char *body = "Welcome to Amazon S3.";
    unsigned char h[OM_SHA256_LEN];
    char hex[65];
    om_sha256(body, strlen(body), h);
    om_hex(h, sizeof(h), hex);
    ck_assert_str_eq(hex, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    struct om_header hs[] = {{"Date", "Fri, 24 May 2013 00:00:00 GMT"},
                             {"x-amz-storage-class", "REDUCED_REDUNDANCY"}};
    struct om_sigv4_input in = base("PUT", "/test%24file.text", NULL);
    in.headers = hs;
    in.nheaders = 2;
    in.payload_hash = hex;
    struct om_buf canon = {0};
    char canon_hex[65];
    ck_assert_int_eq(om_sigv4_canonical_request(&in, "20130524T000000Z", NULL, &canon), 0);
    om_sha256(canon.data, canon.len, h);
    om_hex(h, sizeof(h), canon_hex);
    ck_assert_str_eq(canon_hex, "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d");
    om_buf_free(&canon);
    struct om_sigv4_output out;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), 0);
    ck_assert_str_eq(out.signature,
                     "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    ck_assert_ptr_nonnull(
        strstr(out.authorization,
               "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"));
    free(out.authorization);
}
END_TEST

START_TEST(test_get_bucket_lifecycle_query_without_value)
{
    struct om_sigv4_input in = base("GET", "/", "lifecycle");
    struct om_sigv4_output out;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), 0);
    ck_assert_str_eq(out.signature,
                     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    free(out.authorization);
    in.query = "lifecycle=";
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), 0);
    ck_assert_str_eq(out.signature,
                     "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
    free(out.authorization);
}
END_TEST

START_TEST(test_list_objects_query_sorted)
{
    struct om_sigv4_input in = base("GET", "/", "prefix=J&max-keys=2");
    struct om_sigv4_output out;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), 0);
    ck_assert_str_eq(out.signature,
                     "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    free(out.authorization);
}
END_TEST

START_TEST(test_session_token_is_signed)
{
    struct om_sigv4_input in = base("HEAD", "/key.pdf", NULL);
    struct om_sigv4_output a, b;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &a), 0);
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, "TOKEN", &b), 0);
    ck_assert_ptr_nonnull(strstr(b.authorization, "x-amz-security-token"));
    ck_assert_ptr_null(strstr(a.authorization, "x-amz-security-token"));
    ck_assert_str_ne(a.signature, b.signature);
    ck_assert_ptr_null(strstr(b.authorization, SK));
    free(a.authorization);
    free(b.authorization);
}
END_TEST

START_TEST(test_canonical_query_reencodes_and_sorts)
{
    struct om_buf q = {0};
    ck_assert_int_eq(om_sigv4_canonical_query("utm=1&pid=a%2Fb&uploads&x=%7e+y", &q), 0);
    ck_assert_str_eq(q.data, "pid=a%2Fb&uploads=&utm=1&x=~%2By");
    om_buf_free(&q);
}
END_TEST

START_TEST(test_header_values_trimmed_and_collapsed)
{
    struct om_header h1[] = {{"X-Amz-Meta-A", "  two   spaces  "}};
    struct om_header h2[] = {{"x-amz-meta-a", "two spaces"}};
    struct om_sigv4_input in = base("GET", "/k", NULL);
    struct om_sigv4_output a, b;
    in.headers = h1;
    in.nheaders = 1;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &a), 0);
    in.headers = h2;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &b), 0);
    ck_assert_str_eq(a.signature, b.signature);
    free(a.authorization);
    free(b.authorization);
}
END_TEST

START_TEST(test_missing_fields_rejected)
{
    struct om_sigv4_input in = base("GET", "/k", NULL);
    in.region = NULL;
    struct om_sigv4_output out;
    ck_assert_int_eq(om_sigv4_sign(&in, AK, SK, NULL, &out), -EINVAL);
    ck_assert_ptr_null(out.authorization);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sigv4");
    TCase *tc = tcase_create("aws-examples");
    tcase_add_test(tc, test_get_object_with_range);
    tcase_add_test(tc, test_put_object_with_body_and_encoded_key);
    tcase_add_test(tc, test_get_bucket_lifecycle_query_without_value);
    tcase_add_test(tc, test_list_objects_query_sorted);
    tcase_add_test(tc, test_session_token_is_signed);
    tcase_add_test(tc, test_canonical_query_reencodes_and_sorts);
    tcase_add_test(tc, test_header_values_trimmed_and_collapsed);
    tcase_add_test(tc, test_missing_fields_rejected);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
