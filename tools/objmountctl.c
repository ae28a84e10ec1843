/* objmountctl: the admin command of objmount.
 *
 *   objmountctl status [--json]
 *   objmountctl stats MOUNTPOINT [--watch [SECONDS]] [--prometheus|--json]
 *   objmountctl stats --json                 (every mount)
 *   objmountctl unmount MOUNTPOINT [--timeout SECONDS]
 *   objmountctl uploads list|abort BUCKET [--older-than DURATION] [-o OPTIONS]
 *   objmountctl recover list|push|drop [ID...|--all] [--force] [-o OPTIONS]
 *   objmountctl doctor BUCKET [--timeout SECONDS] [-o OPTIONS]
 *   objmountctl cache stats MOUNTPOINT | warm PATH... [--threads N] | drop MOUNTPOINT|PATH...
 *   objmountctl manifest build BUCKET[:PREFIX] [--threads N] [--output FILE] [-o OPTIONS]
 *   objmountctl manifest show FILE [--keys]
 *   objmountctl prefetch DIR [--append] [--file LIST]
 *
 * Every failure prints one line naming what went wrong and exits non-zero. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "objmount/client.h"
#include "objmount/ctl.h"
#include "objmount/json.h"
#include "objmount/log.h"
#include "objmount/sidecar.h"
#include "objmount/url.h"
#include "objmount/util.h"
#include "objmount/writer.h"
#include "ctl_common.h"
#include "objmountctl.h"

static const char usage[] =
    "usage: objmountctl COMMAND [ARGS]\n"
    "\n"
    "  status [--json]                         every objmount mount on this machine\n"
    "  stats MOUNTPOINT [--watch [S]] [--prometheus|--json]\n"
    "                                          requests, bytes, retries, caches, latency\n"
    "  stats --json                            the same for every mount, as a JSON array\n"
    "  unmount MOUNTPOINT [--timeout S]        wait for pending commits, then unmount\n"
    "  uploads list BUCKET [--older-than D]    multipart uploads in progress\n"
    "  uploads abort BUCKET [--older-than D] [--key K --upload-id ID]\n"
    "  recover list                            data kept because it could not be uploaded\n"
    "  recover push ID...|--all [--force]      upload it again, verified, then remove it;\n"
    "                                          not over an object changed since staging\n"
    "                                          unless --force\n"
    "  recover drop ID...|--all                delete it\n"
    "  doctor BUCKET [--timeout S]             check endpoint, credentials, clock, TLS;\n"
    "                                          each step bounded by S (default 10)\n"
    "  cache stats MOUNTPOINT                  the data cache: size, hits, evictions\n"
    "  cache warm PATH... [--threads N]        read files and trees into the data cache in\n"
    "                                          parallel (default 8 threads), with progress\n"
    "  cache drop MOUNTPOINT|PATH...           empty the data cache, or drop files and trees\n"
    "  manifest build BUCKET[:PREFIX] [--threads N] [--output FILE]\n"
    "                                          list once (first-level prefixes in parallel,\n"
    "                                          default 8 threads) and write a manifest for\n"
    "                                          -o manifest= mounts (to stdout without --output)\n"
    "  manifest show FILE [--keys]             its header and counts; --keys lists every key\n"
    "  prefetch DIR [--append] [--file LIST]   the files a loader opens next, in order (paths\n"
    "                                          relative to DIR, one per line, from stdin or\n"
    "                                          LIST): fetched ahead; replaces this user's\n"
    "                                          hinted list unless --append\n"
    "\n"
    "  -o OPTIONS   mount options for uploads, recover, doctor and manifest build\n"
    "               (endpoint=..., etc.)\n";

/* ---- mounts ---- */

struct mount_entry {
    char point[PATH_MAX];
    char source[512];
    uid_t owner;
};

static void unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] && p[3]) {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* objmount mounts from /proc/self/mountinfo. Returns the count (<= max). */
static int find_mounts(struct mount_entry *out, int max)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f)
        return 0;
    char line[8192];
    int n = 0;
    while (n < max && fgets(line, sizeof(line), f)) {
        char *fields[64];
        int nf = 0;
        for (char *t = strtok(line, " \n"); t && nf < 64; t = strtok(NULL, " \n"))
            fields[nf++] = t;
        int dash = -1;
        for (int i = 6; i < nf; i++) {
            if (strcmp(fields[i], "-") == 0) {
                dash = i;
                break;
            }
        }
        if (dash < 0 || dash + 3 >= nf + 1 || strcmp(fields[dash + 1], "fuse.objmount") != 0)
            continue;
        struct mount_entry *m = &out[n++];
        om_strlcpy(m->point, fields[4], sizeof(m->point));
        unescape(m->point);
        om_strlcpy(m->source, dash + 2 < nf ? fields[dash + 2] : "", sizeof(m->source));
        unescape(m->source);
        m->owner = 0;
        const char *uid = dash + 3 < nf ? strstr(fields[dash + 3], "user_id=") : NULL;
        if (uid)
            m->owner = (uid_t)strtoul(uid + 8, NULL, 10);
    }
    fclose(f);
    return n;
}

static bool lookup_mount(const char *path, struct mount_entry *out)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        om_strlcpy(real, path, sizeof(real)); /* a dead FUSE mount cannot be resolved */
    struct mount_entry all[256];
    int n = find_mounts(all, 256);
    for (int i = 0; i < n; i++) {
        if (strcmp(all[i].point, real) == 0 || strcmp(all[i].point, path) == 0) {
            *out = all[i];
            return true;
        }
    }
    return false;
}

static const char *kv(const char *text, const char *key, char *out, size_t n)
{
    out[0] = '\0';
    size_t klen = strlen(key);
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
            size_t v = OM_MIN(len - klen - 1, n - 1);
            memcpy(out, p + klen + 1, v);
            out[v] = '\0';
            break;
        }
        p = end ? end + 1 : NULL;
    }
    return out;
}

static void human_duration(long s, char *out, size_t n)
{
    if (s < 120)
        snprintf(out, n, "%lds", s);
    else if (s < 7200)
        snprintf(out, n, "%ldm", s / 60);
    else if (s < 172800)
        snprintf(out, n, "%ldh", s / 3600);
    else
        snprintf(out, n, "%ldd", s / 86400);
}

