/* Multipart uploads and copies: create, parts (with their MD5 check),
 * complete (the server's state is checked before Complete is sent again),
 * abort, list, UploadPartCopy. */
#include "objmount/s3.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/url.h"
#include "s3_int.h"

/* ---- multipart ---- */

int om_s3_mpu_create(struct om_s3 *s3, const char *key, const struct om_put_opts *opts,
                     char **upload_id, struct om_store_error *err)
{
    struct om_store_call c;
    *upload_id = NULL;
    int rc = si_call_init(&c, s3, "POST", "CreateMultipartUpload", key, "uploads=");
    if (!rc)
        rc = si_add_put_opts(&c.req, opts);
    if (!rc)
        rc = si_call_perform(&c, err);
    if (!rc)
        rc = si_body_error(&c, err);
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
    si_call_cleanup(&c);
    return rc;
}

static int part_build(struct om_s3 *s3, struct om_store_part_put *p)
{
    struct om_buf q = {0};
    p->error = 0;
    p->etag[0] = '\0';
    memset(&p->err, 0, sizeof(p->err));
    int rc = om_buf_printf(&q, "partNumber=%d&uploadId=", p->number);
    if (!rc)
        rc = om_uri_encode(&q, p->upload_id, strlen(p->upload_id), false);
    if (!rc)
        rc = si_call_init(&p->call, s3, "PUT", "UploadPart", p->key, q.data);
    om_buf_free(&q);
    if (!rc)
        rc = si_call_set_body(&p->call, &p->body);
    if (!rc)
        rc = si_add_md5(&p->call.req, p->md5);
    /* AIStore loses a part sent twice under its number: one that may have
     * reached it is not sent again (the writer begins a new upload) */
    if (__atomic_load_n(&s3->aistore, __ATOMIC_RELAXED))
        p->call.req.idempotent = false;
    p->call.op = p;
    return rc;
}

static void part_finish(struct om_store_part_put *p)
{
    int rc = si_call_result(&p->call, &p->err);
    if (!rc) {
        si_copy_etag(om_headers_get(&p->call.req.resp_headers, "ETag"), p->etag);
        if (!p->etag[0]) {
            rc = -EBADMSG;
            snprintf(p->err.message, sizeof(p->err.message), "part %d: no ETag in the answer",
                     p->number);
        } else {
            struct om_sum sum;
            const char *sse =
                om_headers_get(&p->call.req.resp_headers, "x-amz-server-side-encryption");
            om_s3_sum_from_etag(p->etag, sse && strncasecmp(sse, "aws:kms", 7) == 0, &sum);
            if (sum.type == OM_SUM_MD5)
                rc = si_check_md5_etag(p->call.be, p->etag, p->md5, "UploadPart", p->key,
                                       &p->err);
        }
    }
    p->error = rc;
    si_call_cleanup(&p->call);
}

static void part_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct om_store_part_put *p = ud;
    part_finish(p);
    p->done(p);
}

int om_s3_part_submit(struct om_s3 *s3, struct om_store_part_put *p)
{
    return si_call_submit(&p->call, part_build(s3, p), part_done, p);
}

void om_s3_part_cancel(struct om_s3 *s3, struct om_store_part_put *p)
{
    om_http_cancel(s3->http, &p->call.req);
}

int om_s3_mpu_part(struct om_s3 *s3, struct om_store_part_put *p)
{
    int rc = part_build(s3, p);
    if (rc) {
        si_call_cleanup(&p->call);
        return rc;
    }
    om_http_perform(s3->http, &p->call.req);
    part_finish(p);
    return p->error;
}

