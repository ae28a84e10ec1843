/* The read path: segments of objects in pooled buffers, shared by every
 * handle of the same object version, sequential prefetch, random reads, a
 * byte budget.
 *
 * An object version (key, ETag, size) read through the mount is one struct
 * robj, found by every handle that opens it: its sorted list of
 * non-overlapping segments, each one ranged GET into its own mmap'd buffer
 * (so freed memory really leaves the process), is fetched once for all of
 * them. Four DataLoader workers reading their quarters of one shard, or
 * ranks loading one checkpoint, share what any of them fetched, where each
 * handle used to fetch its own (1.76 times the object for four readers,
 * and each handle's prefetch window ran on into the next reader's range).
 * Each handle (struct om_reader) keeps only its own sequential state: the
 * read plan (read_plan.c) is made from it, and executed on the object.
 *
 * Segment state, object lists and the pool's LRU are guarded by rs->lock;
 * GET completions arrive on the engine thread and take it too. A segment
 * is evictable when it is ready and nobody has it pinned. Buffers of
 * segments that are done go to a small list of spares (at most SPARE_MAX
 * bytes, within the memory limit) that the next segment of the same size
 * takes over: a streaming reader then faults no pages in and unmaps none
 * (a quarter of the read path's CPU before). The spares are unmapped when
 * no reader is open any more, or when the limit needs room. (Huge pages
 * were tried for new buffers: compaction made a 4-stream read 3.5 times as
 * costly.)
 *
 * An object nobody has open is kept only while it waits for an open: the
 * whole small object a lookup fetched, or one fetched ahead of its open
 * (the "stash", newest first, at most MAX_STASHED); its buffers are
 * evictable like any other, and a thread of its own (janitor_main) drops
 * what waited longer than LOOKUP_TTL_MS / PREFETCH_TTL_MS, so that an idle
 * mount gives its read memory back. The last close of any other object
 * frees it.
 *
 * A read (om_reader_view) decides nothing itself: under the lock it counts
 * the read, asks om_read_plan_make (read_plan.c, pure) what to fetch from
 * the handle's numbers, executes that plan (plan_execute: cancel its own
 * prefetch, cover() the demand and prefetch ranges on the object, move the
 * frontier, maybe start a background fill), then pins what covers the
 * request and waits for it. */
#include "objmount/reader.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>

#include "objmount/dcache.h"
#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/read_plan.h"
#include "objmount/util.h"

#define MAX_SEGMENTS_PER_READER 256
#define SPARE_MAX (64ULL << 20)
#define MAX_STASHED 256 /* whole small objects fetched by lookups, waiting for their open */
#define LOOKUP_WINDOW 32
/* Background fill of randomly read objects into the data cache: every
 * OM_READ_FILL_AFTER random reads of one open file (the plan says when), the
 * whole object (up to a quarter of the cache's bound) is fetched by
 * FILL_THREADS ranged GETs of up to FILL_CHUNK blocks each, at most MAX_FILLS
 * objects at a time. */
#define FILL_MEMORY_SHARE 2 /* without a data cache: objects up to memory_limit / 2 */
#define FILL_MEMORY_INFLIGHT 32 /* part-sized GETs a memory fill keeps in flight */
#define PREFETCH_TTL_MS 30000 /* a prefetched object not opened by then is dropped */
#define LOOKUP_TTL_MS 10000   /* a lookup's whole object not opened by then is dropped */
#define JANITOR_MS 2000       /* how often the stash is looked at while it holds objects */
#define FILL_THREADS 16
#define FILL_CHUNK 4
#define MAX_FILLS 2

enum seg_state { SEG_LOADING, SEG_READY, SEG_ERROR };

struct robj;

struct om_read_seg {
    struct robj *o;
    /* the handle whose plan started it, while no other handle's plan has
     * covered it: only that handle's seeks cancel it */
    struct om_reader *starter;
    uint64_t off, len;
    char *buf;
    size_t maplen;
    enum seg_state state;
    int error;
    int pins;
    bool dead; /* no longer in the object's list; freed when the GET ends */
    bool in_lru;
    bool prefetch;
    bool from_cache; /* being read from the data cache (no GET to cancel) */
    bool filling;    /* one of the memory fill's GETs in flight (fill_memory) */
    struct om_read_seg *next; /* object list, by offset */
    struct om_read_seg *lru_prev, *lru_next;
    struct om_store_get get;
};

#define OM_PAST_RUNS 8 /* run starts of closed handles an object remembers */

/* One version of one object, as read through the mount. */
struct robj {
    struct om_readers *rs;
    struct om_hnode node; /* in rs->objs while shared (its ETag is known) */
    bool in_table;
    char *key;
    uint64_t size;
    char etag[OM_ETAG_MAX];
    struct om_read_seg *segs;
    int nsegs;
    struct om_reader *readers; /* open handles, through om_reader.o_next */
    int nreaders;
    int loading; /* GETs and cache loads in flight */
    uint64_t gets; /* ranged GETs of this version started, by every handle */
    int stores;  /* segments the data cache is still copying */
    bool cacheable; /* the data cache may hold blocks of this version */
    struct om_dcache_obj dobj;
    /* every block is in the data cache: reads are replied straight from the
     * block files (view_from_files), not through read buffers */
    bool from_files;
    bool filled_memory; /* read at random: fetched whole into the pool (fill_memory) */
    uint64_t fill_next; /* where the memory fill goes on */
    int fill_inflight;  /* its GETs in flight */
    unsigned demand_segs; /* segments its handles' reads started for their own bytes */
    /* reads of its handles that had to start a GET of their own (their
     * bytes neither in memory nor on the way), streaming readers' aside:
     * for fill_memory */
    unsigned fetching_reads;
    bool stashed;            /* in rs->stash: a lookup's whole object, waiting for its open */
    struct robj *stash_next; /* newer to older */
    /* fetched ahead of an open the prefetch across files expects
     * (om_readers_prefetch): waits in the stash like a lookup's object */
    bool prefetched;
    bool opened;             /* a handle opened it */
    /* the object's attributes, from the first GET of it that succeeded: a
     * lookup for the open of an object the pool holds whole is answered
     * from them, without a request */
    struct om_object head;
    bool has_head;
    uint64_t head_ms; /* when that GET ended */
    uint64_t prefetch_bytes; /* what the prefetch fetched of it */
    /* where streaming handles that have closed began their runs: another
     * worker's share, which it has read (prefetch_stop) */
    uint64_t past_runs[OM_PAST_RUNS];
    unsigned npast;
    uint64_t stashed_ms;     /* when it was stashed (prefetched ones expire) */
};

/* A lookup's whole-object GET under way: a second lookup of the same key
 * (the kernel's, racing the prefetch's resolution of a hint) waits for it
 * and is answered from what it fetched, instead of a GET of its own. */
struct whole_fetch {
    const char *key;
    struct whole_fetch *next;
};

struct om_readers {
    struct om_store *store;
    struct om_readers_config cfg;
    struct whole_fetch *fetching;
    /* cfg's numbers the read plans use */
    struct om_read_plan_config plan_cfg;
    uint64_t reserve; /* kept free for reads that need data now */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t used; /* mapped: segments and spares */
    /* Unused buffers kept mapped for reuse; each one's first bytes hold its
     * list node. */
    struct spare *spares;
    uint64_t spare_bytes;
    struct om_read_seg *lru_head, *lru_tail; /* oldest first */
    /* object versions with a known ETag, by key: what a new handle joins */
    struct om_htable objs;
    uint64_t nobjs; /* all objects, in the table or not */
    /* Whole small objects that a lookup fetched (newest first): the next
     * open of the same key and ETag takes the object over. Their buffers
     * are evictable like any other. */
    struct robj *stash;
    int nstash;
    /* Whether lookups pay off as GETs: over each LOOKUP_WINDOW lookups of
     * small objects, opens of small objects must be at least a quarter of
     * them, or lookups HEAD for the next window (stat-only work: ls -l with
     * metadata=head, find -size, du, rm -r). */
    unsigned win_lookups, win_opens;
    bool lookups_head;
    uint64_t fill_max; /* largest object filled in the background */
    /* background fills: their objects (key and ETag), and a stop flag */
    struct fill *fills[MAX_FILLS];
    int nfills;
    bool stopping;
    /* the janitor: wakes every JANITOR_MS while the stash holds objects */
    pthread_t janitor;
    pthread_cond_t stash_cv; /* CLOCK_MONOTONIC */
    bool janitor_running;
    struct om_readers_stats st;
};

/* One open handle's view of an object: its own sequential state. */
struct om_reader {
    struct om_readers *rs;
    struct robj *o;
    struct om_reader *o_next; /* the object's other handles */
    uint64_t pos;    /* end of the last read */
    uint64_t ahead;  /* sequential frontier: data is requested up to here */
    uint64_t window; /* current prefetch window */
    uint64_t streak; /* sequential bytes read since the window last grew */
    int views;       /* views not yet done: close waits for them */
    unsigned random_reads;
    unsigned seq_run; /* sequential reads in a row: a streaming reader */
    uint64_t run_start; /* where the handle's current sequential run began */
    uint64_t file_block; /* 1 + the last block view_from_files counted an access of */
    uint64_t chunk_max;  /* GET size of sequential reads (om_reader_set_chunk); 0: part_size */
    bool files_checked;  /* all_in_files looked at the object for this handle */
    bool closing;
};

/* ---- pool ---- */

static void lru_remove(struct om_readers *rs, struct om_read_seg *s)
{
    if (!s->in_lru)
        return;
    if (s->lru_prev)
        s->lru_prev->lru_next = s->lru_next;
    else
        rs->lru_head = s->lru_next;
    if (s->lru_next)
        s->lru_next->lru_prev = s->lru_prev;
    else
        rs->lru_tail = s->lru_prev;
    s->lru_prev = s->lru_next = NULL;
    s->in_lru = false;
}

static void lru_push(struct om_readers *rs, struct om_read_seg *s)
{
    if (s->in_lru || s->dead || s->pins > 0 || s->state != SEG_READY)
        return;
    s->lru_prev = rs->lru_tail;
    s->lru_next = NULL;
    if (rs->lru_tail)
        rs->lru_tail->lru_next = s;
    else
        rs->lru_head = s;
    rs->lru_tail = s;
    s->in_lru = true;
}

