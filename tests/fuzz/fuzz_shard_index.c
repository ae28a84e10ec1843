/* Index readers (src/shard/shard_index.c, shard_wds.c): the first byte
 * picks one, the rest is its input: objmount's own index file (without
 * its checksum and identity, so that the fuzzer reaches the members),
 * DALI's wds2idx text, or wids' pickle, for a shard of 1 MiB. Each ends in
 * an error or an index that keeps its promises: every file inside the
 * shard on a block boundary, those of index objects in tar order with room
 * for their headers; and what reads writes and reads back the same. */
#include "fuzz.h"
#include "objmount/shard_wds.h"

#define SHARD (1 << 20)

static const struct om_shard_limits lim = {
    .max_members = 4096, .max_name_bytes = 1 << 20, .max_ext_header = 1 << 16};

static void check(const struct om_shard_index *ix, bool external)
{
    uint64_t prev_end = 0;
    for (size_t i = 0; i < ix->n; i++) {
        const struct om_shard_member *m = &ix->members[i];
        if (m->name_len == 0 || strlen(om_shard_member_name(ix, m)) != m->name_len)
            __builtin_trap();
        if (m->type != OM_SHARD_FILE)
            continue;
        if (m->offset % OM_SHARD_BLOCK || m->offset > ix->shard_size ||
            m->size > ix->shard_size - m->offset)
            __builtin_trap();
        if (external) {
            if (m->offset < (prev_end + 511) / 512 * 512 + 512)
                __builtin_trap();
            prev_end = m->offset + m->size;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    struct om_shard_index ix;
    char err[256];
    int rc;
    switch (data[0] % 3) {
    case 0:
        rc = om_shard_index_decode_flags(in, len, NULL, &lim,
                                         OM_SHARD_DECODE_NO_CHECKSUM | OM_SHARD_DECODE_NO_IDENT,
                                         &ix, err, sizeof(err));
        break;
    case 1:
        rc = om_shard_wds_dali((const char *)in, len, SHARD, &lim, &ix, err, sizeof(err));
        break;
    default:
        rc = om_shard_wds_wids(in, len, SHARD, &lim, &ix, err, sizeof(err));
    }
    if (rc != 0)
        return 0;
    check(&ix, data[0] % 3 != 0);
    struct om_shard_ident id = {
        .endpoint = "e", .bucket = "b", .key = "k", .etag = "t", .size = ix.shard_size};
    struct om_buf out = {0};
    if (om_shard_index_encode(&ix, &id, &out) == 0) {
        struct om_shard_index back;
        if (om_shard_index_decode(out.data, out.len, &id, &lim, &back, err, sizeof(err)) != 0 ||
            back.n != ix.n || back.listed != ix.listed)
            __builtin_trap(); /* what we write we must read back */
        om_shard_index_free(&back);
    }
    om_buf_free(&out);
    om_shard_index_free(&ix);
    return 0;
}
