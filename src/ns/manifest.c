/* Manifests: writing, verifying and reading (see include/objmount/manifest.h
 * for the layout).
 *
 * An entry in a block:
 *   first of its block:  varint key length, key bytes
 *   the others:          varint shared length, varint suffix length, suffix
 *   then                 varint size, varint zigzag(mtime - previous mtime of
 *                        the block, 0 for the first), varint ETag form:
 *                        0 none, 1 MD5 (16 bytes follow), 2 text (varint
 *                        length, bytes), 2+N multipart MD5-N (16 bytes)
 *
 * Every read is bounds-checked, and keys must increase: a manifest that
 * passes its checksum was written here, but the reader is also fuzzed
 * without it (OM_MANIFEST_NO_CHECKSUM). */
#include "objmount/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/digest.h"
#include "objmount/util.h"

static const char magic[8] = {'O', 'M', 'M', 'A', 'N', 'I', 'F', '1'};

enum {
    OFF_VERSION = 8,
    OFF_SHA = 12,
    OFF_HASHED = 44, /* the checksum covers every byte from here (see checksum()) */
    OFF_FLAGS = 44,
    OFF_KEYS = 48,
    OFF_BUILT = 56,
    OFF_SIZE = 64,
    OFF_INDEX = 72,
    OFF_BLOCKS = 80,
    OFF_BLOCK_KEYS = 84,
    OFF_NAMES = 88,
};

enum { ETAG_NONE = 0, ETAG_MD5 = 1, ETAG_TEXT = 2 };

struct om_manifest {
    const uint8_t *base;
    size_t len;
    bool mapped;
    struct om_manifest_info info;
    uint64_t index_off;
    uint32_t block_keys;
    uint64_t body_off;
    char *bucket, *prefix;
};

/* ---- bytes ---- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

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

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
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

/* Decode a varint at *p (< end). 0, or -EBADMSG past end or over 64 bits. */
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

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* ---- ETags ---- */

/* The largest N of a "-N" token kept in binary form (the format's own
 * bound, S3's part count). */
#define MANIFEST_MAX_PARTS 10000

/* A version token's stored form (a compression, not a reading of it): ETAG_MD5 for 32 lower-case hex digits, 2+N for
 * the same plus "-N" (a multipart ETag), else ETAG_TEXT (ETAG_NONE when
 * empty). md5 receives the 16 bytes of the binary forms. */
