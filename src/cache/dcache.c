/* The data cache's disk side: block files, their checks, the shared size
 * bound, the block I/O threads (see dcache.h). dc->lock guards the policy,
 * the queue and the statistics; no file I/O happens under it. */
#include "objmount/dcache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "objmount/dcache_policy.h"
#include "objmount/digest.h"
#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/util.h"

#define MAGIC "OMDCBLK1"
#define HDR 64
#define MAX_VICTIMS 64
#define MIN_AUTO (64ULL << 20)
#define STAGING_RESERVE_MAX (4ULL << 30)
#define FREE_CHECK_MS 1000
#define VERIFIED_WAYS 4 /* slots of a set of the verified table */
#define DIRECT_ALIGN 4096 /* of O_DIRECT offsets, lengths and buffers */
#define DIRECT_BUFS 8
#define HUGE_ALIGN (2u << 20)
#define DIRECT_IDLE_MS 5000 /* buffers none of which was lent this long are freed */

struct hdr {
    char magic[8];
    unsigned char id[32];
    uint64_t index;
    uint32_t len;
    uint32_t crc;  /* of the data */
    uint32_t hcrc; /* of the bytes before it */
    uint32_t pad;
};
_Static_assert(sizeof(struct hdr) == HDR, "block header is 64 bytes");

enum job_kind { J_LOAD, J_STORE };

struct job {
    enum job_kind kind;
    struct om_dcache_obj obj;
    uint64_t first, n;
    char *buf;
    om_dcache_done_fn *done;
    void *ud;
    struct job *next;
};

struct om_dcache {
    char *dir, *tmp_dir, *endpoint, *bucket;
    uint64_t limit, min_free_space;
    int usage_fd;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct om_dpolicy *policy;
    struct om_htable names; /* policy key -> block file (struct name) */
    struct job *loads, *loads_tail, *stores, *stores_tail; /* loads go first */
    bool stopping;
    pthread_t threads[8];
    int nthreads;
    uint64_t tmp_seq;
    uint64_t free_checked_ms;
    bool disk_short; /* the filesystem is below min_free_space */
    /* Block files this mount has verified (om_dcache_open_block), by policy
     * key, in sets of VERIFIED_WAYS slots: a block is checked the first time
     * it is opened here, and again when its file is another one (replaced,
     * or changed: its inode number or change time differ) or its set was
     * full (direct-mapped with a slot per block of the bound, 1,024 for 256
     * MiB, 6 of 66 blocks were checked twice in one pass). A
     * slot being checked is busy: a second open of the block waits for the
     * check instead of making its own (the kernel's two first reads of a
     * file checked each block twice after every mount). */
    struct verified {
        uint64_t key, ino;
        int64_t ctime_ns;
        bool busy;
    } *verified;
    size_t verified_mask;
    pthread_cond_t verified_cond;
    /* replies read with O_DIRECT (om_dcache_read_direct): false where the
     * cache's filesystem refuses it; buffers of OM_DCACHE_DIRECT_SIZE made
     * on first use, direct_busy a bit per buffer lent */
    bool direct;
    char *direct_bufs[DIRECT_BUFS];
    unsigned direct_busy;
    uint64_t direct_lent_ms; /* when one was last lent (direct_trim) */
    struct om_dcache_stats st;
};

/* ---- names ---- */

bool om_dcache_obj_init(struct om_dcache *dc, const char *key, const char *etag, uint64_t size,
                        struct om_dcache_obj *o)
{
    if (!etag || !etag[0])
        return false;
    struct om_buf b = {0};
    om_buf_printf(&b, "%s%c%s%c%s", dc->endpoint, 0, dc->bucket, 0, key);
    size_t keylen = b.len;
    om_buf_printf(&b, "%c%s", 0, etag);
    unsigned char h[OM_SHA256_LEN];
    bool ok = b.data && om_sha256(b.data, keylen, h) == 0;
    if (ok)
        memcpy(o->kh, h, sizeof(o->kh));
    ok = ok && om_sha256(b.data, b.len, o->id) == 0 && om_sha256(etag, strlen(etag), h) == 0;
    if (ok)
        memcpy(o->eh, h, sizeof(o->eh));
    om_buf_free(&b);
    o->size = size;
    return ok;
}

uint64_t om_dcache_blocks(const struct om_dcache_obj *o)
{
    return (o->size + OM_DCACHE_BLOCK - 1) / OM_DCACHE_BLOCK;
}

static uint64_t block_len(const struct om_dcache_obj *o, uint64_t i)
{
    uint64_t off = i * OM_DCACHE_BLOCK;
    return off >= o->size ? 0 : OM_MIN(OM_DCACHE_BLOCK, o->size - off);
}

static uint64_t policy_key(const unsigned char kh[16], const unsigned char eh[8], uint64_t i)
{
    unsigned char k[32];
    memcpy(k, kh, 16);
    memcpy(k + 16, eh, 8);
    memcpy(k + 24, &i, 8);
    return om_hash_bytes(k, sizeof(k));
}

/* dir/XX/<kh>.<eh>.<index>, or dir/XX when index is UINT64_MAX */
static char *block_path(const struct om_dcache *dc, const unsigned char kh[16],
                        const unsigned char eh[8], uint64_t i)
{
    char khx[33], ehx[17];
    om_hex(kh, 16, khx);
    om_hex(eh, 8, ehx);
    char *p = NULL;
    int rc = i == UINT64_MAX ? asprintf(&p, "%s/%.2s", dc->dir, khx)
                             : asprintf(&p, "%s/%.2s/%s.%s.%" PRIx64, dc->dir, khx, khx, ehx, i);
    return rc < 0 ? NULL : p;
}

/* Parse <kh>.<eh>.<index>. */
static bool parse_name(const char *name, unsigned char kh[16], unsigned char eh[8], uint64_t *i)
{
    char buf[32 + 1 + 16 + 1];
    if (strlen(name) < 32 + 1 + 16 + 2 || name[32] != '.' || name[49] != '.')
        return false;
    memcpy(buf, name, sizeof(buf));
    buf[32] = buf[49] = '\0';
    if (om_unhex(buf, kh, 16) || om_unhex(buf + 33, eh, 8))
        return false;
    const char *x = name + 50;
    if (!*x || strlen(x) > 16)
        return false;
    uint64_t v = 0;
    for (; *x; x++) {
        int d = om_hexval(*x);
        if (d < 0)
            return false;
        v = v * 16 + (uint64_t)d;
    }
    *i = v;
    return true;
}

