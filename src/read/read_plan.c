/* What one read fetches: see include/objmount/read_plan.h. */
#include "objmount/read_plan.h"

#include "objmount/dcache.h"
#include "objmount/util.h"

bool om_read_is_sequential(const struct om_read_state *s, const struct om_read_plan_config *c,
                           uint64_t off)
{
    uint64_t slack = c->part_size;
    if (off == 0 && s->pos == 0)
        return true;
    return off + slack >= s->pos && off <= OM_MAX(s->ahead, s->pos) + slack;
}

bool om_read_frees_behind(const struct om_read_state *s, const struct om_read_plan_config *c,
                          uint64_t off)
{
    return s->size > c->small_file_size && s->seq_run >= OM_READ_STREAMING_RUN &&
           om_read_is_sequential(s, c, off);
}

/* The window grows, and demand and prefetch are chunked alike. */
static void plan_sequential(struct om_read_plan *p, const struct om_read_plan_config *c,
                            uint64_t off, uint64_t end)
{
    struct om_read_state *n = &p->next;
    /* a streaming reader goes on where it stopped; a random one that lands
     * within part_size of its last read does not count */
    if (off == n->pos)
        n->seq_run++;
    /* the window doubles each time the reader has consumed half of it */
    n->streak += end - off;
    if (n->streak >= n->window / 2) {
        n->window = OM_MIN(n->window * 2, c->prefetch_max);
        n->streak = 0;
    }
    uint64_t chunk = OM_MIN(c->part_size, OM_MAX(n->window / 4, OM_READ_MIN_CHUNK));
    uint64_t align = 1;
    if (n->cacheable) { /* whole blocks of the data cache */
        align = OM_DCACHE_BLOCK;
        chunk = OM_MAX(chunk - chunk % OM_DCACHE_BLOCK, OM_DCACHE_BLOCK);
    }
    p->kind = OM_READ_SEQUENTIAL;
    p->demand = (struct om_read_range){.off = off, .end = end, .chunk = chunk, .align = align};
    uint64_t target = OM_MIN(end + n->window, n->size);
    uint64_t from = OM_MAX(end, n->ahead);
    if (from < target)
        p->prefetch =
            (struct om_read_range){.off = from, .end = target, .chunk = chunk, .align = align};
    p->extend_ahead = true;
}

/* Only what is asked, rounded; no prefetch. */
static void plan_random(struct om_read_plan *p, const struct om_read_plan_config *c, uint64_t off,
                        uint64_t end)
{
    struct om_read_state *n = &p->next;
    n->seq_run = 0;
    n->window = c->prefetch_initial;
    n->streak = 0;
    n->ahead = end;
    n->random_reads++;
    p->kind = OM_READ_RANDOM;
    p->cancel_prefetch = true;
    p->cancel_from = end + c->part_size;
    p->demand = (struct om_read_range){
        .off = off,
        .end = end,
        .chunk = end - off,
        .align = n->cacheable ? OM_DCACHE_BLOCK : OM_READ_RANDOM_ALIGN,
    };
    p->consider_fill = n->random_reads % OM_READ_FILL_AFTER == 0;
}

struct om_read_plan om_read_plan_make(const struct om_read_state *s,
                                      const struct om_read_plan_config *c, uint64_t off,
                                      uint64_t len)
{
    struct om_read_plan p = {.next = *s};
    uint64_t end = off + len;
    if (s->size <= c->small_file_size) {
        p.kind = OM_READ_SMALL;
        p.demand = (struct om_read_range){.off = 0, .end = s->size, .chunk = s->size, .align = 1};
    } else if (om_read_is_sequential(s, c, off)) {
        plan_sequential(&p, c, off, end);
    } else {
        plan_random(&p, c, off, end);
    }
    return p;
}
