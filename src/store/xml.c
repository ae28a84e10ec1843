/* S3 XML documents: a streaming ListObjects parser and small-document helpers. */
#include "objmount/xml.h"

#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>

#include "objmount/url.h"
#include "objmount/util.h"

#define TEXT_MAX (64 * 1024)

void om_xml_init(void)
{
    xmlInitParser();
}

/* Elements the listing parser cares about. */
enum elem {
    E_OTHER = 0,
    E_ROOT_LIST,
    E_ROOT_ERROR,
    E_CONTENTS,
    E_COMMON_PREFIXES,
    E_KEY,
    E_SIZE,
    E_LAST_MODIFIED,
    E_ETAG,
    E_PREFIX,
    E_IS_TRUNCATED,
    E_NEXT_TOKEN,
    E_NEXT_MARKER,
    E_ENCODING_TYPE,
};

#define MAX_DEPTH 16

struct om_list_parser {
    xmlParserCtxtPtr ctx;
    om_list_cb cb;
    void *ud;
    uint64_t skip;
    uint64_t entries;
    int error;
    int depth;
    enum elem stack[MAX_DEPTH];
    bool capture;
    struct om_buf text;
    /* the entry being built */
    struct om_buf key, etag;
    uint64_t size;
    time_t mtime;
    /* document-level results */
    bool truncated;
    bool url_encoded;
    bool is_error;
    bool saw_root;
    bool stopped;
    char *next_token;
    struct om_buf last_key;
};

static enum elem classify(const struct om_list_parser *p, const char *name)
{
    /* below MAX_DEPTH nothing is tracked: no parent to look up (found by fuzz_xml_list) */
    enum elem parent = p->depth > 0 && p->depth <= MAX_DEPTH ? p->stack[p->depth - 1] : E_OTHER;
    if (p->depth == 0) {
        if (strcmp(name, "ListBucketResult") == 0)
            return E_ROOT_LIST;
        if (strcmp(name, "Error") == 0)
            return E_ROOT_ERROR;
        return E_OTHER;
    }
    if (parent == E_ROOT_LIST) {
        if (strcmp(name, "Contents") == 0)
            return E_CONTENTS;
        if (strcmp(name, "CommonPrefixes") == 0)
            return E_COMMON_PREFIXES;
        if (strcmp(name, "IsTruncated") == 0)
            return E_IS_TRUNCATED;
        if (strcmp(name, "NextContinuationToken") == 0)
            return E_NEXT_TOKEN;
        if (strcmp(name, "NextMarker") == 0)
            return E_NEXT_MARKER;
        if (strcmp(name, "EncodingType") == 0)
            return E_ENCODING_TYPE;
        return E_OTHER;
    }
    if (parent == E_CONTENTS) {
        if (strcmp(name, "Key") == 0)
            return E_KEY;
        if (strcmp(name, "Size") == 0)
            return E_SIZE;
        if (strcmp(name, "LastModified") == 0)
            return E_LAST_MODIFIED;
        if (strcmp(name, "ETag") == 0)
            return E_ETAG;
        return E_OTHER;
    }
    if (parent == E_COMMON_PREFIXES && strcmp(name, "Prefix") == 0)
        return E_PREFIX;
    return E_OTHER;
}

static void set_error(struct om_list_parser *p, int err)
{
    if (!p->error)
        p->error = err;
    xmlStopParser(p->ctx);
}

