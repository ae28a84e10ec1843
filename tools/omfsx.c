/* omfsx: a random-I/O exerciser in the manner of fsx, for any file system.
 *
 *   omfsx [-s SEED] [-n OPS] [-f FILES] [-S MAXSIZE] [-w MAXWRITE] [-m MODELDIR]
 *         [-p NAME] [-N] [-P] [-q] DIR
 *
 * FILES threads each own one file DIR/NAME<i> (created empty) and apply OPS
 * random operations to it, each checked against an in-memory model of what
 * the file must hold:
 *   write      pwrite at a random offset (holes and extends)
 *   read       pread of a random range, compared with the model; fstat size
 *   truncate   ftruncate up or down
 *   mapread    mmap (MAP_SHARED, read-only) of a range, compared
 *   mapwrite   mmap (MAP_SHARED, read-write) of a range inside the file,
 *              written, msync(MS_SYNC), unmapped
 *   fsync      fsync; its result must be 0
 *   reopen     close (its result must be 0) and open O_RDWR again
 *   child      a forked process opens the file read-only and compares it whole
 * -N leaves out the mmap operations. -P adds what processes do to a file
 * (issue 22: the kernel sends a FLUSH for every close of every copy of a
 * descriptor):
 *   dup        dup2 the descriptor to another number and close the original
 *              (dd and `cmd > f`); the close must return 0
 *   exec       a child process holding the descriptor runs /bin/true and
 *              exits (subprocess with pass_fds, `sh -c ... > f`)
 *   efbig      a pwrite past S3's 5 TiB limit must fail with EFBIG at once;
 *              the error then sticks: fsync and close fail too, nothing of
 *              this open's writes since the last commit is stored, and the
 *              file opened again holds what the last successful fsync,
 *              msync(MS_SYNC) (an fsync) or close stored (the model goes
 *              back to it)
 * In -P mode the file is fsynced once after its creation, so that the last
 * commit is always known.
 *
 * Every operation is logged in a ring per file; on the first mismatch or
 * failed call the file's last operations are printed with the seed, so a run
 * can be repeated exactly (each file's generator is seeded with SEED + i).
 * After the last operation each file is closed (the result must be 0) and,
 * with -m, its model is written to MODELDIR/NAME<i> for the caller to compare
 * with what was stored.
 *
 * Exit status: 0 when every file survived, 1 on a mismatch or failed call
 * (the first failure per file is reported; its thread stops), 2 on usage
 * errors. The last line says how many operations each file survived. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LOG_RING 64

enum op { OP_WRITE, OP_READ, OP_TRUNCATE, OP_MAPREAD, OP_MAPWRITE, OP_FSYNC, OP_REOPEN,
          OP_CHILD, OP_DUP, OP_EXEC, OP_EFBIG, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"write",  "read",  "truncate", "mapread",
                                               "mapwrite", "fsync", "reopen",  "child",
                                               "dup",    "exec",  "efbig"};
/* relative weights (dup, exec and efbig only with -P) */
static const unsigned weights[OP_COUNT] = {30, 22, 8, 10, 8, 5, 6, 3, 4, 4, 1};
#define BEYOND_S3 (6ULL << 40) /* past the largest object S3 stores (5 TiB) */

struct opts {
    uint64_t seed;
    long ops;
    int files;
    uint64_t max_size;
    uint64_t max_write;
    const char *dir;
    const char *model_dir;
    const char *prefix;
    bool no_mmap;
    bool processes; /* -P: dup, exec, efbig */
    bool quiet;
};

struct logent {
    long n;
    enum op op;
    uint64_t off, len, size_after;
};

struct file {
    const struct opts *o;
    int index;
    char path[4096];
    int fd;
    uint64_t rng;
    unsigned char *model;
    uint64_t size, cap;
    unsigned char *stored; /* -P: what the last successful fsync or close stored */
    uint64_t stored_size;
    struct logent ring[LOG_RING];
    long done; /* operations survived */
    bool failed;
    pthread_t thread;
};

static uint64_t page_size;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* splitmix64: small, seedable, good enough for choosing operations */
static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t *s, uint64_t n)
{
    return n ? next_rand(s) % n : 0;
}

