/* One interface for an object store, and the backends behind it: S3 (SigV4,
 * XML, multipart; objmount/s3.h) and AIStore's native API (JSON listings,
 * checksum properties; objmount/ais.h). The layers above call om_store_*
 * only and never name a backend: a backend states what it can do in
 * struct om_store_caps instead of being recognised.
 *
 * Every function returns 0 (or a byte count) on success and a negative
 * errno on failure; when err is not NULL it receives the HTTP status, the
 * server's error code and message. Keys are raw object keys (UTF-8, any
 * bytes but NUL); backends encode them. Thread-safe: one struct om_store
 * serves every thread. */
#ifndef OBJMOUNT_STORE_H
#define OBJMOUNT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "objmount/creds.h"
#include "objmount/digest.h"
#include "objmount/http.h"

/* A version token (S3's ETag, AIStore's ETag) is at most this long. */
#define OM_ETAG_MAX 80
/* Longest key any backend accepts, in bytes. */
#define OM_KEY_MAX 1024

/* ---- what an object is ---- */

/* A digest of an object's content the store states, of a known type. */
enum om_sum_type {
    OM_SUM_NONE = 0,
    OM_SUM_MD5,       /* MD5 of the content */
    OM_SUM_MD5_PARTS, /* MD5 of the parts' MD5s, with their count (S3 multipart) */
    OM_SUM_XXH64,     /* XXH64, seed 0 (AIStore's xxhash and xxhash2) */
    OM_SUM_SHA256,
    OM_SUM_SHA512,
    OM_SUM_CRC32C, /* AIStore's crc32c (its multipart objects: combined from the parts) */
};

struct om_sum {
    enum om_sum_type type;
    /* The store names the type (AIStore's Ais-Checksum-Type). When false,
     * the type was read off the shape of a version token (an S3 ETag of 32
     * hex digits): a token that merely looks like a digest proves nothing
     * when it differs, only when it matches. */
    bool firm;
    int parts; /* OM_SUM_MD5_PARTS: how many parts */
    char hex[2 * OM_SHA512_LEN + 1];
};

/* File metadata carried on an object (s3fs-fuse's x-amz-meta-mode, -uid,
 * -gid, -mtime on S3; custom metadata on AIStore). */
struct om_file_meta {
    bool has_mode, has_uid, has_gid, has_mtime;
    mode_t mode;
    uid_t uid;
    gid_t gid;
    struct timespec mtime;
};

/* Metadata of one object, from HEAD, GET or a listing. */
struct om_object {
    uint64_t size;
    time_t mtime; /* the store's modification time (Last-Modified) */
    /* The version token: opaque. Equal tokens are the same version; a
     * token is sent back as a condition (If-Match) and compared, never
     * parsed above this layer. */
    char etag[OM_ETAG_MAX];
    struct om_sum sum; /* a digest of the content, when the store states one */
    /* What the version token's shape suggests, where the store also names
     * its own digest in `sum` (AIStore's S3 API: an MD5-of-parts ETag beside
     * a crc32c or MD5 of the whole): a second proof a writer may already
     * hold. Type OM_SUM_NONE otherwise. */
    struct om_sum etag_sum;
    char content_type[128];
    bool has_mode, has_uid, has_gid, has_mtime;
    uint32_t mode, uid, gid;
    struct timespec meta_mtime;
};

struct om_store_error {
    long status;
    char code[64];
    char message[256];
    char request_id[96];
};

/* ---- what a store can do ---- */

