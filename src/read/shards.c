/* Tar shards shown as directories: see include/objmount/shards.h. The
 * decisions are src/shard/'s (the index, the tar parser, the index
 * objects, the read plan); this file fetches what they need and executes
 * their answers through the read pool. */
#include "objmount/shards.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "objmount/dcache.h"
#include "objmount/hash.h"
#include "objmount/log.h"
#include "objmount/shard_index.h"
#include "objmount/shard_plan.h"
#include "objmount/util.h"
#include "shards_int.h"

#define SLOT_SHIFT 22
#define LOCAL_MASK ((1ULL << SLOT_SHIFT) - 1)
#define PIDS 16                          /* processes whose walk a shard follows */
#define HINT_AHEAD 16                    /* hinted members fetched ahead */
#define PREFETCH_THREADS 4
#define ATTACH_QUEUE 64 /* shards a listing showed, whose indexes are loaded ahead */
#define PREFETCH_QUEUE 256

/* One process's walk through a shard. */
struct walk {
    pid_t pid;
    uint64_t used; /* a tick, for replacing the least recent */
    struct om_shard_reader r;
};

struct shard {
    struct om_hnode node; /* in ss->by_ino, by dir_ino, while current */
    uint64_t slot;
    uint64_t dir_ino;
    char *key;
    struct om_attr file; /* the object as a file, when attached */
    struct om_attr dir;  /* as a directory */
    struct om_shard_index ix;
    char **idirs; /* directories only the names imply, sorted */
    uint32_t nidirs;
    pthread_mutex_t lock;
    struct om_reader *stream; /* reads in tar order */
    struct om_reader *ranges; /* the others, and the pass over headers */
    struct om_shard_stream st;
    struct walk walks[PIDS];
    uint64_t tick;
    /* the order hint: members in order, where each is in it, how far the
     * reads got and what was queued ahead */
    uint32_t *hint;
    size_t nhint;
    uint32_t *hint_pos; /* by member, UINT32_MAX: not hinted */
    bool hint_in_order;
    bool hint_whole; /* the hint's members are most of the shard: it is read whole */
    /* the read-through under way: bytes before through_pos are in the pool
     * (or were: the pool may have evicted them); reads of members after it
     * wait for it rather than start GETs of their own */
    bool through;
    uint64_t through_pos;
    pthread_cond_t through_cv;
    size_t hint_queued;
    bool current; /* in by_ino */
};

struct om_shard_file {
    struct shard *sh;
    uint32_t member;
    bool read_once;
};

/* A shard's sequential GETs: up to this, and a sixteenth of memory_limit
 * (the window holds four of them) */
#define STREAM_CHUNK_MAX (32ULL << 20)

struct om_shards {
    struct om_store *store;
    struct om_readers *rs;
    struct om_shards_config cfg;
    char *dir; /* cache_dir/shards, or NULL */
    struct om_shard_plan_config plan;
    /* GET size of a shard's handles while they read on sequentially: a
     * 55 MB shard in 4 GETs (part_size: 7) */
    uint64_t stream_chunk;
    pthread_mutex_t lock;
    struct om_htable by_ino;
    struct shard **slots;
    size_t nslots, cap;
    /* versions that are not shards: (dir_ino, etag) told once */
    struct refused {
        uint64_t ino;
        char etag[OM_ETAG_MAX];
    } *refused;
    size_t nrefused, refused_cap;
    /* shards whose index is being loaded (by their directory's inode): a
     * second attach of one waits for the first; different shards load at
     * once */
    uint64_t loading[64];
    int nloading;
    pthread_cond_t loaded;
    /* hinted members fetched ahead */
    pthread_t threads[PREFETCH_THREADS];
    int nthreads;
    pthread_cond_t cond;
    struct {
        struct shard *sh;
        uint32_t member;
    } queue[PREFETCH_QUEUE];
    size_t qhead, qlen;
    struct pending {
        char *key;
        struct om_attr file;
    } pend[ATTACH_QUEUE];
    size_t npend;
    bool stopping;
    struct om_shards_stats stats;
};

bool om_shards_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".tar") == 0;
}

static uint64_t ino_of(const struct shard *sh, uint64_t local)
{
    return OM_SHARDS_INO_BIT | (sh->slot << SLOT_SHIFT) | local;
}

/* ---- attributes ---- */

static void member_attr(const struct shard *sh, uint32_t i, struct om_attr *a)
{
    const struct om_shard_member *m = &sh->ix.members[i];
    memset(a, 0, sizeof(*a));
    a->ino = ino_of(sh, (uint64_t)i + 1);
    a->uid = sh->file.uid;
    a->gid = sh->file.gid;
    bool headers = sh->ix.source == OM_SHARD_SRC_TAR;
    uint32_t perm = headers ? (m->mode & 07777) : (sh->file.mode & 07777);
    if (headers) {
        a->mtime.tv_sec = (time_t)m->mtime;
        a->mtime.tv_nsec = m->mtime_nsec;
    } else {
        a->mtime = sh->file.mtime;
    }
    switch (m->type) {
    case OM_SHARD_DIR:
        a->mode = S_IFDIR | (headers ? perm : sh->dir.mode & 07777);
        break;
    case OM_SHARD_SYMLINK:
        a->mode = S_IFLNK | 0777;
        a->size = strlen(om_shard_member_link(&sh->ix, m));
        break;
    default:
        a->mode = S_IFREG | perm;
        a->size = m->size;
        break;
    }
}