static void fill(struct file *f, unsigned char *p, uint64_t len, long opno)
{
    /* bytes that say where they came from: op number and offset mix */
    uint64_t s = f->rng ^ ((uint64_t)opno << 20);
    for (uint64_t i = 0; i < len; i++) {
        if ((i & 7) == 0)
            s = next_rand(&s) + i;
        p[i] = (unsigned char)(s >> ((i & 7) * 8));
    }
}

static int model_resize(struct file *f, uint64_t size)
{
    if (size > f->cap) {
        uint64_t cap = f->cap ? f->cap : 65536;
        while (cap < size)
            cap *= 2;
        unsigned char *m = realloc(f->model, cap);
        if (!m)
            return -ENOMEM;
        f->model = m;
        f->cap = cap;
    }
    if (size > f->size)
        memset(f->model + f->size, 0, size - f->size);
    f->size = size;
    return 0;
}

static void logop(struct file *f, long n, enum op op, uint64_t off, uint64_t len)
{
    struct logent *e = &f->ring[n % LOG_RING];
    *e = (struct logent){.n = n, .op = op, .off = off, .len = len, .size_after = f->size};
}

/* Report the first failure of a file with its recent operations. */
static void fail(struct file *f, long n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct file *f, long n, const char *fmt, ...)
{
    pthread_mutex_lock(&out_lock);
    fprintf(stderr, "omfsx: %s: operation %ld failed: ", f->path, n);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nomfsx: the last operations of %s (seed %" PRIu64 ", file %d):\n", f->path,
            f->o->seed, f->index);
    long first = n - LOG_RING + 1 > 0 ? n - LOG_RING + 1 : 0;
    for (long k = first; k <= n; k++) {
        const struct logent *e = &f->ring[k % LOG_RING];
        if (e->n != k)
            continue;
        fprintf(stderr, "  %6ld %-9s off %10" PRIu64 " len %8" PRIu64 " -> size %" PRIu64 "\n",
                e->n, op_names[e->op], e->off, e->len, e->size_after);
    }
    fprintf(stderr, "omfsx: repeat with: omfsx -s %" PRIu64 " -n %ld -f %d -S %" PRIu64
                    " -w %" PRIu64 "%s%s DIR\n",
            f->o->seed, f->o->ops, f->o->files, f->o->max_size, f->o->max_write,
            f->o->no_mmap ? " -N" : "", f->o->processes ? " -P" : "");
    pthread_mutex_unlock(&out_lock);
    f->failed = true;
}

/* Compare got with the model at off; describe the first difference. */
static bool same(struct file *f, long n, const unsigned char *got, uint64_t off, uint64_t len,
                 const char *how)
{
    if (memcmp(got, f->model + off, len) == 0)
        return true;
    uint64_t i = 0;
    while (got[i] == f->model[off + i])
        i++;
    uint64_t j = len;
    while (j > i && got[j - 1] == f->model[off + j - 1])
        j--;
    fail(f, n,
         "%s of [%" PRIu64 ", +%" PRIu64 ") differs from the model at %" PRIu64
         " (%" PRIu64 " bytes differ up to %" PRIu64 "): got 0x%02x, want 0x%02x",
         how, off, len, off + i, j - i, off + j, got[i], f->model[off + i]);
    return false;
}

static bool check_size(struct file *f, long n)
{
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        fail(f, n, "fstat: %s", strerror(errno));
        return false;
    }
    if ((uint64_t)st.st_size != f->size) {
        fail(f, n, "fstat says %" PRIu64 " bytes, the model %" PRIu64, (uint64_t)st.st_size,
             f->size);
        return false;
    }
    return true;
}

static bool full_pread(struct file *f, long n, int fd, unsigned char *buf, uint64_t len,
                       uint64_t off, const char *how)
{
    uint64_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));
        if (r < 0) {
            fail(f, n, "%s: pread at %" PRIu64 ": %s", how, off + got, strerror(errno));
            return false;
        }
        if (r == 0) {
            fail(f, n, "%s: pread at %" PRIu64 " hit the end; the model holds %" PRIu64 " bytes",
                 how, off + got, f->size);
            return false;
        }
        got += (uint64_t)r;
    }
    return true;
}

