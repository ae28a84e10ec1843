/* An intrusive chained hash table: callers embed struct om_hnode in their
 * records and compare keys themselves. Not thread-safe: the owner's lock
 * guards it. */
#ifndef OBJMOUNT_HASH_H
#define OBJMOUNT_HASH_H

#include <stddef.h>
#include <stdint.h>

struct om_hnode {
    struct om_hnode *next;
    uint64_t hash;
};

struct om_htable {
    struct om_hnode **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;
};

/* Returns 0 or -ENOMEM. */
int om_htable_init(struct om_htable *t, size_t initial);
/* Frees the bucket array only; records belong to the caller. */
void om_htable_destroy(struct om_htable *t);
/* Insert n with hash h. Never fails: when growing is impossible the table
 * just gets longer chains. */
void om_htable_insert(struct om_htable *t, struct om_hnode *n, uint64_t h);
void om_htable_remove(struct om_htable *t, struct om_hnode *n);
/* First node with hash h, then om_htable_next() for the next with the same
 * hash. */
struct om_hnode *om_htable_first(const struct om_htable *t, uint64_t h);
struct om_hnode *om_htable_next(const struct om_hnode *n, uint64_t h);

uint64_t om_hash_bytes(const void *p, size_t n);
uint64_t om_hash_u64(uint64_t v);

#define om_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
