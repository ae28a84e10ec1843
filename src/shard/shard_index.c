/* Shard indexes: building, finishing, lookups and listings, and
 * objmount's own index file (see include/objmount/shard_index.h). */
#include "objmount/shard_index.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/digest.h"

static uint64_t or_default(uint64_t v, uint64_t def)
{
    return v ? v : def;
}

void om_shard_index_init(struct om_shard_index *ix, const struct om_shard_limits *lim,
                         uint64_t shard_size, enum om_shard_source source)
{
    memset(ix, 0, sizeof(*ix));
    ix->shard_size = shard_size;
    ix->first_data = shard_size;
    ix->source = source;
    ix->lim.max_members = or_default(lim ? lim->max_members : 0, OM_SHARD_MAX_MEMBERS);
    ix->lim.max_name_bytes = or_default(lim ? lim->max_name_bytes : 0, OM_SHARD_MAX_NAME_BYTES);
    ix->lim.max_ext_header = or_default(lim ? lim->max_ext_header : 0, OM_SHARD_MAX_EXT_HEADER);
    /* name offsets are 32 bits */
    if (ix->lim.max_name_bytes > UINT32_MAX - 1)
        ix->lim.max_name_bytes = UINT32_MAX - 1;
}

void om_shard_index_free(struct om_shard_index *ix)
{
    free(ix->members);
    free(ix->names);
    free(ix->by_name);
    struct om_shard_limits lim = ix->lim;
    memset(ix, 0, sizeof(*ix));
    ix->lim = lim;
}

/* ---- names ---- */

/* Normalise a member path into out (OM_SHARD_NAME_MAX + 1 bytes): no
 * leading '/', no empty or "." segment, no trailing '/'. Returns its
 * length (0: the archive's root), -1 when it cannot be a path of the
 * mount (a ".." segment, a segment over OM_SHARD_SEGMENT_MAX, a NUL) or
 * -ENAMETOOLONG. */
static int normalise(const char *in, size_t len, char *out)
{
    if (memchr(in, '\0', len))
        return -1;
    size_t o = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && in[i] == '/')
            i++;
        size_t s = i;
        while (i < len && in[i] != '/')
            i++;
        size_t seg = i - s;
        if (seg == 0 || (seg == 1 && in[s] == '.'))
            continue;
        if (o + (o > 0) + seg > OM_SHARD_NAME_MAX)
            return -ENAMETOOLONG;
        if (seg == 2 && in[s] == '.' && in[s + 1] == '.')
            return -1;
        if (seg > OM_SHARD_SEGMENT_MAX)
            return -1;
        if (o > 0)
            out[o++] = '/';
        memcpy(out + o, in + s, seg);
        o += seg;
    }
    out[o] = '\0';
    return (int)o;
}

/* Append s[0..len) and a NUL to the name pool: its offset, or a negative
 * errno. */
static int64_t pool_add(struct om_shard_index *ix, const char *s, size_t len)
{
    if (ix->names_len + len + 1 > ix->lim.max_name_bytes)
        return -EFBIG;
    if (ix->names_len + len + 1 > ix->names_cap) {
        size_t cap = ix->names_cap ? ix->names_cap : 4096;
        while (cap < ix->names_len + len + 1)
            cap *= 2;
        if (cap > ix->lim.max_name_bytes)
            cap = ix->lim.max_name_bytes;
        char *p = realloc(ix->names, cap);
        if (!p)
            return -ENOMEM;
        ix->names = p;
        ix->names_cap = cap;
    }
    int64_t at = (int64_t)ix->names_len;
    memcpy(ix->names + ix->names_len, s, len);
    ix->names[ix->names_len + len] = '\0';
    ix->names_len += len + 1;
    return at;
}

