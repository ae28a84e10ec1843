/* The write path's writers: the table of files open for writing, open,
 * write, read, truncate, release, metadata, and pushing a recovery file.
 * Parts and their uploads are in parts.c, commits in commit.c, staging and
 * recovery files in staging.c.
 *
 * Network requests run without w->lock, except that commit keeps
 * w->committing set so writes wait. */
#include "objmount/writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "objmount/dcache.h"
#include "objmount/log.h"
#include "objmount/part_layout.h"
#include "objmount/util.h"
#include "writer_int.h"

/* ---- the pool ---- */

struct om_writers *om_writers_new(struct om_store *store, const struct om_writers_config *cfg,
                                  char *err, size_t errlen)
{
    struct om_writers *ws = calloc(1, sizeof(*ws));
    if (!ws) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ws->store = store;
    ws->cfg = *cfg;
    /* parts of at least the store's smallest; how many a file may take
     * is checked against the store's limit as the file grows */
    const struct om_store_caps *caps = om_store_caps(store);
    if (ws->cfg.part_size < OM_MAX(caps->min_part, 5ULL << 20))
        ws->cfg.part_size = OM_MAX(caps->min_part, 5ULL << 20);
    if (ws->cfg.max_parts_in_flight < 1)
        ws->cfg.max_parts_in_flight = 8;
    ws->cache_dir = strdup(cfg->cache_dir);
    ws->bucket = strdup(cfg->bucket ? cfg->bucket : "");
    ws->endpoint = strdup(cfg->endpoint ? cfg->endpoint : "");
    if (!ws->cache_dir || !ws->bucket || !ws->endpoint ||
        asprintf(&ws->staging_dir, "%s/staging", cfg->cache_dir) < 0 ||
        asprintf(&ws->recovery_dir, "%s/recovery", cfg->cache_dir) < 0 ||
        om_htable_init(&ws->table, 64)) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    ws->cfg.cache_dir = ws->cache_dir;
    int rc = wi_mkdir_p(ws->staging_dir, 0700);
    if (!rc)
        rc = wi_mkdir_p(ws->recovery_dir, 0700);
    if (rc) {
        snprintf(err, errlen, "cache directory %s: %s", cfg->cache_dir, strerror(-rc));
        goto fail;
    }
    pthread_mutex_init(&ws->lock, NULL);
    pthread_cond_init(&ws->work, NULL);
    wi_recover_leftovers(ws);
    if (wi_workers_start(ws) != 0) {
        snprintf(err, errlen, "cannot start upload workers");
        om_writers_free(ws);
        return NULL;
    }
    return ws;
fail:
    free(ws->cache_dir);
    free(ws->bucket);
    free(ws->endpoint);
    free(ws->staging_dir);
    free(ws->recovery_dir);
    om_htable_destroy(&ws->table);
    free(ws);
    return NULL;
}

/* Every open writer, each with a reference taken (release them). NULL with
 * *n = 0 when there is none or no memory. */
static struct om_writer **all_writers(struct om_writers *ws, size_t *n)
{
    pthread_mutex_lock(&ws->lock);
    size_t count = 0;
    for (size_t b = 0; b < ws->table.nbuckets; b++)
        for (struct om_hnode *x = ws->table.buckets[b]; x; x = x->next)
            count++;
    struct om_writer **v = count ? calloc(count, sizeof(*v)) : NULL;
    *n = 0;
    for (size_t b = 0; v && b < ws->table.nbuckets; b++) {
        for (struct om_hnode *x = ws->table.buckets[b]; x; x = x->next) {
            struct om_writer *w = om_container_of(x, struct om_writer, node);
            w->refs++;
            v[(*n)++] = w;
        }
    }
    pthread_mutex_unlock(&ws->lock);
    return v;
}

void om_writers_stopping(struct om_writers *ws, uint64_t deadline_ms)
{
    if (!ws)
        return;
    pthread_mutex_lock(&ws->lock);
    ws->stop_deadline_ms = om_now_ms() + deadline_ms;
    pthread_mutex_unlock(&ws->lock);
    size_t n;
    struct om_writer **v = all_writers(ws, &n);
    for (size_t i = 0; i < n; i++) {
        struct om_writer *w = v[i];
        pthread_mutex_lock(&w->lock);
        if (w->committing)
            om_warn("stopping: waiting for the upload of %s (%" PRIu64 " bytes) to finish, at "
                    "most %" PRIu64 " s more",
                    w->key, w->size, (deadline_ms + 999) / 1000);
        pthread_mutex_unlock(&w->lock);
        om_writer_release(w);
    }
    free(v);
}

