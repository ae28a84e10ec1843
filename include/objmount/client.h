/* Everything needed to talk to one bucket, built from a configuration:
 * credentials resolved, environment applied, engine started, store made.
 * Used by the daemon and the tools alike. */
#ifndef OBJMOUNT_CLIENT_H
#define OBJMOUNT_CLIENT_H

#include <stddef.h>

#include "objmount/config.h"
#include "objmount/creds.h"
#include "objmount/http.h"
#include "objmount/store.h"

struct om_client {
    struct om_config *cfg; /* borrowed; finalized by om_client_open */
    struct om_creds creds;
    struct om_http *http;
    struct om_store *store;
};

/* Resolve credentials, finalize cfg, start the engine and build the
 * store (S3, or AIStore's native API for ais://). cfg->bucket must be set. Returns 0, or a negative errno with one
 * human sentence in err (nothing is left running). */
int om_client_open(struct om_client *c, struct om_config *cfg, char *err, size_t errlen);
void om_client_close(struct om_client *c);

#endif