static int cmd_status(void)
{
    struct mount_entry mounts[256];
    int n = find_mounts(mounts, 256);
    if (n == 0) {
        printf("no objmount mounts\n");
        return 0;
    }
    printf("%-28s %-24s %-32s %7s %5s %7s %8s  %s\n", "MOUNTPOINT", "BUCKET", "ENDPOINT", "UPTIME",
           "OPEN", "COMMITS", "RECOVERY", "LAST ERROR");
    int status = 0;
    for (int i = 0; i < n; i++) {
        char *reply = NULL;
        int rc = om_ctl_request(mounts[i].point, mounts[i].owner, "status", &reply, 5);
        if (rc) {
            printf("%-28s %-24s (daemon not answering: %s)\n", mounts[i].point, mounts[i].source,
                   strerror(-rc));
            status = 1;
            continue;
        }
        char b[256], p[256], e[256], up[32], open[32], commits[32], rec[32], last[512], upt[32];
        kv(reply, "bucket", b, sizeof(b));
        kv(reply, "prefix", p, sizeof(p));
        char bucket[600];
        snprintf(bucket, sizeof(bucket), "%s%s%s", b, p[0] ? ":" : "", p);
        uint64_t up_s = 0;
        if (om_parse_uint(kv(reply, "uptime_s", up, sizeof(up)), OM_UINT_MAX, &up_s))
            up_s = 0;
        human_duration((long)up_s, upt, sizeof(upt));
        /* text a server or a key may have shaped: no terminal escapes */
        char shown[1024];
        kv(reply, "last_error", last, sizeof(last));
        om_log_escape(last, strlen(last), shown, sizeof(shown));
        printf("%-28s %-24s %-32s %7s %5s %7s %8s  %s\n", mounts[i].point, bucket,
               kv(reply, "endpoint", e, sizeof(e)), upt,
               kv(reply, "open_files", open, sizeof(open)),
               kv(reply, "commits_in_flight", commits, sizeof(commits)),
               kv(reply, "recovery_files", rec, sizeof(rec)), shown[0] ? shown : "-");
        free(reply);
    }
    return status;
}

/* --json: a JSON array with one object per mount (doc/json.md): the
 * daemon's answer to command ("status json" or "stats json"), or for a
 * daemon that does not answer {"mountpoint", "source", "answering": false,
 * "error"}. Exits 1 when some daemon did not answer, as the text does. */
static int cmd_json_all(const char *command)
{
    struct mount_entry mounts[256];
    int n = find_mounts(mounts, 256);
    struct om_buf out = {0};
    struct om_json j;
    om_json_init(&j, &out);
    om_json_array(&j, NULL);
    int status = 0;
    for (int i = 0; i < n && !j.rc; i++) {
        char *reply = NULL;
        int rc = om_ctl_request(mounts[i].point, mounts[i].owner, command, &reply, 5);
        if (!rc && reply[0] != '{') {
            rc = -EPROTO; /* an objmount that does not know JSON yet */
            free(reply);
        }
        if (rc) {
            om_json_object(&j, NULL);
            om_json_str(&j, "mountpoint", mounts[i].point);
            om_json_str(&j, "source", mounts[i].source);
            om_json_bool(&j, "answering", false);
            om_json_str(&j, "error", strerror(-rc));
            om_json_end(&j, '}');
            status = 1;
            continue;
        }
        reply[strcspn(reply, "\n")] = '\0';
        om_json_raw(&j, NULL, reply);
        free(reply);
    }
    om_json_end(&j, ']');
    if (j.rc || om_buf_puts(&out, "\n")) {
        om_buf_free(&out);
        return ctl_fail("out of memory");
    }
    fputs(out.data, stdout);
    om_buf_free(&out);
    return status;
}

static volatile sig_atomic_t interrupted;
static void on_sigint(int s)
{
    (void)s;
    interrupted = 1;
}

static int cmd_stats(const char *point, bool prometheus, bool json, int watch)
{
    struct mount_entry m;
    if (!lookup_mount(point, &m))
        return ctl_fail("%s is not an objmount mount point", point);
    signal(SIGINT, on_sigint);
    for (;;) {
        char *reply = NULL;
        const char *what = prometheus ? "stats prometheus" : "stats";
        int rc = om_ctl_request(m.point, m.owner, json ? "stats json" : what, &reply, 10);
        if (rc)
            return ctl_fail("%s: the daemon does not answer (%s)", m.point, strerror(-rc));
        if (json && reply[0] != '{') {
            free(reply);
            return ctl_fail("%s: the daemon does not answer in JSON (an older objmount?)", m.point);
        }
        if (watch && !json) /* --json --watch: one line per interval */
            printf("\033[H\033[2J");
        fputs(reply, stdout);
        fflush(stdout);
        free(reply);
        if (!watch)
            return 0;
        for (int i = 0; i < watch * 10 && !interrupted; i++)
            usleep(100000);
        if (interrupted)
            return 0;
    }
}

/* Run argv and wait: its exit status, or -errno. quiet: its stderr goes
 * to /dev/null. */