int om_shard_index_add(struct om_shard_index *ix, const struct om_shard_entry *e)
{
    if (ix->finished || e->type > OM_SHARD_HARDLINK || e->mtime_nsec >= 1000000000u ||
        e->offset % OM_SHARD_BLOCK != 0)
        return -EINVAL;
    if (e->flags & ~OM_SHARD_M_HARDLINK)
        return -EINVAL;
    if (ix->n >= ix->lim.max_members)
        return -EFBIG;
    if (e->type == OM_SHARD_FILE &&
        (e->size > ix->shard_size || e->offset > ix->shard_size - e->size))
        return -EFBIG;
    char name[OM_SHARD_NAME_MAX + 1];
    int nlen = normalise(e->name, e->name_len, name);
    if (nlen == -ENAMETOOLONG)
        return nlen;
    if (nlen == 0 && e->type == OM_SHARD_DIR)
        return 1; /* the root: "./" and the like */
    if (nlen <= 0) {
        ix->skipped.bad_name++;
        return 1;
    }
    /* a link target: a hard link's names a member, a symlink's is a string */
    char target[OM_SHARD_NAME_MAX + 1];
    int tlen = -1;
    bool has_link = e->type == OM_SHARD_SYMLINK || e->type == OM_SHARD_HARDLINK ||
                    (e->flags & OM_SHARD_M_HARDLINK);
    if (has_link) {
        if (!e->link || e->link_len == 0 || memchr(e->link, '\0', e->link_len)) {
            ix->skipped.bad_name++;
            return 1;
        }
        if (e->link_len > OM_SHARD_NAME_MAX)
            return -ENAMETOOLONG;
        if (e->type == OM_SHARD_SYMLINK) {
            memcpy(target, e->link, e->link_len);
            tlen = (int)e->link_len;
        } else {
            tlen = normalise(e->link, e->link_len, target);
            if (tlen == -ENAMETOOLONG)
                return tlen;
            if (tlen <= 0) {
                ix->skipped.bad_name++;
                return 1;
            }
        }
    }
    if (ix->n == ix->cap) {
        size_t cap = ix->cap ? 2 * ix->cap : 64;
        if (cap > ix->lim.max_members)
            cap = ix->lim.max_members;
        struct om_shard_member *m = realloc(ix->members, cap * sizeof(*m));
        if (!m)
            return -ENOMEM;
        ix->members = m;
        ix->cap = cap;
    }
    size_t names_before = ix->names_len;
    int64_t at = pool_add(ix, name, (size_t)nlen);
    if (at < 0)
        return (int)at;
    int64_t lat = OM_SHARD_NO_LINK;
    if (tlen > 0) {
        lat = pool_add(ix, target, (size_t)tlen);
        if (lat < 0) {
            ix->names_len = names_before;
            return (int)lat;
        }
    }
    bool sized = e->type == OM_SHARD_FILE;
    ix->members[ix->n++] = (struct om_shard_member){
        .offset = e->offset,
        .size = sized ? e->size : 0,
        .mtime = e->mtime,
        .mtime_nsec = e->mtime_nsec,
        .mode = e->mode & 07777,
        .uid = e->uid,
        .gid = e->gid,
        .name = (uint32_t)at,
        .link = (uint32_t)lat,
        .name_len = (uint16_t)nlen,
        .type = (uint8_t)e->type,
        .flags = e->flags,
    };
    return 0;
}

/* ---- finishing ---- */

static int cmp_by_name(const void *a, const void *b, void *arg)
{
    const struct om_shard_index *ix = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int c = strcmp(ix->names + ix->members[x].name, ix->names + ix->members[y].name);
    if (c)
        return c;
    return x < y ? -1 : x > y;
}

/* Compare member m's name with key[0..len) as strcmp would (key holds no NUL). */
static int cmp_key(const struct om_shard_index *ix, uint32_t m, const char *key, size_t len)
{
    const struct om_shard_member *mm = &ix->members[m];
    size_t n = OM_MIN((size_t)mm->name_len, len);
    int c = memcmp(ix->names + mm->name, key, n);
    if (c)
        return c;
    return mm->name_len < len ? -1 : mm->name_len > len;
}

/* The first position of by_name whose name is >= key[0..len) (and, for an
 * equal name, whose member number is >= num). */
static size_t lower_bound(const struct om_shard_index *ix, const char *key, size_t len,
                          uint32_t num)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t m = ix->by_name[mid];
        int c = cmp_key(ix, m, key, len);
        if (c < 0 || (c == 0 && m < num))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Does any member's name start with key[0..len) followed by '/'? */
