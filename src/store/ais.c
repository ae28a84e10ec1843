/* AIStore's native API: the client, its requests, objects (HEAD, GET,
 * PUT, DELETE, copy, rename, metadata) and multipart uploads.
 *
 * Facts of the API this follows (aisnode 5.0; doc/aistore.md):
 * - object requests go to the proxy, which answers 301 (GET) or 307 to the
 *   target holding the object; the engine follows them with the same
 *   method and body. The proxy answers a PUT without reading its body and
 *   closes the connection, so bodies go with Expect: 100-continue.
 * - HEAD and GET carry the object's checksum (Ais-Checksum-Type, -Value)
 *   and version (Ais-Version); GET no ETag and no Last-Modified, and no
 *   condition (If-Match is ignored): the version token is built from the
 *   version and the checksum, and every answer is compared with it.
 * - a PUT carrying the client's checksum is verified by the target (500
 *   ErrBadCksum, nothing stored, when the body differs); the checksum type
 *   must be one of its lower-case names, or the request handler panics.
 * - file metadata is custom metadata (Ais-Custom-Md: key=value); multipart
 *   completion drops it, so it is set again afterwards (PATCH).
 * - a part number uploaded twice corrupts the object: the writer never
 *   does (caps.part_replace false); parts must be 1..N, all of them. */
#include "objmount/ais.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ais_int.h"
#include "objmount/log.h"
#include "objmount/url.h"
#include "objmount/util.h"
#include "objmount/xml.h"
#include "store_int.h"

/* Custom metadata keys of the file's metadata: the names s3fs-fuse gives
 * them, as S3 user metadata. AIStore's S3 API shows custom keys that begin
 * with "X-Amz-Meta-" as x-amz-meta-* (ais/s3/types.go), so S3 clients of
 * the same bucket (boto3, s3fs-fuse, objmount over S3) see these modes and
 * times. Keys without the prefix (objmount before it used it) are read too. */
#define META_PREFIX "X-Amz-Meta-"
static const char *const meta_keys[] = {META_PREFIX "Mode", META_PREFIX "Uid", META_PREFIX "Gid",
                                        META_PREFIX "Mtime"};

/* ---- construction ---- */

struct ais_upload {
    struct ais_upload *next;
    char *id;
    struct om_file_meta meta;
    bool has_meta;
};