struct spare {
    struct spare *next;
    size_t maplen;
};

static void spare_unmap(struct om_readers *rs, struct spare *sp)
{
    rs->spare_bytes -= sp->maplen;
    rs->used -= sp->maplen;
    munmap(sp, sp->maplen);
}

/* Unmap every spare buffer. Caller holds lock. */
static void spares_drop(struct om_readers *rs)
{
    while (rs->spares) {
        struct spare *sp = rs->spares;
        rs->spares = sp->next;
        spare_unmap(rs, sp);
    }
}

/* A buffer nobody uses any more: kept as a spare when there is room among
 * them, else unmapped. Caller holds lock. */
static void buf_release(struct om_readers *rs, char *buf, size_t maplen)
{
    if (rs->spare_bytes + maplen <= OM_MIN(SPARE_MAX, rs->cfg.memory_limit / 4) &&
        rs->st.open_readers > 0) {
        struct spare *sp = (struct spare *)(void *)buf;
        sp->maplen = maplen;
        sp->next = rs->spares;
        rs->spares = sp;
        rs->spare_bytes += maplen;
    } else {
        munmap(buf, maplen);
        rs->used -= maplen;
    }
    pthread_cond_broadcast(&rs->cond);
}

/* A spare buffer of exactly maplen bytes, taken off the list, or NULL.
 * Caller holds lock. */
static char *spare_take(struct om_readers *rs, size_t maplen)
{
    for (struct spare **pp = &rs->spares; *pp; pp = &(*pp)->next) {
        struct spare *sp = *pp;
        if (sp->maplen == maplen) {
            *pp = sp->next;
            rs->spare_bytes -= maplen;
            return (char *)sp;
        }
    }
    return NULL;
}

static void seg_release_memory(struct om_readers *rs, struct om_read_seg *s)
{
    if (s->buf) {
        buf_release(rs, s->buf, s->maplen);
        s->buf = NULL;
    }
}

static void obj_check(struct om_readers *rs, struct robj *o);

/* Take s out of its object's list. Frees it unless a GET is still writing
 * into it (then it is freed when the GET ends). A stashed object whose
 * last segment goes is freed too. Caller holds lock; s->o may be gone
 * afterwards unless a handle holds it. */
static void seg_drop(struct om_readers *rs, struct om_read_seg *s)
{
    struct robj *o = s->o;
    for (struct om_read_seg **pp = &o->segs; *pp; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            o->nsegs--;
            break;
        }
    }
    lru_remove(rs, s);
    s->dead = true;
    if (s->state == SEG_LOADING)
        return;
    seg_release_memory(rs, s);
    free(s);
    obj_check(rs, o);
}

static bool evict_one(struct om_readers *rs)
{
    struct om_read_seg *s = rs->lru_head;
    if (!s)
        return false;
    rs->st.evictions++;
    seg_drop(rs, s);
    return true;
}

static bool stash_drop_oldest(struct om_readers *rs);

/* Memory for a segment. Prefetch (and a lookup's whole-object GET) takes
 * the place of stashed objects nobody opened yet, then gives up when the
 * pool is above its reserve; a demand read evicts unused buffers or waits.
 * Caller holds lock. */
static char *pool_alloc(struct om_readers *rs, size_t maplen, bool demand)
{
    uint64_t limit = demand ? rs->cfg.memory_limit : rs->cfg.memory_limit - rs->reserve;
    char *spare = spare_take(rs, maplen);
    if (spare)
        return spare; /* already counted in used */
    bool waited = false;
    while (rs->used + maplen > limit) {
        if (rs->spares) {
            struct spare *sp = rs->spares;
            rs->spares = sp->next;
            spare_unmap(rs, sp);
            continue;
        }
        if (!demand && stash_drop_oldest(rs))
            continue;
        if (!demand)
            return NULL;
        if (evict_one(rs))
            continue;
        if (!waited)
            rs->st.waits++;
        waited = true;
        pthread_cond_wait(&rs->cond, &rs->lock);
    }
    /* every byte of a buffer is written (by a GET or a data cache read):
     * its pages are made at once rather than faulted in one by one */
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    rs->used += maplen;
    if (rs->used > rs->st.memory_peak)
        rs->st.memory_peak = rs->used;
    return p;
}

/* ---- segments ---- */

static void stored(void *ud, int rc);

/* Offer the whole blocks of a segment just fetched to the data cache; the
 * segment stays pinned until they are copied. Caller holds rs->lock. */
static void offer_to_cache(struct om_readers *rs, struct om_read_seg *s)
{
    struct robj *o = s->o;
    if (!o->cacheable || s->off % OM_DCACHE_BLOCK)
        return;
    uint64_t n = s->len / OM_DCACHE_BLOCK;
    if (s->off + s->len == o->size && s->len % OM_DCACHE_BLOCK)
        n++; /* the object's short last block */
    if (!n)
        return;
    s->pins++;
    o->stores++;
    if (!om_dcache_store(rs->cfg.dcache, &o->dobj, s->off / OM_DCACHE_BLOCK, n, s->buf, stored,
                         s)) {
        s->pins--;
        o->stores--;
    }
}

static void stored(void *ud, int rc)
{
    (void)rc;
    struct om_read_seg *s = ud;
    struct robj *o = s->o;
    struct om_readers *rs = o->rs;
    pthread_mutex_lock(&rs->lock);
    s->pins--;
    o->stores--;
    lru_push(rs, s);
    pthread_cond_broadcast(&rs->cond);
    obj_check(rs, o); /* its last handle may have closed meanwhile */
    pthread_mutex_unlock(&rs->lock);
}

static void fill_more(struct om_readers *rs, struct robj *o);

/* A segment's bytes arrived (or failed). Caller holds rs->lock. */
static void seg_loaded(struct om_readers *rs, struct om_read_seg *s, bool ok)
{
    struct robj *o = s->o;
    o->loading--;
    bool filling = s->filling;
    if (filling) {
        s->filling = false;
        o->fill_inflight--;
    }
    if (ok) {
        s->state = SEG_READY;
        if (!s->from_cache && !s->dead)
            offer_to_cache(rs, s);
    }
    if (s->dead) {
        seg_release_memory(rs, s);
        free(s);
    } else if (!ok && o->nreaders == 0) {
        /* a prefetch nobody waits for failed: an open fetches it again,
         * the failure is nobody's error */
        pthread_cond_broadcast(&rs->cond);
        seg_drop(rs, s); /* may free o */
        return;
    } else {
        lru_push(rs, s);
    }
    if (filling && ok && o->nreaders > 0 && !rs->stopping)
        fill_more(rs, o);
    pthread_cond_broadcast(&rs->cond);
    obj_check(rs, o); /* its last handle may have closed meanwhile */
}

static void on_get_done(struct om_store_get *g)
{
    struct om_read_seg *s = g->ud;
    struct robj *o = s->o;
    struct om_readers *rs = o->rs;
    pthread_mutex_lock(&rs->lock);
    bool ok = false;
    if (g->error) {
        s->state = SEG_ERROR;
        s->error = g->error;
        if (g->error == -ESTALE || g->error == -ENOENT) {
            rs->st.get_errors++; /* logged once by the caller (or the S3 layer) */
        } else if (g->error != -ECANCELED) {
            rs->st.get_errors++;
            om_warn("read %s [%" PRIu64 ", +%" PRIu64 "): %s (HTTP %ld %s)%s%s", o->key, s->off,
                    s->len, strerror(-g->error), g->err.status, g->err.code,
                    g->err.message[0] ? ": " : "", g->err.message);
        }
    } else if (g->got != s->len) {
        /* the object is shorter than it was at open */
        s->state = SEG_ERROR;
        s->error = -EIO;
        rs->st.get_errors++;
        om_warn("read %s: got %" PRIu64 " of %" PRIu64 " bytes at %" PRIu64
                ": the object changed size",
                o->key, g->got, s->len, s->off);
    } else {
        ok = true;
        if (!o->has_head && g->obj.etag[0] && g->obj.size == o->size) {
            o->head = g->obj;
            o->has_head = true;
            o->head_ms = om_now_ms();
        }
    }
    seg_loaded(rs, s, ok);
    pthread_mutex_unlock(&rs->lock);
}

static void submit_get(struct om_readers *rs, struct om_read_seg *s);

/* The data cache read a segment, or could not (a block was missing or
 * bad): then the store is asked. */
static void on_cache_loaded(void *ud, int rc)
{
    struct om_read_seg *s = ud;
    struct om_readers *rs = s->o->rs;
    pthread_mutex_lock(&rs->lock);
    if (rc == 0 || s->dead) {
        if (rc == 0)
            rs->st.cache_loads++;
        seg_loaded(rs, s, rc == 0);
    } else {
        s->from_cache = false;
        s->o->loading--;
        submit_get(rs, s);
    }
    pthread_mutex_unlock(&rs->lock);
}

/* The segment covering off, or NULL. */
static struct om_read_seg *seg_at(struct robj *o, uint64_t off)
{
    for (struct om_read_seg *s = o->segs; s && s->off <= off; s = s->next) {
        if (off < s->off + s->len)
            return s;
    }
    return NULL;
}

/* Start of the first segment at or after off, or the object size. */
static uint64_t next_start(struct robj *o, uint64_t off)
{
    for (struct om_read_seg *s = o->segs; s; s = s->next) {
        if (s->off >= off)
            return s->off;
    }
    return o->size;
}

/* Create and start a segment [off, off+len) in a gap of o's list for
 * handle starter (NULL: nobody's to cancel), read from the data cache when
 * cached says its blocks are there. Caller holds the lock. NULL when there
 * is no memory. */