static bool op_write(struct file *f, long n)
{
    uint64_t len = 1 + below(&f->rng, f->o->max_write);
    uint64_t span = f->size + f->size / 4 + 65536; /* holes past the end too */
    uint64_t off = below(&f->rng, span < f->o->max_size ? span : f->o->max_size);
    if (off + len > f->o->max_size)
        len = f->o->max_size - off;
    if (len == 0)
        return true;
    unsigned char *buf = malloc(len);
    if (!buf)
        return fail(f, n, "out of memory"), false;
    fill(f, buf, len, n);
    uint64_t done = 0;
    while (done < len) {
        ssize_t w = pwrite(f->fd, buf + done, len - done, (off_t)(off + done));
        if (w < 0) {
            fail(f, n, "pwrite [%" PRIu64 ", +%" PRIu64 "): %s", off, len, strerror(errno));
            free(buf);
            return false;
        }
        done += (uint64_t)w;
    }
    if (off + len > f->size && model_resize(f, off + len)) {
        free(buf);
        return fail(f, n, "out of memory"), false;
    }
    memcpy(f->model + off, buf, len);
    free(buf);
    logop(f, n, OP_WRITE, off, len);
    return true;
}

static bool op_read(struct file *f, long n)
{
    uint64_t off = below(&f->rng, f->size + 1);
    uint64_t len = below(&f->rng, f->o->max_write + 1);
    logop(f, n, OP_READ, off, len);
    if (!check_size(f, n))
        return false;
    if (off + len > f->size)
        len = f->size - off;
    if (len == 0) {
        unsigned char b;
        ssize_t r = pread(f->fd, &b, 1, (off_t)f->size);
        if (r != 0)
            return fail(f, n, "pread at the end (%" PRIu64 ") returned %zd%s%s", f->size, r,
                        r < 0 ? ": " : "", r < 0 ? strerror(errno) : ""),
                   false;
        return true;
    }
    unsigned char *buf = malloc(len);
    if (!buf)
        return fail(f, n, "out of memory"), false;
    bool ok = full_pread(f, n, f->fd, buf, len, off, "read") && same(f, n, buf, off, len, "pread");
    free(buf);
    return ok;
}

static bool op_truncate(struct file *f, long n)
{
    uint64_t size = below(&f->rng, 4) == 0 ? 0 : below(&f->rng, f->o->max_size + 1);
    if (size > f->size + f->size / 2 + 1048576) /* grow moderately */
        size = f->size + below(&f->rng, f->size / 2 + 1048576);
    if (size > f->o->max_size)
        size = f->o->max_size;
    if (ftruncate(f->fd, (off_t)size) != 0)
        return fail(f, n, "ftruncate to %" PRIu64 ": %s", size, strerror(errno)), false;
    if (model_resize(f, size))
        return fail(f, n, "out of memory"), false;
    logop(f, n, OP_TRUNCATE, size, 0);
    return true;
}

/* A page-aligned window [*moff, *moff + *mlen) covering [off, off + len). */
static void window(uint64_t off, uint64_t len, uint64_t *moff, uint64_t *mlen)
{
    *moff = off - off % page_size;
    *mlen = off + len - *moff;
}

static bool op_mapread(struct file *f, long n)
{
    if (f->size == 0)
        return op_read(f, n);
    uint64_t off = below(&f->rng, f->size);
    uint64_t len = 1 + below(&f->rng, f->size - off < f->o->max_write ? f->size - off
                                                                        : f->o->max_write);
    logop(f, n, OP_MAPREAD, off, len);
    uint64_t moff, mlen;
    window(off, len, &moff, &mlen);
    unsigned char *p = mmap(NULL, mlen, PROT_READ, MAP_SHARED, f->fd, (off_t)moff);
    if (p == MAP_FAILED)
        return fail(f, n, "mmap read [%" PRIu64 ", +%" PRIu64 "): %s", moff, mlen,
                    strerror(errno)),
               false;
    bool ok = same(f, n, p + (off - moff), off, len, "mmap read");
    munmap(p, mlen);
    return ok;
}

