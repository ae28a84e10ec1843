/* Namespace changes: unlink, mkdir, rmdir, rename, symlinks, extended
 * attributes. S3 requests first, then meta is told what changed. */
#include "objmount/ns.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/util.h"

#define DIR_CONTENT_TYPE "application/x-directory"

struct om_ns {
    struct om_store *store;
    struct om_meta *meta;
    struct om_writers *writers;
    struct om_ns_config cfg;
    char *cache_dir;
};

struct om_ns *om_ns_new(struct om_store *store, struct om_meta *meta, struct om_writers *writers,
                        const struct om_ns_config *cfg)
{
    struct om_ns *ns = calloc(1, sizeof(*ns));
    if (!ns)
        return NULL;
    ns->store = store;
    ns->meta = meta;
    ns->writers = writers;
    ns->cfg = *cfg;
    ns->cache_dir = strdup(cfg->cache_dir ? cfg->cache_dir : "/tmp");
    if (!ns->cache_dir) {
        free(ns);
        return NULL;
    }
    return ns;
}

void om_ns_free(struct om_ns *ns)
{
    if (!ns)
        return;
    free(ns->cache_dir);
    free(ns);
}

/* Key of name in directory parent (with a '/' for directories). */
static char *child_key(struct om_ns *ns, uint64_t parent, const char *name, bool dir)
{
    char *pkey = NULL, *key = NULL;
    if (om_meta_key(ns->meta, parent, &pkey, NULL))
        return NULL;
    if (asprintf(&key, "%s%s%s", pkey, name, dir ? "/" : "") < 0)
        key = NULL;
    free(pkey);
    return key;
}

int om_ns_name_refused(struct om_ns *ns, const char *name)
{
    const char *bad = om_store_caps(ns->store)->key_refused;
    size_t at = bad ? strcspn(name, bad) : strlen(name);
    if (!name[at])
        return 0;
    om_warn("cannot store %.64s: %s keeps no name holding '%c' (it would store another name)",
            name, om_store_bucket_name(ns->store), name[at]);
    return -EINVAL;
}

/* -ENAMETOOLONG or -EINVAL, with a log line, for a key the store would
 * refuse or change. */
static int key_refused(struct om_ns *ns, const char *key)
{
    size_t max = om_store_caps(ns->store)->key_max;
    if (strlen(key) <= max)
        return om_ns_name_refused(ns, key);
    om_warn("cannot create %.64s...: object keys are at most %zu bytes, this one has %zu", key,
            max, strlen(key));
    return -ENAMETOOLONG;
}

