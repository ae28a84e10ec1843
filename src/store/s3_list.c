/* Listings parsed as they stream, lookups (HEAD and LIST at once), the
 * bucket check. */
#include "objmount/s3.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/url.h"
#include "s3_int.h"

/* ---- listing ---- */

struct list_ctx {
    om_list_cb cb;
    void *ud;
    uint64_t reported;
    struct om_list_parser *parser;
    int error;
};

static int list_entry(void *ud, const struct om_list_entry *e)
{
    struct list_ctx *l = ud;
    l->reported++;
    return l->cb(l->ud, e);
}

static int list_sink_data(void *ud, const char *p, size_t n)
{
    struct list_ctx *l = ud;
    if (!l->parser) {
        l->parser = om_list_parser_new(list_entry, l, l->reported);
        if (!l->parser)
            return -ENOMEM;
    }
    return om_list_parser_feed(l->parser, p, n);
}

static void list_sink_reset(void *ud)
{
    struct list_ctx *l = ud;
    om_list_parser_free(l->parser);
    l->parser = NULL;
}

static int list_query(const struct om_list_params *p, struct om_buf *q)
{
    int rc = om_buf_puts(q, "list-type=2");
    if (!rc)
        rc = si_add_param(q, "prefix", p->prefix);
    if (!rc)
        rc = si_add_param(q, "delimiter", p->delimiter);
    if (!rc)
        rc = si_add_param(q, "start-after", p->start_after);
    if (!rc)
        rc = si_add_param(q, "continuation-token", p->continuation);
    if (!rc && p->max_keys > 0)
        rc = om_buf_printf(q, "&max-keys=%d", p->max_keys);
    return rc;
}

static int list_build(struct om_s3 *s3, struct om_store_call *c, struct list_ctx *l,
                      const struct om_list_params *p)
{
    struct om_buf q = {0};
    int rc = list_query(p, &q);
    if (!rc)
        rc = si_call_init(c, s3, "GET", "ListObjectsV2", NULL, q.data);
    om_buf_free(&q);
    if (!rc)
        c->req.sink = (struct om_http_sink){list_sink_data, list_sink_reset, l};
    return rc;
}

/* After the request: 0 or -errno; *next_token as for om_s3_list_page;
 * *truncated (may be NULL): the answer says more pages follow. */
static int list_finish(struct om_store_call *c, struct list_ctx *l, char **next_token, bool *truncated,
                       struct om_store_error *err)
{
    int rc = si_call_result(c, err);
    if (!rc && !l->parser) /* an empty 2xx body */
        rc = -EBADMSG;
    bool stopped = !rc && om_list_parser_stopped(l->parser);
    if (!rc)
        rc = om_list_parser_finish(l->parser);
    if (!rc && om_list_parser_is_error(l->parser))
        rc = -EIO;
    if (rc == -EBADMSG && err && !c->req.error) /* not the server's own BadDigest */
        snprintf(err->message, sizeof(err->message), "malformed ListObjectsV2 answer");
    if (!rc && !stopped && next_token && om_list_parser_truncated(l->parser)) {
        const char *t = om_list_parser_next_token(l->parser);
        if (!t || !*t) {
            rc = -EBADMSG;
            if (err)
                snprintf(err->message, sizeof(err->message),
                         "truncated listing without NextContinuationToken");
        } else if (!(*next_token = strdup(t))) {
            rc = -ENOMEM;
        }
    }
    if (truncated)
        *truncated = !rc && !stopped && om_list_parser_truncated(l->parser);
    om_list_parser_free(l->parser);
    l->parser = NULL;
    return rc;
}

int om_s3_list_page(struct om_s3 *s3, const struct om_list_params *p, om_list_cb cb, void *ud,
                    char **next_token, struct om_store_error *err)
{
    if (next_token)
        *next_token = NULL;
    struct om_store_call c;
    struct list_ctx l = {.cb = cb, .ud = ud};
    int rc = list_build(s3, &c, &l, p);
    if (!rc) {
        om_http_perform(s3->http, &c.req);
        rc = list_finish(&c, &l, next_token, NULL, err);
    }
    si_call_cleanup(&c);
    return rc;
}

/* ---- lookup: HEAD key and LIST key/ at once ---- */

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
    const char *prefix;
};