static struct om_read_seg *seg_new(struct om_readers *rs, struct robj *o, struct om_reader *starter,
                                   uint64_t off, uint64_t len, bool demand, bool cached)
{
    size_t maplen = (size_t)((len + 4095) & ~(uint64_t)4095);
    struct om_read_seg *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->buf = pool_alloc(rs, maplen, demand);
    if (!s->buf) {
        free(s);
        return NULL;
    }
    /* pool_alloc may have waited while other reads changed the list */
    struct om_read_seg *there = seg_at(o, off);
    if (!there && next_start(o, off) < off + len)
        there = seg_at(o, next_start(o, off));
    if (there) {
        /* the gap was (partly) filled meanwhile: give the memory back; a
         * read that still misses bytes covers them again */
        buf_release(rs, s->buf, maplen);
        free(s);
        return there;
    }
    struct om_read_seg **pp = &o->segs;
    while (*pp && (*pp)->off < off)
        pp = &(*pp)->next;
    s->o = o;
    s->starter = starter;
    s->off = off;
    s->len = len;
    s->maplen = maplen;
    s->state = SEG_LOADING;
    s->prefetch = !demand;
    if (demand && !cached)
        o->demand_segs++;
    s->next = *pp;
    *pp = s;
    o->nsegs++;
    if (cached && om_dcache_load(rs->cfg.dcache, &o->dobj, off / OM_DCACHE_BLOCK,
                                 (len + OM_DCACHE_BLOCK - 1) / OM_DCACHE_BLOCK, s->buf,
                                 on_cache_loaded, s) == 0) {
        s->from_cache = true;
        o->loading++;
        return s;
    }
    if (o->cacheable && off % OM_DCACHE_BLOCK == 0)
        om_dcache_count_miss(rs->cfg.dcache, (len + OM_DCACHE_BLOCK - 1) / OM_DCACHE_BLOCK, len);
    submit_get(rs, s);
    return s;
}

static struct om_read_seg *seg_start(struct om_reader *r, uint64_t off, uint64_t len, bool demand,
                                     bool cached)
{
    return seg_new(r->rs, r->o, r, off, len, demand, cached);
}

/* Start the ranged GET of a segment. Caller holds the lock. */
static void submit_get(struct om_readers *rs, struct om_read_seg *s)
{
    struct robj *o = s->o;
    s->get = (struct om_store_get){
        .key = o->key,
        .off = s->off,
        .len = s->len,
        .if_match = o->etag[0] ? o->etag : NULL,
        .size_known = true,
        .size = o->size,
        .buf = s->buf,
        .done = on_get_done,
        .ud = s,
    };
    o->loading++;
    o->gets++;
    rs->st.gets++;
    rs->st.get_bytes += s->len;
    if (s->prefetch)
        rs->st.prefetch_gets++;
    int rc = om_store_get_submit(rs->store, &s->get);
    if (rc) {
        o->loading--;
        s->state = SEG_ERROR;
        s->error = rc;
    }
}

/* Cover [off, end) of r's object with segments of at most chunk bytes,
 * aligned to align. A segment another handle started and r's plan wants
 * too becomes shared: no single handle's seek cancels it any more.
 * Returns false when memory ran out (prefetch only). */
static bool cover(struct om_reader *r, uint64_t off, uint64_t end, uint64_t chunk, uint64_t align,
                  uint64_t hard_end, bool demand)
{
    struct robj *o = r->o;
    uint64_t at = off;
    while (at < end) {
        struct om_read_seg *s = seg_at(o, at);
        if (s) {
            if (s->starter != r)
                s->starter = NULL;
            at = s->off + s->len;
            continue;
        }
        uint64_t limit = next_start(o, at);
        uint64_t start = at;
        if (align > 1) {
            /* widen backwards to the alignment when that space is free */
            uint64_t aligned = at - at % align;
            struct om_read_seg *prev = NULL;
            for (struct om_read_seg *x = o->segs; x && x->off < at; x = x->next)
                prev = x;
            uint64_t floor = prev ? prev->off + prev->len : 0;
            start = aligned > floor ? aligned : floor;
        }
        uint64_t stop = start + chunk;
        if (align > 1 && stop % align)
            stop += align - stop % align;
        stop = OM_MIN(stop, OM_MIN(OM_MIN(limit, o->size), hard_end));
        if (stop <= start)
            return true;
        bool cached = false;
        if (o->cacheable && start % OM_DCACHE_BLOCK == 0) {
            /* one segment is all cached blocks or all fetched ones */
            uint64_t first = start / OM_DCACHE_BLOCK;
            uint64_t nb = (stop - start + OM_DCACHE_BLOCK - 1) / OM_DCACHE_BLOCK;
            uint64_t run = om_dcache_run(r->rs->cfg.dcache, &o->dobj, first, nb, &cached);
            if (run && run < nb)
                stop = (first + run) * OM_DCACHE_BLOCK;
            if (cached && stop % OM_DCACHE_BLOCK && stop != o->size) {
                /* a cached segment is whole blocks: the rest of the last
                 * one goes in the next segment */
                uint64_t whole = stop - stop % OM_DCACHE_BLOCK;
                if (whole > start)
                    stop = whole;
                else
                    cached = false;
            }
        }
        if (!seg_start(r, start, stop - start, demand, cached))
            return false;
        at = stop;
    }
    return true;
}

/* ---- background fills of randomly read objects ---- */

struct fill {
    struct om_readers *rs;
    char *key;
    char etag[OM_ETAG_MAX];
    struct om_dcache_obj o;
    pthread_mutex_t lock;
    uint64_t next; /* next block to look at */
    int error;
};

static void *fill_worker(void *arg)
{
    pthread_setname_np(pthread_self(), "om-fill");
    struct fill *f = arg;
    struct om_readers *rs = f->rs;
    uint64_t nblocks = om_dcache_blocks(&f->o);
    for (;;) {
        pthread_mutex_lock(&f->lock);
        uint64_t b = f->next;
        f->next = OM_MIN(b + FILL_CHUNK, nblocks);
        bool stop = b >= nblocks || f->error;
        pthread_mutex_unlock(&f->lock);
        pthread_mutex_lock(&rs->lock);
        stop |= rs->stopping;
        pthread_mutex_unlock(&rs->lock);
        if (stop)
            break;
        uint64_t end = OM_MIN(b + FILL_CHUNK, nblocks);
        while (b < end) {
            bool cached = false;
            uint64_t n = om_dcache_peek(rs->cfg.dcache, &f->o, b, end - b, &cached);
            if (!n)
                break;
            if (!cached) {
                uint64_t off = b * OM_DCACHE_BLOCK;
                uint64_t len = OM_MIN(n * OM_DCACHE_BLOCK, f->o.size - off);
                char *buf = malloc((size_t)len);
                struct om_object obj;
                struct om_store_error err;
                ssize_t got = buf ? om_store_get_range(rs->store, f->key, off, len, f->etag, buf, &obj,
                                                    &err)
                                  : -ENOMEM;
                if (got == (ssize_t)len) {
                    om_dcache_put(rs->cfg.dcache, &f->o, b, n, buf);
                    pthread_mutex_lock(&rs->lock);
                    rs->st.cache_fill_bytes += len;
                    pthread_mutex_unlock(&rs->lock);
                } else {
                    pthread_mutex_lock(&f->lock);
                    f->error = got < 0 ? (int)got : -EIO;
                    pthread_mutex_unlock(&f->lock);
                }
                free(buf);
                if (got != (ssize_t)len)
                    break;
            }
            b += n;
        }
    }
    return NULL;
}

static void *fill_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-fill");
    struct fill *f = arg;
    struct om_readers *rs = f->rs;
    pthread_t t[FILL_THREADS];
    int n = 0;
    for (int i = 0; i < FILL_THREADS; i++)
        n += pthread_create(&t[n], NULL, fill_worker, f) == 0;
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    if (f->error && f->error != -ESTALE)
        om_warn("filling the data cache with %s stopped: %s (reads go on)", f->key,
                strerror(-f->error));
    else if (!f->error)
        om_debug("data cache: %s filled", f->key);
    pthread_mutex_lock(&rs->lock);
    for (int i = 0; i < rs->nfills; i++) {
        if (rs->fills[i] == f) {
            rs->fills[i] = rs->fills[--rs->nfills];
            break;
        }
    }
    pthread_cond_broadcast(&rs->cond);
    pthread_mutex_unlock(&rs->lock);
    pthread_mutex_destroy(&f->lock);
    free(f->key);
    free(f);
    return NULL;
}

/* A randomly read object goes into the data cache whole, in the
 * background, unless it is too large, filled already or being filled, or
 * MAX_FILLS run. Caller holds rs->lock. */
static void maybe_fill(struct om_readers *rs, struct om_reader *r)
{
    struct robj *o = r->o;
    if (!o->cacheable || r->closing || rs->stopping || rs->nfills >= MAX_FILLS ||
        o->size <= rs->cfg.small_file_size || o->size > rs->fill_max)
        return;
    for (int i = 0; i < rs->nfills; i++) {
        if (strcmp(rs->fills[i]->key, o->key) == 0 && strcmp(rs->fills[i]->etag, o->etag) == 0)
            return;
    }
    bool cached = false;
    uint64_t nb = om_dcache_blocks(&o->dobj);
    if (om_dcache_peek(rs->cfg.dcache, &o->dobj, 0, nb, &cached) == nb && cached)
        return; /* all there */
    struct fill *f = calloc(1, sizeof(*f));
    if (!f || !(f->key = strdup(o->key))) {
        free(f);
        return;
    }
    f->rs = rs;
    om_strlcpy(f->etag, o->etag, sizeof(f->etag));
    f->o = o->dobj;
    pthread_mutex_init(&f->lock, NULL);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rs->fills[rs->nfills++] = f;
    if (pthread_create(&t, &attr, fill_main, f) != 0) {
        rs->nfills--;
        pthread_mutex_destroy(&f->lock);
        free(f->key);
        free(f);
    } else {
        rs->st.cache_fills++;
    }
    pthread_attr_destroy(&attr);
}

/* ---- objects ---- */

static uint64_t key_hash(const char *key)
{
    return om_hash_bytes(key, strlen(key));
}

/* The shared object of (key, etag, size), or NULL. Caller holds lock. */
static struct robj *obj_find(struct om_readers *rs, const char *key, const char *etag,
                             uint64_t size)
{
    uint64_t h = key_hash(key);
    for (struct om_hnode *n = om_htable_first(&rs->objs, h); n; n = om_htable_next(n, h)) {
        struct robj *o = om_container_of(n, struct robj, node);
        if (o->size == size && strcmp(o->etag, etag) == 0 && strcmp(o->key, key) == 0)
            return o;
    }
    return NULL;
}

