/* A directory's listing from the store: LIST pages (from the manifest when
 * the mount has one, else from S3) added to a listing, and the complete
 * listing installed on its directory, under the budget. Directory handles
 * (meta_readdir.c) and background listings (meta_slurp.c) use it; it sits
 * above the container (listing.c) and the budget (meta_budget.c). */
#include "objmount/meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

struct page_ctx {
    struct om_meta *m;
    struct listing *l;
    size_t plen; /* length of the directory's key prefix */
};

static int page_entry(void *ud, const struct om_list_entry *e)
{
    struct page_ctx *p = ud;
    size_t klen = strlen(e->key);
    if (klen <= p->plen)
        return 0; /* the directory's own marker object */
    char name[NAME_MAX_BYTES + 2];
    size_t nlen = klen - p->plen;
    bool is_dir = e->is_prefix;
    if (is_dir && nlen > 0 && e->key[klen - 1] == '/')
        nlen--;
    if (nlen == 0 || nlen > NAME_MAX_BYTES) {
        __atomic_fetch_add(&p->m->st.skipped_names, 1, __ATOMIC_RELAXED);
        om_info("skipping key '%s': its name cannot be a file name", e->key);
        return 0;
    }
    memcpy(name, e->key + p->plen, nlen);
    name[nlen] = '\0';
    if (!mi_valid_name(name)) {
        __atomic_fetch_add(&p->m->st.skipped_names, 1, __ATOMIC_RELAXED);
        om_info("skipping key '%s': its name cannot be a file name", e->key);
        return 0;
    }
    return mi_listing_add(p->l, name, is_dir, e->size, e->mtime, e->etag);
}

/* One LIST page of the directory whose key is dirkey, from the configured
 * source (a manifest) or else from S3, added to l; *next receives the
 * continuation token (malloc'd) or NULL after the last page. Called without
 * m->lock: l belongs to the caller until it is installed. */
int mi_list_page(struct om_meta *m, struct listing *l, const char *dirkey, const char *token,
                 char **next, struct om_s3_error *err)
{
    struct page_ctx ctx = {.m = m, .l = l, .plen = strlen(dirkey)};
    struct om_s3_list_params params = {.prefix = dirkey, .delimiter = "/", .continuation = token};
    if (m->cfg.list_page)
        return m->cfg.list_page(m->cfg.list_ud, &params, page_entry, &ctx, next, err);
    return om_s3_list_page(m->s3, &params, page_entry, &ctx, next, err);
}

/* Install a complete listing on its directory. Caller holds m->lock. */
void mi_install_listing(struct om_meta *m, struct inode *dir, struct listing *l)
{
    l->complete = true;
    l->expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
    if (l->cap > l->n && l->n > 0) {
        /* complete: names are seldom added now */
        size_t was = mi_mem_size(l->v);
        struct dentry **v = realloc(l->v, l->n * sizeof(*v));
        if (v) {
            mi_mem_sub(l->mem, was);
            mi_mem_charge(l->mem, v);
            l->v = v;
            l->cap = l->n;
        }
    }
    if (dir->d->listing)
        mi_lru_remove(m, dir->d->listing);
    mi_listing_put(dir->d->listing);
    dir->d->listing = l;
    l->dir = dir;
    mi_lru_touch(m, l);
    m->st.list_entries += l->n;
    mi_budget_check(m);
}
