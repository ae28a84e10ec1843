/* Shard indexes: the members of a tar shard (name, where its data lies in
 * the shard, size, mode, owner, mtime, type) in tar order, whatever they
 * were read from: the tar headers (shard_tar.h), an index object beside
 * the shard (shard_wds.h: DALI's wds2idx, WebDataset's wids), or
 * objmount's own compact index kept in the data cache directory
 * (om_shard_index_encode/_decode below). Everything here is pure: no I/O,
 * no lock; an index is built by one thread and, once finished, may be
 * read from any number of threads.
 *
 * Building: om_shard_index_init, om_shard_index_add per member in tar
 * order, om_shard_index_finish. Names are normalised as they are added
 * ("./a//b/" is "a/b"; a leading '/' is dropped, as GNU tar does); a name
 * that cannot be a path of the mount (a ".." segment, a segment longer
 * than 255 bytes, a NUL) is not listed but counted in skipped. finish
 * sorts the names, resolves hard links to the data of their target and
 * hides what a directory listing must not show: a name given again later
 * in the tar (the later one wins, as extracting would leave it) and a
 * file where a directory of the same name exists (the directory wins, as
 * in the rest of the namespace).
 *
 * Memory is bounded by struct om_shard_limits: at most max_members
 * members and max_name_bytes of names; beyond either, add fails with
 * -EFBIG, whatever the input claims. A member costs sizeof(struct
 * om_shard_member) + 4 bytes + its name. */
#ifndef OBJMOUNT_SHARD_INDEX_H
#define OBJMOUNT_SHARD_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objmount/util.h"

#define OM_SHARD_NAME_MAX 4095         /* longest member path, in bytes (PATH_MAX - 1) */
#define OM_SHARD_SEGMENT_MAX 255       /* longest name of one path segment (NAME_MAX) */
#define OM_SHARD_BLOCK ((uint64_t)512) /* tar's block: headers and data start on one */

/* Defaults of struct om_shard_limits (a zero field takes its default). */
#define OM_SHARD_MAX_MEMBERS (1ULL << 20)
#define OM_SHARD_MAX_NAME_BYTES (256ULL << 20)
#define OM_SHARD_MAX_EXT_HEADER (1ULL << 20)

struct om_shard_limits {
    uint64_t max_members;    /* members, including those hidden or skipped by name */
    uint64_t max_name_bytes; /* bytes of every name and link target, with their NULs */
    uint64_t max_ext_header; /* bytes of one PAX or GNU long-name header (shard_tar.c) */
};

enum om_shard_type {
    OM_SHARD_FILE = 0,
    OM_SHARD_DIR = 1,
    OM_SHARD_SYMLINK = 2,
    /* a hard link as added: finish turns it into OM_SHARD_FILE with the
     * data of its target and OM_SHARD_M_HARDLINK, or hides it (dangling) */
    OM_SHARD_HARDLINK = 3,
};

/* Member flags. */
#define OM_SHARD_M_HARDLINK 1u /* a file that is a hard link; link names its target */
#define OM_SHARD_M_HIDDEN 2u   /* not listed: set by finish (duplicate, shadowed, dangling) */

struct om_shard_member {
    uint64_t offset;     /* of the data in the shard (a multiple of OM_SHARD_BLOCK) */
    uint64_t size;       /* bytes of data (0 for directories and symbolic links) */
    int64_t mtime;       /* seconds since the epoch */
    uint32_t mtime_nsec; /* below 1e9 */
    uint32_t mode;       /* permission bits (07777) */
    uint32_t uid, gid;
    uint32_t name;     /* the NUL-terminated normalised path, at names + name */
    uint32_t link;     /* a link's target at names + link, or OM_SHARD_NO_LINK */
    uint16_t name_len; /* without the NUL, 1..OM_SHARD_NAME_MAX */
    uint8_t type;      /* enum om_shard_type */
    uint8_t flags;     /* OM_SHARD_M_* */
};
#define OM_SHARD_NO_LINK UINT32_MAX

