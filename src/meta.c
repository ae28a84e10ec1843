/* The namespace: inodes, names <-> keys, attribute and listing caches.
 *
 * Locking: m->lock guards every inode, every child table and every installed
 * listing. It is released around network requests; after a request the state
 * is looked up again, since another thread may have changed it meanwhile.
 * A listing being built by a directory handle belongs to that handle alone
 * until it is complete and installed on its directory. */
#include "objmount/meta.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/util.h"

#define NAME_MAX_BYTES 255

struct listing;

struct inode {
    struct om_hnode by_ino;  /* in m->inodes */
    struct om_hnode by_name; /* in parent->children when linked */
    uint64_t ino;
    struct inode *parent;
    char *name;
    char *key; /* full object key; directories end with '/', the root is the prefix */
    bool is_dir;
    bool linked;
    uint64_t nlookup;
    uint32_t refs; /* open handles, and one per child that points here */
    /* attributes */
    uint64_t size;
    struct timespec mtime;
    char etag[OM_ETAG_MAX];
    bool has_mode, has_uid, has_gid;
    uint32_t meta_mode, meta_uid, meta_gid;
    uint64_t attr_expire_ms;
    bool pending; /* created through the mount, not stored yet */
    char cached_etag[OM_ETAG_MAX]; /* what the kernel page cache holds */
    /* directories */
    struct om_htable children;
    struct listing *listing; /* complete, installed */
};

struct dentry {
    struct om_hnode node;
    bool is_dir;
    uint64_t size;
    time_t mtime;
    char *etag; /* NULL for directories */
    char name[];
};

struct listing {
    int refs;
    struct dentry **v;
    size_t n, cap;
    struct om_htable index;
    bool complete;
    uint64_t expire_ms;
    char *token; /* continuation token of the next page */
    bool started;
};

struct om_dirh {
    struct inode *dir;
    struct listing *l;
    bool building; /* l belongs to this handle until complete */
};

struct om_meta {
    struct om_s3 *s3;
    struct om_meta_config cfg;
    char *prefix;
    pthread_mutex_t lock;
    struct om_htable inodes;
    uint64_t next_ino;
    struct inode *root;
    struct timespec mount_time;
    struct om_meta_stats st;
};

static uint64_t name_hash(const char *name)
{
    return om_hash_bytes(name, strlen(name));
}

/* ---- listings ---- */

static struct listing *listing_new(void)
{
    struct listing *l = calloc(1, sizeof(*l));
    if (!l || om_htable_init(&l->index, 64)) {
        free(l);
        return NULL;
    }
    l->refs = 1;
    return l;
}

static void listing_put(struct listing *l)
{
    if (!l || --l->refs > 0)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    om_htable_destroy(&l->index);
    free(l->token);
    free(l);
}

static struct dentry *listing_find(const struct listing *l, const char *name)
{
    uint64_t h = name_hash(name);
    for (struct om_hnode *n = om_htable_first(&l->index, h); n; n = om_htable_next(n, h)) {
        struct dentry *d = om_container_of(n, struct dentry, node);
        if (strcmp(d->name, name) == 0)
            return d;
    }
    return NULL;
}

