/* Shard indexes on their own: names as they are normalised or refused,
 * the bounds, what finish hides (duplicates, files under a directory's
 * name, dangling hard links), lookups and directory listings, and
 * objmount's own index file (round trip, identity, damage). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/shard_index.h"

#include "check_main.h"

#define SHARD (1ULL << 40)

static int add(struct om_shard_index *ix, const char *name, enum om_shard_type type,
               uint64_t offset, uint64_t size, const char *link)
{
    struct om_shard_entry e = {
        .name = name,
        .name_len = strlen(name),
        .link = link,
        .link_len = link ? strlen(link) : 0,
        .offset = offset,
        .size = size,
        .mtime = 1700000000 + (int64_t)offset,
        .mode = 0644,
        .uid = 1,
        .gid = 2,
        .type = type,
    };
    return om_shard_index_add(ix, &e);
}

static const char *name_of(const struct om_shard_index *ix, size_t i)
{
    return om_shard_member_name(ix, &ix->members[i]);
}

START_TEST(test_names_are_normalised)
{
    static const char *const cases[][2] = {
        {"a", "a"},         {"./a", "a"},    {"././a//b/", "a/b"}, {"/abs/path", "abs/path"},
        {"a/./b/.", "a/b"}, {"dir/", "dir"},
    };
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    for (size_t i = 0; i < OM_ARRAY_LEN(cases); i++) {
        ck_assert_int_eq(add(&ix, cases[i][0], OM_SHARD_FILE, 512 * i, 1, NULL), 0);
        ck_assert_str_eq(name_of(&ix, i), cases[i][1]);
        ck_assert_uint_eq(ix.members[i].name_len, strlen(cases[i][1]));
    }
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_names_that_cannot_be_paths_are_counted_not_listed)
{
    char seg256[300], seg255[300];
    memset(seg256, 'x', 256);
    seg256[256] = '\0';
    memset(seg255, 'y', 255);
    seg255[255] = '\0';
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    ck_assert_int_eq(add(&ix, "a/../b", OM_SHARD_FILE, 0, 1, NULL), 1);
    ck_assert_int_eq(add(&ix, "..", OM_SHARD_DIR, 0, 0, NULL), 1);
    ck_assert_int_eq(add(&ix, seg256, OM_SHARD_FILE, 0, 1, NULL), 1);
    ck_assert_int_eq(add(&ix, "./", OM_SHARD_FILE, 0, 1, NULL), 1); /* a file with no name */
    ck_assert_int_eq(add(&ix, "s", OM_SHARD_SYMLINK, 0, 0, ""), 1); /* a link to nothing */
    ck_assert_int_eq(add(&ix, "h", OM_SHARD_HARDLINK, 0, 0, "../x"), 1);
    struct om_shard_entry nul = {.name = "a\0b", .name_len = 3, .type = OM_SHARD_FILE};
    ck_assert_int_eq(om_shard_index_add(&ix, &nul), 1);
    ck_assert_uint_eq(ix.skipped.bad_name, 7);
    /* the archive's root is dropped without a count */
    ck_assert_int_eq(add(&ix, "./", OM_SHARD_DIR, 0, 0, NULL), 1);
    ck_assert_int_eq(add(&ix, ".", OM_SHARD_DIR, 0, 0, NULL), 1);
    ck_assert_uint_eq(ix.skipped.bad_name, 7);
    ck_assert_int_eq(add(&ix, seg255, OM_SHARD_FILE, 0, 1, NULL), 0);
    ck_assert_uint_eq(ix.n, 1);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_absurd_entries_are_refused)
{
    struct om_shard_index ix;
    struct om_shard_limits lim = {.max_members = 3, .max_name_bytes = 64};
    om_shard_index_init(&ix, &lim, 1 << 20, OM_SHARD_SRC_TAR);
    char longname[OM_SHARD_NAME_MAX + 10];
    for (size_t i = 0; i < sizeof(longname) - 1; i++)
        longname[i] = i % 100 == 99 ? '/' : 'n';
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(add(&ix, longname, OM_SHARD_FILE, 0, 1, NULL), -ENAMETOOLONG);
    ck_assert_int_eq(add(&ix, "s", OM_SHARD_SYMLINK, 0, 0, longname), -ENAMETOOLONG);
    ck_assert_int_eq(add(&ix, "a", OM_SHARD_FILE, 100, 1, NULL), -EINVAL); /* not a block */
    ck_assert_int_eq(add(&ix, "a", OM_SHARD_FILE, 512, 1 << 20, NULL), -EFBIG);
    ck_assert_int_eq(add(&ix, "a", OM_SHARD_FILE, 512, UINT64_MAX, NULL), -EFBIG);
    ck_assert_int_eq(add(&ix, "a", OM_SHARD_FILE, UINT64_MAX - 511, 2, NULL), -EFBIG);
    ck_assert_int_eq(add(&ix, "a", (enum om_shard_type)7, 0, 0, NULL), -EINVAL);
    struct om_shard_entry ns = {.name = "a", .name_len = 1, .mtime_nsec = 1000000000};
    ck_assert_int_eq(om_shard_index_add(&ix, &ns), -EINVAL);
    /* the bounds: 64 bytes of names, then 3 members */
    ck_assert_int_eq(
        add(&ix, "0123456789012345678901234567890123456789", OM_SHARD_FILE, 0, 1, NULL), 0);
    ck_assert_int_eq(
        add(&ix, "0123456789012345678901234567890123456789", OM_SHARD_FILE, 512, 1, NULL), -EFBIG);
    ck_assert_int_eq(add(&ix, "b", OM_SHARD_FILE, 512, 1, NULL), 0);
    ck_assert_int_eq(add(&ix, "c", OM_SHARD_FILE, 1024, 1, NULL), 0);
    ck_assert_int_eq(add(&ix, "d", OM_SHARD_FILE, 1536, 1, NULL), -EFBIG);
    ck_assert_uint_eq(ix.n, 3);
    /* directories and links carry no data, wherever it would be */
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    om_shard_index_free(&ix);
    om_shard_index_init(&ix, NULL, 4096, OM_SHARD_SRC_TAR);
    ck_assert_int_eq(add(&ix, "dir", OM_SHARD_DIR, 512, 1 << 30, NULL), 0);
    ck_assert_uint_eq(ix.members[0].size, 0);
    om_shard_index_free(&ix);
}
END_TEST

