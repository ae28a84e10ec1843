/* The namespace's smallest pieces, which every other file of it uses and
 * which use none of them: the allocator's size of a block (the memory every
 * record is charged at), the rules and the hash of a name, an inode's extra.
 * At the bottom of src/ns (doc/architecture.md). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/hash.h"
#include "meta_int.h"

size_t mi_mem_size(const void *p)
{
    return p ? malloc_usable_size((void *)p) + sizeof(size_t) : 0;
}

bool mi_valid_name(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= NAME_MAX_BYTES && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 &&
           !strchr(name, '/');
}

uint64_t mi_name_hash(const char *name)
{
    return om_hash_bytes(name, strlen(name));
}

struct inode_extra *mi_extra(struct om_meta *m, struct inode *i)
{
    if (i->is_dir)
        return &i->d->x;
    if (!i->x) {
        i->x = calloc(1, sizeof(*i->x));
        mi_mem_charge(&m->mem, i->x);
    }
    return i->x;
}
