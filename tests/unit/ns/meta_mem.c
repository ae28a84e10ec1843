/* Heap bytes per key of the namespace after a readdirplus walk (issue 16).
 *
 * Builds DIRS directories of FILES listed objects each under the root, the
 * way a `find` over a mount with profile=training reads them: every
 * directory listed whole (its listing installed), then read with
 * readdirplus, so every name gets an inode besides its listing entry. No
 * request is made (no S3 client). Prints heap and RSS per key.
 *
 * usage: meta_mem [total_keys [files_per_dir [name_prefix]]]
 *        (default 1000000 1000 img-: names img-00000000.jpg, 16 bytes) */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/meta.h"
#include "meta_int.h"

static int fill_none(void *ud, const char *name, const struct om_attr *a, off_t next)
{
    (void)name, (void)a, (void)next;
    ++*(size_t *)ud;
    return 0;
}

static long rss_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0)
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static void md5_hex(unsigned k, char out[33])
{
    uint64_t a = k * 0x9e3779b97f4a7c15ULL, b = ~a * 0xc2b2ae3d27d4eb4fULL;
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)a, (unsigned long long)b);
}

static void read_dir(struct om_meta *m, uint64_t ino, size_t *seen)
{
    struct om_dirh *d;
    if (om_meta_opendir(m, ino, &d)) {
        fprintf(stderr, "opendir %llu failed\n", (unsigned long long)ino);
        exit(1);
    }
    if (om_meta_readdir(m, d, 0, true, fill_none, seen)) {
        fprintf(stderr, "readdir failed\n");
        exit(1);
    }
    om_meta_releasedir(m, d);
}

int main(int argc, char **argv)
{
    size_t total = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000000;
    size_t per = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
    const char *fprefix = argc > 3 ? argv[3] : "img-";
    size_t dirs = (total + per - 1) / per;
    struct om_meta_config cfg = {.prefix = "train/",
                                 .attr_ttl_ms = 86400000,
                                 .entry_ttl_ms = 86400000,
                                 .file_mode = 0644,
                                 .dir_mode = 0755,
                                 .metadata = OM_META_LISTING,
                                 .ro = true};
    malloc_trim(0);
    struct mallinfo2 before = mallinfo2();
    long rss0 = rss_kib("VmRSS:");
    struct om_meta *m = om_meta_new(NULL, &cfg);
    if (!m)
        return 1;
    m->stopping = true; /* no background listing: there is no server */
    pthread_mutex_lock(&m->lock);
    struct listing *rl = mi_listing_new(m);
    char name[300], etag[40];
    for (size_t d = 0; d < dirs; d++) {
        snprintf(name, sizeof(name), "shard-%05zu", d);
        mi_listing_add(rl, name, true, 0, 0, NULL);
    }
    mi_install_listing(m, m->root, rl);
    pthread_mutex_unlock(&m->lock);
    size_t seen = 0;
    read_dir(m, OM_ROOT_INO, &seen);
    unsigned k = 0;
    for (size_t d = 0; d < dirs; d++) {
        struct om_attr a;
        snprintf(name, sizeof(name), "shard-%05zu", d);
        if (om_meta_lookup(m, OM_ROOT_INO, name, &a)) {
            fprintf(stderr, "lookup %s failed\n", name);
            return 1;
        }
        pthread_mutex_lock(&m->lock);
        struct inode *dir = mi_inode_get(m, a.ino);
        struct listing *l = mi_listing_new(m);
        for (size_t f = 0; f < per && k < total; f++, k++) {
            snprintf(name, sizeof(name), "%.200s%08u.jpg", fprefix, k);
            md5_hex(k, etag);
            mi_listing_add(l, name, false, 100000 + k, 1700000000 + k, etag);
        }
        mi_install_listing(m, dir, l);
        pthread_mutex_unlock(&m->lock);
        read_dir(m, a.ino, &seen);
    }
    struct mallinfo2 after = mallinfo2();
    long rss1 = rss_kib("VmRSS:");
    size_t heap = after.uordblks + after.hblkhd - before.uordblks - before.hblkhd;
    printf("keys %zu (%zu dirs, %zu entries read)\n", (size_t)k, dirs, seen);
    printf("sizeof struct inode %zu, struct dentry %zu, struct listing %zu\n", sizeof(struct inode),
           sizeof(struct dentry), sizeof(struct listing));
    printf("heap in use %zu bytes: %.1f bytes/key\n", heap, (double)heap / (double)k);
    printf("RSS grew %ld KiB: %.1f bytes/key\n", rss1 - rss0,
           (double)(rss1 - rss0) * 1024.0 / (double)k);
    struct om_meta_stats st;
    om_meta_get_stats(m, &st);
    printf("charged to the budget %llu bytes: %.1f bytes/key, %.1f%% of the heap in use\n",
           (unsigned long long)st.bytes, (double)st.bytes / (double)k,
           100.0 * (double)st.bytes / (double)heap);
    om_meta_free(m);
    return 0;
}
