/* The namespace: inodes, names <-> keys, lookups and attributes.
 *
 * Locking: m->lock guards every inode, every child table and every installed
 * listing. It is released around network requests; after a request the state
 * is looked up again, since another thread may have changed it meanwhile. */
#include "objmount/meta.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

/* ---- construction ---- */

struct om_meta *om_meta_new(struct om_store *store, const struct om_meta_config *cfg)
{
    struct om_meta *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->store = store;
    m->cfg = *cfg;
    m->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    m->cfg.prefix = m->prefix;
    struct inode *root = m->prefix ? mi_inode_alloc(m, "", true, m->prefix) : NULL;
    if (root)
        root->ino = OM_ROOT_INO;
    if (!root || mi_table_init(&m->inodes, 1024, &m->mem) ||
        mi_table_add(&m->inodes, root, false)) {
        if (root)
            mi_inode_release(m, root);
        free(m->prefix);
        mi_table_destroy(&m->inodes);
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->slurp_cond, NULL);
    m->unheld = mi_inode_unheld;
    clock_gettime(CLOCK_REALTIME, &m->mount_time);
    root->nlookup = 1;
    m->root = root;
    m->next_ino = OM_ROOT_INO + 1;
    m->st.inodes = 1;
    m->st.budget = cfg->memory_budget;
    om_cond_init_monotonic(&m->reclaim_cond); /* the reclaim waits on the monotonic clock */
    if (cfg->memory_budget && mi_reclaim_start(m))
        om_warn("no reclaim thread: the metadata budget is not held");
    return m;
}

void om_meta_free(struct om_meta *m)
{
    if (!m)
        return;
    mi_reclaim_stop(m);
    pthread_mutex_lock(&m->lock);
    m->stopping = true; /* no new walk listings */
    while (m->slurps > 0)
        pthread_cond_wait(&m->slurp_cond, &m->lock);
    while (m->nwalk > 0)
        m->walk[--m->nwalk]->refs--;
    pthread_mutex_unlock(&m->lock);
    free(m->walk);
    pthread_cond_destroy(&m->slurp_cond);
    pthread_cond_destroy(&m->reclaim_cond);
    /* free every inode: children before parents is not needed here */
    for (size_t k = 0; k < m->inodes.cap; k++) {
        if (m->inodes.slots[k])
            mi_inode_release(m, m->inodes.slots[k]);
    }
    mi_table_destroy(&m->inodes);
    free(m->links);
    free(m->numbers);
    pthread_mutex_destroy(&m->lock);
    free(m->prefix);
    free(m);
}

/* ---- lookup ---- */

/* What the cache knows of a name being looked up. */
enum cached_answer {
    /* Nothing fresh: ask the server (om_store_lookup: a HEAD of the object and
     * a LIST of "name/", at once). */
    CACHED_UNKNOWN,
    /* Answered: *rc is 0 (out filled, one kernel lookup counted) or the
     * error (-ENOENT from a fresh complete listing, -ENOMEM). */
    CACHED_ANSWERED,
    /* A fresh listing shows an object by that name, but its mode, owner and
     * type (x-amz-meta-*) are still to be read: HEAD the object only. */
    CACHED_OBJECT_NEEDS_HEAD,
    /* A fresh listing shows a directory by that name whose metadata is
     * still to be read: HEAD its marker only. */
    CACHED_DIR_NEEDS_HEAD,
};

/* Answer from what is cached. Caller holds m->lock. */
static enum cached_answer lookup_cached(struct om_meta *m, struct inode *dir, const char *name,
                                        struct om_attr *out, int *rc)
{
    struct inode *c = mi_child_get(dir, name);
    uint64_t now = om_now_ms();
    bool want_meta = m->cfg.metadata != OM_META_LISTING;
    if (c && c->pending) {
        /* created here and not stored yet: only this mount knows it */
    } else if (c && (c->is_dir || now < c->attr_expire_ms)) {
        if (c->is_dir && !mi_listing_fresh(dir->d->listing) && now >= c->attr_expire_ms)
            c = NULL; /* a directory's existence is rechecked after entry_timeout */
        else if (mi_meta_by_lookup(m, c->is_dir) && !c->meta_known)
            c = NULL; /* primed by a listing: its metadata is still to be read */
        else if (c->is_dir && want_meta && !c->meta_known && now >= c->attr_expire_ms)
            c = NULL; /* listed: its marker is read once the attributes expire */
    } else {
        c = NULL;
    }
    if (!c && mi_listing_fresh(dir->d->listing)) {
        struct dentry *d = mi_listing_find(dir->d->listing, name);
        if (!d || d->gone) {
            m->st.lookups_negative++;
            *rc = -ENOENT;
            return CACHED_ANSWERED;
        }
        mi_lru_touch(m, dir->d->listing);
        struct inode *known = mi_child_get(dir, name);
        /* a file readdirplus told without an inode shows what the listing
         * says, as it would have with one */
        /* the metadata read before holds for the version listed only */
        bool known_meta = known && known->meta_known && known->is_dir == d->is_dir &&
                          (d->is_dir || mi_listed_same_version(known, d));
        if (want_meta && !known_meta && !(d->told_plain && !d->is_dir))
            return d->is_dir ? CACHED_DIR_NEEDS_HEAD : CACHED_OBJECT_NEEDS_HEAD;
        c = mi_child_for(m, dir, name, d->is_dir);
        if (!c) {
            *rc = -ENOMEM;
            return CACHED_ANSWERED;
        }
        if (!d->is_dir)
            mi_set_listed_attrs(m, c, d);
        else
            c->attr_expire_ms = now + m->cfg.entry_ttl_ms;
    }
    if (!c)
        return CACHED_UNKNOWN;
    c->nlookup++;
    c->recent = true;
    mi_fill_attr(m, c, out);
    *rc = 0;
    return CACHED_ANSWERED;
}

