/* Tar headers (src/shard/shard_tar.c): the input after its first byte is
 * a shard, fed in two pieces split where that byte says, and again as the
 * ranges of headers the parser asks for. Both must end alike (same errno,
 * same members: the data is never needed), and what parses keeps the
 * index's promises: each file's data on a block boundary inside the
 * shard, names normalised, and objmount's own index file reads back the
 * same. */
#include "fuzz.h"
#include "objmount/shard_tar.h"

static const struct om_shard_limits lim = {
    .max_members = 4096, .max_name_bytes = 1 << 20, .max_ext_header = 1 << 16};

static void check_name(const char *n, size_t len)
{
    if (len == 0 || strlen(n) != len || n[0] == '/' || n[len - 1] == '/' || strstr(n, "//"))
        __builtin_trap();
    for (const char *s = n; s;) {
        const char *e = strchr(s, '/');
        size_t seg = e ? (size_t)(e - s) : strlen(s);
        if (seg > OM_SHARD_SEGMENT_MAX || (seg == 1 && s[0] == '.') ||
            (seg == 2 && s[0] == '.' && s[1] == '.'))
            __builtin_trap();
        s = e ? e + 1 : NULL;
    }
}

static void check_index(const struct om_shard_index *ix, size_t len)
{
    for (size_t i = 0; i < ix->n; i++) {
        const struct om_shard_member *m = &ix->members[i];
        check_name(om_shard_member_name(ix, m), m->name_len);
        if (m->type == OM_SHARD_FILE &&
            (m->offset % OM_SHARD_BLOCK || m->offset > len || m->size > len - m->offset))
            __builtin_trap();
        if (m->mtime_nsec >= 1000000000u || m->mode > 07777)
            __builtin_trap();
    }
}

static void same(const struct om_shard_index *a, const struct om_shard_index *b)
{
    if (a->n != b->n || a->listed != b->listed)
        __builtin_trap();
    for (size_t i = 0; i < a->n; i++) {
        const struct om_shard_member *x = &a->members[i], *y = &b->members[i];
        if (x->offset != y->offset || x->size != y->size || x->type != y->type ||
            x->flags != y->flags || x->mtime != y->mtime ||
            strcmp(om_shard_member_name(a, x), om_shard_member_name(b, y)) != 0)
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *tar = data + 1;
    size_t len = size - 1;
    size_t split = len * data[0] / 255;

    struct om_shard_index a, b;
    om_shard_index_init(&a, &lim, len, OM_SHARD_SRC_TAR);
    struct om_tar_parser *p = om_tar_parser_new(&a);
    if (!p)
        return 0;
    int rc = om_tar_parser_feed(p, 0, tar, split);
    if (rc == 0)
        rc = om_tar_parser_feed(p, split, tar + split, len - split);
    if (rc >= 0)
        rc = om_tar_parser_finish(p);
    om_tar_parser_free(p);

    om_shard_index_init(&b, &lim, len, OM_SHARD_SRC_TAR);
    struct om_tar_parser *q = om_tar_parser_new(&b);
    if (!q) {
        om_shard_index_free(&a);
        return 0;
    }
    int rc2 = 0;
    for (int rounds = 0; rc2 == 0; rounds++) {
        uint64_t off, want;
        om_tar_parser_need(q, &off, &want);
        if (off >= len || want == 0 || rounds > 100000)
            break;
        rc2 = om_tar_parser_feed(q, off, tar + off, (size_t)OM_MIN(want, len - off));
    }
    if (rc2 >= 0)
        rc2 = om_tar_parser_finish(q);
    om_tar_parser_free(q);

    if (rc != rc2)
        __builtin_trap(); /* the headers alone decide */
    if (rc == 0) {
        check_index(&a, len);
        same(&a, &b);
        struct om_shard_ident id = {
            .endpoint = "e", .bucket = "b", .key = "k", .etag = "t", .size = len};
        struct om_buf out = {0};
        if (om_shard_index_encode(&a, &id, &out) == 0) {
            struct om_shard_index c;
            char err[256];
            if (om_shard_index_decode(out.data, out.len, &id, &lim, &c, err, sizeof(err)) != 0)
                __builtin_trap(); /* what we write we must read back */
            same(&a, &c);
            om_shard_index_free(&c);
        }
        om_buf_free(&out);
    }
    om_shard_index_free(&a);
    om_shard_index_free(&b);
    return 0;
}
