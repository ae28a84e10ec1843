/* Option parsing, environment and validation. */
#include "objmount/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "objmount/url.h"
#include "objmount/util.h"

enum opt_kind {
    K_STRING, /* char * */
    K_FLAG,   /* bool; "opt" or "opt=yes|no" */
    K_COUNT,  /* uint64_t */
    K_SIZE,   /* uint64_t bytes, with suffixes */
    K_MS,     /* uint64_t milliseconds, from a duration ("5", "5s", "500ms") */
    K_OCTAL,  /* uint64_t, octal digits */
    K_SPECIAL,
};

struct opt {
    struct om_option_info info;
    enum opt_kind kind;
    size_t offset;
    uint64_t min, max;
};

#define OPT(name, arg, kind, field, min, max, help)                                                \
    {{name, arg, help}, kind, offsetof(struct om_config, field), min, max}
#define SPECIAL(name, arg, help)                                                                   \
    {{name, arg, help}, K_SPECIAL, 0, 0, 0}

static const struct opt options[] = {
    OPT("endpoint", "URL", K_STRING, endpoint, 0, 0,
        "S3 endpoint, http(s)://host[:port][/path-prefix]; AIStore's S3 API: "
        "http://gateway:port/s3; for ais://BUCKET the cluster: http://gateway:port"),
    OPT("region", "NAME", K_STRING, region, 0, 0, "region to sign for (default us-east-1)"),
    SPECIAL("path_style", NULL, "address the bucket in the path: http://host/bucket/key"),
    SPECIAL("virtual_host", NULL, "address the bucket in the host name: http://bucket.host/key"),
    OPT("ca_bundle", "PATH", K_STRING, ca_bundle, 0, 0,
        "CA certificates for https endpoints (default: AWS_CA_BUNDLE, else the system store)"),
    OPT("no_check_certificate", NULL, K_FLAG, no_check_certificate, 0, 0,
        "do not verify the TLS certificate of the endpoint (insecure)"),
    OPT("proxy", "URL", K_STRING, proxy, 0, 0,
        "HTTP proxy (default: the usual *_proxy variables; loopback is always direct)"),
    OPT("redirect_hosts", "HOSTS", K_STRING, redirect_hosts, 0, 0,
        "hosts a redirect may take credentials to besides the endpoint's: names, *.suffix, "
        "IP addresses or CIDRs separated by ';' (default: none; *.amazonaws.com on AWS)"),
    OPT("credentials", "PATH", K_STRING, credentials, 0, 0,
        "credentials file, mode 0600: ACCESS_KEY:SECRET lines (s3fs format) or AWS ini"),
    OPT("aws_profile", "NAME", K_STRING, aws_profile, 0, 0,
        "profile of ~/.aws/credentials and ~/.aws/config to use"),
    OPT("anonymous", NULL, K_FLAG, anonymous, 0, 0, "send unsigned requests (public buckets)"),
    OPT("connect_timeout", "SECONDS", K_MS, connect_timeout_ms, 1, 600000,
        "bound on opening a connection (default 5)"),
    OPT("stall_timeout", "SECONDS", K_MS, stall_timeout_ms, 1000, 3600000,
        "abort a request when no byte moves for this long (default 30)"),
    OPT("request_timeout", "SECONDS", K_MS, request_timeout_ms, 0, 86400000,
        "bound on one attempt of a request, 0 = none (default 900)"),
    OPT("retries", "N", K_COUNT, retries, 0, 100,
        "attempts after the first for transient failures (default 5)"),
    OPT("retry_base", "SECONDS", K_MS, retry_base_ms, 1, 60000,
        "first backoff ceiling; doubles per attempt, full jitter (default 0.1)"),
    OPT("retry_max", "SECONDS", K_MS, retry_max_ms, 1, 600000,
        "largest backoff between attempts (default 10)"),
    OPT("max_connections", "N", K_COUNT, max_connections, 1, 1024,
        "parallel connections to the endpoint (default 64)"),
    OPT("max_redirects", "N", K_COUNT, max_redirects, 0, 15,
        "redirect hops followed per request (default 5)"),
    OPT("sign_payload", NULL, K_FLAG, sign_payload, 0, 0,
        "sign the SHA-256 of file bodies too (default: UNSIGNED-PAYLOAD plus Content-MD5)"),
    SPECIAL("log_level", "LEVEL", "error, warn, info or debug (default warn)"),
    OPT("ro", NULL, K_FLAG, ro, 0, 0, "mount read-only: every write is refused with EROFS"),
    SPECIAL("rw", NULL, "mount read-write (the default)"),
    SPECIAL("nosuid", NULL, "ignore set-user-ID bits (FUSE mounts always do)"),
    SPECIAL("suid", NULL, "accepted for fstab; FUSE mounts ignore set-user-ID bits"),
    SPECIAL("nodev", NULL, "no device files (FUSE mounts never have them)"),
    SPECIAL("dev", NULL, "accepted for fstab; FUSE mounts have no device files"),
    SPECIAL("noexec", NULL, "do not allow executing files from the mount"),
    SPECIAL("exec", NULL, "allow executing files (the default)"),
    SPECIAL("noatime", NULL, "accepted for fstab: access times are never stored"),
    SPECIAL("atime", NULL, "accepted for fstab: access times are never stored"),
    SPECIAL("relatime", NULL, "accepted for fstab: access times are never stored"),
    SPECIAL("nodiratime", NULL, "accepted for fstab: access times are never stored"),
    SPECIAL("sync", NULL, "accepted for fstab: every close already commits"),
    SPECIAL("async", NULL, "accepted for fstab: every close already commits"),
    OPT("allow_other", NULL, K_FLAG, allow_other, 0, 0,
        "let users other than the mounting one use the mount (needs user_allow_other in "
        "/etc/fuse.conf for non-root)"),
    OPT("default_permissions", NULL, K_FLAG, default_permissions, 0, 0,
        "let the kernel check permissions against mode, uid and gid"),
    OPT("uid", "UID", K_COUNT, uid, 0, 4294967294ULL,
        "owner of every file (default: the object's x-amz-meta-uid, else the mounting user)"),
    OPT("gid", "GID", K_COUNT, gid, 0, 4294967294ULL,
        "group of every file (default: the object's x-amz-meta-gid, else the mounting group)"),
    OPT("umask", "OCTAL", K_OCTAL, umask, 0, 0777, "permission bits to clear (default 022)"),
    OPT("file_mode", "OCTAL", K_OCTAL, file_mode, 0, 07777,
        "permissions of files without x-amz-meta-mode (default 0666 & ~umask)"),
    OPT("dir_mode", "OCTAL", K_OCTAL, dir_mode, 0, 07777,
        "permissions of directories (default 0777 & ~umask)"),
    OPT("profile", "NAME", K_STRING, profile, 0, 0,
        "tuning profile: 'training' caches metadata for the whole mount and keeps the page "
        "cache across opens (data sets that do not change during a run)"),
    OPT("attr_timeout", "SECONDS", K_MS, attr_timeout_ms, 0, 31536000000ULL,
        "how long sizes, times and ETags are trusted (default 10; training: 1 day)"),
    OPT("entry_timeout", "SECONDS", K_MS, entry_timeout_ms, 0, 31536000000ULL,
        "how long names and directory listings are trusted (default 10; training: 1 day)"),
    OPT("negative_timeout", "SECONDS", K_MS, negative_timeout_ms, 0, 31536000000ULL,
        "how long a missing name is remembered (default 5; training: 1 day)"),
    OPT("manifest", "PATH|s3:KEY", K_STRING, manifest, 0, 0,
        "answer every listing and lookup from a manifest (objmountctl manifest build): a local "
        "file, or s3:KEY in the mounted bucket fetched with one GET; read-only, no LIST and no "
        "HEAD, metadata trusted for the whole mount"),
    OPT("keep_cache", NULL, K_FLAG, keep_cache, 0, 0,
        "keep the kernel page cache across opens without comparing ETags"),
    OPT("metadata", "HOW", K_STRING, metadata, 0, 0,
        "where modes, owners and symlink types come from: 'lookup' (a HEAD when one name is "
        "looked up; listings for ls -l; default), 'head' (a HEAD for every name, as s3fs-fuse; "
        "exact everywhere) or 'listing' (never a HEAD; training)"),
    OPT("memory_limit", "SIZE", K_SIZE, memory_limit, 16ULL << 20, 1ULL << 40,
        "budget of read buffers, shared by all open files (default: RAM/8, 256 MiB to 4 GiB)"),
    OPT("metadata_memory", "SIZE|off", K_STRING, metadata_memory, 0, 0,
        "bytes of names, attributes and listings kept; past it listings are dropped and the "
        "kernel is asked to forget unused names, then both are fetched again when needed "
        "(default: RAM/8, 256 MiB to 8 GiB; 'off' or 0: no bound)"),
    OPT("part_size", "SIZE", K_SIZE, part_size, 1ULL << 20, 5ULL << 30,
        "size of one ranged GET of a sequential read and of one upload part (default 8M)"),
    OPT("prefetch_initial", "SIZE", K_SIZE, prefetch_initial, 64ULL << 10, 1ULL << 30,
        "first prefetch window of a sequential reader (default 1M)"),
    OPT("prefetch_max", "SIZE", K_SIZE, prefetch_max, 1ULL << 20, 16ULL << 30,
        "largest prefetch window per open file; it doubles from prefetch_initial (default 128M)"),
    OPT("prefetch_files", "N", K_COUNT, prefetch_files, 0, 1024,
        "most files fetched ahead of a reader opening the files of a directory in listing "
        "order, or of a loader's order hint (default 64; 0: off)"),
    OPT("small_file_size", "SIZE", K_SIZE, small_file_size, 0, 1ULL << 30,
        "objects up to this size are fetched whole by the first read (default 1M)"),
    OPT("threads", "N", K_COUNT, threads, 1, 1024, "most FUSE worker threads (default 32)"),
    OPT("max_readahead", "SIZE", K_SIZE, max_readahead, 0, 16ULL << 20,
        "kernel readahead per file (default 1M)"),
    SPECIAL("foreground", NULL, "stay in the foreground (same as -f)"),
    OPT("cache_dir", "PATH", K_STRING, cache_dir, 0, 0,
        "staging and recovery directories (default /var/cache/objmount for root, else "
        "~/.cache/objmount)"),
    OPT("data_cache", "SIZE|auto|off", K_STRING, data_cache, 0, 0,
        "keep verified blocks of what is read under cache_dir/data, for later epochs, remounts "
        "and other mounts of the same cache_dir: SIZE bounds it, 'auto' takes up to half of "
        "the filesystem above min_free_space (default off; training: auto)"),
    OPT("min_free_space", "SIZE", K_SIZE, min_free_space, 0, 1ULL << 50,
        "writes fail with ENOSPC rather than fill the cache filesystem below this (default "
        "1 GiB or 2% of it, whichever is less)"),
    OPT("upload_retries", "N", K_COUNT, upload_retries, 0, 20,
        "whole-upload attempts after the first when a commit fails (default 3)"),
    OPT("upload_retry_delay", "SECONDS", K_MS, upload_retry_delay_ms, 0, 600000,
        "wait before the first whole-upload retry; doubles (default 1)"),
    OPT("shards", "tar|off", K_STRING, shards, 0, 0,
        "'tar' shows each object named *.tar as a directory of its members, read as byte "
        "ranges of the shard and streamed in tar order (default off)"),
    OPT("verify", "HOW", K_STRING, verify, 0, 0,
        "after each commit: 'digest' (default; 'etag' is its old name) checks the size and "
        "the digest the store states (MD5 ETag, multipart ETag, AIStore's checksum) and reads "
        "back what no digest proves; 'read' always reads the object back too; 'size' never "
        "reads back (weaker: an object no digest proves is checked by its size only)"),
    OPT("no_overwrite", NULL, K_FLAG, no_overwrite, 0, 0,
        "refuse to replace existing objects (EEXIST)"),
    OPT("parts_in_flight", "N", K_COUNT, parts_in_flight, 1, 64,
        "parts of one file uploading at once (default 8)"),
    OPT("max_rename_keys", "N", K_COUNT, max_rename_keys, 0, 100000000,
        "most keys a directory rename copies; above it rename fails with EXDEV and mv copies "
        "the tree itself (default 10000)"),
    OPT("copy_limit", "SIZE", K_SIZE, copy_limit, 5ULL << 20, 5ULL << 30,
        "largest object one server-side copy (CopyObject) takes; larger ones are copied in "
        "parts (UploadPartCopy) by renames and metadata changes (default 5G, S3's limit; lower "
        "it for a server with a smaller one)"),
    OPT("mount_timeout", "SECONDS", K_MS, mount_timeout_ms, 1000, 3600000,
        "bound on checking the bucket before mounting; after 2 s a line says what it waits "
        "for (default 15)"),
    OPT("stop_timeout", "SECONDS", K_MS, stop_timeout_ms, 0, 86400000,
        "on a signal or unmount, how long uploads under way may still retry (default 60)"),
    OPT("nonempty", NULL, K_FLAG, nonempty, 0, 0,
        "mount over a directory that is not empty (hiding what it holds)"),
};

