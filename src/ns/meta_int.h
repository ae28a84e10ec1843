/* Internals shared by the files of the namespace module, top first (each
 * uses only files below it; tools/layers.sh checks):
 *   meta_change.c   changes made through the mount
 *   meta_listed.c   listed files for the prefetch across files
 *   meta_readdir.c  directory handles
 *   meta.c          construction, lookups and attributes
 *   meta_slurp.c    whole-directory listings in the background, for lookups
 *                   and ahead of walks
 *   meta_inode.c    inodes: allocation, children, references, attributes
 *   meta_list.c     a directory's listing filled from LIST pages, installed
 *   meta_budget.c   the memory budget: LRU of listings, the reclaim
 *   meta_links.c    what listings do not show, kept past the inodes: names
 *                   with metadata of their own, own times on entries
 *   listing.c       the listing container
 *   meta_etag.c     ETags kept as 16 bytes
 *   meta_table.c    the inode tables
 *   meta_base.c     block sizes for the budget, name rules and hash, extras
 *
 * Locking: m->lock guards every inode, every child table and every installed
 * listing; every mi_ function below expects it held unless noted. */
#ifndef OBJMOUNT_META_INT_H
#define OBJMOUNT_META_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "objmount/hash.h"
#include "objmount/meta.h"

#define NAME_MAX_BYTES 255

/* ---- the namespace's memory (issue 16) ----
 * Every allocation the namespace keeps (inodes and what they own, listings
 * and their chunks, arrays and indexes, table slots) is charged to one
 * counter when made and uncharged when freed, at the allocator's own size
 * (usable size and header). Updated with relaxed atomics: listings being
 * built by a directory handle grow without m->lock. */

/* Bytes the allocator holds for p; 0 for NULL (meta_base.c, as mi_valid_name,
 * mi_name_hash and mi_extra). */
size_t mi_mem_size(const void *p);
static inline void mi_mem_charge(uint64_t *mem, const void *p)
{
    if (mem && p)
        __atomic_add_fetch(mem, mi_mem_size(p), __ATOMIC_RELAXED);
}
static inline void mi_mem_uncharge(uint64_t *mem, const void *p)
{
    if (mem && p)
        __atomic_sub_fetch(mem, mi_mem_size(p), __ATOMIC_RELAXED);
}
/* Uncharge n bytes (what mi_mem_size told of a block since reallocated). */
static inline void mi_mem_sub(uint64_t *mem, size_t n)
{
    if (mem)
        __atomic_sub_fetch(mem, n, __ATOMIC_RELAXED);
}
/* Uncharge and free p. */
static inline void mi_mem_free(uint64_t *mem, void *p)
{
    mi_mem_uncharge(mem, p);
    free(p);
}

struct listing;

/* How an ETag is stored: the usual forms as 16 bytes (a plain MD5 in
 * lowercase hex; md5-N of a multipart upload, N without leading zeros and
 * at most 65535), anything else as text. The text form round-trips exactly. */
enum mi_etag_kind {
    MI_ETAG_NONE = 0, /* empty or unknown */
    MI_ETAG_MD5,
    MI_ETAG_MULTI,
    MI_ETAG_TEXT,
};

/* The kind of etag (NULL is MI_ETAG_NONE); for MD5 and MULTI, md5 and parts
 * receive the binary form. */
enum mi_etag_kind mi_etag_parse(const char *etag, uint8_t md5[16], uint16_t *parts);
/* The text of a binary ETag (MD5 or MULTI) into out. */
void mi_etag_format(enum mi_etag_kind kind, const uint8_t md5[16], uint16_t parts,
                    char out[OM_ETAG_MAX]);

/* Inodes found by number or by name: open addressing, linear probing, at
 * most 3/4 full (src/ns/meta_table.c). */
struct mi_table {
    struct inode **slots;
    size_t cap; /* a power of two, or 0 */
    size_t n;
    uint64_t *mem; /* the namespace's byte count its slots are charged to, or NULL */
};

/* Returns 0 or -ENOMEM. mem as in struct mi_table. */
int mi_table_init(struct mi_table *t, size_t initial, uint64_t *mem);
void mi_table_destroy(struct mi_table *t);
struct inode *mi_table_ino(const struct mi_table *t, uint64_t ino);
struct inode *mi_table_name(const struct mi_table *t, const char *name);
/* Add i, keyed by its number or by its name (which must not change while
 * it is in t). -ENOMEM only when t is full and cannot grow. */