static int run(char *const argv[], bool quiet)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int null = quiet ? open("/dev/null", O_WRONLY) : -1;
        if (null >= 0)
            dup2(null, STDERR_FILENO);
        execvp(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define UNMOUNT_TRIES 10

static int cmd_unmount(const char *point, int timeout)
{
    struct mount_entry m;
    if (!lookup_mount(point, &m))
        return ctl_fail("%s is not an objmount mount point", point);
    char cmd[64], *reply = NULL;
    snprintf(cmd, sizeof(cmd), "drain %d", timeout);
    int rc = om_ctl_request(m.point, m.owner, cmd, &reply, timeout + 10);
    if (rc == 0 && strncmp(reply, "ok", 2) != 0) {
        reply[strcspn(reply, "\n")] = '\0';
        ctl_fail("%s: %s (not unmounted)", m.point, reply);
        free(reply);
        return 1;
    }
    free(reply);
    if (rc)
        fprintf(stderr, "objmountctl: %s: the daemon does not answer (%s); unmounting anyway\n",
                m.point, strerror(-rc));
    char *umount_argv[] = {"umount", m.point, NULL};
    char *fuse_argv[] = {"fusermount3", "-u", m.point, NULL};
    /* a close() that waited for the last commit still holds its file for
     * a moment after the drain answered: busy for up to a second, then
     * the last try says why */
    for (int i = 0; i < UNMOUNT_TRIES; i++) {
        rc = run(getuid() == 0 ? umount_argv : fuse_argv, i + 1 < UNMOUNT_TRIES);
        struct mount_entry still;
        if (rc && !lookup_mount(m.point, &still))
            rc = 0; /* unmounted meanwhile */
        if (rc == 0)
            break;
        usleep(100000);
    }
    if (rc)
        return ctl_fail("unmounting %s failed (is it busy? see fuser -m %s)", m.point, m.point);
    /* the daemon finishes its last commits before it exits */
    for (int i = 0; i < timeout * 10; i++) {
        struct mount_entry again;
        if (!lookup_mount(m.point, &again))
            break;
        usleep(100000);
    }
    printf("unmounted %s\n", m.point);
    return 0;
}

/* ---- uploads ---- */

struct upload_filter {
    time_t older_than; /* 0 = all */
    struct om_client *c;
    bool abort;
    const char *key, *id;
    int count, failed;
};

static int on_upload(void *ud, const struct om_upload_entry *e)
{
    struct upload_filter *f = ud;
    if (f->older_than && e->initiated > f->older_than)
        return 0;
    if (f->key && (strcmp(f->key, e->key) != 0 || (f->id && strcmp(f->id, e->upload_id) != 0)))
        return 0;
    char when[32] = "-", age[32] = "-";
    if (e->initiated) {
        struct tm tm;
        gmtime_r(&e->initiated, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        human_duration((long)(time(NULL) - e->initiated), age, sizeof(age));
    }
    f->count++;
    if (!f->abort) {
        printf("%s\t%s\t%s\t%s\n", e->key, e->upload_id, when, age);
        return 0;
    }
    struct om_store_error err;
    int rc = om_store_mpu_abort(f->c->store, e->key, e->upload_id, &err);
    if (rc && rc != -ENOENT) {
        fprintf(stderr, "objmountctl: abort %s %s: %s (%s)\n", e->key, e->upload_id, strerror(-rc),
                err.code);
        f->failed++;
    } else {
        printf("aborted %s %s\n", e->key, e->upload_id);
    }
    return 0;
}

static int cmd_uploads(struct om_config *cfg, bool abort, const char *older, const char *key,
                       const char *id)
{
    struct upload_filter f = {.abort = abort, .key = key, .id = id};
    if (older) {
        uint64_t ms;
        if (om_parse_duration_ms(older, &ms))
            return ctl_fail("--older-than: '%s' is not a duration (e.g. 30m, 12h, 7d)", older);
        /* 0s is every upload: Swift rounds Initiated up to the next second,
         * so an upload just started can look younger than "now" */
        f.older_than = ms ? time(NULL) - (time_t)(ms / 1000) : 0;
    }
    if (abort && !older && !key)
        return ctl_fail("uploads abort needs --older-than DURATION or --key KEY (refusing to abort "
                    "every upload of the bucket, including ones in progress)");
    struct om_client c;
    char err[512];
    if (om_client_open(&c, cfg, err, sizeof(err)))
        return ctl_fail("%s", err);
    f.c = &c;
    struct om_store_error e;
    int rc = om_store_mpu_list(c.store, NULL, on_upload, &f, &e);
    om_client_close(&c);
    if (rc)
        return ctl_fail("listing uploads of %s: %s (%s %s)", cfg->bucket, strerror(-rc), e.code,
                    e.message);
    if (!abort && f.count == 0)
        printf("no multipart uploads in progress\n");
    return f.failed ? 1 : 0;
}

/* ---- recovery ---- */

/* IDs (file names without .data) in the recovery directory, sorted. */
static int recovery_ids(const char *dir, char ***out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    char **ids = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".data") != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **v = realloc(ids, sizeof(*v) * (size_t)cap);
            if (!v)
                break;
            ids = v;
        }
        ids[n++] = strndup(e->d_name, len - 5);
    }
    closedir(d);
    for (int i = 1; i < n; i++) /* insertion sort: a handful of entries */
        for (int j = i; j > 0 && strcmp(ids[j - 1], ids[j]) > 0; j--) {
            char *t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    *out = ids;
    return n;
}

/* Upload one recovered file where its sidecar says it belongs, verified;
 * unless force, only over the object it was staged over. 0 or 1 (said). */
static int push_one(struct om_config *cfg, const char *id, const char *data, const char *side,
                    bool force)
{
    char err[512];
    struct om_sidecar s;
    if (om_sidecar_read(side, &s) != 0)
        return ctl_fail("%s: no readable sidecar: cannot tell where it belongs", id);
    /* the data must be what the sidecar describes: a recovery entry whose
     * bytes changed after it was kept (an entry of an older objmount was
     * the live staging file) would be uploaded torn and called verified */
    char why[256] = "";
    int dfd = open(data, O_RDONLY | O_CLOEXEC);
    int dc = dfd < 0 ? -errno : om_sidecar_check_data(&s, dfd, why, sizeof(why));
    if (dfd >= 0)
        close(dfd);
    if (dc == -EBADMSG && !force)
        return ctl_fail("%s: %s: it is not what was kept (kept; --force uploads it anyway)", id,
                        why);
    if (dc == -EBADMSG)
        fprintf(stderr, "objmountctl: %s: %s: uploading anyway (--force)\n", id, why);
    else if (dc == -ENODATA)
        fprintf(stderr, "objmountctl: %s: its sidecar has no MD5: the data is checked by its "
                        "size only\n",
                id);
    else if (dc)
        return ctl_fail("%s: cannot read %s: %s", id, data, strerror(-dc));
    struct om_config c2 = *cfg; /* shallow: the same options, the sidecar's bucket */
    c2.finalized = false;
    /* BUCKET, or ais://BUCKET for an entry of a native AIStore mount (c2's
     * own bucket and prefix strings, freed below) */
    c2.bucket = c2.prefix = NULL;
    if (om_config_set_source(&c2, s.bucket, err, sizeof(err))) {
        free(c2.bucket);
        free(c2.prefix);
        return ctl_fail("%s: %s", id, err);
    }
    if (!om_config_is_set(cfg, "endpoint") && s.endpoint[0])
        c2.endpoint = s.endpoint;
    struct om_client cl;
    int status = 0;
    if (om_client_open(&cl, &c2, err, sizeof(err))) {
        status = ctl_fail("%s: %s", id, err);
        free(c2.bucket);
        free(c2.prefix);
        return status;
    }
    if (!force) {
        /* a HEAD, then the upload: what changes in between is not seen
         * (doc/decisions.md, "recover push") */
        struct om_object o;
        struct om_store_error e;
        int rc = om_store_head(cl.store, s.key, &o, &e);
        enum om_sidecar_base b = om_sidecar_base_check(&s, rc == 0, rc == 0 ? o.etag : "");
        if (rc && rc != -ENOENT)
            status = ctl_fail("%s: cannot tell whether %s/%s changed since it was staged: %s (kept; "
                          "--force uploads anyway)",
                          id, s.bucket, s.key, strerror(-rc));
        else if (b == OM_BASE_CHANGED)
            status = ctl_fail("%s: %s/%s changed since the data was staged (ETag %s then, %s now): "
                          "not overwritten (kept; --force uploads anyway)",
                          id, s.bucket, s.key, s.base_etag, o.etag);
        else if (b == OM_BASE_CREATED)
            status = ctl_fail("%s: %s/%s changed since the data was staged (it did not exist then, "
                          "ETag %s now): not overwritten (kept; --force uploads anyway)",
                          id, s.bucket, s.key, o.etag);
        else if (b == OM_BASE_UNKNOWN)
            status = ctl_fail("%s: its sidecar does not say what %s/%s held when the data was staged: "
                          "not overwritten (kept; --force uploads anyway)",
                          id, s.bucket, s.key);
    }
    if (!status) {
        struct om_writers_config wc = {.cache_dir = cfg->cache_dir,
                                       .bucket = s.bucket,
                                       .endpoint = c2.endpoint,
                                       .part_size = cfg->part_size,
                                       .upload_retries = (int)cfg->upload_retries,
                                       .upload_retry_ms = cfg->upload_retry_delay_ms,
                                       .verify_read = true,
                                       .max_parts_in_flight = 8};
        struct om_writers *ws = om_writers_new(cl.store, &wc, err, sizeof(err));
        struct om_file_meta meta = {.has_mode = s.has_mode, .mode = s.mode};
        int rc = ws ? om_writer_push_file(ws, data, s.key, &meta, err, sizeof(err)) : -EIO;
        om_writers_free(ws);
        if (rc)
            status = ctl_fail("%s: upload of %s/%s failed: %s (kept)", id, s.bucket, s.key, err);
        else
            printf("uploaded %s to %s/%s (%" PRIu64 " bytes, verified)\n", id, s.bucket, s.key,
                   s.size);
    }
    om_client_close(&cl);
    free(c2.bucket);
    free(c2.prefix);
    return status;
}

