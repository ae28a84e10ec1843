/* What the prefetch across files asks of the namespace: where a file stands
 * in its directory's installed listing, the files listed after it, and
 * the attributes of a path below the mount's root (see
 * include/objmount/meta.h). */
#include "objmount/meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"
#include "objmount/util.h"

int om_meta_listed_pos(struct om_meta *m, uint64_t ino, uint64_t *dir, uint64_t *pos)
{
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    struct inode *d = i && !i->is_dir ? i->parent : NULL;
    struct listing *l = d && d->is_dir ? d->d->listing : NULL;
    long k = l ? mi_listing_pos(l, mi_name(i)) : -1;
    if (k >= 0) {
        *dir = d->ino;
        *pos = (uint64_t)k;
    }
    pthread_mutex_unlock(&m->lock);
    return k >= 0 ? 0 : -ENOENT;
}

int om_meta_listed_files(struct om_meta *m, uint64_t dir, uint64_t pos, uint64_t stride, int max,
                         struct om_listed_file *out)
{
    if (stride == 0 || max <= 0)
        return 0;
    int n = 0, rc = 0;
    pthread_mutex_lock(&m->lock);
    struct inode *d = mi_inode_get(m, dir);
    struct listing *l = d && d->is_dir ? d->d->listing : NULL;
    for (uint64_t p = pos; l && p < l->n && n < max && !rc; p += stride) {
        const struct dentry *e = l->v[p];
        if (e->is_dir || e->gone)
            continue;
        struct om_listed_file *f = &out[n];
        memset(f, 0, sizeof(*f));
        if (asprintf(&f->key, "%s%s", d->d->key, e->name) < 0) {
            f->key = NULL;
            rc = -ENOMEM;
            break;
        }
        f->pos = p;
        f->size = e->size;
        mi_dentry_etag(e, f->etag);
        if (!f->etag[0]) { /* listed without one: a version an open learned (om_meta_learned_version) */
            struct inode *c = mi_child_get(d, e->name);
            if (c && !c->retired && c->size == e->size)
                mi_inode_etag(c, f->etag);
        }
        n++;
    }
    pthread_mutex_unlock(&m->lock);
    if (rc) {
        om_listed_files_free(out, n);
        return rc;
    }
    return n;
}

void om_listed_files_free(struct om_listed_file *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].key);
        v[i].key = NULL;
    }
}

int om_meta_resolve_path(struct om_meta *m, const char *path, struct om_attr *out, char **key)
{
    char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    uint64_t dir = OM_ROOT_INO;
    bool counted = false; /* dir holds a lookup of ours */
    int rc = -ENOENT;
    char *save = NULL;
    char *next = NULL;
    for (char *c = strtok_r(copy, "/", &save); c; c = next) {
        next = strtok_r(NULL, "/", &save);
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0 || strlen(c) > NAME_MAX_BYTES) {
            rc = -EINVAL; /* the hint stays below the directory it names */
            break;
        }
        if (counted && !S_ISDIR(out->mode)) {
            rc = -ENOTDIR;
            break;
        }
        /* the last name is looked up as for an open: a small file comes
         * whole in the GET that gives its attributes (and waits for the
         * open in the read pool), where a HEAD and then a GET were two */
        rc = mi_lookup(m, dir, c, out, next == NULL);
        if (counted)
            om_meta_forget(m, dir, 1);
        counted = rc == 0;
        if (rc)
            break;
        dir = out->ino;
    }
    free(copy);
    if (rc == 0 && !counted)
        rc = -EISDIR; /* no component: the root */
    if (rc == 0) {
        pthread_mutex_lock(&m->lock);
        struct inode *i = mi_inode_get(m, dir);
        *key = i ? mi_inode_key(i) : NULL;
        pthread_mutex_unlock(&m->lock);
        if (!*key)
            rc = -ENOMEM;
    }
    if (counted)
        om_meta_forget(m, dir, 1);
    return rc;
}
