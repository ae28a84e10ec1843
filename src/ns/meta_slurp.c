/* Background listings: a whole directory listed by a thread of its own,
 * so that lookups in it cost one LIST instead of a HEAD and a LIST per
 * name, and the subdirectories a walk (find, os.walk, rsync, du) will open
 * next, listed ahead of it, WALK_PARALLEL at a time. */
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

static void walk_pump(struct om_meta *m);
static bool start_slurp(struct om_meta *m, struct inode *dir, bool walk);

struct slurp {
    struct om_meta *m;
    struct inode *dir;
    char *key;
    bool walk;    /* listed ahead of a walk */
    uint32_t gen; /* dir->d->gen when it started */
};

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
        char *next = NULL;
        struct om_store_error err;
        rc = mi_list_page(m, l, j->key, token, &next, &err);
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
            om_debug("listed %s whole: %zu names in %" PRIu64 " pages", *j->key ? j->key : "/",
                     l->n, pages);
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