/* A directory's metadata from its marker (dirkey ends with '/'); an absent
 * marker leaves the defaults. */
static void read_marker(struct om_meta *m, const char *dirkey, struct om_object *o,
                        bool *found)
{
    *found = false;
    if (!om_store_caps(m->store)->dir_marker)
        return; /* a store that keeps none (AIStore): nothing to ask */
    struct om_store_error err;
    int rc = om_store_head(m->store, dirkey, o, &err);
    *found = rc == 0;
    if (rc && rc != -ENOENT)
        om_warn("reading directory metadata %s: %s (HTTP %ld %s)", dirkey, strerror(-rc),
                err.status, err.code);
}

/* Directory metadata into an inode. Caller holds m->lock. */
static void apply_dir_meta(struct om_meta *m, struct inode *i, const struct om_object *o,
                           bool found)
{
    if (found) {
        i->has_mtime = false;
        mi_apply_object_meta(m, i, o);
    }
    i->meta_known = true;
    i->attr_expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
}

static mode_t inode_type(const struct om_meta *m, const struct inode *i)
{
    struct om_attr a;
    mi_fill_attr(m, i, &a);
    return a.mode & S_IFMT;
}

/* The object's type changed since the kernel saw it: a file listed as
 * regular turned out a symlink when HEADed (metadata=lookup), or another
 * client replaced it. The kernel marks an inode whose type changes on
 * getattr bad (EIO for good). Instead the inode is retired: unlinked from
 * its name and answering ESTALE until forgotten, so a path walk retries
 * with a fresh lookup, which binds the name to a new inode number. Caller
 * holds m->lock. */
static int retire(struct om_meta *m, struct inode *i)
{
    char *key = mi_inode_key(i);
    om_debug("%s: type changed, the kernel looks it up again", key ? key : mi_name(i));
    free(key);
    mi_unlink_child(m, i);
    i->retired = true;
    return -ESTALE;
}

struct first_entry {
    const char *key;
    struct om_store_lookup *r;
};

static int first_entry(void *ud, const struct om_list_entry *e)
{
    struct first_entry *f = ud;
    size_t n = strlen(f->key);
    if (!e->is_prefix && strcmp(e->key, f->key) == 0) {
        f->r->is_file = true;
        f->r->obj.size = e->size;
        f->r->obj.mtime = e->mtime;
        om_strlcpy(f->r->obj.etag, e->etag ? e->etag : "", sizeof(f->r->obj.etag));
    } else if (strncmp(e->key, f->key, n) == 0 && e->key[n] == '/') {
        f->r->is_dir = true;
    }
    return OM_LIST_STOP;
}

/* What key is, asked of the mount's listing source (a manifest) as
 * om_store_lookup asks the store: a directory when a key starts with "key/", else an
 * object when key itself is listed (the first key with that prefix, as
 * the shortest sorts first). For a name the directory's listing no longer
 * holds: the memory budget may drop a listing between its install and the
 * lookup that waited for it. No lock held. */
static int source_lookup(struct om_meta *m, const char *key, struct om_store_lookup *r,
                         struct om_store_error *err)
{
    memset(r, 0, sizeof(*r));
    char *dirkey = NULL;
    if (asprintf(&dirkey, "%s/", key) < 0)
        return -ENOMEM;
    struct first_entry f = {.key = key, .r = r};
    struct om_list_params p = {.prefix = dirkey, .delimiter = "/", .max_keys = 1};
    char *next = NULL;
    int rc = m->cfg.list_page(m->cfg.list_ud, &p, first_entry, &f, &next, err);
    free(next);
    free(dirkey);
    if (!rc && !r->is_dir) {
        p.prefix = key;
        rc = m->cfg.list_page(m->cfg.list_ud, &p, first_entry, &f, &next, err);
        free(next);
    }
    if (rc)
        return rc;
    return r->is_file || r->is_dir ? 0 : -ENOENT;
}

