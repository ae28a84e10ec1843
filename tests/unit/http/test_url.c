/* URL parsing, S3 key encoding and redirect resolution. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/url.h"

#include "check_main.h"

static char *enc(const char *s, bool keep_slash)
{
    struct om_buf b = {0};
    ck_assert_int_eq(om_uri_encode(&b, s, strlen(s), keep_slash), 0);
    return om_buf_steal(&b);
}

START_TEST(test_key_encoding_follows_s3_rules)
{
    char *e = enc("a b+c~d%e/f.g_h-i", true);
    ck_assert_str_eq(e, "a%20b%2Bc~d%25e/f.g_h-i");
    free(e);
    e = enc("a/b", false);
    ck_assert_str_eq(e, "a%2Fb");
    free(e);
    e = enc("d\xc3\xa9j\xc3\xa0 vu/\xe6\x97\xa5\xe6\x9c\xac", true); /* déjà vu/日本 */
    ck_assert_str_eq(e, "d%C3%A9j%C3%A0%20vu/%E6%97%A5%E6%9C%AC");
    free(e);
    e = enc("!*'();:@&=$,?#[]", true);
    ck_assert_str_eq(e, "%21%2A%27%28%29%3B%3A%40%26%3D%24%2C%3F%23%5B%5D");
    free(e);
}
END_TEST

START_TEST(test_decode_keeps_plus_and_bad_escapes)
{
    struct om_buf b = {0};
    ck_assert_int_eq(om_uri_decode(&b, "a+b%20c%2g%", 11), 0);
    ck_assert_str_eq(b.data, "a+b c%2g%");
    om_buf_free(&b);
}
END_TEST

START_TEST(test_parse_urls)
{
    struct om_url u;
    ck_assert_int_eq(om_url_parse("http://127.0.0.1:9000/s3?x=1", &u), 0);
    ck_assert(!u.https);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_int_eq(u.port, 9000);
    ck_assert_str_eq(u.path, "/s3");
    ck_assert_str_eq(u.query, "x=1");
    char *h = om_url_host_header(&u);
    ck_assert_str_eq(h, "127.0.0.1:9000");
    free(h);
    om_url_free(&u);

    ck_assert_int_eq(om_url_parse("HTTPS://S3.Example.COM", &u), 0);
    ck_assert(u.https);
    ck_assert_int_eq(u.port, 443);
    ck_assert_str_eq(u.host, "s3.example.com");
    ck_assert_str_eq(u.path, "/");
    ck_assert_ptr_null(u.query);
    h = om_url_host_header(&u);
    ck_assert_str_eq(h, "s3.example.com");
    free(h);
    om_url_free(&u);

    ck_assert_int_eq(om_url_parse("http://[::1]:8080/a", &u), 0);
    ck_assert_str_eq(u.host, "[::1]");
    ck_assert_int_eq(u.port, 8080);
    om_url_free(&u);

    ck_assert_int_eq(om_url_parse("ftp://x/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://:80/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://h:99999/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://user:pw@h/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("localhost:9000", &u), -EINVAL);
    /* curl decodes %XX in a host: "gw%2539" would come back as "gw%39",
     * then as "gw9", a different host each time it is formatted */
    ck_assert_int_eq(om_url_parse("http://gw%2539/b", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://gw%39/b", &u), 0);
    ck_assert_str_eq(u.host, "gw9"); /* decoded once, then stable */
    om_url_free(&u);
    ck_assert_int_eq(om_url_parse("http://my_host.internal-1:80/b", &u), 0);
    ck_assert_str_eq(u.host, "my_host.internal-1");
    om_url_free(&u);
}
END_TEST

START_TEST(test_redirect_location_keeps_query_verbatim)
{
    char *out = NULL;
    ck_assert_int_eq(om_url_resolve("http://gw:8080/s3/b/k%20ey?partNumber=1&uploadId=x",
                                    "http://t1:8081/s3/b/k%20ey?partNumber=1&uploadId=x&pid=Ab%2B&utm=17",
                                    &out),
                     0);
    ck_assert_str_eq(out, "http://t1:8081/s3/b/k%20ey?partNumber=1&uploadId=x&pid=Ab%2B&utm=17");
    free(out);
}
END_TEST

START_TEST(test_redirect_path_is_normalized_to_s3_form)
{
    char *out = NULL;
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "http://t/s3/b/a b+%7e", &out), 0);
    ck_assert_str_eq(out, "http://t/s3/b/a%20b%2B~");
    free(out);
}
END_TEST

START_TEST(test_redirect_relative_forms)
{
    char *out = NULL;
    ck_assert_int_eq(om_url_resolve("https://gw:8443/s3/b/k?q", "/other/key?pid=1", &out), 0);
    ck_assert_str_eq(out, "https://gw:8443/other/key?pid=1");
    free(out);
    ck_assert_int_eq(om_url_resolve("https://gw/s3/b/k", "//t2:9/x", &out), 0);
    ck_assert_str_eq(out, "https://t2:9/x");
    free(out);
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "k2?a=1", &out), 0);
    ck_assert_str_eq(out, "http://gw/s3/b/k2?a=1");
    free(out);
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "gopher://x/", &out), -EINVAL);
}
END_TEST

