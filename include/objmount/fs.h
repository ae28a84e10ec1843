/* The FUSE low-level filesystem: callbacks that translate requests into calls
 * on meta, reader and writer, and reply exactly once. */
#ifndef OBJMOUNT_FS_H
#define OBJMOUNT_FS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include "objmount/client.h"
#include "objmount/config.h"
#include "objmount/meta.h"
#include "objmount/ns.h"
#include "objmount/reader.h"
#include "objmount/writer.h"

struct om_fs {
    struct om_config *cfg;  /* borrowed */
    struct om_client *client; /* borrowed */
    struct om_meta *meta;
    struct om_readers *readers;
    struct om_writers *writers;
    struct om_ns *ns;
    double attr_timeout; /* seconds, for the kernel */
    double entry_timeout;
    double negative_timeout;
};

/* The operation table. Userdata of the session is a struct om_fs. */
extern const struct fuse_lowlevel_ops om_fs_ops;

/* Build the filesystem state for a connected client. Returns 0, or a
 * negative errno with err filled. */
int om_fs_init(struct om_fs *fs, struct om_config *cfg, struct om_client *client, char *err,
               size_t errlen);
void om_fs_destroy(struct om_fs *fs);

#endif
