/* ETags in the namespace: the usual forms (a plain MD5, md5-N of multipart
 * uploads) kept as 16 bytes instead of their text, so that a million listed
 * names cost a million times less. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/util.h"
#include "meta_int.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase would not round-trip: text */
}

enum mi_etag_kind mi_etag_parse(const char *etag, uint8_t md5[16], uint16_t *parts)
{
    if (!etag || !etag[0])
        return MI_ETAG_NONE;
    for (int k = 0; k < 16; k++) {
        int hi = hex_value(etag[2 * k]), lo = hi < 0 ? -1 : hex_value(etag[2 * k + 1]);
        if (hi < 0 || lo < 0)
            return MI_ETAG_TEXT;
        md5[k] = (uint8_t)(hi << 4 | lo);
    }
    const char *rest = etag + 32;
    if (!rest[0]) {
        *parts = 0;
        return MI_ETAG_MD5;
    }
    if (rest[0] != '-' || rest[1] < '1' || rest[1] > '9')
        return MI_ETAG_TEXT;
    unsigned long n = 0;
    for (const char *p = rest + 1; *p; p++) {
        if (*p < '0' || *p > '9' || p - rest > 5)
            return MI_ETAG_TEXT;
        n = n * 10 + (unsigned long)(*p - '0');
    }
    if (n > UINT16_MAX)
        return MI_ETAG_TEXT;
    *parts = (uint16_t)n;
    return MI_ETAG_MULTI;
}

void mi_etag_format(enum mi_etag_kind kind, const uint8_t md5[16], uint16_t parts,
                    char out[OM_ETAG_MAX])
{
    static const char digits[] = "0123456789abcdef";
    if (kind != MI_ETAG_MD5 && kind != MI_ETAG_MULTI) {
        out[0] = '\0';
        return;
    }
    for (int k = 0; k < 16; k++) {
        out[2 * k] = digits[md5[k] >> 4];
        out[2 * k + 1] = digits[md5[k] & 15];
    }
    out[32] = '\0';
    if (kind == MI_ETAG_MULTI)
        snprintf(out + 32, OM_ETAG_MAX - 32, "-%u", (unsigned)parts);
}

void mi_inode_etag(const struct inode *i, char out[OM_ETAG_MAX])
{
    if (i->etag_kind == MI_ETAG_TEXT)
        om_strlcpy(out, i->etag.text, OM_ETAG_MAX);
    else
        mi_etag_format(i->etag_kind, i->etag.md5, i->etag_parts, out);
}

/* Whether i's ETag is etag. */
static bool inode_etag_is(const struct inode *i, const char *etag)
{
    char now[OM_ETAG_MAX];
    mi_inode_etag(i, now);
    return strcmp(now, etag ? etag : "") == 0;
}

void mi_inode_set_etag(struct om_meta *m, struct inode *i, const char *etag)
{
    if (i->cached_is_etag && !inode_etag_is(i, etag)) {
        /* the page cache keeps the old version: remember which */
        char old[OM_ETAG_MAX];
        mi_inode_etag(i, old);
        struct inode_extra *x = mi_extra(m, i);
        char *keep = x ? strdup(old) : NULL;
        if (x) {
            mi_mem_free(&m->mem, x->cached_etag);
            mi_mem_charge(&m->mem, keep);
            x->cached_etag = keep; /* NULL: "", the next open drops the cache */
        }
        i->cached_is_etag = false;
    }
    if (i->etag_kind == MI_ETAG_TEXT)
        mi_mem_free(&m->mem, i->etag.text);
    uint8_t md5[16];
    uint16_t parts = 0;
    enum mi_etag_kind kind = mi_etag_parse(etag, md5, &parts);
    if (kind == MI_ETAG_TEXT) {
        char *text = strndup(etag, OM_ETAG_MAX - 1);
        mi_mem_charge(&m->mem, text);
        i->etag.text = text;
        i->etag_kind = text ? MI_ETAG_TEXT : MI_ETAG_NONE;
        return;
    }
    memcpy(i->etag.md5, md5, sizeof(md5));
    i->etag_parts = parts;
    i->etag_kind = kind;
}

void mi_dentry_etag(const struct dentry *d, char out[OM_ETAG_MAX])
{
    if (d->etag_kind == MI_ETAG_TEXT)
        om_strlcpy(out, d->name + strlen(d->name) + 1, OM_ETAG_MAX);
    else
        mi_etag_format(d->etag_kind, d->md5, d->etag_parts, out);
}

bool mi_dentry_set_etag(struct dentry *d, const char *etag)
{
    uint8_t md5[16];
    uint16_t parts = 0;
    enum mi_etag_kind kind = mi_etag_parse(etag, md5, &parts);
    if (kind == MI_ETAG_TEXT) {
        size_t len = OM_MIN(strlen(etag), (size_t)OM_ETAG_MAX - 1);
        if (len >= d->etag_room)
            return false;
        char *text = d->name + strlen(d->name) + 1;
        memcpy(text, etag, len);
        text[len] = '\0';
        d->etag_kind = MI_ETAG_TEXT;
        return true;
    }
    memcpy(d->md5, md5, sizeof(md5));
    d->etag_parts = parts;
    d->etag_kind = kind;
    return true;
}
