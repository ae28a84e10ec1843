/* The S3 backend's table of operations: each entry takes the store's
 * void *be and calls the S3 client with it. */
#include "objmount/s3.h"

#include "store_int.h"

static void s3_free(void *be)
{
    om_s3_free(be);
}

static const struct om_store_caps *s3_caps(void *be)
{
    return om_s3_caps(be);
}

static int s3_head(void *be, const char *key, struct om_object *obj, struct om_store_error *err)
{
    return om_s3_head(be, key, obj, err);
}

static int s3_get_submit(void *be, struct om_store_get *g)
{
    return om_s3_get_submit(be, g);
}

static void s3_get_cancel(void *be, struct om_store_get *g)
{
    om_s3_get_cancel(be, g);
}

static ssize_t s3_get_range(void *be, const char *key, uint64_t off, uint64_t len,
                            const char *if_match, char *buf, struct om_object *obj,
                            struct om_store_error *err)
{
    return om_s3_get_range(be, key, off, len, if_match, buf, obj, err);
}

static int s3_put(void *be, const char *key, const struct om_http_body *body,
                  const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
                  struct om_object *stored, struct om_store_error *err)
{
    return om_s3_put(be, key, body, md5, opts, stored, err);
}

static int s3_del(void *be, const char *key, struct om_store_error *err)
{
    return om_s3_delete(be, key, err);
}

static int s3_copy(void *be, const char *src, const struct om_object *srcobj, const char *dst,
                   const struct om_put_opts *opts, char *etag, struct om_store_error *err)
{
    return om_s3_copy(be, src, srcobj, dst, opts, etag, err);
}

static int s3_set_meta(void *be, const char *key, const struct om_object *srcobj,
                       const struct om_file_meta *m, char *etag, struct om_store_error *err)
{
    return om_s3_set_meta(be, key, srcobj, m, etag, err);
}

static int s3_mpu_create(void *be, const char *key, const struct om_put_opts *opts,
                         char **upload_id, struct om_store_error *err)
{
    return om_s3_mpu_create(be, key, opts, upload_id, err);
}

static int s3_part_submit(void *be, struct om_store_part_put *p)
{
    return om_s3_part_submit(be, p);
}

static int s3_part_put(void *be, struct om_store_part_put *p)
{
    return om_s3_mpu_part(be, p);
}

static void s3_part_cancel(void *be, struct om_store_part_put *p)
{
    om_s3_part_cancel(be, p);
}

static int s3_part_copy(void *be, const char *key, const char *upload_id, int number,
                        const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                        char *etag, struct om_store_error *err)
{
    return om_s3_part_copy(be, key, upload_id, number, src_key, first, last, if_match, etag,
                           err);
}

static int s3_mpu_complete(void *be, const char *key, const char *upload_id,
                           const struct om_store_part *parts, int nparts, char *etag,
                           struct om_store_error *err)
{
    return om_s3_mpu_complete(be, key, upload_id, parts, nparts, etag, err);
}

static int s3_mpu_abort(void *be, const char *key, const char *upload_id,
                        struct om_store_error *err)
{
    return om_s3_mpu_abort(be, key, upload_id, err);
}

static int s3_mpu_list(void *be, const char *prefix, om_upload_cb cb, void *ud,
                       struct om_store_error *err)
{
    return om_s3_mpu_list(be, prefix, cb, ud, err);
}

static int s3_list_page(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                        char **next_token, struct om_store_error *err)
{
    return om_s3_list_page(be, p, cb, ud, next_token, err);
}

static int s3_lookup(void *be, const char *key, struct om_store_lookup *out,
                     struct om_store_error *err)
{
    return om_s3_lookup(be, key, out, err);
}

static int s3_check_list(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                         bool *complete, long *skew_s, struct om_store_error *err)
{
    return om_s3_check_list(be, p, cb, ud, complete, skew_s, err);
}

static void s3_identify(void *be)
{
    om_s3_identify(be);
}

const struct om_store_ops om_s3_ops = {
    .free = s3_free,
    .caps = s3_caps,
    .head = s3_head,
    .get_submit = s3_get_submit,
    .get_cancel = s3_get_cancel,
    .get_range = s3_get_range,
    .put = s3_put,
    .del = s3_del,
    .copy = s3_copy,
    .rename = NULL, /* S3 has no rename: copy and delete */
    .set_meta = s3_set_meta,
    .mpu_create = s3_mpu_create,
    .part_submit = s3_part_submit,
    .part_put = s3_part_put,
    .part_cancel = s3_part_cancel,
    .part_copy = s3_part_copy,
    .mpu_complete = s3_mpu_complete,
    .mpu_abort = s3_mpu_abort,
    .mpu_list = s3_mpu_list,
    .list_page = s3_list_page,
    .lookup = s3_lookup,
    .check_list = s3_check_list,
    .identify = s3_identify,
};
