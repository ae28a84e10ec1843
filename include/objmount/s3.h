/* S3 operations on one bucket: requests built, signed and sent through the
 * request engine; responses parsed into structs.
 *
 * Every function returns 0 (or a byte count) on success and a negative errno
 * on failure; when err is not NULL it receives the HTTP status, the S3 error
 * code and message. S3 error codes map to errno in one table
 * (om_s3_errno). Keys are raw object keys (UTF-8, any bytes but NUL); they are
 * encoded here. Thread-safe: one struct om_s3 serves every thread. */
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
#include "objmount/xml.h"

#define OM_ETAG_MAX 80
#define OM_S3_MAX_PARTS 10000
/* Largest object S3 stores (5 TiB): a file cannot grow past it. */
#define OM_S3_MAX_OBJECT (5ULL << 40)
/* Longest key S3 (and Swift's s3api) accepts, in bytes. */
#define OM_S3_KEY_MAX 1024

enum om_addressing {
    OM_ADDR_AUTO = 0, /* virtual-hosted for AWS endpoints, path-style elsewhere */
    OM_ADDR_PATH,
    OM_ADDR_VHOST,
};

struct om_s3_config {
    const char *endpoint; /* http(s)://host[:port][/path-prefix] */
    const char *bucket;
    const char *region;
    enum om_addressing addressing;
    bool sign_payload; /* hash file bodies too (default: UNSIGNED-PAYLOAD for them) */
    const char *redirect_hosts; /* hosts besides the endpoint's that get credentials */
};

struct om_s3_error {
    long status;
    char code[64];
    char message[256];
    char request_id[96];
};

/* Metadata of one object, from HEAD, GET or a listing. */
struct om_s3_object {
    uint64_t size;
    time_t mtime; /* Last-Modified */
    char etag[OM_ETAG_MAX]; /* without quotes */
    char content_type[128];
    /* s3fs-fuse compatible metadata (x-amz-meta-mode, -uid, -gid, -mtime) */
    bool has_mode, has_uid, has_gid, has_mtime;
    uint32_t mode, uid, gid;
    struct timespec meta_mtime;
};

struct om_s3;

/* Validate the endpoint and build a client. creds are copied. Returns NULL
 * with err filled on a bad endpoint, bucket or allocation failure. */
struct om_s3 *om_s3_new(struct om_http *http, const struct om_s3_config *cfg,
                        const struct om_creds *creds, char *err, size_t errlen);
void om_s3_free(struct om_s3 *s3);

/* The region requests are currently signed for (it changes when the server
 * names another). Copied into out. */
void om_s3_region(struct om_s3 *s3, char *out, size_t outlen);
/* Engine used by this client. */
struct om_http *om_s3_http(struct om_s3 *s3);

/* A region name is [a-z0-9-]+ (it becomes part of a host name). */
bool om_region_valid(const char *region);

/* Map an S3 error code (or, without one, the HTTP status) to -errno. */
int om_s3_errno(long status, const char *code);

/* ---- objects ---- */

int om_s3_head(struct om_s3 *s3, const char *key, struct om_s3_object *obj,
               struct om_s3_error *err);

/* Request state shared by every operation; private to s3.c, embedded in the
 * asynchronous operation structs so that cancelling is safe while the
 * operation is alive. */
struct om_s3_call {
    struct om_s3 *s3;
    struct om_http_req req;
    char payload_hash[2 * OM_SHA256_LEN + 1];
    bool range_checked;
    uint64_t skip;
    uint64_t total; /* object size named by the response, UINT64_MAX if unknown */
    uint64_t range_len;
    void *op;
};

/* A ranged GET into buf. Reads min(len, size - off) bytes; an empty result
 * means off is at or past the end. A response with fewer bytes than that, or
 * a Content-Range that does not match the request, is an error (-EIO), never
 * a short result. if_match (may be NULL) names the version the caller
 * expects: it is sent as If-Match, and since some servers ignore If-Match on
 * GET, the ETag of the response is compared with it too; with size_known,
 * so is the object size the response names. Another version is -ESTALE,
 * logged with the key and both ETags, and no byte of it reaches buf's
 * caller as data. obj (may be NULL) receives size and ETag. */
