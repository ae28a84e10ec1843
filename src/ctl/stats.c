/* Status and statistics reports of a running mount. */
#include "objmount/stats.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "objmount/dcache.h"
#include "objmount/json.h"
#include "objmount/log.h"
#include "objmount/prefetch.h"
#include "objmount/shards.h"

int om_stats_recovery_count(const char *cache_dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/recovery", cache_dir ? cache_dir : "");
    DIR *d = opendir(path);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        n += len > 5 && strcmp(e->d_name + len - 5, ".data") == 0;
    }
    closedir(d);
    return n;
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static double ratio(uint64_t part, uint64_t whole)
{
    return whole ? (double)part / (double)whole : 0.0;
}

struct snapshot {
    struct om_http_stats http;
    struct om_http_op_stats ops[OM_HTTP_MAX_OPS];
    int nops;
    struct om_meta_stats meta;
    struct om_readers_stats rd;
    struct om_writers_stats wr;
    struct om_dcache_stats dc;
    bool has_dc;
    struct om_prefetch_stats pf;
    struct om_shards_stats sh;
    bool has_sh;
    uint64_t rss;
    int recovery;
};

static void take(const struct om_stats_sources *s, struct snapshot *n)
{
    memset(n, 0, sizeof(*n));
    om_http_get_stats(s->http, &n->http);
    n->nops = om_http_get_op_stats(s->http, n->ops, OM_HTTP_MAX_OPS);
    om_meta_get_stats(s->meta, &n->meta);
    om_readers_get_stats(s->readers, &n->rd);
    if (s->writers)
        om_writers_get_stats(s->writers, &n->wr);
    om_prefetch_get_stats(s->prefetch, &n->pf);
    n->has_sh = s->shards != NULL;
    if (n->has_sh)
        om_shards_get_stats(s->shards, &n->sh);
    n->has_dc = s->dcache != NULL;
    if (n->has_dc)
        om_dcache_get_stats(s->dcache, &n->dc);
    n->rss = rss_bytes();
    n->recovery = om_stats_recovery_count(s->cache_dir);
}

static int status(const struct om_stats_sources *s, const struct snapshot *n, struct om_buf *b)
{
    char last[512] = "";
    time_t when = 0;
    om_log_last_problem(last, sizeof(last), &when);
    for (char *c = last; *c; c++)
        if (*c == '\n')
            *c = ' ';
    return om_buf_printf(b,
                         "bucket=%s\nprefix=%s\nendpoint=%s\nmountpoint=%s\npid=%d\n"
                         "uptime_s=%ld\nopen_files=%" PRIu64 "\nopen_writers=%" PRIu64
                         "\ncommits_in_flight=%" PRIu64 "\nrecovery_files=%d\ncache_dir=%s\n"
                         "last_error=%s\nlast_error_time=%ld\n",
                         s->bucket, s->prefix, s->endpoint, s->mountpoint, (int)getpid(),
                         (long)(time(NULL) - s->started), n->rd.open_readers + n->wr.open_writers,
                         n->wr.open_writers, n->wr.commits_in_flight, n->recovery, s->cache_dir,
                         last, (long)when);
}

/* The data cache's line of the text statistics. */
static int text_data_cache(const struct snapshot *n, struct om_buf *b)
{
    if (!n->has_dc)
        return om_buf_printf(b, "data cache: off (-o data_cache=SIZE|auto)\n");
    return om_buf_printf(
        b,
        "data cache: %.1f of %.1f MiB, %" PRIu64 " blocks; hits %" PRIu64 " (%.1f MiB, %.1f%% of "
        "cacheable bytes), misses %" PRIu64 " (%.1f MiB); stored %" PRIu64 " (%.1f MiB), not "
        "admitted %" PRIu64 ", evicted %" PRIu64 ", corrupt dropped %" PRIu64
        ", in flight %" PRIu64 "%s\n",
        (double)n->dc.size_bytes / 1048576.0, (double)n->dc.limit_bytes / 1048576.0,
        n->dc.blocks, n->dc.hits, (double)n->dc.hit_bytes / 1048576.0,
        100.0 * ratio(n->dc.hit_bytes, n->dc.hit_bytes + n->dc.miss_bytes), n->dc.misses,
        (double)n->dc.miss_bytes / 1048576.0, n->dc.inserts,
        (double)n->dc.insert_bytes / 1048576.0, n->dc.rejected, n->dc.evictions,
        n->dc.corrupt, n->dc.in_flight, n->dc.storing ? "" : "; storing OFF (disk failure)");
}

