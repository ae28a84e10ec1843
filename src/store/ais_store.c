/* The AIStore backend's table of operations: each entry takes the store's
 * void *be and calls the native client with it. */
#include "objmount/ais.h"

#include "store_int.h"

static void op_free(void *be)
{
    om_ais_free(be);
}

static const struct om_store_caps *op_caps(void *be)
{
    return om_ais_caps(be);
}

static int op_head(void *be, const char *key, struct om_object *obj, struct om_store_error *err)
{
    return om_ais_head(be, key, obj, err);
}

static int op_get_submit(void *be, struct om_store_get *g)
{
    return om_ais_get_submit(be, g);
}

static void op_get_cancel(void *be, struct om_store_get *g)
{
    om_ais_get_cancel(be, g);
}

static ssize_t op_get_range(void *be, const char *key, uint64_t off, uint64_t len,
                            const char *if_match, char *buf, struct om_object *obj,
                            struct om_store_error *err)
{
    return om_ais_get_range(be, key, off, len, if_match, buf, obj, err);
}

static int op_put(void *be, const char *key, const struct om_http_body *body,
                  const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
                  struct om_object *stored, struct om_store_error *err)
{
    return om_ais_put(be, key, body, md5, opts, stored, err);
}

static int op_del(void *be, const char *key, struct om_store_error *err)
{
    return om_ais_delete(be, key, err);
}

static int op_copy(void *be, const char *src, const struct om_object *srcobj, const char *dst,
                   const struct om_put_opts *opts, char *etag, struct om_store_error *err)
{
    return om_ais_copy(be, src, srcobj, dst, opts, etag, err);
}

static int op_rename(void *be, const char *src, const char *dst, const char *if_match,
                     struct om_store_error *err)
{
    return om_ais_rename(be, src, dst, if_match, err);
}

static int op_set_meta(void *be, const char *key, const struct om_object *srcobj,
                       const struct om_file_meta *m, char *etag, struct om_store_error *err)
{
    return om_ais_set_meta(be, key, srcobj, m, etag, err);
}

static int op_mpu_create(void *be, const char *key, const struct om_put_opts *opts,
                         char **upload_id, struct om_store_error *err)
{
    return om_ais_mpu_create(be, key, opts, upload_id, err);
}

static int op_part_submit(void *be, struct om_store_part_put *p)
{
    return om_ais_part_submit(be, p);
}

static int op_part_put(void *be, struct om_store_part_put *p)
{
    return om_ais_part_put(be, p);
}

static void op_part_cancel(void *be, struct om_store_part_put *p)
{
    om_ais_part_cancel(be, p);
}

static int op_mpu_complete(void *be, const char *key, const char *upload_id,
                           const struct om_store_part *parts, int nparts, char *etag,
                           struct om_store_error *err)
{
    return om_ais_mpu_complete(be, key, upload_id, parts, nparts, etag, err);
}

static int op_mpu_abort(void *be, const char *key, const char *upload_id,
                        struct om_store_error *err)
{
    return om_ais_mpu_abort(be, key, upload_id, err);
}

static int op_mpu_list(void *be, const char *prefix, om_upload_cb cb, void *ud,
                       struct om_store_error *err)
{
    return om_ais_mpu_list(be, prefix, cb, ud, err);
}

static int op_list_page(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                        char **next_token, struct om_store_error *err)
{
    return om_ais_list_page(be, p, cb, ud, next_token, err);
}

static int op_lookup(void *be, const char *key, struct om_store_lookup *out,
                     struct om_store_error *err)
{
    return om_ais_lookup(be, key, out, err);
}

static int op_check_list(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                         bool *complete, long *skew_s, struct om_store_error *err)
{
    return om_ais_check_list(be, p, cb, ud, complete, skew_s, err);
}

const struct om_store_ops om_ais_ops = {
    .free = op_free,
    .caps = op_caps,
    .head = op_head,
    .get_submit = op_get_submit,
    .get_cancel = op_get_cancel,
    .get_range = op_get_range,
    .put = op_put,
    .del = op_del,
    .copy = op_copy,
    .rename = op_rename,
    .set_meta = op_set_meta,
    .mpu_create = op_mpu_create,
    .part_submit = op_part_submit,
    .part_put = op_part_put,
    .part_cancel = op_part_cancel,
    .part_copy = NULL, /* no UploadPartCopy in the native API */
    .mpu_complete = op_mpu_complete,
    .mpu_abort = op_mpu_abort,
    .mpu_list = op_mpu_list,
    .list_page = op_list_page,
    .lookup = op_lookup,
    .check_list = op_check_list,
};
