/* The read path: per-handle read state over one global buffer pool.
 *
 * - Objects up to small_file_size are fetched whole by the first read.
 * - Sequential readers get a prefetch window that doubles from
 *   prefetch_initial to prefetch_max, fetched as parallel ranged GETs of up
 *   to part_size each.
 * - Random reads fetch what is asked, rounded to 64 KiB, and keep it for
 *   re-reads; they start no prefetch. An object read at random is filled
 *   whole in the background: into the data cache when there is one, else
 *   into memory when it is at most a quarter of memory_limit.
 * - Handles of the same object version share what is fetched.
 *   (These decisions are om_read_plan_make's, in objmount/read_plan.h.)
 * - Every GET carries If-Match with the ETag seen at open, and every
 *   response's ETag and object size are compared with the open's, so one
 *   open never mixes two versions of an object (some stores ignore
 *   If-Match on GET).
 * - Buffers come from one pool with a byte budget. Prefetch only uses what
 *   is free above a reserve; a read that needs data evicts unused buffers
 *   (least recently used first) or waits for some to be released.
 *
 * Thread-safe: one pool lock guards every reader's buffers; it is never
 * held during a copy to the caller or a request. */
#ifndef OBJMOUNT_READER_H
#define OBJMOUNT_READER_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "objmount/store.h"

struct om_dcache;

struct om_readers_config {
    uint64_t memory_limit;
    uint64_t part_size;
    uint64_t prefetch_initial;
    uint64_t prefetch_max;
    uint64_t small_file_size;
    /* the kernel's readahead (max_readahead): how far past a reader's last
     * read the kernel may ask on its own */
    uint64_t kernel_readahead;
    /* a lookup is answered from the attributes of a GET the pool holds
     * only while they are younger than this (the mount's attr_timeout) */
    uint64_t attr_ttl_ms;
    struct om_dcache *dcache; /* NULL: no data cache */
};

struct om_readers;
struct om_reader;

/* NULL on ENOMEM. s3 is borrowed. */
struct om_readers *om_readers_new(struct om_store *store, const struct om_readers_config *cfg);
/* Every reader must be closed first. */
void om_readers_free(struct om_readers *rs);

/* Look a small object up by reading it whole: one GET where a HEAD and then
 * the GET of the first read would take two round trips. Fills obj as
 * om_store_head does (size, ETag, metadata; size is the listing's guess, the
 * answer wins). The body waits in the pool, evictable, for the next
 * om_reader_open of key with the same ETag. Without buffer room, for an
 * object emptied since it was listed, or when the GET fails (other than
 * not found), a HEAD answers; so it does while recent lookups were mostly
 * not followed by opens (stat-only work). 0 or a negative errno. */
/* A lookup of a small object: its bytes come with its metadata (one GET,
 * kept for the open that follows), unless few lookups are opens, or the
 * data cache holds the version the listing showed (listed_etag): a HEAD
 * then. */
int om_readers_fetch_whole(struct om_readers *rs, const char *key, uint64_t size,
                           const char *listed_etag,
                           struct om_object *obj, struct om_store_error *err);

/* The prefetch across files expects an open of (key, etag, size): fetch
 * its first max bytes (whole for small files) from spare memory above the
 * reserve, to wait for that open as a lookup's object does. It is dropped,
 * and its bytes count as wasted, when nobody opens it within 30 s or its
 * buffers are needed. 0, -EEXIST (open, or fetched already), -ENOMEM (no
 * spare memory: nothing fetched) or -EINVAL (no ETag, empty). */
int om_readers_prefetch(struct om_readers *rs, const char *key, const char *etag, uint64_t size,
                        uint64_t max);

/* A read handle on key as seen at open (size, etag; etag may be ""). NULL
 * on ENOMEM. */
struct om_reader *om_reader_open(struct om_readers *rs, const char *key, uint64_t size,
                                 const char *etag);

/* Read [off, off+len) into buf. Returns the bytes read, which is less than
 * len only at the end of the object (0 at or past it, without a request),
 * -ESTALE when the object changed since open (another ETag or size: no byte
 * of the other version is returned), -ENOENT when it is gone (bytes still
 * in memory are served), or -EIO when the bytes cannot all be
 * fetched (after the engine's retries). Never a short read mid-object.
 * Caller holds no lock. */