/* A writer whose file was never released when the daemon stops: what was
 * not uploaded is kept as interrupted, then it goes. No FUSE request runs
 * any more. */
static void settle(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    bool interrupted = w->dirty && w->changes != w->failed_changes && !w->write_error &&
                       !w->discarded;
    pthread_mutex_unlock(&w->lock);
    wi_drain(w);
    if (w->upload_id)
        wi_abort_upload(w); /* the recovered file holds every byte */
    pthread_mutex_lock(&w->lock);
    if (interrupted)
        wi_keep_in_recovery(w, "interrupted");
    pthread_mutex_unlock(&w->lock);
    wi_writer_destroy(w);
}

void om_writers_free(struct om_writers *ws)
{
    if (!ws)
        return;
    size_t n;
    struct om_writer **v = all_writers(ws, &n);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&ws->lock);
        om_htable_remove(&ws->table, &v[i]->node);
        ws->st.open_writers--;
        pthread_mutex_unlock(&ws->lock);
        settle(v[i]);
    }
    free(v);
    wi_workers_stop(ws);
    pthread_cond_destroy(&ws->work);
    pthread_mutex_destroy(&ws->lock);
    om_htable_destroy(&ws->table);
    free(ws->queue);
    free(ws->cache_dir);
    free(ws->bucket);
    free(ws->endpoint);
    free(ws->staging_dir);
    free(ws->recovery_dir);
    free(ws);
}

/* ---- parts ---- */

/* ---- writers ---- */

static int truncate_to(struct om_writer *w, uint64_t size, bool by_open);

static struct om_writer *table_get(struct om_writers *ws, uint64_t ino)
{
    uint64_t h = om_hash_u64(ino);
    for (struct om_hnode *n = om_htable_first(&ws->table, h); n; n = om_htable_next(n, h)) {
        struct om_writer *w = om_container_of(n, struct om_writer, node);
        if (w->ino == ino)
            return w;
    }
    return NULL;
}

