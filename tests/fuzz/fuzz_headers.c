/* Response headers as "Name: value" lines -> object metadata, and the
 * numbers in them (Content-Length, Content-Range, dates, s3fs metadata). */
#include "fuzz.h"
#include "objmount/http.h"
#include "objmount/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    struct om_header_list h = {0};
    for (char *line = s, *next; *line; line = next) {
        next = fuzz_split(line);
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        *colon = '\0';
        char *v = colon + 1;
        while (*v == ' ')
            v++;
        if (om_headers_add(&h, line, v))
            break;
    }
    struct om_object o;
    om_s3_object_from_headers(&h, &o);
    if (o.size > (uint64_t)INT64_MAX)
        __builtin_trap(); /* sizes from a server must fit off_t */
    if (o.has_mtime && (o.meta_mtime.tv_sec < 0 || o.meta_mtime.tv_nsec < 0 ||
                        o.meta_mtime.tv_nsec >= 1000000000L))
        __builtin_trap();
    om_headers_free(&h);
    free(s);
    return 0;
}