struct om_ais *om_ais_new(struct om_http *http, const struct om_store_config *cfg,
                          const struct om_creds *creds, char *err, size_t errlen)
{
    if (!cfg->bucket || !*cfg->bucket || strchr(cfg->bucket, '/')) {
        snprintf(err, errlen, "invalid bucket name '%s'", cfg->bucket ? cfg->bucket : "");
        return NULL;
    }
    struct om_url u;
    if (om_url_parse(cfg->endpoint ? cfg->endpoint : "", &u)) {
        snprintf(err, errlen, "invalid endpoint '%s': expected http://host[:port] (the AIStore "
                 "cluster's URL)", cfg->endpoint ? cfg->endpoint : "");
        return NULL;
    }
    if (u.query) {
        snprintf(err, errlen, "invalid endpoint '%s': a query string is not allowed", cfg->endpoint);
        om_url_free(&u);
        return NULL;
    }
    om_xml_init(); /* the S3 API's upload list is XML */
    struct om_ais *ais = calloc(1, sizeof(*ais));
    if (!ais) {
        om_url_free(&u);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ais->http = http;
    ais->https = u.https;
    ais->port = u.port;
    ais->host = u.host;
    u.host = NULL;
    size_t plen = strlen(u.path);
    while (plen > 0 && u.path[plen - 1] == '/')
        plen--;
    ais->prefix = strndup(u.path, plen);
    om_url_free(&u);
    ais->bucket = strdup(cfg->bucket);
    if (cfg->redirect_hosts)
        ais->redirect_hosts = strdup(cfg->redirect_hosts);
    if (!ais->prefix || !ais->bucket || (creds && om_creds_copy(&ais->creds, creds)) ||
        (cfg->redirect_hosts && !ais->redirect_hosts)) {
        om_ais_free(ais);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ais->caps = (struct om_store_caps){
        .name = "AIStore",
        .max_object = 1ULL << 40, /* past 1 TiB AIStore chunks what it stores */
        .min_part = 1,
        .max_part = UINT64_MAX,
        .max_parts = 9999, /* core.MaxChunkCount */
        .key_max = OM_KEY_MAX,
        .copy_max = UINT64_MAX, /* one synchronous copy of any size */
        .part_copy = false,
        .part_replace = false,
        .rename = true,
        .dir_marker = false, /* "dir/" is an invalid object name */
        .user_meta = true,   /* custom metadata (Ais-Custom-Md, PATCH) */
    };
    pthread_mutex_init(&ais->lock, NULL);
    return ais;
}

void om_ais_free(struct om_ais *ais)
{
    if (!ais)
        return;
    while (ais->uploads) {
        struct ais_upload *u = ais->uploads;
        ais->uploads = u->next;
        free(u->id);
        free(u);
    }
    pthread_mutex_destroy(&ais->lock);
    free(ais->host);
    free(ais->prefix);
    free(ais->bucket);
    om_creds_clear(&ais->creds);
    free(ais->redirect_hosts);
    free(ais);
}

const struct om_store_caps *om_ais_caps(struct om_ais *ais)
{
    return &ais->caps;
}

/* ---- requests ---- */

static char *url_of(struct om_ais *ais, enum ai_path what, const char *key, const char *query)
{
    struct om_buf b = {0};
    bool def_port = ais->port == (ais->https ? 443 : 80);
    int rc = om_buf_printf(&b, "%s://%s", ais->https ? "https" : "http", ais->host);
    if (!rc && !def_port)
        rc = om_buf_printf(&b, ":%d", ais->port);
    if (!rc)
        rc = om_buf_printf(&b, "%s%s", ais->prefix,
                           what == AI_OBJECT   ? "/v1/objects/"
                           : what == AI_BUCKET ? "/v1/buckets/"
                                               : "/s3/");
    if (!rc)
        rc = om_uri_encode(&b, ais->bucket, strlen(ais->bucket), false);
    if (!rc && what == AI_OBJECT) {
        rc = om_buf_puts(&b, "/");
        if (!rc)
            rc = om_uri_encode(&b, key, strlen(key), true);
    }
    if (!rc && query && *query)
        rc = om_buf_printf(&b, "?%s", query);
    if (rc) {
        om_buf_free(&b);
        return NULL;
    }
    return om_buf_steal(&b);
}

/* A bearer token goes where om_creds_allowed lets credentials go. */
static int hook_sign(void *ud, const struct om_http_req *req, const char *url,
                     struct om_header_list *out)
{
    struct om_store_call *c = ud;
    struct om_ais *ais = c->be;
    if (!ais->creds.bearer_token)
        return 0;
    struct om_url u;
    int rc = om_url_parse(url, &u);
    if (rc)
        return rc;
    bool ok = om_creds_allowed(ais->host, NULL, ais->redirect_hosts, u.host, u.https, true);
    if (!ok)
        om_debug("%s: %s is neither the endpoint host nor in redirect_hosts: sent without the "
                 "token",
                 req->op ? req->op : req->method, u.host);
    om_url_free(&u);
    return ok ? om_headers_addf(out, "Authorization", "Bearer %s", ais->creds.bearer_token) : 0;
}

/* AIStore's JSON error: {"tcode":"ErrNotFound","message":...,"status":404}.
 * The code is its tcode, except that a name clash (ErrMv) says in its
 * message which way it goes. */
static int parse_error(const char *body, size_t len, char *code, size_t codelen, char *msg,
                       size_t msglen)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_DISABLE_EOF_CHECK, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return -EBADMSG;
    }
    const char *tcode = json_string_value(json_object_get(root, "tcode"));
    const char *message = json_string_value(json_object_get(root, "message"));
    if (code && codelen) {
        bool dir = message && strstr(message, "is a virtual directory");
        snprintf(code, codelen, "%s", tcode && strcmp(tcode, "ErrMv") == 0 && dir ? "ErrMvDir"
                                      : tcode                                     ? tcode
                                                                                  : "");
    }
    if (msg && msglen)
        snprintf(msg, msglen, "%s", message ? message : "");
    json_decref(root);
    return 0;
}

