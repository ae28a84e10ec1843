/* The write path: one staging file per inode open for write, parts uploaded
 * in the background, commit with verification at flush and fsync, whole-
 * upload retry, and recovery of data that could not be uploaded.
 *
 * - Writes land in a staging file under cache_dir/staging at any offset.
 *   An object opened without O_TRUNC is fetched into it on the first write.
 * - The file is cut into parts (part_size for the first 1000 parts, then
 *   doubling every 1000 parts, so no file needs more than 10,000). A part is
 *   hashed and uploaded in the background once the writer has moved past
 *   it; a part written again after its upload is uploaded again.
 * - Commit: files up to part_size are one PUT with Content-MD5; larger ones
 *   a multipart upload with Content-MD5 on every part. Afterwards a HEAD
 *   must show the size written and the digest the store states of the
 *   object (an MD5 ETag, the multipart ETag of the parts, AIStore's
 *   checksum) must be the one of the bytes; what no digest proves is read
 *   back and compared (not with verify_size); verify_read reads back always.
 * - A failed part is retried alone; a failed or mismatched commit is aborted
 *   and the whole upload retried from the staging file. A commit that finally
 *   fails returns -EIO and leaves the bytes in cache_dir/recovery with a
 *   sidecar (bucket, key, size, MD5, time, last error).
 * - Staging files of a daemon that died are moved to recovery by the next
 *   one (a lock on each staging file tells live from dead).
 *
 * Thread-safe. Each writer has its own lock; part uploads complete on the
 * engine thread; hashing runs on the pool's worker threads. */
#ifndef OBJMOUNT_WRITER_H
#define OBJMOUNT_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "objmount/flush_policy.h"
#include "objmount/store.h"

struct om_commit_result;

struct om_writers_config {
    const char *cache_dir; /* staging/ and recovery/ live here */
    const char *bucket;    /* for sidecars */
    const char *endpoint;
    uint64_t part_size; /* at least 5 MiB */
    uint64_t min_free_space;
    int upload_retries;         /* whole-upload attempts after the first */
    uint64_t upload_retry_ms;   /* first delay between them; doubles */
    bool verify_read; /* read every commit back */
    bool verify_size; /* never read back: unproven objects pass by size */
    bool no_overwrite;
    int max_parts_in_flight; /* per file */
    /* Called after every commit that stored something of an open file
     * (flush, fsync, rename, last release), with no writer lock held and
     * before the writer can leave the table of open files: what the
     * filesystem shows for ino becomes what is stored. */
    void (*on_commit)(void *ud, uint64_t ino, const struct om_commit_result *res);
    void *on_commit_ud;
    /* Called (as on_commit, with on_commit_ud) when the server refused
     * ino's key for a name clash: a file where a directory is (err
     * -EEXIST) or under a name that is a file (-ENOTDIR). Such a commit is
     * not tried again; its bytes are kept in recovery. */
    void (*on_refused)(void *ud, uint64_t ino, int err);
    /* NULL, or the data cache: a file's last release copies what its last
     * commit stored into it (up to a quarter of its bound), so reading a
     * checkpoint back does not go to the store */
    struct om_dcache *dcache;
    /* NULL, or asked to free at least bytes on the staging filesystem (the
     * data cache evicts) before a write fails with ENOSPC; returns the
     * bytes freed. Called with no writer lock held. */
    uint64_t (*reclaim_space)(void *ud, uint64_t bytes);
    void *reclaim_ud;
};

struct om_writers;
struct om_writer;

/* Create cache_dir/{staging,recovery} and move staging files left by a dead
 * daemon to recovery. NULL with err filled on failure. */
struct om_writers *om_writers_new(struct om_store *store, const struct om_writers_config *cfg,
                                  char *err, size_t errlen);
/* The daemon is stopping (a signal or an unmount): commits under way may
 * start new attempts for deadline_ms more; each is named in the log. No lock
 * held. */
void om_writers_stopping(struct om_writers *ws, uint64_t deadline_ms);
/* Free everything. Writers still open (their files were never released:
 * the kernel connection ended first) are settled: one with changes not
 * uploaded is kept in recovery as interrupted, the others leave nothing;
 * their multipart uploads are aborted. No handle may be used afterwards. */
void om_writers_free(struct om_writers *ws);