_Static_assert(OM_ARRAY_LEN(options) <= 128, "set_mask has one bit per option");

const struct om_option_info *om_config_options(size_t *count)
{
    static struct om_option_info infos[OM_ARRAY_LEN(options)];
    for (size_t i = 0; i < OM_ARRAY_LEN(options); i++)
        infos[i] = options[i].info;
    *count = OM_ARRAY_LEN(options);
    return infos;
}

void om_config_init(struct om_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 5000;
    cfg->stall_timeout_ms = 30000;
    cfg->request_timeout_ms = 900000;
    cfg->retries = 5;
    cfg->retry_base_ms = 100;
    cfg->retry_max_ms = 10000;
    cfg->max_connections = 64;
    cfg->max_redirects = 5;
    cfg->log_level = OM_LOG_WARN;
    cfg->uid = getuid();
    cfg->gid = getgid();
    cfg->umask = 022;
    cfg->attr_timeout_ms = 10000;
    cfg->entry_timeout_ms = 10000;
    cfg->negative_timeout_ms = 5000;
    cfg->part_size = 8ULL << 20;
    cfg->prefetch_initial = 1ULL << 20;
    cfg->prefetch_max = 128ULL << 20;
    cfg->prefetch_files = 64;
    cfg->small_file_size = 1ULL << 20;
    cfg->threads = 32;
    cfg->max_readahead = 1ULL << 20;
    cfg->upload_retries = 3;
    cfg->upload_retry_delay_ms = 1000;
    cfg->parts_in_flight = 8;
    cfg->max_rename_keys = 10000;
    cfg->mount_timeout_ms = 15000;
    cfg->stop_timeout_ms = 60000;
}

