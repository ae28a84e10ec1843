/* FUSE low-level callbacks: translate, call meta/reader, reply exactly once. */
#include "objmount/fs.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>
#include <time.h>

#include "objmount/dcache.h"
#include "objmount/log.h"

/* An open file: a reader (created on the first read that goes to the
 * object) and, when opened for writing, the inode's writer. */
struct fh {
    uint64_t ino;
    struct om_reader *reader;
    struct om_writer *writer;
    /* who opened it for writing: a FLUSH from another process (a child
     * holding an inherited descriptor) does not commit (flush_policy.h) */
    pid_t open_pid, open_tgid;
    char *key;
    uint64_t size;
    char etag[OM_ETAG_MAX];
    bool gone_told; /* the object vanished or changed while open: said once */
    struct om_shard_file *member; /* a member of a shard (shards=tar): no reader, no meta */
};

static void fh_free(struct om_fs *fs, struct fh *h)
{
    if (h->member) {
        om_shards_close(fs->shards, h->member);
        free(h);
        return;
    }
    if (h->reader)
        om_reader_close(h->reader);
    if (h->writer)
        om_writer_release(h->writer);
    om_meta_close(fs->meta, h->ino);
    free(h->key);
    free(h);
}

static struct om_fs *fs_of(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

/* Errors a caller can act on pass through; the rest become EIO. */
static int user_errno(int err)
{
    switch (err) {
    case ENOENT:
    case EACCES:
    case EPERM:
    case ENOTDIR:
    case EISDIR:
    case ENAMETOOLONG:
    case ENOMEM:
    case EROFS:
    case ENOSPC:
    case EEXIST:
    case ENOTEMPTY:
    case EINVAL:
    case EFBIG:
    case ESTALE:
    case EINTR:
    case ENOTSUP:
    case EXDEV:
    case EBUSY:
    case ENODATA:
    case ERANGE:
    case ENOSYS:
        return err;
    default:
        return EIO;
    }
}

static void reply_error(fuse_req_t req, int neg)
{
    fuse_reply_err(req, user_errno(-neg));
}

static void fill_entry(struct om_fs *fs, const struct om_attr *a, struct fuse_entry_param *e)
{
    memset(e, 0, sizeof(*e));
    e->ino = a->ino;
    om_attr_to_stat(a, &e->attr);
    if (!a->ino) {
        /* a readdirplus entry without attributes: the kernel looks it up. Its
         * d_ino must not be 0, which readdir(3) skips as a deleted entry. */
        e->attr.st_ino = 0xffffffff; /* FUSE_UNKNOWN_INO */
        return;
    }
    e->generation = 1;
    e->attr_timeout = fs->attr_timeout;
    e->entry_timeout = fs->entry_timeout;
}

/* Metadata set while a file is open shows at once (as meta would show it
 * once committed). */
static void overlay_meta(struct om_fs *fs, const struct om_file_meta *m, struct om_attr *a)
{
    if (m->has_mode && !om_config_is_set(fs->cfg, "file_mode") &&
        !om_config_is_set(fs->cfg, "umask"))
        a->mode = (mode_t)(S_IFREG | (m->mode & 07777));
    if (m->has_uid && !om_config_is_set(fs->cfg, "uid"))
        a->uid = m->uid;
    if (m->has_gid && !om_config_is_set(fs->cfg, "gid"))
        a->gid = m->gid;
}

/* An open writer's size, mtime and pending metadata over meta's attributes
 * of the same inode: what stat, lookup and readdirplus show while a file is
 * open for writing (the stored object's attributes are older). A writer
 * whose write failed is not shown: nothing of it will be stored, and the
 * next open starts from the stored object. */
static void overlay_writer(struct om_fs *fs, struct om_attr *a)
{
    struct om_writer *w = a->ino ? om_writer_find(fs->writers, a->ino) : NULL;
    if (!w)
        return;
    if (om_writer_failed(w)) {
        om_writer_release(w);
        return;
    }
    struct om_file_meta m;
    om_writer_attr(w, &a->size, &a->mtime);
    om_writer_get_meta(w, &m);
    overlay_meta(fs, &m, a);
    om_writer_release(w);
}

/* ---- shards=tar: shards as directories (shards.h) ---- */

/* ino is inside a shard: a member, or a shard's own directory. */
static bool in_shard(struct om_fs *fs, fuse_ino_t ino)
{
    return fs->shards && om_shards_owns(fs->shards, ino);
}

/* A write inside a shard directory: EROFS, counted and logged. */
static bool refuse_in_shard(fuse_req_t req, struct om_fs *fs, const char *what, fuse_ino_t ino)
{
    if (!in_shard(fs, ino))
        return false;
    om_shards_refused(fs->shards, what, ino);
    fuse_reply_err(req, EROFS);
    return true;
}

/* A file named like a shard (or already shown as one) is shown as its
 * directory when its index can be had; *a becomes the directory's. */
static void shard_view(struct om_fs *fs, const char *name, struct om_attr *a)
{
    if (!fs->shards || !S_ISREG(a->mode))
        return;
    if (!(name ? om_shards_name(name) : om_shards_is_dir(fs->shards, a->ino, NULL)))
        return;
    char *key = NULL;
    struct om_attr cur;
    if (om_meta_key(fs->meta, a->ino, &key, &cur))
        return;
    const char *base = strrchr(key, '/');
    struct om_attr dir;
    if (om_shards_name(base ? base + 1 : key) && om_shards_attach(fs->shards, key, a, &dir) == 0)
        *a = dir;
    free(key);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct om_fs *fs = userdata;
    /* ATOMIC_O_TRUNC: O_TRUNC reaches open, where the writer tells the
     * open's truncation from a program's own (ftruncate), which the kernel
     * would otherwise send as the same SETATTR */
    unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_READDIRPLUS | FUSE_CAP_PARALLEL_DIROPS |
                    FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_ATOMIC_O_TRUNC |
                    FUSE_CAP_IOCTL_DIR | FUSE_CAP_SPLICE_WRITE;
    conn->want |= conn->capable & want;
    conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
    fs->parallel_dirops = (conn->want & FUSE_CAP_PARALLEL_DIROPS) != 0;
    conn->max_readahead = (unsigned)fs->cfg->max_readahead;
    conn->max_write = 1u << 20;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    om_info("FUSE protocol %u.%u, max_readahead %u, max_write %u, capable 0x%x, want 0x%x",
            conn->proto_major, conn->proto_minor, conn->max_readahead, conn->max_write,
            conn->capable, conn->want);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct om_fs *fs = fs_of(req);
    struct om_attr a;
    bool shard = in_shard(fs, parent);
    int rc = shard ? om_shards_lookup(fs->shards, parent, name, &a)
                   : om_meta_lookup(fs->meta, parent, name, &a);
    struct fuse_entry_param e;
    if (rc == -ENOENT) {
        /* a negative entry: the kernel remembers the miss */
        memset(&e, 0, sizeof(e));
        e.entry_timeout = fs->negative_timeout;
        fuse_reply_entry(req, &e);
        return;
    }
    if (rc)
        return reply_error(req, rc);
    if (!shard) {
        overlay_writer(fs, &a);
        shard_view(fs, name, &a);
    }
    fill_entry(fs, &a, &e);
    fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    if (!om_shards_member_ino(ino)) /* members' numbers need no forget */
        om_meta_forget(fs_of(req)->meta, ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct om_fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        if (!om_shards_member_ino(forgets[i].ino))
            om_meta_forget(fs->meta, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

static void reply_open_fh(fuse_req_t req, struct om_fs *fs, struct fh *h,
                          struct fuse_file_info *fi)
{
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) == -ENOENT)
        fh_free(fs, h); /* the opener was interrupted: nobody will release it */
}

/* The process that opens h for writing (req NULL: none, truncate(2)). */
static void note_opener(struct fh *h, fuse_req_t req)
{
    h->open_pid = req ? fuse_req_ctx(req)->pid : 0;
    h->open_tgid = om_tgid_of(h->open_pid);
}

/* Who sends a FLUSH of h, compared with its opener. */
static enum om_flusher flusher_of(const struct fh *h, pid_t pid)
{
    if (!pid || !h->open_pid)
        return OM_FLUSHER_UNKNOWN; /* outside our pid namespace: cannot tell */
    if (pid == h->open_pid)
        return OM_FLUSHER_OPENER;
    pid_t tgid = om_tgid_of(pid);
    pid_t opener = h->open_tgid ? h->open_tgid : h->open_pid;
    return tgid && tgid == opener ? OM_FLUSHER_OPENER : OM_FLUSHER_OTHER;
}

/* Start (or join) the inode's writer. Caller holds a meta reference. */
static int open_writer(struct om_fs *fs, struct fh *h, bool trunc)
{
    char *key = NULL;
    bool exists = false;
    struct om_object obj;
    int rc = om_meta_object(fs->meta, h->ino, &key, &exists, &obj);
    if (rc)
        return rc;
    struct om_writer_base base = {.exists = exists, .size = obj.size};
    om_strlcpy(base.etag, obj.etag, sizeof(base.etag));
    base.meta.has_mode = obj.has_mode;
    base.meta.mode = obj.mode;
    base.meta.has_uid = obj.has_uid;
    base.meta.uid = obj.uid;
    base.meta.has_gid = obj.has_gid;
    base.meta.gid = obj.gid;
    rc = om_writer_open(fs->writers, h->ino, key, &base, trunc, &h->writer);
    free(key);
    return rc;
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    bool write = (fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC);
    if (write && fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (write && refuse_in_shard(req, fs, "open for writing", ino))
        return;
    struct fh *h = calloc(1, sizeof(*h));
    if (!h)
        return (void)fuse_reply_err(req, ENOMEM);
    h->ino = ino;
    if (fs->shards && om_shards_member_ino(ino)) {
        int mrc = om_shards_open(fs->shards, ino, &h->member);
        if (mrc) {
            free(h);
            return reply_error(req, mrc);
        }
        fi->keep_cache = om_shards_keep_cache(fs->shards);
        return reply_open_fh(req, fs, h, fi);
    }
    struct om_attr a;
    bool keep = false;
    int rc = om_meta_open(fs->meta, ino, fs->cfg->keep_cache, &h->key, &a, &keep);
    if (rc) {
        free(h);
        return reply_error(req, rc);
    }
    h->size = a.size;
    om_strlcpy(h->etag, a.etag, sizeof(h->etag));
    if (write) {
        note_opener(h, req);
        rc = open_writer(fs, h, (fi->flags & O_TRUNC) != 0);
        if (rc) {
            fh_free(fs, h);
            return reply_error(req, rc);
        }
        keep = false;
    }
    fi->keep_cache = keep;
    if (!write) {
        /* the next files of this reader's order start coming now */
        const struct fuse_ctx *ctx = fuse_req_ctx(req);
        om_prefetch_opened(fs->prefetch, ctx->pid, ctx->uid, ino, h->key);
    }
    reply_open_fh(req, fs, h, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "create", parent))
        return;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct om_attr a;
    char *key = NULL;
    int rc = om_ns_name_refused(fs->ns, name);
    if (!rc)
        rc = om_meta_create(fs->meta, parent, name, mode, ctx->uid, ctx->gid, &a, &key);
    if (rc)
        return reply_error(req, rc);
    struct fh *h = calloc(1, sizeof(*h));
    if (!h) {
        free(key);
        om_meta_forget(fs->meta, a.ino, 1);
        return (void)fuse_reply_err(req, ENOMEM);
    }
    h->ino = a.ino;
    h->key = key;
    /* the handle's reference on the inode, released by fh_free */
    char *k2 = NULL;
    struct om_attr a2;
    bool keep;
    rc = om_meta_open(fs->meta, a.ino, false, &k2, &a2, &keep);
    free(k2);
    note_opener(h, req);
    if (rc) {
        free(h->key);
        free(h);
    } else if ((rc = open_writer(fs, h, true)) != 0) {
        fh_free(fs, h);
    }
    if (rc) {
        om_meta_forget(fs->meta, a.ino, 1);
        return reply_error(req, rc);
    }
    struct fuse_entry_param e;
    fill_entry(fs, &a, &e);
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->keep_cache = 0;
    if (fuse_reply_create(req, &e, fi) == -ENOENT)
        fh_free(fs, h);
}

/* The writer that holds ino's bytes, if any (counted; release it). */
static struct om_writer *writer_with_data(struct om_fs *fs, struct fh *h)
{
    struct om_writer *w = om_writer_find(fs->writers, h ? h->ino : 0);
    if (w && !om_writer_holds_data(w)) {
        om_writer_release(w);
        return NULL;
    }
    return w;
}

/* Reply with iovecs straight from the pool's buffers: no copy, no
 * per-read allocation. */
static void reply_view(fuse_req_t req, const struct om_read_view *v)
{
    if (v->ndirect > 0)
        return (void)fuse_reply_iov(req, v->direct, v->ndirect);
    if (v->nfd > 0) {
        /* straight from the data cache's block files (reads shorter than
         * OM_DCACHE_DIRECT_MIN, or a cache_dir without O_DIRECT): spliced,
         * not copied through memory, when the reply fits libfuse's pipe
         * with a page to spare per buffer; a pipe grows to pipe-max-size
         * (1 MiB) without CAP_SYS_RESOURCE, so a 1 MiB read is read into a
         * buffer and written from it (decisions.md, "Wholly cached
         * objects") */
        struct fuse_bufvec one = FUSE_BUFVEC_INIT(0), *bv = &one;
        if (v->nfd > 1 && !(bv = calloc(1, sizeof(*bv) + sizeof(bv->buf[0]))))
            return (void)fuse_reply_err(req, ENOMEM);
        bv->count = (size_t)v->nfd;
        bv->idx = 0;
        bv->off = 0;
        for (int k = 0; k < v->nfd; k++) {
            bv->buf[k] = (struct fuse_buf){.size = v->fd_len[k],
                                           .flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK,
                                           .fd = v->fd[k],
                                           .pos = (off_t)v->fd_off[k]};
        }
        fuse_reply_data(req, bv, 0);
        if (bv != &one)
            free(bv);
        return;
    }
    struct fuse_bufvec one = FUSE_BUFVEC_INIT(0), *bv = &one;
    if (v->n > 1) {
        bv = calloc(1, sizeof(*bv) + (size_t)(v->n - 1) * sizeof(bv->buf[0]));
        if (!bv)
            return (void)fuse_reply_err(req, ENOMEM);
    }
    bv->count = (size_t)(v->n > 0 ? v->n : 1);
    bv->idx = 0;
    bv->off = 0;
    for (int i = 0; i < v->n; i++) {
        bv->buf[i] = (struct fuse_buf){
            .size = v->iov[i].iov_len, .flags = 0, .mem = v->iov[i].iov_base, .fd = -1};
    }
    fuse_reply_data(req, bv, FUSE_BUF_NO_SPLICE);
    if (bv != &one)
        free(bv);
}

/* The handle's reader, made by its first read. The kernel sends several
 * reads of one handle at once (readahead, ASYNC_READ): the first reader
 * installed wins and the others are closed, where two reads used to
 * install one each and the loser was never closed (an idle mount kept
 * "open readers" and their buffers). NULL on ENOMEM. */
static struct om_reader *handle_reader(struct om_fs *fs, struct fh *h)
{
    struct om_reader *r = __atomic_load_n(&h->reader, __ATOMIC_ACQUIRE);
    if (r)
        return r;
    struct om_reader *mine = om_reader_open(fs->readers, h->key, h->size, h->etag);
    if (!mine)
        return NULL;
    if (!h->etag[0]) { /* a version learned by a HEAD: the next open needs none */
        char v[OM_ETAG_MAX];
        om_reader_version(mine, v);
        om_meta_learned_version(fs->meta, h->ino, h->size, v);
    }
    struct om_reader *none = NULL;
    if (__atomic_compare_exchange_n(&h->reader, &none, mine, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return mine;
    om_reader_close(mine);
    return none; /* the one another read installed */
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct om_fs *fs = fs_of(req);
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (h->member) {
        char *buf = malloc(size ? size : 1);
        ssize_t n = buf ? om_shards_read(fs->shards, h->member, fuse_req_ctx(req)->pid, buf, size,
                                         (uint64_t)off)
                        : -ENOMEM;
        if (n < 0)
            reply_error(req, (int)n);
        else
            fuse_reply_buf(req, buf, (size_t)n);
        free(buf);
        return;
    }
    struct om_writer *w = writer_with_data(fs, h);
    if (w) {
        /* read-your-writes: the staging file holds the bytes */
        char *buf = malloc(size ? size : 1);
        ssize_t n = buf ? om_writer_read(w, buf, size, (uint64_t)off) : -ENOMEM;
        om_writer_release(w);
        if (n >= 0)
            fuse_reply_buf(req, buf, (size_t)n);
        free(buf);
        if (n >= 0)
            return;
        if (n != -EAGAIN)
            return reply_error(req, (int)n);
    }
    /* Once the reply is out the kernel may release the file at once: h can be
     * freed under us. The reader survives until its view is done (close
     * waits for views), so only r is used after replying. */
    struct om_reader *r = handle_reader(fs, h);
    if (!r)
        return (void)fuse_reply_err(req, ENOMEM);
    struct om_read_view v;
    ssize_t n = om_reader_view(r, size, (uint64_t)off, &v);
    if (n == -ESTALE) {
        /* the object changed under this open: EIO here, and the next open
         * looks at the object again instead of trusting cached attributes
         * (a manifest's attributes stay: its version is the only one read) */
        om_meta_expire(fs->meta, h->ino);
        if (fs->manifest && !h->gone_told) {
            om_warn("read %s: the object changed since the manifest was built (EIO until the "
                    "manifest is rebuilt)",
                    h->key);
            h->gone_told = true;
        }
        n = -EIO;
    } else if (n == -ENOENT) {
        if (!h->gone_told)
            om_warn("read %s: the object is gone (%s): what is not in memory cannot be read "
                    "(EIO)",
                    h->key,
                    fs->manifest ? "deleted since the manifest was built"
                                 : "unlinked through this mount or removed by another client "
                                   "while open");
        h->gone_told = true;
        n = -EIO;
    }
    if (n < 0)
        return reply_error(req, (int)n);
    if (n == 0)
        return (void)fuse_reply_buf(req, NULL, 0);
    reply_view(req, &v);
    om_reader_view_done(r, &v);
}

/* A write or truncate of w failed: stat shows the stored object again
 * (overlay_writer), so the kernel must ask rather than keep, for
 * attr_timeout, the size an earlier truncate's or write's reply gave it
 * (omfsx -P: ftruncate, a failed pwrite, close, open, fstat showed the
 * truncated size). Attributes only: the kernel takes no lock for that, so
 * it is safe from a callback. */
static void forget_failed_size(struct om_fs *fs, fuse_ino_t ino, struct om_writer *w)
{
    if (!om_writer_failed(w) || __atomic_load_n(&fs->notify_off, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&fs->se_lock);
    if (fs->se && !__atomic_load_n(&fs->notify_off, __ATOMIC_ACQUIRE))
        fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
    pthread_mutex_unlock(&fs->se_lock);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    if (!h->writer)
        return (void)fuse_reply_err(req, EBADF);
    ssize_t n = om_writer_write(h->writer, buf, size, (uint64_t)off);
    if (n < 0) {
        forget_failed_size(fs, ino, h->writer);
        return reply_error(req, (int)n);
    }
    fuse_reply_write(req, (size_t)n);
}

/* Every commit of an open file tells meta what is stored now (the writers
 * call this before the file can leave their table). */
static void committed(void *ud, uint64_t ino, const struct om_commit_result *res)
{
    struct om_fs *fs = ud;
    if (!res->stored)
        return; /* nothing stored: the inode keeps the object's attributes */
    struct om_object obj;
    memset(&obj, 0, sizeof(obj));
    obj.size = res->size;
    obj.mtime = res->mtime.tv_sec;
    obj.has_mtime = true;
    obj.meta_mtime = res->mtime;
    om_strlcpy(obj.etag, res->etag, sizeof(obj.etag));
    obj.has_mode = res->meta.has_mode;
    obj.mode = (uint32_t)res->meta.mode;
    obj.has_uid = res->meta.has_uid;
    obj.uid = res->meta.uid;
    obj.has_gid = res->meta.has_gid;
    obj.gid = res->meta.gid;
    om_meta_committed(fs->meta, ino, &obj);
}

struct forget_entry {
    struct om_fs *fs;
    uint64_t parent;
    char *name;
};

static int inval_entry(void *ud, uint64_t parent, const char *name, size_t len);

static void *forget_entry_run(void *p)
{
    struct forget_entry *f = p;
    inval_entry(f->fs, f->parent, f->name, strlen(f->name));
    free(f->name);
    free(f);
    return NULL;
}

/* The server refused a file's key for a name clash: meta drops what only
 * this mount knew, and the kernel is told to forget the name, from a
 * thread of its own (never from a callback: the kernel may hold the
 * directory's lock for a request that waits on us). */
static void refused(void *ud, uint64_t ino, int err)
{
    struct om_fs *fs = ud;
    struct forget_entry *f = calloc(1, sizeof(*f));
    if (!f || om_meta_refused(fs->meta, ino, &f->parent, &f->name) != 0) {
        free(f);
        return;
    }
    om_warn("%s: the server holds %s under that name (another client stored it); the mount "
            "shows it now",
            f->name, err == -EEXIST ? "a directory" : "a file");
    f->fs = fs;
    pthread_t t;
    if (pthread_create(&t, NULL, forget_entry_run, f) == 0) {
        pthread_detach(t);
    } else {
        free(f->name);
        free(f);
    }
}

/* A close() of one descriptor: commits only when the writer is done, as
 * flush_policy.h says (a dup2's close, a child's exit do not). */
static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    int rc = 0;
    if (h->writer)
        rc = om_writer_flush(h->writer, flusher_of(h, fuse_req_ctx(req)->pid));
    fuse_reply_err(req, rc ? user_errno(-rc) : 0);
}

/* fsync and fdatasync: everything pending is committed, whoever asks. */
static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino, (void)datasync;
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    int rc = h->writer ? om_writer_commit(h->writer, NULL) : 0;
    fuse_reply_err(req, rc ? user_errno(-rc) : 0);
}

/* What stat shows: meta's attributes, with size, mtime and metadata from an
 * open writer. */
static int attributes(struct om_fs *fs, fuse_ino_t ino, struct stat *st)
{
    struct om_attr a;
    if (fs->shards && om_shards_member_ino(ino)) {
        int src = om_shards_getattr(fs->shards, ino, &a);
        if (!src)
            om_attr_to_stat(&a, st);
        return src;
    }
    int rc = om_meta_getattr(fs->meta, ino, &a);
    if (rc == -ENOENT) {
        /* deleted behind the mount while we write it: the writer's file */
        struct om_writer *w = om_writer_find(fs->writers, ino);
        if (w) {
            rc = om_meta_getattr_cached(fs->meta, ino, &a);
            om_writer_release(w);
        }
    }
    if (rc)
        return rc;
    overlay_writer(fs, &a);
    shard_view(fs, NULL, &a);
    om_attr_to_stat(&a, st);
    return 0;
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct om_fs *fs = fs_of(req);
    struct stat st;
    int rc = attributes(fs, ino, &st);
    if (rc)
        return reply_error(req, rc);
    fuse_reply_attr(req, &st, fs->attr_timeout);
}

/* chmod, chown and utimens: carried by the open writer's next commit, or
 * stored now by copying the object onto itself with new metadata. */
static int set_metadata(struct om_fs *fs, fuse_ino_t ino, const struct stat *attr, int to_set)
{
    char *key = NULL;
    bool exists;
    struct om_object obj;
    struct om_attr now;
    int rc = om_meta_key(fs->meta, ino, &key, &now);
    free(key);
    key = NULL;
    if (rc)
        return rc;
    mode_t type = now.mode & S_IFMT;
    if (S_ISDIR(type)) {
        /* the marker is written whole: what it holds besides the change
         * (a chmod after tar's utime lost the directory's time) */
        memset(&obj, 0, sizeof(obj));
        obj.has_mtime = om_meta_dir_own_mtime(fs->meta, ino, &obj.meta_mtime);
    } else if ((rc = om_meta_object(fs->meta, ino, &key, &exists, &obj)) != 0) {
        return rc;
    }
    struct om_writer *w = S_ISDIR(type) ? NULL : om_writer_find(fs->writers, ino);
    struct om_file_meta m = {.has_mode = true, .mode = now.mode, .has_uid = true,
                             .uid = now.uid, .has_gid = true, .gid = now.gid,
                             .has_mtime = obj.has_mtime, .mtime = obj.meta_mtime};
    if (w)
        om_writer_get_meta(w, &m); /* changes made while open, not stored yet */
    om_debug("setattr ino %lu: to_set %#x, %s", (unsigned long)ino, to_set,
             w ? "open for writing" : "stored now");
    if (to_set & FUSE_SET_ATTR_MODE) {
        m.has_mode = true;
        m.mode = type | (attr->st_mode & 07777);
    }
    if (to_set & FUSE_SET_ATTR_UID) {
        m.has_uid = true;
        m.uid = attr->st_uid;
    }
    if (to_set & FUSE_SET_ATTR_GID) {
        m.has_gid = true;
        m.gid = attr->st_gid;
    }
    if (to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW)) {
        m.has_mtime = true;
        if (to_set & FUSE_SET_ATTR_MTIME_NOW)
            clock_gettime(CLOCK_REALTIME, &m.mtime);
        else
            m.mtime = attr->st_mtim;
    }
    if (S_ISDIR(type)) {
        rc = om_ns_dir_setattr(fs->ns, ino, &m);
    } else {
        if (w) {
            om_writer_set_meta(w, &m);
            om_writer_release(w);
        }
        /* not open for writing, or a store that keeps no metadata (then
         * the mount holds it, for after the close too) */
        if (exists && (!w || !om_writers_keep_meta(fs->writers))) {
            rc = om_writer_store_meta(fs->writers, key, obj.etag, obj.size, &m, &obj);
            if (!rc)
                om_meta_committed(fs->meta, ino, &obj);
        }
    }
    free(key);
    return rc;
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    if (refuse_in_shard(req, fs, "setattr (chmod, chown, truncate or utime)", ino))
        return;
    int meta_bits = FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                    FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW;
    int rc = 0;
    if (fs->cfg->ro && (to_set & (meta_bits | FUSE_SET_ATTR_SIZE)))
        return (void)fuse_reply_err(req, EROFS);
    if (to_set & FUSE_SET_ATTR_SIZE) {
        struct fh *h = fi ? (struct fh *)(uintptr_t)fi->fh : NULL;
        if (h && h->writer) {
            rc = om_writer_truncate(h->writer, (uint64_t)attr->st_size);
            if (rc)
                forget_failed_size(fs, ino, h->writer);
        } else {
            /* truncate(2) on a path: a writer just for this, committed now */
            struct fh tmp = {.ino = ino};
            rc = open_writer(fs, &tmp, attr->st_size == 0);
            if (!rc)
                rc = om_writer_truncate(tmp.writer, (uint64_t)attr->st_size);
            if (!rc)
                rc = om_writer_commit(tmp.writer, NULL);
            if (tmp.writer)
                om_writer_release(tmp.writer);
        }
    }
    if (!rc && (to_set & meta_bits))
        rc = set_metadata(fs, ino, attr, to_set);
    if (rc)
        return reply_error(req, rc);
    struct stat st;
    rc = attributes(fs, ino, &st);
    if (rc)
        return reply_error(req, rc);
    fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    fh_free(fs_of(req), (struct fh *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void reply_entry(fuse_req_t req, struct om_fs *fs, int rc, const struct om_attr *a)
{
    if (rc)
        return reply_error(req, rc);
    struct fuse_entry_param e;
    fill_entry(fs, a, &e);
    fuse_reply_entry(req, &e);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "mkdir", parent))
        return;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct om_attr a;
    int rc = om_ns_mkdir(fs->ns, parent, name, mode, ctx->uid, ctx->gid, &a);
    reply_entry(req, fs, rc, &a);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "symlink", parent))
        return;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    struct om_attr a;
    int rc = om_ns_symlink(fs->ns, parent, name, target, ctx->uid, ctx->gid, &a);
    reply_entry(req, fs, rc, &a);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct om_fs *fs = fs_of(req);
    char *target = NULL;
    int rc = fs->shards && om_shards_member_ino(ino)
                 ? om_shards_readlink(fs->shards, ino, &target)
                 : om_ns_readlink(fs->ns, ino, &target);
    if (rc)
        return reply_error(req, rc);
    fuse_reply_readlink(req, target);
    free(target);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "unlink", parent))
        return;
    int rc = om_ns_unlink(fs->ns, parent, name);
    fuse_reply_err(req, rc ? user_errno(-rc) : 0);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "rmdir", parent))
        return;
    int rc = om_ns_rmdir(fs->ns, parent, name);
    fuse_reply_err(req, rc ? user_errno(-rc) : 0);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
    struct om_fs *fs = fs_of(req);
    if (fs->cfg->ro)
        return (void)fuse_reply_err(req, EROFS);
    if (refuse_in_shard(req, fs, "rename", parent) ||
        refuse_in_shard(req, fs, "rename", newparent))
        return;
    int rc = om_ns_rename(fs->ns, parent, name, newparent, newname, flags);
    fuse_reply_err(req, rc ? user_errno(-rc) : 0);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fuse_reply_err(req, ENOTSUP); /* an object store has no hard links */
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    if (om_shards_member_ino(ino))
        return (void)fuse_reply_err(req, ENODATA); /* a member has no extended attributes */
    char *buf = size ? malloc(size) : NULL;
    if (size && !buf)
        return (void)fuse_reply_err(req, ENOMEM);
    ssize_t n = om_ns_getxattr(fs_of(req)->ns, ino, name, buf, size);
    if (n < 0)
        fuse_reply_err(req, -n == ENODATA || -n == ERANGE ? (int)-n : user_errno((int)-n));
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    if (om_shards_member_ino(ino))
        return (void)fuse_reply_xattr(req, 0);
    char *buf = size ? malloc(size) : NULL;
    if (size && !buf)
        return (void)fuse_reply_err(req, ENOMEM);
    ssize_t n = om_ns_listxattr(fs_of(req)->ns, ino, buf, size);
    if (n < 0)
        fuse_reply_err(req, -n == ERANGE ? ERANGE : user_errno((int)-n));
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    (void)ino, (void)name, (void)value, (void)size, (void)flags;
    fuse_reply_err(req, ENOTSUP); /* the attributes are facts of the object */
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino, (void)name;
    fuse_reply_err(req, ENOTSUP);
}

