/* Changes made through the mount: files created, objects committed,
 * directories made and removed, names removed and renamed. */
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

int om_meta_create(struct om_meta *m, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, struct om_attr *out, char **key)
{
    if (strlen(name) > NAME_MAX_BYTES)
        return -ENAMETOOLONG;
    if (!mi_valid_name(name))
        return -EINVAL;
    pthread_mutex_lock(&m->lock);
    struct inode *dir = mi_inode_get(m, parent);
    int rc = 0;
    if (!dir)
        rc = -ESTALE;
    else if (!dir->is_dir)
        rc = -ENOTDIR;
    struct inode *c = NULL;
    if (!rc && strlen(dir->d->key) + strlen(name) > OM_KEY_MAX) {
        om_warn("cannot create %.64s... (%zu bytes): object keys are at most %d bytes", dir->d->key,
                strlen(dir->d->key) + strlen(name), OM_KEY_MAX);
        rc = -ENAMETOOLONG;
    }
    if (!rc) {
        c = mi_child_get(dir, name);
        if (c && c->is_dir)
            rc = -EISDIR;
        else if (!(c = mi_child_for(m, dir, name, false)))
            rc = -ENOMEM;
    }
    struct inode_extra *x = NULL;
    if (!rc && !(x = mi_extra(m, c)))
        rc = -ENOMEM;
    if (!rc && !(*key = mi_inode_key(c)))
        rc = -ENOMEM;
    if (!rc) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        c->pending = true;
        c->meta_known = true;
        c->size = 0;
        c->mtime_sec = now.tv_sec;
        c->mtime_nsec = (uint32_t)now.tv_nsec;
        mi_inode_set_etag(m, c, "");
        c->has_mode = c->has_uid = c->has_gid = true;
        x->meta_mode = S_IFREG | (mode & 07777);
        x->meta_uid = uid;
        x->meta_gid = gid;
        c->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
        c->nlookup++;
        mi_fill_attr(m, c, out);
        mi_dir_changed(dir);
        if (mi_listing_fresh(dir->d->listing)) /* new, or back after an unlink */
            mi_listing_add(dir->d->listing, name, false, 0, now.tv_sec, "");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_object(struct om_meta *m, uint64_t ino, char **key, bool *exists,
                   struct om_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = 0;
    if (!i)
        rc = -ESTALE;
    else if (i->is_dir)
        rc = -EISDIR;
    else if (!(*key = mi_inode_key(i)))
        rc = -ENOMEM;
    if (!rc) {
        memset(obj, 0, sizeof(*obj));
        *exists = !i->pending;
        obj->size = i->size;
        obj->mtime = (time_t)i->mtime_sec;
        mi_inode_etag(i, obj->etag);
        obj->has_mode = i->has_mode;
        obj->has_uid = i->has_uid;
        obj->has_gid = i->has_gid;
        const struct inode_extra *x = mi_extra_if(i);
        if (x) {
            obj->mode = x->meta_mode;
            obj->uid = x->meta_uid;
            obj->gid = x->meta_gid;
            if (x->content_type)
                om_strlcpy(obj->content_type, x->content_type, sizeof(obj->content_type));
        }
        obj->has_mtime = i->has_mtime;
        obj->meta_mtime = mi_mtime(i);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_committed(struct om_meta *m, uint64_t ino, const struct om_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && !i->is_dir) {
        i->pending = false;
        i->meta_known = true;
        i->size = obj->size;
        i->mtime_sec = obj->mtime;
        i->mtime_nsec = 0;
        i->has_mtime = obj->has_mtime; /* the next metadata change keeps it */
        if (obj->has_mtime) {
            i->mtime_sec = obj->meta_mtime.tv_sec;
            i->mtime_nsec = (uint32_t)obj->meta_mtime.tv_nsec;
        }
        mi_inode_set_etag(m, i, obj->etag);
        mi_set_cached_etag(m, i);
        struct inode_extra *x =
            obj->has_mode || obj->has_uid || obj->has_gid ? mi_extra(m, i) : NULL;
        if (x && obj->has_mode) {
            i->has_mode = true;
            x->meta_mode = obj->mode;
        }
        if (x && obj->has_uid) {
            i->has_uid = true;
            x->meta_uid = obj->uid;
        }
        if (x && obj->has_gid) {
            i->has_gid = true;
            x->meta_gid = obj->gid;
        }
        i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
        if (i->linked)
            mi_dir_changed(i->parent);
        struct listing *l = i->parent && i->linked ? i->parent->d->listing : NULL;
        if (l) {
            struct dentry *d = mi_listing_find(l, mi_name(i));
            if (!d || d->gone) { /* new, or back after an unlink */
                mi_listing_add(l, mi_name(i), false, obj->size, obj->mtime, obj->etag);
            } else if (!d->is_dir) {
                /* the listing keeps names and sizes; a stale ETag is only a
                 * hint, the inode above is what stat shows */
                d->size = obj->size;
                mi_listing_set_mtime(l, d, obj->mtime); /* the inode above has its own */
                mi_listing_set_etag(l, d, obj->etag);
            }
        }
    }
    pthread_mutex_unlock(&m->lock);
}


void om_meta_learned_version(struct om_meta *m, uint64_t ino, uint64_t size, const char *etag)
{
    if (!etag || !etag[0])
        return;
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && !i->retired && !i->is_dir && i->size == size) {
        char have[OM_ETAG_MAX];
        mi_inode_etag(i, have);
        if (!have[0])
            mi_inode_set_etag(m, i, etag);
        /* and on the listing's entry, which outlives the inode when the
         * kernel forgets it (a lookup makes the next inode from it) */
        struct listing *l = i->parent && i->parent->d ? i->parent->d->listing : NULL;
        struct dentry *d = l ? mi_listing_find(l, mi_name(i)) : NULL;
        if (d && !d->is_dir && !d->gone && d->size == size && d->etag_kind == MI_ETAG_NONE)
            mi_listing_set_etag(l, d, etag);
    }
    pthread_mutex_unlock(&m->lock);
}

int om_meta_resolve(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
                    char **key)
{
    int rc = mi_lookup(m, parent, name, out, false);
    if (rc)
        return rc;
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, out->ino);
    *key = i ? mi_inode_key(i) : NULL;
    pthread_mutex_unlock(&m->lock);
    om_meta_forget(m, out->ino, 1); /* not the kernel's lookup */
    return *key ? 0 : -ENOMEM;
}

