/* S3 operations: URLs, signing hooks, responses, objects (HEAD, GET,
 * PUT, DELETE, copies, metadata); the backend's table of operations. */
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
#include "s3_int.h"
#include "store_int.h"

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

struct om_s3 *om_s3_new(struct om_http *http, const struct om_store_config *cfg,
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
    om_xml_init();
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
    if (cfg->redirect_hosts && !(s3->redirect_hosts = strdup(cfg->redirect_hosts)))
        goto nomem;
    om_strlcpy(s3->region, cfg->region && *cfg->region ? cfg->region : "us-east-1",
               sizeof(s3->region));
    s3->copy_max = cfg->copy_limit ? OM_MIN(cfg->copy_limit, OM_S3_COPY_MAX) : OM_S3_COPY_MAX;
    s3->copy_limit_given = cfg->copy_limit != 0;
    s3->caps = (struct om_store_caps){
        .name = "S3",
        .max_object = OM_S3_MAX_OBJECT,
        .min_part = OM_S3_MIN_PART,
        .max_part = OM_S3_MAX_PART,
        .max_parts = OM_S3_MAX_PARTS,
        .key_max = OM_KEY_MAX,
        .copy_max = s3->copy_max,
        .part_copy = true, /* until a server answers 501, or shows itself an AIStore */
        .part_replace = true,
        .rename = false,
        .dir_marker = true,
        .user_meta = true,
    };
    pthread_mutex_init(&s3->lock, NULL);
    return s3;
nomem:
    om_url_free(&u);
    if (s3) {
        free(s3->host);
        free(s3->prefix);
        free(s3->bucket);
        free(s3->redirect_hosts);
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
    free(s3->redirect_hosts);
    om_creds_clear(&s3->creds);
    free(s3);
}

const struct om_store_caps *om_s3_caps(struct om_s3 *s3)
{
    return &s3->caps;
}

void si_note_server(struct om_s3 *s3, const struct om_header_list *h)
{
    if (__atomic_load_n(&s3->aistore, __ATOMIC_RELAXED))
        return;
    const char *server = om_headers_get(h, "Server");
    if (!(server && strcmp(server, "AIStore") == 0) &&
        !om_headers_get(h, "x-amz-meta-ais-cksum-type"))
        return;
    /* AIStore stores "dir/" as "dir" (no directory markers), answers 501
     * to UploadPartCopy, loses a part uploaded again under its number,
     * stores no x-amz-meta-*, and copies an object of any size at once */
    __atomic_store_n(&s3->caps.dir_marker, false, __ATOMIC_RELAXED);
    __atomic_store_n(&s3->caps.part_copy, false, __ATOMIC_RELAXED);
    __atomic_store_n(&s3->caps.part_replace, false, __ATOMIC_RELAXED);
    __atomic_store_n(&s3->caps.user_meta, false, __ATOMIC_RELAXED);
    __atomic_store_n(&s3->caps.key_refused, ";?", __ATOMIC_RELAXED);
    if (!s3->copy_limit_given) { /* its CopyObject copies any size in one request */
        __atomic_store_n(&s3->copy_max, UINT64_MAX, __ATOMIC_RELAXED);
        __atomic_store_n(&s3->caps.copy_max, UINT64_MAX, __ATOMIC_RELAXED);
    }
    if (!__atomic_exchange_n(&s3->aistore, true, __ATOMIC_RELAXED))
        om_info("bucket %s is on an AIStore cluster: no directory markers, no UploadPartCopy, no "
                "part uploaded twice, no user metadata stored (modes and times last while "
                "the mount holds them; ais://%s keeps them), no name holding ';' or '?'",
                s3->bucket, s3->bucket);
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

/* May this request's URL carry the credentials? (om_creds_allowed decides) */
static bool creds_go_to(struct om_s3 *s3, const struct om_url *u)
{
    pthread_mutex_lock(&s3->lock);
    bool ok = om_creds_allowed(s3->host, s3->vhost ? s3->bucket : NULL,
                               s3->redirect_hosts ? s3->redirect_hosts
                               : s3->aws          ? "*.amazonaws.com"
                                                  : NULL,
                               u->host, u->https, s3->creds.bearer_token != NULL);
    pthread_mutex_unlock(&s3->lock);
    return ok;
}

static int hook_sign(void *ud, const struct om_http_req *req, const char *url,
                     struct om_header_list *out)
{
    struct om_store_call *c = ud;
    struct om_s3 *s3 = c->be;
    if (s3->creds.anonymous)
        return 0;
    struct om_url u;
    int rc = om_url_parse(url, &u);
    if (rc)
        return rc;
    if (!creds_go_to(s3, &u)) {
        om_debug("%s: %s is neither the endpoint host nor in redirect_hosts: sent without "
                 "credentials",
                 req->op ? req->op : req->method, u.host);
        om_url_free(&u);
        return 0;
    }
    if (s3->creds.bearer_token) {
        om_url_free(&u);
        return om_headers_addf(out, "Authorization", "Bearer %s", s3->creds.bearer_token);
    }
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
    struct om_store_call *c = ud;
    struct om_s3 *s3 = c->be;
    if (!om_region_valid(region) || strlen(region) >= sizeof(s3->region)) {
        om_warn("bucket %s: ignoring an invalid x-amz-bucket-region from the server", s3->bucket);
        return -EINVAL;
    }
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

/* S3's codes of a passing condition: worth another attempt. */
static bool code_transient(const char *code)
{
    static const char *const transient[] = {"SlowDown", "RequestTimeout", "InternalError",
                                            "ServiceUnavailable"};
    for (size_t i = 0; i < OM_ARRAY_LEN(transient); i++)
        if (strcmp(code, transient[i]) == 0)
            return true;
    return false;
}

static int hook_error_code(void *ud, const char *body, size_t len, char *code, size_t codelen,
                           bool *transient)
{
    (void)ud;
    int rc = om_xml_parse_error(body, len, code, codelen, NULL, 0, NULL, 0);
    *transient = rc == 0 && code_transient(code);
    return rc;
}

/* ---- calls ---- */

int si_call_init(struct om_store_call *c, struct om_s3 *s3, const char *method, const char *op,
                     const char *key, const char *query)
{
    memset(c, 0, sizeof(*c));
    c->be = s3;
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

void si_call_cleanup(struct om_store_call *c)
{
    om_http_req_cleanup(&c->req);
}

int si_call_submit(struct om_store_call *c, int build_rc, om_http_done_fn done, void *ud)
{
    struct om_s3 *s3 = c->be;
    int rc = build_rc ? build_rc : om_http_submit(s3->http, &c->req, done, ud);
    if (rc)
        si_call_cleanup(c);
    return rc;
}

/* Payload hash for a body: SHA-256 of memory bodies; file bodies are
 * UNSIGNED-PAYLOAD (Content-MD5 guards them) unless sign_payload is set. */
int si_call_set_body(struct om_store_call *c, const struct om_http_body *body)
{
    c->req.body = *body;
    unsigned char h[OM_SHA256_LEN];
    int rc = 0;
    if (body->kind == OM_BODY_MEM) {
        rc = om_sha256(body->mem, (size_t)body->len, h);
    } else if (body->kind == OM_BODY_FD && ((struct om_s3 *)c->be)->sign_payload) {
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
int si_call_result(struct om_store_call *c, struct om_store_error *err)
{
    struct om_http_req *r = &c->req;
    struct om_store_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof(*err));
    err->status = r->status;
    si_note_server(c->be, &r->resp_headers);
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
            return om_store_errno(r->status, err->code);
        return r->error;
    }
    om_strlcpy(err->message, r->errmsg, sizeof(err->message));
    return r->error;
}

/* A 2xx answer that carries an <Error> (CompleteMultipartUpload, CopyObject). */
int si_body_error(struct om_store_call *c, struct om_store_error *err)
{
    struct om_store_error local;
    if (!err)
        err = &local;
    if (om_xml_parse_error(c->req.resp_body.data, c->req.resp_body.len, err->code,
                           sizeof(err->code), err->message, sizeof(err->message),
                           err->request_id, sizeof(err->request_id)) == 0) {
        return om_store_errno(500, err->code);
    }
    return 0;
}

int si_call_perform(struct om_store_call *c, struct om_store_error *err)
{
    om_http_perform(((struct om_s3 *)c->be)->http, &c->req);
    return si_call_result(c, err);
}

void si_copy_etag(const char *src, char *dst)
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

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

void om_s3_sum_from_etag(const char *etag, bool encrypted, struct om_sum *sum)
{
    memset(sum, 0, sizeof(*sum));
    size_t n = strlen(etag);
    if (n == 32 && all_hex(etag, 32)) {
        if (encrypted)
            return; /* SSE-KMS and SSE-C ETags are not MD5s */
        sum->type = OM_SUM_MD5;
    } else if (n > 33 && etag[32] == '-' && all_hex(etag, 32)) {
        uint64_t parts;
        if (encrypted || om_parse_uint(etag + 33, OM_S3_MAX_PARTS, &parts) || parts == 0 ||
            etag[33] == '0')
            return;
        sum->type = OM_SUM_MD5_PARTS;
        sum->parts = (int)parts;
        n = 32;
    } else if (n > 3 && strncmp(etag, "v1-", 3) == 0) {
        /* AIStore: "v1-<checksum>-<mtime, base 36>" for an object whose
         * checksum is not an MD5 (core/lom.go); xxhash2 by default */
        const char *dash = strchr(etag + 3, '-');
        size_t len = dash ? (size_t)(dash - etag - 3) : 0;
        if (!dash || !all_hex(etag + 3, len) || (len != 16 && len != 64))
            return;
        sum->type = len == 16 ? OM_SUM_XXH64 : OM_SUM_SHA256;
        memcpy(sum->hex, etag + 3, len);
        sum->hex[len] = '\0';
        return;
    } else {
        return;
    }
    memcpy(sum->hex, etag, n);
    sum->hex[n] = '\0';
    for (char *c = sum->hex; *c; c++)
        *c = (char)tolower((unsigned char)*c);
}

void om_s3_object_from_headers(const struct om_header_list *h, struct om_object *obj)
{
    memset(obj, 0, sizeof(*obj));
    const char *v;
    uint64_t a, b, total;
    if ((v = om_headers_get(h, "Content-Length")) && om_parse_uint(v, OM_UINT_MAX, &total) == 0)
        obj->size = total;
    if ((v = om_headers_get(h, "Content-Range")) &&
        om_http_parse_content_range(v, &a, &b, &total) == 0 && total != UINT64_MAX)
        obj->size = total;
    if ((v = om_headers_get(h, "Last-Modified")))
        om_parse_http_date(v, &obj->mtime);
    si_copy_etag(om_headers_get(h, "ETag"), obj->etag);
    const char *sse = om_headers_get(h, "x-amz-server-side-encryption");
    bool encrypted = (sse && strncasecmp(sse, "aws:kms", 7) == 0) ||
                     om_headers_get(h, "x-amz-server-side-encryption-customer-algorithm");
    /* AIStore states its checksum of the object, by name: firm, and made
     * of the content where a multipart ETag is made of part ETags. Its
     * type follows how the parts came (md5 when in order, crc32c when
     * not), so the ETag's digest is kept beside it. */
    if (om_sum_from_ais(om_headers_get(h, "x-amz-meta-ais-cksum-type"),
                        om_headers_get(h, "x-amz-meta-ais-cksum-val"), &obj->sum))
        om_s3_sum_from_etag(obj->etag, encrypted, &obj->etag_sum);
    else
        om_s3_sum_from_etag(obj->etag, encrypted, &obj->sum);
    if ((v = om_headers_get(h, "Content-Type")))
        om_strlcpy(obj->content_type, v, sizeof(obj->content_type));
    /* s3fs-fuse writes mode in decimal; accept octal with a leading 0 too */
    if ((v = om_headers_get(h, "x-amz-meta-mode")))
        obj->has_mode = parse_u32(v, &obj->mode, v[0] == '0' && v[1] ? 8 : 10);
    obj->has_uid = parse_u32(om_headers_get(h, "x-amz-meta-uid"), &obj->uid, 10);
    obj->has_gid = parse_u32(om_headers_get(h, "x-amz-meta-gid"), &obj->gid, 10);
    if ((v = om_headers_get(h, "x-amz-meta-mtime")) && *v) {
        char *end;
        errno = 0;
        double t = strtod(v, &end);
        /* seconds since the epoch, up to the year 9999; anything else is ignored */
        if (end != v && !*end && !errno && t >= 0 && t < 253402300800.0) {
            obj->has_mtime = true;
            obj->meta_mtime.tv_sec = (time_t)t;
            obj->meta_mtime.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
        }
    }
}

/* The x-amz-meta-* headers of m (s3fs-fuse's names and formats: mode as a
 * decimal st_mode, uid, gid, mtime in seconds). */
static int add_meta_headers(struct om_header_list *h, const struct om_file_meta *m)
{
    int rc = 0;
    if (m->has_mode)
        rc = om_headers_addf(h, "x-amz-meta-mode", "%u", (unsigned)m->mode);
    if (!rc && m->has_uid)
        rc = om_headers_addf(h, "x-amz-meta-uid", "%u", (unsigned)m->uid);
    if (!rc && m->has_gid)
        rc = om_headers_addf(h, "x-amz-meta-gid", "%u", (unsigned)m->gid);
    if (!rc && m->has_mtime)
        rc = om_headers_addf(h, "x-amz-meta-mtime", "%ld", (long)m->mtime.tv_sec);
    return rc;
}

int si_add_put_opts(struct om_http_req *r, const struct om_put_opts *opts)
{
    int rc = 0;
    if (!opts)
        return 0;
    if (opts->content_type)
        rc = om_headers_add(&r->headers, "Content-Type", opts->content_type);
    if (!rc && opts->meta)
        rc = add_meta_headers(&r->headers, opts->meta);
    if (!rc && opts->if_none_match)
        rc = om_headers_add(&r->headers, "If-None-Match", "*");
    return rc;
}

int si_add_md5(struct om_http_req *r, const unsigned char md5[OM_MD5_LEN])
{
    char b64[25];
    om_base64(md5, OM_MD5_LEN, b64);
    return om_headers_add(&r->headers, "Content-MD5", b64);
}

/* Does the server's ETag of a PUT or a part name the MD5 of the body? A
 * 32-hex-digit ETag may merely look like one (some S3 servers): until an
 * answer of this server showed its ETag equal to the MD5 sent, a differing
 * one proves nothing (the commit's verification decides). Once one
 * matched, a differing part ETag means the server stored other bytes:
 * -EBADMSG, and the part is sent again. */
int si_check_md5_etag(struct om_s3 *s3, const char *etag, const unsigned char md5[OM_MD5_LEN],
                      const char *op, const char *key, struct om_store_error *err)
{
    char want[2 * OM_MD5_LEN + 1];
    om_hex(md5, OM_MD5_LEN, want);
    if (strlen(etag) != 32 || !all_hex(etag, 32))
        return 0;
    if (strcasecmp(etag, want) == 0) {
        __atomic_store_n(&s3->etags_are_md5, true, __ATOMIC_RELAXED);
        return 0;
    }
    if (!__atomic_load_n(&s3->etags_are_md5, __ATOMIC_RELAXED)) {
        om_debug("%s %s: ETag %s is not the MD5 sent %s (this server's ETags may not be MD5s)",
                 op, key, etag, want);
        return 0;
    }
    if (err)
        snprintf(err->message, sizeof(err->message),
                 "server ETag %s differs from the MD5 sent %s", etag, want);
    om_warn("%s %s: server ETag %s differs from the MD5 sent %s", op, key, etag, want);
    return -EBADMSG;
}

/* ---- HEAD ---- */

int om_s3_head(struct om_s3 *s3, const char *key, struct om_object *obj,
               struct om_store_error *err)
{
    struct om_store_call c;
    int rc = si_call_init(&c, s3, "HEAD", "HeadObject", key, NULL);
    if (!rc)
        rc = si_call_perform(&c, err);
    if (!rc && obj)
        om_s3_object_from_headers(&c.req.resp_headers, obj);
    si_call_cleanup(&c);
    return rc;
}

/* ---- GET ---- */

/* The S3 client's answer to a finished call, for the shared GET code. */
static int s3_get_result(struct om_store_call *c, struct om_store_error *err)
{
    return si_call_result(c, err);
}

static int get_build(struct om_s3 *s3, struct om_store_get *g)
{
    int rc = si_call_init(&g->call, s3, "GET", "GetObject", g->key, NULL);
    if (!rc)
        rc = sg_attach(g, s3_get_result, om_s3_object_from_headers);
    if (!rc && g->if_match && *g->if_match)
        rc = om_headers_addf(&g->call.req.headers, "If-Match", "\"%s\"", g->if_match);
    return rc;
}

static void get_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_store_get *g = ud;
    sg_finish(g);
    si_call_cleanup(&g->call);
    g->done(g);
}

int om_s3_get_submit(struct om_s3 *s3, struct om_store_get *g)
{
    return si_call_submit(&g->call, get_build(s3, g), get_done, g);
}

void om_s3_get_cancel(struct om_s3 *s3, struct om_store_get *g)
{
    om_http_cancel(s3->http, &g->call.req);
}

ssize_t om_s3_get_range(struct om_s3 *s3, const char *key, uint64_t off, uint64_t len,
                        const char *if_match, char *buf, struct om_object *obj,
                        struct om_store_error *err)
{
    if (len == 0)
        return 0;
    struct om_store_get g = {.key = key, .off = off, .len = len, .if_match = if_match, .buf = buf};
    int rc = get_build(s3, &g);
    if (rc) {
        si_call_cleanup(&g.call);
        return rc;
    }
    om_http_perform(s3->http, &g.call.req);
    sg_finish(&g);
    si_call_cleanup(&g.call);
    if (obj)
        *obj = g.obj;
    if (err)
        *err = g.err;
    return g.error ? g.error : (ssize_t)g.got;
}

/* ---- PUT, DELETE, COPY ---- */

int om_s3_put(struct om_s3 *s3, const char *key, const struct om_http_body *body,
              const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
              struct om_object *stored, struct om_store_error *err)
{
    struct om_store_call c;
    int rc = si_call_init(&c, s3, "PUT", "PutObject", key, NULL);
    if (!rc)
        rc = si_call_set_body(&c, body);
    if (!rc)
        rc = si_add_md5(&c.req, md5);
    if (!rc)
        rc = si_add_put_opts(&c.req, opts);
    if (!rc)
        rc = si_call_perform(&c, err);
    if (!rc) {
        /* An ETag other than the MD5 sent is not a failure here: it may
         * not be an MD5 at all, and the commit's verification decides
         * (reading back what no digest proves). It teaches whether this
         * server's ETags are MD5s. */
        struct om_object got;
        om_s3_object_from_headers(&c.req.resp_headers, &got);
        got.size = body->len;
        if (got.sum.type == OM_SUM_MD5)
            si_check_md5_etag(s3, got.etag, md5, "PutObject", key, NULL);
        if (stored)
            *stored = got;
    }
    if (rc == -ESTALE && opts && opts->if_none_match)
        rc = -EEXIST;
    si_call_cleanup(&c);
    return rc;
}

int om_s3_delete(struct om_s3 *s3, const char *key, struct om_store_error *err)
{
    struct om_store_call c;
    int rc = si_call_init(&c, s3, "DELETE", "DeleteObject", key, NULL);
    if (!rc)
        rc = si_call_perform(&c, err);
    si_call_cleanup(&c);
    return rc;
}

/* "/bucket/key", encoded, as x-amz-copy-source wants it. AIStore's proxy
 * picks the target by the header's name as sent, and the target decodes it
 * (ais/prxs3.go, tgts3.go copyObjS3): an encoded name that differs from the
 * key finds the object only when both land on one target. So AIStore gets
 * the key as it is, which the target leaves alone when it has no '%' or
 * '+'; a key with those, or with control bytes, cannot be copied there
 * (-ENOSYS: a copy through this host instead). */
int si_copy_source(struct om_s3 *s3, const char *key, struct om_buf *src)
{
    if (__atomic_load_n(&s3->aistore, __ATOMIC_RELAXED)) {
        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
            if (*p == '%' || *p == '+' || *p < 0x20 || *p == 0x7f)
                return -ENOSYS;
        return om_buf_printf(src, "/%s/%s", s3->bucket, key);
    }
    int rc = om_buf_puts(src, "/");
    if (!rc)
        rc = om_uri_encode(src, s3->bucket, strlen(s3->bucket), false);
    if (!rc)
        rc = om_buf_puts(src, "/");
    if (!rc)
        rc = om_uri_encode(src, key, strlen(key), true);
    return rc;
}

/* Swift's s3api answers x-amz-copy-source-if-match with 412 for a multipart
 * (SLO) source whose ETag is the one asked for. 0 and *since = the source's
 * Last-Modified when a HEAD shows the ETag if_match: the copy may be made
 * again guarded by x-amz-copy-source-if-unmodified-since; else -ESTALE. */
int si_copy_412_check(struct om_s3 *s3, const char *src_key, const char *if_match, time_t *since)
{
    struct om_object o;
    struct om_store_error herr;
    if (om_s3_head(s3, src_key, &o, &herr) != 0 || strcmp(o.etag, if_match) != 0 || !o.mtime)
        return -ESTALE;
    om_info("copy of %s: the server refused x-amz-copy-source-if-match although the ETag is "
            "unchanged (%s); copying again guarded by x-amz-copy-source-if-unmodified-since",
            src_key, if_match);
    *since = o.mtime;
    return 0;
}

/* The header says one second after since, the source's Last-Modified:
 * versitygw compares it with the source's time to the nanosecond, so its
 * own Last-Modified (whole seconds) looked like a change and every guarded
 * copy was refused. A source replaced within that second is still caught:
 * by the HEAD after a whole copy, and by the part's MD5 after a part copy. */
int si_add_unmodified_since(struct om_http_req *req, time_t since)
{
    struct tm tm;
    char date[64];
    since += 1;
    if (!gmtime_r(&since, &tm) || !strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm))
        return -EINVAL;
    return om_headers_add(&req->headers, "x-amz-copy-source-if-unmodified-since", date);
}

static int copy_once(struct om_s3 *s3, const char *src_key, const char *dst_key,
                     const char *if_match, time_t since, const struct om_put_opts *opts,
                     char *etag, struct om_store_error *err)
{
    struct om_store_call c;
    struct om_buf src = {0};
    int rc = si_call_init(&c, s3, "PUT", "CopyObject", dst_key, NULL);
    if (!rc)
        rc = si_copy_source(s3, src_key, &src);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-copy-source", src.data);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-metadata-directive", opts ? "REPLACE" : "COPY");
    if (!rc && if_match && *if_match)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-if-match", "\"%s\"", if_match);
    if (!rc && since)
        rc = si_add_unmodified_since(&c.req, since);
    if (!rc)
        rc = si_add_put_opts(&c.req, opts);
    c.req.body = (struct om_http_body){.kind = OM_BODY_MEM, .mem = "", .len = 0};
    if (!rc)
        rc = si_call_perform(&c, err);
    if (!rc)
        rc = si_body_error(&c, err);
    if (!rc && etag) {
        char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
        si_copy_etag(t, etag);
        free(t);
    }
    om_buf_free(&src);
    si_call_cleanup(&c);
    return rc;
}

