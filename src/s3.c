/* S3 operations: URLs, signing hooks, responses, the errno table. */
#include "objmount/s3.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/sigv4.h"
#include "objmount/url.h"

struct om_s3 {
    struct om_http *http;
    bool https;
    int port;
    char *host;   /* endpoint host, without port */
    char *prefix; /* endpoint path prefix without trailing '/', "" when none */
    char *bucket;
    bool vhost;
    bool aws;
    bool sign_payload;
    struct om_creds creds;
    pthread_mutex_t lock; /* guards region and host (they change on region redirects) */
    char region[64];
};

/* ---- the errno table ---- */

static const struct {
    const char *code;
    int err;
} code_table[] = {
    {"NoSuchKey", -ENOENT},
    {"NoSuchBucket", -ENOENT},
    {"NoSuchUpload", -ENOENT},
    {"NotFound", -ENOENT},
    {"AccessDenied", -EACCES},
    {"AllAccessDisabled", -EACCES},
    {"InvalidAccessKeyId", -EACCES},
    {"SignatureDoesNotMatch", -EACCES},
    {"ExpiredToken", -EACCES},
    {"InvalidToken", -EACCES},
    {"TokenRefreshRequired", -EACCES},
    {"RequestTimeTooSkewed", -EACCES},
    {"AuthorizationHeaderMalformed", -EACCES},
    {"PreconditionFailed", -ESTALE},
    {"InvalidRange", -ERANGE},
    {"EntityTooLarge", -EFBIG},
    {"EntityTooSmall", -EINVAL},
    {"KeyTooLongError", -ENAMETOOLONG},
    {"BadDigest", -EBADMSG},
    {"InvalidDigest", -EBADMSG},
    {"XAmzContentSHA256Mismatch", -EBADMSG},
    {"InvalidPart", -EBADMSG},
    {"InvalidPartOrder", -EINVAL},
    {"InvalidArgument", -EINVAL},
    {"InvalidRequest", -EINVAL},
    {"MalformedXML", -EINVAL},
    {"InvalidBucketName", -EINVAL},
    {"MissingContentLength", -EINVAL},
    {"SlowDown", -EAGAIN},
    {"ServiceUnavailable", -EAGAIN},
    {"InternalError", -EIO},
    {"RequestTimeout", -ETIMEDOUT},
    {"NotImplemented", -ENOSYS},
    {"MethodNotAllowed", -ENOTSUP},
    {"QuotaExceeded", -EDQUOT},
    {"BucketAlreadyExists", -EEXIST},
    {"BucketAlreadyOwnedByYou", -EEXIST},
    {"PermanentRedirect", -EREMOTE},
    {"TemporaryRedirect", -EREMOTE},
};

int om_s3_errno(long status, const char *code)
{
    if (code && *code) {
        for (size_t i = 0; i < OM_ARRAY_LEN(code_table); i++) {
            if (strcmp(code, code_table[i].code) == 0)
                return code_table[i].err;
        }
    }
    switch (status) {
    case 400:
        return -EINVAL;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        return -ENOENT;
    case 405:
        return -ENOTSUP;
    case 409:
        return -EBUSY;
    case 412:
        return -ESTALE;
    case 416:
        return -ERANGE;
    case 429:
    case 503:
        return -EAGAIN;
    case 501:
        return -ENOSYS;
    case 301:
    case 302:
    case 307:
    case 308:
        return -EREMOTE;
    default:
        return -EIO;
    }
}

/* ---- construction ---- */

static bool dns_compatible(const char *bucket)
{
    size_t n = strlen(bucket);
    if (n < 3 || n > 63 || strchr(bucket, '.'))
        return false;
    for (const char *c = bucket; *c; c++) {
        if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-'))
            return false;
    }
    return true;
}

static bool is_aws_host(const char *host)
{
    size_t n = strlen(host);
    static const char suffix[] = ".amazonaws.com";
    return n > sizeof(suffix) - 1 && strcmp(host + n - (sizeof(suffix) - 1), suffix) == 0;
}

struct om_s3 *om_s3_new(struct om_http *http, const struct om_s3_config *cfg,
                        const struct om_creds *creds, char *err, size_t errlen)
{
    if (!cfg->bucket || !*cfg->bucket || strchr(cfg->bucket, '/')) {
        snprintf(err, errlen, "invalid bucket name '%s'", cfg->bucket ? cfg->bucket : "");
        return NULL;
    }
    struct om_url u;
    int rc = om_url_parse(cfg->endpoint ? cfg->endpoint : "", &u);
    if (rc) {
        snprintf(err, errlen, "invalid endpoint '%s': expected http://host[:port][/prefix] or "
                 "https://...", cfg->endpoint ? cfg->endpoint : "");
        return NULL;
    }
    if (u.query) {
        snprintf(err, errlen, "invalid endpoint '%s': a query string is not allowed", cfg->endpoint);
        om_url_free(&u);
        return NULL;
    }
    struct om_s3 *s3 = calloc(1, sizeof(*s3));
    if (!s3)
        goto nomem;
    s3->http = http;
    s3->https = u.https;
    s3->port = u.port;
    s3->host = u.host;
    u.host = NULL;
    size_t plen = strlen(u.path);
    while (plen > 0 && u.path[plen - 1] == '/')
        plen--;
    s3->prefix = strndup(u.path, plen);
    s3->bucket = strdup(cfg->bucket);
    om_url_free(&u);
    if (!s3->prefix || !s3->bucket || om_creds_copy(&s3->creds, creds))
        goto nomem;
    s3->aws = is_aws_host(s3->host);
    switch (cfg->addressing) {
    case OM_ADDR_PATH:
        s3->vhost = false;
        break;
    case OM_ADDR_VHOST:
        s3->vhost = true;
        break;
    default:
        s3->vhost = s3->aws && dns_compatible(s3->bucket);
        break;
    }
    s3->sign_payload = cfg->sign_payload;
    om_strlcpy(s3->region, cfg->region && *cfg->region ? cfg->region : "us-east-1",
               sizeof(s3->region));
    pthread_mutex_init(&s3->lock, NULL);
    return s3;
nomem:
    om_url_free(&u);
    if (s3) {
        free(s3->host);
        free(s3->prefix);
        free(s3->bucket);
        om_creds_clear(&s3->creds);
        free(s3);
    }
    snprintf(err, errlen, "out of memory");
    return NULL;
}