static int hook_error_code(void *ud, const char *body, size_t len, char *code, size_t codelen,
                           bool *transient)
{
    (void)ud;
    *transient = false; /* AIStore's passing conditions are 5xx and 429: the status says so */
    return parse_error(body, len, code, codelen, NULL, 0);
}

int ai_call_init(struct om_store_call *c, struct om_ais *ais, const char *method, const char *op,
                 enum ai_path what, const char *key, const char *query)
{
    memset(c, 0, sizeof(*c));
    c->be = ais;
    c->total = UINT64_MAX;
    om_http_req_init(&c->req);
    c->req.method = method;
    c->req.op = op;
    c->req.url = url_of(ais, what, key, query);
    c->req.hooks = (struct om_http_hooks){
        .sign = hook_sign, .error_code = hook_error_code, .ud = c};
    return c->req.url ? 0 : -ENOMEM;
}

void ai_call_cleanup(struct om_store_call *c)
{
    om_http_req_cleanup(&c->req);
    free(c->owned_body);
    c->owned_body = NULL;
}

int ai_call_json(struct om_store_call *c, const char *json)
{
    /* the body must outlive the request: the call owns a copy */
    free(c->owned_body);
    if (!(c->owned_body = strdup(json)))
        return -ENOMEM;
    c->req.body = (struct om_http_body){
        .kind = OM_BODY_MEM, .mem = c->owned_body, .len = strlen(json)};
    return om_headers_add(&c->req.headers, "Content-Type", "application/json");
}

int ai_call_result(struct om_store_call *c, struct om_store_error *err)
{
    struct om_http_req *r = &c->req;
    struct om_store_error local;
    if (!err)
        err = &local;
    memset(err, 0, sizeof(*err));
    err->status = r->status;
    if (!r->error)
        return 0;
    if (r->status >= 300) {
        const char *hdr = om_headers_get(&r->resp_headers, "Hdr-Error"); /* HEAD's */
        if (r->resp_body.len)
            parse_error(r->resp_body.data, r->resp_body.len, err->code, sizeof(err->code),
                        err->message, sizeof(err->message));
        else if (hdr)
            parse_error(hdr, strlen(hdr), err->code, sizeof(err->code), err->message,
                        sizeof(err->message));
        if (!err->message[0] && strncmp(r->errmsg, "HTTP ", 5) != 0)
            om_strlcpy(err->message, r->errmsg, sizeof(err->message));
        if (r->error == -EIO)
            return om_store_errno(r->status, err->code);
        return r->error;
    }
    om_strlcpy(err->message, r->errmsg, sizeof(err->message));
    return r->error;
}

int ai_call_perform(struct om_store_call *c, struct om_store_error *err)
{
    om_http_perform(((struct om_ais *)c->be)->http, &c->req);
    return ai_call_result(c, err);
}

/* A body that waits for the target: the proxy answers before reading it. */
static int set_body(struct om_store_call *c, const struct om_http_body *body)
{
    c->req.body = *body;
    return body->len ? om_headers_add(&c->req.headers, "Expect", "100-continue") : 0;
}

/* ---- objects ---- */

void ai_version_token(const char *version, const char *cksum, char out[OM_ETAG_MAX])
{
    snprintf(out, OM_ETAG_MAX, "%s:%.*s", version ? version : "", OM_ETAG_MAX - 22,
             cksum ? cksum : "");
    if (strcmp(out, ":") == 0)
        out[0] = '\0';
}