void wi_writer_destroy(struct om_writer *w)
{
    /* unlinked while still locked: a mount of the same cache_dir starting
     * now would take an unlocked staging file for a dead daemon's and move
     * it into recovery (seen once in a Swift run). Its blocks go first: a
     * thread preempted between the unlink and the close would otherwise
     * hold a full disk's space after the name is gone, and a program that
     * saw ENOSPC, closed and wrote again could meet ENOSPC once more (seen
     * once in a loaded run). A recovery entry is a copy or a reflink, which
     * the truncation leaves whole. */
    if (w->path && w->fd >= 0 && ftruncate(w->fd, 0) != 0)
        om_debug("staging file %s: truncate before removal: %s", w->path, strerror(errno));
    if (w->sidecar)
        unlink(w->sidecar);
    if (w->path)
        unlink(w->path);
    if (w->fd >= 0)
        close(w->fd);
    for (int i = 0; i < w->nparts; i++)
        free(w->parts[i]);
    free(w->parts);
    if (w->md5.ctx)
        om_digest_free(&w->md5);
    free(w->upload_id);
    free(w->recovery);
    free(w->path);
    free(w->sidecar);
    free(w->key);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

/* The writer of ino a new open joins, or NULL. A writer whose write failed
 * is not joined: its program was told (every flush and close of its handles
 * fails), and a new open, which may come before the RELEASE of the handle
 * whose close() returned the error, starts again from the stored object.
 * The old writer leaves the table; its handles keep it. Caller holds
 * ws->lock (write_error is read atomically: w->lock comes before ws->lock). */
static struct om_writer *joinable(struct om_writers *ws, uint64_t ino)
{
    struct om_writer *w = table_get(ws, ino);
    if (w && __atomic_load_n(&w->write_error, __ATOMIC_ACQUIRE)) {
        om_htable_remove(&ws->table, &w->node);
        w->detached = true;
        return NULL;
    }
    return w;
}

int om_writer_open(struct om_writers *ws, uint64_t ino, const char *key,
                   const struct om_writer_base *base, bool trunc, struct om_writer **out)
{
    pthread_mutex_lock(&ws->lock);
    struct om_writer *w = joinable(ws, ino);
    if (w) {
        w->refs++;
        pthread_mutex_unlock(&ws->lock);
        int rc = trunc ? truncate_to(w, 0, true) : 0;
        if (rc) {
            om_writer_release(w);
            return rc;
        }
        *out = w;
        return 0;
    }
    pthread_mutex_unlock(&ws->lock);
    if (base->exists && ws->cfg.no_overwrite)
        return -EEXIST;

    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->ws = ws;
    w->ino = ino;
    w->fd = -1;
    w->refs = 1;
    w->key = strdup(key);
    pthread_mutex_init(&w->lock, NULL);
    om_cond_init_monotonic(&w->cond); /* wi_drain's timed wait */
    w->base = *base;
    w->meta = base->meta;
    w->stored_exists = base->exists;
    om_strlcpy(w->stored_etag, base->etag, sizeof(w->stored_etag));
    w->stored_size = base->exists ? base->size : 0;
    clock_gettime(CLOCK_REALTIME, &w->mtime);
    int rc = w->key ? wi_staging_create(ws, w) : -ENOMEM;
    if (!rc)
        rc = om_digest_init(&w->md5, OM_DIGEST_MD5);
    if (rc) {
        wi_writer_destroy(w);
        return rc;
    }
    w->md5_valid = true;
    if (trunc || !base->exists) {
        w->materialized = true;
        w->dirty = true; /* even an empty file is committed */
        w->trunc_only = base->exists; /* dd and `>`: a flush now would store nothing */
        w->changes = 1;
        w->size = 0;
    } else {
        w->size = base->size;
    }
    pthread_mutex_lock(&ws->lock);
    struct om_writer *race = joinable(ws, ino);
    if (race) {
        race->refs++;
        pthread_mutex_unlock(&ws->lock);
        wi_writer_destroy(w);
        int rc = trunc ? truncate_to(race, 0, true) : 0;
        if (rc) {
            om_writer_release(race);
            return rc;
        }
        *out = race;
        return 0;
    }
    om_htable_insert(&ws->table, &w->node, om_hash_u64(ino));
    ws->st.open_writers++;
    pthread_mutex_unlock(&ws->lock);
    *out = w;
    return 0;
}

struct om_writer *om_writer_find(struct om_writers *ws, uint64_t ino)
{
    if (!ws)
        return NULL;
    pthread_mutex_lock(&ws->lock);
    struct om_writer *w = table_get(ws, ino);
    if (w)
        w->refs++;
    pthread_mutex_unlock(&ws->lock);
    return w;
}

bool om_writer_is_open(struct om_writers *ws, uint64_t ino)
{
    if (!ws)
        return false;
    pthread_mutex_lock(&ws->lock);
    bool open = table_get(ws, ino) != NULL;
    pthread_mutex_unlock(&ws->lock);
    return open;
}

/* The last release of a file whose last commit stored it as it is: its
 * blocks go into the data cache from the staging file. Nobody can reach
 * the writer any more, so the bytes are those stored. */
static void cache_written(struct om_writer *w)
{
    struct om_dcache *dc = w->ws->cfg.dcache;
    if (!dc || !w->last.stored || w->dirty || w->write_error || w->discarded ||
        w->last.size != w->size || !w->last.size)
        return;
    struct om_dcache_stats st;
    om_dcache_get_stats(dc, &st);
    struct om_dcache_obj o;
    if (w->last.size > st.limit_bytes / 4 || !st.storing ||
        !om_dcache_obj_init(dc, w->key, w->last.etag, w->last.size, &o))
        return;
    enum { CHUNK_BLOCKS = 8 };
    char *buf = malloc(CHUNK_BLOCKS * OM_DCACHE_BLOCK);
    uint64_t nblocks = om_dcache_blocks(&o);
    for (uint64_t b = 0; buf && b < nblocks; b += CHUNK_BLOCKS) {
        uint64_t n = OM_MIN((uint64_t)CHUNK_BLOCKS, nblocks - b);
        uint64_t off = b * OM_DCACHE_BLOCK, len = OM_MIN(n * OM_DCACHE_BLOCK, o.size - off);
        uint64_t got = 0;
        while (got < len) {
            ssize_t r = pread(w->fd, buf + got, len - got, (off_t)(off + got));
            if (r <= 0)
                break;
            got += (uint64_t)r;
        }
        if (got != len)
            break;
        om_dcache_put(dc, &o, b, n, buf);
    }
    free(buf);
}

/* Does the last release have to commit? Caller holds w->lock. What a
 * failed commit already put in recovery is not sent again; after a failed
 * write nothing is committed (the application was told). */
static bool release_pending(const struct om_writer *w)
{
    return w->dirty && !w->discarded && w->changes != w->failed_changes && !w->write_error;
}

void om_writer_release(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    /* Nothing written may vanish: the last reference commits what is
     * uncommitted, and does so while the writer is still in the table. The
     * kernel sends RELEASE after close() has returned, so a chmod, utimens or
     * rename of the name (rsync does all three) can arrive meanwhile: it
     * finds the writer and rides on or waits for this commit instead of
     * acting on the older object. The writer leaves the table only with
     * nothing pending, checked under both locks (w->lock first). */
    bool tried = false;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        bool pending = !tried && release_pending(w);
        pthread_mutex_lock(&ws->lock);
        bool last = w->refs == 1;
        if (!last || !pending) {
            w->refs--;
            if (last) {
                if (!w->detached)
                    om_htable_remove(&ws->table, &w->node);
                ws->st.open_writers--;
            }
        }
        pthread_mutex_unlock(&ws->lock);
        if (!last || !pending) {
            if (last && w->write_error && w->dirty)
                om_warn("%s: not uploaded: a write failed (%s); the stored object is unchanged",
                        w->key, strerror(-w->write_error));
            pthread_mutex_unlock(&w->lock);
            if (!last)
                return;
            cache_written(w);
            break;
        }
        uint64_t changes = w->changes;
        pthread_mutex_unlock(&w->lock);
        int rc = om_writer_commit(w, NULL);
        /* once more only if someone changed the file during this commit */
        pthread_mutex_lock(&w->lock);
        tried = rc != 0 || w->changes == changes;
        pthread_mutex_unlock(&w->lock);
    }
    wi_drain(w);
    if (w->upload_id)
        wi_abort_upload(w);
    wi_writer_destroy(w);
    pthread_mutex_lock(&ws->lock);
    bool idle = ws->st.open_writers == 0;
    pthread_mutex_unlock(&ws->lock);
    if (idle)
        om_heap_idle();
}