void om_s3_free(struct om_s3 *s3)
{
    if (!s3)
        return;
    pthread_mutex_destroy(&s3->lock);
    free(s3->host);
    free(s3->prefix);
    free(s3->bucket);
    om_creds_clear(&s3->creds);
    free(s3);
}

void om_s3_region(struct om_s3 *s3, char *out, size_t outlen)
{
    pthread_mutex_lock(&s3->lock);
    om_strlcpy(out, s3->region, outlen);
    pthread_mutex_unlock(&s3->lock);
}

struct om_http *om_s3_http(struct om_s3 *s3)
{
    return s3->http;
}

char *om_s3_url(struct om_s3 *s3, const char *key, const char *query)
{
    struct om_buf b = {0};
    bool def_port = s3->port == (s3->https ? 443 : 80);
    pthread_mutex_lock(&s3->lock);
    int rc = om_buf_printf(&b, "%s://%s%s%s", s3->https ? "https" : "http",
                           s3->vhost ? s3->bucket : "", s3->vhost ? "." : "", s3->host);
    pthread_mutex_unlock(&s3->lock);
    if (!rc && !def_port)
        rc = om_buf_printf(&b, ":%d", s3->port);
    if (!rc)
        rc = om_buf_puts(&b, s3->prefix);
    if (!rc && !s3->vhost) {
        rc = om_buf_puts(&b, "/");
        if (!rc)
            rc = om_uri_encode(&b, s3->bucket, strlen(s3->bucket), false);
    }
    if (!rc && key && *key) {
        rc = om_buf_puts(&b, "/");
        if (!rc)
            rc = om_uri_encode(&b, key, strlen(key), true);
    } else if (!rc && s3->vhost) {
        rc = om_buf_puts(&b, "/");
    }
    if (!rc && query && *query)
        rc = om_buf_printf(&b, "?%s", query);
    if (rc) {
        om_buf_free(&b);
        return NULL;
    }
    return om_buf_steal(&b);
}

/* ---- hooks ---- */

static bool signed_header(const char *name)
{
    return strncasecmp(name, "x-amz-", 6) == 0 || strcasecmp(name, "content-md5") == 0 ||
           strcasecmp(name, "content-type") == 0;
}

static int hook_sign(void *ud, const struct om_http_req *req, const char *url,
                     struct om_header_list *out)
{
    struct om_s3_call *c = ud;
    struct om_s3 *s3 = c->s3;
    if (s3->creds.anonymous)
        return 0;
    if (s3->creds.bearer_token)
        return om_headers_addf(out, "Authorization", "Bearer %s", s3->creds.bearer_token);

    struct om_url u;
    int rc = om_url_parse(url, &u);
    if (rc)
        return rc;
    char *host = om_url_host_header(&u);
    struct om_header *hs = calloc(req->headers.n + 1, sizeof(*hs));
    if (!host || !hs) {
        free(host);
        free(hs);
        om_url_free(&u);
        return -ENOMEM;
    }
    size_t nh = 0;
    for (size_t i = 0; i < req->headers.n; i++) {
        if (signed_header(req->headers.v[i].name))
            hs[nh++] = (struct om_header){req->headers.v[i].name, req->headers.v[i].value};
    }
    char region[64];
    om_s3_region(s3, region, sizeof(region));
    struct om_sigv4_input in = {
        .method = req->method,
        .host = host,
        .path = u.path,
        .query = u.query,
        .headers = hs,
        .nheaders = nh,
        .payload_hash = c->payload_hash[0] ? c->payload_hash : OM_UNSIGNED_PAYLOAD,
        .region = region,
        .service = "s3",
        .now = time(NULL),
    };
    struct om_sigv4_output sig;
    rc = om_sigv4_sign(&in, s3->creds.access_key, s3->creds.secret_key, s3->creds.session_token,
                       &sig);
    if (!rc)
        rc = om_headers_add(out, "x-amz-date", sig.amz_date);
    if (!rc)
        rc = om_headers_add(out, "x-amz-content-sha256", in.payload_hash);
    if (!rc && s3->creds.session_token)
        rc = om_headers_add(out, "x-amz-security-token", s3->creds.session_token);
    if (!rc)
        rc = om_headers_add(out, "Authorization", sig.authorization);
    free(sig.authorization);
    free(host);
    free(hs);
    om_url_free(&u);
    return rc;
}

static int hook_region_redirect(void *ud, struct om_http_req *req, const char *region, char **url)
{
    struct om_s3_call *c = ud;
    struct om_s3 *s3 = c->s3;
    if (!*region || strlen(region) >= sizeof(s3->region))
        return -EINVAL;
    pthread_mutex_lock(&s3->lock);
    bool same = strcmp(s3->region, region) == 0;
    char *newhost = NULL;
    if (!same) {
        om_strlcpy(s3->region, region, sizeof(s3->region));
        if (s3->aws && asprintf(&newhost, "s3.%s.amazonaws.com", region) > 0) {
            free(s3->host);
            s3->host = newhost;
        }
    }
    pthread_mutex_unlock(&s3->lock);
    if (same)
        return -EREMOTE; /* already signing for it: the error is real */
    om_info("bucket %s answers from region %s; signing for that region", s3->bucket, region);
    if (s3->aws) {
        /* rebuild the URL on the regional endpoint, keeping path and query */
        struct om_url u;
        if (om_url_parse(*url, &u) == 0) {
            char *fresh = om_s3_url(s3, NULL, NULL);
            struct om_url f;
            if (fresh && om_url_parse(fresh, &f) == 0) {
                free(u.host);
                u.host = f.host;
                f.host = NULL;
                char *next = om_url_format(&u);
                if (next) {
                    free(*url);
                    *url = next;
                }
                om_url_free(&f);
            }
            free(fresh);
            om_url_free(&u);
        }
    }
    (void)req;
    return 0;
}