/* The object a prefetch fetched for key under the version a HEAD told
 * (its listing had none: AIStore's S3 API with xxhash2), waiting for its
 * first open. Caller holds lock. */
static struct robj *obj_find_prefetched(struct om_readers *rs, const char *key, uint64_t size)
{
    uint64_t h = key_hash(key);
    for (struct om_hnode *n = om_htable_first(&rs->objs, h); n; n = om_htable_next(n, h)) {
        struct robj *o = om_container_of(n, struct robj, node);
        if (o->size == size && o->stashed && o->prefetched && !o->opened &&
            strcmp(o->key, key) == 0)
            return o;
    }
    return NULL;
}

/* The version of a stashed object of key and size that no open has taken
 * yet (a lookup or the prefetch fetched it, asking its version when the
 * listing gave none), into out; false when there is none. Caller holds
 * lock. */
static bool stashed_version(struct om_readers *rs, const char *key, uint64_t size,
                            char out[OM_ETAG_MAX])
{
    uint64_t h = key_hash(key);
    for (struct om_hnode *n = om_htable_first(&rs->objs, h); n; n = om_htable_next(n, h)) {
        struct robj *o = om_container_of(n, struct robj, node);
        if (o->size == size && o->stashed && !o->opened && o->etag[0] &&
            strcmp(o->key, key) == 0) {
            om_strlcpy(out, o->etag, OM_ETAG_MAX);
            return true;
        }
    }
    return false;
}

/* A new object, in the table when its ETag is known (an object without one
 * is read by its handle alone). NULL on ENOMEM. Caller holds lock. */
static struct robj *obj_new(struct om_readers *rs, const char *key, const char *etag,
                            uint64_t size)
{
    struct robj *o = calloc(1, sizeof(*o));
    if (!o || !(o->key = strdup(key))) {
        free(o);
        return NULL;
    }
    o->rs = rs;
    o->size = size;
    om_strlcpy(o->etag, etag ? etag : "", sizeof(o->etag));
    o->cacheable =
        rs->cfg.dcache && om_dcache_obj_init(rs->cfg.dcache, key, o->etag, size, &o->dobj);
    if (o->etag[0]) {
        om_htable_insert(&rs->objs, &o->node, key_hash(key));
        o->in_table = true;
    }
    rs->nobjs++;
    return o;
}

static void stash_unlink(struct om_readers *rs, struct robj *o)
{
    for (struct robj **pp = &rs->stash; *pp; pp = &(*pp)->stash_next) {
        if (*pp == o) {
            *pp = o->stash_next;
            rs->nstash--;
            break;
        }
    }
    o->stashed = false;
    o->stash_next = NULL;
}

/* Free o: nobody has it open, nothing loads into it or stores from it.
 * Caller holds lock. */
static void obj_free(struct om_readers *rs, struct robj *o)
{
    if (o->prefetched && !o->opened)
        rs->st.prefetch_wasted_bytes += o->prefetch_bytes;
    if (o->stashed)
        stash_unlink(rs, o);
    if (o->in_table)
        om_htable_remove(&rs->objs, &o->node);
    o->in_table = false;
    o->nreaders = -1; /* seg_drop's obj_check must not free it again */
    while (o->segs)
        seg_drop(rs, o->segs);
    free(o->key);
    free(o);
    rs->nobjs--;
    pthread_cond_broadcast(&rs->cond);
}

/* Free o when nothing needs it any more: no handle has it open, no GET or
 * store runs, and it is either not stashed or its stashed bytes were
 * evicted. Caller holds lock. */
static void obj_check(struct om_readers *rs, struct robj *o)
{
    if (o->nreaders != 0 || o->loading > 0 || o->stores > 0)
        return;
    if (o->stashed && o->nsegs > 0)
        return;
    obj_free(rs, o);
}

/* Free the oldest stashed object; false when the stash is empty. Caller
 * holds lock. */
static bool stash_drop_oldest(struct om_readers *rs)
{
    if (!rs->stash)
        return false;
    struct robj *oldest = rs->stash;
    while (oldest->stash_next)
        oldest = oldest->stash_next;
    stash_unlink(rs, oldest);
    obj_check(rs, oldest);
    return true;
}

/* Stashed objects nobody opened in time go: prefetched ones after
 * PREFETCH_TTL_MS (their bytes count as wasted), a lookup's after
 * LOOKUP_TTL_MS. Caller holds lock. */
static void stash_expire(struct om_readers *rs)
{
    uint64_t now = om_now_ms();
    struct robj *o = rs->stash;
    while (o) {
        struct robj *next = o->stash_next;
        if (now - o->stashed_ms > (o->prefetched ? PREFETCH_TTL_MS : LOOKUP_TTL_MS)) {
            stash_unlink(rs, o);
            obj_check(rs, o);
        }
        o = next;
    }
}

/* Put o, nobody has it open, in the stash to wait for its open. Caller
 * holds lock. */
static void stash_push(struct om_readers *rs, struct robj *o)
{
    o->stashed = true;
    o->stashed_ms = om_now_ms();
    o->stash_next = rs->stash;
    rs->stash = o;
    if (++rs->nstash > MAX_STASHED)
        stash_drop_oldest(rs);
    pthread_cond_signal(&rs->stash_cv);
}

/* The janitor: while the stash holds objects, every JANITOR_MS drop what
 * waited too long; once nothing is stashed and no file is open, unmap the
 * spare buffers and give free heap pages back. Sleeps without a timeout
 * while the stash is empty. */
static void *janitor_main(void *arg)
{
    struct om_readers *rs = arg;
    pthread_setname_np(pthread_self(), "om-janitor");
    uint64_t due_ns = 0; /* the next look; pushes meanwhile do not move it */
    pthread_mutex_lock(&rs->lock);
    while (!rs->stopping) {
        if (!rs->stash) {
            due_ns = 0;
            pthread_cond_wait(&rs->stash_cv, &rs->lock);
            continue;
        }
        uint64_t now = om_now_ns();
        if (!due_ns)
            due_ns = now + JANITOR_MS * 1000000ULL;
        if (now < due_ns) {
            struct timespec until = {.tv_sec = (time_t)(due_ns / 1000000000u),
                                     .tv_nsec = (long)(due_ns % 1000000000u)};
            pthread_cond_timedwait(&rs->stash_cv, &rs->lock, &until);
            continue;
        }
        due_ns = 0;
        stash_expire(rs);
        bool idle = !rs->stash && rs->st.open_readers == 0;
        if (idle)
            spares_drop(rs);
        pthread_mutex_unlock(&rs->lock);
        if (idle)
            om_heap_idle();
        pthread_mutex_lock(&rs->lock);
    }
    pthread_mutex_unlock(&rs->lock);
    return NULL;
}

/* Stashed objects of key other than (etag, size) go: another version of
 * key was seen. Caller holds lock. */
static void stash_drop_other_versions(struct om_readers *rs, const char *key, const char *etag,
                                      uint64_t size)
{
    struct robj *o = rs->stash;
    while (o) {
        struct robj *next = o->stash_next;
        if (strcmp(o->key, key) == 0 && (o->size != size || strcmp(o->etag, etag) != 0)) {
            stash_unlink(rs, o);
            obj_check(rs, o);
        }
        o = next;
    }
}

/* ---- readers ---- */

struct om_readers *om_readers_new(struct om_store *store, const struct om_readers_config *cfg)
{
    struct om_readers *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return NULL;
    if (om_htable_init(&rs->objs, 64)) {
        free(rs);
        return NULL;
    }
    rs->store = store;
    rs->cfg = *cfg;
    if (rs->cfg.prefetch_max < rs->cfg.prefetch_initial)
        rs->cfg.prefetch_max = rs->cfg.prefetch_initial;
    rs->plan_cfg = (struct om_read_plan_config){
        .small_file_size = rs->cfg.small_file_size,
        .part_size = rs->cfg.part_size,
        .prefetch_initial = rs->cfg.prefetch_initial,
        .prefetch_max = rs->cfg.prefetch_max,
    };
    /* a quarter of the budget is for data that a read needs now */
    rs->reserve = OM_MAX(cfg->memory_limit / 4, 2 * cfg->part_size);
    if (rs->reserve > cfg->memory_limit / 2)
        rs->reserve = cfg->memory_limit / 2;
    rs->st.memory_limit = cfg->memory_limit;
    if (cfg->dcache) {
        struct om_dcache_stats dst;
        om_dcache_get_stats(cfg->dcache, &dst);
        rs->fill_max = dst.limit_bytes / 4;
    }
    pthread_mutex_init(&rs->lock, NULL);
    pthread_cond_init(&rs->cond, NULL);
    om_cond_init_monotonic(&rs->stash_cv);
    /* without the janitor, the stash is only expired by the next reads */
    rs->janitor_running = pthread_create(&rs->janitor, NULL, janitor_main, rs) == 0;
    return rs;
}

/* A lookup for the open of (key, etag, size), which the pool holds whole
 * (fetched ahead of the open, or by an earlier lookup): answered with the
 * attributes of the GET that fetched it, once that GET is in, without a
 * request of its own, while they are younger than attr_timeout (the
 * listing's ETag may be stale: another client may have replaced the
 * object, and a lookup must see that as an attribute refresh would). false
 * when the pool cannot answer. */
static bool pool_answers(struct om_readers *rs, const char *key, const char *etag,
                         uint64_t size, struct om_object *obj)
{
    if (!etag || !etag[0])
        return false;
    bool answered = false;
    pthread_mutex_lock(&rs->lock);
    for (;;) {
        struct robj *p = obj_find(rs, key, etag, size);
        uint64_t covered = 0;
        bool loading = false, failed = false;
        for (struct om_read_seg *s = p ? p->segs : NULL; s && s->off <= covered; s = s->next) {
            covered = OM_MAX(covered, s->off + s->len);
            loading |= s->state == SEG_LOADING;
            failed |= s->state == SEG_ERROR;
        }
        if (!p || covered < size || failed)
            break;
        if (p->has_head && om_now_ms() - p->head_ms >= rs->cfg.attr_ttl_ms)
            break; /* older than attributes are trusted: the store answers */
        if (p->has_head) {
            *obj = p->head;
            answered = true;
            break;
        }
        if (!loading)
            break;
        pthread_cond_wait(&rs->cond, &rs->lock); /* its GET is under way */
    }
    if (answered)
        rs->st.lookup_pool_answers++;
    pthread_mutex_unlock(&rs->lock);
    return answered;
}

