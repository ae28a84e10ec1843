/* S3 XML: streaming listing parser, error documents, multipart results. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "objmount/util.h"
#include "objmount/xml.h"

#include "check_main.h"

struct collected {
    struct om_buf out;
    uint64_t n;
};

static int collect(void *ud, const struct om_list_entry *e)
{
    struct collected *c = ud;
    c->n++;
    om_buf_printf(&c->out, "%s|%s|%llu|%s|%ld\n", e->is_prefix ? "P" : "K", e->key,
                  (unsigned long long)e->size, e->etag, (long)e->mtime);
    return 0;
}

static const char page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>b</Name><Prefix>p/</Prefix><KeyCount>3</KeyCount><MaxKeys>1000</MaxKeys>"
    "<Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
    "<Contents><Key>p/a &amp; b.jpg</Key><LastModified>2009-10-12T17:50:30.000Z</LastModified>"
    "<ETag>&quot;fba9dede5f27731c9771645a39863328&quot;</ETag><Size>434234</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>p/\xe6\x97\xa5\xe6\x9c\xac</Key><LastModified>2009-10-12T17:50:31Z</LastModified>"
    "<ETag>\"abc-2\"</ETag><Size>0</Size></Contents>"
    "<CommonPrefixes><Prefix>p/sub/</Prefix></CommonPrefixes>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "</ListBucketResult>";

static const char expected[] = "K|p/a & b.jpg|434234|fba9dede5f27731c9771645a39863328|1255369830\n"
                               "K|p/\xe6\x97\xa5\xe6\x9c\xac|0|abc-2|1255369831\n"
                               "P|p/sub/|0||0\n";

START_TEST(test_page_parsed_with_entities_and_token)
{
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 0);
    ck_assert_int_eq(om_list_parser_feed(p, page, strlen(page)), 0);
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    ck_assert_str_eq(c.out.data, expected);
    ck_assert(om_list_parser_truncated(p));
    ck_assert_str_eq(om_list_parser_next_token(p), "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    ck_assert(!om_list_parser_is_error(p));
    om_list_parser_free(p);
    om_buf_free(&c.out);
}
END_TEST

START_TEST(test_page_fed_byte_by_byte)
{
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 0);
    for (size_t i = 0; i < strlen(page); i++)
        ck_assert_int_eq(om_list_parser_feed(p, page + i, 1), 0);
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    ck_assert_str_eq(c.out.data, expected);
    om_list_parser_free(p);
    om_buf_free(&c.out);
}
END_TEST

START_TEST(test_skip_reports_only_later_entries)
{
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 2);
    ck_assert_int_eq(om_list_parser_feed(p, page, strlen(page)), 0);
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    ck_assert_str_eq(c.out.data, "P|p/sub/|0||0\n");
    ck_assert_uint_eq(om_list_parser_entries(p), 3);
    om_list_parser_free(p);
    om_buf_free(&c.out);
}
END_TEST

START_TEST(test_truncated_document_is_an_error)
{
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 0);
    ck_assert_int_eq(om_list_parser_feed(p, page, strlen(page) - 30), 0);
    ck_assert_int_eq(om_list_parser_finish(p), -EBADMSG);
    om_list_parser_free(p);
    om_buf_free(&c.out);
}
END_TEST

static int stop_at_one(void *ud, const struct om_list_entry *e)
{
    (void)e;
    return ++*(int *)ud == 1 ? -EINTR : 0;
}

START_TEST(test_callback_error_stops_parse)
{
    int n = 0;
    struct om_list_parser *p = om_list_parser_new(stop_at_one, &n, 0);
    ck_assert_int_eq(om_list_parser_feed(p, page, strlen(page)), -EINTR);
    ck_assert_int_eq(n, 1);
    om_list_parser_free(p);
}
END_TEST

START_TEST(test_url_encoded_keys_decoded)
{
    const char doc[] = "<ListBucketResult><EncodingType>url</EncodingType>"
                       "<Contents><Key>a%20b%2Bc</Key><Size>1</Size></Contents>"
                       "<CommonPrefixes><Prefix>d%2F</Prefix></CommonPrefixes></ListBucketResult>";
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 0);
    ck_assert_int_eq(om_list_parser_feed(p, doc, strlen(doc)), 0);
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    ck_assert_str_eq(c.out.data, "K|a b+c|1||0\nP|d/|0||0\n");
    ck_assert(!om_list_parser_truncated(p));
    ck_assert_ptr_null(om_list_parser_next_token(p));
    om_list_parser_free(p);
    om_buf_free(&c.out);
}
END_TEST

START_TEST(test_error_document_in_place_of_listing)
{
    const char doc[] = "<Error><Code>InternalError</Code><Message>x</Message></Error>";
    struct collected c = {0};
    struct om_list_parser *p = om_list_parser_new(collect, &c, 0);
    ck_assert_int_eq(om_list_parser_feed(p, doc, strlen(doc)), 0);
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    ck_assert(om_list_parser_is_error(p));
    ck_assert_uint_eq(c.n, 0);
    om_list_parser_free(p);
}
END_TEST

/* Generates a single ListObjectsV2 page with n entries in chunks. */
static size_t make_chunk(char *buf, size_t cap, uint64_t *i, uint64_t n)
{
    size_t len = 0;
    if (*i == 0)
        len += (size_t)snprintf(buf, cap, "<?xml version=\"1.0\"?><ListBucketResult>"
                                          "<IsTruncated>false</IsTruncated>");
    while (*i < n && len + 400 < cap) {
        len += (size_t)snprintf(buf + len, cap - len,
                                "<Contents><Key>train/class%03llu/img_%09llu.jpg</Key>"
                                "<LastModified>2024-01-01T00:00:00.000Z</LastModified>"
                                "<ETag>&quot;0123456789abcdef0123456789abcdef&quot;</ETag>"
                                "<Size>%llu</Size><StorageClass>STANDARD</StorageClass>"
                                "</Contents>",
                                (unsigned long long)(*i % 1000), (unsigned long long)*i,
                                (unsigned long long)(100000 + *i % 1000));
        (*i)++;
    }
    if (*i == n && len + 40 < cap) {
        len += (size_t)snprintf(buf + len, cap - len, "</ListBucketResult>");
        (*i)++;
    }
    return len;
}