/* Add one listed name; a directory replaces an object of the same name. */
static int listing_add(struct listing *l, const char *name, bool is_dir, uint64_t size,
                       time_t mtime, const char *etag)
{
    struct dentry *old = listing_find(l, name);
    if (old) {
        if (is_dir && !old->is_dir) {
            om_info("'%s' is both an object and a directory: the directory hides the object",
                    name);
            old->is_dir = true;
            old->size = 0;
            old->etag = NULL;
        }
        return 0;
    }
    size_t nlen = strlen(name);
    size_t elen = etag && !is_dir ? strlen(etag) + 1 : 0;
    struct dentry *d = malloc(sizeof(*d) + nlen + 1 + elen);
    if (!d)
        return -ENOMEM;
    memcpy(d->name, name, nlen + 1);
    d->is_dir = is_dir;
    d->size = size;
    d->mtime = mtime;
    d->etag = elen ? d->name + nlen + 1 : NULL;
    if (elen)
        memcpy(d->etag, etag, elen);
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct dentry **v = realloc(l->v, cap * sizeof(*v));
        if (!v) {
            free(d);
            return -ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = d;
    om_htable_insert(&l->index, &d->node, name_hash(name));
    return 0;
}

/* ---- inodes ---- */

static struct inode *inode_get(struct om_meta *m, uint64_t ino)
{
    uint64_t h = om_hash_u64(ino);
    for (struct om_hnode *n = om_htable_first(&m->inodes, h); n; n = om_htable_next(n, h)) {
        struct inode *i = om_container_of(n, struct inode, by_ino);
        if (i->ino == ino)
            return i;
    }
    return NULL;
}

static struct inode *child_get(struct inode *dir, const char *name)
{
    if (!dir->children.buckets)
        return NULL;
    uint64_t h = name_hash(name);
    for (struct om_hnode *n = om_htable_first(&dir->children, h); n; n = om_htable_next(n, h)) {
        struct inode *i = om_container_of(n, struct inode, by_name);
        if (strcmp(i->name, name) == 0)
            return i;
    }
    return NULL;
}

static void unlink_child(struct inode *i)
{
    if (i->linked) {
        om_htable_remove(&i->parent->children, &i->by_name);
        i->linked = false;
    }
}

static void inode_free(struct om_meta *m, struct inode *i);

static void inode_unref(struct om_meta *m, struct inode *i)
{
    while (i) {
        if (i->refs > 0)
            i->refs--;
        if (i->refs > 0 || i->nlookup > 0 || i == m->root)
            return;
        struct inode *parent = i->parent;
        inode_free(m, i);
        i = parent; /* drop the reference the child held */
    }
}

static void inode_free(struct om_meta *m, struct inode *i)
{
    unlink_child(i);
    om_htable_remove(&m->inodes, &i->by_ino);
    m->st.inodes--;
    listing_put(i->listing);
    om_htable_destroy(&i->children);
    free(i->name);
    free(i->key);
    free(i);
}

/* A new inode linked under parent. Caller holds m->lock. */
static struct inode *inode_new(struct om_meta *m, struct inode *parent, const char *name,
                               bool is_dir)
{
    struct inode *i = calloc(1, sizeof(*i));
    if (!i)
        return NULL;
    i->name = strdup(name);
    size_t klen = strlen(parent->key) + strlen(name) + 2;
    i->key = malloc(klen);
    if (!i->name || !i->key || (is_dir && om_htable_init(&i->children, 16))) {
        free(i->name);
        free(i->key);
        free(i);
        return NULL;
    }
    snprintf(i->key, klen, "%s%s%s", parent->key, name, is_dir ? "/" : "");
    i->ino = m->next_ino++;
    i->parent = parent;
    i->is_dir = is_dir;
    parent->refs++;
    om_htable_insert(&m->inodes, &i->by_ino, om_hash_u64(i->ino));
    om_htable_insert(&parent->children, &i->by_name, name_hash(name));
    i->linked = true;
    m->st.inodes++;
    return i;
}

/* The child inode for name with the given type, created or replaced. */
static struct inode *child_for(struct om_meta *m, struct inode *dir, const char *name, bool is_dir)
{
    struct inode *c = child_get(dir, name);
    if (c && c->is_dir == is_dir)
        return c;
    if (c) {
        unlink_child(c); /* the name changed type; the old inode lives until forgotten */
        if (c->nlookup == 0 && c->refs == 0) {
            struct inode *parent = c->parent;
            inode_free(m, c);
            inode_unref(m, parent);
        }
    }
    return inode_new(m, dir, name, is_dir);
}

static void set_file_attrs(struct om_meta *m, struct inode *i, uint64_t size, time_t mtime,
                           const char *etag)
{
    i->size = size;
    i->mtime.tv_sec = mtime;
    i->mtime.tv_nsec = 0;
    om_strlcpy(i->etag, etag ? etag : "", sizeof(i->etag));
    i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
}

static void set_object_attrs(struct om_meta *m, struct inode *i, const struct om_s3_object *o)
{
    set_file_attrs(m, i, o->size, o->mtime, o->etag);
    i->has_mode = o->has_mode;
    i->has_uid = o->has_uid;
    i->has_gid = o->has_gid;
    i->meta_mode = o->mode;
    i->meta_uid = o->uid;
    i->meta_gid = o->gid;
    if (o->has_mtime)
        i->mtime = o->meta_mtime;
}

static void fill_attr(const struct om_meta *m, const struct inode *i, struct om_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->ino = i->ino;
    if (i->is_dir) {
        a->mode = S_IFDIR | m->cfg.dir_mode;
        a->mtime = m->mount_time;
    } else {
        mode_t perm = m->cfg.file_mode;
        if (i->has_mode && !m->cfg.force_mode)
            perm = i->meta_mode & 07777;
        a->mode = S_IFREG | perm;
        a->size = i->size;
        a->mtime = i->mtime;
        om_strlcpy(a->etag, i->etag, sizeof(a->etag));
    }
    if (m->cfg.ro)
        a->mode &= (mode_t) ~0222;
    a->uid = i->has_uid && !m->cfg.force_uid ? i->meta_uid : m->cfg.uid;
    a->gid = i->has_gid && !m->cfg.force_gid ? i->meta_gid : m->cfg.gid;
}

void om_attr_to_stat(const struct om_attr *a, struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = a->ino;
    st->st_mode = a->mode;
    st->st_nlink = S_ISDIR(a->mode) ? 2 : 1;
    st->st_uid = a->uid;
    st->st_gid = a->gid;
    st->st_size = (off_t)a->size;
    st->st_blksize = 4096;
    st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
    st->st_mtim = a->mtime;
    st->st_atim = a->mtime;
    st->st_ctim = a->mtime;
}

/* ---- construction ---- */

struct om_meta *om_meta_new(struct om_s3 *s3, const struct om_meta_config *cfg)
{
    struct om_meta *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->s3 = s3;
    m->cfg = *cfg;
    m->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    m->cfg.prefix = m->prefix;
    struct inode *root = calloc(1, sizeof(*root));
    if (!m->prefix || !root || om_htable_init(&m->inodes, 1024) ||
        om_htable_init(&root->children, 64)) {
        free(root);
        free(m->prefix);
        om_htable_destroy(&m->inodes);
        free(m);
        return NULL;
    }
    pthread_mutex_init(&m->lock, NULL);
    clock_gettime(CLOCK_REALTIME, &m->mount_time);
    root->ino = OM_ROOT_INO;
    root->is_dir = true;
    root->name = strdup("");
    root->key = strdup(m->prefix);
    root->nlookup = 1;
    om_htable_insert(&m->inodes, &root->by_ino, om_hash_u64(OM_ROOT_INO));
    m->root = root;
    m->next_ino = OM_ROOT_INO + 1;
    m->st.inodes = 1;
    return m;
}

void om_meta_free(struct om_meta *m)
{
    if (!m)
        return;
    /* free every inode: children before parents is not needed here */
    for (size_t b = 0; b < m->inodes.nbuckets; b++) {
        struct om_hnode *n = m->inodes.buckets[b];
        while (n) {
            struct om_hnode *next = n->next;
            struct inode *i = om_container_of(n, struct inode, by_ino);
            listing_put(i->listing);
            om_htable_destroy(&i->children);
            free(i->name);
            free(i->key);
            free(i);
            n = next;
        }
    }
    om_htable_destroy(&m->inodes);
    pthread_mutex_destroy(&m->lock);
    free(m->prefix);
    free(m);
}

/* ---- lookup ---- */

static bool valid_name(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= NAME_MAX_BYTES && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           !strchr(name, '/');
}

static bool listing_fresh(const struct listing *l)
{
    return l && l->complete && om_now_ms() < l->expire_ms;
}

/* Answer from what is cached. Returns 1 when answered (rc in *rc), 0 when a
 * request is needed. Caller holds m->lock. */
static int lookup_cached(struct om_meta *m, struct inode *dir, const char *name,
                         struct om_attr *out, int *rc)
{
    struct inode *c = child_get(dir, name);
    uint64_t now = om_now_ms();
    if (c && (c->is_dir || now < c->attr_expire_ms)) {
        if (c->is_dir && !listing_fresh(dir->listing) && now >= c->attr_expire_ms)
            c = NULL; /* a directory's existence is rechecked after entry_timeout */
    } else {
        c = NULL;
    }
    if (!c && listing_fresh(dir->listing)) {
        struct dentry *d = listing_find(dir->listing, name);
        if (!d) {
            m->st.lookups_negative++;
            *rc = -ENOENT;
            return 1;
        }
        c = child_for(m, dir, name, d->is_dir);
        if (!c) {
            *rc = -ENOMEM;
            return 1;
        }
        if (!d->is_dir)
            set_file_attrs(m, c, d->size, d->mtime, d->etag);
        else
            c->attr_expire_ms = now + m->cfg.entry_ttl_ms;
    }
    if (!c)
        return 0;
    c->nlookup++;
    fill_attr(m, c, out);
    *rc = 0;
    return 1;
}

int om_meta_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out)
{
    if (strlen(name) > NAME_MAX_BYTES)
        return -ENAMETOOLONG;
    if (!valid_name(name))
        return -ENOENT;
    pthread_mutex_lock(&m->lock);
    m->st.lookups++;
    struct inode *dir = inode_get(m, parent);
    if (!dir || !dir->is_dir) {
        pthread_mutex_unlock(&m->lock);
        return dir ? -ENOTDIR : -ESTALE;
    }
    int rc;
    if (lookup_cached(m, dir, name, out, &rc)) {
        m->st.lookups_cached++;
        pthread_mutex_unlock(&m->lock);
        return rc;
    }
    size_t klen = strlen(dir->key) + strlen(name) + 1;
    char *key = malloc(klen);
    if (!key) {
        pthread_mutex_unlock(&m->lock);
        return -ENOMEM;
    }
    snprintf(key, klen, "%s%s", dir->key, name);
    dir->refs++; /* keep dir across the request */
    pthread_mutex_unlock(&m->lock);

    struct om_s3_lookup r;
    struct om_s3_error err;
    rc = om_s3_lookup(m->s3, key, &r, &err);
    if (rc && rc != -ENOENT)
        om_warn("lookup %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);

    pthread_mutex_lock(&m->lock);
    if (rc == 0) {
        struct inode *c = child_for(m, dir, name, r.is_dir);
        if (!c) {
            rc = -ENOMEM;
        } else {
            if (r.is_dir)
                c->attr_expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
            else
                set_object_attrs(m, c, &r.obj);
            c->nlookup++;
            fill_attr(m, c, out);
        }
    } else if (rc == -ENOENT) {
        m->st.lookups_negative++;
        struct inode *c = child_get(dir, name);
        if (c)
            unlink_child(c); /* gone behind the mount */
    }
    inode_unref(m, dir);
    pthread_mutex_unlock(&m->lock);
    free(key);
    return rc;
}

void om_meta_forget(struct om_meta *m, uint64_t ino, uint64_t n)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    if (i && i != m->root) {
        i->nlookup = n >= i->nlookup ? 0 : i->nlookup - n;
        if (i->nlookup == 0 && i->refs == 0) {
            struct inode *parent = i->parent;
            inode_free(m, i);
            inode_unref(m, parent);
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---- attributes ---- */

/* Refresh a file's attributes with a HEAD when stale. Caller holds m->lock,
 * which is dropped and retaken around the request; i stays referenced. */
static int refresh(struct om_meta *m, struct inode *i, bool force)
{
    if (i->is_dir || i->pending || (!force && om_now_ms() < i->attr_expire_ms))
        return 0;
    char *key = strdup(i->key);
    if (!key)
        return -ENOMEM;
    i->refs++;
    pthread_mutex_unlock(&m->lock);
    struct om_s3_object o;
    struct om_s3_error err;
    int rc = om_s3_head(m->s3, key, &o, &err);
    if (rc && rc != -ENOENT)
        om_warn("stat %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);
    free(key);
    pthread_mutex_lock(&m->lock);
    if (rc == 0)
        set_object_attrs(m, i, &o);
    else if (rc == -ENOENT)
        unlink_child(i);
    i->refs--;
    return rc;
}

int om_meta_getattr(struct om_meta *m, uint64_t ino, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    m->st.getattrs++;
    struct inode *i = inode_get(m, ino);
    int rc = -ESTALE;
    if (i) {
        bool fresh = i->is_dir || om_now_ms() < i->attr_expire_ms;
        if (fresh)
            m->st.getattrs_cached++;
        rc = refresh(m, i, false);
        if (!rc)
            fill_attr(m, i, out);
        /* refresh may have dropped the last reference holder's claim */
        if (i->refs == 0 && i->nlookup == 0 && i != m->root) {
            struct inode *parent = i->parent;
            inode_free(m, i);
            inode_unref(m, parent);
        }
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_open(struct om_meta *m, uint64_t ino, bool trust_cache, char **key,
                 struct om_attr *out, bool *keep_cache)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    if (!i) {
        pthread_mutex_unlock(&m->lock);
        return -ESTALE;
    }
    if (i->is_dir) {
        pthread_mutex_unlock(&m->lock);
        return -EISDIR;
    }
    i->refs++;
    int rc = refresh(m, i, false);
    if (!rc) {
        *key = strdup(i->key);
        if (!*key)
            rc = -ENOMEM;
    }
    if (!rc) {
        fill_attr(m, i, out);
        *keep_cache = trust_cache || (i->etag[0] && strcmp(i->cached_etag, i->etag) == 0);
        om_strlcpy(i->cached_etag, i->etag, sizeof(i->cached_etag));
    } else {
        inode_unref(m, i);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_close(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    if (i)
        inode_unref(m, i);
    pthread_mutex_unlock(&m->lock);
}

/* ---- changes made through the mount ---- */

int om_meta_create(struct om_meta *m, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, struct om_attr *out, char **key)
{
    if (strlen(name) > NAME_MAX_BYTES)
        return -ENAMETOOLONG;
    if (!valid_name(name))
        return -EINVAL;
    pthread_mutex_lock(&m->lock);
    struct inode *dir = inode_get(m, parent);
    int rc = 0;
    if (!dir)
        rc = -ESTALE;
    else if (!dir->is_dir)
        rc = -ENOTDIR;
    struct inode *c = NULL;
    if (!rc) {
        c = child_get(dir, name);
        if (c && c->is_dir)
            rc = -EISDIR;
        else if (!(c = child_for(m, dir, name, false)))
            rc = -ENOMEM;
    }
    if (!rc && !(*key = strdup(c->key)))
        rc = -ENOMEM;
    if (!rc) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        c->pending = true;
        c->size = 0;
        c->mtime = now;
        c->etag[0] = '\0';
        c->has_mode = c->has_uid = c->has_gid = true;
        c->meta_mode = S_IFREG | (mode & 07777);
        c->meta_uid = uid;
        c->meta_gid = gid;
        c->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
        c->nlookup++;
        fill_attr(m, c, out);
        if (listing_fresh(dir->listing) && !listing_find(dir->listing, name))
            listing_add(dir->listing, name, false, 0, now.tv_sec, "");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_object(struct om_meta *m, uint64_t ino, char **key, bool *exists,
                   struct om_s3_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    int rc = 0;
    if (!i)
        rc = -ESTALE;
    else if (i->is_dir)
        rc = -EISDIR;
    else if (!(*key = strdup(i->key)))
        rc = -ENOMEM;
    if (!rc) {
        memset(obj, 0, sizeof(*obj));
        *exists = !i->pending;
        obj->size = i->size;
        obj->mtime = i->mtime.tv_sec;
        om_strlcpy(obj->etag, i->etag, sizeof(obj->etag));
        obj->has_mode = i->has_mode;
        obj->has_uid = i->has_uid;
        obj->has_gid = i->has_gid;
        obj->mode = i->meta_mode;
        obj->uid = i->meta_uid;
        obj->gid = i->meta_gid;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_committed(struct om_meta *m, uint64_t ino, const struct om_s3_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    if (i && !i->is_dir) {
        i->pending = false;
        i->size = obj->size;
        i->mtime.tv_sec = obj->mtime;
        i->mtime.tv_nsec = 0;
        if (obj->has_mtime)
            i->mtime = obj->meta_mtime;
        om_strlcpy(i->etag, obj->etag, sizeof(i->etag));
        om_strlcpy(i->cached_etag, obj->etag, sizeof(i->cached_etag));
        if (obj->has_mode) {
            i->has_mode = true;
            i->meta_mode = obj->mode;
        }
        if (obj->has_uid) {
            i->has_uid = true;
            i->meta_uid = obj->uid;
        }
        if (obj->has_gid) {
            i->has_gid = true;
            i->meta_gid = obj->gid;
        }
        i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
        struct listing *l = i->parent && i->linked ? i->parent->listing : NULL;
        if (l) {
            struct dentry *d = listing_find(l, i->name);
            if (!d) {
                listing_add(l, i->name, false, obj->size, obj->mtime, obj->etag);
            } else if (!d->is_dir) {
                /* the listing keeps names and sizes; a stale ETag is only a
                 * hint, the inode above is what stat shows */
                d->size = obj->size;
                d->mtime = obj->mtime;
                if (d->etag && strlen(d->etag) >= strlen(obj->etag))
                    strcpy(d->etag, obj->etag);
                else if (d->etag)
                    d->etag[0] = '\0';
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
}

/* ---- directories ---- */

int om_meta_opendir(struct om_meta *m, uint64_t ino, struct om_dirh **out)
{
    struct om_dirh *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    pthread_mutex_lock(&m->lock);
    struct inode *i = inode_get(m, ino);
    int rc = 0;
    if (!i)
        rc = -ESTALE;
    else if (!i->is_dir)
        rc = -ENOTDIR;
    if (!rc) {
        i->refs++;
        d->dir = i;
        if (listing_fresh(i->listing)) {
            d->l = i->listing;
            d->l->refs++;
        } else {
            d->l = listing_new();
            d->building = true;
            if (!d->l) {
                inode_unref(m, i);
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

struct page_ctx {
    struct om_meta *m;
    struct listing *l;
    size_t plen; /* length of the directory's key prefix */
    int error;
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
    if (!valid_name(name)) {
        __atomic_fetch_add(&p->m->st.skipped_names, 1, __ATOMIC_RELAXED);
        om_info("skipping key '%s': its name cannot be a file name", e->key);
        return 0;
    }
    return listing_add(p->l, name, is_dir, e->size, e->mtime, e->etag);
}

/* Fetch the next page into a listing this handle is building. Called
 * without m->lock. */
static int fetch_page(struct om_meta *m, struct om_dirh *d, const char *dirkey)
{
    struct listing *l = d->l;
    struct page_ctx p = {.m = m, .l = l, .plen = strlen(dirkey)};
    struct om_s3_list_params params = {
        .prefix = dirkey, .delimiter = "/", .continuation = l->token};
    char *next = NULL;
    struct om_s3_error err;
    int rc = om_s3_list_page(m->s3, &params, page_entry, &p, &next, &err);
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
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* Install a completed listing on its directory. Caller holds m->lock. */
static void install(struct om_meta *m, struct om_dirh *d)
{
    d->l->expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
    d->building = false;
    listing_put(d->dir->listing);
    d->dir->listing = d->l;
    d->l->refs++;
    m->st.list_entries += d->l->n;
}

int om_meta_readdir(struct om_meta *m, struct om_dirh *d, off_t off, bool plus,
                    om_meta_fill_fn fill, void *ud)
{
    /* offsets: 0 start, 1 after ".", 2 after "..", 2+k after entry k-1 */
    struct om_attr a;
    pthread_mutex_lock(&m->lock);
    if (off < 1) {
        fill_attr(m, d->dir, &a);
        if (fill(ud, ".", &a, 1)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 1;
    }
    if (off < 2) {
        fill_attr(m, d->dir->parent ? d->dir->parent : d->dir, &a);
        if (fill(ud, "..", &a, 2)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 2;
    }
    char *dirkey = strdup(d->dir->key);
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
            if (plus) {
                struct inode *c = child_for(m, d->dir, e->name, e->is_dir);
                if (!c) {
                    rc = -ENOMEM;
                    break;
                }
                /* the listing wins only over attributes that expired */
                if (!e->is_dir && !c->pending && om_now_ms() >= c->attr_expire_ms)
                    set_file_attrs(m, c, e->size, e->mtime, e->etag);
                else if (e->is_dir)
                    c->attr_expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
                fill_attr(m, c, &a);
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
                if (!full)
                    c->nlookup++;
                else if (c->nlookup == 0 && c->refs == 0) {
                    struct inode *parent = c->parent;
                    inode_free(m, c);
                    inode_unref(m, parent);
                }
            } else {
                memset(&a, 0, sizeof(a));
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
    listing_put(d->l);
    inode_unref(m, d->dir);
    pthread_mutex_unlock(&m->lock);
    free(d);
}

void om_meta_get_stats(struct om_meta *m, struct om_meta_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->st;
    pthread_mutex_unlock(&m->lock);
}
