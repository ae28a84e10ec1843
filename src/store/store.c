/* The store: one interface, a backend behind it chosen at construction
 * (S3, or AIStore's native API for ais://BUCKET). Every om_store_* call
 * goes to the backend's table of operations; what no backend needs to do
 * differently (paging through a listing, the bucket check) is done here
 * once. */
#include "objmount/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/ais.h"
#include "objmount/s3.h"
#include "store_int.h"

struct om_store *om_store_new(struct om_http *http, const struct om_store_config *cfg,
                              const struct om_creds *creds, char *err, size_t errlen)
{
    struct om_store *st = calloc(1, sizeof(*st));
    if (!st) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    st->http = http;
    if (cfg->kind == OM_STORE_AIS) {
        st->be = om_ais_new(http, cfg, creds, err, errlen);
        st->ops = &om_ais_ops;
    } else {
        st->be = om_s3_new(http, cfg, creds, err, errlen);
        st->ops = &om_s3_ops;
    }
    if (!st->be) {
        free(st);
        return NULL;
    }
    if (asprintf(&st->name, "%s%s", cfg->kind == OM_STORE_AIS ? "ais://" : "",
                 cfg->bucket ? cfg->bucket : "") < 0) {
        st->name = NULL;
        om_store_free(st);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return st;
}

void om_store_free(struct om_store *st)
{
    if (!st)
        return;
    st->ops->free(st->be);
    free(st->name);
    free(st);
}

const struct om_store_caps *om_store_caps(const struct om_store *st)
{
    return st->ops->caps(st->be);
}

struct om_http *om_store_http(struct om_store *st)
{
    return st->http;
}

const char *om_store_bucket_name(const struct om_store *st)
{
    return st->name;
}

/* An operation the backend does not have. */
static int unsupported(struct om_store_error *err, const char *what)
{
    if (err) {
        memset(err, 0, sizeof(*err));
        snprintf(err->message, sizeof(err->message), "%s is not supported by this store", what);
    }
    return -ENOSYS;
}

/* ---- objects ---- */

int om_store_head(struct om_store *st, const char *key, struct om_object *obj,
                  struct om_store_error *err)
{
    return st->ops->head(st->be, key, obj, err);
}

int om_store_get_submit(struct om_store *st, struct om_store_get *g)
{
    return st->ops->get_submit(st->be, g);
}

void om_store_get_cancel(struct om_store *st, struct om_store_get *g)
{
    st->ops->get_cancel(st->be, g);
}

ssize_t om_store_get_range(struct om_store *st, const char *key, uint64_t off, uint64_t len,
                           const char *if_match, char *buf, struct om_object *obj,
                           struct om_store_error *err)
{
    return st->ops->get_range(st->be, key, off, len, if_match, buf, obj, err);
}

int om_store_put(struct om_store *st, const char *key, const struct om_http_body *body,
                 const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
                 struct om_object *stored, struct om_store_error *err)
{
    return st->ops->put(st->be, key, body, md5, opts, stored, err);
}

int om_store_delete(struct om_store *st, const char *key, struct om_store_error *err)
{
    return st->ops->del(st->be, key, err);
}

int om_store_copy(struct om_store *st, const char *src, const struct om_object *srcobj,
                  const char *dst, const struct om_put_opts *opts, char *etag,
                  struct om_store_error *err)
{
    if (!st->ops->copy || !om_store_caps(st)->copy_max)
        return unsupported(err, "a server-side copy");
    return st->ops->copy(st->be, src, srcobj, dst, opts, etag, err);
}

int om_store_rename(struct om_store *st, const char *src, const char *dst, const char *if_match,
                    struct om_store_error *err)
{
    if (!st->ops->rename || !om_store_caps(st)->rename)
        return unsupported(err, "renaming an object in place");
    return st->ops->rename(st->be, src, dst, if_match, err);
}

int om_store_set_meta(struct om_store *st, const char *key, const struct om_object *srcobj,
                      const struct om_file_meta *m, char *etag, struct om_store_error *err)
{
    if (!st->ops->set_meta)
        return unsupported(err, "changing an object's metadata");
    return st->ops->set_meta(st->be, key, srcobj, m, etag, err);
}

/* ---- multipart ---- */

int om_store_mpu_create(struct om_store *st, const char *key, const struct om_put_opts *opts,
                        char **upload_id, struct om_store_error *err)
{
    *upload_id = NULL;
    return st->ops->mpu_create(st->be, key, opts, upload_id, err);
}

int om_store_part_submit(struct om_store *st, struct om_store_part_put *p)
{
    return st->ops->part_submit(st->be, p);
}

int om_store_part_put(struct om_store *st, struct om_store_part_put *p)
{
    return st->ops->part_put(st->be, p);
}

void om_store_part_cancel(struct om_store *st, struct om_store_part_put *p)
{
    st->ops->part_cancel(st->be, p);
}

int om_store_part_copy(struct om_store *st, const char *key, const char *upload_id, int number,
                       const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                       char *etag, struct om_store_error *err)
{
    if (!st->ops->part_copy || !om_store_caps(st)->part_copy)
        return unsupported(err, "copying a range into a part");
    return st->ops->part_copy(st->be, key, upload_id, number, src_key, first, last, if_match,
                              etag, err);
}

int om_store_mpu_complete(struct om_store *st, const char *key, const char *upload_id,
                          const struct om_store_part *parts, int nparts, char *etag,
                          struct om_store_error *err)
{
    return st->ops->mpu_complete(st->be, key, upload_id, parts, nparts, etag, err);
}

int om_store_mpu_abort(struct om_store *st, const char *key, const char *upload_id,
                       struct om_store_error *err)
{
    return st->ops->mpu_abort(st->be, key, upload_id, err);
}

int om_store_mpu_list(struct om_store *st, const char *prefix, om_upload_cb cb, void *ud,
                      struct om_store_error *err)
{
    if (!st->ops->mpu_list)
        return unsupported(err, "listing uploads in progress");
    return st->ops->mpu_list(st->be, prefix, cb, ud, err);
}

/* ---- listing ---- */

int om_store_list_page(struct om_store *st, const struct om_list_params *p, om_list_cb cb,
                       void *ud, char **next_token, struct om_store_error *err)
{
    if (next_token)
        *next_token = NULL;
    return st->ops->list_page(st->be, p, cb, ud, next_token, err);
}

int om_store_list_pages(struct om_store *st, const char *prefix, const char *delimiter,
                        om_list_cb cb, void *ud, int (*page)(void *ud),
                        struct om_store_error *err)
{
    char *token = NULL;
    int rc;
    do {
        struct om_list_params p = {.prefix = prefix, .delimiter = delimiter, .continuation = token};
        char *next = NULL;
        rc = om_store_list_page(st, &p, cb, ud, &next, err);
        free(token);
        token = next;
        if (!rc && page)
            rc = page(ud);
    } while (!rc && token);
    free(token);
    return rc;
}

int om_store_list_all(struct om_store *st, const char *prefix, const char *delimiter,
                      om_list_cb cb, void *ud, struct om_store_error *err)
{
    return om_store_list_pages(st, prefix, delimiter, cb, ud, NULL, err);
}

int om_store_lookup(struct om_store *st, const char *key, struct om_store_lookup *out,
                    struct om_store_error *err)
{
    return st->ops->lookup(st->be, key, out, err);
}

int om_store_check_bucket(struct om_store *st, long *skew_s, struct om_store_error *err)
{
    struct om_list_params p = {.max_keys = 1};
    return st->ops->check_list(st->be, &p, NULL, NULL, NULL, skew_s, err);
}

int om_store_check_listing(struct om_store *st, const char *dirkey, om_list_cb cb, void *ud,
                           bool *complete, long *skew_s, struct om_store_error *err)
{
    struct om_list_params p = {.prefix = dirkey, .delimiter = "/"};
    return st->ops->check_list(st->be, &p, cb, ud, complete, skew_s, err);
}

void om_store_identify(struct om_store *st)
{
    if (st->ops->identify)
        st->ops->identify(st->be);
}
