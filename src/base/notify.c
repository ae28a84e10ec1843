/* sd_notify(3)'s datagram protocol, spoken directly (no libsystemd). */
#include "objmount/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int om_notify(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (!path || !*path)
        return 0;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(a.sun_path))
        return -EINVAL; /* vsock addresses are not spoken here */
    memcpy(a.sun_path, path, len);
    if (path[0] == '@')
        a.sun_path[0] = '\0'; /* abstract namespace: no terminating NUL */
    socklen_t alen =
        (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '@' ? 0 : 1));
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    ssize_t w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&a, alen);
    int rc = w < 0 ? -errno : 1;
    close(fd);
    return rc;
}

int om_notifyf(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return om_notify(msg);
}
