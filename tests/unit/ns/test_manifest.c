/* Manifests: round trips, listings against a brute-force model, ETag forms,
 * and damaged files refused. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "objmount/manifest.h"

static char tmpl[] = "/tmp/om-manifest-XXXXXX";

/* A temporary file, unlinked; the descriptor stays usable. */
static int temp_fd(void)
{
    char path[sizeof(tmpl)];
    memcpy(path, tmpl, sizeof(tmpl));
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    unlink(path);
    return fd;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Write sorted keys (size = index, mtime = 1700000000 + index, etag given
 * or none) and return the file's bytes. */
static unsigned char *write_keys(char **keys, size_t n, const char *const *etags, size_t *len)
{
    int fd = temp_fd();
    struct om_manifest_writer *w = om_manifest_writer_new(fd, "bucket", "pre/", 1700000000);
    ck_assert_ptr_nonnull(w);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(
            om_manifest_writer_add(w, keys[i], i, 1700000000 + (time_t)i, etags ? etags[i] : NULL),
            0);
    ck_assert_int_eq(om_manifest_writer_finish(w), 0);
    om_manifest_writer_free(w);
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    *len = (size_t)st.st_size;
    unsigned char *buf = malloc(*len + 1);
    ck_assert_int_eq(pread(fd, buf, *len, 0), (ssize_t)*len);
    close(fd);
    return buf;
}

static struct om_manifest *open_buf(const unsigned char *buf, size_t len)
{
    struct om_manifest *mf = NULL;
    char err[256];
    int rc = om_manifest_from_buf(buf, len, 0, &mf, err, sizeof(err));
    ck_assert_msg(rc == 0, "open: %s", err);
    return mf;
}

/* ---- what a listing returned ---- */

struct got {
    char **v;
    size_t n, cap;
};

static void got_push(struct got *g, const char *s)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->v = realloc(g->v, g->cap * sizeof(*g->v));
    }
    g->v[g->n++] = strdup(s);
}

static void got_free(struct got *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i]);
    free(g->v);
    memset(g, 0, sizeof(*g));
}

/* Entries as "P:key" for prefixes, "O:key" for objects. */
static int collect(void *ud, const struct om_list_entry *e)
{
    char line[2100];
    snprintf(line, sizeof(line), "%c:%s", e->is_prefix ? 'P' : 'O', e->key);
    got_push(ud, line);
    return 0;
}

/* The model: every sorted key under prefix, rolled up at the delimiter. */
static void model_list(char **keys, size_t n, const char *prefix, char delim, struct got *out)
{
    size_t plen = strlen(prefix);
    char last[2100] = "";
    for (size_t i = 0; i < n; i++) {
        if (strncmp(keys[i], prefix, plen) != 0)
            continue;
        const char *d = delim ? strchr(keys[i] + plen, delim) : NULL;
        char line[2100];
        if (d)
            snprintf(line, sizeof(line), "P:%.*s", (int)(d - keys[i] + 1), keys[i]);
        else
            snprintf(line, sizeof(line), "O:%s", keys[i]);
        if (strcmp(line, last) != 0)
            got_push(out, line);
        snprintf(last, sizeof(last), "%s", line);
    }
}

/* List in pages of page entries (0: one page) and join them. */
static void manifest_list(struct om_manifest *mf, const char *prefix, char delim, size_t page,
                          struct got *out)
{
    char *token = NULL;
    int pages = 0;
    do {
        char *next = NULL;
        ck_assert_int_eq(om_manifest_list(mf, prefix, delim, token, page, collect, out, &next), 0);
        free(token);
        token = next;
        ck_assert_int_lt(++pages, 100000);
    } while (token);
}

static void assert_same(const struct got *a, const struct got *b, const char *prefix, char delim)
{
    ck_assert_msg(a->n == b->n, "prefix '%s' delim %d: %zu entries, model %zu", prefix, delim, a->n,
                  b->n);
    for (size_t i = 0; i < a->n; i++)
        ck_assert_msg(strcmp(a->v[i], b->v[i]) == 0, "prefix '%s' delim %d: #%zu %s, model %s",
                      prefix, delim, i, a->v[i], b->v[i]);
}

/* ---- tests ---- */

