/* The data cache: verified blocks of objects on local disk, shared by the
 * mounts of one cache_dir and kept across mounts.
 *
 * Blocks of OM_DCACHE_BLOCK bytes (the last one of an object shorter) are
 * files under cache_dir/data/XX/, named by a hash of endpoint, bucket and
 * key, a hash of the ETag and the block index: an object whose ETag
 * changed never finds the old blocks. Each file starts with a header
 * (magic, the SHA-256 of endpoint, bucket, key and ETag, index, length,
 * CRC32C of the data, CRC32C of the header); a block whose header or data
 * does not match is deleted and reported missing, never served. Blocks are
 * written to a temporary file and renamed into place without replacing,
 * so a crash leaves the old state or the new one, and a torn file fails
 * its checks.
 *
 * The bound holds across the mounts of one cache_dir: the bytes stored are
 * counted in cache_dir/data/usage under flock(2). What to keep is decided
 * by dcache_policy (frequency with aging, admission against LRU victims),
 * per mount; a mount learns the blocks of the others when it starts and
 * when a read looks for one.
 *
 * Reads and writes of block files run on the cache's own threads; callers
 * get a callback. A disk that fails (full, read-only, I/O errors) turns
 * storing off with one warning; reads then come from the network. */
#ifndef OBJMOUNT_DCACHE_H
#define OBJMOUNT_DCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objmount/digest.h"

#define OM_DCACHE_BLOCK (1024ULL * 1024)

struct om_dcache_config {
    const char *cache_dir; /* data lives in cache_dir/data */
    const char *endpoint, *bucket;
    uint64_t size;   /* bytes, when not auto */
    /* half the filesystem, within its free space above min_free_space and a
     * staging reserve (an eighth of the filesystem, at most 4 GiB) */
    bool auto_size;
    uint64_t min_free_space; /* never stores below it (with auto: plus the reserve) */
    int threads;     /* block I/O threads (default 4) */
};

struct om_dcache;

/* NULL with err filled when the cache cannot be used (the mount goes on
 * without it: the caller warns). */
struct om_dcache *om_dcache_new(const struct om_dcache_config *cfg, char *err, size_t errlen);
/* Waits for the block I/O under way. */
void om_dcache_free(struct om_dcache *dc);

/* One version of one object. */
struct om_dcache_obj {
    unsigned char id[32]; /* SHA-256 of endpoint, bucket, key, ETag */
    unsigned char kh[16]; /* of endpoint, bucket, key */
    unsigned char eh[8];  /* of the ETag */
    uint64_t size;
};
/* false when the object cannot be cached (no ETag). */
bool om_dcache_obj_init(struct om_dcache *dc, const char *key, const char *etag, uint64_t size,
                        struct om_dcache_obj *o);
uint64_t om_dcache_blocks(const struct om_dcache_obj *o);

/* How many blocks from first on (at most max) are, like block first,
 * cached (*cached true) or not. Counts one access of each of them for the
 * policy. A block this mount does not know costs one stat(2) (another
 * mount may have stored it). */
uint64_t om_dcache_run(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                       uint64_t max, bool *cached);

/* The same without counting accesses (for filling ahead of reads). */
uint64_t om_dcache_peek(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                        uint64_t max, bool *cached);
/* Store blocks [first, first+n) from buf now, on the caller's thread (the
 * same admission as om_dcache_store). */
void om_dcache_put(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                   uint64_t n, const char *buf);

typedef void om_dcache_done_fn(void *ud, int rc);
/* Read blocks [first, first+n) into buf (object offset first * BLOCK),
 * verified, on a cache thread; done(ud, 0) or done(ud, -errno) when a
 * block is missing or bad (it was dropped: fetch the range from the
 * store). Returns 0, or -ENOMEM (done is not called). done never runs
 * before this returns. */
int om_dcache_load(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                    uint64_t n, char *buf, om_dcache_done_fn *done, void *ud);
/* Open block i of o to read it straight from its file (a reply spliced
 * from it: no copy into memory): an fd whose bytes [*data_off, *data_off +
 * the block's length) are the block, or -ENOENT / -EBADMSG (the block is
 * dropped: fetch it from the store) / -ENOMEM. The block is verified
 * (header and CRC32C, over a read-only mapping) the first time this mount
 * opens its file, and again when the file is another one since (a new
 * inode or change time). Counts a hit; the caller closes the fd. */
