/* Sizes of objmount's namespace records, for the bytes-per-key breakdown of
 * tools/bench/scale.py (doc/benchmarks.md, "Namespaces at scale").
 *
 *   cc -I include -I src -I build $(pkg-config --cflags fuse3) \
 *      tools/bench/meta_sizes.c -o meta_sizes && ./meta_sizes NAME_LEN KEY_LEN ETAG_LEN
 *
 * Prints one JSON object: sizeof of struct inode, dentry, listing, om_hnode,
 * and the glibc chunk (usable size + the 8-byte header) of each allocation
 * objmount makes per listed file (src/meta.c mi_inode_new, src/listing.c
 * mi_listing_add) for a name, key and ETag of the given lengths (a file's key
 * is allocated with 2 bytes more than its length: parent key + name + 2). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "meta_int.h"

static size_t chunk(size_t n)
{
    void *p = malloc(n);
    size_t c = malloc_usable_size(p) + sizeof(size_t);
    free(p);
    return c;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s NAME_LEN KEY_LEN ETAG_LEN\n", argv[0]);
        return 2;
    }
    size_t name = strtoul(argv[1], NULL, 10), key = strtoul(argv[2], NULL, 10),
           etag = strtoul(argv[3], NULL, 10);
    printf("{\"sizeof_inode\": %zu, \"sizeof_dentry\": %zu, \"sizeof_listing\": %zu, "
           "\"sizeof_hnode\": %zu, \"inode_etag_field\": %zu, \"inode_cached_etag_field\": %zu, "
           "\"inode_content_type_field\": %zu, \"sizeof_htable\": %zu, "
           "\"chunk_inode\": %zu, \"chunk_name\": %zu, \"chunk_key\": %zu, "
           "\"chunk_dentry\": %zu}\n",
           sizeof(struct inode), sizeof(struct dentry), sizeof(struct listing),
           sizeof(struct om_hnode), sizeof(((struct inode *)0)->etag),
           sizeof(((struct inode *)0)->cached_etag), sizeof(((struct inode *)0)->content_type),
           sizeof(struct om_htable), chunk(sizeof(struct inode)), chunk(name + 1),
           chunk(key + 2), chunk(sizeof(struct dentry) + name + 1 + etag + 1));
    return 0;
}