/* ---- finish ---- */

START_TEST(test_later_duplicate_wins)
{
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    ck_assert_int_eq(add(&ix, "a.jpg", OM_SHARD_FILE, 512, 10, NULL), 0);
    ck_assert_int_eq(add(&ix, "b.jpg", OM_SHARD_FILE, 1536, 10, NULL), 0);
    ck_assert_int_eq(add(&ix, "./a.jpg", OM_SHARD_FILE, 2560, 20, NULL), 0);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    uint32_t m;
    ck_assert_int_eq(om_shard_index_find(&ix, "a.jpg", 5, &m), 0);
    ck_assert_uint_eq(m, 2);
    ck_assert_uint_eq(ix.members[m].size, 20);
    ck_assert(ix.members[0].flags & OM_SHARD_M_HIDDEN);
    ck_assert_uint_eq(ix.skipped.shadowed, 1);
    ck_assert_uint_eq(ix.listed, 2);
    ck_assert_uint_eq(ix.first_data, 1536); /* the first listed file */
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_directory_wins_over_a_file_of_its_name)
{
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    ck_assert_int_eq(add(&ix, "x", OM_SHARD_FILE, 512, 10, NULL), 0);
    ck_assert_int_eq(add(&ix, "x/y", OM_SHARD_FILE, 1536, 10, NULL), 0);
    ck_assert_int_eq(add(&ix, "d", OM_SHARD_DIR, 2048, 0, NULL), 0);
    ck_assert_int_eq(add(&ix, "d/e", OM_SHARD_FILE, 2560, 1, NULL), 0);
    ck_assert_int_eq(add(&ix, "d", OM_SHARD_SYMLINK, 3584, 0, "elsewhere"), 0);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    uint32_t m = 99;
    /* x: a directory without an entry of its own */
    ck_assert_int_eq(om_shard_index_find(&ix, "x", 1, &m), 1);
    ck_assert_uint_eq(m, 99);
    /* d: the directory entry, not the later symlink */
    ck_assert_int_eq(om_shard_index_find(&ix, "d", 1, &m), 0);
    ck_assert_uint_eq(m, 2);
    ck_assert_uint_eq(ix.skipped.shadowed, 2);
    ck_assert_uint_eq(ix.listed, 3);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_hard_links_take_their_targets_data)
{
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    ck_assert_int_eq(add(&ix, "t", OM_SHARD_FILE, 512, 100, NULL), 0);
    ck_assert_int_eq(add(&ix, "h1", OM_SHARD_HARDLINK, 1536, 0, "./t"), 0);
    ck_assert_int_eq(add(&ix, "h2", OM_SHARD_HARDLINK, 2048, 0, "h1"), 0); /* a chain */
    ck_assert_int_eq(add(&ix, "early", OM_SHARD_HARDLINK, 2560, 0, "late"), 0);
    ck_assert_int_eq(add(&ix, "late", OM_SHARD_FILE, 3584, 5, NULL), 0);
    ck_assert_int_eq(add(&ix, "nowhere", OM_SHARD_HARDLINK, 4608, 0, "missing"), 0);
    ck_assert_int_eq(add(&ix, "dir", OM_SHARD_DIR, 5120, 0, NULL), 0);
    ck_assert_int_eq(add(&ix, "todir", OM_SHARD_HARDLINK, 5632, 0, "dir"), 0);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    for (int i = 1; i <= 2; i++) {
        const struct om_shard_member *m = &ix.members[i];
        ck_assert_int_eq(m->type, OM_SHARD_FILE);
        ck_assert(m->flags & OM_SHARD_M_HARDLINK);
        ck_assert_uint_eq(m->offset, 512);
        ck_assert_uint_eq(m->size, 100);
        ck_assert_int_eq(m->mtime, ix.members[0].mtime);
    }
    ck_assert_str_eq(om_shard_member_link(&ix, &ix.members[1]), "t");
    /* a link to a later file, to nothing, to a directory: dangling */
    ck_assert(ix.members[3].flags & OM_SHARD_M_HIDDEN);
    ck_assert(ix.members[5].flags & OM_SHARD_M_HIDDEN);
    ck_assert(ix.members[7].flags & OM_SHARD_M_HIDDEN);
    ck_assert_uint_eq(ix.skipped.dangling, 3);
    uint32_t m;
    ck_assert_int_eq(om_shard_index_find(&ix, "early", 5, &m), -ENOENT);
    ck_assert_uint_eq(ix.first_data, 512);
    om_shard_index_free(&ix);
}
END_TEST