/* How long a writer going away lets its parts in flight end by themselves
 * before it cancels them. A part cancelled on our side may still be stored
 * by the server after the abort that follows: versitygw links it into a
 * new directory of the aborted upload, which is then listed again for
 * good, and AWS says an abort may have to be repeated while parts are in
 * progress. So an upload is aborted once none of its requests runs, unless
 * the server takes longer than this (then the abort is checked, below). */
#define DRAIN_WAIT_MS 15000

void wi_drain(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    w->dying = true;
    for (int i = 0; i < w->nparts; i++) {
        if (w->parts[i]->state == P_QUEUED)
            w->parts[i]->state = P_IDLE;
    }
    uint64_t deadline = om_now_ms() + DRAIN_WAIT_MS;
    for (uint64_t now; w->inflight > 0 && (now = om_now_ms()) < deadline;)
        om_cond_wait_ms(&w->cond, &w->lock, deadline - now);
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->state == P_UPLOADING) {
            om_store_part_cancel(w->ws->store, &p->put);
            w->parts_cancelled = true;
        }
    }
    while (w->in_queue || w->working || w->inflight > 0)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

/* ---- data ---- */

/* A write or truncate failed: the staging file no longer holds what the
 * application meant. Caller holds w->lock. */
static int poison(struct om_writer *w, int err)
{
    if (!w->write_error) {
        __atomic_store_n(&w->write_error, err, __ATOMIC_RELEASE);
        om_warn("%s: a write failed (%s): this file will not be uploaded until every handle "
                "is closed",
                w->key, strerror(-err));
    }
    return err;
}

/* Can a file reach end bytes? S3 stores at most 5 TiB in one object, and
 * the parts must cover it. */
static int size_allowed(struct om_writers *ws, uint64_t end)
{
    const struct om_store_caps *caps = om_store_caps(ws->store);
    int parts = om_part_count(ws->cfg.part_size, end);
    return end > caps->max_object || parts < 0 || parts > caps->max_parts ? -EFBIG : 0;
}

