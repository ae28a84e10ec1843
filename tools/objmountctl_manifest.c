/* objmountctl manifest build BUCKET[:PREFIX] [--threads N] [--output FILE]
 * objmountctl manifest show FILE [--keys]
 *
 * build lists the prefix once: its first level with the delimiter, then
 * every common prefix of that level whole, N at a time; sorts the keys and
 * writes the manifest (doc/decisions.md, "Manifest mounts"). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "objmount/client.h"
#include "objmount/manifest.h"
#include "objmount/util.h"
#include "ctl_common.h"
#include "objmountctl.h"

struct keys {
    struct om_manifest_key *v;
    size_t n, cap;
};

static int keys_add(struct keys *k, const struct om_list_entry *e)
{
    if (k->n == k->cap) {
        size_t cap = k->cap ? 2 * k->cap : 1024;
        struct om_manifest_key *v = realloc(k->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        k->v = v;
        k->cap = cap;
    }
    /* key and ETag in one allocation: a build holds every key at once */
    size_t klen = strlen(e->key) + 1, elen = strlen(e->etag ? e->etag : "") + 1;
    struct om_manifest_key *m = &k->v[k->n];
    if (!(m->key = malloc(klen + elen)))
        return -ENOMEM;
    memcpy(m->key, e->key, klen);
    memcpy(m->key + klen, e->etag ? e->etag : "", elen);
    m->etag = m->key + klen;
    m->size = e->size;
    m->mtime = e->mtime;
    k->n++;
    return 0;
}

static void keys_free(struct keys *k)
{
    for (size_t i = 0; i < k->n; i++)
        free(k->v[i].key);
    free(k->v);
}

struct build {
    struct om_store *store;
    pthread_mutex_t lock;
    struct keys keys; /* every object found */
    char **prefixes;  /* common prefixes of the first level */
    size_t nprefixes, next, done;
    int threads; /* running */
    uint64_t pages;
    uint64_t found; /* keys listed so far */
    int error;
    char what[1200]; /* the failed listing */
    struct om_store_error err;
};

struct page_sink {
    struct build *b;
    struct keys *keys;
    size_t counted;   /* keys->n at the last page */
    bool first_level; /* common prefixes go to b->prefixes */
};