int om_meta_key(struct om_meta *m, uint64_t ino, char **key, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = i ? 0 : -ESTALE;
    if (!rc && !(*key = mi_inode_key(i)))
        rc = -ENOMEM;
    if (!rc && out)
        mi_fill_attr(m, i, out);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_made(struct om_meta *m, uint64_t parent, const char *name, bool is_dir,
                 bool local, const struct om_object *obj, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    struct inode *dir = mi_inode_get(m, parent);
    struct inode *c = dir && dir->is_dir ? mi_child_for(m, dir, name, is_dir) : NULL;
    int rc = c ? 0 : dir ? -ENOMEM : -ESTALE;
    if (!rc) {
        c->pending = local; /* only this mount knows it until a key is stored under it */
        mi_apply_object_meta(m, c, obj);
        c->size = obj->size;
        mi_inode_set_etag(m, c, obj->etag);
        c->attr_expire_ms = om_now_ms() + OM_MAX(m->cfg.attr_ttl_ms, m->cfg.entry_ttl_ms);
        c->nlookup++;
        mi_fill_attr(m, c, out);
        mi_dir_changed(dir);
        if (mi_listing_fresh(dir->d->listing))
            mi_listing_add(dir->d->listing, name, is_dir, obj->size, obj->meta_mtime.tv_sec,
                           obj->etag);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_dir_meta(struct om_meta *m, uint64_t ino, const struct om_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && i->is_dir) {
        mi_apply_object_meta(m, i, obj);
        i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
    }
    pthread_mutex_unlock(&m->lock);
}

bool om_meta_dir_own_mtime(struct om_meta *m, uint64_t ino, struct timespec *mtime)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    bool own = i && i->is_dir && i->has_mtime;
    if (own)
        *mtime = mi_mtime(i);
    pthread_mutex_unlock(&m->lock);
    return own;
}

char *om_meta_link_target(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    const struct inode_extra *x = i ? mi_extra_if(i) : NULL;
    char *t = x && x->link_target ? strdup(x->link_target) : NULL;
    pthread_mutex_unlock(&m->lock);
    return t;
}

void om_meta_set_link_target(struct om_meta *m, uint64_t ino, const char *target)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    struct inode_extra *x = i ? mi_extra(m, i) : NULL;
    if (x) {
        mi_mem_free(&m->mem, x->link_target);
        x->link_target = strdup(target);
        mi_mem_charge(&m->mem, x->link_target);
    }
    if (i)
        i->size = strlen(target);
    pthread_mutex_unlock(&m->lock);
}