/* The order hint of a loader (prefetch.h, OM_IOC_PREFETCH) on a directory
 * of the mount; every other ioctl is ENOTTY. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                     size_t in_bufsz, size_t out_bufsz)
{
    (void)arg, (void)fi, (void)out_bufsz;
    struct om_fs *fs = fs_of(req);
    if (flags & FUSE_IOCTL_COMPAT)
        return (void)fuse_reply_err(req, ENOSYS);
    if (cmd != (unsigned int)OM_IOC_PREFETCH)
        return (void)fuse_reply_err(req, ENOTTY);
    if (in_shard(fs, ino)) {
        int hrc = om_shards_hint(fs->shards, ino, in_buf, in_bufsz);
        if (hrc)
            return reply_error(req, hrc);
        return (void)fuse_reply_ioctl(req, 0, NULL, 0);
    }
    if (!fs->prefetch)
        return (void)fuse_reply_ioctl(req, 0, NULL, 0); /* prefetch_files=0: taken, ignored */
    char *key = NULL;
    struct om_attr a;
    int rc = om_meta_key(fs->meta, ino, &key, &a);
    if (!rc && !S_ISDIR(a.mode))
        rc = -ENOTDIR;
    const struct fuse_ctx *ctx = fuse_req_ctx(req);
    if (!rc)
        rc = om_prefetch_hint(fs->prefetch, ctx->uid, ctx->gid, key, in_buf, in_bufsz);
    free(key);
    if (rc)
        return reply_error(req, rc);
    fuse_reply_ioctl(req, 0, NULL, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    if (in_shard(fs, ino)) {
        struct om_attr a;
        int src = om_shards_getattr(fs->shards, ino, &a);
        if (!src && !S_ISDIR(a.mode))
            src = -ENOTDIR;
        if (src)
            return reply_error(req, src);
        fi->fh = 0; /* readdir asks the shard's index by ino */
        fi->cache_readdir = 0;
        fuse_reply_open(req, fi);
        return;
    }
    struct om_dirh *d = NULL;
    int rc = om_meta_opendir(fs->meta, ino, &d);
    if (rc)
        return reply_error(req, rc);
    fi->fh = (uint64_t)(uintptr_t)d;
    fi->cache_readdir = 0;
    if (fuse_reply_open(req, fi) == -ENOENT)
        om_meta_releasedir(fs->meta, d);
}

