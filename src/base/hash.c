/* Intrusive chained hash table. */
#include "objmount/hash.h"

#include <errno.h>
#include <stdlib.h>

int om_htable_init(struct om_htable *t, size_t initial)
{
    size_t n = 16;
    while (n < initial)
        n *= 2;
    t->buckets = calloc(n, sizeof(*t->buckets));
    if (!t->buckets)
        return -ENOMEM;
    t->nbuckets = n;
    t->count = 0;
    return 0;
}

void om_htable_destroy(struct om_htable *t)
{
    free(t->buckets);
    t->buckets = NULL;
    t->nbuckets = t->count = 0;
}

static void grow(struct om_htable *t)
{
    size_t n = t->nbuckets * 2;
    struct om_hnode **b = calloc(n, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < t->nbuckets; i++) {
        struct om_hnode *x = t->buckets[i];
        while (x) {
            struct om_hnode *next = x->next;
            size_t k = x->hash & (n - 1);
            x->next = b[k];
            b[k] = x;
            x = next;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

void om_htable_insert(struct om_htable *t, struct om_hnode *n, uint64_t h)
{
    if (t->count >= t->nbuckets)
        grow(t);
    n->hash = h;
    size_t k = h & (t->nbuckets - 1);
    n->next = t->buckets[k];
    t->buckets[k] = n;
    t->count++;
}

void om_htable_remove(struct om_htable *t, struct om_hnode *n)
{
    struct om_hnode **pp = &t->buckets[n->hash & (t->nbuckets - 1)];
    while (*pp) {
        if (*pp == n) {
            *pp = n->next;
            n->next = NULL;
            t->count--;
            return;
        }
        pp = &(*pp)->next;
    }
}

struct om_hnode *om_htable_first(const struct om_htable *t, uint64_t h)
{
    struct om_hnode *x = t->buckets[h & (t->nbuckets - 1)];
    while (x && x->hash != h)
        x = x->next;
    return x;
}

struct om_hnode *om_htable_next(const struct om_hnode *n, uint64_t h)
{
    struct om_hnode *x = n->next;
    while (x && x->hash != h)
        x = x->next;
    return x;
}

uint64_t om_hash_bytes(const void *p, size_t n)
{
    /* FNV-1a, then a final mix so low bits are usable as bucket index */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ULL;
    }
    return om_hash_u64(h);
}

uint64_t om_hash_u64(uint64_t v)
{
    v ^= v >> 33;
    v *= 0xff51afd7ed558ccdULL;
    v ^= v >> 33;
    v *= 0xc4ceb9fe1a85ec53ULL;
    v ^= v >> 33;
    return v;
}