ssize_t om_writer_write(struct om_writer *w, const char *buf, size_t len, uint64_t off)
{
    uint64_t end = off + len;
    int rc = end < off ? -EFBIG : size_allowed(w->ws, end); /* at once: nothing fetched */
    if (!rc)
        rc = wi_check_space(w->ws, len);
    pthread_mutex_lock(&w->lock);
    if (!rc)
        rc = wi_prepare_write(w);
    /* pwrite under the lock keeps the part generations honest */
    for (size_t at = 0; !rc && at < len;) {
        ssize_t n = pwrite(w->fd, buf + at, len - at, (off_t)(off + at));
        if (n < 0)
            rc = -errno;
        else
            at += (size_t)n;
    }
    uint64_t old = w->size;
    if (!rc && end > w->size)
        w->size = end;
    if (!rc)
        rc = wi_layout(w);
    if (!rc) {
        wi_touch(w, OM_MIN(off, old), end);
        w->dirty = true;
        w->trunc_only = false;
        w->changes++;
        clock_gettime(CLOCK_REALTIME, &w->mtime);
        wi_queue_passed(w, off);
    } else {
        poison(w, rc);
    }
    pthread_mutex_unlock(&w->lock);
    return rc ? rc : (ssize_t)len;
}

bool om_writer_failed(struct om_writer *w)
{
    return __atomic_load_n(&w->write_error, __ATOMIC_ACQUIRE) != 0;
}

bool om_writer_holds_data(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    bool m = w->materialized;
    pthread_mutex_unlock(&w->lock);
    return m;
}

ssize_t om_writer_read(struct om_writer *w, char *buf, size_t len, uint64_t off)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing && !w->materialized)
        pthread_cond_wait(&w->cond, &w->lock);
    bool m = w->materialized;
    uint64_t size = w->size;
    pthread_mutex_unlock(&w->lock);
    if (!m)
        return -EAGAIN;
    if (off >= size)
        return 0;
    len = (size_t)OM_MIN((uint64_t)len, size - off);
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(w->fd, buf + done, len - done, (off_t)(off + done));
        if (n < 0)
            return -errno;
        if (n == 0) {
            memset(buf + done, 0, len - done); /* a hole at the end */
            done = len;
            break;
        }
        done += (size_t)n;
    }
    return (ssize_t)done;
}

/* Truncate to size; by_open: the truncation an O_TRUNC open makes, which
 * alone does not make a flush commit. */
