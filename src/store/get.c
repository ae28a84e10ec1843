/* The GET every backend shares: a ranged GET into the caller's buffer,
 * with the range and the version checked as the body streams (another
 * version delivers no byte), a short answer turned into -EIO, and a range
 * past the end into an empty result. A backend makes the call (its URL, its
 * conditions), hands it to sg_attach and, once performed, to sg_finish. */
#include "objmount/store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "objmount/log.h"
#include "objmount/util.h"
#include "store_int.h"

/* Is the response of the version the caller expects? Fills g->obj from
 * the headers. 0 or -ESTALE. */
static int check_version(struct om_store_get *g, uint64_t total)
{
    g->call.from_headers(&g->call.req.resp_headers, &g->obj);
    const char *want = g->if_match && *g->if_match ? g->if_match : NULL;
    if (want && g->obj.etag[0] && strcmp(g->obj.etag, want) != 0)
        return -ESTALE;
    if (g->size_known && total != UINT64_MAX && total != g->size)
        return -ESTALE;
    return 0;
}

static int sink_data(void *ud, const char *p, size_t n)
{
    struct om_store_get *g = ud;
    struct om_store_call *c = &g->call;
    if (!c->range_checked) {
        c->range_checked = true;
        const char *cr = om_headers_get(&c->req.resp_headers, "Content-Range");
        if (cr) {
            uint64_t a, b, total;
            if (om_http_parse_content_range(cr, &a, &b, &total) || a != g->off)
                return -EIO;
            c->skip = 0;
            c->range_len = b - a + 1;
            c->total = total;
        } else {
            /* 200: the server sent the whole object */
            const char *cl = om_headers_get(&c->req.resp_headers, "Content-Length");
            c->skip = g->off;
            c->total = UINT64_MAX;
            if (cl && om_parse_uint(cl, OM_UINT_MAX, &c->total))
                return -EIO;
            c->range_len = UINT64_MAX;
        }
        int rc = check_version(g, c->total);
        if (rc)
            return rc; /* another version: not one byte of it is data */
    }
    if (c->skip) {
        size_t k = (size_t)OM_MIN((uint64_t)n, c->skip);
        p += k;
        n -= k;
        c->skip -= k;
    }
    size_t room = (size_t)(g->len - g->got);
    size_t k = OM_MIN(n, room);
    memcpy(g->buf + g->got, p, k);
    g->got += k;
    return 0;
}

static void sink_reset(void *ud)
{
    struct om_store_get *g = ud;
    g->got = 0;
    g->call.range_checked = false;
    g->call.skip = 0;
}

int sg_attach(struct om_store_get *g, int (*result)(struct om_store_call *c,
                                                    struct om_store_error *err),
              void (*from_headers)(const struct om_header_list *h, struct om_object *obj))
{
    g->got = 0;
    g->error = 0;
    memset(&g->obj, 0, sizeof(g->obj));
    memset(&g->err, 0, sizeof(g->err));
    g->call.result = result;
    g->call.from_headers = from_headers;
    g->call.req.sink = (struct om_http_sink){sink_data, sink_reset, g};
    g->call.op = g;
    return om_headers_addf(&g->call.req.headers, "Range", "bytes=%" PRIu64 "-%" PRIu64, g->off,
                           g->off + g->len - 1);
}

void sg_finish(struct om_store_get *g)
{
    struct om_store_call *c = &g->call;
    int rc = c->result(c, &g->err);
    if (rc == -ERANGE && c->req.status == 416) {
        /* the range starts at or past the end: end of object */
        c->from_headers(&c->req.resp_headers, &g->obj);
        g->got = 0;
        g->error = 0;
        return;
    }
    if (!rc && !c->range_checked) /* no body: the version is checked here */
        rc = check_version(g, UINT64_MAX);
    if (rc == -ESTALE) {
        if (c->req.status == 412)
            om_warn("read %s: the object changed since it was opened (version %s then; the "
                    "server refused If-Match)",
                    g->key, g->if_match ? g->if_match : "-");
        else
            om_warn("read %s: the object changed since it was opened (version %s, %" PRIu64
                    " bytes then; version %s, %" PRId64 " bytes now): none of it is returned",
                    g->key, g->if_match && *g->if_match ? g->if_match : "-",
                    g->size_known ? g->size : 0, g->obj.etag[0] ? g->obj.etag : "-",
                    c->total != UINT64_MAX ? (int64_t)c->total : (int64_t)-1);
        snprintf(g->err.message, sizeof(g->err.message), "the object changed since it was opened");
    }
    if (!rc) {
        c->from_headers(&c->req.resp_headers, &g->obj);
        if (c->total != UINT64_MAX)
            g->obj.size = c->total;
        uint64_t expect = g->len;
        if (c->total != UINT64_MAX)
            expect = c->total > g->off ? OM_MIN(g->len, c->total - g->off) : 0;
        if (c->range_len != UINT64_MAX && c->range_len < expect)
            expect = UINT64_MAX; /* the server answered less than it holds */
        if (!c->range_checked && expect != 0)
            expect = UINT64_MAX; /* no body at all */
        if (g->got != expect) {
            rc = -EIO;
            snprintf(g->err.message, sizeof(g->err.message),
                     "short read: %" PRIu64 " bytes of %" PRIu64 " at offset %" PRIu64, g->got,
                     g->len, g->off);
            om_warn("GET %s: %s", g->key, g->err.message);
        }
    }
    g->error = rc;
}