#define DIR_SHARDS 64

struct dirbuf {
    fuse_req_t req;
    struct om_fs *fs;
    char *buf;
    size_t size, used;
    bool plus;
    /* shards the page listed whose indexes are not loaded yet */
    uint64_t shards[DIR_SHARDS];
    int nshards;
};

/* A listed name that will be a shard's directory: its index is loaded
 * in the background, before the lookup that comes next. */
static void note_listed_shard(struct dirbuf *b, const char *name, const struct om_attr *a)
{
    if (b->fs->shards && a->ino && S_ISREG(a->mode) && om_shards_name(name) &&
        b->nshards < DIR_SHARDS && !om_shards_is_dir(b->fs->shards, a->ino, NULL))
        b->shards[b->nshards++] = a->ino;
}

static void load_listed_shards(struct dirbuf *b)
{
    for (int i = 0; i < b->nshards; i++) {
        char *key = NULL;
        struct om_attr a;
        if (om_meta_key(b->fs->meta, b->shards[i], &key, &a) == 0)
            om_shards_attach_later(b->fs->shards, key, &a);
        free(key);
    }
}

static int dir_fill(void *ud, const char *name, const struct om_attr *a, off_t next)
{
    struct dirbuf *b = ud;
    size_t room = b->size - b->used;
    size_t n;
    note_listed_shard(b, name, a);
    if (b->plus) {
        /* a file open for writing gets no attributes here: the kernel looks
         * it up and the lookup shows the writer's size (readdir runs under
         * meta's lock, which must not wait for a writer's) */
        struct om_attr shown = *a;
        if (a->ino && om_writer_is_open(b->fs->writers, a->ino))
            shown.ino = 0;
        if (b->fs->shards && S_ISREG(a->mode) && om_shards_name(name) &&
            !om_shards_is_dir(b->fs->shards, a->ino, &shown)) {
            /* a shard not yet indexed: the kernel looks it up, and the
             * lookup tells a directory from a file */
            shown = *a;
            shown.ino = 0;
            shown.mode = 0;
        }
        struct fuse_entry_param e;
        fill_entry(b->fs, &shown, &e);
        n = fuse_add_direntry_plus(b->req, b->buf + b->used, room, name, &e, next);
    } else {
        struct stat st;
        memset(&st, 0, sizeof(st));
        st.st_ino = a->ino;
        st.st_mode = a->mode;
        if (b->fs->shards && S_ISREG(a->mode) && om_shards_name(name))
            st.st_mode = om_shards_is_dir(b->fs->shards, a->ino, NULL) ? S_IFDIR : 0;
        n = fuse_add_direntry(b->req, b->buf + b->used, room, name, &st, next);
    }
    if (n > room)
        return 1;
    b->used += n;
    return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
    struct om_fs *fs = fs_of(req);
    struct dirbuf b = {.req = req, .fs = fs, .size = size, .plus = plus};
    b.buf = malloc(size ? size : 1);
    if (!b.buf)
        return (void)fuse_reply_err(req, ENOMEM);
    struct om_dirh *d = (struct om_dirh *)(uintptr_t)fi->fh;
    int rc = d ? om_meta_readdir(fs->meta, d, off, plus, dir_fill, &b)
               : om_shards_readdir(fs->shards, ino, off, dir_fill, &b);
    load_listed_shards(&b); /* meta's lock is released */
    if (rc && b.used == 0)
        reply_error(req, rc);
    else
        fuse_reply_buf(req, b.buf, b.used);
    free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    if (fi->fh)
        om_meta_releasedir(fs_of(req)->meta, (struct om_dirh *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    (void)ino;
    /* An object store has no fixed size: report a large, stable one (1 PiB)
     * so that tools checking free space before writing go ahead. */
    struct statvfs sv;
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = 1 << 20;
    sv.f_frsize = 1 << 20;
    sv.f_blocks = 1ULL << 30;
    sv.f_bfree = 1ULL << 30;
    sv.f_bavail = 1ULL << 30;
    sv.f_files = 1ULL << 40;
    sv.f_ffree = 1ULL << 40;
    sv.f_favail = 1ULL << 40;
    sv.f_namemax = 255;
    fuse_reply_statfs(req, &sv);
}

/* ---- session I/O ---- */

static ssize_t io_read(int fd, void *buf, size_t len, void *ud)
{
    struct om_fs *fs = ud;
    ssize_t n = read(fd, buf, len);
    if (n >= (ssize_t)sizeof(struct fuse_in_header) && !fs->init_unique) {
        const struct fuse_in_header *in = buf;
        if (in->opcode == FUSE_INIT)
            fs->init_unique = in->unique;
    }
    return n;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *ud)
{
    struct om_fs *fs = ud;
    if (fs->init_unique && count >= 2 && iov[0].iov_len == sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
        struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == fs->init_unique && out->error == 0) {
            struct fuse_init_out *init = iov[1].iov_base;
            if (fs->parallel_dirops && !(init->flags & FUSE_PARALLEL_DIROPS)) {
                init->flags |= FUSE_PARALLEL_DIROPS;
                om_info("parallel lookups and readdirs enabled");
            }
            fs->init_unique = 0;
        }
    }
    return writev(fd, iov, count);
}

/* libfuse offers FUSE_CAP_SPLICE_WRITE to a session with custom I/O only
 * when it can splice: without this, every reply from the data cache's
 * block files was read into a buffer and written from it. */
static ssize_t io_splice_send(int fdin, off_t *offin, int fdout, off_t *offout, size_t len,
                              unsigned int flags, void *ud)
{
    (void)ud;
    return splice(fdin, offin, fdout, offout, len, flags);
}

int om_fs_attach_io(struct om_fs *fs, struct fuse_session *se)
{
    (void)fs; /* reaches the callbacks as the session's userdata */
    static const struct fuse_custom_io io = {
        .read = io_read, .writev = io_writev, .splice_send = io_splice_send};
    int fd = fuse_session_fd(se);
    return fuse_session_custom_io(se, &io, fd);
}

const struct fuse_lowlevel_ops om_fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .release = op_release,
    .mkdir = op_mkdir,
    .symlink = op_symlink,
    .readlink = op_readlink,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .link = op_link,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .setxattr = op_setxattr,
    .removexattr = op_removexattr,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
    .ioctl = op_ioctl,
};

