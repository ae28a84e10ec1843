/* AIStore's listings: a GET of the bucket with a JSON list message, the
 * answer a JSON page parsed with jansson; lookups (HEAD and a one-entry
 * listing at once); the bucket check.
 *
 * Facts of the API (doc/aistore.md): the list message's flags is a string;
 * 2048 lists one level (directories come back as "name/" with flag 256);
 * a page holds at most 10000 entries, and its token is the last name on it
 * ("" on the last page); a 0-byte object has no "size"; "entries" may be
 * null; an entry's checksum is its value without the type; the listing
 * carries no modification time, only the access time (the file's own
 * mtime, when objmount stored one as custom metadata, is preferred). Pages
 * of a multi-page listing may repeat a name at their boundary: names at or
 * before the token already seen are skipped. */
#include "objmount/ais.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ais_int.h"
#include "objmount/log.h"
#include "objmount/util.h"

#define ENTRY_IS_DIR 256 /* apc.EntryIsDir */
#define LS_NO_RECURSION "2048"
#define PROPS "name,size,checksum,version,atime,custom"
#define TIME_FORMAT "2006-01-02T15:04:05Z07:00" /* Go's layout: RFC 3339 */

/* "2026-12-07T00:35:29Z" (or with an offset) to seconds; 0 when not. */
static time_t rfc3339(const char *s)
{
    struct tm tm = {0};
    const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!end)
        return 0;
    time_t t = timegm(&tm);
    if (*end == '.')
        while (*++end >= '0' && *end <= '9')
            ;
    if (*end == 'Z' || *end == '\0')
        return t;
    int sign = *end == '-' ? -1 : *end == '+' ? 1 : 0, hh, mm;
    if (sign && sscanf(end + 1, "%2d:%2d", &hh, &mm) == 2)
        return t - sign * (hh * 3600 + mm * 60);
    return 0;
}

/* objmount's mtime in the Go map text of the custom metadata
 * ("map[X-Amz-Meta-Mode:33188 X-Amz-Meta-Mtime:1700000000]"; "mtime:N"
 * without the prefix, as objmount once wrote it). */
static time_t custom_mtime(const char *md)
{
    static const char *const names[] = {"X-Amz-Meta-Mtime:", "mtime:"};
    const char *p = NULL;
    size_t nlen = 0;
    for (size_t i = 0; md && !p && i < sizeof(names) / sizeof(names[0]); i++) {
        for (const char *q = md; (q = strstr(q, names[i])) != NULL; q++) {
            if (q == md || q[-1] == ' ' || q[-1] == '[') {
                p = q;
                nlen = strlen(names[i]);
                break;
            }
        }
    }
    if (!p)
        return 0;
    uint64_t v;
    char num[24];
    size_t n = strspn(p + nlen, "0123456789");
    if (n == 0 || n >= sizeof(num))
        return 0;
    memcpy(num, p + nlen, n);
    num[n] = '\0';
    return om_parse_uint(num, UINT32_MAX, &v) == 0 ? (time_t)v : 0;
}