int mi_table_add(struct mi_table *t, struct inode *i, bool by_name);
void mi_table_del(struct mi_table *t, struct inode *i, bool by_name);

/* What few inodes need: s3fs metadata, HEAD-only fields, kept text. */
struct inode_extra {
    uint32_t meta_mode, meta_uid, meta_gid; /* valid when has_mode/has_uid/has_gid */
    char *link_target;                      /* symlinks, once read */
    char *content_type;                     /* when a HEAD told it */
    /* what the kernel page cache holds, when not the inode's ETag
     * (cached_is_etag); NULL is "" */
    char *cached_etag;
    char *key;  /* a file unlinked from its name: the key it had */
    char *name; /* renamed to a name longer than the inline one */
};

/* What only directories have. */
struct inode_dir {
    struct inode_extra x;
    char *key; /* ends with '/'; the root's is the prefix */
    struct mi_table children; /* by name, the linked ones */
    struct listing *listing; /* complete, installed */
    uint64_t slurp_retry_ms; /* no new background listing before this */
    uint32_t slurp_pages;    /* pages of the background listing so far */
    /* Bumped by every change made through the mount to the directory's
     * names: a listing fetched across a change is not installed (it would
     * bring back a removed name or hide a created one). */
    uint32_t gen;
    bool slurping;         /* a background listing is being fetched */
    bool slurp_first_page; /* ... and its first page has arrived */
    bool walk_queued;      /* waiting in m->walk (holds a reference) */
    uint32_t opens;        /* directory handles open on it */
};

/* One per name the kernel knows (and per directory on the way). Files own
 * no key: it is their directory's key and their name (mi_inode_key). */
struct inode {
    uint64_t ino;
    struct inode *parent;
    uint64_t nlookup;
    uint64_t size;
    int64_t mtime_sec;
    uint64_t attr_expire_ms;
    union {
        struct inode_extra *x; /* files: NULL until needed */
        struct inode_dir *d;   /* directories: always */
    };
    union {
        uint8_t md5[16];
        char *text; /* MI_ETAG_TEXT, owned */
    } etag;
    uint32_t refs; /* open handles, and one per child that points here */
    uint32_t mtime_nsec;
    uint16_t etag_parts;
    uint16_t is_dir : 1;
    uint16_t linked : 1; /* in parent->d->children */
    /* Its type changed under the kernel's inode (a file that turned out a
     * symlink): answers ESTALE until forgotten; the name gets a new inode. */
    uint16_t retired : 1;
    uint16_t pending : 1;    /* created through the mount, not stored yet */
    uint16_t has_mtime : 1;  /* mtime comes from x-amz-meta-mtime */
    uint16_t meta_known : 1; /* mode/owner/type come from the object (HEAD, or made here) */
    uint16_t has_mode : 1, has_uid : 1, has_gid : 1; /* values in the extra */
    uint16_t cached_is_etag : 1;                     /* the kernel page cache holds this ETag */
    uint16_t etag_kind : 2;
    /* used since the reclaim's clock hand last passed (second chance) */
    uint16_t recent : 1;
    uint8_t name_len;   /* room of the inline name without its NUL (at most 255) */
    char name_inline[]; /* the name as created; see mi_name() */
};

/* A listed name. Entries live in their listing's arena and are freed with
 * it. */
struct dentry {
    uint64_t size;
    int64_t mtime;
    uint8_t md5[16]; /* MI_ETAG_MD5, MI_ETAG_MULTI */
    uint16_t etag_parts;
    uint8_t is_dir : 1;
    uint8_t gone : 1; /* removed through the mount; readdir skips it */
    uint8_t etag_kind : 2;
    /* given to the kernel by readdirplus without an inode (memory pressure):
     * its lookup is answered from the listing, as the attributes would have
     * been */
    uint8_t told_plain : 1;
    /* mtime (with mtime_nsec) is the file's own time (x-amz-meta-mtime),
     * kept from its inode when the kernel forgot it, for this version */
    uint8_t own_mtime : 1;
    uint8_t etag_room; /* MI_ETAG_TEXT: bytes after the name kept for the text */
    uint32_t mtime_nsec; /* with own_mtime */
    char name[];       /* then, for MI_ETAG_TEXT, the ETag's text */
};

