/* Sidecars of staged and recovered data: format, parse, atomic write. */
#include "objmount/sidecar.h"
#include "objmount/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static const char header[] = "objmount-sidecar 1\n";

static bool plain_byte(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != '%';
}

static int put_field(struct om_buf *b, const char *name, const char *value)
{
    int rc = om_buf_printf(b, "%s=", name);
    for (const unsigned char *p = (const unsigned char *)value; !rc && *p;) {
        const unsigned char *run = p;
        while (*p && plain_byte(*p))
            p++;
        if (p > run)
            rc = om_buf_append(b, run, (size_t)(p - run));
        if (!rc && *p)
            rc = om_buf_printf(b, "%%%02X", *p++);
    }
    return rc ? rc : om_buf_puts(b, "\n");
}

int om_sidecar_format(const struct om_sidecar *s, struct om_buf *out)
{
    char num[32];
    int rc = om_buf_puts(out, header);
    if (!rc)
        rc = put_field(out, "state", s->state);
    if (!rc)
        rc = put_field(out, "bucket", s->bucket);
    if (!rc)
        rc = put_field(out, "key", s->key);
    if (!rc)
        rc = put_field(out, "endpoint", s->endpoint);
    snprintf(num, sizeof(num), "%" PRIu64, s->size);
    if (!rc)
        rc = put_field(out, "size", num);
    if (!rc)
        rc = put_field(out, "md5", s->md5);
    if (!rc)
        rc = put_field(out, "base_exists", s->base_exists ? "1" : "0");
    if (!rc)
        rc = put_field(out, "base_etag", s->base_etag);
    if (!rc)
        rc = put_field(out, "upload_id", s->upload_id);
    if (!rc)
        rc = put_field(out, "time", s->time);
    snprintf(num, sizeof(num), "%ld", s->pid);
    if (!rc)
        rc = put_field(out, "pid", num);
    if (!rc)
        rc = put_field(out, "last_error", s->last_error);
    snprintf(num, sizeof(num), "%u", s->mode);
    if (!rc && s->has_mode)
        rc = put_field(out, "mode", num);
    return rc;
}

/* Decode [v, end) into out (size n, NUL-terminated). */
static int decode(const char *v, const char *end, char *out, size_t n)
{
    size_t k = 0;
    while (v < end) {
        int c = (unsigned char)*v++;
        if (c == '%') {
            bool two = end - v >= 2;
            int hi = two ? om_hexval(v[0]) : -1, lo = two ? om_hexval(v[1]) : -1;
            if (hi < 0 || lo < 0)
                return -EINVAL;
            c = hi * 16 + lo;
            v += 2;
        }
        if (c == 0 || k + 1 >= n)
            return -EINVAL;
        out[k++] = (char)c;
    }
    out[k] = '\0';
    return 0;
}

int om_sidecar_parse(const char *text, size_t len, struct om_sidecar *out)
{
    memset(out, 0, sizeof(*out));
    size_t hl = sizeof(header) - 1;
    if (len < hl || memcmp(text, header, hl) != 0)
        return -EINVAL;
    const char *p = text + hl, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        if (eol == p) {
            p++;
            continue;
        }
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        if (!eq)
            return -EINVAL;
        char name[32], num[32];
        size_t nl = (size_t)(eq - p);
        if (nl == 0 || nl >= sizeof(name))
            return -EINVAL;
        memcpy(name, p, nl);
        name[nl] = '\0';
        const char *v = eq + 1;
        struct {
            const char *name;
            char *dst;
            size_t n;
        } strs[] = {
            {"state", out->state, sizeof(out->state)},
            {"bucket", out->bucket, sizeof(out->bucket)},
            {"key", out->key, sizeof(out->key)},
            {"endpoint", out->endpoint, sizeof(out->endpoint)},
            {"md5", out->md5, sizeof(out->md5)},
            {"base_etag", out->base_etag, sizeof(out->base_etag)},
            {"upload_id", out->upload_id, sizeof(out->upload_id)},
            {"time", out->time, sizeof(out->time)},
            {"last_error", out->last_error, sizeof(out->last_error)},
        };
        bool known = false;
        for (size_t i = 0; i < OM_ARRAY_LEN(strs) && !known; i++) {
            if (strcmp(name, strs[i].name) == 0) {
                known = true;
                if (decode(v, eol, strs[i].dst, strs[i].n))
                    return -EINVAL;
            }
        }
        uint64_t x, max = 0;
        uint64_t *dst = &x;
        if (strcmp(name, "size") == 0)
            max = INT64_MAX, dst = &out->size;
        else if (strcmp(name, "pid") == 0)
            max = INT32_MAX;
        else if (strcmp(name, "mode") == 0)
            max = 0177777;
        else if (strcmp(name, "base_exists") == 0)
            max = 1;
        if (!known && max) { /* a number */
            if (decode(v, eol, num, sizeof(num)) || om_parse_uint(num, max, dst))
                return -EINVAL;
            if (strcmp(name, "pid") == 0)
                out->pid = (long)x;
            else if (strcmp(name, "mode") == 0)
                out->has_mode = true, out->mode = (unsigned)x;
            else if (strcmp(name, "base_exists") == 0)
                out->has_base = true, out->base_exists = x == 1;
        }
        p = eol + 1;
    }
    return out->key[0] ? 0 : -EINVAL;
}

