/* objmount: mount an S3 or AIStore bucket as a directory.
 *
 *   objmount BUCKET[:PREFIX] MOUNTPOINT [-o opt,...] [-f] [-d]
 *
 * Checks the bucket before mounting, so that a missing bucket, refused
 * credentials, an unreachable endpoint or a skewed clock end with one clear
 * line and a non-zero exit, with nothing mounted. Without -f the daemon
 * detaches and the command returns only once the mount is ready (0), or with
 * the daemon's error (1). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "objmount/client.h"
#include "objmount/config.h"
#include "objmount/ctl.h"
#include "objmount/fs.h"
#include "objmount/log.h"
#include "objmount/meta.h"
#include "objmount/notify.h"
#include "objmount/util.h"

static const char usage[] =
    "usage: objmount BUCKET[:PREFIX] MOUNTPOINT [-o OPTION[,OPTION...]] [-f] [-d]\n"
    "\n"
    "  -o OPTIONS   comma-separated options (see below and doc/options.md)\n"
    "  -f           stay in the foreground, log to stderr\n"
    "  -d           foreground with debug logging\n"
    "  -h, --help   this text\n"
    "  -V           version\n"
    "\n"
    "Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, AIS_AUTHN_TOKEN,\n"
    "-o credentials=FILE or -o anonymous. Endpoint: -o endpoint=URL, AWS_ENDPOINT_URL or\n"
    "AIS_ENDPOINT.\n"
    "\n"
    "options:\n";

static void print_usage(FILE *f)
{
    fputs(usage, f);
    size_t n;
    const struct om_option_info *o = om_config_options(&n);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s%s%s", o[i].name, o[i].arg ? "=" : "",
                 o[i].arg ? o[i].arg : "");
        fprintf(f, "  %-26s %s\n", name, o[i].help);
    }
}

/* ---- reporting to the waiting parent ---- */

static int report_fd = -1;

/* One line to stderr (and to the parent waiting for the daemon). */
static void fail_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail_line(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (report_fd >= 0) {
        dprintf(report_fd, "E%s\n", msg);
        close(report_fd);
        report_fd = -1;
    }
    fprintf(stderr, "objmount: %s\n", msg);
    om_notifyf("STATUS=%s", msg); /* systemctl status shows why */
}

static void report_ready(void)
{
    if (report_fd >= 0) {
        if (write(report_fd, "OK\n", 3) != 3)
            om_warn("could not tell the parent that the mount is ready");
        close(report_fd);
        report_fd = -1;
    }
}

