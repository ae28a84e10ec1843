/* URLs as S3 uses them: parsing, S3/SigV4 percent-encoding, redirect targets. */
#ifndef OBJMOUNT_URL_H
#define OBJMOUNT_URL_H

#include <stdbool.h>
#include <stddef.h>

#include "objmount/util.h"

/* A parsed absolute http(s) URL. All strings are owned by the struct and
 * released by om_url_free(). path is never NULL and starts with '/'; it keeps
 * the encoding it had in the input. query is the raw text after '?' or NULL. */
struct om_url {
    bool https;
    char *host; /* without port; IPv6 literals keep their brackets */
    int port;   /* explicit port, or the scheme's default */
    char *path;
    char *query;
};

/* Parse an absolute URL. Returns 0, -EINVAL (not http/https, no host, bad
 * port) or -ENOMEM. On failure *u is left empty. */
int om_url_parse(const char *s, struct om_url *u);
void om_url_free(struct om_url *u);

/* A libcurl URL handle (CURLU) holding s, parsed exactly as om_url_parse
 * parses it. The engine hands it to curl (CURLOPT_CURLU), so the URL that is
 * signed and checked and the URL curl connects to come from one parser.
 * NULL on error; free with curl_url_cleanup(). */
struct Curl_URL;
struct Curl_URL *om_url_curlu(const char *s);

/* "host" or "host:port" when the port is not the scheme default, as sent in
 * the Host header and signed. Caller frees; NULL on ENOMEM. */
char *om_url_host_header(const struct om_url *u);

/* Full URL text. Caller frees; NULL on ENOMEM. */
char *om_url_format(const struct om_url *u);

/* Resolve a Location header value against the URL it answered. Absolute
 * URLs, scheme-relative (//host/...), path-absolute (/p) and relative paths
 * are handled. The query of location is kept verbatim; the path is
 * re-encoded to the S3 canonical form (om_uri_normalize_path). Caller frees
 * *out. Returns 0, -EINVAL or -ENOMEM. */
int om_url_resolve(const char *base, const char *location, char **out);

/* Append s[0..len) encoded per the S3/SigV4 rules: A-Z a-z 0-9 - . _ ~ stay,
 * '/' stays when keep_slash, every other byte becomes %XX (upper-case hex). */
int om_uri_encode(struct om_buf *out, const char *s, size_t len, bool keep_slash);

/* Append the percent-decoded form of s[0..len). Malformed escapes are kept
 * literally; '+' is kept as '+'. */
int om_uri_decode(struct om_buf *out, const char *s, size_t len);

/* Decode then encode (keeping '/'): the form S3 signs. Caller frees. */
char *om_uri_normalize_path(const char *path);

/* url for a log line: everything before '?', then "?..." when there was a
 * query (it may hold presigned signatures). Truncated to fit out (size n). */
void om_url_redact(const char *url, char *out, size_t n);

/* ---- where credentials may go ---- */

/* Is host (lower-case; an IPv6 literal with or without brackets) named by
 * list? Entries are separated by ';', ',' or white space; each is a host
 * name (exact, case-insensitive), "*.suffix" (any name ending in ".suffix"),
 * an IP address, or a CIDR block (10.0.0.0/8, fd00::/8). A NULL or empty
 * list names nothing; "*" names every host. */
bool om_host_in_list(const char *list, const char *host);

/* Check every entry of a redirect_hosts list. 0, or -EINVAL with the
 * offending entry described in err. */
int om_host_list_check(const char *list, char *err, size_t errlen);

/* The credential policy of one request (a pure function). Credentials go to
 * the endpoint host (any port; "BUCKET.endpoint" for virtual-host
 * addressing when bucket is not NULL) and to hosts named by allowed; a
 * bearer token never goes over plain http to a host other than the
 * endpoint's. */
bool om_creds_allowed(const char *endpoint_host, const char *bucket, const char *allowed,
                      const char *host, bool https, bool bearer);

#endif
