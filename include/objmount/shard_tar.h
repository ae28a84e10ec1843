/* The tar headers of a shard, parsed from its bytes fed in pieces, into a
 * shard index (shard_index.h). Pure: no I/O, no lock; one parser per
 * thread at a time. The bytes may come from one sequential GET of the
 * shard (feed everything) or from ranged GETs of the headers only (feed
 * what om_tar_parser_need asks for: a member's data is never needed).
 *
 * Formats: ustar (with its 155-byte prefix), GNU (long names 'L' and long
 * link names 'K', base-256 numbers, dumpdirs 'D'), PAX ('x' per member:
 * path, linkpath, size, mtime with a fraction, uid, gid; 'g' global:
 * mtime, uid and gid apply to every later member; other keys ignored),
 * and v7 (no magic). Every header's checksum is verified (the unsigned
 * sum, or the signed one old writers used): a bad header is an error,
 * never a wrong listing.
 *
 * Members: regular files ('0', NUL, '7' and, as POSIX and Python's
 * tarfile do, unknown types) with their data; directories ('5', 'D');
 * symbolic links ('2'); hard links ('1', resolved by om_shard_index_finish
 * to their target's data). Not listed and counted in the index's skipped:
 * GNU sparse files (type 'S' with its extension blocks, or PAX
 * GNU.sparse.* keys: their data is not one range of the tar), devices and
 * FIFOs ('3', '4', '6'), volume labels ('V') and old GNU long names
 * ('N'). Refused: multi-volume continuations ('M').
 *
 * The archive must end with its end-of-archive marker (a zero block):
 * a shard that ends without one was cut short, and listing what came
 * before would be a wrong listing. */
#ifndef OBJMOUNT_SHARD_TAR_H
#define OBJMOUNT_SHARD_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "objmount/shard_index.h"

struct om_tar_parser;

/* A parser that adds the members it finds to ix, which the caller has
 * initialised (om_shard_index_init: its shard_size bounds every member,
 * its limits bound every header) and keeps until the parser is freed.
 * NULL on ENOMEM. */
struct om_tar_parser *om_tar_parser_new(struct om_shard_index *ix);
void om_tar_parser_free(struct om_tar_parser *p);

/* Feed bytes [off, off + len) of the shard. Bytes the parser has passed
 * are dropped (pieces may overlap); off may lie ahead of the parser only
 * within a member's data, which it skips (never past the next header:
 * -EINVAL). Returns 0 (more is needed), 1 (the end-of-archive marker was
 * reached: later bytes are ignored), or a negative errno with a sentence
 * in om_tar_parser_error: -EBADMSG a bad header (checksum, a number, a
 * PAX record); -EPROTONOSUPPORT not a tar (compressed: gzip, bzip2, xz,
 * zstd, lz4 are named) or a multi-volume archive; -EIO a member or header
 * past the shard's end (truncated); -EFBIG or -ENAMETOOLONG beyond the
 * limits; -ENOMEM. After an error every call returns it again. */
int om_tar_parser_feed(struct om_tar_parser *p, uint64_t off, const void *buf, size_t len);

/* What the parser needs next: bytes [*off, *off + *len), a header, or the
 * rest of an extended header and the header after it. Bytes before *off
 * are not needed. Once the end was reached, *off is the end-of-archive
 * marker's offset and *len is 0. */
void om_tar_parser_need(const struct om_tar_parser *p, uint64_t *off, uint64_t *len);

/* The caller has nothing more to feed. Returns 0 when the end-of-archive
 * marker was reached, after om_shard_index_finish(ix) (whose -ENOMEM it
 * returns); -EIO when the shard ended before it (a sentence in
 * om_tar_parser_error); or the error feed returned. */
int om_tar_parser_finish(struct om_tar_parser *p);

/* The last error's sentence (names the offset and, where known, the
 * member), or "". Valid until the parser is freed. */
const char *om_tar_parser_error(const struct om_tar_parser *p);

/* Headers seen so far (every kind: extended headers, skipped entries). */
uint64_t om_tar_parser_headers(const struct om_tar_parser *p);

/* The whole shard in memory: init ix (lim may be NULL) for len bytes,
 * parse and finish it. 0, or a negative errno as above with the sentence
 * in err; on error ix holds nothing. */
int om_tar_index_buf(const void *buf, size_t len, const struct om_shard_limits *lim,
                     struct om_shard_index *ix, char *err, size_t errlen);

#endif
