/* The shard read plan on its own: each case of where a member's read comes
 * from (nothing, the data cache, the stream as it is, a new stream, one
 * ranged GET), and walks of whole shards through a small executor here
 * that counts GETs: in tar order one GET per shard, four workers sharing
 * it, a walk from the middle two, random order one per member, and an
 * index build one per member larger than skip_max. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/shard_plan.h"

#include "check_main.h"

#define KiB 1024ULL
#define MiB (1024 * KiB)

static const struct om_shard_plan_config cfg = {
    .skip_max = 4 * MiB,
    .small_member = 1 * MiB,
    .align = 1,
    .stream_max = 0,
    .stream_after = 2,
};

/* A tar of n members laid out as writers do: a header, the data padded
 * to 512; sizes from size(i); a trailer of two zero blocks and padding. */
static void make_index(struct om_shard_index *ix, uint32_t n, uint64_t (*size)(uint32_t))
{
    uint64_t off = 0, total = 0;
    for (uint32_t i = 0; i < n; i++)
        total += 512 + (size(i) + 511) / 512 * 512;
    om_shard_index_init(ix, NULL, total + 10240, OM_SHARD_SRC_TAR);
    for (uint32_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%06u.jpg", i);
        struct om_shard_entry e = {.name = name,
                                   .name_len = strlen(name),
                                   .offset = off + 512,
                                   .size = size(i),
                                   .type = OM_SHARD_FILE};
        ck_assert_int_eq(om_shard_index_add(ix, &e), 0);
        off += 512 + (size(i) + 511) / 512 * 512;
    }
    ck_assert_int_eq(om_shard_index_finish(ix), 0);
}

static uint64_t image(uint32_t i)
{
    return 100 * KiB + (i * 7919) % (20 * KiB); /* ~110 KB, like the benchmark's images */
}

static uint64_t big(uint32_t i)
{
    return i % 3 == 1 ? 48 * MiB : 2 * MiB; /* videos: every third larger than skip_max */
}

static const struct om_shard_stream no_stream = {0};
static const struct om_shard_reader fresh = {0};

static struct om_shard_read_plan plan(const struct om_shard_index *ix, uint32_t m, uint64_t off,
                                      uint64_t len, const struct om_shard_stream *s,
                                      const struct om_shard_reader *r,
                                      const struct om_shard_plan_config *c)
{
    struct om_shard_read_req q = {.member = m, .off = off, .len = len};
    return om_shard_plan_read(ix, &q, s, r, c);
}

