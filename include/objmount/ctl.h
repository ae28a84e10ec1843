/* The admin socket of a mount: a Unix socket answering one command per
 * connection ("status", "stats", "stats prometheus", "status json", "stats json",
 * "drain SECONDS"),
 * reachable only by root and the mounting user (mode 0600 and a
 * SO_PEERCRED check). Its path follows from the mount point, so objmountctl
 * finds it without a registry. */
#ifndef OBJMOUNT_CTL_H
#define OBJMOUNT_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "objmount/stats.h"

/* Where the socket of a mount point lives for a daemon run by uid:
 * /run/objmount (root), else /run/user/UID/objmount when that runtime
 * directory exists, else /tmp/objmount-UID; the name is derived from the
 * mount point. Returns 0 or -ENAMETOOLONG. */
int om_ctl_socket_path(const char *mountpoint, uid_t uid, char *out, size_t n);

/* ---- protocol: one line per connection ---- */

enum om_ctl_kind {
    OM_CTL_STATUS = 1,
    OM_CTL_STATS,
    OM_CTL_STATS_PROMETHEUS,
    OM_CTL_DRAIN,
    OM_CTL_PING,
    OM_CTL_STATUS_JSON,
    OM_CTL_STATS_JSON,
    OM_CTL_CACHE_STATS, /* "cache stats" */
    OM_CTL_CACHE_DROP   /* "cache drop" (all) or "cache drop PATH" (a file of the mount) */
};
#define OM_CTL_LINE_MAX 4096 /* longest request line */
#define OM_CTL_DRAIN_MAX_S (7ULL * 86400)

struct om_ctl_cmd {
    enum om_ctl_kind kind;
    uint64_t drain_s; /* OM_CTL_DRAIN: seconds to wait, at most OM_CTL_DRAIN_MAX_S */
    /* OM_CTL_CACHE_DROP: the path relative to the mount point, "" for
     * all; no NUL, no control byte, no "." or ".." component */
    char path[OM_CTL_LINE_MAX];
};

/* Parse one request line line[0..len) (no newline; a trailing CR is
 * ignored). 0, or -EINVAL for anything else. Pure. */
int om_ctl_parse(const char *line, size_t len, struct om_ctl_cmd *out);

/* May a client trust a socket? dir (lstat of its directory) must be a
 * directory owned by expected or root and not group/world writable; sock
 * (lstat of the socket; NULL to skip) a socket owned by expected or root.
 * 0 or -EPERM. Pure. */
struct stat;
int om_ctl_trust(const struct stat *dir, const struct stat *sock, uid_t expected);

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
