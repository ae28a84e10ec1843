/* WebDataset index objects: DALI's wds2idx text and wids' pickles (numpy
 * arrays in pickle protocols 2 to 5, numpy 1 and 2 module names) give the
 * same members as the tar's own headers; the committed fixtures
 * (tests/unit/shard/fixtures, from make_tars.py --fixtures) are read
 * without numpy, the larger shards' indexes are written at test time; and
 * every malformed, foreign, stale or absurd index is refused. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/shard_tar.h"
#include "objmount/shard_wds.h"

#include "check_main.h"

static char tmp[] = "/tmp/om-shard-wds-XXXXXX";
static char fixtures[1024];

static unsigned char *slurp_at(const char *dir, const char *name, size_t *len)
{
    char path[1500];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    ck_assert_int_eq(fstat(fileno(f), &st), 0);
    unsigned char *b = malloc((size_t)st.st_size + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    b[st.st_size] = '\0';
    *len = (size_t)st.st_size;
    return b;
}

static unsigned char *slurp(const char *dir, const char *name, size_t *len)
{
    unsigned char *b = slurp_at(dir, name, len);
    ck_assert_msg(b != NULL, "no fixture %s/%s", dir, name);
    return b;
}

/* The members an index object gives are the tar's regular files (those
 * wds2idx keeps, for DALI): same names, offsets and sizes, in order. */
static void assert_matches_tar(const struct om_shard_index *ix, const struct om_shard_index *tar,
                               bool dali)
{
    size_t j = 0;
    for (size_t i = 0; i < tar->n; i++) {
        const struct om_shard_member *t = &tar->members[i];
        if (t->type != OM_SHARD_FILE || (t->flags & OM_SHARD_M_HARDLINK))
            continue;
        const char *name = om_shard_member_name(tar, t);
        const char *last = strrchr(name, '/');
        if (dali && (last ? last[1] : name[0]) == '.')
            continue; /* a hidden file: wds2idx leaves it out */
        ck_assert_msg(j < ix->n, "index ends before %s", name);
        const struct om_shard_member *m = &ix->members[j++];
        ck_assert_str_eq(om_shard_member_name(ix, m), name);
        ck_assert_uint_eq(m->offset, t->offset);
        ck_assert_uint_eq(m->size, t->size);
        ck_assert_int_eq(m->type, OM_SHARD_FILE);
    }
    ck_assert_uint_eq(j, ix->n);
    ck_assert_uint_eq(ix->listed, ix->n);
}

