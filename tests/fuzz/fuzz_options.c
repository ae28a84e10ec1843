/* -o option strings, as fstab or a command line may hold them. */
#include "fuzz.h"
#include "objmount/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    struct om_config cfg;
    om_config_init(&cfg);
    char err[512];
    (void)om_config_parse_opts(&cfg, s, err, sizeof(err));
    om_config_free(&cfg);
    free(s);
    return 0;
}