int si_copy_whole(struct om_s3 *s3, const char *src_key, const char *dst_key, const char *if_match,
                  const struct om_put_opts *opts, char *etag, struct om_store_error *err)
{
    int rc = copy_once(s3, src_key, dst_key, if_match, 0, opts, etag, err);
    time_t since;
    if (rc != -ESTALE || !if_match || !*if_match ||
        si_copy_412_check(s3, src_key, if_match, &since) != 0)
        return rc;
    rc = copy_once(s3, src_key, dst_key, NULL, since, opts, etag, err);
    if (rc || strcmp(src_key, dst_key) == 0)
        return rc;
    /* If-Unmodified-Since has one-second steps: the source must still be
     * the version asked for, or the copy is removed */
    struct om_object o;
    struct om_store_error herr;
    int h = om_s3_head(s3, src_key, &o, &herr);
    if (h == 0 && strcmp(o.etag, if_match) == 0 && o.mtime == since)
        return 0;
    om_warn("copy of %s to %s: the source changed during the copy; the copy is removed", src_key,
            dst_key);
    om_s3_delete(s3, dst_key, &herr);
    return -ESTALE;
}

int si_add_param(struct om_buf *q, const char *name, const char *value)
{
    if (!value || !*value)
        return 0;
    int rc = om_buf_printf(q, "%s%s=", q->len ? "&" : "", name);
    return rc ? rc : om_uri_encode(q, value, strlen(value), false);
}

