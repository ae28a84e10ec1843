/* The request engine against a scripted HTTP server in this process:
 * retries, backoff, redirects, short bodies, timeouts, cancellation. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "objmount/http.h"
#include "objmount/util.h"

#include "check_main.h"

/* ---- a scripted HTTP/1.1 server ---- */

struct seen {
    char method[16];
    char target[512];
    char auth_url[512]; /* x-test-signed-for header: what the sign hook saw */
    struct om_buf body;
    char region[32];
};

struct srv;
typedef void (*handler_fn)(struct srv *s, int n, struct seen *r, int fd);

struct srv {
    int lfd;
    int port;
    pthread_t th;
    handler_fn handler;
    pthread_mutex_t lock;
    struct seen log[64];
    int nlog;
    int accepts;
    int conn_fds[256];
    pthread_t conn_threads[256];
    volatile int stop;
    int counter; /* free for handlers */
    /* h_stall: connections whose client hung up while the server stalled
     * (a timeout or a cancel took effect), and those the server gave up */
    volatile int stall_hangups, stall_gave_up;
};

static struct srv S;

static void send_str(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, int status, const char *extra_headers, const char *body)
{
    char head[1024];
    snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n", status,
             strlen(body), extra_headers ? extra_headers : "");
    send_str(fd, head);
    send_str(fd, body);
}

