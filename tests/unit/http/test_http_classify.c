/* What the request engine does after an attempt, on its own: success,
 * retry, redirect, region redirect or failure, with the errno and the cause
 * that go with it (om_http_classify). */
#include <check.h>
#include <curl/curl.h>
#include <errno.h>

#include "objmount/http_policy.h"

#include "check_main.h"

/* A first attempt of an idempotent GET that got 200 and its whole body. */
static struct om_http_outcome ok_get(void)
{
    return (struct om_http_outcome){
        .curl_code = CURLE_OK,
        .status = 200,
        .has_length = true,
        .length_valid = true,
        .length = 1000,
        .received = 1000,
        .region_hook = true,
        .idempotent = true,
        .attempts = 1,
        .max_attempts = 6,
        .max_redirects = 5,
    };
}

/* An outcome with a transport failure and no response. */
static struct om_http_outcome curl_failed(CURLcode cc)
{
    struct om_http_outcome o = ok_get();
    o.curl_code = cc;
    o.status = 0;
    o.has_length = false;
    o.received = 0;
    return o;
}

/* An outcome with an HTTP error status and no body. */
static struct om_http_outcome status_of(long status)
{
    struct om_http_outcome o = ok_get();
    o.status = status;
    o.has_length = false;
    o.received = 0;
    return o;
}

/* om_http_classify(o) decides action, cause, error and min_delay_ms. */
static void expect_delay(const struct om_http_outcome *o, enum om_http_action action,
                         enum om_http_cause cause, int error, long min_delay_ms)
{
    struct om_http_decision d = om_http_classify(o);
    ck_assert_int_eq(d.action, action);
    ck_assert_int_eq(d.cause, cause);
    ck_assert_int_eq(d.error, error);
    ck_assert_int_eq(d.min_delay_ms, min_delay_ms);
}

/* ... with no delay beyond the backoff. */
static void expect(const struct om_http_outcome *o, enum om_http_action action,
                   enum om_http_cause cause, int error)
{
    expect_delay(o, action, cause, error, 0);
}

static void assert_done(const struct om_http_outcome *o)
{
    expect(o, OM_HTTP_DONE, OM_HTTP_CAUSE_NONE, 0);
}

START_TEST(test_whole_2xx_body_is_done)
{
    struct om_http_outcome o = ok_get();
    assert_done(&o);
    o.status = 206;
    assert_done(&o);
    o.has_length = false; /* chunked: nothing to compare with */
    o.received = 5;
    assert_done(&o);
    o.status = 204;
    o.has_length = true;
    o.length = 0;
    o.received = 0;
    assert_done(&o);
}
END_TEST

START_TEST(test_head_content_length_describes_no_body)
{
    struct om_http_outcome o = ok_get();
    o.head = true;
    o.received = 0;
    assert_done(&o);
    o.length_valid = false;
    assert_done(&o);
}
END_TEST

START_TEST(test_short_body_is_eio_and_retried_when_idempotent)
{
    struct om_http_outcome o = ok_get();
    o.received = 999;
    expect_delay(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_SHORT_BODY, -EIO, 0);
    o.received = 1001; /* longer is as wrong as shorter */
    expect(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_SHORT_BODY, -EIO);
    o.received = 1000;
    o.length_valid = false; /* a Content-Length that is no number */
    expect(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_SHORT_BODY, -EIO);
    o.idempotent = false;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_SHORT_BODY, -EIO);
}
END_TEST

START_TEST(test_retries_end_at_max_attempts)
{
    struct om_http_outcome o = ok_get();
    o.received = 1;
    o.attempts = 5;
    expect(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_SHORT_BODY, -EIO);
    o.attempts = 6;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_SHORT_BODY, -EIO);
    o = curl_failed(CURLE_COULDNT_CONNECT);
    o.attempts = o.max_attempts = 1;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_TRANSPORT, -EHOSTUNREACH);
    o = status_of(503);
    o.attempts = 6;
    o.retry_after_ms = 2000;
    expect_delay(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO, 0);
}
END_TEST