START_TEST(test_round_trip_odd_keys)
{
    char *keys[] = {
        "a",
        "a b/c d.txt",
        "a+b=c&d",
        "a/",
        "a/b",
        "a/b/c",
        "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac.txt",
        "dir with spaces/file",
        "x/../y",
        "~tilde%20",
        "\xf0\x9f\x98\x80/emoji",
    };
    size_t n = sizeof(keys) / sizeof(keys[0]);
    qsort(keys, n, sizeof(keys[0]), cmp_str);
    size_t len;
    unsigned char *buf = write_keys(keys, n, NULL, &len);
    struct om_manifest *mf = open_buf(buf, len);
    const struct om_manifest_info *info = om_manifest_info(mf);
    ck_assert_uint_eq(info->keys, n);
    ck_assert_uint_eq(info->version, OM_MANIFEST_VERSION);
    ck_assert_str_eq(info->bucket, "bucket");
    ck_assert_str_eq(info->prefix, "pre/");
    ck_assert_int_eq(info->built, 1700000000);
    for (size_t i = 0; i < n; i++) {
        struct om_object o;
        ck_assert_int_eq(om_manifest_lookup(mf, keys[i], &o), 0);
        ck_assert_uint_eq(o.size, i);
        ck_assert_int_eq(o.mtime, 1700000000 + (time_t)i);
        ck_assert_str_eq(o.etag, "");
    }
    struct om_object o;
    ck_assert_int_eq(om_manifest_lookup(mf, "a/b/", &o), -ENOENT);
    ck_assert_int_eq(om_manifest_lookup(mf, "", &o), -ENOENT);
    ck_assert_int_eq(om_manifest_lookup(mf, "zzz", &o), -ENOENT);
    struct got all = {0}, want = {0};
    manifest_list(mf, "", 0, 0, &all);
    model_list(keys, n, "", 0, &want);
    assert_same(&all, &want, "", 0);
    got_free(&all);
    got_free(&want);
    om_manifest_close(mf);
    free(buf);
}
END_TEST

START_TEST(test_etag_forms)
{
    const char *etags[] = {
        "0123456789abcdef0123456789abcdef",       /* MD5: 16 bytes */
        "0123456789abcdef0123456789abcdef-3",     /* multipart */
        "0123456789abcdef0123456789abcdef-10000", /* the most parts */
        "0123456789ABCDEF0123456789ABCDEF",       /* upper case: kept as text */
        "0123456789abcdef0123456789abcdef-0",     /* text */
        "0123456789abcdef0123456789abcdef-007",   /* text: would not round trip */
        "0123456789abcdef0123456789abcdef-10001", /* text */
        "0123456789abcdef0123456789abcdef-",      /* text */
        "0123456789abcdef0123456789abcde",        /* 31 digits: text */
        "ais-etag-not-an-md5",                    /* AIStore */
        "",                                       /* none */
    };
    size_t n = sizeof(etags) / sizeof(etags[0]);
    char *keys[sizeof(etags) / sizeof(etags[0])];
    for (size_t i = 0; i < n; i++) {
        keys[i] = malloc(16);
        snprintf(keys[i], 16, "k%02zu", i);
    }
    size_t len;
    unsigned char *buf = write_keys(keys, n, etags, &len);
    struct om_manifest *mf = open_buf(buf, len);
    for (size_t i = 0; i < n; i++) {
        struct om_object o;
        ck_assert_int_eq(om_manifest_lookup(mf, keys[i], &o), 0);
        ck_assert_str_eq(o.etag, etags[i]);
        free(keys[i]);
    }
    om_manifest_close(mf);
    free(buf);
}
END_TEST

START_TEST(test_writer_refuses_unsorted)
{
    int fd = temp_fd();
    struct om_manifest_writer *w = om_manifest_writer_new(fd, "b", "", 0);
    ck_assert_int_eq(om_manifest_writer_add(w, "b", 1, 0, NULL), 0);
    ck_assert_int_eq(om_manifest_writer_add(w, "a", 1, 0, NULL), -EINVAL);
    ck_assert_int_eq(om_manifest_writer_add(w, "b", 1, 0, NULL), -EINVAL);
    ck_assert_int_eq(om_manifest_writer_add(w, "", 1, 0, NULL), -EINVAL);
    ck_assert_int_eq(om_manifest_writer_add(w, "c", 1, 0, NULL), 0);
    om_manifest_writer_free(w);
    close(fd);
}
END_TEST

