/* Inodes of the namespace: allocation and release, the table by number,
 * children by name, references and forgetting, attributes from a listing,
 * a HEAD or a change. Lookups and the namespace's construction (meta.c)
 * and background listings (meta_slurp.c) use them; they use the listing
 * container, the budget, ETags and tables below. Caller holds m->lock. */
#include "objmount/meta.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

/* ---- inodes ---- */

struct inode *mi_inode_get(struct om_meta *m, uint64_t ino)
{
    return mi_table_ino(&m->inodes, ino);
}

struct inode *mi_child_get(struct inode *dir, const char *name)
{
    return dir->is_dir ? mi_table_name(&dir->d->children, name) : NULL;
}

char *mi_inode_key(const struct inode *i)
{
    if (i->is_dir)
        return strdup(i->d->key);
    if (i->x && i->x->key)
        return strdup(i->x->key);
    char *key = NULL;
    if (asprintf(&key, "%s%s", i->parent->d->key, mi_name(i)) < 0)
        return NULL;
    return key;
}

static void unlink_node(struct inode *i)
{
    if (i->linked) {
        mi_table_del(&i->parent->d->children, i, true);
        i->linked = false;
    }
}

int mi_link_child(struct om_meta *m, struct inode *i)
{
    int rc = mi_table_add(&i->parent->d->children, i, true);
    if (rc)
        return rc;
    if (!i->is_dir && i->x) {
        mi_mem_free(&m->mem, i->x->key);
        i->x->key = NULL;
    }
    i->linked = true;
    return 0;
}

void mi_unlink_child(struct om_meta *m, struct inode *i)
{
    if (!i->linked)
        return;
    if (!i->is_dir) {
        /* its key stays what it was, whatever later happens to the parent's
         * (ENOMEM: it follows the parent's) */
        char *key = mi_inode_key(i);
        struct inode_extra *x = key ? mi_extra(m, i) : NULL;
        if (x) {
            mi_mem_free(&m->mem, x->key);
            mi_mem_charge(&m->mem, key);
            x->key = key;
        } else {
            free(key);
        }
    }
    unlink_node(i);
}

static void extra_free(uint64_t *mem, struct inode_extra *x)
{
    mi_mem_free(mem, x->link_target);
    mi_mem_free(mem, x->content_type);
    mi_mem_free(mem, x->cached_etag);
    mi_mem_free(mem, x->key);
    mi_mem_free(mem, x->name);
}

/* Free what i owns and i, unlinked from nothing. */
void mi_inode_release(struct om_meta *m, struct inode *i)
{
    uint64_t *mem = &m->mem;
    if (i->etag_kind == MI_ETAG_TEXT)
        mi_mem_free(mem, i->etag.text);
    if (i->is_dir) {
        if (i->d->listing) {
            mi_listing_drop_times(m, i->d->key, i->d->listing);
            mi_lru_remove(m, i->d->listing);
        }
        mi_listing_put(i->d->listing);
        mi_table_destroy(&i->d->children);
        extra_free(mem, &i->d->x);
        mi_mem_free(mem, i->d->key);
        mi_mem_free(mem, i->d);
    } else if (i->x) {
        extra_free(mem, i->x);
        mi_mem_free(mem, i->x);
    }
    mi_mem_free(mem, i);
}

void mi_inode_free(struct om_meta *m, struct inode *i);

void mi_inode_unheld(struct om_meta *m, struct inode *i)
{
    i->refs = 1; /* the one mi_inode_unref drops */
    mi_inode_unref(m, i);
}

bool mi_keeps_listing(const struct om_meta *m, const struct inode *i)
{
    return i->is_dir && i != m->root && i->linked && !i->retired && mi_listing_fresh(i->d->listing);
}

void mi_inode_unref(struct om_meta *m, struct inode *i)
{
    while (i) {
        if (i->refs > 0)
            i->refs--;
        if (i->refs > 0 || i->nlookup > 0 || i == m->root || mi_keeps_listing(m, i))
            return;
        struct inode *parent = i->parent;
        mi_inode_free(m, i);
        i = parent; /* drop the reference the child held */
    }
}

/* Does i show a mode or owner of its own, not the mount's defaults? */
static bool own_mode_or_owner(const struct om_meta *m, const struct inode *i)
{
    const struct inode_extra *x = mi_extra_if(i);
    if (!x)
        return false;
    mode_t plain = i->is_dir ? m->cfg.dir_mode : m->cfg.file_mode;
    if (i->has_mode && (S_ISLNK(x->meta_mode) || (x->meta_mode & 07777) != plain))
        return true;
    return (i->has_uid && x->meta_uid != m->cfg.uid) || (i->has_gid && x->meta_gid != m->cfg.gid);
}

