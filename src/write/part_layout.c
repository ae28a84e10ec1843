/* The multipart layout (see include/objmount/part_layout.h). */
#include "objmount/part_layout.h"

#include <errno.h>

#include "objmount/util.h"

int om_part_of(uint64_t part_size, uint64_t off, uint64_t *start, uint64_t *len)
{
    uint64_t tier_start = 0, size = part_size;
    for (int tier = 0; tier < OM_PART_TIERS; tier++) {
        uint64_t tier_len = size * OM_PARTS_PER_TIER;
        if (off < tier_start + tier_len) {
            uint64_t k = (off - tier_start) / size;
            *start = tier_start + k * size;
            *len = size;
            return tier * OM_PARTS_PER_TIER + (int)k + 1;
        }
        tier_start += tier_len;
        size *= 2;
    }
    return -EFBIG;
}

int om_part_count(uint64_t part_size, uint64_t size)
{
    uint64_t start, len;
    return size == 0 ? 0 : om_part_of(part_size, size - 1, &start, &len);
}

void om_part_span(uint64_t part_size, uint64_t size, int number, uint64_t *off, uint64_t *len)
{
    int tier = (number - 1) / OM_PARTS_PER_TIER;
    uint64_t start = 0, part_len = part_size;
    for (int t = 0; t < tier; t++) {
        start += part_len * OM_PARTS_PER_TIER;
        part_len *= 2;
    }
    start += (uint64_t)((number - 1) % OM_PARTS_PER_TIER) * part_len;
    *off = start;
    *len = start >= size ? 0 : OM_MIN(part_len, size - start);
}
