/* Sidecars: the small text file beside a staged or recovered data file that
 * says where the bytes belong (bucket, key, endpoint), what they are (size,
 * MD5) and what the object was when they were staged (base), so that a
 * re-upload can refuse to overwrite a newer object.
 *
 * The format is line-based text, like the admin socket's answers:
 *
 *   objmount-sidecar 1
 *   state=failed
 *   key=dir/a%0Ab.bin
 *   ...
 *
 * one "name=value" line per field, in any order; unknown names are skipped
 * (newer writers may add fields). Values are percent-encoded where they hold
 * '%', control bytes, DEL or bytes above 0x7e, so that a key with newlines or
 * escape sequences is one line and shows no terminal codes. */
#ifndef OBJMOUNT_SIDECAR_H
#define OBJMOUNT_SIDECAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objmount/store.h"
#include "objmount/util.h"

#define OM_SIDECAR_SUFFIX ".sidecar"
#define OM_SIDECAR_MAX (64 * 1024) /* larger files are not sidecars */

struct om_sidecar {
    char state[16]; /* "staging", "failed" or "interrupted" */
    char bucket[256];
    char key[4096];
    char endpoint[1024];
    uint64_t size;
    char md5[2 * OM_MD5_LEN + 1]; /* hex, or "" when not computed */
    /* the object under key when the data was staged (or last committed);
     * has_base false for a sidecar that does not say (written before this
     * field existed) */
    bool has_base;
    bool base_exists;
    char base_etag[OM_ETAG_MAX];
    char upload_id[1024]; /* a multipart upload left open, or "" */
    char time[32];        /* UTC, ISO 8601 */
    long pid;
    char last_error[512];
    bool has_mode;
    unsigned mode;
};

/* Append s in the sidecar format to out. 0 or -ENOMEM. */
int om_sidecar_format(const struct om_sidecar *s, struct om_buf *out);

/* Parse text (len bytes, not NUL-terminated). Returns 0, or -EINVAL when
 * it is not a sidecar (no header, a line without '=', a bad number or
 * escape, a value too long for its field, or no key). out is zeroed first. */
int om_sidecar_parse(const char *text, size_t len, struct om_sidecar *out);

/* Write s to path through path.tmp and a rename, so that a crash leaves the
 * old sidecar or the new one; with durable, fsync before the rename. 0 or a
 * negative errno (the tmp file is removed). */
int om_sidecar_write(const char *path, const struct om_sidecar *s, bool durable);

/* Read and parse the sidecar at path (not following a symlink, at most
 * OM_SIDECAR_MAX bytes). 0, -EINVAL (not a sidecar) or another -errno. */
int om_sidecar_read(const char *path, struct om_sidecar *s);

/* Whether uploading the sidecar's data would overwrite something other
 * than the object it was staged over: compares the base with what a HEAD
 * found now (exists_now, etag_now). */
enum om_sidecar_base {
    OM_BASE_UNCHANGED, /* the key holds the base (or still nothing) */
    OM_BASE_CHANGED,   /* another object is there now */
    OM_BASE_CREATED,   /* the key was empty and holds an object now */
    OM_BASE_REMOVED,   /* the base is gone: nothing would be overwritten */
    OM_BASE_UNKNOWN,   /* the sidecar does not name its base */
};
enum om_sidecar_base om_sidecar_base_check(const struct om_sidecar *s, bool exists_now,
                                           const char *etag_now);

/* Does the data file fd hold what sidecar s says: its size and, when s has
 * one, its MD5? 0 when it does; -EBADMSG with why filled when it does not
 * (the data changed after the sidecar was written); -ENODATA when the size
 * matches and s has no MD5 to compare; another -errno when fd cannot be
 * read. */
int om_sidecar_check_data(const struct om_sidecar *s, int fd, char *why, size_t whylen);

/* The sidecar path beside a data path ending in ".data" (caller frees), or
 * NULL on ENOMEM or another suffix. */
char *om_sidecar_path(const char *data_path);

#endif