struct listing {
    int refs;
    uint64_t *mem; /* the namespace's byte count (mi_listing_new) */
    /* installed listings, most recently used first (m->lru): what the
     * reclaim frees past the budget, from the tail */
    struct listing *lru_prev, *lru_next;
    struct inode *dir; /* while installed */
    struct dentry **v; /* in listing order */
    size_t n, cap;
    /* open addressing on the name's hash: entry number + 1, 0 when free */
    uint32_t *index;
    size_t index_cap; /* a power of two */
    /* the arena: chunks linked through their first word */
    void *chunks;
    size_t chunk_used, chunk_cap;
    bool complete;
    uint64_t expire_ms;
    char *token; /* continuation token of the next page */
    bool started;
    bool read_by_handle; /* a readdir handle used it: a walk may follow */
    size_t walk_upto; /* entries before this were queued for a walk */
    bool from_walk; /* listed ahead of a walk, not yet opened */
    size_t own_mtimes; /* entries with own_mtime: the next listing takes them over */
};

struct om_dirh {
    struct inode *dir;
    struct listing *l;
    bool building; /* l belongs to this handle until complete */
    uint32_t gen;  /* dir->gen when the handle started listing */
};

struct om_meta {
    struct om_store *store;
    struct om_meta_config cfg;
    char *prefix;
    pthread_mutex_t lock;
    struct mi_table inodes; /* by number */
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
    /* The budget (issue 16, src/ns/meta_budget.c): bytes charged now (atomic),
     * installed listings in LRU order, the reclaim thread. */
    uint64_t mem;
    struct listing *lru_head, *lru_tail;
    pthread_t reclaim;
    bool reclaim_running, reclaim_stopping;
    pthread_cond_t reclaim_cond;
    /* mi_inode_unheld, set by om_meta_new: mi_evict_listings frees a
     * directory kept for its listing through it (the budget is below the
     * inodes) */
    void (*unheld)(struct om_meta *m, struct inode *i);
    size_t clock_hand; /* next slot of m->inodes the reclaim looks at */
    /* Names whose metadata a listing does not show (symlinks, a mode or
     * owner of their own, a time of their own no listing entry kept), kept
     * after their inodes are freed (a hash of each key; mi_links_*): once
     * the kernel forgot one this mount made or looked up (drop_caches,
     * memory pressure, the budget's reclaim), readdirplus handed out a
     * symlink as a regular file (cp -a, then diff -r) and a file with the
     * listing's mode and time; their lookups HEAD them instead. */
    uint64_t *links; /* open addressing, 0 free */
    size_t nlinks, links_cap;
    /* The numbers of inodes the kernel forgot, by a hash of their keys
     * (mi_numbers_*): the name's next inode takes its number back, so a
     * number stays the file's across drop_caches and memory pressure. GNU
     * tar extracts a symlink with ".." as an empty placeholder file first
     * and, at its end, replaces it only if the placeholder still has its
     * device and inode number: a number that changed left an empty file
     * where the symlink was. A cache, one entry per slot (a collision
     * overwrites), growing to MI_NUMBERS_MAX slots. */
    struct mi_number {
        uint64_t h;   /* 0: free */
        uint64_t ino; /* the top bit: a directory's */
    } *numbers;
    size_t numbers_cap, numbers_since_growth;
};

/* A name in dir was made, changed or removed through the mount. */
static inline void mi_dir_changed(struct inode *dir)
{
    if (dir && dir->is_dir)
        dir->d->gen++;
}

static inline const char *mi_name(const struct inode *i)
{
    const char *longer = i->is_dir ? i->d->x.name : i->x ? i->x->name : NULL;
    return longer ? longer : i->name_inline;
}

/* Remember that dirkey + name has metadata its listing entry does not
 * show (at most MI_LINKS_MAX names; past that, nothing more is
 * remembered). Caller holds m->lock. */
void mi_links_add(struct om_meta *m, const char *dirkey, const char *name);
/* Had dirkey + name metadata of its own when this mount last knew it? A
 * name that was replaced since, or a hash collision, answers true too: the
 * caller then asks the store (one HEAD), never trusts this for the type. */
bool mi_links_has(const struct om_meta *m, const char *dirkey, const char *name);

/* Remember the number of i, which is being freed (a linked, current
 * inode), for the next inode of its name. */
void mi_numbers_keep(struct om_meta *m, const struct inode *i);
/* The number a freed inode of dirkey + name of this type had, taken out
 * of the cache; 0 when none is known or it is in use. */
uint64_t mi_numbers_take(struct om_meta *m, const char *dirkey, const char *name, bool is_dir);

/* The extra of i, allocated when missing; NULL on ENOMEM. */
struct inode_extra *mi_extra(struct om_meta *m, struct inode *i);
/* The extra of i when it has one. */
static inline const struct inode_extra *mi_extra_if(const struct inode *i)
{
    return i->is_dir ? &i->d->x : i->x;
}

