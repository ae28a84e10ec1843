/* Commits: single PUT or multipart, verification of what the server
 * stored (which teaches parts.c the server's ETag form), whole-upload
 * retries; metadata stored by self-copy. */
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
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "writer_int.h"

/* Whole-object MD5 of the staging file: the running digest when it covers
 * the whole file, else read back. */
static int whole_md5(struct om_writer *w, uint64_t size, unsigned char out[OM_MD5_LEN])
{
    pthread_mutex_lock(&w->lock);
    bool running = w->md5_valid && w->md5_upto == size && w->md5.ctx;
    int rc = running ? om_digest_peek(&w->md5, out) : -EAGAIN;
    pthread_mutex_unlock(&w->lock);
    if (rc == 0)
        return 0;
    rc = om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, size, out);
    if (!rc)
        wi_count_hashed(w->ws, size);
    return rc;
}

/* The digest of type t of the staging file's first size bytes, into have. */
static int local_sum(struct om_writer *w, uint64_t size, enum om_sum_type t,
                     struct om_local_sums *have)
{
    enum om_digest_kind kind;
    if (!om_sum_digest_kind(t, &kind))
        return -EINVAL;
    unsigned char d[OM_SHA512_LEN];
    int rc = kind == OM_DIGEST_MD5 ? whole_md5(w, size, d)
                                   : om_digest_fd_range(kind, w->fd, 0, size, d);
    if (rc)
        return rc;
    if (kind != OM_DIGEST_MD5)
        wi_count_hashed(w->ws, size);
    om_local_sums_set(have, kind, d);
    return 0;
}

/* Read the stored object (version etag) back and compare its MD5 with the
 * staging file's. */
static int read_back(struct om_writer *w, uint64_t size, const char *etag,
                     struct om_local_sums *have)
{
    struct om_writers *ws = w->ws;
    int rc = 0;
    if (!have->have_md5 && (rc = local_sum(w, size, OM_SUM_MD5, have)) != 0)
        return rc;
    enum { CHUNK = 8 << 20 };
    char *buf = malloc(CHUNK);
    struct om_digest d;
    if (!buf || om_digest_init(&d, OM_DIGEST_MD5)) {
        free(buf);
        return -ENOMEM;
    }
    struct om_store_error err;
    for (uint64_t off = 0; off < size && !rc;) {
        uint64_t want = OM_MIN((uint64_t)CHUNK, size - off);
        ssize_t got = om_store_get_range(ws->store, w->key, off, want, etag, buf, NULL, &err);
        if (got != (ssize_t)want)
            rc = got < 0 ? (int)got : -EIO;
        else
            om_digest_update(&d, buf, want);
        off += want;
    }
    unsigned char back[OM_MD5_LEN];
    if (rc)
        om_digest_free(&d);
    else
        rc = om_digest_final(&d, back);
    if (!rc)
        wi_count_hashed(ws, size);
    free(buf);
    if (!rc && memcmp(back, have->md5, OM_MD5_LEN) != 0) {
        snprintf(w->last_error, sizeof(w->last_error), "read back differs from what was written");
        om_error("%s: %s", w->key, w->last_error);
        om_strlcpy(w->left_etag, etag, sizeof(w->left_etag));
        rc = -EBADMSG;
    }
    if (!rc) {
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_read++;
        pthread_mutex_unlock(&ws->lock);
    }
    return rc;
}

/* After PUT or Complete: the object must be what the staging file holds.
 * A HEAD gives its size and the digest the store states of it (an MD5
 * ETag, the multipart ETag of these very parts, AIStore's checksum);
 * om_sum_check compares that with ours, computing the digest we lack
 * (unless the other digest the answer gives, AIStore's multipart ETag
 * beside its checksum, is one we hold and it matches). A
 * firm digest of other bytes fails the commit; what no digest proves (no
 * digest stated, or one read off a token's shape that differs) is read
 * back and compared, unless verify=size; verify=read reads back always.
 * multipart: the upload had parts (the ETag form is learned from it). */
