/* URL parsing and redirect Location resolution: "BASE\nLOCATION\nHOSTS".
 * What is resolved must parse again to the same host the credential policy
 * was asked about. */
#include "fuzz.h"
#include "objmount/url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    if (!s)
        return 0;
    char *loc = fuzz_split(s);
    char *hosts = fuzz_split(loc);
    struct om_url u;
    if (om_url_parse(s, &u) == 0) {
        char *f = om_url_format(&u);
        struct om_url again;
        if (f && om_url_parse(f, &again) == 0) {
            if (strcmp(again.host, u.host) != 0 || again.port != u.port || again.https != u.https)
                __builtin_trap(); /* format and parse disagree */
            om_url_free(&again);
        }
        free(f);
        om_url_free(&u);
    }
    char *next = NULL;
    if (om_url_resolve(s, loc, &next) == 0) {
        struct om_url t;
        if (om_url_parse(next, &t) != 0)
            __builtin_trap(); /* a resolved URL must parse */
        (void)om_creds_allowed("gw", "bkt", hosts, t.host, t.https, true);
        om_url_free(&t);
        char shown[256];
        om_url_redact(next, shown, sizeof(shown));
        if (strchr(shown, '?') && strcmp(strchr(shown, '?'), "?..."))
            __builtin_trap(); /* a query reached the redacted form */
        free(next);
    }
    char err[256];
    (void)om_host_list_check(hosts, err, sizeof(err));
    (void)om_host_in_list(hosts, loc);
    struct om_buf b = {0};
    if (om_uri_decode(&b, loc, strlen(loc)) == 0)
        free(om_uri_normalize_path(loc));
    om_buf_free(&b);
    free(s);
    return 0;
}