static uint64_t etag_form(const char *etag, unsigned char md5[OM_MD5_LEN])
{
    if (!etag || !*etag)
        return ETAG_NONE;
    for (int i = 0; i < 32; i++) {
        char c = etag[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return ETAG_TEXT;
    }
    if (om_unhex(etag, md5, OM_MD5_LEN))
        return ETAG_TEXT;
    if (etag[32] == '\0')
        return ETAG_MD5;
    uint64_t parts;
    /* "-N" exactly as written back: no sign, no leading zero */
    if (etag[32] != '-' || etag[33] == '0' || om_parse_uint(etag + 33, MANIFEST_MAX_PARTS, &parts) ||
        parts == 0)
        return ETAG_TEXT;
    return 2 + parts;
}

/* ---- the reader ---- */

struct cursor {
    const struct om_manifest *mf;
    uint64_t block;     /* block of the current entry */
    uint32_t i;         /* entries of the block decoded so far */
    uint32_t n;         /* entries in the block */
    const uint8_t *p;   /* next entry */
    const uint8_t *end; /* end of the block */
    bool valid;         /* an entry is current */
    char key[OM_KEY_MAX + 1];
    size_t klen;
    uint64_t size;
    int64_t mtime;
    uint64_t etag_form;
    const uint8_t *etag; /* 16 bytes (binary forms) or the text */
    size_t etag_len;
};

static uint32_t block_count(const struct om_manifest *mf, uint64_t b)
{
    uint64_t before = b * mf->block_keys;
    uint64_t left = mf->info.keys - before;
    return (uint32_t)(left < mf->block_keys ? left : mf->block_keys);
}

static uint64_t block_start(const struct om_manifest *mf, uint64_t b)
{
    return get_u64(mf->base + mf->index_off + 8 * b);
}

static uint64_t block_end(const struct om_manifest *mf, uint64_t b)
{
    return b + 1 < mf->info.blocks ? block_start(mf, b + 1) : mf->index_off;
}

static void cursor_block(struct cursor *c, uint64_t b)
{
    c->block = b;
    c->i = 0;
    c->n = block_count(c->mf, b);
    c->p = c->mf->base + block_start(c->mf, b);
    c->end = c->mf->base + block_end(c->mf, b);
    c->valid = false;
}

/* Decode the next entry of the current block into c. 0 or -EBADMSG. */
static int decode(struct cursor *c)
{
    uint64_t shared = 0, len, v;
    if (c->i > 0 && get_varint(&c->p, c->end, &shared))
        return -EBADMSG;
    if (get_varint(&c->p, c->end, &len) || shared > c->klen || len > OM_KEY_MAX - shared ||
        len > (uint64_t)(c->end - c->p))
        return -EBADMSG;
    /* keys increase: the suffix differs from the previous key at shared */
    if (c->i > 0 && (len == 0 || (shared < c->klen && c->p[0] <= (uint8_t)c->key[shared])))
        return -EBADMSG;
    if (memchr(c->p, '\0', len))
        return -EBADMSG;
    memcpy(c->key + shared, c->p, len);
    c->klen = shared + len;
    c->key[c->klen] = '\0';
    c->p += len;
    if (c->klen == 0 || get_varint(&c->p, c->end, &c->size) || get_varint(&c->p, c->end, &v))
        return -EBADMSG;
    /* wrapping, as the writer's difference did */
    c->mtime = (int64_t)((uint64_t)(c->i > 0 ? c->mtime : 0) + (uint64_t)unzigzag(v));
    if (get_varint(&c->p, c->end, &c->etag_form))
        return -EBADMSG;
    c->etag_len = 0;
    if (c->etag_form == ETAG_TEXT) {
        if (get_varint(&c->p, c->end, &len) || len == 0 || len >= OM_ETAG_MAX ||
            len > (uint64_t)(c->end - c->p))
            return -EBADMSG;
        c->etag_len = len;
    } else if (c->etag_form != ETAG_NONE) {
        if (c->etag_form > 2 + MANIFEST_MAX_PARTS || c->end - c->p < OM_MD5_LEN)
            return -EBADMSG;
        c->etag_len = OM_MD5_LEN;
    }
    c->etag = c->p;
    c->p += c->etag_len;
    c->i++;
    c->valid = true;
    return 0;
}

/* Step to the next entry. 1 when there is one, 0 at the end, -EBADMSG. */
static int cursor_next(struct cursor *c)
{
    if (c->i == c->n) {
        if (c->block + 1 >= c->mf->info.blocks) {
            c->valid = false;
            return 0;
        }
        char prev[OM_KEY_MAX + 1];
        size_t plen = c->valid ? c->klen : 0;
        memcpy(prev, c->key, plen);
        cursor_block(c, c->block + 1);
        if (decode(c))
            return -EBADMSG;
        size_t m = OM_MIN(plen, c->klen);
        int cmp = memcmp(prev, c->key, m);
        if (plen && (cmp > 0 || (cmp == 0 && plen >= c->klen)))
            return -EBADMSG; /* blocks out of order */
        return 1;
    }
    return decode(c) ? -EBADMSG : 1;
}

static int keycmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, OM_MIN(alen, blen));
    return c ? c : (alen > blen) - (alen < blen);
}

/* The first key of block b, compared with key. */
static int first_key_cmp(const struct om_manifest *mf, uint64_t b, const char *key, size_t klen,
                         int *cmp)
{
    const uint8_t *p = mf->base + block_start(mf, b), *end = mf->base + block_end(mf, b);
    uint64_t len;
    if (get_varint(&p, end, &len) || len > (uint64_t)(end - p) || len > OM_KEY_MAX)
        return -EBADMSG;
    *cmp = keycmp((const char *)p, (size_t)len, key, klen);
    return 0;
}

/* Position c on the first entry >= key. 1 when there is one, 0 when every
 * key is smaller, -EBADMSG. */