static int hook_error_code(void *ud, const char *body, size_t len, char *code, size_t codelen)
{
    (void)ud;
    return om_xml_parse_error(body, len, code, codelen, NULL, 0, NULL, 0);
}

/* ---- calls ---- */

static int call_init(struct om_s3_call *c, struct om_s3 *s3, const char *method, const char *op,
                     const char *key, const char *query)
{
    memset(c, 0, sizeof(*c));
    c->s3 = s3;
    c->total = UINT64_MAX;
    om_http_req_init(&c->req);
    c->req.method = method;
    c->req.op = op;
    c->req.url = om_s3_url(s3, key, query);
    c->req.hooks = (struct om_http_hooks){
        .sign = hook_sign,
        .region_redirect = hook_region_redirect,
        .error_code = hook_error_code,
        .ud = c,
    };
    memcpy(c->payload_hash, OM_EMPTY_SHA256, sizeof(c->payload_hash));
    return c->req.url ? 0 : -ENOMEM;
}

static void call_cleanup(struct om_s3_call *c)
{
    om_http_req_cleanup(&c->req);
}

/* Payload hash for a body: SHA-256 of memory bodies; file bodies are
 * UNSIGNED-PAYLOAD (Content-MD5 guards them) unless sign_payload is set. */
static int call_set_body(struct om_s3_call *c, const struct om_http_body *body)
{
    c->req.body = *body;
    unsigned char h[OM_SHA256_LEN];
    int rc = 0;
    if (body->kind == OM_BODY_MEM) {
        rc = om_sha256(body->mem, (size_t)body->len, h);
    } else if (body->kind == OM_BODY_FD && c->s3->sign_payload) {
        rc = om_digest_fd_range(OM_DIGEST_SHA256, body->fd, body->off, body->len, h);
    } else if (body->kind == OM_BODY_FD) {
        c->payload_hash[0] = '\0'; /* UNSIGNED-PAYLOAD */
        return 0;
    } else {
        return 0;
    }
    if (!rc)
        om_hex(h, sizeof(h), c->payload_hash);
    return rc;
}

/* Turn a finished request into 0 or -errno, filling err. */
static int call_result(struct om_s3_call *c, struct om_s3_error *err)
{
    struct om_http_req *r = &c->req;
    struct om_s3_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof(*err));
    err->status = r->status;
    if (!r->error)
        return 0;
    if (r->status >= 300) {
        om_xml_parse_error(r->resp_body.data, r->resp_body.len, err->code, sizeof(err->code),
                           err->message, sizeof(err->message), err->request_id,
                           sizeof(err->request_id));
        if (!err->message[0] && strncmp(r->errmsg, "HTTP ", 5) != 0)
            om_strlcpy(err->message, r->errmsg, sizeof(err->message));
        /* Only an unfollowed redirect or an HTTP error status gets mapped;
         * engine-level failures (loops, refused redirects) keep their errno. */
        if (r->error == -EIO)
            return om_s3_errno(r->status, err->code);
        return r->error;
    }
    om_strlcpy(err->message, r->errmsg, sizeof(err->message));
    return r->error;
}

/* A 2xx answer that carries an <Error> (CompleteMultipartUpload, CopyObject). */
static int body_error(struct om_s3_call *c, struct om_s3_error *err)
{
    struct om_s3_error local;
    if (!err)
        err = &local;
    if (om_xml_parse_error(c->req.resp_body.data, c->req.resp_body.len, err->code,
                           sizeof(err->code), err->message, sizeof(err->message),
                           err->request_id, sizeof(err->request_id)) == 0) {
        int e = om_s3_errno(500, err->code);
        return e;
    }
    return 0;
}

static int call_perform(struct om_s3_call *c, struct om_s3_error *err)
{
    om_http_perform(c->s3->http, &c->req);
    return call_result(c, err);
}

static void copy_etag(const char *src, char *dst)
{
    if (!dst)
        return;
    dst[0] = '\0';
    if (!src)
        return;
    size_t n = strlen(src);
    if (n >= 2 && src[0] == '"' && src[n - 1] == '"') {
        src++;
        n -= 2;
    }
    if (n >= OM_ETAG_MAX)
        n = OM_ETAG_MAX - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static bool parse_u32(const char *s, uint32_t *out, int base)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, base);
    if (errno || *end || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    return true;
}

void om_s3_object_from_headers(const struct om_header_list *h, struct om_s3_object *obj)
{
    memset(obj, 0, sizeof(*obj));
    const char *v;
    if ((v = om_headers_get(h, "Content-Length")))
        obj->size = strtoull(v, NULL, 10);
    if ((v = om_headers_get(h, "Content-Range"))) {
        const char *slash = strchr(v, '/');
        if (slash && slash[1] != '*')
            obj->size = strtoull(slash + 1, NULL, 10);
    }
    if ((v = om_headers_get(h, "Last-Modified")))
        om_parse_http_date(v, &obj->mtime);
    copy_etag(om_headers_get(h, "ETag"), obj->etag);
    if ((v = om_headers_get(h, "Content-Type")))
        om_strlcpy(obj->content_type, v, sizeof(obj->content_type));
    /* s3fs-fuse writes mode in decimal; accept octal with a leading 0 too */
    if ((v = om_headers_get(h, "x-amz-meta-mode")))
        obj->has_mode = parse_u32(v, &obj->mode, v[0] == '0' && v[1] ? 8 : 10);
    obj->has_uid = parse_u32(om_headers_get(h, "x-amz-meta-uid"), &obj->uid, 10);
    obj->has_gid = parse_u32(om_headers_get(h, "x-amz-meta-gid"), &obj->gid, 10);
    if ((v = om_headers_get(h, "x-amz-meta-mtime")) && *v) {
        char *end;
        double t = strtod(v, &end);
        if (end != v && t >= 0) {
            obj->has_mtime = true;
            obj->meta_mtime.tv_sec = (time_t)t;
            obj->meta_mtime.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        }
    }
}

