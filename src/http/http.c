/* The request engine: one loop thread drives a curl multi handle.
 *
 * Life of a request: om_http_submit() puts an xfer on the submission list
 * (under h->lock) and wakes the loop. The loop moves it to its run queue,
 * starts an attempt when a connection slot is free, and on completion either
 * finishes the request, schedules a retry (the delayed list, ordered by due
 * time) or follows a redirect, as om_http_classify (http_policy.c) decides.
 * Everything but the submission list, the cancel flags and the statistics is
 * touched by the loop thread only. */
#include "objmount/http.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "objmount/log.h"
#include "objmount/url.h"

#define ERROR_BODY_MAX (64 * 1024)
#define MAX_HOPS_LIMIT 16

/* ---- header lists ---- */

int om_headers_add(struct om_header_list *l, const char *name, const char *value)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        struct om_hdr *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    char *n = strdup(name), *val = strdup(value);
    if (!n || !val) {
        free(n);
        free(val);
        return -ENOMEM;
    }
    l->v[l->n].name = n;
    l->v[l->n].value = val;
    l->n++;
    return 0;
}

int om_headers_addf(struct om_header_list *l, const char *name, const char *fmt, ...)
{
    char *val = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&val, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    int rc = om_headers_add(l, name, val);
    free(val);
    return rc;
}

const char *om_headers_get(const struct om_header_list *l, const char *name)
{
    for (size_t i = l->n; i > 0; i--) {
        if (strcasecmp(l->v[i - 1].name, name) == 0)
            return l->v[i - 1].value;
    }
    return NULL;
}

void om_headers_free(struct om_header_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].value);
    }
    free(l->v);
    memset(l, 0, sizeof(*l));
}

int om_http_parse_content_range(const char *v, uint64_t *first, uint64_t *last, uint64_t *total)
{
    const char *p = v ? om_str_skip_prefix_ci(v, "bytes ") : NULL;
    const char *dash = p ? strchr(p, '-') : NULL;
    const char *slash = dash ? strchr(dash, '/') : NULL;
    uint64_t a, b, t = UINT64_MAX;
    if (!slash || om_parse_uint_n(p, (size_t)(dash - p), OM_UINT_MAX, &a) ||
        om_parse_uint_n(dash + 1, (size_t)(slash - dash - 1), OM_UINT_MAX, &b) || b < a)
        return -EINVAL;
    if (strcmp(slash + 1, "*") != 0 && (om_parse_uint(slash + 1, OM_UINT_MAX, &t) || b >= t))
        return -EINVAL;
    *first = a;
    *last = b;
    *total = t;
    return 0;
}

/* ---- engine state ---- */

struct om_http_xfer {
    struct om_http *h;
    struct om_http_req *req;
    om_http_done_fn done;
    void *ud;
    CURL *easy;
    CURLU *curlu; /* the URL of this attempt, as signed (om_url_curlu) */
    struct curl_slist *slist;
    char curl_err[CURL_ERROR_SIZE];
    uint64_t body_pos;
    uint64_t received; /* body bytes of the final response of this attempt */
    long status;       /* status line of the current response */
    bool body_sent;    /* some request body bytes went out this attempt */
    bool delivered;    /* the sink saw data this attempt */
    bool stalled;      /* aborted by the stall watchdog */
    bool sink_stop;    /* the sink wanted no more data */
    uint64_t progress_ms;
    curl_off_t last_dl, last_ul;
    int sink_error;
    char *visited[MAX_HOPS_LIMIT + 1];
    int nvisited;
    /* The URL before the first redirect hop of this attempt: a retry goes
     * back there, so the server that redirected (AIStore's proxy) picks the
     * target again, and a target that died is not asked again and again. */
    char *origin;
    int hops; /* redirects followed this attempt (the limit is per attempt) */
    uint64_t due_ms;
    uint64_t start_ns;
    uint64_t total_in, total_out; /* body bytes over every attempt */
    bool cancel; /* under h->lock */
    struct om_http_xfer *next;
};

struct xfer_list {
    struct om_http_xfer *head, *tail;
};

struct om_http {
    struct om_http_config cfg;
    char *ca_bundle;
    char *proxy;
    char *noproxy;
    CURLM *multi;
    CURLSH *share;
    pthread_t thread;
    bool thread_started;

    pthread_mutex_t lock;
    struct xfer_list submitted; /* under lock */
    int cancels;                /* under lock: cancel requests not yet seen */
    bool stopping;              /* under lock */

    struct xfer_list queued;  /* loop thread only */
    struct om_http_xfer *delayed;
    struct om_http_xfer **active;
    int nactive;
    CURL **pool;
    int npool;
    uint64_t rng;

    pthread_mutex_t op_lock;
    struct om_http_op_stats ops[OM_HTTP_MAX_OPS];
    int nops;

