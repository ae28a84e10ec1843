/* Staging and recovery files: sidecars, leftovers of dead daemons, data
 * kept when a commit finally fails, the stored object fetched into the
 * staging file before a first change, and the free-space check. */
#include "objmount/writer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/sidecar.h"
#include "objmount/util.h"
#include "writer_int.h"

/* Write a sidecar describing staged or recovered data. Caller holds w->lock
 * (or owns w alone). */
int wi_write_sidecar(const char *path, struct om_writers *ws, struct om_writer *w,
                     const char *state, const char *md5hex, bool durable)
{
    struct om_sidecar *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    om_strlcpy(s->state, state, sizeof(s->state));
    om_strlcpy(s->bucket, ws->bucket, sizeof(s->bucket));
    om_strlcpy(s->endpoint, ws->endpoint, sizeof(s->endpoint));
    int rc = om_strlcpy(s->key, w->key, sizeof(s->key));
    s->size = w->size;
    om_strlcpy(s->md5, md5hex ? md5hex : "", sizeof(s->md5));
    s->base_exists = w->stored_exists;
    om_strlcpy(s->base_etag, w->stored_etag, sizeof(s->base_etag));
    om_strlcpy(s->upload_id, w->upload_id ? w->upload_id : "", sizeof(s->upload_id));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(s->time, sizeof(s->time), "%Y-%m-%dT%H:%M:%SZ", &tm);
    s->pid = (long)getpid();
    om_strlcpy(s->last_error, w->last_error, sizeof(s->last_error));
    s->has_mode = w->meta.has_mode;
    s->mode = (unsigned)w->meta.mode;
    if (!rc)
        rc = om_sidecar_write(path, s, durable);
    free(s);
    return rc;
}

int wi_mkdir_p(const char *path, mode_t mode)
{
    char buf[4096];
    if (om_strlcpy(buf, path, sizeof(buf)))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, mode) != 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    }
    if (mkdir(buf, mode) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

/* Rewrite the state of a moved sidecar: its daemon died before a commit. */
static void mark_interrupted(const char *path)
{
    struct om_sidecar *s = calloc(1, sizeof(*s));
    if (s && om_sidecar_read(path, s) == 0 && strcmp(s->state, "staging") == 0) {
        om_strlcpy(s->state, "interrupted", sizeof(s->state));
        om_sidecar_write(path, s, true);
    }
    free(s);
}

/* Move staging files whose daemon is gone into recovery. */
void wi_recover_leftovers(struct om_writers *ws)
{
    DIR *d = opendir(ws->staging_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".data") != 0)
            continue;
        char data[4200], side[4200], rdata[4200], rside[4200];
        snprintf(data, sizeof(data), "%s/%s", ws->staging_dir, e->d_name);
        snprintf(side, sizeof(side), "%s/%.*s" OM_SIDECAR_SUFFIX, ws->staging_dir, (int)(n - 5),
                 e->d_name);
        int fd = open(data, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd); /* a live daemon owns it */
            continue;
        }
        snprintf(rdata, sizeof(rdata), "%s/%s", ws->recovery_dir, e->d_name);
        snprintf(rside, sizeof(rside), "%s/%.*s" OM_SIDECAR_SUFFIX, ws->recovery_dir, (int)(n - 5),
                 e->d_name);
        if (rename(data, rdata) == 0) {
            if (rename(side, rside) != 0)
                om_warn("recovery: %s has no sidecar", rdata);
            else
                mark_interrupted(rside);
            ws->st.recovered++;
            om_error("a previous objmount stopped before uploading %s: data kept in %s", data,
                     rdata);
        }
        close(fd);
    }
    closedir(d);
}

int wi_staging_create(struct om_writers *ws, struct om_writer *w)
{
    char tmpl[4200];
    snprintf(tmpl, sizeof(tmpl), "%s/XXXXXX.data", ws->staging_dir);
    int fd = mkostemps(tmpl, 5, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = -errno;
        close(fd);
        unlink(tmpl);
        return e;
    }
    w->fd = fd;
    w->path = strdup(tmpl);
    w->sidecar = om_sidecar_path(tmpl);
    if (!w->path || !w->sidecar)
        return -ENOMEM;
    return wi_write_sidecar(w->sidecar, ws, w, "staging", NULL, true);
}

