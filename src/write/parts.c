/* Parts of the write path (their table is part_table.c): the queue of
 * writers with parts to send, the background workers that hash and upload
 * them, the multipart upload they go into, and which digests that takes
 * (the server's ETag form, learned per mount).
 *
 * Network requests run without w->lock. */
#include "objmount/writer.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "writer_int.h"

/* Queue w for the workers. Caller holds w->lock. Not while as many parts
 * as allowed are in flight: part_done queues it when one ends (queued then,
 * a worker would find nothing to start, wake the commit waiting for the
 * parts, which would queue it again: a loop that cost more CPU than the
 * hashing, 2.4 million context switches for 512 MiB). */
void wi_schedule(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    if (w->in_queue || w->dying || w->inflight >= ws->cfg.max_parts_in_flight)
        return;
    pthread_mutex_lock(&ws->lock);
    if (ws->qlen == ws->qcap) {
        int cap = ws->qcap ? ws->qcap * 2 : 16;
        struct om_writer **q = realloc(ws->queue, sizeof(*q) * (size_t)cap);
        if (!q) {
            pthread_mutex_unlock(&ws->lock);
            return; /* commit will upload what is left */
        }
        ws->queue = q;
        ws->qcap = cap;
    }
    ws->queue[ws->qlen++] = w; /* no reference: release drains the queue first */
    w->in_queue = true;
    pthread_cond_signal(&ws->work);
    pthread_mutex_unlock(&ws->lock);
}

/* Parts the writer has moved past go to the workers. Caller holds lock. */
void wi_queue_passed(struct om_writer *w, uint64_t off)
{
    bool any = false;
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->off + p->len > off)
            break;
        if (p->state == P_IDLE && p->len > 0) {
            p->state = P_QUEUED;
            any = true;
        }
    }
    if (any)
        wi_schedule(w);
}