static int add_put_opts(struct om_http_req *r, const struct om_s3_put_opts *opts)
{
    int rc = 0;
    if (!opts)
        return 0;
    if (opts->content_type)
        rc = om_headers_add(&r->headers, "Content-Type", opts->content_type);
    for (size_t i = 0; opts->meta && i < opts->meta->n && !rc; i++)
        rc = om_headers_add(&r->headers, opts->meta->v[i].name, opts->meta->v[i].value);
    if (!rc && opts->if_none_match)
        rc = om_headers_add(&r->headers, "If-None-Match", "*");
    return rc;
}

static int add_md5(struct om_http_req *r, const unsigned char md5[OM_MD5_LEN])
{
    char b64[25];
    om_base64(md5, OM_MD5_LEN, b64);
    return om_headers_add(&r->headers, "Content-MD5", b64);
}

static bool is_md5_hex(const char *etag)
{
    if (strlen(etag) != 32)
        return false;
    for (const char *p = etag; *p; p++) {
        if (!isxdigit((unsigned char)*p))
            return false;
    }
    return true;
}

/* A returned ETag that is an MD5 must be the MD5 that was sent: anything else
 * means the server stored other bytes. Servers whose ETags are not MD5s
 * (AIStore may do this) are checked by size after commit instead. */
static int check_md5_etag(const char *etag, const unsigned char md5[OM_MD5_LEN], const char *op,
                          const char *key, struct om_s3_error *err)
{
    char want[2 * OM_MD5_LEN + 1];
    om_hex(md5, OM_MD5_LEN, want);
    if (!is_md5_hex(etag) || strcasecmp(etag, want) == 0)
        return 0;
    if (err)
        snprintf(err->message, sizeof(err->message),
                 "server ETag %s differs from the MD5 sent %s", etag, want);
    om_warn("%s %s: server ETag %s differs from the MD5 sent %s", op, key, etag, want);
    return -EBADMSG;
}

/* ---- HEAD ---- */

int om_s3_head(struct om_s3 *s3, const char *key, struct om_s3_object *obj,
               struct om_s3_error *err)
{
    struct om_s3_call c;
    int rc = call_init(&c, s3, "HEAD", "HeadObject", key, NULL);
    if (!rc)
        rc = call_perform(&c, err);
    if (!rc && obj)
        om_s3_object_from_headers(&c.req.resp_headers, obj);
    call_cleanup(&c);
    return rc;
}

/* ---- GET ---- */

static int get_sink_data(void *ud, const char *p, size_t n)
{
    struct om_s3_get *g = ud;
    struct om_s3_call *c = &g->call;
    if (!c->range_checked) {
        c->range_checked = true;
        const char *cr = om_headers_get(&c->req.resp_headers, "Content-Range");
        if (cr) {
            uint64_t a, b;
            char total[32] = "";
            if (sscanf(cr, "bytes %" SCNu64 "-%" SCNu64 "/%31s", &a, &b, total) != 3 ||
                a != g->off || b < a)
                return -EIO;
            c->skip = 0;
            c->range_len = b - a + 1;
            c->total = total[0] == '*' ? UINT64_MAX : strtoull(total, NULL, 10);
        } else {
            /* 200: the server sent the whole object */
            const char *cl = om_headers_get(&c->req.resp_headers, "Content-Length");
            c->skip = g->off;
            c->total = cl ? strtoull(cl, NULL, 10) : UINT64_MAX;
            c->range_len = UINT64_MAX;
        }
    }
    if (c->skip) {
        size_t k = (size_t)OM_MIN((uint64_t)n, c->skip);
        p += k;
        n -= k;
        c->skip -= k;
    }
    size_t room = (size_t)(g->len - g->got);
    size_t k = OM_MIN(n, room);
    memcpy(g->buf + g->got, p, k);
    g->got += k;
    return 0;
}

static void get_sink_reset(void *ud)
{
    struct om_s3_get *g = ud;
    g->got = 0;
    g->call.range_checked = false;
    g->call.skip = 0;
}

static int get_build(struct om_s3 *s3, struct om_s3_get *g)
{
    g->got = 0;
    g->error = 0;
    memset(&g->obj, 0, sizeof(g->obj));
    memset(&g->err, 0, sizeof(g->err));
    int rc = call_init(&g->call, s3, "GET", "GetObject", g->key, NULL);
    if (!rc)
        rc = om_headers_addf(&g->call.req.headers, "Range", "bytes=%" PRIu64 "-%" PRIu64, g->off,
                             g->off + g->len - 1);
    if (!rc && g->if_match && *g->if_match)
        rc = om_headers_addf(&g->call.req.headers, "If-Match", "\"%s\"", g->if_match);
    g->call.req.sink = (struct om_http_sink){get_sink_data, get_sink_reset, g};
    g->call.op = g;
    return rc;
}