/* Do the read pool or the data cache hold all of (key, etag, size)? Then a
 * lookup for an open asks for a HEAD, not the whole object again. */
static bool cached_whole(struct om_readers *rs, const char *key, const char *etag, uint64_t size)
{
    if (!etag || !etag[0])
        return false;
    /* in the read pool: fetched (or being fetched) ahead of its open */
    pthread_mutex_lock(&rs->lock);
    struct robj *p = obj_find(rs, key, etag, size);
    uint64_t covered = 0;
    for (struct om_read_seg *s = p ? p->segs : NULL; s && s->off <= covered; s = s->next)
        covered = OM_MAX(covered, s->off + s->len);
    pthread_mutex_unlock(&rs->lock);
    if (p && covered >= size)
        return true;
    struct om_dcache_obj o;
    bool cached = false;
    if (!rs->cfg.dcache ||
        !om_dcache_obj_init(rs->cfg.dcache, key, etag, size, &o))
        return false;
    uint64_t n = om_dcache_blocks(&o);
    return om_dcache_run(rs->cfg.dcache, &o, 0, n, &cached) == n && cached;
}

/* Keep what a lookup fetched of (key, obj) for the open that follows:
 * takes buf (maplen bytes mapped, n of them the object) unless the version
 * is already read through the mount. Caller holds lock; false when buf is
 * still the caller's. */
static bool stash_put(struct om_readers *rs, const char *key, const struct om_object *obj,
                      char *buf, size_t maplen, uint64_t n)
{
    stash_drop_other_versions(rs, key, obj->etag, obj->size);
    if (obj_find(rs, key, obj->etag, obj->size))
        return false; /* open, or stashed already: it has (or gets) its bytes */
    struct om_read_seg *s = calloc(1, sizeof(*s));
    struct robj *o = s ? obj_new(rs, key, obj->etag, obj->size) : NULL;
    if (!o) {
        free(s);
        return false;
    }
    *s = (struct om_read_seg){.o = o, .len = n, .buf = buf, .maplen = maplen,
                              .state = SEG_READY};
    o->segs = s;
    o->nsegs = 1;
    o->head = *obj;
    o->has_head = true;
    o->head_ms = om_now_ms();
    lru_push(rs, s);
    stash_push(rs, o);
    return true;
}

static void version_for_cache(struct om_readers *rs, const char *key, uint64_t size,
                              char etag[OM_ETAG_MAX]);

int om_readers_prefetch(struct om_readers *rs, const char *key, const char *etag, uint64_t size,
                        uint64_t max)
{
    char headed[OM_ETAG_MAX] = "";
    if ((!etag || !etag[0]) && size) {
        /* listed without a version (AIStore's S3 API with xxhash2): one
         * HEAD tells the version the fetch is pinned to */
        version_for_cache(rs, key, size, headed);
        etag = headed;
    }
    if (!etag || !etag[0] || !size)
        return -EINVAL;
    struct om_dcache_obj d;
    bool cached = false;
    if (rs->cfg.dcache && om_dcache_obj_init(rs->cfg.dcache, key, etag, size, &d) &&
        om_dcache_peek(rs->cfg.dcache, &d, 0, om_dcache_blocks(&d), &cached) ==
            om_dcache_blocks(&d) &&
        cached) {
        /* wholly in the data cache: its reads come straight from the block
         * files (view_from_files), so nothing goes into read buffers; the
         * files are only read ahead from disk */
        uint64_t want = (OM_MIN(size, max) + OM_DCACHE_BLOCK - 1) / OM_DCACHE_BLOCK;
        om_dcache_advise(rs->cfg.dcache, &d, want);
        return 0;
    }
    pthread_mutex_lock(&rs->lock);
    stash_expire(rs);
    stash_drop_other_versions(rs, key, etag, size);
    struct robj *found = obj_find(rs, key, etag, size);
    if (found && found->stashed && !found->prefetched) {
        /* a lookup fetched it whole (the resolution of a hint does): it
         * waits for the open as a prefetched object */
        found->prefetched = true;
        found->stashed_ms = om_now_ms();
        for (struct om_read_seg *s = found->segs; s; s = s->next)
            found->prefetch_bytes += s->len;
        rs->st.prefetch_files++;
        rs->st.prefetch_bytes += found->prefetch_bytes;
        pthread_mutex_unlock(&rs->lock);
        return 0;
    }
    if (found) {
        pthread_mutex_unlock(&rs->lock);
        return -EEXIST; /* open, or prefetched already */
    }
    struct robj *o = obj_new(rs, key, etag, size);
    if (!o) {
        pthread_mutex_unlock(&rs->lock);
        return -ENOMEM;
    }
    /* the plan of a first read: nobody's handle, so nobody's to cancel;
     * stashed only afterwards, so that making room cannot drop it */
    struct om_reader ahead = {.rs = rs, .o = o, .window = rs->cfg.prefetch_initial};
    cover(&ahead, 0, OM_MIN(size, max), rs->cfg.part_size, 1, UINT64_MAX, false);
    for (struct om_read_seg *s = o->segs; s; s = s->next) {
        s->starter = NULL;
        o->prefetch_bytes += s->len;
    }
    int rc = o->nsegs ? 0 : -ENOMEM; /* no spare memory: nothing fetched */
    if (rc) {
        obj_check(rs, o);
    } else {
        o->prefetched = true;
        stash_push(rs, o);
        rs->st.prefetch_files++;
        rs->st.prefetch_bytes += o->prefetch_bytes;
    }
    pthread_mutex_unlock(&rs->lock);
    return rc;
}

static int fetch_whole(struct om_readers *rs, const char *key, uint64_t size,
                       const char *listed_etag, struct om_object *obj,
                       struct om_store_error *err);

int om_readers_fetch_whole(struct om_readers *rs, const char *key, uint64_t size,
                           const char *listed_etag, struct om_object *obj,
                           struct om_store_error *err)
{
    /* one whole-object GET of a key at a time: the others wait for it */
    struct whole_fetch me = {.key = key};
    pthread_mutex_lock(&rs->lock);
    for (;;) {
        struct whole_fetch *f = rs->fetching;
        while (f && strcmp(f->key, key) != 0)
            f = f->next;
        if (!f)
            break;
        pthread_cond_wait(&rs->cond, &rs->lock);
    }
    me.next = rs->fetching;
    rs->fetching = &me;
    pthread_mutex_unlock(&rs->lock);
    int rc = fetch_whole(rs, key, size, listed_etag, obj, err);
    pthread_mutex_lock(&rs->lock);
    struct whole_fetch **pp = &rs->fetching;
    while (*pp != &me)
        pp = &(*pp)->next;
    *pp = me.next;
    pthread_cond_broadcast(&rs->cond);
    pthread_mutex_unlock(&rs->lock);
    return rc;
}

static int fetch_whole(struct om_readers *rs, const char *key, uint64_t size,
                       const char *listed_etag, struct om_object *obj,
                       struct om_store_error *err)
{
    if (pool_answers(rs, key, listed_etag, size, obj))
        return 0;
    if (cached_whole(rs, key, listed_etag, size))
        return om_store_head(rs->store, key, obj, err);
    if ((!listed_etag || !listed_etag[0]) && rs->cfg.dcache && size > 0) {
        /* listed without a version (AIStore's S3 API): a HEAD tells it,
         * and the data cache may answer the rest */
        int h = om_store_head(rs->store, key, obj, err);
        pthread_mutex_lock(&rs->lock);
        rs->st.version_heads++;
        pthread_mutex_unlock(&rs->lock);
        if (h || obj->size != size || cached_whole(rs, key, obj->etag, size))
            return h;
    }
    size_t maplen = (size_t)((size + 4095) & ~(uint64_t)4095);
    pthread_mutex_lock(&rs->lock);
    if (++rs->win_lookups >= LOOKUP_WINDOW) {
        rs->lookups_head = rs->win_opens * 4 < rs->win_lookups;
        rs->win_lookups = rs->win_opens = 0;
    }
    char *buf = size && !rs->lookups_head ? pool_alloc(rs, maplen, false) : NULL;
    if (rs->lookups_head)
        rs->st.lookup_heads++;
    pthread_mutex_unlock(&rs->lock);
    if (!buf)
        return om_store_head(rs->store, key, obj, err);
    ssize_t n = om_store_get_range(rs->store, key, 0, size, NULL, buf, obj, err);
    pthread_mutex_lock(&rs->lock);
    rs->st.lookup_gets++;
    if (n > 0 && (uint64_t)n == obj->size && obj->etag[0] &&
        stash_put(rs, key, obj, buf, maplen, (uint64_t)n))
        buf = NULL;
    if (buf)
        buf_release(rs, buf, maplen);
    pthread_mutex_unlock(&rs->lock);
    /* Emptied since it was listed, or the GET failed (a stat must not fail
     * because reads do): the HEAD answers. */
    if (n == 0 || (n < 0 && n != -ENOENT))
        return om_store_head(rs->store, key, obj, err);
    return n < 0 ? (int)n : 0;
}

/* A handle still open, or NULL. Caller holds lock. */
static struct om_reader *any_open_reader(struct om_readers *rs)
{
    for (size_t b = 0; b < rs->objs.nbuckets; b++) {
        for (struct om_hnode *x = rs->objs.buckets[b]; x; x = x->next) {
            struct robj *o = om_container_of(x, struct robj, node);
            if (o->readers)
                return o->readers;
        }
    }
    return NULL;
}

