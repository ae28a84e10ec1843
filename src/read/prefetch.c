/* Prefetch across files (see include/objmount/prefetch.h): directory-order
 * streams followed on the opening thread (no request: the listing is in
 * memory, the GETs are asynchronous), hinted lists resolved and fetched by
 * HINT_THREADS threads of their own (a resolution may wait for a LIST, a
 * HEAD or a small file's whole GET: one thread would keep pace with the
 * loader, never ahead of it).
 *
 * Locks: pf->lock guards the streams, the hinted lists and the
 * statistics; it is never held while calling meta or the readers. */
#include "objmount/prefetch.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/util.h"

#define MAX_STREAMS 64        /* streams followed at once (least recent replaced) */
#define MAX_STRIDE 256        /* larger steps are not taken for an order */
#define TGID_SLOTS 256        /* thread id -> process, cached */
#define TGID_TTL_MS 10000
#define HINT_WINDOW_START 4
#define MAX_HINT_USERS 16
#define HINT_BYTES_MAX (64ULL << 20) /* key bytes per user's list */
#define HINT_THREADS 8 /* hinted files resolved at once (a lookup may wait for a GET) */

/* ---- the policy ---- */

int om_prefetch_window(uint32_t hits, int max_window)
{
    if (hits < 2 || max_window <= 0)
        return 0;
    uint64_t w = 1 + (uint64_t)(hits - 2) / OM_PREFETCH_WINDOW_HITS;
    return w > (uint64_t)max_window ? max_window : (int)w;
}

struct om_prefetch_step om_prefetch_next(struct om_prefetch_stream *s, uint64_t pos,
                                         int max_window)
{
    struct om_prefetch_step step = {0};
    if (!s->started) {
        *s = (struct om_prefetch_stream){.started = true, .last = pos, .issued_upto = pos};
        return step;
    }
    if (s->stride && pos == s->last + s->stride) {
        s->hits++;
    } else {
        /* not what was predicted: the window collapses, the step between
         * the last two opens is the next guess */
        step.missed = s->hits > 0 || s->stride != 0;
        s->stride = pos > s->last && pos - s->last <= MAX_STRIDE ? pos - s->last : 0;
        s->hits = s->stride ? 1 : 0;
        s->issued_upto = pos;
    }
    s->last = pos;
    int w = om_prefetch_window(s->hits, max_window);
    if (!s->stride || w == 0)
        return step;
    uint64_t target = pos + (uint64_t)w * s->stride;
    uint64_t from = OM_MAX(s->issued_upto, pos) + s->stride;
    /* positions between issued ones of another stride are not fetched */
    if (from > pos && (from - pos) % s->stride)
        from += s->stride - (from - pos) % s->stride;
    if (from > target)
        return step;
    step.first = from;
    step.stride = s->stride;
    step.count = (int)((target - from) / s->stride + 1);
    s->issued_upto = target;
    return step;
}

bool om_prefetch_may_read(mode_t mode, uid_t file_uid, gid_t file_gid, uid_t uid, gid_t gid)
{
    if (uid == 0)
        return true;
    if (uid == file_uid)
        return (mode & S_IRUSR) != 0;
    if (gid == file_gid)
        return (mode & S_IRGRP) != 0;
    return (mode & S_IROTH) != 0;
}

/* ---- state ---- */

struct stream {
    pid_t tgid;
    uint64_t dir;
    uint64_t used_ms; /* 0: free */
    bool counted;     /* prefetched at least once */
    struct om_prefetch_stream s;
};

struct hint_item {
    struct om_hnode node; /* in the list's index, by key */
    char *key;
    uint64_t index;
    bool opened, issued;
};

/* One user's hinted list: items[base..n) are not all opened yet. */
struct hint_list {
    uid_t uid;
    gid_t gid;
    struct hint_item **items;
    uint64_t n, cap;
    uint64_t base;   /* first item not opened (everything before is) */
    uint64_t issued; /* items before this were handed to the resolver */
    uint64_t bytes;  /* key bytes held */
    int window;
    struct om_htable index;
};

