/* Listings: directory handles streamed page by page, and whole-directory
 * listings fetched in the background so that lookups in a directory cost
 * one LIST instead of a HEAD and a LIST per name.
 *
 * A listing being built by a directory handle belongs to that handle alone
 * until it is complete and installed on its directory. */
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

uint64_t mi_name_hash(const char *name)
{
    return om_hash_bytes(name, strlen(name));
}

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
        old->mtime = mtime;
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

struct page_ctx {
    struct om_meta *m;
    struct listing *l;
    size_t plen; /* length of the directory's key prefix */
};

static int page_entry(void *ud, const struct om_list_entry *e);

/* One listing page from the configured source (a manifest), else from S3. */
static int list_page(struct om_meta *m, const struct om_s3_list_params *p, struct page_ctx *ctx,
                     char **next, struct om_s3_error *err)
{
    if (m->cfg.list_page)
        return m->cfg.list_page(m->cfg.list_ud, p, page_entry, ctx, next, err);
    return om_s3_list_page(m->s3, p, page_entry, ctx, next, err);
}

struct slurp {
    struct om_meta *m;
    struct inode *dir;
    char *key;
    bool walk; /* listed ahead of a walk */
    uint32_t gen; /* dir->d->gen when it started */
};

static void walk_pump(struct om_meta *m);
static bool start_slurp(struct om_meta *m, struct inode *dir, bool walk);

/* Install a complete listing on its directory. Caller holds m->lock. */
void mi_install_listing(struct om_meta *m, struct inode *dir, struct listing *l)
{
    l->complete = true;
    l->expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
    if (l->cap > l->n && l->n > 0) {
        /* complete: names are seldom added now */
        size_t was = mi_mem_size(l->v);
        struct dentry **v = realloc(l->v, l->n * sizeof(*v));
        if (v) {
            mi_mem_sub(l->mem, was);
            mi_mem_charge(l->mem, v);
            l->v = v;
            l->cap = l->n;
        }
    }
    if (dir->d->listing)
        mi_lru_remove(m, dir->d->listing);
    mi_listing_put(dir->d->listing);
    dir->d->listing = l;
    l->dir = dir;
    mi_lru_touch(m, l);
    m->st.list_entries += l->n;
    mi_budget_check(m);
}

static void *slurp_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-list");
    struct slurp *j = arg;
    struct om_meta *m = j->m;
    struct inode *dir = j->dir;
    struct listing *l = mi_listing_new(m);
    int rc = l ? 0 : -ENOMEM;
    char *token = NULL;
    uint64_t pages = 0;
    bool done = false;
    while (!rc && !done) {
        struct page_ctx p = {.m = m, .l = l, .plen = strlen(j->key)};
        struct om_s3_list_params params = {.prefix = j->key, .delimiter = "/", .continuation = token};
        char *next = NULL;
        struct om_s3_error err;
        rc = list_page(m, &params, &p, &next, &err);
        free(token);
        token = next;
        pages++;
        if (!rc && token && l->n > SLURP_MAX_ENTRIES)
            rc = -EFBIG;
        pthread_mutex_lock(&m->lock);
        m->st.list_pages++;
        mi_budget_check(m);
        done = !rc && !token;
        dir->d->slurp_pages++;
        /* Stop when unmounting; when a name changed through the mount since
         * the listing started (installed, it would undo the change); ahead of
         * a walk, past a few pages: the walk's own handle lists a large
         * directory (opendir waits only that long). */
        if (!rc && (m->stopping || dir->d->gen != j->gen ||
                    (j->walk && !done && dir->d->slurp_pages >= WALK_WAIT_PAGES))) {
            rc = -ECANCELED;
            done = false;
        }
        if (done) {
            /* in the same step as the page: a waiting lookup finds it */
            mi_install_listing(m, dir, l);
            if (j->walk) {
                l->from_walk = true;
                m->st.walk_listings++;
            }
            om_debug("listed %s whole: %zu names in %" PRIu64 " pages",
                     *j->key ? j->key : "/", l->n, pages);
        }
        dir->d->slurp_first_page = true;
        pthread_cond_broadcast(&m->slurp_cond);
        pthread_mutex_unlock(&m->lock);
    }
    free(token);
    pthread_mutex_lock(&m->lock);
    if (!done) {
        mi_listing_put(l);
        if (rc != -ECANCELED)
            dir->d->slurp_retry_ms = om_now_ms() + m->cfg.entry_ttl_ms;
        if (rc != -EFBIG && rc != -ECANCELED)
            om_warn("listing %s: %s", *j->key ? j->key : "/", strerror(-rc));
    }
    dir->d->slurping = false;
    m->slurps--;
    mi_inode_unref(m, dir);
    if (j->walk) {
        m->walk_running--;
        walk_pump(m);
    }
    pthread_cond_broadcast(&m->slurp_cond);
    pthread_mutex_unlock(&m->lock);
    free(j->key);
    free(j);
    return NULL;
}

