/* The FUSE low-level filesystem: callbacks that translate requests into calls
 * on meta, reader and writer, and reply exactly once. */
#ifndef OBJMOUNT_FS_H
#define OBJMOUNT_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>

#include "objmount/client.h"
#include "objmount/config.h"
#include "objmount/manifest.h"
#include "objmount/meta.h"
#include "objmount/ns.h"
#include "objmount/prefetch.h"
#include "objmount/reader.h"
#include "objmount/shards.h"
#include "objmount/writer.h"

struct om_fs {
    struct om_config *cfg;  /* borrowed */
    struct om_client *client; /* borrowed */
    struct om_meta *meta;
    struct om_readers *readers;
    struct om_prefetcher *prefetch; /* NULL: prefetch_files=0 */
    struct om_dcache *dcache; /* NULL: no data cache */
    struct om_writers *writers;
    struct om_ns *ns;
    struct om_manifest *manifest; /* -o manifest: the source of every listing */
    struct om_shards *shards;     /* -o shards=tar: *.tar objects as directories; NULL: off */
    double attr_timeout; /* seconds, for the kernel */
    double entry_timeout;
    double negative_timeout;
    /* the INIT exchange, seen by the session's I/O (om_fs_attach_io) */
    uint64_t init_unique;
    bool parallel_dirops; /* asked for in init, offered by the kernel */
    /* the session, for notifications to the kernel (om_fs_set_session) */
    pthread_mutex_t se_lock;
    struct fuse_session *se;
    bool notify_off; /* atomic: the session is being unmounted */
};

/* The operation table. Userdata of the session is a struct om_fs. */
extern const struct fuse_lowlevel_ops om_fs_ops;

/* Build the filesystem state for a connected client. Returns 0, or a
 * negative errno with err filled. */
int om_fs_init(struct om_fs *fs, struct om_config *cfg, struct om_client *client, char *err,
               size_t errlen);
/* The mounted session, through which meta asks the kernel to forget names
 * (metadata_memory); NULL once it is unmounted (a notification under way,
 * which waits for the kernel's directory lock, ends then) and before it is
 * destroyed. Waits for a notification under way. */
void om_fs_set_session(struct om_fs *fs, struct fuse_session *se);
/* No new notification to the kernel from now on: called before the
 * session's unmount closes /dev/fuse (whose descriptor number another
 * thread may then reuse). No lock taken: a notification under way holds
 * se_lock and may wait for a request the unmount aborts. */
void om_fs_stop_notifications(struct om_fs *fs);
/* The session is ending (a signal or an unmount): uploads under way are
 * named in the log and may retry for timeout_ms more. */
void om_fs_stopping(struct om_fs *fs, uint64_t timeout_ms);
/* Free everything; files still open for writing are settled (see
 * om_writers_free). */
void om_fs_destroy(struct om_fs *fs);

/* Carry the session's traffic on the mounted /dev/fuse descriptor through
 * our own read and writev, after fuse_session_mount. libfuse before 3.16
 * never passes FUSE_PARALLEL_DIROPS to the kernel (libfuse PR #861), so the
 * kernel sends one lookup at a time per directory: eight readers opening
 * files of one folder wait for each other's requests. The INIT reply gets
 * the flag when init asked for it and the kernel offered it. Returns 0 or a
 * negative errno (the session keeps libfuse's own I/O). */
int om_fs_attach_io(struct om_fs *fs, struct fuse_session *se);

#endif
