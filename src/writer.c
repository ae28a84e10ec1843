/* The write path: staging files, background part uploads, verified commits,
 * whole-upload retry and recovery.
 *
 * Locks: ws->lock guards the writer table, the work queue, reference counts
 * and statistics; w->lock guards one writer. Order: w->lock may be held when
 * taking ws->lock, never the reverse. Network requests run without w->lock,
 * except that commit keeps w->committing set so writes wait. */
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

#include "objmount/digest.h"
#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/util.h"

#define PARTS_PER_TIER 1000
#define PART_RETRIES 3
#define WORKERS 2
#define MIN_PART (5ULL << 20)

enum part_state { P_IDLE, P_QUEUED, P_HASHING, P_UPLOADING, P_DONE };

struct part {
    struct om_writer *w;
    int number;
    uint64_t off, len;
    enum part_state state;
    uint32_t gen, up_gen;
    int failures;
    unsigned char md5[OM_MD5_LEN];
    char etag[OM_ETAG_MAX];
    struct om_s3_part_put put;
};

struct om_writer {
    struct om_writers *ws;
    struct om_hnode node;
    uint64_t ino;
    char *key;
    int refs; /* under ws->lock */
    bool in_queue;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fd;
    char *path;    /* staging data */
    char *sidecar; /* staging sidecar */
    bool materialized;
    struct om_writer_base base;
    uint64_t size;
    struct timespec mtime;
    bool dirty;     /* changed since the last commit */
    uint64_t changes;        /* counts writes, truncates and metadata changes */
    uint64_t failed_changes; /* changes at the last failed commit (kept in recovery) */
    bool committed; /* a commit succeeded at least once */
    bool committing;
    bool working; /* a worker is hashing this writer's parts */
    bool aborting; /* the upload is being abandoned: start no part */
    bool part_failed;
    int inflight;
    struct part **parts;
    int nparts, cap;
    char *upload_id;
    uint32_t meta_version, upload_meta_version;
    struct om_file_meta meta;
    /* MD5 of [0, md5_upto), fed part by part while parts go out in order */
    struct om_digest md5;
    bool md5_valid;
    uint64_t md5_upto;
    struct om_commit_result last;
    char *recovery; /* recovery entry of the last failed commit */
    bool pushing;   /* uploading a recovery file: it stays where it is on failure */
    bool discarded; /* unlinked while open: nothing more to upload */
    char last_error[256];
};

struct om_writers {
    struct om_s3 *s3;
    struct om_writers_config cfg;
    char *cache_dir, *staging_dir, *recovery_dir, *bucket, *endpoint;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct om_htable table;
    struct om_writer **queue;
    int qlen, qcap;
    bool stopping;
    pthread_t workers[WORKERS];
    int nworkers;
    struct om_writers_stats st;
};

/* ---- part layout ---- */

int om_part_of(uint64_t part_size, uint64_t off, uint64_t *start, uint64_t *len)
{
    uint64_t tier_start = 0, size = part_size;
    for (int tier = 0; tier < 10; tier++) {
        uint64_t tier_len = size * PARTS_PER_TIER;
        if (off < tier_start + tier_len) {
            uint64_t k = (off - tier_start) / size;
            *start = tier_start + k * size;
            *len = size;
            return tier * PARTS_PER_TIER + (int)k + 1;
        }
        tier_start += tier_len;
        size *= 2;
    }
    return -EFBIG;
}

/* ---- small helpers ---- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Write a sidecar describing staged or recovered data. */
static int write_sidecar(const char *path, struct om_writers *ws, struct om_writer *w,
                         const char *state, const char *md5hex)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(f, "{\n  \"state\": ");
    json_str(f, state);
    fprintf(f, ",\n  \"bucket\": ");
    json_str(f, ws->bucket);
    fprintf(f, ",\n  \"key\": ");
    json_str(f, w->key);
    fprintf(f, ",\n  \"endpoint\": ");
    json_str(f, ws->endpoint);
    fprintf(f, ",\n  \"size\": %" PRIu64 ",\n  \"md5\": ", w->size);
    json_str(f, md5hex ? md5hex : "");
    fprintf(f, ",\n  \"upload_id\": ");
    json_str(f, w->upload_id ? w->upload_id : "");
    fprintf(f, ",\n  \"time\": ");
    json_str(f, when);
    fprintf(f, ",\n  \"pid\": %d,\n  \"last_error\": ", (int)getpid());
    json_str(f, w->last_error);
    if (w->meta.has_mode)
        fprintf(f, ",\n  \"mode\": %u", (unsigned)w->meta.mode);
    fprintf(f, "\n}\n");
    int rc = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