static long maxrss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

struct big_check {
    uint64_t n;
    uint64_t size_sum;
};

static int big_entry(void *ud, const struct om_list_entry *e)
{
    struct big_check *b = ud;
    b->n++;
    b->size_sum += e->size;
    return 0;
}

START_TEST(test_million_entry_page_in_bounded_memory)
{
    const uint64_t n = 1000000;
    enum { CAP = 64 * 1024 };
    char *buf = malloc(CAP);
    struct big_check b = {0};
    long before = maxrss_kb();
    struct om_list_parser *p = om_list_parser_new(big_entry, &b, 0);
    uint64_t i = 0, total = 0;
    while (i <= n) {
        size_t len = make_chunk(buf, CAP, &i, n);
        total += len;
        ck_assert_int_eq(om_list_parser_feed(p, buf, len), 0);
    }
    ck_assert_int_eq(om_list_parser_finish(p), 0);
    long growth_mb = (maxrss_kb() - before) / 1024;
    ck_assert_uint_eq(b.n, n);
    uint64_t expect = 0;
    for (uint64_t k = 0; k < n; k++)
        expect += 100000 + k % 1000;
    ck_assert_uint_eq(b.size_sum, expect);
    ck_assert_uint_gt(total, 200u << 20); /* the page itself is > 200 MiB */
#ifndef __SANITIZE_ADDRESS__
    /* ASan's quarantine keeps freed blocks; the bound is checked without it. */
    ck_assert_msg(growth_mb < 32, "parsing grew RSS by %ld MiB", growth_mb);
#else
    (void)growth_mb;
#endif
    om_list_parser_free(p);
    free(buf);
}
END_TEST

