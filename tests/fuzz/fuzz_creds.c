/* A credentials file: s3fs passwd lines or an AWS ini file. */
#include <stdio.h>

#include "fuzz.h"
#include "objmount/creds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    FILE *f = fmemopen((void *)data, size, "r");
    if (!f)
        return 0;
    struct om_creds c = {0};
    const char *bucket = size % 2 ? "bkt" : NULL;
    const char *profile = size % 3 ? NULL : "train";
    if (om_creds_parse_stream(f, bucket, profile, &c) == 0 &&
        (!c.access_key || !*c.access_key || !c.secret_key || !*c.secret_key))
        __builtin_trap(); /* success means a usable key and secret */
    om_creds_clear(&c);
    fclose(f);
    return 0;
}