struct om_prefetcher {
    struct om_meta *meta;
    struct om_readers *rs;
    struct om_prefetch_config cfg;
    char *prefix;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct stream streams[MAX_STREAMS];
    struct {
        pid_t tid, tgid;
        uint64_t at_ms;
    } tgids[TGID_SLOTS];
    struct hint_list *lists[MAX_HINT_USERS];
    int nlists;
    bool stopping;
    pthread_t threads[HINT_THREADS];
    int nthreads;
    struct om_prefetch_stats st;
};

/* ---- directory order ---- */

/* The process of thread tid, cached for TGID_TTL_MS. Caller holds lock. */
static pid_t tgid_of(struct om_prefetcher *pf, pid_t tid)
{
    if (tid <= 0)
        return 0;
    uint64_t now = om_now_ms();
    unsigned slot = (unsigned)tid % TGID_SLOTS;
    if (pf->tgids[slot].tid == tid && now - pf->tgids[slot].at_ms < TGID_TTL_MS)
        return pf->tgids[slot].tgid;
    pid_t tgid = om_tgid_of(tid);
    if (!tgid)
        tgid = tid; /* gone already: the thread stands for itself */
    pf->tgids[slot].tid = tid;
    pf->tgids[slot].tgid = tgid;
    pf->tgids[slot].at_ms = now;
    return tgid;
}

/* The stream of (tgid, dir), made (in place of the least recent) when
 * there is none. Caller holds lock. */
static struct stream *stream_for(struct om_prefetcher *pf, pid_t tgid, uint64_t dir)
{
    struct stream *oldest = &pf->streams[0];
    for (int i = 0; i < MAX_STREAMS; i++) {
        struct stream *x = &pf->streams[i];
        if (x->used_ms && x->tgid == tgid && x->dir == dir)
            return x;
        if (x->used_ms < oldest->used_ms)
            oldest = x;
    }
    *oldest = (struct stream){.tgid = tgid, .dir = dir};
    return oldest;
}

/* Fetch the files of a step of directory dir. No lock held. */
static int fetch_listed(struct om_prefetcher *pf, uint64_t dir, const struct om_prefetch_step *st)
{
    struct om_listed_file *files = calloc((size_t)st->count, sizeof(*files));
    if (!files)
        return 0;
    int n = om_meta_listed_files(pf->meta, dir, st->first, st->stride, st->count, files);
    int fetched = 0;
    for (int i = 0; i < n; i++) {
        if (om_readers_prefetch(pf->rs, files[i].key, files[i].etag, files[i].size,
                                pf->cfg.max_file_bytes) == 0)
            fetched++;
    }
    if (n > 0)
        om_listed_files_free(files, n);
    free(files);
    return fetched;
}

/* ---- hints ---- */

static uint64_t key_hash(const char *key)
{
    return om_hash_bytes(key, strlen(key));
}

static struct hint_list *list_of(struct om_prefetcher *pf, uid_t uid)
{
    for (int i = 0; i < pf->nlists; i++)
        if (pf->lists[i]->uid == uid)
            return pf->lists[i];
    return NULL;
}

static struct hint_item *list_find(struct hint_list *l, const char *key)
{
    uint64_t h = key_hash(key);
    for (struct om_hnode *n = om_htable_first(&l->index, h); n; n = om_htable_next(n, h)) {
        struct hint_item *it = om_container_of(n, struct hint_item, node);
        if (strcmp(it->key, key) == 0)
            return it;
    }
    return NULL;
}

static void item_free(struct hint_list *l, struct hint_item *it)
{
    om_htable_remove(&l->index, &it->node);
    l->bytes -= strlen(it->key) + 1;
    free(it->key);
    free(it);
}