static int verify(struct om_writer *w, uint64_t size, struct om_local_sums *have, bool multipart,
                  char *etag_out)
{
    struct om_writers *ws = w->ws;
    struct om_object o;
    struct om_store_error err;
    int rc = om_store_head(ws->store, w->key, &o, &err);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "HEAD after commit: %s", strerror(-rc));
        return rc;
    }
    if (o.size != size) {
        snprintf(w->last_error, sizeof(w->last_error),
                 "stored object has %" PRIu64 " bytes, %" PRIu64 " were written", o.size, size);
        om_error("%s: %s", w->key, w->last_error);
        om_strlcpy(w->left_etag, o.etag, sizeof(w->left_etag));
        return -EBADMSG;
    }
    om_strlcpy(etag_out, o.etag, OM_ETAG_MAX);
    enum om_proof proof = om_sum_check(&o.sum, have);
    if (proof == OM_PROOF_MISSING && om_sum_check(&o.etag_sum, have) == OM_PROOF_MATCH) {
        /* the digest we hold proves it: no pass over the file for the other */
        o.sum = o.etag_sum;
        proof = OM_PROOF_MATCH;
    }
    if (proof == OM_PROOF_MISSING) {
        if ((rc = local_sum(w, size, o.sum.type, have)) != 0)
            return rc;
        proof = om_sum_check(&o.sum, have);
    }
    if (proof == OM_PROOF_MISMATCH) {
        snprintf(w->last_error, sizeof(w->last_error),
                 "the %s the store states of the object (%.70s) is not the one of what was "
                 "written",
                 om_sum_type_name(o.sum.type), o.sum.hex);
        om_error("%s: %s", w->key, w->last_error);
        om_strlcpy(w->left_etag, o.etag, sizeof(w->left_etag));
        return -EBADMSG;
    }
    bool proven = proof == OM_PROOF_MATCH;
    pthread_mutex_lock(&ws->lock);
    if (!proven)
        ; /* counted below, by how it ends */
    else if (o.sum.type == OM_SUM_MD5)
        ws->st.verified_md5++;
    else if (o.sum.type == OM_SUM_MD5_PARTS)
        ws->st.verified_multipart++;
    else
        ws->st.verified_checksum++;
    pthread_mutex_unlock(&ws->lock);
    if (multipart)
        wi_learn_etag_form(ws, !proven                          ? OM_ETAG_FORM_OPAQUE
                               : o.sum.type == OM_SUM_MD5_PARTS ? OM_ETAG_FORM_PARTS
                               : o.sum.type == OM_SUM_MD5       ? OM_ETAG_FORM_WHOLE
                                                                : OM_ETAG_FORM_OPAQUE);
    if (proven && !ws->cfg.verify_read) {
        om_debug("%s: verified by its %s", w->key, om_sum_type_name(o.sum.type));
        return 0;
    }
    if (!proven && ws->cfg.verify_size) {
        om_debug("%s: verified by its size only (%s; verify=size)", w->key,
                 o.sum.type ? "its ETag only looks like a digest" : "the store states no digest");
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_size_only++;
        pthread_mutex_unlock(&ws->lock);
        return 0;
    }
    return read_back(w, size, o.etag, have);
}

/* One attempt at a single PUT. Caller holds no lock; committing is set. */
static int put_once(struct om_writer *w, uint64_t size, const struct om_file_meta *m,
                    char *etag)
{
    struct om_local_sums have = {.have_md5 = true};
    int rc = om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, size, have.md5);
    if (rc)
        return rc;
    wi_count_hashed(w->ws, size);
    struct om_put_opts opts = {.meta = m};
    struct om_http_body body = {.kind = OM_BODY_FD, .fd = w->fd, .off = 0, .len = size};
    struct om_store_error err;
    struct om_object stored = {0};
    rc = om_store_put(w->ws->store, w->key, &body, have.md5, &opts, &stored, &err);
    if (rc == -EBADMSG && stored.etag[0]) /* stored, but other bytes than were sent */
        om_strlcpy(w->left_etag, stored.etag, sizeof(w->left_etag));
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "PutObject: %s%s%s%s%.120s", strerror(-rc),
                 err.code[0] ? " " : "", err.code, err.message[0] ? ": " : "", err.message);
        return rc;
    }
    pthread_mutex_lock(&w->ws->lock);
    w->ws->st.bytes_uploaded += size;
    pthread_mutex_unlock(&w->ws->lock);
    return verify(w, size, &have, false, etag);
}