START_TEST(test_build_sorts_and_dedups)
{
    struct om_manifest_key k[] = {{.key = "b/2"}, {.key = "a"},        {.key = "b/1"},
                                  {.key = "a"},   {.key = "\xc3\xa9"}, {.key = "B"}};
    int fd = temp_fd();
    ck_assert_int_eq(om_manifest_build(fd, "bk", "", 5, k, 6), 0);
    struct om_manifest *mf = NULL;
    char err[256], path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ck_assert_int_eq(om_manifest_open(path, 0, &mf, err, sizeof(err)), 0);
    ck_assert_uint_eq(om_manifest_info(mf)->keys, 5);
    struct got g = {0};
    manifest_list(mf, "", 0, 0, &g);
    ck_assert_str_eq(g.v[0], "O:B");
    ck_assert_str_eq(g.v[1], "O:a");
    ck_assert_str_eq(g.v[4], "O:\xc3\xa9"); /* bytes, not code points or locale */
    got_free(&g);
    om_manifest_close(mf);
    close(fd);
}
END_TEST

/* Random key sets over a small alphabet (so that prefixes collide), listed
 * at every directory prefix and at random ones, with and without the
 * delimiter, in one page and in small pages, against the model. */
START_TEST(test_listing_matches_model)
{
    static const char *const parts[] = {"a",  "b",  "a b", "\xc3\xa9", "z", "a/",
                                        "b/", "c/", "0",   "a.",       "-", "~"};
    srand(1234);
    for (int round = 0; round < 12; round++) {
        size_t n = (size_t)(round < 3 ? round * 7 + 1 : 50 + rand() % (round * 400));
        char **keys = calloc(n, sizeof(*keys));
        size_t have = 0;
        for (size_t i = 0; i < n; i++) {
            char k[256] = "";
            int segs = 1 + rand() % 6;
            for (int s = 0; s < segs; s++)
                strcat(k, parts[rand() % (int)(sizeof(parts) / sizeof(parts[0]))]);
            keys[have++] = strdup(k);
        }
        qsort(keys, have, sizeof(*keys), cmp_str);
        size_t u = 0;
        for (size_t i = 0; i < have; i++) {
            if (u && strcmp(keys[u - 1], keys[i]) == 0)
                free(keys[i]);
            else
                keys[u++] = keys[i];
        }
        size_t len;
        unsigned char *buf = write_keys(keys, u, NULL, &len);
        struct om_manifest *mf = open_buf(buf, len);
        /* prefixes: "", every directory prefix of a key, random cuts */
        for (size_t i = 0; i <= u; i++) {
            char prefix[256] = "";
            if (i < u) {
                const char *k = keys[i];
                size_t cut = (size_t)rand() % (strlen(k) + 1);
                const char *slash = strchr(k, '/');
                if (slash && rand() % 2)
                    cut = (size_t)(slash - k) + 1;
                snprintf(prefix, sizeof(prefix), "%.*s", (int)cut, k);
            }
            for (int delim = 0; delim < 2; delim++) {
                struct got want = {0};
                model_list(keys, u, prefix, delim ? '/' : 0, &want);
                size_t pages[] = {0, 1, 3};
                for (size_t p = 0; p < 3; p++) {
                    struct got g = {0};
                    manifest_list(mf, prefix, delim ? '/' : 0, pages[p], &g);
                    assert_same(&g, &want, prefix, delim);
                    got_free(&g);
                }
                got_free(&want);
            }
            if (i > 40)
                i += (size_t)rand() % 8; /* enough prefixes for large sets */
        }
        for (size_t i = 0; i < u; i++) {
            struct om_object o;
            ck_assert_int_eq(om_manifest_lookup(mf, keys[i], &o), 0);
            ck_assert_uint_eq(o.size, i);
            free(keys[i]);
        }
        om_manifest_close(mf);
        free(buf);
        free(keys);
    }
}
END_TEST

/* A listing with the delimiter skips a common prefix by seeking: it sees a
 * number of entries independent of how many keys the prefix holds. */
static int count_calls(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(int *)ud)++;
    return 0;
}