static int mkdir_p(const char *path, mode_t mode)
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
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char text[16384];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *from = "\"state\": \"staging\"";
    char *at = strstr(text, from);
    if (!at)
        return;
    f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "%.*s\"state\": \"interrupted\"%s", (int)(at - text), text, at + strlen(from));
    fclose(f);
}

/* Move staging files whose daemon is gone into recovery. */
static void recover_leftovers(struct om_writers *ws)
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
        snprintf(side, sizeof(side), "%s/%.*s.json", ws->staging_dir, (int)(n - 5), e->d_name);
        int fd = open(data, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            close(fd); /* a live daemon owns it */
            continue;
        }
        snprintf(rdata, sizeof(rdata), "%s/%s", ws->recovery_dir, e->d_name);
        snprintf(rside, sizeof(rside), "%s/%.*s.json", ws->recovery_dir, (int)(n - 5), e->d_name);
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

/* ---- the pool ---- */

static void *worker_main(void *arg);

struct om_writers *om_writers_new(struct om_s3 *s3, const struct om_writers_config *cfg,
                                  char *err, size_t errlen)
{
    struct om_writers *ws = calloc(1, sizeof(*ws));
    if (!ws) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    ws->s3 = s3;
    ws->cfg = *cfg;
    if (ws->cfg.part_size < MIN_PART)
        ws->cfg.part_size = MIN_PART;
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
    int rc = mkdir_p(ws->staging_dir, 0700);
    if (!rc)
        rc = mkdir_p(ws->recovery_dir, 0700);
    if (rc) {
        snprintf(err, errlen, "cache directory %s: %s", cfg->cache_dir, strerror(-rc));
        goto fail;
    }
    pthread_mutex_init(&ws->lock, NULL);
    pthread_cond_init(&ws->work, NULL);
    recover_leftovers(ws);
    for (int i = 0; i < WORKERS; i++) {
        if (pthread_create(&ws->workers[i], NULL, worker_main, ws) != 0) {
            snprintf(err, errlen, "cannot start upload workers");
            om_writers_free(ws);
            return NULL;
        }
        ws->nworkers++;
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

void om_writers_free(struct om_writers *ws)
{
    if (!ws)
        return;
    pthread_mutex_lock(&ws->lock);
    ws->stopping = true;
    pthread_cond_broadcast(&ws->work);
    pthread_mutex_unlock(&ws->lock);
    for (int i = 0; i < ws->nworkers; i++)
        pthread_join(ws->workers[i], NULL);
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

/* Queue w for the workers. Caller holds w->lock. */
static void schedule(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    if (w->in_queue)
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
    ws->queue[ws->qlen++] = w;
    w->refs++;
    w->in_queue = true;
    pthread_cond_signal(&ws->work);
    pthread_mutex_unlock(&ws->lock);
}

/* ---- parts ---- */

/* Make sure parts cover [0, size) and lengths are right. Parts beyond the
 * end keep existing with length 0. Caller holds lock. */
static int layout(struct om_writer *w)
{
    uint64_t P = w->ws->cfg.part_size;
    int need = 0;
    if (w->size > 0) {
        uint64_t s, l;
        need = om_part_of(P, w->size - 1, &s, &l);
        if (need < 0)
            return need;
    }
    if (need > w->cap) {
        int cap = OM_MAX(need, w->cap * 2);
        struct part **v = realloc(w->parts, sizeof(*v) * (size_t)cap);
        if (!v)
            return -ENOMEM;
        w->parts = v;
        w->cap = cap;
    }
    while (w->nparts < need) {
        struct part *p = calloc(1, sizeof(*p));
        if (!p)
            return -ENOMEM;
        p->w = w;
        p->number = w->nparts + 1;
        w->parts[w->nparts++] = p;
    }
    uint64_t at = 0;
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        uint64_t s, l;
        om_part_of(P, at, &s, &l);
        p->off = at;
        p->len = at >= w->size ? 0 : OM_MIN(l, w->size - at);
        at += l;
    }
    return 0;
}

/* Mark the parts touched by [off, end) as changed. Caller holds lock. */
static void touch(struct om_writer *w, uint64_t off, uint64_t end)
{
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->len == 0 || p->off + p->len <= off || p->off >= end)
            continue;
        p->gen++;
        if (p->state == P_DONE)
            p->state = P_IDLE;
    }
    if (off < w->md5_upto)
        w->md5_valid = false;
}

