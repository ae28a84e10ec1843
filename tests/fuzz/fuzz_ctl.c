/* The admin socket's request lines, and the escaping of whatever text
 * (keys, server messages) reaches a log line or `objmountctl status`. */
#include "fuzz.h"
#include "objmount/ctl.h"
#include "objmount/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct om_ctl_cmd c;
    if (om_ctl_parse((const char *)data, size, &c) == 0) {
        if (c.kind < OM_CTL_STATUS || c.kind > OM_CTL_STATS_JSON || c.drain_s > OM_CTL_DRAIN_MAX_S)
            __builtin_trap();
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
