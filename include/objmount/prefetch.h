/* Prefetch across files: the next files a reader will open, fetched
 * before it opens them (issue 25).
 *
 * - Directory order, for unmodified programs. Each process's opens in one
 *   directory form a stream; an open at listing position p after one at q
 *   predicts p + (p - q), p + 2(p - q), ... (a reader walking the listing
 *   takes stride 1; one of N DataLoader workers taking every N-th file,
 *   stride N). The window of files fetched ahead grows while the guess is
 *   right (om_prefetch_window: none until three opens in a row were
 *   evenly spaced, then one more file per WINDOW_HITS predicted opens, at
 *   most max_window) and collapses at the first open that was not
 *   predicted.
 * - An order hint, for shuffled loaders: the files a loader will open
 *   next, in order, given through an ioctl on a directory of the mount
 *   (OM_IOC_PREFETCH; `objmountctl prefetch` wraps it). The files fetched
 *   are those after the first hinted file not yet opened: at first
 *   HINT_WINDOW_START of them, one more per hinted open that was fetched
 *   ahead, two more per hinted open that was not (the loader outran the
 *   window), at most max_hint_window. Hinted names that are missing,
 *   changed, not regular files, or that the hinting user may not read are
 *   skipped, never an error. Hints of one user (uid) do not mix with
 *   another's: each uid has its own list, and only its opens consume it.
 * Fetched files wait in the read pool (om_readers_prefetch): from memory
 * above the reserve, dropped and counted as wasted when not opened within
 * 30 s or when their buffers are needed; with a data cache their blocks
 * go into it as any fetched block does. */
#ifndef OBJMOUNT_PREFETCH_H
#define OBJMOUNT_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/types.h>

#include "objmount/meta.h"
#include "objmount/reader.h"

/* The hint: ioctl(fd, OM_IOC_PREFETCH, buf) on an open directory of the
 * mount (O_RDONLY does: read-only mounts take hints). buf holds
 * OM_PREFETCH_IOC_SIZE bytes: a first byte 'r' (replace the caller's hinted
 * list) or 'a' (append to it), then paths relative to that directory
 * separated by '\n', then a NUL. The ioctl returns 0, or -1 with errno
 * ENOTDIR, EINVAL (no flag byte, no NUL) or ENOBUFS (the caller's list
 * holds OM_PREFETCH_HINTS_MAX paths not yet opened). */
#define OM_PREFETCH_IOC_SIZE 16000
#define OM_IOC_PREFETCH _IOW('o', 0x50, char[OM_PREFETCH_IOC_SIZE])
#define OM_PREFETCH_HINTS_MAX 1000000

/* ---- the policy, pure (tests/unit/test_prefetch.c) ---- */

#define OM_PREFETCH_WINDOW_HITS 16 /* predicted opens per file more in the window */

/* Files fetched ahead of a directory-order stream after hits predicted
 * opens in a row: 0 below 2, then 1 + (hits - 2) / WINDOW_HITS, at most
 * max_window. At a stop the files fetched and never opened are at most
 * about a sixteenth of those opened (a tenth of the bytes, when the
 * files ahead are up to half as large again as those read). */
int om_prefetch_window(uint32_t hits, int max_window);

/* One stream: a process's opens in one directory. */
struct om_prefetch_stream {
    bool started;
    uint64_t last;        /* listing position of the last open */
    uint64_t stride;      /* predicted step (0: none yet) */
    uint32_t hits;        /* opens in a row at the predicted position */
    uint64_t issued_upto; /* positions up to here were fetched or skipped */
};

/* What to fetch after an open: count files at first, first + stride, ... */
struct om_prefetch_step {
    uint64_t first, stride;
    int count;
    bool missed; /* the open was not the predicted one: the window collapsed */
};

/* An open at listing position pos: updates s, says what to fetch. */
struct om_prefetch_step om_prefetch_next(struct om_prefetch_stream *s, uint64_t pos,
                                         int max_window);

/* May uid/gid read a file of mode, file_uid, file_gid (the owner, group
 * and other read bits; uid 0 may)? */
bool om_prefetch_may_read(mode_t mode, uid_t file_uid, gid_t file_gid, uid_t uid, gid_t gid);

/* ---- the mechanism ---- */

struct om_prefetch_config {
    uint64_t max_file_bytes; /* fetched of each file: its first bytes (small files whole) */
    int max_window;          /* files ahead of a directory-order stream */
    int max_hint_window;     /* files ahead of a hinted list */
    const char *prefix;      /* the mount's key prefix ("" or ending in '/') */
};

struct om_prefetcher;

/* NULL on ENOMEM. meta and readers are borrowed. Starts the threads that
 * resolve hinted names (and give back, every few seconds, what was fetched
 * ahead and never opened). */
struct om_prefetcher *om_prefetcher_new(struct om_meta *m, struct om_readers *rs,
                                        const struct om_prefetch_config *cfg);
void om_prefetcher_free(struct om_prefetcher *pf);

/* File ino (key) was opened for reading by thread tid of a process of
 * uid: follow its directory order, and the hints. No request is sent on
 * the caller's thread. */
void om_prefetch_opened(struct om_prefetcher *pf, pid_t tid, uid_t uid, uint64_t ino,
                        const char *key);

/* A hint (the ioctl's buffer) from uid/gid on the directory whose key is
 * dirkey. 0, -EINVAL or -ENOBUFS. */
int om_prefetch_hint(struct om_prefetcher *pf, uid_t uid, gid_t gid, const char *dirkey,
                     const char *buf, size_t len);

struct om_prefetch_stats {
    uint64_t order_streams; /* directory-order streams that prefetched */
    uint64_t order_files;   /* files fetched ahead for them */
    uint64_t hinted;        /* paths received in hints */
    uint64_t hint_files;    /* hinted files fetched ahead */
    uint64_t hint_skipped;  /* hinted names missing, not files, or not readable */
};
void om_prefetch_get_stats(struct om_prefetcher *pf, struct om_prefetch_stats *out);

#endif