/* Parts the writer has moved past go to the workers. Caller holds lock. */
static void queue_passed(struct om_writer *w, uint64_t off)
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
        schedule(w);
}

static void part_done(struct om_s3_part_put *put)
{
    struct part *p = put->ud;
    struct om_writer *w = p->w;
    struct om_writers *ws = w->ws;
    pthread_mutex_lock(&w->lock);
    w->inflight--;
    bool changed = p->gen != p->up_gen;
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
            schedule(w);
        }
    }
    if (w->inflight < ws->cfg.max_parts_in_flight) {
        for (int i = 0; i < w->nparts; i++) {
            if (w->parts[i]->state == P_QUEUED) {
                schedule(w);
                break;
            }
        }
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void om_file_meta_headers(const struct om_file_meta *m, struct om_header_list *h)
{
    if (m->has_mode)
        om_headers_addf(h, "x-amz-meta-mode", "%u", (unsigned)m->mode);
    if (m->has_uid)
        om_headers_addf(h, "x-amz-meta-uid", "%u", (unsigned)m->uid);
    if (m->has_gid)
        om_headers_addf(h, "x-amz-meta-gid", "%u", (unsigned)m->gid);
    if (m->has_mtime)
        om_headers_addf(h, "x-amz-meta-mtime", "%ld", (long)m->mtime.tv_sec);
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
    struct om_header_list h = {0};
    om_file_meta_headers(&m, &h);
    struct om_s3_put_opts opts = {.meta = &h};
    char *id = NULL;
    struct om_s3_error err;
    int rc = om_s3_mpu_create(w->ws->s3, w->key, &opts, &id, &err);
    om_headers_free(&h);
    pthread_mutex_lock(&w->lock);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "CreateMultipartUpload: %s %s",
                 strerror(-rc), err.code);
    } else {
        free(w->upload_id);
        w->upload_id = id;
        w->upload_meta_version = version;
        write_sidecar(w->sidecar, w->ws, w, "staging", NULL);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

/* Hash and send the queued parts of one writer, in order. */
static void work_on(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    char *buf = malloc(1 << 20);
    pthread_mutex_lock(&w->lock);
    w->in_queue = false;
    if (w->working || !buf) {
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
        bool feed = w->md5_valid && w->md5_upto == off;
        pthread_mutex_unlock(&w->lock);

        struct om_digest d;
        int rc = om_digest_init(&d, OM_DIGEST_MD5);
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
        if (rc)
            om_digest_free(&d);
        else
            rc = om_digest_final(&d, p->md5);

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
        p->put = (struct om_s3_part_put){
            .key = w->key,
            .upload_id = w->upload_id,
            .number = p->number,
            .body = {.kind = OM_BODY_FD, .fd = w->fd, .off = (off_t)off, .len = len},
            .done = part_done,
            .ud = p,
        };
        memcpy(p->put.md5, p->md5, OM_MD5_LEN);
        p->state = P_UPLOADING;
        w->inflight++;
        if (om_s3_part_submit(ws->s3, &p->put) != 0) {
            w->inflight--;
            p->state = P_IDLE;
            w->part_failed = true;
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
        om_writer_release(w); /* the queue's reference */
        pthread_mutex_lock(&ws->lock);
    }
    pthread_mutex_unlock(&ws->lock);
    return NULL;
}

/* ---- writers ---- */

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

static int staging_create(struct om_writers *ws, struct om_writer *w)
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
    size_t n = strlen(tmpl);
    w->sidecar = malloc(n + 1);
    if (!w->path || !w->sidecar)
        return -ENOMEM;
    memcpy(w->sidecar, tmpl, n - 5);
    strcpy(w->sidecar + n - 5, ".json");
    return write_sidecar(w->sidecar, ws, w, "staging", NULL);
}

static void writer_destroy(struct om_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->path)
        unlink(w->path);
    if (w->sidecar)
        unlink(w->sidecar);
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

int om_writer_open(struct om_writers *ws, uint64_t ino, const char *key,
                   const struct om_writer_base *base, bool trunc, struct om_writer **out)
{
    pthread_mutex_lock(&ws->lock);
    struct om_writer *w = table_get(ws, ino);
    if (w) {
        w->refs++;
        pthread_mutex_unlock(&ws->lock);
        if (trunc) {
            int rc = om_writer_truncate(w, 0);
            if (rc) {
                om_writer_release(w);
                return rc;
            }
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
    pthread_cond_init(&w->cond, NULL);
    w->base = *base;
    w->meta = base->meta;
    clock_gettime(CLOCK_REALTIME, &w->mtime);
    int rc = w->key ? staging_create(ws, w) : -ENOMEM;
    if (!rc)
        rc = om_digest_init(&w->md5, OM_DIGEST_MD5);
    if (rc) {
        writer_destroy(w);
        return rc;
    }
    w->md5_valid = true;
    if (trunc || !base->exists) {
        w->materialized = true;
        w->dirty = true; /* even an empty file is committed */
        w->changes = 1;
        w->size = 0;
    } else {
        w->size = base->size;
    }
    pthread_mutex_lock(&ws->lock);
    struct om_writer *race = table_get(ws, ino);
    if (race) {
        race->refs++;
        pthread_mutex_unlock(&ws->lock);
        writer_destroy(w);
        *out = race;
        return trunc ? om_writer_truncate(race, 0) : 0;
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

static void abort_upload(struct om_writer *w);

void om_writer_release(struct om_writer *w)
{
    struct om_writers *ws = w->ws;
    pthread_mutex_lock(&ws->lock);
    bool last = --w->refs == 0;
    if (last) {
        om_htable_remove(&ws->table, &w->node);
        ws->st.open_writers--;
    }
    pthread_mutex_unlock(&ws->lock);
    if (!last)
        return;
    /* nothing written may vanish: an uncommitted change is committed now, and
     * kept in recovery if that fails; what a failed commit already put in
     * recovery is not sent again */
    pthread_mutex_lock(&w->lock);
    bool pending = w->dirty && w->changes != w->failed_changes;
    pthread_mutex_unlock(&w->lock);
    if (pending)
        om_writer_commit(w, NULL);
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < w->nparts; i++) {
        if (w->parts[i]->state == P_UPLOADING)
            om_s3_part_cancel(ws->s3, &w->parts[i]->put);
    }
    while (w->inflight > 0 || w->working)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    if (w->upload_id)
        abort_upload(w);
    writer_destroy(w);
}

/* ---- data ---- */

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
        rc = layout(w);
    }
    return rc;
}

static int check_space(struct om_writers *ws, uint64_t need)
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
static int prepare_write(struct om_writer *w)
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

ssize_t om_writer_write(struct om_writer *w, const char *buf, size_t len, uint64_t off)
{
    int rc = check_space(w->ws, len);
    if (rc)
        return rc;
    pthread_mutex_lock(&w->lock);
    rc = prepare_write(w);
    if (rc) {
        pthread_mutex_unlock(&w->lock);
        return rc;
    }
    uint64_t end = off + len;
    if (end > w->size) {
        uint64_t s, l;
        if (om_part_of(w->ws->cfg.part_size, end - 1, &s, &l) < 0) {
            pthread_mutex_unlock(&w->lock);
            return -EFBIG;
        }
    }
    /* pwrite under the lock keeps the part generations honest */
    for (size_t at = 0; at < len;) {
        ssize_t n = pwrite(w->fd, buf + at, len - at, (off_t)(off + at));
        if (n < 0) {
            rc = -errno;
            pthread_mutex_unlock(&w->lock);
            return rc;
        }
        at += (size_t)n;
    }
    uint64_t old = w->size;
    if (end > w->size)
        w->size = end;
    rc = layout(w);
    if (!rc) {
        touch(w, OM_MIN(off, old), end);
        w->dirty = true;
        w->changes++;
        clock_gettime(CLOCK_REALTIME, &w->mtime);
        queue_passed(w, off);
    }
    pthread_mutex_unlock(&w->lock);
    return rc ? rc : (ssize_t)len;
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

int om_writer_truncate(struct om_writer *w, uint64_t size)
{
    pthread_mutex_lock(&w->lock);
    int rc = 0;
    if (size == 0) {
        while (w->committing)
            pthread_cond_wait(&w->cond, &w->lock);
        w->materialized = true; /* nothing to fetch */
    } else {
        rc = prepare_write(w);
    }
    /* parts beyond the new end must not be in flight */
    while (!rc && (w->inflight > 0 || w->working))
        pthread_cond_wait(&w->cond, &w->lock);
    if (!rc && ftruncate(w->fd, (off_t)size) != 0)
        rc = -errno;
    if (!rc) {
        uint64_t old = w->size;
        w->size = size;
        rc = layout(w);
        touch(w, OM_MIN(old, size), OM_MAX(old, size) + 1);
        w->dirty = true;
        w->changes++;
        clock_gettime(CLOCK_REALTIME, &w->mtime);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void om_writer_get_meta(struct om_writer *w, struct om_file_meta *m)
{
    pthread_mutex_lock(&w->lock);
    *m = w->meta;
    pthread_mutex_unlock(&w->lock);
}

void om_writer_set_meta(struct om_writer *w, const struct om_file_meta *m)
{
    pthread_mutex_lock(&w->lock);
    w->meta = *m;
    w->meta_version++;
    w->dirty = true;
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

/* ---- commit ---- */

static void abort_upload(struct om_writer *w)
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
    for (int i = 0; i < w->nparts; i++) {
        w->parts[i]->state = P_IDLE;
        w->parts[i]->failures = 0;
    }
    w->aborting = false;
    pthread_mutex_unlock(&w->lock);
    if (!id)
        return;
    struct om_s3_error err;
    int rc = om_s3_mpu_abort(w->ws->s3, w->key, id, &err);
    if (rc && rc != -ENOENT)
        om_warn("aborting upload %s of %s: %s (it can be aborted later with objmountctl "
                "uploads abort)",
                id, w->key, strerror(-rc));
    free(id);
}

static bool plain_md5(const char *etag)
{
    if (strlen(etag) != 32)
        return false;
    for (const char *p = etag; *p; p++)
        if (!strchr("0123456789abcdefABCDEF", *p))
            return false;
    return true;
}

static bool multipart_shaped(const char *etag)
{
    const char *dash = strchr(etag, '-');
    return dash && dash - etag == 32 && dash[1];
}

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
    return om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, size, out);
}

/* After PUT or Complete: the object must be what the staging file holds. */
static int verify(struct om_writer *w, uint64_t size, const unsigned char *known_md5,
                  const char *mp_etag, char *etag_out)
{
    struct om_writers *ws = w->ws;
    struct om_s3_object o;
    struct om_s3_error err;
    int rc = om_s3_head(ws->s3, w->key, &o, &err);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "HEAD after commit: %s", strerror(-rc));
        return rc;
    }
    if (o.size != size) {
        snprintf(w->last_error, sizeof(w->last_error),
                 "stored object has %" PRIu64 " bytes, %" PRIu64 " were written", o.size, size);
        om_error("%s: %s", w->key, w->last_error);
        return -EBADMSG;
    }
    om_strlcpy(etag_out, o.etag, OM_ETAG_MAX);
    unsigned char md5[OM_MD5_LEN];
    char hex[2 * OM_MD5_LEN + 1] = "";
    const char *how;
    if (mp_etag && strcasecmp(o.etag, mp_etag) == 0) {
        how = "multipart ETag";
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_multipart++;
        pthread_mutex_unlock(&ws->lock);
    } else if (plain_md5(o.etag) || multipart_shaped(o.etag)) {
        if (known_md5)
            memcpy(md5, known_md5, OM_MD5_LEN);
        else if ((rc = whole_md5(w, size, md5)) != 0)
            return rc;
        om_hex(md5, OM_MD5_LEN, hex);
        if (strcasecmp(o.etag, hex) != 0) {
            snprintf(w->last_error, sizeof(w->last_error),
                     "stored ETag %s matches neither the MD5 %s nor the multipart ETag %s",
                     o.etag, hex, mp_etag ? mp_etag : "-");
            om_error("%s: %s", w->key, w->last_error);
            return -EBADMSG;
        }
        how = "MD5 ETag";
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_md5++;
        pthread_mutex_unlock(&ws->lock);
    } else {
        how = "size only (the server's ETags are not MD5s)";
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_size_only++;
        pthread_mutex_unlock(&ws->lock);
    }
    om_debug("%s: verified by %s", w->key, how);
    if (!ws->cfg.verify_read)
        return 0;
    /* read it back and compare digests */
    if (!hex[0]) {
        if (known_md5)
            memcpy(md5, known_md5, OM_MD5_LEN);
        else if ((rc = whole_md5(w, size, md5)) != 0)
            return rc;
    }
    enum { CHUNK = 8 << 20 };
    char *buf = malloc(CHUNK);
    struct om_digest d;
    if (!buf || om_digest_init(&d, OM_DIGEST_MD5)) {
        free(buf);
        return -ENOMEM;
    }
    for (uint64_t off = 0; off < size && !rc;) {
        uint64_t want = OM_MIN((uint64_t)CHUNK, size - off);
        ssize_t got = om_s3_get_range(ws->s3, w->key, off, want, o.etag, buf, NULL, &err);
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
    free(buf);
    if (!rc && memcmp(back, md5, OM_MD5_LEN) != 0) {
        snprintf(w->last_error, sizeof(w->last_error), "read back differs from what was written");
        om_error("%s: %s", w->key, w->last_error);
        rc = -EBADMSG;
    }
    if (!rc) {
        pthread_mutex_lock(&ws->lock);
        ws->st.verified_read++;
        pthread_mutex_unlock(&ws->lock);
    }
    return rc;
}

/* One attempt at a single PUT. Caller holds no lock; committing is set. */
static int put_once(struct om_writer *w, uint64_t size, const struct om_file_meta *m,
                    char *etag)
{
    unsigned char md5[OM_MD5_LEN];
    int rc = om_digest_fd_range(OM_DIGEST_MD5, w->fd, 0, size, md5);
    if (rc)
        return rc;
    struct om_header_list h = {0};
    om_file_meta_headers(m, &h);
    struct om_s3_put_opts opts = {.meta = &h};
    struct om_http_body body = {.kind = OM_BODY_FD, .fd = w->fd, .off = 0, .len = size};
    struct om_s3_error err;
    char put_etag[OM_ETAG_MAX];
    rc = om_s3_put(w->ws->s3, w->key, &body, md5, &opts, put_etag, &err);
    om_headers_free(&h);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "PutObject: %s%s%s%s%.120s", strerror(-rc),
                 err.code[0] ? " " : "", err.code, err.message[0] ? ": " : "", err.message);
        return rc;
    }
    pthread_mutex_lock(&w->ws->lock);
    w->ws->st.bytes_uploaded += size;
    pthread_mutex_unlock(&w->ws->lock);
    return verify(w, size, md5, NULL, etag);
}