static void get_finish(struct om_s3_get *g)
{
    struct om_s3_call *c = &g->call;
    int rc = call_result(c, &g->err);
    if (rc == -ERANGE && c->req.status == 416) {
        /* the range starts at or past the end: end of object */
        om_s3_object_from_headers(&c->req.resp_headers, &g->obj);
        g->got = 0;
        g->error = 0;
        call_cleanup(c);
        return;
    }
    if (!rc) {
        om_s3_object_from_headers(&c->req.resp_headers, &g->obj);
        if (c->total != UINT64_MAX)
            g->obj.size = c->total;
        uint64_t expect = g->len;
        if (c->total != UINT64_MAX)
            expect = c->total > g->off ? OM_MIN(g->len, c->total - g->off) : 0;
        if (c->range_len != UINT64_MAX && c->range_len < expect)
            expect = UINT64_MAX; /* the server answered less than it holds */
        if (!c->range_checked && expect != 0)
            expect = UINT64_MAX; /* no body at all */
        if (g->got != expect) {
            rc = -EIO;
            snprintf(g->err.message, sizeof(g->err.message),
                     "short read: %" PRIu64 " bytes of %" PRIu64 " at offset %" PRIu64, g->got,
                     g->len, g->off);
            om_warn("GET %s: %s", g->key, g->err.message);
        }
    }
    g->error = rc;
    call_cleanup(c);
}

static void get_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_s3_get *g = ud;
    get_finish(g);
    g->done(g);
}

int om_s3_get_submit(struct om_s3 *s3, struct om_s3_get *g)
{
    int rc = get_build(s3, g);
    if (!rc)
        rc = om_http_submit(s3->http, &g->call.req, get_done, g);
    if (rc)
        call_cleanup(&g->call);
    return rc;
}

void om_s3_get_cancel(struct om_s3 *s3, struct om_s3_get *g)
{
    om_http_cancel(s3->http, &g->call.req);
}

ssize_t om_s3_get_range(struct om_s3 *s3, const char *key, uint64_t off, uint64_t len,
                        const char *if_match, char *buf, struct om_s3_object *obj,
                        struct om_s3_error *err)
{
    if (len == 0)
        return 0;
    struct om_s3_get g = {.key = key, .off = off, .len = len, .if_match = if_match, .buf = buf};
    int rc = get_build(s3, &g);
    if (rc) {
        call_cleanup(&g.call);
        return rc;
    }
    om_http_perform(s3->http, &g.call.req);
    get_finish(&g);
    if (obj)
        *obj = g.obj;
    if (err)
        *err = g.err;
    return g.error ? g.error : (ssize_t)g.got;
}

/* ---- PUT, DELETE, COPY ---- */

int om_s3_put(struct om_s3 *s3, const char *key, const struct om_http_body *body,
              const unsigned char md5[OM_MD5_LEN], const struct om_s3_put_opts *opts,
              char *etag, struct om_s3_error *err)
{
    struct om_s3_call c;
    int rc = call_init(&c, s3, "PUT", "PutObject", key, NULL);
    if (!rc)
        rc = call_set_body(&c, body);
    if (!rc)
        rc = add_md5(&c.req, md5);
    if (!rc)
        rc = add_put_opts(&c.req, opts);
    if (!rc)
        rc = call_perform(&c, err);
    char got[OM_ETAG_MAX];
    if (!rc) {
        copy_etag(om_headers_get(&c.req.resp_headers, "ETag"), got);
        rc = check_md5_etag(got, md5, "PutObject", key, err);
        if (etag)
            om_strlcpy(etag, got, OM_ETAG_MAX);
    }
    if (rc == -ESTALE && opts && opts->if_none_match)
        rc = -EEXIST;
    call_cleanup(&c);
    return rc;
}

int om_s3_delete(struct om_s3 *s3, const char *key, struct om_s3_error *err)
{
    struct om_s3_call c;
    int rc = call_init(&c, s3, "DELETE", "DeleteObject", key, NULL);
    if (!rc)
        rc = call_perform(&c, err);
    call_cleanup(&c);
    return rc;
}

/* "/bucket/key", encoded, as x-amz-copy-source wants it. */
static int copy_source(struct om_s3 *s3, const char *key, struct om_buf *src)
{
    int rc = om_buf_puts(src, "/");
    if (!rc)
        rc = om_uri_encode(src, s3->bucket, strlen(s3->bucket), false);
    if (!rc)
        rc = om_buf_puts(src, "/");
    if (!rc)
        rc = om_uri_encode(src, key, strlen(key), true);
    return rc;
}

int om_s3_copy(struct om_s3 *s3, const char *src_key, const char *dst_key, const char *if_match,
               const struct om_s3_put_opts *opts, char *etag, struct om_s3_error *err)
{
    struct om_s3_call c;
    struct om_buf src = {0};
    int rc = call_init(&c, s3, "PUT", "CopyObject", dst_key, NULL);
    if (!rc)
        rc = copy_source(s3, src_key, &src);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-copy-source", src.data);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-metadata-directive", opts ? "REPLACE" : "COPY");
    if (!rc && if_match && *if_match)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-if-match", "\"%s\"", if_match);
    if (!rc)
        rc = add_put_opts(&c.req, opts);
    c.req.body = (struct om_http_body){.kind = OM_BODY_MEM, .mem = "", .len = 0};
    if (!rc)
        rc = call_perform(&c, err);
    if (!rc)
        rc = body_error(&c, err);
    if (!rc && etag) {
        char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
        copy_etag(t, etag);
        free(t);
    }
    om_buf_free(&src);
    call_cleanup(&c);
    return rc;
}

/* ---- multipart ---- */

int om_s3_mpu_create(struct om_s3 *s3, const char *key, const struct om_s3_put_opts *opts,
                     char **upload_id, struct om_s3_error *err)
{
    struct om_s3_call c;
    *upload_id = NULL;
    int rc = call_init(&c, s3, "POST", "CreateMultipartUpload", key, "uploads=");
    if (!rc)
        rc = add_put_opts(&c.req, opts);
    if (!rc)
        rc = call_perform(&c, err);
    if (!rc)
        rc = body_error(&c, err);
    if (!rc) {
        *upload_id = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "UploadId");
        if (!*upload_id || !**upload_id) {
            free(*upload_id);
            *upload_id = NULL;
            rc = -EBADMSG;
            if (err)
                snprintf(err->message, sizeof(err->message), "no UploadId in the answer");
        }
    }
    call_cleanup(&c);
    return rc;
}

