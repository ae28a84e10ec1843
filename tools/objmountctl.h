/* What the files of objmountctl share. */
#ifndef OBJMOUNTCTL_H
#define OBJMOUNTCTL_H

#include <stdbool.h>

#include "objmount/config.h"

/* "objmountctl: " and one line on stderr; returns 1 (the exit status). */
int ctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Redraw the progress line on stderr: a bar filled to frac (0 to 1), then
 * text; final ends the line. Callers draw only when stderr is a terminal. */
void ctl_progress(double frac, const char *text, bool final);

/* Wait until ended(ud), redrawing the progress line with draw(ud, seconds
 * so far, final) every 200 ms when stderr is a terminal, and once more at
 * the end. Returns the seconds waited. */
double ctl_wait(bool (*ended)(void *ud), void (*draw)(void *ud, double secs, bool final), void *ud);

/* objmountctl manifest build|show (objmountctl_manifest.c). pos[0] is
 * "manifest". Returns the exit status. */
int ctl_manifest(struct om_config *cfg, char **pos, int npos, int threads, const char *output,
                 bool keys);

/* objmountctl prefetch DIR (objmountctl_prefetch.c): the paths of list
 * (stdin when NULL) hinted to the mount. Returns the exit status. */
int ctl_prefetch(const char *dir, const char *list, bool append);

#endif