START_TEST(test_error_document_fields)
{
    const char doc[] = "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code>"
                       "<Message>The resource you requested does not exist</Message>"
                       "<Resource>/b/k</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>";
    char code[32], msg[128], rid[32];
    ck_assert_int_eq(om_xml_parse_error(doc, strlen(doc), code, sizeof(code), msg, sizeof(msg), rid,
                                        sizeof(rid)),
                     0);
    ck_assert_str_eq(code, "NoSuchKey");
    ck_assert_str_eq(msg, "The resource you requested does not exist");
    ck_assert_str_eq(rid, "4442587FB7D0A2F9");
    ck_assert_int_eq(om_xml_parse_error("<x/>", 4, code, sizeof(code), NULL, 0, NULL, 0), -EBADMSG);
    ck_assert_int_eq(om_xml_parse_error("garbage", 7, code, sizeof(code), NULL, 0, NULL, 0),
                     -EBADMSG);
    ck_assert_int_eq(om_xml_parse_error(NULL, 0, code, sizeof(code), NULL, 0, NULL, 0), -EBADMSG);
}
END_TEST

START_TEST(test_find_text)
{
    const char doc[] = "<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key>"
                       "<UploadId>VXBsb2FkIElE</UploadId></InitiateMultipartUploadResult>";
    char *t = om_xml_find_text(doc, strlen(doc), "UploadId");
    ck_assert_str_eq(t, "VXBsb2FkIElE");
    free(t);
    ck_assert_ptr_null(om_xml_find_text(doc, strlen(doc), "ETag"));
}
END_TEST

static int collect_upload(void *ud, const struct om_upload_entry *e)
{
    om_buf_printf(ud, "%s=%s@%ld;", e->key, e->upload_id, (long)e->initiated);
    return 0;
}

START_TEST(test_uploads_page)
{
    const char doc[] = "<ListMultipartUploadsResult><Bucket>b</Bucket>"
                       "<NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>"
                       "<IsTruncated>true</IsTruncated>"
                       "<Upload><Key>k1</Key><UploadId>u1</UploadId>"
                       "<Initiated>2010-11-10T20:48:33.000Z</Initiated></Upload>"
                       "<Upload><Key>k2</Key><UploadId>u2</UploadId></Upload>"
                       "</ListMultipartUploadsResult>";
    struct om_buf b = {0};
    bool trunc;
    char *km, *um;
    ck_assert_int_eq(om_xml_parse_uploads(doc, strlen(doc), collect_upload, &b, &trunc, &km, &um),
                     0);
    ck_assert_str_eq(b.data, "k1=u1@1289422113;k2=u2@0;");
    ck_assert(trunc);
    ck_assert_str_eq(km, "k2");
    ck_assert_str_eq(um, "u2");
    free(km);
    free(um);
    om_buf_free(&b);
}
END_TEST

int main(void)
{
    om_xml_init();
    Suite *s = suite_create("xml");
    TCase *tc = tcase_create("xml");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_page_parsed_with_entities_and_token);
    tcase_add_test(tc, test_page_fed_byte_by_byte);
    tcase_add_test(tc, test_skip_reports_only_later_entries);
    tcase_add_test(tc, test_truncated_document_is_an_error);
    tcase_add_test(tc, test_callback_error_stops_parse);
    tcase_add_test(tc, test_url_encoded_keys_decoded);
    tcase_add_test(tc, test_error_document_in_place_of_listing);
    tcase_add_test(tc, test_million_entry_page_in_bounded_memory);
    tcase_add_test(tc, test_error_document_fields);
    tcase_add_test(tc, test_find_text);
    tcase_add_test(tc, test_uploads_page);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