bool om_config_is_set(const struct om_config *cfg, const char *name)
{
    for (size_t i = 0; i < OM_ARRAY_LEN(options); i++) {
        if (strcmp(options[i].info.name, name) == 0)
            return cfg->set_mask[i / 64] & (1ULL << (i % 64));
    }
    return false;
}

void om_config_free(struct om_config *cfg)
{
    for (size_t i = 0; i < OM_ARRAY_LEN(options); i++) {
        if (options[i].kind == K_STRING) {
            char **p = (char **)((char *)cfg + options[i].offset);
            free(*p);
        }
    }
    free(cfg->bucket);
    free(cfg->prefix);
    free(cfg->mountpoint);
    free(cfg->mount_flags);
    memset(cfg, 0, sizeof(*cfg));
}

int om_config_set_source(struct om_config *cfg, const char *source, char *err, size_t errlen)
{
    const char *given = source;
    cfg->store_kind = OM_STORE_S3;
    if (strncmp(source, "ais://", 6) == 0) {
        cfg->store_kind = OM_STORE_AIS;
        source += 6;
    } else if (strncmp(source, "s3://", 5) == 0) {
        source += 5;
    }
    const char *colon = strchr(source, ':');
    const char *slash = cfg->store_kind == OM_STORE_AIS && !colon ? strchr(source, '/') : NULL;
    const char *sep = colon ? colon : slash;
    size_t blen = sep ? (size_t)(sep - source) : strlen(source);
    if (blen == 0 || memchr(source, '/', blen)) {
        snprintf(err, errlen, "'%s' is not BUCKET, BUCKET:PREFIX or ais://BUCKET[/PREFIX]",
                 given);
        return -EINVAL;
    }
    const char *prefix = sep ? sep + 1 : "";
    while (*prefix == '/')
        prefix++;
    free(cfg->bucket);
    free(cfg->prefix);
    cfg->bucket = strndup(source, blen);
    size_t plen = strlen(prefix);
    bool add_slash = plen > 0 && prefix[plen - 1] != '/';
    if (asprintf(&cfg->prefix, "%s%s", prefix, add_slash ? "/" : "") < 0)
        cfg->prefix = NULL;
    if (!cfg->bucket || !cfg->prefix) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (strstr(cfg->prefix, "//")) {
        snprintf(err, errlen, "prefix '%s' has an empty path segment", prefix);
        return -EINVAL;
    }
    return 0;
}

