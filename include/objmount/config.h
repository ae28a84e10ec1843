/* Options: "-o a=b,c" strings (command line and fstab), the environment, and
 * validation. One table lists every option with its help text; unknown
 * options are rejected by name.
 *
 * Strings in struct om_config are owned by it and freed by
 * om_config_free(). Not thread-safe: configure before starting threads. */
#ifndef OBJMOUNT_CONFIG_H
#define OBJMOUNT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "objmount/creds.h"
#include "objmount/http.h"
#include "objmount/log.h"
#include "objmount/store.h"

struct om_config {
    /* what to mount */
    enum om_store_kind store_kind; /* S3, or ais:// (AIStore's native API) */
    char *bucket;
    char *prefix; /* "" or ending in '/' */
    char *mountpoint;

    /* endpoint */
    char *endpoint;
    const char *endpoint_source; /* "option", "AWS_ENDPOINT_URL", ... */
    char *region;
    const char *region_source;
    enum om_addressing addressing;
    char *ca_bundle;
    bool no_check_certificate;
    char *proxy;
    char *redirect_hosts; /* hosts besides the endpoint's that may get credentials */

    /* credentials */
    char *credentials;
    char *aws_profile;
    bool anonymous;

    /* request engine */
    uint64_t connect_timeout_ms;
    uint64_t stall_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t retries; /* attempts after the first */
    uint64_t retry_base_ms;
    uint64_t retry_max_ms;
    uint64_t max_connections;
    uint64_t max_redirects;
    bool sign_payload;

    enum om_log_level log_level;

    /* the mount */
    bool foreground;
    bool debug_fuse;
    bool ro;
    bool allow_other;
    bool default_permissions;
    char *mount_flags; /* generic mount flags for the kernel: nosuid,noexec,... */
    uint64_t uid, gid;
    uint64_t umask, file_mode, dir_mode;
    char *profile; /* "default" or "training" */
    uint64_t attr_timeout_ms;
    uint64_t entry_timeout_ms;
    uint64_t negative_timeout_ms;
    bool keep_cache; /* keep the page cache across opens without checking ETags */
    char *metadata; /* "listing", "lookup" or "head" */
    char *metadata_memory;          /* SIZE or "off"; NULL = sized to the machine */
    uint64_t metadata_memory_bytes; /* parsed; 0 = no bound */
    char *manifest; /* PATH or "s3:KEY": names and attributes from a manifest */
    char *data_cache;          /* SIZE, "auto" or "off"; NULL = off */
    uint64_t data_cache_bytes; /* SIZE parsed; 0 for auto and off */

    /* the read path */
    uint64_t memory_limit; /* bytes of read buffers; 0 = sized to the machine */
    uint64_t part_size;
    uint64_t prefetch_initial;
    uint64_t prefetch_max;
    uint64_t prefetch_files;
    uint64_t small_file_size;
    uint64_t threads;
    uint64_t max_readahead;

    /* the write path */
    char *cache_dir;
    uint64_t min_free_space; /* 0 = min(1 GiB, 2% of the cache filesystem) */
    uint64_t upload_retries;
    uint64_t upload_retry_delay_ms;
    char *shards;    /* "tar" or "off"; NULL = off */
    bool shards_tar; /* shards=tar: *.tar objects are directories of their members */
    char *verify; /* "digest" (or its old name "etag"), "read" or "size" */
    bool no_overwrite;
    uint64_t parts_in_flight;
    uint64_t max_rename_keys;
    uint64_t copy_limit; /* largest single server-side copy; 0 = the store's */

    /* start and stop */
    uint64_t mount_timeout_ms; /* bound on the bucket check before mounting */
    uint64_t stop_timeout_ms;  /* commits under way at a stop may retry this long */
    bool nonempty;             /* mount over a directory that is not empty */

    uint64_t set_mask[2]; /* bit i: option i of the table was given */
    bool finalized;
};

/* Bytes of RAM of this machine (2 GiB when unknown). */
uint64_t om_physical_memory(void);
/* The namespace's budget for metadata_memory=value (NULL: not given) on a
 * machine with ram bytes: RAM/8 within [256 MiB, 8 GiB] by default; "off"
 * and "0" are 0 (no bound). -EINVAL for anything else than a size of at
 * least 1M. */
int om_config_metadata_memory(const char *value, uint64_t ram, uint64_t *out);

/* Defaults for everything. */
void om_config_init(struct om_config *cfg);
void om_config_free(struct om_config *cfg);

/* "BUCKET", "BUCKET:PREFIX" or "BUCKET:/PREFIX" (fstab style); with
 * "ais://" before BUCKET, AIStore's native API (and "ais://BUCKET/PREFIX",
 * as AIStore's own tools write it). */
int om_config_set_source(struct om_config *cfg, const char *source, char *err, size_t errlen);

/* Apply one option; value is NULL for a bare flag. Returns 0, -EINVAL (bad
 * value) or -ENOENT (unknown option), with err naming the option. */
int om_config_set(struct om_config *cfg, const char *name, const char *value, char *err,
                  size_t errlen);

/* Apply a comma-separated option string ("a=b,c"; "\," is a literal comma). */
int om_config_parse_opts(struct om_config *cfg, const char *opts, char *err, size_t errlen);

/* Fill what options left open from the environment and the AWS profile hints
 * in creds (may be NULL), then check the whole. Endpoint: option,
 * AWS_ENDPOINT_URL, AIS_ENDPOINT (+"/s3" when it has no path), profile
 * endpoint_url, else AWS's regional endpoint; for ais://: option, else
 * AIS_ENDPOINT (the cluster's root, where its native API lives). Region: option, AWS_REGION,
 * AWS_DEFAULT_REGION, profile, "us-east-1". CA bundle: option, else
 * AWS_CA_BUNDLE, used for https endpoints only. */
int om_config_finalize(struct om_config *cfg, const struct om_creds *creds, char *err,
                       size_t errlen);

void om_config_http(const struct om_config *cfg, struct om_http_config *out);
void om_config_store(const struct om_config *cfg, struct om_store_config *out);
void om_config_creds_options(const struct om_config *cfg, struct om_creds_options *out);

/* Was the option given (on the command line or in fstab)? */
bool om_config_is_set(const struct om_config *cfg, const char *name);

/* The option table, for help output and documentation checks. */
struct om_option_info {
    const char *name;
    const char *arg; /* "SECONDS", "PATH", NULL for flags */
    const char *help;
};
const struct om_option_info *om_config_options(size_t *count);

#endif