START_TEST(test_normalize_path)
{
    char *p = om_uri_normalize_path("/s3/b/%7Ea%2fb c");
    ck_assert_str_eq(p, "/s3/b/~a/b%20c");
    free(p);
}
END_TEST

START_TEST(test_host_lists_match_names_suffixes_and_cidrs)
{
    const char *l = "t1.example.com; *.ais.internal ,10.1.0.0/16 fd00::/8 192.168.5.7";
    ck_assert(om_host_in_list(l, "t1.example.com"));
    ck_assert(om_host_in_list(l, "T1.Example.COM"));
    ck_assert(!om_host_in_list(l, "t2.example.com"));
    ck_assert(!om_host_in_list(l, "t1.example.com.evil.org"));
    ck_assert(om_host_in_list(l, "node3.ais.internal"));
    ck_assert(!om_host_in_list(l, "ais.internal"));
    ck_assert(!om_host_in_list(l, "evilais.internal"));
    ck_assert(om_host_in_list(l, "10.1.200.3"));
    ck_assert(!om_host_in_list(l, "10.2.0.1"));
    ck_assert(om_host_in_list(l, "[fd12::1]"));
    ck_assert(!om_host_in_list(l, "[fe80::1]"));
    ck_assert(om_host_in_list(l, "192.168.5.7"));
    ck_assert(!om_host_in_list(l, "192.168.5.70"));
    ck_assert(om_host_in_list("10.0.0.0/7", "11.255.0.1"));
    ck_assert(!om_host_in_list("10.0.0.0/7", "12.0.0.1"));
    ck_assert(om_host_in_list("*", "anything"));
    ck_assert(!om_host_in_list(NULL, "h"));
    ck_assert(!om_host_in_list("", "h"));
    char err[256];
    ck_assert_int_eq(om_host_list_check(l, err, sizeof(err)), 0);
    ck_assert_int_eq(om_host_list_check(NULL, err, sizeof(err)), 0);
    ck_assert_int_eq(om_host_list_check("a;10.0.0.0/33", err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "10.0.0.0/33"));
    ck_assert_int_eq(om_host_list_check("h/x", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_host_list_check("a*b", err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(om_host_list_check("us@er", err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(test_credentials_go_only_to_named_hosts)
{
    /* the endpoint host, any port, and BUCKET.host with virtual hosts */
    ck_assert(om_creds_allowed("gw", NULL, NULL, "gw", false, true));
    ck_assert(om_creds_allowed("s3.aws", "bkt", NULL, "bkt.s3.aws", true, false));
    ck_assert(!om_creds_allowed("s3.aws", NULL, NULL, "bkt.s3.aws", true, false));
    /* a redirect elsewhere: nothing unless named */
    ck_assert(!om_creds_allowed("gw", NULL, NULL, "target", false, false));
    ck_assert(!om_creds_allowed("gw", NULL, NULL, "target", true, true));
    ck_assert(om_creds_allowed("gw", NULL, "target", "target", false, false));
    ck_assert(om_creds_allowed("gw", NULL, "target", "target", true, true));
    /* never a bearer token over plain http to another host */
    ck_assert(!om_creds_allowed("gw", NULL, "target", "target", false, true));
    ck_assert(!om_creds_allowed("gw", NULL, "*", "evil", false, true));
    ck_assert(!om_creds_allowed("gw", NULL, NULL, NULL, true, false));
}
END_TEST

START_TEST(test_urls_are_parsed_by_curl)
{
    struct om_url u;
    /* what curl would connect to is what we sign for */
    ck_assert_int_eq(om_url_parse("http://h:/x", &u) == 0 ? u.port : -1, 80);
    om_url_free(&u);
    ck_assert_int_eq(om_url_parse("http://h:0/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://a@b/", &u), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://h/a\nb", &u), -EINVAL);
    char *out = NULL;
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "file:///etc/passwd", &out), -EINVAL);
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "", &out), -EINVAL);
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "http://u:p@t/x", &out), -EINVAL);
    ck_assert_int_eq(om_url_parse("http://h/a b", &u), -EINVAL); /* never sent raw */
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "http://t/x y?a=b c", &out), 0);
    ck_assert_str_eq(out, "http://t/x%20y?a=b%20c");
    free(out);
    ck_assert_int_eq(om_url_resolve("http://gw/s3/b/k", "../c?x=1#frag", &out), 0);
    ck_assert_str_eq(out, "http://gw/s3/c?x=1");
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("url");
    TCase *tc = tcase_create("url");
    tcase_add_test(tc, test_key_encoding_follows_s3_rules);
    tcase_add_test(tc, test_decode_keeps_plus_and_bad_escapes);
    tcase_add_test(tc, test_parse_urls);
    tcase_add_test(tc, test_redirect_location_keeps_query_verbatim);
    tcase_add_test(tc, test_redirect_path_is_normalized_to_s3_form);
    tcase_add_test(tc, test_redirect_relative_forms);
    tcase_add_test(tc, test_normalize_path);
    tcase_add_test(tc, test_host_lists_match_names_suffixes_and_cidrs);
    tcase_add_test(tc, test_credentials_go_only_to_named_hosts);
    tcase_add_test(tc, test_urls_are_parsed_by_curl);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