static void idir_attr(const struct shard *sh, uint32_t k, struct om_attr *a)
{
    *a = sh->dir;
    a->ino = ino_of(sh, (uint64_t)sh->ix.n + 1 + k);
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static int find_idir(const struct shard *sh, const char *path, size_t len, uint32_t *k)
{
    size_t lo = 0, hi = sh->nidirs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *s = sh->idirs[mid];
        int c = strncmp(s, path, len);
        if (c == 0 && s[len])
            c = 1;
        if (c == 0) {
            *k = (uint32_t)mid;
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -ENOENT;
}

/* The directories only the members' names imply. */
static int collect_idirs(struct shard *sh)
{
    size_t cap = 0;
    for (size_t i = 0; i < sh->ix.n; i++) {
        const struct om_shard_member *m = &sh->ix.members[i];
        if (m->flags & OM_SHARD_M_HIDDEN)
            continue;
        const char *name = om_shard_member_name(&sh->ix, m);
        for (const char *p = strchr(name, '/'); p; p = strchr(p + 1, '/')) {
            size_t len = (size_t)(p - name);
            uint32_t mem, k;
            if (om_shard_index_find(&sh->ix, name, len, &mem) != 1)
                continue;
            /* the last one added is most often the same (members of one
             * directory come together) */
            if (sh->nidirs && strncmp(sh->idirs[sh->nidirs - 1], name, len) == 0 &&
                !sh->idirs[sh->nidirs - 1][len])
                continue;
            bool seen = false;
            for (uint32_t j = 0; j < sh->nidirs && !seen; j++)
                seen = strncmp(sh->idirs[j], name, len) == 0 && !sh->idirs[j][len];
            (void)k;
            if (seen)
                continue;
            if (sh->nidirs == cap) {
                size_t nc = cap ? cap * 2 : 16;
                char **n = realloc(sh->idirs, nc * sizeof(*n));
                if (!n)
                    return -ENOMEM;
                sh->idirs = n;
                cap = nc;
            }
            if (!(sh->idirs[sh->nidirs] = strndup(name, len)))
                return -ENOMEM;
            sh->nidirs++;
        }
    }
    if (sh->nidirs)
        qsort(sh->idirs, sh->nidirs, sizeof(*sh->idirs), cmp_str);
    return 0;
}

/* ---- the table ---- */

static void shard_free(struct shard *sh)
{
    if (!sh)
        return;
    if (sh->stream)
        om_reader_close(sh->stream);
    if (sh->ranges)
        om_reader_close(sh->ranges);
    om_shard_index_free(&sh->ix);
    for (uint32_t k = 0; k < sh->nidirs; k++)
        free(sh->idirs[k]);
    free(sh->idirs);
    free(sh->hint);
    free(sh->hint_pos);
    free(sh->key);
    pthread_mutex_destroy(&sh->lock);
    pthread_cond_destroy(&sh->through_cv);
    free(sh);
}

static struct shard *current_of(struct om_shards *ss, uint64_t dir_ino)
{
    uint64_t h = om_hash_u64(dir_ino);
    for (struct om_hnode *n = om_htable_first(&ss->by_ino, h); n; n = om_htable_next(n, h)) {
        struct shard *sh = (struct shard *)n;
        if (sh->dir_ino == dir_ino)
            return sh;
    }
    return NULL;
}

/* The shard and local number of ino (a member's, or a shard directory's:
 * local 0). Caller holds ss->lock. */
static struct shard *resolve(struct om_shards *ss, uint64_t ino, uint64_t *local)
{
    if (!om_shards_member_ino(ino)) {
        *local = 0;
        return current_of(ss, ino);
    }
    uint64_t slot = (ino & ~OM_SHARDS_INO_BIT) >> SLOT_SHIFT;
    *local = ino & LOCAL_MASK;
    if (slot >= ss->nslots || !ss->slots[slot])
        return NULL;
    struct shard *sh = ss->slots[slot];
    if (*local == 0 || *local > (uint64_t)sh->ix.n + sh->nidirs)
        return NULL;
    return sh;
}

/* resolve() under the table's lock. */
static struct shard *find(struct om_shards *ss, uint64_t ino, uint64_t *local)
{
    pthread_mutex_lock(&ss->lock);
    struct shard *sh = resolve(ss, ino, local);
    pthread_mutex_unlock(&ss->lock);
    return sh;
}

static void *prefetch_main(void *arg);

struct om_shards *om_shards_new(struct om_store *store, struct om_readers *readers,
                                const struct om_shards_config *cfg)
{
    struct om_shards *ss = calloc(1, sizeof(*ss));
    if (!ss)
        return NULL;
    ss->store = store;
    ss->rs = readers;
    ss->cfg = *cfg;
    ss->cfg.cache_dir = NULL;
    if (cfg->cache_dir) {
        if (asprintf(&ss->dir, "%s/shards", cfg->cache_dir) < 0) {
            free(ss);
            return NULL;
        }
        if (mkdir(ss->dir, 0700) && errno != EEXIST) {
            om_warn("shards: cannot make %s (%s): indexes built will not be kept", ss->dir,
                    strerror(errno));
            free(ss->dir);
            ss->dir = NULL;
        }
    }
    ss->stream_chunk = OM_MAX(cfg->part_size, OM_MIN(STREAM_CHUNK_MAX, cfg->memory_limit / 16));
    ss->plan = (struct om_shard_plan_config){
        .skip_max = OM_SHARD_SKIP_MAX,
        .small_member = cfg->small_member,
        .align = 1, /* the read pool aligns what it fetches for the data cache */
        .stream_max = 0,
        .stream_after = OM_SHARD_STREAM_AFTER,
    };
    pthread_mutex_init(&ss->lock, NULL);
    pthread_cond_init(&ss->loaded, NULL);
    pthread_cond_init(&ss->cond, NULL);
    if (om_htable_init(&ss->by_ino, 64)) {
        free(ss->dir);
        free(ss);
        return NULL;
    }
    for (int i = 0; i < PREFETCH_THREADS; i++)
        if (pthread_create(&ss->threads[ss->nthreads], NULL, prefetch_main, ss) == 0)
            ss->nthreads++;
    return ss;
}

void om_shards_free(struct om_shards *ss)
{
    if (!ss)
        return;
    pthread_mutex_lock(&ss->lock);
    ss->stopping = true;
    pthread_cond_broadcast(&ss->cond);
    pthread_mutex_unlock(&ss->lock);
    for (int i = 0; i < ss->nthreads; i++)
        pthread_join(ss->threads[i], NULL);
    for (size_t i = 0; i < ss->npend; i++)
        free(ss->pend[i].key);
    for (size_t i = 0; i < ss->nslots; i++)
        shard_free(ss->slots[i]);
    free(ss->slots);
    free(ss->refused);
    om_htable_destroy(&ss->by_ino);
    pthread_cond_destroy(&ss->cond);
    pthread_mutex_destroy(&ss->lock);
    pthread_cond_destroy(&ss->loaded);
    free(ss->dir);
    free(ss);
}

/* Build sh's index (shards_int.h) and count how it was had. */
static int build(struct om_shards *ss, struct shard *sh)
{
    struct om_shard_ident id = {
        .endpoint = ss->cfg.endpoint ? ss->cfg.endpoint : "",
        .bucket = ss->cfg.bucket ? ss->cfg.bucket : "",
        .key = sh->key,
        .etag = sh->file.etag,
        .size = sh->file.size,
    };
    struct om_shards_load ld = {
        .store = ss->store,
        .ranges = sh->ranges,
        .dir = ss->dir,
        .id = &id,
        .mtime = sh->file.mtime.tv_sec,
    };
    int rc = om_shards_load_index(&ld, &sh->ix);
    pthread_mutex_lock(&ss->lock);
    ss->stats.index_scan_gets += ld.scan_gets;
    if (!rc && ld.from == OM_SHARDS_FROM_KEPT)
        ss->stats.index_hits++;
    else if (!rc && ld.from == OM_SHARDS_FROM_OBJECT)
        ss->stats.index_objects++;
    else if (!rc)
        ss->stats.index_builds++;
    pthread_mutex_unlock(&ss->lock);
    return rc;
}

static bool was_refused(struct om_shards *ss, uint64_t ino, const char *etag)
{
    for (size_t i = 0; i < ss->nrefused; i++)
        if (ss->refused[i].ino == ino && strcmp(ss->refused[i].etag, etag) == 0)
            return true;
    return false;
}

static void note_refused(struct om_shards *ss, uint64_t ino, const char *etag)
{
    if (ss->nrefused == ss->refused_cap) {
        size_t nc = ss->refused_cap ? ss->refused_cap * 2 : 16;
        void *n = realloc(ss->refused, nc * sizeof(*ss->refused));
        if (!n)
            return;
        ss->refused = n;
        ss->refused_cap = nc;
    }
    ss->refused[ss->nrefused].ino = ino;
    om_strlcpy(ss->refused[ss->nrefused].etag, etag, OM_ETAG_MAX);
    ss->nrefused++;
    ss->stats.not_shards++;
}

static bool same_version(const struct shard *sh, const struct om_attr *file)
{
    return sh->file.size == file->size && strcmp(sh->file.etag, file->etag) == 0 &&
           (file->etag[0] || sh->file.mtime.tv_sec == file->mtime.tv_sec);
}

/* The load of dir_ino's index ended. Caller holds ss->lock. */
static void loaded(struct om_shards *ss, uint64_t dir_ino)
{
    for (int i = 0; i < ss->nloading; i++) {
        if (ss->loading[i] == dir_ino) {
            ss->loading[i] = ss->loading[--ss->nloading];
            break;
        }
    }
    pthread_cond_broadcast(&ss->loaded);
}

int om_shards_attach(struct om_shards *ss, const char *key, const struct om_attr *file,
                     struct om_attr *dir)
{
    if (!S_ISREG(file->mode))
        return -ENOTDIR;
    pthread_mutex_lock(&ss->lock);
    struct shard *sh = current_of(ss, file->ino);
    bool known = sh && same_version(sh, file);
    bool refused = !known && was_refused(ss, file->ino, file->etag);
    if (known)
        *dir = sh->dir;
    pthread_mutex_unlock(&ss->lock);
    if (known)
        return 0;
    if (refused)
        return -EINVAL;
    /* one load per shard at a time; another thread may have loaded it meanwhile */
    pthread_mutex_lock(&ss->lock);
    for (;;) {
        bool busy = false;
        for (int i = 0; i < ss->nloading && !busy; i++)
            busy = ss->loading[i] == file->ino;
        if (!busy && ss->nloading < (int)(sizeof(ss->loading) / sizeof(ss->loading[0])))
            break;
        pthread_cond_wait(&ss->loaded, &ss->lock);
    }
    sh = current_of(ss, file->ino);
    known = sh && same_version(sh, file);
    refused = !known && was_refused(ss, file->ino, file->etag);
    if (known)
        *dir = sh->dir;
    if (!known && !refused)
        ss->loading[ss->nloading++] = file->ino;
    pthread_mutex_unlock(&ss->lock);
    if (known || refused)
        return known ? 0 : -EINVAL;
    int rc = -ENOMEM;
    sh = calloc(1, sizeof(*sh));
    if (!sh || !(sh->key = strdup(key)))
        goto fail;
    pthread_mutex_init(&sh->lock, NULL);
    om_cond_init_monotonic(&sh->through_cv); /* om_cond_wait_ms */
    sh->dir_ino = file->ino;
    sh->file = *file;
    sh->dir = *file;
    sh->dir.mode = S_IFDIR | (file->mode & 07777) | ((file->mode & 0444) >> 2);
    sh->dir.size = 0;
    sh->dir.etag[0] = '\0';
    sh->ranges = om_reader_open(ss->rs, key, file->size, file->etag);
    sh->stream = om_reader_open(ss->rs, key, file->size, file->etag);
    if (!sh->ranges || !sh->stream)
        goto fail;
    /* both read on sequentially at first (the pass, the walk): large GETs
     * from the start, not a window growing from prefetch_initial; a GET is
     * a quarter of the window, rounded down to the data cache's blocks, so
     * the window's slack makes a shard up to 4 stream_chunks 4 GETs, all
     * in flight at once */
    uint64_t window = file->size + 4 * OM_DCACHE_BLOCK;
    om_reader_set_window(sh->ranges, window);
    om_reader_set_window(sh->stream, window);
    om_reader_set_chunk(sh->ranges, ss->stream_chunk);
    om_reader_set_chunk(sh->stream, ss->stream_chunk);
    rc = build(ss, sh);
    if (rc)
        goto fail;
    rc = collect_idirs(sh);
    if (rc)
        goto fail;
    if (sh->ix.n + sh->nidirs >= LOCAL_MASK) {
        rc = -EFBIG;
        goto fail;
    }
    pthread_mutex_lock(&ss->lock);
    if (ss->nslots == ss->cap) {
        size_t nc = ss->cap ? ss->cap * 2 : 64;
        struct shard **n = realloc(ss->slots, nc * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&ss->lock);
            rc = -ENOMEM;
            goto fail;
        }
        ss->slots = n;
        ss->cap = nc;
    }
    struct shard *old = current_of(ss, file->ino);
    if (old) {
        om_htable_remove(&ss->by_ino, &old->node);
        old->current = false;
        om_info("shards: %s changed in the bucket (ETag %s, was %s): a new index", key,
                file->etag, old->file.etag);
    }
    sh->slot = ss->nslots;
    ss->slots[ss->nslots++] = sh;
    om_htable_insert(&ss->by_ino, &sh->node, om_hash_u64(sh->dir_ino));
    sh->current = true;
    ss->stats.shards++;
    *dir = sh->dir;
    loaded(ss, file->ino);
    pthread_mutex_unlock(&ss->lock);
    return 0;
fail:
    shard_free(sh);
    pthread_mutex_lock(&ss->lock);
    if (rc != -ENOMEM)
        note_refused(ss, file->ino, file->etag);
    loaded(ss, file->ino);
    pthread_mutex_unlock(&ss->lock);
    return rc;
}

void om_shards_attach_later(struct om_shards *ss, const char *key, const struct om_attr *file)
{
    if (!S_ISREG(file->mode))
        return;
    pthread_mutex_lock(&ss->lock);
    struct shard *sh = current_of(ss, file->ino);
    bool skip = (sh && same_version(sh, file)) || was_refused(ss, file->ino, file->etag) ||
                ss->npend == ATTACH_QUEUE;
    for (size_t i = 0; i < ss->npend && !skip; i++)
        skip = ss->pend[i].file.ino == file->ino;
    char *k = skip ? NULL : strdup(key);
    if (k) {
        /* the first listed is loaded first: the queue is taken from its end */
        memmove(ss->pend + 1, ss->pend, ss->npend * sizeof(*ss->pend));
        ss->pend[0].key = k;
        ss->pend[0].file = *file;
        ss->npend++;
        pthread_cond_signal(&ss->cond);
    }
    pthread_mutex_unlock(&ss->lock);
}

bool om_shards_is_dir(struct om_shards *ss, uint64_t ino, struct om_attr *dir)
{
    pthread_mutex_lock(&ss->lock);
    struct shard *sh = current_of(ss, ino);
    if (sh && dir)
        *dir = sh->dir;
    pthread_mutex_unlock(&ss->lock);
    return sh != NULL;
}

bool om_shards_owns(struct om_shards *ss, uint64_t ino)
{
    return om_shards_member_ino(ino) || om_shards_is_dir(ss, ino, NULL);
}

/* ---- names ---- */

/* The path of directory local of sh ("" for its root) into *path (borrowed
 * from the index), or -ENOTDIR. */
static int dir_path(const struct shard *sh, uint64_t local, const char **path, size_t *len)
{
    if (local == 0) {
        *path = "";
        *len = 0;
        return 0;
    }
    if (local <= sh->ix.n) {
        const struct om_shard_member *m = &sh->ix.members[local - 1];
        if (m->type != OM_SHARD_DIR)
            return -ENOTDIR;
        *path = om_shard_member_name(&sh->ix, m);
        *len = m->name_len;
        return 0;
    }
    *path = sh->idirs[local - 1 - sh->ix.n];
    *len = strlen(*path);
    return 0;
}

/* dir "/" name into path (OM_SHARD_NAME_MAX + 2 bytes, NUL-terminated):
 * its length, or 0 when it would be too long. */
static size_t join(char *path, const char *dir, size_t dlen, const char *name, size_t nlen)
{
    if (dlen + 1 + nlen > OM_SHARD_NAME_MAX)
        return 0;
    size_t n = 0;
    if (dlen) {
        memcpy(path, dir, dlen);
        path[dlen] = '/';
        n = dlen + 1;
    }
    memcpy(path + n, name, nlen);
    n += nlen;
    path[n] = '\0';
    return n;
}

static void local_attr(const struct shard *sh, uint64_t local, struct om_attr *a)
{
    if (local == 0)
        *a = sh->dir;
    else if (local <= sh->ix.n)
        member_attr(sh, (uint32_t)(local - 1), a);
    else
        idir_attr(sh, (uint32_t)(local - 1 - sh->ix.n), a);
}

int om_shards_lookup(struct om_shards *ss, uint64_t parent, const char *name, struct om_attr *a)
{
    uint64_t local;
    struct shard *sh = find(ss, parent, &local);
    if (!sh)
        return -ESTALE;
    const char *dir;
    size_t dlen;
    int rc = dir_path(sh, local, &dir, &dlen);
    if (rc)
        return rc;
    size_t nlen = strlen(name);
    if (nlen > OM_SHARD_SEGMENT_MAX)
        return -ENAMETOOLONG;
    char path[OM_SHARD_NAME_MAX + 2];
    size_t len = join(path, dir, dlen, name, nlen);
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || !len)
        return -ENOENT;
    uint32_t m, k;
    rc = om_shard_index_find(&sh->ix, path, len, &m);
    if (rc == 0) {
        member_attr(sh, m, a);
        return 0;
    }
    if (rc == 1 && find_idir(sh, path, len, &k) == 0) {
        idir_attr(sh, k, a);
        return 0;
    }
    return -ENOENT;
}