/* PUT a small in-memory object with metadata; obj describes what is stored. */
static int put_small(struct om_ns *ns, const char *key, const char *body, size_t len,
                     const char *content_type, const struct om_file_meta *m,
                     struct om_object *obj)
{
    unsigned char md5[OM_MD5_LEN];
    int rc = om_md5(body, len, md5);
    if (rc)
        return rc;
    struct om_put_opts opts = {.content_type = content_type, .meta = m};
    struct om_http_body b = {.kind = OM_BODY_MEM, .mem = body, .len = len};
    struct om_store_error err;
    memset(obj, 0, sizeof(*obj));
    rc = om_store_put(ns->store, key, &b, md5, &opts, obj, &err);
    if (rc) {
        om_warn("PUT %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);
        return rc;
    }
    om_file_meta_object(m, len, obj);
    return 0;
}

static struct om_file_meta new_meta(mode_t mode, uid_t uid, gid_t gid)
{
    struct om_file_meta m = {.has_mode = true, .mode = mode, .has_uid = true, .uid = uid,
                             .has_gid = true, .gid = gid, .has_mtime = true};
    clock_gettime(CLOCK_REALTIME, &m.mtime);
    return m;
}

/* ---- unlink, mkdir, rmdir, symlinks ---- */

int om_ns_unlink(struct om_ns *ns, uint64_t parent, const char *name)
{
    struct om_attr a;
    char *key = NULL;
    int rc = om_meta_resolve(ns->meta, parent, name, &a, &key);
    if (rc)
        return rc;
    if (S_ISDIR(a.mode)) {
        free(key);
        return -EISDIR;
    }
    /* Open for writing: no commit may land between the DELETE and the
     * writer learning of it, and the writer goes only with the name: a
     * DELETE that fails (403, Object Lock, 5xx) leaves the file, its
     * writer and whatever it is still given. */
    struct om_writer *w = om_writer_find(ns->writers, a.ino);
    if (w)
        om_writer_hold(w);
    struct om_store_error err;
    rc = om_store_delete(ns->store, key, &err);
    if (rc == -ENOENT)
        rc = 0;
    if (rc)
        om_warn("DELETE %s: %s (HTTP %ld %s)", key, strerror(-rc), err.status, err.code);
    if (!rc && w)
        om_writer_discard(w); /* the data goes with the name */
    if (w) {
        om_writer_unhold(w);
        om_writer_release(w);
    }
    if (!rc)
        om_meta_removed(ns->meta, parent, name);
    free(key);
    return rc;
}

int om_ns_mkdir(struct om_ns *ns, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                gid_t gid, struct om_attr *out)
{
    char *key = child_key(ns, parent, name, true);
    if (!key)
        return -ENOMEM;
    struct om_file_meta m = new_meta(S_IFDIR | (mode & 07777), uid, gid);
    struct om_object obj = {0};
    int rc = key_refused(ns, key);
    /* Where the store keeps no "dir/" marker (AIStore stores one as a file
     * "dir", which then clashes with the directory's own objects), the
     * directory lives in the mount until a file is stored in it. */
    bool local = !om_store_caps(ns->store)->dir_marker;
    if (!rc && local) {
        om_debug("mkdir %s: %s keeps no empty directory; this one exists in this mount until a "
                 "file is stored in it",
                 key, om_store_bucket_name(ns->store));
        om_file_meta_object(&m, 0, &obj);
    } else if (!rc) {
        rc = put_small(ns, key, "", 0, DIR_CONTENT_TYPE, &m, &obj);
        if (rc == -ENOTDIR) {
            /* "name/" refused beside a file (versitygw's ObjectParentIsFile):
             * a file of this very name, stored by another client, makes it
             * EEXIST; a file higher up leaves ENOTDIR */
            struct om_object o;
            struct om_store_error err;
            key[strlen(key) - 1] = '\0';
            if (om_store_head(ns->store, key, &o, &err) == 0)
                rc = -EEXIST;
        }
    }
    free(key);
    return rc ? rc : om_meta_made(ns->meta, parent, name, true, local, &obj, out);
}

struct emptiness {
    const char *self; /* the directory's own marker */
    bool empty;
};

static int any_other(void *ud, const struct om_list_entry *e)
{
    struct emptiness *x = ud;
    if (strcmp(e->key, x->self) == 0)
        return 0;
    x->empty = false;
    return OM_LIST_STOP;
}

int om_ns_rmdir(struct om_ns *ns, uint64_t parent, const char *name)
{
    struct om_attr a;
    char *key = NULL;
    int rc = om_meta_resolve(ns->meta, parent, name, &a, &key);
    if (rc)
        return rc;
    if (!S_ISDIR(a.mode)) {
        free(key);
        return -ENOTDIR;
    }
    if (om_meta_has_pending(ns->meta, a.ino)) {
        free(key);
        return -ENOTEMPTY;
    }
    struct emptiness x = {.self = key, .empty = true};
    struct om_list_params p = {.prefix = key, .max_keys = 2};
    struct om_store_error err;
    rc = om_store_list_page(ns->store, &p, any_other, &x, NULL, &err);
    if (!rc && !x.empty)
        rc = -ENOTEMPTY;
    if (!rc && om_store_caps(ns->store)->dir_marker) {
        rc = om_store_delete(ns->store, key, &err);
        if (rc == -ENOENT)
            rc = 0; /* a directory without a marker */
    }
    if (!rc)
        om_meta_removed(ns->meta, parent, name);
    free(key);
    return rc;
}

int om_ns_symlink(struct om_ns *ns, uint64_t parent, const char *name, const char *target,
                  uid_t uid, gid_t gid, struct om_attr *out)
{
    size_t len = strlen(target);
    if (len == 0 || len >= 4096)
        return -ENAMETOOLONG;
    char *key = child_key(ns, parent, name, false);
    if (!key)
        return -ENOMEM;
    struct om_file_meta m = new_meta(S_IFLNK | 0777, uid, gid);
    struct om_object obj;
    int rc = key_refused(ns, key);
    if (!rc)
        rc = put_small(ns, key, target, len, NULL, &m, &obj);
    free(key);
    if (!rc)
        rc = om_meta_made(ns->meta, parent, name, false, false, &obj, out);
    if (!rc)
        om_meta_set_link_target(ns->meta, out->ino, target);
    return rc;
}

int om_ns_readlink(struct om_ns *ns, uint64_t ino, char **target)
{
    *target = om_meta_link_target(ns->meta, ino);
    if (*target)
        return 0;
    char *key = NULL;
    struct om_attr a;
    int rc = om_meta_key(ns->meta, ino, &key, &a);
    if (rc)
        return rc;
    if (!S_ISLNK(a.mode)) {
        free(key);
        return -EINVAL;
    }
    if (a.size == 0 || a.size >= 4096) {
        free(key);
        return -EIO;
    }
    char *buf = calloc(1, a.size + 1);
    struct om_store_error err;
    ssize_t n = buf ? om_store_get_range(ns->store, key, 0, a.size, NULL, buf, NULL, &err) : -ENOMEM;
    free(key);
    if (n != (ssize_t)a.size) {
        free(buf);
        return n < 0 ? (int)n : -EIO;
    }
    om_meta_set_link_target(ns->meta, ino, buf);
    *target = buf;
    return 0;
}

int om_ns_dir_setattr(struct om_ns *ns, uint64_t ino, const struct om_file_meta *m)
{
    char *key = NULL;
    struct om_attr a;
    int rc = om_meta_key(ns->meta, ino, &key, &a);
    if (rc)
        return rc;
    struct om_file_meta mm = *m;
    mm.mode = S_IFDIR | (m->mode & 07777);
    struct om_object obj = {0};
    if (key[0] == '\0') {
        rc = -EPERM; /* the bucket root has no marker to carry metadata */
    } else if (!om_store_caps(ns->store)->dir_marker) {
        /* no marker to carry it: the mount shows it until it forgets */
        om_debug("%s: %s keeps no directory markers: the mode and owner are not stored", key,
                 om_store_bucket_name(ns->store));
        om_file_meta_object(&mm, 0, &obj);
    } else {
        rc = put_small(ns, key, "", 0, DIR_CONTENT_TYPE, &mm, &obj);
    }
    if (!rc)
        om_meta_dir_meta(ns->meta, ino, &obj);
    free(key);
    return rc;
}

/* ---- copies ---- */

/* The file metadata an object carries, to store with its copy. */
static struct om_file_meta meta_of(const struct om_object *o)
{
    struct om_file_meta m = {.has_mode = o->has_mode, .mode = o->mode, .has_uid = o->has_uid,
                             .uid = o->uid, .has_gid = o->has_gid, .gid = o->gid,
                             .has_mtime = o->has_mtime, .mtime = o->meta_mtime};
    return m;
}

/* The server does not copy: download to a temporary file, upload it with
 * the commit's verification. */
static int copy_through(struct om_ns *ns, const char *src, const char *dst,
                        const struct om_object *o)
{
    if (!ns->writers)
        return -EROFS;
    char path[4200];
    snprintf(path, sizeof(path), "%s/staging/copy-XXXXXX", ns->cache_dir);
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0)
        return -errno;
    enum { CHUNK = 8 << 20 };
    char *buf = o->size ? malloc(CHUNK) : NULL;
    int rc = o->size && !buf ? -ENOMEM : 0;
    for (uint64_t off = 0; off < o->size && !rc;) {
        uint64_t want = OM_MIN((uint64_t)CHUNK, o->size - off);
        struct om_store_error err;
        ssize_t got = om_store_get_range(ns->store, src, off, want, o->etag, buf, NULL, &err);
        if (got != (ssize_t)want)
            rc = got < 0 ? (int)got : -EIO;
        else if (pwrite(fd, buf, (size_t)want, (off_t)off) != (ssize_t)want)
            rc = -EIO;
        off += want;
    }
    free(buf);
    close(fd);
    if (!rc) {
        struct om_file_meta m = meta_of(o);
        char err[256];
        rc = om_writer_push_file(ns->writers, path, dst, &m, err, sizeof(err));
        if (rc)
            om_warn("copying %s to %s: %s", src, dst, err);
    }
    unlink(path);
    return rc;
}