    struct {
        atomic_uint_fast64_t requests, attempts, retries, redirects, failures, cancelled, short_bodies,
            bytes_in, bytes_out, connections;
    } st;
};

static void list_push(struct xfer_list *l, struct om_http_xfer *x)
{
    x->next = NULL;
    if (l->tail)
        l->tail->next = x;
    else
        l->head = x;
    l->tail = x;
}

static void list_push_front(struct xfer_list *l, struct om_http_xfer *x)
{
    x->next = l->head;
    l->head = x;
    if (!l->tail)
        l->tail = x;
}

static struct om_http_xfer *list_pop(struct xfer_list *l)
{
    struct om_http_xfer *x = l->head;
    if (x) {
        l->head = x->next;
        if (!l->head)
            l->tail = NULL;
        x->next = NULL;
    }
    return x;
}

void om_http_config_defaults(struct om_http_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->connect_timeout_ms = 5000;
    cfg->stall_timeout_ms = 30000;
    cfg->request_timeout_ms = 15 * 60 * 1000;
    cfg->max_attempts = 6;
    cfg->retry_base_ms = 100;
    cfg->retry_cap_ms = 10000;
    cfg->max_redirects = 5;
    cfg->max_connections = 64;
    cfg->verify_tls = true;
}

void om_http_req_init(struct om_http_req *req)
{
    memset(req, 0, sizeof(*req));
    req->body.fd = -1;
    req->max_body = 1 << 20;
    req->idempotent = true;
}

void om_http_req_cleanup(struct om_http_req *req)
{
    free(req->url);
    om_headers_free(&req->headers);
    om_headers_free(&req->resp_headers);
    om_buf_free(&req->resp_body);
    req->url = NULL;
}

/* ---- randomness for the backoff ---- */

static double rng_next(struct om_http *h)
{
    /* xorshift64*, loop thread only */
    h->rng ^= h->rng >> 12;
    h->rng ^= h->rng << 25;
    h->rng ^= h->rng >> 27;
    uint64_t v = h->rng * 2685821657736338717ULL;
    return (double)(v >> 11) / (double)(1ULL << 53);
}

/* ---- curl callbacks (loop thread) ---- */

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct om_http_xfer *x = arg;
    size_t len = size * n;
    struct om_http_req *req = x->req;
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* a new response (after 100 Continue, or the only one) */
        om_headers_free(&req->resp_headers);
        const char *sp = memchr(p, ' ', len);
        uint64_t st = 0;
        x->status =
            sp && sp + 4 <= p + len && om_parse_uint_n(sp + 1, 3, 999, &st) == 0 ? (long)st : 0;
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t nlen = (size_t)(colon - p);
    const char *v = colon + 1;
    const char *end = p + len;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    char *name = strndup(p, nlen);
    char *val = strndup(v, (size_t)(end - v));
    int rc = name && val ? om_headers_add(&req->resp_headers, name, val) : -ENOMEM;
    free(name);
    free(val);
    return rc ? 0 : len;
}

static bool is_2xx(long status)
{
    return status >= 200 && status < 300;
}

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    struct om_http_xfer *x = arg;
    struct om_http_req *req = x->req;
    size_t len = size * n;
    x->received += len;
    x->total_in += len;
    atomic_fetch_add(&x->h->st.bytes_in, len);
    if (!is_2xx(x->status)) {
        if (req->resp_body.len < ERROR_BODY_MAX &&
            om_buf_append(&req->resp_body, p, OM_MIN(len, ERROR_BODY_MAX - req->resp_body.len)))
            return 0;
        return len;
    }
    if (req->sink.data) {
        x->delivered = true;
        int rc = req->sink.data(req->sink.ud, p, len);
        if (rc == OM_HTTP_SINK_STOP) {
            x->sink_stop = true;
            return 0;
        }
        if (rc) {
            x->sink_error = rc < 0 ? rc : -EIO;
            return 0;
        }
        return len;
    }
    if (req->resp_body.len + len > req->max_body) {
        x->sink_error = -EFBIG;
        return 0;
    }
    if (om_buf_append(&req->resp_body, p, len)) {
        x->sink_error = -ENOMEM;
        return 0;
    }
    return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *arg)
{
    struct om_http_xfer *x = arg;
    const struct om_http_body *b = &x->req->body;
    size_t want = size * n;
    if (x->body_pos >= b->len)
        return 0;
    if (want > b->len - x->body_pos)
        want = (size_t)(b->len - x->body_pos);
    size_t got;
    if (b->kind == OM_BODY_MEM) {
        memcpy(p, b->mem + x->body_pos, want);
        got = want;
    } else {
        ssize_t r;
        do {
            r = pread(b->fd, p, want, b->off + (off_t)x->body_pos);
        } while (r < 0 && errno == EINTR);
        if (r <= 0) {
            x->sink_error = r < 0 ? -errno : -EIO;
            return CURL_READFUNC_ABORT;
        }
        got = (size_t)r;
    }
    x->body_pos += got;
    x->body_sent = true;
    x->total_out += got;
    atomic_fetch_add(&x->h->st.bytes_out, got);
    return got;
}

