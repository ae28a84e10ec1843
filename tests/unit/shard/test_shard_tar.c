/* The tar parser: shards written by Python's tarfile (GNU, PAX and ustar
 * formats, long names, a 0-byte member, 1,100 members) and by GNU tar
 * (sparse files), generated at test time by make_tars.py with what tarfile
 * itself reads back, must give the same members, offsets and bytes; fed
 * in pieces of every size or as ranged reads of the headers only; and
 * headers built here pin the rest: base-256 numbers, signed checksums,
 * PAX global headers, sparse extension blocks, and every damaged,
 * truncated, foreign or absurd input refused with its errno. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/digest.h"
#include "objmount/shard_tar.h"

#include "check_main.h"

static char fixtures[] = "/tmp/om-shard-tar-XXXXXX";

static unsigned char *slurp(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "no fixture %s", path);
    struct stat st;
    ck_assert_int_eq(fstat(fileno(f), &st), 0);
    unsigned char *b = malloc((size_t)st.st_size + 1);
    ck_assert_uint_eq(fread(b, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    b[st.st_size] = '\0';
    *len = (size_t)st.st_size;
    return b;
}

static bool have(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fixtures, name);
    return access(path, R_OK) == 0;
}

static void parse_ok(const unsigned char *b, size_t len, struct om_shard_index *ix)
{
    char err[512] = "";
    int rc = om_tar_index_buf(b, len, NULL, ix, err, sizeof(err));
    ck_assert_msg(rc == 0, "parse: %d %s", rc, err);
}

/* Compare with NAME.expect (make_tars.py): each member in tar order, and
 * the SHA-256 of its bytes in the tar against tarfile's. */
static void check_expect(const char *tarname, const unsigned char *tar,
                         const struct om_shard_index *ix)
{
    char en[256];
    snprintf(en, sizeof(en), "%s.expect", tarname);
    size_t elen;
    char *text = (char *)slurp(en, &elen);
    size_t i = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save), i++) {
        char *f[11] = {0};
        int nf = 0;
        for (char *s2 = NULL, *t = strtok_r(line, "\t", &s2); t && nf < 11;
             t = strtok_r(NULL, "\t", &s2))
            f[nf++] = t;
        ck_assert_int_ge(nf, 10);
        ck_assert_msg(i < ix->n, "%s: member %zu (%s) missing", tarname, i, f[9]);
        const struct om_shard_member *m = &ix->members[i];
        const char *name = om_shard_member_name(ix, m);
        ck_assert_msg(strcmp(name, f[9]) == 0, "%s: member %zu is %s, tarfile says %s", tarname, i,
                      name, f[9]);
        int type = f[0][0] == 'd'   ? OM_SHARD_DIR
                   : f[0][0] == 'l' ? OM_SHARD_SYMLINK
                                    : OM_SHARD_FILE;
        ck_assert_msg(m->type == type, "%s: %s type %d", tarname, name, m->type);
        ck_assert_int_eq(!!(m->flags & OM_SHARD_M_HARDLINK), f[0][0] == 'h');
        ck_assert_msg(m->offset == strtoull(f[1], NULL, 10), "%s: %s offset %llu, tarfile %s",
                      tarname, name, (unsigned long long)m->offset, f[1]);
        ck_assert_uint_eq(m->size, strtoull(f[2], NULL, 10));
        ck_assert_uint_eq(m->mode, strtoul(f[3], NULL, 10));
        ck_assert_uint_eq(m->uid, strtoul(f[4], NULL, 10));
        ck_assert_uint_eq(m->gid, strtoul(f[5], NULL, 10));
        ck_assert_int_eq(m->mtime, strtoll(f[6], NULL, 10));
        ck_assert_msg(m->mtime_nsec == strtoul(f[7], NULL, 10), "%s: %s nsec %u, tarfile %s",
                      tarname, name, m->mtime_nsec, f[7]);
        unsigned char sha[OM_SHA256_LEN];
        char hex[2 * OM_SHA256_LEN + 1];
        ck_assert_int_eq(om_sha256(tar + m->offset, m->size, sha), 0);
        om_hex(sha, sizeof(sha), hex);
        ck_assert_msg(strcmp(hex, f[8]) == 0, "%s: bytes of %s differ", tarname, name);
        const char *link = om_shard_member_link(ix, m);
        if (nf > 10) {
            ck_assert_ptr_nonnull(link);
            ck_assert_str_eq(link, f[10]);
        } else {
            ck_assert_ptr_null(link);
        }
    }
    ck_assert_uint_eq(i, ix->n);
    ck_assert_uint_eq(ix->listed, ix->n);
    free(text);
    snprintf(en, sizeof(en), "%s.skip", tarname);
    text = (char *)slurp(en, &elen);
    unsigned sparse, special;
    ck_assert_int_eq(sscanf(text, "%u %u", &sparse, &special), 2);
    ck_assert_uint_eq(ix->skipped.sparse, sparse);
    ck_assert_uint_eq(ix->skipped.special, special);
    free(text);
}