static int cmd_recover(struct om_config *cfg, const char *action, char **ids_arg, int nids,
                       bool all, bool force)
{
    char err[512];
    struct om_creds none = {.anonymous = true};
    if (om_config_finalize(cfg, &none, err, sizeof(err)))
        return ctl_fail("%s", err);
    if (strcmp(action, "list") != 0 && strcmp(action, "push") != 0 &&
        strcmp(action, "drop") != 0)
        return ctl_fail("recover: unknown action '%s' (list, push or drop)", action);
    if (strcmp(action, "list") != 0 && !all && nids == 0)
        return ctl_fail("recover %s needs IDs (see objmountctl recover list) or --all", action);
    char dir[4200];
    snprintf(dir, sizeof(dir), "%s/recovery", cfg->cache_dir);
    char **ids = NULL;
    int n = recovery_ids(dir, &ids);
    if (n < 0) {
        if (n == -ENOENT && strcmp(action, "list") == 0) {
            printf("no recovered data in %s\n", dir);
            return 0;
        }
        if (n == -ENOENT && nids > 0)
            return ctl_fail("no recovered data with ID %s in %s", ids_arg[0], dir);
        return ctl_fail("%s: %s", dir, strerror(-n));
    }
    int status = 0;
    if (strcmp(action, "list") == 0) {
        if (n == 0)
            printf("no recovered data in %s\n", dir);
        for (int i = 0; i < n; i++) {
            char path[4400];
            snprintf(path, sizeof(path), "%s/%s" OM_SIDECAR_SUFFIX, dir, ids[i]);
            struct om_sidecar s;
            if (om_sidecar_read(path, &s) != 0) {
                printf("%s\t(no readable sidecar)\n", ids[i]);
                continue;
            }
            printf("%s\t%s\t%s/%s\t%" PRIu64 " bytes\t%s\t%s\n", ids[i], s.state, s.bucket, s.key,
                   s.size, s.time, s.last_error[0] ? s.last_error : "-");
        }
    } else if (strcmp(action, "push") == 0 || strcmp(action, "drop") == 0) {
        bool push = action[0] == 'p';
        for (int k = 0; k < nids && !status; k++) {
            bool known = false;
            for (int i = 0; i < n && !known; i++)
                known = strcmp(ids_arg[k], ids[i]) == 0;
            if (!known)
                status = ctl_fail("no recovered data with ID %s (see objmountctl recover list)",
                              ids_arg[k]);
        }
        for (int i = 0; i < n && !status; i++) {
            bool wanted = all;
            for (int k = 0; k < nids && !wanted; k++)
                wanted = strcmp(ids_arg[k], ids[i]) == 0;
            if (!wanted)
                continue;
            char data[4400], side[4400];
            snprintf(data, sizeof(data), "%s/%s.data", dir, ids[i]);
            snprintf(side, sizeof(side), "%s/%s" OM_SIDECAR_SUFFIX, dir, ids[i]);
            if (push && (status = push_one(cfg, ids[i], data, side, force)) != 0)
                break;
            if (unlink(data) != 0)
                status = ctl_fail("%s: %s", data, strerror(errno));
            unlink(side);
            if (!push)
                printf("dropped %s\n", ids[i]);
        }
    }
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return status;
}

/* ---- cache ---- */

/* The objmount mount holding path (the longest mount point above it) and
 * path relative to it ("" for the mount point itself). */
static bool mount_of(const char *path, struct mount_entry *m, char *rel, size_t rellen)
{
    char real[PATH_MAX];
    if (!realpath(path, real))
        return false;
    struct mount_entry all[256];
    int n = find_mounts(all, 256), best = -1;
    size_t bestlen = 0;
    for (int i = 0; i < n; i++) {
        size_t l = strlen(all[i].point);
        if (strncmp(real, all[i].point, l) == 0 && (real[l] == '/' || real[l] == '\0') &&
            l >= bestlen) {
            best = i;
            bestlen = l;
        }
    }
    if (best < 0)
        return false;
    *m = all[best];
    const char *r = real + bestlen;
    while (*r == '/')
        r++;
    om_strlcpy(rel, r, rellen);
    return true;
}

/* The number after "name": inside the "data_cache" object of a stats
 * JSON reply; 0 when absent. */
static uint64_t cache_counter(const char *json, const char *name)
{
    const char *dc = json ? strstr(json, "\"data_cache\":{") : NULL;
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":", name);
    const char *p = dc ? strstr(dc, pat) : NULL;
    return p ? strtoull(p + strlen(pat), NULL, 10) : 0;
}