/* ---- lookups and listings ---- */

struct seen {
    char names[64][64];
    uint32_t members[64];
    int n;
    int stop_after;
};

static int collect(void *ud, const char *name, size_t len, uint32_t member)
{
    struct seen *s = ud;
    ck_assert_int_lt(s->n, 64);
    snprintf(s->names[s->n], sizeof(s->names[0]), "%.*s", (int)len, name);
    s->members[s->n++] = member;
    return s->stop_after && s->n == s->stop_after ? 1 : 0;
}

static void build_tree(struct om_shard_index *ix)
{
    static const char *const files[] = {
        "b/1.jpg", "a.txt", "b/2.jpg", "b/sub/deep/x", "b-c", "b.d", "c", "b/sub/y", "z/0",
    };
    om_shard_index_init(ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    uint64_t off = 512;
    for (size_t i = 0; i < OM_ARRAY_LEN(files); i++, off += 1024)
        ck_assert_int_eq(add(ix, files[i], OM_SHARD_FILE, off, 10, NULL), 0);
    ck_assert_int_eq(add(ix, "b/sub", OM_SHARD_DIR, off, 0, NULL), 0);
    ck_assert_int_eq(add(ix, "l", OM_SHARD_SYMLINK, off + 512, 0, "c"), 0);
    ck_assert_int_eq(om_shard_index_finish(ix), 0);
}

START_TEST(test_list_gives_each_entry_once_in_name_order)
{
    struct om_shard_index ix;
    build_tree(&ix);
    struct seen s = {0};
    ck_assert_int_eq(om_shard_index_list(&ix, "", 0, collect, &s), 0);
    static const char *const root[] = {"a.txt", "b-c", "b.d", "b", "c", "l", "z"};
    ck_assert_int_eq(s.n, (int)OM_ARRAY_LEN(root));
    for (int i = 0; i < s.n; i++)
        ck_assert_str_eq(s.names[i], root[i]);
    ck_assert_uint_eq(s.members[3], UINT32_MAX); /* b has no entry of its own */
    ck_assert_uint_eq(s.members[0], 1);

    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(om_shard_index_list(&ix, "b", 1, collect, &s), 0);
    static const char *const b[] = {"1.jpg", "2.jpg", "sub"};
    ck_assert_int_eq(s.n, 3);
    for (int i = 0; i < s.n; i++)
        ck_assert_str_eq(s.names[i], b[i]);
    ck_assert_uint_eq(s.members[2], 9); /* b/sub has one */

    memset(&s, 0, sizeof(s));
    ck_assert_int_eq(om_shard_index_list(&ix, "b/sub", 5, collect, &s), 0);
    ck_assert_int_eq(s.n, 2);
    ck_assert_str_eq(s.names[0], "deep");
    ck_assert_str_eq(s.names[1], "y");

    ck_assert_int_eq(om_shard_index_list(&ix, "c", 1, collect, &s), -ENOTDIR);
    ck_assert_int_eq(om_shard_index_list(&ix, "l", 1, collect, &s), -ENOTDIR);
    ck_assert_int_eq(om_shard_index_list(&ix, "q", 1, collect, &s), -ENOENT);
    ck_assert_int_eq(om_shard_index_list(&ix, "b/su", 4, collect, &s), -ENOENT);

    /* a callback stops the listing, or fails it */
    memset(&s, 0, sizeof(s));
    s.stop_after = 2;
    ck_assert_int_eq(om_shard_index_list(&ix, "", 0, collect, &s), 0);
    ck_assert_int_eq(s.n, 2);
    om_shard_index_free(&ix);
}
END_TEST

static int fail_cb(void *ud, const char *name, size_t len, uint32_t member)
{
    (void)ud, (void)name, (void)len, (void)member;
    return -EIO;
}

START_TEST(test_find_answers_members_directories_and_absence)
{
    struct om_shard_index ix;
    build_tree(&ix);
    uint32_t m;
    ck_assert_int_eq(om_shard_index_find(&ix, "", 0, &m), 1);
    ck_assert_int_eq(om_shard_index_find(&ix, "b", 1, &m), 1);
    ck_assert_int_eq(om_shard_index_find(&ix, "b/sub/deep", 10, &m), 1);
    ck_assert_int_eq(om_shard_index_find(&ix, "b/sub/deep/x", 12, &m), 0);
    ck_assert_str_eq(name_of(&ix, m), "b/sub/deep/x");
    ck_assert_int_eq(om_shard_index_find(&ix, "b/sub", 5, &m), 0);
    ck_assert_int_eq(ix.members[m].type, OM_SHARD_DIR);
    ck_assert_int_eq(om_shard_index_find(&ix, "b/", 2, &m), -ENOENT);
    ck_assert_int_eq(om_shard_index_find(&ix, "b/1", 3, &m), -ENOENT);
    ck_assert_int_eq(om_shard_index_find(&ix, "zz", 2, &m), -ENOENT);
    ck_assert_int_eq(om_shard_index_list(&ix, "", 0, fail_cb, NULL), -EIO);
    om_shard_index_free(&ix);
}
END_TEST

static int count_cb(void *ud, const char *name, size_t len, uint32_t member)
{
    (void)name, (void)len, (void)member;
    (*(int *)ud)++;
    return 0;
}

/* A directory of 200,000 members costs the root listing one entry. */
START_TEST(test_list_seeks_past_large_subdirectories)
{
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, SHARD, OM_SHARD_SRC_TAR);
    char name[64];
    uint64_t off = 512;
    for (int i = 0; i < 200000; i++, off += 1024) {
        snprintf(name, sizeof(name), "big/%07d.jpg", i);
        ck_assert_int_eq(add(&ix, name, OM_SHARD_FILE, off, 100, NULL), 0);
    }
    ck_assert_int_eq(add(&ix, "after", OM_SHARD_FILE, off, 1, NULL), 0);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    int n = 0;
    ck_assert_int_eq(om_shard_index_list(&ix, "", 0, count_cb, &n), 0);
    ck_assert_int_eq(n, 2);
    n = 0;
    ck_assert_int_eq(om_shard_index_list(&ix, "big", 3, count_cb, &n), 0);
    ck_assert_int_eq(n, 200000);
    om_shard_index_free(&ix);
}
END_TEST