static int cursor_seek(struct cursor *c, const char *key, size_t klen)
{
    const struct om_manifest *mf = c->mf;
    c->valid = false;
    if (mf->info.keys == 0)
        return 0;
    /* the last block whose first key is <= key (block 0 when none is) */
    uint64_t lo = 0, hi = mf->info.blocks;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int cmp;
        if (first_key_cmp(mf, mid, key, klen, &cmp))
            return -EBADMSG;
        if (cmp <= 0)
            lo = mid;
        else
            hi = mid;
    }
    cursor_block(c, lo);
    int rc;
    while ((rc = cursor_next(c)) == 1 && keycmp(c->key, c->klen, key, klen) < 0)
        ;
    return rc;
}

static uint64_t cursor_ordinal(const struct cursor *c)
{
    return c->block * c->mf->block_keys + c->i;
}

static void cursor_etag(const struct cursor *c, char out[OM_ETAG_MAX])
{
    out[0] = '\0';
    if (c->etag_form == ETAG_TEXT) {
        memcpy(out, c->etag, c->etag_len);
        out[c->etag_len] = '\0';
    } else if (c->etag_form != ETAG_NONE) {
        om_hex(c->etag, OM_MD5_LEN, out);
        if (c->etag_form > ETAG_TEXT)
            snprintf(out + 32, OM_ETAG_MAX - 32, "-%" PRIu64, c->etag_form - 2);
    }
}

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

/* The checksum of a file of len bytes whose header ends at hl: SHA-256 of
 * the blocks and the index [hl, len), then of the header after the checksum
 * [OFF_HASHED, hl), so that a writer hashes the body as it streams it and
 * the header once its counts are known. 0 or -ENOMEM. */
static int checksum(const uint8_t *b, size_t hl, size_t len, unsigned char sha[OM_SHA256_LEN])
{
    struct om_digest d;
    int rc = om_digest_init(&d, OM_DIGEST_SHA256);
    if (rc)
        return rc;
    rc = om_digest_update(&d, b + hl, len - hl);
    if (!rc)
        rc = om_digest_update(&d, b + OFF_HASHED, hl - OFF_HASHED);
    if (rc) {
        om_digest_free(&d);
        return rc;
    }
    return om_digest_final(&d, sha);
}

