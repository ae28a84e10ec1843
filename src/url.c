/* URL parsing and S3 percent-encoding. */
#include "objmount/url.h"

#include <ctype.h>
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

int om_url_parse(const char *s, struct om_url *u)
{
    memset(u, 0, sizeof(*u));
    const char *p;
    if ((p = om_str_skip_prefix_ci(s, "https://")))
        u->https = true;
    else if (!(p = om_str_skip_prefix_ci(s, "http://")))
        return -EINVAL;

    size_t auth_len = strcspn(p, "/?#");
    const char *auth_end = p + auth_len;
    if (memchr(p, '@', auth_len))
        return -EINVAL; /* userinfo is never valid for us */
    const char *host_end = auth_end;
    const char *port_str = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', auth_len);
        if (!rb)
            return -EINVAL;
        host_end = rb + 1;
        if (host_end < auth_end) {
            if (*host_end != ':')
                return -EINVAL;
            port_str = host_end + 1;
        }
    } else {
        const char *colon = memchr(p, ':', auth_len);
        if (colon) {
            host_end = colon;
            port_str = colon + 1;
        }
    }
    if (host_end == p)
        return -EINVAL;
    u->port = u->https ? 443 : 80;
    if (port_str && port_str < auth_end) {
        long port = 0;
        for (const char *q = port_str; q < auth_end; q++) {
            if (!isdigit((unsigned char)*q))
                return -EINVAL;
            port = port * 10 + (*q - '0');
            if (port > 65535)
                return -EINVAL;
        }
        if (port == 0)
            return -EINVAL;
        u->port = (int)port;
    }
    u->host = strndup(p, (size_t)(host_end - p));
    const char *rest = auth_end;
    size_t path_len = strcspn(rest, "?#");
    if (path_len == 0)
        u->path = strdup("/");
    else
        u->path = strndup(rest, path_len);
    rest += path_len;
    if (*rest == '?') {
        rest++;
        u->query = strndup(rest, strcspn(rest, "#"));
        if (!u->query)
            goto nomem;
    }
    if (!u->host || !u->path)
        goto nomem;
    for (char *h = u->host; *h; h++)
        *h = (char)tolower((unsigned char)*h);
    if (u->path[0] != '/') {
        om_url_free(u);
        return -EINVAL;
    }
    return 0;
nomem:
    om_url_free(u);
    return -ENOMEM;
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
    struct om_url b, t;
    int rc = om_url_parse(base, &b);
    if (rc)
        return rc;
    while (*location == ' ' || *location == '\t')
        location++;
    /* another scheme ("ftp:", "file:") is never followed */
    size_t scheme_len = strspn(location, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789+.-");
    if (scheme_len > 0 && location[scheme_len] == ':' && isalpha((unsigned char)location[0]) &&
        !om_str_skip_prefix_ci(location, "http:") && !om_str_skip_prefix_ci(location, "https:")) {
        om_url_free(&b);
        return -EINVAL;
    }
    struct om_buf abs = {0};
    if (om_str_skip_prefix_ci(location, "http://") || om_str_skip_prefix_ci(location, "https://")) {
        rc = om_buf_puts(&abs, location);
    } else if (location[0] == '/' && location[1] == '/') {
        rc = om_buf_printf(&abs, "%s:%s", b.https ? "https" : "http", location);
    } else {
        char *host = om_url_host_header(&b);
        if (!host) {
            rc = -ENOMEM;
        } else if (location[0] == '/') {
            rc = om_buf_printf(&abs, "%s://%s%s", b.https ? "https" : "http", host, location);
        } else {
            /* relative to the base path's directory */
            const char *slash = strrchr(b.path, '/');
            int dirlen = (int)(slash - b.path) + 1;
            rc = om_buf_printf(&abs, "%s://%s%.*s%s", b.https ? "https" : "http", host, dirlen,
                               b.path, location);
        }
        free(host);
    }
    om_url_free(&b);
    if (rc) {
        om_buf_free(&abs);
        return rc;
    }
    rc = om_url_parse(abs.data, &t);
    om_buf_free(&abs);
    if (rc)
        return rc;
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