/* Reads one request; returns 0, or -1 when the connection ended. */
static int read_request(int fd, struct seen *r, bool *expect100)
{
    char buf[8192];
    size_t len = 0;
    char *end = NULL;
    while (!end) {
        if (len == sizeof(buf) - 1)
            return -1;
        ssize_t n = recv(fd, buf + len, sizeof(buf) - 1 - len, 0);
        if (n <= 0)
            return -1;
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    memset(r, 0, sizeof(*r));
    sscanf(buf, "%15s %511s", r->method, r->target);
    size_t clen = 0;
    *expect100 = false;
    for (char *line = strstr(buf, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtoul(line + 15, NULL, 10);
        if (strncasecmp(line, "Expect: 100-continue", 20) == 0)
            *expect100 = true;
        if (strncasecmp(line, "x-test-signed-for: ", 19) == 0)
            sscanf(line + 19, "%511s", r->auth_url);
        if (strncasecmp(line, "x-test-region: ", 15) == 0)
            sscanf(line + 15, "%31s", r->region);
    }
    size_t have = len - (size_t)(end + 4 - buf);
    if (*expect100 && have < clen)
        send_str(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    om_buf_append(&r->body, end + 4, have);
    while (have < clen) {
        ssize_t n = recv(fd, buf, OM_MIN(sizeof(buf), clen - have), 0);
        if (n <= 0) {
            om_buf_free(&r->body);
            return -1;
        }
        om_buf_append(&r->body, buf, (size_t)n);
        have += (size_t)n;
    }
    return 0;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        struct seen r;
        bool e100;
        if (S.stop || read_request(fd, &r, &e100))
            break;
        pthread_mutex_lock(&S.lock);
        int n = S.nlog;
        if (S.nlog < 64)
            S.log[S.nlog++] = r;
        else
            om_buf_free(&r.body);
        pthread_mutex_unlock(&S.lock);
        S.handler(&S, n, &S.log[n < 64 ? n : 63], fd);
    }
    return NULL;
}

static void *srv_main(void *arg)
{
    (void)arg;
    while (!S.stop) {
        struct pollfd p = {.fd = S.lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(S.lfd, NULL, NULL);
        if (fd < 0)
            continue;
        pthread_mutex_lock(&S.lock);
        int k = S.accepts++;
        S.conn_fds[k] = fd;
        pthread_create(&S.conn_threads[k], NULL, conn_main, (void *)(intptr_t)fd);
        pthread_mutex_unlock(&S.lock);
    }
    return NULL;
}

static void srv_start(handler_fn h)
{
    memset(&S, 0, sizeof(S));
    pthread_mutex_init(&S.lock, NULL);
    S.handler = h;
    S.lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(S.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(bind(S.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    getsockname(S.lfd, (struct sockaddr *)&a, &al);
    S.port = ntohs(a.sin_port);
    listen(S.lfd, 64);
    pthread_create(&S.th, NULL, srv_main, NULL);
}

static void srv_stop(void)
{
    S.stop = 1;
    pthread_join(S.th, NULL);
    close(S.lfd);
    for (int i = 0; i < S.accepts; i++) {
        shutdown(S.conn_fds[i], SHUT_RDWR);
        pthread_join(S.conn_threads[i], NULL);
        close(S.conn_fds[i]);
    }
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nlog; i++)
        om_buf_free(&S.log[i].body);
    pthread_mutex_unlock(&S.lock);
}

static void srv_clear_log(void)
{
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < S.nlog; i++)
        om_buf_free(&S.log[i].body);
    S.nlog = 0;
    pthread_mutex_unlock(&S.lock);
}

static char *url(const char *path)
{
    char *u = NULL;
    if (asprintf(&u, "http://127.0.0.1:%d%s", S.port, path) < 0)
        return NULL;
    return u;
}

/* ---- client side helpers ---- */

static struct om_http *engine(int attempts, long stall_ms)
{
    struct om_http_config c;
    om_http_config_defaults(&c);
    c.max_attempts = attempts;
    c.retry_base_ms = 5;
    c.retry_cap_ms = 20;
    c.connect_timeout_ms = 2000;
    if (stall_ms)
        c.stall_timeout_ms = stall_ms;
    char err[128];
    struct om_http *h = om_http_new(&c, err, sizeof(err));
    ck_assert_ptr_nonnull(h);
    return h;
}

static char signed_region[32] = "us-east-1";

/* A sign hook that tells the server which URL and region it signed for. */
static int test_sign(void *ud, const struct om_http_req *req, const char *u,
                     struct om_header_list *out)
{
    (void)ud, (void)req;
    int rc = om_headers_add(out, "x-test-signed-for", u);
    return rc ? rc : om_headers_add(out, "x-test-region", signed_region);
}

static int test_region(void *ud, struct om_http_req *req, const char *region, char **u)
{
    (void)ud, (void)req, (void)u;
    snprintf(signed_region, sizeof(signed_region), "%s", region);
    return 0;
}

static int test_code(void *ud, const char *body, size_t len, char *code, size_t codelen,
                     bool *transient)
{
    (void)ud;
    const char *a = memmem(body, len, "<Code>", 6);
    const char *b = a ? memmem(a, len - (size_t)(a - body), "</Code>", 7) : NULL;
    if (!b)
        return -1;
    snprintf(code, codelen, "%.*s", (int)(b - a - 6), a + 6);
    *transient = strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0;
    return 0;
}

struct sink {
    struct om_buf data;
    int resets;
};

static int sink_data(void *ud, const char *p, size_t n)
{
    return om_buf_append(&((struct sink *)ud)->data, p, n);
}

static void sink_reset(void *ud)
{
    struct sink *s = ud;
    om_buf_reset(&s->data);
    s->resets++;
}

static void req_setup(struct om_http_req *r, const char *method, const char *path,
                      struct sink *sk)
{
    om_http_req_init(r);
    r->method = method;
    r->url = url(path);
    r->op = "Test";
    r->hooks = (struct om_http_hooks){.sign = test_sign, .region_redirect = test_region,
                                      .error_code = test_code};
    if (sk)
        r->sink = (struct om_http_sink){sink_data, sink_reset, sk};
}

/* ---- handlers ---- */

static void h_ok(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    if (strcmp(r->method, "HEAD") == 0) {
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n");
        return;
    }
    respond(fd, 200, NULL, "hello world");
}

static void h_503_twice(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)r;
    if (n < 2)
        respond(fd, 503, NULL, "<Error><Code>SlowDown</Code></Error>");
    else
        respond(fd, 200, NULL, "finally");
}

static void h_short_once(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)r;
    if (n == 0) {
        send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
        shutdown(fd, SHUT_RDWR);
        return;
    }
    respond(fd, 200, NULL, "complete body");
}

static void h_short_always(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)r, (void)n;
    send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
    shutdown(fd, SHUT_RDWR);
}

static void h_redirect_put(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    if (strncmp(r->target, "/gw/", 4) == 0) {
        char loc[600];
        snprintf(loc, sizeof(loc), "Location: http://127.0.0.1:%d/target/%s%spid=Zq%%2B9&utm=1700\r\n",
                 S.port, r->target + 4, strchr(r->target, '?') ? "&" : "?");
        respond(fd, 307, loc, "<Error><Code>TemporaryRedirect</Code></Error>");
        return;
    }
    respond(fd, 200, "ETag: \"e\"\r\n", "");
}

static void h_redirect_303(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    if (strcmp(r->target, "/post") == 0)
        respond(fd, 303, "Location: /result\r\n", "");
    else
        respond(fd, 200, NULL, r->method);
}

static void h_loop(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    respond(fd, 302, strcmp(r->target, "/a") == 0 ? "Location: /b\r\n" : "Location: /a\r\n", "");
}

static void h_chain(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    int k = atoi(r->target + 1);
    char loc[64];
    snprintf(loc, sizeof(loc), "Location: /%d\r\n", k + 1);
    respond(fd, 307, loc, "");
}

static void h_region(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n;
    if (strcmp(r->region, "eu-west-1") != 0)
        respond(fd, 400, "x-amz-bucket-region: eu-west-1\r\n",
                "<Error><Code>AuthorizationHeaderMalformed</Code></Error>");
    else
        respond(fd, 200, NULL, "regional");
}

static void h_500(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)n, (void)r;
    respond(fd, 500, NULL, "<Error><Code>InternalError</Code></Error>");
}

