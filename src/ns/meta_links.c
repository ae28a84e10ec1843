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


/* At most this many remembered numbers (1 MiB), and a sixteenth of the
 * metadata budget. */
#define MI_NUMBERS_MAX (1u << 16)
#define MI_NUMBERS_MIN 1024u
#define MI_NUMBER_DIR (1ULL << 63)

static bool numbers_grow(struct om_meta *m)
{
    size_t cap = m->numbers_cap ? 2 * m->numbers_cap : MI_NUMBERS_MIN;
    if (cap > MI_NUMBERS_MAX ||
        (m->cfg.memory_budget && cap * sizeof(struct mi_number) > m->cfg.memory_budget / 16))
        return m->numbers_cap > 0;
    struct mi_number *v = calloc(cap, sizeof(*v));
    if (!v)
        return m->numbers_cap > 0;
    mi_mem_charge(&m->mem, v);
    for (size_t k = 0; k < m->numbers_cap; k++) {
        if (m->numbers[k].h)
            v[m->numbers[k].h & (cap - 1)] = m->numbers[k];
    }
    mi_mem_free(&m->mem, m->numbers);
    m->numbers = v;
    m->numbers_cap = cap;
    m->numbers_since_growth = 0;
    return true;
}

void mi_numbers_keep(struct om_meta *m, const struct inode *i)
{
    if (!i->linked || i->retired || !i->parent || !i->parent->is_dir)
        return;
    if ((!m->numbers_cap || m->numbers_since_growth >= m->numbers_cap / 2) && !numbers_grow(m))
        return;
    uint64_t h = link_hash(i->parent->d->key, mi_name(i));
    m->numbers[h & (m->numbers_cap - 1)] =
        (struct mi_number){.h = h, .ino = i->ino | (i->is_dir ? MI_NUMBER_DIR : 0)};
    m->numbers_since_growth++;
}

uint64_t mi_numbers_take(struct om_meta *m, const char *dirkey, const char *name, bool is_dir)
{
    if (!m->numbers_cap)
        return 0;
    uint64_t h = link_hash(dirkey, name);
    struct mi_number *e = &m->numbers[h & (m->numbers_cap - 1)];
    if (e->h != h || ((e->ino & MI_NUMBER_DIR) != 0) != is_dir)
        return 0;
    uint64_t ino = e->ino & ~MI_NUMBER_DIR;
    *e = (struct mi_number){0};
    return mi_table_ino(&m->inodes, ino) ? 0 : ino;
}