/* File metadata that rides on the upload (x-amz-meta-*, s3fs-fuse names). */
/* The object just stored with m: size, now as its time, m's metadata. */
void om_file_meta_object(const struct om_file_meta *m, uint64_t size, struct om_object *obj);

/* The object as it is before writing. */
struct om_writer_base {
    bool exists;
    uint64_t size;
    char etag[OM_ETAG_MAX];
    struct om_file_meta meta;
};

/* Writer for ino (shared by every handle of the inode; counted). A new
 * writer starts from base; trunc empties it. Returns 0 or -errno. */
int om_writer_open(struct om_writers *ws, uint64_t ino, const char *key,
                   const struct om_writer_base *base, bool trunc, struct om_writer **out);
/* The writer of ino if one is open (counted), or NULL (also when ws is
 * NULL: a read-only mount). */
struct om_writer *om_writer_find(struct om_writers *ws, uint64_t ino);
/* Is ino open for writing? Takes no reference (safe under other locks). */
bool om_writer_is_open(struct om_writers *ws, uint64_t ino);
/* Drop one count; the last one deletes the staging file. */
void om_writer_release(struct om_writer *w);

/* Returns len or -errno (-ENOSPC below the free-space floor once the data
 * cache has nothing more to give back, -EFBIG past S3's 5 TiB object
 * limit, -EIO when the object could not be fetched for a partial
 * rewrite). A failed write poisons the writer: see om_writer_commit. */
ssize_t om_writer_write(struct om_writer *w, const char *buf, size_t len, uint64_t off);
/* Has a write or truncate of this writer failed (it will never be
 * committed)? */
bool om_writer_failed(struct om_writer *w);
/* Does the staging file hold the data (written, truncated or fetched)? Until
 * then reads go to the object. */
bool om_writer_holds_data(struct om_writer *w);
/* Read what the writer holds. Returns bytes read (short only at end), or
 * -EAGAIN when the staging file does not hold the data. */
ssize_t om_writer_read(struct om_writer *w, char *buf, size_t len, uint64_t off);
/* ftruncate or truncate(2): 0 or -errno (-EFBIG past 5 TiB); a failure
 * poisons the writer as a failed write does. */
int om_writer_truncate(struct om_writer *w, uint64_t size);
/* Metadata that will ride on the next commit. */
void om_writer_get_meta(struct om_writer *w, struct om_file_meta *m);
/* Record metadata changes made while open: they ride on the next commit
 * (one is due now). Where the store keeps no user metadata
 * (om_writers_keep_meta false) they are only shown while open, and no
 * commit is due for them. */
void om_writer_set_meta(struct om_writer *w, const struct om_file_meta *m);
/* The store keeps modes, owners and times with an object (caps.user_meta).
 * When it does not (AIStore's S3 API), om_writer_store_meta sends nothing
 * and the new metadata lasts while the mount holds the file's attributes. */
bool om_writers_keep_meta(struct om_writers *ws);

struct om_commit_result {
    bool stored; /* false: this writer has stored nothing (the rest is unset) */
    uint64_t size;
    char etag[OM_ETAG_MAX];
    struct timespec mtime;
    struct om_file_meta meta; /* what the object now carries */
};

/* Upload what changed since the last commit and verify it (fsync, the last
 * release, a rename, truncate(2)). Returns 0 (also when there was nothing
 * to do; res then describes the last commit, if any), the error of a
 * failed write or truncate (it sticks: once a write of this writer failed,
 * every later commit returns it and uploads nothing, whatever was
 * committed before: -ENOSPC, -EIO, -EFBIG...), or -EIO after the retries,
 * with the data kept in recovery. Waits for a commit under way and for a
 * namespace change holding the writer (om_writer_hold). */
int om_writer_commit(struct om_writer *w, struct om_commit_result *res);

/* A FLUSH (a close() of one descriptor) by who: commits, defers to a later
 * flush, fsync or the last release, or returns the failed write's error,
 * as om_flush_decide says. Returns 0 or what om_writer_commit returns. */
int om_writer_flush(struct om_writer *w, enum om_flusher who);

/* Upload the file at path (e.g. a recovery file) as key with the same
 * verification and retries as a commit. The file is left in place. Returns 0
 * or -EIO with err naming the last failure. */
int om_writer_push_file(struct om_writers *ws, const char *path, const char *key,
                        const struct om_file_meta *meta, char *err, size_t errlen);

