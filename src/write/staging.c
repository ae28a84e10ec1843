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
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
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

/* Rewrite a moved sidecar: its daemon died before a commit. Its size and
 * MD5 become those of the data moved with it (fd), which nothing writes
 * any more, so that `recover push` can check the data against them. */
static void mark_interrupted(const char *path, int fd)
{
    struct om_sidecar *s = calloc(1, sizeof(*s));
    struct stat st;
    if (s && om_sidecar_read(path, s) == 0 && strcmp(s->state, "staging") == 0) {
        om_strlcpy(s->state, "interrupted", sizeof(s->state));
        unsigned char md5[OM_MD5_LEN];
        if (fstat(fd, &st) == 0 &&
            om_digest_fd_range(OM_DIGEST_MD5, fd, 0, (uint64_t)st.st_size, md5) == 0) {
            s->size = (uint64_t)st.st_size;
            om_hex(md5, OM_MD5_LEN, s->md5);
        }
        om_sidecar_write(path, s, true);
    }
    free(s);
}

/* A staging file that never became .data (wi_staging_create): removed
 * unless a live daemon holds it. Nothing was written to it. */
static void remove_stale_new(struct om_writers *ws, const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", ws->staging_dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        unlink(path);
    close(fd);
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
        if (n > 4 && strcmp(e->d_name + n - 4, ".new") == 0) {
            remove_stale_new(ws, e->d_name); /* a daemon died before its first write */
            continue;
        }
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
                mark_interrupted(rside, fd);
            ws->st.recovered++;
            om_error("a previous objmount stopped before uploading %s: data kept in %s", data,
                     rdata);
        }
        close(fd);
    }
    closedir(d);
}

/* A staging file is created as XXXXXX.new, locked, and only then renamed
 * to .data: another daemon starting on the same cache_dir moves unlocked
 * .data files to recovery as leftovers of a dead one, and must never see
 * a fresh file in the instant between its creation and its lock. */
