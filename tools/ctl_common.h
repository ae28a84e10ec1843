/* What objmountctl's files share: the failure line, the progress line and
 * waiting with progress (ctl_common.c). Below objmountctl.c and its
 * subcommand files, which all use it; it uses none of them. */
#ifndef CTL_COMMON_H
#define CTL_COMMON_H

#include <stdbool.h>

/* "objmountctl: " and one line on stderr; returns 1 (the exit status). */
int ctl_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Redraw the progress line on stderr: a bar filled to frac (0 to 1), then
 * text; final ends the line. Callers draw only when stderr is a terminal. */
void ctl_progress(double frac, const char *text, bool final);

/* Wait until ended(ud), redrawing the progress line with draw(ud, seconds
 * so far, final) every 200 ms when stderr is a terminal, and once more at
 * the end. Returns the seconds waited. */
double ctl_wait(bool (*ended)(void *ud), void (*draw)(void *ud, double secs, bool final), void *ud);

#endif