int om_shards_getattr(struct om_shards *ss, uint64_t ino, struct om_attr *a)
{
    uint64_t local;
    struct shard *sh = find(ss, ino, &local);
    if (!sh)
        return -ESTALE;
    local_attr(sh, local, a);
    return 0;
}

int om_shards_readlink(struct om_shards *ss, uint64_t ino, char **target)
{
    uint64_t local;
    struct shard *sh = find(ss, ino, &local);
    if (!sh)
        return -ESTALE;
    if (local == 0 || local > sh->ix.n || sh->ix.members[local - 1].type != OM_SHARD_SYMLINK)
        return -EINVAL;
    *target = strdup(om_shard_member_link(&sh->ix, &sh->ix.members[local - 1]));
    return *target ? 0 : -ENOMEM;
}

struct list_state {
    struct shard *sh;
    off_t pos, from;
    om_shards_fill_cb fill;
    void *ud;
    const char *dir;
    size_t dlen;
    bool stopped;
};

static int list_one(void *ud, const char *name, size_t len, uint32_t member)
{
    struct list_state *l = ud;
    off_t here = l->pos++;
    if (here < l->from)
        return 0;
    char nm[OM_SHARD_SEGMENT_MAX + 1];
    if (len > OM_SHARD_SEGMENT_MAX)
        return 0;
    memcpy(nm, name, len);
    nm[len] = '\0';
    struct om_attr a;
    if (member != UINT32_MAX) {
        member_attr(l->sh, member, &a);
    } else {
        char path[OM_SHARD_NAME_MAX + 2];
        size_t n = join(path, l->dir, l->dlen, name, len);
        uint32_t k;
        if (!n || find_idir(l->sh, path, n, &k))
            return 0;
        idir_attr(l->sh, k, &a);
    }
    if (l->fill(l->ud, nm, &a, l->pos)) {
        l->stopped = true;
        return 1;
    }
    return 0;
}