static void h_400_code(struct srv *s, int n, struct seen *r, int fd)
{
    (void)s, (void)r;
    if (n == 0)
        respond(fd, 400, NULL, "<Error><Code>RequestTimeout</Code></Error>");
    else if (n == 1)
        respond(fd, 400, NULL, "<Error><Code>InvalidArgument</Code></Error>");
    else
        respond(fd, 200, NULL, "unexpected");
}

/* How long h_stall holds a response: far longer than any timeout under
 * test, even under a sanitizer on a loaded machine. */
#define STALL_MAX_MS 30000

/* 5 of 100 bytes, then nothing until the client hangs up (counted in
 * stall_hangups) or STALL_MAX_MS pass (stall_gave_up). */
static void h_stall(struct srv *s, int n, struct seen *r, int fd)
{
    (void)n, (void)r;
    send_str(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n01234");
    for (int waited = 0; waited < STALL_MAX_MS && !s->stop; waited += 50) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c;
        if (poll(&p, 1, 50) > 0 && recv(fd, &c, 1, MSG_DONTWAIT) <= 0) {
            __atomic_add_fetch(&s->stall_hangups, 1, __ATOMIC_SEQ_CST);
            return;
        }
    }
    if (!s->stop)
        __atomic_add_fetch(&s->stall_gave_up, 1, __ATOMIC_SEQ_CST);
}

/* Wait up to 10 s for the server to see a stalled client hang up. */
static int stall_hangups_within_10s(void)
{
    for (int i = 0; i < 1000 && !__atomic_load_n(&S.stall_hangups, __ATOMIC_SEQ_CST); i++)
        usleep(10000);
    return __atomic_load_n(&S.stall_hangups, __ATOMIC_SEQ_CST);
}

/* ---- tests ---- */