static bool has_children(const struct om_shard_index *ix, const char *key, size_t len)
{
    char buf[OM_SHARD_NAME_MAX + 2];
    if (len + 1 > OM_SHARD_NAME_MAX)
        return false;
    memcpy(buf, key, len);
    buf[len] = '/';
    size_t at = lower_bound(ix, buf, len + 1, 0);
    if (at >= ix->n)
        return false;
    const struct om_shard_member *m = &ix->members[ix->by_name[at]];
    return m->name_len > len + 1 && memcmp(ix->names + m->name, buf, len + 1) == 0;
}

/* Hard links in tar order: each takes the data (and attributes, as an
 * extracted link shares its target's inode) of the latest file of its
 * target's name before it. */
static void resolve_links(struct om_shard_index *ix)
{
    for (size_t i = 0; i < ix->n; i++) {
        struct om_shard_member *m = &ix->members[i];
        if (m->type != OM_SHARD_HARDLINK)
            continue;
        const char *t = ix->names + m->link;
        size_t tlen = strlen(t);
        size_t at = lower_bound(ix, t, tlen, (uint32_t)i);
        const struct om_shard_member *tm = NULL;
        if (at > 0 && cmp_key(ix, ix->by_name[at - 1], t, tlen) == 0)
            tm = &ix->members[ix->by_name[at - 1]];
        if (!tm || tm->type != OM_SHARD_FILE) {
            m->flags |= OM_SHARD_M_HIDDEN;
            ix->skipped.dangling++;
            continue;
        }
        m->type = OM_SHARD_FILE;
        m->flags |= OM_SHARD_M_HARDLINK;
        m->offset = tm->offset;
        m->size = tm->size;
        m->mtime = tm->mtime;
        m->mtime_nsec = tm->mtime_nsec;
        m->mode = tm->mode;
        m->uid = tm->uid;
        m->gid = tm->gid;
    }
}

/* One name given by members by_name[from..to): the last one is listed,
 * unless members live below the name: then the last directory of them is,
 * or none (the directory is listed without an entry of its own). */
static void hide_duplicates(struct om_shard_index *ix, size_t from, size_t to)
{
    const struct om_shard_member *first = &ix->members[ix->by_name[from]];
    bool dir = has_children(ix, ix->names + first->name, first->name_len);
    size_t keep = SIZE_MAX;
    for (size_t k = to; k-- > from;) {
        const struct om_shard_member *m = &ix->members[ix->by_name[k]];
        if (m->flags & OM_SHARD_M_HIDDEN)
            continue; /* dangling */
        if (!dir || m->type == OM_SHARD_DIR) {
            keep = k;
            break;
        }
    }
    for (size_t k = from; k < to; k++) {
        struct om_shard_member *m = &ix->members[ix->by_name[k]];
        if (k == keep || (m->flags & OM_SHARD_M_HIDDEN))
            continue;
        m->flags |= OM_SHARD_M_HIDDEN;
        ix->skipped.shadowed++;
    }
}

int om_shard_index_finish(struct om_shard_index *ix)
{
    if (ix->finished)
        return 0;
    free(ix->by_name);
    ix->by_name = malloc((ix->n ? ix->n : 1) * sizeof(*ix->by_name));
    if (!ix->by_name)
        return -ENOMEM;
    for (size_t i = 0; i < ix->n; i++)
        ix->by_name[i] = (uint32_t)i;
    qsort_r(ix->by_name, ix->n, sizeof(*ix->by_name), cmp_by_name, ix);
    ix->skipped.dangling = ix->skipped.shadowed = 0;
    for (size_t i = 0; i < ix->n; i++)
        ix->members[i].flags &= (uint8_t)~OM_SHARD_M_HIDDEN;
    resolve_links(ix);
    for (size_t i = 0; i < ix->n;) {
        size_t j = i + 1;
        const struct om_shard_member *m = &ix->members[ix->by_name[i]];
        while (j < ix->n && cmp_key(ix, ix->by_name[j], ix->names + m->name, m->name_len) == 0)
            j++;
        hide_duplicates(ix, i, j);
        i = j;
    }
    ix->listed = 0;
    ix->first_data = ix->shard_size;
    for (size_t i = 0; i < ix->n; i++) {
        const struct om_shard_member *m = &ix->members[i];
        if (m->flags & OM_SHARD_M_HIDDEN)
            continue;
        ix->listed++;
        if (m->type == OM_SHARD_FILE && !(m->flags & OM_SHARD_M_HARDLINK) &&
            ix->first_data == ix->shard_size)
            ix->first_data = m->offset;
    }
    ix->finished = true;
    return 0;
}