/* One attempt at a multipart upload. Caller holds w->lock. */
static int multipart_once(struct om_writer *w, uint64_t size, char *etag)
{
again:
    if (w->upload_id && w->upload_meta_version != w->meta_version) {
        /* metadata changed since the upload began: begin again */
        pthread_mutex_unlock(&w->lock);
        abort_upload(w);
        pthread_mutex_lock(&w->lock);
    }
    w->part_failed = false;
    for (int i = 0; i < w->nparts; i++)
        w->parts[i]->failures = 0;
    for (;;) {
        /* everything not stored yet goes out, including parts that came back
         * changed from an upload that was under way when the commit began */
        bool queued = false, all_done = true;
        for (int i = 0; i < w->nparts; i++) {
            struct part *p = w->parts[i];
            if (p->len == 0)
                continue;
            if (p->state == P_DONE && p->gen != p->up_gen)
                p->state = P_IDLE;
            if (p->state == P_IDLE && p->failures <= PART_RETRIES)
                p->state = P_QUEUED;
            queued |= p->state == P_QUEUED;
            all_done &= p->state == P_DONE;
        }
        if (all_done && !w->working && w->inflight == 0)
            break;
        if (w->part_failed && !w->working && w->inflight == 0)
            return -EIO;
        if (queued && !w->working && !w->in_queue)
            schedule(w);
        pthread_cond_wait(&w->cond, &w->lock);
    }
    /* an upload created while the metadata changed carries the old metadata */
    if (!w->upload_id || w->upload_meta_version != w->meta_version)
        goto again;
    int n = 0;
    for (int i = 0; i < w->nparts; i++)
        n += w->parts[i]->len > 0;
    struct om_s3_part *list = calloc((size_t)n, sizeof(*list));
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
    pthread_mutex_unlock(&w->lock);
    char mp[OM_ETAG_MAX], done_etag[OM_ETAG_MAX];
    om_s3_multipart_etag((const unsigned char(*)[OM_MD5_LEN])md5s, n, mp);
    struct om_s3_error err;
    int rc = id ? om_s3_mpu_complete(w->ws->s3, w->key, id, list, n, done_etag, &err) : -ENOMEM;
    free(list);
    free(md5s);
    free(id);
    if (rc) {
        snprintf(w->last_error, sizeof(w->last_error), "CompleteMultipartUpload: %s%s%s%s%.120s",
                 strerror(-rc), err.code[0] ? " " : "", err.code, err.message[0] ? ": " : "",
                 err.message);
    } else {
        pthread_mutex_lock(&w->lock);
        free(w->upload_id); /* completed: nothing to abort any more */
        w->upload_id = NULL;
        pthread_mutex_unlock(&w->lock);
        rc = verify(w, size, NULL, mp, etag);
        if (rc) {
            /* the stored object is wrong: the next attempt uploads every part again */
            pthread_mutex_lock(&w->lock);
            for (int i = 0; i < w->nparts; i++)
                w->parts[i]->state = P_IDLE;
            pthread_mutex_unlock(&w->lock);
        }
    }
    pthread_mutex_lock(&w->lock);
    return rc;
}