static void check_fixture(const char *name)
{
    size_t len;
    unsigned char *tar = slurp(name, &len);
    struct om_shard_index ix;
    parse_ok(tar, len, &ix);
    check_expect(name, tar, &ix);
    om_shard_index_free(&ix);
    free(tar);
}

START_TEST(test_gnu_format_long_names)
{
    check_fixture("gnu.tar");
}
END_TEST

START_TEST(test_pax_format_long_names_and_fractional_mtimes)
{
    check_fixture("pax.tar");
    /* the 240-byte WebDataset key under a 120-byte directory */
    size_t len;
    unsigned char *tar = slurp("pax.tar", &len);
    struct om_shard_index ix;
    parse_ok(tar, len, &ix);
    char want[512];
    snprintf(want, sizeof(want), "%0120d/sample_%0233d.jpg", 0, 0);
    memset(want, 'd', 120);
    memset(want + 128, 'k', 233);
    uint32_t m;
    ck_assert_int_eq(om_shard_index_find(&ix, want, strlen(want), &m), 0);
    ck_assert_uint_eq(ix.members[m].size, 3000);
    ck_assert_uint_eq(ix.members[m].uid, 3000000);
    ck_assert_int_eq(om_shard_index_find(&ix, "train/empty.txt", 15, &m), 0);
    ck_assert_uint_eq(ix.members[m].size, 0);
    om_shard_index_free(&ix);
    free(tar);
}
END_TEST

START_TEST(test_ustar_prefix_joins_the_name)
{
    check_fixture("ustar.tar");
}
END_TEST

START_TEST(test_1100_members)
{
    check_fixture("many.tar");
    size_t len;
    unsigned char *tar = slurp("many.tar", &len);
    struct om_shard_index ix;
    parse_ok(tar, len, &ix);
    ck_assert_uint_eq(ix.n, 1100);
    ck_assert_uint_eq(ix.first_data, ix.members[0].offset);
    om_shard_index_free(&ix);
    free(tar);
}
END_TEST

START_TEST(test_gnu_tar_sparse_files_are_counted_not_listed)
{
    if (!have("sparse-gnu.tar")) {
        printf("GNU tar is missing: sparse fixtures not written\n");
        return;
    }
    check_fixture("sparse-gnu.tar");
    check_fixture("sparse-pax.tar");
}
END_TEST

/* ---- pieces ---- */

static void assert_same(const struct om_shard_index *a, const struct om_shard_index *b)
{
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        ck_assert_str_eq(om_shard_member_name(a, &a->members[i]),
                         om_shard_member_name(b, &b->members[i]));
        ck_assert_uint_eq(a->members[i].offset, b->members[i].offset);
        ck_assert_uint_eq(a->members[i].size, b->members[i].size);
        ck_assert_int_eq(a->members[i].mtime, b->members[i].mtime);
        ck_assert_uint_eq(a->members[i].mtime_nsec, b->members[i].mtime_nsec);
        ck_assert_uint_eq(a->members[i].type, b->members[i].type);
    }
    ck_assert_mem_eq(&a->skipped, &b->skipped, sizeof(a->skipped));
}

