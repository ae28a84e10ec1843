/* Recovery sidecars: parse, and what parses formats and parses the same. */
#include "fuzz.h"
#include "objmount/sidecar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct om_sidecar *s = calloc(2, sizeof(*s));
    if (!s)
        return 0;
    if (om_sidecar_parse((const char *)data, size, &s[0]) == 0) {
        struct om_buf b = {0};
        if (om_sidecar_format(&s[0], &b) == 0) {
            if (om_sidecar_parse(b.data ? b.data : "", b.len, &s[1]) != 0)
                __builtin_trap(); /* what we write we must read back */
            if (strcmp(s[0].key, s[1].key) != 0 || strcmp(s[0].bucket, s[1].bucket) != 0 ||
                s[0].size != s[1].size)
                __builtin_trap();
        }
        om_buf_free(&b);
    }
    free(s);
    return 0;
}
