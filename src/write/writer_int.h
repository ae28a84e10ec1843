/* Internals shared by the files of the write path: writer.c (open files:
 * open, write, truncate, release), parts.c (part layout, the queue, the
 * workers that hash and upload parts, the server's ETag form), commit.c
 * (commits, verification, retries) and staging.c (staging and recovery
 * files). writer.c and commit.c call parts.c and staging.c; commit.c
 * never calls writer.c.
 *
 * Locks: ws->lock guards the writer table, the work queue, reference counts
 * and statistics; w->lock guards one writer. w->lock may be held when taking
 * ws->lock, never the reverse. */
#ifndef OBJMOUNT_WRITER_INT_H
#define OBJMOUNT_WRITER_INT_H

#include <pthread.h>

#include "objmount/digest.h"
#include "objmount/hash.h"
#include "objmount/writer.h"

#define PART_RETRIES 3
#define WORKERS 2


/* Parts below this are uploaded even when unchanged: a copy costs a request
 * as an upload of a few hundred KiB does. */
#define MIN_COPY (1ULL << 20)

enum part_state { P_IDLE, P_QUEUED, P_HASHING, P_COPYING, P_UPLOADING, P_DONE };

struct part {
    struct om_writer *w;
    int number;
    uint64_t off, len;
    enum part_state state;
    uint32_t gen, up_gen;
    uint32_t up_seq; /* the upload (w->upload_seq) it went into */
    /* The upload its number was last sent into, whatever came of it: on a
     * store that loses a part sent twice (AIStore), a number is sent once
     * per upload, and a part that must go again needs a new upload. */
    uint32_t sent_seq;
    /* The part's bytes at generation stored_gen are those of the stored
     * object (w->stored_etag) at the same offsets: while gen is still
     * stored_gen, a new upload copies the part on the server instead of
     * sending it (UploadPartCopy). */
    bool stored_valid;
    uint32_t stored_gen;
    int failures;
    unsigned char md5[OM_MD5_LEN];
    char etag[OM_ETAG_MAX];
    struct om_store_part_put put;
};

struct om_writer {
    struct om_writers *ws;
    struct om_hnode node;
    uint64_t ino;
    char *key;
    int refs; /* under ws->lock */
    bool in_queue;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    int fd;
    char *path;    /* staging data */
    char *sidecar; /* staging sidecar */
    bool materialized;
    struct om_writer_base base;
    uint64_t size;
    struct timespec mtime;
    bool dirty;     /* changed since the last commit */
    /* The only change since the last commit is the truncation an O_TRUNC
     * open made of a stored object: a flush leaves it (flush_policy.h). */
    bool trunc_only;
    bool held;      /* a namespace change holds off commits (om_writer_hold) */
    uint64_t changes;        /* counts writes, truncates and metadata changes */
    uint64_t failed_changes; /* changes at the last failed commit (kept in recovery) */
    bool committed; /* a commit succeeded at least once */
    bool committing;
    bool working; /* a worker is hashing this writer's parts */
    bool aborting; /* the upload is being abandoned: start no part */
    bool dying;    /* being destroyed: never queued again */
    bool parts_cancelled; /* wi_drain cancelled parts in flight: check the abort */
    bool part_failed;
    int inflight;
    struct part **parts;
    int nparts, cap;
    char *upload_id;
    uint32_t upload_seq; /* changes whenever upload_id does */
    uint32_t meta_version, upload_meta_version;
    struct om_file_meta meta;
    /* MD5 of [0, md5_upto), fed part by part while parts go out in order */
    struct om_digest md5;
    bool md5_valid;
    uint64_t md5_upto;
    struct om_commit_result last;
    char *recovery; /* recovery entry of the last failed commit */
    bool pushing;   /* uploading a recovery file: it stays where it is on failure */
    bool discarded; /* unlinked while open: nothing more to upload */
    /* A write or truncate failed (-ENOSPC, -EIO, -EFBIG...): what the
     * staging file holds is not what the application meant, so it is never
     * committed; every later commit returns this error. */
    int write_error;
    /* Out of the table: a poisoned writer that a new open replaced (its
     * handles keep it, and its error, until they are released). */
    bool detached;
    /* The object under key as far as this writer knows: before its first
     * commit, the one it started from; then the one it last stored. */
    bool stored_exists;
    char stored_etag[OM_ETAG_MAX];
    uint64_t stored_size;
    /* ETag the server gave the last upload that then failed verification:
     * the object a final failure must not leave under the key. */
    char left_etag[OM_ETAG_MAX];
    char last_error[256];
};

