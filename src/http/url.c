/* URL parsing and S3 percent-encoding. */
#include "objmount/url.h"

#include <ctype.h>
#include <curl/curl.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void om_url_free(struct om_url *u)
{
    free(u->host);
    free(u->path);
    free(u->query);
    memset(u, 0, sizeof(*u));
}

/* Copy one part of h, or NULL when absent. Returns 0, -EINVAL or -ENOMEM. */
static int curlu_part(CURLU *h, CURLUPart what, unsigned flags, char **out)
{
    char *v = NULL;
    CURLUcode uc = curl_url_get(h, what, &v, flags);
    *out = NULL;
    if (uc == CURLUE_OUT_OF_MEMORY)
        return -ENOMEM;
    if (uc != CURLUE_OK)
        return 0;
    *out = strdup(v);
    curl_free(v);
    return *out ? 0 : -ENOMEM;
}

/* A host name (letters, digits, '-', '.', '_') or a bracketed IPv6
 * literal. libcurl decodes %XX in host names, so a host that held '%' could
 * name another host each time it is formatted and parsed again: refused,
 * like any byte a DNS name or an address cannot hold. */
static bool host_ok(const char *h)
{
    if (h[0] == '[') {
        size_t n = strlen(h);
        if (n < 3 || h[n - 1] != ']')
            return false;
        for (size_t i = 1; i + 1 < n; i++)
            if (!isxdigit((unsigned char)h[i]) && h[i] != ':' && h[i] != '.')
                return false;
        return true;
    }
    for (const char *c = h; *c; c++)
        if (!isalnum((unsigned char)*c) && *c != '-' && *c != '.' && *c != '_')
            return false;
    return true;
}