/* The object key of i (caller frees; directories end with '/'); NULL on
 * ENOMEM. */
char *mi_inode_key(const struct inode *i);
/* i's ETag as text into out ("" when unknown). */
void mi_inode_etag(const struct inode *i, char out[OM_ETAG_MAX]);
/* Set i's ETag (NULL or "" clears it). A text ETag that cannot be stored
 * (ENOMEM) leaves it unknown. */
void mi_inode_set_etag(struct om_meta *m, struct inode *i, const char *etag);
/* The listed ETag of d as text into out ("" for directories). */
void mi_dentry_etag(const struct dentry *d, char out[OM_ETAG_MAX]);
/* Set d's ETag; false (d unchanged) for a text longer than d's room. */
bool mi_dentry_set_etag(struct dentry *d, const char *etag);
/* Does d list the version of file i that i's attributes came from (same
 * size and ETag)? */
bool mi_listed_same_version(const struct inode *i, const struct dentry *d);

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

/* listings (listing.c) */
/* An empty listing charged to m's byte count (m NULL: to none); NULL on
 * ENOMEM. */
struct listing *mi_listing_new(struct om_meta *m);
void mi_listing_put(struct listing *l);
struct dentry *mi_listing_find(const struct listing *l, const char *name);
/* Set the ETag of l's entry d: the entry (d, or a new record in d's place
 * when the text needs more room; ENOMEM leaves the ETag unknown). */
struct dentry *mi_listing_set_etag(struct listing *l, struct dentry *d, const char *etag);
/* The listing's (upload) time for d: an own time d kept goes. */
void mi_listing_set_mtime(struct listing *l, struct dentry *d, time_t mtime);
/* The entry number of name in l, or -1. */
long mi_listing_pos(const struct listing *l, const char *name);
int mi_listing_add(struct listing *l, const char *name, bool is_dir, uint64_t size, time_t mtime,
                   const char *etag);
bool mi_listing_fresh(const struct listing *l);
/* The name was removed: lookups miss it and readdir skips it (offsets of
 * open directory handles stay valid). */
void mi_listing_remove(struct listing *l, const char *name);

/* filling and installing listings (meta_list.c) */
/* Install the complete listing l on dir (its LRU place, the budget check). */
void mi_install_listing(struct om_meta *m, struct inode *dir, struct listing *l);
/* One LIST page of the directory whose key is dirkey (from the manifest
 * when the mount has one, else from S3) added to l, which the caller owns;
 * *next: the continuation token (malloc'd), NULL after the last page. No
 * lock held. */
int mi_list_page(struct om_meta *m, struct listing *l, const char *dirkey, const char *token,
                 char **next, struct om_store_error *err);

/* background listings (meta_slurp.c) */
/* opened, a subdirectory of dir, is being opened for readdir after dir was
 * read the same way: a walk. List the WALK_AHEAD subdirectories after it
 * ahead of the walk, in the background. */
void mi_walk_ahead(struct om_meta *m, struct inode *dir, struct inode *opened);
/* List dir whole in the background (a lookup waits for its first page). */
void mi_start_slurp(struct om_meta *m, struct inode *dir);

/* inodes (meta_inode.c; mi_lookup in meta.c) */
/* An inode named name (at most NAME_MAX_BYTES), unlinked, not in m->inodes;
 * directories get key. NULL on ENOMEM. */
struct inode *mi_inode_alloc(struct om_meta *m, const char *name, bool is_dir, const char *key);
/* Free what i owns and i, unlinked from nothing (mi_inode_alloc's undo). */
void mi_inode_release(struct om_meta *m, struct inode *i);
struct inode *mi_inode_get(struct om_meta *m, uint64_t ino);
/* om_meta_lookup; for_open false when the caller only needs the key and
 * type (unlink, rename): a small object is HEADed, not fetched whole. */
int mi_lookup(struct om_meta *m, uint64_t parent, const char *name, struct om_attr *out,
              bool for_open);
struct inode *mi_child_get(struct inode *dir, const char *name);
/* Unlink i from its name; a file keeps the key it had. */
void mi_unlink_child(struct om_meta *m, struct inode *i);
void mi_inode_free(struct om_meta *m, struct inode *i);
/* Drop a reference to i; an inode neither the kernel (nlookup) nor
 * anything here (refs) holds is freed, and so on up its parents, except a
 * directory with a fresh listing (mi_keeps_listing). */