/* Copy src to dst, keeping its metadata, and check the size of the copy.
 * copy (may be NULL) receives what a HEAD of dst shows: a copy's ETag may
 * differ from the source's (Swift gives a copy of a multipart object a
 * plain MD5). The store copies on its side where it can (in parts past
 * its copy limit), else the bytes go through this host. */
static int copy_object(struct om_ns *ns, const char *src, const char *dst,
                       struct om_object *copy)
{
    struct om_object o, c;
    struct om_store_error err;
    int rc = om_store_head(ns->store, src, &o, &err);
    if (rc)
        return rc;
    size_t dl = strlen(dst);
    if (o.size == 0 && dl && dst[dl - 1] == '/') {
        /* a directory marker is stored anew, with its metadata: a server
         * that keeps directories as directories refuses a copy onto one
         * (versitygw: DirectoryObjectContainsData), and a PUT of nothing
         * costs what the copy would */
        struct om_file_meta m = meta_of(&o);
        rc = put_small(ns, dst, "", 0, DIR_CONTENT_TYPE, &m, &c);
        if (!rc && copy)
            *copy = c;
        return rc;
    }
    rc = om_store_copy(ns->store, src, &o, dst, NULL, NULL, &err);
    if (rc == -ENOSYS || rc == -ENOTSUP) {
        om_info("%s does not copy on the server side (%s): copying %s through this host",
                om_store_bucket_name(ns->store), err.code[0] ? err.code : "not implemented",
                src);
        rc = copy_through(ns, src, dst, &o);
    }
    if (rc)
        return rc;
    rc = om_store_head(ns->store, dst, &c, &err);
    if (!rc && c.size != o.size) {
        om_error("copy of %s to %s has %" PRIu64 " bytes instead of %" PRIu64, src, dst, c.size,
                 o.size);
        rc = -EIO;
    }
    if (!rc && copy)
        *copy = c;
    return rc;
}

