/* Manifests: the keys of a bucket (or of a prefix), with size, mtime and
 * ETag, in one compact, versioned, checksummed file read through mmap. A
 * mount with -o manifest=PATH answers every listing and lookup from it,
 * without LIST or HEAD requests.
 *
 * Format (version 1, little-endian; doc/decisions.md "Manifest mounts"):
 *   header   magic "OMMANIF1"(8), version u32, SHA-256 (32) of the blocks
 *            and index, then of the header bytes after the checksum; then
 *            flags u32, key count u64, build time u64 (s), file
 *            size u64, index offset u64, block count u32, keys per block
 *            u32, bucket length u16 + bytes, prefix length u16 + bytes
 *   blocks   keys sorted by bytes (S3 order), front coded: the first entry
 *            of a block holds its whole key, the others (shared length,
 *            suffix); then size, mtime (zigzag delta from the previous entry
 *            of the block) and the ETag (varints), see manifest.c
 *   index    one u64 offset per block, for binary search
 *
 * An open manifest is immutable and may be used from any thread. */
#ifndef OBJMOUNT_MANIFEST_H
#define OBJMOUNT_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "objmount/store.h"
#include "objmount/store.h"

#define OM_MANIFEST_VERSION 1
#define OM_MANIFEST_BLOCK 64 /* keys per block: a whole key every 64 */

struct om_manifest_info {
    uint32_t version;
    uint32_t flags;
    uint64_t keys;
    uint64_t blocks;
    uint64_t file_size;
    time_t built;
    const char *bucket; /* owned by the manifest */
    const char *prefix; /* "" or ending in '/' */
};

struct om_manifest;

/* Open flags. */
#define OM_MANIFEST_NO_CHECKSUM 1u /* skip the SHA-256 (fuzzing); structure still checked */

/* Map and verify path. Returns 0 and *out, or a negative errno with one
 * sentence in err: -EINVAL not a manifest, -EPROTONOSUPPORT another format
 * version, -EBADMSG checksum mismatch or a malformed body, -EIO truncated,
 * or the errno of open/mmap. Free with om_manifest_close(). */
int om_manifest_open(const char *path, unsigned flags, struct om_manifest **out, char *err,
                     size_t errlen);
/* The same over bytes in memory, which must outlive the manifest. */
int om_manifest_from_buf(const void *buf, size_t len, unsigned flags, struct om_manifest **out,
                         char *err, size_t errlen);
void om_manifest_close(struct om_manifest *mf);

const struct om_manifest_info *om_manifest_info(const struct om_manifest *mf);

/* One key: 0 and *obj filled (size, mtime, etag), or -ENOENT. -EBADMSG when
 * the body is malformed (only without the checksum). */
int om_manifest_lookup(const struct om_manifest *mf, const char *key, struct om_object *obj);

/* ListObjectsV2 over the manifest: keys starting with prefix (may be NULL)
 * and after start_after (may be NULL), in order; with delimiter '/', names
 * below the next '/' roll up into one common prefix (found by seeking past
 * it, not by visiting its keys). At most max entries (0 = no bound) go to cb;
 * when more remain, *next_token (may be NULL) receives a malloc'd token for
 * start_after, else NULL. cb returns 0, OM_LIST_STOP or a negative errno
 * (returned). */
int om_manifest_list(const struct om_manifest *mf, const char *prefix, char delimiter,
                     const char *start_after, size_t max, om_list_cb cb, void *ud,
                     char **next_token);

/* om_manifest_list with the arguments and contract of om_store_list_page (mf
 * is the struct om_manifest): the listing source of a manifest mount. */
int om_manifest_list_page(void *mf, const struct om_list_params *p, om_list_cb cb, void *ud,
                          char **next_token, struct om_store_error *err);

/* ---- mounts (manifest_mount.c) ---- */

struct om_manifest_mount {
    const char *spec; /* a local PATH, or "s3:KEY": a key of the mounted bucket */
    struct om_store *store; /* the mount's client, for s3:KEY */
    const char *endpoint, *bucket, *prefix; /* of the mount */
    const char *cache_dir;                  /* s3:KEY is stored under cache_dir/manifests */
};

/* The manifest of a mount: s3:KEY is fetched with one GET (two above 64
 * MiB) into cache_dir and mapped from there. Refused unless it was built
 * from the mounted bucket and from the mount's prefix or one above it.
 * Returns 0 and *out (om_manifest_close), or a negative errno with one
 * sentence naming the manifest in err. */
int om_manifest_open_for_mount(const struct om_manifest_mount *mm, struct om_manifest **out,
                               char *err, size_t errlen);

/* ---- writing ---- */

struct om_manifest_writer;

/* A writer into fd, a regular file open for writing (pwrite: the header
 * is written last, at offset 0; nothing is read back). NULL on ENOMEM. */
struct om_manifest_writer *om_manifest_writer_new(int fd, const char *bucket, const char *prefix,
                                                  time_t built);
/* Append one key; keys must come in strictly increasing byte order
 * (-EINVAL otherwise) and hold no NUL. etag without quotes; NULL or "" for
 * none. Returns 0 or a negative errno (then only _free is useful). */
int om_manifest_writer_add(struct om_manifest_writer *w, const char *key, uint64_t size,
                           time_t mtime, const char *etag);
/* Write the index and the header with its checksum. 0 or -errno. */
int om_manifest_writer_finish(struct om_manifest_writer *w);
/* Bytes written so far. */
uint64_t om_manifest_writer_bytes(const struct om_manifest_writer *w);
void om_manifest_writer_free(struct om_manifest_writer *w);

/* An entry for om_manifest_build. */
struct om_manifest_key {
    char *key;
    const char *etag; /* without quotes; NULL or "" for none */
    uint64_t size;
    time_t mtime;
};

/* Sort keys by bytes, drop duplicates (one is kept) and write them all.
 * keys are reordered, not freed. 0 or -errno. */
int om_manifest_build(int fd, const char *bucket, const char *prefix, time_t built,
                      struct om_manifest_key *keys, size_t n);

#endif