struct om_store_caps {
    const char *name;    /* "S3", "AIStore" */
    uint64_t max_object; /* largest object */
    uint64_t min_part;   /* smallest part but the last of a multipart upload */
    uint64_t max_part;
    int max_parts;
    size_t key_max;
    /* Largest object one server-side copy takes (S3: CopyObject, 5 GiB, or
     * -o copy_limit); larger ones are copied in parts (part_copy). 0: no
     * server-side copy at all. */
    uint64_t copy_max;
    bool part_copy;    /* copies ranges of an object into parts (UploadPartCopy) */
    bool part_replace; /* a part uploaded again under its number replaces the first */
    bool rename;       /* moves an object to another key in place */
    /* Stores "dir/" under that name, so an empty directory can be kept as
     * a marker object. AIStore stores it as "dir": a file that collides
     * with the directory's own objects (ErrMv) on the target holding both. */
    bool dir_marker;
    /* Keeps user metadata (modes, owners, times) with an object. AIStore's
     * S3 API accepts x-amz-meta-* and stores none of it (its native API
     * keeps custom metadata). */
    bool user_meta;
    /* Characters no key may hold: AIStore's S3 API cuts an object's name
     * at '?' and, where it redirects, at ';' (a PUT of "a;b" stores "a", a
     * GET of "a;b" reads it), so two names would be one object. NULL: none. */
    const char *key_refused;
};

/* ---- construction ---- */

enum om_addressing {
    OM_ADDR_AUTO = 0, /* virtual-hosted for AWS endpoints, path-style elsewhere */
    OM_ADDR_PATH,
    OM_ADDR_VHOST,
};

enum om_store_kind {
    OM_STORE_S3 = 0, /* BUCKET */
    OM_STORE_AIS,    /* ais://BUCKET: AIStore's native API */
};

struct om_store_config {
    enum om_store_kind kind;
    const char *endpoint; /* http(s)://host[:port][/path-prefix] */
    const char *bucket;
    const char *region;         /* S3 */
    enum om_addressing addressing; /* S3 */
    bool sign_payload;             /* S3: hash file bodies too */
    const char *redirect_hosts; /* hosts besides the endpoint's that get credentials */
    uint64_t copy_limit;        /* 0: the backend's own */
};

struct om_store;

/* Validate the endpoint and build a store of cfg->kind. creds are copied.
 * Returns NULL with err filled on a bad endpoint, bucket or allocation
 * failure. */
struct om_store *om_store_new(struct om_http *http, const struct om_store_config *cfg,
                              const struct om_creds *creds, char *err, size_t errlen);
void om_store_free(struct om_store *st);

/* What the store can do; a backend may learn more of its server as it
 * answers (S3 finds out that AIStore is behind it): read the flags when
 * needed rather than keeping a copy. */
const struct om_store_caps *om_store_caps(const struct om_store *st);
/* Engine used by this store. */
struct om_http *om_store_http(struct om_store *st);
/* "BUCKET" or "ais://BUCKET", for messages. */
const char *om_store_bucket_name(const struct om_store *st);

/* A region name is [a-z0-9-]+ (S3 signs for it; it becomes part of a
 * host name). */
bool om_region_valid(const char *region);

/* Map a server error code (or, without one, the HTTP status) to -errno:
 * one table for every backend. */
int om_store_errno(long status, const char *code);

/* ---- objects ---- */

int om_store_head(struct om_store *st, const char *key, struct om_object *obj,
                  struct om_store_error *err);

/* Request state of an asynchronous operation; private to the backend,
 * embedded so that cancelling is safe while the operation is alive. */
struct om_store_call {
    void *be; /* the backend */
    struct om_http_req req;
    char payload_hash[2 * OM_SHA256_LEN + 1];
    bool range_checked;
    uint64_t skip;
    uint64_t total; /* object size named by the response, UINT64_MAX if unknown */
    uint64_t range_len;
    void *op;
    char *owned_body; /* a request body the call keeps alive (JSON) */
    /* the backend's readers of an answer (the shared GET uses them) */
    int (*result)(struct om_store_call *c, struct om_store_error *err);
    void (*from_headers)(const struct om_header_list *h, struct om_object *obj);
};

