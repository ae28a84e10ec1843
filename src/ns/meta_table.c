/* Tables of inodes: by number (m->inodes) and by name (a directory's
 * children). Open addressing with linear probing, at most 3/4 full: a slot
 * is one pointer, and an inode carries no table node. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta_int.h"

static uint64_t hash_of(const struct inode *i, bool by_name)
{
    return by_name ? mi_name_hash(mi_name(i)) : om_hash_u64(i->ino);
}

int mi_table_init(struct mi_table *t, size_t initial, uint64_t *mem)
{
    t->mem = mem;
    size_t cap = 16;
    while (cap < initial)
        cap *= 2;
    t->slots = calloc(cap, sizeof(*t->slots));
    if (!t->slots)
        return -ENOMEM;
    mi_mem_charge(mem, t->slots);
    t->cap = cap;
    t->n = 0;
    return 0;
}

void mi_table_destroy(struct mi_table *t)
{
    mi_mem_free(t->mem, t->slots);
    t->slots = NULL;
    t->cap = t->n = 0;
}

struct inode *mi_table_ino(const struct mi_table *t, uint64_t ino)
{
    if (!t->cap)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t k = om_hash_u64(ino) & mask; t->slots[k]; k = (k + 1) & mask) {
        if (t->slots[k]->ino == ino)
            return t->slots[k];
    }
    return NULL;
}

struct inode *mi_table_name(const struct mi_table *t, const char *name)
{
    if (!t->cap)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t k = mi_name_hash(name) & mask; t->slots[k]; k = (k + 1) & mask) {
        if (strcmp(mi_name(t->slots[k]), name) == 0)
            return t->slots[k];
    }
    return NULL;
}

static void place(struct mi_table *t, struct inode *i, bool by_name)
{
    size_t mask = t->cap - 1, k = hash_of(i, by_name) & mask;
    while (t->slots[k])
        k = (k + 1) & mask;
    t->slots[k] = i;
}

int mi_table_add(struct mi_table *t, struct inode *i, bool by_name)
{
    if ((t->n + 1) * 4 > t->cap * 3) {
        size_t cap = t->cap ? t->cap * 2 : 16;
        struct inode **slots = calloc(cap, sizeof(*slots));
        if (slots) {
            struct inode **old = t->slots;
            size_t oldcap = t->cap;
            mi_mem_charge(t->mem, slots);
            t->slots = slots;
            t->cap = cap;
            for (size_t k = 0; k < oldcap; k++) {
                if (old[k])
                    place(t, old[k], by_name);
            }
            mi_mem_free(t->mem, old);
        } else if (t->n + 1 >= t->cap) {
            return -ENOMEM; /* fuller still works, full does not */
        }
    }
    place(t, i, by_name);
    t->n++;
    return 0;
}

void mi_table_del(struct mi_table *t, struct inode *i, bool by_name)
{
    if (!t->cap)
        return;
    size_t mask = t->cap - 1, k = hash_of(i, by_name) & mask;
    while (t->slots[k] && t->slots[k] != i)
        k = (k + 1) & mask;
    if (!t->slots[k])
        return;
    t->slots[k] = NULL;
    t->n--;
    /* shift back what probed past the freed slot */
    for (size_t j = (k + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
        size_t h = hash_of(t->slots[j], by_name) & mask;
        bool stays = k < j ? (h > k && h <= j) : (h > k || h <= j);
        if (!stays) {
            t->slots[k] = t->slots[j];
            t->slots[j] = NULL;
            k = j;
        }
    }
}
