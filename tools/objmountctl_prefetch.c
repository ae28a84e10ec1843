/* objmountctl prefetch DIR [--append] [--file LIST]: hand a loader's order
 * to the mount (prefetch across files, include/objmount/prefetch.h). The
 * paths, one per line and relative to DIR, go to the daemon through the
 * OM_IOC_PREFETCH ioctl on DIR, in as many calls as they take; the first
 * call replaces the caller's hinted list unless --append. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "objmount/prefetch.h"
#include "ctl_common.h"
#include "objmountctl.h"

/* One ioctl with the paths in buf[1..used); buf[0] is the flag byte. */
static int send_chunk(int fd, char *buf, size_t used, const char *dir)
{
    memset(buf + used, 0, OM_PREFETCH_IOC_SIZE - used);
    if (ioctl(fd, OM_IOC_PREFETCH, buf) != 0) {
        if (errno == ENOTTY || errno == ENOSYS)
            return ctl_fail("prefetch %s: not an objmount mount (or one without prefetch)", dir);
        return ctl_fail("prefetch %s: %s", dir, strerror(errno));
    }
    return 0;
}

int ctl_prefetch(const char *dir, const char *list, bool append)
{
    FILE *in = list ? fopen(list, "re") : stdin;
    if (!in)
        return ctl_fail("prefetch: %s: %s", list, strerror(errno));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (list)
            fclose(in);
        return ctl_fail("prefetch: %s: %s", dir, strerror(e));
    }
    char *buf = malloc(OM_PREFETCH_IOC_SIZE);
    char *line = NULL;
    size_t cap = 0, used = 1;
    long sent = 0, lines = 0, skipped = 0;
    int status = buf ? 0 : ctl_fail("prefetch: out of memory");
    if (buf)
        buf[0] = append ? 'a' : 'r';
    ssize_t n;
    while (!status && (n = getline(&line, &cap, in)) >= 0) {
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (!n)
            continue;
        if ((size_t)n + 2 > OM_PREFETCH_IOC_SIZE - 1) {
            skipped++; /* no path is that long */
            continue;
        }
        if (used + (size_t)n + 2 > OM_PREFETCH_IOC_SIZE) {
            status = send_chunk(fd, buf, used, dir);
            buf[0] = 'a';
            used = 1;
            sent += lines;
            lines = 0;
        }
        if (used > 1)
            buf[used++] = '\n';
        memcpy(buf + used, line, (size_t)n);
        used += (size_t)n;
        lines++;
    }
    if (!status && (lines || !append))
        status = send_chunk(fd, buf, used, dir); /* 'r' with no path empties the list */
    if (!status)
        sent += lines;
    if (!status)
        fprintf(stderr, "objmountctl: %ld path%s hinted to %s%s\n", sent, sent == 1 ? "" : "s",
                dir, skipped ? " (some lines too long: skipped)" : "");
    free(line);
    free(buf);
    close(fd);
    if (list)
        fclose(in);
    return status;
}