static int text(const struct om_stats_sources *s, const struct snapshot *n, struct om_buf *b)
{
    int rc = om_buf_printf(b, "objmount %s%s%s on %s, up %ld s\n\n", s->bucket,
                           s->prefix[0] ? ":" : "", s->prefix, s->mountpoint,
                           (long)(time(NULL) - s->started));
    if (!rc)
        rc = om_buf_printf(b, "%-24s %9s %7s %7s %7s %10s %10s %8s %8s %8s\n", "operation",
                           "requests", "failed", "retries", "redirs", "MiB in", "MiB out",
                           "p50 ms", "p90 ms", "p99 ms");
    for (int i = 0; i < n->nops && !rc; i++) {
        const struct om_http_op_stats *o = &n->ops[i];
        rc = om_buf_printf(b,
                           "%-24s %9" PRIu64 " %7" PRIu64 " %7" PRIu64 " %7" PRIu64
                           " %10.1f %10.1f %8.1f %8.1f %8.1f\n",
                           o->op, o->requests, o->failures, o->retries, o->redirects,
                           (double)o->bytes_in / 1048576.0, (double)o->bytes_out / 1048576.0,
                           (double)om_http_latency_quantile_us(o, 0.5) / 1000.0,
                           (double)om_http_latency_quantile_us(o, 0.9) / 1000.0,
                           (double)om_http_latency_quantile_us(o, 0.99) / 1000.0);
    }
    if (!rc)
        rc = om_buf_printf(
            b,
            "\nrequests %" PRIu64 ", attempts %" PRIu64 ", retries %" PRIu64 ", redirects %" PRIu64
            ", failures %" PRIu64 ", cancelled %" PRIu64 ", short bodies %" PRIu64
            ", connections opened %" PRIu64 "\n"
            "received %.1f MiB, sent %.1f MiB\n",
            n->http.requests, n->http.attempts, n->http.retries, n->http.redirects,
            n->http.failures, n->http.cancelled, n->http.short_bodies, n->http.connections,
            (double)n->http.bytes_in / 1048576.0, (double)n->http.bytes_out / 1048576.0);
    if (!rc)
        rc = om_buf_printf(
            b,
            "\nmetadata: %" PRIu64 " inodes; lookups %" PRIu64 " (%.1f%% from cache, %" PRIu64
            " not found); getattr %" PRIu64 " (%.1f%% from cache); listing pages %" PRIu64
            ", skipped names %" PRIu64 "; directories listed ahead of walks %" PRIu64 " (%" PRIu64
            " then opened)\n",
            n->meta.inodes, n->meta.lookups, 100.0 * ratio(n->meta.lookups_cached, n->meta.lookups),
            n->meta.lookups_negative, n->meta.getattrs,
            100.0 * ratio(n->meta.getattrs_cached, n->meta.getattrs), n->meta.list_pages,
            n->meta.skipped_names, n->meta.walk_listings, n->meta.walk_listings_used);
    if (!rc)
        rc = om_buf_printf(b,
                           "metadata memory: %.1f MiB (peak %.1f) of %s%.0f MiB; listings "
                           "dropped %" PRIu64
                           ", entries without inode %" PRIu64 ", names the kernel was asked to "
                           "forget %" PRIu64 "\n",
                           (double)n->meta.bytes / 1048576.0,
                           (double)n->meta.bytes_peak / 1048576.0,
                           n->meta.budget ? "" : "(no bound) ",
                           (double)n->meta.budget / 1048576.0, n->meta.listings_evicted,
                           n->meta.entries_without_inode, n->meta.invalidations);
    if (!rc)
        rc = om_buf_printf(
            b,
            "reads: %" PRIu64 " (%.1f%% from buffers), %.1f MiB; GETs %" PRIu64 " (%" PRIu64
            " prefetch), %.1f MiB; GET errors %" PRIu64 "; waits for memory %" PRIu64
            ", evictions %" PRIu64 "; open readers %" PRIu64 "\n"
            "small objects fetched whole by lookups: %" PRIu64 " (%" PRIu64
            " then opened; %" PRIu64 " HEADed instead, few opens followed); lookups answered "
            "from memory %" PRIu64 "\n",
            n->rd.reads, 100.0 * ratio(n->rd.hits, n->rd.reads),
            (double)n->rd.read_bytes / 1048576.0, n->rd.gets, n->rd.prefetch_gets,
            (double)n->rd.get_bytes / 1048576.0, n->rd.get_errors, n->rd.waits, n->rd.evictions,
            n->rd.open_readers, n->rd.lookup_gets, n->rd.lookup_get_hits, n->rd.lookup_heads,
            n->rd.lookup_pool_answers);
    if (!rc)
        rc = om_buf_printf(
            b,
            "prefetch across files: %" PRIu64 " files fetched ahead (%.1f MiB; %" PRIu64
            " in directory order, %" PRIu64 " hinted), %" PRIu64 " then opened, %.1f MiB "
            "wasted; hints %" PRIu64 " (%" PRIu64 " skipped)\n",
            n->rd.prefetch_files, (double)n->rd.prefetch_bytes / 1048576.0, n->pf.order_files,
            n->pf.hint_files, n->rd.prefetch_hits,
            (double)n->rd.prefetch_wasted_bytes / 1048576.0, n->pf.hinted, n->pf.hint_skipped);
    if (!rc && n->has_sh)
        rc = om_buf_printf(
            b,
            "shards: %" PRIu64 " shown as directories (%" PRIu64 " left as files); index: %" PRIu64
            " built from headers (%" PRIu64 " GETs), %" PRIu64 " kept-index hits, %" PRIu64
            " from index objects; members: %" PRIu64 " opened, %" PRIu64 " read (%.1f MiB; %" PRIu64
            " reads streamed, %" PRIu64 " ranged, %" PRIu64 " hinted fetched ahead); %" PRIu64
            " GETs, %.4f per member read; %" PRIu64 " writes refused\n",
            n->sh.shards, n->sh.not_shards, n->sh.index_builds, n->sh.index_scan_gets,
            n->sh.index_hits, n->sh.index_objects, n->sh.member_opens, n->sh.members_read,
            (double)n->sh.read_bytes / 1048576.0, n->sh.stream_reads, n->sh.range_reads,
            n->sh.hinted_prefetches, n->sh.gets,
            n->sh.members_read ? (double)n->sh.gets / (double)n->sh.members_read : 0.0,
            n->sh.refused_writes);
    if (!rc && n->has_dc)
        rc = text_data_cache(n, b);
    if (!rc)
        rc = om_buf_printf(b,
                           "memory: read buffers %.1f MiB in use, peak %.1f MiB, limit %.1f MiB; "
                           "process RSS %.1f MiB\n",
                           (double)n->rd.memory_used / 1048576.0,
                           (double)n->rd.memory_peak / 1048576.0,
                           (double)n->rd.memory_limit / 1048576.0, (double)n->rss / 1048576.0);
    if (!rc && s->writers)
        rc = om_buf_printf(
            b,
            "writes: open %" PRIu64 ", commits %" PRIu64 " (%" PRIu64 " failed, %" PRIu64
            " in flight), whole-upload retries %" PRIu64 ", parts %" PRIu64 " (%" PRIu64
            " retried), %.1f MiB uploaded\n"
            "verified: by MD5 %" PRIu64 ", by multipart ETag %" PRIu64 ", by the store's checksum %"
            PRIu64 ", by size only %" PRIu64 ", read back %" PRIu64
            "; %.1f MiB hashed, multipart ETags %s; recovery files %d\n"
            "unchanged parts copied on the server %" PRIu64 " (%.1f MiB)%s; flushes left to a "
            "later close %" PRIu64 "; space given back by the data cache %" PRIu64 " times\n",
            n->wr.open_writers, n->wr.commits, n->wr.commit_failures, n->wr.commits_in_flight,
            n->wr.upload_retries, n->wr.part_uploads, n->wr.part_retries,
            (double)n->wr.bytes_uploaded / 1048576.0, n->wr.verified_md5, n->wr.verified_multipart,
            n->wr.verified_checksum, n->wr.verified_size_only, n->wr.verified_read, (double)n->wr.hashed_bytes / 1048576.0,
            om_etag_form_name(n->wr.etag_form), n->recovery, n->wr.part_copies,
            (double)n->wr.bytes_copied / 1048576.0,
            n->wr.part_copy_unsupported ? " (the server does not copy parts)" : "",
            n->wr.flushes_deferred, n->wr.space_reclaims);
    return rc;
}

