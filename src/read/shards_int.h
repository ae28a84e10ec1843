/* Internals of src/read/: the index of one shard version, loaded for
 * shards.c by shards_index.c. */
#ifndef OBJMOUNT_READ_SHARDS_INT_H
#define OBJMOUNT_READ_SHARDS_INT_H

#include <stdint.h>
#include <time.h>

#include "objmount/reader.h"
#include "objmount/shard_index.h"
#include "objmount/store.h"

enum om_shards_from {
    OM_SHARDS_FROM_KEPT,    /* objmount's index file under cache_dir/shards */
    OM_SHARDS_FROM_OBJECT,  /* an index object beside the shard */
    OM_SHARDS_FROM_HEADERS, /* a pass over the headers (then kept) */
};

struct om_shards_load {
    /* in */
    struct om_store *store;
    struct om_reader *ranges;         /* a handle of the shard version: the pass reads it */
    const char *dir;                  /* cache_dir/shards, or NULL: nothing kept */
    const struct om_shard_ident *id;  /* the shard's endpoint, bucket, key, ETag, size */
    time_t mtime;                     /* the shard's: an older index object is not used */
    /* out */
    enum om_shards_from from;
    uint64_t scan_gets; /* GETs of the pass */
};

/* Fill ix (uninitialised) with the index of ld->id: the kept file when it
 * is this version's, else an index object not older than the shard (WebDataset's
 * wids, then DALI's), else a pass over the headers hopping over members
 * above a chunk; what an index object or a pass gave is kept (a temporary
 * file renamed into place). 0, or a negative errno with a log line (the
 * shard then stays a file). Caller holds no lock; does I/O. */
int om_shards_load_index(struct om_shards_load *ld, struct om_shard_index *ix);

#endif