/* Store new metadata on an object nobody has open for writing
 * (om_store_set_meta: S3 copies it onto itself with the metadata replaced,
 * in parts past the copy limit; guarded by etag). obj receives what is
 * stored now. Where the store keeps no user metadata, nothing is sent
 * (counted in meta_not_stored, warned once) and obj is the object with
 * the new metadata, for the mount to show. */
int om_writer_store_meta(struct om_writers *ws, const char *key, const char *etag, uint64_t size,
                         const struct om_file_meta *m, struct om_object *obj);

/* A namespace change (unlink, rename) is about to act on the object under
 * w's key: no commit starts until om_writer_unhold (one under way is
 * waited for), so none lands between the change's requests. Writes go on.
 * One holder at a time (a second waits); callers holding two writers take
 * them in inode order. */
void om_writer_hold(struct om_writer *w);
void om_writer_unhold(struct om_writer *w);
/* om_writer_commit by the holder. */
int om_writer_commit_held(struct om_writer *w, struct om_commit_result *res);
/* The file's name is gone (unlinked or replaced by a rename, the DELETE or
 * copy succeeded): nothing more is uploaded. Caller holds w. */
void om_writer_discard(struct om_writer *w);
/* The file was renamed (after a commit and a server-side copy that HEAD
 * showed with etag): later commits go to newkey, and a writer that has
 * not fetched the object yet fetches the copy. Caller holds w. Returns 0
 * or -ENOMEM (nothing changed). */
int om_writer_rekey(struct om_writer *w, const char *newkey, const char *etag);
/* Is any file under the key prefix open for writing? */
bool om_writers_busy_under(struct om_writers *ws, const char *prefix);

/* Current size and mtime of an open writer. */
void om_writer_attr(struct om_writer *w, uint64_t *size, struct timespec *mtime);

/* What the server's ETag of a completed multipart upload turned out to be,
 * learned from the first one verified on this mount. It decides which
 * digests a write computes: the part MD5s always (Content-MD5); a running
 * whole-object MD5 besides them only when the server's multipart ETags are
 * whole-object MD5s (s3rver) or with verify=read. Until the form is known
 * uploads expect MD5s of part MD5s (as AWS S3): on a server of another form
 * the first multipart verification reads the staging file once more to
 * compute the whole MD5. */
enum om_etag_form {
    OM_ETAG_FORM_UNKNOWN = 0, /* no multipart upload verified yet */
    OM_ETAG_FORM_PARTS,       /* MD5 of the part MD5s, "-N" (AWS S3, Swift, MinIO, Ceph) */
    OM_ETAG_FORM_WHOLE,       /* MD5 of the whole object */
    OM_ETAG_FORM_OPAQUE,      /* neither: another digest, or none (read back) */
};

struct om_writers_stats {
    uint64_t open_writers;
    uint64_t commits;
    uint64_t commit_failures;
    uint64_t upload_retries;
    uint64_t part_uploads;
    uint64_t part_retries;
    uint64_t bytes_uploaded;
    uint64_t verified_md5;       /* the store's MD5 (ETag) of the whole object */
    uint64_t verified_multipart; /* the MD5 of the part MD5s (multipart ETag) */
    uint64_t verified_checksum;  /* another digest the store states (AIStore's xxhash...) */
    uint64_t verified_size_only; /* no digest proved it and verify=size: by size only */
    uint64_t verified_read;      /* read back and compared */
    uint64_t hashed_bytes;       /* bytes run through MD5 (parts, whole objects, read-backs) */
    enum om_etag_form etag_form;
    uint64_t recovered;          /* files moved to recovery */
    uint64_t commits_in_flight;
    uint64_t flushes_deferred;   /* flushes that left the commit to a later one */
    uint64_t part_copies;        /* unchanged parts copied on the server (UploadPartCopy) */
    uint64_t bytes_copied;       /* their bytes: not uploaded */
    bool part_copy_unsupported;  /* the server answered UploadPartCopy 501 */
    uint64_t meta_not_stored;    /* chmod/chown/utime the store could not keep */
    uint64_t space_reclaims;     /* times the data cache gave space back to staging */
};
void om_writers_get_stats(struct om_writers *ws, struct om_writers_stats *out);

enum om_etag_form om_writers_etag_form(struct om_writers *ws);
const char *om_etag_form_name(enum om_etag_form f);

#endif