/* Keep the bytes that could not be uploaded. Caller holds w->lock. */
static void keep_in_recovery(struct om_writer *w)
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
    snprintf(side, sizeof(side), "%s.json", base);
    if (w->recovery) {
        /* replace the entry of an earlier failed commit */
        unlink(w->recovery);
        char old[4300];
        snprintf(old, sizeof(old), "%.*s.json", (int)strlen(w->recovery) - 5, w->recovery);
        unlink(old);
        free(w->recovery);
        w->recovery = NULL;
    }
    if (link(w->path, data) != 0) {
        om_error("could not keep %s in recovery (%s): the data stays in %s until it is closed",
                 w->key, strerror(errno), w->path);
        return;
    }
    write_sidecar(side, ws, w, "failed", hex);
    w->recovery = strdup(data);
    pthread_mutex_lock(&ws->lock);
    ws->st.recovered++;
    pthread_mutex_unlock(&ws->lock);
    om_error("could not upload %s (%s): %" PRIu64 " bytes kept in %s", w->key, w->last_error,
             w->size, data);
}

int om_writer_commit(struct om_writer *w, struct om_commit_result *res)
{
    struct om_writers *ws = w->ws;
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    if (!w->dirty || w->discarded) {
        if (res)
            *res = w->last;
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    int rc = prepare_write(w); /* a metadata-only change on an untouched object */
    if (rc) {
        pthread_mutex_unlock(&w->lock);
        return rc;
    }
    w->committing = true;
    pthread_mutex_lock(&ws->lock);
    ws->st.commits_in_flight++;
    pthread_mutex_unlock(&ws->lock);
    uint64_t size = w->size;
    char etag[OM_ETAG_MAX] = "";
    uint64_t delay = ws->cfg.upload_retry_ms;
    for (int attempt = 0;; attempt++) {
        if (size <= ws->cfg.part_size) {
            struct om_file_meta m = w->meta;
            pthread_mutex_unlock(&w->lock);
            if (w->upload_id)
                abort_upload(w);
            rc = put_once(w, size, &m, etag);
            pthread_mutex_lock(&w->lock);
        } else {
            rc = multipart_once(w, size, etag);
        }
        if (rc == 0 || attempt >= ws->cfg.upload_retries)
            break;
        om_warn("commit of %s failed (%s); uploading it again in %" PRIu64 " ms (attempt %d of %d)",
                w->key, w->last_error, delay, attempt + 2, ws->cfg.upload_retries + 1);
        pthread_mutex_lock(&ws->lock);
        ws->st.upload_retries++;
        pthread_mutex_unlock(&ws->lock);
        pthread_mutex_unlock(&w->lock);
        abort_upload(w);
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
        if (!w->pushing)
            keep_in_recovery(w);
        w->failed_changes = w->changes;
        rc = -EIO;
    } else {
        w->dirty = false;
        w->committed = true;
        w->last.size = size;
        om_strlcpy(w->last.etag, etag, sizeof(w->last.etag));
        w->last.mtime = w->meta.has_mtime ? w->meta.mtime : w->mtime;
        w->last.meta = w->meta;
        w->last_error[0] = '\0';
        if (w->recovery) {
            /* an earlier failure was made good */
            char side[4300];
            snprintf(side, sizeof(side), "%.*s.json", (int)strlen(w->recovery) - 5, w->recovery);
            unlink(w->recovery);
            unlink(side);
            free(w->recovery);
            w->recovery = NULL;
        }
        if (res)
            *res = w->last;
    }
    w->committing = false;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    return rc;
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
    pthread_cond_init(&w->cond, NULL);
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
        rc = layout(w);
        pthread_mutex_unlock(&w->lock);
    }
    if (!rc)
        rc = om_writer_commit(w, NULL);
    if (rc)
        snprintf(err, errlen, "%s", w->last_error[0] ? w->last_error : strerror(-rc));
    /* the file is the caller's: writer_destroy must not delete it */
    free(w->path);
    w->path = NULL;
    pthread_mutex_lock(&w->lock);
    while (w->inflight > 0 || w->working)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    /* a worker may still hold the queue's reference for a moment */
    for (;;) {
        pthread_mutex_lock(&ws->lock);
        int refs = w->refs;
        pthread_mutex_unlock(&ws->lock);
        if (refs <= 1)
            break;
        usleep(1000);
    }
    if (w->upload_id)
        abort_upload(w);
    writer_destroy(w);
    return rc;
}