int om_sidecar_write(const char *path, const struct om_sidecar *s, bool durable)
{
    struct om_buf b = {0};
    char *tmp = NULL;
    int rc = om_sidecar_format(s, &b);
    if (!rc && asprintf(&tmp, "%s.tmp", path) < 0) {
        tmp = NULL;
        rc = -ENOMEM;
    }
    int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (!rc && fd < 0)
        rc = -errno;
    for (size_t at = 0; !rc && at < b.len;) {
        ssize_t n = write(fd, b.data + at, b.len - at);
        if (n < 0)
            rc = -errno;
        else
            at += (size_t)n;
    }
    if (!rc && durable && fsync(fd) != 0)
        rc = -errno;
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc && tmp)
        unlink(tmp);
    free(tmp);
    om_buf_free(&b);
    return rc;
}

int om_sidecar_read(const char *path, struct om_sidecar *s)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    char *text = malloc(OM_SIDECAR_MAX + 1);
    size_t n = 0;
    int rc = text ? 0 : -ENOMEM;
    while (!rc && n <= OM_SIDECAR_MAX) {
        ssize_t r = read(fd, text + n, OM_SIDECAR_MAX + 1 - n);
        if (r < 0)
            rc = -errno;
        else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    close(fd);
    if (!rc)
        rc = n > OM_SIDECAR_MAX ? -EINVAL : om_sidecar_parse(text, n, s);
    free(text);
    return rc;
}

char *om_sidecar_path(const char *data_path)
{
    size_t n = strlen(data_path);
    if (n < 5 || strcmp(data_path + n - 5, ".data") != 0)
        return NULL;
    char *out = NULL;
    if (asprintf(&out, "%.*s%s", (int)(n - 5), data_path, OM_SIDECAR_SUFFIX) < 0)
        return NULL;
    return out;
}

enum om_sidecar_base om_sidecar_base_check(const struct om_sidecar *s, bool exists_now,
                                           const char *etag_now)
{
    if (!s->has_base)
        return OM_BASE_UNKNOWN;
    if (!s->base_exists)
        return exists_now ? OM_BASE_CREATED : OM_BASE_UNCHANGED;
    if (!exists_now)
        return OM_BASE_REMOVED;
    return strcmp(s->base_etag, etag_now) == 0 ? OM_BASE_UNCHANGED : OM_BASE_CHANGED;
}

int om_sidecar_check_data(const struct om_sidecar *s, int fd, char *why, size_t whylen)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -errno;
    if ((uint64_t)st.st_size != s->size) {
        snprintf(why, whylen, "the data has %" PRIu64 " bytes, its sidecar says %" PRIu64,
                 (uint64_t)st.st_size, s->size);
        return -EBADMSG;
    }
    if (!s->md5[0])
        return -ENODATA;
    unsigned char md5[OM_MD5_LEN];
    char hex[2 * OM_MD5_LEN + 1];
    int rc = om_digest_fd_range(OM_DIGEST_MD5, fd, 0, s->size, md5);
    if (rc)
        return rc;
    om_hex(md5, OM_MD5_LEN, hex);
    if (strcasecmp(hex, s->md5) != 0) {
        snprintf(why, whylen, "the data's MD5 is %s, its sidecar says %s", hex, s->md5);
        return -EBADMSG;
    }
    return 0;
}