/* Fork; the parent waits for the child's verdict and exits with it. */
static void daemonize_early(void)
{
    int p[2];
    if (pipe(p) != 0) {
        perror("objmount: pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("objmount: fork");
        exit(1);
    }
    if (pid > 0) {
        close(p[1]);
        char buf[1100];
        size_t n = 0;
        ssize_t r;
        while (n < sizeof(buf) - 1 && (r = read(p[0], buf + n, sizeof(buf) - 1 - n)) != 0) {
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                break;
            n += (size_t)r;
        }
        buf[n] = '\0';
        if (strncmp(buf, "OK", 2) == 0)
            exit(0);
        /* the child already printed its error on the shared stderr */
        if (n == 0)
            fprintf(stderr, "objmount: the daemon exited before the mount was ready\n");
        exit(1);
    }
    close(p[0]);
    report_fd = p[1];
    setsid();
}

/* After the mount is ready: detach from the terminal. */
static void detach_stdio(void)
{
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
        dup2(fd, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        if (fd > STDERR_FILENO)
            close(fd);
    }
}

/* ---- the bucket check ---- */

/* Shortest entry_timeout with which the bucket check's listing of the
 * root is kept as the root's listing. */
#define SEED_MIN_ENTRY_TIMEOUT_MS 60000

struct probe {
    struct om_client client;
    long skew;
    struct om_store_error e;
    const struct om_config *cfg;
    struct om_list_seed *seed; /* the root's first page, for the namespace */
    bool complete;
    uint64_t taken_ms;
};

/* The check is the first page of the root's listing: when that is the
 * whole of it, the namespace starts with it, and the first lookup or `ls`
 * of the root (a loader's first step after a mount) needs no LIST. */
static int probe_run(void *p)
{
    struct probe *pr = p;
    pr->taken_ms = om_now_ms();
    return om_store_check_listing(pr->client.store, pr->cfg->prefix,
                                  pr->seed ? om_list_seed_add : NULL, pr->seed, &pr->complete,
                                  &pr->skew, &pr->e);
}

static void probe_progress(void *p, uint64_t elapsed_ms)
{
    struct probe *pr = p;
    om_notifyf("STATUS=waiting for %s to answer (%.0f s so far)", pr->cfg->endpoint,
               (double)elapsed_ms / 1000.0);
    fprintf(stderr,
            "objmount: waiting for %s to answer a listing of bucket '%s' (%.0f s so far, at "
            "most %.0f s; -o mount_timeout=)\n",
            pr->cfg->endpoint, pr->cfg->bucket, (double)elapsed_ms / 1000.0,
            (double)pr->cfg->mount_timeout_ms / 1000.0);
}

/* Check the bucket within mount_timeout; *seed receives the root's
 * listing when the check's page held all of it (else NULL), taken at
 * *taken_ms. On a timeout the probe is left to its thread (the process
 * exits). */
static int check_bucket(struct om_config *cfg, struct om_list_seed **seed, uint64_t *taken_ms)
{
    struct probe *pr = calloc(1, sizeof(*pr));
    char err[512];
    *seed = NULL;
    if (!pr) {
        fail_line("out of memory");
        return -ENOMEM;
    }
    pr->cfg = cfg;
    int rc = om_client_open(&pr->client, cfg, err, sizeof(err));
    if (rc) {
        fail_line("%s", err);
        free(pr);
        return rc;
    }
    /* (the profile's timeouts are resolved by now) kept only where listings
     * are trusted long (profile=training: a day): with the default 10 s, a
     * name another client adds in the first seconds after the mount would
     * be missing for up to 10 s although nobody had listed the root */
    if (cfg->entry_timeout_ms >= SEED_MIN_ENTRY_TIMEOUT_MS)
        pr->seed = om_list_seed_new(); /* without it, the check alone */
    int run = om_run_bounded(probe_run, pr, cfg->mount_timeout_ms, 2000, probe_progress, pr, &rc);
    const char *b = cfg->bucket, *ep = cfg->endpoint;
    if (run == -ETIMEDOUT) {
        fail_line("no answer from %s within %.0f s: it accepts connections but does not answer "
                  "a listing of bucket '%s' (objmountctl doctor tells more)",
                  ep, (double)cfg->mount_timeout_ms / 1000.0, b);
        return -ETIMEDOUT;
    }
    struct om_store_error e = pr->e;
    long skew = pr->skew;
    if (run) {
        fail_line("cannot check bucket '%s': %s", b, strerror(-run));
        rc = run;
    } else if (rc == 0) {
        if (skew > 300 || skew < -300)
            om_warn("the local clock differs from %s by %ld s; requests may be refused", ep, skew);
    } else if (strcmp(e.code, "RequestTimeTooSkewed") == 0) {
        fail_line("%s refuses requests: the local clock differs from the server's by %ld s "
                  "(fix the time, e.g. with chrony or systemd-timesyncd)",
                  ep, skew);
    } else if (rc == -ENOENT) {
        fail_line("bucket '%s' does not exist at %s%s%s", b, ep, e.code[0] ? ": " : "", e.code);
    } else if (rc == -EACCES) {
        fail_line("access to bucket '%s' at %s denied (%s%s%s); credentials from %s", b, ep,
                  e.code[0] ? e.code : "HTTP 403", e.message[0] ? ": " : "", e.message,
                  pr->client.creds.source);
    } else if (rc == -EHOSTUNREACH || rc == -ETIMEDOUT) {
        fail_line("cannot reach %s: %s", ep, e.message[0] ? e.message : strerror(-rc));
    } else {
        fail_line("checking bucket '%s' at %s failed: %s (HTTP %ld%s%s%s%s)", b, ep,
                  strerror(-rc), e.status, e.code[0] ? " " : "", e.code, e.message[0] ? ": " : "",
                  e.message);
    }
    if (rc == 0 && pr->complete) {
        *seed = pr->seed;
        *taken_ms = pr->taken_ms;
    } else {
        om_list_seed_free(pr->seed);
    }
    om_client_close(&pr->client);
    free(pr);
    return rc;
}

/* ---- the mount point ---- */

/* The file system type mounted at path ("" when path is not a mount point).
 * The last line for path is the one on top. */
static void mounted_at(const char *path, char *fstype, size_t n, char *majmin, size_t mn)
{
    fstype[0] = '\0';
    if (majmin)
        majmin[0] = '\0';
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return;
    char line[8192];
    while (fgets(line, sizeof(line), f)) {
        char point[PATH_MAX], mm[32], type[64];
        const char *sep = strstr(line, " - ");
        if (sscanf(line, "%*s %*s %31s %*s %4095s", mm, point) == 2 && sep &&
            sscanf(sep + 3, "%63s", type) == 1 && strcmp(point, path) == 0) {
            om_strlcpy(fstype, type, n);
            if (majmin)
                om_strlcpy(majmin, mm, mn);
        }
    }
    fclose(f);
}

static bool dir_empty(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return true; /* the mount itself reports what is wrong */
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)))
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

