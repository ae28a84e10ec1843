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