/* The header and the index; every block's first key in order. */
static int parse(struct om_manifest *mf, unsigned flags, char *err, size_t errlen)
{
    const uint8_t *b = mf->base;
    size_t len = mf->len;
    if (len < sizeof(magic) ? memcmp(b, magic, len) != 0 : memcmp(b, magic, sizeof(magic)) != 0)
        return fail(err, errlen, -EINVAL, "not an objmount manifest (bad magic)");
    if (len < OFF_NAMES + 4)
        return fail(err, errlen, -EIO, "truncated: %zu bytes, not even a header", len);
    mf->info.version = get_u32(b + OFF_VERSION);
    if (mf->info.version != OM_MANIFEST_VERSION)
        return fail(err, errlen, -EPROTONOSUPPORT,
                    "format version %" PRIu32 ", this objmount reads version %d", mf->info.version,
                    OM_MANIFEST_VERSION);
    mf->info.flags = get_u32(b + OFF_FLAGS);
    uint64_t size = get_u64(b + OFF_SIZE);
    /* the header's length: the bucket and prefix names end it */
    size_t blen = get_u16(b + OFF_NAMES);
    size_t plen = OFF_NAMES + 4 + blen <= len ? get_u16(b + OFF_NAMES + 2 + blen) : 0;
    mf->body_off = OFF_NAMES + 4 + blen + plen;
    if (mf->body_off > len) {
        if (size > len)
            return fail(err, errlen, -EIO, "truncated: %zu of %" PRIu64 " bytes", len, size);
        return fail(err, errlen, -EBADMSG, "malformed header");
    }
    if (!(flags & OM_MANIFEST_NO_CHECKSUM)) {
        unsigned char sha[OM_SHA256_LEN];
        if (checksum(b, mf->body_off, len, sha))
            return fail(err, errlen, -ENOMEM, "cannot compute SHA-256");
        if (memcmp(sha, b + OFF_SHA, OM_SHA256_LEN) != 0) {
            if (size > len)
                return fail(err, errlen, -EIO, "truncated: %zu of %" PRIu64 " bytes", len, size);
            return fail(err, errlen, -EBADMSG, "checksum mismatch: the file is corrupt");
        }
    }
    if (size != len)
        return fail(err, errlen, size > len ? -EIO : -EBADMSG,
                    "%s: %zu bytes, the header says %" PRIu64,
                    size > len ? "truncated" : "trailing bytes", len, size);
    mf->info.file_size = size;
    mf->info.keys = get_u64(b + OFF_KEYS);
    mf->info.built = (time_t)get_u64(b + OFF_BUILT);
    mf->index_off = get_u64(b + OFF_INDEX);
    mf->info.blocks = get_u32(b + OFF_BLOCKS);
    mf->block_keys = get_u32(b + OFF_BLOCK_KEYS);
    if (mf->block_keys == 0 || mf->index_off < mf->body_off ||
        mf->index_off > len || (len - mf->index_off) / 8 != mf->info.blocks ||
        (len - mf->index_off) % 8 ||
        mf->info.blocks != mf->info.keys / mf->block_keys + (mf->info.keys % mf->block_keys != 0))
        return fail(err, errlen, -EBADMSG, "malformed header");
    mf->bucket = strndup((const char *)b + OFF_NAMES + 2, blen);
    mf->prefix = strndup((const char *)b + OFF_NAMES + 4 + blen, plen);
    if (!mf->bucket || !mf->prefix)
        return fail(err, errlen, -ENOMEM, "out of memory");
    if (strlen(mf->bucket) != blen || strlen(mf->prefix) != plen)
        return fail(err, errlen, -EBADMSG, "malformed header (NUL in a name)");
    mf->info.bucket = mf->bucket;
    mf->info.prefix = mf->prefix;
    /* block offsets increase inside the body; first keys increase */
    uint64_t prev = mf->body_off;
    for (uint64_t i = 0; i < mf->info.blocks; i++) {
        uint64_t o = block_start(mf, i);
        if (o < prev || o >= mf->index_off || (i == 0 && o != mf->body_off))
            return fail(err, errlen, -EBADMSG, "malformed index (block %" PRIu64 ")", i);
        prev = o + 1;
    }
    return 0;
}

int om_manifest_from_buf(const void *buf, size_t len, unsigned flags, struct om_manifest **out,
                         char *err, size_t errlen)
{
    struct om_manifest *mf = calloc(1, sizeof(*mf));
    if (!mf)
        return fail(err, errlen, -ENOMEM, "out of memory");
    mf->base = buf;
    mf->len = len;
    int rc = parse(mf, flags, err, errlen);
    if (rc) {
        om_manifest_close(mf);
        return rc;
    }
    *out = mf;
    return 0;
}

int om_manifest_open(const char *path, unsigned flags, struct om_manifest **out, char *err,
                     size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, -errno, "%s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, -e, "%s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, -EINVAL, "not a regular file");
    }
    size_t len = (size_t)st.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    int e = errno;
    close(fd);
    if (len && map == MAP_FAILED)
        return fail(err, errlen, -e, "mmap: %s", strerror(e));
    static const uint8_t empty[1];
    int rc = om_manifest_from_buf(len ? map : empty, len, flags, out, err, errlen);
    if (rc) {
        if (len)
            munmap(map, len);
        return rc;
    }
    (*out)->mapped = len > 0;
    return 0;
}

void om_manifest_close(struct om_manifest *mf)
{
    if (!mf)
        return;
    if (mf->mapped)
        munmap((void *)mf->base, mf->len);
    free(mf->bucket);
    free(mf->prefix);
    free(mf);
}

const struct om_manifest_info *om_manifest_info(const struct om_manifest *mf)
{
    return &mf->info;
}

int om_manifest_lookup(const struct om_manifest *mf, const char *key, struct om_object *obj)
{
    struct cursor c = {.mf = mf};
    size_t klen = strlen(key);
    int rc = cursor_seek(&c, key, klen);
    if (rc < 0)
        return rc;
    if (rc == 0 || keycmp(c.key, c.klen, key, klen) != 0)
        return -ENOENT;
    memset(obj, 0, sizeof(*obj));
    obj->size = c.size;
    obj->mtime = (time_t)c.mtime;
    cursor_etag(&c, obj->etag);
    return 0;
}

