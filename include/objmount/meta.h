/* The namespace: inodes, names <-> keys, attribute and listing caches.
 *
 * Keys map to paths by '/'. A directory exists when some key has its prefix
 * or a "dir/" marker object exists; when both "a" and "a/..." exist the
 * directory wins and the object is hidden. Names that cannot be file names
 * (empty, ".", "..", longer than 255 bytes) are skipped with one log line.
 *
 * Listings (ListObjectsV2 with delimiter '/') are streamed page by page into
 * directory handles; every entry primes the size, time and ETag of its name,
 * so stat after readdir costs no request. A complete listing is kept for
 * entry_timeout and answers lookups, positive and negative.
 *
 * Inode numbers are stable while the kernel knows the inode; lookup counts
 * follow fuse_lowlevel.h (every successful lookup and every readdirplus
 * entry counts one; forget subtracts).
 *
 * All functions are thread-safe. One mutex guards the whole namespace and is
 * never held across a network request. */
#ifndef OBJMOUNT_META_H
#define OBJMOUNT_META_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "objmount/store.h"

#define OM_ROOT_INO 1

struct om_meta_config {
    const char *prefix; /* key prefix of the mount root: "" or "dir/" */
    uint64_t attr_ttl_ms;
    uint64_t entry_ttl_ms;
    uid_t uid;
    gid_t gid;
    mode_t file_mode; /* permission bits */
    mode_t dir_mode;
    bool force_uid, force_gid, force_mode; /* ignore x-amz-meta-* for these */
    /* Where object metadata (mode, owner, symlink type) comes from; listings
     * carry sizes, times and ETags only. */
    enum om_metadata_mode {
        OM_META_LOOKUP = 0, /* HEAD when one name is looked up; listings for readdir */
        OM_META_HEAD,       /* HEAD for every name, readdir too (as s3fs-fuse) */
        OM_META_LISTING,    /* never a HEAD for metadata */
    } metadata;
    bool ro;
    /* Optional: look up a file the listing shows at most fetch_whole_max
     * bytes long with one GET of the whole object instead of a HEAD (see
     * om_readers_fetch_whole). */
    int (*fetch_whole)(void *ud, const char *key, uint64_t size, const char *listed_etag,
                       struct om_object *obj,
                       struct om_store_error *err);
    void *fetch_ud;
    uint64_t fetch_whole_max;
    /* Bytes the namespace may hold (inodes, names, listings; 0 = no bound).
     * Past it a reclaim thread frees listings no handle reads, least
     * recently used first, and asks the kernel to forget file names it has
     * not used lately; from 90% of it readdirplus tells files without an
     * inode. */
    uint64_t memory_budget;
    /* Optional: ask the kernel to drop the name parent/name (FUSE
     * notify_inval_entry); it then forgets the inode unless it holds it
     * open. Called from the reclaim thread only, without any meta lock.
     * Returns 0 or a negative errno. */
    int (*inval_entry)(void *ud, uint64_t parent, const char *name, size_t len);
    void *inval_ud;
    /* Optional: where listings come from instead of ListObjectsV2 (a
     * manifest), with the contract of om_store_list_page. With it the names and
     * attributes are fixed: they come from these listings only, never from
     * a HEAD or a LIST (a failed listing makes lookups in its directory
     * fail with EIO). */
    int (*list_page)(void *ud, const struct om_list_params *p, om_list_cb cb, void *cb_ud,
                     char **next_token, struct om_store_error *err);
    void *list_ud;
};

/* What stat() shows for an inode. */
struct om_attr {
    uint64_t ino;
    mode_t mode; /* type and permissions */
    uid_t uid;
    gid_t gid;
    uint64_t size;
    struct timespec mtime;
    char etag[OM_ETAG_MAX];
};

struct om_meta;

/* NULL on ENOMEM. s3 is borrowed. */
struct om_meta *om_meta_new(struct om_store *store, const struct om_meta_config *cfg);
void om_meta_free(struct om_meta *m);

/* The first page of the root's listing, taken by the bucket check before
 * the namespace exists (om_store_check_listing, with om_list_seed_add as its
 * callback). Installed as the root's listing when it was the whole of it,
 * trusted from taken_ms for entry_timeout as any listing: the first lookup
 * or `ls` of the root after a mount needs no LIST of its own. */
struct om_list_seed;
struct om_list_seed *om_list_seed_new(void);
int om_list_seed_add(void *seed, const struct om_list_entry *e); /* an om_list_cb */
void om_list_seed_free(struct om_list_seed *s);
/* 0, or -ENOMEM (nothing installed). */
int om_meta_seed_root(struct om_meta *m, const struct om_list_seed *s, uint64_t taken_ms);