/* A mount point left behind by an objmount daemon that died: stat says
 * "Transport endpoint is not connected". Detach it (a lazy unmount) so that
 * a restarted daemon (systemd's Restart=, mount -a again) mounts there
 * again, with a log line. Nothing else is touched. */
static void detach_dead_mount(const char *arg)
{
    struct stat st;
    if (stat(arg, &st) == 0 || errno != ENOTCONN)
        return;
    /* the dead mount point itself cannot be resolved: its parent can */
    char copy[PATH_MAX], parent[PATH_MAX], path[PATH_MAX], type[64];
    om_strlcpy(copy, arg, sizeof(copy));
    size_t len = strlen(copy);
    while (len > 1 && copy[len - 1] == '/')
        copy[--len] = '\0';
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    if (slash)
        *slash = '\0';
    if (!realpath(slash ? (copy[0] ? copy : "/") : ".", parent))
        return;
    int n = snprintf(path, sizeof(path), "%s%s%s", parent, strcmp(parent, "/") ? "/" : "", base);
    if (n < 0 || (size_t)n >= sizeof(path))
        return;
    mounted_at(path, type, sizeof(type), NULL, 0);
    if (strcmp(type, "fuse.objmount") != 0)
        return; /* not ours: check_mountpoint says what it is */
    int rc = -1;
    if (geteuid() == 0) {
        rc = umount2(path, MNT_DETACH);
    } else {
        pid_t pid = fork();
        if (pid == 0) {
            execlp("fusermount3", "fusermount3", "-u", "-z", path, (char *)NULL);
            _exit(127);
        }
        int ws;
        if (pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws))
            rc = WEXITSTATUS(ws);
    }
    if (rc == 0)
        om_warn("%s: detached the mount of an objmount daemon that is gone (transport endpoint "
                "not connected); mounting again",
                path);
    else
        om_warn("%s: the mount of an objmount daemon that is gone is left there and cannot be "
                "detached: umount -l %s",
                path, path);
}

/* Refuse what s3fs-fuse refuses: a mount point that is already a mount
 * (an automount point of systemd's, autofs, is fine: mounting over it is
 * what it waits for), and one that is not empty without -o nonempty. */
static int check_mountpoint(const struct om_config *cfg)
{
    char type[64];
    mounted_at(cfg->mountpoint, type, sizeof(type), NULL, 0);
    if (type[0] && strcmp(type, "autofs") != 0) {
        fprintf(stderr, "objmount: %s is already a mount point (%s): unmount it first\n",
                cfg->mountpoint, type);
        return -EBUSY;
    }
    if (!type[0] && !cfg->nonempty && !dir_empty(cfg->mountpoint)) {
        fprintf(stderr,
                "objmount: mount point %s is not empty: mount with -o nonempty to hide what it "
                "holds, or use an empty directory\n",
                cfg->mountpoint);
        return -ENOTEMPTY;
    }
    return 0;
}

/* ---- stopping ---- */

/* Watches for the end of the session loop (a signal, or the kernel ending
 * the connection) so that commits under way are named and bounded while
 * the loop waits for them. */
struct stop_watch {
    struct fuse_session *se;
    struct om_fs *fs;
    uint64_t timeout_ms;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    pthread_t thread;
};

static void *stop_watch_main(void *p)
{
    struct stop_watch *sw = p;
    pthread_mutex_lock(&sw->lock);
    while (!sw->done && !fuse_session_exited(sw->se)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&sw->cond, &sw->lock, &ts);
    }
    bool exited = !sw->done;
    pthread_mutex_unlock(&sw->lock);
    if (exited) {
        om_notify("STOPPING=1\nSTATUS=stopping: uploads under way finish first");
        om_info("stopping: uploads under way finish first");
        om_fs_stopping(sw->fs, sw->timeout_ms);
    }
    return NULL;
}

/* The kernel caps FUSE readahead at the backing device's read_ahead_kb
 * (128 KiB by default) whatever the filesystem asks for: raise it for this
 * mount when we may (root). The device numbers come from mountinfo, which
 * costs no request to ourselves. */
