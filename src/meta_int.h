/* Internals shared by the files of the namespace module (meta.c: inodes,
 * lookups and attributes; listing.c: listings, readdir and whole-directory
 * listings for lookups; meta_change.c: changes made through the mount).
 *
 * Locking: m->lock guards every inode, every child table and every installed
 * listing; every mi_ function below expects it held unless noted. */
#ifndef OBJMOUNT_META_INT_H
#define OBJMOUNT_META_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "objmount/hash.h"
#include "objmount/meta.h"

#define NAME_MAX_BYTES 255

struct listing;

struct inode {
    struct om_hnode by_ino;  /* in m->inodes */
    struct om_hnode by_name; /* in parent->children when linked */
    uint64_t ino;
    struct inode *parent;
    char *name;
    char *key; /* full object key; directories end with '/', the root is the prefix */
    bool is_dir;
    bool linked;
    /* Its type changed under the kernel's inode (a file that turned out a
     * symlink): answers ESTALE until forgotten; the name gets a new inode. */
    bool retired;
    uint64_t nlookup;
    uint32_t refs; /* open handles, and one per child that points here */
    /* attributes */
    uint64_t size;
    struct timespec mtime;
    char etag[OM_ETAG_MAX];
    bool has_mode, has_uid, has_gid;
    uint32_t meta_mode, meta_uid, meta_gid;
    uint64_t attr_expire_ms;
    bool pending; /* created through the mount, not stored yet */
    bool has_mtime;  /* mtime comes from x-amz-meta-mtime */
    bool meta_known; /* mode/owner/type come from the object (HEAD, or made here) */
    char *link_target;        /* symlinks, once read */
    char content_type[128];   /* when a HEAD told it */
    char cached_etag[OM_ETAG_MAX]; /* what the kernel page cache holds */
    /* directories */
    struct om_htable children;
    struct listing *listing; /* complete, installed */
    bool slurping;           /* a background listing is being fetched */
    bool slurp_first_page;   /* ... and its first page has arrived */
    uint32_t slurp_pages;    /* ... pages so far */
    /* Bumped by every change made through the mount to the directory's
     * names: a listing fetched across a change is not installed (it would
     * bring back a removed name or hide a created one). */
    uint32_t gen;
    bool walk_queued;        /* waiting in m->walk (holds a reference) */
    uint64_t slurp_retry_ms; /* no new one before this */
};

struct dentry {
    struct om_hnode node;
    bool is_dir;
    bool gone; /* removed through the mount; readdir skips it */
    size_t idx; /* position in the listing */
    uint64_t size;
    time_t mtime;
    char *etag; /* NULL for directories */
    char name[];
};

struct listing {
    int refs;
    struct dentry **v;
    size_t n, cap;
    struct om_htable index;
    bool complete;
    uint64_t expire_ms;
    char *token; /* continuation token of the next page */
    bool started;
    bool read_by_handle; /* a readdir handle used it: a walk may follow */
    size_t walk_upto; /* entries before this were queued for a walk */
    bool from_walk; /* listed ahead of a walk, not yet opened */
};

struct om_dirh {
    struct inode *dir;
    struct listing *l;
    bool building; /* l belongs to this handle until complete */
    uint32_t gen;  /* dir->gen when the handle started listing */
};

struct om_meta {
    struct om_s3 *s3;
    struct om_meta_config cfg;
    char *prefix;
    pthread_mutex_t lock;
    struct om_htable inodes;
    uint64_t next_ino;
    struct inode *root;
    struct timespec mount_time;
    pthread_cond_t slurp_cond; /* a background listing made progress */
    int slurps;                /* background listings running */
    /* Directories a walk will open next (find, os.walk, rsync, du): listed
     * ahead, WALK_PARALLEL at a time; a stack, so the first to be opened is
     * listed first. Each entry holds a reference. */
    struct inode **walk;
    size_t nwalk;
    int walk_running;
    bool stopping;
    struct om_meta_stats st;
};

/* A name in dir was made, changed or removed through the mount. */
static inline void mi_dir_changed(struct inode *dir)
{
    if (dir)
        dir->gen++;
}

#define WALK_PARALLEL 8
#define WALK_AHEAD 64 /* subdirectories queued past the one being opened */
#define WALK_MAX_QUEUED 4096
/* An opendir waits for a background listing of its directory that has
 * fetched fewer pages than this (it will likely end soon); a larger one
 * keeps going while the handle lists by itself. */
#define WALK_WAIT_PAGES 4

/* Directories with more entries than this are not listed whole for lookups. */
#define SLURP_MAX_ENTRIES 1000000

uint64_t mi_name_hash(const char *name);

/* Whether a listed name's metadata is read by looking it up (a HEAD) rather
 * than taken from the listing: with metadata=head. A walk (find, os.walk)
 * would otherwise pay a HEAD per directory besides its listing. */
static inline bool mi_meta_by_lookup(const struct om_meta *m, bool is_dir)
{
    (void)is_dir;
    return m->cfg.metadata == OM_META_HEAD;
}

/* listings */
struct listing *mi_listing_new(void);
void mi_listing_put(struct listing *l);
struct dentry *mi_listing_find(const struct listing *l, const char *name);
int mi_listing_add(struct listing *l, const char *name, bool is_dir, uint64_t size, time_t mtime,
                   const char *etag);
bool mi_listing_fresh(const struct listing *l);
/* The name was removed: lookups miss it and readdir skips it (offsets of
 * open directory handles stay valid). */
void mi_listing_remove(struct listing *l, const char *name);
void mi_install_listing(struct om_meta *m, struct inode *dir, struct listing *l);
/* opened, a subdirectory of dir, is being opened for readdir after dir was
 * read the same way: a walk. List the WALK_AHEAD subdirectories after it
 * ahead of the walk, in the background. */
void mi_walk_ahead(struct om_meta *m, struct inode *dir, struct inode *opened);
/* List dir whole in the background (a lookup waits for its first page). */
void mi_start_slurp(struct om_meta *m, struct inode *dir);

/* inodes */
struct inode *mi_inode_get(struct om_meta *m, uint64_t ino);
/* om_meta_lookup; for_open false when the caller only needs the key and
 * type (unlink, rename): a small object is HEADed, not fetched whole. */
int mi_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
              bool for_open);
struct inode *mi_child_get(struct inode *dir, const char *name);
void mi_unlink_child(struct inode *i);
void mi_inode_free(struct om_meta *m, struct inode *i);
void mi_inode_unref(struct om_meta *m, struct inode *i);
struct inode *mi_inode_new(struct om_meta *m, struct inode *parent, const char *name, bool is_dir);
struct inode *mi_child_for(struct om_meta *m, struct inode *dir, const char *name, bool is_dir);
void mi_set_file_attrs(struct om_meta *m, struct inode *i, uint64_t size, time_t mtime,
                       const char *etag);
void mi_set_object_attrs(struct om_meta *m, struct inode *i, const struct om_s3_object *o);
/* Mode, owner and (when stored) mtime of an object into i; a missing mtime
 * keeps what i had. */
void mi_apply_object_meta(struct inode *i, const struct om_s3_object *o);
void mi_fill_attr(const struct om_meta *m, const struct inode *i, struct om_attr *a);
bool mi_valid_name(const char *name);

#endif
