/* What one read of an open object fetches: a pure function of the reader's
 * numbers, no locks, no I/O, no allocation (reader.c executes the answer
 * under its pool lock and unit tests pin each case).
 *
 * - An object up to small_file_size is one whole range.
 * - A sequential read (at the last read's end or the prefetch frontier,
 *   within part_size either way) doubles the window each time the reader has
 *   consumed half of it, up to prefetch_max, and prefetches window bytes past
 *   the request, in chunks of window / 4 (at least 256 KiB, at most
 *   part_size).
 * - A random read is what is asked, rounded out to 64 KiB; it cancels
 *   prefetch beyond one part past it, starts none, and resets the window.
 *   Every OM_READ_FILL_AFTER-th random read asks for a background fill.
 * - With the data cache (cacheable) ranges and chunks are whole
 *   OM_DCACHE_BLOCK blocks, so what is fetched can be stored. */
#ifndef OBJMOUNT_READ_PLAN_H
#define OBJMOUNT_READ_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#define OM_READ_RANDOM_ALIGN (64 * 1024ULL)
#define OM_READ_MIN_CHUNK (256 * 1024ULL)
#define OM_READ_FILL_AFTER 4    /* random reads between two fill considerations */
/* reads of an object that started a GET of their own, before a fill into memory */
#define OM_READ_MEMORY_FILL_AFTER 32
#define OM_READ_STREAMING_RUN 4 /* sequential reads in a row that make a streaming reader */

struct om_read_plan_config {
    uint64_t small_file_size;
    uint64_t part_size;
    uint64_t prefetch_initial;
    uint64_t prefetch_max; /* at least prefetch_initial */
};

/* A reader's numbers, as reader.c keeps them. */
struct om_read_state {
    uint64_t size;         /* of the object */
    bool cacheable;        /* the data cache may hold its blocks */
    uint64_t pos;          /* end of the last read */
    uint64_t ahead;        /* sequential frontier: data is requested up to here */
    uint64_t window;       /* current prefetch window */
    uint64_t streak;       /* sequential bytes read since the window last grew */
    unsigned seq_run;      /* reads in a row each starting where the last ended */
    unsigned random_reads; /* random reads since open */
};

/* [off, end) in segments of at most chunk bytes; a segment is widened back
 * to, and its end rounded up to, a multiple of align where that space is
 * free (1: as is). Empty when off >= end. */
struct om_read_range {
    uint64_t off, end;
    uint64_t chunk;
    uint64_t align;
};

enum om_read_kind { OM_READ_SMALL, OM_READ_SEQUENTIAL, OM_READ_RANDOM };

struct om_read_plan {
    enum om_read_kind kind;
    struct om_read_range demand;   /* what the read waits for */
    struct om_read_range prefetch; /* fetched ahead, from spare memory; may be empty */
    bool cancel_prefetch;          /* cancel prefetch GETs starting at or after cancel_from */
    uint64_t cancel_from;
    /* raise next.ahead to the end of what the reader's segments cover
     * contiguously from the request's end, once demand and prefetch are
     * covered (reader.c knows its segments) */
    bool extend_ahead;
    bool consider_fill;        /* a background fill of the whole object may pay off */
    struct om_read_state next; /* the reader's numbers after this read */
};

/* The plan for reading [off, off+len) (len > 0, off + len <= s->size). */
struct om_read_plan om_read_plan_make(const struct om_read_state *s,
                                      const struct om_read_plan_config *c, uint64_t off,
                                      uint64_t len);

/* Is a read at off sequential: at the last read's end or the frontier,
 * within part_size either way (the kernel reorders and splits reads)? */
bool om_read_is_sequential(const struct om_read_state *s, const struct om_read_plan_config *c,
                           uint64_t off);

/* Does a read at off, once done, free what the reader has passed? Only a
 * streaming reader of an object above small_file_size (OM_READ_STREAMING_RUN
 * sequential reads in a row, and this one sequential): a random reader that
 * lands near its last read keeps its buffers. */
bool om_read_frees_behind(const struct om_read_state *s, const struct om_read_plan_config *c,
                          uint64_t off);

#endif