static bool op_mapwrite(struct file *f, long n)
{
    if (f->size == 0)
        return op_write(f, n);
    uint64_t off = below(&f->rng, f->size);
    uint64_t len = 1 + below(&f->rng, f->size - off < f->o->max_write ? f->size - off
                                                                        : f->o->max_write);
    uint64_t moff, mlen;
    window(off, len, &moff, &mlen);
    unsigned char *p = mmap(NULL, mlen, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, (off_t)moff);
    if (p == MAP_FAILED)
        return fail(f, n, "mmap write [%" PRIu64 ", +%" PRIu64 "): %s", moff, mlen,
                    strerror(errno)),
               false;
    fill(f, p + (off - moff), len, n);
    memcpy(f->model + off, p + (off - moff), len);
    bool ok = true;
    if (msync(p, mlen, MS_SYNC) != 0) {
        fail(f, n, "msync [%" PRIu64 ", +%" PRIu64 "): %s", moff, mlen, strerror(errno));
        ok = false;
    }
    munmap(p, mlen);
    logop(f, n, OP_MAPWRITE, off, len);
    return ok;
}

static bool op_fsync(struct file *f, long n)
{
    logop(f, n, OP_FSYNC, 0, 0);
    if (fsync(f->fd) != 0)
        return fail(f, n, "fsync: %s", strerror(errno)), false;
    return true;
}

static bool op_reopen(struct file *f, long n)
{
    logop(f, n, OP_REOPEN, 0, 0);
    if (close(f->fd) != 0) {
        f->fd = -1;
        return fail(f, n, "close: %s", strerror(errno)), false;
    }
    f->fd = open(f->path, O_RDWR);
    if (f->fd < 0)
        return fail(f, n, "open O_RDWR after close: %s", strerror(errno)), false;
    return check_size(f, n);
}

static bool op_child(struct file *f, long n)
{
    logop(f, n, OP_CHILD, 0, f->size);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return fail(f, n, "fork: %s", strerror(errno)), false;
    if (pid == 0) {
        /* the model as it was at the fork is this process's own copy */
        int fd = open(f->path, O_RDONLY);
        if (fd < 0) {
            fail(f, n, "second process: open: %s", strerror(errno));
            _exit(1);
        }
        f->fd = fd;
        if (!check_size(f, n))
            _exit(1);
        unsigned char *buf = malloc(f->size ? f->size : 1);
        bool ok = buf && full_pread(f, n, fd, buf, f->size, 0, "second process") &&
                  same(f, n, buf, 0, f->size, "second process read");
        _exit(ok ? 0 : 1);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        f->failed = true; /* the child reported it */
        return false;
    }
    return true;
}

/* -P: the model was stored (a successful fsync or close of the opener). */
static bool remember_stored(struct file *f, long n)
{
    if (!f->o->processes)
        return true;
    unsigned char *m = realloc(f->stored, f->size ? f->size : 1);
    if (!m)
        return fail(f, n, "out of memory"), false;
    memcpy(m, f->model, f->size);
    f->stored = m;
    f->stored_size = f->size;
    return true;
}

static bool op_dup(struct file *f, long n)
{
    logop(f, n, OP_DUP, 0, 0);
    int fd = dup(f->fd);
    if (fd < 0)
        return fail(f, n, "dup: %s", strerror(errno)), false;
    int old = f->fd;
    f->fd = fd;
    /* the opener's close with data written commits it (decisions.md,
     * "When a file is committed") */
    if (close(old) != 0)
        return fail(f, n, "close of the original after dup: %s", strerror(errno)), false;
    return true;
}