/* ---- lookups ---- */

/* The listed member named key[0..len), or -1. */
static int64_t find_listed(const struct om_shard_index *ix, const char *key, size_t len)
{
    for (size_t at = lower_bound(ix, key, len, 0);
         at < ix->n && cmp_key(ix, ix->by_name[at], key, len) == 0; at++)
        if (!(ix->members[ix->by_name[at]].flags & OM_SHARD_M_HIDDEN))
            return ix->by_name[at];
    return -1;
}

int om_shard_index_find(const struct om_shard_index *ix, const char *path, size_t len,
                        uint32_t *member)
{
    if (!ix->finished)
        return -EINVAL;
    if (len == 0)
        return 1;
    if (len > OM_SHARD_NAME_MAX)
        return -ENOENT;
    int64_t m = find_listed(ix, path, len);
    if (m >= 0) {
        *member = (uint32_t)m;
        return 0;
    }
    return has_children(ix, path, len) ? 1 : -ENOENT;
}

int om_shard_index_list(const struct om_shard_index *ix, const char *dir, size_t len,
                        om_shard_list_cb cb, void *ud)
{
    uint32_t dm;
    int rc = om_shard_index_find(ix, dir, len, &dm);
    if (rc < 0)
        return rc;
    if (rc == 0 && ix->members[dm].type != OM_SHARD_DIR)
        return -ENOTDIR;
    char prefix[OM_SHARD_NAME_MAX + 2];
    size_t plen = 0;
    if (len > 0) {
        memcpy(prefix, dir, len);
        prefix[len] = '/';
        plen = len + 1;
    }
    size_t at = lower_bound(ix, prefix, plen, 0);
    while (at < ix->n) {
        const struct om_shard_member *m = &ix->members[ix->by_name[at]];
        const char *name = ix->names + m->name;
        if (m->name_len <= plen || memcmp(name, prefix, plen) != 0)
            break;
        const char *rest = name + plen;
        size_t rlen = m->name_len - plen;
        const char *slash = memchr(rest, '/', rlen);
        if (!slash) {
            if (!(m->flags & OM_SHARD_M_HIDDEN)) {
                rc = cb(ud, rest, rlen, ix->by_name[at]);
                if (rc)
                    return rc < 0 ? rc : 0;
            }
            at++;
            continue;
        }
        /* a subdirectory: listed here unless it has a listed entry of its
         * own (met before, as its name sorts before its members'); then
         * skip every name below it */
        size_t slen = (size_t)(slash - rest);
        char sub[OM_SHARD_NAME_MAX + 2];
        memcpy(sub, name, plen + slen);
        if (find_listed(ix, sub, plen + slen) < 0) {
            rc = cb(ud, rest, slen, UINT32_MAX);
            if (rc)
                return rc < 0 ? rc : 0;
        }
        sub[plen + slen] = '/' + 1;
        at = lower_bound(ix, sub, plen + slen + 1, 0);
    }
    return 0;
}

/* ---- the index file ---- */

static const char magic[8] = {'O', 'M', 'S', 'H', 'I', 'D', 'X', '1'};

enum {
    OFF_VERSION = 8,
    OFF_FLAGS = 12,
    OFF_SOURCE = 16,
    OFF_SIZE = 20,
    OFF_COUNT = 28,
    OFF_NAMES = 36,
    OFF_SKIPPED = 44, /* four u32 */
    OFF_IDENT = 60,
};

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int put_varint(struct om_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    return om_buf_append(b, tmp, n);
}

static int get_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*p >= end)
            return -EBADMSG;
        uint8_t b = *(*p)++;
        if (shift == 63 && b > 1)
            return -EBADMSG;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -EBADMSG;
}