/* Start listing dir in the background. Caller holds m->lock. */
void mi_start_slurp(struct om_meta *m, struct inode *dir)
{
    start_slurp(m, dir, false);
}

/* Start the next queued walk listings. Caller holds m->lock. */
static void walk_pump(struct om_meta *m)
{
    while (!m->stopping && m->walk_running < WALK_PARALLEL && m->nwalk > 0) {
        struct inode *d = m->walk[--m->nwalk];
        d->d->walk_queued = false;
        if (d->linked && !d->d->slurping && !mi_listing_fresh(d->d->listing) &&
            start_slurp(m, d, true))
            m->walk_running++;
        mi_inode_unref(m, d);
    }
}

void mi_walk_ahead(struct om_meta *m, struct inode *dir, struct inode *opened)
{
    struct listing *l = dir->d->listing;
    if (!mi_listing_fresh(l) || !l->read_by_handle || m->stopping)
        return;
    long at = mi_listing_pos(l, mi_name(opened));
    if (at < 0)
        return;
    size_t from = OM_MAX(l->walk_upto, (size_t)at + 1);
    size_t to = OM_MIN(l->n, (size_t)at + 1 + WALK_AHEAD);
    if (from >= to)
        return;
    l->walk_upto = to;
    if (!m->walk && !(m->walk = calloc(WALK_MAX_QUEUED, sizeof(*m->walk))))
        return;
    /* pushed last to first: the walk opens them in listing order */
    for (size_t k = to; k-- > from && m->nwalk < WALK_MAX_QUEUED;) {
        struct dentry *e = l->v[k];
        if (!e->is_dir || e->gone)
            continue;
        struct inode *c = mi_child_get(dir, e->name);
        if (!c || c == opened || !c->is_dir || c->d->walk_queued || c->d->slurping ||
            mi_listing_fresh(c->d->listing))
            continue;
        c->refs++;
        c->d->walk_queued = true;
        m->walk[m->nwalk++] = c;
    }
    walk_pump(m);
}

/* Caller holds m->lock. False when the thread could not start. */
static bool start_slurp(struct om_meta *m, struct inode *dir, bool walk)
{
    struct slurp *j = calloc(1, sizeof(*j));
    if (!j || !(j->key = strdup(dir->d->key))) {
        free(j);
        return false;
    }
    j->m = m;
    j->dir = dir;
    j->walk = walk;
    j->gen = dir->d->gen;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    dir->refs++;
    dir->d->slurping = true;
    dir->d->slurp_first_page = false;
    dir->d->slurp_pages = 0;
    m->slurps++;
    bool started = pthread_create(&t, &attr, slurp_main, j) == 0;
    if (!started) {
        dir->refs--;
        dir->d->slurping = false;
        m->slurps--;
        free(j->key);
        free(j);
    }
    pthread_attr_destroy(&attr);
    return started;
}