/* A ranged GET into buf. Reads min(len, size - off) bytes; an empty result
 * means off is at or past the end. A response with fewer bytes than that, or
 * a range that does not match the request, is an error (-EIO), never a
 * short result. if_match (may be NULL) names the version the caller
 * expects: it is sent as a condition, and since some servers ignore it, the
 * version token of the response is compared with it too; with size_known,
 * so is the object size the response names. Another version is -ESTALE,
 * logged with the key and both tokens, and no byte of it reaches buf's
 * caller as data. obj (may be NULL) receives size and version. */
struct om_store_get {
    /* in */
    const char *key;
    uint64_t off;
    uint64_t len;
    const char *if_match;
    bool size_known;
    uint64_t size; /* the object size the caller expects, with size_known */
    char *buf;
    void (*done)(struct om_store_get *g); /* async completion, on the engine thread */
    void *ud;
    /* out */
    int error;
    uint64_t got;
    struct om_object obj;
    struct om_store_error err;
    /* private */
    struct om_store_call call;
};

/* Start an asynchronous GET; g->done runs once when it ends. Returns 0 or a
 * negative errno (then done is not called). */
int om_store_get_submit(struct om_store *st, struct om_store_get *g);
/* Abandon a submitted GET; done still runs (with -ECANCELED if it had not
 * finished). */
void om_store_get_cancel(struct om_store *st, struct om_store_get *g);
/* Synchronous form: returns bytes read or a negative errno. */
ssize_t om_store_get_range(struct om_store *st, const char *key, uint64_t off, uint64_t len,
                           const char *if_match, char *buf, struct om_object *obj,
                           struct om_store_error *err);

/* Options of writes. */
struct om_put_opts {
    const char *content_type;
    const struct om_file_meta *meta; /* may be NULL */
    bool if_none_match; /* fail with -EEXIST if the key exists (where supported) */
};

/* Store body as key; md5 is its MD5 (the backend sends it for the server
 * to check the body on receipt, where it can). stored (may be NULL)
 * receives what the answer says of the new object (its version token, a
 * digest where the answer has one). An answer naming a digest other than
 * the body's is -EBADMSG (the server stored other bytes); -EEXIST with
 * opts->if_none_match when the key exists. */
int om_store_put(struct om_store *st, const char *key, const struct om_http_body *body,
                 const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
                 struct om_object *stored, struct om_store_error *err);

/* Remove key. A key that does not exist is -ENOENT (S3 answers success,
 * AIStore 404: both come out as 0 or -ENOENT, callers accept either). */
int om_store_delete(struct om_store *st, const char *key, struct om_store_error *err);

/* Server-side copy of src (whose HEAD is srcobj: its size picks one copy
 * or a copy in parts, its version guards the source) to dst. With opts,
 * the metadata is replaced by opts'; without, copied. etag (may be NULL)
 * receives the copy's version. -ENOSYS when the store does not copy on
 * its side (the caller copies through this host). */
int om_store_copy(struct om_store *st, const char *src, const struct om_object *srcobj,
                  const char *dst, const struct om_put_opts *opts, char *etag,
                  struct om_store_error *err);

/* Move src to dst in place (caps.rename), replacing dst. if_match (may
 * be NULL) guards the source. -ENOSYS where the store cannot. */
int om_store_rename(struct om_store *st, const char *src, const char *dst, const char *if_match,
                    struct om_store_error *err);

/* Give key (of version srcobj) the metadata m, keeping its content. etag
 * (may be NULL) receives the new version. S3 copies the object onto
 * itself (in parts past caps.copy_max); -ENOSYS where the store cannot. */
int om_store_set_meta(struct om_store *st, const char *key, const struct om_object *srcobj,
                      const struct om_file_meta *m, char *etag, struct om_store_error *err);

/* ---- multipart ---- */

struct om_store_part {
    int number;
    char etag[OM_ETAG_MAX];
};

