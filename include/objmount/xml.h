/* S3 XML documents, parsed with libxml2 (the S3 backend's; entries are
 * the store's om_list_entry and om_upload_entry).
 *
 * ListObjectsV2 results are parsed as a stream (SAX push parser fed with the
 * body as it arrives) and reported entry by entry, so a page holding a
 * million keys never becomes one tree. Small documents (errors, multipart
 * results) are parsed whole. No function keeps a pointer to its input. */
#ifndef OBJMOUNT_XML_H
#define OBJMOUNT_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "objmount/store.h"

/* Call once before threads start (idempotent). */
void om_xml_init(void);

struct om_list_parser;

/* A streaming ListObjectsV2 (or V1) parser. The first `skip` entries in
 * document order are parsed but not reported (used when a page is fetched
 * again after a failed attempt). NULL on ENOMEM. */
struct om_list_parser *om_list_parser_new(om_list_cb cb, void *ud, uint64_t skip);
/* Feed body bytes. Returns 0, OM_LIST_STOP once the callback stopped the
 * parse, the callback's error, or -EBADMSG. */
int om_list_parser_feed(struct om_list_parser *p, const char *data, size_t len);
/* End of body. Returns 0 or -EBADMSG (truncated or malformed document);
 * 0 after a stop. */
int om_list_parser_finish(struct om_list_parser *p);

/* Results after finish. next_token is owned by the parser. */
bool om_list_parser_truncated(const struct om_list_parser *p);
const char *om_list_parser_next_token(const struct om_list_parser *p);
/* Last key (or NextMarker) seen: the start-after for a V1-style follow-up. */
const char *om_list_parser_last_key(const struct om_list_parser *p);
uint64_t om_list_parser_entries(const struct om_list_parser *p);
/* True when the callback ended the parse with OM_LIST_STOP. */
bool om_list_parser_stopped(const struct om_list_parser *p);
/* True when the document was an <Error> (some servers answer 200 with one). */
bool om_list_parser_is_error(const struct om_list_parser *p);
void om_list_parser_free(struct om_list_parser *p);

/* <Error><Code/><Message/><RequestId/></Error>. Returns 0 when the body is
 * an S3 error document, -EBADMSG otherwise. Strings are truncated to fit. */
int om_xml_parse_error(const char *body, size_t len, char *code, size_t codelen, char *message,
                       size_t msglen, char *request_id, size_t ridlen);

/* Text of the first element named `name` (any depth) of a small document.
 * Returns a malloc'd string, or NULL when absent or malformed. */
char *om_xml_find_text(const char *body, size_t len, const char *name);

/* Parse one ListMultipartUploads page; next markers are malloc'd (NULL when
 * absent). Returns 0, the callback's error, or -EBADMSG. */
int om_xml_parse_uploads(const char *body, size_t len, om_upload_cb cb, void *ud, bool *truncated,
                         char **next_key_marker, char **next_upload_id_marker);

#endif