START_TEST(test_nothing_to_fetch)
{
    struct om_shard_index ix;
    make_index(&ix, 4, image);
    struct om_shard_reader r = {.started = true, .last_member = 2, .last_end = 5, .in_order = 3};
    uint64_t size = ix.members[1].size;
    struct om_shard_read_plan p = plan(&ix, 1, size, 4096, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_NONE); /* at the end: 0 bytes, no request */
    ck_assert_mem_eq(&p.next, &r, sizeof(r));
    p = plan(&ix, 1, size + 100, 4096, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_NONE);
    p = plan(&ix, 1, 0, 0, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_NONE);
    p = plan(&ix, 9, 0, 10, &no_stream, &r, &cfg); /* no such member */
    ck_assert_int_eq(p.kind, OM_SHARD_READ_NONE);
    uint64_t a, b;
    ck_assert(!om_shard_plan_span(&ix, 1, size, 1, &a, &b));
    om_shard_index_free(&ix);
    /* a directory has no data */
    om_shard_index_init(&ix, NULL, 1 << 20, OM_SHARD_SRC_TAR);
    struct om_shard_entry d = {.name = "d", .name_len = 1, .offset = 512, .type = OM_SHARD_DIR};
    ck_assert_int_eq(om_shard_index_add(&ix, &d), 0);
    ck_assert_int_eq(om_shard_index_finish(&ix), 0);
    p = plan(&ix, 0, 0, 10, &no_stream, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_NONE);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_reads_are_clipped_to_the_member)
{
    struct om_shard_index ix;
    make_index(&ix, 4, image);
    const struct om_shard_member *m = &ix.members[2];
    uint64_t a, b;
    ck_assert(om_shard_plan_span(&ix, 2, 100, UINT64_MAX, &a, &b));
    ck_assert_uint_eq(a, m->offset + 100);
    ck_assert_uint_eq(b, m->offset + m->size);
    struct om_shard_read_plan p = plan(&ix, 2, m->size - 10, 128 * KiB, &no_stream, &fresh, &cfg);
    ck_assert_uint_eq(p.off, m->offset + m->size - 10);
    ck_assert_uint_eq(p.end, m->offset + m->size);
    ck_assert_uint_le(p.range_end, ix.shard_size);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_first_read_at_the_first_member_opens_the_stream)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    struct om_shard_read_plan p = plan(&ix, 0, 0, 128 * KiB, &no_stream, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, 512);
    ck_assert_uint_eq(p.stream_end, ix.shard_size);
    ck_assert_uint_eq(p.skip, 0);
    ck_assert(p.next.started);
    ck_assert_uint_eq(p.next.in_order, cfg.stream_after);
    /* the first read of another worker, near the start: from the first
     * member on, its own read after a skip */
    p = plan(&ix, 3, 0, 128 * KiB, &no_stream, &fresh, &cfg);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, 512);
    ck_assert_uint_eq(p.skip, ix.members[3].offset - 512);
    /* aligned to the data cache's blocks: from the block before */
    struct om_shard_plan_config c = cfg;
    c.align = 1 * MiB;
    p = plan(&ix, 0, 0, 4096, &no_stream, &fresh, &c);
    ck_assert_uint_eq(p.stream_from, 0);
    ck_assert_uint_eq(p.skip, 512);
    /* a few large ranges instead of one: stream_max */
    c = cfg;
    c.stream_max = 4 * KiB;
    p = plan(&ix, 3, 0, 4096, &no_stream, &fresh, &c);
    ck_assert_uint_eq(p.stream_from, 512);
    ck_assert_uint_eq(p.stream_end, p.end); /* at least to the read's end */
    c.stream_max = 1 * MiB;
    struct om_shard_reader r = {.started = true,
                                .last_member = 1,
                                .last_end = ix.members[1].offset + ix.members[1].size,
                                .in_order = 1};
    p = plan(&ix, 2, 0, 4096, &no_stream, &r, &c);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, ix.members[2].offset);
    ck_assert_uint_eq(p.stream_end, p.stream_from + 1 * MiB);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_random_reads_get_exact_ranges)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    /* a first read in the middle: the member, whole (a loader reads it all) */
    const struct om_shard_member *m = &ix.members[60];
    struct om_shard_read_plan p = plan(&ix, 60, 0, 4096, &no_stream, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    ck_assert_uint_eq(p.range_off, m->offset);
    ck_assert_uint_eq(p.range_end, m->offset + m->size);
    ck_assert_uint_eq(p.off, m->offset);
    ck_assert_uint_eq(p.end, m->offset + 4096);
    ck_assert_uint_eq(p.next.in_order, 1);
    /* a member larger than small_member: what is asked */
    struct om_shard_plan_config c = cfg;
    c.small_member = 64 * KiB;
    p = plan(&ix, 60, 8192, 4096, &no_stream, &fresh, &c);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    ck_assert_uint_eq(p.range_off, m->offset + 8192);
    ck_assert_uint_eq(p.range_end, m->offset + 8192 + 4096);
    /* rounded to 64 KiB, and to the data cache's blocks, within the shard */
    c.align = 64 * KiB;
    p = plan(&ix, 60, 8192, 4096, &no_stream, &fresh, &c);
    ck_assert_uint_eq(p.range_off % (64 * KiB), 0);
    ck_assert_uint_eq(p.range_end % (64 * KiB), 0);
    ck_assert_uint_le(p.range_off, p.off);
    ck_assert_uint_ge(p.range_end, p.end);
    c.align = 1 * MiB;
    p = plan(&ix, 99, 0, 4096, &no_stream, &fresh, &c);
    ck_assert_uint_eq(p.range_off % MiB, 0);
    ck_assert_uint_le(p.range_end, ix.shard_size); /* not past the shard */
    ck_assert(p.range_end == ix.shard_size || p.range_end % MiB == 0);
    ck_assert_uint_ge(p.range_end, ix.members[99].offset + ix.members[99].size);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_reads_within_one_member_do_not_make_a_walk)
{
    struct om_shard_index ix;
    make_index(&ix, 100, big);
    /* a 48 MiB member read in 128 KiB pieces by a random reader */
    struct om_shard_reader r = fresh;
    struct om_shard_plan_config c = cfg;
    c.small_member = 0;
    for (uint64_t off = 0; off < 8 * MiB; off += 128 * KiB) {
        struct om_shard_read_plan p = plan(&ix, 40, off, 128 * KiB, &no_stream, &r, &c);
        ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
        ck_assert_uint_eq(p.range_end - p.range_off, 128 * KiB);
        r = p.next;
        ck_assert_uint_eq(r.in_order, 1);
    }
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_second_member_in_order_opens_the_stream)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    struct om_shard_read_plan p = plan(&ix, 50, 0, 200 * KiB, &no_stream, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    p = plan(&ix, 51, 0, 200 * KiB, &no_stream, &p.next, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, ix.members[51].offset);
    /* skipping a few members still walks; going back does not */
    struct om_shard_reader r = {.started = true,
                                .last_member = 10,
                                .last_end = ix.members[10].offset + ix.members[10].size,
                                .in_order = 1};
    p = plan(&ix, 14, 0, 4096, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    p = plan(&ix, 9, 0, 4096, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    ck_assert_uint_eq(p.next.in_order, 1);
    /* nor does a jump past skip_max */
    p = plan(&ix, 60, 0, 4096, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    /* an order hint opens one at once */
    struct om_shard_read_req q = {.member = 70, .off = 0, .len = 4096, .hinted = true};
    p = om_shard_plan_read(&ix, &q, &no_stream, &r, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_the_stream_serves_what_it_holds_or_reaches)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    uint64_t base = ix.members[20].offset;
    struct om_shard_stream s = {
        .active = true, .pos = base, .end = ix.shard_size, .kept_from = ix.members[10].offset};
    /* behind it but still in memory: from it, no skip, whoever asks */
    struct om_shard_read_plan p = plan(&ix, 12, 0, 4096, &s, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(!p.open_stream);
    ck_assert_uint_eq(p.skip, 0);
    /* at its position */
    p = plan(&ix, 20, 0, 4096, &s, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert_uint_eq(p.skip, 0);
    /* ahead within skip_max: dropped on the way */
    p = plan(&ix, 25, 100, 4096, &s, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(!p.open_stream);
    ck_assert_uint_eq(p.skip, ix.members[25].offset + 100 - base);
    /* past it: a random reader gets a range, a walker moves the stream */
    p = plan(&ix, 90, 0, 4096, &s, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    struct om_shard_reader walker = {.started = true,
                                     .last_member = 89,
                                     .last_end = ix.members[89].offset + ix.members[89].size,
                                     .in_order = 5};
    p = plan(&ix, 90, 0, 4096, &s, &walker, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, ix.members[90].offset);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_a_reader_behind_the_stream_does_not_pull_it_back)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    struct om_shard_stream s = {.active = true,
                                .pos = ix.members[80].offset,
                                .end = ix.shard_size,
                                .kept_from = ix.members[60].offset};
    struct om_shard_reader slow = {.started = true,
                                   .last_member = 29,
                                   .last_end = ix.members[29].offset + ix.members[29].size,
                                   .in_order = 30};
    struct om_shard_read_plan p = plan(&ix, 30, 0, 200 * KiB, &s, &slow, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    ck_assert(!p.open_stream);
    /* once the stream has ended, the walker may open its own */
    s.pos = s.end;
    p = plan(&ix, 30, 0, 200 * KiB, &s, &slow, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_a_read_past_the_streams_range_moves_on)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    struct om_shard_plan_config c = cfg;
    c.stream_max = 2 * MiB;
    uint64_t a = ix.members[18].offset;
    struct om_shard_stream s = {.active = true, .pos = a - 1000, .end = a + 1000, .kept_from = 0};
    struct om_shard_reader walker = {.started = true,
                                     .last_member = 17,
                                     .last_end = ix.members[17].offset + ix.members[17].size,
                                     .in_order = 17};
    struct om_shard_read_plan p = plan(&ix, 18, 0, 200 * KiB, &s, &walker, &c);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_STREAM);
    ck_assert(p.open_stream);
    ck_assert_uint_eq(p.stream_from, a);
    ck_assert_uint_ge(p.stream_end, p.end);
    ck_assert_uint_le(p.stream_end, a + 2 * MiB);
    /* a random reader there gets its range */
    struct om_shard_reader rnd = {
        .started = true, .last_member = 90, .last_end = ix.members[90].offset, .in_order = 1};
    p = plan(&ix, 18, 0, 200 * KiB, &s, &rnd, &c);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_RANGE);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_cached_reads_cost_no_request)
{
    struct om_shard_index ix;
    make_index(&ix, 100, image);
    struct om_shard_read_req q = {.member = 0, .off = 0, .len = 4096, .cached = true};
    struct om_shard_read_plan p = om_shard_plan_read(&ix, &q, &no_stream, &fresh, &cfg);
    ck_assert_int_eq(p.kind, OM_SHARD_READ_CACHE);
    ck_assert(!p.open_stream);
    ck_assert_uint_eq(p.next.in_order, cfg.stream_after); /* the walk is still counted */
    om_shard_index_free(&ix);
}
END_TEST

/* ---- walks through an executor ---- */

struct sim {
    struct om_shard_stream s;
    uint64_t keep; /* bytes behind its position the stream keeps in memory */
    unsigned gets, streams, ranges;
    uint64_t bytes; /* fetched */
};

static void run(struct sim *x, const struct om_shard_read_plan *p)
{
    switch (p->kind) {
    case OM_SHARD_READ_NONE:
    case OM_SHARD_READ_CACHE:
        return;
    case OM_SHARD_READ_RANGE:
        x->gets++;
        x->ranges++;
        x->bytes += p->range_end - p->range_off;
        return;
    case OM_SHARD_READ_STREAM:
        if (p->open_stream) {
            if (x->s.active)
                x->bytes += 0; /* what the old one read was counted as it went */
            x->s = (struct om_shard_stream){.active = true,
                                            .pos = p->stream_from,
                                            .end = p->stream_end,
                                            .kept_from = p->stream_from};
            x->gets++;
            x->streams++;
        }
        if (x->s.pos < p->end) {
            x->bytes += p->end - x->s.pos;
            x->s.pos = p->end;
        }
        if (x->s.pos > x->keep && x->s.pos - x->keep > x->s.kept_from)
            x->s.kept_from = x->s.pos - x->keep;
        return;
    }
}

/* Read member m whole in 128 KiB pieces as the kernel asks. */
static void read_member(struct sim *x, const struct om_shard_index *ix, uint32_t m,
                        struct om_shard_reader *r, const struct om_shard_plan_config *c)
{
    uint64_t size = ix->members[m].size;
    for (uint64_t off = 0; off < size; off += 128 * KiB) {
        struct om_shard_read_plan p = plan(ix, m, off, 128 * KiB, &x->s, r, c);
        ck_assert_int_ne(p.kind, OM_SHARD_READ_NONE);
        run(x, &p);
        *r = p.next;
    }
}

START_TEST(test_a_walk_in_tar_order_is_one_get)
{
    struct om_shard_index ix;
    make_index(&ix, 2000, image); /* ~220 MB */
    struct sim x = {.keep = 64 * MiB};
    struct om_shard_reader r = fresh;
    for (uint32_t m = 0; m < ix.n; m++)
        read_member(&x, &ix, m, &r, &cfg);
    ck_assert_uint_eq(x.gets, 1);
    ck_assert_uint_le(x.bytes, ix.shard_size);
    printf("in order: 2000 members, %u GET, %.4f GETs per member\n", x.gets, x.gets / 2000.0);
    /* in stream_max pieces: a few large ranges */
    struct om_shard_plan_config c = cfg;
    c.stream_max = 64 * MiB;
    x = (struct sim){.keep = 64 * MiB};
    r = fresh;
    for (uint32_t m = 0; m < ix.n; m++)
        read_member(&x, &ix, m, &r, &c);
    ck_assert_uint_eq(x.gets, (unsigned)((ix.shard_size + 64 * MiB - 1) / (64 * MiB)));
    ck_assert_uint_eq(x.ranges, 0);
    /* from the middle: two */
    x = (struct sim){.keep = 64 * MiB};
    r = fresh;
    for (uint32_t m = 1000; m < ix.n; m++)
        read_member(&x, &ix, m, &r, &cfg);
    ck_assert_uint_eq(x.gets, 2);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_four_workers_share_one_stream)
{
    struct om_shard_index ix;
    make_index(&ix, 2000, image);
    struct sim x = {.keep = 64 * MiB};
    struct om_shard_reader r[4] = {fresh, fresh, fresh, fresh};
    uint32_t next[4] = {0, 1, 2, 3};
    uint64_t seed = 12345;
    unsigned done = 0;
    while (done < 4) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        unsigned w = (unsigned)(seed >> 33) % 4;
        if (next[w] >= ix.n)
            continue;
        read_member(&x, &ix, next[w], &r[w], &cfg);
        next[w] += 4;
        if (next[w] >= ix.n)
            done++;
    }
    printf("four workers: %u GETs for 2000 members\n", x.gets);
    ck_assert_uint_le(x.gets, 2);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_random_order_is_one_range_per_member)
{
    struct om_shard_index ix;
    make_index(&ix, 2000, image);
    uint32_t order[2000];
    for (uint32_t i = 0; i < 2000; i++)
        order[i] = i;
    uint64_t seed = 99;
    for (uint32_t i = 1999; i > 0; i--) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t j = (uint32_t)((seed >> 33) % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    struct sim x = {.keep = 64 * MiB};
    struct om_shard_reader r = fresh;
    for (uint32_t i = 0; i < 2000; i++)
        read_member(&x, &ix, order[i], &r, &cfg);
    fprintf(stderr,
            "random order: %u GETs (%u ranges, %u streams) for 2000 members, %.2fx the bytes\n",
            x.gets, x.ranges, x.streams, (double)x.bytes / (double)ix.shard_size);
    /* exact ranges, but for the streams opened by chance, which serve the
     * reads that land on their way: never more GETs than members, and
     * about the bytes of the shard */
    ck_assert_uint_le(x.gets, 2000);
    ck_assert_uint_ge(x.ranges, 1700);
    ck_assert_uint_le(x.streams, 2000 / 20);
    ck_assert_uint_le(x.bytes, ix.shard_size + ix.shard_size / 10);
    om_shard_index_free(&ix);
}
END_TEST

START_TEST(test_index_build_reads_on_or_hops)
{
    struct om_shard_plan_config c = cfg;
    struct om_shard_scan sc = om_shard_plan_scan(false, 0, 0, 1 << 30, &c);
    ck_assert(sc.reopen);
    ck_assert_uint_eq(sc.from, 0);
    ck_assert_uint_eq(sc.end, 1 << 30);
    sc = om_shard_plan_scan(true, 1000, 1000 + 4 * MiB, 1 << 30, &c);
    ck_assert(!sc.reopen);
    sc = om_shard_plan_scan(true, 1000, 1000 + 4 * MiB + 1, 1 << 30, &c);
    ck_assert(sc.reopen);
    ck_assert_uint_eq(sc.from, 1000 + 4 * MiB + 1);
    sc = om_shard_plan_scan(true, 5000, 4096, 1 << 30, &c); /* behind: cannot go back */
    ck_assert(sc.reopen);
    c.align = MiB;
    c.stream_max = 64 * MiB;
    sc = om_shard_plan_scan(false, 0, 3 * MiB + 512, 1 << 30, &c);
    ck_assert_uint_eq(sc.from, 3 * MiB);
    ck_assert_uint_eq(sc.end, 67 * MiB);

    /* whole shards: each header after the previous member's data */
    struct om_shard_index ix;
    uint64_t (*sizes[])(uint32_t) = {image, big};
    unsigned want[] = {1, 1 + 33}; /* one GET, plus one per 48 MiB member */
    for (int k = 0; k < 2; k++) {
        make_index(&ix, 100, sizes[k]);
        bool active = false;
        uint64_t pos = 0;
        unsigned gets = 0;
        for (uint32_t m = 0; m <= ix.n; m++) {
            uint64_t need =
                m < ix.n ? ix.members[m].offset - 512
                         : ix.members[m - 1].offset + (ix.members[m - 1].size + 511) / 512 * 512;
            sc = om_shard_plan_scan(active, pos, need, ix.shard_size, &cfg);
            if (sc.reopen) {
                gets++;
                active = true;
                pos = sc.from;
            }
            pos = need + 512; /* the header is read */
        }
        ck_assert_uint_eq(gets, want[k]);
        om_shard_index_free(&ix);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shard_plan");
    TCase *tc = tcase_create("plan");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_nothing_to_fetch);
    tcase_add_test(tc, test_reads_are_clipped_to_the_member);
    tcase_add_test(tc, test_first_read_at_the_first_member_opens_the_stream);
    tcase_add_test(tc, test_random_reads_get_exact_ranges);
    tcase_add_test(tc, test_reads_within_one_member_do_not_make_a_walk);
    tcase_add_test(tc, test_second_member_in_order_opens_the_stream);
    tcase_add_test(tc, test_the_stream_serves_what_it_holds_or_reaches);
    tcase_add_test(tc, test_a_reader_behind_the_stream_does_not_pull_it_back);
    tcase_add_test(tc, test_a_read_past_the_streams_range_moves_on);
    tcase_add_test(tc, test_cached_reads_cost_no_request);
    tcase_add_test(tc, test_a_walk_in_tar_order_is_one_get);
    tcase_add_test(tc, test_four_workers_share_one_stream);
    tcase_add_test(tc, test_random_order_is_one_range_per_member);
    tcase_add_test(tc, test_index_build_reads_on_or_hops);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