static int part_build(struct om_s3 *s3, struct om_s3_part_put *p)
{
    struct om_buf q = {0};
    p->error = 0;
    p->etag[0] = '\0';
    memset(&p->err, 0, sizeof(p->err));
    int rc = om_buf_printf(&q, "partNumber=%d&uploadId=", p->number);
    if (!rc)
        rc = om_uri_encode(&q, p->upload_id, strlen(p->upload_id), false);
    if (!rc)
        rc = call_init(&p->call, s3, "PUT", "UploadPart", p->key, q.data);
    om_buf_free(&q);
    if (!rc)
        rc = call_set_body(&p->call, &p->body);
    if (!rc)
        rc = add_md5(&p->call.req, p->md5);
    p->call.op = p;
    return rc;
}

static void part_finish(struct om_s3_part_put *p)
{
    int rc = call_result(&p->call, &p->err);
    if (!rc) {
        copy_etag(om_headers_get(&p->call.req.resp_headers, "ETag"), p->etag);
        if (!p->etag[0]) {
            rc = -EBADMSG;
            snprintf(p->err.message, sizeof(p->err.message), "part %d: no ETag in the answer",
                     p->number);
        } else {
            rc = check_md5_etag(p->etag, p->md5, "UploadPart", p->key, &p->err);
        }
    }
    p->error = rc;
    call_cleanup(&p->call);
}

static void part_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_s3_part_put *p = ud;
    part_finish(p);
    p->done(p);
}

int om_s3_part_submit(struct om_s3 *s3, struct om_s3_part_put *p)
{
    int rc = part_build(s3, p);
    if (!rc)
        rc = om_http_submit(s3->http, &p->call.req, part_done, p);
    if (rc)
        call_cleanup(&p->call);
    return rc;
}

void om_s3_part_cancel(struct om_s3 *s3, struct om_s3_part_put *p)
{
    om_http_cancel(s3->http, &p->call.req);
}

int om_s3_mpu_part(struct om_s3 *s3, struct om_s3_part_put *p)
{
    int rc = part_build(s3, p);
    if (rc) {
        call_cleanup(&p->call);
        return rc;
    }
    om_http_perform(s3->http, &p->call.req);
    part_finish(p);
    return p->error;
}

void om_s3_multipart_etag(const unsigned char (*part_md5)[OM_MD5_LEN], int n,
                          char out[OM_ETAG_MAX])
{
    struct om_digest d;
    unsigned char sum[OM_MD5_LEN];
    out[0] = '\0';
    if (om_digest_init(&d, OM_DIGEST_MD5))
        return;
    for (int i = 0; i < n; i++)
        om_digest_update(&d, part_md5[i], OM_MD5_LEN);
    if (om_digest_final(&d, sum))
        return;
    om_hex(sum, OM_MD5_LEN, out);
    snprintf(out + 32, OM_ETAG_MAX - 32, "-%d", n);
}

