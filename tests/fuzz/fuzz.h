/* Shared by the libFuzzer targets: a NUL-terminated copy of the input. */
#ifndef OBJMOUNT_FUZZ_H
#define OBJMOUNT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        memcpy(s, data, size);
        s[size] = '\0';
    }
    return s;
}

/* Split s at the first '\n' (replaced by NUL); the part after it, or "". */
static inline char *fuzz_split(char *s)
{
    char *nl = strchr(s, '\n');
    if (!nl)
        return s + strlen(s);
    *nl = '\0';
    return nl + 1;
}

#endif