/* *upload_id is malloc'd; caller frees. */
int om_store_mpu_create(struct om_store *st, const char *key, const struct om_put_opts *opts,
                        char **upload_id, struct om_store_error *err);

/* One part of an upload, synchronous or asynchronous like om_store_get. */
struct om_store_part_put {
    /* in */
    const char *key;
    const char *upload_id;
    int number;
    struct om_http_body body;
    unsigned char md5[OM_MD5_LEN];
    void (*done)(struct om_store_part_put *p);
    void *ud;
    /* out */
    int error;
    char etag[OM_ETAG_MAX];
    struct om_store_error err;
    /* private */
    struct om_store_call call;
};
/* Returns 0 or a negative errno (then done is not called). A returned part
 * digest other than md5 is -EBADMSG. */
int om_store_part_submit(struct om_store *st, struct om_store_part_put *p);
int om_store_part_put(struct om_store *st, struct om_store_part_put *p);
/* Abandon a submitted part upload; done still runs. */
void om_store_part_cancel(struct om_store *st, struct om_store_part_put *p);

/* Part number of upload_id is bytes [first, last] of src_key (guarded by
 * if_match), copied on the server (caps.part_copy). -ENOSYS when the
 * store does not (AIStore's S3 API answers 501). */
int om_store_part_copy(struct om_store *st, const char *key, const char *upload_id, int number,
                       const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                       char *etag, struct om_store_error *err);

/* Complete with parts in ascending order. Not retried blindly: a failed
 * attempt is followed by a check of what the server holds. etag (may be
 * NULL) receives the object's version. -ENOENT: the upload is gone
 * without an object (nothing left to abort; AIStore's target may hang an
 * abort of an upload it no longer has). */
int om_store_mpu_complete(struct om_store *st, const char *key, const char *upload_id,
                          const struct om_store_part *parts, int nparts, char *etag,
                          struct om_store_error *err);
int om_store_mpu_abort(struct om_store *st, const char *key, const char *upload_id,
                       struct om_store_error *err);

/* An upload in progress, as listed. Strings are valid only during the
 * callback. */
struct om_upload_entry {
    const char *key;
    const char *upload_id;
    time_t initiated;
};
typedef int (*om_upload_cb)(void *ud, const struct om_upload_entry *e);
/* Every upload in progress under prefix (all pages). -ENOSYS where the
 * store keeps no list. */
int om_store_mpu_list(struct om_store *st, const char *prefix, om_upload_cb cb, void *ud,
                      struct om_store_error *err);

/* ---- listing ---- */

/* One entry of a listing: an object or a common prefix. Strings are valid
 * only during the callback. */
struct om_list_entry {
    const char *key; /* object key or common prefix (ending in the delimiter) */
    bool is_prefix;
    uint64_t size;
    time_t mtime;
    const char *etag; /* version token; "" when absent */
};

/* Return 0 to go on, OM_LIST_STOP to end the listing early without error,
 * or a negative errno to stop it with that error. */
#define OM_LIST_STOP 1
typedef int (*om_list_cb)(void *ud, const struct om_list_entry *e);

struct om_list_params {
    const char *prefix;
    const char *delimiter; /* NULL or "/" */
    const char *start_after;
    const char *continuation;
    int max_keys; /* 0 = server default */
};

/* One page, parsed as it streams where the backend can; cb sees each entry
 * once even when the page is fetched again after a failure. *next_token
 * (may be NULL) receives a malloc'd continuation token, or NULL on the
 * last page. */
int om_store_list_page(struct om_store *st, const struct om_list_params *p, om_list_cb cb,
                       void *ud, char **next_token, struct om_store_error *err);
/* Every page. */
int om_store_list_all(struct om_store *st, const char *prefix, const char *delimiter,
                      om_list_cb cb, void *ud, struct om_store_error *err);
/* Every page, as om_store_list_all; after each page, page(ud) (may be NULL)
 * may stop the listing by returning a negative errno (returned). */