static void part_done(struct om_store_part_put *put)
{
    struct part *p = put->ud;
    struct om_writer *w = p->w;
    struct om_writers *ws = w->ws;
    pthread_mutex_lock(&w->lock);
    w->inflight--;
    bool changed = p->gen != p->up_gen;
    if (put->error == -ECANCELED || w->dying) {
        p->state = P_IDLE; /* abandoned on purpose: not a failure, nothing to redo */
        pthread_cond_broadcast(&w->cond);
        pthread_mutex_unlock(&w->lock);
        return;
    }
    if (put->error == 0) {
        memcpy(p->etag, put->etag, OM_ETAG_MAX);
        p->state = changed ? P_IDLE : P_DONE;
        p->failures = 0;
        pthread_mutex_lock(&ws->lock);
        ws->st.part_uploads++;
        ws->st.bytes_uploaded += p->len;
        pthread_mutex_unlock(&ws->lock);
    } else if (changed) {
        p->state = P_IDLE; /* written again while going out: not a failure */
    } else if (!om_store_caps(ws->store)->part_replace) {
        /* its number may hold part of what went out: not sent again into
         * this upload (the store would lose a part sent twice); the commit
         * begins a new upload */
        p->state = P_IDLE;
        w->part_failed = true;
        snprintf(w->last_error, sizeof(w->last_error), "part %d: %s%s%.180s", p->number,
                 strerror(-put->error), put->err.message[0] ? ": " : "", put->err.message);
        om_warn("upload of %s part %d failed (%s): the upload begins again", w->key, p->number,
                w->last_error);
        pthread_mutex_lock(&ws->lock);
        ws->st.part_retries++;
        pthread_mutex_unlock(&ws->lock);
    } else {
        p->failures++;
        snprintf(w->last_error, sizeof(w->last_error), "part %d: %s%s%.180s", p->number,
                 strerror(-put->error), put->err.message[0] ? ": " : "", put->err.message);
        om_warn("upload of %s part %d failed (%s), attempt %d", w->key, p->number, w->last_error,
                p->failures);
        pthread_mutex_lock(&ws->lock);
        ws->st.part_retries++;
        pthread_mutex_unlock(&ws->lock);
        if (p->failures > PART_RETRIES) {
            p->state = P_IDLE;
            w->part_failed = true;
        } else {
            p->state = P_QUEUED;
            wi_schedule(w);
        }
    }
    if (w->inflight < ws->cfg.max_parts_in_flight) {
        for (int i = 0; i < w->nparts; i++) {
            if (w->parts[i]->state == P_QUEUED) {
                wi_schedule(w);
                break;
            }
        }
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void om_file_meta_object(const struct om_file_meta *m, uint64_t size, struct om_object *obj)
{
    obj->size = size;
    obj->mtime = time(NULL);
    obj->has_mode = m->has_mode;
    obj->mode = (uint32_t)m->mode;
    obj->has_uid = m->has_uid;
    obj->uid = m->uid;
    obj->has_gid = m->has_gid;
    obj->gid = m->gid;
    obj->has_mtime = m->has_mtime;
    obj->meta_mtime = m->mtime;
}

/* Create the multipart upload. Called by a worker without w->lock. */
static int ensure_upload(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    bool have = w->upload_id != NULL;
    struct om_file_meta m = w->meta;
    uint32_t version = w->meta_version;
    pthread_mutex_unlock(&w->lock);
    if (have)
        return 0;
    struct om_put_opts opts = {.meta = &m};
    char *id = NULL;
    struct om_store_error err;
    int rc = om_store_mpu_create(w->ws->store, w->key, &opts, &id, &err);
    pthread_mutex_lock(&w->lock);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "CreateMultipartUpload: %s %s",
                 strerror(-rc), err.code);
    } else {
        free(w->upload_id);
        w->upload_id = id;
        w->upload_seq++;
        w->upload_meta_version = version;
        wi_write_sidecar(w->sidecar, w->ws, w, "staging", NULL, true);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

/* MD5 of [off, off + len) of the staging file into out, fed into the
 * running whole-object digest too when feed. The bytes are hashed where
 * they lie in the page cache (a read-only mapping), not copied out first;
 * pread into buf (1 MiB) when the mapping fails. The caller holds no lock
 * and has set w->working, so the file does not shrink meanwhile
 * (om_writer_truncate waits for it). */
static int hash_part(struct om_writer *w, uint64_t off, uint64_t len, bool feed, char *buf,
                     unsigned char out[OM_MD5_LEN])
{
    struct om_digest d;
    int rc = om_digest_init(&d, OM_DIGEST_MD5);
    if (rc)
        return rc;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t skip = off % page;
    struct stat st;
    void *map = MAP_FAILED;
    if (len > 0 && fstat(w->fd, &st) == 0 && (uint64_t)st.st_size >= off + len)
        map = mmap(NULL, skip + len, PROT_READ, MAP_SHARED | MAP_POPULATE, w->fd,
                   (off_t)(off - skip));
    if (map != MAP_FAILED) {
        const char *bytes = (const char *)map + skip;
        om_digest_update(&d, bytes, len);
        if (feed)
            om_digest_update(&w->md5, bytes, len);
        munmap(map, skip + len);
        return om_digest_final(&d, out);
    }
    for (uint64_t at = 0; at < len && !rc;) {
        size_t want = (size_t)OM_MIN((uint64_t)(1 << 20), len - at);
        ssize_t got = pread(w->fd, buf, want, (off_t)(off + at));
        if (got <= 0) {
            rc = got < 0 ? -errno : -EIO;
            break;
        }
        om_digest_update(&d, buf, (size_t)got);
        if (feed)
            om_digest_update(&w->md5, buf, (size_t)got);
        at += (uint64_t)got;
    }
    if (rc) {
        om_digest_free(&d);
        return rc;
    }
    return om_digest_final(&d, out);
}

/* May part p, hashed at generation p->up_gen, be copied from the stored
 * object instead of sent? Caller holds w->lock. */
static bool part_copyable(struct om_writer *w, const struct part *p)
{
    struct om_writers *ws = w->ws;
    if (!p->stored_valid || p->stored_gen != p->up_gen || p->len < MIN_COPY ||
        p->off + p->len > w->stored_size || !w->stored_exists || !w->stored_etag[0])
        return false;
    pthread_mutex_lock(&ws->lock);
    bool off = ws->no_part_copy;
    pthread_mutex_unlock(&ws->lock);
    return !off;
}

/* Does the ETag a part copy came back with say other bytes than ours? Only
 * an MD5-shaped ETag can (AIStore's and other servers' may be opaque). */
static bool copy_etag_differs(const char *etag, const unsigned char md5[OM_MD5_LEN])
{
    char hex[2 * OM_MD5_LEN + 1];
    if (strlen(etag) != 2 * OM_MD5_LEN || strspn(etag, "0123456789abcdefABCDEF") != strlen(etag))
        return false;
    om_hex(md5, OM_MD5_LEN, hex);
    return strcasecmp(etag, hex) != 0;
}

/* Copy part p, unchanged since the stored object was stored, from that
 * object into the upload (UploadPartCopy): its bytes need not go out
 * again. Caller holds w->lock with w->working set; it is dropped around
 * the request. Returns true when the part is done; false when it must be
 * sent (the server does not copy, the object under the key is not the one
 * stored, or the part changed meanwhile). */
static bool copy_part(struct om_writer *w, struct part *p)
{
    struct om_writers *ws = w->ws;
    char src_etag[OM_ETAG_MAX], etag[OM_ETAG_MAX] = "";
    om_strlcpy(src_etag, w->stored_etag, sizeof(src_etag));
    char *id = strdup(w->upload_id);
    if (!id)
        return false;
    uint64_t off = p->off, len = p->len;
    uint32_t seq = w->upload_seq;
    p->state = P_COPYING;
    pthread_mutex_unlock(&w->lock);
    struct om_store_error err;
    int rc = om_store_part_copy(ws->store, w->key, id, p->number, w->key, off, off + len - 1, src_etag,
                             etag, &err);
    free(id);
    bool differs = rc == 0 && copy_etag_differs(etag, p->md5);
    if (rc == -ENOSYS || rc == -ENOTSUP) {
        pthread_mutex_lock(&ws->lock);
        bool first = !ws->no_part_copy;
        ws->no_part_copy = true;
        ws->st.part_copy_unsupported = true;
        pthread_mutex_unlock(&ws->lock);
        if (first)
            om_info("the server does not copy parts (UploadPartCopy: %s %s): a changed file's "
                    "unchanged parts are uploaded again",
                    strerror(-rc), err.code);
    } else if (rc) {
        om_info("%s part %d: copying it from the stored object failed (%s %s): uploading it",
                w->key, p->number, strerror(-rc), err.code);
    } else if (differs) {
        om_warn("%s part %d: the copy from the stored object has ETag %s, not the MD5 of the "
                "part: uploading it",
                w->key, p->number, etag);
    }
    pthread_mutex_lock(&w->lock);
    p->state = P_HASHING;
    if (rc || differs || p->gen != p->up_gen || seq != w->upload_seq || !w->upload_id)
        return false;
    om_strlcpy(p->etag, etag, sizeof(p->etag));
    p->state = P_DONE;
    p->failures = 0;
    p->up_seq = seq;
    p->put.body.len = len; /* what multipart_once compares with the part's length */
    pthread_mutex_lock(&ws->lock);
    ws->st.part_copies++;
    ws->st.bytes_copied += len;
    pthread_mutex_unlock(&ws->lock);
    return true;
}

/* Hash and send the queued parts of one writer, in order. */
static void work_on(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    char *buf = malloc(1 << 20);
    pthread_mutex_lock(&w->lock);
    w->in_queue = false;
    if (w->working || w->dying || !buf) {
        pthread_cond_broadcast(&w->cond); /* wi_drain waits for in_queue */
        pthread_mutex_unlock(&w->lock);
        free(buf);
        return;
    }
    w->working = true;
    for (;;) {
        if (w->inflight >= ws->cfg.max_parts_in_flight || w->aborting)
            break;
        struct part *p = NULL;
        for (int i = 0; i < w->nparts && !p; i++) {
            if (w->parts[i]->state == P_QUEUED)
                p = w->parts[i];
        }
        if (!p)
            break;
        if (!w->upload_id) {
            pthread_mutex_unlock(&w->lock);
            int rc = ensure_upload(w);
            pthread_mutex_lock(&w->lock);
            if (rc) {
                w->part_failed = true;
                for (int i = 0; i < w->nparts; i++)
                    if (w->parts[i]->state == P_QUEUED)
                        w->parts[i]->state = P_IDLE;
                break;
            }
            continue;
        }
        p->state = P_HASHING;
        p->up_gen = p->gen;
        uint64_t off = p->off, len = p->len;
        bool feed = w->md5_valid && w->md5_upto == off && wi_need_whole_md5(ws);
        pthread_mutex_unlock(&w->lock);

        int rc = hash_part(w, off, len, feed, buf, p->md5);
        if (!rc)
            wi_count_hashed(ws, feed ? 2 * len : len);

        pthread_mutex_lock(&w->lock);
        if (feed && w->md5_valid && !rc && p->gen == p->up_gen)
            w->md5_upto = off + len;
        else if (feed)
            w->md5_valid = false;
        if (w->aborting || !w->upload_id) {
            p->state = P_IDLE; /* the upload went away while we hashed */
            break;
        }
        if (rc) {
            p->state = P_IDLE;
            w->part_failed = true;
            snprintf(w->last_error, sizeof(w->last_error), "reading staging file: %s",
                     strerror(-rc));
            break;
        }
        if (part_copyable(w, p) && copy_part(w, p))
            continue;
        if (w->aborting || !w->upload_id) {
            p->state = P_IDLE;
            break;
        }
        if (p->gen != p->up_gen) {
            p->state = P_IDLE; /* written again while it was copied: hashed again later */
            continue;
        }
        if (!om_store_caps(ws->store)->part_replace && p->sent_seq == w->upload_seq) {
            p->state = P_IDLE; /* its number went out already: the commit begins anew */
            continue;
        }
        p->sent_seq = w->upload_seq;
        p->put = (struct om_store_part_put){
            .key = w->key,
            .upload_id = w->upload_id,
            .number = p->number,
            .body = {.kind = OM_BODY_FD, .fd = w->fd, .off = (off_t)off, .len = len},
            .done = part_done,
            .ud = p,
        };
        memcpy(p->put.md5, p->md5, OM_MD5_LEN);
        p->state = P_UPLOADING;
        p->up_seq = w->upload_seq;
        w->inflight++;
        if (om_store_part_submit(ws->store, &p->put) != 0) {
            w->inflight--;
            p->state = P_IDLE;
            w->part_failed = true;
            snprintf(w->last_error, sizeof(w->last_error), "part %d: its upload could not start",
                     p->number);
            break;
        }
    }
    w->working = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    free(buf);
}

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-upload");
    struct om_writers *ws = arg;
    pthread_mutex_lock(&ws->lock);
    for (;;) {
        while (!ws->stopping && ws->qlen == 0)
            pthread_cond_wait(&ws->work, &ws->lock);
        if (ws->stopping)
            break;
        struct om_writer *w = ws->queue[0];
        memmove(ws->queue, ws->queue + 1, sizeof(*ws->queue) * (size_t)--ws->qlen);
        pthread_mutex_unlock(&ws->lock);
        work_on(w);
        pthread_mutex_lock(&ws->lock);
    }
    pthread_mutex_unlock(&ws->lock);
    return NULL;
}

bool wi_upload_spoiled(struct om_writer *w)
{
    if (!w->upload_id || om_store_caps(w->ws->store)->part_replace)
        return false;
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->len == 0 || p->sent_seq != w->upload_seq)
            continue;
        /* its number went out, and the part must go again: it failed, or
         * it changed since */
        if (p->state == P_IDLE || p->state == P_QUEUED ||
            (p->state == P_DONE && p->gen != p->up_gen))
            return true;
    }
    return false;
}