static bool has_prefix(const struct cursor *c, const char *prefix, size_t plen)
{
    return c->klen >= plen && memcmp(c->key, prefix, plen) == 0;
}

int om_manifest_list(const struct om_manifest *mf, const char *prefix, char delimiter,
                     const char *start_after, size_t max, om_list_cb cb, void *ud,
                     char **next_token)
{
    if (next_token)
        *next_token = NULL;
    if (!prefix)
        prefix = "";
    size_t plen = strlen(prefix);
    struct cursor *c = calloc(1, sizeof(*c));
    char *skip = malloc(OM_KEY_MAX + 2);
    if (!c || !skip) {
        free(c);
        free(skip);
        return -ENOMEM;
    }
    c->mf = mf;
    int rc;
    if (start_after && strcmp(start_after, prefix) >= 0 && strlen(start_after) <= OM_KEY_MAX) {
        /* after a common prefix: past every key it rolls up */
        size_t slen = strlen(start_after);
        const char *d = delimiter && strncmp(start_after, prefix, plen) == 0
                            ? memchr(start_after + plen, delimiter, slen - plen)
                            : NULL;
        if (d) {
            slen = (size_t)(d - start_after) + 1;
            memcpy(skip, start_after, slen);
            skip[slen - 1]++;
            rc = cursor_seek(c, skip, slen);
        } else {
            rc = cursor_seek(c, start_after, slen);
            if (rc == 1 && keycmp(c->key, c->klen, start_after, slen) == 0)
                rc = cursor_next(c);
        }
    } else {
        rc = cursor_seek(c, prefix, plen);
    }
    size_t count = 0;
    uint64_t last = 0;
    bool any = false;
    while (rc == 1 && has_prefix(c, prefix, plen)) {
        /* a malformed body (read without its checksum) must not loop */
        uint64_t at = cursor_ordinal(c);
        if (any && at <= last) {
            rc = -EBADMSG;
            break;
        }
        any = true;
        last = at;
        const char *d = delimiter ? memchr(c->key + plen, delimiter, c->klen - plen) : NULL;
        if (max && count == max) {
            if (next_token && !(*next_token = strdup(skip)))
                rc = -ENOMEM;
            break;
        }
        struct om_list_entry e = {.key = c->key};
        char etag[OM_ETAG_MAX];
        int r;
        if (d) {
            size_t cplen = (size_t)(d - c->key) + 1;
            memcpy(skip, c->key, cplen);
            skip[cplen] = '\0';
            e.key = skip;
            e.is_prefix = true;
            e.etag = "";
            r = cb(ud, &e);
            skip[cplen - 1]++; /* the least key past the prefix */
            if (!r)
                rc = cursor_seek(c, skip, cplen);
            skip[cplen - 1]--;
        } else {
            memcpy(skip, c->key, c->klen + 1);
            cursor_etag(c, etag);
            e.size = c->size;
            e.mtime = (time_t)c->mtime;
            e.etag = etag;
            r = cb(ud, &e);
            if (!r)
                rc = cursor_next(c);
        }
        count++;
        if (r) {
            rc = r == OM_LIST_STOP ? 0 : r;
            break;
        }
    }
    free(c);
    free(skip);
    return rc < 0 ? rc : 0;
}

int om_manifest_list_page(void *mf, const struct om_list_params *p, om_list_cb cb, void *ud,
                          char **next_token, struct om_store_error *err)
{
    if (err)
        memset(err, 0, sizeof(*err));
    char delim = p->delimiter && *p->delimiter ? p->delimiter[0] : '\0';
    if (delim && (delim != '/' || p->delimiter[1]))
        return -EINVAL;
    const char *after = p->continuation ? p->continuation : p->start_after;
    int rc = om_manifest_list(mf, p->prefix, delim, after,
                              p->max_keys > 0 ? (size_t)p->max_keys : 0, cb, ud, next_token);
    if (rc == -EBADMSG && err)
        snprintf(err->message, sizeof(err->message), "malformed manifest");
    return rc;
}