static void list_clear(struct hint_list *l)
{
    for (uint64_t i = 0; i < l->n; i++)
        if (l->items[i])
            item_free(l, l->items[i]);
    l->n = l->base = l->issued = 0;
    l->window = HINT_WINDOW_START;
}

/* Forget the opened items before base once they are half the list. */
static void list_compact(struct hint_list *l)
{
    if (l->base < 1024 || l->base < l->n / 2)
        return;
    for (uint64_t i = 0; i < l->base; i++)
        if (l->items[i])
            item_free(l, l->items[i]);
    memmove(l->items, l->items + l->base, (size_t)(l->n - l->base) * sizeof(*l->items));
    l->n -= l->base;
    l->issued -= OM_MIN(l->issued, l->base);
    l->base = 0;
    for (uint64_t i = 0; i < l->n; i++)
        l->items[i]->index = i;
}

static void list_free(struct hint_list *l)
{
    list_clear(l);
    om_htable_destroy(&l->index);
    free(l->items);
    free(l);
}

/* Is there hinted work for the resolver? Caller holds lock. */
static bool hint_work(struct om_prefetcher *pf)
{
    for (int i = 0; i < pf->nlists; i++) {
        struct hint_list *l = pf->lists[i];
        if (l->issued < l->n && l->issued < l->base + (uint64_t)l->window)
            return true;
    }
    return false;
}

/* A hinted key was opened by its user: it is consumed, and the window
 * moves. Caller holds lock. */
static void hint_opened(struct om_prefetcher *pf, uid_t uid, const char *key)
{
    struct hint_list *l = list_of(pf, uid);
    struct hint_item *it = l ? list_find(l, key) : NULL;
    if (!it || it->opened)
        return;
    it->opened = true;
    l->window = OM_MIN(l->window + (it->issued ? 1 : 2), pf->cfg.max_hint_window);
    while (l->base < l->n && l->items[l->base]->opened)
        l->base++;
    list_compact(l);
    if (hint_work(pf))
        pthread_cond_broadcast(&pf->work);
}

/* Was the hinted key opened by its user while it was being resolved (or
 * is it no longer hinted: opened and forgotten, or the list replaced)? */
static bool opened_meanwhile(struct om_prefetcher *pf, uid_t uid, const char *key)
{
    pthread_mutex_lock(&pf->lock);
    struct hint_list *l = list_of(pf, uid);
    struct hint_item *it = l ? list_find(l, key) : NULL;
    bool gone = !it || it->opened;
    pthread_mutex_unlock(&pf->lock);
    return gone;
}

/* Resolve one hinted key and fetch it, for uid/gid. No lock held. */
static void hint_fetch(struct om_prefetcher *pf, const char *key, uid_t uid, gid_t gid)
{
    size_t plen = strlen(pf->prefix);
    const char *path = strncmp(key, pf->prefix, plen) == 0 ? key + plen : NULL;
    struct om_attr a;
    char *k = NULL;
    int rc = path ? om_meta_resolve_path(pf->meta, path, &a, &k) : -EINVAL;
    bool ok = rc == 0 && S_ISREG(a.mode) && om_prefetch_may_read(a.mode, a.uid, a.gid, uid, gid);
    if (ok && opened_meanwhile(pf, uid, key)) {
        /* the loader outran the resolution: what it fetched is read (a
         * small file came whole with the lookup), nothing more to fetch */
        free(k);
        return;
    }
    if (ok && a.size > 0) /* without a listed version, the prefetch asks it */
        ok = om_readers_prefetch(pf->rs, k, a.etag, a.size, pf->cfg.max_file_bytes) != -EINVAL;
    else
        ok = ok && a.size == 0; /* an empty file: nothing to fetch, nothing skipped */
    free(k);
    pthread_mutex_lock(&pf->lock);
    if (!ok)
        pf->st.hint_skipped++;
    else if (a.size > 0)
        pf->st.hint_files++;
    pthread_mutex_unlock(&pf->lock);
    if (!ok)
        om_debug("prefetch hint %s: skipped (%s)", key,
                 rc ? strerror(-rc) : !S_ISREG(a.mode) ? "not a regular file" : "not readable");
}