/* Resolve name in directory parent. On success counts one kernel lookup of
 * the child and fills out. -ENOENT when missing, -ENOTDIR when parent is not
 * a directory, -ENAMETOOLONG, or the error of a failed request. */
int om_meta_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out);

/* Drop n kernel lookups. */
void om_meta_forget(struct om_meta *m, uint64_t ino, uint64_t n);

/* Attributes of ino, refreshed with a HEAD when older than attr_timeout.
 * -ENOENT when the object is gone, -ESTALE for an unknown ino. */
int om_meta_getattr(struct om_meta *m, uint64_t ino, struct om_attr *out);
/* The attributes meta holds for ino, without asking the server. */
int om_meta_getattr_cached(struct om_meta *m, uint64_t ino, struct om_attr *out);

/* The attributes of file ino are no longer to be trusted (a read found
 * another version): the next getattr or open asks the server. */
void om_meta_expire(struct om_meta *m, uint64_t ino);

/* Open ino for reading: fresh attributes, the key (caller frees *key) and
 * whether the kernel page cache may be kept (the ETag is the one cached
 * before). Takes a reference released by om_meta_close(). */
int om_meta_open(struct om_meta *m, uint64_t ino, bool trust_cache, char **key,
                 struct om_attr *out, bool *keep_cache);
void om_meta_close(struct om_meta *m, uint64_t ino);

/* ---- changes made through the mount ---- */

/* A new file name in parent, created locally (no request; the object
 * appears at its first commit). Counts one kernel lookup. *key receives the
 * object key (caller frees). -EEXIST when the name is known to exist. */
int om_meta_create(struct om_meta *m, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                   gid_t gid, struct om_attr *out, char **key);

/* The object of ino as the mount knows it: whether it exists, its size,
 * ETag, content type and s3fs metadata; key receives its key (caller
 * frees). -EISDIR for directories. */
int om_meta_object(struct om_meta *m, uint64_t ino, char **key, bool *exists,
                   struct om_object *obj);

/* A commit stored size/etag/mtime (and the metadata fields set in obj) for
 * ino. The kernel page cache now holds these bytes. */
void om_meta_committed(struct om_meta *m, uint64_t ino, const struct om_object *obj);
/* The file at path (relative, '/'-separated) under directory dir, moved
 * there by a copy (a directory's rename) that is now copy (NULL: not
 * known): its inode and its listing entry, where this mount has them,
 * take the copy's version; metadata a listing does not show (a symlink, a
 * mode, an own time) is remembered for the name's next lookup. */
void om_meta_moved(struct om_meta *m, uint64_t dir, const char *path,
                   const struct om_object *copy);

/* A version token a read learned by a HEAD for ino, listed without one
 * (AIStore's S3 API): kept on the inode and its listing entry while they
 * have no token and still have size, so the next open within their
 * validity (also after the kernel forgot the inode) asks no HEAD. What
 * refreshes them (a listing, a HEAD) replaces it. */
void om_meta_learned_version(struct om_meta *m, uint64_t ino, uint64_t size, const char *etag);

/* Resolve name in parent as a lookup does, without counting a kernel
 * lookup. *key receives the object key (caller frees; directories end with
 * '/'). */
int om_meta_resolve(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
                    char **key);

/* ---- for the prefetch across files (src/ns/meta_listed.c) ---- */

/* Where file ino stands in its directory's installed listing: *dir gets
 * the directory's inode number, *pos the entry's index in listing order.
 * -ENOENT when the directory has no installed listing or ino is not in
 * it. No request is sent. */
int om_meta_listed_pos(struct om_meta *m, uint64_t ino, uint64_t *dir, uint64_t *pos);

struct om_listed_file {
    uint64_t pos; /* index in the listing */
    char *key;    /* owned: om_listed_files_free */
    uint64_t size;
    char etag[OM_ETAG_MAX]; /* as an open of the name would see it */
};
/* The files at listing positions pos, pos + stride, ... of directory dir
 * (directories and removed names skipped), at most max into out. Returns
 * how many (0 when dir has no installed listing any more) or -ENOMEM. No
 * request is sent. */
int om_meta_listed_files(struct om_meta *m, uint64_t dir, uint64_t pos, uint64_t stride, int max,
                         struct om_listed_file *out);
void om_listed_files_free(struct om_listed_file *v, int n);

