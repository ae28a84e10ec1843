/* The writer's table of parts: which parts cover the staging file, which
 * changed since they were sent, which still match the stored object. Plain
 * bookkeeping on w->parts, no I/O; every caller holds w->lock. Below
 * parts.c (uploads) and staging.c (the staging file), which both use it. */
#include "objmount/writer.h"

#include <errno.h>
#include <stdlib.h>

#include "objmount/part_layout.h"
#include "objmount/util.h"
#include "writer_int.h"

/* Make sure parts cover [0, size) and lengths are right. Parts beyond the
 * end keep existing with length 0. Caller holds lock. */
int wi_layout(struct om_writer *w)
{
    uint64_t P = w->ws->cfg.part_size;
    int need = om_part_count(P, w->size);
    if (need < 0)
        return need;
    if (need > w->cap) {
        int cap = OM_MAX(need, w->cap * 2);
        struct part **v = realloc(w->parts, sizeof(*v) * (size_t)cap);
        if (!v)
            return -ENOMEM;
        w->parts = v;
        w->cap = cap;
    }
    while (w->nparts < need) {
        struct part *p = calloc(1, sizeof(*p));
        if (!p)
            return -ENOMEM;
        p->w = w;
        p->number = w->nparts + 1;
        w->parts[w->nparts++] = p;
    }
    for (int i = 0; i < w->nparts; i++)
        om_part_span(P, w->size, w->parts[i]->number, &w->parts[i]->off, &w->parts[i]->len);
    return 0;
}

/* Mark the parts touched by [off, end) as changed. Caller holds lock. */
void wi_touch(struct om_writer *w, uint64_t off, uint64_t end)
{
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        if (p->len == 0 || p->off + p->len <= off || p->off >= end)
            continue;
        p->gen++;
        if (p->state == P_DONE)
            p->state = P_IDLE;
    }
    if (off < w->md5_upto)
        w->md5_valid = false;
}

void wi_parts_stored(struct om_writer *w)
{
    for (int i = 0; i < w->nparts; i++) {
        struct part *p = w->parts[i];
        p->stored_valid = p->len > 0 && p->off + p->len <= w->stored_size;
        p->stored_gen = p->gen;
    }
}

void wi_parts_unstored(struct om_writer *w)
{
    for (int i = 0; i < w->nparts; i++)
        w->parts[i]->stored_valid = false;
}
