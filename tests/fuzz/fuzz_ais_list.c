/* AIStore's JSON listing pages as a cluster (or anything in its place) may
 * send them, with a token of the page before. */
#include "fuzz.h"
#include "objmount/ais.h"

#include <stdlib.h>

static int on_entry(void *ud, const struct om_list_entry *e)
{
    size_t *n = ud;
    *n += strlen(e->key) + strlen(e->etag) + (size_t)e->size % 7 + (e->is_prefix ? 1 : 0);
    if (!e->key[0])
        abort(); /* never an empty name */
    return *n % 97 == 13 ? OM_LIST_STOP : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = 0;
    char *next = NULL;
    bool partial;
    const char *after = size % 2 ? "m" : NULL;
    if (om_ais_parse_list((const char *)data, size, after, on_entry, &n, &next, &partial) == 0 &&
        next && !next[0])
        abort(); /* a next token is never empty */
    free(next);
    return 0;
}