int om_store_list_pages(struct om_store *st, const char *prefix, const char *delimiter,
                        om_list_cb cb, void *ud, int (*page)(void *ud),
                        struct om_store_error *err);

/* What a name is: the object key and the directory "key/" asked at once.
 * A directory (some key under "key/", or a "key/" marker) wins over an
 * object of the same name. Returns 0 with is_file or is_dir set, -ENOENT
 * when neither exists, or another negative errno when a request failed. */
struct om_store_lookup {
    bool is_file;
    bool is_dir;
    bool has_marker;       /* the directory has a "key/" marker object */
    struct om_object obj; /* when is_file */
};
int om_store_lookup(struct om_store *st, const char *key, struct om_store_lookup *out,
                    struct om_store_error *err);

/* Check that the bucket answers a listing with these credentials. skew_s
 * (may be NULL) receives server time minus local time. */
int om_store_check_bucket(struct om_store *st, long *skew_s, struct om_store_error *err);
/* The same check as the first page of the listing of directory dirkey
 * ("" the bucket's root, else ending with '/'; delimiter '/'): its entries
 * go to cb, and *complete says whether that page was the whole listing. */
int om_store_check_listing(struct om_store *st, const char *dirkey, om_list_cb cb, void *ud,
                           bool *complete, long *skew_s, struct om_store_error *err);

/* Learn what the server behind the store is, where a backend needs to:
 * S3 asks whether an AIStore cluster answers (a HEAD of the bucket), which
 * changes its caps (no directory markers, no part sent twice). Errors are
 * ignored. Once, at the mount, after the bucket check. */
void om_store_identify(struct om_store *st);

/* ---- verifying what was stored ---- */

/* The digests a writer has of what it wrote (the have_* flags say which). */
struct om_local_sums {
    bool have_md5, have_parts, have_xxh64, have_sha256, have_sha512, have_crc32c;
    unsigned char md5[OM_MD5_LEN];
    unsigned char parts_md5[OM_MD5_LEN]; /* MD5 of the part MD5s */
    int nparts;
    unsigned char xxh64[OM_XXH64_LEN];
    unsigned char sha256[OM_SHA256_LEN];
    unsigned char sha512[OM_SHA512_LEN];
    unsigned char crc32c[OM_CRC32C_LEN];
};

enum om_proof {
    OM_PROOF_MATCH,    /* the stated digest is the one of what was written */
    OM_PROOF_MISMATCH, /* a firm digest of another content */
    OM_PROOF_MISSING,  /* the writer lacks that digest type: compute it, ask again */
    OM_PROOF_NONE,     /* no digest to compare (none stated, or an inferred one that differs) */
};

/* Compare the digest the store states with what was written. Pure. */
enum om_proof om_sum_check(const struct om_sum *stated, const struct om_local_sums *have);
/* The MD5 of n part MD5s with their count, as S3 names multipart objects. */
void om_sum_of_parts(const unsigned char (*part_md5)[OM_MD5_LEN], int n, struct om_sum *out);
/* The digest an AIStore checksum property names (type "xxhash",
 * "xxhash2", "md5", "sha256", "sha512", "crc32c"; value in hex): firm.
 * false, and out cleared, for another type ("none") or a value that is
 * not hex of the type's length. */
bool om_sum_from_ais(const char *type, const char *value, struct om_sum *out);
/* The digest kind (objmount/digest.h) a stated digest type is computed
 * with; false for OM_SUM_NONE and OM_SUM_MD5_PARTS (made of part MD5s). */
bool om_sum_digest_kind(enum om_sum_type t, enum om_digest_kind *kind);
/* Set the have_* digest of kind in have from its bytes. */
void om_local_sums_set(struct om_local_sums *have, enum om_digest_kind kind,
                       const unsigned char *digest);
/* "MD5", "MD5 of parts", "xxhash64", ... */
const char *om_sum_type_name(enum om_sum_type t);

#endif