START_TEST(test_pieces_of_every_size_give_the_same_index)
{
    static const char *const names[] = {"pax.tar", "gnu.tar", "many.tar"};
    static const size_t pieces[] = {1, 100, 511, 512, 513, 1536, 8191, 65536};
    for (size_t t = 0; t < OM_ARRAY_LEN(names); t++) {
        size_t len;
        unsigned char *tar = slurp(names[t], &len);
        struct om_shard_index whole;
        parse_ok(tar, len, &whole);
        for (size_t k = 0; k < OM_ARRAY_LEN(pieces); k++) {
            struct om_shard_index ix;
            om_shard_index_init(&ix, NULL, len, OM_SHARD_SRC_TAR);
            struct om_tar_parser *p = om_tar_parser_new(&ix);
            int rc = 0;
            for (size_t off = 0; off < len && rc == 0; off += pieces[k])
                rc = om_tar_parser_feed(p, off, tar + off, OM_MIN(pieces[k], len - off));
            ck_assert_int_eq(rc, 1);
            ck_assert_int_eq(om_tar_parser_finish(p), 0);
            assert_same(&whole, &ix);
            om_tar_parser_free(p);
            om_shard_index_free(&ix);
        }
        om_shard_index_free(&whole);
        free(tar);
    }
}
END_TEST

/* Feed only what the parser asks for: the headers; overlapping and
 * bigger pieces are fine. */
START_TEST(test_ranged_reads_of_the_headers_only)
{
    static const char *const names[] = {"pax.tar", "gnu.tar", "many.tar", "ustar.tar"};
    for (size_t t = 0; t < OM_ARRAY_LEN(names); t++) {
        size_t len;
        unsigned char *tar = slurp(names[t], &len);
        struct om_shard_index whole;
        parse_ok(tar, len, &whole);
        for (int extra = 0; extra <= 1024; extra += 1024) {
            struct om_shard_index ix;
            om_shard_index_init(&ix, NULL, len, OM_SHARD_SRC_TAR);
            struct om_tar_parser *p = om_tar_parser_new(&ix);
            uint64_t fed = 0, off, want;
            int rc = 0, rounds = 0;
            while (rc == 0) {
                om_tar_parser_need(p, &off, &want);
                ck_assert_uint_gt(want, 0);
                ck_assert_uint_eq(off % 512, 0);
                /* one block back: a piece may overlap what was fed */
                uint64_t from = off >= 512 && extra ? off - 512 : off;
                uint64_t n = OM_MIN(want + (uint64_t)extra + (off - from), len - from);
                rc = om_tar_parser_feed(p, from, tar + from, n);
                fed += n;
                ck_assert_int_lt(++rounds, 100000);
            }
            ck_assert_int_eq(rc, 1);
            ck_assert_int_eq(om_tar_parser_finish(p), 0);
            om_tar_parser_need(p, &off, &want);
            ck_assert_uint_eq(want, 0);
            assert_same(&whole, &ix);
            if (strcmp(names[t], "pax.tar") == 0 && !extra)
                ck_assert_uint_lt(fed, len / 8); /* the 110 KB member is never fetched */
            om_tar_parser_free(p);
            om_shard_index_free(&ix);
        }
        om_shard_index_free(&whole);
        free(tar);
    }
}
END_TEST

/* ---- damage ---- */

static int parse_err(const unsigned char *b, size_t len, const struct om_shard_limits *lim,
                     char *err)
{
    struct om_shard_index ix;
    int rc = om_tar_index_buf(b, len, lim, &ix, err, 512);
    if (rc == 0)
        om_shard_index_free(&ix);
    else
        ck_assert_ptr_null(ix.members);
    return rc;
}

START_TEST(test_a_corrupt_header_is_an_error_never_a_listing)
{
    size_t len;
    unsigned char *tar = slurp("gnu.tar", &len);
    struct om_shard_index ix;
    parse_ok(tar, len, &ix);
    /* a byte of the header of the third member, at each place of it */
    uint64_t h = ix.members[2].offset - 512, jpg = ix.members[1].offset;
    om_shard_index_free(&ix);
    char err[512];
    for (int i = 0; i < 512; i++) {
        tar[h + (uint64_t)i] ^= 0x04;
        int rc = parse_err(tar, len, NULL, err);
        tar[h + (uint64_t)i] ^= 0x04;
        /* the checksum field's last byte follows its NUL: read by no one */
        ck_assert_msg(rc == (i == 155 ? 0 : -EBADMSG), "byte %d: %d %s", i, rc, err);
    }
    tar[h + 10] ^= 0x04;
    ck_assert_int_eq(parse_err(tar, len, NULL, err), -EBADMSG);
    char want[64];
    snprintf(want, sizeof(want), "offset %llu: checksum mismatch", (unsigned long long)h);
    ck_assert_msg(strstr(err, want) && strstr(err, "after member 'train/000000.jpg'"), "%s", err);
    tar[h + 10] ^= 0x04;
    /* a byte of data changes no header */
    tar[jpg + 600] ^= 0xff;
    ck_assert_int_eq(parse_err(tar, len, NULL, err), 0);
    free(tar);
}
END_TEST