struct om_s3_get {
    /* in */
    const char *key;
    uint64_t off;
    uint64_t len;
    const char *if_match;
    bool size_known;
    uint64_t size; /* the object size the caller expects, with size_known */
    char *buf;
    void (*done)(struct om_s3_get *g); /* async completion, on the engine thread */
    void *ud;
    /* out */
    int error;
    uint64_t got;
    struct om_s3_object obj;
    struct om_s3_error err;
    /* private */
    struct om_s3_call call;
};

/* Start an asynchronous GET; g->done runs once when it ends. Returns 0 or a
 * negative errno (then done is not called). */
int om_s3_get_submit(struct om_s3 *s3, struct om_s3_get *g);
/* Abandon a submitted GET; done still runs (with -ECANCELED if it had not
 * finished). */
void om_s3_get_cancel(struct om_s3 *s3, struct om_s3_get *g);
/* Synchronous form: returns bytes read or a negative errno. */
ssize_t om_s3_get_range(struct om_s3 *s3, const char *key, uint64_t off, uint64_t len,
                        const char *if_match, char *buf, struct om_s3_object *obj,
                        struct om_s3_error *err);

/* Options of writes. meta holds complete header names ("x-amz-meta-mode"). */
struct om_s3_put_opts {
    const char *content_type;
    const struct om_header_list *meta;
    bool if_none_match; /* fail with -EEXIST if the key exists (where supported) */
};

/* PUT body as key with Content-MD5 = md5 (required). etag (OM_ETAG_MAX, may be
 * NULL) receives the returned ETag. A returned ETag that is an MD5 other than
 * md5 is -EBADMSG (the server stored other bytes). */
int om_s3_put(struct om_s3 *s3, const char *key, const struct om_http_body *body,
              const unsigned char md5[OM_MD5_LEN], const struct om_s3_put_opts *opts,
              char *etag, struct om_s3_error *err);

int om_s3_delete(struct om_s3 *s3, const char *key, struct om_s3_error *err);

/* Server-side copy. With opts, metadata is replaced by opts (REPLACE);
 * without, copied. if_match (may be NULL) guards the source. */
int om_s3_copy(struct om_s3 *s3, const char *src_key, const char *dst_key, const char *if_match,
               const struct om_s3_put_opts *opts, char *etag, struct om_s3_error *err);

/* ---- multipart ---- */

struct om_s3_part {
    int number;
    char etag[OM_ETAG_MAX];
};

/* *upload_id is malloc'd; caller frees. */
int om_s3_mpu_create(struct om_s3 *s3, const char *key, const struct om_s3_put_opts *opts,
                     char **upload_id, struct om_s3_error *err);

/* An UploadPart, synchronous or asynchronous like om_s3_get. */
struct om_s3_part_put {
    /* in */
    const char *key;
    const char *upload_id;
    int number;
    struct om_http_body body;
    unsigned char md5[OM_MD5_LEN];
    void (*done)(struct om_s3_part_put *p);
    void *ud;
    /* out */
    int error;
    char etag[OM_ETAG_MAX];
    struct om_s3_error err;
    /* private */
    struct om_s3_call call;
};
/* Returns 0 or a negative errno (then done is not called). The returned
 * ETag is compared with md5 when it is an MD5: a mismatch is -EBADMSG. */
int om_s3_part_submit(struct om_s3 *s3, struct om_s3_part_put *p);
int om_s3_mpu_part(struct om_s3 *s3, struct om_s3_part_put *p);
/* Abandon a submitted part upload; done still runs. */
void om_s3_part_cancel(struct om_s3 *s3, struct om_s3_part_put *p);

/* Complete with parts in ascending order. Not retried blindly: a failed
 * attempt is followed by a check of what the server holds (an object with
 * the expected multipart ETag counts as success). */
