/* The request engine's decisions (see include/objmount/http_policy.h). */
#include "objmount/http_policy.h"

#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

bool om_http_retryable(int curl_code, long status, const char *s3_code, bool idempotent,
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
    if (s3_code &&
        (strcmp(s3_code, "SlowDown") == 0 || strcmp(s3_code, "RequestTimeout") == 0 ||
         strcmp(s3_code, "InternalError") == 0 || strcmp(s3_code, "ServiceUnavailable") == 0))
        return true;
    return false;
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