START_TEST(test_truncated_archives_are_eio)
{
    static const char *const names[] = {"gnu.tar", "pax.tar", "many.tar"};
    for (size_t t = 0; t < OM_ARRAY_LEN(names); t++) {
        size_t len;
        unsigned char *tar = slurp(names[t], &len);
        struct om_shard_index ix;
        parse_ok(tar, len, &ix);
        const struct om_shard_member *last = &ix.members[ix.n - 1];
        uint64_t marker = last->offset + (last->size + 511) / 512 * 512;
        om_shard_index_free(&ix);
        char err[512];
        /* every cut before the end marker: on a block, and inside one */
        uint64_t step = strcmp(names[t], "many.tar") == 0 ? 13 * 512 : 512;
        for (uint64_t cut = 0; cut <= marker; cut += step) {
            ck_assert_msg(parse_err(tar, cut, NULL, err) == -EIO, "%s cut at %llu: %s", names[t],
                          (unsigned long long)cut, err);
            if (cut + 100 < marker)
                ck_assert_int_eq(parse_err(tar, cut + 100, NULL, err), -EIO);
        }
        ck_assert_int_eq(parse_err(tar, marker + 512, NULL, err), 0);
        ck_assert_int_eq(parse_err(tar, marker, NULL, err), -EIO);
        ck_assert_msg(strstr(err, "before its end-of-archive marker"), "%s", err);
        free(tar);
    }
}
END_TEST

START_TEST(test_compressed_and_foreign_files_are_not_tars)
{
    static const struct {
        const char *bytes;
        size_t len;
        const char *says;
    } cases[] = {
        {"\x1f\x8b\x08\x00", 4, "gzip"},
        {"BZh91AY&SY", 10, "bzip2"},
        {"\xfd"
         "7zXZ\0\0",
         7, "xz"},
        {"\x28\xb5\x2f\xfd\x04", 5, "zstd"},
        {"\x04\x22\x4d\x18\x64", 5, "lz4"},
        {"hello, world: not a tar at all", 30, "not a tar"},
    };
    unsigned char buf[2048];
    char err[512];
    for (size_t i = 0; i < OM_ARRAY_LEN(cases); i++) {
        memset(buf, 'q', sizeof(buf));
        memcpy(buf, cases[i].bytes, cases[i].len);
        ck_assert_int_eq(parse_err(buf, sizeof(buf), NULL, err), -EPROTONOSUPPORT);
        ck_assert_msg(strstr(err, cases[i].says), "%s", err);
    }
}
END_TEST

START_TEST(test_limits_bound_what_a_shard_can_claim)
{
    size_t len;
    unsigned char *tar = slurp("many.tar", &len);
    char err[512];
    struct om_shard_limits lim = {.max_members = 1000};
    ck_assert_int_eq(parse_err(tar, len, &lim, err), -EFBIG);
    ck_assert_msg(strstr(err, "more than 1000 members"), "%s", err);
    lim = (struct om_shard_limits){.max_name_bytes = 4000};
    ck_assert_int_eq(parse_err(tar, len, &lim, err), -EFBIG);
    free(tar);
    tar = slurp("pax.tar", &len);
    lim = (struct om_shard_limits){.max_ext_header = 100};
    ck_assert_int_eq(parse_err(tar, len, &lim, err), -EFBIG);
    ck_assert_msg(strstr(err, "extended header at offset"), "%s", err);
    free(tar);
}
END_TEST

/* ---- headers built here ---- */