/* After a failed attempt the server did not call a name clash (versitygw
 * answers a CompleteMultipartUpload onto a directory's name with 500
 * InternalError): is the name a directory on the server (-EEXIST), or one
 * of the names above it a file (-ENOTDIR)? 0 when neither, or when the
 * server cannot be asked. Once per commit; the nearest 8 names above. */
static int name_clash(struct om_writers *ws, const char *key)
{
    struct om_store_lookup l;
    struct om_store_error err;
    if (om_store_lookup(ws->store, key, &l, &err) == 0 && l.is_dir)
        return -EEXIST;
    char *up = strdup(key);
    int rc = 0;
    for (int n = 0; up && n < 8 && !rc; n++) {
        char *slash = strrchr(up, '/');
        if (!slash || slash == up)
            break;
        *slash = '\0';
        if (om_store_lookup(ws->store, up, &l, &err) == 0 && l.is_file && !l.is_dir)
            rc = -ENOTDIR;
    }
    free(up);
    return rc;
}

/* One attempt at a multipart upload of the file as it is now (*size: the
 * size stored). -EAGAIN when the file shrank to one part meanwhile (a PUT
 * then). Caller holds w->lock. */
static int multipart_once(struct om_writer *w, uint64_t *size, char *etag)
{
again:
    if (w->upload_id && w->upload_meta_version != w->meta_version) {
        /* metadata changed since the upload began: begin again */
        pthread_mutex_unlock(&w->lock);
        wi_abort_upload(w);
        pthread_mutex_lock(&w->lock);
    }
    w->part_failed = false;
    for (int i = 0; i < w->nparts; i++)
        w->parts[i]->failures = 0;
    int restarts = 0;
    for (;;) {
        if (!w->working && w->inflight == 0 && wi_upload_spoiled(w)) {
            /* a store that takes each part number once: begin anew */
            if (++restarts > PART_RETRIES) {
                if (!w->last_error[0])
                    snprintf(w->last_error, sizeof(w->last_error),
                             "the upload began anew %d times", PART_RETRIES);
                return -EIO;
            }
            pthread_mutex_unlock(&w->lock);
            wi_abort_upload(w);
            pthread_mutex_lock(&w->lock);
            w->part_failed = false;
            continue;
        }
        /* everything not stored yet goes out, including parts that came back
         * changed from an upload that was under way when the commit began */
        bool queued = false, all_done = true;
        for (int i = 0; i < w->nparts; i++) {
            struct part *p = w->parts[i];
            if (p->len == 0)
                continue;
            if (p->state == P_DONE && (p->gen != p->up_gen || p->up_seq != w->upload_seq ||
                                       p->put.body.len != p->len))
                p->state = P_IDLE; /* changed since, or stored in an upload that is gone */
            if (p->state == P_IDLE && p->failures <= PART_RETRIES)
                p->state = P_QUEUED;
            queued |= p->state == P_QUEUED;
            all_done &= p->state == P_DONE;
        }
        if (w->size <= w->ws->cfg.part_size)
            return -EAGAIN; /* truncated while we waited: one PUT now */
        if (all_done && !w->working && w->inflight == 0)
            break;
        if (w->part_failed && !w->working && w->inflight == 0)
            return -EIO;
        if (queued && !w->working && !w->in_queue)
            wi_schedule(w);
        pthread_cond_wait(&w->cond, &w->lock);
    }
    /* an upload created while the metadata changed carries the old metadata */
    if (!w->upload_id || w->upload_meta_version != w->meta_version)
        goto again;
    int n = 0;
    for (int i = 0; i < w->nparts; i++)
        n += w->parts[i]->len > 0;
    struct om_store_part *list = calloc((size_t)n, sizeof(*list));
    unsigned char(*md5s)[OM_MD5_LEN] = calloc((size_t)n, OM_MD5_LEN);
    if (!list || !md5s) {
        free(list);
        free(md5s);
        return -ENOMEM;
    }
    for (int i = 0, k = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->len == 0)
            continue;
        list[k].number = p->number;
        memcpy(list[k].etag, p->etag, OM_ETAG_MAX);
        memcpy(md5s[k], p->md5, OM_MD5_LEN);
        k++;
    }
    char *id = strdup(w->upload_id);
    *size = w->size; /* what the parts hold: they cover [0, size) */
    pthread_mutex_unlock(&w->lock);
    struct om_local_sums have = {.have_parts = true, .nparts = n};
    struct om_sum parts_sum;
    om_sum_of_parts((const unsigned char(*)[OM_MD5_LEN])md5s, n, &parts_sum);
    om_unhex(parts_sum.hex, have.parts_md5, OM_MD5_LEN);
    char done_etag[OM_ETAG_MAX];
    struct om_store_error err;
    int rc = id ? om_store_mpu_complete(w->ws->store, w->key, id, list, n, done_etag, &err) : -ENOMEM;
    free(list);
    free(md5s);
    free(id);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "CompleteMultipartUpload: %s%s%s%s%.120s",
                 strerror(-rc), err.code[0] ? " " : "", err.code, err.message[0] ? ": " : "",
                 err.message);
        if (rc == -ENOENT) { /* the upload is gone: nothing to abort */
            pthread_mutex_lock(&w->lock);
            free(w->upload_id);
            w->upload_id = NULL;
            w->upload_seq++;
            pthread_mutex_unlock(&w->lock);
            rc = -EIO;
        }
    } else {
        /* completed: nothing to abort any more, and its parts belong to the
         * object now; a later commit starts an upload of its own, where
         * every part goes out again (parts done in this upload no longer
         * count, see up_seq) */
        pthread_mutex_lock(&w->lock);
        free(w->upload_id);
        w->upload_id = NULL;
        w->upload_seq++;
        pthread_mutex_unlock(&w->lock);
        rc = verify(w, *size, &have, true, etag);
    }
    pthread_mutex_lock(&w->lock);
    return rc;
}

