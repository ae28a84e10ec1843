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
    pthread_mutex_t lock; /* guards region and host (they change on region redirects) */
    char region[64];
};

/* Prepare a call of method on key (NULL: the bucket) with an encoded query. */
int si_call_init(struct om_s3_call *c, struct om_s3 *s3, const char *method, const char *op,
                 const char *key, const char *query);
void si_call_cleanup(struct om_s3_call *c);
/* Submit a built call (build_rc: how building it went) for done(req, ud);
 * on failure the call is cleaned up and the error returned. */
int si_call_submit(struct om_s3_call *c, int build_rc, om_http_done_fn done, void *ud);
/* Set the body and its payload hash. */
int si_call_set_body(struct om_s3_call *c, const struct om_http_body *body);
/* A finished request as 0 or -errno, err filled. */
int si_call_result(struct om_s3_call *c, struct om_s3_error *err);
/* A 2xx answer that carries an <Error> document. */
int si_body_error(struct om_s3_call *c, struct om_s3_error *err);
int si_call_perform(struct om_s3_call *c, struct om_s3_error *err);
/* An ETag without its quotes into dst (OM_ETAG_MAX; dst may be NULL). */
void si_copy_etag(const char *src, char *dst);
int si_add_put_opts(struct om_http_req *r, const struct om_s3_put_opts *opts);
int si_add_md5(struct om_http_req *r, const unsigned char md5[OM_MD5_LEN]);
/* -EBADMSG when etag is an MD5 other than md5. */
int si_check_md5_etag(const char *etag, const unsigned char md5[OM_MD5_LEN], const char *op,
                      const char *key, struct om_s3_error *err);
/* Append "&name=value" (value encoded) unless value is NULL or empty. */
int si_add_param(struct om_buf *q, const char *name, const char *value);
/* "/bucket/key", encoded, as x-amz-copy-source wants it. */
int si_copy_source(struct om_s3 *s3, const char *key, struct om_buf *src);
/* After a 412 to x-amz-copy-source-if-match: 0 and *since when a HEAD shows
 * that ETag (copy again with si_add_unmodified_since), else -ESTALE. */
int si_copy_412_check(struct om_s3 *s3, const char *src_key, const char *if_match, time_t *since);
int si_add_unmodified_since(struct om_http_req *req, time_t since);

#endif
