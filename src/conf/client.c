/* Building a bucket client from a configuration. */
#include "objmount/client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "objmount/log.h"

int om_client_open(struct om_client *c, struct om_config *cfg, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->cfg = cfg;
    if (!cfg->bucket) {
        snprintf(err, errlen, "no bucket given");
        return -EINVAL;
    }
    struct om_creds_options co;
    om_config_creds_options(cfg, &co);
    int rc = om_creds_resolve(&co, &c->creds, err, errlen);
    if (rc)
        return rc;
    rc = om_config_finalize(cfg, &c->creds, err, errlen);
    if (rc) {
        om_creds_clear(&c->creds);
        return rc;
    }
    struct om_http_config hc;
    om_config_http(cfg, &hc);
    c->http = om_http_new(&hc, err, errlen);
    if (!c->http) {
        om_creds_clear(&c->creds);
        return -ENOMEM;
    }
    struct om_store_config sc;
    om_config_store(cfg, &sc);
    c->store = om_store_new(c->http, &sc, &c->creds, err, errlen);
    if (!c->store) {
        om_http_free(c->http);
        om_creds_clear(&c->creds);
        memset(c, 0, sizeof(*c));
        return -EINVAL;
    }
    om_info("bucket %s at %s (%s; endpoint from %s, region %s from %s, credentials: %s)",
            om_store_bucket_name(c->store), cfg->endpoint, om_store_caps(c->store)->name,
            cfg->endpoint_source, cfg->region, cfg->region_source, c->creds.source);
    return 0;
}

void om_client_close(struct om_client *c)
{
    om_store_free(c->store);
    om_http_free(c->http);
    om_creds_clear(&c->creds);
    memset(c, 0, sizeof(*c));
}
