/* Listings: the container of one directory's listed names (an entry
 * arena, a name index, positions for readdir offsets). meta_list.c fills
 * one from LIST pages and installs it on its directory when complete. */
#include "objmount/meta.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

struct listing *mi_listing_new(struct om_meta *m)
{
    struct listing *l = calloc(1, sizeof(*l));
    if (!l)
        return NULL;
    l->refs = 1;
    l->mem = m ? &m->mem : NULL;
    mi_mem_charge(l->mem, l);
    return l;
}

void mi_listing_put(struct listing *l)
{
    if (!l || --l->refs > 0)
        return;
    for (void *c = l->chunks; c;) {
        void *next = *(void **)c;
        mi_mem_free(l->mem, c);
        c = next;
    }
    mi_mem_free(l->mem, l->v);
    mi_mem_free(l->mem, l->index);
    free(l->token);
    mi_mem_free(l->mem, l);
}

#define ARENA_ALIGN 8
#define ARENA_CHUNK_MIN 256
#define ARENA_CHUNK_MAX 4096 /* at most about this much unused per listing */

/* len bytes for an entry in l's arena; NULL on ENOMEM. */
static void *arena_alloc(struct listing *l, size_t len)
{
    len = (len + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (!l->chunks || l->chunk_used + len > l->chunk_cap) {
        /* chunks grow with the listing, so that a small one stays small */
        size_t cap =
            OM_MIN((size_t)ARENA_CHUNK_MAX, OM_MAX((size_t)ARENA_CHUNK_MIN, l->chunk_cap * 2));
        cap = OM_MAX(cap, len + ARENA_ALIGN);
        void *c = malloc(cap);
        if (!c)
            return NULL;
        mi_mem_charge(l->mem, c);
        *(void **)c = l->chunks;
        l->chunks = c;
        l->chunk_cap = cap;
        l->chunk_used = ARENA_ALIGN; /* the link */
    }
    void *p = (char *)l->chunks + l->chunk_used;
    l->chunk_used += len;
    return p;
}

/* The index slot of name: the one holding it, or the free one where it
 * goes. l->index must exist. */
static size_t index_slot(const struct listing *l, const char *name)
{
    size_t mask = l->index_cap - 1;
    for (size_t k = mi_name_hash(name) & mask;; k = (k + 1) & mask) {
        uint32_t e = l->index[k];
        if (!e || strcmp(l->v[e - 1]->name, name) == 0)
            return k;
    }
}

/* Room in the index for one more name (a load of at most 3/4). */
static int index_reserve(struct listing *l)
{
    if ((l->n + 1) * 4 <= l->index_cap * 3)
        return 0;
    if (l->n >= UINT32_MAX - 1)
        return -ENOMEM;
    size_t cap = l->index_cap ? l->index_cap * 2 : 16;
    uint32_t *index = calloc(cap, sizeof(*index));
    if (!index)
        return -ENOMEM;
    mi_mem_charge(l->mem, index);
    uint32_t *old = l->index;
    size_t oldcap = l->index_cap;
    l->index = index;
    l->index_cap = cap;
    for (size_t k = 0; k < oldcap; k++) {
        if (old[k])
            l->index[index_slot(l, l->v[old[k] - 1]->name)] = old[k];
    }
    mi_mem_free(l->mem, old);
    return 0;
}

long mi_listing_pos(const struct listing *l, const char *name)
{
    if (!l->index)
        return -1;
    uint32_t e = l->index[index_slot(l, name)];
    return e ? (long)e - 1 : -1;
}

struct dentry *mi_listing_find(const struct listing *l, const char *name)
{
    long k = mi_listing_pos(l, name);
    return k < 0 ? NULL : l->v[k];
}

/* A new entry in l's arena (not in l->v nor in the index); NULL on ENOMEM. */
static struct dentry *entry_new(struct listing *l, const char *name, bool is_dir, uint64_t size,
                                time_t mtime, const char *etag)
{
    size_t nlen = strlen(name);
    uint8_t md5[16];
    uint16_t parts = 0;
    enum mi_etag_kind kind = is_dir ? MI_ETAG_NONE : mi_etag_parse(etag, md5, &parts);
    /* an inode keeps at most OM_ETAG_MAX - 1 bytes of it */
    size_t elen = kind == MI_ETAG_TEXT ? OM_MIN(strlen(etag), (size_t)OM_ETAG_MAX - 1) + 1 : 0;
    struct dentry *d = arena_alloc(l, offsetof(struct dentry, name) + nlen + 1 + elen);
    if (!d)
        return NULL;
    memset(d, 0, offsetof(struct dentry, name));
    memcpy(d->name, name, nlen + 1);
    d->is_dir = is_dir;
    d->size = size;
    d->mtime = mtime;
    d->etag_kind = kind;
    d->etag_room = (uint8_t)elen;
    if (kind == MI_ETAG_TEXT) {
        memcpy(d->name + nlen + 1, etag, elen - 1);
        d->name[nlen + elen] = '\0';
    } else if (kind != MI_ETAG_NONE) {
        memcpy(d->md5, md5, sizeof(md5));
        d->etag_parts = parts;
    }
    return d;
}

void mi_listing_set_mtime(struct listing *l, struct dentry *d, time_t mtime)
{
    d->mtime = mtime;
    if (d->own_mtime)
        l->own_mtimes--;
    d->own_mtime = false;
}

struct dentry *mi_listing_set_etag(struct listing *l, struct dentry *d, const char *etag)
{
    if (mi_dentry_set_etag(d, etag))
        return d;
    /* a longer text than d has room for: d moves to a new record (the old
     * one stays in the arena until the listing goes) */
    long k = mi_listing_pos(l, d->name);
    struct dentry *nd =
        k >= 0 && l->v[k] == d ? entry_new(l, d->name, d->is_dir, d->size, d->mtime, etag) : NULL;
    if (!nd) {
        d->etag_kind = MI_ETAG_NONE; /* only a hint: the inode is what stat shows */
        return d;
    }
    nd->gone = d->gone;
    l->v[k] = nd;
    return nd;
}

/* Add one listed name; a directory replaces an object of the same name. */
int mi_listing_add(struct listing *l, const char *name, bool is_dir, uint64_t size, time_t mtime,
                   const char *etag)
{
    struct dentry *old = mi_listing_find(l, name);
    if (old && old->gone && (old->is_dir == is_dir)) {
        /* the name comes back */
        old->gone = false;
        old->size = size;
        mi_listing_set_mtime(l, old, mtime); /* another version */
        if (!old->is_dir)
            mi_listing_set_etag(l, old, etag);
        return 0;
    }
    if (old && !old->gone) {
        if (is_dir && !old->is_dir) {
            om_info("'%s' is both an object and a directory: the directory hides the object",
                    name);
            old->is_dir = true;
            old->size = 0;
            old->etag_kind = MI_ETAG_NONE;
        }
        return 0;
    }
    /* new, or back with the other type: the new entry takes the name's index
     * slot, the old one stays (gone) at its position */
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        size_t was = mi_mem_size(l->v);
        struct dentry **v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        mi_mem_sub(l->mem, was);
        mi_mem_charge(l->mem, v);
        l->v = v;
        l->cap = cap;
    }
    if (index_reserve(l))
        return -ENOMEM;
    struct dentry *d = entry_new(l, name, is_dir, size, mtime, etag);
    if (!d)
        return -ENOMEM;
    l->index[index_slot(l, name)] = (uint32_t)(l->n + 1);
    l->v[l->n++] = d;
    return 0;
}

void mi_listing_remove(struct listing *l, const char *name)
{
    struct dentry *d = mi_listing_find(l, name);
    if (d)
        d->gone = true;
}

bool mi_listing_fresh(const struct listing *l)
{
    return l && l->complete && om_now_ms() < l->expire_ms;
}