static void on_start(void *ctx, const xmlChar *localname, const xmlChar *prefix,
                     const xmlChar *uri, int nns, const xmlChar **ns, int nattr, int ndef,
                     const xmlChar **attrs)
{
    (void)prefix, (void)uri, (void)nns, (void)ns, (void)nattr, (void)ndef, (void)attrs;
    struct om_list_parser *p = ctx;
    enum elem e = classify(p, (const char *)localname);
    if (p->depth == 0) {
        p->saw_root = true;
        p->is_error = e == E_ROOT_ERROR;
    }
    if (p->depth >= MAX_DEPTH) {
        p->depth++;
        return;
    }
    p->stack[p->depth++] = e;
    switch (e) {
    case E_CONTENTS:
    case E_COMMON_PREFIXES:
        om_buf_reset(&p->key);
        om_buf_reset(&p->etag);
        p->size = 0;
        p->mtime = 0;
        break;
    case E_KEY:
    case E_SIZE:
    case E_LAST_MODIFIED:
    case E_ETAG:
    case E_PREFIX:
    case E_IS_TRUNCATED:
    case E_NEXT_TOKEN:
    case E_NEXT_MARKER:
    case E_ENCODING_TYPE:
        p->capture = true;
        om_buf_reset(&p->text);
        break;
    default:
        break;
    }
}

static void on_chars(void *ctx, const xmlChar *ch, int len)
{
    struct om_list_parser *p = ctx;
    if (!p->capture || len <= 0)
        return;
    if (p->text.len + (size_t)len > TEXT_MAX) {
        set_error(p, -EBADMSG);
        return;
    }
    if (om_buf_append(&p->text, ch, (size_t)len))
        set_error(p, -ENOMEM);
}

static const char *text_of(struct om_list_parser *p)
{
    return p->text.data ? p->text.data : "";
}

/* Keys arrive URL-encoded when the server honoured encoding-type=url. */
static int store_key(struct om_list_parser *p, struct om_buf *dst)
{
    om_buf_reset(dst);
    if (p->url_encoded)
        return om_uri_decode(dst, text_of(p), p->text.len);
    return om_buf_append(dst, text_of(p), p->text.len);
}

static void strip_quotes(struct om_buf *b)
{
    if (b->len >= 2 && b->data[0] == '"' && b->data[b->len - 1] == '"') {
        memmove(b->data, b->data + 1, b->len - 2);
        b->len -= 2;
        b->data[b->len] = '\0';
    }
}

static void emit(struct om_list_parser *p, bool is_prefix)
{
    uint64_t index = p->entries++;
    om_buf_reset(&p->last_key);
    if (om_buf_append(&p->last_key, p->key.data ? p->key.data : "", p->key.len)) {
        set_error(p, -ENOMEM);
        return;
    }
    if (index < p->skip)
        return;
    struct om_list_entry e = {
        .key = p->key.data ? p->key.data : "",
        .is_prefix = is_prefix,
        .size = p->size,
        .mtime = p->mtime,
        .etag = p->etag.data ? p->etag.data : "",
    };
    int rc = p->cb(p->ud, &e);
    if (rc == OM_LIST_STOP) {
        p->stopped = true;
        xmlStopParser(p->ctx);
    } else if (rc) {
        set_error(p, rc < 0 ? rc : -ECANCELED);
    }
}

static void on_end(void *ctx, const xmlChar *localname, const xmlChar *prefix, const xmlChar *uri)
{
    (void)localname, (void)prefix, (void)uri;
    struct om_list_parser *p = ctx;
    if (p->depth > MAX_DEPTH) {
        p->depth--;
        return;
    }
    enum elem e = p->stack[--p->depth];
    int rc = 0;
    switch (e) {
    case E_KEY:
    case E_PREFIX:
        rc = store_key(p, &p->key);
        break;
    case E_SIZE:
        /* a size that is not a number below 2^63 makes the page invalid */
        if (om_parse_uint(p->text.data ? om_str_trim(p->text.data) : "", OM_UINT_MAX, &p->size))
            rc = -EPROTO;
        break;
    case E_LAST_MODIFIED:
        if (om_parse_iso8601(text_of(p), &p->mtime))
            p->mtime = 0;
        break;
    case E_ETAG:
        om_buf_reset(&p->etag);
        rc = om_buf_append(&p->etag, text_of(p), p->text.len);
        strip_quotes(&p->etag);
        break;
    case E_IS_TRUNCATED:
        p->truncated = p->text.data && strcmp(om_str_trim(p->text.data), "true") == 0;
        break;
    case E_NEXT_TOKEN:
        free(p->next_token);
        p->next_token = strdup(text_of(p));
        rc = p->next_token ? 0 : -ENOMEM;
        break;
    case E_NEXT_MARKER:
        om_buf_reset(&p->last_key);
        rc = store_key(p, &p->last_key);
        break;
    case E_ENCODING_TYPE:
        p->url_encoded = strcmp(text_of(p), "url") == 0;
        break;
    case E_CONTENTS:
        emit(p, false);
        break;
    case E_COMMON_PREFIXES:
        emit(p, true);
        break;
    default:
        break;
    }
    p->capture = false;
    if (rc)
        set_error(p, rc);
}

