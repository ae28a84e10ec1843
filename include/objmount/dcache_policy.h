/* The data cache's eviction and admission policy: pure bookkeeping, no I/O,
 * no locks (the owner's lock guards it), unit-tested on its own.
 *
 * Blocks are named by a 64-bit key. Every access counts towards the key's
 * frequency (kept for blocks not in the cache too, "ghosts"); every
 * `aging` accesses all frequencies are halved, so what was popular long ago
 * fades. Resident blocks are kept in least-recently-used order. When a new
 * block needs room, the least recently used residents that would have to go
 * are its victims, and the block is admitted only when it was accessed more
 * often than each of them by more than one (TinyLFU-style admission with a
 * margin). An epoch that scans a data set larger than the cache therefore
 * keeps the part that is cached instead of replacing it with the part that
 * is not (LRU keeps nothing of a cyclic scan), and a new data set replaces
 * an old one once it has been read a few times. See doc/decisions.md, "Data
 * cache". */
#ifndef OBJMOUNT_DCACHE_POLICY_H
#define OBJMOUNT_DCACHE_POLICY_H

#include <stdbool.h>
#include <stdint.h>

struct om_dpolicy;

/* aging: accesses between two halvings (at least 1). */
struct om_dpolicy *om_dpolicy_new(uint64_t aging);
void om_dpolicy_free(struct om_dpolicy *p);
/* Accesses between halvings; change it as the cache's size becomes known
 * (twice the number of blocks the cache holds). */
void om_dpolicy_set_aging(struct om_dpolicy *p, uint64_t aging);

/* A read wanted this block (cached or not). 0 or -ENOMEM. */
int om_dpolicy_access(struct om_dpolicy *p, uint64_t key);
/* The block is in the cache now (bytes of it), as the most recently used.
 * 0 or -ENOMEM. */
int om_dpolicy_insert(struct om_dpolicy *p, uint64_t key, uint64_t bytes);
/* The block left the cache (evicted, dropped, found corrupt). Its
 * frequency is remembered until it fades. */
void om_dpolicy_remove(struct om_dpolicy *p, uint64_t key);
bool om_dpolicy_resident(const struct om_dpolicy *p, uint64_t key);
uint64_t om_dpolicy_frequency(const struct om_dpolicy *p, uint64_t key);

/* Room for `need` bytes is wanted for key: the least recently used
 * residents that would have to go are written to victims (at most max; *n
 * receives how many) and true is returned when key deserves their place.
 * False, with *n = 0, when it does not, or when the residents are not
 * enough (*short_of receives the bytes missing then, else 0). Nothing is
 * removed: the caller removes the victims it really evicts. */
bool om_dpolicy_admit(struct om_dpolicy *p, uint64_t key, uint64_t need, uint64_t *victims,
                      int max, int *n, uint64_t *short_of);

/* The least recently used resident (for trimming to a smaller size). false
 * when there is none. */
bool om_dpolicy_oldest(const struct om_dpolicy *p, uint64_t *key, uint64_t *bytes);

struct om_dpolicy_stats {
    uint64_t resident;      /* blocks */
    uint64_t resident_bytes;
    uint64_t tracked;       /* resident + ghosts */
    uint64_t halvings;
};
void om_dpolicy_get_stats(const struct om_dpolicy *p, struct om_dpolicy_stats *out);

#endif