int om_shards_readdir(struct om_shards *ss, uint64_t ino, off_t off, om_shards_fill_cb fill,
                      void *ud)
{
    uint64_t local;
    struct shard *sh = find(ss, ino, &local);
    if (!sh)
        return -ESTALE;
    struct list_state l = {.sh = sh, .pos = 0, .from = off, .fill = fill, .ud = ud};
    int rc = dir_path(sh, local, &l.dir, &l.dlen);
    if (rc)
        return rc;
    struct om_attr self;
    local_attr(sh, local, &self);
    if (off <= 0 && fill(ud, ".", &self, 1))
        return 0;
    if (off <= 1 && fill(ud, "..", &self, 2))
        return 0;
    l.pos = 2;
    return om_shard_index_list(&sh->ix, l.dir, l.dlen, list_one, &l);
}

/* ---- reads ---- */

int om_shards_open(struct om_shards *ss, uint64_t ino, struct om_shard_file **f)
{
    pthread_mutex_lock(&ss->lock);
    uint64_t local;
    struct shard *sh = resolve(ss, ino, &local);
    if (sh && local >= 1 && local <= sh->ix.n)
        ss->stats.member_opens++;
    pthread_mutex_unlock(&ss->lock);
    if (!sh)
        return -ESTALE;
    if (local == 0 || local > sh->ix.n || sh->ix.members[local - 1].type == OM_SHARD_DIR)
        return -EISDIR;
    if (sh->ix.members[local - 1].type != OM_SHARD_FILE)
        return -ELOOP;
    struct om_shard_file *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->sh = sh;
    x->member = (uint32_t)(local - 1);
    *f = x;
    return 0;
}