static char *stats_json_of(const struct mount_entry *m)
{
    char *reply = NULL;
    if (om_ctl_request(m->point, m->owner, "stats json", &reply, 10) != 0)
        return NULL;
    return reply;
}

/* Files under the paths (regular files, not following symlinks). */
struct file_list {
    char **path;
    uint64_t *size;
    size_t n, cap;
    uint64_t bytes;
};

static int list_add(struct file_list *l, const char *path, uint64_t size)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        char **p = realloc(l->path, cap * sizeof(*p));
        if (p)
            l->path = p;
        uint64_t *s = p ? realloc(l->size, cap * sizeof(*s)) : NULL;
        if (!s)
            return -ENOMEM;
        l->size = s;
        l->cap = cap;
    }
    if (!(l->path[l->n] = strdup(path)))
        return -ENOMEM;
    l->size[l->n++] = size;
    l->bytes += size;
    return 0;
}

static int list_tree(struct file_list *l, const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0)
        return -errno;
    if (S_ISREG(sb.st_mode))
        return list_add(l, path, (uint64_t)sb.st_size);
    if (!S_ISDIR(sb.st_mode))
        return 0;
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *child = NULL;
        if (asprintf(&child, "%s/%s", path, e->d_name) < 0)
            rc = -ENOMEM;
        else
            rc = list_tree(l, child);
        free(child);
    }
    closedir(d);
    return rc;
}

static void list_free(struct file_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->path[i]);
    free(l->path);
    free(l->size);
}

struct warm {
    struct file_list *files;
    pthread_mutex_t lock;
    size_t next, done_files, failed;
    uint64_t done_bytes;
    char first_error[PATH_MAX + 64];
};

static void *warm_worker(void *arg)
{
    struct warm *w = arg;
    char *buf = malloc(1 << 20);
    for (;;) {
        pthread_mutex_lock(&w->lock);
        size_t i = w->next < w->files->n && !interrupted ? w->next++ : SIZE_MAX;
        pthread_mutex_unlock(&w->lock);
        if (i == SIZE_MAX || !buf)
            break;
        int fd = open(w->files->path[i], O_RDONLY | O_CLOEXEC);
        ssize_t r = fd < 0 ? -1 : 0;
        uint64_t got = 0;
        while (fd >= 0 && (r = read(fd, buf, 1 << 20)) > 0) {
            got += (uint64_t)r;
            pthread_mutex_lock(&w->lock);
            w->done_bytes += (uint64_t)r;
            pthread_mutex_unlock(&w->lock);
        }
        int err = r < 0 ? errno : 0;
        if (fd >= 0) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* the data cache keeps it */
            close(fd);
        }
        pthread_mutex_lock(&w->lock);
        w->done_files++;
        if (err && !w->failed++)
            snprintf(w->first_error, sizeof(w->first_error), "%s: %s", w->files->path[i],
                     strerror(err));
        pthread_mutex_unlock(&w->lock);
    }
    free(buf);
    return NULL;
}

static bool warm_ended(void *ud)
{
    struct warm *w = ud;
    pthread_mutex_lock(&w->lock);
    bool ended = w->done_files == w->files->n || (interrupted && w->next == w->done_files);
    pthread_mutex_unlock(&w->lock);
    return ended;
}

static void warm_progress(void *ud, double secs, bool final)
{
    struct warm *w = ud;
    pthread_mutex_lock(&w->lock);
    size_t files = w->done_files;
    uint64_t bytes = w->done_bytes;
    pthread_mutex_unlock(&w->lock);
    double total = (double)w->files->bytes, rate = secs > 0 ? (double)bytes / secs : 0;
    double frac = total > 0 ? (double)bytes / total : 1.0;
    char eta[32] = "-", text[256];
    if (rate > 0 && !final)
        snprintf(eta, sizeof(eta), "%.0f s", (total - (double)bytes) / rate);
    snprintf(text, sizeof(text), "%zu/%zu files, %.1f/%.1f MiB, %.1f MiB/s, ETA %s", files,
             w->files->n, (double)bytes / 1048576.0, total / 1048576.0, rate / 1048576.0, eta);
    ctl_progress(frac, text, final);
}

static int cmd_cache_warm(char **paths, int n, int threads)
{
    struct mount_entry m, other;
    char rel[PATH_MAX];
    struct file_list files = {0};
    for (int i = 0; i < n; i++) {
        if (!mount_of(paths[i], i ? &other : &m, rel, sizeof(rel)))
            return ctl_fail("%s is not in an objmount mount (%s)", paths[i],
                        access(paths[i], F_OK) ? strerror(errno) : "not under one");
        if (i && strcmp(other.point, m.point) != 0)
            return ctl_fail("%s and %s are in different mounts: warm one mount at a time",
                        paths[0], paths[i]);
        int rc = list_tree(&files, paths[i]);
        if (rc) {
            list_free(&files);
            return ctl_fail("%s: %s", paths[i], strerror(-rc));
        }
    }
    char *before = stats_json_of(&m);
    if (!before || !strstr(before, "\"data_cache\":{")) {
        free(before);
        list_free(&files);
        return ctl_fail("%s: %s", m.point,
                    before ? "this mount has no data cache (mount it with -o data_cache=SIZE or "
                             "auto, or profile=training)"
                           : "the daemon does not answer");
    }
    struct warm w = {.files = &files};
    pthread_mutex_init(&w.lock, NULL);
    signal(SIGINT, on_sigint);
    pthread_t t[64];
    int nt = 0;
    for (int i = 0; i < threads && i < 64; i++)
        nt += pthread_create(&t[nt], NULL, warm_worker, &w) == 0;
    double secs = ctl_wait(warm_ended, warm_progress, &w);
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    /* the cache copies what was read on its own threads: wait for that */
    char *after = NULL;
    for (int i = 0; i < 600; i++) {
        free(after);
        after = stats_json_of(&m);
        if (!after || cache_counter(after, "in_flight") == 0)
            break;
        usleep(100000);
    }
    uint64_t stored = cache_counter(after, "insert_bytes") - cache_counter(before, "insert_bytes");
    uint64_t rejected = cache_counter(after, "rejected") - cache_counter(before, "rejected");
    printf("warmed %zu of %zu files, %.1f MiB in %.1f s (%.1f MiB/s); the data cache stored "
           "%.1f MiB (%" PRIu64 " blocks not admitted) and holds %.1f of %.1f MiB\n",
           w.done_files - w.failed, files.n, (double)w.done_bytes / 1048576.0, secs,
           secs > 0 ? (double)w.done_bytes / 1048576.0 / secs : 0.0, (double)stored / 1048576.0,
           rejected, (double)cache_counter(after, "size_bytes") / 1048576.0,
           (double)cache_counter(after, "limit_bytes") / 1048576.0);
    free(before);
    free(after);
    int rc = 0;
    if (w.failed)
        rc = ctl_fail("%zu file(s) could not be read; the first: %s", w.failed, w.first_error);
    else if (interrupted)
        rc = ctl_fail("interrupted");
    list_free(&files);
    pthread_mutex_destroy(&w.lock);
    return rc;
}

