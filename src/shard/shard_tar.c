/* Tar headers to a shard index (see include/objmount/shard_tar.h).
 *
 * The parser is a small state machine over the shard's offsets: it gathers
 * a 512-byte header, or the data of an extended header (GNU 'L'/'K', PAX
 * 'x'/'g', GNU sparse extension blocks), and skips everything else (the
 * members' data and padding). need is the next byte it must see; pos the
 * next byte the caller feeds. Nothing but the current header and the
 * current extended header (at most max_ext_header bytes) is held. */
#include "objmount/shard_tar.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK OM_SHARD_BLOCK

/* The fields of a header block (offset, width). */
enum {
    H_NAME = 0,
    H_MODE = 100,
    H_UID = 108,
    H_GID = 116,
    H_SIZE = 124,
    H_MTIME = 136,
    H_CHKSUM = 148,
    H_TYPE = 156,
    H_LINK = 157,
    H_MAGIC = 257,
    H_PREFIX = 345,
    H_SPARSE_EXTENDED = 482, /* old GNU sparse: more sparse blocks follow */
    H_SPARSE_EXT_MORE = 504, /* the same flag in an extension block */
};

enum state { ST_HEADER, ST_EXT, ST_SPARSE, ST_DONE, ST_ERROR };

/* Values a PAX header gives (per member, or global). */
struct pax {
    char *path, *linkpath;
    size_t path_len, linkpath_len;
    bool has_size, has_mtime, has_uid, has_gid, sparse;
    uint64_t size;
    int64_t mtime;
    uint32_t mtime_nsec;
    uint32_t uid, gid;
};

struct om_tar_parser {
    struct om_shard_index *ix;
    enum state st;
    uint64_t pos;  /* offset of the next byte fed */
    uint64_t need; /* next byte needed; [pos, need) is skipped */
    uint8_t hdr[BLOCK];
    size_t hdr_fill;
    uint64_t hdr_off;
    /* the extended header being gathered */
    char ext_type;
    char *ext;
    size_t ext_len, ext_fill;
    uint64_t ext_off;
    /* what extended headers say of the next member */
    char *long_name, *long_link;
    size_t long_name_len, long_link_len;
    struct pax pax, global;
    bool pending; /* an extended header waits for its member */
    uint64_t headers;
    char last[101]; /* the last member's name, for messages */
    int rc;
    char err[384];
};

static void pax_clear(struct pax *x)
{
    free(x->path);
    free(x->linkpath);
    memset(x, 0, sizeof(*x));
}

static void pending_clear(struct om_tar_parser *p)
{
    free(p->long_name);
    free(p->long_link);
    p->long_name = p->long_link = NULL;
    p->long_name_len = p->long_link_len = 0;
    pax_clear(&p->pax);
    p->pending = false;
}

struct om_tar_parser *om_tar_parser_new(struct om_shard_index *ix)
{
    struct om_tar_parser *p = calloc(1, sizeof(*p));
    if (p)
        p->ix = ix;
    return p;
}

void om_tar_parser_free(struct om_tar_parser *p)
{
    if (!p)
        return;
    pending_clear(p);
    pax_clear(&p->global);
    free(p->ext);
    free(p);
}

const char *om_tar_parser_error(const struct om_tar_parser *p)
{
    return p->err;
}

uint64_t om_tar_parser_headers(const struct om_tar_parser *p)
{
    return p->headers;
}

__attribute__((format(printf, 3, 4))) static int fail(struct om_tar_parser *p, int rc,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
    if (p->last[0] && n >= 0 && (size_t)n < sizeof(p->err))
        snprintf(p->err + n, sizeof(p->err) - (size_t)n, " (after member '%s')", p->last);
    p->st = ST_ERROR;
    p->rc = rc;
    return rc;
}

static uint64_t pad(uint64_t n)
{
    return (n + BLOCK - 1) / BLOCK * BLOCK;
}

/* ---- numbers ---- */

/* A numeric field: octal digits (leading spaces, ended by a space or NUL;
 * empty is 0; what follows a NUL is ignored) or GNU base-256 (first byte 0x80 positive, 0xff
 * negative, negative only when neg is allowed). 0 or -1. */