void om_shards_close(struct om_shards *ss, struct om_shard_file *f)
{
    (void)ss;
    free(f);
}

bool om_shards_keep_cache(const struct om_shards *ss)
{
    return ss->cfg.keep_cache;
}

static struct walk *walk_of(struct shard *sh, pid_t pid)
{
    struct walk *oldest = &sh->walks[0];
    for (int i = 0; i < PIDS; i++) {
        if (sh->walks[i].pid == pid && pid)
            return &sh->walks[i];
        if (sh->walks[i].used < oldest->used)
            oldest = &sh->walks[i];
    }
    memset(oldest, 0, sizeof(*oldest));
    oldest->pid = pid;
    return oldest;
}

/* Queue the hinted members after position pos for fetching ahead. Caller
 * holds sh->lock; takes ss->lock. */
static void queue_hinted(struct om_shards *ss, struct shard *sh, size_t pos)
{
    size_t upto = OM_MIN(sh->nhint, pos + 1 + HINT_AHEAD);
    if (sh->hint_queued < pos + 1)
        sh->hint_queued = pos + 1;
    pthread_mutex_lock(&ss->lock);
    while (sh->hint_queued < upto && ss->qlen < PREFETCH_QUEUE) {
        size_t at = (ss->qhead + ss->qlen) % PREFETCH_QUEUE;
        ss->queue[at].sh = sh;
        ss->queue[at].member = sh->hint[sh->hint_queued++];
        ss->qlen++;
    }
    pthread_cond_signal(&ss->cond);
    pthread_mutex_unlock(&ss->lock);
}

