/* What a running mount reports: status, statistics for people, and the
 * Prometheus text format. Read-only views over the modules' counters. */
#ifndef OBJMOUNT_STATS_H
#define OBJMOUNT_STATS_H

#include <time.h>

#include "objmount/http.h"
#include "objmount/meta.h"
#include "objmount/reader.h"
#include "objmount/util.h"
#include "objmount/writer.h"

struct om_stats_sources {
    const char *bucket;
    const char *prefix;
    const char *endpoint;
    const char *mountpoint;
    const char *cache_dir;
    time_t started;
    struct om_http *http;
    struct om_meta *meta;
    struct om_readers *readers;
    struct om_writers *writers; /* NULL on read-only mounts */
    struct om_dcache *dcache;   /* NULL without a data cache */
    struct om_prefetcher *prefetch; /* NULL: prefetch_files=0 */
    struct om_shards *shards;       /* NULL: shards=off */
};

enum om_stats_format {
    OM_STATS_STATUS,      /* key=value lines */
    OM_STATS_TEXT,        /* tables for people */
    OM_STATS_PROMETHEUS,  /* text exposition format */
    OM_STATS_STATUS_JSON, /* one JSON object, fields in doc/json.md */
    OM_STATS_JSON,        /* one JSON object, fields in doc/json.md */
    OM_STATS_CACHE,       /* the data cache's lines of OM_STATS_TEXT */
};

/* Append the report to out. Returns 0 or -ENOMEM. */
int om_stats_render(const struct om_stats_sources *s, enum om_stats_format f, struct om_buf *out);

/* Data files waiting in cache_dir/recovery. */
int om_stats_recovery_count(const char *cache_dir);

#endif
