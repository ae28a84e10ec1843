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
    if (!rc && strlen(dir->key) + strlen(name) > OM_S3_KEY_MAX) {
        om_warn("cannot create %.64s... (%zu bytes): object keys are at most %d bytes", dir->key,
                strlen(dir->key) + strlen(name), OM_S3_KEY_MAX);
        rc = -ENAMETOOLONG;
    }
    if (!rc) {
        c = mi_child_get(dir, name);
        if (c && c->is_dir)
            rc = -EISDIR;
        else if (!(c = mi_child_for(m, dir, name, false)))
            rc = -ENOMEM;
    }
    if (!rc && !(*key = strdup(c->key)))
        rc = -ENOMEM;
    if (!rc) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        c->pending = true;
        c->meta_known = true;
        c->size = 0;
        c->mtime = now;
        c->etag[0] = '\0';
        c->has_mode = c->has_uid = c->has_gid = true;
        c->meta_mode = S_IFREG | (mode & 07777);
        c->meta_uid = uid;
        c->meta_gid = gid;
        c->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
        c->nlookup++;
        mi_fill_attr(m, c, out);
        mi_dir_changed(dir);
        if (mi_listing_fresh(dir->listing) && !mi_listing_find(dir->listing, name))
            mi_listing_add(dir->listing, name, false, 0, now.tv_sec, "");
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_object(struct om_meta *m, uint64_t ino, char **key, bool *exists,
                   struct om_s3_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
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
        obj->has_mtime = i->has_mtime;
        obj->meta_mtime = i->mtime;
        om_strlcpy(obj->content_type, i->content_type, sizeof(obj->content_type));
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_committed(struct om_meta *m, uint64_t ino, const struct om_s3_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && !i->is_dir) {
        i->pending = false;
        i->meta_known = true;
        i->size = obj->size;
        i->mtime.tv_sec = obj->mtime;
        i->mtime.tv_nsec = 0;
        i->has_mtime = obj->has_mtime; /* the next metadata change keeps it */
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
        if (i->linked)
            mi_dir_changed(i->parent);
        struct listing *l = i->parent && i->linked ? i->parent->listing : NULL;
        if (l) {
            struct dentry *d = mi_listing_find(l, i->name);
            if (!d) {
                mi_listing_add(l, i->name, false, obj->size, obj->mtime, obj->etag);
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


int om_meta_resolve(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
                    char **key)
{
    int rc = mi_lookup(m, parent, name, out, false);
    if (rc)
        return rc;
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, out->ino);
    *key = i ? strdup(i->key) : NULL;
    pthread_mutex_unlock(&m->lock);
    om_meta_forget(m, out->ino, 1); /* not the kernel's lookup */
    return *key ? 0 : -ENOMEM;
}

int om_meta_key(struct om_meta *m, uint64_t ino, char **key, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = i ? 0 : -ESTALE;
    if (!rc && !(*key = strdup(i->key)))
        rc = -ENOMEM;
    if (!rc && out)
        mi_fill_attr(m, i, out);
    pthread_mutex_unlock(&m->lock);
    return rc;
}

int om_meta_made(struct om_meta *m, uint64_t parent, const char *name, bool is_dir,
                 const struct om_s3_object *obj, struct om_attr *out)
{
    pthread_mutex_lock(&m->lock);
    struct inode *dir = mi_inode_get(m, parent);
    struct inode *c = dir && dir->is_dir ? mi_child_for(m, dir, name, is_dir) : NULL;
    int rc = c ? 0 : dir ? -ENOMEM : -ESTALE;
    if (!rc) {
        mi_apply_object_meta(c, obj);
        c->size = obj->size;
        om_strlcpy(c->etag, obj->etag, sizeof(c->etag));
        c->attr_expire_ms = om_now_ms() + OM_MAX(m->cfg.attr_ttl_ms, m->cfg.entry_ttl_ms);
        c->nlookup++;
        mi_fill_attr(m, c, out);
        mi_dir_changed(dir);
        if (mi_listing_fresh(dir->listing))
            mi_listing_add(dir->listing, name, is_dir, obj->size, obj->meta_mtime.tv_sec,
                           obj->etag);
    }
    pthread_mutex_unlock(&m->lock);
    return rc;
}

void om_meta_dir_meta(struct om_meta *m, uint64_t ino, const struct om_s3_object *obj)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i && i->is_dir) {
        mi_apply_object_meta(i, obj);
        i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
    }
    pthread_mutex_unlock(&m->lock);
}

char *om_meta_link_target(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    char *t = i && i->link_target ? strdup(i->link_target) : NULL;
    pthread_mutex_unlock(&m->lock);
    return t;
}

void om_meta_set_link_target(struct om_meta *m, uint64_t ino, const char *target)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    if (i) {
        free(i->link_target);
        i->link_target = strdup(target);
        i->size = strlen(target);
    }
    pthread_mutex_unlock(&m->lock);
}

