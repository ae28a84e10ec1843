/* What listings do not show, kept past the inodes that knew it: the names
 * with metadata of their own (a hash each) and the own times on listing
 * entries, carried from one listing of a directory to the next. Uses the
 * listing container, ETags and the budget's byte count below it. Caller
 * holds m->lock. */
#include <stdlib.h>
#include <string.h>

#include "objmount/hash.h"
#include "meta_int.h"

/* At most this many names are remembered (512 KiB of hashes). */
#define MI_LINKS_MAX (1u << 15)

static uint64_t link_hash(const char *dirkey, const char *name)
{
    uint64_t h = om_hash_bytes(dirkey, strlen(dirkey));
    h = om_hash_u64(h ^ om_hash_bytes(name, strlen(name)));
    return h ? h : 1; /* 0 marks a free slot */
}

void mi_links_add(struct om_meta *m, const char *dirkey, const char *name)
{
    uint64_t h = link_hash(dirkey, name);
    if (mi_links_has(m, dirkey, name) || m->nlinks >= MI_LINKS_MAX)
        return;
    if (2 * (m->nlinks + 1) > m->links_cap) {
        size_t cap = m->links_cap ? 2 * m->links_cap : 64;
        uint64_t *v = calloc(cap, sizeof(*v));
        if (!v)
            return; /* not remembered: a listing may show it as a file */
        mi_mem_charge(&m->mem, v);
        for (size_t k = 0; k < m->links_cap; k++) {
            size_t j = m->links[k] & (cap - 1);
            while (m->links[k] && v[j])
                j = (j + 1) & (cap - 1);
            if (m->links[k])
                v[j] = m->links[k];
        }
        mi_mem_free(&m->mem, m->links);
        m->links = v;
        m->links_cap = cap;
    }
    size_t j = h & (m->links_cap - 1);
    while (m->links[j])
        j = (j + 1) & (m->links_cap - 1);
    m->links[j] = h;
    m->nlinks++;
}

bool mi_links_has(const struct om_meta *m, const char *dirkey, const char *name)
{
    if (!m->nlinks)
        return false;
    uint64_t h = link_hash(dirkey, name);
    for (size_t j = h & (m->links_cap - 1); m->links[j]; j = (j + 1) & (m->links_cap - 1)) {
        if (m->links[j] == h)
            return true;
    }
    return false;
}

bool mi_dentries_same_version(const struct dentry *a, const struct dentry *b)
{
    char ea[OM_ETAG_MAX], eb[OM_ETAG_MAX];
    if (a->is_dir || b->is_dir || a->size != b->size)
        return false;
    mi_dentry_etag(a, ea);
    mi_dentry_etag(b, eb);
    return ea[0] && strcmp(ea, eb) == 0;
}

void mi_listing_take_times(struct listing *l, const struct listing *old)
{
    if (!old || !old->own_mtimes)
        return;
    for (size_t k = 0; k < l->n; k++) {
        struct dentry *d = l->v[k];
        const struct dentry *o = d->gone ? NULL : mi_listing_find(old, d->name);
        if (o && o->own_mtime && !o->gone && mi_dentries_same_version(d, o)) {
            d->own_mtime = true;
            d->mtime = o->mtime;
            d->mtime_nsec = o->mtime_nsec;
            l->own_mtimes++;
        }
    }
}

void mi_listing_drop_times(struct om_meta *m, const char *dirkey, const struct listing *l)
{
    for (size_t k = 0; l && l->own_mtimes && k < l->n; k++) {
        if (l->v[k]->own_mtime && !l->v[k]->gone)
            mi_links_add(m, dirkey, l->v[k]->name);
    }
}

