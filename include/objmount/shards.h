/* Tar shards shown as directories (-o shards=tar, issue 37 phase 2): the
 * mount's side of src/shard/. An object whose name ends in ".tar" is shown
 * as a directory of its members once its index is known; the index comes
 * from objmount's own index file under cache_dir/shards (verified against
 * the shard's endpoint, bucket, key, ETag and size), else from an index
 * object beside the shard (DALI's wds2idx, WebDataset's wids) not older
 * than the shard, else from one pass over the shard's headers (hopping
 * over members larger than skip_max), which is then kept. A shard
 * replaced in the bucket (another ETag) gets a new index and new inode
 * numbers.
 *
 * Members are read as byte ranges of the shard through the read pool
 * (reader.h), so their memory is the read buffers' (memory_limit) and
 * their blocks go to the data cache under the shard's key: a read the
 * shard read plan (shard_plan.h) puts in tar order goes through the
 * shard's streaming handle, whose sequential prefetch is the one GET (or
 * a few large ranges) that serves every member in order; the others go
 * through the shard's ranged handle, the whole member at once when it is
 * at most small_file_size. An order hint (OM_IOC_PREFETCH on the shard's
 * directory) in tar order is streamed; in another order, the shard is read
 * through once in the background when the hint names most of it and it
 * fits a quarter of memory_limit, else the next hinted members are fetched
 * ahead by the background threads.
 *
 * Inode numbers: the shard's directory keeps the namespace's inode of the
 * object; its members and the directories only their names imply get
 * numbers with OM_SHARDS_INO_BIT set (the shard's slot and the member's
 * number), which the namespace never gives. They need no forget: they
 * stay valid for the life of the mount.
 *
 * Thread-safe: one lock for the table, one per shard; neither is held
 * during a request or a copy. */
#ifndef OBJMOUNT_SHARDS_H
#define OBJMOUNT_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objmount/meta.h"
#include "objmount/reader.h"
#include "objmount/store.h"

#define OM_SHARDS_INO_BIT (1ULL << 62)

struct om_shards_config {
    const char *cache_dir; /* index files under cache_dir/shards; NULL: none kept */
    const char *endpoint;  /* the shard's identity in an index file */
    const char *bucket;
    uint64_t small_member;  /* a ranged read fetches a member up to this whole */
    uint64_t part_size;     /* the stream keeps about this much behind it */
    uint64_t memory_limit;  /* the read buffers': a hinted shard up to a quarter is read whole */
    bool keep_cache;        /* members keep the kernel's page cache across opens */
};

struct om_shards;
struct om_shard_file;

/* NULL on ENOMEM. store and readers are borrowed and outlive it. */
struct om_shards *om_shards_new(struct om_store *store, struct om_readers *readers,
                                const struct om_shards_config *cfg);
/* Every file must be closed first. */
void om_shards_free(struct om_shards *ss);

/* Is name the name of a shard (ends in ".tar", not only ".tar")? */
bool om_shards_name(const char *name);
/* Is ino a member's (or implied directory's) inode? */
static inline bool om_shards_member_ino(uint64_t ino)
{
    return (ino & OM_SHARDS_INO_BIT) != 0;
}

/* The object key, seen as file (its namespace inode, size, ETag, mtime,
 * mode, owner) is a shard: find or build its index (I/O: an index file, an
 * index object, or a pass over the shard). 0 and the directory's
 * attributes in *dir (ino: file->ino), or a negative errno when it is not
 * shown as a directory (not a tar, damaged, compressed, too large: logged
 * once per version): it stays a file. Caller holds no lock. */
int om_shards_attach(struct om_shards *ss, const char *key, const struct om_attr *file,
                     struct om_attr *dir);
/* The same, in the background (a listing showed the shard: its lookup
 * will come); at most 64 waiting, the rest are loaded by their lookups.
 * Takes a copy of key. No I/O in the caller. */
void om_shards_attach_later(struct om_shards *ss, const char *key, const struct om_attr *file);
/* ino is a namespace inode attached as a shard directory: true, and its
 * directory attributes in *dir when dir is not NULL. No I/O. */
bool om_shards_is_dir(struct om_shards *ss, uint64_t ino, struct om_attr *dir);
/* ino is inside a shard or a shard's directory (where writes are EROFS). */
bool om_shards_owns(struct om_shards *ss, uint64_t ino);

/* name in directory parent (a shard's directory or a directory inside
 * one). 0 and *a, -ENOENT, -ENOTDIR, -ESTALE (a replaced shard's inode). */
int om_shards_lookup(struct om_shards *ss, uint64_t parent, const char *name, struct om_attr *a);
int om_shards_getattr(struct om_shards *ss, uint64_t ino, struct om_attr *a);
/* A symbolic link's target (caller frees). */
int om_shards_readlink(struct om_shards *ss, uint64_t ino, char **target);

/* The entries of directory ino from position off on (0: the first; "."
 * and ".." included), each with the position of the next; fill returns
 * non-zero to stop. 0 or a negative errno. */
typedef int (*om_shards_fill_cb)(void *ud, const char *name, const struct om_attr *a, off_t next);
int om_shards_readdir(struct om_shards *ss, uint64_t ino, off_t off, om_shards_fill_cb fill,
                      void *ud);

/* Open member ino for reading. 0 and *f, -EISDIR, -ENOENT, -ENOMEM. */
int om_shards_open(struct om_shards *ss, uint64_t ino, struct om_shard_file **f);
/* Read [off, off + len) of the member for process pid. Bytes read (fewer
 * only at the member's end, 0 past it), or -EIO (the shard changed: with a
 * log line; or the bytes could not be fetched). */
ssize_t om_shards_read(struct om_shards *ss, struct om_shard_file *f, pid_t pid, char *buf,
                       size_t len, uint64_t off);
void om_shards_close(struct om_shards *ss, struct om_shard_file *f);
/* Whether the file's opens may keep the kernel's page cache. */
bool om_shards_keep_cache(const struct om_shards *ss);

/* An order hint (prefetch.h's format: 'r' or 'a', paths relative to the
 * directory separated by '\n', a NUL) on shard directory ino. 0, -EINVAL,
 * -ENOTDIR (not a shard directory), -ENOMEM. Unknown names are skipped. */
int om_shards_hint(struct om_shards *ss, uint64_t ino, const char *buf, size_t len);

struct om_shards_stats {
    uint64_t shards;          /* shards shown as directories (indexes attached) */
    uint64_t not_shards;      /* .tar objects left as files (not a tar, damaged, ...) */
    uint64_t index_builds;    /* indexes built by a pass over the headers */
    uint64_t index_hits;      /* ... read from the kept index file instead */
    uint64_t index_objects;   /* ... read from an index object beside the shard */
    uint64_t index_scan_gets; /* GETs of the passes over headers */
    uint64_t member_opens;
    uint64_t members_read;    /* opens that read at least one byte */
    uint64_t read_bytes;
    uint64_t stream_reads;    /* reads the plan gave the stream */
    uint64_t range_reads;     /* ... a ranged read */
    uint64_t hinted_prefetches; /* members fetched ahead of a hint in another order */
    uint64_t hinted_whole_shards; /* shards read through for a hint naming most of them */
    uint64_t gets;            /* GETs of the shards' bytes (passes included) */
    uint64_t refused_writes;  /* EROFS answered inside shard directories */
};
void om_shards_get_stats(struct om_shards *ss, struct om_shards_stats *out);
/* Count a write refused with EROFS in a shard directory and log it (once
 * per 100 refusals). */
void om_shards_refused(struct om_shards *ss, const char *what, uint64_t ino);

#endif