int om_ais_parse_list(const char *body, size_t len, const char *after, om_list_cb cb, void *ud,
                      char **next_token, bool *partial)
{
    if (next_token)
        *next_token = NULL;
    if (partial)
        *partial = false;
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    if (!json_is_object(root)) {
        json_decref(root);
        return -EBADMSG;
    }
    int rc = 0;
    json_t *entries = json_object_get(root, "entries");
    json_t *token = json_object_get(root, "continuation_token");
    json_t *flags = json_object_get(root, "flags");
    if ((entries && !json_is_array(entries) && !json_is_null(entries)) ||
        (token && !json_is_string(token)) || (flags && !json_is_integer(flags)))
        rc = -EBADMSG;
    size_t i;
    json_t *e;
    if (!rc && json_is_array(entries)) {
        json_array_foreach(entries, i, e)
        {
            const char *name = json_string_value(json_object_get(e, "name"));
            json_t *size = json_object_get(e, "size"), *ef = json_object_get(e, "flags");
            if (!json_is_object(e) || !name || !*name || (size && !json_is_string(size)) ||
                (ef && !json_is_integer(ef))) {
                rc = -EBADMSG;
                break;
            }
            if (after && strcmp(name, after) <= 0)
                continue; /* a name the previous page had */
            uint64_t n = 0;
            if (size && om_parse_uint(json_string_value(size), OM_UINT_MAX, &n)) {
                rc = -EBADMSG;
                break;
            }
            size_t nl = strlen(name);
            bool dir = (ef && (json_integer_value(ef) & ENTRY_IS_DIR)) || name[nl - 1] == '/';
            char etag[OM_ETAG_MAX] = "";
            if (!dir)
                ai_version_token(json_string_value(json_object_get(e, "version")),
                                 json_string_value(json_object_get(e, "checksum")), etag);
            time_t mtime = custom_mtime(json_string_value(json_object_get(e, "custom-md")));
            if (!mtime)
                mtime = rfc3339(json_string_value(json_object_get(e, "atime")));
            struct om_list_entry le = {
                .key = name, .is_prefix = dir, .size = dir ? 0 : n, .mtime = mtime, .etag = etag};
            rc = cb(ud, &le);
            if (rc)
                break;
        }
    }
    if (rc == OM_LIST_STOP)
        rc = 0; /* the caller has what it wanted; no next page */
    else if (!rc && next_token && token && *json_string_value(token) &&
             !(*next_token = strdup(json_string_value(token))))
        rc = -ENOMEM;
    if (!rc && partial && flags)
        *partial = json_integer_value(flags) & 1;
    json_decref(root);
    return rc;
}

/* The list message: {"action":"list","value":{...}}. */
static char *list_msg(const struct om_list_params *p, int pagesize)
{
    json_t *v = json_object(), *root = json_object();
    json_object_set_new(v, "prefix", json_string(p->prefix ? p->prefix : ""));
    json_object_set_new(v, "props", json_string(PROPS));
    json_object_set_new(v, "flags", json_string(p->delimiter ? LS_NO_RECURSION : "0"));
    json_object_set_new(v, "pagesize", json_integer(pagesize));
    json_object_set_new(v, "time_format", json_string(TIME_FORMAT));
    if (p->continuation)
        json_object_set_new(v, "continuation_token", json_string(p->continuation));
    if (p->start_after)
        json_object_set_new(v, "start_after", json_string(p->start_after));
    json_object_set_new(root, "action", json_string("list"));
    json_object_set_new(root, "value", v);
    char *out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

static int list_build(struct om_ais *ais, struct om_store_call *c, const struct om_list_params *p)
{
    if (p->delimiter && strcmp(p->delimiter, "/") != 0)
        return -EINVAL; /* AIStore lists by "/" only */
    int pagesize = p->max_keys > 0 ? OM_MIN(p->max_keys, AIS_PAGE_MAX) : 0; /* 0: its 10000 */
    char *msg = list_msg(p, pagesize);
    if (!msg)
        return -ENOMEM;
    int rc = ai_call_init(c, ais, "GET", "ListObjects", AI_BUCKET, NULL, NULL);
    if (!rc)
        rc = ai_call_json(c, msg);
    free(msg);
    c->req.max_body = 256u << 20; /* 10000 entries of long names */
    return rc;
}

/* After the request: parse the page (names up to `after` skipped). */
static int list_finish(struct om_store_call *c, const struct om_list_params *p, om_list_cb cb,
                       void *ud, char **next_token, struct om_store_error *err)
{
    int rc = ai_call_result(c, err);
    bool partial = false;
    if (!rc)
        rc = om_ais_parse_list(c->req.resp_body.data, c->req.resp_body.len, p->continuation, cb,
                               ud, next_token, &partial);
    if (rc == -EBADMSG && err && !c->req.error)
        snprintf(err->message, sizeof(err->message), "malformed listing from AIStore");
    if (partial)
        om_info("AIStore says its listing of %s may be incomplete (a rebalance runs)",
                p->prefix && *p->prefix ? p->prefix : "the bucket");
    return rc;
}

int om_ais_list_page(struct om_ais *ais, const struct om_list_params *p, om_list_cb cb, void *ud,
                     char **next_token, struct om_store_error *err)
{
    if (next_token)
        *next_token = NULL;
    struct om_store_call c;
    int rc = list_build(ais, &c, p);
    if (!rc) {
        om_http_perform(ais->http, &c.req);
        rc = list_finish(&c, p, cb, ud, next_token, err);
    }
    ai_call_cleanup(&c);
    return rc;
}

/* ---- lookup: HEAD key and list "key/" at once ---- */

struct pair_wait {
    pthread_mutex_t m;
    pthread_cond_t cv;
    int pending;
};

static void pair_done(struct om_http_req *req, void *ud)
{
    (void)req;
    struct pair_wait *w = ud;
    pthread_mutex_lock(&w->m);
    w->pending--;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->m);
}