/* ---- the shared size ---- */

/* Add delta to the bytes stored by all mounts; returns the new total. */
static uint64_t usage_add(struct om_dcache *dc, int64_t delta)
{
    uint64_t total = 0;
    if (flock(dc->usage_fd, LOCK_EX) != 0)
        return dc->st.size_bytes;
    if (pread(dc->usage_fd, &total, sizeof(total), 0) != (ssize_t)sizeof(total))
        total = 0;
    if (delta < 0 && (uint64_t)-delta > total)
        total = 0;
    else
        total += (uint64_t)delta;
    if (delta && pwrite(dc->usage_fd, &total, sizeof(total), 0) != (ssize_t)sizeof(total))
        om_debug("data cache: cannot update %s/usage: %s", dc->dir, strerror(errno));
    flock(dc->usage_fd, LOCK_UN);
    return total;
}

static void usage_set(struct om_dcache *dc, uint64_t total)
{
    if (flock(dc->usage_fd, LOCK_EX) != 0)
        return;
    if (pwrite(dc->usage_fd, &total, sizeof(total), 0) != (ssize_t)sizeof(total))
        om_debug("data cache: cannot write %s/usage: %s", dc->dir, strerror(errno));
    flock(dc->usage_fd, LOCK_UN);
}

/* ---- block files ---- */

static void storing_off(struct om_dcache *dc, const char *what, int err)
{
    pthread_mutex_lock(&dc->lock);
    bool was = dc->st.storing;
    dc->st.storing = false;
    pthread_mutex_unlock(&dc->lock);
    if (was)
        om_warn("data cache %s: %s: %s; blocks are not stored any more (reads go to the store, "
                "cached blocks still serve)",
                dc->dir, what, strerror(err));
}

/* ---- the names of resident blocks ---- */

/* The policy knows blocks by a 64-bit key; evicting needs the file. */
struct name {
    struct om_hnode node;
    uint64_t key;
    unsigned char kh[16], eh[8];
    uint64_t index;
};

static struct name *name_find(struct om_dcache *dc, uint64_t key)
{
    uint64_t h = om_hash_u64(key);
    for (struct om_hnode *n = om_htable_first(&dc->names, h); n; n = om_htable_next(n, h)) {
        struct name *x = om_container_of(n, struct name, node);
        if (x->key == key)
            return x;
    }
    return NULL;
}

/* A block is in the cache: known to the policy (bytes) and by name.
 * Caller holds dc->lock. */
static void name_add(struct om_dcache *dc, const unsigned char kh[16], const unsigned char eh[8],
                     uint64_t index, uint64_t key, uint64_t bytes)
{
    struct name *x = name_find(dc, key);
    if (!x) {
        x = calloc(1, sizeof(*x));
        if (!x)
            return; /* unknown to this mount: another one may evict it */
        x->key = key;
        memcpy(x->kh, kh, 16);
        memcpy(x->eh, eh, 8);
        x->index = index;
        om_htable_insert(&dc->names, &x->node, om_hash_u64(key));
    }
    if (om_dpolicy_insert(dc->policy, key, bytes) != 0) {
        om_htable_remove(&dc->names, &x->node);
        free(x);
    }
}

/* Caller holds dc->lock. */
static void name_forget(struct om_dcache *dc, uint64_t key)
{
    struct name *x = name_find(dc, key);
    if (x) {
        om_htable_remove(&dc->names, &x->node);
        free(x);
    }
}

/* Remove a block file; its bytes leave the shared total when this call
 * removed it. */
/* Remove block i's file and forget it. Returns the bytes freed. */
static uint64_t remove_block(struct om_dcache *dc, const unsigned char kh[16],
                             const unsigned char eh[8], uint64_t i, uint64_t key)
{
    char *p = block_path(dc, kh, eh, i);
    struct stat sb;
    uint64_t freed = 0;
    if (p && lstat(p, &sb) == 0 && unlink(p) == 0 && S_ISREG(sb.st_mode)) {
        usage_add(dc, -(int64_t)sb.st_size);
        freed = (uint64_t)sb.st_size;
    }
    free(p);
    pthread_mutex_lock(&dc->lock);
    om_dpolicy_remove(dc->policy, key);
    name_forget(dc, key);
    pthread_mutex_unlock(&dc->lock);
    return freed;
}

/* Open block i of o (flags beside O_RDONLY: 0 or O_DIRECT): an fd, or
 * -ENOENT (not cached) / -EINVAL (O_DIRECT refused) / -EBADMSG. */
static int open_block(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i, int flags)
{
    char *p = block_path(dc, o->kh, o->eh, i);
    if (!p)
        return -ENOMEM;
    int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | flags);
    int err = errno;
    free(p);
    if (fd < 0)
        return err == ENOENT ? -ENOENT : err == EINVAL && flags ? -EINVAL : -EBADMSG;
    return fd;
}

/* Are header h and the len data bytes at data block i of o? */
static bool block_good(const struct om_dcache_obj *o, uint64_t i, const struct hdr *h,
                       const void *data, uint64_t len)
{
    return memcmp(h->magic, MAGIC, 8) == 0 &&
           h->hcrc == om_crc32c(0, h, offsetof(struct hdr, hcrc)) &&
           memcmp(h->id, o->id, sizeof(h->id)) == 0 && h->index == i && h->len == len &&
           h->crc == om_crc32c(0, data, (size_t)len);
}

/* Read block i from fd (open_block) into dst and check it; closes fd. */
static int read_block(const struct om_dcache_obj *o, uint64_t i, int fd, char *dst)
{
    uint64_t len = block_len(o, i);
    struct stat sb;
    struct hdr h;
    struct iovec iov[2] = {{&h, HDR}, {dst, (size_t)len}};
    int rc = 0;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != HDR + len ||
        preadv(fd, iov, 2, 0) != (ssize_t)(HDR + len))
        rc = -EBADMSG;
    close(fd);
    if (!rc && !block_good(o, i, &h, dst, len))
        rc = -EBADMSG;
    return rc;
}

