/* The manifest of a mount: a local file, or a key of the bucket fetched
 * into the cache directory; checked against what is mounted. */
#include "objmount/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "objmount/digest.h"
#include "objmount/log.h"
#include "objmount/util.h"

/* One GET of up to this many bytes fetches a manifest (2 million keys);
 * a larger one takes a second GET of the rest, guarded by the ETag. */
#define FETCH_FIRST (64ULL << 20)

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Where s3:KEY of this endpoint and bucket is kept: dir/manifests/HASH. */
static char *cached_path(const struct om_manifest_mount *mm, const char *key)
{
    char *id = NULL, *dir = NULL, *path = NULL;
    unsigned char sha[OM_SHA256_LEN];
    char hex[2 * OM_SHA256_LEN + 1];
    if (asprintf(&id, "%s\n%s\n%s", mm->endpoint, mm->bucket, key) < 0)
        return NULL;
    int rc = om_sha256(id, strlen(id), sha);
    free(id);
    if (rc || asprintf(&dir, "%s/manifests", mm->cache_dir) < 0)
        return NULL;
    /* the cache directory and its parents, private */
    for (char *s = strchr(dir + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(dir, 0700);
        *s = '/';
    }
    om_hex(sha, 16, hex);
    if ((mkdir(dir, 0700) == 0 || errno == EEXIST) && asprintf(&path, "%s/%s", dir, hex) < 0)
        path = NULL;
    free(dir);
    return path;
}

static int fetch(const struct om_manifest_mount *mm, const char *key, const char *path, char *err,
                 size_t errlen)
{
    char *buf = malloc(FETCH_FIRST);
    if (!buf)
        return -ENOMEM;
    struct om_object obj;
    struct om_store_error e = {0};
    ssize_t n = om_store_get_range(mm->store, key, 0, FETCH_FIRST, NULL, buf, &obj, &e);
    uint64_t size = n >= 0 ? (uint64_t)n : 0;
    if (n == (ssize_t)FETCH_FIRST && obj.size > FETCH_FIRST) {
        char *more = realloc(buf, (size_t)obj.size);
        n = more ? om_store_get_range(mm->store, key, FETCH_FIRST, obj.size - FETCH_FIRST, obj.etag,
                                   more + FETCH_FIRST, NULL, &e)
                 : -ENOMEM;
        buf = more ? more : buf;
        size = n >= 0 ? obj.size : 0;
    }
    if (n < 0) {
        snprintf(err, errlen, "manifest s3:%s: %s (HTTP %ld%s%s)", key, strerror((int)-n), e.status,
                 e.code[0] ? " " : "", e.code);
        free(buf);
        return (int)n;
    }
    char *tmp = NULL;
    int rc = asprintf(&tmp, "%s.%d.tmp", path, (int)getpid()) < 0 ? -ENOMEM : 0;
    int fd = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (!rc && fd < 0)
        rc = -errno;
    if (!rc)
        rc = write_all(fd, buf, (size_t)size);
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc) {
        snprintf(err, errlen, "manifest s3:%s: cannot store it in %s: %s", key, path,
                 strerror(-rc));
        if (tmp)
            unlink(tmp);
    } else {
        om_info("manifest s3:%s: %" PRIu64 " bytes fetched into %s", key, size, path);
    }
    free(tmp);
    free(buf);
    return rc;
}

int om_manifest_open_for_mount(const struct om_manifest_mount *mm, struct om_manifest **out,
                               char *err, size_t errlen)
{
    const char *path = mm->spec;
    char *cached = NULL;
    char why[256];
    int rc = 0;
    if (strncmp(mm->spec, "s3:", 3) == 0) {
        if (!(path = cached = cached_path(mm, mm->spec + 3))) {
            snprintf(err, errlen, "manifest %s: cannot make %s/manifests", mm->spec, mm->cache_dir);
            return -EIO;
        }
        if ((rc = fetch(mm, mm->spec + 3, path, err, errlen)) != 0) {
            free(cached);
            return rc;
        }
    }
    rc = om_manifest_open(path, 0, out, why, sizeof(why));
    if (rc) {
        snprintf(err, errlen, "manifest %s: %s", mm->spec, why);
        free(cached);
        return rc;
    }
    const struct om_manifest_info *info = om_manifest_info(*out);
    if (strcmp(info->bucket, mm->bucket) != 0 ||
        strncmp(mm->prefix, info->prefix, strlen(info->prefix)) != 0) {
        snprintf(err, errlen,
                 "manifest %s was built from %s:%s, which does not hold the mount of %s:%s",
                 mm->spec, info->bucket, info->prefix, mm->bucket, mm->prefix);
        om_manifest_close(*out);
        *out = NULL;
        free(cached);
        return -EINVAL;
    }
    char when[32];
    struct tm tm;
    gmtime_r(&info->built, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    om_info("manifest %s: %" PRIu64 " keys of %s:%s, built %s; no LIST or HEAD is sent", mm->spec,
            info->keys, info->bucket, info->prefix, when);
    free(cached);
    return 0;
}