/* Read sh from its first member's data to its end through the stream
 * handle (the pool keeps what it can; the hinted reads find it there).
 * *buf (*cap bytes) is scratch. */
static bool read_through(struct shard *sh, char **buf, size_t *cap)
{
    if (*cap < (1u << 20)) {
        char *n = realloc(*buf, 1u << 20);
        if (!n)
            return false;
        *buf = n;
        *cap = 1u << 20;
    }
    bool ok = true;
    for (uint64_t off = sh->ix.first_data; off < sh->ix.shard_size && ok;) {
        uint64_t n = OM_MIN((uint64_t)(1u << 20), sh->ix.shard_size - off);
        ok = om_reader_read(sh->stream, *buf, n, off) == (ssize_t)n;
        off += n;
        pthread_mutex_lock(&sh->lock);
        sh->through_pos = off;
        pthread_cond_broadcast(&sh->through_cv);
        pthread_mutex_unlock(&sh->lock);
    }
    pthread_mutex_lock(&sh->lock);
    sh->through = false;
    pthread_cond_broadcast(&sh->through_cv);
    pthread_mutex_unlock(&sh->lock);
    return ok;
}

static void *prefetch_main(void *arg)
{
    struct om_shards *ss = arg;
    char *buf = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&ss->lock);
    for (;;) {
        while (!ss->stopping && ss->qlen == 0 && ss->npend == 0)
            pthread_cond_wait(&ss->cond, &ss->lock);
        if (ss->stopping)
            break;
        if (ss->npend) {
            struct pending pd = ss->pend[--ss->npend];
            pthread_mutex_unlock(&ss->lock);
            struct om_attr dir;
            om_shards_attach(ss, pd.key, &pd.file, &dir);
            free(pd.key);
            pthread_mutex_lock(&ss->lock);
            continue;
        }
        struct shard *sh = ss->queue[ss->qhead].sh;
        uint32_t member = ss->queue[ss->qhead].member;
        ss->qhead = (ss->qhead + 1) % PREFETCH_QUEUE;
        ss->qlen--;
        pthread_mutex_unlock(&ss->lock);
        if (member == UINT32_MAX) {
            /* the whole shard, in order, through its stream handle */
            bool ok = read_through(sh, &buf, &cap);
            pthread_mutex_lock(&ss->lock);
            if (ok)
                ss->stats.hinted_whole_shards++;
            continue;
        }
        const struct om_shard_member *m = &sh->ix.members[member];
        uint64_t len = OM_MIN(m->size, OM_MAX(ss->cfg.small_member, 1ULL << 20));
        if (len > cap) {
            char *n = realloc(buf, len);
            if (n) {
                buf = n;
                cap = len;
            }
        }
        bool done = false;
        if (len && len <= cap)
            done = om_reader_read(sh->ranges, buf, len, m->offset) == (ssize_t)len;
        pthread_mutex_lock(&ss->lock);
        if (done)
            ss->stats.hinted_prefetches++;
    }
    pthread_mutex_unlock(&ss->lock);
    free(buf);
    return NULL;
}