static int on_seek(void *arg, curl_off_t offset, int origin)
{
    struct om_http_xfer *x = arg;
    if (origin != SEEK_SET || offset < 0 || (uint64_t)offset > x->req->body.len)
        return CURL_SEEKFUNC_CANTSEEK;
    x->body_pos = (uint64_t)offset;
    return CURL_SEEKFUNC_OK;
}

/* The stall watchdog: no byte in either direction for stall_timeout_ms. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)dltotal, (void)ultotal;
    struct om_http_xfer *x = arg;
    uint64_t now = om_now_ms();
    if (dlnow != x->last_dl || ulnow != x->last_ul) {
        x->last_dl = dlnow;
        x->last_ul = ulnow;
        x->progress_ms = now;
        return 0;
    }
    if (now - x->progress_ms > (uint64_t)x->h->cfg.stall_timeout_ms) {
        x->stalled = true;
        return 1;
    }
    return 0;
}

/* ---- attempts ---- */

static CURL *easy_get(struct om_http *h)
{
    if (h->npool > 0)
        return h->pool[--h->npool];
    return curl_easy_init();
}

static void easy_put(struct om_http *h, CURL *e)
{
    curl_easy_reset(e);
    if (h->npool < h->cfg.max_connections * 2)
        h->pool[h->npool++] = e;
    else
        curl_easy_cleanup(e);
}

static int slist_add(struct curl_slist **l, const char *name, const char *value)
{
    char *line = NULL;
    /* "Name;" sends an empty header, "Name:" removes one curl would add */
    int n = *value ? asprintf(&line, "%s: %s", name, value) : asprintf(&line, "%s;", name);
    if (n < 0)
        return -ENOMEM;
    struct curl_slist *nl = curl_slist_append(*l, line);
    free(line);
    if (!nl)
        return -ENOMEM;
    *l = nl;
    return 0;
}

static int build_headers(struct om_http_xfer *x, const struct om_url *u)
{
    struct om_http_req *req = x->req;
    struct om_header_list auth = {0};
    int rc = 0;
    if (req->hooks.sign)
        rc = req->hooks.sign(req->hooks.ud, req, req->url, &auth);
    char *host = rc ? NULL : om_url_host_header(u);
    if (!rc && !host)
        rc = -ENOMEM;
    if (!rc)
        rc = slist_add(&x->slist, "Host", host);
    for (size_t i = 0; i < req->headers.n && !rc; i++)
        rc = slist_add(&x->slist, req->headers.v[i].name, req->headers.v[i].value);
    for (size_t i = 0; i < auth.n && !rc; i++)
        rc = slist_add(&x->slist, auth.v[i].name, auth.v[i].value);
    if (!rc && !om_headers_get(&req->headers, "Content-Type")) {
        struct curl_slist *nl = curl_slist_append(x->slist, "Content-Type:");
        rc = nl ? 0 : -ENOMEM;
        if (nl)
            x->slist = nl;
    }
    if (!rc) {
        /* Keep-alive across our own redirects and retries; no Accept header noise. */
        struct curl_slist *nl = curl_slist_append(x->slist, "Accept:");
        rc = nl ? 0 : -ENOMEM;
        if (nl)
            x->slist = nl;
    }
    free(host);
    om_headers_free(&auth);
    return rc;
}

static void finish(struct om_http_xfer *x);