/* Is the daemon stopping, with no time left for another attempt after
 * waiting delay_ms? */
static bool stop_expired(struct om_writers *ws, uint64_t delay_ms)
{
    pthread_mutex_lock(&ws->lock);
    uint64_t deadline = ws->stop_deadline_ms;
    pthread_mutex_unlock(&ws->lock);
    return deadline && om_now_ms() + delay_ms >= deadline;
}

/* Every attempt failed. An object that an attempt left under the key and
 * that failed verification must not stay there as if it were the file:
 * remove it, unless the key now holds something else (another writer's
 * object). A previous version it replaced is not brought back: objmount
 * keeps no copies (doc/decisions.md). Caller holds w->lock; it is dropped
 * around the requests. */
static void remove_left_object(struct om_writer *w)
{
    char left[OM_ETAG_MAX];
    om_strlcpy(left, w->left_etag, sizeof(left));
    w->left_etag[0] = '\0';
    if (!left[0])
        return;
    pthread_mutex_unlock(&w->lock);
    struct om_object o;
    struct om_store_error err;
    int rc = om_store_head(w->ws->store, w->key, &o, &err);
    if (rc == 0 && strcmp(o.etag, left) == 0)
        rc = om_store_delete(w->ws->store, w->key, &err);
    else if (rc == 0)
        rc = -EEXIST;
    pthread_mutex_lock(&w->lock);
    if (rc == 0) {
        w->stored_exists = false;
        w->stored_etag[0] = '\0';
        wi_parts_unstored(w);
        om_error("%s: removed the object the failed upload left (ETag %s, it failed "
                 "verification)%s",
                 w->key, left,
                 w->base.exists ? "; the version it replaced is not in the bucket any more" : "");
    } else if (rc == -EEXIST) {
        om_warn("%s: the key now holds ETag %s, not the failed upload's %s: left alone", w->key,
                o.etag, left);
    } else if (rc != -ENOENT) {
        om_error("%s: could not remove the object the failed upload left (ETag %s): %s; it "
                 "does not hold the file's bytes",
                 w->key, left, strerror(-rc));
    }
}

/* The commit itself. Caller holds w->lock, no commit runs; returns with
 * the lock released. */
