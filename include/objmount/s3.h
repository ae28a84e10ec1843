/* The S3 backend of the store (objmount/store.h): S3 operations on one
 * bucket, requests built, signed and sent through the request engine,
 * responses parsed into the store's structs. Only src/store/ calls these;
 * the layers above go through om_store_*.
 *
 * Every function returns 0 (or a byte count) on success and a negative errno
 * on failure; when err is not NULL it receives the HTTP status, the S3 error
 * code and message (mapped to errno by om_store_errno). Keys are raw object
 * keys (UTF-8, any bytes but NUL); they are encoded here. Thread-safe: one
 * struct om_s3 serves every thread. */
#ifndef OBJMOUNT_S3_H
#define OBJMOUNT_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "objmount/creds.h"
#include "objmount/digest.h"
#include "objmount/http.h"
#include "objmount/store.h"
#include "objmount/xml.h"

/* S3's limits (AWS): parts, object size, keys. */
#define OM_S3_MAX_PARTS 10000
#define OM_S3_MIN_PART (5ULL << 20)
#define OM_S3_MAX_PART (5ULL << 30)
#define OM_S3_MAX_OBJECT (5ULL << 40)
#define OM_S3_COPY_MAX (5ULL << 30)

struct om_s3;

/* Validate the endpoint and build a client. creds are copied. Returns NULL
 * with err filled on a bad endpoint, bucket or allocation failure. */
struct om_s3 *om_s3_new(struct om_http *http, const struct om_store_config *cfg,
                        const struct om_creds *creds, char *err, size_t errlen);
/* What the client can do; updated when the server turns out to be an
 * AIStore cluster (its Server header, its checksum headers). */
const struct om_store_caps *om_s3_caps(struct om_s3 *s3);
void om_s3_free(struct om_s3 *s3);

/* The region requests are currently signed for (it changes when the server
 * names another). Copied into out. */
void om_s3_region(struct om_s3 *s3, char *out, size_t outlen);
/* Engine used by this client. */
struct om_http *om_s3_http(struct om_s3 *s3);

/* ---- objects ---- */

int om_s3_head(struct om_s3 *s3, const char *key, struct om_object *obj,
               struct om_store_error *err);

/* Start an asynchronous GET; g->done runs once when it ends. Returns 0 or a
 * negative errno (then done is not called). */
int om_s3_get_submit(struct om_s3 *s3, struct om_store_get *g);
/* Abandon a submitted GET; done still runs (with -ECANCELED if it had not
 * finished). */
void om_s3_get_cancel(struct om_s3 *s3, struct om_store_get *g);
/* Synchronous form: returns bytes read or a negative errno. */
ssize_t om_s3_get_range(struct om_s3 *s3, const char *key, uint64_t off, uint64_t len,
                        const char *if_match, char *buf, struct om_object *obj,
                        struct om_store_error *err);

/* PUT body as key with Content-MD5 = md5 (required). stored (may be NULL)
 * receives the returned ETag and what it shows; an ETag other than md5 is
 * no failure here (it may be no MD5): the caller's verification decides. */
int om_s3_put(struct om_s3 *s3, const char *key, const struct om_http_body *body,
              const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
              struct om_object *stored, struct om_store_error *err);

int om_s3_delete(struct om_s3 *s3, const char *key, struct om_store_error *err);

/* Server-side copy of src (srcobj: its HEAD; its ETag guards it): one
 * CopyObject up to the copy limit, UploadPartCopy in parts past it. With
 * opts, metadata is replaced by opts (REPLACE); without, copied. */
int om_s3_copy(struct om_s3 *s3, const char *src, const struct om_object *srcobj, const char *dst,
               const struct om_put_opts *opts, char *etag, struct om_store_error *err);
/* New metadata for key by a copy onto itself (REPLACE). */
int om_s3_set_meta(struct om_s3 *s3, const char *key, const struct om_object *srcobj,
                   const struct om_file_meta *m, char *etag, struct om_store_error *err);

/* ---- multipart ---- */

/* *upload_id is malloc'd; caller frees. */
int om_s3_mpu_create(struct om_s3 *s3, const char *key, const struct om_put_opts *opts,
                     char **upload_id, struct om_store_error *err);

/* Returns 0 or a negative errno (then done is not called). A returned
 * ETag other than md5 is -EBADMSG once this server's ETags proved to be
 * MD5s (one matched the MD5 sent). */
int om_s3_part_submit(struct om_s3 *s3, struct om_store_part_put *p);
int om_s3_mpu_part(struct om_s3 *s3, struct om_store_part_put *p);
/* Abandon a submitted part upload; done still runs. */
void om_s3_part_cancel(struct om_s3 *s3, struct om_store_part_put *p);

/* Complete with parts in ascending order. Not retried blindly: a failed
 * attempt is followed by a check of what the server holds (an object with
 * the expected multipart ETag counts as success). */
int om_s3_mpu_complete(struct om_s3 *s3, const char *key, const char *upload_id,
                       const struct om_store_part *parts, int nparts, char *etag,
                       struct om_store_error *err);
int om_s3_mpu_abort(struct om_s3 *s3, const char *key, const char *upload_id,
                    struct om_store_error *err);
/* UploadPartCopy: part `number` of upload_id is bytes [first, last] of
 * src_key (guarded by if_match). -ENOSYS when the server does not
 * implement it (AIStore answers 501). */
int om_s3_part_copy(struct om_s3 *s3, const char *key, const char *upload_id, int number,
                    const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                    char *etag, struct om_store_error *err);
/* Every in-progress upload under prefix (all pages). */
int om_s3_mpu_list(struct om_s3 *s3, const char *prefix, om_upload_cb cb, void *ud,
                   struct om_store_error *err);

/* ---- listing ---- */

/* One ListObjectsV2 page, parsed as it streams; cb sees each entry once even
 * when the page is fetched again after a failure. *next_token (may be NULL)
 * receives a malloc'd continuation token, or NULL on the last page. */
int om_s3_list_page(struct om_s3 *s3, const struct om_list_params *p, om_list_cb cb, void *ud,
                    char **next_token, struct om_store_error *err);
/* What a name is: HEAD key and LIST "key/" (one entry) sent at once. */
int om_s3_lookup(struct om_s3 *s3, const char *key, struct om_store_lookup *out,
                 struct om_store_error *err);

/* One LIST page as a check of the bucket: entries to cb (NULL: counted
 * only), *complete (may be NULL) whether it was the whole listing, the
 * server's clock from its Date header. */
int om_s3_check_list(struct om_s3 *s3, const struct om_list_params *p, om_list_cb cb, void *ud,
                     bool *complete, long *skew_s, struct om_store_error *err);

/* A HEAD of the bucket, to learn whether an AIStore cluster answers (it
 * says so; its caps change then). Errors are ignored. */
void om_s3_identify(struct om_s3 *s3);

/* ---- helpers exposed for tests ---- */

/* URL of key (NULL or "" = the bucket) with an encoded query (may be NULL). */
char *om_s3_url(struct om_s3 *s3, const char *key, const char *query);
/* The digest an S3 ETag shows, read off its shape (never firm): 32 hex
 * digits the MD5 (not with encrypted: SSE-KMS, SSE-C), "<32 hex>-N" the
 * MD5 of N part MD5s, AIStore's "v1-<checksum>-<time>" its checksum
 * (xxhash64 for 16 hex digits, SHA-256 for 64); else none. */
void om_s3_sum_from_etag(const char *etag, bool encrypted, struct om_sum *sum);
/* Fill obj from response headers (HEAD/GET). */
void om_s3_object_from_headers(const struct om_header_list *h, struct om_object *obj);

#endif
