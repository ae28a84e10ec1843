/* objmountctl's shared helpers (ctl_common.h): the failure line, the
 * progress line, waiting with progress. */
#include "ctl_common.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "objmount/util.h"

int ctl_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "objmountctl: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 1;
}

void ctl_progress(double frac, const char *text, bool final)
{
    char bar[31];
    int fill = (int)(OM_MIN(OM_MAX(frac, 0.0), 1.0) * 30);
    for (int i = 0; i < 30; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[30] = '\0';
    fprintf(stderr, "\r[%s] %s   %s", bar, text, final ? "\n" : "");
}

double ctl_wait(bool (*ended)(void *ud), void (*draw)(void *ud, double secs, bool final),
                void *ud)
{
    bool tty = isatty(2);
    uint64_t start = om_now_ms();
    while (!ended(ud)) {
        if (tty)
            draw(ud, (double)(om_now_ms() - start) / 1000.0, false);
        usleep(200000);
    }
    double secs = (double)(om_now_ms() - start) / 1000.0;
    if (tty)
        draw(ud, secs, true);
    return secs;
}