void wi_recovery_forget(struct om_writer *w)
{
    if (!w->recovery)
        return;
    char *side = om_sidecar_path(w->recovery);
    unlink(w->recovery);
    if (side)
        unlink(side);
    free(side);
    free(w->recovery);
    w->recovery = NULL;
}

/* Keep the bytes that could not be uploaded. Caller holds w->lock. */
void wi_keep_in_recovery(struct om_writer *w, const char *state)
{
    struct om_writers *ws = w->ws;
    unsigned char md5[OM_MD5_LEN];
    char hex[2 * OM_MD5_LEN + 1] = "";
    if (om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, w->size, md5) == 0)
        om_hex(md5, OM_MD5_LEN, hex);
    time_t now = time(NULL);
    char base[4200], data[4300], side[4300];
    snprintf(base, sizeof(base), "%s/%ld-%d-%" PRIu64, ws->recovery_dir, (long)now, (int)getpid(),
             w->ino);
    snprintf(data, sizeof(data), "%s.data", base);
    snprintf(side, sizeof(side), "%s" OM_SIDECAR_SUFFIX, base);
    wi_recovery_forget(w); /* the entry of an earlier failed commit is replaced */
    if (link(w->path, data) != 0) {
        om_error("could not keep %s in recovery (%s): the data stays in %s until it is closed",
                 w->key, strerror(errno), w->path);
        return;
    }
    wi_write_sidecar(side, ws, w, state, hex, true);
    w->recovery = strdup(data);
    pthread_mutex_lock(&ws->lock);
    ws->st.recovered++;
    pthread_mutex_unlock(&ws->lock);
    if (strcmp(state, "interrupted") == 0)
        om_error("%s: open for writing with changes not uploaded when objmount stopped "
                 "(interrupted): %" PRIu64 " bytes kept in %s",
                 w->key, w->size, data);
    else
        om_error("could not upload %s (%s): %" PRIu64 " bytes kept in %s", w->key, w->last_error,
                 w->size, data);
}

/* Fetch the object into the staging file before a partial rewrite.
 * Caller holds w->lock with w->committing set. */
static int materialize(struct om_writer *w)
{
    uint64_t size = w->base.size;
    char etag[OM_ETAG_MAX];
    om_strlcpy(etag, w->base.etag, sizeof(etag));
    char *key = w->key;
    int fd = w->fd;
    pthread_mutex_unlock(&w->lock);
    enum { CHUNK = 8 << 20 };
    char *buf = size ? malloc(CHUNK) : NULL;
    int rc = size && !buf ? -ENOMEM : 0;
    for (uint64_t off = 0; off < size && !rc;) {
        uint64_t want = OM_MIN((uint64_t)CHUNK, size - off);
        struct om_s3_error err;
        ssize_t got = om_s3_get_range(w->ws->s3, key, off, want, etag[0] ? etag : NULL, buf, NULL,
                                      &err);
        if (got != (ssize_t)want) {
            rc = got < 0 ? (int)got : -EIO;
            om_warn("fetching %s to rewrite it: %s", key, strerror(-rc));
            break;
        }
        for (uint64_t at = 0; at < want;) {
            ssize_t n = pwrite(fd, buf + at, (size_t)(want - at), (off_t)(off + at));
            if (n < 0) {
                rc = -errno;
                break;
            }
            at += (uint64_t)n;
        }
        off += want;
    }
    free(buf);
    pthread_mutex_lock(&w->lock);
    if (!rc) {
        w->materialized = true;
        w->size = size;
        rc = wi_layout(w);
    }
    return rc;
}

int wi_check_space(struct om_writers *ws, uint64_t need)
{
    if (!ws->cfg.min_free_space)
        return 0;
    struct statvfs sv;
    if (statvfs(ws->staging_dir, &sv) != 0)
        return 0;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    if (avail < ws->cfg.min_free_space + need) {
        om_error("staging directory %s is below its free-space floor (%" PRIu64 " MiB left)",
                 ws->staging_dir, avail >> 20);
        return -ENOSPC;
    }
    return 0;
}

/* Wait until no commit runs, then make the staging file hold the data. */
int wi_prepare_write(struct om_writer *w)
{
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    if (w->materialized)
        return 0;
    w->committing = true;
    int rc = materialize(w);
    w->committing = false;
    pthread_cond_broadcast(&w->cond);
    return rc;
}