#define PROM_COUNTER(b, name, help, value)                                                       \
    om_buf_printf(b, "# HELP objmount_" name " " help "\n# TYPE objmount_" name                  \
                     " counter\nobjmount_" name " %" PRIu64 "\n",                                \
                  (uint64_t)(value))
#define PROM_GAUGE(b, name, help, value)                                                         \
    om_buf_printf(b, "# HELP objmount_" name " " help "\n# TYPE objmount_" name                  \
                     " gauge\nobjmount_" name " %" PRIu64 "\n",                                  \
                  (uint64_t)(value))

static int per_op(struct om_buf *b, const struct snapshot *n, const char *name, const char *help,
                  size_t field)
{
    int rc = om_buf_printf(b, "# HELP objmount_%s %s\n# TYPE objmount_%s counter\n", name, help,
                           name);
    for (int i = 0; i < n->nops && !rc; i++) {
        uint64_t v = *(const uint64_t *)((const char *)&n->ops[i] + field);
        rc = om_buf_printf(b, "objmount_%s{op=\"%s\"} %" PRIu64 "\n", name, n->ops[i].op, v);
    }
    return rc;
}

static int prom_data_cache(struct om_buf *b, const struct om_dcache_stats *d)
{
    int rc = PROM_GAUGE(b, "data_cache_bytes", "Bytes in the data cache (all its mounts).",
                        d->size_bytes);
    if (!rc)
        rc = PROM_GAUGE(b, "data_cache_limit_bytes", "Bound of the data cache.", d->limit_bytes);
    if (!rc)
        rc = PROM_GAUGE(b, "data_cache_blocks", "Blocks this mount knows in the data cache.",
                        d->blocks);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_hit_bytes_total", "Bytes read from the data cache.",
                          d->hit_bytes);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_miss_bytes_total",
                          "Cacheable bytes fetched from the store.", d->miss_bytes);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_inserts_total", "Blocks stored.", d->inserts);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_rejected_total",
                          "Blocks not admitted: what they would displace is read more.",
                          d->rejected);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_evictions_total", "Blocks evicted.", d->evictions);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_reclaimed_bytes_total",
                          "Bytes the data cache gave back to writes short of room.",
                          d->reclaimed_bytes);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_corrupt_total", "Bad blocks found and dropped.",
                          d->corrupt);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_verified_total",
                          "Block files checked before their first reply from them.", d->verified);
    if (!rc)
        rc = PROM_COUNTER(b, "data_cache_direct_reads_total",
                          "Blocks read for replies with O_DIRECT, past the page cache.",
                          d->direct_reads);
    if (!rc)
        rc = PROM_GAUGE(b, "data_cache_direct_buffer_bytes",
                        "Buffers held for O_DIRECT replies (freed after 5 s unused).",
                        d->direct_buffer_bytes);
    if (!rc)
        rc = PROM_GAUGE(b, "data_cache_in_flight", "Block reads and writes under way.",
                        d->in_flight);
    return rc;
}