/* v in w - 1 octal digits and a NUL (v must fit). */
static void octal(unsigned char *f, size_t w, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%0*llo", (int)w - 1, (unsigned long long)v);
    ck_assert_int_eq(n, (int)w - 1);
    memcpy(f, tmp, w);
}

static void checksum(unsigned char *h, bool signed_sum)
{
    memset(h + 148, ' ', 8);
    long sum = 0;
    for (int i = 0; i < 512; i++)
        sum += signed_sum ? (signed char)h[i] : h[i];
    snprintf((char *)h + 148, 8, "%06lo", sum & 0777777);
    h[155] = ' ';
}

/* A ustar header for name (type, size) at h. */
static void header(unsigned char *h, const char *name, char type, uint64_t size)
{
    memset(h, 0, 512);
    memcpy(h, name, OM_MIN(strlen(name), 100));
    octal(h + 100, 8, 0644);
    octal(h + 108, 8, 1000);
    octal(h + 116, 8, 1000);
    octal(h + 124, 12, size);
    octal(h + 136, 12, 1700000000);
    h[156] = (unsigned char)type;
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    checksum(h, false);
}

/* A member with its data (size bytes of c), padded, at *at; returns the
 * data's offset. */
static size_t member(unsigned char *b, size_t *at, const char *name, char type, const char *data,
                     size_t size)
{
    header(b + *at, name, type, size);
    size_t off = *at + 512;
    if (data)
        memcpy(b + off, data, size);
    *at = off + (size + 511) / 512 * 512;
    return off;
}

static size_t pax(unsigned char *b, size_t *at, char type, const char *records)
{
    return member(b, at, "././@PaxHeader", type, records, strlen(records));
}

/* Append the PAX record "LEN key=value\n" to out, LEN counting itself. */
static void rec(char *out, const char *key, const char *value)
{
    size_t body = strlen(key) + strlen(value) + 3; /* ' ', '=', '\n' */
    size_t len = body + 1;
    while (snprintf(NULL, 0, "%zu", len) + body != len)
        len++;
    sprintf(out + strlen(out), "%zu %s=%s\n", len, key, value);
}

static unsigned char big[64 * 1024];

START_TEST(test_base256_numbers_and_signed_checksums)
{
    memset(big, 0, sizeof(big));
    size_t at = 0;
    header(big, "b256", '0', 0);
    /* size 1000 and uid 3,000,000 in base-256; mtime -1 */
    memset(big + 124, 0, 12);
    big[124] = 0x80;
    big[134] = 0x03;
    big[135] = 0xe8;
    memset(big + 108, 0, 8);
    big[108] = 0x80;
    big[113] = 0x2d;
    big[114] = 0xc6;
    big[115] = 0xc0;
    memset(big + 136, 0xff, 12);
    checksum(big, false);
    at = 512 + 1024;
    /* a name with bytes above 0x7f, summed as signed chars by old writers */
    member(big, &at, "caf\xc3\xa9.txt", '0', "x", 1);
    checksum(big + at - 1024, true);
    size_t end = at + 1024;
    struct om_shard_index ix;
    parse_ok(big, end, &ix);
    ck_assert_uint_eq(ix.n, 2);
    ck_assert_uint_eq(ix.members[0].size, 1000);
    ck_assert_uint_eq(ix.members[0].uid, 3000000);
    ck_assert_int_eq(ix.members[0].mtime, -1);
    ck_assert_str_eq(om_shard_member_name(&ix, &ix.members[1]), "caf\xc3\xa9.txt");
    om_shard_index_free(&ix);
    /* base-256 beyond 63 bits, or negative where it cannot be */
    char err[512];
    header(big, "b256", '0', 0);
    memset(big + 124, 0xff, 12);
    checksum(big, false);
    ck_assert_int_eq(parse_err(big, end, NULL, err), -EBADMSG);
    big[124] = 0x80;
    big[125] = 0x80;
    checksum(big, false);
    ck_assert_int_eq(parse_err(big, end, NULL, err), -EBADMSG);
    /* a size beyond the shard */
    header(big, "huge", '0', 1ULL << 32);
    ck_assert_int_eq(parse_err(big, end, NULL, err), -EIO);
    ck_assert_msg(strstr(err, "runs past the shard's end"), "%s", err);
    /* octal garbage */
    header(big, "bad", '0', 0);
    memcpy(big + 100, "0644x\0\0", 8);
    checksum(big, false);
    ck_assert_int_eq(parse_err(big, end, NULL, err), -EBADMSG);
}
END_TEST