static bool parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (!s || om_parse_uint(s, UINT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

/* One custom metadata pair "key=value" into obj, when it is ours. */
static void custom_md(const char *kv, size_t n, struct om_object *obj)
{
    const char *eq = memchr(kv, '=', n);
    if (!eq)
        return;
    size_t klen = (size_t)(eq - kv);
    char v[32];
    size_t vlen = n - klen - 1;
    if (vlen >= sizeof(v))
        return;
    memcpy(v, eq + 1, vlen);
    v[vlen] = '\0';
    size_t plen = strlen(META_PREFIX);
    if (klen > plen && strncasecmp(kv, META_PREFIX, plen) == 0)
        kv += plen, klen -= plen;
    if (klen == 4 && strncasecmp(kv, "mode", 4) == 0)
        obj->has_mode = parse_u32(v, &obj->mode);
    else if (klen == 3 && strncasecmp(kv, "uid", 3) == 0)
        obj->has_uid = parse_u32(v, &obj->uid);
    else if (klen == 3 && strncasecmp(kv, "gid", 3) == 0)
        obj->has_gid = parse_u32(v, &obj->gid);
    else if (klen == 5 && strncasecmp(kv, "mtime", 5) == 0) {
        uint32_t t;
        if ((obj->has_mtime = parse_u32(v, &t)))
            obj->meta_mtime = (struct timespec){.tv_sec = t};
    }
}

void ai_object_from_headers(const struct om_header_list *h, struct om_object *obj)
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
    /* a GET carries no Last-Modified: the access time before it (ns),
     * which is what the listing shows too for an object AIStore keeps no
     * modification time of */
    if (!obj->mtime && (v = om_headers_get(h, "Ais-Atime")) &&
        om_parse_uint(v, OM_UINT_MAX, &a) == 0)
        obj->mtime = (time_t)(a / 1000000000u);
    const char *type = om_headers_get(h, "Ais-Checksum-Type");
    const char *value = om_headers_get(h, "Ais-Checksum-Value");
    om_sum_from_ais(type, value, &obj->sum);
    ai_version_token(om_headers_get(h, "Ais-Version"), value, obj->etag);
    if ((v = om_headers_get(h, "Content-Type")) && strcmp(v, "application/octet-stream") != 0)
        om_strlcpy(obj->content_type, v, sizeof(obj->content_type));
    for (size_t i = 0; i < h->n; i++)
        if (strcasecmp(h->v[i].name, "Ais-Custom-Md") == 0)
            custom_md(h->v[i].value, strlen(h->v[i].value), obj);
}

/* The properties a HEAD asks for: Content-Length even of an empty object,
 * Last-Modified, checksum, version and custom metadata. */
#define HEAD_PROPS "props=size%2Cchecksum%2Cversion%2Ccustom%2Clast-modified"

int om_ais_head(struct om_ais *ais, const char *key, struct om_object *obj,
                    struct om_store_error *err)
{
    struct om_store_call c;
    int rc = ai_call_init(&c, ais, "HEAD", "HeadObject", AI_OBJECT, key, HEAD_PROPS);
    if (!rc)
        rc = ai_call_perform(&c, err);
    if (!rc && obj)
        ai_object_from_headers(&c.req.resp_headers, obj);
    ai_call_cleanup(&c);
    return rc;
}

/* GET: the shared GET (get.c) on the object URL; a whole object read is
 * checked against the checksum its answer names. */
static int get_build(struct om_ais *ais, struct om_store_get *g)
{
    int rc = ai_call_init(&g->call, ais, "GET", "GetObject", AI_OBJECT, g->key, NULL);
    return rc ? rc : sg_attach(g, ai_call_result, ai_object_from_headers);
}

static void get_check_whole(struct om_store_get *g)
{
    enum om_digest_kind kind;
    if (g->error || g->off != 0 || g->got != g->obj.size || !g->obj.sum.firm ||
        !om_sum_digest_kind(g->obj.sum.type, &kind))
        return;
    unsigned char d[OM_SHA512_LEN];
    struct om_digest dg;
    if (om_digest_init(&dg, kind))
        return;
    om_digest_update(&dg, g->buf, (size_t)g->got);
    if (om_digest_final(&dg, d))
        return;
    struct om_local_sums have = {0};
    om_local_sums_set(&have, kind, d);
    if (om_sum_check(&g->obj.sum, &have) == OM_PROOF_MISMATCH) {
        g->error = -EIO;
        snprintf(g->err.message, sizeof(g->err.message),
                 "the bytes received are not the %s AIStore states of the object",
                 om_sum_type_name(g->obj.sum.type));
        om_warn("GET %s: %s (%s)", g->key, g->err.message, g->obj.sum.hex);
    }
}

static void get_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_store_get *g = ud;
    sg_finish(g);
    get_check_whole(g);
    ai_call_cleanup(&g->call);
    g->done(g);
}

