/* The namespace's memory budget (issue 16): what to free when the
 * namespace holds more than memory_budget bytes (pure choices), and the
 * reclaim thread that executes them.
 *
 * Past the budget the reclaim frees, down to the low watermark (90%):
 * 1. complete listings that no directory handle reads, least recently used
 *    first (a directory is listed again when needed);
 * 2. then, through the kernel, file inodes it holds but has not used
 *    lately (never directories: see mi_victim_of): notify_inval_entry makes the kernel drop the
 *    name and FORGET the inode, which frees it here. A clock hand over the
 *    inode table with one "recent" bit per inode picks them (second
 *    chance); names in a directory a handle reads are left alone.
 * Inodes the kernel does not hold (nlookup 0, no reference) are freed as
 * soon as that happens (forget, readdirplus), not here, except directories
 * with a fresh listing (mi_keeps_listing): they go with it in step 1. The
 * kernel's own references are never broken: only the kernel drops them.
 *
 * Locking: m->lock as everywhere in meta; the reclaim drops it around the
 * kernel notifications. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "meta_int.h"

#define YOUNG_LISTING_MS 1000

#define LOW_WATERMARK_PERCENT 90
#define INVAL_BATCH 1024     /* names per round of notifications */
#define INVAL_PAUSE_MS 10    /* between rounds: the FORGETs arrive */
#define SCAN_PER_ROUND 65536 /* inode table slots looked at per lock hold */
#define IDLE_WAIT_MS 1000    /* poll, besides the wake-ups of mi_budget_check */
#define TRIM_FRACTION 16     /* give freed heap back after budget/16 went */
#define TRIM_MIN (1u << 20)

/* ---- choices ---- */

uint64_t mi_budget_low(uint64_t budget)
{
    return budget / 100 * LOW_WATERMARK_PERCENT;
}

uint64_t mi_budget_excess(uint64_t bytes, uint64_t budget, bool reclaiming)
{
    if (!budget)
        return 0;
    uint64_t low = mi_budget_low(budget);
    if (bytes > budget || (reclaiming && bytes > low))
        return bytes - low;
    return 0;
}

bool mi_listing_evictable(const struct listing *l)
{
    /* the directory's reference only: no handle reads it */
    return l->refs == 1 && l->complete;
}

enum mi_victim mi_victim_of(const struct inode *i, const struct inode *root)
{
    if (i == root || !i->parent || !i->linked || i->pending || i->retired || i->nlookup == 0)
        return MI_KEEP;
    /* refs: open files, directory handles, children, requests under way */
    if (i->refs > 0 || i->parent->d->opens > 0)
        return MI_KEEP;
    /* Directories are never asked for: the kernel would unhash a
     * directory that is a process's working directory (getcwd() then fails
     * with ENOENT: git, make, a spawned interpreter) or a mount point of
     * another filesystem (detached). Their listings go in step 1; what
     * stays is the inode, a few hundred bytes. */
    if (i->is_dir)
        return MI_KEEP;
    return i->recent ? MI_SECOND_CHANCE : MI_FORGET;
}

bool mi_under_pressure(const struct om_meta *m)
{
    uint64_t budget = m->cfg.memory_budget;
    return budget && __atomic_load_n(&m->mem, __ATOMIC_RELAXED) >= mi_budget_low(budget);
}

/* ---- the LRU of installed listings ---- */

static bool lru_linked(const struct om_meta *m, const struct listing *l)
{
    return l->lru_prev || m->lru_head == l;
}

void mi_lru_remove(struct om_meta *m, struct listing *l)
{
    if (lru_linked(m, l)) {
        if (l->lru_prev)
            l->lru_prev->lru_next = l->lru_next;
        else
            m->lru_head = l->lru_next;
        if (l->lru_next)
            l->lru_next->lru_prev = l->lru_prev;
        else
            m->lru_tail = l->lru_prev;
    }
    l->lru_prev = l->lru_next = NULL;
    l->dir = NULL;
}