/* ---- the index file ---- */

static const struct om_shard_ident ident = {
    .endpoint = "http://127.0.0.1:9000",
    .bucket = "data",
    .key = "train/shard-000.tar",
    .etag = "0123456789abcdef0123456789abcdef",
    .size = 4ULL << 30,
};

static void build_shard(struct om_shard_index *ix, int members)
{
    om_shard_index_init(ix, NULL, ident.size, OM_SHARD_SRC_TAR);
    char name[128];
    uint64_t off = 0;
    for (int i = 0; i < members; i++) {
        snprintf(name, sizeof(name), "imagenet/train/n01440764/n01440764_%06d.%s", i / 2,
                 i % 2 ? "cls" : "jpg");
        uint64_t size = i % 2 ? 3 : 100000 + (uint64_t)(i * 7919) % 30000;
        struct om_shard_entry e = {
            .name = name,
            .name_len = strlen(name),
            .offset = off + 512,
            .size = size,
            .mtime = 1700000000 + i / 10,
            .mtime_nsec = (uint32_t)(i % 3) * 250000000,
            .mode = 0644,
            .uid = 1000,
            .gid = 1000,
            .type = OM_SHARD_FILE,
        };
        ck_assert_int_eq(om_shard_index_add(ix, &e), 0);
        off += 512 + (size + 511) / 512 * 512;
    }
}