/* What an inode knew beyond its listing entry, kept as it is freed: a
 * file's own time on the entry of the same version (the listing shows it
 * from then on, and the next listing takes it over), and the name among
 * those looked up with a HEAD when the entry cannot keep it or it has a
 * mode or owner of its own (a symlink too), or is a directory with a time
 * of its own (its marker's). Without this, a file the kernel forgot
 * (drop_caches, memory pressure) came back from readdirplus with the
 * upload's time and the mount's mode: rsync saw every file changed, and
 * `tar -x`'s times and modes were gone until each name was read. */
static void keep_own_metadata(struct om_meta *m, struct inode *i)
{
    if (!i->linked || i->retired || i->pending || i == m->root)
        return;
    bool head = own_mode_or_owner(m, i) || (i->is_dir && i->has_mtime);
    if (i->has_mtime && !head) {
        struct listing *l = i->parent->d->listing;
        struct dentry *d = l ? mi_listing_find(l, mi_name(i)) : NULL;
        if (d && !d->gone && !d->is_dir && mi_listed_same_version(i, d)) {
            if (!d->own_mtime)
                l->own_mtimes++;
            d->own_mtime = true;
            d->mtime = i->mtime_sec;
            d->mtime_nsec = i->mtime_nsec;
        } else {
            head = true;
        }
    }
    if (head)
        mi_links_add(m, i->parent->d->key, mi_name(i));
}

void mi_inode_free(struct om_meta *m, struct inode *i)
{
    keep_own_metadata(m, i);
    mi_numbers_keep(m, i);
    unlink_node(i);
    mi_table_del(&m->inodes, i, false);
    m->st.inodes--;
    mi_inode_release(m, i);
}

/* An inode named name (at most NAME_MAX_BYTES), unlinked; directories get
 * their key. NULL on ENOMEM. */
struct inode *mi_inode_alloc(struct om_meta *m, const char *name, bool is_dir, const char *key)
{
    size_t nlen = strlen(name);
    struct inode *i = calloc(1, offsetof(struct inode, name_inline) + nlen + 1);
    if (!i)
        return NULL;
    memcpy(i->name_inline, name, nlen + 1);
    i->name_len = (uint8_t)nlen;
    i->is_dir = is_dir;
    mi_mem_charge(&m->mem, i);
    if (!is_dir)
        return i;
    i->d = calloc(1, sizeof(*i->d));
    if (!i->d || !(i->d->key = strdup(key)) || mi_table_init(&i->d->children, 16, &m->mem)) {
        if (i->d)
            free(i->d->key);
        free(i->d);
        mi_mem_free(&m->mem, i);
        return NULL;
    }
    mi_mem_charge(&m->mem, i->d);
    mi_mem_charge(&m->mem, i->d->key);
    return i;
}

/* A new inode linked under parent. Caller holds m->lock. */
struct inode *mi_inode_new(struct om_meta *m, struct inode *parent, const char *name, bool is_dir)
{
    char *key = NULL;
    if (is_dir && asprintf(&key, "%s%s/", parent->d->key, name) < 0)
        return NULL;
    struct inode *i = mi_inode_alloc(m, name, is_dir, key);
    free(key);
    if (!i)
        return NULL;
    /* the number the name had when the kernel last forgot it, if known */
    uint64_t again = mi_numbers_take(m, parent->d->key, name, is_dir);
    i->ino = again ? again : m->next_ino;
    i->parent = parent;
    i->recent = true;
    if (mi_table_add(&m->inodes, i, false)) {
        mi_inode_release(m, i);
        return NULL;
    }
    if (mi_link_child(m, i)) {
        mi_table_del(&m->inodes, i, false);
        mi_inode_release(m, i);
        return NULL;
    }
    if (!again)
        m->next_ino++;
    parent->refs++;
    m->st.inodes++;
    mi_budget_check(m);
    return i;
}

/* The child inode for name with the given type, created or replaced. */
struct inode *mi_child_for(struct om_meta *m, struct inode *dir, const char *name, bool is_dir)
{
    struct inode *c = mi_child_get(dir, name);
    if (c && c->is_dir == is_dir)
        return c;
    if (c) {
        mi_unlink_child(m, c); /* the name changed type; the old inode lives until forgotten */
        c->retired = true;
        if (c->nlookup == 0 && c->refs == 0)
            mi_inode_unheld(m, c);
    }
    return mi_inode_new(m, dir, name, is_dir);
}

void mi_set_file_attrs(struct om_meta *m, struct inode *i, uint64_t size, time_t mtime,
                           const char *etag)
{
    i->size = size;
    i->mtime_sec = mtime;
    i->mtime_nsec = 0;
    mi_inode_set_etag(m, i, etag);
    i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
}