ssize_t om_shards_read(struct om_shards *ss, struct om_shard_file *f, pid_t pid, char *buf,
                       size_t len, uint64_t off)
{
    struct shard *sh = f->sh;
    uint64_t a, b;
    if (!om_shard_plan_span(&sh->ix, f->member, off, len, &a, &b))
        return 0;
    pthread_mutex_lock(&sh->lock);
    struct walk *w = walk_of(sh, pid);
    w->used = ++sh->tick;
    size_t hpos = sh->hint_pos ? sh->hint_pos[f->member] : UINT32_MAX;
    struct om_shard_read_req q = {
        .member = f->member,
        .off = off,
        .len = len,
        .hinted = hpos != UINT32_MAX && sh->hint_in_order,
        .cached = false,
    };
    struct om_shard_read_plan p = om_shard_plan_read(&sh->ix, &q, &sh->st, &w->r, &ss->plan);
    w->r = p.next;
    if (p.kind == OM_SHARD_READ_STREAM && hpos != UINT32_MAX && sh->hint_whole) {
        /* the read-through owns the stream handle: a read of its own there
         * would reset the handle's sequential window */
        p.kind = OM_SHARD_READ_RANGE;
        p.range_off = p.off;
        p.range_end = p.end;
    }
    if (p.kind == OM_SHARD_READ_STREAM) {
        if (p.open_stream) {
            sh->st.active = true;
            sh->st.kept_from = p.stream_from;
            sh->st.pos = p.end;
            sh->st.end = p.stream_end;
        } else if (p.end > sh->st.pos) {
            sh->st.pos = p.end;
        }
        /* what the pool keeps behind the stream: about two parts */
        uint64_t keep = 2 * ss->cfg.part_size;
        if (sh->st.pos > keep && sh->st.pos - keep > sh->st.kept_from)
            sh->st.kept_from = sh->st.pos - keep;
    }
    if (hpos != UINT32_MAX && !sh->hint_in_order && !sh->hint_whole)
        queue_hinted(ss, sh, hpos);
    /* a hinted member the read-through will reach: wait for it (at most
     * 30 s), then it is in the pool */
    uint64_t waited_from = om_now_ms();
    /* the pool rounds a random read out (64 KiB, or the data cache's 1 MiB
     * blocks): wait until the read-through has passed that too */
    uint64_t reach = OM_MIN(p.end + (1ULL << 20), sh->ix.shard_size);
    while (hpos != UINT32_MAX && sh->through && sh->through_pos < reach &&
           om_now_ms() - waited_from < 30000)
        om_cond_wait_ms(&sh->through_cv, &sh->lock, 1000);
    pthread_mutex_unlock(&sh->lock);

    ssize_t n;
    if (p.kind == OM_SHARD_READ_STREAM) {
        n = om_reader_read(sh->stream, buf, p.end - p.off, p.off);
    } else if (p.range_end - p.range_off > p.end - p.off) {
        /* a small member whole: the rest of it is in the pool for the
         * kernel's next reads */
        char *tmp = malloc(p.range_end - p.range_off);
        n = tmp ? om_reader_read(sh->ranges, tmp, p.range_end - p.range_off, p.range_off)
                : -ENOMEM;
        if (n == (ssize_t)(p.range_end - p.range_off)) {
            memcpy(buf, tmp + (p.off - p.range_off), p.end - p.off);
            n = (ssize_t)(p.end - p.off);
        } else if (n >= 0) {
            n = -EIO;
        }
        free(tmp);
    } else {
        n = om_reader_read(sh->ranges, buf, p.end - p.off, p.off);
    }
    if (n >= 0 && (uint64_t)n != p.end - p.off)
        n = -EIO; /* never short inside the shard */
    if (n == -ESTALE || n == -ENOENT)
        om_warn("shards: %s changed or vanished in the bucket while its member %s was read "
                "(EIO; the next lookup sees the new version)",
                sh->key, om_shard_member_name(&sh->ix, &sh->ix.members[f->member]));
    pthread_mutex_lock(&ss->lock);
    if (n > 0) {
        if (!f->read_once)
            ss->stats.members_read++;
        ss->stats.read_bytes += (uint64_t)n;
        if (p.kind == OM_SHARD_READ_STREAM)
            ss->stats.stream_reads++;
        else
            ss->stats.range_reads++;
    }
    pthread_mutex_unlock(&ss->lock);
    if (n > 0)
        f->read_once = true;
    if (n < 0 && n != -ENOMEM)
        n = -EIO;
    return n;
}

