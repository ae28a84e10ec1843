/* The admin socket of a mount. */
#include "objmount/ctl.h"

#include <errno.h>
#include <stdbool.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "objmount/dcache.h"
#include "objmount/digest.h"
#include "objmount/log.h"

struct om_ctl {
    const struct om_stats_sources *src;
    uid_t owner;
    int fd;
    int wake[2];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    pthread_t thread;
};

/* Derived from the uid alone, so that root's objmountctl finds a user's
 * mount too. */
static int runtime_dir(uid_t uid, char *out, size_t n)
{
    char user_run[64];
    snprintf(user_run, sizeof(user_run), "/run/user/%u", (unsigned)uid);
    struct stat st;
    int len;
    if (uid == 0)
        len = snprintf(out, n, "/run/objmount");
    else if (stat(user_run, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid)
        len = snprintf(out, n, "%s/objmount", user_run);
    else
        len = snprintf(out, n, "/tmp/objmount-%u", (unsigned)uid);
    return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

int om_ctl_socket_path(const char *mountpoint, uid_t uid, char *out, size_t n)
{
    char dir[256];
    int rc = runtime_dir(uid, dir, sizeof(dir));
    if (rc)
        return rc;
    unsigned char h[OM_SHA256_LEN];
    om_sha256(mountpoint, strlen(mountpoint), h);
    char hex[17];
    om_hex(h, 8, hex);
    int len = snprintf(out, n, "%s/%s.sock", dir, hex);
    return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* ---- protocol ---- */

int om_ctl_parse(const char *line, size_t len, struct om_ctl_cmd *out)
{
    static const struct {
        const char *word;
        enum om_ctl_kind kind;
    } words[] = {
        {"status", OM_CTL_STATUS},
        {"stats", OM_CTL_STATS},
        {"stats prometheus", OM_CTL_STATS_PROMETHEUS},
        {"status json", OM_CTL_STATUS_JSON},
        {"stats json", OM_CTL_STATS_JSON},
        {"ping", OM_CTL_PING},
    };
    memset(out, 0, sizeof(*out));
    if (len > 0 && line[len - 1] == '\r')
        len--;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
        if (strlen(words[i].word) == len && memcmp(line, words[i].word, len) == 0) {
            out->kind = words[i].kind;
            return 0;
        }
    }
    if (len == 11 && memcmp(line, "cache stats", 11) == 0) {
        out->kind = OM_CTL_CACHE_STATS;
        return 0;
    }
    if (len == 10 && memcmp(line, "cache drop", 10) == 0) {
        out->kind = OM_CTL_CACHE_DROP;
        return 0;
    }
    if (len > 11 && len - 11 < sizeof(out->path) && memcmp(line, "cache drop ", 11) == 0) {
        const char *p = line + 11;
        size_t n = len - 11;
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
                return -EINVAL;
        }
        /* components: none empty, none "." or ".." */
        for (size_t i = 0; i <= n;) {
            size_t j = i;
            while (j < n && p[j] != '/')
                j++;
            size_t c = j - i;
            if (c == 0 || (c == 1 && p[i] == '.') || (c == 2 && p[i] == '.' && p[i + 1] == '.'))
                return -EINVAL;
            i = j + 1;
        }
        memcpy(out->path, p, n);
        out->path[n] = '\0';
        out->kind = OM_CTL_CACHE_DROP;
        return 0;
    }
    if (len > 6 && memcmp(line, "drain ", 6) == 0 &&
        om_parse_uint_n(line + 6, len - 6, OM_CTL_DRAIN_MAX_S, &out->drain_s) == 0) {
        out->kind = OM_CTL_DRAIN;
        return 0;
    }
    return -EINVAL;
}

int om_ctl_trust(const struct stat *dir, const struct stat *sock, uid_t expected)
{
    bool dir_ok = S_ISDIR(dir->st_mode) && (dir->st_uid == expected || dir->st_uid == 0) &&
                  (dir->st_mode & 022) == 0;
    bool sock_ok =
        !sock || (S_ISSOCK(sock->st_mode) && (sock->st_uid == expected || sock->st_uid == 0));
    return dir_ok && sock_ok ? 0 : -EPERM;
}

/* ---- server ---- */

/* "cache drop [PATH]": every block of the file's object, or all. */
static int cache_drop(const struct om_stats_sources *src, const char *path, struct om_buf *out)
{
    if (!src->dcache)
        return om_buf_printf(out, "error: this mount has no data cache\n");
    char *key = NULL;
    if (path[0] && asprintf(&key, "%s%s", src->prefix ? src->prefix : "", path) < 0)
        return -ENOMEM;
    long n = om_dcache_drop(src->dcache, key);
    free(key);
    if (n < 0)
        return om_buf_printf(out, "error: %s\n", strerror((int)-n));
    return om_buf_printf(out, "ok %ld\n", n);
}

static void answer(struct om_ctl *c, int fd)
{
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        (cred.uid != 0 && cred.uid != c->owner)) {
        static const char denied[] = "error: permission denied\n";
        if (send(fd, denied, sizeof(denied) - 1, MSG_NOSIGNAL) < 0)
            om_debug("admin socket: a refused peer went away");
        return;
    }
    char cmd[OM_CTL_LINE_MAX + 16];
    size_t n = 0;
    while (n < sizeof(cmd) - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 2000) <= 0)
            return;
        ssize_t r = read(fd, cmd + n, 1);
        if (r <= 0 || cmd[n] == '\n')
            break;
        n++;
    }
    cmd[n] = '\0';
    struct om_buf out = {0};
    static __thread struct om_ctl_cmd req; /* large: not on the stack */
    int rc = om_ctl_parse(cmd, n, &req);
    if (rc) {
        rc = om_buf_printf(&out, "error: unknown command\n");
    } else if (req.kind == OM_CTL_STATUS) {
        rc = om_stats_render(c->src, OM_STATS_STATUS, &out);
    } else if (req.kind == OM_CTL_STATS) {
        rc = om_stats_render(c->src, OM_STATS_TEXT, &out);
    } else if (req.kind == OM_CTL_STATS_PROMETHEUS) {
        rc = om_stats_render(c->src, OM_STATS_PROMETHEUS, &out);
    } else if (req.kind == OM_CTL_STATUS_JSON) {
        rc = om_stats_render(c->src, OM_STATS_STATUS_JSON, &out);
    } else if (req.kind == OM_CTL_STATS_JSON) {
        rc = om_stats_render(c->src, OM_STATS_JSON, &out);
    } else if (req.kind == OM_CTL_CACHE_STATS) {
        rc = om_stats_render(c->src, OM_STATS_CACHE, &out);
    } else if (req.kind == OM_CTL_CACHE_DROP) {
        rc = cache_drop(c->src, req.path, &out);
    } else if (req.kind == OM_CTL_DRAIN) {
        /* wait until no commit is under way, up to the timeout */
        uint64_t deadline = om_now_ms() + req.drain_s * 1000;
        struct om_writers_stats w = {0};
        for (;;) {
            if (c->src->writers)
                om_writers_get_stats(c->src->writers, &w);
            if (w.commits_in_flight == 0) {
                rc = om_buf_printf(&out, "ok\n");
                break;
            }
            if (om_now_ms() >= deadline) {
                rc = om_buf_printf(&out, "timeout: %llu commits still in flight\n",
                                   (unsigned long long)w.commits_in_flight);
                break;
            }
            usleep(100000);
        }
    } else {
        rc = om_buf_printf(&out, "pong\n");
    }
    if (!rc && out.len) {
        size_t off = 0;
        while (off < out.len) {
            /* MSG_NOSIGNAL: a client that went away is not a SIGPIPE */
            ssize_t w = send(fd, out.data + off, out.len - off, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    om_buf_free(&out);
}

static void *ctl_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-ctl");
    struct om_ctl *c = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN}, {.fd = c->wake[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        answer(c, fd);
        close(fd);
    }
    return NULL;
}

static int mkdir_owned(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return -errno;
    struct stat st;
    if (lstat(dir, &st) != 0) /* lstat: a symlink planted in /tmp is not ours */
        return -errno;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
        return -EPERM; /* someone else's directory: do not put a socket there */
    return 0;
}

struct om_ctl *om_ctl_start(const struct om_stats_sources *src, const char *mountpoint, char *err,
                            size_t errlen)
{
    struct om_ctl *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->src = src;
    c->owner = getuid();
    c->fd = -1;
    c->wake[0] = c->wake[1] = -1;
    char dir[256];
    int rc = om_ctl_socket_path(mountpoint, getuid(), c->path, sizeof(c->path));
    if (!rc)
        rc = runtime_dir(getuid(), dir, sizeof(dir));
    if (!rc)
        rc = mkdir_owned(dir);
    if (rc) {
        snprintf(err, errlen, "admin socket directory for %s: %s", mountpoint, strerror(-rc));
        free(c);
        return NULL;
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    om_strlcpy(a.sun_path, c->path, sizeof(a.sun_path));
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    unlink(c->path); /* a stale socket of a daemon that died */
    mode_t old = umask(0177);
    rc = c->fd >= 0 && bind(c->fd, (struct sockaddr *)&a, sizeof(a)) == 0 ? 0 : -errno;
    umask(old);
    if (!rc && listen(c->fd, 16) != 0)
        rc = -errno;
    if (!rc && pipe(c->wake) != 0)
        rc = -errno;
    if (!rc && pthread_create(&c->thread, NULL, ctl_main, c) != 0)
        rc = -EAGAIN;
    if (rc) {
        snprintf(err, errlen, "admin socket %s: %s", c->path, strerror(-rc));
        if (c->fd >= 0)
            close(c->fd);
        if (c->wake[0] >= 0) {
            close(c->wake[0]);
            close(c->wake[1]);
        }
        unlink(c->path);
        free(c);
        return NULL;
    }
    return c;
}

void om_ctl_stop(struct om_ctl *c)
{
    if (!c)
        return;
    if (write(c->wake[1], "x", 1) != 1)
        om_warn("could not stop the admin socket thread");
    pthread_join(c->thread, NULL);
    close(c->fd);
    close(c->wake[0]);
    close(c->wake[1]);
    unlink(c->path);
    free(c);
}

/* ---- client ---- */

/* Is the socket at path one that expected (or root) put there? Its
 * directory must be theirs and writable by nobody else. 0, -ENOENT or -EPERM. */
static int socket_trusted(const char *path, uid_t expected)
{
    char dir[256];
    if (om_strlcpy(dir, path, sizeof(dir)))
        return -ENAMETOOLONG;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return -EPERM;
    *slash = '\0';
    struct stat ds, ss;
    if (lstat(dir, &ds) != 0 || lstat(path, &ss) != 0)
        return errno == ENOENT ? -ENOENT : -errno;
    if (om_ctl_trust(&ds, &ss, expected)) {
        om_warn("admin socket %s: not trusted (its directory must belong to uid %u or root and "
                "be writable by nobody else)",
                path, (unsigned)expected);
        return -EPERM;
    }
    return 0;
}

static int request_at(const char *path, uid_t expected, const char *command, char **reply,
                      int timeout_s)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (om_strlcpy(a.sun_path, path, sizeof(a.sun_path)))
        return -ENAMETOOLONG;
    int rc = socket_trusted(path, expected);
    if (rc)
        return rc;
    /* non-blocking: a daemon that stopped accepting (full backlog) must not
     * hang the client; connect is retried until the timeout */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    uint64_t deadline = om_now_ms() + (uint64_t)(timeout_s > 0 ? timeout_s : 1) * 1000;
    while (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int e = errno;
        if ((e == EAGAIN || e == EINTR) && om_now_ms() < deadline) {
            usleep(20000);
            continue;
        }
        close(fd);
        return e == ECONNREFUSED ? -ENOENT : e == EAGAIN ? -ETIMEDOUT : -e;
    }
    /* the listening peer must be the user we expect, or root */
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
        (cred.uid != expected && cred.uid != 0)) {
        om_warn("admin socket %s: answered by uid %d, expected %u or root; not used", path,
                (int)cred.uid, (unsigned)expected);
        close(fd);
        return -EPERM;
    }
    struct om_buf cmdline = {0};
    if (om_buf_printf(&cmdline, "%s\n", command)) {
        close(fd);
        return -ENOMEM;
    }
    ssize_t sent = send(fd, cmdline.data, cmdline.len, MSG_NOSIGNAL);
    om_buf_free(&cmdline);
    if (sent < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    shutdown(fd, SHUT_WR);
    struct om_buf b = {0};
    char chunk[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, timeout_s * 1000);
        if (pr == 0) {
            rc = -ETIMEDOUT;
            break;
        }
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r <= 0)
            break;
        if (om_buf_append(&b, chunk, (size_t)r)) {
            rc = -ENOMEM;
            break;
        }
    }
    close(fd);
    if (!rc && b.data && strncmp(b.data, "error: permission denied", 24) == 0)
        rc = -EACCES;
    if (rc) {
        om_buf_free(&b);
        return rc;
    }
    *reply = om_buf_steal(&b);
    return 0;
}

int om_ctl_request(const char *mountpoint, uid_t owner, const char *command, char **reply,
                   int timeout_s)
{
    char path[256];
    int rc = -ENOENT;
    uid_t uids[3] = {owner, 0, getuid()};
    for (int i = 0; i < 3 && (rc == -ENOENT || rc == -ENAMETOOLONG); i++) {
        if (i > 0 && (uids[i] == uids[0] || (i == 2 && uids[2] == uids[1])))
            continue;
        if (om_ctl_socket_path(mountpoint, uids[i], path, sizeof(path)) == 0)
            rc = request_at(path, uids[i], command, reply, timeout_s);
    }
    return rc;
}