static void on_sax_error(void *ctx, const char *msg, ...)
{
    (void)ctx, (void)msg;
}

struct om_list_parser *om_list_parser_new(om_list_cb cb, void *ud, uint64_t skip)
{
    struct om_list_parser *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    xmlSAXHandler sax;
    memset(&sax, 0, sizeof(sax));
    sax.initialized = XML_SAX2_MAGIC;
    sax.startElementNs = on_start;
    sax.endElementNs = on_end;
    sax.characters = on_chars;
    sax.error = on_sax_error;
    sax.warning = on_sax_error;
    p->ctx = xmlCreatePushParserCtxt(&sax, p, NULL, 0, NULL);
    if (!p->ctx) {
        free(p);
        return NULL;
    }
    xmlCtxtUseOptions(p->ctx, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    p->cb = cb;
    p->ud = ud;
    p->skip = skip;
    return p;
}

int om_list_parser_feed(struct om_list_parser *p, const char *data, size_t len)
{
    if (p->stopped)
        return OM_LIST_STOP;
    while (len > 0 && !p->error && !p->stopped) {
        int n = len > (1 << 20) ? (1 << 20) : (int)len;
        if (xmlParseChunk(p->ctx, data, n, 0) != 0 && !p->error && !p->stopped)
            p->error = -EBADMSG;
        data += n;
        len -= (size_t)n;
    }
    return p->error ? p->error : p->stopped ? OM_LIST_STOP : 0;
}

int om_list_parser_finish(struct om_list_parser *p)
{
    if (p->error)
        return p->error;
    if (p->stopped)
        return 0;
    if (xmlParseChunk(p->ctx, NULL, 0, 1) != 0 && !p->error)
        p->error = -EBADMSG;
    if (!p->error && (!p->saw_root || p->depth != 0))
        p->error = -EBADMSG;
    return p->error;
}

bool om_list_parser_truncated(const struct om_list_parser *p)
{
    return p->truncated;
}

const char *om_list_parser_next_token(const struct om_list_parser *p)
{
    return p->next_token;
}

const char *om_list_parser_last_key(const struct om_list_parser *p)
{
    return p->last_key.data;
}

uint64_t om_list_parser_entries(const struct om_list_parser *p)
{
    return p->entries;
}

bool om_list_parser_stopped(const struct om_list_parser *p)
{
    return p->stopped;
}

bool om_list_parser_is_error(const struct om_list_parser *p)
{
    return p->is_error;
}

void om_list_parser_free(struct om_list_parser *p)
{
    if (!p)
        return;
    xmlFreeParserCtxt(p->ctx);
    om_buf_free(&p->text);
    om_buf_free(&p->key);
    om_buf_free(&p->etag);
    om_buf_free(&p->last_key);
    free(p->next_token);
    free(p);
}

/* ---- small documents ---- */

static xmlDocPtr read_doc(const char *body, size_t len)
{
    if (!body || len == 0 || len > (64u << 20))
        return NULL;
    return xmlReadMemory(body, (int)len, NULL, NULL,
                         XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
}

static xmlNodePtr find_elem(xmlNodePtr n, const char *name)
{
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (strcmp((const char *)n->name, name) == 0)
            return n;
        xmlNodePtr c = find_elem(n->children, name);
        if (c)
            return c;
    }
    return NULL;
}

static xmlNodePtr child_elem(xmlNodePtr n, const char *name)
{
    for (xmlNodePtr c = n ? n->children : NULL; c; c = c->next) {
        if (c->type == XML_ELEMENT_NODE && strcmp((const char *)c->name, name) == 0)
            return c;
    }
    return NULL;
}

static void copy_text(xmlNodePtr n, char *out, size_t outlen)
{
    if (!outlen)
        return;
    out[0] = '\0';
    if (!n)
        return;
    xmlChar *t = xmlNodeGetContent(n);
    if (t) {
        om_strlcpy(out, (const char *)t, outlen);
        xmlFree(t);
    }
}

int om_xml_parse_error(const char *body, size_t len, char *code, size_t codelen, char *message,
                       size_t msglen, char *request_id, size_t ridlen)
{
    xmlDocPtr doc = read_doc(body, len);
    xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root || strcmp((const char *)root->name, "Error") != 0) {
        xmlFreeDoc(doc);
        return -EBADMSG;
    }
    copy_text(child_elem(root, "Code"), code, codelen);
    copy_text(child_elem(root, "Message"), message, msglen);
    copy_text(child_elem(root, "RequestId"), request_id, ridlen);
    xmlFreeDoc(doc);
    return 0;
}

