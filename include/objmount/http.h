/* The request engine: libcurl's multi interface driven by one event-loop
 * thread. Callers fill a struct om_http_req, submit it, and either wait
 * (om_http_perform) or get a callback on the loop thread (om_http_submit).
 *
 * Per attempt the engine signs the request through caller hooks, applies
 * connect / stall / overall timeouts, follows redirects itself (same method
 * and body for 301/302/307/308, GET for 303, re-signed for the new URL, at
 * most max_redirects hops, loops and https->http refused), retries transient
 * failures with exponential backoff and full jitter, and treats a body shorter
 * than its Content-Length as a failed attempt, never as data.
 *
 * Connections, DNS results and TLS sessions are reused across requests; easy
 * handles are pooled. All functions are thread-safe unless noted. */
#ifndef OBJMOUNT_HTTP_H
#define OBJMOUNT_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objmount/http_policy.h"
#include "objmount/util.h"

/* A list of header (name, value) pairs; strings owned by the list. */
struct om_header_list {
    struct om_hdr {
        char *name;
        char *value;
    } *v;
    size_t n, cap;
};

int om_headers_add(struct om_header_list *l, const char *name, const char *value);
int om_headers_addf(struct om_header_list *l, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Case-insensitive lookup of the last header with that name, or NULL. */
const char *om_headers_get(const struct om_header_list *l, const char *name);
void om_headers_free(struct om_header_list *l);

/* Parse "bytes FIRST-LAST/TOTAL" (TOTAL may be '*': *total = UINT64_MAX).
 * Numbers through om_parse_uint; FIRST <= LAST < TOTAL. 0 or -EINVAL. */
int om_http_parse_content_range(const char *v, uint64_t *first, uint64_t *last, uint64_t *total);

struct om_http_config {
    long connect_timeout_ms; /* TCP + TLS connect */
    long stall_timeout_ms;   /* abort an attempt when no byte moves for this long */
    long request_timeout_ms; /* overall bound of one attempt; 0 = none */
    int max_attempts;        /* total attempts per request, >= 1 */
    long retry_base_ms;      /* backoff: random(0, min(cap, base * 2^n)) */
    long retry_cap_ms;
    int max_redirects; /* hops per request */
    int max_connections;
    const char *ca_bundle; /* https only; NULL = system store */
    bool verify_tls;
    const char *proxy; /* NULL = from environment (loopback always direct) */
};

/* Sensible defaults: 5 s connect, 30 s stall, 15 min overall, 6 attempts,
 * 100 ms base, 10 s cap, 5 redirects, 64 connections, TLS verified. */
void om_http_config_defaults(struct om_http_config *cfg);

enum om_http_body_kind { OM_BODY_NONE = 0, OM_BODY_MEM, OM_BODY_FD };

/* A request body; rewindable so retries and redirects resend it whole. The
 * memory or file must stay valid until the request completes. */
struct om_http_body {
    enum om_http_body_kind kind;
    const char *mem;
    int fd;
    off_t off;
    uint64_t len;
};

/* Returned by a sink to end the transfer early as a success (the rest of the
 * body is not wanted; the connection is closed). */
#define OM_HTTP_SINK_STOP 1

/* Where a 2xx response body goes. Called on the loop thread. */
struct om_http_sink {
    /* Return 0 to continue, OM_HTTP_SINK_STOP to end early with success, or a
     * negative errno to end the request with that error (not retried). */
    int (*data)(void *ud, const char *p, size_t n);
    /* Called before a new attempt when data may have been delivered: the sink
     * must forget it. */
    void (*reset)(void *ud);
    void *ud;
};

struct om_http_req;

/* Protocol hooks supplied by the store's backends. */
struct om_http_hooks {
    /* Append the authentication headers for one attempt of req going to url. */
    int (*sign)(void *ud, const struct om_http_req *req, const char *url,
                struct om_header_list *out);
    /* The server asked for another region (x-amz-bucket-region on a 301 or
     * 400). Update signing state and, if needed, *url (free the old one).
     * Return 0 to retry at once, negative errno to fail the request. May be NULL. */
    int (*region_redirect)(void *ud, struct om_http_req *req, const char *region, char **url);
    /* Copy the error code of an error body ("SlowDown") into code and say
     * whether it names a passing condition worth a retry (*transient);
     * return 0 when found. May be NULL. */
    int (*error_code)(void *ud, const char *body, size_t len, char *code, size_t codelen,
                      bool *transient);
    void *ud;
};

struct om_http_xfer; /* engine-private state */

struct om_http_req {
    /* --- set by the caller --- */
    const char *method; /* "GET", "HEAD", "PUT", "POST", "DELETE" */
    char *url;          /* malloc'd absolute URL; replaced on redirect; freed by cleanup */
    const char *op;     /* operation name for stats and logs, e.g. "GetObject" */
    struct om_header_list headers;
    struct om_http_body body;
    struct om_http_sink sink; /* without sink.data, a 2xx body is kept in resp_body */
    size_t max_body;          /* limit for a kept body; larger fails with -EFBIG */
    bool idempotent;          /* false: transport failures after sending are not retried */
    struct om_http_hooks hooks;

    /* --- results, valid once complete --- */
    int error;   /* 0, or negative errno */
    long status; /* last HTTP status, 0 when none */
    struct om_header_list resp_headers;
    struct om_buf resp_body; /* 2xx body without sink, or the error body */
    int attempts;
    int redirects;
    uint64_t body_bytes; /* 2xx body bytes delivered by the final attempt */
    char errmsg[256];    /* human description of the final error */

    struct om_http_xfer *priv;
};

/* Zero req. Safe to call om_http_req_cleanup() on it afterwards. */
void om_http_req_init(struct om_http_req *req);
/* Free url, headers and results. Not while the request is in flight. */
void om_http_req_cleanup(struct om_http_req *req);

struct om_http;

/* Start the engine and its loop thread. NULL on failure with err filled. */
struct om_http *om_http_new(const struct om_http_config *cfg, char *err, size_t errlen);
/* Cancel what is in flight (completed with -ECANCELED), stop the thread. */
void om_http_free(struct om_http *h);

typedef void (*om_http_done_fn)(struct om_http_req *req, void *ud);

/* Queue req; done is called exactly once on the loop thread when it
 * completes (successfully or not). req must stay valid until then. Returns 0
 * or a negative errno (then done is not called). */
int om_http_submit(struct om_http *h, struct om_http_req *req, om_http_done_fn done, void *ud);

/* Submit and wait. Returns req->error. Must not be called on the loop thread. */
int om_http_perform(struct om_http *h, struct om_http_req *req);

/* Ask for req to be abandoned; it completes with -ECANCELED unless it
 * already finished. */
void om_http_cancel(struct om_http *h, struct om_http_req *req);

/* Counters since start. */
struct om_http_stats {
    uint64_t requests;  /* completed requests */
    uint64_t attempts;  /* attempts sent */
    uint64_t retries;
    uint64_t redirects;
    uint64_t failures;  /* requests that ended in error (not counting cancelled) */
    uint64_t cancelled; /* abandoned by the caller (a prefetch no longer wanted) */
    uint64_t short_bodies;
    uint64_t bytes_in;  /* body bytes received */
    uint64_t bytes_out; /* body bytes sent */
    uint64_t connections; /* new connections opened */
};
void om_http_get_stats(struct om_http *h, struct om_http_stats *out);

/* Per operation (the request's op name): counts, bytes and a latency
 * histogram of whole requests (retries and redirects included). */
#define OM_HTTP_LAT_BUCKETS 32 /* bucket i holds [2^i, 2^(i+1)) microseconds */
#define OM_HTTP_MAX_OPS 24
struct om_http_op_stats {
    char op[32];
    uint64_t requests;
    uint64_t failures;
    uint64_t retries;
    uint64_t redirects;
    uint64_t bytes_in;
    uint64_t bytes_out;
    uint64_t latency_sum_us;
    uint64_t latency[OM_HTTP_LAT_BUCKETS];
};
/* Copies up to max entries; returns how many. */
int om_http_get_op_stats(struct om_http *h, struct om_http_op_stats *out, int max);
/* Upper bound of the q-quantile (0..1) from a histogram, in microseconds. */
uint64_t om_http_latency_quantile_us(const struct om_http_op_stats *s, double q);

#endif