int om_ais_get_submit(struct om_ais *ais, struct om_store_get *g)
{
    int rc = get_build(ais, g);
    if (!rc)
        rc = om_http_submit(ais->http, &g->call.req, get_done, g);
    if (rc)
        ai_call_cleanup(&g->call);
    return rc;
}

void om_ais_get_cancel(struct om_ais *ais, struct om_store_get *g)
{
    om_http_cancel(ais->http, &g->call.req);
}

ssize_t om_ais_get_range(struct om_ais *ais, const char *key, uint64_t off, uint64_t len,
                             const char *if_match, char *buf, struct om_object *obj,
                             struct om_store_error *err)
{
    if (len == 0)
        return 0;
    struct om_store_get g = {.key = key, .off = off, .len = len, .if_match = if_match, .buf = buf};
    int rc = get_build(ais, &g);
    if (rc) {
        ai_call_cleanup(&g.call);
        return rc;
    }
    om_http_perform(ais->http, &g.call.req);
    sg_finish(&g);
    get_check_whole(&g);
    ai_call_cleanup(&g.call);
    if (obj)
        *obj = g.obj;
    if (err)
        *err = g.err;
    return g.error ? g.error : (ssize_t)g.got;
}

/* The file's metadata as custom metadata headers. */
static int add_meta_headers(struct om_http_req *r, const struct om_file_meta *m)
{
    int rc = 0;
    if (m->has_mode)
        rc = om_headers_addf(&r->headers, "Ais-Custom-Md", "%s=%u", meta_keys[0], (unsigned)m->mode);
    if (!rc && m->has_uid)
        rc = om_headers_addf(&r->headers, "Ais-Custom-Md", "%s=%u", meta_keys[1], (unsigned)m->uid);
    if (!rc && m->has_gid)
        rc = om_headers_addf(&r->headers, "Ais-Custom-Md", "%s=%u", meta_keys[2], (unsigned)m->gid);
    if (!rc && m->has_mtime)
        rc = om_headers_addf(&r->headers, "Ais-Custom-Md", "%s=%ld", meta_keys[3],
                             (long)m->mtime.tv_sec);
    return rc;
}