START_TEST(test_connections_are_reused)
{
    srv_start(h_ok);
    struct om_http *h = engine(3, 0);
    for (int i = 0; i < 5; i++) {
        struct om_http_req r;
        req_setup(&r, "GET", "/k", NULL);
        ck_assert_int_eq(om_http_perform(h, &r), 0);
        ck_assert_int_eq(r.status, 200);
        ck_assert_str_eq(r.resp_body.data, "hello world");
        om_http_req_cleanup(&r);
    }
    struct om_http_req r;
    req_setup(&r, "HEAD", "/k", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), 0);
    ck_assert_str_eq(om_headers_get(&r.resp_headers, "content-length"), "12345");
    om_http_req_cleanup(&r);
    ck_assert_int_eq(S.accepts, 1);
    struct om_http_stats st;
    om_http_get_stats(h, &st);
    ck_assert_uint_eq(st.connections, 1);
    ck_assert_uint_eq(st.requests, 6);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_503_slowdown_is_retried)
{
    srv_start(h_503_twice);
    struct om_http *h = engine(5, 0);
    struct om_http_req r;
    struct sink sk = {0};
    req_setup(&r, "GET", "/k", &sk);
    ck_assert_int_eq(om_http_perform(h, &r), 0);
    ck_assert_int_eq(r.attempts, 3);
    ck_assert_str_eq(sk.data.data, "finally");
    struct om_http_stats st;
    om_http_get_stats(h, &st);
    ck_assert_uint_eq(st.retries, 2);
    om_http_req_cleanup(&r);
    om_buf_free(&sk.data);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_short_body_is_retried_and_sink_reset)
{
    srv_start(h_short_once);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    struct sink sk = {0};
    req_setup(&r, "GET", "/k", &sk);
    ck_assert_int_eq(om_http_perform(h, &r), 0);
    ck_assert_int_eq(r.attempts, 2);
    ck_assert_int_eq(sk.resets, 1);
    ck_assert_str_eq(sk.data.data, "complete body");
    struct om_http_stats st;
    om_http_get_stats(h, &st);
    ck_assert_uint_eq(st.short_bodies, 1);
    om_http_req_cleanup(&r);
    om_buf_free(&sk.data);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_short_body_is_eio)
{
    srv_start(h_short_always);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -EIO);
    ck_assert_int_eq(r.attempts, 3);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_307_put_keeps_method_body_and_query_and_resigns)
{
    srv_start(h_redirect_put);
    struct om_http *h = engine(3, 0);
    char body[3000];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (char)('a' + i % 26);
    char path[] = "/tmp/om-http-test-XXXXXX";
    int fd = mkstemp(path);
    unlink(path);
    ck_assert_int_eq(write(fd, "HEADER", 6), 6);
    ck_assert_int_eq(write(fd, body, sizeof(body)), (ssize_t)sizeof(body));
    struct om_http_body bodies[2] = {
        {.kind = OM_BODY_MEM, .mem = body, .len = sizeof(body)},
        {.kind = OM_BODY_FD, .fd = fd, .off = 6, .len = sizeof(body)},
    };
    for (int i = 0; i < 2; i++) {
        srv_clear_log();
        struct om_http_req r;
        req_setup(&r, "PUT", "/gw/bucket/key%20x?partNumber=3&uploadId=u", NULL);
        r.body = bodies[i];
        ck_assert_int_eq(om_http_perform(h, &r), 0);
        ck_assert_int_eq(r.redirects, 1);
        ck_assert_int_eq(S.nlog, 2);
        struct seen *t = &S.log[1];
        ck_assert_str_eq(t->method, "PUT");
        ck_assert_str_eq(t->target, "/target/bucket/key%20x?partNumber=3&uploadId=u&pid=Zq%2B9&utm=1700");
        ck_assert_ptr_nonnull(strstr(t->auth_url, "/target/bucket/key%20x?partNumber=3"));
        ck_assert_uint_eq(t->body.len, sizeof(body));
        ck_assert_mem_eq(t->body.data, body, sizeof(body));
        om_http_req_cleanup(&r);
    }
    close(fd);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_303_becomes_get)
{
    srv_start(h_redirect_303);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "POST", "/post", NULL);
    r.body = (struct om_http_body){.kind = OM_BODY_MEM, .mem = "<x/>", .len = 4};
    ck_assert_int_eq(om_http_perform(h, &r), 0);
    ck_assert_str_eq(r.resp_body.data, "GET");
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_redirect_loop_detected)
{
    srv_start(h_loop);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/a", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -ELOOP);
    ck_assert_ptr_nonnull(strstr(r.errmsg, "loop"));
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_redirect_hops_bounded)
{
    srv_start(h_chain);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/1", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -ELOOP);
    ck_assert_int_eq(r.redirects, 5);
    ck_assert_int_eq(S.nlog, 6);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_https_to_http_refused)
{
    ck_assert(!om_http_redirect_allowed("https://a/x", "http://b/x"));
    ck_assert(om_http_redirect_allowed("https://a/x", "https://b/x"));
    ck_assert(om_http_redirect_allowed("http://a/x", "https://b/x"));
    ck_assert(om_http_redirect_allowed("http://a/x", "http://b/x"));
}
END_TEST

