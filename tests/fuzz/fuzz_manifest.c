/* Manifests read without their checksum (so that the fuzzer reaches the
 * body): opening, lookups and listings must end in an error or an answer,
 * never a crash, an out-of-bounds read or a loop. */
#include "fuzz.h"
#include "objmount/manifest.h"

static int count(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(size_t *)ud)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct om_manifest *mf = NULL;
    char err[256];
    if (om_manifest_from_buf(data, size, OM_MANIFEST_NO_CHECKSUM, &mf, err, sizeof(err)) != 0)
        return 0;
    size_t n = 0;
    char *token = NULL;
    om_manifest_list(mf, "", '/', NULL, 0, count, &n, NULL);
    om_manifest_list(mf, "a/", 0, NULL, 3, count, &n, &token);
    if (token)
        om_manifest_list(mf, "a/", 0, token, 3, count, &n, NULL);
    free(token);
    om_manifest_list(mf, "a", '/', "a/b/", 0, count, &n, NULL);
    struct om_object o;
    om_manifest_lookup(mf, "a/b", &o);
    om_manifest_close(mf);
    return 0;
}