/* The metadata m as the JSON of a PATCH: {"value":{"mode":"...",...}}. */
static char *meta_json(const struct om_file_meta *m)
{
    json_t *v = json_object(), *root = json_object();
    char buf[32];
    if (m->has_mode && snprintf(buf, sizeof(buf), "%u", (unsigned)m->mode) > 0)
        json_object_set_new(v, meta_keys[0], json_string(buf));
    if (m->has_uid && snprintf(buf, sizeof(buf), "%u", (unsigned)m->uid) > 0)
        json_object_set_new(v, meta_keys[1], json_string(buf));
    if (m->has_gid && snprintf(buf, sizeof(buf), "%u", (unsigned)m->gid) > 0)
        json_object_set_new(v, meta_keys[2], json_string(buf));
    if (m->has_mtime && snprintf(buf, sizeof(buf), "%ld", (long)m->mtime.tv_sec) > 0)
        json_object_set_new(v, meta_keys[3], json_string(buf));
    json_object_set_new(root, "value", v);
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

int om_ais_set_meta(struct om_ais *ais, const char *key, const struct om_object *srcobj,
                        const struct om_file_meta *m, char *etag, struct om_store_error *err)
{
    (void)srcobj;
    char *json = meta_json(m);
    if (!json)
        return -ENOMEM;
    struct om_store_call c;
    int rc = ai_call_init(&c, ais, "PATCH", "SetCustomMetadata", AI_OBJECT, key, NULL);
    if (!rc)
        rc = ai_call_json(&c, json);
    free(json);
    if (!rc)
        rc = ai_call_perform(&c, err);
    ai_call_cleanup(&c);
    if (!rc && etag) {
        /* metadata leaves version and checksum as they are */
        struct om_object o;
        rc = om_ais_head(ais, key, &o, err);
        if (!rc)
            om_strlcpy(etag, o.etag, OM_ETAG_MAX);
    }
    return rc;
}

int om_ais_put(struct om_ais *ais, const char *key, const struct om_http_body *body,
                   const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
                   struct om_object *stored, struct om_store_error *err)
{
    if (opts && opts->if_none_match) {
        /* no conditional PUT in the native API: a HEAD first (a writer
         * racing in between is not seen) */
        int h = om_ais_head(ais, key, NULL, err);
        if (h == 0)
            return -EEXIST;
        if (h != -ENOENT)
            return h;
    }
    char hex[2 * OM_MD5_LEN + 1];
    om_hex(md5, OM_MD5_LEN, hex);
    struct om_store_call c;
    int rc = ai_call_init(&c, ais, "PUT", "PutObject", AI_OBJECT, key, NULL);
    if (!rc)
        rc = set_body(&c, body);
    /* the target checks the body against it before storing anything */
    if (!rc)
        rc = om_headers_add(&c.req.headers, "Ais-Checksum-Type", "md5");
    if (!rc)
        rc = om_headers_add(&c.req.headers, "Ais-Checksum-Value", hex);
    if (!rc && opts && opts->meta)
        rc = add_meta_headers(&c.req, opts->meta);
    if (!rc)
        rc = ai_call_perform(&c, err);
    if (!rc && stored) {
        ai_object_from_headers(&c.req.resp_headers, stored);
        stored->size = body->len;
    }
    ai_call_cleanup(&c);
    return rc;
}

int om_ais_delete(struct om_ais *ais, const char *key, struct om_store_error *err)
{
    struct om_store_call c;
    int rc = ai_call_init(&c, ais, "DELETE", "DeleteObject", AI_OBJECT, key, NULL);
    if (!rc)
        rc = ai_call_perform(&c, err);
    ai_call_cleanup(&c);
    return rc;
}

/* An action on an object: POST (or another method) with {"action":...}. */
static int object_action(struct om_ais *ais, const char *method, const char *op, const char *key,
                         const char *query, json_t *msg, struct om_store_call *c,
                         struct om_store_error *err)
{
    char *json = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    if (!json)
        return -ENOMEM;
    int rc = ai_call_init(c, ais, method, op, AI_OBJECT, key, query);
    if (!rc)
        rc = ai_call_json(c, json);
    free(json);
    if (!rc)
        rc = ai_call_perform(c, err);
    return rc;
}

static json_t *action(const char *name)
{
    json_t *m = json_object();
    json_object_set_new(m, "action", json_string(name));
    return m;
}

/* Guard of a copy or rename: the source is still the version asked for
 * (the native API takes no condition; a change in between is not seen). */
static int still(struct om_ais *ais, const char *key, const char *if_match,
                 struct om_store_error *err)
{
    if (!if_match || !*if_match)
        return 0;
    struct om_object o;
    int rc = om_ais_head(ais, key, &o, err);
    return rc ? rc : strcmp(o.etag, if_match) == 0 ? 0 : -ESTALE;
}

int om_ais_rename(struct om_ais *ais, const char *src, const char *dst, const char *if_match,
                      struct om_store_error *err)
{
    int rc = still(ais, src, if_match, err);
    if (rc)
        return rc;
    json_t *m = action("rename-obj");
    json_object_set_new(m, "name", json_string(dst));
    struct om_store_call c;
    rc = object_action(ais, "POST", "RenameObject", src, NULL, m, &c, err);
    ai_call_cleanup(&c);
    return rc;
}

int om_ais_copy(struct om_ais *ais, const char *src, const struct om_object *srcobj,
                    const char *dst, const struct om_put_opts *opts, char *etag,
                    struct om_store_error *err)
{
    int rc = still(ais, src, srcobj->etag, err);
    if (rc)
        return rc;
    /* the destination's name: "ais/@#/BUCKET/KEY" (the global namespace) */
    struct om_buf to = {0}, q = {0};
    rc = om_buf_printf(&to, "ais/@#/%s/%s", ais->bucket, dst);
    if (!rc)
        rc = om_buf_puts(&q, "object_to=");
    if (!rc)
        rc = om_uri_encode(&q, to.data, to.len, false);
    om_buf_free(&to);
    struct om_store_call c;
    if (!rc)
        rc = ai_call_init(&c, ais, "PUT", "CopyObject", AI_OBJECT, src, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    rc = ai_call_perform(&c, err);
    ai_call_cleanup(&c);
    if (!rc && opts && opts->meta)
        rc = om_ais_set_meta(ais, dst, srcobj, opts->meta, etag, err);
    else if (!rc && etag) {
        struct om_object o;
        rc = om_ais_head(ais, dst, &o, err);
        if (!rc)
            om_strlcpy(etag, o.etag, OM_ETAG_MAX);
    }
    return rc;
}

/* ---- multipart ---- */

int om_ais_mpu_create(struct om_ais *ais, const char *key, const struct om_put_opts *opts,
                          char **upload_id, struct om_store_error *err)
{
    struct om_store_call c;
    int rc = object_action(ais, "POST", "CreateMultipartUpload", key, NULL, action("mpt-upload"),
                           &c, err);
    if (!rc) {
        struct om_buf *b = &c.req.resp_body;
        size_t n = b->len;
        while (n > 0 && isspace((unsigned char)b->data[n - 1]))
            n--;
        *upload_id = n && n < 128 ? strndup(b->data, n) : NULL;
        if (!*upload_id) {
            rc = n && n < 128 ? -ENOMEM : -EBADMSG;
            if (err)
                snprintf(err->message, sizeof(err->message), "no upload id in the answer");
        }
    }
    ai_call_cleanup(&c);
    if (rc || !opts || !opts->meta)
        return rc;
    /* completion drops custom metadata: it is set again then */
    struct ais_upload *u = calloc(1, sizeof(*u));
    if (!u || !(u->id = strdup(*upload_id))) {
        free(u);
        return 0; /* the object goes without metadata: said at completion */
    }
    u->meta = *opts->meta;
    u->has_meta = true;
    pthread_mutex_lock(&ais->lock);
    u->next = ais->uploads;
    ais->uploads = u;
    pthread_mutex_unlock(&ais->lock);
    return 0;
}

/* Take the upload's record out of the list (NULL when there is none). */
static struct ais_upload *upload_take(struct om_ais *ais, const char *id)
{
    pthread_mutex_lock(&ais->lock);
    struct ais_upload **pp = &ais->uploads, *u;
    while ((u = *pp) && strcmp(u->id, id) != 0)
        pp = &u->next;
    if (u)
        *pp = u->next;
    pthread_mutex_unlock(&ais->lock);
    return u;
}

static int part_build(struct om_ais *ais, struct om_store_part_put *p)
{
    struct om_buf q = {0};
    p->error = 0;
    p->etag[0] = '\0';
    memset(&p->err, 0, sizeof(p->err));
    int rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, p->upload_id, strlen(p->upload_id), false);
    if (!rc)
        rc = om_buf_printf(&q, "&partNumber=%d", p->number);
    if (!rc)
        rc = ai_call_init(&p->call, ais, "PUT", "UploadPart", AI_OBJECT, p->key, q.data);
    om_buf_free(&q);
    if (!rc)
        rc = set_body(&p->call, &p->body);
    /* a part that may have reached the target is not sent again under its
     * number: AIStore loses a part sent twice (the writer begins a new
     * upload instead) */
    p->call.req.idempotent = false;
    p->call.op = p;
    return rc;
}

/* The part's "ETag": its MD5, which is what the writer sent (AIStore names
 * none; the object's checksum proves the whole at the commit). */
static void part_finish(struct om_store_part_put *p)
{
    p->error = ai_call_result(&p->call, &p->err);
    if (!p->error)
        om_hex(p->md5, OM_MD5_LEN, p->etag);
    ai_call_cleanup(&p->call);
}

static void part_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_store_part_put *p = ud;
    part_finish(p);
    p->done(p);
}