static void tar_index(const char *dir, const char *tarname, struct om_shard_index *tar, size_t *len)
{
    unsigned char *b = slurp(dir, tarname, len);
    char err[512];
    int rc = om_tar_index_buf(b, *len, NULL, tar, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", tarname, err);
    free(b);
}

static void check_dali(const char *dir, const char *tarname, const char *idxname)
{
    struct om_shard_index tar, ix;
    size_t len, ilen;
    tar_index(dir, tarname, &tar, &len);
    char *text = (char *)slurp(dir, idxname, &ilen);
    char err[512] = "";
    int rc = om_shard_wds_dali(text, ilen, len, NULL, &ix, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %d %s", idxname, rc, err);
    ck_assert_int_eq(ix.source, OM_SHARD_SRC_DALI);
    assert_matches_tar(&ix, &tar, true);
    om_shard_index_free(&ix);
    om_shard_index_free(&tar);
    free(text);
}

static const char *const protos[] = {"p2", "p3", "p4", "p5", "np2.p2"};

/* Every pickle of the tar's wids index there is; how many were read. */
static int check_wids(const char *dir, const char *tarname)
{
    struct om_shard_index tar, ix;
    size_t len;
    tar_index(dir, tarname, &tar, &len);
    int found = 0;
    for (size_t i = 0; i < OM_ARRAY_LEN(protos); i++) {
        char name[256];
        snprintf(name, sizeof(name), "%s.index.%s", tarname, protos[i]);
        size_t plen;
        unsigned char *p = slurp_at(dir, name, &plen);
        if (!p)
            continue;
        char err[512] = "";
        int rc = om_shard_wds_wids(p, plen, len, NULL, &ix, err, sizeof(err));
        ck_assert_msg(rc == 0, "%s: %d %s", name, rc, err);
        ck_assert_int_eq(ix.source, OM_SHARD_SRC_WIDS);
        assert_matches_tar(&ix, &tar, false);
        om_shard_index_free(&ix);
        free(p);
        found++;
    }
    om_shard_index_free(&tar);
    return found;
}

START_TEST(test_committed_fixtures)
{
    check_dali(fixtures, "small.tar", "small.idx");
    ck_assert_int_eq(check_wids(fixtures, "small.tar"), 5);
    ck_assert_int_eq(check_wids(fixtures, "empty.tar"), 5);
}
END_TEST

/* The indexes of the shards of test_shard_tar.c, written at test time. */
START_TEST(test_indexes_of_python_shards_match_their_headers)
{
    static const char *const tars[] = {"gnu", "pax", "ustar", "many"};
    int wids = 0;
    for (size_t i = 0; i < OM_ARRAY_LEN(tars); i++) {
        char t[64], d[64];
        snprintf(t, sizeof(t), "%s.tar", tars[i]);
        snprintf(d, sizeof(d), "%s.idx", tars[i]);
        check_dali(tmp, t, d);
        wids += check_wids(tmp, t);
    }
    if (wids == 0)
        printf("numpy is missing: wids indexes of the test shards not written\n");
    else
        ck_assert_int_eq(wids, 4 * (int)OM_ARRAY_LEN(protos));
}
END_TEST

/* ---- DALI cases ---- */

static int dali(const char *text, uint64_t shard, const struct om_shard_limits *lim, char *err)
{
    struct om_shard_index ix;
    int rc = om_shard_wds_dali(text, strlen(text), shard, lim, &ix, err, 512);
    if (rc == 0)
        om_shard_index_free(&ix);
    else
        ck_assert_ptr_null(ix.members);
    return rc;
}

START_TEST(test_dali_format_cases)
{
    char err[512];
    ck_assert_int_eq(dali("v1.2 1\njpg 512 10 a.jpg\n", 2048, NULL, err), 0);
    /* CRLF, tabs, trailing blank lines, samples of several members */
    ck_assert_int_eq(dali("v1.2 2\r\njpg\t512 10 a.jpg cls 1536 1 a.cls\r\n"
                          "jpg 2560 1000 b.jpg\n\n  \n",
                          4096, NULL, err),
                     0);
    /* the name's extension is wds2idx's: after the first dot, or the whole
     * name when it has none */
    ck_assert_int_eq(dali("v1.2 1\ntar.gz 512 10 dir.x/seg.tar.gz\n", 2048, NULL, err), 0);
    ck_assert_int_eq(dali("v1.2 1\nREADME 512 10 README\n", 2048, NULL, err), 0);
    static const struct {
        const char *text;
        int rc;
        const char *says;
    } bad[] = {
        {"", -EBADMSG, "no version"},
        {"hello\n", -EBADMSG, "no version"},
        {"v1.1 1\njpg 512 10\n", -EPROTONOSUPPORT, "no member names"},
        {"v2.0 1\n", -EPROTONOSUPPORT, "v2.0"},
        {"v1.2\n", -EBADMSG, "SAMPLES"},
        {"v1.2 0\n", -EBADMSG, "SAMPLES"},
        {"v1.2 1 x\n", -EBADMSG, "SAMPLES"},
        {"v1.2 2\njpg 512 10 a.jpg\n", -EBADMSG, "2 samples announced, 1 found"},
        {"v1.2 1\njpg 512 10 a.jpg\njpg 1536 10 b.jpg\n", -EBADMSG, "more samples"},
        {"v1.2 1\n\n", -EBADMSG, "no member"},
        {"v1.2 1\njpg 512 10\n", -EBADMSG, "EXT OFFSET SIZE NAME"},
        {"v1.2 1\njpg 512 1x a.jpg\n", -EBADMSG, "malformed number"},
        {"v1.2 1\njpg -512 1 a.jpg\n", -EBADMSG, "malformed number"},
        {"v1.2 1\npng 512 10 a.jpg\n", -EBADMSG, "extension png"},
        {"v1.2 1\njpg 500 10 a.jpg\n", -EBADMSG, "multiple of 512"},
        {"v1.2 1\njpg 0 10 a.jpg\n", -EBADMSG, "no room for its header"},
        {"v1.2 2\njpg 1536 10 a.jpg\njpg 512 10 b.jpg\n", -EBADMSG, "not in tar order"},
        {"v1.2 2\njpg 512 600 a.jpg\njpg 1536 10 b.jpg\n", -EBADMSG, "line 3"},
        {"v1.2 1\njpg 1536 1000 a.jpg\n", -ESTALE, "another version"},
        {"v1.2 1\njpg 512 99999999999999999999 a.jpg\n", -EBADMSG, "malformed number"},
        {"v1.2 1\njpg 512 10 a\\303\\251.jpg\n", -EINVAL, "escaped"},
    };
    for (size_t i = 0; i < OM_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        int rc = dali(bad[i].text, 2048, NULL, err);
        ck_assert_msg(rc == bad[i].rc && strstr(err, bad[i].says), "case %zu: %d %s", i, rc, err);
    }
    struct om_shard_limits lim = {.max_members = 2};
    ck_assert_int_eq(
        dali("v1.2 3\njpg 512 1 a.jpg\njpg 1536 1 b.jpg\njpg 2560 1 c.jpg\n", 4096, &lim, err),
        -EFBIG);
    ck_assert_int_eq(dali("v1.2 2\njpg 512 1 a.jpg cls 1536 1 a.cls jpg 2560 1 b.jpg\n"
                          "jpg 3584 1 c.jpg\n",
                          8192, &lim, err),
                     -EFBIG);
    /* a name the mount cannot show is counted, the rest listed */
    struct om_shard_index ix;
    const char *t = "v1.2 2\njpg 512 1 ../up.jpg\njpg 1536 1 b.jpg\n";
    ck_assert_int_eq(om_shard_wds_dali(t, strlen(t), 4096, NULL, &ix, err, sizeof(err)), 0);
    ck_assert_uint_eq(ix.n, 1);
    ck_assert_uint_eq(ix.skipped.bad_name, 1);
    om_shard_index_free(&ix);
}
END_TEST

/* ---- wids cases ---- */

static int wids(const void *b, size_t len, uint64_t shard, const struct om_shard_limits *lim,
                char *err)
{
    struct om_shard_index ix;
    int rc = om_shard_wds_wids(b, len, shard, lim, &ix, err, 512);
    if (rc == 0)
        om_shard_index_free(&ix);
    else
        ck_assert_ptr_null(ix.members);
    return rc;
}

START_TEST(test_damaged_pickles_are_refused_never_crash)
{
    for (size_t i = 0; i < OM_ARRAY_LEN(protos); i++) {
        char name[64];
        snprintf(name, sizeof(name), "small.tar.index.%s", protos[i]);
        size_t len;
        unsigned char *p = slurp(fixtures, name, &len);
        char err[512];
        ck_assert_int_eq(wids(p, len, 10240, NULL, err), 0);
        for (size_t cut = 0; cut < len; cut++) {
            int rc = wids(p, cut, 10240, NULL, err);
            ck_assert_msg(rc == -EBADMSG, "%s cut at %zu: %d %s", name, cut, rc, err);
        }
        for (size_t b = 0; b < len; b++) {
            for (int bit = 0; bit < 8; bit++) {
                p[b] ^= (unsigned char)(1 << bit);
                int rc = wids(p, len, 10240, NULL, err);
                p[b] ^= (unsigned char)(1 << bit);
                ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -EPROTONOSUPPORT ||
                                  rc == -ESTALE || rc == -EFBIG,
                              "%s byte %zu bit %d: %d %s", name, b, bit, rc, err);
            }
        }
        /* the shard is smaller than the index says: another version */
        ck_assert_int_eq(wids(p, len, 3072, NULL, err), -ESTALE);
        /* bounds */
        struct om_shard_limits lim = {.max_members = 3};
        ck_assert_int_eq(wids(p, len, 10240, &lim, err), -EFBIG);
        free(p);
    }
}
END_TEST

START_TEST(test_pickles_that_are_not_a_wids_index)
{
    char err[512];
    static const struct {
        const char *bytes;
        size_t len;
        int rc;
        const char *says;
    } cases[] = {
        {"v1.2 1\n", 7, -EBADMSG, "not a pickle"},
        {"\x80\x01N.", 4, -EPROTONOSUPPORT, "protocol 1"},
        {"\x80\x06N.", 4, -EPROTONOSUPPORT, "protocol 6"},
        {"\x80\x02N.", 4, -EBADMSG, "not a (names, offsets) pair"},
        {"\x80\x02N.x", 5, -EBADMSG, "after the pickle"},
        {"\x80\x02NN.", 5, -EBADMSG, "not one object"},
        {"\x80\x02}.", 4, -EBADMSG, "opcode 0x7d"}, /* a dict */
        {"\x80\x02.", 3, -EBADMSG, "not one object"},
        {"\x80\x02h\x05.", 5, -EBADMSG, "memo entry not set"},
        {"\x80\x02"
         "a.",
         4, -EBADMSG, "stack underflow"},
        {"\x80\x02("
         "a.",
         5, -EBADMSG, "stack underflow"},
        {"\x80\x02"
         "e.",
         4, -EBADMSG, "no mark"},
        {"\x80\x02\x8a\x09"
         "123456789.",
         14, -EBADMSG, "over 64 bits"},
        /* (["a"], os.system("echo")): refused, and nothing is called */
        {"\x80\x02]X\x01\x00\x00\x00"
         "aa"
         "cos\nsystem\nX\x04\x00\x00\x00"
         "echo\x85R\x86.",
         34, -EBADMSG, "not a numpy array"},
        /* a BUILD of something REDUCE did not make */
        {"\x80\x02NNb.", 6, -EBADMSG, "BUILD"},
    };
    for (size_t i = 0; i < OM_ARRAY_LEN(cases); i++) {
        err[0] = '\0';
        int rc = wids(cases[i].bytes, cases[i].len, 1 << 20, NULL, err);
        ck_assert_msg(rc == cases[i].rc && strstr(err, cases[i].says), "case %zu: %d %s", i, rc,
                      err);
    }
}
END_TEST

START_TEST(test_index_keys_beside_a_shard)
{
    static const char *const cases[][3] = {
        {"train-000.tar", "train-000.idx", "train-000.tar.index"},
        {"data/train/shard-000123.tar", "data/train/shard-000123.idx",
         "data/train/shard-000123.tar.index"},
        {"a.b/c.d.tar", "a.b/c.idx", "a.b/c.d.tar.index"},
        {".hidden.tar", ".hidden.idx", ".hidden.tar.index"},
        {"dir/.tar", "dir/.ta.idx", "dir/.tar.index"}, /* wds2idx's slice of a failed find */
    };
    for (size_t i = 0; i < OM_ARRAY_LEN(cases); i++) {
        char d[256], w[256];
        ck_assert_int_eq(om_shard_wds_index_keys(cases[i][0], d, sizeof(d), w, sizeof(w)), 0);
        ck_assert_str_eq(d, cases[i][1]);
        ck_assert_str_eq(w, cases[i][2]);
    }
    char small[8], w[256];
    ck_assert_int_eq(om_shard_wds_index_keys("train-000.tar", small, sizeof(small), w, sizeof(w)),
                     -ENAMETOOLONG);
}
END_TEST

int main(void)
{
    const char *src = getenv("OBJMOUNT_SOURCE_DIR");
    snprintf(fixtures, sizeof(fixtures), "%s/tests/unit/shard/fixtures", src ? src : ".");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    char cmd[1500];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/unit/shard/make_tars.py %s",
             src ? src : ".", tmp);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed\n", cmd);
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("shard_wds");
    TCase *tc = tcase_create("wds");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_committed_fixtures);
    tcase_add_test(tc, test_indexes_of_python_shards_match_their_headers);
    tcase_add_test(tc, test_dali_format_cases);
    tcase_add_test(tc, test_damaged_pickles_are_refused_never_crash);
    tcase_add_test(tc, test_pickles_that_are_not_a_wids_index);
    tcase_add_test(tc, test_index_keys_beside_a_shard);
    suite_add_tcase(s, tc);
    int rc = om_check_run(s);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
    return rc;
}