static int on_entry(void *ud, const struct om_list_entry *e)
{
    struct page_sink *s = ud;
    if (!e->is_prefix)
        return keys_add(s->keys, e);
    if (!s->first_level)
        return 0;
    struct build *b = s->b;
    char **v = realloc(b->prefixes, (b->nprefixes + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    b->prefixes = v;
    return (v[b->nprefixes++] = strdup(e->key)) ? 0 : -ENOMEM;
}

/* After each page: the counters; another thread's failure stops this one. */
static int on_page(void *ud)
{
    struct page_sink *s = ud;
    pthread_mutex_lock(&s->b->lock);
    s->b->pages++;
    s->b->found += s->keys->n - s->counted;
    int rc = s->b->error ? -ECANCELED : 0;
    pthread_mutex_unlock(&s->b->lock);
    s->counted = s->keys->n;
    return rc;
}

static int list_prefix(struct build *b, const char *prefix, const char *delimiter,
                       struct page_sink *sink)
{
    struct om_store_error err = {0};
    sink->counted = sink->keys->n;
    int rc = om_store_list_pages(b->store, prefix, delimiter, on_entry, sink, on_page, &err);
    pthread_mutex_lock(&b->lock);
    if (rc && !b->error) {
        b->error = rc;
        b->err = err;
        snprintf(b->what, sizeof(b->what), "%s", *prefix ? prefix : "/");
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* Lists first-level prefixes into a list of its own, merged at the end. */
static void *build_worker(void *arg)
{
    struct build *b = arg;
    struct keys mine = {0};
    struct page_sink sink = {.b = b, .keys = &mine};
    for (;;) {
        pthread_mutex_lock(&b->lock);
        size_t i = b->next < b->nprefixes && !b->error ? b->next++ : SIZE_MAX;
        pthread_mutex_unlock(&b->lock);
        if (i == SIZE_MAX)
            break;
        list_prefix(b, b->prefixes[i], NULL, &sink);
        pthread_mutex_lock(&b->lock);
        b->done++;
        pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_lock(&b->lock);
    struct om_manifest_key *v = realloc(b->keys.v, (b->keys.n + mine.n + 1) * sizeof(*v));
    if (v) {
        memcpy(v + b->keys.n, mine.v, mine.n * sizeof(*mine.v));
        b->keys.v = v;
        b->keys.n += mine.n;
        b->keys.cap = b->keys.n + 1;
        mine.n = 0;
    } else if (!b->error) {
        b->error = -ENOMEM;
    }
    b->threads--;
    pthread_mutex_unlock(&b->lock);
    keys_free(&mine);
    return NULL;
}

static bool build_ended(void *ud)
{
    struct build *b = ud;
    pthread_mutex_lock(&b->lock);
    bool ended = b->threads == 0;
    pthread_mutex_unlock(&b->lock);
    return ended;
}

static void build_progress(void *ud, double secs, bool final)
{
    struct build *b = ud;
    pthread_mutex_lock(&b->lock);
    uint64_t pages = b->pages, keys = b->found;
    size_t done = b->done, total = b->nprefixes;
    pthread_mutex_unlock(&b->lock);
    char text[256];
    snprintf(text, sizeof(text),
             "%zu/%zu prefixes, %" PRIu64 " keys, %" PRIu64 " pages, %.0f keys/s", done, total,
             keys, pages, secs > 0 ? (double)keys / secs : 0.0);
    ctl_progress(total ? (double)done / (double)total : 1.0, text, final);
}

/* Everything of from to to. 0 or -errno. */
static int copy_fd(int from, int to)
{
    char buf[1 << 16];
    off_t off = 0;
    for (;;) {
        ssize_t n = pread(from, buf, sizeof(buf), off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : 0;
        for (ssize_t w = 0; w < n;) {
            ssize_t k = write(to, buf + w, (size_t)(n - w));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return k < 0 ? -errno : -EIO;
            w += k;
        }
        off += n;
    }
}

/* Where the manifest goes: FILE (written beside it, then renamed), stdout
 * when it is a file opened at its start, else a temporary file copied to
 * stdout (a pipe, ">>"). */
static int write_manifest(struct om_config *cfg, struct keys *k, const char *output)
{
    struct stat st;
    if (!output && isatty(1))
        return ctl_fail("the manifest is binary: give --output FILE or redirect stdout");
    char *tmp = NULL;
    int fd;
    bool via_temp = false;
    if (output) {
        if (asprintf(&tmp, "%s.tmp.%d", output, (int)getpid()) < 0)
            return ctl_fail("out of memory");
        fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    } else if (fstat(1, &st) == 0 && S_ISREG(st.st_mode) && lseek(1, 0, SEEK_CUR) == 0 &&
               !(fcntl(1, F_GETFL) & O_APPEND)) {
        fd = 1; /* "> FILE": written in place (the header goes last, at offset 0) */
    } else {
        FILE *t = tmpfile();
        fd = t ? dup(fileno(t)) : -1;
        if (t)
            fclose(t);
        via_temp = true;
    }
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return ctl_fail("%s: %s", output ? output : "temporary file", strerror(e));
    }
    int rc = om_manifest_build(fd, cfg->bucket, cfg->prefix, time(NULL), k->v, k->n);
    if (!rc && via_temp)
        rc = copy_fd(fd, 1);
    if (fd != 1 && close(fd) != 0 && !rc)
        rc = -errno;
    if (!rc && tmp && rename(tmp, output) != 0)
        rc = -errno;
    if (rc && tmp)
        unlink(tmp);
    free(tmp);
    if (rc)
        return ctl_fail("writing the manifest: %s", strerror(-rc));
    return 0;
}

static int manifest_build(struct om_config *cfg, int threads, const char *output)
{
    struct om_client c;
    char err[512];
    if (om_client_open(&c, cfg, err, sizeof(err)))
        return ctl_fail("%s", err);
    struct build b = {.store = c.store};
    pthread_mutex_init(&b.lock, NULL);
    uint64_t start = om_now_ms();
    /* the first level: its objects, and the prefixes listed in parallel */
    struct page_sink sink = {.b = &b, .keys = &b.keys, .first_level = true};
    int rc = list_prefix(&b, cfg->prefix, "/", &sink);
    pthread_t t[64];
    int nt = 0;
    for (int i = 0; !rc && i < threads && i < 64 && (size_t)i < b.nprefixes; i++) {
        pthread_mutex_lock(&b.lock);
        b.threads++;
        pthread_mutex_unlock(&b.lock);
        if (pthread_create(&t[nt], NULL, build_worker, &b) == 0) {
            nt++;
        } else {
            pthread_mutex_lock(&b.lock);
            b.threads--;
            pthread_mutex_unlock(&b.lock);
        }
    }
    if (!rc && nt == 0 && b.nprefixes > 0)
        b.error = -EAGAIN; /* no thread could start */
    ctl_wait(build_ended, build_progress, &b);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    double secs = (double)(om_now_ms() - start) / 1000.0;
    int status = 0;
    if (b.error) {
        status = ctl_fail("listing %s:%s failed: %s (HTTP %ld %s)", cfg->bucket, b.what,
                          strerror(-b.error), b.err.status, b.err.code);
    } else {
        status = write_manifest(cfg, &b.keys, output);
        if (!status)
            fprintf(stderr,
                    "objmountctl: manifest of %s%s%s: %zu keys from %" PRIu64
                    " listing pages in %.1f s\n",
                    cfg->bucket, cfg->prefix[0] ? ":" : "", cfg->prefix, b.keys.n, b.pages, secs);
    }
    keys_free(&b.keys);
    for (size_t i = 0; i < b.nprefixes; i++)
        free(b.prefixes[i]);
    free(b.prefixes);
    pthread_mutex_destroy(&b.lock);
    om_client_close(&c);
    return status;
}

static int print_key(void *ud, const struct om_list_entry *e)
{
    (void)ud;
    char when[32];
    struct tm tm;
    gmtime_r(&e->mtime, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    printf("%" PRIu64 "\t%s\t%s\t%s\n", e->size, when, e->etag[0] ? e->etag : "-", e->key);
    return ferror(stdout) ? -EIO : 0;
}

struct totals {
    uint64_t objects, prefixes, bytes;
};

static int count_entry(void *ud, const struct om_list_entry *e)
{
    struct totals *t = ud;
    if (e->is_prefix)
        t->prefixes++;
    else
        t->objects++;
    t->bytes += e->size;
    return 0;
}

static int manifest_show(const char *path, bool keys)
{
    struct om_manifest *mf;
    char err[256];
    if (om_manifest_open(path, 0, &mf, err, sizeof(err)))
        return ctl_fail("%s: %s", path, err);
    const struct om_manifest_info *info = om_manifest_info(mf);
    int rc = 0;
    if (keys) {
        rc = om_manifest_list(mf, NULL, 0, NULL, 0, print_key, NULL, NULL);
    } else {
        char when[32];
        struct tm tm;
        gmtime_r(&info->built, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        struct totals all = {0}, top = {0};
        rc = om_manifest_list(mf, NULL, 0, NULL, 0, count_entry, &all, NULL);
        if (!rc)
            rc = om_manifest_list(mf, info->prefix, '/', NULL, 0, count_entry, &top, NULL);
        printf("manifest    %s\n", path);
        printf("format      version %" PRIu32 ", flags %" PRIu32 ", checksum verified\n",
               info->version, info->flags);
        printf("source      %s:%s\n", info->bucket, info->prefix);
        printf("built       %s (%.1f days ago)\n", when,
               difftime(time(NULL), info->built) / 86400.0);
        printf("keys        %" PRIu64 " in %" PRIu64 " blocks, %.1f GiB of objects\n", info->keys,
               info->blocks, (double)all.bytes / (1024.0 * 1024 * 1024));
        printf("first level %" PRIu64 " objects, %" PRIu64 " directories\n", top.objects,
               top.prefixes);
        printf("size        %" PRIu64 " bytes, %.1f per key\n", info->file_size,
               info->keys ? (double)info->file_size / (double)info->keys : 0.0);
    }
    om_manifest_close(mf);
    if (rc)
        return ctl_fail("%s: %s", path, strerror(-rc));
    return 0;
}

int ctl_manifest(struct om_config *cfg, char **pos, int npos, int threads, const char *output,
                 bool keys)
{
    char err[512];
    if (npos == 3 && strcmp(pos[1], "build") == 0) {
        if (om_config_set_source(cfg, pos[2], err, sizeof(err)))
            return ctl_fail("%s", err);
        return manifest_build(cfg, threads, output);
    }
    if (npos == 3 && strcmp(pos[1], "show") == 0)
        return manifest_show(pos[2], keys);
    fprintf(stderr, "objmountctl: manifest: use 'manifest build BUCKET[:PREFIX] [--output FILE]' "
                    "or 'manifest show FILE [--keys]'\n");
    return 2;
}