struct listed_again {
    const char *key, *id;
    bool found;
};

static int find_upload(void *ud, const struct om_upload_entry *e)
{
    struct listed_again *l = ud;
    if (strcmp(e->key, l->key) == 0 && strcmp(e->upload_id, l->id) == 0)
        l->found = true;
    return 0;
}

/* An upload aborted while a part cancelled on our side may still have been
 * running on the server (wi_drain): look for it a moment later, and abort
 * it again while it is listed. */
static void abort_again_while_listed(struct om_writer *w, const char *id)
{
    for (unsigned pause_ms = 1000; pause_ms <= 4000; pause_ms *= 2) {
        struct timespec ts = {.tv_sec = pause_ms / 1000};
        nanosleep(&ts, NULL);
        struct listed_again l = {.key = w->key, .id = id};
        struct om_store_error err;
        if (om_store_mpu_list(w->ws->store, w->key, find_upload, &l, &err) != 0 || !l.found)
            return;
        om_warn("%s: upload %s is listed again after its abort (a part was still being stored): "
                "aborting it again",
                w->key, id);
        if (om_store_mpu_abort(w->ws->store, w->key, id, &err) != 0)
            return;
    }
}

void wi_abort_upload(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    /* let parts under way finish first: they write into the upload */
    w->aborting = true;
    for (int i = 0; i < w->nparts; i++) {
        if (w->parts[i]->state == P_QUEUED)
            w->parts[i]->state = P_IDLE;
    }
    while (w->working || w->inflight > 0)
        pthread_cond_wait(&w->cond, &w->lock);
    char *id = w->upload_id;
    w->upload_id = NULL;
    w->upload_seq++;
    for (int i = 0; i < w->nparts; i++) {
        w->parts[i]->state = P_IDLE;
        w->parts[i]->failures = 0;
    }
    w->aborting = false;
    bool check = w->parts_cancelled;
    w->parts_cancelled = false;
    pthread_mutex_unlock(&w->lock);
    if (!id)
        return;
    struct om_store_error err;
    int rc = om_store_mpu_abort(w->ws->store, w->key, id, &err);
    if (rc && rc != -ENOENT)
        om_warn("aborting upload %s of %s: %s (it can be aborted later with objmountctl "
                "uploads abort)",
                id, w->key, strerror(-rc));
    else if (check)
        abort_again_while_listed(w, id);
    free(id);
}