void om_meta_removed(struct om_meta *m, uint64_t parent, const char *name)
{
    pthread_mutex_lock(&m->lock);
    struct inode *dir = mi_inode_get(m, parent);
    if (dir && dir->is_dir) {
        struct inode *c = mi_child_get(dir, name);
        if (c) {
            mi_unlink_child(m, c);
            c->pending = false;
        }
        mi_dir_changed(dir);
        if (dir->d->listing)
            mi_listing_remove(dir->d->listing, name);
    }
    pthread_mutex_unlock(&m->lock);
}

/* Does directory d hold nothing but its one child c, and nothing stored? */
static bool only_child(struct inode *d, struct inode *c)
{
    if (!d->pending || (d->d->listing && d->d->listing->n > 0))
        return false;
    for (size_t k = 0; k < d->d->children.cap; k++) {
        struct inode *o = d->d->children.slots[k];
        if (o && o != c)
            return false;
    }
    return true;
}

int om_meta_refused(struct om_meta *m, uint64_t ino, uint64_t *parent, char **name)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = i && i->pending && i->linked && i->parent ? 0 : -ENOENT;
    if (!rc) {
        /* the topmost name only this mount knows */
        while (i->parent->parent && i->parent != m->root && only_child(i->parent, i))
            i = i->parent;
        struct inode *dir = i->parent;
        *parent = dir->ino;
        *name = strdup(mi_name(i));
        if (dir->d->listing)
            mi_listing_remove(dir->d->listing, mi_name(i));
        mi_unlink_child(m, i);
        i->pending = false;
        /* what the server holds instead is read again */
        for (struct inode *d = dir; d; d = d->parent) {
            mi_dir_changed(d);
            if (d->d->listing)
                d->d->listing->expire_ms = 0;
        }
        if (!*name)
            rc = -ENOMEM;
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

/* New keys for directory i and the directories below it (a file's key
 * follows its directory's). */
static void rekey(struct om_meta *m, struct inode *i)
{
    if (!i->is_dir)
        return;
    char *key = NULL;
    if (asprintf(&key, "%s%s/", i->parent->d->key, mi_name(i)) < 0)
        return; /* keeps the old key: requests fail visibly, nothing is corrupted */
    mi_mem_free(&m->mem, i->d->key);
    mi_mem_charge(&m->mem, key);
    i->d->key = key;
    mi_dir_changed(i); /* a listing under way has the old prefix */
    for (size_t k = 0; k < i->d->children.cap; k++) {
        if (i->d->children.slots[k])
            rekey(m, i->d->children.slots[k]);
    }
}

/* Name i newname (at most NAME_MAX_BYTES): in place when it fits, else in
 * its extra. -ENOMEM leaves the name as it was. */
static int rename_inode(struct om_meta *m, struct inode *i, const char *newname)
{
    size_t len = strlen(newname);
    struct inode_extra *x = len > i->name_len ? mi_extra(m, i) : NULL;
    if (len > i->name_len) {
        char *nn = x ? strdup(newname) : NULL;
        if (!nn)
            return -ENOMEM;
        mi_mem_free(&m->mem, x->name);
        mi_mem_charge(&m->mem, nn);
        x->name = nn;
        return 0;
    }
    x = i->is_dir ? &i->d->x : i->x;
    if (x) {
        mi_mem_free(&m->mem, x->name);
        x->name = NULL;
    }
    memcpy(i->name_inline, newname, len + 1);
    return 0;
}

void om_meta_renamed(struct om_meta *m, uint64_t parent, const char *name, uint64_t newparent,
                     const char *newname)
{
    pthread_mutex_lock(&m->lock);
    struct inode *from = mi_inode_get(m, parent), *to = mi_inode_get(m, newparent);
    if (!from || !to || !from->is_dir || !to->is_dir) {
        pthread_mutex_unlock(&m->lock);
        return;
    }
    mi_dir_changed(from);
    mi_dir_changed(to);
    struct inode *c = mi_child_get(from, name);
    struct inode *old = mi_child_get(to, newname);
    if (old && old != c)
        mi_unlink_child(m, old); /* replaced */
    struct listing *fl = from->d->listing, *tl = to->d->listing;
    struct dentry *d = fl ? mi_listing_find(fl, name) : NULL;
    bool is_dir = c ? c->is_dir : d && d->is_dir;
    if (mi_listing_fresh(tl)) {
        char etag[OM_ETAG_MAX] = "";
        if (c)
            mi_inode_etag(c, etag);
        else if (d)
            mi_dentry_etag(d, etag);
        if (mi_listing_find(tl, newname))
            mi_listing_remove(tl, newname);
        uint64_t size = c ? c->size : d ? d->size : 0;
        time_t mtime = c ? (time_t)c->mtime_sec : d ? d->mtime : 0;
        mi_listing_add(tl, newname, is_dir, size, mtime, etag);
    } else if (tl) {
        tl->expire_ms = 0; /* stale: fetch again */
    }
    if (fl)
        mi_listing_remove(fl, name);
    if (c) {
        mi_unlink_child(m, c);
        if (rename_inode(m, c, newname) == 0) {
            if (to != from) {
                to->refs++;
                c->parent = to;
                mi_inode_unref(m, from); /* the reference c held */
            }
            mi_link_child(m, c); /* -ENOMEM: as below */
            rekey(m, c);
        }
        /* else forgotten: a later lookup finds it again */
    }
    pthread_mutex_unlock(&m->lock);
}

void om_meta_moved(struct om_meta *m, uint64_t dir, const char *path,
                   const struct om_object *copy)
{
    char name[NAME_MAX_BYTES + 1];
    const char *etag = copy ? copy->etag : "";
    pthread_mutex_lock(&m->lock);
    struct inode *d = mi_inode_get(m, dir);
    for (const char *p = path; d && d->is_dir;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 0 || len > NAME_MAX_BYTES)
            break; /* a directory marker ("x/"), or no name */
        memcpy(name, p, len);
        name[len] = '\0';
        if (slash) { /* a directory on the way: only what this mount holds */
            d = mi_child_get(d, name);
            p = slash + 1;
            continue;
        }
        /* the copy carries the source's metadata (own time, mode) */
        struct inode *i = mi_child_get(d, name);
        if (i && !i->is_dir && !i->pending)
            mi_inode_set_etag(m, i, etag);
        struct listing *l = d->d->listing;
        struct dentry *e = l ? mi_listing_find(l, name) : NULL;
        if (e && !e->is_dir && !e->gone)
            mi_listing_set_etag(l, e, etag);
        /* what the source's inode knew went with it if it was live; if
         * the kernel had forgotten it, the old name's memory is not the
         * new name's: the copy's metadata says what a listing cannot */
        if (!i && copy && m->cfg.metadata != OM_META_LISTING &&
            (copy->has_mode || copy->has_uid || copy->has_gid || copy->has_mtime))
            mi_links_add(m, d->d->key, name);
        break;
    }
    pthread_mutex_unlock(&m->lock);
}

bool om_meta_has_pending(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    bool pending = false;
    if (i && i->is_dir) {
        const struct mi_table *t = &i->d->children;
        for (size_t k = 0; k < t->cap && !pending; k++)
            pending = t->slots[k] && t->slots[k]->pending;
    }
    pthread_mutex_unlock(&m->lock);
    return pending;
}
