/* The request engine's decisions: pure functions of plain values, no locks,
 * no I/O, no allocation. */
#ifndef OBJMOUNT_HTTP_POLICY_H
#define OBJMOUNT_HTTP_POLICY_H

#include <stdbool.h>

/* Retry policy: is this outcome worth another attempt? curl_code is a
 * CURLcode (0 = transfer completed), status the HTTP status, s3_code the
 * error code from the body, "" or NULL. */
bool om_http_retryable(int curl_code, long status, const char *s3_code, bool idempotent,
                       bool body_sent);
/* A redirect from an https URL may only go to https. */
bool om_http_redirect_allowed(const char *from, const char *to);
/* Backoff before attempt number `attempt` (1 = first retry), with rnd in
 * [0,1): rnd * min(cap, base * 2^(attempt-1)). */
long om_http_backoff_ms(long base_ms, long cap_ms, int attempt, double rnd);

#endif
