/* The multipart layout of a file being written: pure functions of the part
 * size and offsets, no locks, no I/O, no allocation (writer.c keeps its
 * parts on it; tests/unit/test_part_layout.c pins the edges).
 *
 * Part numbers start at 1, as in S3. Parts 1 to 1000 are part_size long,
 * 1001 to 2000 twice that, and so on: each tier of OM_PARTS_PER_TIER parts
 * doubles the length, and OM_PART_TIERS tiers make OM_PART_MAX parts, the
 * 10,000 S3 allows. A file of up to 1023000 * part_size bytes fits;
 * part_size is at most 5 GiB (config.c), so no sum overflows. */
#ifndef OBJMOUNT_PART_LAYOUT_H
#define OBJMOUNT_PART_LAYOUT_H

#include <stdint.h>

#define OM_PARTS_PER_TIER 1000
#define OM_PART_TIERS 10
#define OM_PART_MAX (OM_PARTS_PER_TIER * OM_PART_TIERS) /* the 10,000 parts S3 and AIStore allow */

/* The part holding offset off (part_size > 0): returns its number and sets
 * *start and *len (its full length, whatever the file's size). -EFBIG,
 * *start and *len untouched, when off lies past the last part. */
int om_part_of(uint64_t part_size, uint64_t off, uint64_t *start, uint64_t *len);

/* How many parts cover a file of size bytes: 0 when empty, -EFBIG when it
 * would take more than OM_PART_MAX. */
int om_part_count(uint64_t part_size, uint64_t size);

/* Where part number (1 to OM_PART_MAX) lies in a file of size bytes:
 * *off its first byte, *len its bytes in the file (its full length, less
 * for the part holding the last byte, 0 for a part wholly past the end). */
void om_part_span(uint64_t part_size, uint64_t size, int number, uint64_t *off, uint64_t *len);

#endif
