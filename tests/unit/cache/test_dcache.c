/* The data cache's disk side without a mount: CRC32C, a store and load
 * round trip, blocks that fail their checks, a restart finding the blocks,
 * the bound, drop. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/dcache.h"

#include "check_main.h"

#define B OM_DCACHE_BLOCK

struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done, rc;
};

static void done(void *ud, int rc)
{
    struct waiter *w = ud;
    pthread_mutex_lock(&w->lock);
    w->done++;
    w->rc = rc;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static int wait_done(struct waiter *w)
{
    pthread_mutex_lock(&w->lock);
    while (!w->done)
        pthread_cond_wait(&w->cond, &w->lock);
    w->done = 0;
    int rc = w->rc;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

static struct waiter W = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};

static char dir[] = "/tmp/om-dcache-XXXXXX";

static void remove_tree(void)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static struct om_dcache *open_cache(uint64_t size)
{
    struct om_dcache_config c = {.cache_dir = dir, .endpoint = "http://e", .bucket = "b",
                                 .size = size};
    char err[256];
    struct om_dcache *dc = om_dcache_new(&c, err, sizeof(err));
    ck_assert_msg(dc != NULL, "%s", err);
    return dc;
}

static char *data(uint64_t n, int seed)
{
    char *p = malloc(n);
    for (uint64_t i = 0; i < n; i++)
        p[i] = (char)(i * 31 + (uint64_t)seed);
    return p;
}

/* every block file under dir/data/XX */
static int block_files(char paths[][600], int max)
{
    int n = 0;
    for (int s = 0; s < 256; s++) {
        char sub[300];
        snprintf(sub, sizeof(sub), "%s/data/%02x", dir, s);
        DIR *d = opendir(sub);
        if (!d)
            continue;
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < max) {
            if (e->d_name[0] != '.')
                snprintf(paths[n++], 600, "%s/%s", sub, e->d_name);
        }
        closedir(d);
    }
    return n;
}

START_TEST(test_crc32c_known_values)
{
    ck_assert_uint_eq(om_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(om_crc32c(0, "", 0), 0);
    /* in pieces as in one */
    char *d = data(100000, 7);
    uint32_t whole = om_crc32c(0, d, 100000);
    ck_assert_uint_eq(om_crc32c(om_crc32c(0, d, 33333), d + 33333, 100000 - 33333), whole);
    free(d);
}
END_TEST

/* The bit-at-a-time definition, for what the fast paths compute. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

/* Lengths around the interleaved lanes (3 x 4096 bytes) and odd offsets,
 * whole and in two pieces, against the definition. */
START_TEST(test_crc32c_matches_the_definition)
{
    size_t max = 5 * 3 * 4096 + 77;
    unsigned char *d = malloc(max + 8);
    ck_assert_ptr_nonnull(d);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < max + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        d[i] = (unsigned char)x;
    }
    size_t lens[] = {0, 1, 7, 8, 9, 4095, 12287, 12288, 12289, 24576, 24583, 40000, max};
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
        for (size_t off = 0; off < 4; off += 3) {
            size_t n = lens[k];
            uint32_t want = crc32c_bitwise(d + off, n);
            ck_assert_uint_eq(om_crc32c(0, d + off, n), want);
            size_t cut = n / 3;
            ck_assert_uint_eq(om_crc32c(om_crc32c(0, d + off, cut), d + off + cut, n - cut), want);
        }
    }
    free(d);
}
END_TEST

