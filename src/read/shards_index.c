/* The index of one version of a shard, for src/read/shards.c: objmount's
 * kept index file, an index object beside the shard, or one pass over its
 * headers through the pool (see shards_int.h). */
#include "shards_int.h"

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
#include "objmount/shard_tar.h"
#include "objmount/shard_wds.h"
#include "objmount/util.h"

#define SCAN_CHUNK (1ULL << 20)          /* bytes read at a time by a pass over the headers */
#define INDEX_OBJECT_MAX (256ULL << 20)  /* largest index object read */
#define INDEX_FILE_MAX (512ULL << 20)    /* largest kept index file read */

/* cache_dir/shards/<sha256 of endpoint, bucket, key, ETag>. */
static char *index_path(const char *dir, const struct om_shard_ident *id)
{
    struct om_buf b = {0};
    if (om_buf_puts(&b, id->endpoint) || om_buf_append(&b, "", 1) || om_buf_puts(&b, id->bucket) ||
        om_buf_append(&b, "", 1) || om_buf_puts(&b, id->key) || om_buf_append(&b, "", 1) ||
        om_buf_puts(&b, id->etag)) {
        om_buf_free(&b);
        return NULL;
    }
    unsigned char sum[OM_SHA256_LEN];
    char hex[2 * OM_SHA256_LEN + 1];
    int rc = om_sha256(b.data, b.len, sum);
    om_buf_free(&b);
    if (rc)
        return NULL;
    om_hex(sum, sizeof(sum), hex);
    char *path = NULL;
    return asprintf(&path, "%s/%s.idx", dir, hex) < 0 ? NULL : path;
}

/* The kept index file: 0 (ix filled), or a negative errno (none usable). */
static int load_kept(const char *path, const struct om_shard_ident *id,
                     struct om_shard_index *ix)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    int rc = -EINVAL;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= INDEX_FILE_MAX &&
        (buf = malloc((size_t)st.st_size))) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t n = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        char err[256];
        rc = got == (size_t)st.st_size
                 ? om_shard_index_decode(buf, got, id, NULL, ix, err, sizeof(err))
                 : -EIO;
        if (rc && rc != -EIO) {
            om_warn("shards: kept index %s of %s not used (%s): reading the shard again", path,
                    id->key, err);
            unlink(path);
        }
    }
    free(buf);
    close(fd);
    return rc;
}

