/* Sizes of objmount's namespace records, for the bytes-per-key breakdown of
 * tools/bench/scale.py (doc/benchmarks.md, "Namespaces at scale").
 *
 *   cc -I include -I src/ns -I build $(pkg-config --cflags fuse3) \
 *      tools/bench/meta_sizes.c -o meta_sizes && ./meta_sizes NAME_LEN KEY_LEN ETAG_LEN
 *
 * Prints one JSON object: sizeof of struct inode, dentry, listing,
 * inode_dir, inode_extra, and what objmount allocates per listed file
 * (src/ns/meta_inode.c mi_inode_alloc: one glibc chunk, usable size + the
 * 8-byte header, for the inode with its name inline; src/ns/listing.c entry_new: the
 * entry in the listing's arena, 8-byte aligned, with the ETag as 16 bytes
 * when it is an MD5, else its text after the name). A file has no key of
 * its own (KEY_LEN is accepted and unused). */
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
    size_t name = strtoul(argv[1], NULL, 10), etag = strtoul(argv[3], NULL, 10);
    size_t etag_text = etag == 32 ? 0 : etag + 1; /* a plain MD5 is kept as 16 bytes */
    size_t entry = (offsetof(struct dentry, name) + name + 1 + etag_text + 7) & ~(size_t)7;
    printf("{\"sizeof_inode\": %zu, \"inode_name_offset\": %zu, \"sizeof_dentry\": %zu, "
           "\"dentry_name_offset\": %zu, \"sizeof_listing\": %zu, \"sizeof_inode_dir\": %zu, "
           "\"sizeof_inode_extra\": %zu, \"chunk_inode\": %zu, \"arena_dentry\": %zu}\n",
           sizeof(struct inode), offsetof(struct inode, name_inline), sizeof(struct dentry),
           offsetof(struct dentry, name), sizeof(struct listing), sizeof(struct inode_dir),
           sizeof(struct inode_extra), chunk(offsetof(struct inode, name_inline) + name + 1),
           entry);
    return 0;
}
