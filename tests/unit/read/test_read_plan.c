/* The read plan on its own: what one read of an open object fetches
 * (small objects whole, a sequential window that grows, random reads
 * aligned and without prefetch, whole blocks with the data cache) and how
 * the reader's numbers move. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "objmount/dcache.h"
#include "objmount/read_plan.h"

#include "check_main.h"

#define KiB 1024ULL
#define MiB (1024 * KiB)

static const struct om_read_plan_config cfg = {
    .small_file_size = 1 * MiB,
    .part_size = 8 * MiB,
    .prefetch_initial = 1 * MiB,
    .prefetch_max = 64 * MiB,
};

static struct om_read_state fresh(uint64_t size, bool cacheable)
{
    return (struct om_read_state){
        .size = size, .cacheable = cacheable, .window = cfg.prefetch_initial};
}

/* Read [off, off+len) as reader.c does: plan, take the new numbers, and
 * (every range covered in full) move the frontier and the position. */
static struct om_read_plan read_at(struct om_read_state *s, const struct om_read_plan_config *c,
                                   uint64_t off, uint64_t len)
{
    struct om_read_plan p = om_read_plan_make(s, c, off, len);
    *s = p.next;
    if (p.extend_ahead) {
        uint64_t covered = p.prefetch.end > p.prefetch.off ? p.prefetch.end : off + len;
        if (covered > s->ahead)
            s->ahead = covered;
    }
    s->pos = off + len;
    return p;
}

static void assert_no_prefetch(const struct om_read_plan *p)
{
    ck_assert_uint_ge(p->prefetch.off, p->prefetch.end);
}

START_TEST(test_small_file_is_one_whole_range)
{
    struct om_read_state s = fresh(700 * KiB, false);
    s.seq_run = 2;
    s.random_reads = 3;
    struct om_read_plan p = om_read_plan_make(&s, &cfg, 300 * KiB, 4 * KiB);
    ck_assert_int_eq(p.kind, OM_READ_SMALL);
    ck_assert_uint_eq(p.demand.off, 0);
    ck_assert_uint_eq(p.demand.end, 700 * KiB);
    ck_assert_uint_eq(p.demand.chunk, 700 * KiB);
    ck_assert_uint_eq(p.demand.align, 1);
    assert_no_prefetch(&p);
    ck_assert(!p.cancel_prefetch && !p.consider_fill && !p.extend_ahead);
    /* the numbers do not move */
    ck_assert_uint_eq(p.next.window, s.window);
    ck_assert_uint_eq(p.next.seq_run, 2);
    ck_assert_uint_eq(p.next.random_reads, 3);
    /* the same with the data cache: still one range, as is */
    s.cacheable = true;
    p = om_read_plan_make(&s, &cfg, 0, 1);
    ck_assert_uint_eq(p.demand.end, 700 * KiB);
    ck_assert_uint_eq(p.demand.align, 1);
}
END_TEST

START_TEST(test_sequential_window_doubles_after_half_up_to_max)
{
    struct om_read_state s = fresh(1024 * MiB, false);
    uint64_t off = 0, len = 128 * KiB, window = s.window, streak = 0;
    int growths = 0;
    while (off < 512 * MiB) {
        struct om_read_plan p = read_at(&s, &cfg, off, len);
        ck_assert_int_eq(p.kind, OM_READ_SEQUENTIAL);
        streak += len;
        if (streak >= window / 2) {
            uint64_t grown = window * 2 < cfg.prefetch_max ? window * 2 : cfg.prefetch_max;
            growths += grown != window;
            window = grown;
            streak = 0;
        }
        ck_assert_uint_eq(s.window, window);
        ck_assert_uint_eq(s.streak, streak);
        /* demand is the request; prefetch runs window bytes past it */
        ck_assert_uint_eq(p.demand.off, off);
        ck_assert_uint_eq(p.demand.end, off + len);
        ck_assert_uint_eq(p.demand.align, 1);
        ck_assert_uint_le(p.prefetch.end, off + len + window);
        ck_assert(p.extend_ahead && !p.cancel_prefetch && !p.consider_fill);
        /* chunks: a quarter of the window, 256 KiB to part_size */
        uint64_t chunk = window / 4;
        chunk = chunk < OM_READ_MIN_CHUNK ? OM_READ_MIN_CHUNK : chunk;
        chunk = chunk > cfg.part_size ? cfg.part_size : chunk;
        ck_assert_uint_eq(p.demand.chunk, chunk);
        ck_assert_uint_eq(p.prefetch.chunk, chunk);
        ck_assert_uint_le(p.demand.chunk, cfg.part_size);
        off += len;
    }
    ck_assert_uint_eq(s.window, cfg.prefetch_max);
    ck_assert_int_eq(growths, 6); /* 1 MiB to 64 MiB */
    ck_assert_uint_eq(s.seq_run, 512 * MiB / len);
}
END_TEST