static int mkdir_private(const char *path)
{
    if (mkdir(path, 0700) == 0 || errno == EEXIST)
        return 0;
    return -errno;
}

/* Write one block: a temporary file renamed into place, never replacing.
 * 0 (stored, or another mount stored it first: *added false) or -errno. */
static int write_block(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i,
                       const char *src, bool *added)
{
    *added = false;
    uint64_t len = block_len(o, i);
    struct hdr h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, MAGIC, 8);
    memcpy(h.id, o->id, sizeof(h.id));
    h.index = i;
    h.len = (uint32_t)len;
    h.crc = om_crc32c(0, src, (size_t)len);
    h.hcrc = om_crc32c(0, &h, offsetof(struct hdr, hcrc));
    pthread_mutex_lock(&dc->lock);
    uint64_t seq = ++dc->tmp_seq;
    pthread_mutex_unlock(&dc->lock);
    char *tmp = NULL, *path = block_path(dc, o->kh, o->eh, i);
    if (!path || asprintf(&tmp, "%s/%ld.%" PRIu64, dc->tmp_dir, (long)getpid(), seq) < 0) {
        free(path);
        return -ENOMEM;
    }
    int rc = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
    } else {
        struct iovec iov[2] = {{&h, HDR}, {(void *)src, (size_t)len}};
        ssize_t n = pwritev(fd, iov, 2, 0);
        if (n != (ssize_t)(HDR + len))
            rc = n < 0 ? -errno : -ENOSPC;
        if (close(fd) != 0 && !rc)
            rc = -errno;
    }
    for (int attempt = 0; !rc && attempt < 2; attempt++) {
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) {
            *added = true;
            break;
        }
        rc = -errno;
        if (rc == -EEXIST) {
            rc = 0; /* another mount stored it: the same bytes */
            break;
        }
        if (rc == -ENOENT && attempt == 0) {
            char *sub = block_path(dc, o->kh, o->eh, UINT64_MAX);
            rc = sub ? mkdir_private(sub) : -ENOMEM;
            free(sub);
        }
    }
    if (!*added)
        unlink(tmp);
    free(tmp);
    free(path);
    return rc;
}

/* Is the filesystem of the cache below min_free_space (checked at most
 * once a second)? Caller holds dc->lock. */
static bool disk_short(struct om_dcache *dc, uint64_t want)
{
    uint64_t now = om_now_ms();
    if (now - dc->free_checked_ms >= FREE_CHECK_MS) {
        struct statvfs sv;
        dc->free_checked_ms = now;
        if (statvfs(dc->dir, &sv) == 0) {
            uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
            dc->disk_short = avail < dc->min_free_space + want;
        }
    }
    return dc->disk_short;
}

static void trim_to_limit(struct om_dcache *dc);

/* Make room for bytes (the victims the policy names are removed) and say
 * whether block key may come in. */
static bool make_room(struct om_dcache *dc, uint64_t key, uint64_t bytes)
{
    uint64_t total = usage_add(dc, 0);
    struct name victims[MAX_VICTIMS];
    uint64_t keys[MAX_VICTIMS], short_of;
    int n = 0;
    pthread_mutex_lock(&dc->lock);
    dc->st.size_bytes = total;
    uint64_t need = total + bytes > dc->limit ? total + bytes - dc->limit : 0;
    if (disk_short(dc, bytes) && need < bytes)
        need = bytes; /* the disk is short: only in place of something */
    bool admit = om_dpolicy_admit(dc->policy, key, need, keys, MAX_VICTIMS, &n, &short_of);
    for (int k = 0; k < n; k++) {
        struct name *x = name_find(dc, keys[k]);
        if (x) {
            victims[k] = *x;
        } else {
            victims[k].key = keys[k];
            victims[k].index = UINT64_MAX; /* no file known: only the policy forgets it */
        }
    }
    if (!admit)
        dc->st.rejected++;
    else
        dc->st.evictions += (uint64_t)n;
    pthread_mutex_unlock(&dc->lock);
    for (int k = 0; k < n; k++) {
        if (victims[k].index != UINT64_MAX) {
            remove_block(dc, victims[k].kh, victims[k].eh, victims[k].index, victims[k].key);
        } else {
            pthread_mutex_lock(&dc->lock);
            om_dpolicy_remove(dc->policy, victims[k].key);
            pthread_mutex_unlock(&dc->lock);
        }
    }
    return admit;
}

static bool disk_failure(int err)
{
    return err == -ENOSPC || err == -EDQUOT || err == -EROFS || err == -EIO || err == -EACCES ||
           err == -EPERM;
}

static void store_blocks(struct om_dcache *dc, struct job *j)
{
    for (uint64_t i = j->first; i < j->first + j->n; i++) {
        uint64_t len = block_len(&j->obj, i);
        uint64_t key = policy_key(j->obj.kh, j->obj.eh, i);
        pthread_mutex_lock(&dc->lock);
        bool skip = !dc->st.storing || om_dpolicy_resident(dc->policy, key);
        pthread_mutex_unlock(&dc->lock);
        if (skip || !len || !make_room(dc, key, HDR + len))
            continue;
        bool added;
        int rc = write_block(dc, &j->obj, i,
                             j->buf + (i - j->first) * OM_DCACHE_BLOCK, &added);
        if (rc) {
            if (disk_failure(rc))
                storing_off(dc, "writing a block", -rc);
            else
                om_debug("data cache: block %" PRIu64 " not stored: %s", i, strerror(-rc));
            continue;
        }
        uint64_t total = added ? usage_add(dc, (int64_t)(HDR + len)) : usage_add(dc, 0);
        pthread_mutex_lock(&dc->lock);
        name_add(dc, j->obj.kh, j->obj.eh, i, key, HDR + len);
        dc->st.size_bytes = total;
        if (added) {
            dc->st.inserts++;
            dc->st.insert_bytes += len;
        }
        pthread_mutex_unlock(&dc->lock);
        /* another store made room for itself at the same moment (one of
         * this mount's cache threads, or another mount of the cache_dir:
         * two mounts ended a block above their shared bound): the bound
         * is kept after the fact */
        if (added && total > dc->limit)
            trim_to_limit(dc);
    }
}

