/* AWS Signature Version 4 for S3, on OpenSSL.
 *
 * The caller supplies the request exactly as it will be sent: method, Host
 * header value, the encoded path (S3 does not double-encode: the wire path is
 * the canonical path), the raw query string and the headers to be signed.
 * Pure functions: no globals, thread-safe. */
#ifndef OBJMOUNT_SIGV4_H
#define OBJMOUNT_SIGV4_H

#include <stddef.h>
#include <time.h>

#include "objmount/util.h"

#define OM_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
/* SHA-256 of the empty string. */
#define OM_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct om_header {
    const char *name;
    const char *value;
};

struct om_sigv4_input {
    const char *method;
    const char *host;  /* Host header value, "host" or "host:port" */
    const char *path;  /* encoded path, "/" at least */
    const char *query; /* raw query without '?', or NULL */
    /* Further headers to sign, any case (e.g. Range, Content-MD5, x-amz-meta-*).
     * host, x-amz-date, x-amz-content-sha256 and x-amz-security-token must
     * not be listed: they are added here. */
    const struct om_header *headers;
    size_t nheaders;
    const char *payload_hash; /* lower-case hex SHA-256 or OM_UNSIGNED_PAYLOAD */
    const char *region;
    const char *service; /* "s3" */
    time_t now;
};

struct om_sigv4_output {
    char amz_date[17];     /* YYYYMMDDTHHMMSSZ, to send as x-amz-date */
    char signature[65];    /* hex; never log it */
    char *authorization;   /* full Authorization header value; caller frees */
};

/* Sign. session_token may be NULL; when set, it is signed as
 * x-amz-security-token (the caller sends that header). Returns 0, -EINVAL or
 * -ENOMEM; on failure out->authorization is NULL. */
int om_sigv4_sign(const struct om_sigv4_input *in, const char *access_key, const char *secret_key,
                  const char *session_token, struct om_sigv4_output *out);

/* The canonical request text (for tests and debugging; contains no secret).
 * amz_date as in the output. Appends to out; returns 0 or -ENOMEM. */
int om_sigv4_canonical_request(const struct om_sigv4_input *in, const char *amz_date,
                               const char *session_token, struct om_buf *out);

/* The canonical query string for a raw query (sorted, re-encoded). */
int om_sigv4_canonical_query(const char *query, struct om_buf *out);

#endif