static int start_attempt(struct om_http_xfer *x)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    struct om_url u;
    int rc = om_url_parse(req->url, &u);
    if (rc) {
        snprintf(req->errmsg, sizeof(req->errmsg), "invalid URL");
        return rc;
    }
    x->status = 0;
    x->received = 0;
    x->body_pos = 0;
    x->body_sent = false;
    x->delivered = false;
    x->sink_error = 0;
    x->stalled = false;
    x->sink_stop = false;
    x->last_dl = x->last_ul = 0;
    x->progress_ms = om_now_ms();
    x->curl_err[0] = '\0';
    om_headers_free(&req->resp_headers);
    om_buf_reset(&req->resp_body);
    curl_slist_free_all(x->slist);
    x->slist = NULL;

    rc = build_headers(x, &u);
    if (rc) {
        om_url_free(&u);
        snprintf(req->errmsg, sizeof(req->errmsg), "cannot sign request: %s", strerror(-rc));
        return rc;
    }
    CURL *e = easy_get(h);
    if (!e) {
        om_url_free(&u);
        return -ENOMEM;
    }
    x->easy = e;
    x->curlu = om_url_curlu(req->url);
    if (!x->curlu) {
        om_url_free(&u);
        easy_put(h, e);
        x->easy = NULL;
        return -ENOMEM;
    }
    curl_easy_setopt(e, CURLOPT_CURLU, x->curlu);
    curl_easy_setopt(e, CURLOPT_PRIVATE, x);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_SHARE, h->share);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->slist);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_err);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, h->cfg.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (h->cfg.stall_timeout_ms + 999) / 1000);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, h->cfg.request_timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (h->proxy)
        curl_easy_setopt(e, CURLOPT_PROXY, h->proxy);
    curl_easy_setopt(e, CURLOPT_NOPROXY, h->noproxy);
    if (u.https) {
        if (h->ca_bundle)
            curl_easy_setopt(e, CURLOPT_CAINFO, h->ca_bundle);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, h->cfg.verify_tls ? 1L : 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, h->cfg.verify_tls ? 2L : 0L);
    }
    om_url_free(&u);

    const char *m = req->method;
    bool has_body = req->body.kind != OM_BODY_NONE;
    if (strcmp(m, "GET") == 0 && !has_body) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(m, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (strcmp(m, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body.len);
        if (!has_body || req->body.len == 0)
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    } else if (has_body || strcmp(m, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body.len);
        if (strcmp(m, "PUT") != 0)
            curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    } else {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, m);
    }
    if (has_body) {
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, x);
    }
    if (curl_multi_add_handle(h->multi, e) != CURLM_OK) {
        easy_put(h, e);
        x->easy = NULL;
        curl_url_cleanup(x->curlu);
        x->curlu = NULL;
        return -ENOMEM;
    }
    h->active[h->nactive++] = x;
    req->attempts++;
    atomic_fetch_add(&h->st.attempts, 1);
    return 0;
}

static void detach(struct om_http_xfer *x)
{
    struct om_http *h = x->h;
    if (!x->easy)
        return;
    long conns = 0;
    curl_easy_getinfo(x->easy, CURLINFO_NUM_CONNECTS, &conns);
    atomic_fetch_add(&h->st.connections, (uint64_t)conns);
    curl_multi_remove_handle(h->multi, x->easy);
    easy_put(h, x->easy);
    x->easy = NULL;
    curl_url_cleanup(x->curlu);
    x->curlu = NULL;
    for (int i = 0; i < h->nactive; i++) {
        if (h->active[i] == x) {
            h->active[i] = h->active[--h->nactive];
            break;
        }
    }
}

static void schedule_retry(struct om_http_xfer *x, long min_delay_ms)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    long delay = om_http_backoff_ms(h->cfg.retry_base_ms, h->cfg.retry_cap_ms,
                                    req->attempts - req->redirects,
                                    rng_next(h));
    if (delay < min_delay_ms)
        delay = OM_MIN(min_delay_ms, h->cfg.retry_cap_ms);
    atomic_fetch_add(&h->st.retries, 1);
    if (x->delivered && req->sink.reset)
        req->sink.reset(req->sink.ud);
    if (x->origin) {
        /* back to the URL that redirected: it may send us elsewhere now */
        free(req->url);
        req->url = x->origin;
        x->origin = NULL;
        for (int i = 1; i < x->nvisited; i++)
            free(x->visited[i]);
        x->nvisited = 1;
    }
    x->hops = 0;
    om_debug("%s %s: attempt %d failed (%s), retrying in %ld ms", req->method,
             req->op ? req->op : "", req->attempts, req->errmsg, delay);
    x->due_ms = om_now_ms() + (uint64_t)delay;
    struct om_http_xfer **pp = &h->delayed;
    while (*pp && (*pp)->due_ms <= x->due_ms)
        pp = &(*pp)->next;
    x->next = *pp;
    *pp = x;
}

/* Follow a Location (om_http_classify has checked the number of hops).
 * Returns 0 when the request was re-queued, else a negative errno with
 * req->errmsg filled. */
static int follow_redirect(struct om_http_xfer *x, const char *location)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    char *next = NULL;
    int rc = om_url_resolve(req->url, location, &next);
    if (rc) {
        snprintf(req->errmsg, sizeof(req->errmsg), "redirect to an invalid Location");
        return -EPROTO;
    }
    if (!om_http_redirect_allowed(req->url, next)) {
        snprintf(req->errmsg, sizeof(req->errmsg), "refusing redirect from https to http");
        free(next);
        return -EPROTO;
    }
    for (int i = 0; i < x->nvisited; i++) {
        if (strcmp(x->visited[i], next) == 0) {
            snprintf(req->errmsg, sizeof(req->errmsg), "redirect loop");
            free(next);
            return -ELOOP;
        }
    }
    if (x->nvisited < MAX_HOPS_LIMIT)
        x->visited[x->nvisited++] = strdup(next);
    if (x->status == 303 && strcmp(req->method, "HEAD") != 0) {
        req->method = "GET";
        req->body.kind = OM_BODY_NONE;
    }
    if (om_log_enabled(OM_LOG_DEBUG)) {
        char shown[512];
        om_url_redact(next, shown, sizeof(shown));
        om_debug("%s: redirect %ld to %s", req->op ? req->op : req->method, x->status, shown);
    }
    if (!x->origin)
        x->origin = req->url; /* a retry starts there again */
    else
        free(req->url);
    req->url = next;
    req->redirects++;
    x->hops++;
    atomic_fetch_add(&h->st.redirects, 1);
    list_push_front(&h->queued, x);
    return 0;
}