struct first {
    struct om_store_lookup *out;
};

/* Anything under "key/" makes a directory (AIStore keeps no markers). */
static int first_entry(void *ud, const struct om_list_entry *e)
{
    (void)e;
    ((struct first *)ud)->out->is_dir = true;
    return OM_LIST_STOP;
}

int om_ais_lookup(struct om_ais *ais, const char *key, struct om_store_lookup *out,
                  struct om_store_error *err)
{
    memset(out, 0, sizeof(*out));
    char *prefix = NULL;
    if (asprintf(&prefix, "%s/", key) < 0)
        return -ENOMEM;
    struct om_store_call head, list;
    struct first f = {.out = out};
    struct om_list_params p = {.prefix = prefix, .delimiter = "/", .max_keys = 1};
    int rc = ai_call_init(&head, ais, "HEAD", "HeadObject", AI_OBJECT, key,
                          "props=size%2Cchecksum%2Cversion%2Ccustom%2Clast-modified");
    int rl = list_build(ais, &list, &p);
    struct pair_wait w = {.pending = 0};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.cv, NULL);
    if (!rc && !rl) {
        w.pending = 2;
        if ((rc = om_http_submit(ais->http, &head.req, pair_done, &w)) != 0)
            w.pending--;
        if ((rl = om_http_submit(ais->http, &list.req, pair_done, &w)) != 0)
            w.pending--;
        pthread_mutex_lock(&w.m);
        while (w.pending > 0)
            pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
    }
    struct om_store_error herr, lerr;
    if (!rc)
        rc = ai_call_result(&head, &herr);
    if (!rl)
        rl = list_finish(&list, &p, first_entry, &f, NULL, &lerr);
    if (!rc) {
        out->is_file = true;
        ai_object_from_headers(&head.req.resp_headers, &out->obj);
    }
    ai_call_cleanup(&head);
    ai_call_cleanup(&list);
    free(prefix);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.m);
    if (rl == 0 && out->is_dir)
        return 0; /* a directory wins over a file of the same name */
    if (rc == 0 && (rl == 0 || rl == -ENOENT))
        return 0;
    if (rc == -ENOENT && rl == 0)
        return -ENOENT;
    int e = rc && rc != -ENOENT ? rc : rl;
    if (err)
        *err = rc && rc != -ENOENT ? herr : lerr;
    out->is_file = false;
    return e;
}

/* ---- the bucket check ---- */

static int count_entry(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(uint64_t *)ud)++;
    return 0;
}

int om_ais_check_list(struct om_ais *ais, const struct om_list_params *p, om_list_cb cb,
                      void *ud, bool *complete, long *skew_s, struct om_store_error *err)
{
    uint64_t n = 0;
    char *next = NULL;
    struct om_store_call c;
    int rc = list_build(ais, &c, p);
    if (!rc) {
        om_http_perform(ais->http, &c.req);
        rc = list_finish(&c, p, cb ? cb : count_entry, cb ? ud : &n, &next, err);
    }
    if (skew_s) {
        *skew_s = 0;
        const char *d = om_headers_get(&c.req.resp_headers, "Date");
        time_t server;
        if (d && om_parse_http_date(d, &server) == 0)
            *skew_s = (long)(server - time(NULL));
    }
    if (complete)
        *complete = !rc && !next;
    free(next);
    ai_call_cleanup(&c);
    return rc;
}