void om_readers_free(struct om_readers *rs)
{
    if (!rs)
        return;
    pthread_mutex_lock(&rs->lock);
    rs->stopping = true; /* fills stop after the GET under way */
    pthread_cond_signal(&rs->stash_cv);
    if (rs->janitor_running) {
        pthread_mutex_unlock(&rs->lock);
        pthread_join(rs->janitor, NULL);
        pthread_mutex_lock(&rs->lock);
    }
    /* Handles the kernel never released: the session ended with files
     * open (a signal), or their RELEASE was still queued when an unmount
     * aborted the connection. Their objects would never go. */
    struct om_reader *r;
    while ((r = any_open_reader(rs)) != NULL) {
        pthread_mutex_unlock(&rs->lock);
        om_reader_close(r);
        pthread_mutex_lock(&rs->lock);
    }
    while (rs->nfills > 0)
        pthread_cond_wait(&rs->cond, &rs->lock);
    while (rs->stash)
        stash_drop_oldest(rs);
    while (rs->nobjs > 0) /* closed objects whose cancelled GETs are still ending */
        pthread_cond_wait(&rs->cond, &rs->lock);
    spares_drop(rs);
    pthread_mutex_unlock(&rs->lock);
    om_htable_destroy(&rs->objs);
    pthread_cond_destroy(&rs->cond);
    pthread_cond_destroy(&rs->stash_cv);
    pthread_mutex_destroy(&rs->lock);
    free(rs);
}

/* A listing without version tokens (AIStore's S3 API lists objects of a
 * non-MD5 checksum without ETags): with the data cache on, the version the
 * cache is keyed by comes from a HEAD at open (the caller may keep it for
 * the next open: om_reader_version); a prefetch of such a file asks the
 * same way. The version is kept
 * only when the HEAD shows the size the open has (else the object changed
 * since it was listed, and the open reads without the cache). */
static void version_for_cache(struct om_readers *rs, const char *key, uint64_t size,
                              char etag[OM_ETAG_MAX])
{
    struct om_object o;
    struct om_store_error err;
    if (om_store_head(rs->store, key, &o, &err) == 0 && o.size == size)
        om_strlcpy(etag, o.etag, OM_ETAG_MAX);
    pthread_mutex_lock(&rs->lock);
    rs->st.version_heads++;
    pthread_mutex_unlock(&rs->lock);
}

void om_reader_version(const struct om_reader *r, char out[OM_ETAG_MAX])
{
    om_strlcpy(out, r->o->etag, OM_ETAG_MAX); /* set when the object is made, never changed */
}

struct om_reader *om_reader_open(struct om_readers *rs, const char *key, uint64_t size,
                                 const char *etag)
{
    struct om_reader *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    if (!etag)
        etag = "";
    char headed[OM_ETAG_MAX] = "";
    if (!etag[0] && rs->cfg.dcache && size > 0) {
        pthread_mutex_lock(&rs->lock);
        bool known = stashed_version(rs, key, size, headed);
        pthread_mutex_unlock(&rs->lock);
        if (!known)
            version_for_cache(rs, key, size, headed);
        etag = headed;
    }
    r->rs = rs;
    r->window = rs->cfg.prefetch_initial;
    pthread_mutex_lock(&rs->lock);
    if (etag[0])
        stash_drop_other_versions(rs, key, etag, size);
    struct robj *o = etag[0] ? obj_find(rs, key, etag, size) : obj_find_prefetched(rs, key, size);
    if (!o)
        o = obj_new(rs, key, etag, size);
    if (!o) {
        pthread_mutex_unlock(&rs->lock);
        free(r);
        return NULL;
    }
    if (o->stashed) {
        /* what a lookup or the prefetch fetched: this open takes it over */
        stash_unlink(rs, o);
        if (o->prefetched && !o->opened)
            rs->st.prefetch_hits++;
        for (struct om_read_seg *s = o->segs; s; s = s->next) {
            if (!o->prefetched)
                rs->st.lookup_get_hits++;
            if (s->state == SEG_READY)
                offer_to_cache(rs, s); /* worth keeping too */
        }
    }
    o->opened = true;
    r->o = o;
    r->o_next = o->readers;
    o->readers = r;
    o->nreaders++;
    rs->st.open_readers++;
    if (size <= rs->cfg.small_file_size)
        rs->win_opens++;
    pthread_mutex_unlock(&rs->lock);
    return r;
}

/* Cancel the prefetches r started that nobody waits for and no other
 * handle wants (all == true: every one of the object's). */
static void cancel_loading(struct om_reader *r, uint64_t from, bool all)
{
    for (struct om_read_seg *s = r->o->segs; s; s = s->next) {
        if (s->state == SEG_LOADING && !s->from_cache && s->off >= from && s->pins == 0 &&
            (all || s->starter == r))
            om_store_get_cancel(r->rs->store, &s->get);
    }
}

void om_reader_set_window(struct om_reader *r, uint64_t window)
{
    pthread_mutex_lock(&r->rs->lock);
    r->window = OM_MAX(OM_MIN(window, r->rs->cfg.prefetch_max), r->rs->cfg.prefetch_initial);
    pthread_mutex_unlock(&r->rs->lock);
}

void om_reader_set_chunk(struct om_reader *r, uint64_t chunk)
{
    pthread_mutex_lock(&r->rs->lock);
    r->chunk_max = OM_MAX(chunk, r->rs->cfg.part_size);
    pthread_mutex_unlock(&r->rs->lock);
}

uint64_t om_reader_object_gets(struct om_reader *r)
{
    pthread_mutex_lock(&r->rs->lock);
    uint64_t n = r->o->gets;
    pthread_mutex_unlock(&r->rs->lock);
    return n;
}

void om_reader_close(struct om_reader *r)
{
    struct om_readers *rs = r->rs;
    struct robj *o = r->o;
    pthread_mutex_lock(&rs->lock);
    r->closing = true;
    cancel_loading(r, 0, o->nreaders == 1);
    if (r->seq_run >= OM_READ_STREAMING_RUN && r->run_start > 0)
        o->past_runs[o->npast++ % OM_PAST_RUNS] = r->run_start;
    /* a reply can end a read before its view is done: the kernel may then
     * release the file while that thread still holds the view */
    while (r->views > 0)
        pthread_cond_wait(&rs->cond, &rs->lock);
    for (struct om_reader **pp = &o->readers; *pp; pp = &(*pp)->o_next) {
        if (*pp == r) {
            *pp = r->o_next;
            break;
        }
    }
    for (struct om_read_seg *s = o->segs; s; s = s->next) {
        if (s->starter == r)
            s->starter = NULL;
    }
    /* the last handle: the object goes once what it started is done (its
     * GETs were cancelled above; their completions free it) */
    if (--o->nreaders == 0)
        obj_check(rs, o);
    bool idle = --rs->st.open_readers == 0;
    if (idle)
        spares_drop(rs); /* freed memory leaves the process when reading stops */
    pthread_mutex_unlock(&rs->lock);
    free(r);
    if (idle)
        om_heap_idle();
}

/* Will another handle of the object read s soon: one that has not passed
 * it and whose next window reaches it (two ranks loading one checkpoint a
 * little apart)? A handle reading another part of the object (a worker's
 * own quarter) does not keep it. Caller holds lock. */
static bool wanted_by_other(const struct om_reader *r, const struct om_read_seg *s)
{
    uint64_t part = r->rs->cfg.part_size;
    for (const struct om_reader *x = r->o->readers; x; x = x->o_next) {
        if (x != r && x->pos < s->off + s->len &&
            x->pos + OM_MAX(x->window, part) + part >= s->off)
            return true;
    }
    return false;
}

/* Free what a sequential reader has passed, keeping one part behind for
 * reads the kernel issues out of order, and what another handle of the
 * object is about to read. */
static void drop_behind(struct om_reader *r, uint64_t off)
{
    uint64_t keep = r->rs->cfg.part_size;
    if (off <= keep || r->o->filled_memory)
        return; /* an object filled into memory keeps it all (trim) */
    struct om_read_seg *s = r->o->segs;
    while (s && s->off + s->len <= off - keep) {
        struct om_read_seg *next = s->next;
        if (s->pins == 0 && s->state != SEG_LOADING && !wanted_by_other(r, s))
            seg_drop(r->rs, s);
        s = next;
    }
}

/* Keep the number of cached random segments of an object bounded (the
 * bound grows with its handles, up to four times). An object filled into
 * memory keeps them: it is bounded by its size, and a segment dropped here
 * was fetched again by the next fill (four h5py workers of one 256 MiB
 * file fetched it four times). */
static void trim(struct om_reader *r, uint64_t off, uint64_t end)
{
    struct robj *o = r->o;
    if (o->filled_memory)
        return;
    int max = MAX_SEGMENTS_PER_READER * OM_MIN(OM_MAX(o->nreaders, 1), 4);
    while (o->nsegs > max) {
        struct om_read_seg *victim = NULL;
        for (struct om_read_seg *s = o->segs; s && !victim; s = s->next) {
            if (s->pins == 0 && s->state != SEG_LOADING && (s->off + s->len <= off || s->off >= end))
                victim = s;
        }
        if (!victim)
            return;
        seg_drop(r->rs, victim);
    }
}

/* Keep FILL_MEMORY_INFLIGHT of a memory fill's part-sized GETs in flight,
 * from where it stands to the end of the object. The parts arrive one after
 * another, and random reads are answered from memory part by part while
 * the fill goes on; with all of its GETs at once, every part arrived at
 * the end, and until then each random read waited for a whole part (the
 * first second of four h5py workers: 30 windows against s3fs-fuse's 431).
 * Caller holds the lock. */
static void fill_more(struct om_readers *rs, struct robj *o)
{
    while (o->fill_inflight < FILL_MEMORY_INFLIGHT && o->fill_next < o->size) {
        struct om_read_seg *s = seg_at(o, o->fill_next);
        if (!s) {
            uint64_t stop = OM_MIN(o->fill_next + rs->cfg.part_size, next_start(o, o->fill_next));
            s = seg_new(rs, o, NULL, o->fill_next, stop - o->fill_next, false, false);
            if (!s || s->state == SEG_ERROR)
                return; /* no memory, or stopping: the next random reads go on */
            if (s->state == SEG_LOADING && !s->filling) {
                s->filling = true;
                o->fill_inflight++;
            }
        }
        o->fill_next = s->off + s->len;
    }
}