static long retry_after_ms(const struct om_http_req *req)
{
    const char *v = om_headers_get(&req->resp_headers, "Retry-After");
    if (!v)
        return 0;
    /* delay-seconds (RFC 9110) or an HTTP date; the caller caps the delay */
    uint64_t s = 0;
    time_t when;
    if (om_parse_uint(v, 86400, &s) == -ERANGE)
        s = 86400;
    else if (s == 0 && om_parse_http_date(v, &when) == 0 && when > time(NULL))
        s = (uint64_t)OM_MIN(when - time(NULL), (time_t)86400);
    return (long)s * 1000;
}

/* The facts of an attempt that has ended, for om_http_classify. code
 * receives the store's error code of an error response (left "" otherwise). */
static struct om_http_outcome outcome_of(struct om_http_xfer *x, CURLcode cc, char *code,
                                         size_t codelen)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    struct om_http_outcome o = {
        .curl_code = cc,
        .status = req->status,
        .stalled = x->stalled,
        .sink_stop = x->sink_stop,
        .sink_error = x->sink_error,
        .head = strcmp(req->method, "HEAD") == 0,
        .received = x->received,
        .region_hook = req->hooks.region_redirect != NULL,
        .idempotent = req->idempotent,
        .body_sent = x->body_sent,
        .attempts = req->attempts - req->redirects, /* a redirect's hop is no new attempt */
        .max_attempts = h->cfg.max_attempts,
        .redirects = x->hops,
        .max_redirects = h->cfg.max_redirects,
    };
    pthread_mutex_lock(&h->lock);
    o.cancelled = x->cancel;
    pthread_mutex_unlock(&h->lock);
    const char *cl = om_headers_get(&req->resp_headers, "Content-Length");
    o.has_length = cl != NULL;
    o.length_valid = cl && om_parse_uint(cl, OM_UINT_MAX, &o.length) == 0;
    const char *loc = om_headers_get(&req->resp_headers, "Location");
    o.has_location = loc && *loc;
    o.has_region = om_headers_get(&req->resp_headers, "x-amz-bucket-region") != NULL;
    if (cc == CURLE_OK && !is_2xx(req->status)) {
        if (req->hooks.error_code && req->resp_body.len)
            req->hooks.error_code(req->hooks.ud, req->resp_body.data, req->resp_body.len, code,
                                  codelen, &o.code_transient);
        o.retry_after_ms = retry_after_ms(req);
    }
    return o;
}

/* The server named another region: ask the hook. 0 when the request was
 * re-queued to go again at once. */
static int region_redirect(struct om_http_xfer *x)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    const char *region = om_headers_get(&req->resp_headers, "x-amz-bucket-region");
    char *url = req->url;
    int rc = req->hooks.region_redirect(req->hooks.ud, req, region, &url);
    req->url = url;
    if (rc)
        return rc;
    req->redirects++;
    atomic_fetch_add(&h->st.redirects, 1);
    list_push_front(&h->queued, x);
    return 0;
}

/* req->errmsg (and the short-body counter) for a failed attempt. */
static void describe_failure(struct om_http_xfer *x, CURLcode cc, enum om_http_cause cause,
                             const char *code)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    char *m = req->errmsg;
    size_t mlen = sizeof(req->errmsg);
    switch (cause) {
    case OM_HTTP_CAUSE_NONE:
        break;
    case OM_HTTP_CAUSE_CANCELLED:
        snprintf(m, mlen, "cancelled");
        break;
    case OM_HTTP_CAUSE_SINK:
        snprintf(m, mlen, "%s", strerror(-x->sink_error));
        break;
    case OM_HTTP_CAUSE_STALLED:
        snprintf(m, mlen, "stalled: no data for %ld ms", h->cfg.stall_timeout_ms);
        break;
    case OM_HTTP_CAUSE_TRUNCATED:
        atomic_fetch_add(&h->st.short_bodies, 1);
        /* fall through: curl's words */
    case OM_HTTP_CAUSE_TRANSPORT:
        snprintf(m, mlen, "%.100s%s%.140s", curl_easy_strerror(cc), x->curl_err[0] ? ": " : "",
                 x->curl_err);
        break;
    case OM_HTTP_CAUSE_SHORT_BODY:
        atomic_fetch_add(&h->st.short_bodies, 1);
        snprintf(m, mlen, "short body: %llu of %s bytes", (unsigned long long)x->received,
                 om_headers_get(&req->resp_headers, "Content-Length"));
        break;
    case OM_HTTP_CAUSE_TOO_MANY_REDIRECTS:
        snprintf(m, mlen, "too many redirects (more than %d)", h->cfg.max_redirects);
        break;
    case OM_HTTP_CAUSE_STATUS:
        snprintf(m, mlen, "HTTP %ld%s%s", req->status, code[0] ? " " : "", code);
        break;
    }
}

