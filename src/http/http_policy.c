/* The request engine's decisions (see include/objmount/http_policy.h). */
#include "objmount/http_policy.h"

#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

bool om_http_retryable(int curl_code, long status, bool code_transient, bool idempotent,
                       bool body_sent)
{
    switch ((CURLcode)curl_code) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
        return true; /* nothing reached the server */
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SEND_FAIL_REWIND:
        return idempotent || !body_sent;
    default:
        return false;
    }
    if (!idempotent)
        return false; /* the caller checks what the server holds first */
    if (status == 500 || status == 502 || status == 503 || status == 504 || status == 429)
        return true;
    return code_transient;
}

long om_http_backoff_ms(long base_ms, long cap_ms, int attempt, double rnd)
{
    double ceiling = (double)base_ms;
    for (int i = 1; i < attempt && ceiling < (double)cap_ms; i++)
        ceiling *= 2;
    if (ceiling > (double)cap_ms)
        ceiling = (double)cap_ms;
    return (long)(rnd * ceiling);
}

bool om_http_redirect_allowed(const char *from, const char *to)
{
    return !(strncasecmp(from, "https:", 6) == 0 && strncasecmp(to, "https:", 6) != 0);
}

static bool is_2xx(long status)
{
    return status >= 200 && status < 300;
}

static bool is_redirect(long status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

static int transport_errno(int curl_code)
{
    if (curl_code == CURLE_OPERATION_TIMEDOUT)
        return -ETIMEDOUT;
    if (curl_code == CURLE_COULDNT_CONNECT || curl_code == CURLE_COULDNT_RESOLVE_HOST)
        return -EHOSTUNREACH;
    return -EIO;
}

static struct om_http_decision done(void)
{
    return (struct om_http_decision){.action = OM_HTTP_DONE};
}

static struct om_http_decision fail(enum om_http_cause cause, int error)
{
    return (struct om_http_decision){.action = OM_HTTP_FAIL, .cause = cause, .error = error};
}

/* A failed attempt: another one when worth it and allowed. */
static struct om_http_decision retry_or_fail(const struct om_http_outcome *o,
                                             enum om_http_cause cause, int error, bool retry,
                                             long min_delay_ms)
{
    struct om_http_decision d = fail(cause, error);
    if (retry && o->attempts < o->max_attempts) {
        d.action = OM_HTTP_RETRY;
        d.min_delay_ms = min_delay_ms;
    }
    return d;
}

struct om_http_decision om_http_classify(const struct om_http_outcome *o)
{
    if (o->cancelled)
        return fail(OM_HTTP_CAUSE_CANCELLED, -ECANCELED);
    if (o->sink_stop && is_2xx(o->status))
        return done();
    if (o->sink_error)
        return fail(OM_HTTP_CAUSE_SINK, o->sink_error);
    if (o->curl_code == CURLE_ABORTED_BY_CALLBACK && o->stalled)
        return retry_or_fail(
            o, OM_HTTP_CAUSE_STALLED, -ETIMEDOUT,
            om_http_retryable(CURLE_OPERATION_TIMEDOUT, 0, NULL, o->idempotent, o->body_sent), 0);
    if (o->curl_code != CURLE_OK) {
        /* A redirect target that refuses connections is down (an AIStore
         * target restarting): the retry, back at the server that
         * redirected, waits long enough for the cluster to notice or for
         * the target to return, not the few milliseconds a first backoff
         * may draw. */
        long wait = o->curl_code == CURLE_COULDNT_CONNECT && o->redirects > 0
                        ? OM_HTTP_TARGET_DOWN_MS
                        : 0;
        return retry_or_fail(
            o,
            o->curl_code == CURLE_PARTIAL_FILE ? OM_HTTP_CAUSE_TRUNCATED : OM_HTTP_CAUSE_TRANSPORT,
            transport_errno(o->curl_code),
            om_http_retryable(o->curl_code, 0, NULL, o->idempotent, o->body_sent), wait);
    }
    if (is_2xx(o->status)) {
        if (!o->head && o->has_length && (!o->length_valid || o->length != o->received))
            return retry_or_fail(o, OM_HTTP_CAUSE_SHORT_BODY, -EIO, o->idempotent, 0);
        return done();
    }
    if (is_redirect(o->status) && o->has_location) {
        if (o->redirects >= o->max_redirects)
            return fail(OM_HTTP_CAUSE_TOO_MANY_REDIRECTS, -ELOOP);
        return (struct om_http_decision){.action = OM_HTTP_REDIRECT};
    }
    if ((o->status == 301 || o->status == 400) && o->has_region && o->region_hook &&
        !o->region_refused && o->redirects < o->max_redirects)
        return (struct om_http_decision){.action = OM_HTTP_REGION_REDIRECT};
    bool retry = om_http_retryable(0, o->status, o->code_transient, o->idempotent, o->body_sent);
    return retry_or_fail(o, OM_HTTP_CAUSE_STATUS, -EIO, retry, retry ? o->retry_after_ms : 0);
}