static void raise_readahead(const char *mountpoint, uint64_t bytes)
{
    char type[64], dev[32];
    mounted_at(mountpoint, type, sizeof(type), dev, sizeof(dev));
    if (!dev[0])
        return;
    char path[96];
    snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
    FILE *f = fopen(path, "w");
    if (!f) {
        om_debug("cannot raise readahead (%s: %s)", path, strerror(errno));
        return;
    }
    fprintf(f, "%llu\n", (unsigned long long)(bytes / 1024));
    if (fclose(f) != 0)
        om_debug("cannot raise readahead (%s: %s)", path, strerror(errno));
}

/* ---- main ---- */

static int add_fuse_opt(struct fuse_args *args, const char *opt)
{
    return fuse_opt_add_arg(args, "-o") || fuse_opt_add_arg(args, opt) ? -ENOMEM : 0;
}

int main(int argc, char **argv)
{
    /* a few heaps for dozens of FUSE, engine and worker threads: glibc's
     * default (8 per core) let freed memory stay spread over many arenas
     * (issue 23's soak: RSS 8 -> 173 MiB with nothing open) */
    mallopt(M_ARENA_MAX, 4);
    struct om_config cfg;
    om_config_init(&cfg);
    char err[512];
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    bool debug = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            print_usage(stdout);
            return 0;
        } else if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
            printf("objmount 0.1.0\n");
            return 0;
        } else if (strcmp(a, "-f") == 0) {
            cfg.foreground = true;
        } else if (strcmp(a, "-d") == 0) {
            cfg.foreground = true;
            debug = true;
        } else if (strncmp(a, "-o", 2) == 0) {
            const char *opts = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!opts) {
                fprintf(stderr, "objmount: -o needs options\n");
                return 2;
            }
            if (om_config_parse_opts(&cfg, opts, err, sizeof(err))) {
                fprintf(stderr, "objmount: %s\n", err);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "objmount: unknown argument '%s' (see objmount --help)\n", a);
            return 2;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "objmount: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (npos != 2) {
        print_usage(stderr);
        return 2;
    }
    if (debug)
        cfg.log_level = OM_LOG_DEBUG;
    om_log_init("objmount", cfg.log_level, false);
    if (om_config_set_source(&cfg, pos[0], err, sizeof(err))) {
        fprintf(stderr, "objmount: %s\n", err);
        return 2;
    }
    char mnt[PATH_MAX];
    struct stat st;
    detach_dead_mount(pos[1]);
    if (!realpath(pos[1], mnt) || stat(mnt, &st) != 0) {
        fprintf(stderr, "objmount: mount point %s: %s\n", pos[1], strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, "objmount: mount point %s is not a directory\n", pos[1]);
        return 1;
    }
    cfg.mountpoint = strdup(mnt);
    if (!cfg.mountpoint) {
        fprintf(stderr, "objmount: out of memory\n");
        return 1;
    }
    if (check_mountpoint(&cfg))
        return 1;

    if (!cfg.foreground)
        daemonize_early();
    /* a manifest mount sends no LIST: its first request is the manifest's
     * GET (s3:KEY) or the first read */
    struct om_list_seed *seed = NULL;
    uint64_t seed_ms = 0;
    if (!cfg.manifest && check_bucket(&cfg, &seed, &seed_ms))
        return 1;

    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    char fsname[600];
    snprintf(fsname, sizeof(fsname), "fsname=%s%s%s,subtype=objmount", cfg.bucket,
             cfg.prefix[0] ? ":/" : "", cfg.prefix);
    int rc = fuse_opt_add_arg(&args, "objmount") ? -ENOMEM : 0;
    if (!rc)
        rc = add_fuse_opt(&args, fsname);
    if (!rc && cfg.allow_other)
        rc = add_fuse_opt(&args, "allow_other");
    if (!rc && cfg.default_permissions)
        rc = add_fuse_opt(&args, "default_permissions");
    if (!rc && (cfg.ro || cfg.manifest)) /* a manifest mount is read-only */
        rc = add_fuse_opt(&args, "ro");
    if (!rc && cfg.mount_flags)
        rc = add_fuse_opt(&args, cfg.mount_flags);
    if (!rc && debug)
        rc = fuse_opt_add_arg(&args, "-d") ? -ENOMEM : 0;
    if (rc) {
        fail_line("out of memory");
        return 1;
    }

    /* Everything that serves the mount exists before the mount appears, so
     * that objmountctl reaches any mount it can see. */
    struct om_fs fs;
    memset(&fs, 0, sizeof(fs));
    struct om_client client;
    rc = om_client_open(&client, &cfg, err, sizeof(err));
    if (!rc && !cfg.manifest) /* what the server is decides how to write to it */
        om_store_identify(client.store);
    if (!rc && (rc = om_fs_init(&fs, &cfg, &client, err, sizeof(err))) != 0)
        om_client_close(&client);
    if (!rc && seed && om_meta_seed_root(fs.meta, seed, seed_ms) != 0)
        om_info("the root's listing from the bucket check is not kept: out of memory");
    om_list_seed_free(seed);
    if (rc) {
        fail_line("%s", err);
        fuse_opt_free_args(&args);
        return 1;
    }
    struct om_stats_sources sources = {
        .bucket = cfg.bucket,
        .prefix = cfg.prefix,
        .endpoint = cfg.endpoint,
        .mountpoint = cfg.mountpoint,
        .cache_dir = cfg.cache_dir,
        .started = time(NULL),
        .http = client.http,
        .meta = fs.meta,
        .readers = fs.readers,
        .dcache = fs.dcache,
        .prefetch = fs.prefetch,
        .shards = fs.shards,
        .writers = fs.writers,
    };
    struct om_ctl *ctl = om_ctl_start(&sources, cfg.mountpoint, err, sizeof(err));
    if (!ctl)
        om_warn("%s: objmountctl cannot reach this mount", err);

    struct fuse_session *se = fuse_session_new(&args, &om_fs_ops, sizeof(om_fs_ops), &fs);
    fuse_opt_free_args(&args);
    const char *failed = NULL;
    if (!se)
        failed = "cannot create the FUSE session";
    else if (fuse_set_signal_handlers(se) != 0)
        failed = "cannot install signal handlers";
    else if (fuse_session_mount(se, cfg.mountpoint) != 0)
        failed = "cannot mount (is /dev/fuse usable, and the mount point free?)";
    else if (om_fs_attach_io(&fs, se) != 0)
        om_warn("cannot attach the session's I/O: lookups in one directory run one at a time");
    if (failed) {
        fail_line("%s: %s", cfg.mountpoint, failed);
        if (se) {
            fuse_remove_signal_handlers(se);
            fuse_session_destroy(se);
        }
        om_ctl_stop(ctl);
        om_fs_destroy(&fs);
        om_client_close(&client);
        return 1;
    }
    om_fs_set_session(&fs, se);
    raise_readahead(cfg.mountpoint, cfg.max_readahead);
    om_info("mounted %s%s%s on %s (endpoint %s)", cfg.bucket, cfg.prefix[0] ? ":" : "",
            cfg.prefix, cfg.mountpoint, cfg.endpoint);
    om_notifyf("READY=1\nSTATUS=mounted %s%s%s on %s", cfg.bucket, cfg.prefix[0] ? ":" : "",
               cfg.prefix, cfg.mountpoint);
    if (!cfg.foreground) {
        om_log_init("objmount", cfg.log_level, true);
        if (chdir("/") != 0)
            om_warn("chdir /: %s", strerror(errno));
        report_ready();
        detach_stdio();
    }

    struct stop_watch sw = {.se = se, .fs = &fs, .timeout_ms = cfg.stop_timeout_ms};
    pthread_mutex_init(&sw.lock, NULL);
    pthread_cond_init(&sw.cond, NULL);
    bool watching = pthread_create(&sw.thread, NULL, stop_watch_main, &sw) == 0;
    struct fuse_loop_config *lc = fuse_loop_cfg_create();
    fuse_loop_cfg_set_max_threads(lc, (unsigned)cfg.threads);
    fuse_loop_cfg_set_idle_threads(lc, 8);
    rc = fuse_session_loop_mt(se, lc);
    fuse_loop_cfg_destroy(lc);
    pthread_mutex_lock(&sw.lock);
    sw.done = true;
    pthread_cond_signal(&sw.cond);
    pthread_mutex_unlock(&sw.lock);
    if (watching)
        pthread_join(sw.thread, NULL);

    om_info("unmounting %s", cfg.mountpoint);
    om_notify("STOPPING=1\nSTATUS=unmounting");
    om_ctl_stop(ctl);
    /* the session is cleared after the unmount: it aborts the requests
     * left unanswered, one of which may hold the directory lock a
     * notification waits for; no new notification starts meanwhile */
    om_fs_stop_notifications(&fs);
    fuse_session_unmount(se);
    om_fs_set_session(&fs, NULL);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    om_fs_destroy(&fs);
    om_client_close(&client);
    om_config_free(&cfg);
    /* a positive result is the signal that ended the loop: a clean unmount */
    return rc >= 0 ? 0 : 1;
}