/* ---- the order hint ---- */

int om_shards_hint(struct om_shards *ss, uint64_t ino, const char *buf, size_t len)
{
    uint64_t local;
    struct shard *sh = find(ss, ino, &local);
    if (!sh)
        return -ENOTDIR;
    const char *dir;
    size_t dlen;
    if (dir_path(sh, local, &dir, &dlen))
        return -ENOTDIR;
    const char *nul = len ? memchr(buf, '\0', len) : NULL;
    if (!nul || nul == buf || (buf[0] != 'r' && buf[0] != 'a'))
        return -EINVAL;
    pthread_mutex_lock(&sh->lock);
    if (!sh->hint_pos) {
        sh->hint_pos = malloc(sh->ix.n * sizeof(*sh->hint_pos) + 1);
        if (!sh->hint_pos) {
            pthread_mutex_unlock(&sh->lock);
            return -ENOMEM;
        }
        memset(sh->hint_pos, 0xff, sh->ix.n * sizeof(*sh->hint_pos));
    }
    if (buf[0] == 'r') {
        for (size_t i = 0; i < sh->nhint; i++)
            sh->hint_pos[sh->hint[i]] = UINT32_MAX;
        sh->nhint = 0;
        sh->hint_queued = 0;
    }
    int rc = 0;
    for (const char *p = buf + 1; p < nul && !rc;) {
        const char *e = memchr(p, '\n', (size_t)(nul - p));
        if (!e)
            e = nul;
        char path[OM_SHARD_NAME_MAX + 2];
        size_t n = 0;
        size_t plen = (size_t)(e - p);
        while (plen && *p == '/') {
            p++;
            plen--;
        }
        if (plen && (n = join(path, dir, dlen, p, plen))) {
            uint32_t m;
            if (om_shard_index_find(&sh->ix, path, n, &m) == 0 &&
                sh->ix.members[m].type == OM_SHARD_FILE && sh->hint_pos[m] == UINT32_MAX) {
                uint32_t *nh = realloc(sh->hint, (sh->nhint + 1) * sizeof(*nh));
                if (!nh) {
                    rc = -ENOMEM;
                    break;
                }
                sh->hint = nh;
                sh->hint_pos[m] = (uint32_t)sh->nhint;
                sh->hint[sh->nhint++] = m;
            }
        }
        p = e + 1;
    }
    sh->hint_in_order = true;
    for (size_t i = 1; i < sh->nhint && sh->hint_in_order; i++)
        sh->hint_in_order =
            sh->ix.members[sh->hint[i]].offset > sh->ix.members[sh->hint[i - 1]].offset;
    /* in another order: the next hinted members are fetched ahead, or,
     * when the hint names most of a shard that fits a quarter of the read
     * buffers, the shard is read through once (part-sized GETs, as a walk)
     * rather than one GET per member */
    uint64_t hinted = 0;
    for (size_t i = 0; i < sh->nhint; i++)
        hinted += sh->ix.members[sh->hint[i]].size;
    bool whole = !sh->hint_in_order && sh->nhint && hinted * 2 >= sh->ix.shard_size &&
                 sh->ix.shard_size <= ss->cfg.memory_limit / 4;
    if (whole && !sh->hint_whole) {
        sh->hint_whole = true;
        sh->through = true;
        sh->through_pos = sh->ix.first_data;
        pthread_mutex_lock(&ss->lock);
        if (ss->qlen < PREFETCH_QUEUE) {
            size_t at = (ss->qhead + ss->qlen) % PREFETCH_QUEUE;
            ss->queue[at].sh = sh;
            ss->queue[at].member = UINT32_MAX;
            ss->qlen++;
            pthread_cond_signal(&ss->cond);
        }
        pthread_mutex_unlock(&ss->lock);
    } else if (!whole && !sh->hint_in_order && sh->nhint) {
        sh->hint_whole = false;
        queue_hinted(ss, sh, 0);
    }
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

/* ---- stats ---- */

void om_shards_get_stats(struct om_shards *ss, struct om_shards_stats *out)
{
    pthread_mutex_lock(&ss->lock);
    *out = ss->stats;
    size_t n = ss->nslots;
    pthread_mutex_unlock(&ss->lock);
    out->gets = 0;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&ss->lock);
        struct shard *sh = ss->slots[i];
        pthread_mutex_unlock(&ss->lock);
        if (sh && sh->ranges)
            out->gets += om_reader_object_gets(sh->ranges);
    }
}

void om_shards_refused(struct om_shards *ss, const char *what, uint64_t ino)
{
    pthread_mutex_lock(&ss->lock);
    uint64_t n = ss->stats.refused_writes++;
    uint64_t local;
    struct shard *sh = resolve(ss, ino, &local);
    char *key = sh ? strdup(sh->key) : NULL;
    pthread_mutex_unlock(&ss->lock);
    if (n % 100 == 0)
        om_warn("shards: %s inside shard %s refused (EROFS): a shard directory is read-only "
                "(shards=tar)%s",
                what, key ? key : "?", n ? " (one line per 100)" : "");
    free(key);
}