/* Move src to dst where the store renames in place (AIStore): a HEAD for
 * the version it must still be, the rename, a HEAD of what dst holds now
 * (copy, may be NULL). */
static int rename_object(struct om_ns *ns, const char *src, const char *dst,
                         struct om_object *copy)
{
    struct om_object o, c;
    struct om_store_error err;
    int rc = om_store_head(ns->store, src, &o, &err);
    if (!rc)
        rc = om_store_rename(ns->store, src, dst, o.etag, &err);
    if (!rc)
        rc = om_store_head(ns->store, dst, &c, &err);
    if (!rc && c.size != o.size) {
        om_error("rename of %s to %s left %" PRIu64 " bytes instead of %" PRIu64, src, dst,
                 c.size, o.size);
        rc = -EIO;
    }
    if (!rc && copy)
        *copy = c;
    return rc;
}

/* ---- rename ---- */

/* Rename the file ino from src to dst, replacing the file over_ino (0:
 * none) there. The writers of both are held, so that no commit of either
 * lands between the requests (one would go to a key the rename is about
 * to delete or overwrite), and change only once the rename happened: a
 * failed commit, copy or DELETE leaves both files' writers as they were. */
static int rename_file(struct om_ns *ns, uint64_t ino, const char *src, const char *dst,
                       uint64_t over_ino, struct om_object *copy)
{
    struct om_writer *w = om_writer_find(ns->writers, ino);
    struct om_writer *over = over_ino ? om_writer_find(ns->writers, over_ino) : NULL;
    /* two renames holding the same two writers take them in one order */
    struct om_writer *first = ino < over_ino ? w : over, *second = ino < over_ino ? over : w;
    if (first)
        om_writer_hold(first);
    if (second)
        om_writer_hold(second);
    int rc = 0;
    if (w) {
        /* store what was written under the old name first */
        struct om_commit_result res;
        rc = om_writer_commit_held(w, &res);
    }
    bool in_place = om_store_caps(ns->store)->rename;
    if (!rc)
        rc = in_place ? rename_object(ns, src, dst, copy) : copy_object(ns, src, dst, copy);
    struct om_store_error err;
    if (!rc && !in_place) {
        rc = om_store_delete(ns->store, src, &err);
        if (rc == -ENOENT)
            rc = 0;
        if (rc && !over_ino) {
            /* the name dst did not exist: take the copy back */
            om_warn("renaming %s to %s: DELETE of the old name failed (%s, HTTP %ld %s): the "
                    "copy is removed, the file keeps its name",
                    src, dst, strerror(-rc), err.status, err.code);
            struct om_store_error derr;
            om_store_delete(ns->store, dst, &derr);
        } else if (rc) {
            om_error("renaming %s to %s: DELETE of the old name failed (%s, HTTP %ld %s): %s "
                     "now holds a copy of it (the file it replaced cannot be brought back)",
                     src, dst, strerror(-rc), err.status, err.code, dst);
            om_meta_expire(ns->meta, over_ino);
        }
    }
    if (!rc && w)
        rc = om_writer_rekey(w, dst, copy->etag);
    if (!rc && over)
        om_writer_discard(over); /* the replaced file must not come back */
    if (second)
        om_writer_unhold(second);
    if (first)
        om_writer_unhold(first);
    if (over)
        om_writer_release(over);
    if (w)
        om_writer_release(w);
    return rc;
}