START_TEST(test_pax_headers_global_and_per_member)
{
    memset(big, 0, sizeof(big));
    size_t at = 0;
    char r[512] = "";
    rec(r, "uid", "4242424");
    rec(r, "mtime", "5.5");
    rec(r, "path", "ignored/name");
    pax(big, &at, 'g', r);
    size_t a = member(big, &at, "a", '0', "aaa", 3);
    r[0] = '\0';
    rec(r, "mtime", "-1.25");
    rec(r, "gid", "777");
    rec(r, "path", "long/pax/name/for/b");
    pax(big, &at, 'x', r);
    size_t b = member(big, &at, "b-short", '0', "bb", 2);
    r[0] = '\0';
    rec(r, "size", "10000");
    pax(big, &at, 'x', r);
    size_t c = member(big, &at, "c", '0', NULL, 0); /* the header says 0 */
    at = c + 10240;
    r[0] = '\0';
    rec(r, "linkpath", "a-target");
    pax(big, &at, 'x', r);
    member(big, &at, "lnk", '2', NULL, 0);
    r[0] = '\0';
    rec(r, "GNU.sparse.major", "1");
    rec(r, "SCHILY.xattr.k", "v");
    pax(big, &at, 'x', r);
    member(big, &at, "sparse", '0', "s", 1);
    size_t end = at + 1024;
    struct om_shard_index ix;
    parse_ok(big, end, &ix);
    ck_assert_uint_eq(ix.n, 4);
    const struct om_shard_member *m = ix.members;
    ck_assert_str_eq(om_shard_member_name(&ix, &m[0]), "a");
    ck_assert_uint_eq(m[0].offset, a);
    ck_assert_uint_eq(m[0].uid, 4242424);
    ck_assert_int_eq(m[0].mtime, 5);
    ck_assert_uint_eq(m[0].mtime_nsec, 500000000);
    ck_assert_str_eq(om_shard_member_name(&ix, &m[1]), "long/pax/name/for/b");
    ck_assert_uint_eq(m[1].offset, b);
    ck_assert_int_eq(m[1].mtime, -2);
    ck_assert_uint_eq(m[1].mtime_nsec, 750000000);
    ck_assert_uint_eq(m[1].uid, 4242424);
    ck_assert_uint_eq(m[1].gid, 777);
    ck_assert_uint_eq(m[2].size, 10000);
    ck_assert_uint_eq(m[2].offset, c);
    ck_assert_int_eq(m[2].mtime, 5); /* the global one again */
    ck_assert_str_eq(om_shard_member_link(&ix, &m[3]), "a-target");
    ck_assert_uint_eq(ix.skipped.sparse, 1);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_malformed_pax_records_are_ebadmsg)
{
    static const char *const bad[] = {
        "5 a=b\n",             /* its length is not its length */
        "99 path=x\n",         /* longer than the header */
        "9 path=x\t",          /* no newline */
        "10 pathxy\n",         /* no '=' */
        "x9 path=x\n",         /* no length */
        "13 mtime=1.x\n",      /* not a time */
        "11 size=-1\n",        /* not a size */
        "18 uid=9999999999\n", /* over 32 bits */
        "7 =abc\n",            /* an empty key */
    };
    char err[512];
    for (size_t i = 0; i < OM_ARRAY_LEN(bad); i++) {
        memset(big, 0, sizeof(big));
        size_t at = 0;
        pax(big, &at, 'x', bad[i]);
        member(big, &at, "a", '0', "a", 1);
        ck_assert_msg(parse_err(big, at + 1024, NULL, err) == -EBADMSG, "%s: %s", bad[i], err);
    }
    /* an extended header that belongs to no member */
    memset(big, 0, sizeof(big));
    size_t at = 0;
    pax(big, &at, 'x', "10 path=x\n");
    ck_assert_int_eq(parse_err(big, at + 1024, NULL, err), -EBADMSG);
    ck_assert_msg(strstr(err, "belongs to no member"), "%s", err);
}
END_TEST