static int parse_num(const uint8_t *f, size_t w, bool neg, int64_t *out)
{
    if (f[0] == 0x80 || f[0] == 0xff) {
        if (f[0] == 0xff && !neg)
            return -1;
        /* big-endian two's complement over the remaining bytes */
        uint64_t v = f[0] == 0xff ? UINT64_MAX : 0;
        for (size_t i = 1; i < w; i++) {
            if (f[0] == 0x80 ? v >> 55 : (v >> 55) != 0x1ff)
                return -1; /* does not fit 63 bits and a sign */
            v = (v << 8) | f[i];
        }
        *out = (int64_t)v;
        return 0;
    }
    size_t i = 0;
    while (i < w && f[i] == ' ')
        i++;
    uint64_t v = 0;
    for (; i < w && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (UINT64_MAX >> 4))
            return -1;
        v = v * 8 + (uint64_t)(f[i] - '0');
    }
    /* then spaces up to a NUL, after which anything goes (as Python's tarfile reads) */
    for (; i < w && f[i] != '\0'; i++)
        if (f[i] != ' ')
            return -1;
    if (v > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* A field's string: up to its first NUL. */
static size_t field_len(const uint8_t *f, size_t w)
{
    const uint8_t *z = memchr(f, '\0', w);
    return z ? (size_t)(z - f) : w;
}

/* ---- the start of the archive ---- */

/* A name for what a shard that is not a tar starts with, or NULL. */
static const char *compressed(const uint8_t *b)
{
    if (b[0] == 0x1f && b[1] == 0x8b)
        return "gzip";
    if (b[0] == 'B' && b[1] == 'Z' && b[2] == 'h')
        return "bzip2";
    if (memcmp(b,
               "\xfd"
               "7zXZ\0",
               6) == 0)
        return "xz";
    if (memcmp(b, "\x28\xb5\x2f\xfd", 4) == 0)
        return "zstd";
    if (memcmp(b, "\x04\x22\x4d\x18", 4) == 0)
        return "lz4";
    return NULL;
}

static bool checksum_ok(const uint8_t *h, uint64_t *stored, uint64_t *computed)
{
    int64_t want;
    uint64_t u = 0;
    int64_t s = 0;
    for (size_t i = 0; i < BLOCK; i++) {
        bool in_field = i >= H_CHKSUM && i < H_CHKSUM + 8;
        u += in_field ? ' ' : h[i];
        s += in_field ? ' ' : (int8_t)h[i];
    }
    *computed = u;
    if (parse_num(h + H_CHKSUM, 8, false, &want) != 0) {
        *stored = UINT64_MAX;
        return false;
    }
    *stored = (uint64_t)want;
    return (uint64_t)want == u || want == s;
}

static bool all_zero(const uint8_t *h)
{
    for (size_t i = 0; i < BLOCK; i++)
        if (h[i])
            return false;
    return true;
}

/* ---- PAX ---- */

/* "[-]digits[.digits]" as seconds and nanoseconds (the fraction cut to 9
 * digits). 0 or -1. */
static int parse_time(const char *s, size_t len, int64_t *sec, uint32_t *nsec)
{
    bool neg = len > 0 && s[0] == '-';
    size_t i = neg;
    size_t int_start = i;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    uint64_t whole;
    if (i == int_start || om_parse_uint_n(s + int_start, i - int_start, OM_UINT_MAX, &whole))
        return -1;
    uint64_t frac = 0;
    int digits = 0;
    if (i < len && s[i] == '.') {
        for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++)
            if (digits < 9) {
                frac = frac * 10 + (uint64_t)(s[i] - '0');
                digits++;
            }
    }
    if (i != len)
        return -1;
    for (; digits < 9; digits++)
        frac *= 10;
    if (!neg) {
        *sec = (int64_t)whole;
        *nsec = (uint32_t)frac;
    } else if (frac == 0) {
        *sec = -(int64_t)whole;
        *nsec = 0;
    } else {
        *sec = -(int64_t)whole - 1; /* -1.25 is -2 + 0.75 */
        *nsec = (uint32_t)(1000000000u - frac);
    }
    return 0;
}

static int pax_string(char **dst, size_t *dlen, const char *v, size_t vlen)
{
    char *s = malloc(vlen + 1);
    if (!s)
        return -ENOMEM;
    memcpy(s, v, vlen);
    s[vlen] = '\0';
    free(*dst);
    *dst = s;
    *dlen = vlen;
    return 0;
}

/* One "key=value" of a PAX header into x (global: only the keys that may
 * apply to every member). 0, -1 (malformed) or -ENOMEM. */
