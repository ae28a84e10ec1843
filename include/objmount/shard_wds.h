/* Index objects that WebDataset tools keep beside a shard, read into a
 * shard index (shard_index.h) so that listing the shard costs one small
 * GET instead of a pass over its headers. Pure: no I/O, no lock.
 *
 * DALI (NVIDIA/DALI tools/wds2idx.py, read by fn.readers.webdataset):
 * text, "v1.2 SAMPLES" then one line per sample holding, per member,
 * "EXT OFFSET SIZE NAME" separated by spaces (OFFSET of the data, a
 * multiple of 512). v1.1 has no names and is refused (-EPROTONOSUPPORT).
 * Names are taken as written; a name with a '\' is refused, since GNU
 * tar's listing, which wds2idx reads, escapes some bytes that way.
 *
 * WebDataset's wids (webdataset/wids/wids_tar.py, TarFileReader): a
 * Python pickle of (names, numpy array of [offset, size] rows), offsets of
 * the data. Read by a small interpreter of the pickle opcodes protocols
 * 2-5 use for lists, strings, tuples and numpy arrays; it calls nothing:
 * numpy's reconstructors are recognised by name and their arguments
 * decoded, any other object is refused (-EBADMSG).
 *
 * Both list regular files only (wds2idx also leaves out names whose part
 * before the first dot is empty: hidden files): no directories (implied
 * by the names), links, modes, owners or times (the index's source says
 * so; members get mode 0 and mtime 0, and the mount gives them its file
 * mode and the shard's mtime). Every member must lie inside the shard in
 * tar order, leaving room for a header before each: an index that does
 * not fit the shard is -ESTALE (another version of it), one that cannot
 * describe a tar is -EBADMSG. */
#ifndef OBJMOUNT_SHARD_WDS_H
#define OBJMOUNT_SHARD_WDS_H

#include <stddef.h>
#include <stdint.h>

#include "objmount/shard_index.h"

/* DALI's index text[0..len) of a shard of shard_size bytes into ix
 * (uninitialised; lim may be NULL), finished. 0, or a negative errno with
 * one sentence in err: -EBADMSG malformed (the line is named),
 * -EPROTONOSUPPORT another version, -EINVAL an escaped name, -ESTALE not
 * this shard's, -EFBIG beyond lim, -ENOMEM. On error ix holds nothing. */
int om_shard_wds_dali(const char *text, size_t len, uint64_t shard_size,
                      const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                      size_t errlen);

/* wids' pickled index buf[0..len), as om_shard_wds_dali (-EBADMSG also
 * for an opcode or object this reader does not take). */
int om_shard_wds_wids(const void *buf, size_t len, uint64_t shard_size,
                      const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                      size_t errlen);

/* The keys where the tools put the index of shard key: DALI's
 * ("dir/train-000.tar" -> "dir/train-000.idx": the name up to the first
 * dot after its first character, then ".idx") and wids' (key + ".index").
 * 0, or -ENAMETOOLONG when a buffer is too small. */
int om_shard_wds_index_keys(const char *key, char *dali, size_t dali_len, char *wids,
                            size_t wids_len);

#endif