void om_meta_removed(struct om_meta *m, uint64_t parent, const char *name)
{
    pthread_mutex_lock(&m->lock);
    struct inode *dir = mi_inode_get(m, parent);
    if (dir && dir->is_dir) {
        struct inode *c = mi_child_get(dir, name);
        if (c) {
            mi_unlink_child(c);
            c->pending = false;
        }
        mi_dir_changed(dir);
        if (dir->listing)
            mi_listing_remove(dir->listing, name);
    }
    pthread_mutex_unlock(&m->lock);
}

/* New keys for i and everything below it. */
static void rekey(struct inode *i)
{
    char *key = NULL;
    if (asprintf(&key, "%s%s%s", i->parent->key, i->name, i->is_dir ? "/" : "") < 0)
        return; /* keeps the old key: requests fail visibly, nothing is corrupted */
    free(i->key);
    i->key = key;
    if (i->is_dir)
        mi_dir_changed(i); /* a listing under way has the old prefix */
    if (!i->is_dir || !i->children.buckets)
        return;
    for (size_t b = 0; b < i->children.nbuckets; b++) {
        for (struct om_hnode *n = i->children.buckets[b]; n; n = n->next)
            rekey(om_container_of(n, struct inode, by_name));
    }
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
        mi_unlink_child(old); /* replaced */
    struct dentry *d = from->listing ? mi_listing_find(from->listing, name) : NULL;
    bool is_dir = c ? c->is_dir : d && d->is_dir;
    if (mi_listing_fresh(to->listing)) {
        if (mi_listing_find(to->listing, newname))
            mi_listing_remove(to->listing, newname);
        mi_listing_add(to->listing, newname, is_dir, c ? c->size : d ? d->size : 0,
                       c ? c->mtime.tv_sec : d ? d->mtime : 0, c ? c->etag : d ? d->etag : "");
    } else if (to->listing) {
        to->listing->expire_ms = 0; /* stale: fetch again */
    }
    if (from->listing)
        mi_listing_remove(from->listing, name);
    if (c) {
        char *nn = strdup(newname);
        if (nn) {
            mi_unlink_child(c);
            free(c->name);
            c->name = nn;
            if (to != from) {
                to->refs++;
                c->parent = to;
                mi_inode_unref(m, from); /* the reference c held */
            }
            om_htable_insert(&to->children, &c->by_name, mi_name_hash(nn));
            c->linked = true;
            rekey(c);
        } else {
            mi_unlink_child(c); /* forgotten: a later lookup finds it again */
        }
    }
    pthread_mutex_unlock(&m->lock);
}

bool om_meta_has_pending(struct om_meta *m, uint64_t ino)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    bool pending = false;
    if (i && i->is_dir && i->children.buckets) {
        for (size_t b = 0; b < i->children.nbuckets && !pending; b++) {
            for (struct om_hnode *n = i->children.buckets[b]; n && !pending; n = n->next)
                pending = om_container_of(n, struct inode, by_name)->pending;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return pending;
}