const char *om_etag_form_name(enum om_etag_form f)
{
    switch (f) {
    case OM_ETAG_FORM_PARTS:
        return "md5-of-parts";
    case OM_ETAG_FORM_WHOLE:
        return "whole-md5";
    case OM_ETAG_FORM_OPAQUE:
        return "opaque";
    case OM_ETAG_FORM_UNKNOWN:
        break;
    }
    return "unknown";
}

enum om_etag_form om_writers_etag_form(struct om_writers *ws)
{
    pthread_mutex_lock(&ws->lock);
    enum om_etag_form f = ws->etag_form;
    pthread_mutex_unlock(&ws->lock);
    return f;
}

bool wi_need_whole_md5(struct om_writers *ws)
{
    enum om_etag_form f = om_writers_etag_form(ws);
    return ws->cfg.verify_read || f == OM_ETAG_FORM_WHOLE;
}

void wi_count_hashed(struct om_writers *ws, uint64_t n)
{
    pthread_mutex_lock(&ws->lock);
    ws->st.hashed_bytes += n;
    pthread_mutex_unlock(&ws->lock);
}

/* A multipart upload was verified: its ETag showed the server's form. The
 * first one decides; a later upload verified another way (a server behind
 * a load balancer of mixed versions) is logged and the form becomes the
 * safe one (whole MD5s computed again). */