/* The first read doubles the window once it is half consumed: here at
 * the fourth 128 KiB read of a 1 MiB window. */
START_TEST(test_sequential_first_doubling_and_prefetch_range)
{
    struct om_read_state s = fresh(100 * MiB, false);
    struct om_read_plan p;
    for (int i = 0; i < 3; i++) {
        p = read_at(&s, &cfg, (uint64_t)i * 128 * KiB, 128 * KiB);
        ck_assert_uint_eq(s.window, 1 * MiB);
    }
    /* the first read prefetched [128 KiB, 1 MiB + 128 KiB); later ones
     * start at the frontier: the third [1 MiB + 256 KiB, 1 MiB + 384 KiB) */
    ck_assert_uint_eq(p.prefetch.off, 1 * MiB + 256 * KiB);
    ck_assert_uint_eq(p.prefetch.end, 1 * MiB + 384 * KiB);
    p = read_at(&s, &cfg, 384 * KiB, 128 * KiB);
    ck_assert_uint_eq(s.window, 2 * MiB);
    ck_assert_uint_eq(s.streak, 0);
    ck_assert_uint_eq(p.prefetch.end, 512 * KiB + 2 * MiB);
    /* the prefetch stops at the object's end */
    s = fresh(2 * MiB, false);
    p = read_at(&s, &cfg, 0, 128 * KiB);
    ck_assert_uint_eq(p.prefetch.off, 128 * KiB);
    ck_assert_uint_eq(p.prefetch.end, 1 * MiB + 128 * KiB);
    s.window = 64 * MiB;
    p = read_at(&s, &cfg, 128 * KiB, 128 * KiB);
    ck_assert_uint_eq(p.prefetch.end, 2 * MiB);
    p = read_at(&s, &cfg, 2 * MiB - 128 * KiB, 128 * KiB);
    assert_no_prefetch(&p); /* everything up to the end was asked for */
}
END_TEST

START_TEST(test_chunk_is_bounded_by_part_size)
{
    struct om_read_plan_config c = cfg;
    c.part_size = 1 * MiB;
    struct om_read_state s = fresh(1024 * MiB, false);
    s.window = 64 * MiB;
    struct om_read_plan p = read_at(&s, &c, 0, 128 * KiB);
    ck_assert_uint_eq(p.demand.chunk, 1 * MiB);
    ck_assert_uint_eq(p.prefetch.chunk, 1 * MiB);
}
END_TEST