/* Attributes and key (caller frees) of path, relative to the mount's root
 * ('/'-separated, no ".."), resolved as lookups do without counting a
 * kernel lookup: may send requests. 0, -ENOENT, -ENOTDIR, -EISDIR (the
 * root itself), -EINVAL (a ".." or a name too long) or another -errno. */
int om_meta_resolve_path(struct om_meta *m, const char *path, struct om_attr *out, char **key);

/* Key (caller frees) and attributes of ino. */
int om_meta_key(struct om_meta *m, uint64_t ino, char **key, struct om_attr *out);

/* A directory or symlink made through the mount; counts one kernel lookup.
 * obj carries mode, owner, mtime and (symlinks) size. local: nothing was
 * stored for it (a directory on a store without directory markers): only
 * this mount knows it, lookups answer it without asking the store, until
 * it is removed (it exists in the store once a key is stored under it). */
int om_meta_made(struct om_meta *m, uint64_t parent, const char *name, bool is_dir,
                 bool local, const struct om_object *obj, struct om_attr *out);

/* Metadata stored on an existing directory (its marker object). */
void om_meta_dir_meta(struct om_meta *m, uint64_t ino, const struct om_object *obj);
/* Has directory ino a time of its own (its marker's, or set here)? Then
 * *mtime receives it: a chmod of the directory stores it again. */
bool om_meta_dir_own_mtime(struct om_meta *m, uint64_t ino, struct timespec *mtime);

/* The target of symlink ino when known (caller frees), else NULL. */
char *om_meta_link_target(struct om_meta *m, uint64_t ino);
void om_meta_set_link_target(struct om_meta *m, uint64_t ino, const char *target);

/* name no longer exists in parent. */
void om_meta_removed(struct om_meta *m, uint64_t parent, const char *name);

/* The server refused file ino's key for a name clash (a file where a
 * directory is, or the reverse, stored by another client): the names only
 * this mount knew (the file, and the directories made here above it that
 * hold nothing stored) are dropped, and the listings above it are read
 * again at the next lookup. *parent and *name (caller frees) receive the
 * topmost name dropped, for the kernel to forget; -ENOENT when ino is not
 * known or not pending. */
int om_meta_refused(struct om_meta *m, uint64_t ino, uint64_t *parent, char **name);

/* parent/name now is newparent/newname (a directory moves with its subtree;
 * whatever was at the destination is gone). */
void om_meta_renamed(struct om_meta *m, uint64_t parent, const char *name, uint64_t newparent,
                     const char *newname);

/* Does directory ino hold names created here and not stored yet? */
bool om_meta_has_pending(struct om_meta *m, uint64_t ino);

/* ---- directories ---- */

struct om_dirh;

int om_meta_opendir(struct om_meta *m, uint64_t ino, struct om_dirh **out);

/* Adds one entry to the caller's reply buffer; returns 0 when it fit, 1 when
 * the buffer is full (the entry was not added). */
typedef int (*om_meta_fill_fn)(void *ud, const char *name, const struct om_attr *attr,
                               off_t next_off);

/* Entries from offset off ("." and ".." first), until fill reports a full
 * buffer or the listing ends. With plus, every entry that fit counts one
 * kernel lookup. Fetches further listing pages as needed. Returns 0 or the
 * error of a failed listing request. */
int om_meta_readdir(struct om_meta *m, struct om_dirh *d, off_t off, bool plus,
                    om_meta_fill_fn fill, void *ud);
void om_meta_releasedir(struct om_meta *m, struct om_dirh *d);

/* ---- statistics ---- */

struct om_meta_stats {
    uint64_t inodes;
    uint64_t lookups;
    uint64_t lookups_cached;   /* answered without a request */
    uint64_t lookups_negative; /* answered ENOENT */
    uint64_t getattrs;
    uint64_t getattrs_cached;
    uint64_t list_pages;
    uint64_t list_entries;
    uint64_t skipped_names;
    uint64_t walk_listings;      /* directories listed ahead of a walk */
    uint64_t walk_listings_used; /* ... that the walk then opened */
    /* the budget (issue 16) */
    uint64_t bytes;                 /* held by the namespace now */
    uint64_t bytes_peak;            /* the most it held (seen as it grew) */
    uint64_t budget;                /* memory_budget; 0 = none */
    uint64_t listings_evicted;      /* complete listings freed to stay in budget */
    uint64_t entries_without_inode; /* readdirplus entries told with no inode */
    uint64_t invalidations;         /* names the kernel was asked to forget */
};
void om_meta_get_stats(struct om_meta *m, struct om_meta_stats *out);

/* Fill a struct stat from attributes. */
void om_attr_to_stat(const struct om_attr *a, struct stat *st);

#endif