START_TEST(test_common_prefix_of_many_keys)
{
    size_t n = 20000;
    char **keys = calloc(n + 2, sizeof(*keys));
    keys[0] = strdup("a");
    for (size_t i = 0; i < n; i++) {
        keys[i + 1] = malloc(32);
        snprintf(keys[i + 1], 32, "big/%08zu", i);
    }
    keys[n + 1] = strdup("c/d");
    size_t len;
    unsigned char *buf = write_keys(keys, n + 2, NULL, &len);
    struct om_manifest *mf = open_buf(buf, len);
    struct got g = {0};
    manifest_list(mf, "", '/', 0, &g);
    ck_assert_uint_eq(g.n, 3);
    ck_assert_str_eq(g.v[0], "O:a");
    ck_assert_str_eq(g.v[1], "P:big/");
    ck_assert_str_eq(g.v[2], "P:c/");
    got_free(&g);
    int calls = 0;
    ck_assert_int_eq(
        om_manifest_list(mf, "big/", '/', "big/00000100", 10, count_calls, &calls, NULL), 0);
    ck_assert_int_eq(calls, 10);
    for (size_t i = 0; i < n + 2; i++)
        free(keys[i]);
    free(keys);
    om_manifest_close(mf);
    free(buf);
}
END_TEST

static int open_err(const unsigned char *buf, size_t len, char *err, size_t errlen)
{
    struct om_manifest *mf = NULL;
    int rc = om_manifest_from_buf(buf, len, 0, &mf, err, errlen);
    om_manifest_close(mf);
    return rc;
}

START_TEST(test_damaged_files_refused)
{
    char *keys[200];
    for (int i = 0; i < 200; i++) {
        keys[i] = malloc(32);
        snprintf(keys[i], 32, "dir%d/file%03d", i / 50, i);
    }
    size_t len;
    unsigned char *buf = write_keys(keys, 200, NULL, &len);
    char err[256];
    ck_assert_int_eq(open_err(buf, len, err, sizeof(err)), 0);
    /* every truncation */
    for (size_t cut = 0; cut < len; cut += (cut < 200 ? 1 : 37)) {
        int rc = open_err(buf, cut, err, sizeof(err));
        ck_assert_msg(rc == -EIO && strstr(err, "truncated"), "cut %zu: %d %s", cut, rc, err);
    }
    /* not a manifest */
    ck_assert_int_eq(
        open_err((const unsigned char *)"hello world, this is text", 25, err, sizeof(err)),
        -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "not an objmount manifest"));
    /* another version */
    unsigned char *bad = malloc(len);
    memcpy(bad, buf, len);
    bad[8] = 2;
    ck_assert_int_eq(open_err(bad, len, err, sizeof(err)), -EPROTONOSUPPORT);
    ck_assert_ptr_nonnull(strstr(err, "version 2"));
    /* one flipped bit anywhere past the magic and version */
    for (size_t i = 12; i < len; i++) {
        memcpy(bad, buf, len);
        bad[i] ^= (unsigned char)(1u << (i % 8));
        int rc = open_err(bad, len, err, sizeof(err));
        ck_assert_msg(rc == -EBADMSG || rc == -EIO, "flip at %zu opened (%d)", i, rc);
    }
    memcpy(bad, buf, len);
    bad[len / 2] ^= 1;
    ck_assert_int_eq(open_err(bad, len, err, sizeof(err)), -EBADMSG);
    ck_assert_ptr_nonnull(strstr(err, "checksum mismatch"));
    /* trailing bytes */
    unsigned char *longer = calloc(1, len + 5);
    memcpy(longer, buf, len);
    ck_assert_int_eq(open_err(longer, len + 5, err, sizeof(err)), -EBADMSG);
    free(longer);
    free_keys(keys, 200);
    free(bad);
    free(buf);
}
END_TEST

/* Without the checksum (what the fuzzer sees), damaged bodies give errors
 * or some listing, never a crash or a loop. */
