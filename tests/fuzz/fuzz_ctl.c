/* The admin socket's request lines, and the escaping of whatever text
 * (keys, server messages) reaches a log line or `objmountctl status`. */
#include <string.h>

#include "fuzz.h"
#include "objmount/ctl.h"
#include "objmount/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct om_ctl_cmd c;
    if (om_ctl_parse((const char *)data, size, &c) == 0) {
        if (c.kind < OM_CTL_STATUS || c.kind > OM_CTL_CACHE_DROP || c.drain_s > OM_CTL_DRAIN_MAX_S)
            __builtin_trap();
        /* a path to drop: no control byte, no empty, "." or ".." component */
        size_t n = strnlen(c.path, sizeof(c.path));
        if (n == sizeof(c.path) || (n && c.kind != OM_CTL_CACHE_DROP))
            __builtin_trap();
        for (size_t i = 0; i < n; i++) {
            if ((unsigned char)c.path[i] < 0x20 || c.path[i] == 0x7f)
                __builtin_trap();
        }
        for (size_t i = 0; n && i <= n;) {
            size_t j = i;
            while (j < n && c.path[j] != '/')
                j++;
            if (j == i || (j - i == 1 && c.path[i] == '.') ||
                (j - i == 2 && c.path[i] == '.' && c.path[i + 1] == '.'))
                __builtin_trap();
            i = j + 1;
        }
    }
    char out[512];
    size_t need = om_log_escape((const char *)data, size, out, sizeof(out));
    if (need < size)
        __builtin_trap();
    for (const char *p = out; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20 || ch == 0x7f)
            __builtin_trap(); /* a control byte survived */
    }
    return 0;
}