START_TEST(test_a_redirect_target_refusing_connections_is_waited_for)
{
    /* an AIStore target that died: the retry goes back to the proxy after
     * a second, not after the few milliseconds a first backoff may draw */
    struct om_http_outcome o = curl_failed(CURLE_COULDNT_CONNECT);
    o.redirects = 1;
    expect_delay(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT, -EHOSTUNREACH, OM_HTTP_TARGET_DOWN_MS);
    /* the server itself refusing: the usual backoff */
    o.redirects = 0;
    expect_delay(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT, -EHOSTUNREACH, 0);
    /* a target that answered, then failed otherwise: the usual backoff */
    o = curl_failed(CURLE_RECV_ERROR);
    o.redirects = 1;
    expect_delay(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT, -EIO, 0);
}
END_TEST

START_TEST(test_cancelled_fails_before_anything_else)
{
    struct om_http_outcome o = ok_get();
    o.cancelled = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_CANCELLED, -ECANCELED);
    o = curl_failed(CURLE_OPERATION_TIMEDOUT); /* retryable, but no longer wanted */
    o.cancelled = true;
    o.sink_error = -ENOSPC;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_CANCELLED, -ECANCELED);
}
END_TEST

START_TEST(test_sink_stop_on_2xx_is_success)
{
    struct om_http_outcome o = ok_get();
    o.curl_code = CURLE_WRITE_ERROR; /* how curl ends a transfer the sink stopped */
    o.sink_stop = true;
    o.received = 10;
    assert_done(&o);
    o.sink_error = -EIO; /* the stop wins */
    assert_done(&o);
}
END_TEST

START_TEST(test_sink_stop_without_2xx_is_the_curl_error)
{
    struct om_http_outcome o = curl_failed(CURLE_WRITE_ERROR);
    o.status = 500;
    o.sink_stop = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_TRANSPORT, -EIO);
}
END_TEST

/* One attempt that curl ended with cc, and what is decided. */
struct curl_case {
    CURLcode cc;
    long status;
    bool stalled;
    int sink_error;
    bool idempotent;
    bool body_sent;
    enum om_http_action action;
    enum om_http_cause cause;
    int error;
};

static void expect_curl_cases(const struct curl_case *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct om_http_outcome o = curl_failed(v[i].cc);
        o.status = v[i].status;
        o.stalled = v[i].stalled;
        o.sink_error = v[i].sink_error;
        o.idempotent = v[i].idempotent;
        o.body_sent = v[i].body_sent;
        expect(&o, v[i].action, v[i].cause, v[i].error);
    }
}

#define EXPECT_CURL_CASES(v) expect_curl_cases(v, sizeof(v) / sizeof(v[0]))

START_TEST(test_sink_error_fails_without_retry)
{
    static const struct curl_case v[] = {
        {CURLE_WRITE_ERROR, 200, false, -ENOSPC, true, false, OM_HTTP_FAIL, OM_HTTP_CAUSE_SINK,
         -ENOSPC},
        /* the body reader failed; that comes before a stall */
        {CURLE_ABORTED_BY_CALLBACK, 0, true, -EBADF, true, true, OM_HTTP_FAIL, OM_HTTP_CAUSE_SINK,
         -EBADF},
    };
    EXPECT_CURL_CASES(v);
}
END_TEST

START_TEST(test_stall_is_etimedout_and_retried_like_a_timeout)
{
    static const struct curl_case v[] = {
        {CURLE_ABORTED_BY_CALLBACK, 0, true, 0, true, true, OM_HTTP_RETRY, OM_HTTP_CAUSE_STALLED,
         -ETIMEDOUT},
        /* the server may have acted on the body */
        {CURLE_ABORTED_BY_CALLBACK, 0, true, 0, false, true, OM_HTTP_FAIL, OM_HTTP_CAUSE_STALLED,
         -ETIMEDOUT},
        {CURLE_ABORTED_BY_CALLBACK, 0, true, 0, false, false, OM_HTTP_RETRY, OM_HTTP_CAUSE_STALLED,
         -ETIMEDOUT},
        /* aborted, but not by the watchdog: not retried */
        {CURLE_ABORTED_BY_CALLBACK, 0, false, 0, true, false, OM_HTTP_FAIL, OM_HTTP_CAUSE_TRANSPORT,
         -EIO},
    };
    EXPECT_CURL_CASES(v);
}
END_TEST