START_TEST(test_names_too_long_for_a_path_are_refused)
{
    static char name[6000];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    char err[512];
    /* a GNU long name is refused before it is gathered */
    memset(big, 0, sizeof(big));
    size_t at = 0;
    member(big, &at, "././@LongLink", 'L', name, 5000);
    member(big, &at, "short", '0', "x", 1);
    ck_assert_int_eq(parse_err(big, at + 1024, NULL, err), -ENAMETOOLONG);
    /* a PAX path */
    memset(big, 0, sizeof(big));
    at = 0;
    char rec[5100];
    snprintf(rec, sizeof(rec), "5010 path=%.4999s\n", name);
    ck_assert_uint_eq(strlen(rec), 5010);
    pax(big, &at, 'x', rec);
    member(big, &at, "short", '0', "x", 1);
    ck_assert_int_eq(parse_err(big, at + 1024, NULL, err), -ENAMETOOLONG);
    /* 4095 bytes in segments of 255 is the longest that passes */
    memset(big, 0, sizeof(big));
    at = 0;
    char ok[OM_SHARD_NAME_MAX + 1];
    for (int i = 0; i < OM_SHARD_NAME_MAX; i++)
        ok[i] = i % 256 == 255 ? '/' : 'o';
    ok[OM_SHARD_NAME_MAX] = '\0';
    member(big, &at, "././@LongLink", 'L', ok, sizeof(ok));
    member(big, &at, "short", '0', "x", 1);
    struct om_shard_index ix;
    parse_ok(big, at + 1024, &ix);
    ck_assert_uint_eq(ix.members[0].name_len, OM_SHARD_NAME_MAX);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_special_entries_and_sparse_blocks)
{
    memset(big, 0, sizeof(big));
    size_t at = 0;
    member(big, &at, "dev", '3', NULL, 0);
    member(big, &at, "blk", '4', NULL, 0);
    member(big, &at, "fifo", '6', NULL, 0);
    member(big, &at, "label", 'V', NULL, 0);
    /* an old GNU sparse member with one extension block, then its data */
    header(big + at, "sparse", 'S', 1000);
    big[at + 482] = 1;
    checksum(big + at, false);
    at += 512;
    big[at + 504] = 0; /* the extension block: no more */
    at += 512 + 1024;
    size_t a = member(big, &at, "after-sparse", '0', "z", 1);
    /* a GNU dumpdir is a directory; '7' and unknown types are files */
    member(big, &at, "dump", 'D', "entries", 7);
    size_t c = member(big, &at, "contig", '7', "cc", 2);
    size_t u = member(big, &at, "unknown", 'Q', "uuu", 3);
    /* v7: no magic */
    size_t v = at + 512;
    member(big, &at, "v7", '0', "v", 1);
    memset(big + v - 512 + 257, 0, 8);
    checksum(big + v - 512, false);
    /* "..", and an absolute name */
    member(big, &at, "../escape", '0', "e", 1);
    size_t abs = member(big, &at, "/etc/abs", '0', "a", 1);
    struct om_shard_index ix;
    parse_ok(big, at + 1024, &ix);
    ck_assert_uint_eq(ix.skipped.special, 4);
    ck_assert_uint_eq(ix.skipped.sparse, 1);
    ck_assert_uint_eq(ix.skipped.bad_name, 1);
    static const char *const names[] = {"after-sparse", "dump", "contig",
                                        "unknown",      "v7",   "etc/abs"};
    ck_assert_uint_eq(ix.n, OM_ARRAY_LEN(names));
    for (size_t i = 0; i < ix.n; i++)
        ck_assert_str_eq(om_shard_member_name(&ix, &ix.members[i]), names[i]);
    ck_assert_uint_eq(ix.members[0].offset, a);
    ck_assert_int_eq(ix.members[1].type, OM_SHARD_DIR);
    ck_assert_uint_eq(ix.members[2].offset, c);
    ck_assert_uint_eq(ix.members[3].offset, u);
    ck_assert_uint_eq(ix.members[3].size, 3);
    ck_assert_uint_eq(ix.members[4].offset, v);
    ck_assert_uint_eq(ix.members[5].offset, abs);
    om_shard_index_free(&ix);
    /* a multi-volume continuation is refused */
    char err[512];
    at = 0;
    member(big, &at, "cont", 'M', "m", 1);
    ck_assert_int_eq(parse_err(big, at + 1024, NULL, err), -EPROTONOSUPPORT);
}
END_TEST