int wi_staging_create(struct om_writers *ws, struct om_writer *w)
{
    char tmpl[4200], path[4200];
    snprintf(tmpl, sizeof(tmpl), "%s/XXXXXX.new", ws->staging_dir);
    int fd = mkostemps(tmpl, 4, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = -errno;
        close(fd);
        unlink(tmpl);
        return e;
    }
    size_t n = strlen(tmpl);
    snprintf(path, sizeof(path), "%.*s.data", (int)(n - 4), tmpl);
    if (rename(tmpl, path) != 0) {
        int e = -errno;
        close(fd);
        unlink(tmpl);
        return e;
    }
    w->fd = fd;
    w->path = strdup(path);
    w->sidecar = om_sidecar_path(path);
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

/* Copy [0, size) of src into a new file dst (mode 0600): a reflink where
 * the filesystem shares blocks, else copy_file_range, else read and write.
 * 0 or -errno, with dst removed. */
static int copy_file(int src, uint64_t size, const char *dst)
{
    int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    struct stat st;
    bool cloned = fstat(src, &st) == 0 && (uint64_t)st.st_size == size &&
                  ioctl(fd, FICLONE, src) == 0;
    if (!cloned) {
        off_t in = 0, out = 0;
        char *buf = NULL;
        for (uint64_t done = 0; done < size && !rc;) {
            size_t want = (size_t)OM_MIN(size - done, (uint64_t)(8 << 20));
            ssize_t n = buf ? -1 : copy_file_range(src, &in, fd, &out, want, 0);
            if (n < 0 && !buf && (errno == EXDEV || errno == ENOSYS || errno == EOPNOTSUPP ||
                                  errno == EINVAL)) {
                buf = malloc(1 << 20); /* the kernel cannot: copy by hand from here */
                if (!buf)
                    rc = -ENOMEM;
                continue;
            }
            if (buf) {
                n = pread(src, buf, OM_MIN(want, (size_t)(1 << 20)), (off_t)done);
                for (ssize_t at = 0; n > 0 && at < n;) {
                    ssize_t k = pwrite(fd, buf + at, (size_t)(n - at), (off_t)done + at);
                    if (k < 0) {
                        n = -1;
                        break;
                    }
                    at += k;
                }
            }
            if (n < 0)
                rc = -errno;
            else if (n == 0)
                break; /* the rest is a hole: ftruncate makes it */
            else
                done += (uint64_t)n;
            in = out = (off_t)done;
        }
        free(buf);
    }
    if (!rc && ftruncate(fd, (off_t)size) != 0) /* a hole at the end */
        rc = -errno;
    if (!rc && fsync(fd) != 0)
        rc = -errno;
    if (close(fd) != 0 && !rc)
        rc = -errno;
    if (rc)
        unlink(dst);
    return rc;
}

/* Keep the bytes that could not be uploaded: a snapshot of the staging
 * file (the program may go on writing it) with a sidecar whose size and
 * MD5 are the snapshot's own. Caller holds w->lock, so no write changes
 * the file meanwhile. */
void wi_keep_in_recovery(struct om_writer *w, const char *state)
{
    struct om_writers *ws = w->ws;
    time_t now = time(NULL);
    char base[4200], data[4300], side[4300];
    snprintf(base, sizeof(base), "%s/%ld-%d-%" PRIu64, ws->recovery_dir, (long)now, (int)getpid(),
             w->ino);
    snprintf(data, sizeof(data), "%s.data", base);
    snprintf(side, sizeof(side), "%s" OM_SIDECAR_SUFFIX, base);
    wi_recovery_forget(w); /* the entry of an earlier failed commit is replaced */
    int rc = copy_file(w->fd, w->size, data);
    if (rc) {
        om_error("could not keep %s in recovery (%s): the data stays in %s until it is closed",
                 w->key, strerror(-rc), w->path);
        return;
    }
    unsigned char md5[OM_MD5_LEN];
    char hex[2 * OM_MD5_LEN + 1] = "";
    int dfd = open(data, O_RDONLY | O_CLOEXEC);
    if (dfd >= 0 && om_digest_fd_range(OM_DIGEST_MD5, dfd, 0, w->size, md5) == 0)
        om_hex(md5, OM_MD5_LEN, hex);
    if (dfd >= 0)
        close(dfd);
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
        struct om_store_error err;
        ssize_t got = om_store_get_range(w->ws->store, key, off, want, etag[0] ? etag : NULL, buf, NULL,
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
    if (!rc && w->stored_exists && strcmp(w->stored_etag, etag) == 0) {
        w->stored_size = size;
        wi_parts_stored(w); /* unchanged parts are copied from it, not sent */
    }
    return rc;
}

/* Bytes free for staging above min_free_space (0 when below), or
 * UINT64_MAX when it cannot be told. */
static uint64_t room_above_floor(struct om_writers *ws)
{
    struct statvfs sv;
    if (statvfs(ws->staging_dir, &sv) != 0)
        return UINT64_MAX;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    return avail > ws->cfg.min_free_space ? avail - ws->cfg.min_free_space : 0;
}

int wi_check_space(struct om_writers *ws, uint64_t need)
{
    if (!ws->cfg.min_free_space)
        return 0;
    uint64_t room = room_above_floor(ws);
    if (room >= need)
        return 0;
    /* Writes before the cache: what the data cache holds can be fetched
     * again, what a program writes cannot. Ask for more than this write
     * needs, so that the next writes do not each evict a block. */
    if (ws->cfg.reclaim_space) {
        uint64_t want = need - room + (ws->cfg.part_size ? ws->cfg.part_size : (8ULL << 20));
        uint64_t freed = ws->cfg.reclaim_space(ws->cfg.reclaim_ud, want);
        if (freed) {
            pthread_mutex_lock(&ws->lock);
            ws->st.space_reclaims++;
            pthread_mutex_unlock(&ws->lock);
            om_info("staging directory %s: the data cache gave back %" PRIu64 " MiB for writes",
                    ws->staging_dir, (freed + (1 << 20) - 1) >> 20);
            room = room_above_floor(ws);
            if (room >= need)
                return 0;
        }
    }
    om_error("staging directory %s is below its free-space floor (%" PRIu64 " MiB free above "
             "min_free_space, %" PRIu64 " MiB needed%s)",
             ws->staging_dir, room >> 20, (need + (1 << 20) - 1) >> 20,
             ws->cfg.reclaim_space ? "; the data cache holds nothing more to give back" : "");
    return -ENOSPC;
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