int om_dcache_open_block(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i,
                         uint64_t *data_off);
/* Replies of at least OM_DCACHE_DIRECT_MIN bytes are read from the block
 * files with O_DIRECT into buffers the cache lends (OM_DCACHE_DIRECT_SIZE:
 * two rooms of OM_DCACHE_DIRECT_ROOM, one per block a reply touches; made
 * on first use, freed when none was lent for 5 s):
 * neither a second copy of the bytes in the page cache beside the
 * kernel's of the mounted file nor a copy out of it (decisions.md,
 * "Wholly cached objects"). om_dcache_direct_get gives NULL when all
 * are lent or the cache's filesystem refuses O_DIRECT. */
#define OM_DCACHE_DIRECT_MIN (128 * 1024)
#define OM_DCACHE_DIRECT_ROOM (OM_DCACHE_BLOCK + 4096)
#define OM_DCACHE_DIRECT_SIZE (2 * OM_DCACHE_DIRECT_ROOM)
char *om_dcache_direct_get(struct om_dcache *dc);
void om_dcache_direct_put(struct om_dcache *dc, char *buf);
/* Read bytes [off, off+n) of block i's data with O_DIRECT into room (a
 * room of a lent buffer): 0 and *data where they begin in room, or
 * -ENOENT / -EBADMSG (the block is dropped: fetch it from the store) /
 * -EIO / -EOPNOTSUPP (O_DIRECT refused: open the block instead). A block
 * this mount has not verified is read whole and checked there (as
 * om_dcache_open_block does). Counts a hit. */
int om_dcache_read_direct(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t i,
                          uint64_t off, size_t n, char *room, const char **data);
/* Start reading blocks [0, n) of o from disk into the page cache (a read of
 * them from their files is coming); no check, no wait. Nothing when its
 * reads will be direct (o at least OM_DCACHE_DIRECT_MIN long). */
void om_dcache_advise(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t n);
/* Offer blocks [first, first+n) held in buf (object offset first * BLOCK;
 * the last block may be the object's short tail) for storing. Returns
 * false when none will be stored (done is not called); else done(ud, rc)
 * is called once buf is not needed any more. */
bool om_dcache_store(struct om_dcache *dc, const struct om_dcache_obj *o, uint64_t first,
                     uint64_t n, const char *buf, om_dcache_done_fn *done, void *ud);
/* Bytes fetched from the store for lack of cached blocks. */
void om_dcache_count_miss(struct om_dcache *dc, uint64_t blocks, uint64_t bytes);

/* Writes before the cache: evict blocks, least valued first, until bytes
 * are freed or nothing this mount knows of is left. Returns the bytes
 * freed. No lock held by the caller. */
uint64_t om_dcache_reclaim(struct om_dcache *dc, uint64_t bytes);

/* Remove every block of key (all its versions), or everything when key is
 * NULL. Returns the number of blocks removed or -errno. */
long om_dcache_drop(struct om_dcache *dc, const char *key);

struct om_dcache_stats {
    uint64_t limit_bytes;
    uint64_t size_bytes; /* stored by all mounts of this cache_dir */
    uint64_t blocks;     /* blocks this mount knows of */
    uint64_t hits, hit_bytes;
    uint64_t misses, miss_bytes;
    uint64_t inserts, insert_bytes;
    uint64_t rejected; /* not admitted: what it would displace is read more */
    uint64_t evictions;
    uint64_t reclaimed_bytes; /* given back to writes (om_dcache_reclaim) */
    uint64_t corrupt; /* bad blocks dropped */
    uint64_t verified;  /* block files checked before their first reply (om_dcache_open_block) */
    uint64_t direct_reads; /* blocks read for replies with O_DIRECT (om_dcache_read_direct) */
    uint64_t direct_buffer_bytes; /* their buffers held now (freed after 5 s unused) */
    uint64_t in_flight; /* block reads and writes queued or running */
    bool storing;       /* false once a disk failure turned storing off */
};
void om_dcache_get_stats(struct om_dcache *dc, struct om_dcache_stats *out);

#endif
