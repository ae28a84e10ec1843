/* The subcommands objmountctl.c hands over to files of their own. Their
 * shared helpers (failure line, progress, waiting) are in ctl_common.h. */
#ifndef OBJMOUNTCTL_H
#define OBJMOUNTCTL_H

#include <stdbool.h>

#include "objmount/config.h"

/* objmountctl manifest build|show (objmountctl_manifest.c). pos[0] is
 * "manifest". Returns the exit status. */
int ctl_manifest(struct om_config *cfg, char **pos, int npos, int threads, const char *output,
                 bool keys);

/* objmountctl prefetch DIR (objmountctl_prefetch.c): the paths of list
 * (stdin when NULL) hinted to the mount. Returns the exit status. */
int ctl_prefetch(const char *dir, const char *list, bool append);

#endif