void wi_learn_etag_form(struct om_writers *ws, enum om_etag_form seen)
{
    pthread_mutex_lock(&ws->lock);
    enum om_etag_form was = ws->etag_form;
    if (was == OM_ETAG_FORM_UNKNOWN)
        ws->etag_form = seen;
    else if (was != seen && was != OM_ETAG_FORM_WHOLE)
        ws->etag_form = OM_ETAG_FORM_WHOLE;
    enum om_etag_form now = ws->etag_form;
    pthread_mutex_unlock(&ws->lock);
    if (was == now)
        return;
    if (was == OM_ETAG_FORM_UNKNOWN)
        om_info("the server's multipart ETags are %s: %s", om_etag_form_name(now),
                now == OM_ETAG_FORM_WHOLE
                    ? "uploads compute a whole-object MD5 besides the part MD5s"
                    : "uploads hash each byte once (part MD5s only)");
    else
        om_warn("a multipart ETag of form %s after %s: uploads compute whole-object MD5s again",
                om_etag_form_name(seen), om_etag_form_name(was));
}

int wi_workers_start(struct om_writers *ws)
{
    for (int i = 0; i < WORKERS; i++) {
        if (pthread_create(&ws->workers[i], NULL, worker_main, ws) != 0)
            return -EAGAIN;
        ws->nworkers++;
    }
    return 0;
}

void wi_workers_stop(struct om_writers *ws)
{
    pthread_mutex_lock(&ws->lock);
    ws->stopping = true;
    pthread_cond_broadcast(&ws->work);
    pthread_mutex_unlock(&ws->lock);
    for (int i = 0; i < ws->nworkers; i++)
        pthread_join(ws->workers[i], NULL);
    ws->nworkers = 0;
}