/* Does the upload still exist? 1 yes, 0 no (NoSuchUpload), or -errno. */
static int upload_exists(struct om_s3 *s3, const char *key, const char *upload_id)
{
    struct om_buf q = {0};
    struct om_s3_call c;
    int rc = om_buf_puts(&q, "max-parts=1&uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = call_init(&c, s3, "GET", "ListParts", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    struct om_s3_error err;
    rc = call_perform(&c, &err);
    call_cleanup(&c);
    if (rc == 0)
        return 1;
    if (rc == -ENOENT)
        return 0;
    return rc;
}

int om_s3_mpu_complete(struct om_s3 *s3, const char *key, const char *upload_id,
                       const struct om_s3_part *parts, int nparts, char *etag,
                       struct om_s3_error *err)
{
    struct om_buf body = {0}, q = {0};
    int rc = om_buf_puts(&body, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts && !rc; i++)
        rc = om_buf_printf(&body, "<Part><PartNumber>%d</PartNumber><ETag>\"%s\"</ETag></Part>",
                           parts[i].number, parts[i].etag);
    if (!rc)
        rc = om_buf_puts(&body, "</CompleteMultipartUpload>");
    if (!rc)
        rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (rc) {
        om_buf_free(&body);
        om_buf_free(&q);
        return rc;
    }
    enum { ATTEMPTS = 4 };
    for (int attempt = 1;; attempt++) {
        struct om_s3_call c;
        rc = call_init(&c, s3, "POST", "CompleteMultipartUpload", key, q.data);
        if (!rc) {
            c.req.idempotent = false;
            c.req.max_body = 1 << 20;
            struct om_http_body b = {.kind = OM_BODY_MEM, .mem = body.data, .len = body.len};
            rc = call_set_body(&c, &b);
        }
        if (!rc)
            rc = om_headers_add(&c.req.headers, "Content-Type", "application/xml");
        if (!rc)
            rc = call_perform(&c, err);
        if (!rc)
            rc = body_error(&c, err);
        if (!rc && etag) {
            char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
            copy_etag(t, etag);
            free(t);
        }
        long status = c.req.status;
        call_cleanup(&c);
        bool transient = rc == -EAGAIN || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
                         (rc == -EIO && (status == 0 || status >= 500));
        if (rc == 0 || !transient || attempt >= ATTEMPTS)
            break;
        /* Before sending Complete again, see what the server holds. */
        double rnd = 0.5 + (double)(om_now_ns() % 1000) / 2000.0;
        usleep((useconds_t)om_http_backoff_ms(200, 5000, attempt, rnd) * 1000);
        int exists = upload_exists(s3, key, upload_id);
        if (exists == 0) {
            struct om_s3_object obj;
            if (om_s3_head(s3, key, &obj, NULL) == 0) {
                om_info("CompleteMultipartUpload %s: the first attempt took effect", key);
                if (etag)
                    om_strlcpy(etag, obj.etag, OM_ETAG_MAX);
                rc = 0;
            } else {
                rc = -EIO;
                if (err)
                    snprintf(err->message, sizeof(err->message),
                             "upload %s vanished without an object", upload_id);
            }
            break;
        }
        om_info("CompleteMultipartUpload %s failed (%s); upload still open, sending again", key,
                strerror(-rc));
    }
    om_buf_free(&body);
    om_buf_free(&q);
    return rc;
}

int om_s3_mpu_abort(struct om_s3 *s3, const char *key, const char *upload_id,
                    struct om_s3_error *err)
{
    struct om_buf q = {0};
    struct om_s3_call c;
    int rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = call_init(&c, s3, "DELETE", "AbortMultipartUpload", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    rc = call_perform(&c, err);
    call_cleanup(&c);
    return rc;
}

int om_s3_part_copy(struct om_s3 *s3, const char *key, const char *upload_id, int number,
                    const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                    char *etag, struct om_s3_error *err)
{
    struct om_buf q = {0}, src = {0};
    struct om_s3_call c;
    int rc = om_buf_printf(&q, "partNumber=%d&uploadId=", number);
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = call_init(&c, s3, "PUT", "UploadPartCopy", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    rc = copy_source(s3, src_key, &src);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-copy-source", src.data);
    if (!rc)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-range",
                             "bytes=%" PRIu64 "-%" PRIu64, first, last);
    if (!rc && if_match && *if_match)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-if-match", "\"%s\"", if_match);
    c.req.body = (struct om_http_body){.kind = OM_BODY_MEM, .mem = "", .len = 0};
    if (!rc)
        rc = call_perform(&c, err);
    if (!rc)
        rc = body_error(&c, err);
    if (!rc) {
        char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
        copy_etag(t, etag);
        free(t);
        if (!etag || !etag[0])
            rc = -EBADMSG;
    }
    om_buf_free(&src);
    call_cleanup(&c);
    return rc;
}

static int add_param(struct om_buf *q, const char *name, const char *value)
{
    if (!value || !*value)
        return 0;
    int rc = om_buf_printf(q, "%s%s=", q->len ? "&" : "", name);
    return rc ? rc : om_uri_encode(q, value, strlen(value), false);
}

int om_s3_mpu_list(struct om_s3 *s3, const char *prefix, om_upload_cb cb, void *ud,
                   struct om_s3_error *err)
{
    char *key_marker = NULL, *id_marker = NULL;
    int rc = 0;
    for (;;) {
        struct om_buf q = {0};
        rc = om_buf_puts(&q, "uploads=");
        if (!rc)
            rc = add_param(&q, "prefix", prefix);
        if (!rc)
            rc = add_param(&q, "key-marker", key_marker);
        if (!rc)
            rc = add_param(&q, "upload-id-marker", id_marker);
        struct om_s3_call c;
        if (!rc)
            rc = call_init(&c, s3, "GET", "ListMultipartUploads", NULL, q.data);
        om_buf_free(&q);
        if (rc)
            break;
        c.req.max_body = 64u << 20;
        rc = call_perform(&c, err);
        bool truncated = false;
        free(key_marker);
        free(id_marker);
        key_marker = id_marker = NULL;
        if (!rc)
            rc = om_xml_parse_uploads(c.req.resp_body.data, c.req.resp_body.len, cb, ud,
                                      &truncated, &key_marker, &id_marker);
        call_cleanup(&c);
        if (rc || !truncated || !key_marker || !*key_marker)
            break;
    }
    free(key_marker);
    free(id_marker);
    return rc;
}

/* ---- listing ---- */

struct list_ctx {
    om_list_cb cb;
    void *ud;
    uint64_t reported;
    struct om_list_parser *parser;
    int error;
};

static int list_entry(void *ud, const struct om_list_entry *e)
{
    struct list_ctx *l = ud;
    l->reported++;
    return l->cb(l->ud, e);
}

static int list_sink_data(void *ud, const char *p, size_t n)
{
    struct list_ctx *l = ud;
    if (!l->parser) {
        l->parser = om_list_parser_new(list_entry, l, l->reported);
        if (!l->parser)
            return -ENOMEM;
    }
    return om_list_parser_feed(l->parser, p, n);
}

static void list_sink_reset(void *ud)
{
    struct list_ctx *l = ud;
    om_list_parser_free(l->parser);
    l->parser = NULL;
}

static int list_query(const struct om_s3_list_params *p, struct om_buf *q)
{
    int rc = om_buf_puts(q, "list-type=2");
    if (!rc)
        rc = add_param(q, "prefix", p->prefix);
    if (!rc)
        rc = add_param(q, "delimiter", p->delimiter);
    if (!rc)
        rc = add_param(q, "start-after", p->start_after);
    if (!rc)
        rc = add_param(q, "continuation-token", p->continuation);
    if (!rc && p->max_keys > 0)
        rc = om_buf_printf(q, "&max-keys=%d", p->max_keys);
    return rc;
}

static int list_build(struct om_s3 *s3, struct om_s3_call *c, struct list_ctx *l,
                      const struct om_s3_list_params *p)
{
    struct om_buf q = {0};
    int rc = list_query(p, &q);
    if (!rc)
        rc = call_init(c, s3, "GET", "ListObjectsV2", NULL, q.data);
    om_buf_free(&q);
    if (!rc)
        c->req.sink = (struct om_http_sink){list_sink_data, list_sink_reset, l};
    return rc;
}

/* After the request: 0 or -errno; *next_token as for om_s3_list_page. */
static int list_finish(struct om_s3_call *c, struct list_ctx *l, char **next_token,
                       struct om_s3_error *err)
{
    int rc = call_result(c, err);
    if (!rc && !l->parser) /* an empty 2xx body */
        rc = -EBADMSG;
    bool stopped = !rc && om_list_parser_stopped(l->parser);
    if (!rc)
        rc = om_list_parser_finish(l->parser);
    if (!rc && om_list_parser_is_error(l->parser))
        rc = -EIO;
    if (rc == -EBADMSG && err)
        snprintf(err->message, sizeof(err->message), "malformed ListObjectsV2 answer");
    if (!rc && !stopped && next_token && om_list_parser_truncated(l->parser)) {
        const char *t = om_list_parser_next_token(l->parser);
        if (!t || !*t) {
            rc = -EBADMSG;
            if (err)
                snprintf(err->message, sizeof(err->message),
                         "truncated listing without NextContinuationToken");
        } else if (!(*next_token = strdup(t))) {
            rc = -ENOMEM;
        }
    }
    om_list_parser_free(l->parser);
    l->parser = NULL;
    return rc;
}

int om_s3_list_page(struct om_s3 *s3, const struct om_s3_list_params *p, om_list_cb cb, void *ud,
                    char **next_token, struct om_s3_error *err)
{
    if (next_token)
        *next_token = NULL;
    struct om_s3_call c;
    struct list_ctx l = {.cb = cb, .ud = ud};
    int rc = list_build(s3, &c, &l, p);
    if (!rc) {
        om_http_perform(s3->http, &c.req);
        rc = list_finish(&c, &l, next_token, err);
    }
    call_cleanup(&c);
    return rc;
}

/* ---- lookup: HEAD key and LIST key/ at once ---- */

struct pair_wait {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int pending;
};

static void pair_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct pair_wait *w = ud;
    pthread_mutex_lock(&w->m);
    w->pending--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

static int first_entry(void *ud, const struct om_list_entry *e)
{
    (void)e;
    *(bool *)ud = true;
    return OM_LIST_STOP;
}

int om_s3_lookup(struct om_s3 *s3, const char *key, struct om_s3_lookup *out,
                 struct om_s3_error *err)
{
    memset(out, 0, sizeof(*out));
    char *prefix = NULL;
    if (asprintf(&prefix, "%s/", key) < 0)
        return -ENOMEM;
    struct om_s3_call head, list;
    struct list_ctx l = {.cb = first_entry, .ud = &out->is_dir};
    struct om_s3_list_params p = {.prefix = prefix, .max_keys = 1};
    int rc = call_init(&head, s3, "HEAD", "HeadObject", key, NULL);
    int rl = list_build(s3, &list, &l, &p);
    free(prefix);
    struct pair_wait w = {.pending = 0};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.cv, NULL);
    if (!rc && !rl) {
        w.pending = 2;
        if ((rc = om_http_submit(s3->http, &head.req, pair_done, &w)) != 0)
            w.pending--;
        if ((rl = om_http_submit(s3->http, &list.req, pair_done, &w)) != 0)
            w.pending--;
        pthread_mutex_lock(&w.m);
        while (w.pending > 0)
            pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
    }
    struct om_s3_error herr, lerr;
    if (!rc)
        rc = call_result(&head, &herr);
    if (!rl)
        rl = list_finish(&list, &l, NULL, &lerr);
    else
        om_list_parser_free(l.parser);
    if (!rc) {
        out->is_file = true;
        om_s3_object_from_headers(&head.req.resp_headers, &out->obj);
    }
    call_cleanup(&head);
    call_cleanup(&list);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.m);
    if (rl == 0 && out->is_dir)
        return 0; /* a directory wins over a file of the same name */
    if (rc == 0 && (rl == 0 || rl == -ENOENT))
        return 0;
    if (rc == -ENOENT && rl == 0)
        return -ENOENT;
    /* a real failure on either side */
    int e = rc && rc != -ENOENT ? rc : rl;
    if (err)
        *err = rc && rc != -ENOENT ? herr : lerr;
    out->is_file = false;
    return e;
}

