/* FUSE low-level callbacks: translate, call meta/reader, reply exactly once. */
#include "objmount/fs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "objmount/log.h"

struct fh {
    struct om_reader *reader;
    uint64_t ino;
};

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
    e->generation = 1;
    om_attr_to_stat(a, &e->attr);
    e->attr_timeout = fs->attr_timeout;
    e->entry_timeout = fs->entry_timeout;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct om_fs *fs = userdata;
    unsigned want = FUSE_CAP_ASYNC_READ | FUSE_CAP_READDIRPLUS | FUSE_CAP_PARALLEL_DIROPS |
                    FUSE_CAP_AUTO_INVAL_DATA;
    conn->want |= conn->capable & want;
    conn->want &= ~(unsigned)FUSE_CAP_READDIRPLUS_AUTO;
    conn->max_readahead = (unsigned)fs->cfg->max_readahead;
    conn->max_write = 1u << 20;
    conn->max_background = 64;
    conn->congestion_threshold = 48;
    om_info("FUSE protocol %u.%u, max_readahead %u, max_write %u", conn->proto_major,
            conn->proto_minor, conn->max_readahead, conn->max_write);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct om_fs *fs = fs_of(req);
    struct om_attr a;
    int rc = om_meta_lookup(fs->meta, parent, name, &a);
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
    fill_entry(fs, &a, &e);
    fuse_reply_entry(req, &e);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    om_meta_forget(fs_of(req)->meta, ino, nlookup);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct om_fs *fs = fs_of(req);
    for (size_t i = 0; i < count; i++)
        om_meta_forget(fs->meta, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    struct om_fs *fs = fs_of(req);
    struct om_attr a;
    int rc = om_meta_getattr(fs->meta, ino, &a);
    if (rc)
        return reply_error(req, rc);
    struct stat st;
    om_attr_to_stat(&a, &st);
    fuse_reply_attr(req, &st, fs->attr_timeout);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))
        return (void)fuse_reply_err(req, EROFS);
    char *key = NULL;
    struct om_attr a;
    bool keep = false;
    int rc = om_meta_open(fs->meta, ino, fs->cfg->keep_cache, &key, &a, &keep);
    if (rc)
        return reply_error(req, rc);
    struct fh *h = calloc(1, sizeof(*h));
    if (h)
        h->reader = om_reader_open(fs->readers, key, a.size, a.etag);
    free(key);
    if (!h || !h->reader) {
        free(h);
        om_meta_close(fs->meta, ino);
        return (void)fuse_reply_err(req, ENOMEM);
    }
    h->ino = ino;
    fi->fh = (uint64_t)(uintptr_t)h;
    fi->keep_cache = keep;
    if (fuse_reply_open(req, fi) == -ENOENT) {
        /* the opener was interrupted: nobody will release this handle */
        om_reader_close(h->reader);
        om_meta_close(fs->meta, ino);
        free(h);
    }
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return (void)fuse_reply_err(req, ENOMEM);
    ssize_t n = om_reader_read(h->reader, buf, size, (uint64_t)off);
    if (n < 0)
        reply_error(req, (int)n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    free(buf);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    struct fh *h = (struct fh *)(uintptr_t)fi->fh;
    om_reader_close(h->reader);
    om_meta_close(fs->meta, ino);
    free(h);
    fuse_reply_err(req, 0);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct om_fs *fs = fs_of(req);
    struct om_dirh *d = NULL;
    int rc = om_meta_opendir(fs->meta, ino, &d);
    if (rc)
        return reply_error(req, rc);
    fi->fh = (uint64_t)(uintptr_t)d;
    fi->cache_readdir = 0;
    if (fuse_reply_open(req, fi) == -ENOENT)
        om_meta_releasedir(fs->meta, d);
}

struct dirbuf {
    fuse_req_t req;
    struct om_fs *fs;
    char *buf;
    size_t size, used;
    bool plus;
};

static int dir_fill(void *ud, const char *name, const struct om_attr *a, off_t next)
{
    struct dirbuf *b = ud;
    size_t room = b->size - b->used;
    size_t n;
    if (b->plus) {
        struct fuse_entry_param e;
        fill_entry(b->fs, a, &e);
        n = fuse_add_direntry_plus(b->req, b->buf + b->used, room, name, &e, next);
    } else {
        struct stat st;
        memset(&st, 0, sizeof(st));
        st.st_ino = a->ino;
        st.st_mode = a->mode;
        n = fuse_add_direntry(b->req, b->buf + b->used, room, name, &st, next);
    }
    if (n > room)
        return 1;
    b->used += n;
    return 0;
}

static void do_readdir(fuse_req_t req, size_t size, off_t off, struct fuse_file_info *fi,
                       bool plus)
{
    struct om_fs *fs = fs_of(req);
    struct dirbuf b = {.req = req, .fs = fs, .size = size, .plus = plus};
    b.buf = malloc(size ? size : 1);
    if (!b.buf)
        return (void)fuse_reply_err(req, ENOMEM);
    struct om_dirh *d = (struct om_dirh *)(uintptr_t)fi->fh;
    int rc = om_meta_readdir(fs->meta, d, off, plus, dir_fill, &b);
    if (rc && b.used == 0)
        reply_error(req, rc);
    else
        fuse_reply_buf(req, b.buf, b.used);
    free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)ino;
    do_readdir(req, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    (void)ino;
    do_readdir(req, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
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

const struct fuse_lowlevel_ops om_fs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .open = op_open,
    .read = op_read,
    .release = op_release,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .statfs = op_statfs,
};

int om_fs_init(struct om_fs *fs, struct om_config *cfg, struct om_client *client)
{
    memset(fs, 0, sizeof(*fs));
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
        .ro = cfg->ro,
    };
    fs->meta = om_meta_new(client->s3, &mc);
    struct om_readers_config rc = {
        .memory_limit = cfg->memory_limit,
        .part_size = cfg->part_size,
        .prefetch_initial = cfg->prefetch_initial,
        .prefetch_max = cfg->prefetch_max,
        .small_file_size = cfg->small_file_size,
    };
    fs->readers = om_readers_new(client->s3, &rc);
    if (!fs->meta || !fs->readers) {
        om_fs_destroy(fs);
        return -ENOMEM;
    }
    return 0;
}

void om_fs_destroy(struct om_fs *fs)
{
    om_readers_free(fs->readers);
    om_meta_free(fs->meta);
    fs->readers = NULL;
    fs->meta = NULL;
}