void mi_lru_touch(struct om_meta *m, struct listing *l)
{
    if (!l || !l->dir || m->lru_head == l)
        return;
    struct inode *dir = l->dir;
    mi_lru_remove(m, l);
    l->dir = dir;
    l->lru_next = m->lru_head;
    if (m->lru_head)
        m->lru_head->lru_prev = l;
    m->lru_head = l;
    if (!m->lru_tail)
        m->lru_tail = l;
}

/* ---- the reclaim ---- */

void mi_budget_check(struct om_meta *m)
{
    uint64_t now = __atomic_load_n(&m->mem, __ATOMIC_RELAXED);
    if (now > m->st.bytes_peak)
        m->st.bytes_peak = now;
    if (m->reclaim_running && m->cfg.memory_budget && now > m->cfg.memory_budget)
        pthread_cond_signal(&m->reclaim_cond);
}

static uint64_t mem_now(const struct om_meta *m)
{
    return __atomic_load_n(&m->mem, __ATOMIC_RELAXED);
}

uint64_t mi_evict_listings(struct om_meta *m, uint64_t want)
{
    uint64_t freed = 0;
    for (struct listing *l = m->lru_tail; l && freed < want;) {
        struct listing *prev = l->lru_prev;
        if (mi_listing_evictable(l)) {
            struct inode *dir = l->dir;
            uint64_t before = mem_now(m);
            /* Dropped within a second of its install: the budget cannot hold
             * this directory's listing, so lookups there go by name until
             * entry_timeout instead of listing it whole again each time. */
            uint64_t installed = l->expire_ms - m->cfg.entry_ttl_ms;
            if (om_now_ms() < installed + YOUNG_LISTING_MS)
                dir->d->slurp_retry_ms = l->expire_ms;
            mi_listing_drop_times(m, dir->d->key, l);
            mi_lru_remove(m, l);
            dir->d->listing = NULL;
            mi_listing_put(l);
            /* a directory kept for its listing (mi_keeps_listing) goes
             * with it; freeing its parents may take listings near l out
             * of the list: start again from its tail */
            bool unheld = dir->refs == 0 && dir->nlookup == 0 && dir != m->root;
            if (unheld)
                m->unheld(m, dir);
            uint64_t after = mem_now(m);
            freed += before > after ? before - after : 0;
            m->st.listings_evicted++;
            if (unheld) {
                l = m->lru_tail;
                continue;
            }
        }
        l = prev;
    }
    return freed;
}

struct victim {
    uint64_t parent;
    size_t len;
    char name[NAME_MAX_BYTES + 1];
};

/* Names of inodes the kernel may forget, about want bytes' worth, from the
 * clock hand on. Returns how many went into v; *pass is set when the hand
 * went around the whole table. Caller holds m->lock. */
static size_t pick_victims(struct om_meta *m, uint64_t want, struct victim *v, size_t max,
                           bool *pass)
{
    size_t cap = m->inodes.cap, n = 0, looked = 0;
    uint64_t bytes = 0;
    *pass = false;
    while (cap && n < max && bytes < want && looked < OM_MIN(cap, (size_t)SCAN_PER_ROUND)) {
        size_t k = m->clock_hand++ & (cap - 1);
        if (k == cap - 1)
            *pass = true;
        looked++;
        struct inode *i = m->inodes.slots[k];
        if (!i)
            continue;
        enum mi_victim what = mi_victim_of(i, m->root);
        if (what == MI_SECOND_CHANCE)
            i->recent = false;
        if (what != MI_FORGET)
            continue;
        const char *name = mi_name(i);
        v[n].parent = i->parent->ino;
        v[n].len = strlen(name);
        memcpy(v[n].name, name, v[n].len + 1);
        n++;
        /* not picked again before its FORGET comes */
        i->recent = true;
        bytes += mi_mem_size(i);
        if (i->x)
            bytes += mi_mem_size(i->x);
    }
    return n;
}