START_TEST(test_unchecked_damage_is_safe)
{
    char *keys[300];
    for (int i = 0; i < 300; i++) {
        keys[i] = malloc(32);
        snprintf(keys[i], 32, "d%d/e%d/f%03d", i / 100, i / 10, i);
    }
    size_t len;
    unsigned char *buf = write_keys(keys, 300, NULL, &len);
    unsigned char *bad = malloc(len);
    srand(99);
    for (int round = 0; round < 3000; round++) {
        memcpy(bad, buf, len);
        for (int k = 0; k < 1 + round % 4; k++)
            bad[44 + (size_t)rand() % (len - 44)] = (unsigned char)rand();
        struct om_manifest *mf = NULL;
        char err[256];
        if (om_manifest_from_buf(bad, len, OM_MANIFEST_NO_CHECKSUM, &mf, err, sizeof(err)))
            continue;
        int calls = 0;
        om_manifest_list(mf, "", '/', NULL, 0, count_calls, &calls, NULL);
        om_manifest_list(mf, "d1/", 0, NULL, 0, count_calls, &calls, NULL);
        om_manifest_list(mf, "d2/", '/', "d2/e21/", 0, count_calls, &calls, NULL);
        struct om_object o;
        om_manifest_lookup(mf, keys[round % 300], &o);
        ck_assert_int_le(calls, 1000);
        om_manifest_close(mf);
    }
    free_keys(keys, 300);
    free(bad);
    free(buf);
}
END_TEST

/* A header whose key count makes (keys + block_keys - 1) overflow claimed
 * 0 blocks for 2^64-1 keys: the first lookup read past the mapping. */
START_TEST(test_a_key_count_that_overflows_is_refused)
{
    enum { LEN = 92 };
    unsigned char *b = calloc(1, LEN);
    memcpy(b, "OMMANIF1", 8);
    b[8] = 1;                               /* version */
    memset(b + 48, 0xff, 8);                /* keys: UINT64_MAX */
    b[64] = LEN;                            /* file size */
    b[72] = LEN;                            /* index at the end: 0 blocks */
    b[84] = 2;                              /* keys per block */
    struct om_manifest *mf = NULL;
    char err[256];
    int rc = om_manifest_from_buf(b, LEN, OM_MANIFEST_NO_CHECKSUM, &mf, err, sizeof(err));
    ck_assert_msg(rc == -EBADMSG, "opened (%d)", rc);
    free(b);
}
END_TEST

/* The size of a manifest of 100,000 keys named as a data set's are. */
START_TEST(test_bytes_per_key)
{
    size_t n = 100000;
    char **keys = calloc(n, sizeof(*keys));
    const char **etags = calloc(n, sizeof(*etags));
    for (size_t i = 0; i < n; i++) {
        keys[i] = malloc(64);
        snprintf(keys[i], 64, "train/shard-%04zu/img_%08zu.jpg", i / 1000, i);
        char *e = malloc(40);
        snprintf(e, 40, "%08zx%024zx", (i * 2654435761u) & 0xffffffffu, i * 40503u);
        etags[i] = e;
    }
    size_t len;
    unsigned char *buf = write_keys(keys, n, etags, &len);
    printf("manifest of %zu keys: %zu bytes, %.1f bytes per key\n", n, len,
           (double)len / (double)n);
    ck_assert_uint_lt(len / n, 32);
    struct om_manifest *mf = open_buf(buf, len);
    struct om_object o;
    ck_assert_int_eq(om_manifest_lookup(mf, keys[n / 3], &o), 0);
    ck_assert_str_eq(o.etag, etags[n / 3]);
    om_manifest_close(mf);
    for (size_t i = 0; i < n; i++) {
        free(keys[i]);
        free((char *)etags[i]);
    }
    free(keys);
    free(etags);
    free(buf);
}
END_TEST

static Suite *manifest_suite(void)
{
    Suite *s = suite_create("manifest");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_round_trip_odd_keys);
    tcase_add_test(tc, test_etag_forms);
    tcase_add_test(tc, test_writer_refuses_unsorted);
    tcase_add_test(tc, test_build_sorts_and_dedups);
    tcase_add_test(tc, test_listing_matches_model);
    tcase_add_test(tc, test_common_prefix_of_many_keys);
    tcase_add_test(tc, test_damaged_files_refused);
    tcase_add_test(tc, test_unchecked_damage_is_safe);
    tcase_add_test(tc, test_a_key_count_that_overflows_is_refused);
    tcase_add_test(tc, test_bytes_per_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return om_check_run(manifest_suite());
}