static int pax_record(struct pax *x, bool global, const char *k, size_t klen, const char *v,
                      size_t vlen)
{
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(k, s, klen) == 0)
    uint64_t n;
    if (KEY("mtime"))
        return parse_time(v, vlen, &x->mtime, &x->mtime_nsec) ? -1 : (x->has_mtime = true, 0);
    if (KEY("uid") || KEY("gid")) {
        if (om_parse_uint_n(v, vlen, UINT32_MAX, &n))
            return -1;
        if (k[0] == 'u') {
            x->uid = (uint32_t)n;
            x->has_uid = true;
        } else {
            x->gid = (uint32_t)n;
            x->has_gid = true;
        }
        return 0;
    }
    if (global)
        return 0;
    if (KEY("path"))
        return pax_string(&x->path, &x->path_len, v, vlen);
    if (KEY("linkpath"))
        return pax_string(&x->linkpath, &x->linkpath_len, v, vlen);
    if (KEY("size")) {
        if (om_parse_uint_n(v, vlen, OM_UINT_MAX, &n))
            return -1;
        x->size = n;
        x->has_size = true;
        return 0;
    }
    if (klen > 11 && memcmp(k, "GNU.sparse.", 11) == 0)
        x->sparse = true;
    return 0;
#undef KEY
}

/* The records "LEN key=value\n" of a PAX header. */
static int pax_parse(struct om_tar_parser *p, struct pax *x, bool global)
{
    const char *s = p->ext, *end = p->ext + p->ext_len;
    while (s < end) {
        /* a block of NULs may pad the end */
        if (*s == '\0') {
            while (s < end && *s == '\0')
                s++;
            if (s == end)
                break;
            goto bad;
        }
        const char *sp = memchr(s, ' ', (size_t)(end - s));
        uint64_t len;
        if (!sp || om_parse_uint_n(s, (size_t)(sp - s), (uint64_t)(end - s), &len) ||
            len < (uint64_t)(sp - s) + 4 || s[len - 1] != '\n')
            goto bad;
        const char *k = sp + 1, *rec_end = s + len - 1;
        const char *eq = memchr(k, '=', (size_t)(rec_end - k));
        if (!eq || eq == k)
            goto bad;
        int rc = pax_record(x, global, k, (size_t)(eq - k), eq + 1, (size_t)(rec_end - eq - 1));
        if (rc == -ENOMEM)
            return fail(p, rc, "PAX header at offset %" PRIu64 ": out of memory", p->ext_off);
        if (rc)
            goto bad;
        s += len;
    }
    return 0;
bad:
    return fail(p, -EBADMSG, "malformed PAX header at offset %" PRIu64 " (record at +%zu)",
                p->ext_off - BLOCK, (size_t)(s - p->ext));
}

/* ---- members ---- */

/* Remember a member's name for messages, control bytes as '?'. */
static void set_last(struct om_tar_parser *p, const char *name, size_t len)
{
    size_t n = OM_MIN(len, sizeof(p->last) - 1);
    for (size_t i = 0; i < n; i++)
        p->last[i] = (unsigned char)name[i] < 0x20 || name[i] == 0x7f ? '?' : name[i];
    p->last[n] = '\0';
}