static bool op_exec(struct file *f, long n)
{
    logop(f, n, OP_EXEC, 0, f->size);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return fail(f, n, "fork: %s", strerror(errno)), false;
    if (pid == 0) {
        /* f->fd is inherited (not close-on-exec): its close at exit is a
         * FLUSH from another process */
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return fail(f, n, "a child holding the descriptor: /bin/true did not exit 0"), false;
    return check_size(f, n);
}

static bool op_efbig(struct file *f, long n)
{
    logop(f, n, OP_EFBIG, BEYOND_S3, 1);
    char b = 'x';
    ssize_t w = pwrite(f->fd, &b, 1, (off_t)BEYOND_S3);
    if (w >= 0 || errno != EFBIG)
        return fail(f, n, "pwrite at 6 TiB: %s, want EFBIG", w >= 0 ? "succeeded" : strerror(errno)),
               false;
    /* the error sticks */
    if (fsync(f->fd) == 0)
        return fail(f, n, "fsync after a failed write returned 0"), false;
    int rc = close(f->fd);
    f->fd = -1;
    if (rc == 0)
        return fail(f, n, "close after a failed write returned 0"), false;
    /* nothing since the last commit was stored */
    memcpy(f->model, f->stored, f->stored_size);
    f->size = f->stored_size;
    f->fd = open(f->path, O_RDWR);
    if (f->fd < 0)
        return fail(f, n, "open after a failed write's close: %s", strerror(errno)), false;
    if (!check_size(f, n))
        return false;
    unsigned char *buf = malloc(f->size ? f->size : 1);
    if (!buf)
        return fail(f, n, "out of memory"), false;
    bool ok = full_pread(f, n, f->fd, buf, f->size, 0, "after efbig") &&
              same(f, n, buf, 0, f->size, "what the last commit stored");
    free(buf);
    return ok;
}

static bool skipped(const struct opts *o, int i)
{
    if (o->no_mmap && (i == OP_MAPREAD || i == OP_MAPWRITE))
        return true;
    return !o->processes && (i == OP_DUP || i == OP_EXEC || i == OP_EFBIG);
}

static enum op pick(struct file *f)
{
    unsigned total = 0;
    for (int i = 0; i < OP_COUNT; i++)
        if (!skipped(f->o, i))
            total += weights[i];
    unsigned r = (unsigned)below(&f->rng, total);
    for (int i = 0; i < OP_COUNT; i++) {
        if (skipped(f->o, i))
            continue;
        if (r < weights[i])
            return (enum op)i;
        r -= weights[i];
    }
    return OP_READ;
}

static void *run_file(void *arg)
{
    struct file *f = arg;
    f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (f->fd < 0) {
        fail(f, 0, "create: %s", strerror(errno));
        return NULL;
    }
    bool ok = true;
    if (f->o->processes) {
        /* the empty file stored: the last commit is known from here on */
        ok = op_fsync(f, 0) && remember_stored(f, 0);
    }
    for (long n = 1; ok && n <= f->o->ops; n++) {
        switch (pick(f)) {
        case OP_WRITE: ok = op_write(f, n); break;
        case OP_READ: ok = op_read(f, n); break;
        case OP_TRUNCATE: ok = op_truncate(f, n); break;
        case OP_MAPREAD: ok = op_mapread(f, n); break;
        case OP_MAPWRITE: {
            bool mapped = f->size > 0; /* an empty file gets a write instead */
            /* msync(MS_SYNC) is an fsync of the file */
            ok = op_mapwrite(f, n) && (!mapped || remember_stored(f, n));
            break;
        }
        case OP_FSYNC: ok = op_fsync(f, n) && remember_stored(f, n); break;
        case OP_REOPEN: ok = op_reopen(f, n) && remember_stored(f, n); break;
        case OP_CHILD: ok = op_child(f, n); break;
        case OP_DUP: ok = op_dup(f, n) && remember_stored(f, n); break;
        case OP_EXEC: ok = op_exec(f, n); break;
        case OP_EFBIG: ok = op_efbig(f, n); break;
        default: break;
        }
        if (ok)
            f->done = n;
        if (ok && !f->o->quiet && n % 10000 == 0) {
            pthread_mutex_lock(&out_lock);
            fprintf(stderr, "omfsx: %s: %ld operations\n", f->path, n);
            pthread_mutex_unlock(&out_lock);
        }
    }
    if (f->fd >= 0 && close(f->fd) != 0 && ok) {
        fail(f, f->o->ops, "the last close: %s", strerror(errno));
        ok = false;
    }
    f->fd = -1;
    return NULL;
}

static int save_model(const struct file *f, const char *dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s%d", dir, f->o->prefix, f->index);
    FILE *out = fopen(path, "wb");
    if (!out)
        return -errno;
    size_t w = f->size ? fwrite(f->model, 1, f->size, out) : 0;
    int rc = w == f->size ? 0 : -EIO;
    if (fclose(out) != 0 && !rc)
        rc = -errno;
    return rc;
}

static int usage(void)
{
    fprintf(stderr, "usage: omfsx [-s SEED] [-n OPS] [-f FILES] [-S MAXSIZE] [-w MAXWRITE] "
                    "[-m MODELDIR] [-p NAME] [-N] [-P] [-q] DIR\n");
    return 2;
}

static bool number(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return false;
    uint64_t mult = 1;
    if (*end == 'k' || *end == 'K')
        mult = 1024, end++;
    else if (*end == 'm' || *end == 'M')
        mult = 1024 * 1024, end++;
    if (*end || v > UINT64_MAX / mult)
        return false;
    *out = v * mult;
    return true;
}

int main(int argc, char **argv)
{
    struct opts o = {.seed = 1, .ops = 2000, .files = 4, .max_size = 12 << 20,
                     .max_write = 256 << 10, .prefix = "fsx"};
    int c;
    uint64_t v;
    while ((c = getopt(argc, argv, "s:n:f:S:w:m:p:NPq")) != -1) {
        switch (c) {
        case 's':
            if (!number(optarg, &o.seed))
                return usage();
            break;
        case 'n':
            if (!number(optarg, &v) || v == 0 || v > 1000000000)
                return usage();
            o.ops = (long)v;
            break;
        case 'f':
            if (!number(optarg, &v) || v == 0 || v > 64)
                return usage();
            o.files = (int)v;
            break;
        case 'S':
            if (!number(optarg, &o.max_size) || o.max_size < 4096 || o.max_size > (1ULL << 34))
                return usage();
            break;
        case 'w':
            if (!number(optarg, &o.max_write) || o.max_write == 0 || o.max_write > (64 << 20))
                return usage();
            break;
        case 'm': o.model_dir = optarg; break;
        case 'p': o.prefix = optarg; break;
        case 'N': o.no_mmap = true; break;
        case 'P': o.processes = true; break;
        case 'q': o.quiet = true; break;
        default: return usage();
        }
    }
    if (optind != argc - 1)
        return usage();
    o.dir = argv[optind];
    page_size = (uint64_t)sysconf(_SC_PAGESIZE);
    struct file *files = calloc((size_t)o.files, sizeof(*files));
    if (!files)
        return 1;
    for (int i = 0; i < o.files; i++) {
        struct file *f = &files[i];
        f->o = &o;
        f->index = i;
        f->fd = -1;
        f->rng = o.seed * 1000003ULL + (uint64_t)i;
        snprintf(f->path, sizeof(f->path), "%s/%s%d", o.dir, o.prefix, i);
        if (pthread_create(&f->thread, NULL, run_file, f) != 0) {
            fprintf(stderr, "omfsx: cannot start a thread\n");
            return 1;
        }
    }
    int failed = 0;
    for (int i = 0; i < o.files; i++) {
        pthread_join(files[i].thread, NULL);
        failed += files[i].failed;
    }
    if (o.model_dir) {
        for (int i = 0; i < o.files; i++) {
            int rc = save_model(&files[i], o.model_dir);
            if (rc) {
                fprintf(stderr, "omfsx: saving the model of %s: %s\n", files[i].path,
                        strerror(-rc));
                failed++;
            }
        }
    }
    printf("omfsx: seed %" PRIu64 ", %d files, survived:", o.seed, o.files);
    for (int i = 0; i < o.files; i++)
        printf(" %ld", files[i].done);
    printf(" of %ld operations%s\n", o.ops, failed ? " (FAILED)" : "");
    for (int i = 0; i < o.files; i++) {
        free(files[i].model);
        free(files[i].stored);
    }
    free(files);
    return failed ? 1 : 0;
}