struct key_list {
    char **v;
    struct om_object **copy; /* the copy's version and metadata, per key (rename_dir) */
    size_t n, cap;
    uint64_t limit;
    int error;
};

static int collect_key(void *ud, const struct om_list_entry *e)
{
    struct key_list *k = ud;
    if (k->n >= k->limit)
        return -EXDEV;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        char **v = realloc(k->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        k->v = v;
        k->cap = cap;
    }
    if (!(k->v[k->n] = strdup(e->key)))
        return -ENOMEM;
    k->n++;
    return 0;
}

static void key_list_free(struct key_list *k)
{
    for (size_t i = 0; i < k->n; i++) {
        free(k->v[i]);
        free(k->copy ? k->copy[i] : NULL);
    }
    free(k->v);
    free(k->copy);
}

/* Copy every key under src to dst, then delete the old keys. keys
 * receives the old keys and each copy's version and metadata (a copy of a
 * multipart object has another ETag than its source: versitygw, S3), for
 * the namespace's moved entries. */
static int rename_dir(struct om_ns *ns, const char *src, const char *dst, struct key_list *keys_out)
{
    if (om_writers_busy_under(ns->writers, src))
        return -EBUSY;
    struct key_list keys = {.limit = ns->cfg.max_rename_keys};
    struct om_store_error err;
    int rc = om_store_list_all(ns->store, src, NULL, collect_key, &keys, &err);
    if (!rc && keys.n && !(keys.copy = calloc(keys.n, sizeof(*keys.copy))))
        rc = -ENOMEM;
    if (rc == -EXDEV)
        om_info("renaming %s: more than %" PRIu64 " keys (max_rename_keys); mv copies it instead",
                src, ns->cfg.max_rename_keys);
    size_t slen = strlen(src);
    /* copy everything first: the old names stay until every copy exists
     * (a store that renames in place moves each key instead) */
    bool in_place = om_store_caps(ns->store)->rename;
    for (size_t i = 0; i < keys.n && !rc; i++) {
        char *to = NULL;
        struct om_object copy = {0};
        if (asprintf(&to, "%s%s", dst, keys.v[i] + slen) < 0)
            rc = -ENOMEM;
        else
            rc = in_place ? rename_object(ns, keys.v[i], to, &copy)
                          : copy_object(ns, keys.v[i], to, &copy);
        if (!rc && (keys.copy[i] = malloc(sizeof(copy))))
            *keys.copy[i] = copy; /* NULL (ENOMEM): the version stays unknown */
        free(to);
    }
    for (size_t i = 0; i < keys.n && !rc && !in_place; i++) {
        int d = om_store_delete(ns->store, keys.v[i], &err);
        if (d && d != -ENOENT)
            rc = d;
    }
    if (rc && rc != -EXDEV)
        om_error("renaming directory %s to %s failed (%s): it is renamed only in part; the old "
                 "keys are kept until every copy exists",
                 src, dst, strerror(-rc));
    if (rc)
        key_list_free(&keys);
    else
        *keys_out = keys;
    return rc;
}