START_TEST(test_transport_errors_map_to_errnos)
{
    static const struct curl_case v[] = {
        {CURLE_OPERATION_TIMEDOUT, 0, false, 0, true, false, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT,
         -ETIMEDOUT},
        {CURLE_COULDNT_CONNECT, 0, false, 0, true, false, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT,
         -EHOSTUNREACH},
        {CURLE_COULDNT_RESOLVE_HOST, 0, false, 0, true, false, OM_HTTP_RETRY,
         OM_HTTP_CAUSE_TRANSPORT, -EHOSTUNREACH},
        {CURLE_RECV_ERROR, 0, false, 0, true, false, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT, -EIO},
        /* never better on another try */
        {CURLE_PEER_FAILED_VERIFICATION, 0, false, 0, true, false, OM_HTTP_FAIL,
         OM_HTTP_CAUSE_TRANSPORT, -EIO},
    };
    EXPECT_CURL_CASES(v);
}
END_TEST

START_TEST(test_no_connection_is_retried_even_after_a_body)
{
    static const struct curl_case v[] = {
        {CURLE_COULDNT_CONNECT, 0, false, 0, false, true, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT,
         -EHOSTUNREACH},
        {CURLE_SEND_ERROR, 0, false, 0, false, true, OM_HTTP_FAIL, OM_HTTP_CAUSE_TRANSPORT, -EIO},
        {CURLE_SEND_ERROR, 0, false, 0, false, false, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRANSPORT, -EIO},
    };
    EXPECT_CURL_CASES(v);
}
END_TEST

START_TEST(test_truncated_transfer_is_a_short_body)
{
    static const struct curl_case v[] = {
        {CURLE_PARTIAL_FILE, 200, false, 0, true, true, OM_HTTP_RETRY, OM_HTTP_CAUSE_TRUNCATED,
         -EIO},
        {CURLE_PARTIAL_FILE, 200, false, 0, false, true, OM_HTTP_FAIL, OM_HTTP_CAUSE_TRUNCATED,
         -EIO},
    };
    EXPECT_CURL_CASES(v);
}
END_TEST

START_TEST(test_redirect_statuses_with_location_are_followed)
{
    static const long statuses[] = {301, 302, 303, 307, 308};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct om_http_outcome o = status_of(statuses[i]);
        o.has_location = true;
        o.has_region = true; /* Location comes first */
        o.redirects = 4;
        expect(&o, OM_HTTP_REDIRECT, OM_HTTP_CAUSE_NONE, 0);
    }
}
END_TEST

START_TEST(test_redirect_without_location_is_an_error_status)
{
    struct om_http_outcome o = status_of(302);
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o = status_of(304); /* not a redirect to follow */
    o.has_location = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o = status_of(300);
    o.has_location = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
}
END_TEST

START_TEST(test_redirect_past_max_redirects_is_eloop)
{
    struct om_http_outcome o = status_of(307);
    o.has_location = true;
    o.redirects = 5;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_TOO_MANY_REDIRECTS, -ELOOP);
    o.max_redirects = 0;
    o.redirects = 0;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_TOO_MANY_REDIRECTS, -ELOOP);
}
END_TEST