/* meta's reclaim thread asks the kernel to drop a name (and so FORGET its
 * inode). Never called from a FUSE callback: the kernel takes the parent's
 * lock, which a request waiting on us may hold. */
static int inval_entry(void *ud, uint64_t parent, const char *name, size_t len)
{
    struct om_fs *fs = ud;
    if (__atomic_load_n(&fs->notify_off, __ATOMIC_ACQUIRE))
        return -ENOTCONN;
    pthread_mutex_lock(&fs->se_lock);
    int rc = fs->se && !__atomic_load_n(&fs->notify_off, __ATOMIC_ACQUIRE)
                 ? fuse_lowlevel_notify_inval_entry(fs->se, parent, name, len)
                 : -ENOTCONN;
    pthread_mutex_unlock(&fs->se_lock);
    return rc;
}

void om_fs_stop_notifications(struct om_fs *fs)
{
    __atomic_store_n(&fs->notify_off, true, __ATOMIC_RELEASE);
}

void om_fs_set_session(struct om_fs *fs, struct fuse_session *se)
{
    pthread_mutex_lock(&fs->se_lock);
    fs->se = se;
    pthread_mutex_unlock(&fs->se_lock);
}

static int fetch_whole(void *ud, const char *key, uint64_t size, const char *listed_etag,
                       struct om_object *obj,
                       struct om_store_error *err)
{
    return om_readers_fetch_whole(ud, key, size, listed_etag, obj, err);
}