START_TEST(test_random_read_is_one_aligned_range_and_resets_the_window)
{
    struct om_read_state s = fresh(1024 * MiB, false);
    for (uint64_t off = 0; off < 32 * MiB; off += 1 * MiB)
        read_at(&s, &cfg, off, 1 * MiB);
    ck_assert_uint_gt(s.window, cfg.prefetch_initial);
    ck_assert_uint_gt(s.seq_run, 0);
    uint64_t off = 500 * MiB + 12345;
    struct om_read_plan p = read_at(&s, &cfg, off, 4 * KiB);
    ck_assert_int_eq(p.kind, OM_READ_RANDOM);
    ck_assert_uint_eq(p.demand.off, off);
    ck_assert_uint_eq(p.demand.end, off + 4 * KiB);
    ck_assert_uint_eq(p.demand.chunk, 4 * KiB);
    ck_assert_uint_eq(p.demand.align, OM_READ_RANDOM_ALIGN);
    assert_no_prefetch(&p);
    ck_assert(p.cancel_prefetch && !p.extend_ahead);
    ck_assert_uint_eq(p.cancel_from, off + 4 * KiB + cfg.part_size);
    ck_assert_uint_eq(s.window, cfg.prefetch_initial);
    ck_assert_uint_eq(s.streak, 0);
    ck_assert_uint_eq(s.ahead, off + 4 * KiB);
    ck_assert_uint_eq(s.seq_run, 0);
    ck_assert_uint_eq(s.random_reads, 1);
    /* backwards by more than a part is random too */
    p = read_at(&s, &cfg, 100 * MiB, 4 * KiB);
    ck_assert_int_eq(p.kind, OM_READ_RANDOM);
}
END_TEST

START_TEST(test_data_cache_ranges_are_whole_blocks)
{
    struct om_read_state s = fresh(1024 * MiB, true);
    struct om_read_plan p = read_at(&s, &cfg, 0, 128 * KiB);
    ck_assert_int_eq(p.kind, OM_READ_SEQUENTIAL);
    /* a 1 MiB window would give 256 KiB chunks: one block instead */
    ck_assert_uint_eq(p.demand.align, OM_DCACHE_BLOCK);
    ck_assert_uint_eq(p.demand.chunk, OM_DCACHE_BLOCK);
    ck_assert_uint_eq(p.prefetch.align, OM_DCACHE_BLOCK);
    ck_assert_uint_eq(p.prefetch.chunk, OM_DCACHE_BLOCK);
    /* a window of 22 MiB gives 5.5 MiB: rounded down to 5 blocks */
    s.window = 22 * MiB;
    s.streak = 0;
    p = read_at(&s, &cfg, 128 * KiB, 128 * KiB);
    ck_assert_uint_eq(p.demand.chunk, 5 * OM_DCACHE_BLOCK);
    ck_assert_uint_eq(p.prefetch.chunk % OM_DCACHE_BLOCK, 0);
    /* random: aligned to blocks */
    p = read_at(&s, &cfg, 700 * MiB + 5, 4 * KiB);
    ck_assert_int_eq(p.kind, OM_READ_RANDOM);
    ck_assert_uint_eq(p.demand.align, OM_DCACHE_BLOCK);
    ck_assert_uint_eq(p.demand.chunk, 4 * KiB);
    assert_no_prefetch(&p);
}
END_TEST

START_TEST(test_seq_run_and_random_reads_count)
{
    struct om_read_state s = fresh(1024 * MiB, false);
    for (int i = 0; i < 5; i++)
        read_at(&s, &cfg, (uint64_t)i * 64 * KiB, 64 * KiB);
    ck_assert_uint_eq(s.seq_run, 5);
    ck_assert_uint_eq(s.random_reads, 0);
    read_at(&s, &cfg, 600 * MiB, 64 * KiB);
    ck_assert_uint_eq(s.seq_run, 0);
    ck_assert_uint_eq(s.random_reads, 1);
    /* reading on from there is sequential again; random_reads stays */
    read_at(&s, &cfg, 600 * MiB + 64 * KiB, 64 * KiB);
    read_at(&s, &cfg, 600 * MiB + 128 * KiB, 64 * KiB);
    ck_assert_uint_eq(s.seq_run, 2);
    ck_assert_uint_eq(s.random_reads, 1);
    read_at(&s, &cfg, 10 * MiB, 64 * KiB);
    read_at(&s, &cfg, 300 * MiB, 64 * KiB);
    ck_assert_uint_eq(s.seq_run, 0);
    ck_assert_uint_eq(s.random_reads, 3);
    /* near the last read but not where it ended: sequential, yet no run */
    for (int i = 0; i < 6; i++)
        read_at(&s, &cfg, 300 * MiB + (uint64_t)(i % 2 ? 3 : 1) * MiB, 4 * KiB);
    ck_assert_uint_eq(s.seq_run, 0);
    ck_assert(!om_read_frees_behind(&s, &cfg, 300 * MiB + 2 * MiB));
}
END_TEST