int om_s3_list_all(struct om_s3 *s3, const char *prefix, const char *delimiter, om_list_cb cb,
                   void *ud, struct om_s3_error *err)
{
    char *token = NULL;
    int rc;
    do {
        struct om_s3_list_params p = {
            .prefix = prefix, .delimiter = delimiter, .continuation = token};
        char *next = NULL;
        rc = om_s3_list_page(s3, &p, cb, ud, &next, err);
        free(token);
        token = next;
    } while (!rc && token);
    free(token);
    return rc;
}

static int count_entry(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(uint64_t *)ud)++;
    return 0;
}

int om_s3_check_bucket(struct om_s3 *s3, long *skew_s, struct om_s3_error *err)
{
    struct om_s3_call c;
    int rc = call_init(&c, s3, "GET", "ListObjectsV2", NULL, "list-type=2&max-keys=1");
    if (rc)
        return rc;
    c.req.max_body = 16u << 20; /* AIStore may ignore max-keys */
    uint64_t n = 0;
    struct list_ctx l = {.cb = count_entry, .ud = &n};
    c.req.sink = (struct om_http_sink){list_sink_data, list_sink_reset, &l};
    rc = call_perform(&c, err);
    if (skew_s) {
        *skew_s = 0;
        const char *d = om_headers_get(&c.req.resp_headers, "Date");
        time_t server;
        if (d && om_parse_http_date(d, &server) == 0)
            *skew_s = (long)(server - time(NULL));
    }
    if (!rc && l.parser)
        rc = om_list_parser_finish(l.parser);
    om_list_parser_free(l.parser);
    call_cleanup(&c);
    return rc;
}