/* ---- the writer ---- */

struct om_manifest_writer {
    int fd;
    int error;
    char *bucket, *prefix;
    time_t built;
    uint64_t off; /* where buf goes */
    uint8_t *buf;
    size_t len, cap;
    uint64_t keys;
    uint64_t *index;
    size_t nblocks, capblocks;
    char prev[OM_KEY_MAX + 1];
    size_t prevlen;
    int64_t prev_mtime;
    uint64_t header_len;
    struct om_digest sha; /* of what flush wrote: the blocks, then the index */
    bool sha_open;
};

static size_t header_len(const char *bucket, const char *prefix)
{
    return OFF_NAMES + 4 + strlen(bucket) + strlen(prefix);
}

struct om_manifest_writer *om_manifest_writer_new(int fd, const char *bucket, const char *prefix,
                                                  time_t built)
{
    if (!bucket)
        bucket = "";
    if (!prefix)
        prefix = "";
    if (strlen(bucket) > UINT16_MAX || strlen(prefix) > UINT16_MAX)
        return NULL;
    struct om_manifest_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->fd = fd;
    w->bucket = strdup(bucket);
    w->prefix = strdup(prefix);
    w->cap = 1 << 16;
    w->buf = malloc(w->cap);
    if (!w->bucket || !w->prefix || !w->buf) {
        om_manifest_writer_free(w);
        return NULL;
    }
    if (om_digest_init(&w->sha, OM_DIGEST_SHA256)) {
        om_manifest_writer_free(w);
        return NULL;
    }
    w->sha_open = true;
    w->built = built;
    w->header_len = header_len(bucket, prefix);
    w->off = w->header_len;
    return w;
}