START_TEST(test_region_hint_resigns)
{
    snprintf(signed_region, sizeof(signed_region), "us-east-1");
    srv_start(h_region);
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), 0);
    ck_assert_str_eq(r.resp_body.data, "regional");
    ck_assert_int_eq(r.redirects, 1);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_non_idempotent_not_replayed)
{
    srv_start(h_500);
    struct om_http *h = engine(5, 0);
    struct om_http_req r;
    req_setup(&r, "POST", "/complete", NULL);
    r.idempotent = false;
    ck_assert_int_eq(om_http_perform(h, &r), -EIO);
    ck_assert_int_eq(r.attempts, 1);
    ck_assert_int_eq(r.status, 500);
    om_http_req_cleanup(&r);
    /* the same failure on an idempotent request is retried to the bound */
    req_setup(&r, "GET", "/x", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -EIO);
    ck_assert_int_eq(r.attempts, 5);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_400_retried_only_for_transient_codes)
{
    srv_start(h_400_code);
    struct om_http *h = engine(5, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -EIO);
    ck_assert_int_eq(r.attempts, 2);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.resp_body.data, "InvalidArgument"));
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_stall_times_out)
{
    srv_start(h_stall);
    struct om_http *h = engine(1, 1000);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    uint64_t t0 = om_now_ms();
    ck_assert_int_eq(om_http_perform(h, &r), -ETIMEDOUT);
    uint64_t took = om_now_ms() - t0;
    /* the timeout's effect: the client gave up on the stalled response (the
     * server saw it hang up, having not given up itself), not before a
     * second without a byte, and within ten (a margin that holds under the
     * sanitizers on a loaded machine; the watchdog ticks each second) */
    ck_assert_int_eq(stall_hangups_within_10s(), 1);
    ck_assert_int_eq(S.stall_gave_up, 0);
    ck_assert_uint_ge(took, 1000);
    ck_assert_uint_lt(took, 10000);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

static void on_done(struct om_http_req *r, void *ud)
{
    (void)r;
    *(volatile int *)ud = 1;
}

START_TEST(test_cancel_ends_request)
{
    srv_start(h_stall);
    struct om_http *h = engine(1, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    volatile int done = 0;
    ck_assert_int_eq(om_http_submit(h, &r, on_done, (void *)&done), 0);
    usleep(200000);
    uint64_t t0 = om_now_ms();
    om_http_cancel(h, &r);
    while (!done && om_now_ms() - t0 < STALL_MAX_MS)
        usleep(1000);
    /* the cancel ended it: done, ECANCELED, the connection dropped while
     * the server still stalled (no stall timeout set: the default is 30 s) */
    ck_assert_int_eq(done, 1);
    ck_assert_int_eq(r.error, -ECANCELED);
    ck_assert_int_eq(stall_hangups_within_10s(), 1);
    ck_assert_int_eq(S.stall_gave_up, 0);
    om_http_req_cleanup(&r);
    om_http_free(h);
    srv_stop();
}
END_TEST

START_TEST(test_refused_connection_retried_then_fails)
{
    srv_start(h_ok);
    srv_stop(); /* the port is now closed */
    struct om_http *h = engine(3, 0);
    struct om_http_req r;
    req_setup(&r, "GET", "/k", NULL);
    ck_assert_int_eq(om_http_perform(h, &r), -EHOSTUNREACH);
    ck_assert_int_eq(r.attempts, 3);
    om_http_req_cleanup(&r);
    om_http_free(h);
}
END_TEST

START_TEST(test_retry_policy_table)
{
    ck_assert(om_http_retryable(0, 500, false, true, true));
    ck_assert(om_http_retryable(0, 502, false, true, true));
    ck_assert(om_http_retryable(0, 503, false, true, true));
    ck_assert(om_http_retryable(0, 504, false, true, true));
    ck_assert(om_http_retryable(0, 429, false, true, true));
    ck_assert(om_http_retryable(0, 400, true, true, true));
    ck_assert(om_http_retryable(0, 200, true, true, true));
    ck_assert(!om_http_retryable(0, 404, false, true, true));
    ck_assert(!om_http_retryable(0, 403, false, true, true));
    ck_assert(!om_http_retryable(0, 412, false, true, true));
    ck_assert(!om_http_retryable(0, 503, false, false, true));
    /* CURLE_COULDNT_CONNECT = 7: nothing was sent, safe even when not idempotent */
    ck_assert(om_http_retryable(7, 0, false, false, false));
    /* CURLE_RECV_ERROR = 56 after the body went out: only when idempotent */
    ck_assert(om_http_retryable(56, 0, false, true, true));
    ck_assert(!om_http_retryable(56, 0, false, false, true));
    /* CURLE_PARTIAL_FILE = 18 (short body) */
    ck_assert(om_http_retryable(18, 0, false, true, false));
}
END_TEST

START_TEST(test_backoff_is_capped_full_jitter)
{
    ck_assert_int_eq(om_http_backoff_ms(100, 10000, 1, 0.999999), 99);
    ck_assert_int_eq(om_http_backoff_ms(100, 10000, 2, 0.5), 100);
    ck_assert_int_eq(om_http_backoff_ms(100, 10000, 4, 1.0), 800);
    ck_assert_int_eq(om_http_backoff_ms(100, 10000, 30, 1.0), 10000);
    ck_assert_int_eq(om_http_backoff_ms(100, 10000, 30, 0.0), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("engine");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_connections_are_reused);
    tcase_add_test(tc, test_503_slowdown_is_retried);
    tcase_add_test(tc, test_short_body_is_retried_and_sink_reset);
    tcase_add_test(tc, test_short_body_is_eio);
    tcase_add_test(tc, test_307_put_keeps_method_body_and_query_and_resigns);
    tcase_add_test(tc, test_303_becomes_get);
    tcase_add_test(tc, test_redirect_loop_detected);
    tcase_add_test(tc, test_redirect_hops_bounded);
    tcase_add_test(tc, test_https_to_http_refused);
    tcase_add_test(tc, test_region_hint_resigns);
    tcase_add_test(tc, test_non_idempotent_not_replayed);
    tcase_add_test(tc, test_400_retried_only_for_transient_codes);
    tcase_add_test(tc, test_stall_times_out);
    tcase_add_test(tc, test_cancel_ends_request);
    tcase_add_test(tc, test_refused_connection_retried_then_fails);
    tcase_add_test(tc, test_retry_policy_table);
    tcase_add_test(tc, test_backoff_is_capped_full_jitter);
    suite_add_tcase(s, tc);
    return om_check_run(s);
}