bool mi_listed_same_version(const struct inode *i, const struct dentry *d)
{
    char have[OM_ETAG_MAX], listed[OM_ETAG_MAX];
    mi_inode_etag(i, have);
    mi_dentry_etag(d, listed);
    return have[0] && i->size == d->size && strcmp(have, listed) == 0;
}

void mi_set_listed_attrs(struct om_meta *m, struct inode *i, const struct dentry *d)
{
    /* The listing's time is the upload's; a file's own time (utimens,
     * rsync, tar: x-amz-meta-mtime) stays while the listing shows the
     * version it was read from. Another version's metadata is unknown. */
    bool same = mi_listed_same_version(i, d);
    bool keep_mtime = i->has_mtime && same;
    if (!same)
        i->meta_known = false;
    i->has_mtime = keep_mtime || d->own_mtime;
    time_t sec = keep_mtime ? (time_t)i->mtime_sec : d->mtime;
    uint32_t nsec = keep_mtime ? i->mtime_nsec : d->own_mtime ? d->mtime_nsec : 0;
    if (d->etag_kind == MI_ETAG_TEXT || i->etag_kind == MI_ETAG_TEXT || i->cached_is_etag) {
        char etag[OM_ETAG_MAX];
        mi_dentry_etag(d, etag);
        mi_set_file_attrs(m, i, d->size, sec, etag);
        i->mtime_nsec = nsec;
        return;
    }
    /* the common case, without text */
    i->size = d->size;
    i->mtime_sec = sec;
    i->mtime_nsec = nsec;
    memcpy(i->etag.md5, d->md5, sizeof(d->md5));
    i->etag_parts = d->etag_parts;
    i->etag_kind = d->etag_kind;
    i->attr_expire_ms = om_now_ms() + m->cfg.attr_ttl_ms;
}

void mi_apply_object_meta(struct om_meta *m, struct inode *i, const struct om_object *o)
{
    i->meta_known = true;
    bool any = o->has_mode || o->has_uid || o->has_gid;
    struct inode_extra *x = any || mi_extra_if(i) ? mi_extra(m, i) : NULL;
    i->has_mode = x && o->has_mode;
    i->has_uid = x && o->has_uid;
    i->has_gid = x && o->has_gid;
    if (x) {
        x->meta_mode = o->mode;
        x->meta_uid = o->uid;
        x->meta_gid = o->gid;
    }
    if (o->has_mtime) {
        i->has_mtime = true;
        i->mtime_sec = o->meta_mtime.tv_sec;
        i->mtime_nsec = (uint32_t)o->meta_mtime.tv_nsec;
    }
}

void mi_set_object_attrs(struct om_meta *m, struct inode *i, const struct om_object *o)
{
    mi_set_file_attrs(m, i, o->size, o->mtime, o->etag);
    struct inode_extra *x = o->content_type[0] || mi_extra_if(i) ? mi_extra(m, i) : NULL;
    if (x) {
        mi_mem_free(&m->mem, x->content_type);
        x->content_type = o->content_type[0] ? strndup(o->content_type, 127) : NULL;
        mi_mem_charge(&m->mem, x->content_type);
    }
    i->has_mtime = false;
    mi_apply_object_meta(m, i, o);
}

void mi_set_cached_etag(struct om_meta *m, struct inode *i)
{
    if (!i->is_dir && i->x) {
        mi_mem_free(&m->mem, i->x->cached_etag);
        i->x->cached_etag = NULL;
    }
    i->cached_is_etag = true;
}

struct timespec mi_mtime(const struct inode *i)
{
    return (struct timespec){.tv_sec = (time_t)i->mtime_sec, .tv_nsec = (long)i->mtime_nsec};
}

void mi_fill_attr(const struct om_meta *m, const struct inode *i, struct om_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->ino = i->ino;
    const struct inode_extra *x = mi_extra_if(i); /* set when has_mode, has_uid or has_gid */
    bool meta_mode = i->has_mode && !m->cfg.force_mode;
    if (i->is_dir) {
        a->mode = S_IFDIR | (meta_mode ? x->meta_mode & 07777 : m->cfg.dir_mode);
        a->mtime = i->has_mtime ? mi_mtime(i) : m->mount_time;
    } else if (i->has_mode && S_ISLNK(x->meta_mode)) {
        a->mode = S_IFLNK | 0777;
        a->size = i->size;
        a->mtime = mi_mtime(i);
    } else {
        a->mode = S_IFREG | (meta_mode ? x->meta_mode & 07777 : m->cfg.file_mode);
        a->size = i->size;
        a->mtime = mi_mtime(i);
        mi_inode_etag(i, a->etag);
    }
    if (m->cfg.ro)
        a->mode &= (mode_t) ~0222;
    a->uid = i->has_uid && !m->cfg.force_uid ? x->meta_uid : m->cfg.uid;
    a->gid = i->has_gid && !m->cfg.force_gid ? x->meta_gid : m->cfg.gid;
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