static void *resolver_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-prefetch");
    struct om_prefetcher *pf = arg;
    pthread_mutex_lock(&pf->lock);
    while (!pf->stopping) {
        struct hint_list *l = NULL;
        for (int i = 0; i < pf->nlists && !l; i++) {
            struct hint_list *x = pf->lists[i];
            if (x->issued < x->n && x->issued < x->base + (uint64_t)x->window)
                l = x;
        }
        if (!l) {
            /* what was fetched ahead and never opened is given back by the
             * readers' janitor */
            pthread_cond_wait(&pf->work, &pf->lock);
            continue;
        }
        struct hint_item *it = l->items[l->issued++];
        if (it->opened)
            continue; /* opened before its turn */
        it->issued = true;
        char *key = strdup(it->key);
        uid_t uid = l->uid;
        gid_t gid = l->gid;
        pthread_mutex_unlock(&pf->lock);
        if (key)
            hint_fetch(pf, key, uid, gid);
        free(key);
        pthread_mutex_lock(&pf->lock);
    }
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

/* The path p[0..n) as opens will name it: empty and "." components go, a
 * ".." or a control byte makes it no path (0, *out NULL). Returns the
 * length of *out (caller frees). */
static size_t normalize(const char *p, size_t n, char **out)
{
    *out = NULL;
    char *path = malloc(n + 1);
    if (!path)
        return 0;
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && p[j] != '/')
            j++;
        size_t c = j - i;
        bool dots = c == 2 && p[i] == '.' && p[i + 1] == '.';
        for (size_t k = i; k < j && !dots; k++)
            dots = (unsigned char)p[k] < 0x20;
        if (dots) {
            free(path);
            return 0;
        }
        if (c && !(c == 1 && p[i] == '.')) {
            if (len)
                path[len++] = '/';
            memcpy(path + len, p + i, c);
            len += c;
        }
        i = j + 1;
    }
    path[len] = '\0';
    if (!len) {
        free(path);
        return 0;
    }
    *out = path;
    return len;
}

int om_prefetch_hint(struct om_prefetcher *pf, uid_t uid, gid_t gid, const char *dirkey,
                     const char *buf, size_t len)
{
    const char *nul = len ? memchr(buf, '\0', len) : NULL;
    if (!nul || nul == buf || (buf[0] != 'r' && buf[0] != 'a'))
        return -EINVAL;
    bool replace = buf[0] == 'r';
    pthread_mutex_lock(&pf->lock);
    struct hint_list *l = list_of(pf, uid);
    int rc = 0;
    if (!l) {
        l = pf->nlists < MAX_HINT_USERS ? calloc(1, sizeof(*l)) : NULL;
        if (!l || om_htable_init(&l->index, 1024)) {
            free(l);
            pthread_mutex_unlock(&pf->lock);
            return -ENOBUFS;
        }
        l->uid = uid;
        l->window = HINT_WINDOW_START;
        pf->lists[pf->nlists++] = l;
    }
    l->gid = gid;
    if (replace)
        list_clear(l);
    for (const char *p = buf + 1; p < nul && !rc;) {
        const char *e = memchr(p, '\n', (size_t)(nul - p));
        if (!e)
            e = nul;
        char *path = NULL;
        size_t n = normalize(p, (size_t)(e - p), &path);
        if (n && l->n - l->base >= OM_PREFETCH_HINTS_MAX)
            rc = -ENOBUFS;
        char *key = NULL;
        if (n && !rc && l->bytes < HINT_BYTES_MAX && asprintf(&key, "%s%s", dirkey, path) < 0)
            key = NULL;
        free(path);
        if (n && !rc && !key)
            rc = -ENOBUFS;
        if (key && list_find(l, key)) {
            free(key); /* hinted twice: its first place counts */
            key = NULL;
        }
        if (key && l->n == l->cap) {
            uint64_t cap = l->cap ? l->cap * 2 : 1024;
            struct hint_item **v = realloc(l->items, (size_t)cap * sizeof(*v));
            if (v) {
                l->items = v;
                l->cap = cap;
            }
        }
        struct hint_item *it = key && l->n < l->cap ? calloc(1, sizeof(*it)) : NULL;
        if (it) {
            it->key = key;
            it->index = l->n;
            l->items[l->n++] = it;
            l->bytes += strlen(key) + 1;
            om_htable_insert(&l->index, &it->node, key_hash(key));
            pf->st.hinted++;
        } else if (key) {
            free(key);
            rc = -ENOBUFS;
        }
        p = e + 1;
    }
    if (hint_work(pf))
        pthread_cond_broadcast(&pf->work);
    pthread_mutex_unlock(&pf->lock);
    return rc;
}