START_TEST(test_fill_is_considered_every_fill_after_random_reads)
{
    struct om_read_state s = fresh(1024 * MiB, true);
    int considered = 0;
    for (unsigned i = 1; i <= 3 * OM_READ_FILL_AFTER; i++) {
        /* far apart, alternating ends: every read is random */
        uint64_t off = (i % 2 ? 900 * MiB : 100 * MiB) + i * 64 * KiB;
        struct om_read_plan p = read_at(&s, &cfg, off, 4 * KiB);
        ck_assert_int_eq(p.kind, OM_READ_RANDOM);
        ck_assert_int_eq(p.consider_fill, i % OM_READ_FILL_AFTER == 0);
        considered += p.consider_fill;
        /* a sequential read in between does not count */
        p = read_at(&s, &cfg, off + 4 * KiB, 4 * KiB);
        ck_assert_int_eq(p.kind, OM_READ_SEQUENTIAL);
        ck_assert(!p.consider_fill);
    }
    ck_assert_int_eq(considered, 3);
    ck_assert_uint_eq(s.random_reads, 3 * OM_READ_FILL_AFTER);
}
END_TEST

START_TEST(test_sequential_means_near_the_last_read_or_the_frontier)
{
    struct om_read_state s = fresh(1024 * MiB, false);
    ck_assert(om_read_is_sequential(&s, &cfg, 0)); /* the first read at 0 */
    ck_assert(om_read_is_sequential(&s, &cfg, cfg.part_size));
    ck_assert(!om_read_is_sequential(&s, &cfg, cfg.part_size + 1));
    s.pos = 100 * MiB;
    s.ahead = 120 * MiB;
    ck_assert(om_read_is_sequential(&s, &cfg, 100 * MiB - cfg.part_size));
    ck_assert(!om_read_is_sequential(&s, &cfg, 100 * MiB - cfg.part_size - 1));
    ck_assert(om_read_is_sequential(&s, &cfg, 120 * MiB + cfg.part_size));
    ck_assert(!om_read_is_sequential(&s, &cfg, 120 * MiB + cfg.part_size + 1));
    ck_assert(!om_read_is_sequential(&s, &cfg, 0));
}
END_TEST

START_TEST(test_only_a_streaming_reader_frees_behind)
{
    struct om_read_state s = fresh(1024 * MiB, false);
    s.pos = 100 * MiB;
    s.ahead = 110 * MiB;
    s.seq_run = OM_READ_STREAMING_RUN - 1;
    ck_assert(!om_read_frees_behind(&s, &cfg, 100 * MiB));
    s.seq_run = OM_READ_STREAMING_RUN;
    ck_assert(om_read_frees_behind(&s, &cfg, 100 * MiB));
    ck_assert(!om_read_frees_behind(&s, &cfg, 500 * MiB)); /* this read is random */
    s.size = cfg.small_file_size;
    ck_assert(!om_read_frees_behind(&s, &cfg, 100 * KiB));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("read_plan");
    TCase *tc = tcase_create("read_plan");
    tcase_add_test(tc, test_small_file_is_one_whole_range);
    tcase_add_test(tc, test_sequential_window_doubles_after_half_up_to_max);
    tcase_add_test(tc, test_sequential_first_doubling_and_prefetch_range);
    tcase_add_test(tc, test_chunk_is_bounded_by_part_size);
    tcase_add_test(tc, test_random_read_is_one_aligned_range_and_resets_the_window);
    tcase_add_test(tc, test_data_cache_ranges_are_whole_blocks);
    tcase_add_test(tc, test_seq_run_and_random_reads_count);
    tcase_add_test(tc, test_fill_is_considered_every_fill_after_random_reads);
    tcase_add_test(tc, test_sequential_means_near_the_last_read_or_the_frontier);
    tcase_add_test(tc, test_only_a_streaming_reader_frees_behind);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
