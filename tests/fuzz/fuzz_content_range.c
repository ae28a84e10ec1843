/* Content-Range, plain numbers and HTTP dates from a server. */
#include "fuzz.h"
#include "objmount/http.h"
#include "objmount/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    uint64_t a, b, t, v;
    if (om_http_parse_content_range(s, &a, &b, &t) == 0) {
        if (a > b || b > (uint64_t)INT64_MAX ||
            (t != UINT64_MAX && (b >= t || t > (uint64_t)INT64_MAX)))
            __builtin_trap();
    }
    if (om_parse_uint(s, OM_UINT_MAX, &v) == 0 && v > (uint64_t)INT64_MAX)
        __builtin_trap();
    if (om_parse_uint(s, 999, &v) == 0 && v > 999)
        __builtin_trap();
    time_t when;
    (void)om_parse_http_date(s, &when);
    (void)om_parse_iso8601(s, &when);
    (void)om_parse_size(s, &v);
    (void)om_parse_duration_ms(s, &v);
    free(s);
    return 0;
}