/* What an index was built from. */
enum om_shard_source {
    OM_SHARD_SRC_TAR = 1,  /* the tar headers: modes, owners and times are the headers' */
    OM_SHARD_SRC_DALI = 2, /* a DALI wds2idx index: names, offsets, sizes only */
    OM_SHARD_SRC_WIDS = 3, /* a WebDataset (wids) .index: names, offsets, sizes only */
};

/* Entries not listed, by reason. The first four are counted as entries
 * are added (and kept by the encoded index); the last two by finish. */
struct om_shard_skipped {
    uint32_t sparse;   /* GNU sparse files (type 'S' or PAX GNU.sparse.*): no exact range */
    uint32_t special;  /* devices, FIFOs, GNU volume labels and old long names */
    uint32_t bad_name; /* a ".." segment, a segment over 255 bytes, a NUL, or empty */
    uint32_t other;    /* reserved for formats that drop entries (0 today) */
    uint32_t dangling; /* hard links whose target is not an earlier file */
    uint32_t shadowed; /* names given again later, files under a directory's name */
};

struct om_shard_index {
    struct om_shard_member *members; /* in tar order */
    size_t n;
    char *names; /* every name and link target, NUL-terminated */
    size_t names_len;
    uint32_t *by_name;   /* after finish: member numbers sorted by name, then number */
    uint64_t shard_size; /* bytes of the shard; every member's data lies within it */
    uint64_t first_data; /* after finish: offset of the first file's data (shard_size: none) */
    uint64_t listed;     /* after finish: members not hidden */
    enum om_shard_source source;
    struct om_shard_skipped skipped;
    struct om_shard_limits lim;
    bool finished;
    size_t cap, names_cap; /* allocated */
};

/* An empty index of a shard of shard_size bytes. lim may be NULL (the
 * defaults); a zero field of it takes its default. Never fails. */
void om_shard_index_init(struct om_shard_index *ix, const struct om_shard_limits *lim,
                         uint64_t shard_size, enum om_shard_source source);
/* Frees what the index holds; it is then empty (init again to reuse). */
void om_shard_index_free(struct om_shard_index *ix);

/* One member as a reader of a format gives it. */
struct om_shard_entry {
    const char *name; /* not normalised, need not be NUL-terminated */
    size_t name_len;
    const char *link; /* symlink or hard link target, or NULL */
    size_t link_len;
    uint64_t offset, size;
    int64_t mtime;
    uint32_t mtime_nsec, mode, uid, gid;
    enum om_shard_type type;
    uint8_t flags; /* OM_SHARD_M_HARDLINK for a resolved link (decoding our own index) */
};

/* Add the next member in tar order (before finish). Returns 0 when it was
 * added, 1 when it was counted in skipped.bad_name and not added (or
 * silently dropped: the archive's root, "." or "./"), or a negative
 * errno: -EFBIG beyond the limits, or data beyond shard_size or
 * overflowing; -ENAMETOOLONG a name or link over OM_SHARD_NAME_MAX bytes;
 * -EINVAL an offset that is not a multiple of OM_SHARD_BLOCK, a type out
 * of range or mtime_nsec >= 1e9; -ENOMEM. On error the index is
 * unchanged. */
int om_shard_index_add(struct om_shard_index *ix, const struct om_shard_entry *e);

/* Sort, resolve hard links, hide duplicates and shadowed files (see the
 * top). 0 or -ENOMEM (then the index is unusable but may be freed). */
int om_shard_index_finish(struct om_shard_index *ix);

/* The member's name or link target (link: NULL when it has none). */
static inline const char *om_shard_member_name(const struct om_shard_index *ix,
                                               const struct om_shard_member *m)
{
    return ix->names + m->name;
}
static inline const char *om_shard_member_link(const struct om_shard_index *ix,
                                               const struct om_shard_member *m)
{
    return m->link == OM_SHARD_NO_LINK ? NULL : ix->names + m->link;
}