static int prometheus(const struct snapshot *n, struct om_buf *b)
{
    int rc = per_op(b, n, "requests_total", "S3 requests completed.",
                    offsetof(struct om_http_op_stats, requests));
    if (!rc)
        rc = per_op(b, n, "request_failures_total", "S3 requests that ended in an error.",
                    offsetof(struct om_http_op_stats, failures));
    if (!rc)
        rc = per_op(b, n, "request_retries_total", "Attempts repeated after a transient failure.",
                    offsetof(struct om_http_op_stats, retries));
    if (!rc)
        rc = per_op(b, n, "redirects_total", "Redirects followed.",
                    offsetof(struct om_http_op_stats, redirects));
    if (!rc)
        rc = per_op(b, n, "received_bytes_total", "Response body bytes received.",
                    offsetof(struct om_http_op_stats, bytes_in));
    if (!rc)
        rc = per_op(b, n, "sent_bytes_total", "Request body bytes sent.",
                    offsetof(struct om_http_op_stats, bytes_out));
    if (!rc)
        rc = om_buf_printf(b, "# HELP objmount_request_duration_seconds Request latency.\n"
                              "# TYPE objmount_request_duration_seconds summary\n");
    for (int i = 0; i < n->nops && !rc; i++) {
        const struct om_http_op_stats *o = &n->ops[i];
        static const double qs[] = {0.5, 0.9, 0.99};
        for (size_t k = 0; k < 3 && !rc; k++)
            rc = om_buf_printf(b, "objmount_request_duration_seconds{op=\"%s\",quantile=\"%g\"} %g\n",
                               o->op, qs[k], (double)om_http_latency_quantile_us(o, qs[k]) / 1e6);
        if (!rc)
            rc = om_buf_printf(b,
                               "objmount_request_duration_seconds_sum{op=\"%s\"} %g\n"
                               "objmount_request_duration_seconds_count{op=\"%s\"} %" PRIu64 "\n",
                               o->op, (double)o->latency_sum_us / 1e6, o->op, o->requests);
    }
    if (!rc)
        rc = PROM_COUNTER(b, "short_bodies_total", "Responses shorter than announced.",
                          n->http.short_bodies);
    if (!rc)
        rc = PROM_COUNTER(b, "requests_cancelled_total",
                          "Requests abandoned by objmount (prefetch no longer wanted).",
                          n->http.cancelled);
    if (!rc)
        rc = PROM_COUNTER(b, "connections_opened_total", "Connections opened.",
                          n->http.connections);
    if (!rc)
        rc = PROM_COUNTER(b, "lookups_total", "Name lookups.", n->meta.lookups);
    if (!rc)
        rc = PROM_COUNTER(b, "lookups_cached_total", "Lookups answered without a request.",
                          n->meta.lookups_cached);
    if (!rc)
        rc = PROM_GAUGE(b, "metadata_bytes", "Bytes the namespace holds (inodes, names, listings).",
                        n->meta.bytes);
    if (!rc)
        rc = PROM_GAUGE(b, "metadata_budget_bytes", "metadata_memory; 0 = no bound.",
                        n->meta.budget);
    if (!rc)
        rc = PROM_COUNTER(b, "metadata_listings_evicted_total",
                          "Listings dropped to stay within metadata_memory.",
                          n->meta.listings_evicted);
    if (!rc)
        rc = PROM_COUNTER(b, "metadata_entries_without_inode_total",
                          "Readdirplus entries handed to the kernel without an inode.",
                          n->meta.entries_without_inode);
    if (!rc)
        rc = PROM_COUNTER(b, "metadata_invalidations_total",
                          "Names the kernel was asked to forget.", n->meta.invalidations);
    if (!rc)
        rc = PROM_COUNTER(b, "reads_total", "Read calls.", n->rd.reads);
    if (!rc)
        rc = PROM_COUNTER(b, "read_hits_total", "Reads served from buffers already fetched.",
                          n->rd.hits);
    if (!rc)
        rc = PROM_COUNTER(b, "read_bytes_total", "Bytes returned by reads.", n->rd.read_bytes);
    if (!rc)
        rc = PROM_COUNTER(b, "lookup_whole_gets_total",
                          "Small objects a lookup fetched whole instead of a HEAD.",
                          n->rd.lookup_gets);
    if (!rc)
        rc = PROM_COUNTER(b, "lookup_whole_gets_opened_total",
                          "Of those, opened and read from memory.", n->rd.lookup_get_hits);
    if (!rc)
        rc = PROM_COUNTER(b, "lookup_heads_total",
                          "Small objects a lookup HEADed because few lookups were opens.",
                          n->rd.lookup_heads);
    if (!rc)
        rc = PROM_COUNTER(b, "lookup_pool_answers_total",
                          "Lookups answered from an object the read pool held whole.",
                          n->rd.lookup_pool_answers);
    if (!rc && n->has_sh)
        rc = PROM_COUNTER(b, "shard_members_read_total", "Shard members read (shards=tar).",
                          n->sh.members_read);
    if (!rc && n->has_sh)
        rc = PROM_COUNTER(b, "shard_gets_total", "GETs of shards' bytes (shards=tar).",
                          n->sh.gets);
    if (!rc && n->has_sh)
        rc = PROM_COUNTER(b, "shard_index_builds_total",
                          "Shard indexes built by a pass over the headers.", n->sh.index_builds);
    if (!rc && n->has_sh)
        rc = PROM_COUNTER(b, "shard_index_hits_total",
                          "Shard indexes read from the kept index file.", n->sh.index_hits);
    if (!rc && n->has_dc)
        rc = prom_data_cache(b, &n->dc);
    if (!rc)
        rc = PROM_COUNTER(b, "prefetch_files_total",
                          "Files fetched ahead of an expected open (directory order, hints).",
                          n->rd.prefetch_files);
    if (!rc)
        rc = PROM_COUNTER(b, "prefetch_hits_total", "Files fetched ahead and then opened.",
                          n->rd.prefetch_hits);
    if (!rc)
        rc = PROM_COUNTER(b, "prefetch_wasted_bytes_total",
                          "Bytes fetched ahead of opens that did not come.",
                          n->rd.prefetch_wasted_bytes);
    if (!rc)
        rc = PROM_GAUGE(b, "read_buffer_bytes", "Read buffer memory in use.", n->rd.memory_used);
    if (!rc)
        rc = PROM_GAUGE(b, "read_buffer_limit_bytes", "Read buffer budget.", n->rd.memory_limit);
    if (!rc)
        rc = PROM_GAUGE(b, "resident_memory_bytes", "Resident set size of the daemon.", n->rss);
    if (!rc)
        rc = PROM_GAUGE(b, "open_files", "Open files.", n->rd.open_readers + n->wr.open_writers);
    if (!rc)
        rc = PROM_COUNTER(b, "commits_total", "Write commits.", n->wr.commits);
    if (!rc)
        rc = PROM_COUNTER(b, "commit_failures_total", "Commits that failed after retries.",
                          n->wr.commit_failures);
    if (!rc)
        rc = PROM_GAUGE(b, "commits_in_flight", "Commits under way.", n->wr.commits_in_flight);
    if (!rc)
        rc = PROM_COUNTER(b, "uploaded_bytes_total", "Bytes uploaded by commits.",
                          n->wr.bytes_uploaded);
    if (!rc)
        rc = PROM_COUNTER(b, "hashed_bytes_total",
                          "Bytes run through MD5 by the write path (one pass per byte uploaded "
                          "when the server's multipart ETags are MD5s of the part MD5s).",
                          n->wr.hashed_bytes);
    if (!rc)
        rc = PROM_COUNTER(b, "copied_bytes_total",
                          "Bytes of unchanged parts copied on the server instead of uploaded.",
                          n->wr.bytes_copied);
    if (!rc)
        rc = PROM_COUNTER(b, "flushes_deferred_total",
                          "Flushes that left the commit to a later close, fsync or release.",
                          n->wr.flushes_deferred);
    if (!rc)
        rc = PROM_GAUGE(b, "recovery_files", "Files waiting in the recovery directory.",
                        n->recovery);
    return rc;
}