void mi_inode_unref(struct om_meta *m, struct inode *i);
/* i is held by nothing: free it (mi_inode_unref without a reference to
 * drop). */
void mi_inode_unheld(struct om_meta *m, struct inode *i);
/* Does directory i stay when nothing holds it? When its complete listing
 * is fresh: the kernel forgets a directory's inode under memory pressure
 * (and drop_caches), and the next lookup of its name finds it with its
 * listing, not a LIST again (a data set's folder after each epoch). The
 * listing's eviction frees it (mi_evict_listings). */
bool mi_keeps_listing(const struct om_meta *m, const struct inode *i);
struct inode *mi_inode_new(struct om_meta *m, struct inode *parent, const char *name, bool is_dir);
struct inode *mi_child_for(struct om_meta *m, struct inode *dir, const char *name, bool is_dir);
void mi_set_file_attrs(struct om_meta *m, struct inode *i, uint64_t size, time_t mtime,
                       const char *etag);
/* The kernel page cache now holds i's ETag. */
void mi_set_cached_etag(struct om_meta *m, struct inode *i);
struct timespec mi_mtime(const struct inode *i);
/* A file's attributes from its listing entry d: size, ETag, and the
 * upload time unless i's own time (metadata), or the one d kept, belongs
 * to the same version; another version's metadata becomes unknown. */
void mi_set_listed_attrs(struct om_meta *m, struct inode *i, const struct dentry *d);
/* Do two listing entries show the same version (size and a known ETag)? */
bool mi_dentries_same_version(const struct dentry *a, const struct dentry *b);
/* The own times of old's entries onto l's entries of the same versions. */
void mi_listing_take_times(struct listing *l, const struct listing *old);
/* l goes with no listing to take its own times over: their names are
 * looked up with a HEAD from then on (mi_links_add). */
void mi_listing_drop_times(struct om_meta *m, const char *dirkey, const struct listing *l);
/* Link i under its parent by its name; -ENOMEM leaves it unlinked. */
int mi_link_child(struct om_meta *m, struct inode *i);
void mi_set_object_attrs(struct om_meta *m, struct inode *i, const struct om_object *o);
/* Mode, owner and (when stored) mtime of an object into i; a missing mtime
 * keeps what i had. Without memory for the values (ENOMEM) the defaults
 * show. */
void mi_apply_object_meta(struct om_meta *m, struct inode *i, const struct om_object *o);
void mi_fill_attr(const struct om_meta *m, const struct inode *i, struct om_attr *a);
bool mi_valid_name(const char *name);

/* budget (src/ns/meta_budget.c) */
/* The low watermark: a reclaim stops there (90% of the budget). */
uint64_t mi_budget_low(uint64_t budget);
/* Bytes to free now: bytes - low once bytes is past the budget, and while
 * a reclaim is under way (reclaiming) until bytes is at the low mark; 0
 * without a budget. */
uint64_t mi_budget_excess(uint64_t bytes, uint64_t budget, bool reclaiming);
/* Whether an installed listing may be freed: complete, no handle reads it. */
bool mi_listing_evictable(const struct listing *l);
/* What the reclaim does with inode i. */
enum mi_victim {
    MI_KEEP,          /* the root, open, read by a handle, busy, unknown to the kernel */
    MI_SECOND_CHANCE, /* used since the hand last passed: clear its bit */
    MI_FORGET,        /* ask the kernel to forget its name */
};
enum mi_victim mi_victim_of(const struct inode *i, const struct inode *root);
/* A listing was installed on dir, or used (a lookup, an opendir): it goes
 * to the head of m's LRU. */
void mi_lru_touch(struct om_meta *m, struct listing *l);
/* dir's installed listing goes (replaced, evicted or freed with dir). */
void mi_lru_remove(struct om_meta *m, struct listing *l);
/* Whether readdirplus should tell files without an inode: the namespace is
 * at its low watermark or above. */
bool mi_under_pressure(const struct om_meta *m);
/* The namespace grew: wake the reclaim when past the budget. */
void mi_budget_check(struct om_meta *m);
/* Free installed listings no handle reads from the LRU's tail until want
 * bytes went; returns the bytes freed. */
uint64_t mi_evict_listings(struct om_meta *m, uint64_t want);
int mi_reclaim_start(struct om_meta *m);
/* Stop and join the reclaim thread. Caller does not hold m->lock. */
void mi_reclaim_stop(struct om_meta *m);

#endif