int om_meta_opendir(struct om_meta *m, uint64_t ino, struct om_dirh **out)
{
    struct om_dirh *d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    pthread_mutex_lock(&m->lock);
    struct inode *i = mi_inode_get(m, ino);
    int rc = 0;
    if (!i)
        rc = -ESTALE;
    else if (!i->is_dir)
        rc = -ENOTDIR;
    if (!rc) {
        i->refs++;
        i->d->opens++;
        d->dir = i;
        if (i->parent)
            mi_walk_ahead(m, i->parent, i);
        /* a background listing of a small directory ends soon: wait for it
         * rather than list it twice */
        while (i->d->slurping && i->d->slurp_pages < WALK_WAIT_PAGES &&
               !mi_listing_fresh(i->d->listing))
            pthread_cond_wait(&m->slurp_cond, &m->lock);
        if (mi_listing_fresh(i->d->listing)) {
            d->l = i->d->listing;
            d->l->refs++;
            mi_lru_touch(m, d->l);
            d->l->read_by_handle = true;
            if (d->l->from_walk) {
                d->l->from_walk = false;
                m->st.walk_listings_used++;
            }
        } else {
            d->l = mi_listing_new(m);
            d->building = true;
            d->gen = i->d->gen;
            if (!d->l) {
                i->d->opens--;
                mi_inode_unref(m, i);
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
    if (!mi_valid_name(name)) {
        __atomic_fetch_add(&p->m->st.skipped_names, 1, __ATOMIC_RELAXED);
        om_info("skipping key '%s': its name cannot be a file name", e->key);
        return 0;
    }
    return mi_listing_add(p->l, name, is_dir, e->size, e->mtime, e->etag);
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
    int rc = list_page(m, &params, &p, &next, &err);
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
    mi_budget_check(m);
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* Install a completed listing on its directory. Caller holds m->lock. */
static void install(struct om_meta *m, struct om_dirh *d)
{
    d->building = false;
    d->l->read_by_handle = true;
    if (d->dir->d->gen != d->gen)
        return; /* names changed meanwhile: the handle keeps it to itself */
    d->l->refs++;
    mi_install_listing(m, d->dir, d->l);
}

int om_meta_readdir(struct om_meta *m, struct om_dirh *d, off_t off, bool plus,
                    om_meta_fill_fn fill, void *ud)
{
    /* offsets: 0 start, 1 after ".", 2 after "..", 2+k after entry k-1 */
    struct om_attr a;
    pthread_mutex_lock(&m->lock);
    if (off < 1) {
        mi_fill_attr(m, d->dir, &a);
        if (fill(ud, ".", &a, 1)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 1;
    }
    if (off < 2) {
        mi_fill_attr(m, d->dir->parent ? d->dir->parent : d->dir, &a);
        if (fill(ud, "..", &a, 2)) {
            pthread_mutex_unlock(&m->lock);
            return 0;
        }
        off = 2;
    }
    char *dirkey = strdup(d->dir->d->key);
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
            if (e->gone) {
                off = (off_t)(k + 3);
                continue;
            }
            struct inode *known = plus ? mi_child_get(d->dir, e->name) : NULL;
            if (plus && mi_meta_by_lookup(m, e->is_dir) &&
                !(known && known->meta_known && known->is_dir == e->is_dir)) {
                /* no attributes: the kernel looks the name up, which reads its
                 * metadata (metadata=head) */
                memset(&a, 0, sizeof(a));
                /* a listed file may be a symlink: DT_UNKNOWN makes find
                 * -type and the like ask (lstat), not trust DT_REG */
                a.mode = e->is_dir ? S_IFDIR : 0;
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
            } else if (plus && !e->is_dir && !known && mi_under_pressure(m)) {
                /* past the budget's low watermark: no inode the kernel would
                 * hold. Node id 0 makes the kernel keep neither an inode nor
                 * a lookup count (fuse_direntplus_link); d_type still says
                 * DT_REG, and a stat looks the name up, answered from this
                 * listing (told_plain) */
                memset(&a, 0, sizeof(a));
                a.mode = S_IFREG;
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
                if (!full) {
                    e->told_plain = true;
                    m->st.entries_without_inode++;
                }
            } else if (plus) {
                struct inode *c = mi_child_for(m, d->dir, e->name, e->is_dir);
                if (!c) {
                    rc = -ENOMEM;
                    break;
                }
                /* the listing wins only over attributes that expired */
                if (!e->is_dir && !c->pending && om_now_ms() >= c->attr_expire_ms)
                    mi_set_listed_attrs(m, c, e);
                else if (e->is_dir)
                    c->attr_expire_ms = om_now_ms() + m->cfg.entry_ttl_ms;
                mi_fill_attr(m, c, &a);
                full = fill(ud, e->name, &a, (off_t)(k + 3)) != 0;
                if (!full) {
                    c->nlookup++;
                    c->recent = true;
                } else if (c->nlookup == 0 && c->refs == 0) {
                    struct inode *parent = c->parent;
                    mi_inode_free(m, c);
                    mi_inode_unref(m, parent);
                }
            } else {
                memset(&a, 0, sizeof(a));
                a.ino = 0xffffffff; /* FUSE_UNKNOWN_INO: readdirplus gives real ones */
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
    mi_listing_put(d->l);
    d->dir->d->opens--;
    mi_inode_unref(m, d->dir);
    pthread_mutex_unlock(&m->lock);
    free(d);
}