int om_ns_rename(struct om_ns *ns, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, unsigned flags)
{
    if (flags & ~(unsigned)RENAME_NOREPLACE)
        return -EINVAL; /* RENAME_EXCHANGE, RENAME_WHITEOUT */
    struct om_attr a, b;
    struct om_object copy = {0};
    char *src = NULL, *dst = NULL, *old = NULL;
    int rc = om_meta_resolve(ns->meta, parent, name, &a, &src);
    if (rc)
        return rc;
    bool dir = S_ISDIR(a.mode);
    int exists = om_meta_resolve(ns->meta, newparent, newname, &b, &old);
    if (exists == 0) {
        if (flags & RENAME_NOREPLACE)
            rc = -EEXIST;
        else if (dir && !S_ISDIR(b.mode))
            rc = -ENOTDIR;
        else if (!dir && S_ISDIR(b.mode))
            rc = -EISDIR;
        else if (b.ino == a.ino)
            rc = 1; /* the same file: nothing to do */
        else if (dir) {
            /* only over an empty directory; its marker goes away */
            rc = om_ns_rmdir(ns, newparent, newname);
        }
    } else if (exists != -ENOENT) {
        rc = exists;
    }
    if (!rc && !(dst = child_key(ns, newparent, newname, dir)))
        rc = -ENOMEM;
    if (!rc)
        rc = key_refused(ns, dst);
    struct key_list moved = {0};
    if (!rc)
        rc = dir ? rename_dir(ns, src, dst, &moved)
                 : rename_file(ns, a.ino, src, dst, exists == 0 ? b.ino : 0, &copy);
    if (!rc)
        om_meta_renamed(ns->meta, parent, name, newparent, newname);
    /* what the tree's files are now: the copies' versions */
    for (size_t i = 0; !rc && i < moved.n; i++)
        om_meta_moved(ns->meta, a.ino, moved.v[i] + strlen(src), moved.copy[i]);
    key_list_free(&moved);
    if (!rc && !dir && copy.etag[0])
        om_meta_committed(ns->meta, a.ino, &copy); /* the copy's ETag, not the source's */
    free(src);
    free(dst);
    free(old);
    return rc == 1 ? 0 : rc;
}

/* ---- extended attributes ---- */

static const char *const xattr_names[] = {"user.objmount.etag", "user.objmount.key",
                                          "user.objmount.content_type"};

ssize_t om_ns_getxattr(struct om_ns *ns, uint64_t ino, const char *name, char *buf, size_t size)
{
    int which = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(name, xattr_names[i]) == 0)
            which = i;
    if (which < 0)
        return -ENODATA;
    char *key = NULL;
    bool exists = false;
    struct om_object o;
    memset(&o, 0, sizeof(o));
    int rc = om_meta_object(ns->meta, ino, &key, &exists, &o);
    const char *value;
    if (rc == -EISDIR) {
        if (which != 1)
            return -ENODATA;
        rc = om_meta_key(ns->meta, ino, &key, NULL);
        exists = true; /* a directory's key */
    }
    if (rc)
        return rc;
    if (which == 2 && !o.content_type[0] && exists) {
        /* listings do not carry it: ask */
        struct om_store_error err;
        if (om_store_head(ns->store, key, &o, &err) != 0)
            o.content_type[0] = '\0';
    }
    value = which == 0 ? o.etag : which == 1 ? key : o.content_type;
    size_t len = strlen(value);
    ssize_t out = (ssize_t)len;
    if (!exists && which != 1)
        out = -ENODATA;
    else if (len == 0)
        out = -ENODATA;
    else if (size && size < len)
        out = -ERANGE;
    else if (size)
        memcpy(buf, value, len);
    free(key);
    return out;
}

ssize_t om_ns_listxattr(struct om_ns *ns, uint64_t ino, char *buf, size_t size)
{
    char *key = NULL;
    struct om_attr a;
    int rc = om_meta_key(ns->meta, ino, &key, &a);
    if (rc)
        return rc;
    free(key);
    /* directories have a key only */
    struct om_buf names = {0};
    for (int i = 0; i < 3 && !rc; i++) {
        if (!S_ISDIR(a.mode) || i == 1)
            rc = om_buf_append(&names, xattr_names[i], strlen(xattr_names[i]) + 1);
    }
    ssize_t out = rc ? rc : (ssize_t)names.len;
    if (!rc && size && size < names.len)
        out = -ERANGE;
    else if (!rc && size)
        memcpy(buf, names.data, names.len);
    om_buf_free(&names);
    return out;
}