START_TEST(test_feeding_rules)
{
    memset(big, 0, sizeof(big));
    size_t at = 0;
    member(big, &at, "a", '0', NULL, 5000);
    member(big, &at, "b", '0', "b", 1);
    size_t end = at + 1024;
    struct om_shard_index ix;
    om_shard_index_init(&ix, NULL, end, OM_SHARD_SRC_TAR);
    struct om_tar_parser *p = om_tar_parser_new(&ix);
    ck_assert_int_eq(om_tar_parser_feed(p, 0, big, 512), 0);
    /* within a's data: skipped; past b's header: a gap */
    ck_assert_int_eq(om_tar_parser_feed(p, 3000, big + 3000, 10), 0);
    ck_assert_int_eq(om_tar_parser_feed(p, 512 + 5120 + 1, big + 512 + 5120 + 1, 10), -EINVAL);
    ck_assert_msg(strstr(om_tar_parser_error(p), "next header is at 5632"), "%s",
                  om_tar_parser_error(p));
    ck_assert_int_eq(om_tar_parser_feed(p, 0, big, end), -EINVAL); /* sticks */
    ck_assert_int_eq(om_tar_parser_finish(p), -EINVAL);
    om_tar_parser_free(p);
    om_shard_index_free(&ix);
    /* bytes after the end marker are ignored; the headers are counted */
    om_shard_index_init(&ix, NULL, end + 4096, OM_SHARD_SRC_TAR);
    p = om_tar_parser_new(&ix);
    memset(big + end, 'j', 4096);
    ck_assert_int_eq(om_tar_parser_feed(p, 0, big, end + 4096), 1);
    ck_assert_int_eq(om_tar_parser_feed(p, end + 4096, "x", 1), 1);
    ck_assert_uint_eq(om_tar_parser_headers(p), 2);
    uint64_t off, len;
    om_tar_parser_need(p, &off, &len);
    ck_assert_uint_eq(off, at);
    ck_assert_uint_eq(len, 0);
    ck_assert_int_eq(om_tar_parser_finish(p), 0);
    om_tar_parser_free(p);
    om_shard_index_free(&ix);
}
END_TEST

int main(void)
{
    if (!mkdtemp(fixtures)) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    const char *src = getenv("OBJMOUNT_SOURCE_DIR");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/unit/shard/make_tars.py %s",
             src ? src : ".", fixtures);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed\n", cmd);
        return EXIT_FAILURE;
    }
    Suite *s = suite_create("shard_tar");
    TCase *tc = tcase_create("tar");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_gnu_format_long_names);
    tcase_add_test(tc, test_pax_format_long_names_and_fractional_mtimes);
    tcase_add_test(tc, test_ustar_prefix_joins_the_name);
    tcase_add_test(tc, test_1100_members);
    tcase_add_test(tc, test_gnu_tar_sparse_files_are_counted_not_listed);
    tcase_add_test(tc, test_pieces_of_every_size_give_the_same_index);
    tcase_add_test(tc, test_ranged_reads_of_the_headers_only);
    tcase_add_test(tc, test_a_corrupt_header_is_an_error_never_a_listing);
    tcase_add_test(tc, test_truncated_archives_are_eio);
    tcase_add_test(tc, test_compressed_and_foreign_files_are_not_tars);
    tcase_add_test(tc, test_limits_bound_what_a_shard_can_claim);
    tcase_add_test(tc, test_base256_numbers_and_signed_checksums);
    tcase_add_test(tc, test_pax_headers_global_and_per_member);
    tcase_add_test(tc, test_malformed_pax_records_are_ebadmsg);
    tcase_add_test(tc, test_names_too_long_for_a_path_are_refused);
    tcase_add_test(tc, test_special_entries_and_sparse_blocks);
    tcase_add_test(tc, test_feeding_rules);
    suite_add_tcase(s, tc);
    int rc = om_check_run(s);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fixtures);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", fixtures);
    return rc;
}