static int commit_locked(struct om_writer *w, struct om_commit_result *res)
{
    struct om_writers *ws = w->ws;
    if (w->write_error && !w->discarded) {
        /* never commit what a failed write left, and say so every time:
         * whatever was committed before, the file is not what was meant */
        int err = w->write_error;
        pthread_mutex_unlock(&w->lock);
        return err;
    }
    if (!w->dirty || w->discarded) {
        if (res)
            *res = w->last; /* stored false until a commit stored something */
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    int rc = wi_prepare_write(w); /* a metadata-only change on an untouched object */
    if (rc) {
        pthread_mutex_unlock(&w->lock);
        return rc;
    }
    w->committing = true;
    pthread_mutex_lock(&ws->lock);
    ws->st.commits_in_flight++;
    pthread_mutex_unlock(&ws->lock);
    uint64_t size = w->size;
    uint64_t changes = w->changes; /* later writes keep the writer dirty */
    char etag[OM_ETAG_MAX] = "";
    uint64_t delay = ws->cfg.upload_retry_ms;
    bool clash = false;
    for (int attempt = 0;; attempt++) {
        size = w->size; /* the file as it is now: a write may come in between */
        w->last_error[0] = '\0'; /* this attempt's failure names itself */
        if (size <= ws->cfg.part_size) {
            struct om_file_meta m = w->meta;
            pthread_mutex_unlock(&w->lock);
            if (w->upload_id)
                wi_abort_upload(w);
            rc = put_once(w, size, &m, etag);
            pthread_mutex_lock(&w->lock);
        } else {
            rc = multipart_once(w, &size, etag);
            if (rc == -EAGAIN) {
                attempt--; /* not a failure: the file became small */
                continue;
            }
        }
        if (rc && !w->last_error[0]) /* every failure names itself; this is the fallback */
            snprintf(w->last_error, sizeof(w->last_error), "%s", strerror(-rc));
        /* which way a clash goes, the server's answer may not say
         * (AIStore's ErrMv), or may not even say it is one (versitygw's
         * 500, AIStore's native multipart: 400 "chunk has invalid
         * number"): the names tell */
        if ((rc == -EIO || rc == -EINVAL || rc == -ENOTDIR || rc == -EEXIST) && attempt == 0) {
            pthread_mutex_unlock(&w->lock);
            int c = name_clash(ws, w->key);
            pthread_mutex_lock(&w->lock);
            if (c && c != rc) {
                size_t n = strlen(w->last_error);
                snprintf(w->last_error + n, sizeof(w->last_error) - n, "; the server holds %s",
                         c == -EEXIST ? "a directory of that name"
                                      : "a file where a directory above it is");
            }
            if (c)
                rc = c;
        }
        /* a name clash with what another client stored stays one */
        clash = rc == -ENOTDIR || rc == -EEXIST;
        if (rc == 0 || clash || attempt >= ws->cfg.upload_retries)
            break;
        if (stop_expired(ws, delay)) {
            om_error("commit of %s failed (%s); objmount is stopping: no further attempt", w->key,
                     w->last_error);
            break;
        }
        om_warn("commit of %s failed (%s); uploading it again in %" PRIu64 " ms (attempt %d of %d)",
                w->key, w->last_error, delay, attempt + 2, ws->cfg.upload_retries + 1);
        pthread_mutex_lock(&ws->lock);
        ws->st.upload_retries++;
        pthread_mutex_unlock(&ws->lock);
        pthread_mutex_unlock(&w->lock);
        wi_abort_upload(w);
        usleep((useconds_t)delay * 1000);
        delay = OM_MIN(delay * 2, (uint64_t)60000);
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_lock(&ws->lock);
    ws->st.commits++;
    ws->st.commits_in_flight--;
    if (rc)
        ws->st.commit_failures++;
    pthread_mutex_unlock(&ws->lock);
    if (rc) {
        remove_left_object(w);
        if (!w->pushing)
            wi_keep_in_recovery(w, "failed");
        w->failed_changes = w->changes;
        rc = clash ? rc : -EIO;
    } else {
        w->dirty = w->changes != changes;
        w->committed = true;
        w->last.stored = true;
        w->last.size = size;
        om_strlcpy(w->last.etag, etag, sizeof(w->last.etag));
        w->last.mtime = w->meta.has_mtime ? w->meta.mtime : w->mtime;
        w->last.meta = w->meta;
        w->last_error[0] = '\0';
        w->left_etag[0] = '\0';
        w->trunc_only = false;
        w->stored_exists = true;
        om_strlcpy(w->stored_etag, etag, sizeof(w->stored_etag));
        w->stored_size = size;
        wi_parts_stored(w); /* writes wait for commits: the file is what is stored */
        wi_recovery_forget(w); /* an earlier failure was made good */
        if (w->sidecar) /* a crash from here on finds the new base */
            wi_write_sidecar(w->sidecar, ws, w, "staging", NULL, false);
        if (res)
            *res = w->last;
    }
    if (!rc && w->ino && ws->cfg.on_commit) {
        /* still committing: a later commit's news cannot overtake this */
        struct om_commit_result stored = w->last;
        pthread_mutex_unlock(&w->lock);
        ws->cfg.on_commit(ws->cfg.on_commit_ud, w->ino, &stored);
        pthread_mutex_lock(&w->lock);
    }
    if (clash && w->ino && ws->cfg.on_refused) {
        pthread_mutex_unlock(&w->lock);
        ws->cfg.on_refused(ws->cfg.on_commit_ud, w->ino, rc);
        pthread_mutex_lock(&w->lock);
    }
    w->committing = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int om_writer_commit(struct om_writer *w, struct om_commit_result *res)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing || w->held)
        pthread_cond_wait(&w->cond, &w->lock);
    return commit_locked(w, res);
}

int om_writer_commit_held(struct om_writer *w, struct om_commit_result *res)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    return commit_locked(w, res);
}