static void assert_same_index(const struct om_shard_index *a, const struct om_shard_index *b)
{
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_uint_eq(a->shard_size, b->shard_size);
    ck_assert_uint_eq(a->listed, b->listed);
    ck_assert_uint_eq(a->first_data, b->first_data);
    ck_assert_int_eq(a->source, b->source);
    ck_assert_mem_eq(&a->skipped, &b->skipped, sizeof(a->skipped));
    for (size_t i = 0; i < a->n; i++) {
        const struct om_shard_member *x = &a->members[i], *y = &b->members[i];
        ck_assert_str_eq(om_shard_member_name(a, x), om_shard_member_name(b, y));
        const char *lx = om_shard_member_link(a, x), *ly = om_shard_member_link(b, y);
        ck_assert_int_eq(lx == NULL, ly == NULL);
        if (lx)
            ck_assert_str_eq(lx, ly);
        ck_assert_uint_eq(x->offset, y->offset);
        ck_assert_uint_eq(x->size, y->size);
        ck_assert_int_eq(x->mtime, y->mtime);
        ck_assert_uint_eq(x->mtime_nsec, y->mtime_nsec);
        ck_assert_uint_eq(x->mode, y->mode);
        ck_assert_uint_eq(x->uid, y->uid);
        ck_assert_uint_eq(x->gid, y->gid);
        ck_assert_uint_eq(x->type, y->type);
        ck_assert_uint_eq(x->flags, y->flags);
    }
}