int om_meta_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out)
{
    return mi_lookup(m, parent, name, out, true);
}

int mi_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
              bool for_open)
{
    if (strlen(name) > NAME_MAX_BYTES)
        return -ENAMETOOLONG;
    if (!mi_valid_name(name))
        return -ENOENT;
    pthread_mutex_lock(&m->lock);
    m->st.lookups++;
    struct inode *dir = mi_inode_get(m, parent);
    if (!dir || !dir->is_dir) {
        pthread_mutex_unlock(&m->lock);
        return dir ? -ENOTDIR : -ESTALE;
    }
    int rc;
    enum cached_answer hit = lookup_cached(m, dir, name, out, &rc);
    if (hit == CACHED_UNKNOWN) {
        /* List the whole directory once rather than ask for each name: wait
         * for the listing's first page; a one-page directory then answers
         * every lookup, a larger one keeps listing in the background while
         * lookups ask the server by name. */
        if (!dir->d->slurping && om_now_ms() >= dir->d->slurp_retry_ms)
            mi_start_slurp(m, dir);
        while (dir->d->slurping && !dir->d->slurp_first_page)
            pthread_cond_wait(&m->slurp_cond, &m->lock);
        hit = lookup_cached(m, dir, name, out, &rc);
    }
    if (hit == CACHED_ANSWERED) {
        m->st.lookups_cached++;
        pthread_mutex_unlock(&m->lock);
        return rc;
    }
    bool object_only = hit == CACHED_OBJECT_NEEDS_HEAD, dir_only = hit == CACHED_DIR_NEEDS_HEAD;
    uint64_t listed_size = 0;
    char listed_etag[OM_ETAG_MAX] = "";
    if (object_only) {
        struct dentry *d = mi_listing_find(dir->d->listing, name);
        listed_size = d ? d->size : 0;
        if (d)
            mi_dentry_etag(d, listed_etag);
    }
    size_t klen = strlen(dir->d->key) + strlen(name) + 1;
    char *key = malloc(klen);
    if (!key) {
        pthread_mutex_unlock(&m->lock);
        return -ENOMEM;
    }
    snprintf(key, klen, "%s%s", dir->d->key, name);
    dir->refs++; /* keep dir across the request */
    pthread_mutex_unlock(&m->lock);

    struct om_store_lookup r;
    struct om_store_error err;
    struct om_object marker;
    bool marker_found = false;
    memset(&err, 0, sizeof(err));
    if (object_only) {
        memset(&r, 0, sizeof(r));
        if (for_open && m->cfg.fetch_whole && listed_size > 0 &&
            listed_size <= m->cfg.fetch_whole_max)
            rc = m->cfg.fetch_whole(m->cfg.fetch_ud, key, listed_size, listed_etag, &r.obj,
                                    &err);
        else
            rc = om_store_head(m->store, key, &r.obj, &err);
        r.is_file = rc == 0;
    } else if (dir_only) {
        memset(&r, 0, sizeof(r));
        r.is_dir = r.has_marker = true; /* the HEAD of "key/" tells which */
        rc = 0;
    } else {
        rc = m->cfg.list_page ? source_lookup(m, key, &r, &err) : om_store_lookup(m->store, key, &r, &err);
    }
    if (rc && rc != -ENOENT)
        om_warn("lookup %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);
    if (rc == 0 && r.is_dir && r.has_marker && m->cfg.metadata != OM_META_LISTING) {
        char *dirkey = NULL;
        if (asprintf(&dirkey, "%s/", key) > 0) {
            read_marker(m, dirkey, &marker, &marker_found);
            free(dirkey);
        }
    }

    pthread_mutex_lock(&m->lock);
    if (rc == 0) {
        struct inode *c = mi_child_for(m, dir, name, r.is_dir);
        if (c && !r.is_dir && c->nlookup > 0) {
            /* the kernel holds c as a regular file or a symlink: the other
             * type gets a new inode */
            mode_t was = inode_type(m, c);
            mi_set_object_attrs(m, c, &r.obj);
            if (inode_type(m, c) != was) {
                retire(m, c);
                c = mi_child_for(m, dir, name, false);
            }
        }
        if (!c) {
            rc = -ENOMEM;
        } else {
            if (r.is_dir)
                apply_dir_meta(m, c, &marker, marker_found);
            else
                mi_set_object_attrs(m, c, &r.obj);
            c->nlookup++;
            c->recent = true;
            mi_fill_attr(m, c, out);
        }
    } else if (rc == -ENOENT) {
        m->st.lookups_negative++;
        struct inode *c = mi_child_get(dir, name);
        if (c)
            mi_unlink_child(m, c); /* gone behind the mount */
    }
    mi_inode_unref(m, dir);
    pthread_mutex_unlock(&m->lock);
    free(key);
    return rc;
}

void om_meta_forget(struct om_meta *m, uint64_t ino, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && i != m->root) {
        i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
        if (i->nlookup == 0 && i->refs == 0)
            mi_inode_unheld(m, i);
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---- attributes ---- */

/* Refresh a file's attributes with a HEAD when stale. Caller holds m->lock,
 * which is dropped and retaken around the request; i stays referenced. */
static int refresh(struct om_meta *m, struct inode *i, bool force)
{
    if (i->pending || i == m->root || m->cfg.list_page ||
        (!force && om_now_ms() < i->attr_expire_ms))
        return 0; /* with a listing source (a manifest) attributes never change */
    char *key = mi_inode_key(i);
    if (!key)
        return -ENOMEM;
    i->refs++;
    pthread_mutex_unlock(&m->lock);
    struct om_object o;
    struct om_store_error err;
    /* a directory's metadata lives on its "dir/" marker, when it has one
     * (a store that keeps none, AIStore, is not asked) */
    bool ask = !i->is_dir || om_store_caps(m->store)->dir_marker;
    int rc = ask ? om_store_head(m->store, key, &o, &err) : -ENOENT;
    if (rc && rc != -ENOENT)
        om_warn("stat %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);
    free(key);
    pthread_mutex_lock(&m->lock);
    if (i->is_dir) {
        apply_dir_meta(m, i, &o, rc == 0);
        rc = 0; /* no marker, or a failed HEAD: the directory is still there */
    } else if (rc == 0) {
        mi_set_object_attrs(m, i, &o);
    } else if (rc == -ENOENT) {
        mi_unlink_child(m, i);
    }
    i->refs--;
    return rc;
}

int om_meta_getattr(struct om_meta *m, uint64_t ino, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    m->st.getattrs++;
    struct inode *i = mi_inode_get(m, ino);
    int rc = -ESTALE;
    if (i && !i->retired) {
        bool fresh = i->is_dir || om_now_ms() < i->attr_expire_ms;
        if (fresh)
            m->st.getattrs_cached++;
        mode_t was = inode_type(m, i);
        rc = refresh(m, i, false);
        if (!rc && inode_type(m, i) != was)
            rc = retire(m, i);
        if (!rc)
            mi_fill_attr(m, i, out);
        i->recent = true;
        /* refresh may have dropped the last reference holder's claim */
        if (i->refs == 0 && i->nlookup == 0 && i != m->root)
            mi_inode_unheld(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_getattr_cached(struct om_meta *m, uint64_t ino, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = i ? 0 : -ESTALE;
    if (i)
        mi_fill_attr(m, i, out);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_open(struct om_meta *m, uint64_t ino, bool trust_cache, char **key,
                 struct om_attr *out, bool *keep_cache)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (!i || i->retired) {
        pthread_mutex_unlock(&m->lock);
        return -ESTALE;
    }
    if (i->is_dir) {
        pthread_mutex_unlock(&m->lock);
        return -EISDIR;
    }
    i->refs++;
    mode_t was = inode_type(m, i);
    int rc = refresh(m, i, false);
    if (!rc && inode_type(m, i) != was)
        rc = retire(m, i);
    if (!rc) {
        *key = mi_inode_key(i);
        if (!*key)
            rc = -ENOMEM;
    }
    if (!rc) {
        mi_fill_attr(m, i, out);
        char etag[OM_ETAG_MAX];
        mi_inode_etag(i, etag);
        const struct inode_extra *x = mi_extra_if(i);
        const char *cached = i->cached_is_etag ? etag : x && x->cached_etag ? x->cached_etag : "";
        *keep_cache = trust_cache || (etag[0] && strcmp(cached, etag) == 0);
        mi_set_cached_etag(m, i);
    } else {
        mi_inode_unref(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_expire(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && !i->is_dir && !i->pending)
        i->attr_expire_ms = 0;
    pthread_mutex_unlock(&m->lock);
}

void om_meta_close(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i)
        mi_inode_unref(m, i);
    pthread_mutex_unlock(&m->lock);
}

void om_meta_get_stats(struct om_meta *m, struct om_meta_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->st;
    out->bytes = __atomic_load_n(&m->mem, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&m->lock);
}
