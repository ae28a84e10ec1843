/* ListObjectsV2/V1 pages as a server may send them, fed in two pieces. */
#include "fuzz.h"
#include "objmount/xml.h"

static int on_entry(void *ud, const struct om_list_entry *e)
{
    size_t *n = ud;
    *n += strlen(e->key) + strlen(e->etag) + (size_t)e->size % 7;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        om_xml_init();
        init = 1;
    }
    size_t n = 0;
    struct om_list_parser *p = om_list_parser_new(on_entry, &n, size % 3);
    if (!p)
        return 0;
    size_t half = size / 2;
    if (om_list_parser_feed(p, (const char *)data, half) == 0 &&
        om_list_parser_feed(p, (const char *)data + half, size - half) == 0 &&
        om_list_parser_finish(p) == 0) {
        (void)om_list_parser_truncated(p);
        const char *t = om_list_parser_next_token(p);
        const char *k = om_list_parser_last_key(p);
        n += (t ? strlen(t) : 0) + (k ? strlen(k) : 0) + om_list_parser_entries(p);
    }
    om_list_parser_free(p);
    return 0;
}
