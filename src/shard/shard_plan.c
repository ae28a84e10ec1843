/* Where a read of a shard's member comes from: see
 * include/objmount/shard_plan.h. */
#include "objmount/shard_plan.h"

static uint64_t align_down(uint64_t v, uint64_t a)
{
    return a > 1 ? v - v % a : v;
}

/* v rounded up to a multiple of a, at most cap. */
static uint64_t align_up(uint64_t v, uint64_t a, uint64_t cap)
{
    if (a > 1 && v % a) {
        uint64_t up = v - v % a;
        v = up > cap - a ? cap : up + a;
    }
    return OM_MIN(v, cap);
}

bool om_shard_plan_span(const struct om_shard_index *ix, uint32_t member, uint64_t off,
                        uint64_t len, uint64_t *span_off, uint64_t *span_end)
{
    if (member >= ix->n)
        return false;
    const struct om_shard_member *m = &ix->members[member];
    if (m->type != OM_SHARD_FILE || len == 0 || off >= m->size)
        return false;
    *span_off = m->offset + off;
    *span_end = m->offset + (len > m->size - off ? m->size : off + len);
    return true;
}

/* A stream GET from start (aligned down) for a read of [a, b). */
static void open_stream(struct om_shard_read_plan *p, const struct om_shard_index *ix,
                        const struct om_shard_plan_config *c, uint64_t start, uint64_t a,
                        uint64_t b)
{
    uint64_t from = align_down(start, c->align);
    uint64_t end = ix->shard_size;
    if (c->stream_max && c->stream_max < end - from)
        end = align_up(from + c->stream_max, c->align, ix->shard_size);
    end = OM_MAX(end, align_up(b, c->align, ix->shard_size));
    p->kind = OM_SHARD_READ_STREAM;
    p->open_stream = true;
    p->stream_from = from;
    p->stream_end = end;
    p->skip = a - from;
}

struct om_shard_read_plan om_shard_plan_read(const struct om_shard_index *ix,
                                             const struct om_shard_read_req *q,
                                             const struct om_shard_stream *s,
                                             const struct om_shard_reader *r,
                                             const struct om_shard_plan_config *c)
{
    struct om_shard_read_plan p = {.kind = OM_SHARD_READ_NONE, .next = *r};
    uint64_t a, b;
    if (!om_shard_plan_span(ix, q->member, q->off, q->len, &a, &b))
        return p;
    p.off = a;
    p.end = b;
    /* members in tar order: each at most skip_max after where the last
     * read ended; reads within one member leave the count alone */
    unsigned run = OM_MAX(c->stream_after, 1u);
    if (!r->started)
        p.next.in_order = a <= ix->first_data + c->skip_max ? run : 1;
    else if (q->member != r->last_member)
        p.next.in_order = a >= r->last_end && a - r->last_end <= c->skip_max ? r->in_order + 1 : 1;
    p.next.started = true;
    p.next.last_member = q->member;
    p.next.last_end = b;
    if (q->cached) {
        p.kind = OM_SHARD_READ_CACHE;
        return p;
    }
    /* the stream holds it, or reaches it after dropping at most skip_max */
    if (s->active && a >= s->kept_from && b <= s->end && a <= s->pos + c->skip_max) {
        p.kind = OM_SHARD_READ_STREAM;
        p.skip = a > s->pos ? a - s->pos : 0;
        return p;
    }
    bool streaming = q->hinted || p.next.in_order >= run;
    /* a reader behind the stream does not pull it back from those ahead */
    bool behind = s->active && a < s->kept_from && s->pos < s->end;
    if (streaming && !behind) {
        /* a first read near the start opens the stream at the first
         * member: workers that start together each ask for their own
         * first member, in any order, and all of them are on its way */
        bool at_start = !r->started && a <= ix->first_data + c->skip_max;
        open_stream(&p, ix, c, at_start ? OM_MIN(ix->first_data, a) : a, a, b);
        return p;
    }
    const struct om_shard_member *m = &ix->members[q->member];
    uint64_t x = a, y = b;
    if (m->size <= c->small_member) {
        x = m->offset;
        y = m->offset + m->size;
    }
    p.kind = OM_SHARD_READ_RANGE;
    p.range_off = align_down(x, c->align);
    p.range_end = align_up(y, c->align, ix->shard_size);
    return p;
}

struct om_shard_scan om_shard_plan_scan(bool active, uint64_t pos, uint64_t need,
                                        uint64_t shard_size, const struct om_shard_plan_config *c)
{
    struct om_shard_scan sc = {.reopen = false};
    if (active && need >= pos && need - pos <= c->skip_max)
        return sc;
    sc.reopen = true;
    sc.from = OM_MIN(align_down(need, c->align), shard_size);
    sc.end = shard_size;
    if (c->stream_max && c->stream_max < shard_size - sc.from)
        sc.end = align_up(sc.from + c->stream_max, c->align, shard_size);
    return sc;
}