static const struct opt *find_opt(const char *name)
{
    for (size_t i = 0; i < OM_ARRAY_LEN(options); i++) {
        if (strcmp(options[i].info.name, name) == 0)
            return &options[i];
    }
    return NULL;
}

static int set_special(struct om_config *cfg, const struct opt *o, const char *value, char *err,
                       size_t errlen)
{
    const char *name = o->info.name;
    if (strcmp(name, "path_style") == 0 || strcmp(name, "virtual_host") == 0) {
        bool on = true;
        if (value && om_parse_bool(value, &on)) {
            snprintf(err, errlen, "option %s: '%s' is not yes or no", name, value);
            return -EINVAL;
        }
        bool path = strcmp(name, "path_style") == 0;
        if (on)
            cfg->addressing = path ? OM_ADDR_PATH : OM_ADDR_VHOST;
        else
            cfg->addressing = path ? OM_ADDR_VHOST : OM_ADDR_PATH;
        return 0;
    }
    if (strcmp(name, "rw") == 0) {
        cfg->ro = false;
        return 0;
    }
    static const char *const kernel_flags[] = {"nosuid", "suid", "nodev", "dev", "noexec", "exec"};
    for (size_t i = 0; i < OM_ARRAY_LEN(kernel_flags); i++) {
        if (strcmp(name, kernel_flags[i]) == 0) {
            if (value) {
                snprintf(err, errlen, "option %s takes no value", name);
                return -EINVAL;
            }
            char *joined = NULL;
            if (asprintf(&joined, "%s%s%s", cfg->mount_flags ? cfg->mount_flags : "",
                         cfg->mount_flags ? "," : "", name) < 0)
                return -ENOMEM;
            free(cfg->mount_flags);
            cfg->mount_flags = joined;
            return 0;
        }
    }
    if (strcmp(name, "noatime") == 0 || strcmp(name, "atime") == 0 ||
        strcmp(name, "relatime") == 0 || strcmp(name, "nodiratime") == 0 ||
        strcmp(name, "sync") == 0 || strcmp(name, "async") == 0)
        return 0;
    if (strcmp(name, "foreground") == 0) {
        cfg->foreground = true;
        return 0;
    }
    if (strcmp(name, "log_level") == 0) {
        if (!value || om_log_level_parse(value, &cfg->log_level)) {
            snprintf(err, errlen, "option log_level: '%s' is not error, warn, info or debug",
                     value ? value : "");
            return -EINVAL;
        }
        return 0;
    }
    snprintf(err, errlen, "option %s is not handled", name);
    return -EINVAL;
}