/* Does the upload still exist? 1 yes, 0 no (NoSuchUpload), or -errno. */
static int upload_exists(struct om_s3 *s3, const char *key, const char *upload_id)
{
    struct om_buf q = {0};
    struct om_store_call c;
    int rc = om_buf_puts(&q, "max-parts=1&uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = si_call_init(&c, s3, "GET", "ListParts", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    struct om_store_error err;
    rc = si_call_perform(&c, &err);
    si_call_cleanup(&c);
    if (rc == 0)
        return 1;
    if (rc == -ENOENT)
        return 0;
    return rc;
}

int om_s3_mpu_complete(struct om_s3 *s3, const char *key, const char *upload_id,
                       const struct om_store_part *parts, int nparts, char *etag,
                       struct om_store_error *err)
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
        struct om_store_call c;
        rc = si_call_init(&c, s3, "POST", "CompleteMultipartUpload", key, q.data);
        if (!rc) {
            c.req.idempotent = false;
            c.req.max_body = 1 << 20;
            struct om_http_body b = {.kind = OM_BODY_MEM, .mem = body.data, .len = body.len};
            rc = si_call_set_body(&c, &b);
        }
        if (!rc)
            rc = om_headers_add(&c.req.headers, "Content-Type", "application/xml");
        if (!rc)
            rc = si_call_perform(&c, err);
        if (!rc)
            rc = si_body_error(&c, err);
        if (!rc && etag) {
            char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
            si_copy_etag(t, etag);
            free(t);
        }
        long status = c.req.status;
        si_call_cleanup(&c);
        bool transient = rc == -EAGAIN || rc == -ETIMEDOUT || rc == -EHOSTUNREACH ||
                         (rc == -EIO && (status == 0 || status >= 500));
        if (rc == 0 || !transient || attempt >= ATTEMPTS)
            break;
        /* Before sending Complete again, see what the server holds. */
        double rnd = 0.5 + (double)(om_now_ns() % 1000) / 2000.0;
        usleep((useconds_t)om_http_backoff_ms(200, 5000, attempt, rnd) * 1000);
        int exists = upload_exists(s3, key, upload_id);
        if (exists == 0) {
            struct om_object obj;
            if (om_s3_head(s3, key, &obj, NULL) == 0) {
                om_info("CompleteMultipartUpload %s: the first attempt took effect", key);
                if (etag)
                    om_strlcpy(etag, obj.etag, OM_ETAG_MAX);
                rc = 0;
            } else {
                rc = -ENOENT;
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
                    struct om_store_error *err)
{
    struct om_buf q = {0};
    struct om_store_call c;
    int rc = om_buf_puts(&q, "uploadId=");
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = si_call_init(&c, s3, "DELETE", "AbortMultipartUpload", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    rc = si_call_perform(&c, err);
    si_call_cleanup(&c);
    return rc;
}

static int part_copy_once(struct om_s3 *s3, const char *key, const char *upload_id, int number,
                          const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                          time_t since, char *etag, struct om_store_error *err)
{
    struct om_buf q = {0}, src = {0};
    struct om_store_call c;
    int rc = om_buf_printf(&q, "partNumber=%d&uploadId=", number);
    if (!rc)
        rc = om_uri_encode(&q, upload_id, strlen(upload_id), false);
    if (!rc)
        rc = si_call_init(&c, s3, "PUT", "UploadPartCopy", key, q.data);
    om_buf_free(&q);
    if (rc)
        return rc;
    rc = si_copy_source(s3, src_key, &src);
    if (!rc)
        rc = om_headers_add(&c.req.headers, "x-amz-copy-source", src.data);
    if (!rc)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-range",
                             "bytes=%" PRIu64 "-%" PRIu64, first, last);
    if (!rc && if_match && *if_match)
        rc = om_headers_addf(&c.req.headers, "x-amz-copy-source-if-match", "\"%s\"", if_match);
    if (!rc && since)
        rc = si_add_unmodified_since(&c.req, since);
    c.req.body = (struct om_http_body){.kind = OM_BODY_MEM, .mem = "", .len = 0};
    if (!rc)
        rc = si_call_perform(&c, err);
    if (!rc)
        rc = si_body_error(&c, err);
    if (!rc) {
        char *t = om_xml_find_text(c.req.resp_body.data, c.req.resp_body.len, "ETag");
        si_copy_etag(t, etag);
        free(t);
        if (!etag || !etag[0])
            rc = -EBADMSG;
    }
    om_buf_free(&src);
    si_call_cleanup(&c);
    return rc;
}

int om_s3_part_copy(struct om_s3 *s3, const char *key, const char *upload_id, int number,
                    const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                    char *etag, struct om_store_error *err)
{
    int rc =
        part_copy_once(s3, key, upload_id, number, src_key, first, last, if_match, 0, etag, err);
    time_t since;
    if (rc == -ESTALE && if_match && *if_match &&
        si_copy_412_check(s3, src_key, if_match, &since) == 0)
        rc = part_copy_once(s3, key, upload_id, number, src_key, first, last, NULL, since, etag,
                            err);
    return rc;
}

int om_s3_mpu_list(struct om_s3 *s3, const char *prefix, om_upload_cb cb, void *ud,
                   struct om_store_error *err)
{
    char *key_marker = NULL, *id_marker = NULL;
    int rc = 0;
    for (;;) {
        struct om_buf q = {0};
        rc = om_buf_puts(&q, "uploads=");
        if (!rc)
            rc = si_add_param(&q, "prefix", prefix);
        if (!rc)
            rc = si_add_param(&q, "key-marker", key_marker);
        if (!rc)
            rc = si_add_param(&q, "upload-id-marker", id_marker);
        struct om_store_call c;
        if (!rc)
            rc = si_call_init(&c, s3, "GET", "ListMultipartUploads", NULL, q.data);
        om_buf_free(&q);
        if (rc)
            break;
        c.req.max_body = 64u << 20;
        rc = si_call_perform(&c, err);
        bool truncated = false;
        free(key_marker);
        free(id_marker);
        key_marker = id_marker = NULL;
        if (!rc)
            rc = om_xml_parse_uploads(c.req.resp_body.data, c.req.resp_body.len, cb, ud,
                                      &truncated, &key_marker, &id_marker);
        si_call_cleanup(&c);
        if (rc || !truncated || !key_marker || !*key_marker)
            break;
    }
    free(key_marker);
    free(id_marker);
    return rc;
}


/* ---- copies ---- */

/* src copied into dst in parts (UploadPartCopy): parts of 512 MiB, at most
 * copy_max each, at least S3's smallest part and few enough for the part
 * limit; the source guarded by its version. */
static int copy_in_parts(struct om_s3 *s3, const char *src, const struct om_object *o,
                         const char *dst, const struct om_put_opts *opts, char *etag,
                         struct om_store_error *err)
{
    uint64_t part = OM_MIN(512ULL << 20, __atomic_load_n(&s3->copy_max, __ATOMIC_RELAXED));
    part = OM_MAX(part, (o->size + OM_S3_MAX_PARTS - 1) / OM_S3_MAX_PARTS);
    part = OM_MAX(part, OM_S3_MIN_PART);
    int n = (int)((o->size + part - 1) / part);
    char *id = NULL;
    int rc = om_s3_mpu_create(s3, dst, opts, &id, err);
    if (rc)
        return rc;
    struct om_store_part *parts = calloc((size_t)n, sizeof(*parts));
    if (!parts)
        rc = -ENOMEM;
    for (int i = 0; i < n && !rc; i++) {
        uint64_t first = (uint64_t)i * part, last = OM_MIN(first + part, o->size) - 1;
        parts[i].number = i + 1;
        rc = om_s3_part_copy(s3, dst, id, i + 1, src, first, last, o->etag, parts[i].etag, err);
    }
    if (!rc)
        rc = om_s3_mpu_complete(s3, dst, id, parts, n, etag, err);
    if (rc)
        om_s3_mpu_abort(s3, dst, id, NULL);
    free(parts);
    free(id);
    return rc;
}

int om_s3_copy(struct om_s3 *s3, const char *src, const struct om_object *srcobj, const char *dst,
               const struct om_put_opts *opts, char *etag, struct om_store_error *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
    if (srcobj->size <= __atomic_load_n(&s3->copy_max, __ATOMIC_RELAXED))
        return si_copy_whole(s3, src, dst, srcobj->etag[0] ? srcobj->etag : NULL, opts, etag,
                             err);
    om_debug("copy of %s (%" PRIu64 " bytes, more than one CopyObject takes): in parts", src,
             srcobj->size);
    return copy_in_parts(s3, src, srcobj, dst, opts, etag, err);
}

int om_s3_set_meta(struct om_s3 *s3, const char *key, const struct om_object *srcobj,
                   const struct om_file_meta *m, char *etag, struct om_store_error *err)
{
    struct om_put_opts opts = {
        .meta = m, .content_type = srcobj->content_type[0] ? srcobj->content_type : NULL};
    return om_s3_copy(s3, key, srcobj, key, &opts, etag, err);
}