/* An attempt ended: om_http_classify decides, this executes. */
static void attempt_done(struct om_http_xfer *x, CURLcode cc)
{
    struct om_http_req *req = x->req;
    long status = 0;
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &status);
    detach(x);
    req->status = status;

    char code[64] = "";
    struct om_http_outcome o = outcome_of(x, cc, code, sizeof(code));
    struct om_http_decision d = om_http_classify(&o);
    if (d.action == OM_HTTP_REGION_REDIRECT) {
        if (region_redirect(x) == 0)
            return;
        o.region_refused = true;
        d = om_http_classify(&o);
    }
    if (d.action == OM_HTTP_REDIRECT) {
        int rc = follow_redirect(x, om_headers_get(&req->resp_headers, "Location"));
        if (rc == 0)
            return;
        req->error = rc;
    } else if (d.action == OM_HTTP_DONE) {
        req->error = 0;
        req->errmsg[0] = '\0';
        req->body_bytes = x->received;
    } else {
        req->error = d.error;
        describe_failure(x, cc, d.cause, code);
        if (d.action == OM_HTTP_RETRY) {
            schedule_retry(x, d.min_delay_ms);
            return;
        }
    }
    finish(x);
}

static void count_op(struct om_http *h, const struct om_http_xfer *x)
{
    const struct om_http_req *req = x->req;
    const char *op = req->op ? req->op : req->method;
    uint64_t us = (om_now_ns() - x->start_ns) / 1000;
    int b = 0;
    while (b < OM_HTTP_LAT_BUCKETS - 1 && (us >> (b + 1)) > 0)
        b++;
    pthread_mutex_lock(&h->op_lock);
    struct om_http_op_stats *s = NULL;
    for (int i = 0; i < h->nops && !s; i++) {
        if (strcmp(h->ops[i].op, op) == 0)
            s = &h->ops[i];
    }
    if (!s && h->nops < OM_HTTP_MAX_OPS) {
        s = &h->ops[h->nops++];
        om_strlcpy(s->op, op, sizeof(s->op));
    }
    if (s) {
        s->requests++;
        s->failures += req->error != 0 && req->error != -ECANCELED;
        s->retries += req->attempts > 1 ? (uint64_t)(req->attempts - 1 - req->redirects) : 0;
        s->redirects += (uint64_t)req->redirects;
        s->bytes_in += x->total_in;
        s->bytes_out += x->total_out;
        s->latency_sum_us += us;
        s->latency[b]++;
    }
    pthread_mutex_unlock(&h->op_lock);
}

int om_http_get_op_stats(struct om_http *h, struct om_http_op_stats *out, int max)
{
    pthread_mutex_lock(&h->op_lock);
    int n = OM_MIN(max, h->nops);
    memcpy(out, h->ops, sizeof(*out) * (size_t)n);
    pthread_mutex_unlock(&h->op_lock);
    return n;
}

uint64_t om_http_latency_quantile_us(const struct om_http_op_stats *s, double q)
{
    uint64_t total = 0;
    for (int i = 0; i < OM_HTTP_LAT_BUCKETS; i++)
        total += s->latency[i];
    if (!total)
        return 0;
    uint64_t want = (uint64_t)(q * (double)total + 0.5), seen = 0;
    if (want < 1)
        want = 1;
    for (int i = 0; i < OM_HTTP_LAT_BUCKETS; i++) {
        seen += s->latency[i];
        if (seen >= want)
            return 2ULL << i;
    }
    return 2ULL << (OM_HTTP_LAT_BUCKETS - 1);
}

static void finish(struct om_http_xfer *x)
{
    struct om_http *h = x->h;
    struct om_http_req *req = x->req;
    count_op(h, x);
    curl_slist_free_all(x->slist);
    for (int i = 0; i < x->nvisited; i++)
        free(x->visited[i]);
    free(x->origin);
    atomic_fetch_add(&h->st.requests, 1);
    if (req->error == -ECANCELED) /* abandoned by its caller: not a failure */
        atomic_fetch_add(&h->st.cancelled, 1);
    else if (req->error)
        atomic_fetch_add(&h->st.failures, 1);
    if (om_log_enabled(OM_LOG_DEBUG)) {
        double ms = (double)(om_now_ns() - x->start_ns) / 1e6;
        om_debug("%s %s -> %ld%s%s (%.1f ms, %d attempt%s, %d redirect%s)", req->method,
                 req->op ? req->op : "", req->status, req->error ? " error: " : "",
                 req->error ? req->errmsg : "", ms, req->attempts, req->attempts == 1 ? "" : "s",
                 req->redirects, req->redirects == 1 ? "" : "s");
    }
    pthread_mutex_lock(&h->lock);
    req->priv = NULL;
    pthread_mutex_unlock(&h->lock);
    om_http_done_fn done = x->done;
    void *ud = x->ud;
    free(x);
    done(req, ud);
}