static int flush(struct om_manifest_writer *w)
{
    if (om_digest_update(&w->sha, w->buf, w->len))
        return w->error = -ENOMEM;
    size_t done = 0;
    while (done < w->len) {
        ssize_t n = pwrite(w->fd, w->buf + done, w->len - done, (off_t)(w->off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return w->error = n < 0 ? -errno : -EIO;
        done += (size_t)n;
    }
    w->off += w->len;
    w->len = 0;
    return 0;
}

int om_manifest_writer_add(struct om_manifest_writer *w, const char *key, uint64_t size,
                           time_t mtime, const char *etag)
{
    if (w->error)
        return w->error;
    size_t klen = strlen(key), elen = etag ? strlen(etag) : 0;
    if (klen == 0 || klen > OM_KEY_MAX || elen >= OM_ETAG_MAX)
        return -EINVAL;
    if (w->keys > 0 && keycmp(key, klen, w->prev, w->prevlen) <= 0)
        return -EINVAL; /* not sorted, or a duplicate */
    /* the largest entry: 3 varints of a key, the key, 3 of attributes, an ETag */
    if (w->cap - w->len < 64 + klen + OM_ETAG_MAX && flush(w))
        return w->error;
    bool first = w->keys % OM_MANIFEST_BLOCK == 0;
    if (first) {
        if (w->nblocks == w->capblocks) {
            size_t cap = w->capblocks ? 2 * w->capblocks : 1024;
            uint64_t *v = realloc(w->index, cap * sizeof(*v));
            if (!v)
                return w->error = -ENOMEM;
            w->index = v;
            w->capblocks = cap;
        }
        w->index[w->nblocks++] = w->off + w->len;
        w->prev_mtime = 0;
    }
    uint8_t *p = w->buf + w->len;
    size_t shared = 0;
    if (!first) {
        while (shared < klen && shared < w->prevlen && key[shared] == w->prev[shared])
            shared++;
        p += put_varint(p, shared);
    }
    p += put_varint(p, klen - shared);
    memcpy(p, key + shared, klen - shared);
    p += klen - shared;
    p += put_varint(p, size);
    p += put_varint(p, zigzag((int64_t)((uint64_t)mtime - (uint64_t)w->prev_mtime)));
    unsigned char md5[OM_MD5_LEN];
    uint64_t form = etag_form(etag, md5);
    p += put_varint(p, form);
    if (form == ETAG_TEXT) {
        p += put_varint(p, elen);
        memcpy(p, etag, elen);
        p += elen;
    } else if (form != ETAG_NONE) {
        memcpy(p, md5, OM_MD5_LEN);
        p += OM_MD5_LEN;
    }
    w->len = (size_t)(p - w->buf);
    memcpy(w->prev, key, klen);
    w->prevlen = klen;
    w->prev_mtime = (int64_t)mtime;
    w->keys++;
    return 0;
}

uint64_t om_manifest_writer_bytes(const struct om_manifest_writer *w)
{
    return w->off + w->len;
}

int om_manifest_writer_finish(struct om_manifest_writer *w)
{
    if (w->error || flush(w))
        return w->error;
    if (w->nblocks > UINT32_MAX)
        return w->error = -EFBIG;
    uint64_t index_off = w->off;
    for (size_t i = 0; i < w->nblocks; i++) {
        if (w->cap - w->len < 8 && flush(w))
            return w->error;
        put_u64(w->buf + w->len, w->index[i]);
        w->len += 8;
    }
    if (flush(w))
        return w->error;
    uint64_t size = w->off;
    size_t hl = (size_t)w->header_len, blen = strlen(w->bucket), plen = strlen(w->prefix);
    uint8_t *h = calloc(1, hl);
    if (!h)
        return w->error = -ENOMEM;
    memcpy(h, magic, sizeof(magic));
    put_u32(h + OFF_VERSION, OM_MANIFEST_VERSION);
    put_u32(h + OFF_FLAGS, 0);
    put_u64(h + OFF_KEYS, w->keys);
    put_u64(h + OFF_BUILT, (uint64_t)w->built);
    put_u64(h + OFF_SIZE, size);
    put_u64(h + OFF_INDEX, index_off);
    put_u32(h + OFF_BLOCKS, (uint32_t)w->nblocks);
    put_u32(h + OFF_BLOCK_KEYS, OM_MANIFEST_BLOCK);
    put_u16(h + OFF_NAMES, (uint16_t)blen);
    memcpy(h + OFF_NAMES + 2, w->bucket, blen);
    put_u16(h + OFF_NAMES + 2 + blen, (uint16_t)plen);
    memcpy(h + OFF_NAMES + 4 + blen, w->prefix, plen);
    /* the checksum: the body as streamed, then the header after it */
    int rc = om_digest_update(&w->sha, h + OFF_HASHED, hl - OFF_HASHED) ? -ENOMEM : 0;
    w->sha_open = false;
    if (!rc)
        rc = om_digest_final(&w->sha, h + OFF_SHA) ? -ENOMEM : 0;
    else
        om_digest_free(&w->sha);
    ssize_t n = rc ? 0 : pwrite(w->fd, h, hl, 0);
    if (!rc && n != (ssize_t)hl)
        rc = n < 0 ? -errno : -EIO;
    if (!rc && ftruncate(w->fd, (off_t)size) != 0)
        rc = -errno;
    free(h);
    return w->error = rc;
}

void om_manifest_writer_free(struct om_manifest_writer *w)
{
    if (!w)
        return;
    if (w->sha_open)
        om_digest_free(&w->sha);
    free(w->bucket);
    free(w->prefix);
    free(w->buf);
    free(w->index);
    free(w);
}

static int key_order(const void *a, const void *b)
{
    return strcmp(((const struct om_manifest_key *)a)->key,
                  ((const struct om_manifest_key *)b)->key);
}

int om_manifest_build(int fd, const char *bucket, const char *prefix, time_t built,
                      struct om_manifest_key *keys, size_t n)
{
    qsort(keys, n, sizeof(*keys), key_order); /* strcmp orders by unsigned bytes */
    struct om_manifest_writer *w = om_manifest_writer_new(fd, bucket, prefix, built);
    if (!w)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i > 0 && strcmp(keys[i].key, keys[i - 1].key) == 0)
            continue;
        rc = om_manifest_writer_add(w, keys[i].key, keys[i].size, keys[i].mtime, keys[i].etag);
    }
    if (!rc)
        rc = om_manifest_writer_finish(w);
    om_manifest_writer_free(w);
    return rc;
}