/* Without a data cache, an object read at random (OM_READ_MEMORY_FILL_AFTER
 * reads by its handles together that had to start a GET of their own, so
 * that four h5py workers of one file fill it four times sooner than one
 * would: a few random reads of a large file, as a header or an index, stay
 * exact and cheap; random reads near each other, as an HDF5 window's
 * chunks, count too, where only reads planned as random did and the fill
 * of four h5py workers started after 270 GETs; a streaming reader's do
 * not) and no larger
 * than FILL_MEMORY_SHARE of the budget is fetched whole into the pool, in
 * part-sized prefetch GETs from spare memory, as s3fs-fuse keeps each open
 * object in a local file: its later random reads come from memory, where
 * each one was a round trip (46 against s3fs-fuse's 7,605 random 4 KiB
 * reads a second in issue 23). Its segments are nobody's to cancel.
 * Caller holds the lock. */
static void fill_memory(struct om_reader *r)
{
    struct om_readers *rs = r->rs;
    struct robj *o = r->o;
    if (r->closing || o->fetching_reads < OM_READ_MEMORY_FILL_AFTER ||
        o->size > rs->cfg.memory_limit / FILL_MEMORY_SHARE)
        return;
    if (!o->filled_memory) {
        rs->st.memory_fills++;
        o->filled_memory = true;
        o->fill_next = 0;
    }
    fill_more(rs, o);
    for (struct om_read_seg *s = o->segs; s; s = s->next) {
        if (s->starter == r && s->state == SEG_LOADING)
            s->starter = NULL;
    }
}

/* The reader's numbers, for its read plans. Caller holds the lock. */
static struct om_read_state read_state(const struct om_reader *r)
{
    return (struct om_read_state){
        .size = r->o->size,
        .cacheable = r->o->cacheable,
        .pos = r->pos,
        .ahead = r->ahead,
        .window = r->window,
        .streak = r->streak,
        .seq_run = r->seq_run,
        .random_reads = r->random_reads,
    };
}

/* The pool's plan settings, with r's own GET size. */
static struct om_read_plan_config plan_cfg_of(const struct om_reader *r)
{
    struct om_read_plan_config pc = r->rs->plan_cfg;
    if (r->chunk_max)
        pc.part_size = r->chunk_max;
    return pc;
}

static bool cover_range(struct om_reader *r, const struct om_read_range *g, uint64_t hard_end,
                        bool demand)
{
    return cover(r, g->off, g->end, g->chunk, g->align, hard_end, demand);
}

/* End of what the object's segments cover contiguously from end on. */
static uint64_t covered_from(struct robj *o, uint64_t end)
{
    uint64_t covered = end;
    for (struct om_read_seg *s = seg_at(o, end > 0 ? end - 1 : 0); s; s = s->next) {
        if (s->off > covered)
            break;
        covered = s->off + s->len;
    }
    return covered;
}

/* Keep s in *best when it lies in (above, upto] and is lower (higher,
 * with highest) than what *best holds. */
static void run_start_take(uint64_t s, uint64_t above, uint64_t upto, bool highest, uint64_t *best,
                           bool *found)
{
    if (s > above && s <= upto && (!*found || (highest ? s > *best : s < *best))) {
        *best = s;
        *found = true;
    }
}

/* The lowest (with highest, the highest) place in (above, upto] where
 * another handle's sequential run began: an open handle's, or one of the
 * object's last OM_PAST_RUNS closed ones', into *out. false when there is
 * none. Caller holds the lock. */
static bool other_run_start(const struct om_reader *r, uint64_t above, uint64_t upto, bool highest,
                            uint64_t *out)
{
    bool found = false;
    for (const struct om_reader *x = r->o->readers; x; x = x->o_next) {
        if (x != r && !x->closing && x->seq_run > 0)
            run_start_take(x->run_start, above, upto, highest, out, &found);
    }
    unsigned n = OM_MIN(r->o->npast, OM_PAST_RUNS);
    for (unsigned i = 0; i < n; i++)
        run_start_take(r->o->past_runs[i], above, upto, highest, out, &found);
    return found;
}

/* Where this handle's prefetch stops: the start of another handle's
 * sequential run ahead of it, open or closed. DataLoader workers that each
 * read their own share of one object otherwise prefetch into the next
 * worker's share, which that worker fetches itself (or already read and
 * dropped, and may have closed): four readers of a 256 MiB object fetched
 * 1.21-1.31x it. Handles reading the same range (two ranks loading one
 * checkpoint) start their runs at the same place and do not stop each
 * other. Caller holds lock. */
static uint64_t prefetch_stop(const struct om_reader *r)
{
    uint64_t stop = UINT64_MAX;
    other_run_start(r, r->pos, UINT64_MAX, false, &stop);
    return stop;
}

/* The end of the stretch past another handle's run start that r's read
 * at off is in, or 0. r's own run began before that start (r is a worker
 * that came to the end of its share) and off lies within twice the
 * kernel's readahead of it: what reaches the daemon there is the kernel's
 * readahead past the share, or a reader going on into data another handle
 * has read. Either way it gets what it asks for, in small chunks and
 * without prefetch, where r's grown window asked for an 8 MiB chunk and
 * tens of MiB more of the next worker's share, read and dropped already
 * (four readers of one object: 1.09-1.29x it asked, 1.03-1.10x sent, with
 * the store pacing each connection). It depends only on where the read
 * falls, not on which of the kernel's reads arrives first. A handle whose
 * run began at the same place (ranks loading one checkpoint) is no other
 * run. Caller holds the lock. */
static uint64_t crossing_end(const struct om_reader *r, uint64_t off)
{
    uint64_t reach = 2 * r->rs->cfg.kernel_readahead, start = 0;
    if (reach == 0 || (r->o->nreaders < 2 && r->o->npast == 0) ||
        !other_run_start(r, r->run_start, off, true, &start))
        return 0;
    return off < start + reach ? start + reach : 0;
}

/* Carry out the plan of a read ending at end: the reader takes its new
 * numbers first (cover() may wait for memory, and other reads of the same
 * handle then plan from them), then prefetch is cancelled, the demand and
 * prefetch ranges are covered, the frontier moves and a fill may start.
 * Caller holds the lock. */
static void plan_execute(struct om_reader *r, uint64_t end, const struct om_read_plan *p)
{
    if (p->kind == OM_READ_RANDOM) {
        r->run_start = p->demand.off; /* the next sequential run starts here */
    } else if (p->kind == OM_READ_SEQUENTIAL && p->demand.off < r->run_start) {
        /* the kernel's first reads of a run can arrive out of order: the
         * run began at the lowest of them (other handles' prefetch stops
         * there, and crossing_end() looks for it) */
        r->run_start = p->demand.off;
    }
    uint64_t crossing = p->kind == OM_READ_SEQUENTIAL ? crossing_end(r, p->demand.off) : 0;
    unsigned segs = r->o->demand_segs;
    r->window = p->next.window;
    r->streak = p->next.streak;
    r->ahead = p->next.ahead;
    r->seq_run = p->next.seq_run;
    r->random_reads = p->next.random_reads;
    if (p->cancel_prefetch)
        cancel_loading(r, p->cancel_from, false);
    if (crossing) {
        struct om_read_range exact = p->demand;
        exact.chunk = OM_MIN(exact.chunk, OM_READ_MIN_CHUNK);
        cover_range(r, &exact, OM_MAX(crossing, exact.end), true);
    } else {
        cover_range(r, &p->demand, UINT64_MAX, true);
    }
    /* a streaming reader that caught up with its prefetch is no random
     * reader: four of them on one 1 GiB object started a fill that fetched
     * again what they had read and dropped (1.40x the object) */
    bool fetched = r->o->demand_segs != segs &&
                   !(p->kind == OM_READ_SEQUENTIAL && p->next.seq_run >= OM_READ_STREAMING_RUN);
    if (fetched)
        r->o->fetching_reads++;
    struct om_read_range ahead = p->prefetch;
    /* another handle's run ahead: the prefetch ends there exactly, not at
     * the end of the chunk that reaches it */
    uint64_t hard_end = UINT64_MAX;
    if (ahead.off < ahead.end && (r->o->nreaders > 1 || r->o->npast > 0)) {
        uint64_t stop = prefetch_stop(r);
        if (stop < ahead.end)
            ahead.end = hard_end = OM_MAX(stop, ahead.off);
    }
    if (ahead.off < ahead.end && !r->closing && !crossing)
        cover_range(r, &ahead, hard_end, false);
    if (p->extend_ahead)
        r->ahead = OM_MAX(r->ahead, covered_from(r->o, end));
    if (p->consider_fill && r->o->cacheable)
        maybe_fill(r->rs, r);
    else if (!r->o->cacheable && fetched)
        fill_memory(r);
}

/* Read [off, off+len) of a wholly cached object from its block files
 * with O_DIRECT into a buffer the data cache lends (at most two blocks: a
 * read is at most one block long). 0, -EOPNOTSUPP (no buffer or no
 * O_DIRECT: open the files instead) or -errno, with nothing lent. */
static int view_direct(struct om_reader *r, uint64_t off, size_t len, struct om_read_view *v)
{
    struct om_dcache *dc = r->rs->cfg.dcache;
    if (len < OM_DCACHE_DIRECT_MIN || !(v->dbuf = om_dcache_direct_get(dc)))
        return -EOPNOTSUPP;
    uint64_t end = off + len;
    int rc = 0;
    for (uint64_t at = off; at < end;) {
        uint64_t b = at / OM_DCACHE_BLOCK;
        uint64_t n = OM_MIN(end, (b + 1) * OM_DCACHE_BLOCK) - at;
        const char *data = NULL;
        rc = v->ndirect == 2
                 ? -E2BIG
                 : om_dcache_read_direct(dc, &r->o->dobj, b, at - b * OM_DCACHE_BLOCK, (size_t)n,
                                         v->dbuf + v->ndirect * OM_DCACHE_DIRECT_ROOM, &data);
        if (rc)
            break;
        v->direct[v->ndirect++] = (struct iovec){(void *)data, (size_t)n};
        at += n;
    }
    if (rc) {
        om_dcache_direct_put(dc, v->dbuf);
        v->dbuf = NULL;
        v->ndirect = 0;
    }
    return rc;
}

/* The bytes [off, off+len) of a wholly cached object from its block
 * files into v: read with O_DIRECT (view_direct) or, for short reads or
 * where that cannot be, the files opened (at most two) for a reply
 * spliced or read from them. 0, or -errno with nothing left open. No lock
 * held. */