ssize_t om_reader_read(struct om_reader *r, char *buf, size_t len, uint64_t off);

/* The same read without a copy: v receives iovecs pointing into the pool's
 * buffers, which stay pinned (neither evicted nor freed) until
 * om_reader_view_done(). Returns what om_reader_read would; after a
 * positive return om_reader_view_done() must be called (and the reader is not
 * closed before it is), after 0 or an error nothing is held. */
#define OM_READ_VIEW_FEW 8
struct om_read_seg; /* a pooled buffer, private to reader.c */
struct om_read_view {
    uint64_t off;
    size_t len;
    int n;
    struct iovec *iov;
    struct om_read_seg **segs;
    struct iovec few_iov[OM_READ_VIEW_FEW];
    struct om_read_seg *few_segs[OM_READ_VIEW_FEW];
    /* or (nfd > 0) the bytes come straight from data cache block files:
     * fd[k] from offset fd_off[k], fd_len[k] bytes (a reply spliced from
     * them); om_reader_view_done closes them */
    int nfd;
    int fd[2];
    uint64_t fd_off[2];
    size_t fd_len[2];
    /* or (ndirect > 0) read from them with O_DIRECT into dbuf, lent by the
     * data cache (om_dcache_read_direct): the reply is direct[] */
    int ndirect;
    struct iovec direct[2];
    char *dbuf;
};
ssize_t om_reader_view(struct om_reader *r, size_t len, uint64_t off, struct om_read_view *v);
void om_reader_view_done(struct om_reader *r, struct om_read_view *v);

/* Start r's prefetch window at window bytes (within prefetch_initial and
 * prefetch_max) instead of prefetch_initial: a handle known to read on
 * sequentially (a shard's stream) fetches in part-sized GETs at once. A
 * random read resets it as any window. Takes the pool lock. */
void om_reader_set_window(struct om_reader *r, uint64_t window);

/* Sequential reads of r fetch in GETs of up to chunk bytes (at least
 * part_size, at most a quarter of the window) instead of part_size: a
 * shard read through from start to end costs a few GETs. Takes the pool
 * lock. */
void om_reader_set_chunk(struct om_reader *r, uint64_t chunk);

/* Ranged GETs started so far for the object version r reads, by any of
 * its handles while one of them stays open (the shards' GETs per member).
 * Takes the pool lock. */
uint64_t om_reader_object_gets(struct om_reader *r);

/* The version token of the object r reads into out ("" when none is
 * known): the caller's, or what the open learned by a HEAD for an object
 * listed without one (AIStore's S3 API, data cache on). */
void om_reader_version(const struct om_reader *r, char out[OM_ETAG_MAX]);

/* Cancel prefetches, wait for requests in flight, free everything. */
void om_reader_close(struct om_reader *r);

struct om_readers_stats {
    uint64_t reads;
    uint64_t read_bytes;
    uint64_t hits;      /* reads served entirely from buffers already there */
    uint64_t gets;      /* ranged GETs started */
    uint64_t get_bytes;
    uint64_t prefetch_gets;
    uint64_t get_errors;
    uint64_t waits;     /* reads that waited for buffer space */
    uint64_t evictions;
    uint64_t memory_used;
    uint64_t memory_peak;
    uint64_t memory_limit;
    uint64_t open_readers;
    uint64_t lookup_gets;     /* small objects a lookup fetched whole */
    uint64_t lookup_get_hits; /* of those, opened and read from memory */
    uint64_t lookup_heads;    /* ... HEADed instead: few lookups were opens */
    uint64_t cache_loads;     /* segments read from the data cache */
    uint64_t cache_file_reads; /* reads replied straight from data cache files */
    uint64_t cache_fills;     /* randomly read objects fetched whole into it */
    uint64_t cache_fill_bytes;
    uint64_t memory_fills;    /* ... into memory, without a data cache */
    uint64_t lookup_pool_answers; /* lookups answered from an object the pool held whole */
    uint64_t prefetch_files;  /* fetched ahead of an expected open (om_readers_prefetch) */
    uint64_t prefetch_bytes;
    uint64_t prefetch_hits;   /* of those, opened */
    uint64_t prefetch_wasted_bytes; /* dropped without an open */
    uint64_t version_heads;   /* HEADs at open for a version a listing did not give */
};
void om_readers_get_stats(struct om_readers *rs, struct om_readers_stats *out);

#endif