int om_ais_part_submit(struct om_ais *ais, struct om_store_part_put *p)
{
    int rc = part_build(ais, p);
    if (!rc)
        rc = om_http_submit(ais->http, &p->call.req, part_done, p);
    if (rc)
        ai_call_cleanup(&p->call);
    return rc;
}

void om_ais_part_cancel(struct om_ais *ais, struct om_store_part_put *p)
{
    om_http_cancel(ais->http, &p->call.req);
}

int om_ais_part_put(struct om_ais *ais, struct om_store_part_put *p)
{
    int rc = part_build(ais, p);
    if (rc) {
        ai_call_cleanup(&p->call);
        return rc;
    }
    om_http_perform(ais->http, &p->call.req);
    part_finish(p);
    return p->error;
}

int om_ais_mpu_complete(struct om_ais *ais, const char *key, const char *upload_id,
                            const struct om_store_part *parts, int nparts, char *etag,
                            struct om_store_error *err)
{
    json_t *m = action("mpt-complete"), *list = json_array();
    for (int i = 0; i < nparts; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "part-number", json_integer(parts[i].number));
        json_array_append_new(list, e);
    }
    json_object_set_new(m, "value", list);
    struct om_buf q = {0};
    int rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    struct om_store_call c;
    if (rc) {
        json_decref(m);
        om_buf_free(&q);
        return rc;
    }
    rc = object_action(ais, "POST", "CompleteMultipartUpload", key, q.data, m, &c, err);
    om_buf_free(&q);
    ai_call_cleanup(&c);
    struct ais_upload *u = upload_take(ais, upload_id);
    if (!rc && u && u->has_meta) {
        struct om_object none = {0};
        rc = om_ais_set_meta(ais, key, &none, &u->meta, NULL, err);
        if (rc)
            om_warn("%s: its metadata could not be set after the upload: %s", key,
                    strerror(-rc));
    }
    if (u) {
        free(u->id);
        free(u);
    }
    if (!rc && etag) {
        struct om_object o;
        if (om_ais_head(ais, key, &o, NULL) == 0)
            om_strlcpy(etag, o.etag, OM_ETAG_MAX);
    }
    return rc;
}

