/* The request engine's decisions: pure functions of plain values, no locks,
 * no I/O, no allocation. http.c gathers the facts of an attempt, asks
 * om_http_classify() what to do and only executes the answer; unit tests pin
 * each case (tests/unit/test_http_classify.c). */
#ifndef OBJMOUNT_HTTP_POLICY_H
#define OBJMOUNT_HTTP_POLICY_H

#include <stdbool.h>
#include <stdint.h>

/* Retry policy: is this outcome worth another attempt? curl_code is a
 * CURLcode (0 = transfer completed), status the HTTP status, code_transient
 * whether the store's error code names a passing condition (S3's SlowDown:
 * the backend's error_code hook decides). */
bool om_http_retryable(int curl_code, long status, bool code_transient, bool idempotent,
                       bool body_sent);
/* A redirect from an https URL may only go to https. */
bool om_http_redirect_allowed(const char *from, const char *to);
/* Backoff before attempt number `attempt` (1 = first retry), with rnd in
 * [0,1): rnd * min(cap, base * 2^(attempt-1)). */
long om_http_backoff_ms(long base_ms, long cap_ms, int attempt, double rnd);

/* What is known when one attempt of a request has ended. */
/* Least wait before a retry after a redirect target refused the
 * connection (om_http_classify). */
#define OM_HTTP_TARGET_DOWN_MS 1000

struct om_http_outcome {
    int curl_code;       /* CURLcode of the transfer, 0 = completed */
    long status;         /* HTTP status of the final response, 0 when none */
    bool cancelled;      /* the caller abandoned the request */
    bool stalled;        /* the stall watchdog aborted the transfer */
    bool sink_stop;      /* the sink ended the transfer early on purpose */
    int sink_error;      /* negative errno from the sink or the body reader, or 0 */
    bool head;           /* a HEAD request: its Content-Length describes no body */
    bool has_length;     /* the response had a Content-Length */
    bool length_valid;   /* ... and it is a number (om_parse_uint) */
    uint64_t length;     /* its value when valid */
    uint64_t received;   /* body bytes of the final response of this attempt */
    bool has_location;   /* a non-empty Location header */
    bool has_region;     /* an x-amz-bucket-region header */
    bool region_hook;    /* the request has a region_redirect hook */
    bool region_refused; /* that hook has refused the region of this response */
    bool code_transient; /* the error body's code names a passing condition (the hook's say) */
    long retry_after_ms; /* what Retry-After asks for, 0 when absent */
    bool idempotent;     /* the request may be repeated after its body went out */
    bool body_sent;      /* some request body bytes went out this attempt */
    int attempts;        /* attempts made, this one included */
    int max_attempts;    /* the engine's limit, >= 1 */
    int redirects;       /* redirects followed by this attempt */
    int max_redirects;   /* the engine's limit of hops */
};

enum om_http_action {
    OM_HTTP_DONE,            /* the request succeeded: finish with error 0 */
    OM_HTTP_REDIRECT,        /* follow Location (which may still refuse: invalid, loop,
                              * https to http) */
    OM_HTTP_REGION_REDIRECT, /* ask the region_redirect hook and, when it agrees, go again at
                              * once; when it refuses, classify again with region_refused */
    OM_HTTP_RETRY,           /* another attempt after the backoff (at least min_delay_ms) */
    OM_HTTP_FAIL,            /* finish with error */
};

/* Why an attempt failed; says which message and counters go with it. */
enum om_http_cause {
    OM_HTTP_CAUSE_NONE,               /* DONE, REDIRECT, REGION_REDIRECT */
    OM_HTTP_CAUSE_CANCELLED,          /* the caller abandoned the request: -ECANCELED */
    OM_HTTP_CAUSE_SINK,               /* the sink or the body reader failed: its errno */
    OM_HTTP_CAUSE_STALLED,            /* no byte moved for stall_timeout_ms: -ETIMEDOUT */
    OM_HTTP_CAUSE_TRANSPORT,          /* curl failed: -ETIMEDOUT (its timeout), -EHOSTUNREACH (no
                                       * connection or name), else -EIO */
    OM_HTTP_CAUSE_TRUNCATED,          /* the connection ended before Content-Length: -EIO */
    OM_HTTP_CAUSE_SHORT_BODY,         /* a 2xx body of another length than its Content-Length,
                                       * or a Content-Length that is no number: -EIO */
    OM_HTTP_CAUSE_TOO_MANY_REDIRECTS, /* a redirect past max_redirects: -ELOOP */
    OM_HTTP_CAUSE_STATUS,             /* an HTTP error status: -EIO */
};

struct om_http_decision {
    enum om_http_action action;
    enum om_http_cause cause; /* OM_HTTP_CAUSE_NONE unless RETRY or FAIL */
    int error;                /* RETRY, FAIL: the negative errno of the attempt */
    long min_delay_ms;        /* RETRY: Retry-After of an error status, OM_HTTP_TARGET_DOWN_MS
                               * for a redirect target refusing connections, else 0 */
};

/* What to do after an attempt, in this order: cancelled fails; a sink that
 * stopped a 2xx succeeds; a sink error fails; a stall, a curl error, a short
 * 2xx body and an HTTP error status retry when om_http_retryable (a short
 * body: when idempotent) says so and attempts < max_attempts, else fail; a
 * whole 2xx body succeeds; 301/302/303/307/308 with a Location redirects
 * (fails with -ELOOP at max_redirects); a 301 or 400 naming a region asks
 * the region hook while redirects < max_redirects. */
struct om_http_decision om_http_classify(const struct om_http_outcome *o);

#endif