/* ---- both ---- */

void om_prefetch_opened(struct om_prefetcher *pf, pid_t tid, uid_t uid, uint64_t ino,
                        const char *key)
{
    if (!pf)
        return;
    uint64_t dir, pos;
    bool listed = om_meta_listed_pos(pf->meta, ino, &dir, &pos) == 0;
    struct om_prefetch_step step = {0};
    pthread_mutex_lock(&pf->lock);
    if (pf->nlists)
        hint_opened(pf, uid, key);
    if (listed) {
        struct stream *s = stream_for(pf, tgid_of(pf, tid), dir);
        s->used_ms = om_now_ms();
        step = om_prefetch_next(&s->s, pos, pf->cfg.max_window);
        if (step.count && !s->counted) {
            s->counted = true;
            pf->st.order_streams++;
        }
    }
    pthread_mutex_unlock(&pf->lock);
    if (!step.count)
        return;
    int fetched = fetch_listed(pf, dir, &step);
    pthread_mutex_lock(&pf->lock);
    pf->st.order_files += (uint64_t)fetched;
    pthread_mutex_unlock(&pf->lock);
}

struct om_prefetcher *om_prefetcher_new(struct om_meta *m, struct om_readers *rs,
                                        const struct om_prefetch_config *cfg)
{
    struct om_prefetcher *pf = calloc(1, sizeof(*pf));
    if (!pf)
        return NULL;
    pf->meta = m;
    pf->rs = rs;
    pf->cfg = *cfg;
    pf->prefix = strdup(cfg->prefix ? cfg->prefix : "");
    if (!pf->prefix) {
        free(pf);
        return NULL;
    }
    pf->cfg.prefix = pf->prefix;
    pthread_mutex_init(&pf->lock, NULL);
    om_cond_init_monotonic(&pf->work);
    for (int i = 0; i < HINT_THREADS; i++)
        pf->nthreads += pthread_create(&pf->threads[pf->nthreads], NULL, resolver_main, pf) == 0;
    if (!pf->nthreads)
        om_warn("prefetch: no thread for hints (%s): hinted files are not fetched ahead",
                strerror(errno));
    return pf;
}

void om_prefetcher_free(struct om_prefetcher *pf)
{
    if (!pf)
        return;
    pthread_mutex_lock(&pf->lock);
    pf->stopping = true;
    pthread_cond_broadcast(&pf->work);
    pthread_mutex_unlock(&pf->lock);
    for (int i = 0; i < pf->nthreads; i++)
        pthread_join(pf->threads[i], NULL);
    for (int i = 0; i < pf->nlists; i++)
        list_free(pf->lists[i]);
    pthread_cond_destroy(&pf->work);
    pthread_mutex_destroy(&pf->lock);
    free(pf->prefix);
    free(pf);
}

void om_prefetch_get_stats(struct om_prefetcher *pf, struct om_prefetch_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!pf)
        return;
    pthread_mutex_lock(&pf->lock);
    *out = pf->st;
    pthread_mutex_unlock(&pf->lock);
}