uint64_t om_physical_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    return pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 2ULL << 30;
}

int om_config_metadata_memory(const char *value, uint64_t ram, uint64_t *out)
{
    if (!value) {
        *out = OM_MIN(OM_MAX(ram / 8, 256ULL << 20), 8ULL << 30);
        return 0;
    }
    if (strcmp(value, "off") == 0) {
        *out = 0;
        return 0;
    }
    if (om_parse_size(value, out))
        return -EINVAL;
    return *out == 0 || *out >= (1ULL << 20) ? 0 : -EINVAL;
}

/* A limit as the user writes it: sizes in K/M/G, durations in seconds. */
static void format_limit(const struct opt *o, uint64_t v, char *out, size_t n)
{
    if (o->kind == K_SIZE) {
        static const char units[] = "KMGT";
        int u = -1;
        while (u < 3 && v >= 1024 && v % 1024 == 0) {
            v /= 1024;
            u++;
        }
        if (u >= 0)
            snprintf(out, n, "%llu%c", (unsigned long long)v, units[u]);
        else
            snprintf(out, n, "%llu", (unsigned long long)v);
    } else if (o->kind == K_MS) {
        snprintf(out, n, "%gs", (double)v / 1000.0);
    } else if (o->kind == K_OCTAL) {
        snprintf(out, n, "%llo", (unsigned long long)v);
    } else {
        snprintf(out, n, "%llu", (unsigned long long)v);
    }
}

int om_config_set(struct om_config *cfg, const char *name, const char *value, char *err,
                  size_t errlen)
{
    const struct opt *o = find_opt(name);
    if (!o) {
        snprintf(err, errlen, "unknown option '%s' (see objmount --help)", name);
        return -ENOENT;
    }
    void *field = (char *)cfg + o->offset;
    uint64_t v = 0;
    int rc = 0;
    size_t idx = (size_t)(o - options);
    cfg->set_mask[idx / 64] |= 1ULL << (idx % 64);
    switch (o->kind) {
    case K_SPECIAL:
        return set_special(cfg, o, value, err, errlen);
    case K_STRING: {
        if (!value || !*value) {
            snprintf(err, errlen, "option %s needs a value: %s=%s", name, name, o->info.arg);
            return -EINVAL;
        }
        char *dup = strdup(value);
        if (!dup)
            return -ENOMEM;
        free(*(char **)field);
        *(char **)field = dup;
        return 0;
    }
    case K_FLAG: {
        bool b = true;
        if (value && om_parse_bool(value, &b)) {
            snprintf(err, errlen, "option %s: '%s' is not yes or no", name, value);
            return -EINVAL;
        }
        *(bool *)field = b;
        return 0;
    }
    case K_COUNT:
        if (om_parse_uint(value, OM_UINT_MAX, &v))
            rc = -EINVAL;
        break;
    case K_SIZE:
        if (!value || om_parse_size(value, &v))
            rc = -EINVAL;
        break;
    case K_MS:
        if (!value || om_parse_duration_ms(value, &v))
            rc = -EINVAL;
        break;
    case K_OCTAL:
        /* at most 7 octal digits: every OCTAL option is below 010000000 */
        if (!value || !*value || strspn(value, "01234567") != strlen(value) || strlen(value) > 7)
            rc = -EINVAL;
        else
            v = strtoull(value, NULL, 8);
        break;
    }
    if (rc) {
        snprintf(err, errlen, "option %s: '%s' is not a valid %s", name, value ? value : "",
                 o->info.arg ? o->info.arg : "value");
        return -EINVAL;
    }
    if (v < o->min || (o->max && v > o->max)) {
        char lo[32], hi[32];
        format_limit(o, o->min, lo, sizeof(lo));
        format_limit(o, o->max, hi, sizeof(hi));
        snprintf(err, errlen, "option %s: '%s' is outside %s..%s", name, value, lo, hi);
        return -EINVAL;
    }
    *(uint64_t *)field = v;
    return 0;
}

