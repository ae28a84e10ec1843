/* Internals shared by the files of the S3 client: s3.c (client, requests,
 * objects), s3_multipart.c (multipart uploads and copies) and s3_list.c
 * (listings, lookups, the bucket check). */
#ifndef OBJMOUNT_S3_INT_H
#define OBJMOUNT_S3_INT_H

#include <pthread.h>

#include "objmount/s3.h"

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
    char *redirect_hosts; /* NULL: only the endpoint host (and *.amazonaws.com on AWS) */
    struct om_creds creds;
    uint64_t copy_max;   /* largest single CopyObject (atomic: AIStore raises it) */
    bool copy_limit_given; /* -o copy_limit: kept on AIStore too */
    bool etags_are_md5;  /* an ETag of this server matched the MD5 sent (atomic) */
    bool aistore;        /* the server showed itself an AIStore cluster (atomic) */
    struct om_store_caps caps; /* flags updated atomically when aistore is learned */
    pthread_mutex_t lock; /* guards region and host (they change on region redirects) */
    char region[64];
};

/* Prepare a call of method on key (NULL: the bucket) with an encoded query. */
int si_call_init(struct om_store_call *c, struct om_s3 *s3, const char *method, const char *op,
                 const char *key, const char *query);
void si_call_cleanup(struct om_store_call *c);
/* Submit a built call (build_rc: how building it went) for done(req, ud);
 * on failure the call is cleaned up and the error returned. */
int si_call_submit(struct om_store_call *c, int build_rc, om_http_done_fn done, void *ud);
/* Set the body and its payload hash. */
int si_call_set_body(struct om_store_call *c, const struct om_http_body *body);
/* Learn from a response's headers what the server is (an AIStore cluster
 * says so in Server, or with its checksum headers). */
void si_note_server(struct om_s3 *s3, const struct om_header_list *h);
/* A finished request as 0 or -errno, err filled. */
int si_call_result(struct om_store_call *c, struct om_store_error *err);
/* A 2xx answer that carries an <Error> document. */
int si_body_error(struct om_store_call *c, struct om_store_error *err);
int si_call_perform(struct om_store_call *c, struct om_store_error *err);
/* An ETag without its quotes into dst (OM_ETAG_MAX; dst may be NULL). */
void si_copy_etag(const char *src, char *dst);
int si_add_put_opts(struct om_http_req *r, const struct om_put_opts *opts);
int si_add_md5(struct om_http_req *r, const unsigned char md5[OM_MD5_LEN]);
/* -EBADMSG when etag differs from md5 and this server's ETags proved to
 * be MD5s; 0 otherwise. */
int si_check_md5_etag(struct om_s3 *s3, const char *etag, const unsigned char md5[OM_MD5_LEN],
                      const char *op, const char *key, struct om_store_error *err);
/* Append "&name=value" (value encoded) unless value is NULL or empty. */
int si_add_param(struct om_buf *q, const char *name, const char *value);
/* "/bucket/key", encoded, as x-amz-copy-source wants it. */
int si_copy_source(struct om_s3 *s3, const char *key, struct om_buf *src);
/* After a 412 to x-amz-copy-source-if-match: 0 and *since when a HEAD shows
 * that ETag (copy again with si_add_unmodified_since), else -ESTALE. */
int si_copy_412_check(struct om_s3 *s3, const char *src_key, const char *if_match, time_t *since);
int si_add_unmodified_since(struct om_http_req *req, time_t since);
/* One CopyObject of src_key to dst_key (guarded by if_match; metadata
 * replaced by opts, else copied), again under If-Unmodified-Since where a
 * server refuses an unchanged multipart source's If-Match (Swift). */
int si_copy_whole(struct om_s3 *s3, const char *src_key, const char *dst_key, const char *if_match,
                  const struct om_put_opts *opts, char *etag, struct om_store_error *err);

#endif