START_TEST(test_index_file_round_trips)
{
    struct om_shard_index ix, back;
    build_shard(&ix, 1000);
    /* every kind of member, hidden ones too */
    uint64_t off = ix.members[ix.n - 1].offset + 4096;
    struct om_shard_entry extra[] = {
        {.name = "dir", .type = OM_SHARD_DIR, .mode = 0755, .mtime = -5},
        {.name = "dir/l", .type = OM_SHARD_SYMLINK, .link = "../../elsewhere", .mode = 0777},
        {.name = "dir/h",
         .type = OM_SHARD_HARDLINK,
         .link = "imagenet/train/n01440764/"
                 "n01440764_000000.jpg"},
        {.name = "dir/dangling", .type = OM_SHARD_HARDLINK, .link = "nothing"},
        {.name = "dir/empty", .type = OM_SHARD_FILE, .uid = UINT32_MAX, .gid = 7},
        {.name = "dir/empty", .type = OM_SHARD_FILE, .size = 1},
    };
    for (size_t i = 0; i < OM_ARRAY_LEN(extra); i++, off += 1024) {
        extra[i].name_len = strlen(extra[i].name);
        extra[i].link_len = extra[i].link ? strlen(extra[i].link) : 0;
        extra[i].offset = off;
        ck_assert_int_eq(om_shard_index_add(&ix, &extra[i]), 0);
    }
    ix.skipped.sparse = 3;
    ix.skipped.special = 4;
    ix.skipped.bad_name = 5;
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    struct om_buf out = {0};
    ck_assert_int_eq(om_shard_index_encode(&ix, &ident, &out), 0);
    char err[256] = "";
    int rc = om_shard_index_decode(out.data, out.len, &ident, NULL, &back, err, sizeof(err));
    ck_assert_msg(rc == 0, "decode: %s", err);
    assert_same_index(&ix, &back);
    ck_assert_uint_eq(back.skipped.dangling, 1);
    ck_assert_uint_eq(back.skipped.shadowed, 1);
    /* and the same bytes again */
    struct om_buf again = {0};
    ck_assert_int_eq(om_shard_index_encode(&back, &ident, &again), 0);
    ck_assert_uint_eq(again.len, out.len);
    ck_assert_mem_eq(again.data, out.data, out.len);
    om_buf_free(&again);
    om_buf_free(&out);
    om_shard_index_free(&back);
    om_shard_index_free(&ix);
}
END_TEST

/* The compactness the format is for: a WebDataset shard of 10,000 members
 * (5,000 samples of a jpg and a cls) with 45-byte names. */
START_TEST(test_index_file_is_compact)
{
    struct om_shard_index ix;
    build_shard(&ix, 10000);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    struct om_buf out = {0};
    ck_assert_int_eq(om_shard_index_encode(&ix, &ident, &out), 0);
    printf("shard index: 10000 members, %zu bytes, %.1f bytes per member\n", out.len,
           (double)out.len / 10000);
    ck_assert_uint_lt(out.len, 10000 * 24);
    om_buf_free(&out);
    om_shard_index_free(&ix);
}
END_TEST

static struct om_buf encoded(void)
{
    struct om_shard_index ix;
    build_shard(&ix, 50);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    struct om_buf out = {0};
    ck_assert_int_eq(om_shard_index_encode(&ix, &ident, &out), 0);
    om_shard_index_free(&ix);
    return out;
}

static int decode(const void *buf, size_t len, const struct om_shard_ident *id,
                  const struct om_shard_limits *lim, char *err)
{
    struct om_shard_index ix;
    int rc = om_shard_index_decode(buf, len, id, lim, &ix, err, 256);
    ck_assert_uint_eq(rc == 0 ? ix.n : 0, rc == 0 ? 50 : 0);
    if (rc == 0)
        om_shard_index_free(&ix);
    ck_assert_ptr_null(rc ? ix.members : NULL);
    return rc;
}

START_TEST(test_index_file_of_another_shard_is_stale)
{
    struct om_buf f = encoded();
    char err[256];
    struct om_shard_ident id = ident;
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), 0);
    id.etag = "0123456789abcdef0123456789abcdee";
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), -ESTALE);
    ck_assert_msg(strstr(err, "train/shard-000.tar") && strstr(err, "not of this shard"), "%s",
                  err);
    id = ident;
    id.size++;
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), -ESTALE);
    id = ident;
    id.key = "train/shard-001.tar";
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), -ESTALE);
    id = ident;
    id.bucket = "other";
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), -ESTALE);
    id = ident;
    id.endpoint = "http://127.0.0.1:9001";
    ck_assert_int_eq(decode(f.data, f.len, &id, NULL, err), -ESTALE);
    ck_assert_int_eq(decode(f.data, f.len, NULL, NULL, err), -ESTALE);
    om_buf_free(&f);
}
END_TEST