int om_config_parse_opts(struct om_config *cfg, const char *opts, char *err, size_t errlen)
{
    size_t n = strlen(opts);
    char *item = malloc(n + 1);
    if (!item)
        return -ENOMEM;
    int rc = 0;
    const char *p = opts;
    while (*p && rc == 0) {
        size_t k = 0;
        for (; *p && *p != ','; p++) {
            if (*p == '\\' && p[1])
                p++;
            item[k++] = *p;
        }
        item[k] = '\0';
        if (*p == ',')
            p++;
        if (k == 0)
            continue;
        char *eq = strchr(item, '=');
        if (eq)
            *eq = '\0';
        rc = om_config_set(cfg, item, eq ? eq + 1 : NULL, err, errlen);
    }
    free(item);
    return rc;
}

static const char *env_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* Names, attributes and missing names trusted for ms, and the page cache
 * kept across opens, unless those options were given. */
static void trust_metadata(struct om_config *cfg, uint64_t ms)
{
    if (!om_config_is_set(cfg, "attr_timeout"))
        cfg->attr_timeout_ms = ms;
    if (!om_config_is_set(cfg, "entry_timeout"))
        cfg->entry_timeout_ms = ms;
    if (!om_config_is_set(cfg, "negative_timeout"))
        cfg->negative_timeout_ms = ms;
    if (!om_config_is_set(cfg, "keep_cache"))
        cfg->keep_cache = true;
}

/* A manifest mount is read-only, takes metadata from listings only, and
 * trusts it for the whole mount. */
static int manifest_defaults(struct om_config *cfg, char *err, size_t errlen)
{
    if (om_config_is_set(cfg, "rw") && !cfg->ro) {
        snprintf(err, errlen, "option manifest: a manifest mount is read-only (drop rw)");
        return -EINVAL;
    }
    if (cfg->metadata && strcmp(cfg->metadata, "listing") != 0) {
        snprintf(err, errlen, "option manifest: metadata=%s needs HEAD requests; a manifest "
                 "mount takes metadata from the manifest only (metadata=listing)", cfg->metadata);
        return -EINVAL;
    }
    if (strncmp(cfg->manifest, "s3:", 3) == 0 && !cfg->manifest[3]) {
        snprintf(err, errlen, "option manifest: s3: needs a key (manifest=s3:KEY)");
        return -EINVAL;
    }
    cfg->ro = true;
    if (!cfg->metadata && !(cfg->metadata = strdup("listing")))
        return -ENOMEM;
    trust_metadata(cfg, 31536000000ULL); /* a year, the longest timeout */
    return 0;
}

/* ais://BUCKET: the cluster's URL from the option, else AIS_ENDPOINT; its
 * native API lives at its root, so an endpoint ending in /s3 (the S3 API's)
 * is refused with the URL to give instead. */
static int ais_endpoint(struct om_config *cfg, char *err, size_t errlen)
{
    const char *v;
    if (!cfg->endpoint) {
        if (!(v = env_nonempty("AIS_ENDPOINT"))) {
            snprintf(err, errlen, "ais://%s needs the cluster's URL: -o endpoint=http://PROXY:PORT "
                     "or AIS_ENDPOINT", cfg->bucket);
            return -EINVAL;
        }
        if (!(cfg->endpoint = strdup(v)))
            return -ENOMEM;
        cfg->endpoint_source = "AIS_ENDPOINT";
    } else {
        cfg->endpoint_source = "option";
    }
    struct om_url u;
    if (om_url_parse(cfg->endpoint, &u) == 0) {
        size_t n = strlen(u.path);
        while (n > 0 && u.path[n - 1] == '/')
            n--;
        bool s3 = n >= 3 && strncmp(u.path + n - 3, "/s3", 3) == 0;
        om_url_free(&u);
        if (s3) {
            snprintf(err, errlen, "endpoint '%s' (from %s) is AIStore's S3 API; ais://%s speaks "
                     "its native API at the cluster's root: give the URL without /s3",
                     cfg->endpoint, cfg->endpoint_source, cfg->bucket);
            return -EINVAL;
        }
    }
    return 0;
}