static int add_member(struct om_tar_parser *p, const uint8_t *h, char type, uint64_t data_off,
                      uint64_t size)
{
    /* the name: PAX path, GNU long name, or the header's (with the ustar
     * prefix when the magic is POSIX's: GNU keeps times there) */
    char hname[256 + 2];
    const char *name = hname;
    size_t nlen;
    if (p->pax.path) {
        name = p->pax.path;
        nlen = p->pax.path_len;
    } else if (p->long_name) {
        name = p->long_name;
        nlen = p->long_name_len;
    } else {
        size_t plen = memcmp(h + H_MAGIC, "ustar\0", 6) == 0 ? field_len(h + H_PREFIX, 155) : 0;
        size_t blen = field_len(h + H_NAME, 100);
        nlen = 0;
        if (plen) {
            memcpy(hname, h + H_PREFIX, plen);
            hname[plen] = '/';
            nlen = plen + 1;
        }
        memcpy(hname + nlen, h + H_NAME, blen);
        nlen += blen;
    }
    const char *link = NULL;
    size_t llen = 0;
    if (p->pax.linkpath) {
        link = p->pax.linkpath;
        llen = p->pax.linkpath_len;
    } else if (p->long_link) {
        link = p->long_link;
        llen = p->long_link_len;
    } else {
        link = (const char *)h + H_LINK;
        llen = field_len(h + H_LINK, 100);
    }
    int64_t mode, uid, gid, mtime;
    if (parse_num(h + H_MODE, 8, false, &mode) || parse_num(h + H_UID, 8, false, &uid) ||
        parse_num(h + H_GID, 8, false, &gid) || parse_num(h + H_MTIME, 12, true, &mtime))
        return fail(p, -EBADMSG, "header at offset %" PRIu64 ": a malformed number",
                    data_off - BLOCK);
    struct om_shard_entry e = {
        .name = name,
        .name_len = nlen,
        .offset = data_off,
        .size = size,
        .mtime = mtime,
        .mode = (uint32_t)(mode & 07777),
        .uid = (uint32_t)uid,
        .gid = (uint32_t)gid,
    };
    const struct pax *src[] = {&p->global, &p->pax}; /* the member's own wins */
    for (int i = 0; i < 2; i++) {
        if (src[i]->has_mtime) {
            e.mtime = src[i]->mtime;
            e.mtime_nsec = src[i]->mtime_nsec;
        }
        if (src[i]->has_uid)
            e.uid = src[i]->uid;
        if (src[i]->has_gid)
            e.gid = src[i]->gid;
    }
    switch (type) {
    case '5':
    case 'D':
        e.type = OM_SHARD_DIR;
        break;
    case '2':
        e.type = OM_SHARD_SYMLINK;
        break;
    case '1':
        e.type = OM_SHARD_HARDLINK;
        break;
    default:
        e.type = OM_SHARD_FILE;
    }
    if (e.type == OM_SHARD_SYMLINK || e.type == OM_SHARD_HARDLINK) {
        e.link = link;
        e.link_len = llen;
    }
    int rc = om_shard_index_add(p->ix, &e);
    switch (rc) {
    case 0:
    case 1:
        set_last(p, name, nlen);
        return 0;
    case -EFBIG:
        if (p->ix->n >= p->ix->lim.max_members)
            return fail(p, rc, "more than %" PRIu64 " members", p->ix->lim.max_members);
        if (e.type == OM_SHARD_FILE &&
            (size > p->ix->shard_size || data_off > p->ix->shard_size - size))
            return fail(p, -EIO,
                        "member at offset %" PRIu64 " (%" PRIu64
                        " bytes) runs past the shard's end at %" PRIu64 ": truncated",
                        data_off - BLOCK, size, p->ix->shard_size);
        return fail(p, rc, "names of more than %" PRIu64 " bytes", p->ix->lim.max_name_bytes);
    case -ENAMETOOLONG:
        return fail(p, rc, "header at offset %" PRIu64 ": a name over %d bytes", data_off - BLOCK,
                    OM_SHARD_NAME_MAX);
    default:
        return fail(p, rc, "header at offset %" PRIu64 ": %s", data_off - BLOCK, strerror(-rc));
    }
}

/* Start gathering an extended header's data of size bytes at data_off. */
static int start_ext(struct om_tar_parser *p, char type, uint64_t data_off, uint64_t size)
{
    uint64_t bound = p->ix->lim.max_ext_header;
    if ((type == 'L' || type == 'K') && size > OM_SHARD_NAME_MAX + 1)
        return fail(p, -ENAMETOOLONG,
                    "GNU long name at offset %" PRIu64 " of %" PRIu64 " bytes (at most %d)",
                    data_off - BLOCK, size, OM_SHARD_NAME_MAX);
    if (size > bound)
        return fail(p, -EFBIG,
                    "extended header at offset %" PRIu64 " of %" PRIu64 " bytes (at most %" PRIu64
                    ")",
                    data_off - BLOCK, size, bound);
    free(p->ext);
    p->ext = malloc(size + 1);
    if (!p->ext)
        return fail(p, -ENOMEM, "extended header at offset %" PRIu64 ": out of memory",
                    data_off - BLOCK);
    p->ext_type = type;
    p->ext_len = (size_t)size;
    p->ext_fill = 0;
    p->ext_off = data_off;
    p->st = ST_EXT;
    if (type != 'g') /* a global header is no member's */
        p->pending = true;
    return 0;
}

/* A GNU long name's data: the name, NUL-terminated (or not). */
static int take_long(char **dst, size_t *dlen, const char *s, size_t len)
{
    size_t n = strnlen(s, len);
    char *v = malloc(n + 1);
    if (!v)
        return -ENOMEM;
    memcpy(v, s, n);
    v[n] = '\0';
    free(*dst);
    *dst = v;
    *dlen = n;
    return 0;
}

