/* Namespace changes: unlink, mkdir, rmdir, rename, symlinks and object
 * facts as extended attributes. Each operation does its S3 requests, then
 * tells meta what changed.
 *
 * Objects are laid out the way s3fs-fuse lays them out, so both can share a
 * bucket: a directory made here is a "dir/" marker object (Content-Type
 * application/x-directory); a symlink is an object holding the target path
 * with x-amz-meta-mode carrying S_IFLNK; modes, owners and times are
 * x-amz-meta-mode (decimal st_mode), -uid, -gid and -mtime (seconds).
 *
 * Renaming a file is a server-side copy and a delete (UploadPartCopy above
 * 5 GiB; a verified download and upload when the server does not implement
 * copies, as AIStore answers 501). Renaming a directory copies every key
 * under it, then deletes the old ones: it is not atomic, and directories with
 * more than max_rename_keys keys answer EXDEV (mv then copies them itself).
 *
 * All functions return 0 or a negative errno; thread-safe. */
#ifndef OBJMOUNT_NS_H
#define OBJMOUNT_NS_H

#include <stdint.h>
#include <sys/types.h>

#include "objmount/meta.h"
#include "objmount/store.h"
#include "objmount/writer.h"

struct om_ns_config {
    uint64_t max_rename_keys;
    uint64_t part_size;
    const char *cache_dir; /* for downloads of the copy fallback */
};

struct om_ns;

/* NULL on ENOMEM. Everything is borrowed; writers may be NULL (read-only). */
struct om_ns *om_ns_new(struct om_store *store, struct om_meta *meta, struct om_writers *writers,
                        const struct om_ns_config *cfg);
void om_ns_free(struct om_ns *ns);

/* -EINVAL, with a log line, for a name the store cannot keep as it is
 * (a character its keys may not hold); 0 otherwise. */
int om_ns_name_refused(struct om_ns *ns, const char *name);
int om_ns_unlink(struct om_ns *ns, uint64_t parent, const char *name);
int om_ns_mkdir(struct om_ns *ns, uint64_t parent, const char *name, mode_t mode, uid_t uid,
                gid_t gid, struct om_attr *out);
int om_ns_rmdir(struct om_ns *ns, uint64_t parent, const char *name);
int om_ns_symlink(struct om_ns *ns, uint64_t parent, const char *name, const char *target,
                  uid_t uid, gid_t gid, struct om_attr *out);
/* *target is malloc'd. */
int om_ns_readlink(struct om_ns *ns, uint64_t ino, char **target);
/* flags: RENAME_NOREPLACE honoured; RENAME_EXCHANGE is -EINVAL. */
int om_ns_rename(struct om_ns *ns, uint64_t parent, const char *name, uint64_t newparent,
                 const char *newname, unsigned flags);

/* chmod/chown/utimens of a directory: stored on its marker object. */
int om_ns_dir_setattr(struct om_ns *ns, uint64_t ino, const struct om_file_meta *m);

/* Read-only extended attributes: user.objmount.etag, .key, .content_type.
 * getxattr copies the value into buf (size 0: returns the length only);
 * listxattr the NUL-separated names. Return the length or -errno
 * (-ENODATA for other names, -ERANGE when buf is too small). */
ssize_t om_ns_getxattr(struct om_ns *ns, uint64_t ino, const char *name, char *buf, size_t size);
ssize_t om_ns_listxattr(struct om_ns *ns, uint64_t ino, char *buf, size_t size);

#endif