int om_ais_mpu_abort(struct om_ais *ais, const char *key, const char *upload_id,
                         struct om_store_error *err)
{
    struct om_buf q = {0};
    int rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    struct om_store_call c;
    if (!rc)
        rc = object_action(ais, "DELETE", "AbortMultipartUpload", key, q.data,
                           action("mpt-abort"), &c, err);
    om_buf_free(&q);
    ai_call_cleanup(&c);
    struct ais_upload *u = upload_take(ais, upload_id);
    if (u) {
        free(u->id);
        free(u);
    }
    return rc;
}

/* Uploads in progress: the native API lists none; the S3 API of the same
 * proxy does (unsigned, as AIStore takes it with authentication off). */
int om_ais_mpu_list(struct om_ais *ais, const char *prefix, om_upload_cb cb, void *ud,
                        struct om_store_error *err)
{
    struct om_buf q = {0};
    int rc = om_buf_puts(&q, "uploads=");
    if (!rc && prefix && *prefix) {
        rc = om_buf_puts(&q, "&prefix=");
        if (!rc)
            rc = om_uri_encode(&q, prefix, strlen(prefix), false);
    }
    struct om_store_call c;
    if (!rc)
        rc = ai_call_init(&c, ais, "GET", "ListMultipartUploads", AI_S3_BUCKET, NULL, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    c.req.max_body = 64u << 20;
    rc = ai_call_perform(&c, err);
    bool truncated;
    char *km = NULL, *im = NULL;
    if (!rc)
        rc = om_xml_parse_uploads(c.req.resp_body.data, c.req.resp_body.len, cb, ud, &truncated,
                                  &km, &im);
    free(km);
    free(im);
    ai_call_cleanup(&c);
    return rc;
}