/* The extended header's data is all here. */
static int end_ext(struct om_tar_parser *p)
{
    int rc = 0;
    p->ext[p->ext_len] = '\0';
    switch (p->ext_type) {
    case 'L':
        rc = take_long(&p->long_name, &p->long_name_len, p->ext, p->ext_len);
        break;
    case 'K':
        rc = take_long(&p->long_link, &p->long_link_len, p->ext, p->ext_len);
        break;
    case 'g':
        /* applies to every later member, not to one */
        rc = pax_parse(p, &p->global, true);
        if (rc)
            return rc;
        break;
    default: /* 'x', 'X' */
        rc = pax_parse(p, &p->pax, false);
        if (rc)
            return rc;
    }
    if (rc)
        return fail(p, rc, "extended header at offset %" PRIu64 ": out of memory",
                    p->ext_off - BLOCK);
    p->need = p->ext_off + pad(p->ext_len);
    p->st = ST_HEADER;
    p->hdr_fill = 0;
    return 0;
}

/* A whole header block at p->hdr_off. Returns 0, 1 at the end, or < 0. */
static int header(struct om_tar_parser *p)
{
    const uint8_t *h = p->hdr;
    uint64_t off = p->hdr_off;
    uint64_t data_off = off + BLOCK;
    p->hdr_fill = 0;
    p->need = data_off;
    if (all_zero(h)) {
        if (p->pending)
            return fail(p, -EBADMSG,
                        "extended header before offset %" PRIu64 " belongs to no member", off);
        p->st = ST_DONE;
        p->need = off;
        return 1;
    }
    uint64_t stored, computed;
    if (!checksum_ok(h, &stored, &computed)) {
        if (off == 0 && compressed(h))
            return fail(p, -EPROTONOSUPPORT, "a %s-compressed file, not a tar", compressed(h));
        if (off == 0 && memcmp(h + H_MAGIC, "ustar", 5) != 0)
            return fail(p, -EPROTONOSUPPORT, "not a tar (no tar header at offset 0)");
        if (stored == UINT64_MAX)
            return fail(p, -EBADMSG, "header at offset %" PRIu64 ": malformed checksum field", off);
        return fail(p, -EBADMSG,
                    "header at offset %" PRIu64 ": checksum mismatch (stored %" PRIu64
                    ", computed %" PRIu64 ")",
                    off, stored, computed);
    }
    p->headers++;
    char type = (char)h[H_TYPE];
    int64_t hsize;
    if (parse_num(h + H_SIZE, 12, false, &hsize))
        return fail(p, -EBADMSG, "header at offset %" PRIu64 ": malformed size field", off);
    uint64_t size = (uint64_t)hsize;
    switch (type) {
    case 'L':
    case 'K':
    case 'x':
    case 'X': /* Solaris' name for 'x' */
    case 'g':
        if (size > p->ix->shard_size || data_off > p->ix->shard_size - size)
            return fail(p, -EIO,
                        "extended header at offset %" PRIu64
                        " runs past the shard's end at %" PRIu64 ": truncated",
                        off, p->ix->shard_size);
        if (start_ext(p, type, data_off, size))
            return p->rc;
        return size == 0 ? end_ext(p) : 0;
    case 'M':
        return fail(p, -EPROTONOSUPPORT,
                    "header at offset %" PRIu64 ": a multi-volume continuation", off);
    default:
        break;
    }
    if (p->pax.has_size)
        size = p->pax.size;
    /* header-only types (as Python's tarfile and Go's archive/tar read them) */
    bool has_data =
        !(type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6');
    if (!has_data)
        size = 0;
    if (size > p->ix->shard_size || data_off > p->ix->shard_size - size)
        return fail(p, -EIO,
                    "member at offset %" PRIu64 " (%" PRIu64
                    " bytes) runs past the shard's end at %" PRIu64 ": truncated",
                    off, size, p->ix->shard_size);
    int rc = 0;
    if (type == 'S' || p->pax.sparse) {
        p->ix->skipped.sparse++;
        if (type == 'S' && h[H_SPARSE_EXTENDED]) {
            /* extension blocks of the sparse map come before the data */
            p->st = ST_SPARSE;
            p->ext_len = (size_t)OM_MIN(size, SIZE_MAX);
            pending_clear(p);
            return 0;
        }
    } else if (type == '3' || type == '4' || type == '6' || type == 'V' || type == 'N') {
        p->ix->skipped.special++;
    } else {
        rc = add_member(p, h, type, data_off, size);
    }
    pending_clear(p);
    p->need = data_off + pad(size);
    return rc;
}

/* An extension block of an old GNU sparse member: more follow while its
 * flag is set; then the member's data (kept in ext_len) is skipped. */
static void sparse_block(struct om_tar_parser *p)
{
    uint64_t data_off = p->hdr_off + BLOCK;
    p->hdr_fill = 0;
    p->need = data_off;
    if (!p->hdr[H_SPARSE_EXT_MORE]) {
        p->st = ST_HEADER;
        p->need = data_off + pad(p->ext_len);
    }
}

int om_tar_parser_feed(struct om_tar_parser *p, uint64_t off, const void *buf, size_t len)
{
    if (p->st == ST_ERROR)
        return p->rc;
    if (p->st == ST_DONE)
        return 1;
    const uint8_t *b = buf;
    if (off > p->pos) {
        if (off > p->need)
            return fail(p, -EINVAL,
                        "bytes fed from offset %" PRIu64 " while the next header is at %" PRIu64,
                        off, p->need);
        p->pos = off;
    } else if (off < p->pos) {
        uint64_t drop = p->pos - off;
        if (drop >= len)
            return 0;
        b += drop;
        len -= (size_t)drop;
    }
    while (len > 0) {
        if (p->pos < p->need) {
            uint64_t skip = OM_MIN((uint64_t)len, p->need - p->pos);
            p->pos += skip;
            b += skip;
            len -= (size_t)skip;
            continue;
        }
        size_t n;
        if (p->st == ST_EXT) {
            n = OM_MIN(len, p->ext_len - p->ext_fill);
            memcpy(p->ext + p->ext_fill, b, n);
            p->ext_fill += n;
        } else {
            if (p->hdr_fill == 0)
                p->hdr_off = p->pos;
            n = OM_MIN(len, BLOCK - p->hdr_fill);
            memcpy(p->hdr + p->hdr_fill, b, n);
            p->hdr_fill += n;
        }
        p->pos += n;
        p->need = p->pos;
        b += n;
        len -= n;
        int rc = 0;
        if (p->st == ST_EXT && p->ext_fill == p->ext_len)
            rc = end_ext(p);
        else if (p->st == ST_SPARSE && p->hdr_fill == BLOCK)
            sparse_block(p);
        else if (p->st == ST_HEADER && p->hdr_fill == BLOCK)
            rc = header(p);
        if (rc)
            return rc;
    }
    return 0;
}

void om_tar_parser_need(const struct om_tar_parser *p, uint64_t *off, uint64_t *len)
{
    *off = p->need;
    switch (p->st) {
    case ST_EXT:
        *len = (p->ext_len - p->ext_fill) + (pad(p->ext_len) - p->ext_len) + BLOCK;
        break;
    case ST_HEADER:
    case ST_SPARSE:
        *len = p->pos < p->need ? BLOCK : BLOCK - p->hdr_fill;
        break;
    default:
        *len = 0;
    }
}

int om_tar_parser_finish(struct om_tar_parser *p)
{
    if (p->st == ST_ERROR)
        return p->rc;
    if (p->st != ST_DONE) {
        const char *where = p->pos < p->need  ? "inside a member's data"
                            : p->st == ST_EXT ? "inside an extended header"
                            : p->hdr_fill     ? "inside a header"
                                              : "before its end-of-archive marker";
        return fail(p, -EIO, "the shard ends at offset %" PRIu64 " %s: truncated", p->pos, where);
    }
    int rc = om_shard_index_finish(p->ix);
    return rc ? fail(p, rc, "out of memory") : 0;
}

int om_tar_index_buf(const void *buf, size_t len, const struct om_shard_limits *lim,
                     struct om_shard_index *ix, char *err, size_t errlen)
{
    om_shard_index_init(ix, lim, len, OM_SHARD_SRC_TAR);
    struct om_tar_parser *p = om_tar_parser_new(ix);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = om_tar_parser_feed(p, 0, buf, len);
    if (rc >= 0)
        rc = om_tar_parser_finish(p);
    if (rc)
        snprintf(err, errlen, "%s", om_tar_parser_error(p));
    om_tar_parser_free(p);
    if (rc)
        om_shard_index_free(ix);
    return rc;
}