int om_config_finalize(struct om_config *cfg, const struct om_creds *creds, char *err,
                       size_t errlen)
{
    if (cfg->finalized)
        return 0;
    const char *v;
    if (!cfg->region) {
        if ((v = env_nonempty("AWS_REGION")))
            cfg->region_source = "AWS_REGION";
        else if ((v = env_nonempty("AWS_DEFAULT_REGION")))
            cfg->region_source = "AWS_DEFAULT_REGION";
        else if (creds && (v = creds->region))
            cfg->region_source = "AWS profile";
        else {
            v = "us-east-1";
            cfg->region_source = "default";
        }
        if (!(cfg->region = strdup(v)))
            return -ENOMEM;
    } else {
        cfg->region_source = "option";
    }
    if (!om_region_valid(cfg->region)) {
        snprintf(err, errlen, "region '%.64s' (from %s) is not [a-z0-9-]", cfg->region,
                 cfg->region_source);
        return -EINVAL;
    }
    if (om_host_list_check(cfg->redirect_hosts, err, errlen))
        return -EINVAL;
    if (cfg->store_kind == OM_STORE_AIS && ais_endpoint(cfg, err, errlen))
        return -EINVAL;
    if (!cfg->endpoint) {
        int n = 0;
        if ((v = env_nonempty("AWS_ENDPOINT_URL"))) {
            cfg->endpoint_source = "AWS_ENDPOINT_URL";
            n = asprintf(&cfg->endpoint, "%s", v);
        } else if ((v = env_nonempty("AIS_ENDPOINT"))) {
            /* the cluster URL; its S3 API lives under /s3 */
            struct om_url u;
            bool has_path = om_url_parse(v, &u) == 0 && strcmp(u.path, "/") != 0;
            om_url_free(&u);
            size_t len = strlen(v);
            while (len > 0 && v[len - 1] == '/')
                len--;
            cfg->endpoint_source = "AIS_ENDPOINT";
            n = asprintf(&cfg->endpoint, "%.*s%s", (int)len, v, has_path ? "" : "/s3");
            if (cfg->addressing == OM_ADDR_AUTO)
                cfg->addressing = OM_ADDR_PATH;
        } else if (creds && creds->endpoint_url) {
            cfg->endpoint_source = "AWS profile";
            n = asprintf(&cfg->endpoint, "%s", creds->endpoint_url);
        } else {
            cfg->endpoint_source = "default";
            n = asprintf(&cfg->endpoint, "https://s3.%s.amazonaws.com", cfg->region);
        }
        if (n < 0) {
            cfg->endpoint = NULL;
            return -ENOMEM;
        }
    } else if (!cfg->endpoint_source) {
        cfg->endpoint_source = "option";
    }
    struct om_url u;
    if (om_url_parse(cfg->endpoint, &u) != 0) {
        snprintf(err, errlen,
                 "endpoint '%s' (from %s) is not an http:// or https:// URL with a host name "
                 "(letters, digits, '-', '.', '_') or address",
                 cfg->endpoint, cfg->endpoint_source);
        return -EINVAL;
    }
    bool https = u.https;
    om_url_free(&u);
    if (!cfg->ca_bundle && https && (v = env_nonempty("AWS_CA_BUNDLE")))
        cfg->ca_bundle = strdup(v);
    if (cfg->ca_bundle && https && access(cfg->ca_bundle, R_OK) != 0) {
        snprintf(err, errlen, "CA bundle %s: %s", cfg->ca_bundle, strerror(errno));
        return -EINVAL;
    }
    if (cfg->profile && strcmp(cfg->profile, "training") != 0 &&
        strcmp(cfg->profile, "default") != 0) {
        snprintf(err, errlen, "option profile: '%s' is not 'training' or 'default'", cfg->profile);
        return -EINVAL;
    }
    if (cfg->profile && strcmp(cfg->profile, "training") == 0) {
        trust_metadata(cfg, 86400000); /* a day */
        if (!cfg->metadata && !(cfg->metadata = strdup("listing")))
            return -ENOMEM;
        if (!cfg->data_cache && !(cfg->data_cache = strdup("auto")))
            return -ENOMEM;
    }
    if (cfg->manifest && manifest_defaults(cfg, err, errlen))
        return -EINVAL;
    cfg->data_cache_bytes = 0;
    if (cfg->data_cache && strcmp(cfg->data_cache, "auto") != 0 &&
        strcmp(cfg->data_cache, "off") != 0 &&
        (om_parse_size(cfg->data_cache, &cfg->data_cache_bytes) || cfg->data_cache_bytes < (16ULL << 20))) {
        snprintf(err, errlen, "option data_cache: '%s' is not a size of at least 16M, 'auto' or "
                 "'off'", cfg->data_cache);
        return -EINVAL;
    }
    if (!om_config_is_set(cfg, "file_mode"))
        cfg->file_mode = 0666 & ~cfg->umask;
    if (!om_config_is_set(cfg, "dir_mode"))
        cfg->dir_mode = 0777 & ~cfg->umask;
    if (cfg->memory_limit == 0)
        cfg->memory_limit = OM_MIN(OM_MAX(om_physical_memory() / 8, 256ULL << 20), 4ULL << 30);
    if (om_config_metadata_memory(cfg->metadata_memory, om_physical_memory(),
                                  &cfg->metadata_memory_bytes)) {
        snprintf(err, errlen, "option metadata_memory: '%s' is not a size of at least 1M, 0 or "
                 "'off'", cfg->metadata_memory);
        return -EINVAL;
    }
    if (cfg->metadata && strcmp(cfg->metadata, "lookup") != 0 &&
        strcmp(cfg->metadata, "head") != 0 && strcmp(cfg->metadata, "listing") != 0) {
        snprintf(err, errlen, "option metadata: '%s' is not 'lookup', 'head' or 'listing'",
                 cfg->metadata);
        return -EINVAL;
    }
    if (cfg->verify && strcmp(cfg->verify, "digest") != 0 && strcmp(cfg->verify, "etag") != 0 &&
        strcmp(cfg->verify, "read") != 0 && strcmp(cfg->verify, "size") != 0) {
        snprintf(err, errlen, "option verify: '%s' is not 'digest', 'read' or 'size'",
                 cfg->verify);
        return -EINVAL;
    }
    if (cfg->shards && strcmp(cfg->shards, "tar") != 0 && strcmp(cfg->shards, "off") != 0) {
        snprintf(err, errlen, "option shards: '%s' is not 'tar' or 'off'", cfg->shards);
        return -EINVAL;
    }
    cfg->shards_tar = cfg->shards && strcmp(cfg->shards, "tar") == 0;
    if (!cfg->cache_dir) {
        const char *xdg = env_nonempty("XDG_CACHE_HOME"), *home = env_nonempty("HOME");
        int n;
        if (getuid() == 0)
            n = asprintf(&cfg->cache_dir, "/var/cache/objmount");
        else if (xdg)
            n = asprintf(&cfg->cache_dir, "%s/objmount", xdg);
        else
            n = asprintf(&cfg->cache_dir, "%s/.cache/objmount", home ? home : "/tmp");
        if (n < 0) {
            cfg->cache_dir = NULL;
            return -ENOMEM;
        }
    }
    if (!om_config_is_set(cfg, "min_free_space")) {
        struct statvfs sv;
        char probe[4096];
        snprintf(probe, sizeof(probe), "%s", cfg->cache_dir);
        /* the nearest existing ancestor tells the filesystem */
        while (statvfs(probe, &sv) != 0 && strrchr(probe, '/') && strrchr(probe, '/') != probe)
            *strrchr(probe, '/') = '\0';
        uint64_t total = statvfs(probe, &sv) == 0 ? (uint64_t)sv.f_blocks * sv.f_frsize : 0;
        cfg->min_free_space = total ? OM_MIN(1ULL << 30, total / 50) : 1ULL << 30;
    }
    if (cfg->prefetch_initial > cfg->prefetch_max) {
        snprintf(err, errlen, "prefetch_initial must not exceed prefetch_max");
        return -EINVAL;
    }
    if (cfg->part_size * 4 > cfg->memory_limit) {
        snprintf(err, errlen, "memory_limit must hold at least four parts (part_size %llu)",
                 (unsigned long long)cfg->part_size);
        return -EINVAL;
    }
    if (cfg->retry_base_ms > cfg->retry_max_ms) {
        snprintf(err, errlen, "retry_base must not exceed retry_max");
        return -EINVAL;
    }
    if (cfg->credentials && cfg->anonymous) {
        snprintf(err, errlen, "options credentials and anonymous exclude each other");
        return -EINVAL;
    }
    cfg->finalized = true;
    return 0;
}