static int cache_request(const struct mount_entry *m, const char *cmd, char **reply)
{
    int rc = om_ctl_request(m->point, m->owner, cmd, reply, 60);
    if (rc)
        return ctl_fail("%s: the daemon does not answer (%s)", m->point, strerror(-rc));
    if (strncmp(*reply, "error: unknown command", 22) == 0) {
        free(*reply);
        *reply = NULL;
        return ctl_fail("%s: the daemon does not know cache commands (an older objmount?)",
                    m->point);
    }
    if (strncmp(*reply, "error: ", 7) == 0) {
        (*reply)[strcspn(*reply, "\n")] = '\0';
        int r = ctl_fail("%s: %s", m->point, *reply + 7);
        free(*reply);
        *reply = NULL;
        return r;
    }
    return 0;
}

static int cmd_cache_drop(char **paths, int n)
{
    long removed = 0;
    for (int i = 0; i < n; i++) {
        struct mount_entry m;
        char rel[PATH_MAX], *reply = NULL;
        if (!mount_of(paths[i], &m, rel, sizeof(rel)))
            return ctl_fail("%s is not in an objmount mount", paths[i]);
        struct file_list files = {0};
        int rc = rel[0] ? list_tree(&files, paths[i]) : 0;
        if (rc)
            return ctl_fail("%s: %s", paths[i], strerror(-rc));
        if (!rel[0]) {
            rc = cache_request(&m, "cache drop", &reply);
            if (!rc)
                removed += strtol(reply + 3, NULL, 10);
            free(reply);
        }
        for (size_t f = 0; f < files.n && !rc; f++) {
            char frel[PATH_MAX], *cmd = NULL;
            struct mount_entry fm;
            if (!mount_of(files.path[f], &fm, frel, sizeof(frel)) ||
                asprintf(&cmd, "cache drop %s", frel) < 0) {
                rc = ctl_fail("%s: cannot name it in its mount", files.path[f]);
                break;
            }
            rc = cache_request(&fm, cmd, &reply);
            if (!rc)
                removed += strtol(reply + 3, NULL, 10);
            free(cmd);
            free(reply);
            reply = NULL;
        }
        list_free(&files);
        if (rc)
            return rc;
    }
    printf("removed %ld block(s) from the data cache\n", removed);
    return 0;
}

static int cmd_cache(char **pos, int npos, int threads)
{
    const char *what = npos > 1 ? pos[1] : "";
    if (strcmp(what, "stats") == 0 && npos == 3) {
        struct mount_entry m;
        char rel[PATH_MAX], *reply = NULL;
        if (!mount_of(pos[2], &m, rel, sizeof(rel)) || rel[0])
            return ctl_fail("%s is not an objmount mount point", pos[2]);
        int rc = cache_request(&m, "cache stats", &reply);
        if (!rc)
            fputs(reply, stdout);
        free(reply);
        return rc;
    }
    if (strcmp(what, "warm") == 0 && npos >= 3)
        return cmd_cache_warm(pos + 2, npos - 2, threads);
    if (strcmp(what, "drop") == 0 && npos >= 3)
        return cmd_cache_drop(pos + 2, npos - 2);
    fprintf(stderr, "objmountctl: cache: use 'cache stats MOUNTPOINT', 'cache warm PATH...' or "
                    "'cache drop MOUNTPOINT|PATH...'\n");
    return 2;
}

/* ---- doctor ---- */

static int checks_failed;

static void report(bool ok, const char *what, const char *fix)
{
    printf("[%s] %s\n", ok ? " ok " : "FAIL", what);
    if (!ok) {
        printf("       fix: %s\n", fix);
        checks_failed++;
    }
}