/* Fill u from a CURLU handle: only http(s), no user info, a host, a port. */
static int url_from_curlu(CURLU *h, struct om_url *u)
{
    char *scheme = NULL, *user = NULL, *port = NULL;
    memset(u, 0, sizeof(*u));
    int rc = curlu_part(h, CURLUPART_SCHEME, 0, &scheme);
    if (!rc)
        rc = curlu_part(h, CURLUPART_USER, 0, &user);
    if (!rc)
        rc = curlu_part(h, CURLUPART_PORT, CURLU_DEFAULT_PORT, &port);
    if (!rc)
        rc = curlu_part(h, CURLUPART_HOST, 0, &u->host);
    if (!rc)
        rc = curlu_part(h, CURLUPART_PATH, 0, &u->path);
    if (!rc)
        rc = curlu_part(h, CURLUPART_QUERY, 0, &u->query);
    if (!rc && (!scheme || user || !port || !u->host || !*u->host || !u->path))
        rc = -EINVAL;
    if (!rc && !host_ok(u->host))
        rc = -EINVAL;
    if (!rc && strcasecmp(scheme, "https") == 0)
        u->https = true;
    else if (!rc && strcasecmp(scheme, "http") != 0)
        rc = -EINVAL;
    if (!rc) {
        uint64_t p;
        if (om_parse_uint(port, 65535, &p) || p == 0)
            rc = -EINVAL;
        u->port = (int)p;
    }
    if (!rc && !*u->path) {
        free(u->path);
        u->path = strdup("/");
        if (!u->path)
            rc = -ENOMEM;
    }
    if (!rc && u->path[0] != '/')
        rc = -EINVAL;
    free(scheme);
    free(user);
    free(port);
    if (rc) {
        om_url_free(u);
        return rc;
    }
    for (char *c = u->host; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    return 0;
}

/* Strict for URLs we send (a space is never sent raw); lenient (spaces
 * allowed, re-encoded after) for Location values. */
static int curlu_set_url_flags(CURLU *h, const char *s, unsigned flags)
{
    CURLUcode uc = curl_url_set(h, CURLUPART_URL, s, CURLU_PATH_AS_IS | flags);
    return uc == CURLUE_OK ? 0 : uc == CURLUE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
}

static int curlu_set_url(CURLU *h, const char *s)
{
    return curlu_set_url_flags(h, s, 0);
}

struct Curl_URL *om_url_curlu(const char *s)
{
    CURLU *h = curl_url();
    if (h && curlu_set_url(h, s)) {
        curl_url_cleanup(h);
        h = NULL;
    }
    return h;
}

int om_url_parse(const char *s, struct om_url *u)
{
    memset(u, 0, sizeof(*u));
    /* curl guesses a scheme for "host:port"; we never do */
    if (!om_str_skip_prefix_ci(s, "https://") && !om_str_skip_prefix_ci(s, "http://"))
        return -EINVAL;
    CURLU *h = curl_url();
    if (!h)
        return -ENOMEM;
    int rc = curlu_set_url(h, s);
    if (!rc)
        rc = url_from_curlu(h, u);
    curl_url_cleanup(h);
    return rc;
}

static bool default_port(const struct om_url *u)
{
    return u->port == (u->https ? 443 : 80);
}

char *om_url_host_header(const struct om_url *u)
{
    char *out = NULL;
    if (default_port(u))
        return strdup(u->host);
    if (asprintf(&out, "%s:%d", u->host, u->port) < 0)
        return NULL;
    return out;
}

char *om_url_format(const struct om_url *u)
{
    char *host = om_url_host_header(u);
    if (!host)
        return NULL;
    char *out = NULL;
    int n = asprintf(&out, "%s://%s%s%s%s", u->https ? "https" : "http", host, u->path,
                     u->query ? "?" : "", u->query ? u->query : "");
    free(host);
    return n < 0 ? NULL : out;
}

int om_uri_encode(struct om_buf *out, const char *s, size_t len, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int rc;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
            rc = om_buf_append(out, &s[i], 1);
        } else {
            char esc[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc = om_buf_append(out, esc, 3);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int hexdigit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int om_uri_decode(struct om_buf *out, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%' && i + 2 < len) {
            int hi = hexdigit(s[i + 1]);
            int lo = hexdigit(s[i + 2]);
            if (hi >= 0 && lo >= 0) {
                c = (char)(hi << 4 | lo);
                i += 2;
            }
        }
        if (om_buf_append(out, &c, 1))
            return -ENOMEM;
    }
    return 0;
}

char *om_uri_normalize_path(const char *path)
{
    struct om_buf dec = {0}, enc = {0};
    if (om_uri_decode(&dec, path, strlen(path)) ||
        om_uri_encode(&enc, dec.data ? dec.data : "", dec.len, true)) {
        om_buf_free(&dec);
        om_buf_free(&enc);
        return NULL;
    }
    om_buf_free(&dec);
    return om_buf_steal(&enc);
}

int om_url_resolve(const char *base, const char *location, char **out)
{
    *out = NULL;
    while (*location == ' ' || *location == '\t')
        location++;
    if (!*location)
        return -EINVAL;
    /* curl resolves the Location against the URL it answered (RFC 3986);
     * only http and https results are kept */
    CURLU *h = curl_url();
    if (!h)
        return -ENOMEM;
    struct om_url t;
    int rc = curlu_set_url(h, base);
    if (!rc)
        rc = curlu_set_url_flags(h, location, CURLU_ALLOW_SPACE);
    if (!rc)
        rc = url_from_curlu(h, &t);
    curl_url_cleanup(h);
    if (rc)
        return rc;
    if (t.query && strchr(t.query, ' ')) {
        struct om_buf q = {0};
        for (const char *c = t.query; *c && !rc; c++)
            rc = *c == ' ' ? om_buf_puts(&q, "%20") : om_buf_append(&q, c, 1);
        if (rc) {
            om_buf_free(&q);
            om_url_free(&t);
            return rc;
        }
        free(t.query);
        t.query = om_buf_steal(&q);
    }
    char *norm = om_uri_normalize_path(t.path);
    if (!norm) {
        om_url_free(&t);
        return -ENOMEM;
    }
    free(t.path);
    t.path = norm;
    *out = om_url_format(&t);
    om_url_free(&t);
    return *out ? 0 : -ENOMEM;
}

/* ---- where credentials may go ---- */

/* An IP address (brackets stripped) into addr; family or 0. */
static int parse_ip(const char *s, size_t len, unsigned char addr[16])
{
    char tmp[64];
    if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof(tmp))
        return 0;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    if (inet_pton(AF_INET, tmp, addr) == 1)
        return AF_INET;
    if (inet_pton(AF_INET6, tmp, addr) == 1)
        return AF_INET6;
    return 0;
}