/* Look up path (relative to the shard's root, no leading or trailing '/';
 * "" is the root) in a finished index. Returns 0 and *member for a listed
 * member, 1 for a directory that has no entry of its own (the root, or a
 * prefix of members' names), -ENOENT otherwise. */
int om_shard_index_find(const struct om_shard_index *ix, const char *path, size_t len,
                        uint32_t *member);

/* One entry of a directory: its name (one segment, not NUL-terminated)
 * and the member, or UINT32_MAX for a directory without an entry of its
 * own. Return 0 to go on, > 0 to stop (om_shard_index_list returns 0), or
 * a negative errno (returned). */
typedef int (*om_shard_list_cb)(void *ud, const char *name, size_t len, uint32_t member);

/* The entries of directory dir (as for find) of a finished index, each
 * once, in byte order of their names. A subdirectory holding many members
 * costs one binary search, not a visit of each. Returns 0, -ENOENT (no
 * such directory), -ENOTDIR (a file or symlink), or what cb returned. */
int om_shard_index_list(const struct om_shard_index *ix, const char *dir, size_t len,
                        om_shard_list_cb cb, void *ud);

/* ---- objmount's own index file ----
 *
 * Format (version 1, little-endian; doc/decisions.md "Shards as
 * directories"):
 *   magic "OMSHIDX1"(8), version u32, flags u32 (0), source u32,
 *   shard size u64, member count u64, name bytes u64 (a bound for the
 *   reader's allocation), the four parse-time skipped counters u32 each,
 *   then endpoint, bucket, key and ETag of the shard (u16 length + bytes);
 *   members in tar order: varint type | flags << 2, zigzag varint of the
 *   offset minus the previous member's end (offset + size), varint size,
 *   zigzag varint of the mtime minus the previous member's, varint nsec,
 *   varint mode, uid, gid, name front-coded against the previous name
 *   (varint shared length, varint suffix length, suffix), varint link
 *   length + 1 (0: none) and the link;
 *   then the SHA-256 of every byte before it.
 * About 12 bytes per member plus what its name does not share with the
 * previous one: a WebDataset shard of 10,000 members takes ~200 KB. */

#define OM_SHARD_INDEX_VERSION 1

/* The shard an index file describes. A file is only accepted for the same
 * endpoint, bucket, key, ETag and size. Strings at most 65535 bytes. */
struct om_shard_ident {
    const char *endpoint, *bucket, *key;
    const char *etag; /* without quotes; an object without ETag cannot be cached */
    uint64_t size;
};

/* Append the encoded finished index ix of shard id to out. 0, -EINVAL (an
 * unfinished index, an identity string too long, no ETag, or id->size not
 * the index's shard_size) or -ENOMEM (out then holds a partial file). */
int om_shard_index_encode(const struct om_shard_index *ix, const struct om_shard_ident *id,
                          struct om_buf *out);

/* Decode buf[0..len) into ix (uninitialised; lim may be NULL) and finish
 * it, only if it is an index of shard expect. Returns 0, or a negative
 * errno with one sentence in err: -EINVAL not an index file,
 * -EPROTONOSUPPORT another format version, -EBADMSG checksum mismatch,
 * truncated or malformed, -ESTALE an index of another shard or another
 * version of it (another ETag or size), -EFBIG beyond lim, -ENOMEM. On
 * error ix holds nothing. */
int om_shard_index_decode(const void *buf, size_t len, const struct om_shard_ident *expect,
                          const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                          size_t errlen);

/* Decode flags (fuzzing; the structure is still checked): skip the
 * checksum; skip the identity (expect may then be NULL). */
#define OM_SHARD_DECODE_NO_CHECKSUM 1u
#define OM_SHARD_DECODE_NO_IDENT 2u
int om_shard_index_decode_flags(const void *buf, size_t len, const struct om_shard_ident *expect,
                                const struct om_shard_limits *lim, unsigned flags,
                                struct om_shard_index *ix, char *err, size_t errlen);

#endif