/* ---- JSON (doc/json.md: add fields, never rename or remove them) ---- */

static void json_head(struct om_json *j, const struct om_stats_sources *s)
{
    om_json_str(j, "mountpoint", s->mountpoint);
    om_json_str(j, "bucket", s->bucket);
    om_json_str(j, "prefix", s->prefix);
    om_json_str(j, "endpoint", s->endpoint);
    om_json_i64(j, "pid", (int64_t)getpid());
    om_json_i64(j, "uptime_s", (int64_t)(time(NULL) - s->started));
}

static int status_json(const struct om_stats_sources *s, const struct snapshot *n, struct om_buf *b)
{
    char last[512] = "";
    time_t when = 0;
    om_log_last_problem(last, sizeof(last), &when);
    struct om_json j;
    om_json_init(&j, b);
    om_json_object(&j, NULL);
    json_head(&j, s);
    om_json_bool(&j, "answering", true);
    om_json_u64(&j, "open_files", n->rd.open_readers + n->wr.open_writers);
    om_json_u64(&j, "open_writers", n->wr.open_writers);
    om_json_u64(&j, "commits_in_flight", n->wr.commits_in_flight);
    om_json_i64(&j, "recovery_files", n->recovery);
    om_json_str(&j, "cache_dir", s->cache_dir);
    om_json_bool(&j, "read_only", s->writers == NULL);
    om_json_str(&j, "last_error", last[0] ? last : NULL);
    if (when)
        om_json_i64(&j, "last_error_time", (int64_t)when);
    else
        om_json_str(&j, "last_error_time", NULL);
    om_json_end(&j, '}');
    return j.rc ? j.rc : om_buf_puts(b, "\n");
}