static uint64_t zigzag(uint64_t diff)
{
    int64_t v = (int64_t)diff;
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static uint64_t unzigzag(uint64_t v)
{
    return (v >> 1) ^ (uint64_t) - (int64_t)(v & 1);
}

static int put_str(struct om_buf *b, const char *s)
{
    size_t len = s ? strlen(s) : 0;
    if (len > UINT16_MAX)
        return -EINVAL;
    uint8_t l[2] = {(uint8_t)len, (uint8_t)(len >> 8)};
    int rc = om_buf_append(b, l, 2);
    return rc ? rc : om_buf_append(b, s ? s : "", len);
}

int om_shard_index_encode(const struct om_shard_index *ix, const struct om_shard_ident *id,
                          struct om_buf *out)
{
    if (!ix->finished || !id->etag || !*id->etag || id->size != ix->shard_size)
        return -EINVAL;
    size_t start = out->len;
    uint8_t h[OFF_IDENT];
    memcpy(h, magic, sizeof(magic));
    put_u32(h + OFF_VERSION, OM_SHARD_INDEX_VERSION);
    put_u32(h + OFF_FLAGS, 0);
    put_u32(h + OFF_SOURCE, (uint32_t)ix->source);
    put_u64(h + OFF_SIZE, ix->shard_size);
    put_u64(h + OFF_COUNT, ix->n);
    put_u64(h + OFF_NAMES, ix->names_len);
    put_u32(h + OFF_SKIPPED, ix->skipped.sparse);
    put_u32(h + OFF_SKIPPED + 4, ix->skipped.special);
    put_u32(h + OFF_SKIPPED + 8, ix->skipped.bad_name);
    put_u32(h + OFF_SKIPPED + 12, ix->skipped.other);
    int rc = om_buf_append(out, h, sizeof(h));
    const char *const ident[] = {id->endpoint, id->bucket, id->key, id->etag};
    for (size_t i = 0; i < OM_ARRAY_LEN(ident) && !rc; i++)
        rc = put_str(out, ident[i]);
    uint64_t prev_end = 0;
    int64_t prev_mtime = 0;
    const char *prev = "";
    size_t prev_len = 0;
    for (size_t i = 0; i < ix->n && !rc; i++) {
        const struct om_shard_member *m = &ix->members[i];
        const char *name = ix->names + m->name;
        size_t shared = 0;
        while (shared < prev_len && shared < m->name_len && prev[shared] == name[shared])
            shared++;
        const char *link = om_shard_member_link(ix, m);
        size_t llen = link ? strlen(link) : 0;
        uint8_t flags = m->flags & OM_SHARD_M_HARDLINK;
        rc = put_varint(out, (uint64_t)m->type | (uint64_t)flags << 2);
        rc = rc ? rc : put_varint(out, zigzag(m->offset - prev_end));
        rc = rc ? rc : put_varint(out, m->size);
        rc = rc ? rc : put_varint(out, zigzag((uint64_t)m->mtime - (uint64_t)prev_mtime));
        rc = rc ? rc : put_varint(out, m->mtime_nsec);
        rc = rc ? rc : put_varint(out, m->mode);
        rc = rc ? rc : put_varint(out, m->uid);
        rc = rc ? rc : put_varint(out, m->gid);
        rc = rc ? rc : put_varint(out, shared);
        rc = rc ? rc : put_varint(out, m->name_len - shared);
        rc = rc ? rc : om_buf_append(out, name + shared, m->name_len - shared);
        rc = rc ? rc : put_varint(out, link ? llen + 1 : 0);
        rc = rc ? rc : om_buf_append(out, link ? link : "", llen);
        prev_end = m->offset + m->size;
        prev_mtime = m->mtime;
        prev = name;
        prev_len = m->name_len;
    }
    if (rc)
        return rc;
    unsigned char sha[OM_SHA256_LEN];
    rc = om_sha256(out->data + start, out->len - start, sha);
    return rc ? rc : om_buf_append(out, sha, sizeof(sha));
}

__attribute__((format(printf, 4, 5))) static int fail(int rc, char *err, size_t errlen,
                                                      const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Read a u16-length string at *p into a view. */
static int get_str(const uint8_t **p, const uint8_t *end, const char **s, size_t *len)
{
    if (end - *p < 2)
        return -EBADMSG;
    *len = (size_t)((*p)[0] | ((*p)[1] << 8));
    *p += 2;
    if ((size_t)(end - *p) < *len)
        return -EBADMSG;
    *s = (const char *)*p;
    *p += *len;
    return 0;
}

static bool same_str(const char *s, size_t len, const char *want)
{
    size_t wlen = want ? strlen(want) : 0;
    return len == wlen && memcmp(s, want ? want : "", len) == 0;
}

/* The members after the identity: decode and add each to ix. */
static int decode_members(const uint8_t *p, const uint8_t *end, uint64_t count,
                          struct om_shard_index *ix, char *err, size_t errlen)
{
    char name[OM_SHARD_NAME_MAX + 1];
    size_t name_len = 0;
    uint64_t prev_end = 0;
    int64_t prev_mtime = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t tf, doff, size, dmtime, nsec, mode, uid, gid, shared, suffix, llen;
        if (get_varint(&p, end, &tf) || get_varint(&p, end, &doff) || get_varint(&p, end, &size) ||
            get_varint(&p, end, &dmtime) || get_varint(&p, end, &nsec) ||
            get_varint(&p, end, &mode) || get_varint(&p, end, &uid) || get_varint(&p, end, &gid) ||
            get_varint(&p, end, &shared) || get_varint(&p, end, &suffix))
            return fail(-EBADMSG, err, errlen, "member %" PRIu64 " is truncated", i);
        if (tf > (OM_SHARD_HARDLINK | (OM_SHARD_M_HARDLINK << 2)) || mode > 07777 ||
            uid > UINT32_MAX || gid > UINT32_MAX || nsec >= 1000000000u || shared > name_len ||
            suffix > OM_SHARD_NAME_MAX - shared || suffix > (uint64_t)(end - p) ||
            shared + suffix == 0)
            return fail(-EBADMSG, err, errlen, "member %" PRIu64 " is malformed", i);
        memcpy(name + shared, p, suffix);
        name_len = shared + suffix;
        p += suffix;
        if (get_varint(&p, end, &llen) || llen > OM_SHARD_NAME_MAX + 1 ||
            (llen && llen - 1 > (uint64_t)(end - p)))
            return fail(-EBADMSG, err, errlen, "member %" PRIu64 " is malformed", i);
        struct om_shard_entry e = {
            .name = name,
            .name_len = name_len,
            .link = llen ? (const char *)p : NULL,
            .link_len = llen ? llen - 1 : 0,
            .offset = prev_end + unzigzag(doff),
            .size = size,
            .mtime = (int64_t)((uint64_t)prev_mtime + unzigzag(dmtime)),
            .mtime_nsec = (uint32_t)nsec,
            .mode = (uint32_t)mode,
            .uid = (uint32_t)uid,
            .gid = (uint32_t)gid,
            .type = (enum om_shard_type)(tf & 3),
            .flags = (uint8_t)(tf >> 2),
        };
        p += e.link_len;
        size_t before = ix->n;
        int rc = om_shard_index_add(ix, &e);
        if (rc == -ENOMEM || rc == -EFBIG)
            return fail(rc, err, errlen, "member %" PRIu64 ": %s", i, strerror(-rc));
        /* what was written was added, so it is added again as it was */
        if (rc != 0 || ix->n != before + 1 || ix->members[before].name_len != name_len ||
            memcmp(ix->names + ix->members[before].name, name, name_len) != 0)
            return fail(-EBADMSG, err, errlen, "member %" PRIu64 " is malformed", i);
        prev_end = e.offset + ix->members[before].size;
        prev_mtime = e.mtime;
    }
    if (p != end)
        return fail(-EBADMSG, err, errlen, "%zu bytes after the last member", (size_t)(end - p));
    return 0;
}

int om_shard_index_decode_flags(const void *buf, size_t len, const struct om_shard_ident *expect,
                                const struct om_shard_limits *lim, unsigned flags,
                                struct om_shard_index *ix, char *err, size_t errlen)
{
    const uint8_t *b = buf;
    om_shard_index_init(ix, lim, 0, OM_SHARD_SRC_TAR);
    if (len < sizeof(magic) || memcmp(b, magic, sizeof(magic)) != 0)
        return fail(-EINVAL, err, errlen, "not an objmount shard index");
    if (len < OFF_IDENT + OM_SHA256_LEN)
        return fail(-EBADMSG, err, errlen, "shard index truncated (%zu bytes)", len);
    uint32_t version = get_u32(b + OFF_VERSION);
    if (version != OM_SHARD_INDEX_VERSION)
        return fail(-EPROTONOSUPPORT, err, errlen,
                    "shard index format version %" PRIu32 " (this objmount reads %d)", version,
                    OM_SHARD_INDEX_VERSION);
    const uint8_t *end = b + len - OM_SHA256_LEN;
    if (!(flags & OM_SHARD_DECODE_NO_CHECKSUM)) {
        unsigned char sha[OM_SHA256_LEN];
        int rc = om_sha256(b, len - OM_SHA256_LEN, sha);
        if (rc)
            return fail(rc, err, errlen, "shard index checksum: %s", strerror(-rc));
        if (memcmp(sha, end, OM_SHA256_LEN) != 0)
            return fail(-EBADMSG, err, errlen, "shard index checksum mismatch");
    }
    uint32_t source = get_u32(b + OFF_SOURCE);
    uint64_t size = get_u64(b + OFF_SIZE);
    uint64_t count = get_u64(b + OFF_COUNT);
    uint64_t names = get_u64(b + OFF_NAMES);
    if (get_u32(b + OFF_FLAGS) != 0 || source < OM_SHARD_SRC_TAR || source > OM_SHARD_SRC_WIDS)
        return fail(-EBADMSG, err, errlen, "shard index header is malformed");
    const uint8_t *p = b + OFF_IDENT;
    const char *s[4];
    size_t sl[4];
    for (int i = 0; i < 4; i++)
        if (get_str(&p, end, &s[i], &sl[i]))
            return fail(-EBADMSG, err, errlen, "shard index header is truncated");
    if (!(flags & OM_SHARD_DECODE_NO_IDENT) &&
        (!expect || size != expect->size || !same_str(s[0], sl[0], expect->endpoint) ||
         !same_str(s[1], sl[1], expect->bucket) || !same_str(s[2], sl[2], expect->key) ||
         !same_str(s[3], sl[3], expect->etag)))
        return fail(-ESTALE, err, errlen,
                    "shard index of %.*s (ETag %.*s, %" PRIu64 " bytes), not of this shard",
                    (int)OM_MIN(sl[2], 512), s[2], (int)OM_MIN(sl[3], 128), s[3], size);
    om_shard_index_init(ix, lim, size, (enum om_shard_source)source);
    if (count > ix->lim.max_members || names > ix->lim.max_name_bytes)
        return fail(-EFBIG, err, errlen,
                    "shard index of %" PRIu64 " members and %" PRIu64
                    " name bytes is beyond the bounds",
                    count, names);
    /* a member takes at least 11 bytes: allocate for what the file can hold */
    if (count > (uint64_t)(end - p) / 11)
        return fail(-EBADMSG, err, errlen, "shard index is truncated");
    ix->skipped.sparse = get_u32(b + OFF_SKIPPED);
    ix->skipped.special = get_u32(b + OFF_SKIPPED + 4);
    ix->skipped.bad_name = get_u32(b + OFF_SKIPPED + 8);
    ix->skipped.other = get_u32(b + OFF_SKIPPED + 12);
    int rc = decode_members(p, end, count, ix, err, errlen);
    if (rc == 0 && ix->names_len != names)
        rc = fail(-EBADMSG, err, errlen, "shard index name bytes do not add up");
    if (rc == 0) {
        rc = om_shard_index_finish(ix);
        if (rc)
            fail(rc, err, errlen, "shard index: %s", strerror(-rc));
    }
    if (rc)
        om_shard_index_free(ix);
    return rc;
}

int om_shard_index_decode(const void *buf, size_t len, const struct om_shard_ident *expect,
                          const struct om_shard_limits *lim, struct om_shard_index *ix, char *err,
                          size_t errlen)
{
    return om_shard_index_decode_flags(buf, len, expect, lim, 0, ix, err, errlen);
}