START_TEST(test_wrong_region_asks_the_region_hook)
{
    struct om_http_outcome o = status_of(301);
    o.has_region = true;
    expect(&o, OM_HTTP_REGION_REDIRECT, OM_HTTP_CAUSE_NONE, 0);
    o.status = 400; /* AuthorizationHeaderMalformed names the region too */
    o.code_transient = false; /* AuthorizationHeaderMalformed */
    expect(&o, OM_HTTP_REGION_REDIRECT, OM_HTTP_CAUSE_NONE, 0);
    o.redirects = 4;
    expect(&o, OM_HTTP_REGION_REDIRECT, OM_HTTP_CAUSE_NONE, 0);
}
END_TEST

START_TEST(test_region_not_followed_is_an_error_status)
{
    struct om_http_outcome o = status_of(301);
    o.has_region = true;
    o.region_refused = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o.region_refused = false;
    o.region_hook = false;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o.region_hook = true;
    o.redirects = 5;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o = status_of(403); /* only 301 and 400 carry a region worth following */
    o.has_region = true;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
    o = status_of(301);
    o.has_region = false;
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
}
END_TEST

START_TEST(test_5xx_and_429_retry_after_retry_after)
{
    static const long statuses[] = {500, 502, 503, 504, 429};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        struct om_http_outcome o = status_of(statuses[i]);
        o.retry_after_ms = 3000;
        expect_delay(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_STATUS, -EIO, 3000);
    }
}
END_TEST

START_TEST(test_s3_code_makes_a_status_retryable)
{
    /* the backend's hook says which codes name a passing condition */
    struct om_http_outcome o = status_of(400);
    o.code_transient = true; /* RequestTimeout, SlowDown */
    expect(&o, OM_HTTP_RETRY, OM_HTTP_CAUSE_STATUS, -EIO);
    o.code_transient = false; /* InvalidArgument, or no code */
    expect(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO);
}
END_TEST

START_TEST(test_final_error_status_ignores_retry_after)
{
    struct om_http_outcome o = status_of(404);
    o.retry_after_ms = 3000;
    expect_delay(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO, 0);
}
END_TEST

START_TEST(test_error_status_of_a_non_idempotent_request_is_final)
{
    struct om_http_outcome o = status_of(503);
    o.idempotent = false;
    o.code_transient = true; /* SlowDown */
    expect_delay(&o, OM_HTTP_FAIL, OM_HTTP_CAUSE_STATUS, -EIO, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http_classify");
    TCase *tc = tcase_create("http_classify");
    tcase_add_test(tc, test_whole_2xx_body_is_done);
    tcase_add_test(tc, test_head_content_length_describes_no_body);
    tcase_add_test(tc, test_short_body_is_eio_and_retried_when_idempotent);
    tcase_add_test(tc, test_retries_end_at_max_attempts);
    tcase_add_test(tc, test_a_redirect_target_refusing_connections_is_waited_for);
    tcase_add_test(tc, test_cancelled_fails_before_anything_else);
    tcase_add_test(tc, test_sink_stop_on_2xx_is_success);
    tcase_add_test(tc, test_sink_stop_without_2xx_is_the_curl_error);
    tcase_add_test(tc, test_sink_error_fails_without_retry);
    tcase_add_test(tc, test_stall_is_etimedout_and_retried_like_a_timeout);
    tcase_add_test(tc, test_transport_errors_map_to_errnos);
    tcase_add_test(tc, test_no_connection_is_retried_even_after_a_body);
    tcase_add_test(tc, test_truncated_transfer_is_a_short_body);
    tcase_add_test(tc, test_redirect_statuses_with_location_are_followed);
    tcase_add_test(tc, test_redirect_without_location_is_an_error_status);
    tcase_add_test(tc, test_redirect_past_max_redirects_is_eloop);
    tcase_add_test(tc, test_wrong_region_asks_the_region_hook);
    tcase_add_test(tc, test_region_not_followed_is_an_error_status);
    tcase_add_test(tc, test_5xx_and_429_retry_after_retry_after);
    tcase_add_test(tc, test_s3_code_makes_a_status_retryable);
    tcase_add_test(tc, test_final_error_status_ignores_retry_after);
    tcase_add_test(tc, test_error_status_of_a_non_idempotent_request_is_final);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