static void keep_index(const char *dir, const char *path, const struct om_shard_ident *id,
                       const struct om_shard_index *ix)
{
    struct om_buf b = {0};
    if (om_shard_index_encode(ix, id, &b)) {
        om_buf_free(&b);
        return;
    }
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.%d.tmp", path, (int)getpid()) < 0) {
        om_buf_free(&b);
        return;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    size_t done = 0;
    while (ok && done < b.len) {
        ssize_t n = write(fd, b.data + done, b.len - done);
        ok = n > 0;
        if (ok)
            done += (size_t)n;
    }
    if (fd >= 0 && close(fd))
        ok = false;
    if (!ok || rename(tmp, path)) {
        om_warn("shards: cannot keep the index of %s in %s (%s)", id->key, dir,
                strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    om_buf_free(&b);
}

/* An index object beside the shard, not older than it. 0 (ix filled) or a
 * negative errno. */
static int load_index_object(struct om_store *store, const char *key, uint64_t size,
                             time_t mtime, struct om_shard_index *ix)
{
    char dali[4096], wids[4096];
    if (om_shard_wds_index_keys(key, dali, sizeof(dali), wids, sizeof(wids)))
        return -ENAMETOOLONG;
    const char *keys[2] = {wids, dali};
    for (int k = 0; k < 2; k++) {
        struct om_object obj;
        struct om_store_error e;
        if (om_store_head(store, keys[k], &obj, &e))
            continue;
        if (obj.size == 0 || obj.size > INDEX_OBJECT_MAX || obj.mtime < mtime)
            continue;
        char *buf = malloc(obj.size);
        if (!buf)
            return -ENOMEM;
        ssize_t n = om_store_get_range(store, keys[k], 0, obj.size,
                                       obj.etag[0] ? obj.etag : NULL, buf, NULL, &e);
        int rc = -EIO;
        char err[256] = "";
        if (n == (ssize_t)obj.size)
            rc = k == 0 ? om_shard_wds_wids(buf, obj.size, size, NULL, ix, err, sizeof(err))
                        : om_shard_wds_dali(buf, obj.size, size, NULL, ix, err, sizeof(err));
        free(buf);
        if (rc == 0)
            return 0;
        om_warn("shards: index object %s not used for %s (%s)", keys[k], key,
                err[0] ? err : strerror(-rc));
    }
    return -ENOENT;
}

/* One pass over the shard's headers through the ranged handle (whose
 * bytes go to the pool and the data cache), hopping over members more
 * than skip_max ahead. 0 or a negative errno with err. */
static int scan_headers(struct om_reader *ranges, uint64_t size, struct om_shard_index *ix,
                        char *err, size_t errlen)
{
    om_shard_index_init(ix, NULL, size, OM_SHARD_SRC_TAR);
    struct om_tar_parser *p = om_tar_parser_new(ix);
    char *buf = malloc(SCAN_CHUNK);
    if (!p || !buf) {
        om_tar_parser_free(p);
        free(buf);
        om_shard_index_free(ix);
        return -ENOMEM;
    }
    int rc = 0;
    for (;;) {
        uint64_t off, len;
        om_tar_parser_need(p, &off, &len);
        if (len == 0 || off >= size)
            break;
        uint64_t n = OM_MIN(OM_MAX(len, SCAN_CHUNK), size - off);
        n = OM_MIN(n, SCAN_CHUNK);
        if (n < len && len <= SCAN_CHUNK)
            n = OM_MIN(len, size - off);
        ssize_t got = om_reader_read(ranges, buf, n, off);
        if (got < 0) {
            rc = (int)got;
            snprintf(err, errlen, "reading bytes %" PRIu64 "-%" PRIu64 ": %s", off, off + n,
                     strerror((int)-got));
            break;
        }
        if (got == 0)
            break;
        rc = om_tar_parser_feed(p, off, buf, (size_t)got);
        if (rc < 0) {
            snprintf(err, errlen, "%s", om_tar_parser_error(p));
            break;
        }
        if (rc == 1) {
            rc = 0;
            break;
        }
        if (len > SCAN_CHUNK && (uint64_t)got < len)
            continue; /* an extended header longer than a chunk: the parser keeps its part */
    }
    if (rc == 0) {
        rc = om_tar_parser_finish(p);
        if (rc)
            snprintf(err, errlen, "%s", om_tar_parser_error(p));
    }
    om_tar_parser_free(p);
    free(buf);
    if (rc)
        om_shard_index_free(ix);
    return rc;
}

static void log_skipped(const char *key, const struct om_shard_index *ix)
{
    const struct om_shard_skipped *k = &ix->skipped;
    if (k->sparse || k->special || k->bad_name || k->dangling || k->shadowed)
        om_info("shards: %s: not listed: %u sparse, %u devices/FIFOs/labels, %u bad names, %u "
                "dangling hard links, %u shadowed names",
                key, k->sparse, k->special, k->bad_name, k->dangling, k->shadowed);
}

static const char *source_name(enum om_shard_source s)
{
    return s == OM_SHARD_SRC_DALI ? "DALI index object"
           : s == OM_SHARD_SRC_WIDS ? "wids index object"
                                    : "tar headers";
}

int om_shards_load_index(struct om_shards_load *ld, struct om_shard_index *ix)
{
    const struct om_shard_ident *id = ld->id;
    ld->scan_gets = 0;
    char *path = ld->dir && id->etag[0] ? index_path(ld->dir, id) : NULL;
    if (path && load_kept(path, id, ix) == 0) {
        free(path);
        ld->from = OM_SHARDS_FROM_KEPT;
        return 0;
    }
    int rc = load_index_object(ld->store, id->key, id->size, ld->mtime, ix);
    if (rc == -ENOMEM) {
        free(path);
        return rc;
    }
    ld->from = rc == 0 ? OM_SHARDS_FROM_OBJECT : OM_SHARDS_FROM_HEADERS;
    if (rc) {
        char err[512] = "";
        uint64_t g0 = om_reader_object_gets(ld->ranges);
        rc = scan_headers(ld->ranges, id->size, ix, err, sizeof(err));
        ld->scan_gets = om_reader_object_gets(ld->ranges) - g0;
        if (rc) {
            om_warn("shards: %s is shown as a file, not a directory: %s (%s)", id->key,
                    err[0] ? err : strerror(-rc), strerror(-rc));
            free(path);
            return rc;
        }
    }
    if (path)
        keep_index(ld->dir, path, id, ix);
    free(path);
    om_info("shards: %s: %zu members (%" PRIu64 " listed) from its %s", id->key, ix->n,
            ix->listed, source_name(ix->source));
    log_skipped(id->key, ix);
    return 0;
}