int om_s3_mpu_complete(struct om_s3 *s3, const char *key, const char *upload_id,
                       const struct om_s3_part *parts, int nparts, char *etag,
                       struct om_s3_error *err);
int om_s3_mpu_abort(struct om_s3 *s3, const char *key, const char *upload_id,
                    struct om_s3_error *err);
/* UploadPartCopy: part `number` of upload_id is bytes [first, last] of
 * src_key (guarded by if_match). -ENOSYS when the server does not
 * implement it (AIStore answers 501). */
int om_s3_part_copy(struct om_s3 *s3, const char *key, const char *upload_id, int number,
                    const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                    char *etag, struct om_s3_error *err);
/* Every in-progress upload under prefix (all pages). */
int om_s3_mpu_list(struct om_s3 *s3, const char *prefix, om_upload_cb cb, void *ud,
                   struct om_s3_error *err);

/* ---- listing ---- */

struct om_s3_list_params {
    const char *prefix;
    const char *delimiter;
    const char *start_after;
    const char *continuation;
    int max_keys; /* 0 = server default */
};

/* One ListObjectsV2 page, parsed as it streams; cb sees each entry once even
 * when the page is fetched again after a failure. *next_token (may be NULL)
 * receives a malloc'd continuation token, or NULL on the last page. */
int om_s3_list_page(struct om_s3 *s3, const struct om_s3_list_params *p, om_list_cb cb, void *ud,
                    char **next_token, struct om_s3_error *err);
/* Every page. */
int om_s3_list_all(struct om_s3 *s3, const char *prefix, const char *delimiter, om_list_cb cb,
                   void *ud, struct om_s3_error *err);
/* Every page, as om_s3_list_all; after each page, page(ud) (may be NULL)
 * may stop the listing by returning a negative errno (returned). */
int om_s3_list_pages(struct om_s3 *s3, const char *prefix, const char *delimiter, om_list_cb cb,
                     void *ud, int (*page)(void *ud), struct om_s3_error *err);

/* What a name is: HEAD key and LIST "key/" (one entry) sent at once. A
 * directory (some key under "key/", or a "key/" marker) wins over an object
 * of the same name. Returns 0 with is_file or is_dir set, -ENOENT when
 * neither exists, or another negative errno when a request failed. */
struct om_s3_lookup {
    bool is_file;
    bool is_dir;
    bool has_marker;         /* the directory has a "key/" marker object */
    struct om_s3_object obj; /* when is_file */
};
int om_s3_lookup(struct om_s3 *s3, const char *key, struct om_s3_lookup *out,
                 struct om_s3_error *err);

/* Check that the bucket answers a listing with these credentials. skew_s
 * (may be NULL) receives server time minus local time from the Date header. */
int om_s3_check_bucket(struct om_s3 *s3, long *skew_s, struct om_s3_error *err);
/* The same check as the first page of the listing of directory dirkey
 * ("" the bucket's root, else ending with '/'; delimiter '/'): its entries
 * go to cb, and *complete says whether that page was the whole listing
 * (the mount keeps it as its root's). */
int om_s3_check_listing(struct om_s3 *s3, const char *dirkey, om_list_cb cb, void *ud,
                        bool *complete, long *skew_s, struct om_s3_error *err);

/* ---- helpers exposed for tests ---- */

/* URL of key (NULL or "" = the bucket) with an encoded query (may be NULL). */
char *om_s3_url(struct om_s3 *s3, const char *key, const char *query);
/* The multipart ETag for part MD5s: hex(md5(md5_1 || ... || md5_n)) "-" n. */
void om_s3_multipart_etag(const unsigned char (*part_md5)[OM_MD5_LEN], int n,
                          char out[OM_ETAG_MAX]);
/* Fill obj from response headers (HEAD/GET). */
void om_s3_object_from_headers(const struct om_header_list *h, struct om_s3_object *obj);

#endif