int om_writer_store_meta(struct om_writers *ws, const char *key, const char *etag, uint64_t size,
                         const struct om_file_meta *m, struct om_s3_object *obj)
{
    if (size > (5ULL << 30))
        return -ENOTSUP;
    struct om_header_list h = {0};
    om_file_meta_headers(m, &h);
    struct om_s3_put_opts opts = {.meta = &h};
    char newetag[OM_ETAG_MAX];
    struct om_s3_error err;
    int rc = om_s3_copy(ws->s3, key, key, etag && *etag ? etag : NULL, &opts, newetag, &err);
    om_headers_free(&h);
    if (rc) {
        om_warn("storing metadata of %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status,
                err.code);
        return rc == -ESTALE ? -EIO : rc;
    }
    memset(obj, 0, sizeof(*obj));
    obj->size = size;
    obj->mtime = time(NULL);
    om_strlcpy(obj->etag, newetag, sizeof(obj->etag));
    obj->has_mode = m->has_mode;
    obj->mode = (uint32_t)m->mode;
    obj->has_uid = m->has_uid;
    obj->uid = m->uid;
    obj->has_gid = m->has_gid;
    obj->gid = m->gid;
    obj->has_mtime = m->has_mtime;
    obj->meta_mtime = m->mtime;
    return 0;
}

void om_writer_discard(struct om_writer *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    w->discarded = true;
    w->dirty = false;
    pthread_mutex_unlock(&w->lock);
    abort_upload(w);
}

int om_writer_rekey(struct om_writer *w, const char *newkey)
{
    char *k = strdup(newkey);
    if (!k)
        return -ENOMEM;
    pthread_mutex_lock(&w->lock);
    while (w->committing)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    abort_upload(w); /* parts uploaded under the old key are of no use */
    pthread_mutex_lock(&w->lock);
    pthread_mutex_lock(&w->ws->lock); /* om_writers_busy_under reads keys */
    free(w->key);
    w->key = k;
    pthread_mutex_unlock(&w->ws->lock);
    if (w->sidecar)
        write_sidecar(w->sidecar, w->ws, w, "staging", NULL);
    pthread_mutex_unlock(&w->lock);
    return 0;
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
    pthread_mutex_unlock(&ws->lock);
}
