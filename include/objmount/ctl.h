/* The admin socket of a mount: a Unix socket answering one command per
 * connection ("status", "stats", "stats prometheus", "status json", "stats json",
 * "drain SECONDS"),
 * reachable only by root and the mounting user (mode 0600 and a
 * SO_PEERCRED check). Its path follows from the mount point, so objmountctl
 * finds it without a registry. */
#ifndef OBJMOUNT_CTL_H
#define OBJMOUNT_CTL_H

#include <stddef.h>
#include <sys/types.h>

#include "objmount/stats.h"

/* Where the socket of a mount point lives for a daemon run by uid:
 * /run/objmount (root), else /run/user/UID/objmount when that runtime
 * directory exists, else /tmp/objmount-UID; the name is derived from the
 * mount point. Returns 0 or -ENAMETOOLONG. */
int om_ctl_socket_path(const char *mountpoint, uid_t uid, char *out, size_t n);

struct om_ctl;

/* Bind the socket and start the thread that answers it. NULL with err
 * filled on failure. src must outlive the server. */
struct om_ctl *om_ctl_start(const struct om_stats_sources *src, const char *mountpoint, char *err,
                            size_t errlen);
void om_ctl_stop(struct om_ctl *c);

/* Client side: send one command to the mount at mountpoint, mounted by
 * owner, and collect the answer (caller frees *reply). Tries the owner's,
 * root's and the caller's socket paths. Returns 0, -ENOENT (no socket: not an
 * objmount mount, or the daemon is gone), -EACCES, or another -errno. */
int om_ctl_request(const char *mountpoint, uid_t owner, const char *command, char **reply,
                   int timeout_s);

#endif