static void json_ms(struct om_json *j, const char *key, uint64_t us)
{
    om_json_double(j, key, (double)us / 1000.0);
}

static int stats_json(const struct om_stats_sources *s, const struct snapshot *n, struct om_buf *b)
{
    struct om_json j;
    om_json_init(&j, b);
    om_json_object(&j, NULL);
    json_head(&j, s);
    om_json_object(&j, "requests");
    om_json_u64(&j, "total", n->http.requests);
    om_json_u64(&j, "attempts", n->http.attempts);
    om_json_u64(&j, "retries", n->http.retries);
    om_json_u64(&j, "redirects", n->http.redirects);
    om_json_u64(&j, "failures", n->http.failures);
    om_json_u64(&j, "cancelled", n->http.cancelled);
    om_json_u64(&j, "short_bodies", n->http.short_bodies);
    om_json_u64(&j, "received_bytes", n->http.bytes_in);
    om_json_u64(&j, "sent_bytes", n->http.bytes_out);
    om_json_u64(&j, "connections_opened", n->http.connections);
    om_json_end(&j, '}');
    om_json_array(&j, "operations");
    for (int i = 0; i < n->nops; i++) {
        const struct om_http_op_stats *o = &n->ops[i];
        om_json_object(&j, NULL);
        om_json_str(&j, "op", o->op);
        om_json_u64(&j, "requests", o->requests);
        om_json_u64(&j, "failures", o->failures);
        om_json_u64(&j, "retries", o->retries);
        om_json_u64(&j, "redirects", o->redirects);
        om_json_u64(&j, "received_bytes", o->bytes_in);
        om_json_u64(&j, "sent_bytes", o->bytes_out);
        json_ms(&j, "latency_p50_ms", om_http_latency_quantile_us(o, 0.5));
        json_ms(&j, "latency_p90_ms", om_http_latency_quantile_us(o, 0.9));
        json_ms(&j, "latency_p99_ms", om_http_latency_quantile_us(o, 0.99));
        json_ms(&j, "latency_sum_ms", o->latency_sum_us);
        om_json_end(&j, '}');
    }
    om_json_end(&j, ']');
    om_json_object(&j, "metadata");
    om_json_u64(&j, "inodes", n->meta.inodes);
    om_json_u64(&j, "lookups", n->meta.lookups);
    om_json_u64(&j, "lookups_cached", n->meta.lookups_cached);
    om_json_u64(&j, "lookups_negative", n->meta.lookups_negative);
    om_json_u64(&j, "getattrs", n->meta.getattrs);
    om_json_u64(&j, "getattrs_cached", n->meta.getattrs_cached);
    om_json_u64(&j, "list_pages", n->meta.list_pages);
    om_json_u64(&j, "list_entries", n->meta.list_entries);
    om_json_u64(&j, "skipped_names", n->meta.skipped_names);
    om_json_u64(&j, "walk_listings", n->meta.walk_listings);
    om_json_u64(&j, "walk_listings_used", n->meta.walk_listings_used);
    om_json_u64(&j, "bytes", n->meta.bytes);
    om_json_u64(&j, "bytes_peak", n->meta.bytes_peak);
    om_json_u64(&j, "budget_bytes", n->meta.budget);
    om_json_u64(&j, "listings_evicted", n->meta.listings_evicted);
    om_json_u64(&j, "entries_without_inode", n->meta.entries_without_inode);
    om_json_u64(&j, "invalidations", n->meta.invalidations);
    om_json_end(&j, '}');
    om_json_object(&j, "reads");
    om_json_u64(&j, "reads", n->rd.reads);
    om_json_u64(&j, "read_bytes", n->rd.read_bytes);
    om_json_u64(&j, "hits", n->rd.hits);
    om_json_u64(&j, "gets", n->rd.gets);
    om_json_u64(&j, "get_bytes", n->rd.get_bytes);
    om_json_u64(&j, "prefetch_gets", n->rd.prefetch_gets);
    om_json_u64(&j, "get_errors", n->rd.get_errors);
    om_json_u64(&j, "memory_waits", n->rd.waits);
    om_json_u64(&j, "evictions", n->rd.evictions);
    om_json_u64(&j, "open_readers", n->rd.open_readers);
    om_json_u64(&j, "lookup_whole_gets", n->rd.lookup_gets);
    om_json_u64(&j, "lookup_whole_gets_opened", n->rd.lookup_get_hits);
    om_json_u64(&j, "version_heads", n->rd.version_heads);
    om_json_u64(&j, "lookup_heads", n->rd.lookup_heads);
    om_json_u64(&j, "lookup_pool_answers", n->rd.lookup_pool_answers);
    om_json_u64(&j, "cache_loads", n->rd.cache_loads);
    om_json_u64(&j, "cache_file_reads", n->rd.cache_file_reads);
    om_json_u64(&j, "cache_fills", n->rd.cache_fills);
    om_json_u64(&j, "cache_fill_bytes", n->rd.cache_fill_bytes);
    om_json_u64(&j, "memory_fills", n->rd.memory_fills);
    om_json_end(&j, '}');
    om_json_object(&j, "prefetch");
    om_json_u64(&j, "files", n->rd.prefetch_files);
    om_json_u64(&j, "bytes", n->rd.prefetch_bytes);
    om_json_u64(&j, "hits", n->rd.prefetch_hits);
    om_json_u64(&j, "wasted_bytes", n->rd.prefetch_wasted_bytes);
    om_json_u64(&j, "order_streams", n->pf.order_streams);
    om_json_u64(&j, "order_files", n->pf.order_files);
    om_json_u64(&j, "hinted", n->pf.hinted);
    om_json_u64(&j, "hint_files", n->pf.hint_files);
    om_json_u64(&j, "hint_skipped", n->pf.hint_skipped);
    om_json_end(&j, '}');
    if (!n->has_sh) {
        om_json_str(&j, "shards", NULL);
    } else {
        om_json_object(&j, "shards");
        om_json_u64(&j, "opened", n->sh.shards);
        om_json_u64(&j, "not_shards", n->sh.not_shards);
        om_json_u64(&j, "index_builds", n->sh.index_builds);
        om_json_u64(&j, "index_scan_gets", n->sh.index_scan_gets);
        om_json_u64(&j, "index_hits", n->sh.index_hits);
        om_json_u64(&j, "index_objects", n->sh.index_objects);
        om_json_u64(&j, "member_opens", n->sh.member_opens);
        om_json_u64(&j, "members_read", n->sh.members_read);
        om_json_u64(&j, "read_bytes", n->sh.read_bytes);
        om_json_u64(&j, "stream_reads", n->sh.stream_reads);
        om_json_u64(&j, "range_reads", n->sh.range_reads);
        om_json_u64(&j, "hinted_prefetches", n->sh.hinted_prefetches);
        om_json_u64(&j, "hinted_whole_shards", n->sh.hinted_whole_shards);
        om_json_u64(&j, "gets", n->sh.gets);
        om_json_u64(&j, "refused_writes", n->sh.refused_writes);
        om_json_end(&j, '}');
    }
    if (!n->has_dc) {
        om_json_str(&j, "data_cache", NULL);
    } else {
        om_json_object(&j, "data_cache");
        om_json_u64(&j, "size_bytes", n->dc.size_bytes);
        om_json_u64(&j, "limit_bytes", n->dc.limit_bytes);
        om_json_u64(&j, "blocks", n->dc.blocks);
        om_json_u64(&j, "hits", n->dc.hits);
        om_json_u64(&j, "hit_bytes", n->dc.hit_bytes);
        om_json_u64(&j, "misses", n->dc.misses);
        om_json_u64(&j, "miss_bytes", n->dc.miss_bytes);
        om_json_u64(&j, "inserts", n->dc.inserts);
        om_json_u64(&j, "insert_bytes", n->dc.insert_bytes);
        om_json_u64(&j, "rejected", n->dc.rejected);
        om_json_u64(&j, "evictions", n->dc.evictions);
        om_json_u64(&j, "reclaimed_bytes", n->dc.reclaimed_bytes);
        om_json_u64(&j, "corrupt", n->dc.corrupt);
        om_json_u64(&j, "verified", n->dc.verified);
        om_json_u64(&j, "direct_reads", n->dc.direct_reads);
        om_json_u64(&j, "direct_buffer_bytes", n->dc.direct_buffer_bytes);
        om_json_u64(&j, "in_flight", n->dc.in_flight);
        om_json_bool(&j, "storing", n->dc.storing);
        om_json_end(&j, '}');
    }
    om_json_object(&j, "memory");
    om_json_u64(&j, "read_buffer_bytes", n->rd.memory_used);
    om_json_u64(&j, "read_buffer_peak_bytes", n->rd.memory_peak);
    om_json_u64(&j, "read_buffer_limit_bytes", n->rd.memory_limit);
    om_json_u64(&j, "resident_bytes", n->rss);
    om_json_end(&j, '}');
    if (!s->writers) {
        om_json_str(&j, "writes", NULL);
    } else {
        om_json_object(&j, "writes");
        om_json_u64(&j, "open_writers", n->wr.open_writers);
        om_json_u64(&j, "commits", n->wr.commits);
        om_json_u64(&j, "commit_failures", n->wr.commit_failures);
        om_json_u64(&j, "commits_in_flight", n->wr.commits_in_flight);
        om_json_u64(&j, "upload_retries", n->wr.upload_retries);
        om_json_u64(&j, "part_uploads", n->wr.part_uploads);
        om_json_u64(&j, "part_retries", n->wr.part_retries);
        om_json_u64(&j, "uploaded_bytes", n->wr.bytes_uploaded);
        om_json_u64(&j, "verified_md5", n->wr.verified_md5);
        om_json_u64(&j, "verified_multipart", n->wr.verified_multipart);
        om_json_u64(&j, "verified_checksum", n->wr.verified_checksum);
        om_json_u64(&j, "verified_size_only", n->wr.verified_size_only);
        om_json_u64(&j, "verified_read", n->wr.verified_read);
        om_json_u64(&j, "hashed_bytes", n->wr.hashed_bytes);
        om_json_str(&j, "multipart_etag_form", om_etag_form_name(n->wr.etag_form));
        om_json_u64(&j, "part_copies", n->wr.part_copies);
        om_json_u64(&j, "copied_bytes", n->wr.bytes_copied);
        om_json_bool(&j, "part_copy_unsupported", n->wr.part_copy_unsupported);
        om_json_u64(&j, "meta_not_stored", n->wr.meta_not_stored);
        om_json_u64(&j, "flushes_deferred", n->wr.flushes_deferred);
        om_json_u64(&j, "space_reclaims", n->wr.space_reclaims);
        om_json_u64(&j, "recovered", n->wr.recovered);
        om_json_end(&j, '}');
    }
    om_json_i64(&j, "recovery_files", n->recovery);
    om_json_end(&j, '}');
    return j.rc ? j.rc : om_buf_puts(b, "\n");
}

int om_stats_render(const struct om_stats_sources *s, enum om_stats_format f, struct om_buf *out)
{
    struct snapshot n;
    take(s, &n);
    switch (f) {
    case OM_STATS_STATUS:
        return status(s, &n, out);
    case OM_STATS_PROMETHEUS:
        return prometheus(&n, out);
    case OM_STATS_STATUS_JSON:
        return status_json(s, &n, out);
    case OM_STATS_JSON:
        return stats_json(s, &n, out);
    case OM_STATS_CACHE:
        return text_data_cache(&n, out);
    default:
        return text(s, &n, out);
    }
}
