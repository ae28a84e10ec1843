/* mount.objmount: the helper mount(8) runs for "-t objmount" and for fstab
 * lines of type objmount:
 *
 *   mybucket:/train  /mnt/train  objmount  _netdev,ro,endpoint=http://gw:51080/s3  0 0
 *
 * It takes mount(8)'s own options out (defaults, auto, noauto, user, users,
 * owner, group, nofail, _netdev, x-*, comment=), passes the generic mount
 * flags (rw, ro, nosuid, nodev, noexec, noatime, ...) and objmount's options
 * on, and runs the objmount daemon without -f. That command returns 0 only
 * once the mount answers, or non-zero with the daemon's error message on
 * stderr, which this helper then returns.
 *
 *   mount.objmount SOURCE DIR [-s] [-f] [-n] [-v] [-o OPTIONS]
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const dropped[] = {"defaults", "auto", "noauto", "user", "users", "owner",
                                      "group", "nofail", "_netdev", "nouser", "loop"};

/* mount(8)'s options that mean nothing to objmount. */
static bool drop(const char *opt)
{
    for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++) {
        if (strcmp(opt, dropped[i]) == 0)
            return true;
    }
    return strncmp(opt, "x-", 2) == 0 || strncmp(opt, "comment=", 8) == 0;
}

static int append(char *out, size_t n, const char *opt)
{
    size_t len = strlen(out);
    int w = snprintf(out + len, n - len, "%s%s", len ? "," : "", opt);
    return w < 0 || (size_t)w >= n - len ? -1 : 0;
}

/* The daemon: $OBJMOUNT_BIN, next to this helper (or one level up, in a
 * build tree), in ../bin (installed: /usr/sbin/mount.objmount runs
 * /usr/bin/objmount), the usual sbin and bin directories, or PATH. */
static const char *daemon_path(char *buf, size_t n)
{
    const char *env = getenv("OBJMOUNT_BIN");
    if (env && *env)
        return env;
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len > 0) {
        self[len] = '\0';
        char *dir = dirname(self);
        snprintf(buf, n, "%s/objmount", dir); /* installed side by side */
        if (access(buf, X_OK) == 0)
            return buf;
        snprintf(buf, n, "%s/../objmount", dir); /* a meson build tree: build/tools/.. */
        if (access(buf, X_OK) == 0)
            return buf;
        char up[PATH_MAX]; /* installed: PREFIX/sbin -> PREFIX/bin */
        snprintf(up, sizeof(up), "%s/../bin/objmount", dir);
        if (n >= PATH_MAX && access(up, X_OK) == 0 && realpath(up, buf))
            return buf;
    }
    static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin",
                                       "/usr/local/bin"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(buf, n, "%s/objmount", dirs[i]);
        if (access(buf, X_OK) == 0)
            return buf;
    }
    return "objmount"; /* execvp searches PATH */
}

int main(int argc, char **argv)
{
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    bool fake = false, verbose = false;
    char opts[8192] = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-o") == 0 && i + 1 < argc) {
            char *copy = strdup(argv[++i]);
            if (!copy)
                return 1;
            /* split on commas, keeping "\," inside values */
            char *start = copy;
            for (char *p = copy;; p++) {
                if (*p == '\\' && p[1]) {
                    p++;
                    continue;
                }
                if (*p != ',' && *p != '\0')
                    continue;
                char end = *p;
                *p = '\0';
                if (*start && !drop(start) && append(opts, sizeof(opts), start)) {
                    fprintf(stderr, "mount.objmount: options too long\n");
                    return 1;
                }
                if (!end)
                    break;
                start = p + 1;
            }
            free(copy);
        } else if (strcmp(a, "-f") == 0) {
            fake = true;
        } else if (strcmp(a, "-v") == 0) {
            verbose = true;
        } else if (strcmp(a, "-s") == 0 || strcmp(a, "-n") == 0) {
            /* sloppy and no-mtab: nothing to do for a FUSE mount */
        } else if (strcmp(a, "-t") == 0 && i + 1 < argc) {
            i++; /* the type: objmount, or objmount.SUBTYPE */
        } else if (a[0] == '-') {
            fprintf(stderr, "mount.objmount: unknown argument '%s'\n", a);
            return 1;
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(stderr, "mount.objmount: unexpected argument '%s'\n", a);
            return 1;
        }
    }
    if (npos != 2) {
        fprintf(stderr, "usage: mount.objmount BUCKET[:/PREFIX] DIR [-o OPTIONS]\n");
        return 1;
    }
    char path[PATH_MAX];
    const char *bin = daemon_path(path, sizeof(path));
    char *args[8];
    int n = 0;
    args[n++] = (char *)bin;
    args[n++] = (char *)pos[0];
    args[n++] = (char *)pos[1];
    if (opts[0]) {
        args[n++] = "-o";
        args[n++] = opts;
    }
    args[n] = NULL;
    if (verbose || fake)
        fprintf(stderr, "mount.objmount: %s %s %s%s%s\n", bin, pos[0], pos[1],
                opts[0] ? " -o " : "", opts);
    if (fake)
        return 0;
    execvp(bin, args);
    fprintf(stderr, "mount.objmount: cannot run %s: %s\n", bin, strerror(errno));
    return 1;
}