static void wait_ms(struct om_meta *m, uint64_t ms)
{
    om_cond_wait_ms(&m->reclaim_cond, &m->lock, ms);
}

static void *reclaim_main(void *arg)
{
    struct om_meta *m = arg;
    struct victim *v = malloc(INVAL_BATCH * sizeof(*v));
    uint64_t freed_since_trim = 0;
    bool reclaiming = false, warned = false;
    pthread_mutex_lock(&m->lock);
    while (!m->reclaim_stopping) {
        uint64_t budget = m->cfg.memory_budget;
        if (freed_since_trim >= OM_MAX(budget / TRIM_FRACTION, (uint64_t)TRIM_MIN)) {
            /* what was freed is spread over the heaps of every thread that
             * allocated it: hand whole free pages back, or RSS climbs past
             * the budget by what the allocator keeps */
            freed_since_trim = 0;
            pthread_mutex_unlock(&m->lock);
            malloc_trim(0);
            pthread_mutex_lock(&m->lock);
        }
        uint64_t want = mi_budget_excess(mem_now(m), budget, reclaiming);
        reclaiming = want > 0;
        if (!want) {
            wait_ms(m, IDLE_WAIT_MS);
            continue;
        }
        uint64_t before = mem_now(m);
        /* Half from listings, half from names the kernel holds: listings
         * alone would leave the names a walk made before the pressure
         * (and the kernel's inodes for them, about 1 KiB each) in place
         * for good, and every later listing would thrash against them. */
        size_t n = 0;
        bool pass = false;
        bool can_inval = m->cfg.inval_entry && v;
        uint64_t got = mi_evict_listings(m, can_inval ? want / 2 : want);
        freed_since_trim += got;
        while (got < want && can_inval && !m->reclaim_stopping) {
            /* a whole turn of the hand if need be (names used since the last
             * turn get a second chance), letting requests in between */
            n = pick_victims(m, want - got, v, INVAL_BATCH, &pass);
            if (n || pass)
                break;
            pthread_mutex_unlock(&m->lock);
            sched_yield();
            pthread_mutex_lock(&m->lock);
        }
        if (n == 0 && got < want) {
            uint64_t more = mi_evict_listings(m, want - got); /* no name to give back now */
            got += more;
            freed_since_trim += more;
        }
        if (n == 0) {
            if (got == 0) /* nothing to free now: look again later */
                wait_ms(m, pass || !can_inval ? 100 : 1);
            continue;
        }
        pthread_mutex_unlock(&m->lock);
        uint64_t told = 0;
        for (size_t k = 0; k < n; k++) {
            int rc = m->cfg.inval_entry(m->cfg.inval_ud, v[k].parent, v[k].name, v[k].len);
            if (rc == 0)
                told++;
            else if (rc != -ENOENT && rc != -ENOTCONN && rc != -ENODEV && !warned) {
                /* ENOENT: gone already; the others: unmounting */
                om_warn("asking the kernel to forget names: %s", strerror(-rc));
                warned = true;
            }
        }
        pthread_mutex_lock(&m->lock);
        m->st.invalidations += told;
        /* rate limit: the kernel's FORGETs arrive meanwhile */
        wait_ms(m, INVAL_PAUSE_MS);
        uint64_t after = mem_now(m);
        freed_since_trim += before > after ? before - after : 0;
    }
    pthread_mutex_unlock(&m->lock);
    free(v);
    return NULL;
}

int mi_reclaim_start(struct om_meta *m)
{
    int rc = pthread_create(&m->reclaim, NULL, reclaim_main, m);
    if (rc)
        return -rc;
    m->reclaim_running = true;
    return 0;
}

void mi_reclaim_stop(struct om_meta *m)
{
    if (!m->reclaim_running)
        return;
    pthread_mutex_lock(&m->lock);
    m->reclaim_stopping = true;
    pthread_cond_signal(&m->reclaim_cond);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->reclaim, NULL);
    m->reclaim_running = false;
}
