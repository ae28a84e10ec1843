/* Internals shared by the files of the AIStore backend: ais.c (client,
 * requests, objects, multipart) and ais_list.c (JSON listings, lookups,
 * the bucket check). The API's facts they rely on are in doc/aistore.md
 * ("The native API as objmount uses it"). */
#ifndef OBJMOUNT_AIS_INT_H
#define OBJMOUNT_AIS_INT_H

#include <pthread.h>

#include "objmount/ais.h"

struct ais_upload; /* metadata kept for an upload until it completes */

struct om_ais {
    struct om_http *http;
    bool https;
    int port;
    char *host;   /* endpoint host, without port */
    char *prefix; /* endpoint path prefix without trailing '/', "" when none */
    char *bucket;
    struct om_creds creds; /* its bearer token (AIS_AUTHN_TOKEN), if any, is sent */
    char *redirect_hosts;
    struct om_store_caps caps;
    pthread_mutex_t lock; /* guards uploads */
    struct ais_upload *uploads;
};

/* Largest page AIStore answers for an ais:// bucket (apc.MaxPageSizeAIS);
 * a negative page size crashes its targets, so none is ever sent. */
#define AIS_PAGE_MAX 10000

/* What a request addresses. */
enum ai_path { AI_OBJECT, AI_BUCKET, AI_S3_BUCKET };

/* Prepare a call of method on key (AI_OBJECT) or the bucket, with an
 * encoded query (may be NULL). */
int ai_call_init(struct om_store_call *c, struct om_ais *ais, const char *method, const char *op,
                 enum ai_path what, const char *key, const char *query);
void ai_call_cleanup(struct om_store_call *c);
/* A JSON body (a copy is kept by the call). */
int ai_call_json(struct om_store_call *c, const char *json);
/* Perform and turn the result into 0 or -errno, err filled (the code and
 * message of AIStore's JSON error, or of its Hdr-Error header for HEAD). */
int ai_call_perform(struct om_store_call *c, struct om_store_error *err);
int ai_call_result(struct om_store_call *c, struct om_store_error *err);
/* Fill obj from the Ais-* headers of a HEAD or GET answer. */
void ai_object_from_headers(const struct om_header_list *h, struct om_object *obj);
/* The version token of an object: "VERSION:CHECKSUM" (either may be empty). */
void ai_version_token(const char *version, const char *cksum, char out[OM_ETAG_MAX]);

#endif