/* ---- the loop ---- */

static bool take_cancel(struct om_http *h, struct om_http_xfer *x)
{
    pthread_mutex_lock(&h->lock);
    bool c = x->cancel;
    pthread_mutex_unlock(&h->lock);
    return c;
}

static void fail_now(struct om_http_xfer *x, int err, const char *msg)
{
    x->req->error = err;
    if (msg)
        snprintf(x->req->errmsg, sizeof(x->req->errmsg), "%s", msg);
    finish(x);
}

/* Handle cancellations of queued, delayed and active transfers. */
static void sweep_cancels(struct om_http *h)
{
    struct xfer_list keep = {0};
    struct om_http_xfer *x;
    while ((x = list_pop(&h->queued))) {
        if (take_cancel(h, x))
            fail_now(x, -ECANCELED, "cancelled");
        else
            list_push(&keep, x);
    }
    h->queued = keep;
    struct om_http_xfer **pp = &h->delayed;
    while (*pp) {
        x = *pp;
        if (take_cancel(h, x)) {
            *pp = x->next;
            fail_now(x, -ECANCELED, "cancelled");
        } else {
            pp = &x->next;
        }
    }
    for (int i = 0; i < h->nactive;) {
        x = h->active[i];
        if (take_cancel(h, x)) {
            detach(x);
            fail_now(x, -ECANCELED, "cancelled");
        } else {
            i++;
        }
    }
}

static void *loop_main(void *arg)
{
    pthread_setname_np(pthread_self(), "om-http");
    struct om_http *h = arg;
    for (;;) {
        pthread_mutex_lock(&h->lock);
        struct om_http_xfer *x;
        while ((x = list_pop(&h->submitted)))
            list_push(&h->queued, x);
        bool stopping = h->stopping;
        int cancels = h->cancels;
        h->cancels = 0;
        pthread_mutex_unlock(&h->lock);

        if (stopping) {
            pthread_mutex_lock(&h->lock);
            for (x = h->queued.head; x; x = x->next)
                x->cancel = true;
            for (x = h->delayed; x; x = x->next)
                x->cancel = true;
            for (int i = 0; i < h->nactive; i++)
                h->active[i]->cancel = true;
            pthread_mutex_unlock(&h->lock);
            sweep_cancels(h);
            return NULL;
        }
        if (cancels)
            sweep_cancels(h);

        uint64_t now = om_now_ms();
        while (h->delayed && h->delayed->due_ms <= now) {
            x = h->delayed;
            h->delayed = x->next;
            list_push_front(&h->queued, x);
        }
        while (h->nactive < h->cfg.max_connections && (x = list_pop(&h->queued))) {
            int rc = start_attempt(x);
            if (rc)
                fail_now(x, rc, NULL);
        }

        int running = 0;
        curl_multi_perform(h->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(h->multi, &left))) {
            if (m->msg != CURLMSG_DONE)
                continue;
            struct om_http_xfer *done = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&done);
            attempt_done(done, m->data.result);
        }

        long timeout = 1000;
        if (h->queued.head && h->nactive < h->cfg.max_connections)
            timeout = 0;
        else if (h->delayed) {
            uint64_t due = h->delayed->due_ms;
            now = om_now_ms();
            timeout = due <= now ? 0 : (long)OM_MIN(due - now, 1000);
        }
        if (timeout > 0)
            curl_multi_poll(h->multi, NULL, 0, (int)timeout, NULL);
    }
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct om_http *om_http_new(const struct om_http_config *cfg, char *err, size_t errlen)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        snprintf(err, errlen, "libcurl initialisation failed: %s", curl_easy_strerror(global_rc));
        return NULL;
    }
    struct om_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->cfg = *cfg;
    if (h->cfg.max_connections < 1)
        h->cfg.max_connections = 1;
    if (h->cfg.max_attempts < 1)
        h->cfg.max_attempts = 1;
    if (h->cfg.max_redirects > MAX_HOPS_LIMIT - 1)
        h->cfg.max_redirects = MAX_HOPS_LIMIT - 1;
    h->cfg.ca_bundle = NULL;
    h->cfg.proxy = NULL;
    if (cfg->ca_bundle && !(h->ca_bundle = strdup(cfg->ca_bundle)))
        goto nomem;
    if (cfg->proxy && !(h->proxy = strdup(cfg->proxy)))
        goto nomem;
    {
        const char *np = getenv("NO_PROXY");
        if (!np)
            np = getenv("no_proxy");
        if (asprintf(&h->noproxy, "%s%slocalhost,127.0.0.1,::1", np ? np : "",
                     np && *np ? "," : "") < 0) {
            h->noproxy = NULL;
            goto nomem;
        }
    }
    h->active = calloc((size_t)h->cfg.max_connections, sizeof(*h->active));
    h->pool = calloc((size_t)h->cfg.max_connections * 2, sizeof(*h->pool));
    if (!h->active || !h->pool)
        goto nomem;
    pthread_mutex_init(&h->lock, NULL);
    pthread_mutex_init(&h->op_lock, NULL);
    h->rng = (uint64_t)om_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)h;
    if (!h->rng)
        h->rng = 88172645463325252ULL;
    h->multi = curl_multi_init();
    h->share = curl_share_init();
    if (!h->multi || !h->share)
        goto nomem;
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->cfg.max_connections);
    if (pthread_create(&h->thread, NULL, loop_main, h) != 0) {
        snprintf(err, errlen, "cannot start the HTTP thread");
        om_http_free(h);
        return NULL;
    }
    h->thread_started = true;
    return h;