/* Does one entry (e, elen) name host? Sets *valid to whether it parses. */
static bool entry_matches(const char *e, size_t elen, const char *host, bool *valid)
{
    *valid = true;
    if (elen == 1 && e[0] == '*')
        return true;
    const char *slash = memchr(e, '/', elen);
    if (slash) {
        unsigned char net[16], ip[16];
        int fam = parse_ip(e, (size_t)(slash - e), net);
        uint64_t bits;
        int max = fam == AF_INET ? 32 : 128;
        if (!fam ||
            om_parse_uint_n(slash + 1, elen - (size_t)(slash - e) - 1, (uint64_t)max, &bits)) {
            *valid = false;
            return false;
        }
        if (!host || parse_ip(host, strlen(host), ip) != fam)
            return false;
        size_t full = (size_t)bits / 8;
        if (memcmp(net, ip, full) != 0)
            return false;
        unsigned rem = (unsigned)bits % 8;
        unsigned char mask = (unsigned char)(0xff << (8 - rem));
        return rem == 0 || ((net[full] ^ ip[full]) & mask) == 0;
    }
    for (size_t i = 0; i < elen; i++) {
        unsigned char c = (unsigned char)e[i];
        if (!(isalnum(c) || c == '-' || c == '.' || c == ':' || c == '[' || c == ']' ||
              (c == '*' && i == 0 && elen > 2 && e[1] == '.'))) {
            *valid = false;
            return false;
        }
    }
    if (!host)
        return false;
    unsigned char a[16], b[16];
    int fa = parse_ip(e, elen, a);
    if (fa)
        return parse_ip(host, strlen(host), b) == fa && memcmp(a, b, fa == AF_INET ? 4 : 16) == 0;
    size_t hlen = strlen(host);
    if (e[0] == '*') /* "*.suffix": the dot stays, so "suffix" alone does not match */
        return hlen > elen - 1 && strncasecmp(host + hlen - (elen - 1), e + 1, elen - 1) == 0;
    return hlen == elen && strncasecmp(host, e, elen) == 0;
}

/* Walk the entries of list; stop at the first match (or invalid entry when
 * bad is set). */
static bool list_walk(const char *list, const char *host, const char **bad, size_t *badlen)
{
    const char *p = list ? list : "";
    while (*p) {
        p += strspn(p, "; ,\t\n");
        size_t n = strcspn(p, "; ,\t\n");
        if (n == 0)
            break;
        bool valid;
        if (entry_matches(p, n, host, &valid))
            return true;
        if (!valid && bad) {
            *bad = p;
            *badlen = n;
            return false;
        }
        p += n;
    }
    return false;
}

bool om_host_in_list(const char *list, const char *host)
{
    return host && list_walk(list, host, NULL, NULL);
}

int om_host_list_check(const char *list, char *err, size_t errlen)
{
    const char *bad = NULL;
    size_t badlen = 0;
    list_walk(list, NULL, &bad, &badlen);
    if (!bad)
        return 0;
    snprintf(err, errlen,
             "redirect_hosts: '%.*s' is not a host name, *.suffix, IP address or CIDR block",
             (int)OM_MIN(badlen, (size_t)100), bad);
    return -EINVAL;
}

bool om_creds_allowed(const char *endpoint_host, const char *bucket, const char *allowed,
                      const char *host, bool https, bool bearer)
{
    if (!host || !endpoint_host)
        return false;
    if (strcasecmp(host, endpoint_host) == 0)
        return true;
    size_t bl = bucket ? strlen(bucket) : 0;
    if (bucket && strncasecmp(host, bucket, bl) == 0 && host[bl] == '.' &&
        strcasecmp(host + bl + 1, endpoint_host) == 0)
        return true;
    if (bearer && !https)
        return false;
    return om_host_in_list(allowed, host);
}

void om_url_redact(const char *url, char *out, size_t n)
{
    if (n == 0)
        return;
    size_t k = strcspn(url, "?#");
    const char *tail = url[k] ? "?..." : "";
    /* cut the path, never the marker: a cut "?.." would look like a query */
    size_t room = n - 1 > strlen(tail) ? n - 1 - strlen(tail) : 0;
    snprintf(out, n, "%.*s%s", (int)OM_MIN(OM_MIN(k, room), (size_t)INT32_MAX), url,
             room ? tail : "");
}
