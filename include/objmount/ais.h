/* The AIStore backend of the store (objmount/store.h): AIStore's native
 * API (/v1/objects, /v1/buckets) on one ais:// bucket. Requests need no
 * signing (a bearer token where AIStore's AuthN is on); listings are JSON
 * pages parsed with jansson; objects carry the cluster's checksum
 * (Ais-Checksum-Type and -Value), which reads and writes are verified
 * against. Only src/store/ calls these; the layers above go through
 * om_store_*. */
#ifndef OBJMOUNT_AIS_H
#define OBJMOUNT_AIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objmount/creds.h"
#include "objmount/http.h"
#include "objmount/store.h"

struct om_ais;

/* Validate the endpoint (the cluster's URL) and build a client. creds are
 * copied (a bearer token is sent when there is one). NULL with err filled
 * on a bad endpoint, bucket or allocation failure. */
struct om_ais *om_ais_new(struct om_http *http, const struct om_store_config *cfg,
                          const struct om_creds *creds, char *err, size_t errlen);
void om_ais_free(struct om_ais *ais);
/* What the client can do: no directory markers, no UploadPartCopy, no
 * part uploaded twice, a server-side rename and copy of any size. */
const struct om_store_caps *om_ais_caps(struct om_ais *ais);

/* Objects, with the contracts of the om_store_* functions of the same
 * name. The version token is "VERSION:CHECKSUM" (AIStore's Ais-Version and
 * checksum value). A GET that reads the whole object compares the bytes
 * with the checksum its answer names (-EIO when they differ). */
int om_ais_head(struct om_ais *ais, const char *key, struct om_object *obj,
                struct om_store_error *err);
int om_ais_get_submit(struct om_ais *ais, struct om_store_get *g);
void om_ais_get_cancel(struct om_ais *ais, struct om_store_get *g);
ssize_t om_ais_get_range(struct om_ais *ais, const char *key, uint64_t off, uint64_t len,
                         const char *if_match, char *buf, struct om_object *obj,
                         struct om_store_error *err);
/* PUT with the body's MD5 as AIStore's client checksum: the target stores
 * nothing when the body differs. Metadata as custom metadata. */
int om_ais_put(struct om_ais *ais, const char *key, const struct om_http_body *body,
               const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
               struct om_object *stored, struct om_store_error *err);
/* A missing key is -ENOENT (AIStore answers 404). */
int om_ais_delete(struct om_ais *ais, const char *key, struct om_store_error *err);
/* rename-obj: synchronous, replaces dst; a copy and a delete on AIStore's
 * side, not atomic. if_match is checked by a HEAD first (AIStore takes no
 * condition). */
int om_ais_rename(struct om_ais *ais, const char *src, const char *dst, const char *if_match,
                  struct om_store_error *err);
/* A synchronous copy of any size (?object_to=); opts' metadata set after. */
int om_ais_copy(struct om_ais *ais, const char *src, const struct om_object *srcobj,
                const char *dst, const struct om_put_opts *opts, char *etag,
                struct om_store_error *err);
/* Custom metadata merged in place (PATCH): content and version unchanged. */
int om_ais_set_meta(struct om_ais *ais, const char *key, const struct om_object *srcobj,
                    const struct om_file_meta *m, char *etag, struct om_store_error *err);

/* Multipart: parts 1..N, each number once; the metadata given at create
 * is set after completion (AIStore drops it there). */
int om_ais_mpu_create(struct om_ais *ais, const char *key, const struct om_put_opts *opts,
                      char **upload_id, struct om_store_error *err);
int om_ais_part_submit(struct om_ais *ais, struct om_store_part_put *p);
int om_ais_part_put(struct om_ais *ais, struct om_store_part_put *p);
void om_ais_part_cancel(struct om_ais *ais, struct om_store_part_put *p);
int om_ais_mpu_complete(struct om_ais *ais, const char *key, const char *upload_id,
                        const struct om_store_part *parts, int nparts, char *etag,
                        struct om_store_error *err);
int om_ais_mpu_abort(struct om_ais *ais, const char *key, const char *upload_id,
                     struct om_store_error *err);
/* Uploads in progress, from the S3 API of the same proxy (the native API
 * lists none). */
int om_ais_mpu_list(struct om_ais *ais, const char *prefix, om_upload_cb cb, void *ud,
                    struct om_store_error *err);

/* Listings (ais_list.c): one JSON page of a listing (no recursion with the
 * delimiter "/", entries ending in "/" the directories), a name asked as
 * object and directory at once, the bucket check. */
int om_ais_list_page(struct om_ais *ais, const struct om_list_params *p, om_list_cb cb, void *ud,
                     char **next_token, struct om_store_error *err);
int om_ais_lookup(struct om_ais *ais, const char *key, struct om_store_lookup *out,
                  struct om_store_error *err);
int om_ais_check_list(struct om_ais *ais, const struct om_list_params *p, om_list_cb cb,
                      void *ud, bool *complete, long *skew_s, struct om_store_error *err);

/* Parse one page of AIStore's JSON listing (pure; for tests and the fuzz
 * target): each entry to cb, directories (names ending in "/") as
 * prefixes, entries at or before `after` (may be NULL) skipped (AIStore's
 * pages may repeat a name across a page boundary). *next_token (may be
 * NULL) receives a malloc'd continuation token, or NULL on the last page;
 * *partial (may be NULL) whether AIStore flags the listing as possibly
 * incomplete (a rebalance runs). Returns 0, the callback's error, or
 * -EBADMSG for anything that is not such a page. */
int om_ais_parse_list(const char *body, size_t len, const char *after, om_list_cb cb, void *ud,
                      char **next_token, bool *partial);

#endif