static int truncate_to(struct om_writer *w, uint64_t size, bool by_open)
{
    int rc = size_allowed(w->ws, size);
    pthread_mutex_lock(&w->lock);
    if (!rc && size == 0) {
        while (w->committing)
            pthread_cond_wait(&w->cond, &w->lock);
        w->materialized = true; /* nothing to fetch */
    } else if (!rc) {
        rc = wi_prepare_write(w);
    }
    /* parts beyond the new end must not be in flight */
    while (!rc && (w->inflight > 0 || w->working))
        pthread_cond_wait(&w->cond, &w->lock);
    if (!rc && ftruncate(w->fd, (off_t)size) != 0)
        rc = -errno;
    if (!rc) {
        uint64_t old = w->size;
        w->size = size;
        rc = wi_layout(w);
        /* from the last byte kept: a part cut short by a shrink changed too */
        uint64_t from = OM_MIN(old, size);
        wi_touch(w, from ? from - 1 : 0, OM_MAX(old, size) + 1);
        w->dirty = true;
        w->trunc_only = by_open && w->stored_exists;
        w->changes++;
        clock_gettime(CLOCK_REALTIME, &w->mtime);
    }
    if (rc)
        poison(w, rc);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int om_writer_truncate(struct om_writer *w, uint64_t size)
{
    return truncate_to(w, size, false);
}

void om_writer_get_meta(struct om_writer *w, struct om_file_meta *m)
{
    pthread_mutex_lock(&w->lock);
    *m = w->meta;
    pthread_mutex_unlock(&w->lock);
}

bool om_writers_keep_meta(struct om_writers *ws)
{
    return om_store_caps(ws->store)->user_meta;
}

void om_writer_set_meta(struct om_writer *w, const struct om_file_meta *m)
{
    bool keep = om_writers_keep_meta(w->ws);
    pthread_mutex_lock(&w->lock);
    w->meta = *m;
    if (!keep) { /* shown while open; nothing to store */
        pthread_mutex_unlock(&w->lock);
        return;
    }
    w->meta_version++;
    w->dirty = true;
    w->trunc_only = false;
    w->changes++;
    pthread_mutex_unlock(&w->lock);
}

void om_writer_attr(struct om_writer *w, uint64_t *size, struct timespec *mtime)
{
    pthread_mutex_lock(&w->lock);
    *size = w->size;
    *mtime = w->meta.has_mtime ? w->meta.mtime : w->mtime;
    pthread_mutex_unlock(&w->lock);
}

bool om_writers_busy_under(struct om_writers *ws, const char *prefix)
{
    if (!ws)
        return false;
    size_t n = strlen(prefix);
    bool busy = false;
    pthread_mutex_lock(&ws->lock);
    for (size_t b = 0; b < ws->table.nbuckets && !busy; b++) {
        for (struct om_hnode *x = ws->table.buckets[b]; x && !busy; x = x->next) {
            struct om_writer *w = om_container_of(x, struct om_writer, node);
            busy = strncmp(w->key, prefix, n) == 0;
        }
    }
    pthread_mutex_unlock(&ws->lock);
    return busy;
}

void om_writers_get_stats(struct om_writers *ws, struct om_writers_stats *out)
{
    pthread_mutex_lock(&ws->lock);
    *out = ws->st;
    out->etag_form = ws->etag_form;
    pthread_mutex_unlock(&ws->lock);
}

int om_writer_push_file(struct om_writers *ws, const char *path, const char *key,
                        const struct om_file_meta *meta, char *err, size_t errlen)
{
    struct om_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->ws = ws;
    w->pushing = true;
    w->refs = 1;
    w->key = strdup(key);
    pthread_mutex_init(&w->lock, NULL);
    om_cond_init_monotonic(&w->cond); /* wi_drain's timed wait */
    w->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int rc = !w->key ? -ENOMEM : w->fd < 0 || fstat(w->fd, &st) != 0 ? -errno : 0;
    if (!rc)
        rc = om_digest_init(&w->md5, OM_DIGEST_MD5);
    if (!rc) {
        if (meta)
            w->meta = *meta;
        w->materialized = true;
        w->dirty = true;
        w->changes = 1;
        w->size = (uint64_t)st.st_size;
        w->md5_valid = true;
        clock_gettime(CLOCK_REALTIME, &w->mtime);
        pthread_mutex_lock(&w->lock);
        rc = wi_layout(w);
        pthread_mutex_unlock(&w->lock);
    }
    if (!rc)
        rc = om_writer_commit(w, NULL);
    if (rc)
        snprintf(err, errlen, "%s", w->last_error[0] ? w->last_error : strerror(-rc));
    /* the file is the caller's: writer_destroy must not delete it */
    free(w->path);
    w->path = NULL;
    wi_drain(w);
    if (w->upload_id)
        wi_abort_upload(w);
    wi_writer_destroy(w);
    return rc;
}

void om_writer_hold(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing || w->held)
        pthread_cond_wait(&w->cond, &w->lock);
    w->held = true;
    pthread_mutex_unlock(&w->lock);
}

void om_writer_unhold(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    w->held = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void om_writer_discard(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    w->discarded = true;
    w->dirty = false;
    w->trunc_only = false;
    pthread_mutex_unlock(&w->lock);
    wi_abort_upload(w);
}

int om_writer_rekey(struct om_writer *w, const char *newkey, const char *etag)
{
    char *k = strdup(newkey);
    if (!k)
        return -ENOMEM;
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    wi_abort_upload(w); /* parts uploaded under the old key are of no use */
    pthread_mutex_lock(&w->lock);
    pthread_mutex_lock(&w->ws->lock); /* om_writers_busy_under reads keys */
    free(w->key);
    w->key = k;
    pthread_mutex_unlock(&w->ws->lock);
    if (etag && etag[0]) {
        /* the copy holds the same bytes under another ETag (Swift gives a
         * copy of a multipart object a plain MD5): a first write fetches
         * it, and unchanged parts are copied from it */
        om_strlcpy(w->stored_etag, etag, sizeof(w->stored_etag));
        if (!w->materialized)
            om_strlcpy(w->base.etag, etag, sizeof(w->base.etag));
    }
    if (w->sidecar)
        wi_write_sidecar(w->sidecar, w->ws, w, "staging", NULL, true);
    pthread_mutex_unlock(&w->lock);
    return 0;
}