static int view_from_files(struct om_reader *r, uint64_t off, size_t len, struct om_read_view *v)
{
    struct om_dcache *dc = r->rs->cfg.dcache;
    int rc = view_direct(r, off, len, v);
    if (rc != -EOPNOTSUPP)
        return rc;
    rc = 0;
    uint64_t end = off + len;
    for (uint64_t at = off; at < end;) {
        uint64_t b = at / OM_DCACHE_BLOCK;
        uint64_t n = OM_MIN(end, (b + 1) * OM_DCACHE_BLOCK) - at, data_off = 0;
        int fd = v->nfd == 2 ? -E2BIG : om_dcache_open_block(dc, &r->o->dobj, b, &data_off);
        if (fd < 0) {
            rc = fd;
            break;
        }
        v->fd[v->nfd] = fd;
        v->fd_off[v->nfd] = data_off + (at - b * OM_DCACHE_BLOCK);
        v->fd_len[v->nfd] = (size_t)n;
        v->nfd++;
        at += n;
    }
    if (rc) {
        while (v->nfd > 0)
            close(v->fd[--v->nfd]);
    }
    return rc;
}

/* Is every block of r's object in the data cache? Checked at the first
 * read of each handle (blocks stored since an earlier handle read it
 * count), then trusted until a block turns out missing. Caller holds
 * lock. */
static bool all_in_files(struct om_readers *rs, struct om_reader *r)
{
    struct robj *o = r->o;
    if (!r->files_checked) {
        r->files_checked = true;
        bool cached = false;
        uint64_t nb = om_dcache_blocks(&o->dobj);
        o->from_files = o->cacheable && o->size > 0 &&
                        om_dcache_peek(rs->cfg.dcache, &o->dobj, 0, nb, &cached) == nb && cached;
    }
    return o->from_files;
}

ssize_t om_reader_view(struct om_reader *r, size_t len, uint64_t off, struct om_read_view *v)
{
    struct robj *o = r->o;
    memset(v, 0, sizeof(*v));
    v->off = off;
    if (off >= o->size || len == 0)
        return 0;
    if (len > o->size - off)
        len = (size_t)(o->size - off);
    uint64_t end = off + len;
    struct om_readers *rs = r->rs;

    pthread_mutex_lock(&rs->lock);
    rs->st.reads++;
    rs->st.read_bytes += len;
    bool hit = true;
    for (uint64_t at = off; at < end;) {
        struct om_read_seg *s = seg_at(o, at);
        if (!s || s->state != SEG_READY) {
            hit = false;
            break;
        }
        at = s->off + s->len;
    }
    if (!hit && all_in_files(rs, r)) {
        /* one access per block for the cache's policy, as cover() counts */
        for (uint64_t b = off / OM_DCACHE_BLOCK; b <= (end - 1) / OM_DCACHE_BLOCK; b++) {
            bool cached;
            if (b + 1 != r->file_block)
                om_dcache_run(rs->cfg.dcache, &o->dobj, b, 1, &cached);
            r->file_block = b + 1;
        }
        r->views++; /* close waits for this view */
        pthread_mutex_unlock(&rs->lock);
        int frc = view_from_files(r, off, len, v);
        pthread_mutex_lock(&rs->lock);
        if (frc == 0) {
            rs->st.hits++;
            rs->st.cache_file_reads++;
            v->off = off;
            v->len = len;
            v->segs = v->few_segs; /* counted: view_done gives the view back */
            pthread_mutex_unlock(&rs->lock);
            return (ssize_t)len;
        }
        /* a block is gone or bad: buffers and GETs from here on */
        o->from_files = false;
        r->views--;
        pthread_cond_broadcast(&rs->cond);
    }
    if (hit)
        rs->st.hits++;

    struct om_read_state st = read_state(r);
    struct om_read_plan_config pc = plan_cfg_of(r);
    struct om_read_plan plan = om_read_plan_make(&st, &pc, off, len);
    plan_execute(r, end, &plan);

    /* Pin what covers the request and wait for it. A pinned segment is
     * neither evicted nor cancelled, so a read that waits keeps what it
     * waits for even when another read on the same handle seeks away. */
    ssize_t rc = (ssize_t)len;
    struct om_read_seg **pinned = v->few_segs;
    int npinned = 0, cap = OM_READ_VIEW_FEW;
    for (;;) {
        bool loading = false, refetch = false;
        npinned = 0;
        for (uint64_t at = off; at < end;) {
            struct om_read_seg *s = seg_at(o, at);
            if (!s) {
                refetch = true; /* evicted while we waited, or no memory */
                break;
            }
            if (s->state == SEG_ERROR) {
                if (s->pins > 0) {
                    loading = true; /* its other reader drops it; wait for that */
                    break;
                }
                bool cancelled = s->error == -ECANCELED;
                if (!cancelled)
                    rc = s->error == -ENOMEM || s->error == -ESTALE || s->error == -ENOENT
                             ? s->error
                             : -EIO;
                seg_drop(rs, s); /* a later read tries again */
                refetch = cancelled;
                break;
            }
            if (npinned == cap) {
                struct om_read_seg **bigger = malloc(sizeof(*bigger) * (size_t)cap * 2);
                if (!bigger) {
                    rc = -ENOMEM;
                    break;
                }
                memcpy(bigger, pinned, sizeof(*bigger) * (size_t)cap);
                if (pinned != v->few_segs)
                    free(pinned);
                pinned = bigger;
                cap *= 2;
            }
            s->pins++;
            lru_remove(rs, s);
            pinned[npinned++] = s;
            if (s->state == SEG_LOADING)
                loading = true;
            at = s->off + s->len;
        }
        if (rc > 0 && !refetch && !loading)
            break; /* everything is there, pinned */
        if (rc > 0 && !refetch)
            pthread_cond_wait(&rs->cond, &rs->lock);
        for (int i = 0; i < npinned; i++) {
            pinned[i]->pins--;
            lru_push(rs, pinned[i]);
        }
        npinned = 0;
        if (rc < 0)
            break;
        if (refetch && !cover(r, off, end, end - off, 1, UINT64_MAX, true)) {
            rc = -ENOMEM;
            break;
        }
    }
    if (rc <= 0) {
        pthread_mutex_unlock(&rs->lock);
        if (pinned != v->few_segs)
            free(pinned);
        return rc;
    }
    r->views++; /* close waits for view_done */
    pthread_mutex_unlock(&rs->lock);
    /* the caller reads straight from the pinned buffers */
    v->segs = pinned;
    v->n = npinned;
    v->len = len;
    v->iov = npinned <= OM_READ_VIEW_FEW ? v->few_iov : calloc((size_t)npinned, sizeof(*v->iov));
    if (!v->iov) {
        om_reader_view_done(r, v);
        return -ENOMEM;
    }
    for (int i = 0; i < npinned; i++) {
        struct om_read_seg *sg = pinned[i];
        uint64_t a = OM_MAX(off, sg->off), b = OM_MIN(end, sg->off + sg->len);
        v->iov[i].iov_base = sg->buf + (a - sg->off);
        v->iov[i].iov_len = (size_t)(b - a);
    }
    return rc;
}

void om_reader_view_done(struct om_reader *r, struct om_read_view *v)
{
    struct om_readers *rs = r->rs;
    struct om_read_seg **pinned = v->segs;
    bool counted = v->segs != NULL;
    pthread_mutex_lock(&rs->lock);
    for (int i = 0; i < v->n; i++) {
        pinned[i]->pins--;
        lru_push(rs, pinned[i]);
    }
    if (v->len > 0) {
        uint64_t end = v->off + v->len;
        /* a streaming reader frees what it passed; a random one that happens
         * to land near its last read keeps its buffers */
        struct om_read_state st = read_state(r);
        struct om_read_plan_config pc = plan_cfg_of(r);
        if (om_read_frees_behind(&st, &pc, v->off))
            drop_behind(r, v->off);
        r->pos = end;
        trim(r, v->off, end);
    }
    if (counted) {
        r->views--; /* the last touch of r: close may free it from here on */
        pthread_cond_broadcast(&rs->cond);
    }
    pthread_mutex_unlock(&rs->lock);
    for (int k = 0; k < v->nfd; k++)
        close(v->fd[k]);
    if (v->dbuf)
        om_dcache_direct_put(rs->cfg.dcache, v->dbuf);
    if (v->segs && v->segs != v->few_segs)
        free(v->segs);
    if (v->iov && v->iov != v->few_iov)
        free(v->iov);
    memset(v, 0, sizeof(*v));
}

ssize_t om_reader_read(struct om_reader *r, char *buf, size_t len, uint64_t off)
{
    struct om_read_view v;
    ssize_t rc = om_reader_view(r, len, off, &v);
    if (rc <= 0)
        return rc;
    size_t at = 0;
    for (int i = 0; i < v.n; i++) {
        memcpy(buf + at, v.iov[i].iov_base, v.iov[i].iov_len);
        at += v.iov[i].iov_len;
    }
    for (int k = 0; k < v.nfd && rc > 0; k++) {
        if (pread(v.fd[k], buf + at, v.fd_len[k], (off_t)v.fd_off[k]) != (ssize_t)v.fd_len[k])
            rc = -EIO;
        at += v.fd_len[k];
    }
    /* or read with O_DIRECT into the data cache's buffer (a view of data
     * cache files): this copy was missing, and the caller's buffer went
     * back with whatever it held (a shard member read on a remount got
     * another member's bytes) */
    for (int k = 0; k < v.ndirect && rc > 0; k++) {
        memcpy(buf + at, v.direct[k].iov_base, v.direct[k].iov_len);
        at += v.direct[k].iov_len;
    }
    if (rc > 0 && at != (size_t)rc)
        rc = -EIO; /* every form of view must have been copied whole */
    om_reader_view_done(r, &v);
    return rc;
}

void om_readers_get_stats(struct om_readers *rs, struct om_readers_stats *out)
{
    pthread_mutex_lock(&rs->lock);
    *out = rs->st;
    out->memory_used = rs->used;
    pthread_mutex_unlock(&rs->lock);
}