/* Drop block i after a failed check (as a failed load does). */
static void drop_bad_block(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i, int rc)
{
    uint64_t key = policy_key(o->kh, o->eh, i);
    if (rc == -EBADMSG) {
        char khx[33];
        om_hex(o->kh, 16, khx);
        om_warn("data cache: block %" PRIu64 " of object %.12s… failed its check "
                "(corrupt, truncated or foreign): removed, read from the store",
                i, khx);
    }
    remove_block(dc, o->kh, o->eh, i, key);
    pthread_mutex_lock(&dc->lock);
    if (rc == -EBADMSG)
        dc->st.corrupt++;
    pthread_mutex_unlock(&dc->lock);
}

/* Blocks opened ahead of the one being read: their reads from disk are
 * started at once (POSIX_FADV_WILLNEED), so a segment of several blocks is
 * read with that many I/Os in flight, not one after the other. */
#define LOAD_AHEAD 16

static int load_blocks(struct om_dcache *dc, struct job *j)
{
    uint64_t bytes = 0;
    int fds[LOAD_AHEAD];
    uint64_t opened = j->first; /* blocks [i, opened) have fds[k % LOAD_AHEAD] */
    int rc = 0;
    uint64_t i = j->first;
    for (; i < j->first + j->n; i++) {
        while (opened < j->first + j->n && opened < i + LOAD_AHEAD) {
            int fd = open_block(dc, &j->obj, opened, 0);
            if (fd < 0)
                break; /* read_block of that one reports it */
            posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
            fds[opened % LOAD_AHEAD] = fd;
            opened++;
        }
        int fd = i < opened ? fds[i % LOAD_AHEAD] : open_block(dc, &j->obj, i, 0);
        opened = OM_MAX(opened, i + 1); /* i's fd is taken now */
        rc = fd < 0 ? fd : read_block(&j->obj, i, fd, j->buf + (i - j->first) * OM_DCACHE_BLOCK);
        if (rc)
            break;
        bytes += block_len(&j->obj, i);
    }
    for (uint64_t k = i + 1; k < opened; k++)
        close(fds[k % LOAD_AHEAD]);
    if (rc) {
        drop_bad_block(dc, &j->obj, i, rc);
        return rc == -ENOENT ? -ENOENT : -EIO;
    }
    pthread_mutex_lock(&dc->lock);
    dc->st.hits += j->n;
    dc->st.hit_bytes += bytes;
    pthread_mutex_unlock(&dc->lock);
    return 0;
}

/* The direct buffers (om_dcache_direct_get) go back to the system once
 * none was lent for DIRECT_IDLE_MS: those not lent are taken out into
 * idle[*n] for the caller to free without the lock. Returns the ms until
 * the next look (a buffer still lent: DIRECT_IDLE_MS), 0 when no buffer
 * is held. Caller holds dc->lock. */
static uint64_t direct_trim(struct om_dcache *dc, char **idle, int *n)
{
    uint64_t since = om_now_ms() - dc->direct_lent_ms;
    bool held = false;
    for (int k = 0; k < DIRECT_BUFS; k++) {
        if (!dc->direct_bufs[k])
            continue;
        held = true;
        if (since >= DIRECT_IDLE_MS && !(dc->direct_busy & (1u << k))) {
            idle[(*n)++] = dc->direct_bufs[k];
            dc->direct_bufs[k] = NULL;
            dc->st.direct_buffer_bytes -= OM_DCACHE_DIRECT_SIZE;
        }
    }
    if (!held)
        return 0;
    return since < DIRECT_IDLE_MS ? DIRECT_IDLE_MS - since : DIRECT_IDLE_MS; /* lent: later */
}

static void *worker_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-dcache");
    struct om_dcache *dc = arg;
    pthread_mutex_lock(&dc->lock);
    for (;;) {
        struct job *j = NULL;
        if (dc->loads) {
            j = dc->loads;
            dc->loads = j->next;
            if (!dc->loads)
                dc->loads_tail = NULL;
        } else if (dc->stores) {
            j = dc->stores;
            dc->stores = j->next;
            if (!dc->stores)
                dc->stores_tail = NULL;
        } else if (dc->stopping) {
            break;
        } else {
            char *idle[DIRECT_BUFS];
            int nidle = 0;
            uint64_t due_ms = direct_trim(dc, idle, &nidle);
            if (nidle) {
                pthread_mutex_unlock(&dc->lock);
                for (int k = 0; k < nidle; k++)
                    free(idle[k]);
                pthread_mutex_lock(&dc->lock);
            } else if (due_ms) {
                struct timespec until;
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_sec += (time_t)(due_ms / 1000);
                until.tv_nsec += (long)(due_ms % 1000) * 1000000;
                if (until.tv_nsec >= 1000000000) {
                    until.tv_sec++;
                    until.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&dc->cond, &dc->lock, &until);
            } else {
                pthread_cond_wait(&dc->cond, &dc->lock);
            }
            continue;
        }
        pthread_mutex_unlock(&dc->lock);
        int rc = 0;
        if (j->kind == J_LOAD)
            rc = load_blocks(dc, j);
        else
            store_blocks(dc, j);
        j->done(j->ud, rc);
        free(j);
        pthread_mutex_lock(&dc->lock);
        dc->st.in_flight--;
        pthread_cond_broadcast(&dc->cond);
    }
    pthread_mutex_unlock(&dc->lock);
    return NULL;
}