char *om_xml_find_text(const char *body, size_t len, const char *name)
{
    xmlDocPtr doc = read_doc(body, len);
    if (!doc)
        return NULL;
    xmlNodePtr n = find_elem(xmlDocGetRootElement(doc), name);
    char *out = NULL;
    if (n) {
        xmlChar *t = xmlNodeGetContent(n);
        if (t) {
            out = strdup((const char *)t);
            xmlFree(t);
        }
    }
    xmlFreeDoc(doc);
    return out;
}

static char *node_strdup(xmlNodePtr n)
{
    if (!n)
        return NULL;
    xmlChar *t = xmlNodeGetContent(n);
    if (!t)
        return NULL;
    char *s = strdup((const char *)t);
    xmlFree(t);
    return s;
}

int om_xml_parse_uploads(const char *body, size_t len, om_upload_cb cb, void *ud, bool *truncated,
                         char **next_key_marker, char **next_upload_id_marker)
{
    *truncated = false;
    *next_key_marker = *next_upload_id_marker = NULL;
    xmlDocPtr doc = read_doc(body, len);
    xmlNodePtr root = doc ? xmlDocGetRootElement(doc) : NULL;
    if (!root || strcmp((const char *)root->name, "ListMultipartUploadsResult") != 0) {
        xmlFreeDoc(doc);
        return -EBADMSG;
    }
    int rc = 0;
    for (xmlNodePtr n = root->children; n && rc == 0; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        const char *name = (const char *)n->name;
        if (strcmp(name, "Upload") == 0) {
            char *key = node_strdup(child_elem(n, "Key"));
            char *id = node_strdup(child_elem(n, "UploadId"));
            char *init = node_strdup(child_elem(n, "Initiated"));
            struct om_upload_entry e = {.key = key, .upload_id = id, .initiated = 0};
            if (init)
                om_parse_iso8601(init, &e.initiated);
            if (key && id)
                rc = cb(ud, &e);
            free(key);
            free(id);
            free(init);
        } else if (strcmp(name, "IsTruncated") == 0) {
            char *t = node_strdup(n);
            *truncated = t && strcmp(om_str_trim(t), "true") == 0;
            free(t);
        } else if (strcmp(name, "NextKeyMarker") == 0) {
            free(*next_key_marker);
            *next_key_marker = node_strdup(n);
        } else if (strcmp(name, "NextUploadIdMarker") == 0) {
            free(*next_upload_id_marker);
            *next_upload_id_marker = node_strdup(n);
        }
    }
    xmlFreeDoc(doc);
    return rc;
}