/* Staging needs room: the data cache gives it back (writes before the
 * cache). */
static uint64_t reclaim_for_writes(void *ud, uint64_t bytes)
{
    return om_dcache_reclaim(ud, bytes);
}

/* The data cache (data_cache=), or NULL: a cache that cannot be used is
 * one warning, never a failed mount. */
static struct om_dcache *open_data_cache(const struct om_config *cfg)
{
    if (!cfg->data_cache || strcmp(cfg->data_cache, "off") == 0 || !cfg->cache_dir)
        return NULL;
    struct om_dcache_config dc = {
        .cache_dir = cfg->cache_dir,
        .endpoint = cfg->endpoint,
        .bucket = cfg->bucket,
        .size = cfg->data_cache_bytes,
        .auto_size = strcmp(cfg->data_cache, "auto") == 0,
        .min_free_space = cfg->min_free_space,
    };
    char err[512];
    struct om_dcache *c = om_dcache_new(&dc, err, sizeof(err));
    if (!c) {
        om_warn("data cache off: %s", err);
        return NULL;
    }
    struct om_dcache_stats st;
    om_dcache_get_stats(c, &st);
    om_info("data cache %s/data: %" PRIu64 " MiB of %" PRIu64 " MiB used, %" PRIu64 " blocks",
            cfg->cache_dir, st.size_bytes >> 20, st.limit_bytes >> 20, st.blocks);
    return c;
}