static bool tcp_reachable(const char *host, int port, char *msg, size_t n)
{
    char h[256], p[16];
    om_strlcpy(h, host, sizeof(h));
    if (h[0] == '[') { /* an IPv6 literal */
        memmove(h, h + 1, strlen(h));
        h[strcspn(h, "]")] = '\0';
    }
    snprintf(p, sizeof(p), "%d", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(h, p, &hints, &res);
    if (g) {
        snprintf(msg, n, "cannot resolve %s: %s", h, gai_strerror(g));
        return false;
    }
    bool ok = false;
    for (struct addrinfo *a = res; a && !ok; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        int c = connect(fd, a->ai_addr, a->ai_addrlen);
        if (c == 0 || errno == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t el = sizeof(err);
            if (poll(&pf, 1, 5000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 &&
                err == 0)
                ok = true;
            else
                snprintf(msg, n, "connect to %s port %d: %s", h, port,
                         err ? strerror(err) : "timed out");
        }
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

/* One request of the doctor's, run with a bound. */
struct doctor_call {
    struct om_store *store;
    bool head; /* a HEAD of the probe key, else a bucket check */
    long skew;
    struct om_object o;
    struct om_store_error e;
};

static int doctor_call_run(void *p)
{
    struct doctor_call *c = p;
    if (c->head)
        return om_store_head(c->store, ".objmount-doctor-probe", &c->o, &c->e);
    return om_store_check_bucket(c->store, &c->skew, &c->e);
}

/* Run one call within timeout_s. On a timeout the step fails and the doctor
 * ends: the request still runs, with the client it uses. */
static int doctor_bounded(struct doctor_call *c, const char *what, const char *endpoint,
                          int timeout_s)
{
    struct doctor_call *heap = malloc(sizeof(*heap));
    if (!heap)
        return -ENOMEM;
    *heap = *c;
    int rc = 0;
    int run = om_run_bounded(doctor_call_run, heap, (uint64_t)timeout_s * 1000, 0, NULL, NULL, &rc);
    if (run == -ETIMEDOUT) {
        char line[1024];
        snprintf(line, sizeof(line), "%s: no answer from %s within %d s", what, endpoint,
                 timeout_s);
        report(false, line,
               "the endpoint accepts connections but does not answer: check that it is an S3 "
               "endpoint (the port, the /s3 path of AIStore) and that the server is healthy; "
               "--timeout waits longer");
        printf("%d check%s failed\n", checks_failed, checks_failed == 1 ? "" : "s");
        fflush(stdout);
        _exit(1);
    }
    *c = *heap;
    free(heap);
    return run ? run : rc;
}

static size_t discard_body(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* OpenStack Swift's proxy answers GET /healthcheck (no signature) with 200
 * "OK" and an X-Trans-Id header; S3 servers do not. */
static bool is_swift(const struct om_url *u, const char *ca_bundle, int timeout_s)
{
    char url[1024];
    snprintf(url, sizeof(url), "%s://%s:%d/healthcheck", u->https ? "https" : "http", u->host,
             u->port);
    CURL *h = curl_easy_init();
    if (!h)
        return false;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (ca_bundle)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca_bundle);
    long status = 0;
    struct curl_header *hd = NULL;
    bool swift = curl_easy_perform(h) == CURLE_OK &&
                 curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status) == CURLE_OK &&
                 status == 200 &&
                 curl_easy_header(h, "X-Trans-Id", 0, CURLH_HEADER, -1, &hd) == CURLHE_OK;
    curl_easy_cleanup(h);
    return swift;
}

/* Traps of the server found, named with what objmount does about them. */
static void doctor_server_traps(const struct om_config *cfg, const struct om_url *u, long skew,
                                int timeout_s)
{
    char line[512];
    bool swift = is_swift(u, cfg->ca_bundle, timeout_s);
    printf("[info] server: %s\n", swift ? "OpenStack Swift with s3api (/healthcheck answers)"
                                        : "an S3 server (not Swift)");
    /* every S3 implementation refuses non-last parts under 5 MiB; the
     * writer never uploads smaller ones */
    if (!cfg->ro && cfg->part_size < (5ULL << 20))
        printf("[info] part_size %" PRIu64 " bytes: uploads use 5 MiB parts (S3 and Swift refuse "
               "smaller ones: EntityTooSmall); reads use part_size\n",
               cfg->part_size);
    if (!swift)
        return;
    snprintf(line, sizeof(line),
             "Swift refuses requests more than 15 minutes off its clock (skew now %ld s), keys "
             "over 1024 bytes, single PUTs over 5 GiB; ETags of objects copied from multipart "
             "ones are plain MD5s",
             skew);
    printf("[info] %s\n", line);
}

static int cmd_doctor(struct om_config *cfg, int timeout_s)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* each step shows as it ends, on a pipe too */
    char err[512], line[1024];
    struct om_client c;
    int rc = om_client_open(&c, cfg, err, sizeof(err));
    snprintf(line, sizeof(line), "configuration and credentials%s%s", rc ? ": " : "",
             rc ? err : "");
    report(rc == 0, line,
           "see doc/options.md: endpoint=, region=, credentials=, aws_profile=, anonymous");
    if (rc)
        return 1;
    printf("       endpoint %s (from %s), region %s (from %s), credentials: %s\n", cfg->endpoint,
           cfg->endpoint_source, cfg->region, cfg->region_source, c.creds.source);
    struct om_url u;
    om_url_parse(cfg->endpoint, &u);
    char msg[512] = "";
    bool reach = tcp_reachable(u.host, u.port, msg, sizeof(msg));
    snprintf(line, sizeof(line), "endpoint %s:%d reachable%s%s", u.host, u.port, reach ? "" : ": ",
             msg);
    report(reach, line,
           "check the endpoint URL, DNS, routes and firewalls (curl -v ENDPOINT shows the same)");
    if (!reach) {
        om_url_free(&u);
        om_client_close(&c);
        return 1;
    }
    struct doctor_call call = {.store = c.store};
    rc = doctor_bounded(&call, "bucket listing", cfg->endpoint, timeout_s);
    long skew = call.skew;
    struct om_store_error e = call.e;
    if (u.https) {
        bool tls_ok = !(rc == -EIO && strstr(e.message, "SSL"));
        snprintf(line, sizeof(line), "TLS certificate verified%s%s", tls_ok ? "" : ": ",
                 tls_ok ? "" : e.message);
        report(tls_ok, line,
               "point ca_bundle= (or AWS_CA_BUNDLE) at the CA that signed the endpoint's "
               "certificate");
    }
    bool skewed = strcmp(e.code, "RequestTimeTooSkewed") == 0 || skew > 300 || skew < -300;
    snprintf(line, sizeof(line), "clock within 5 minutes of the server's (skew %ld s)", skew);
    report(!skewed, line, "synchronise the clock (chrony, systemd-timesyncd or ntpdate)");
    bool creds_ok = rc != -EACCES || skewed;
    snprintf(line, sizeof(line), "credentials accepted%s%s", creds_ok ? "" : ": ",
             creds_ok ? "" : e.code);
    report(creds_ok, line,
           strcmp(e.code, "InvalidAccessKeyId") == 0
               ? "the access key is unknown to this endpoint: check which credentials are used "
                 "(listed above)"
           : strcmp(e.code, "SignatureDoesNotMatch") == 0
               ? "the secret key does not match the access key, or the region is wrong"
               : "grant s3:ListBucket on the bucket to these credentials, or use others");
    bool bucket_ok = rc == 0;
    snprintf(line, sizeof(line), "bucket '%s' lists%s%s%s%s", cfg->bucket, bucket_ok ? "" : ": ",
             bucket_ok ? "" : strerror(-rc), bucket_ok || !e.code[0] ? "" : " ",
             bucket_ok ? "" : e.code);
    report(bucket_ok, line,
           rc == -ENOENT ? "check the bucket name, and path_style/virtual_host for this endpoint"
           : rc == -EACCES ? "fix the credentials (see above)"
                           : "see the error above");
    /* the other addressing style, for a hint (S3 only) */
    struct om_store_config sc;
    om_config_store(cfg, &sc);
    sc.addressing = cfg->addressing == OM_ADDR_VHOST ? OM_ADDR_PATH : OM_ADDR_VHOST;
    struct om_store *other =
        sc.kind == OM_STORE_S3 ? om_store_new(c.http, &sc, &c.creds, err, sizeof(err)) : NULL;
    if (other) {
        struct doctor_call alt_call = {.store = other};
        int rc2 = doctor_bounded(&alt_call, "listing with the other addressing style",
                                 cfg->endpoint, timeout_s);
        const char *mine = sc.addressing == OM_ADDR_VHOST ? "path-style" : "virtual-host";
        const char *theirs = sc.addressing == OM_ADDR_VHOST ? "virtual-host" : "path-style";
        if (bucket_ok || rc2 != 0) {
            snprintf(line, sizeof(line), "addressing: %s %s, %s %s", mine,
                     bucket_ok ? "works" : "fails too", theirs, rc2 == 0 ? "works too" : "does not");
            printf("[info] %s\n", line);
        } else {
            snprintf(line, sizeof(line), "addressing: %s fails, %s works", mine, theirs);
            report(false, line,
                   sc.addressing == OM_ADDR_VHOST ? "mount with -o virtual_host"
                                                  : "mount with -o path_style");
        }
        om_store_free(other);
    }
    /* object requests: AIStore redirects those, not listings */
    struct doctor_call head = {.store = c.store, .head = true};
    doctor_bounded(&head, "object request", cfg->endpoint, timeout_s);
    struct om_http_stats st;
    om_http_get_stats(c.http, &st);
    printf("[info] redirects seen: %" PRIu64
           " (followed by objmount; credentials go only to the endpoint host and "
           "redirect_hosts)\n",
           st.redirects);
    doctor_server_traps(cfg, &u, skew, timeout_s);
    om_url_free(&u);
    om_client_close(&c);
    if (checks_failed)
        printf("%d check%s failed\n", checks_failed, checks_failed == 1 ? "" : "s");
    else
        printf("all checks passed\n");
    return checks_failed ? 1 : 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    struct om_config cfg;
    om_config_init(&cfg);
    om_log_init("objmountctl", OM_LOG_ERROR, false);
    char err[512];
    char *pos[64];
    int npos = 0;
    bool prometheus = false, all = false, force = false, json = false;
    int watch = 0, timeout = 60, threads = 8;
    bool timeout_given = false;
    const char *older = NULL, *key = NULL, *id = NULL, *output = NULL, *list = NULL;
    bool keys = false, append = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strncmp(a, "-o", 2) == 0) {
            const char *opts = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
            if (!opts)
                return ctl_fail("-o needs options");
            if (om_config_parse_opts(&cfg, opts, err, sizeof(err)))
                return ctl_fail("%s", err);
        } else if (strcmp(a, "--prometheus") == 0) {
            prometheus = true;
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else if (strcmp(a, "--all") == 0) {
            all = true;
        } else if (strcmp(a, "--force") == 0) {
            force = true;
        } else if (strcmp(a, "--watch") == 0) {
            watch = 2;
            uint64_t w;
            if (i + 1 < argc && om_parse_uint(argv[i + 1], 86400, &w) == 0 && w > 0) {
                watch = (int)w;
                i++;
            }
        } else if (strcmp(a, "--timeout") == 0 && i + 1 < argc) {
            uint64_t t;
            if (om_parse_uint(argv[++i], 86400, &t) || t == 0)
                return ctl_fail("--timeout wants a number of seconds (1 to 86400)");
            timeout = (int)t;
            timeout_given = true;
        } else if (strcmp(a, "--threads") == 0 && i + 1 < argc) {
            uint64_t t;
            if (om_parse_uint(argv[++i], 64, &t) || t == 0)
                return ctl_fail("--threads wants a number from 1 to 64");
            threads = (int)t;
        } else if (strcmp(a, "--output") == 0 && i + 1 < argc) {
            output = argv[++i];
        } else if (strcmp(a, "--keys") == 0) {
            keys = true;
        } else if (strcmp(a, "--append") == 0) {
            append = true;
        } else if (strcmp(a, "--file") == 0 && i + 1 < argc) {
            list = argv[++i];
        } else if (strcmp(a, "--older-than") == 0 && i + 1 < argc) {
            older = argv[++i];
        } else if (strcmp(a, "--key") == 0 && i + 1 < argc) {
            key = argv[++i];
        } else if (strcmp(a, "--upload-id") == 0 && i + 1 < argc) {
            id = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return ctl_fail("unknown argument '%s' (see objmountctl --help)", a);
        } else if (npos < 64) {
            pos[npos++] = argv[i];
        }
    }
    om_log_set_level(cfg.log_level);
    if (npos == 0) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = pos[0];
    if (json && prometheus)
        return ctl_fail("--json and --prometheus: choose one");
    if (strcmp(cmd, "status") == 0 && npos == 1)
        return json ? cmd_json_all("status json") : cmd_status();
    if (strcmp(cmd, "stats") == 0 && npos == 1 && json && !watch)
        return cmd_json_all("stats json");
    if (strcmp(cmd, "stats") == 0 && npos == 2)
        return cmd_stats(pos[1], prometheus, json, watch);
    if (strcmp(cmd, "unmount") == 0 && npos == 2)
        return cmd_unmount(pos[1], timeout);
    if (strcmp(cmd, "uploads") == 0 && npos == 3 &&
        (strcmp(pos[1], "list") == 0 || strcmp(pos[1], "abort") == 0)) {
        if (om_config_set_source(&cfg, pos[2], err, sizeof(err)))
            return ctl_fail("%s", err);
        return cmd_uploads(&cfg, pos[1][0] == 'a', older, key, id);
    }
    if (strcmp(cmd, "recover") == 0 && npos >= 2)
        return cmd_recover(&cfg, pos[1], pos + 2, npos - 2, all, force);
    if (strcmp(cmd, "doctor") == 0 && npos == 2) {
        if (om_config_set_source(&cfg, pos[1], err, sizeof(err)))
            return ctl_fail("%s", err);
        return cmd_doctor(&cfg, timeout_given ? timeout : 10);
    }
    if (strcmp(cmd, "cache") == 0)
        return cmd_cache(pos, npos, threads);
    if (strcmp(cmd, "manifest") == 0) {
        int status = ctl_manifest(&cfg, pos, npos, threads, output, keys);
        om_config_free(&cfg);
        return status;
    }
    if (strcmp(cmd, "prefetch") == 0 && npos == 2)
        return ctl_prefetch(pos[1], list, append);
    static const char *const known[] = {"status", "stats", "unmount", "uploads", "recover",
                                        "doctor", "cache", "manifest", "prefetch"};
    bool is_known = false;
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        is_known |= strcmp(cmd, known[i]) == 0;
    if (!is_known)
        fprintf(stderr, "objmountctl: unknown command '%s' (see objmountctl --help)\n", cmd);
    else if (strcmp(cmd, "uploads") == 0 && npos == 3)
        fprintf(stderr, "objmountctl: uploads: unknown action '%s' (list or abort)\n", pos[1]);
    else
        fprintf(stderr, "objmountctl: %s: wrong arguments (see objmountctl --help)\n", cmd);
    return 2;
}