static void submit(struct om_dcache *dc, struct job *j)
{
    pthread_mutex_lock(&dc->lock);
    struct job **head = j->kind == J_LOAD ? &dc->loads : &dc->stores;
    struct job **tail = j->kind == J_LOAD ? &dc->loads_tail : &dc->stores_tail;
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
    dc->st.in_flight++;
    pthread_cond_signal(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
}

/* ---- start: what is on disk ---- */

struct found {
    uint64_t key, index, bytes;
    unsigned char kh[16], eh[8];
    struct timespec mtime;
};

static int by_mtime(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return 0;
}

/* Temporary files of mounts that are gone. */
static void clean_tmp(struct om_dcache *dc)
{
    DIR *d = opendir(dc->tmp_dir);
    if (!d)
        return;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        long pid = strtol(e->d_name, NULL, 10);
        struct stat sb;
        bool dead = pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
        bool old = fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                   now - sb.st_mtime > 3600;
        if (pid != (long)getpid() && (dead || old))
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

/* Learn the blocks on disk (oldest first into the policy's LRU); removes
 * files that are not blocks. Returns their bytes. */
static uint64_t scan(struct om_dcache *dc)
{
    struct found *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0, strays = 0;
    for (int s = 0; s < 256; s++) {
        char *sub = NULL;
        if (asprintf(&sub, "%s/%02x", dc->dir, s) < 0)
            break;
        DIR *d = opendir(sub);
        free(sub);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            struct found f;
            struct stat sb;
            bool ok = parse_name(e->d_name, f.kh, f.eh, &f.index) &&
                      fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
                      S_ISREG(sb.st_mode) && sb.st_size > HDR;
            if (!ok) {
                strays += unlinkat(dirfd(d), e->d_name, 0) == 0;
                continue;
            }
            if (n == cap) {
                size_t c = cap ? cap * 2 : 1024;
                struct found *bigger = realloc(v, c * sizeof(*v));
                if (!bigger)
                    break;
                v = bigger;
                cap = c;
            }
            f.key = policy_key(f.kh, f.eh, f.index);
            f.bytes = (uint64_t)sb.st_size;
            f.mtime = sb.st_mtim;
            v[n++] = f;
            total += f.bytes;
        }
        closedir(d);
    }
    if (n)
        qsort(v, n, sizeof(*v), by_mtime);
    pthread_mutex_lock(&dc->lock);
    for (size_t i = 0; i < n; i++)
        name_add(dc, v[i].kh, v[i].eh, v[i].index, v[i].key, v[i].bytes);
    pthread_mutex_unlock(&dc->lock);
    free(v);
    if (strays)
        om_warn("data cache %s: removed %" PRIu64 " files that were not cache blocks", dc->dir,
                strays);
    return total;
}

/* Remove the least recently used blocks until the total fits limit. */
/* Evict the block the policy values least. Returns false when there is
 * none; *freed gets the bytes its file held (0 when there was none). */
static bool evict_one(struct om_dcache *dc, uint64_t *freed)
{
    pthread_mutex_lock(&dc->lock);
    uint64_t key, bytes;
    struct name x = {.index = UINT64_MAX};
    bool any = om_dpolicy_oldest(dc->policy, &key, &bytes);
    struct name *found = any ? name_find(dc, key) : NULL;
    if (found)
        x = *found;
    else if (any)
        om_dpolicy_remove(dc->policy, key);
    dc->st.evictions += found != NULL;
    pthread_mutex_unlock(&dc->lock);
    *freed = found ? remove_block(dc, x.kh, x.eh, x.index, x.key) : 0;
    return any;
}

uint64_t om_dcache_reclaim(struct om_dcache *dc, uint64_t bytes)
{
    uint64_t total = 0, freed;
    while (total < bytes && evict_one(dc, &freed))
        total += freed;
    uint64_t size = usage_add(dc, 0);
    pthread_mutex_lock(&dc->lock);
    dc->st.size_bytes = size;
    dc->st.reclaimed_bytes += total;
    dc->free_checked_ms = 0; /* look at the disk again before the next store */
    pthread_mutex_unlock(&dc->lock);
    if (total)
        om_debug("data cache: gave back %" PRIu64 " bytes for writes", total);
    return total;
}

static void trim_to_limit(struct om_dcache *dc)
{
    for (;;) {
        uint64_t total = usage_add(dc, 0);
        if (total <= dc->limit)
            break;
        uint64_t freed;
        if (!evict_one(dc, &freed))
            break;
    }
}

/* Make dir ours alone: created 0700, or an existing one owned by us with
 * its group and other bits cleared (said once). */
static int private_dir(const char *dir, char *err, size_t errlen)
{
    /* missing parents too (~/.cache on a fresh account), private as well */
    char *p = strdup(dir);
    for (char *s = p ? strchr(p + 1, '/') : NULL; s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            break;
        *s = '/';
    }
    free(p);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        snprintf(err, errlen, "%s is not a directory", dir);
        return -1;
    }
    if (sb.st_uid != geteuid()) {
        snprintf(err, errlen, "%s belongs to uid %u, not to this user (%u)", dir,
                 (unsigned)sb.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (sb.st_mode & 077) {
        if (chmod(dir, 0700) != 0) {
            snprintf(err, errlen, "%s is readable by other users (mode %03o) and cannot be made "
                     "private: %s", dir, (unsigned)(sb.st_mode & 0777), strerror(errno));
            return -1;
        }
        om_warn("data cache: %s was readable by other users (mode %03o): made private (0700)",
                dir, (unsigned)(sb.st_mode & 0777));
    }
    return 0;
}

struct om_dcache *om_dcache_new(const struct om_dcache_config *cfg, char *err, size_t errlen)
{
    struct om_dcache *dc = calloc(1, sizeof(*dc));
    if (!dc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    dc->usage_fd = -1;
    dc->min_free_space = cfg->min_free_space;
    dc->st.storing = true;
    dc->direct = true;
    pthread_mutex_init(&dc->lock, NULL);
    om_cond_init_monotonic(&dc->cond); /* the workers' timed waits (direct_trim) are monotonic */
    pthread_cond_init(&dc->verified_cond, NULL);
    dc->endpoint = strdup(cfg->endpoint ? cfg->endpoint : "");
    dc->bucket = strdup(cfg->bucket ? cfg->bucket : "");
    char *usage = NULL;
    if (!dc->endpoint || !dc->bucket || asprintf(&dc->dir, "%s/data", cfg->cache_dir) < 0 ||
        asprintf(&dc->tmp_dir, "%s/data/tmp", cfg->cache_dir) < 0 ||
        asprintf(&usage, "%s/data/usage", cfg->cache_dir) < 0 ||
        om_htable_init(&dc->names, 1024) || !(dc->policy = om_dpolicy_new(1024))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (private_dir(cfg->cache_dir, err, errlen) || private_dir(dc->dir, err, errlen) ||
        private_dir(dc->tmp_dir, err, errlen))
        goto fail;
    dc->usage_fd = open(usage, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (dc->usage_fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", usage, strerror(errno));
        goto fail;
    }
    free(usage);
    usage = NULL;
    clean_tmp(dc);
    uint64_t total = scan(dc);
    usage_set(dc, total);
    dc->limit = cfg->size;
    if (cfg->auto_size) {
        struct statvfs sv;
        if (statvfs(dc->dir, &sv) != 0) {
            snprintf(err, errlen, "cannot size the cache on %s: %s", dc->dir, strerror(errno));
            goto fail;
        }
        uint64_t fs_size = (uint64_t)sv.f_blocks * sv.f_frsize;
        /* writes before the cache: beside min_free_space, the cache leaves
         * an eighth of the filesystem (at most STAGING_RESERVE_MAX) to
         * staging, so that a checkpoint after an epoch finds room without
         * waiting for evictions (a write short of room evicts anyway) */
        uint64_t reserve = OM_MIN(fs_size / 8, STAGING_RESERVE_MAX);
        dc->min_free_space += reserve;
        uint64_t room = (uint64_t)sv.f_bavail * sv.f_frsize + total;
        room = room > dc->min_free_space ? room - dc->min_free_space : 0;
        dc->limit = OM_MIN(fs_size / 2, room);
        if (dc->limit < MIN_AUTO) {
            snprintf(err, errlen, "data_cache=auto: only %" PRIu64 " MiB could be used on the "
                     "filesystem of %s (half of it, above min_free_space and the staging "
                     "reserve): not enough",
                     dc->limit >> 20, dc->dir);
            goto fail;
        }
    }
    dc->st.limit_bytes = dc->limit;
    om_dpolicy_set_aging(dc->policy, OM_MAX(2 * (dc->limit / OM_DCACHE_BLOCK), (uint64_t)1024));
    trim_to_limit(dc);
    dc->st.size_bytes = usage_add(dc, 0);
    /* two slots per block of the bound, at least 2^14 (512 KiB), at most
     * 2^17 (4 MiB) */
    size_t nv = (size_t)1 << 14;
    while (nv < 2 * (dc->limit / OM_DCACHE_BLOCK) && nv < ((size_t)1 << 17))
        nv *= 2;
    if (!(dc->verified = calloc(nv, sizeof(*dc->verified)))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    dc->verified_mask = nv - 1;
    int want = cfg->threads > 0 ? cfg->threads : 4;
    for (int i = 0; i < want && i < 8; i++) {
        if (pthread_create(&dc->threads[i], NULL, worker_main, dc) != 0)
            break;
        dc->nthreads++;
    }
    if (!dc->nthreads) {
        snprintf(err, errlen, "cannot start the cache's threads");
        goto fail;
    }
    return dc;
fail:
    free(usage);
    om_dcache_free(dc);
    return NULL;
}

void om_dcache_free(struct om_dcache *dc)
{
    if (!dc)
        return;
    pthread_mutex_lock(&dc->lock);
    dc->stopping = true;
    pthread_cond_broadcast(&dc->cond);
    pthread_mutex_unlock(&dc->lock);
    for (int i = 0; i < dc->nthreads; i++)
        pthread_join(dc->threads[i], NULL);
    if (dc->names.buckets) {
        for (size_t b = 0; b < dc->names.nbuckets; b++) {
            struct om_hnode *n = dc->names.buckets[b];
            while (n) {
                struct om_hnode *next = n->next;
                free(om_container_of(n, struct name, node));
                n = next;
            }
        }
        om_htable_destroy(&dc->names);
    }
    om_dpolicy_free(dc->policy);
    free(dc->verified);
    for (int k = 0; k < DIRECT_BUFS; k++)
        free(dc->direct_bufs[k]);
    if (dc->usage_fd >= 0)
        close(dc->usage_fd);
    pthread_cond_destroy(&dc->cond);
    pthread_cond_destroy(&dc->verified_cond);
    pthread_mutex_destroy(&dc->lock);
    free(dc->dir);
    free(dc->tmp_dir);
    free(dc->endpoint);
    free(dc->bucket);
    free(dc);
}

/* ---- the reader's side ---- */

/* Is block i on disk although this mount did not know it (another mount
 * of the cache_dir stored it)? Then it is learnt. */
static bool learn(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i, uint64_t key)
{
    char *p = block_path(dc, o->kh, o->eh, i);
    struct stat sb;
    bool there = p && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) &&
                 (uint64_t)sb.st_size == HDR + block_len(o, i);
    free(p);
    if (there) {
        pthread_mutex_lock(&dc->lock);
        name_add(dc, o->kh, o->eh, i, key, (uint64_t)sb.st_size);
        pthread_mutex_unlock(&dc->lock);
    }
    return there;
}

static uint64_t run_of(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                       uint64_t max, bool *cached, bool count)
{
    uint64_t nblocks = om_dcache_blocks(o);
    uint64_t n = 0;
    for (uint64_t i = first; i < nblocks && n < max; i++, n++) {
        uint64_t key = policy_key(o->kh, o->eh, i);
        pthread_mutex_lock(&dc->lock);
        bool here = om_dpolicy_resident(dc->policy, key) && name_find(dc, key);
        pthread_mutex_unlock(&dc->lock);
        if (!here)
            here = learn(dc, o, i, key);
        if (n == 0)
            *cached = here;
        else if (here != *cached)
            break;
        if (!count)
            continue;
        pthread_mutex_lock(&dc->lock);
        om_dpolicy_access(dc->policy, key);
        pthread_mutex_unlock(&dc->lock);
    }
    return n;
}

uint64_t om_dcache_run(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                       uint64_t max, bool *cached)
{
    return run_of(dc, o, first, max, cached, true);
}

uint64_t om_dcache_peek(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                        uint64_t max, bool *cached)
{
    return run_of(dc, o, first, max, cached, false);
}

void om_dcache_put(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                   uint64_t n, const char *buf)
{
    pthread_mutex_lock(&dc->lock);
    bool storing = dc->st.storing;
    pthread_mutex_unlock(&dc->lock);
    struct job j = {.kind = J_STORE, .obj = *o, .first = first, .n = n, .buf = (char *)buf};
    if (storing)
        store_blocks(dc, &j);
}

/* The slot of key's set that holds it, else an empty one, else the one
 * key takes. Caller holds dc->lock. */
static struct verified *verified_slot(struct om_dcache *dc, uint64_t key)
{
    uint64_t h = om_hash_u64(key);
    struct verified *set = &dc->verified[h & dc->verified_mask & ~(uint64_t)(VERIFIED_WAYS - 1)];
    struct verified *empty = NULL;
    for (int w = 0; w < VERIFIED_WAYS; w++) {
        if (set[w].key == key)
            return &set[w];
        if (!empty && set[w].key == 0 && !set[w].busy)
            empty = &set[w];
    }
    return empty ? empty : &set[(h >> 32) % VERIFIED_WAYS];
}

/* Check block i's file in place (mapped, not copied): header and CRC32C. */
static int check_mapped(const struct om_dcache_obj *o, uint64_t i, int fd, uint64_t len)
{
    void *p = mmap(NULL, HDR + len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED)
        return -EBADMSG;
    struct hdr h;
    memcpy(&h, p, sizeof(h));
    int rc = block_good(o, i, &h, (const char *)p + HDR, len) ? 0 : -EBADMSG;
    munmap(p, HDR + len);
    return rc;
}

/* Open block i's file (flags as open_block) and check its size: an fd
 * and its stat, or -errno (the block dropped, unless -ENOMEM or -EINVAL). */
static int open_sized(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i, int flags,
                      struct stat *sb)
{
    int fd = open_block(dc, o, i, flags);
    if (fd < 0) {
        if (fd != -ENOMEM && fd != -EINVAL)
            drop_bad_block(dc, o, i, fd); /* forget it: the store has it */
        return fd;
    }
    if (fstat(fd, sb) != 0 || !S_ISREG(sb->st_mode) ||
        (uint64_t)sb->st_size != HDR + block_len(o, i)) {
        close(fd);
        drop_bad_block(dc, o, i, -EBADMSG);
        return -EBADMSG;
    }
    return fd;
}

/* Has this mount checked block key in file sb? true: nothing to do; else
 * *claim is the slot claimed for the caller's check (opens of the same
 * block wait for it), to be given to check_done. */
static bool checked_before(struct om_dcache *dc, uint64_t key, const struct stat *sb,
                           struct verified **claim)
{
    int64_t ctime_ns = (int64_t)sb->st_ctim.tv_sec * 1000000000 + sb->st_ctim.tv_nsec;
    pthread_mutex_lock(&dc->lock);
    struct verified *v;
    while ((v = verified_slot(dc, key))->busy && v->key == key)
        pthread_cond_wait(&dc->verified_cond, &dc->lock);
    bool known = v->key == key && v->ino == (uint64_t)sb->st_ino && v->ctime_ns == ctime_ns;
    if (!known)
        *v = (struct verified){
            .key = key, .ino = (uint64_t)sb->st_ino, .ctime_ns = ctime_ns, .busy = true};
    *claim = v;
    pthread_mutex_unlock(&dc->lock);
    return known;
}

/* The end of the check claimed in v: rc 0 (good), -EBADMSG (bad) or
 * another -errno (not made: unknown still). */
static void check_done(struct om_dcache *dc, struct verified *v, uint64_t key, int rc)
{
    pthread_mutex_lock(&dc->lock);
    if (rc == 0 || rc == -EBADMSG)
        dc->st.verified++;
    if (v->key == key && v->busy) { /* not taken by another block meanwhile */
        if (rc)
            *v = (struct verified){0};
        v->busy = false;
        pthread_cond_broadcast(&dc->verified_cond);
    }
    pthread_mutex_unlock(&dc->lock);
}

static void count_hit(struct om_dcache *dc, uint64_t len, bool direct)
{
    pthread_mutex_lock(&dc->lock);
    dc->st.hits++;
    dc->st.hit_bytes += len;
    if (direct)
        dc->st.direct_reads++;
    pthread_mutex_unlock(&dc->lock);
}

int om_dcache_open_block(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i,
                         uint64_t *data_off)
{
    uint64_t len = block_len(o, i);
    struct stat sb;
    int fd = open_sized(dc, o, i, 0, &sb);
    if (fd < 0)
        return fd;
    uint64_t key = policy_key(o->kh, o->eh, i);
    struct verified *v;
    if (!checked_before(dc, key, &sb, &v)) {
        int rc = check_mapped(o, i, fd, len);
        check_done(dc, v, key, rc);
        if (rc) {
            close(fd);
            drop_bad_block(dc, o, i, rc);
            return rc;
        }
    }
    count_hit(dc, len, false);
    *data_off = HDR;
    return fd;
}

/* ---- replies read with O_DIRECT ---- */

/* A buffer for direct reads, its first 2 MiB a huge page where the
 * kernel has one to give: the O_DIRECT read and the reply's write both
 * pin its pages, 256 small ones per MiB otherwise. */
static char *direct_buf_new(void)
{
    void *p = NULL;
    if (posix_memalign(&p, HUGE_ALIGN, OM_DCACHE_DIRECT_SIZE))
        return NULL;
    madvise(p, HUGE_ALIGN, MADV_HUGEPAGE);
    return p;
}

char *om_dcache_direct_get(struct om_dcache *dc)
{
    char *buf = NULL;
    pthread_mutex_lock(&dc->lock);
    for (int k = 0; dc->direct && !buf && k < DIRECT_BUFS; k++) {
        if (dc->direct_busy & (1u << k))
            continue;
        if (!dc->direct_bufs[k] && (dc->direct_bufs[k] = direct_buf_new())) {
            dc->st.direct_buffer_bytes += OM_DCACHE_DIRECT_SIZE;
            pthread_cond_broadcast(&dc->cond); /* idle workers time the buffers' idleness */
        }
        if ((buf = dc->direct_bufs[k])) {
            dc->direct_busy |= 1u << k;
            dc->direct_lent_ms = om_now_ms();
        }
    }
    pthread_mutex_unlock(&dc->lock);
    return buf;
}

void om_dcache_direct_put(struct om_dcache *dc, char *buf)
{
    pthread_mutex_lock(&dc->lock);
    for (int k = 0; k < DIRECT_BUFS; k++) {
        if (dc->direct_bufs[k] == buf)
            dc->direct_busy &= ~(1u << k);
    }
    pthread_mutex_unlock(&dc->lock);
}

/* The cache's filesystem refused O_DIRECT (errno err): replies are read
 * through the page cache from now on. */
static void direct_refused(struct om_dcache *dc, int err)
{
    pthread_mutex_lock(&dc->lock);
    bool was = dc->direct;
    dc->direct = false;
    pthread_mutex_unlock(&dc->lock);
    if (was)
        om_info("data cache: %s refuses O_DIRECT reads (%s): replies are read through the "
                "page cache",
                dc->dir, strerror(err));
}

static uint64_t align_down(uint64_t x)
{
    return x & ~(uint64_t)(DIRECT_ALIGN - 1);
}

static uint64_t align_up(uint64_t x)
{
    return align_down(x + DIRECT_ALIGN - 1);
}

int om_dcache_read_direct(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i,
                          uint64_t off, size_t n, char *room, const char **data)
{
    uint64_t len = block_len(o, i);
    if (off + n > len)
        return -EINVAL;
    struct stat sb;
    int fd = open_sized(dc, o, i, O_DIRECT, &sb);
    if (fd == -EINVAL)
        direct_refused(dc, EINVAL);
    if (fd < 0)
        return fd == -EINVAL ? -EOPNOTSUPP : fd;
    uint64_t key = policy_key(o->kh, o->eh, i);
    struct verified *v;
    bool known = checked_before(dc, key, &sb, &v);
    /* a block not checked by this mount is read whole and checked in the
     * buffer it is replied from: one read from disk, not a check's and a
     * reply's */
    uint64_t from = known ? align_down(HDR + off) : 0;
    uint64_t need = (known ? HDR + off + n : HDR + len) - from;
    ssize_t got = pread(fd, room, align_up(from + need) - from, (off_t)from);
    int err = errno;
    close(fd);
    int rc = got >= (ssize_t)need ? 0 : got >= 0 ? -EBADMSG : err == EINVAL ? -EOPNOTSUPP : -EIO;
    if (!rc && !known) {
        struct hdr h;
        memcpy(&h, room, sizeof(h));
        rc = block_good(o, i, &h, room + HDR, len) ? 0 : -EBADMSG;
    }
    if (!known)
        check_done(dc, v, key, rc);
    if (rc == -EOPNOTSUPP)
        direct_refused(dc, err);
    if (rc == -EBADMSG)
        drop_bad_block(dc, o, i, rc);
    if (rc)
        return rc;
    count_hit(dc, len, true);
    *data = room + (HDR + off - from);
    return 0;
}

void om_dcache_advise(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t n)
{
    pthread_mutex_lock(&dc->lock);
    bool direct = dc->direct;
    pthread_mutex_unlock(&dc->lock);
    /* its reads will bypass the page cache (om_dcache_read_direct): pages
     * read ahead there would be read twice from disk and never used */
    if (direct && o->size >= OM_DCACHE_DIRECT_MIN)
        return;
    for (uint64_t i = 0; i < n; i++) {
        int fd = open_block(dc, o, i, 0);
        if (fd < 0)
            return;
        posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
        close(fd);
    }
}

int om_dcache_load(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                   uint64_t n, char *buf, om_dcache_done_fn *done, void *ud)
{
    struct job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct job){.kind = J_LOAD, .obj = *o, .first = first, .n = n, .buf = buf,
                      .done = done, .ud = ud};
    submit(dc, j);
    return 0;
}

bool om_dcache_store(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                     uint64_t n, const char *buf, om_dcache_done_fn *done, void *ud)
{
    pthread_mutex_lock(&dc->lock);
    bool storing = dc->st.storing;
    pthread_mutex_unlock(&dc->lock);
    struct job *j = storing && n ? calloc(1, sizeof(*j)) : NULL;
    if (!j)
        return false;
    *j = (struct job){.kind = J_STORE, .obj = *o, .first = first, .n = n, .buf = (char *)buf,
                      .done = done, .ud = ud};
    submit(dc, j);
    return true;
}

void om_dcache_count_miss(struct om_dcache *dc, uint64_t blocks, uint64_t bytes)
{
    pthread_mutex_lock(&dc->lock);
    dc->st.misses += blocks;
    dc->st.miss_bytes += bytes;
    pthread_mutex_unlock(&dc->lock);
}

/* ---- objmountctl cache drop ---- */

static long drop_dir(struct om_dcache *dc, const char *sub, const char *prefix)
{
    DIR *d = opendir(sub);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    long removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        unsigned char kh[16], eh[8];
        uint64_t index;
        if (!parse_name(e->d_name, kh, eh, &index) ||
            (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0))
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
            unlinkat(dirfd(d), e->d_name, 0) == 0) {
            usage_add(dc, -(int64_t)sb.st_size);
            removed++;
        }
        uint64_t key = policy_key(kh, eh, index);
        pthread_mutex_lock(&dc->lock);
        om_dpolicy_remove(dc->policy, key);
        name_forget(dc, key);
        pthread_mutex_unlock(&dc->lock);
    }
    closedir(d);
    return removed;
}

long om_dcache_drop(struct om_dcache *dc, const char *key)
{
    if (key) {
        struct om_dcache_obj o;
        if (!om_dcache_obj_init(dc, key, "-", 0, &o))
            return -ENOMEM;
        char khx[33];
        om_hex(o.kh, 16, khx);
        khx[32] = '\0';
        char *sub = NULL;
        if (asprintf(&sub, "%s/%.2s", dc->dir, khx) < 0)
            return -ENOMEM;
        char prefix[34];
        snprintf(prefix, sizeof(prefix), "%s.", khx);
        long n = drop_dir(dc, sub, prefix);
        free(sub);
        return n;
    }
    long total = 0;
    for (int s = 0; s < 256; s++) {
        char *sub = NULL;
        if (asprintf(&sub, "%s/%02x", dc->dir, s) < 0)
            return -ENOMEM;
        long n = drop_dir(dc, sub, NULL);
        free(sub);
        if (n < 0)
            return n;
        total += n;
    }
    return total;
}

void om_dcache_get_stats(struct om_dcache *dc, struct om_dcache_stats *out)
{
    uint64_t total = usage_add(dc, 0);
    struct om_dpolicy_stats ps;
    pthread_mutex_lock(&dc->lock);
    dc->st.size_bytes = total;
    om_dpolicy_get_stats(dc->policy, &ps);
    *out = dc->st;
    out->blocks = ps.resident;
    pthread_mutex_unlock(&dc->lock);
}