int om_writer_flush(struct om_writer *w, enum om_flusher who)
{
    pthread_mutex_lock(&w->lock);
    struct om_flush_facts f = {
        .flusher = who,
        .write_error = w->write_error != 0,
        .discarded = w->discarded,
        .dirty = w->dirty,
        .trunc_only = w->trunc_only,
    };
    int err = w->write_error;
    pthread_mutex_unlock(&w->lock);
    enum om_flush_action a = om_flush_decide(&f);
    switch (a) {
    case OM_FLUSH_ERROR:
        return err;
    case OM_FLUSH_NOTHING:
        return 0;
    case OM_FLUSH_DEFER:
        om_debug("%s: flush %s: the commit is left to a later flush, fsync or the last close",
                 w->key, who == OM_FLUSHER_OTHER ? "by another process than the opener"
                                                 : "with only the open's truncation pending");
        pthread_mutex_lock(&w->ws->lock);
        w->ws->st.flushes_deferred++;
        pthread_mutex_unlock(&w->ws->lock);
        return 0;
    case OM_FLUSH_COMMIT:
        break;
    }
    return om_writer_commit(w, NULL);
}

int om_writer_store_meta(struct om_writers *ws, const char *key, const char *etag, uint64_t size,
                         const struct om_file_meta *m, struct om_object *obj)
{
    struct om_object src = {.size = size};
    if (etag)
        om_strlcpy(src.etag, etag, sizeof(src.etag));
    char newetag[OM_ETAG_MAX] = "";
    if (!om_store_caps(ws->store)->user_meta) { /* as om_writers_keep_meta */
        pthread_mutex_lock(&ws->lock);
        bool first = ws->st.meta_not_stored++ == 0;
        pthread_mutex_unlock(&ws->lock);
        if (first)
            om_warn("%s: the store keeps no modes, owners or times (AIStore's S3 API stores no "
                    "x-amz-meta-*): they last while the mount holds them (ais:// keeps them)",
                    key);
        memset(obj, 0, sizeof(*obj));
        om_strlcpy(obj->etag, src.etag, sizeof(obj->etag));
        om_file_meta_object(m, size, obj);
        return 0;
    }
    struct om_store_error err;
    int rc = om_store_set_meta(ws->store, key, &src, m, newetag, &err);
    if (rc) {
        om_warn("storing metadata of %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status,
                err.code);
        return rc == -ESTALE ? -EIO : rc;
    }
    memset(obj, 0, sizeof(*obj));
    om_strlcpy(obj->etag, newetag, sizeof(obj->etag));
    om_file_meta_object(m, size, obj);
    return 0;
}

