/* A directory's listing from the store: LIST pages (from the manifest when
 * the mount has one, else from S3) added to a listing, and the complete
 * listing installed on its directory, under the budget. Directory handles
 * (meta_readdir.c) and background listings (meta_slurp.c) use it; it sits
 * above the container (listing.c) and the budget (meta_budget.c). Also the
 * root's listing the bucket check took before the namespace existed. */
#include "objmount/meta.h"

#include <errno.h>
#include <pthread.h>
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
                 char **next, struct om_store_error *err)
{
    struct page_ctx ctx = {.m = m, .l = l, .plen = strlen(dirkey)};
    struct om_list_params params = {.prefix = dirkey, .delimiter = "/", .continuation = token};
    if (m->cfg.list_page)
        return m->cfg.list_page(m->cfg.list_ud, &params, page_entry, &ctx, next, err);
    return om_store_list_page(m->store, &params, page_entry, &ctx, next, err);
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
    if (dir->d->listing) {
        mi_listing_take_times(l, dir->d->listing);
        mi_lru_remove(m, dir->d->listing);
    }
    mi_listing_put(dir->d->listing);
    dir->d->listing = l;
    l->dir = dir;
    mi_lru_touch(m, l);
    m->st.list_entries += l->n;
    mi_budget_check(m);
}

/* ---- the root's listing from the bucket check ---- */

struct om_list_seed {
    struct om_list_entry *v;
    size_t n, cap;
    bool lost; /* an entry could not be kept: the seed is not installed */
};

struct om_list_seed *om_list_seed_new(void)
{
    return calloc(1, sizeof(struct om_list_seed));
}

/* Never fails the check: an entry that cannot be kept loses the seed. */
int om_list_seed_add(void *seed, const struct om_list_entry *e)
{
    struct om_list_seed *s = seed;
    if (s->lost)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        struct om_list_entry *v = realloc(s->v, cap * sizeof(*v));
        if (!v) {
            s->lost = true;
            return 0;
        }
        s->v = v;
        s->cap = cap;
    }
    struct om_list_entry c = *e;
    c.key = strdup(e->key);
    c.etag = strdup(e->etag ? e->etag : "");
    if (!c.key || !c.etag) {
        free((char *)c.key);
        free((char *)c.etag);
        s->lost = true;
        return 0;
    }
    s->v[s->n++] = c;
    return 0;
}

void om_list_seed_free(struct om_list_seed *s)
{
    if (!s)
        return;
    for (size_t k = 0; k < s->n; k++) {
        free((char *)s->v[k].key);
        free((char *)s->v[k].etag);
    }
    free(s->v);
    free(s);
}

int om_meta_seed_root(struct om_meta *m, const struct om_list_seed *s, uint64_t taken_ms)
{
    if (s->lost)
        return -ENOMEM;
    struct listing *l = mi_listing_new(m);
    if (!l)
        return -ENOMEM;
    struct page_ctx ctx = {.m = m, .l = l, .plen = strlen(m->prefix)};
    for (size_t k = 0; k < s->n; k++) {
        int rc = page_entry(&ctx, &s->v[k]);
        if (rc) {
            mi_listing_put(l);
            return rc;
        }
    }
    pthread_mutex_lock(&m->lock);
    if (mi_listing_fresh(m->root->d->listing)) {
        mi_listing_put(l); /* listed meanwhile */
    } else {
        mi_install_listing(m, m->root, l);
        l->expire_ms = taken_ms + m->cfg.entry_ttl_ms;
        om_debug("the root's listing from the bucket check: %zu names", l->n);
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}
