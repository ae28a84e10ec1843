/* The data cache's policy: frequencies with aging, residents in LRU order,
 * admission against the victims (see dcache_policy.h). */
#include "objmount/dcache_policy.h"

#include <errno.h>
#include <stdlib.h>

#include "objmount/hash.h"

#define MARGIN 1 /* admitted when more frequent than every victim by more than this */

struct ent {
    struct om_hnode node;
    uint64_t key;
    uint32_t freq;
    bool resident;
    uint64_t bytes;
    struct ent *prev, *next; /* LRU, residents only: head is the oldest */
};

struct om_dpolicy {
    struct om_htable table;
    struct ent *head, *tail;
    uint64_t aging, since_halving;
    struct om_dpolicy_stats st;
};

static struct ent *find(const struct om_dpolicy *p, uint64_t key)
{
    uint64_t h = om_hash_u64(key);
    for (struct om_hnode *n = om_htable_first(&p->table, h); n; n = om_htable_next(n, h)) {
        struct ent *e = om_container_of(n, struct ent, node);
        if (e->key == key)
            return e;
    }
    return NULL;
}

static struct ent *get(struct om_dpolicy *p, uint64_t key)
{
    struct ent *e = find(p, key);
    if (e)
        return e;
    e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->key = key;
    om_htable_insert(&p->table, &e->node, om_hash_u64(key));
    p->st.tracked++;
    return e;
}

static void unlink_lru(struct om_dpolicy *p, struct ent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        p->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        p->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_lru(struct om_dpolicy *p, struct ent *e)
{
    e->prev = p->tail;
    e->next = NULL;
    if (p->tail)
        p->tail->next = e;
    else
        p->head = e;
    p->tail = e;
}

static void forget(struct om_dpolicy *p, struct ent *e)
{
    om_htable_remove(&p->table, &e->node);
    p->st.tracked--;
    free(e);
}

/* Halve every frequency; ghosts that reach 0 are forgotten. */
static void halve(struct om_dpolicy *p)
{
    for (size_t b = 0; b < p->table.nbuckets; b++) {
        struct om_hnode *n = p->table.buckets[b];
        while (n) {
            struct om_hnode *next = n->next;
            struct ent *e = om_container_of(n, struct ent, node);
            e->freq /= 2;
            if (!e->freq && !e->resident)
                forget(p, e);
            n = next;
        }
    }
    p->since_halving = 0;
    p->st.halvings++;
}

struct om_dpolicy *om_dpolicy_new(uint64_t aging)
{
    struct om_dpolicy *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    if (om_htable_init(&p->table, 1024)) {
        free(p);
        return NULL;
    }
    p->aging = aging ? aging : 1;
    return p;
}

void om_dpolicy_free(struct om_dpolicy *p)
{
    if (!p)
        return;
    for (size_t b = 0; b < p->table.nbuckets; b++) {
        struct om_hnode *n = p->table.buckets[b];
        while (n) {
            struct om_hnode *next = n->next;
            free(om_container_of(n, struct ent, node));
            n = next;
        }
    }
    om_htable_destroy(&p->table);
    free(p);
}

void om_dpolicy_set_aging(struct om_dpolicy *p, uint64_t aging)
{
    p->aging = aging ? aging : 1;
}

int om_dpolicy_access(struct om_dpolicy *p, uint64_t key)
{
    struct ent *e = get(p, key);
    if (!e)
        return -ENOMEM;
    if (e->freq < UINT32_MAX)
        e->freq++;
    if (e->resident) {
        unlink_lru(p, e);
        push_lru(p, e);
    }
    if (++p->since_halving >= p->aging)
        halve(p);
    return 0;
}

int om_dpolicy_insert(struct om_dpolicy *p, uint64_t key, uint64_t bytes)
{
    struct ent *e = get(p, key);
    if (!e)
        return -ENOMEM;
    if (e->resident) {
        p->st.resident_bytes -= e->bytes;
        unlink_lru(p, e);
    } else {
        e->resident = true;
        p->st.resident++;
    }
    e->bytes = bytes;
    p->st.resident_bytes += bytes;
    push_lru(p, e);
    return 0;
}

void om_dpolicy_remove(struct om_dpolicy *p, uint64_t key)
{
    struct ent *e = find(p, key);
    if (!e || !e->resident)
        return;
    unlink_lru(p, e);
    e->resident = false;
    p->st.resident--;
    p->st.resident_bytes -= e->bytes;
    if (!e->freq)
        forget(p, e);
}

bool om_dpolicy_resident(const struct om_dpolicy *p, uint64_t key)
{
    const struct ent *e = find(p, key);
    return e && e->resident;
}

uint64_t om_dpolicy_frequency(const struct om_dpolicy *p, uint64_t key)
{
    const struct ent *e = find(p, key);
    return e ? e->freq : 0;
}

bool om_dpolicy_admit(struct om_dpolicy *p, uint64_t key, uint64_t need, uint64_t *victims,
                      int max, int *n, uint64_t *short_of)
{
    *n = 0;
    *short_of = 0;
    if (need == 0)
        return true;
    const struct ent *me = find(p, key);
    uint64_t freq = me ? me->freq : 0;
    uint64_t got = 0;
    int k = 0;
    for (const struct ent *e = p->head; e && got < need; e = e->next) {
        if (e->key == key)
            continue;
        if (k == max || (uint64_t)e->freq + MARGIN >= freq)
            return false; /* too many to make room, or a victim as popular */
        victims[k++] = e->key;
        got += e->bytes;
    }
    if (got < need) {
        *short_of = need - got;
        return false;
    }
    *n = k;
    return true;
}

bool om_dpolicy_oldest(const struct om_dpolicy *p, uint64_t *key, uint64_t *bytes)
{
    if (!p->head)
        return false;
    *key = p->head->key;
    *bytes = p->head->bytes;
    return true;
}

void om_dpolicy_get_stats(const struct om_dpolicy *p, struct om_dpolicy_stats *out)
{
    *out = p->st;
}