START_TEST(test_store_load_check_restart_drop)
{
    ck_assert_ptr_nonnull(mkdtemp(dir));
    struct om_dcache *dc = open_cache(64ULL << 20);
    uint64_t size = 2 * B + 1000;
    char *obj = data(size, 1);
    struct om_dcache_obj o, other;
    ck_assert(om_dcache_obj_init(dc, "k/x.bin", "\"etag1\"", size, &o));
    ck_assert(!om_dcache_obj_init(dc, "k/x.bin", "", size, &other));
    ck_assert_uint_eq(om_dcache_blocks(&o), 3);
    bool cached = true;
    ck_assert_uint_eq(om_dcache_run(dc, &o, 0, 3, &cached), 3);
    ck_assert(!cached);
    ck_assert(om_dcache_store(dc, &o, 0, 3, obj, done, &W));
    ck_assert_int_eq(wait_done(&W), 0);
    ck_assert_uint_eq(om_dcache_run(dc, &o, 0, 3, &cached), 3);
    ck_assert(cached);
    char *got = calloc(1, 3 * B);
    ck_assert_int_eq(om_dcache_load(dc, &o, 0, 3, got, done, &W), 0);
    ck_assert_int_eq(wait_done(&W), 0);
    ck_assert(memcmp(got, obj, size) == 0);
    /* another ETag finds nothing */
    ck_assert(om_dcache_obj_init(dc, "k/x.bin", "\"etag2\"", size, &other));
    ck_assert_uint_eq(om_dcache_run(dc, &other, 0, 3, &cached), 3);
    ck_assert(!cached);
    om_dcache_free(dc);

    /* a restart knows the blocks; a flipped byte is caught and removed */
    char files[8][600];
    ck_assert_int_eq(block_files(files, 8), 3);
    for (int i = 0; i < 3; i++) {
        struct stat sb;
        ck_assert_int_eq(stat(files[i], &sb), 0);
        ck_assert_uint_eq(sb.st_mode & 0777, 0600);
    }
    dc = open_cache(64ULL << 20);
    struct om_dcache_stats st;
    om_dcache_get_stats(dc, &st);
    ck_assert_uint_eq(st.blocks, 3);
    ck_assert_uint_eq(st.size_bytes, size + 3 * 64);
    ck_assert_uint_eq(om_dcache_run(dc, &o, 0, 3, &cached), 3);
    ck_assert(cached);
    for (int i = 0; i < 3; i++) {
        FILE *f = fopen(files[i], "r+b");
        ck_assert_ptr_nonnull(f);
        fseek(f, 64 + 500, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 64 + 500, SEEK_SET);
        fputc(c ^ 1, f);
        fclose(f);
    }
    ck_assert_int_eq(om_dcache_load(dc, &o, 0, 3, got, done, &W), 0);
    ck_assert_int_eq(wait_done(&W), -EIO);
    om_dcache_get_stats(dc, &st);
    ck_assert_uint_eq(st.corrupt, 1);
    ck_assert_uint_eq(st.blocks, 2);
    ck_assert_int_eq(block_files(files, 8), 2);
    /* drop by key removes every version of it */
    ck_assert_int_eq(om_dcache_drop(dc, "k/other"), 0);
    ck_assert_int_eq(om_dcache_drop(dc, "k/x.bin"), 2);
    om_dcache_get_stats(dc, &st);
    ck_assert_uint_eq(st.blocks, 0);
    ck_assert_uint_eq(st.size_bytes, 0);
    om_dcache_free(dc);
    free(got);
    free(obj);
    remove_tree();
}
END_TEST

START_TEST(test_bound_holds_and_unknown_files_go)
{
    char d2[] = "/tmp/om-dcache-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(d2));
    strcpy(dir, d2);
    /* 16 MiB hold 15 blocks of 1 MiB */
    struct om_dcache *dc = open_cache(16ULL << 20);
    char *obj = data(B, 3);
    for (int i = 0; i < 30; i++) {
        char key[32];
        struct om_dcache_obj o;
        bool cached;
        snprintf(key, sizeof(key), "f%d", i);
        ck_assert(om_dcache_obj_init(dc, key, "e", B, &o));
        om_dcache_run(dc, &o, 0, 1, &cached);
        if (om_dcache_store(dc, &o, 0, 1, obj, done, &W))
            wait_done(&W);
    }
    struct om_dcache_stats st;
    om_dcache_get_stats(dc, &st);
    ck_assert_uint_le(st.size_bytes, 16ULL << 20);
    ck_assert_uint_eq(st.blocks, 15);
    ck_assert_uint_eq(st.rejected, 15); /* a scan does not displace the first half */
    om_dcache_free(dc);
    char stray[600];
    snprintf(stray, sizeof(stray), "%s/data/00", dir);
    mkdir(stray, 0700);
    snprintf(stray, sizeof(stray), "%s/data/00/not-a-block", dir);
    FILE *f = fopen(stray, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    dc = open_cache(16ULL << 20);
    ck_assert_int_eq(access(stray, F_OK), -1);
    ck_assert_int_eq(om_dcache_drop(dc, NULL), 15);
    om_dcache_free(dc);
    free(obj);
    remove_tree();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dcache");
    TCase *tc = tcase_create("dcache");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_crc32c_known_values);
    tcase_add_test(tc, test_crc32c_matches_the_definition);
    tcase_add_test(tc, test_store_load_check_restart_drop);
    tcase_add_test(tc, test_bound_holds_and_unknown_files_go);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