void om_config_http(const struct om_config *cfg, struct om_http_config *out)
{
    om_http_config_defaults(out);
    out->connect_timeout_ms = (long)cfg->connect_timeout_ms;
    out->stall_timeout_ms = (long)cfg->stall_timeout_ms;
    out->request_timeout_ms = (long)cfg->request_timeout_ms;
    out->max_attempts = (int)cfg->retries + 1;
    out->retry_base_ms = (long)cfg->retry_base_ms;
    out->retry_cap_ms = (long)cfg->retry_max_ms;
    out->max_redirects = (int)cfg->max_redirects;
    out->max_connections = (int)cfg->max_connections;
    out->ca_bundle = cfg->ca_bundle;
    out->verify_tls = !cfg->no_check_certificate;
    out->proxy = cfg->proxy;
}

void om_config_store(const struct om_config *cfg, struct om_store_config *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = cfg->store_kind;
    out->copy_limit = cfg->copy_limit;
    out->endpoint = cfg->endpoint;
    out->bucket = cfg->bucket;
    out->region = cfg->region;
    out->addressing = cfg->addressing;
    out->sign_payload = cfg->sign_payload;
    out->redirect_hosts = cfg->redirect_hosts;
}

void om_config_creds_options(const struct om_config *cfg, struct om_creds_options *out)
{
    memset(out, 0, sizeof(*out));
    out->anonymous = cfg->anonymous;
    out->credentials_file = cfg->credentials;
    out->aws_profile = cfg->aws_profile;
    out->bucket = cfg->bucket;
}