struct om_writers {
    struct om_store *store;
    struct om_writers_config cfg;
    char *cache_dir, *staging_dir, *recovery_dir, *bucket, *endpoint;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct om_htable table;
    struct om_writer **queue;
    int qlen, qcap;
    bool stopping;
    /* the daemon is stopping: commits under way get until then (monotonic
     * ms) to finish their attempts; 0 while running */
    uint64_t stop_deadline_ms;
    pthread_t workers[WORKERS];
    int nworkers;
    struct om_writers_stats st;
    enum om_etag_form etag_form; /* under lock */
    bool no_part_copy;           /* under lock: UploadPartCopy answered 501 once */
};

/* part_table.c; callers hold w->lock */
/* Make sure parts cover [0, size) and their lengths are right. 0 or
 * -ENOMEM (or the part count's error). */
int wi_layout(struct om_writer *w);
/* Mark the parts touched by [off, end) as changed. */
void wi_touch(struct om_writer *w, uint64_t off, uint64_t end);
/* The staging file's [0, size) is now the stored object (w->stored_etag,
 * w->stored_size set): every part in it may be copied on the server. */
void wi_parts_stored(struct om_writer *w);
/* The stored object no longer holds what the parts say (gone, or not
 * known): no part is copied. */
void wi_parts_unstored(struct om_writer *w);
/* parts.c; callers hold w->lock */
void wi_schedule(struct om_writer *w);
/* The writer has moved on to off: queue the full parts it passed. */
void wi_queue_passed(struct om_writer *w, uint64_t off);
/* parts.c; no lock held */
int wi_workers_start(struct om_writers *ws);
void wi_workers_stop(struct om_writers *ws);
/* Give up the writer's multipart upload, if any (parts done in it no
 * longer count). */
void wi_abort_upload(struct om_writer *w);
/* Must part hashing also feed the running whole-object MD5? Takes
 * ws->lock. */
bool wi_need_whole_md5(struct om_writers *ws);
/* n more bytes went through MD5. Takes ws->lock. */
void wi_count_hashed(struct om_writers *ws, uint64_t n);
/* A multipart upload was verified by its ETag, of form seen. Takes
 * ws->lock. */
void wi_learn_etag_form(struct om_writers *ws, enum om_etag_form seen);
/* The current upload can no longer be completed right on a store that
 * takes each part number once (caps.part_replace false): a part sent into
 * it failed or changed since, and must go again. The commit then begins a
 * new upload (at most PART_RETRIES times per attempt). Caller holds
 * w->lock. */
bool wi_upload_spoiled(struct om_writer *w);

/* writer.c; no lock held */
/* Stop all background work on a writer nobody can reach any more: nothing
 * is queued again, uploads under way are waited for (cancelled past a
 * deadline). */
void wi_drain(struct om_writer *w);
/* the writer is no longer reachable and drained */
void wi_writer_destroy(struct om_writer *w);

/* staging.c */
/* Fetch the object a writer started from into its staging file, once,
 * before its first change. Caller holds w->lock. */
int wi_prepare_write(struct om_writer *w);
/* Is there room for need more bytes in cache_dir above min_free_space?
 * When not, the data cache is asked to give space back first. 0 or
 * -ENOSPC. No lock held. */
int wi_check_space(struct om_writers *ws, uint64_t need);
int wi_mkdir_p(const char *path, mode_t mode);
int wi_write_sidecar(const char *path, struct om_writers *ws, struct om_writer *w,
                     const char *state, const char *md5hex, bool durable);
void wi_recover_leftovers(struct om_writers *ws);
int wi_staging_create(struct om_writers *ws, struct om_writer *w);
/* Keep the staging file's bytes in recovery with a sidecar in state
 * ("failed" or "interrupted"). Caller holds w->lock. */
void wi_keep_in_recovery(struct om_writer *w, const char *state);
/* Remove the recovery entry of an earlier failed commit, if any. Caller
 * holds w->lock. */
void wi_recovery_forget(struct om_writer *w);

#endif