START_TEST(test_damaged_index_files_are_refused)
{
    struct om_buf f = encoded();
    char err[256];
    unsigned char *b = (unsigned char *)f.data;
    /* every single flipped byte: never accepted */
    for (size_t i = 0; i < f.len; i++) {
        b[i] ^= 0x20;
        int rc = decode(f.data, f.len, &ident, NULL, err);
        ck_assert_msg(rc == -EBADMSG || rc == -EINVAL || rc == -EPROTONOSUPPORT, "byte %zu: %d %s",
                      i, rc, err);
        b[i] ^= 0x20;
    }
    /* every truncation */
    for (size_t len = 0; len < f.len; len++) {
        int rc = decode(f.data, len, &ident, NULL, err);
        ck_assert_msg(rc == -EBADMSG || rc == -EINVAL, "length %zu: %d", len, rc);
    }
    ck_assert_int_eq(decode("OMSHIDX1", 8, &ident, NULL, err), -EBADMSG);
    ck_assert_int_eq(decode("tar\0", 4, &ident, NULL, err), -EINVAL);
    ck_assert_msg(strstr(err, "not an objmount shard index"), "%s", err);
    /* another version says so, before its checksum is looked at */
    b[8] = 2;
    ck_assert_int_eq(decode(f.data, f.len, &ident, NULL, err), -EPROTONOSUPPORT);
    ck_assert_msg(strstr(err, "version 2"), "%s", err);
    b[8] = 1;
    /* the bounds hold for a file that is sound */
    struct om_shard_limits lim = {.max_members = 49};
    ck_assert_int_eq(decode(f.data, f.len, &ident, &lim, err), -EFBIG);
    lim = (struct om_shard_limits){.max_name_bytes = 100};
    ck_assert_int_eq(decode(f.data, f.len, &ident, &lim, err), -EFBIG);
    om_buf_free(&f);
}
END_TEST

START_TEST(test_encode_refuses_what_it_cannot_verify)
{
    struct om_shard_index ix;
    build_shard(&ix, 3);
    struct om_buf out = {0};
    ck_assert_int_eq(om_shard_index_encode(&ix, &ident, &out), -EINVAL); /* unfinished */
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    struct om_shard_ident id = ident;
    id.etag = "";
    ck_assert_int_eq(om_shard_index_encode(&ix, &id, &out), -EINVAL);
    id = ident;
    id.size = 5;
    ck_assert_int_eq(om_shard_index_encode(&ix, &id, &out), -EINVAL);
    char big[70000];
    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    id = ident;
    id.key = big;
    ck_assert_int_eq(om_shard_index_encode(&ix, &id, &out), -EINVAL);
    om_buf_free(&out);
    om_shard_index_free(&ix);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shard_index");
    TCase *tc = tcase_create("index");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_names_are_normalised);
    tcase_add_test(tc, test_names_that_cannot_be_paths_are_counted_not_listed);
    tcase_add_test(tc, test_absurd_entries_are_refused);
    tcase_add_test(tc, test_later_duplicate_wins);
    tcase_add_test(tc, test_directory_wins_over_a_file_of_its_name);
    tcase_add_test(tc, test_hard_links_take_their_targets_data);
    tcase_add_test(tc, test_list_gives_each_entry_once_in_name_order);
    tcase_add_test(tc, test_find_answers_members_directories_and_absence);
    tcase_add_test(tc, test_list_seeks_past_large_subdirectories);
    tcase_add_test(tc, test_index_file_round_trips);
    tcase_add_test(tc, test_index_file_is_compact);
    tcase_add_test(tc, test_index_file_of_another_shard_is_stale);
    tcase_add_test(tc, test_damaged_index_files_are_refused);
    tcase_add_test(tc, test_encode_refuses_what_it_cannot_verify);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