nomem:
    snprintf(err, errlen, "out of memory");
    om_http_free(h);
    return NULL;
}

void om_http_free(struct om_http *h)
{
    if (!h)
        return;
    if (h->thread_started) {
        pthread_mutex_lock(&h->lock);
        h->stopping = true;
        pthread_mutex_unlock(&h->lock);
        curl_multi_wakeup(h->multi);
        pthread_join(h->thread, NULL);
        pthread_mutex_destroy(&h->lock);
    }
    for (int i = 0; i < h->npool; i++)
        curl_easy_cleanup(h->pool[i]);
    if (h->multi)
        curl_multi_cleanup(h->multi);
    if (h->share)
        curl_share_cleanup(h->share);
    free(h->active);
    free(h->pool);
    free(h->ca_bundle);
    free(h->proxy);
    free(h->noproxy);
    free(h);
}

int om_http_submit(struct om_http *h, struct om_http_req *req, om_http_done_fn done, void *ud)
{
    if (!req->url || !req->method || !done)
        return -EINVAL;
    struct om_http_xfer *x = calloc(1, sizeof(*x));
    if (!x)
        return -ENOMEM;
    x->h = h;
    x->req = req;
    x->done = done;
    x->ud = ud;
    x->start_ns = om_now_ns();
    x->visited[0] = strdup(req->url);
    if (!x->visited[0]) {
        free(x);
        return -ENOMEM;
    }
    x->nvisited = 1;
    req->error = 0;
    req->status = 0;
    req->attempts = 0;
    req->redirects = 0;
    req->body_bytes = 0;
    req->errmsg[0] = '\0';
    pthread_mutex_lock(&h->lock);
    if (h->stopping) {
        pthread_mutex_unlock(&h->lock);
        free(x->visited[0]);
        free(x);
        return -ECANCELED;
    }
    req->priv = x;
    list_push(&h->submitted, x);
    pthread_mutex_unlock(&h->lock);
    curl_multi_wakeup(h->multi);
    return 0;
}

struct waiter {
    pthread_mutex_t m;
    pthread_cond_t c;
    bool done;
};

static void wake_waiter(struct om_http_req *req, void *ud)
{
    (void)req;
    struct waiter *w = ud;
    pthread_mutex_lock(&w->m);
    w->done = true;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

int om_http_perform(struct om_http *h, struct om_http_req *req)
{
    struct waiter w = {.done = false};
    pthread_mutex_init(&w.m, NULL);
    pthread_cond_init(&w.c, NULL);
    int rc = om_http_submit(h, req, wake_waiter, &w);
    if (rc == 0) {
        pthread_mutex_lock(&w.m);
        while (!w.done)
            pthread_cond_wait(&w.c, &w.m);
        pthread_mutex_unlock(&w.m);
        rc = req->error;
    } else {
        req->error = rc;
    }
    pthread_cond_destroy(&w.c);
    pthread_mutex_destroy(&w.m);
    return rc;
}

void om_http_cancel(struct om_http *h, struct om_http_req *req)
{
    pthread_mutex_lock(&h->lock);
    if (req->priv) {
        req->priv->cancel = true;
        h->cancels++;
    }
    pthread_mutex_unlock(&h->lock);
    curl_multi_wakeup(h->multi);
}

void om_http_get_stats(struct om_http *h, struct om_http_stats *out)
{
    out->requests = atomic_load(&h->st.requests);
    out->attempts = atomic_load(&h->st.attempts);
    out->retries = atomic_load(&h->st.retries);
    out->redirects = atomic_load(&h->st.redirects);
    out->failures = atomic_load(&h->st.failures);
    out->cancelled = atomic_load(&h->st.cancelled);
    out->short_bodies = atomic_load(&h->st.short_bodies);
    out->bytes_in = atomic_load(&h->st.bytes_in);
    out->bytes_out = atomic_load(&h->st.bytes_out);
    out->connections = atomic_load(&h->st.connections);
}