/* Any key under "key/" makes a directory; a "key/" key is its marker. */
static int first_entry(void *ud, const struct om_list_entry *e)
{
    struct first *f = ud;
    f->out->is_dir = true;
    f->out->has_marker = !e->is_prefix && strcmp(e->key, f->prefix) == 0;
    return OM_LIST_STOP;
}

int om_s3_lookup(struct om_s3 *s3, const char *key, struct om_store_lookup *out,
                 struct om_store_error *err)
{
    memset(out, 0, sizeof(*out));
    char *prefix = NULL;
    if (asprintf(&prefix, "%s/", key) < 0)
        return -ENOMEM;
    struct om_store_call head, list;
    struct first f = {.out = out, .prefix = prefix};
    struct list_ctx l = {.cb = first_entry, .ud = &f};
    struct om_list_params p = {.prefix = prefix, .max_keys = 1};
    int rc = si_call_init(&head, s3, "HEAD", "HeadObject", key, NULL);
    int rl = list_build(s3, &list, &l, &p);
    struct pair_wait w = {.pending = 0};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.cv, NULL);
    if (!rc && !rl) {
        w.pending = 2;
        if ((rc = om_http_submit(s3->http, &head.req, pair_done, &w)) != 0)
            w.pending--;
        if ((rl = om_http_submit(s3->http, &list.req, pair_done, &w)) != 0)
            w.pending--;
        pthread_mutex_lock(&w.m);
        while (w.pending > 0)
            pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
    }
    struct om_store_error herr, lerr;
    if (!rc)
        rc = si_call_result(&head, &herr);
    if (!rl)
        rl = list_finish(&list, &l, NULL, NULL, &lerr);
    else
        om_list_parser_free(l.parser);
    if (!rc) {
        out->is_file = true;
        om_s3_object_from_headers(&head.req.resp_headers, &out->obj);
    }
    si_call_cleanup(&head);
    si_call_cleanup(&list);
    free(prefix);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.m);
    if (rl == 0 && out->is_dir)
        return 0; /* a directory wins over a file of the same name */
    if (rc == 0 && (rl == 0 || rl == -ENOENT))
        return 0;
    if (rc == -ENOENT && rl == 0)
        return -ENOENT;
    /* a real failure on either side */
    int e = rc && rc != -ENOENT ? rc : rl;
    if (err)
        *err = rc && rc != -ENOENT ? herr : lerr;
    out->is_file = false;
    return e;
}

static int count_entry(void *ud, const struct om_list_entry *e)
{
    (void)e;
    (*(uint64_t *)ud)++;
    return 0;
}

/* One LIST page as the bucket check: entries to cb (NULL: counted only),
 * the server's clock from its Date header. */
/* A HEAD of the bucket: an AIStore cluster names itself in its answer
 * (Server: AIStore), which the listing's answer may not do. Its outcome
 * teaches only that. */
void om_s3_identify(struct om_s3 *s3)
{
    struct om_store_call c;
    if (si_call_init(&c, s3, "HEAD", "HeadBucket", NULL, NULL) == 0) {
        om_http_perform(s3->http, &c.req);
        si_note_server(s3, &c.req.resp_headers);
    }
    si_call_cleanup(&c);
}

int om_s3_check_list(struct om_s3 *s3, const struct om_list_params *p, om_list_cb cb, void *ud,
                     bool *complete, long *skew_s, struct om_store_error *err)
{
    uint64_t n = 0;
    struct list_ctx l = {.cb = cb ? cb : count_entry, .ud = cb ? ud : &n};
    struct om_store_call c;
    bool truncated = false;
    int rc = list_build(s3, &c, &l, p);
    if (rc)
        return rc;
    c.req.max_body = 16u << 20; /* AIStore may ignore max-keys */
    om_http_perform(s3->http, &c.req);
    /* a 2xx answer without a body: an error status never reaches the
     * parser, and may map to EBADMSG too (BadDigest) */
    bool empty = !l.parser && !c.req.error;
    rc = list_finish(&c, &l, NULL, &truncated, err);
    if (rc == -EBADMSG && empty)
        rc = 0; /* an empty 2xx answer still shows the bucket answers */
    if (skew_s) {
        *skew_s = 0;
        const char *d = om_headers_get(&c.req.resp_headers, "Date");
        time_t server;
        if (d && om_parse_http_date(d, &server) == 0)
            *skew_s = (long)(server - time(NULL));
    }
    if (complete)
        *complete = !rc && !empty && !truncated;
    si_call_cleanup(&c);
    return rc;
}
