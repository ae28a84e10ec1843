/* Directory handles: readdir streamed page by page into a listing that
 * belongs to the handle alone until it is complete and installed on its
 * directory, or served from the directory's installed listing. */
#include "objmount/meta.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

int om_meta_opendir(struct om_meta *m, uint64_t ino, struct om_dirh **out)
{
    struct om_dirh *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = 0;
    if (!i)
        rc = -ESTALE;
    else if (!i->is_dir)
        rc = -ENOTDIR;
    if (!rc) {
        i->refs++;
        i->d->opens++;
        d->dir = i;
        if (i->parent)
            mi_walk_ahead(m, i->parent, i);
        /* a background listing of a small directory ends soon: wait for it
         * rather than list it twice */
        while (i->d->slurping && i->d->slurp_pages < WALK_WAIT_PAGES &&
               !mi_listing_fresh(i->d->listing))
            pthread_cond_wait(&m->slurp_cond, &m->lock);
        if (mi_listing_fresh(i->d->listing)) {
            d->l = i->d->listing;
            d->l->refs++;
            mi_lru_touch(m, d->l);
            d->l->read_by_handle = true;
            if (d->l->from_walk) {
                d->l->from_walk = false;
                m->st.walk_listings_used++;
            }
        } else {
            d->l = mi_listing_new(m);
            d->building = true;
            d->gen = i->d->gen;
            if (!d->l) {
                i->d->opens--;
                mi_inode_unref(m, i);
                rc = -ENOMEM;
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* Fetch the next page into a listing this handle is building. Called
 * without m->lock. */
static int fetch_page(struct om_meta *m, struct om_dirh *d, const char *dirkey)
{
    struct listing *l = d->l;
    char *next = NULL;
    struct om_store_error err;
    int rc = mi_list_page(m, l, dirkey, l->token, &next, &err);
    if (rc) {
        om_warn("listing %s: %s (HTTP %ld %s)", *dirkey ? dirkey : "/", strerror(-rc), err.status,
                err.code);
        return rc;
    }
    free(l->token);
    l->token = next;
    l->started = true;
    if (!next)
        l->complete = true;
    pthread_mutex_lock(&m->lock);
    m->st.list_pages++;
    mi_budget_check(m);
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* Install a completed listing on its directory. Caller holds m->lock. */
static void install(struct om_meta *m, struct om_dirh *d)
{
    d->building = false;
    d->l->read_by_handle = true;
    if (d->dir->d->gen != d->gen)
        return; /* names changed meanwhile: the handle keeps it to itself */
    d->l->refs++;
    mi_install_listing(m, d->dir, d->l);
}

int om_meta_readdir(struct om_meta *m, struct om_dirh *d, off_t off, bool plus,
                    om_meta_fill_fn fill, void *ud)
{
    /* offsets: 0 start, 1 after ".", 2 after "..", 2+k after entry k-1 */
    struct om_attr a;
    pthread_mutex_lock(&m->lock);
    if (off < 1) {
        mi_fill_attr(m, d->dir, &a);
        if (fill(ud, ".", &a, 1)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 1;
    }
    if (off < 2) {
        mi_fill_attr(m, d->dir->parent ? d->dir->parent : d->dir, &a);
        if (fill(ud, "..", &a, 2)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 2;
    }
    char *dirkey = strdup(d->dir->d->key);
    pthread_mutex_unlock(&m->lock);
    if (!dirkey)
        return -ENOMEM;

    int rc = 0;
    for (;;) {
        size_t k = (size_t)(off - 2);
        struct listing *l = d->l;
        if (k >= l->n) {
            if (l->complete || !d->building)
                break;
            rc = fetch_page(m, d, dirkey);
            if (rc)
                break;
            if (l->complete) {
                pthread_mutex_lock(&m->lock);
                install(m, d);
                pthread_mutex_unlock(&m->lock);
            }
            continue;
        }
        pthread_mutex_lock(&m->lock);
        bool full = false;
        for (; k < l->n && !full; k++) {
            struct dentry *e = l->v[k];
            if (e->gone) {
                off = (off_t)(k + 3);
                continue;
            }
            struct inode *known = plus ? mi_child_get(d->dir, e->name) : NULL;
            /* a name this mount knew with metadata of its own (a symlink, a
             * mode), its inode since freed */
            bool own_meta = plus && !known &&
                            m->cfg.metadata != OM_META_LISTING &&
                            mi_links_has(m, d->dir->d->key, e->name);
            if (plus && (own_meta || mi_meta_by_lookup(m, e->is_dir)) &&
                !(known && known->meta_known && known->is_dir == e->is_dir)) {
                /* no attributes: the kernel looks the name up, which reads its
                 * metadata (metadata=head) */
                memset(&a, 0, sizeof(a));
                /* a listed file may be a symlink: DT_UNKNOWN makes find
                 * -type and the like ask (lstat), not trust DT_REG */
                a.mode = e->is_dir ? S_IFDIR : 0;
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
            } else if (plus && !e->is_dir && !known && mi_under_pressure(m)) {
                /* past the budget's low watermark: no inode the kernel would
                 * hold. Node id 0 makes the kernel keep neither an inode nor
                 * a lookup count (fuse_direntplus_link); d_type still says
                 * DT_REG, and a stat looks the name up, answered from this
                 * listing (told_plain) */
                memset(&a, 0, sizeof(a));
                a.mode = S_IFREG;
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
                if (!full) {
                    e->told_plain = true;
                    m->st.entries_without_inode++;
                }
            } else if (plus) {
                struct inode *c = mi_child_for(m, d->dir, e->name, e->is_dir);
                if (!c) {
                    rc = -ENOMEM;
                    break;
                }
                /* the listing wins only over attributes that expired */
                if (!e->is_dir && !c->pending && om_now_ms() >= c->attr_expire_ms)
                    mi_set_listed_attrs(m, c, e);
                else if (e->is_dir)
                    c->attr_expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
                mi_fill_attr(m, c, &a);
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
                if (!full) {
                    c->nlookup++;
                    c->recent = true;
                } else if (c->nlookup == 0 && c->refs == 0) {
                    mi_inode_unheld(m, c);
                }
            } else {
                memset(&a, 0, sizeof(a));
                a.ino = 0xffffffff; /* FUSE_UNKNOWN_INO: readdirplus gives real ones */
                a.mode = e->is_dir ? S_IFDIR : S_IFREG;
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
            }
            if (!full)
                off = (off_t)(k + 3);
        }
        pthread_mutex_unlock(&m->lock);
        if (full || rc)
            break;
    }
    free(dirkey);
    return rc;
}

void om_meta_releasedir(struct om_meta *m, struct om_dirh *d)
{
    pthread_mutex_lock(&m->lock);
    mi_listing_put(d->l);
    d->dir->d->opens--;
    mi_inode_unref(m, d->dir);
    pthread_mutex_unlock(&m->lock);
    free(d);
}
