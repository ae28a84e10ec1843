/* Where a read of a shard's member comes from: a pure function of the
 * shard's index, the read, the reader's numbers and the state of the
 * shard's one sequential GET (the stream), with no lock, I/O or
 * allocation; the reader (phase 2 of issue 37) executes the answer and
 * unit tests pin each case.
 *
 * - A reader walking the members in tar order, or one an order hint puts
 *   in tar order, is served by the stream: one GET from its read to the
 *   end of the shard (or of stream_max bytes, then the next), which it
 *   reads through, dropping what no one asks for when a read lands up to
 *   skip_max ahead. Walking in tar order: stream_after members in a row,
 *   each starting at most skip_max after the last read's end (reads
 *   within one member do not count: the kernel splits and reorders them);
 *   a first read near the first member's data counts as stream_after and
 *   opens the stream at that member, so that workers starting together in
 *   any order all find theirs on its way. So a
 *   walk of the whole shard costs one GET (or shard / stream_max), one
 *   starting in its middle two, whatever its member count; and readers
 *   that walk it together (DataLoader workers taking every N-th member)
 *   share it while the bytes between them are still in memory. A reader
 *   in random order meets the rule by chance on about skip_max / shard
 *   size of its reads; such a stream costs the GET the read needed anyway,
 *   and what it reads ahead before it is dropped (bounded by the read
 *   buffers, as any prefetch).
 * - A read the stream holds (still in memory behind it) or will reach
 *   within skip_max comes from it, whoever asks.
 * - Any other read is one ranged GET: the whole member when it is at most
 *   small_member (a loader reads all of it, header first), else what is
 *   asked; rounded out to align (the data cache's block, so what is
 *   fetched can be stored). A reader behind the stream gets ranges rather
 *   than pulling the stream back from the readers ahead of it.
 * - A read the data cache holds whole costs no request.
 *
 * Building an index from the headers (om_shard_plan_scan) follows the
 * same rule: read on through the stream while the next header is at most
 * skip_max ahead, else open a new GET at the header: one GET for a shard
 * of small members, one more per member larger than skip_max. */
#ifndef OBJMOUNT_SHARD_PLAN_H
#define OBJMOUNT_SHARD_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "objmount/shard_index.h"

/* Defaults (doc/decisions.md, "Shards as directories"). */
#define OM_SHARD_SKIP_MAX (4ULL << 20)
#define OM_SHARD_STREAM_AFTER 2

struct om_shard_plan_config {
    /* bytes a stream reads and drops rather than start another GET: about
     * the round trip times the bandwidth of one connection */
    uint64_t skip_max;
    uint64_t small_member; /* a ranged read of a member up to this fetches it whole */
    uint64_t align;        /* ranges and streams start and end on multiples (1: none) */
    uint64_t stream_max;   /* a stream's GET covers at most this many bytes; 0: the rest */
    unsigned stream_after; /* members in tar order in a row that open a stream (at least 1) */
};

/* The shard's sequential GET, as the reader keeps it. */
struct om_shard_stream {
    bool active;
    uint64_t pos;       /* offset of the next byte it delivers */
    uint64_t end;       /* end of its range */
    uint64_t kept_from; /* bytes [kept_from, pos) are still in memory */
};

/* One reader's numbers (a handle, or a process walking the shard). */
struct om_shard_reader {
    bool started;
    uint32_t last_member;
    uint64_t last_end; /* shard offset after its last read */
    unsigned in_order; /* members in a row in tar order, the last one included */
};

struct om_shard_read_req {
    uint32_t member;   /* a file of the index */
    uint64_t off, len; /* within the member */
    bool hinted;       /* an order hint puts this read in tar order */
    bool cached;       /* the data cache holds the read's bytes (om_shard_plan_span) */
};

enum om_shard_read_kind {
    OM_SHARD_READ_NONE,   /* nothing to fetch: at or past the member's end, or len 0 */
    OM_SHARD_READ_CACHE,  /* from the data cache */
    OM_SHARD_READ_STREAM, /* from the stream */
    OM_SHARD_READ_RANGE,  /* one ranged GET */
};

struct om_shard_read_plan {
    enum om_shard_read_kind kind;
    uint64_t off, end; /* the shard's bytes the read returns (off == end: none) */
    /* STREAM: cancel the stream (if any) first and GET [stream_from,
     * stream_end) when open_stream; then drop skip bytes (from its
     * position, or from stream_from) before off. */
    bool open_stream;
    uint64_t stream_from, stream_end;
    uint64_t skip;
    /* RANGE: GET [range_off, range_end), which holds [off, end) */
    uint64_t range_off, range_end;
    struct om_shard_reader next; /* the reader's numbers after this read */
};

/* The shard bytes [*off, *end) of reading len bytes at off of member m,
 * clipped to the member; false when there are none (past its end, len 0,
 * not a file). */
bool om_shard_plan_span(const struct om_shard_index *ix, uint32_t member, uint64_t off,
                        uint64_t len, uint64_t *span_off, uint64_t *span_end);

/* The plan for one read of a finished index's member. */
struct om_shard_read_plan om_shard_plan_read(const struct om_shard_index *ix,
                                             const struct om_shard_read_req *q,
                                             const struct om_shard_stream *s,
                                             const struct om_shard_reader *r,
                                             const struct om_shard_plan_config *c);

/* Building an index: the stream (active or not) is at pos and the tar
 * parser needs bytes from need on. reopen false: read on (dropping need -
 * pos bytes); true: GET [from, end) instead. */
struct om_shard_scan {
    bool reopen;
    uint64_t from, end;
};
struct om_shard_scan om_shard_plan_scan(bool active, uint64_t pos, uint64_t need,
                                        uint64_t shard_size, const struct om_shard_plan_config *c);

#endif