int om_fs_init(struct om_fs *fs, struct om_config *cfg, struct om_client *client, char *err,
               size_t errlen)
{
    memset(fs, 0, sizeof(*fs));
    pthread_mutex_init(&fs->se_lock, NULL);
    fs->cfg = cfg;
    fs->client = client;
    fs->attr_timeout = (double)cfg->attr_timeout_ms / 1000.0;
    fs->entry_timeout = (double)cfg->entry_timeout_ms / 1000.0;
    fs->negative_timeout = (double)cfg->negative_timeout_ms / 1000.0;
    struct om_meta_config mc = {
        .prefix = cfg->prefix,
        .attr_ttl_ms = cfg->attr_timeout_ms,
        .entry_ttl_ms = cfg->entry_timeout_ms,
        .uid = (uid_t)cfg->uid,
        .gid = (gid_t)cfg->gid,
        .file_mode = (mode_t)cfg->file_mode,
        .dir_mode = (mode_t)cfg->dir_mode,
        .force_uid = om_config_is_set(cfg, "uid"),
        .force_gid = om_config_is_set(cfg, "gid"),
        .force_mode = om_config_is_set(cfg, "umask") || om_config_is_set(cfg, "file_mode"),
        .metadata = !cfg->metadata || strcmp(cfg->metadata, "lookup") == 0 ? OM_META_LOOKUP
                    : strcmp(cfg->metadata, "head") == 0                   ? OM_META_HEAD
                                                                           : OM_META_LISTING,
        .ro = cfg->ro,
        .fetch_whole = fetch_whole,
        .fetch_whole_max = cfg->small_file_size,
        .memory_budget = cfg->metadata_memory_bytes,
        .inval_entry = inval_entry,
        .inval_ud = fs,
    };
    struct om_readers_config rc = {
        .memory_limit = cfg->memory_limit,
        .part_size = cfg->part_size,
        .prefetch_initial = cfg->prefetch_initial,
        .prefetch_max = cfg->prefetch_max,
        .small_file_size = cfg->small_file_size,
        .kernel_readahead = cfg->max_readahead,
        .attr_ttl_ms = cfg->attr_timeout_ms,
        .dcache = fs->dcache = open_data_cache(cfg),
    };
    if (cfg->manifest) {
        struct om_manifest_mount mm = {
            .spec = cfg->manifest,
            .store = client->store,
            .endpoint = cfg->endpoint,
            .bucket = cfg->bucket,
            .prefix = cfg->prefix,
            .cache_dir = cfg->cache_dir,
        };
        int mrc = om_manifest_open_for_mount(&mm, &fs->manifest, err, errlen);
        if (mrc) {
            om_fs_destroy(fs);
            return mrc;
        }
        mc.list_page = om_manifest_list_page;
        mc.list_ud = fs->manifest;
    }
    fs->readers = om_readers_new(client->store, &rc);
    mc.fetch_ud = fs->readers;
    fs->meta = om_meta_new(client->store, &mc);
    if (!fs->meta || !fs->readers) {
        snprintf(err, errlen, "out of memory");
        om_fs_destroy(fs);
        return -ENOMEM;
    }
    /* recovery entries name the bucket as it is mounted (ais://B for the
     * native API), so `objmountctl recover push` reaches it the same way */
    char source[300];
    snprintf(source, sizeof(source), "%s%s", cfg->store_kind == OM_STORE_AIS ? "ais://" : "",
             cfg->bucket);
    struct om_writers_config wc = {
        .reclaim_space = fs->dcache ? reclaim_for_writes : NULL,
        .reclaim_ud = fs->dcache,
        .cache_dir = cfg->cache_dir,
        .bucket = source,
        .endpoint = cfg->endpoint,
        .part_size = cfg->part_size,
        .min_free_space = cfg->min_free_space,
        .upload_retries = (int)cfg->upload_retries,
        .upload_retry_ms = cfg->upload_retry_delay_ms,
        .verify_read = cfg->verify && strcmp(cfg->verify, "read") == 0,
        .verify_size = cfg->verify && strcmp(cfg->verify, "size") == 0,
        .no_overwrite = cfg->no_overwrite,
        .max_parts_in_flight = (int)cfg->parts_in_flight,
        .on_commit = committed,
        .on_refused = refused,
        .on_commit_ud = fs,
        .dcache = fs->dcache,
    };
    if (!cfg->ro) {
        fs->writers = om_writers_new(client->store, &wc, err, errlen);
        if (!fs->writers) {
            om_fs_destroy(fs);
            return -EIO;
        }
    }
    if (cfg->prefetch_files > 0) {
        char *root = NULL;
        struct om_prefetch_config pc = {
            .max_file_bytes = cfg->part_size,
            .max_window = (int)cfg->prefetch_files,
            .max_hint_window = (int)OM_MIN(cfg->prefetch_files * 4, (uint64_t)4096),
        };
        if (om_meta_key(fs->meta, OM_ROOT_INO, &root, NULL) == 0) {
            pc.prefix = root;
            fs->prefetch = om_prefetcher_new(fs->meta, fs->readers, &pc);
        }
        free(root);
        if (!fs->prefetch) {
            snprintf(err, errlen, "out of memory");
            om_fs_destroy(fs);
            return -ENOMEM;
        }
    }
    if (cfg->shards_tar) {
        struct om_shards_config sc = {
            .cache_dir = cfg->cache_dir,
            .endpoint = cfg->endpoint,
            .bucket = cfg->bucket,
            .small_member = cfg->small_file_size,
            .part_size = cfg->part_size,
            .memory_limit = cfg->memory_limit,
            .keep_cache = cfg->keep_cache,
        };
        fs->shards = om_shards_new(client->store, fs->readers, &sc);
        if (!fs->shards) {
            snprintf(err, errlen, "out of memory");
            om_fs_destroy(fs);
            return -ENOMEM;
        }
    }
    struct om_ns_config nc = {
        .max_rename_keys = cfg->max_rename_keys,
        .part_size = cfg->part_size,
        .cache_dir = cfg->cache_dir,
    };
    fs->ns = om_ns_new(client->store, fs->meta, fs->writers, &nc);
    if (!fs->ns) {
        snprintf(err, errlen, "out of memory");
        om_fs_destroy(fs);
        return -ENOMEM;
    }
    return 0;
}

void om_fs_stopping(struct om_fs *fs, uint64_t timeout_ms)
{
    om_writers_stopping(fs->writers, timeout_ms);
}

void om_fs_destroy(struct om_fs *fs)
{
    om_prefetcher_free(fs->prefetch); /* before the readers and meta it calls */
    fs->prefetch = NULL;
    om_ns_free(fs->ns);
    fs->ns = NULL;
    om_shards_free(fs->shards); /* before the readers it reads through */
    fs->shards = NULL;
    om_writers_free(fs->writers);
    fs->writers = NULL;
    om_readers_free(fs->readers);
    om_dcache_free(fs->dcache); /* after the readers: their stores are done */
    fs->dcache = NULL;
    om_meta_free(fs->meta);
    fs->readers = NULL;
    fs->meta = NULL;
    pthread_mutex_destroy(&fs->se_lock);
    om_manifest_close(fs->manifest); /* after meta: its listings read it */
    fs->manifest = NULL;
}
