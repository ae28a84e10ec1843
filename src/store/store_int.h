/* Internals of the store folder: the table of operations each backend
 * fills (curl's vtls shape: one struct of function pointers per backend,
 * capabilities stated beside it), and the store that holds one. store.c
 * dispatches; s3*.c and ais*.c implement; object.c is below them all. */
#ifndef OBJMOUNT_STORE_INT_H
#define OBJMOUNT_STORE_INT_H

#include "objmount/store.h"

/* Every operation takes the backend (be) first; an operation a backend
 * cannot do is NULL (the store answers -ENOSYS). Contracts: those of the
 * om_store_* function of the same name. */
struct om_store_ops {
    void (*free)(void *be);
    /* What the backend can do: a struct it owns, whose flags it may
     * update as it learns the server (S3 learns an AIStore behind it). */
    const struct om_store_caps *(*caps)(void *be);
    int (*head)(void *be, const char *key, struct om_object *obj, struct om_store_error *err);
    int (*get_submit)(void *be, struct om_store_get *g);
    void (*get_cancel)(void *be, struct om_store_get *g);
    ssize_t (*get_range)(void *be, const char *key, uint64_t off, uint64_t len,
                         const char *if_match, char *buf, struct om_object *obj,
                         struct om_store_error *err);
    int (*put)(void *be, const char *key, const struct om_http_body *body,
               const unsigned char md5[OM_MD5_LEN], const struct om_put_opts *opts,
               struct om_object *stored, struct om_store_error *err);
    int (*del)(void *be, const char *key, struct om_store_error *err);
    int (*copy)(void *be, const char *src, const struct om_object *srcobj, const char *dst,
                const struct om_put_opts *opts, char *etag, struct om_store_error *err);
    int (*rename)(void *be, const char *src, const char *dst, const char *if_match,
                  struct om_store_error *err);
    int (*set_meta)(void *be, const char *key, const struct om_object *srcobj,
                    const struct om_file_meta *m, char *etag, struct om_store_error *err);
    int (*mpu_create)(void *be, const char *key, const struct om_put_opts *opts,
                      char **upload_id, struct om_store_error *err);
    int (*part_submit)(void *be, struct om_store_part_put *p);
    int (*part_put)(void *be, struct om_store_part_put *p);
    void (*part_cancel)(void *be, struct om_store_part_put *p);
    int (*part_copy)(void *be, const char *key, const char *upload_id, int number,
                     const char *src_key, uint64_t first, uint64_t last, const char *if_match,
                     char *etag, struct om_store_error *err);
    int (*mpu_complete)(void *be, const char *key, const char *upload_id,
                        const struct om_store_part *parts, int nparts, char *etag,
                        struct om_store_error *err);
    int (*mpu_abort)(void *be, const char *key, const char *upload_id,
                     struct om_store_error *err);
    int (*mpu_list)(void *be, const char *prefix, om_upload_cb cb, void *ud,
                    struct om_store_error *err);
    int (*list_page)(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                     char **next_token, struct om_store_error *err);
    int (*lookup)(void *be, const char *key, struct om_store_lookup *out,
                  struct om_store_error *err);
    /* One listing page as a check of the bucket (cb may be NULL: counted
     * only); *complete (may be NULL): the page was the whole listing. */
    int (*check_list)(void *be, const struct om_list_params *p, om_list_cb cb, void *ud,
                      bool *complete, long *skew_s, struct om_store_error *err);
    /* Learn what the server is where the backend needs to (may be NULL). */
    void (*identify)(void *be);
};

struct om_store {
    const struct om_store_ops *ops;
    void *be;
    struct om_http *http;
    char *name; /* "BUCKET" or "ais://BUCKET" */
};

/* The GET every backend shares (get.c). sg_attach: after the backend made
 * g->call for the GET of g->key (its URL and conditions), add the Range
 * and the sink, with the backend's result and header readers. sg_finish:
 * once performed, g->error, g->got and g->obj as om_store_get promises
 * (the caller then cleans the call up). */
int sg_attach(struct om_store_get *g,
              int (*result)(struct om_store_call *c, struct om_store_error *err),
              void (*from_headers)(const struct om_header_list *h, struct om_object *obj));
void sg_finish(struct om_store_get *g);

extern const struct om_store_ops om_s3_ops;
extern const struct om_store_ops om_ais_ops;

#endif
