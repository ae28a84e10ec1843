/* Small shared helpers. */
#include "objmount/util.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int buf_reserve(struct om_buf *b, size_t extra)
{
    if (b->len + extra + 1 <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return -ENOMEM;
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p)
        return -ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int om_buf_append(struct om_buf *b, const void *data, size_t len)
{
    if (buf_reserve(b, len))
        return -ENOMEM;
    if (len)
        memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

int om_buf_puts(struct om_buf *b, const char *s)
{
    return om_buf_append(b, s, strlen(s));
}

int om_buf_printf(struct om_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    if (buf_reserve(b, (size_t)n))
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void om_buf_reset(struct om_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void om_buf_free(struct om_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *om_buf_steal(struct om_buf *b)
{
    char *p = b->data ? b->data : strdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

int om_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (n >= size) {
        if (size) {
            memcpy(dst, src, size - 1);
            dst[size - 1] = '\0';
        }
        return -ENAMETOOLONG;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

const char *om_str_skip_prefix_ci(const char *s, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncasecmp(s, prefix, n) == 0 ? s + n : NULL;
}

char *om_str_trim(char *s)
{
    char *start = s;
    while (*start && isspace((unsigned char)*start))
        start++;
    size_t n = strlen(start);
    while (n > 0 && isspace((unsigned char)start[n - 1]))
        n--;
    memmove(s, start, n);
    s[n] = '\0';
    return s;
}

int om_parse_uint_n(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    if (!s || len == 0)
        return -EINVAL;
    if (max > OM_UINT_MAX)
        max = OM_UINT_MAX;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -EINVAL;
        unsigned d = (unsigned)(s[i] - '0');
        if (d > max || v > (max - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int om_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    return s ? om_parse_uint_n(s, strlen(s), max, out) : -EINVAL;
}

int om_parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -EINVAL;
    uint64_t mult = 1;
    switch (tolower((unsigned char)*end)) {
    case '\0':
        break;
    case 'k':
        mult = 1ULL << 10;
        break;
    case 'm':
        mult = 1ULL << 20;
        break;
    case 'g':
        mult = 1ULL << 30;
        break;
    case 't':
        mult = 1ULL << 40;
        break;
    case 'b':
        if (end[1] == '\0') {
            *out = v;
            return 0;
        }
        return -EINVAL;
    default:
        return -EINVAL;
    }
    if (*end) {
        end++;
        if (tolower((unsigned char)*end) == 'i')
            end++;
        if (tolower((unsigned char)*end) == 'b')
            end++;
        if (*end)
            return -EINVAL;
    }
    if (v > UINT64_MAX / mult)
        return -EINVAL;
    *out = v * mult;
    return 0;
}

int om_parse_duration_ms(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || v < 0)
        return -EINVAL;
    double mult;
    if (*end == '\0' || strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
        mult = 60e3;
    else if (strcmp(end, "h") == 0)
        mult = 3600e3;
    else if (strcmp(end, "d") == 0)
        mult = 86400e3;
    else
        return -EINVAL;
    double ms = v * mult;
    if (ms > 1e15)
        return -EINVAL;
    *out = (uint64_t)ms;
    return 0;
}

int om_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "yes", "true", "on"};
    static const char *const no[] = {"0", "no", "false", "off"};
    for (size_t i = 0; i < OM_ARRAY_LEN(yes); i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -EINVAL;
}

int om_parse_iso8601(const char *s, time_t *out)
{
    struct tm tm = {0};
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6)
        return -EINVAL;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm);
    if (t == (time_t)-1)
        return -EINVAL;
    *out = t;
    return 0;
}

int om_parse_http_date(const char *s, time_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    time_t t = curl_getdate(s, NULL);
    if (t == (time_t)-1)
        return -EINVAL;
    *out = t;
    return 0;
}

uint64_t om_now_ms(void)
{
    return om_now_ns() / 1000000u;
}

void om_heap_idle(void)
{
    static uint64_t last_ms; /* atomic */
    uint64_t now = om_now_ms(), last = __atomic_load_n(&last_ms, __ATOMIC_RELAXED);
    if (now - last < 1000 ||
        !__atomic_compare_exchange_n(&last_ms, &last, now, false, __ATOMIC_RELAXED,
                                     __ATOMIC_RELAXED))
        return;
    malloc_trim(0);
}

pid_t om_tgid_of(pid_t tid)
{
    if (tid <= 0)
        return 0;
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    pid_t tgid = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Tgid:", 5) == 0) {
            long v = strtol(line + 5, NULL, 10);
            tgid = v > 0 ? (pid_t)v : 0;
            break;
        }
    }
    fclose(f);
    return tgid;
}

uint64_t om_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- bounded calls ---- */

struct bounded {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int (*fn)(void *);
    void *arg;
    int result;
    bool done;
    int refs; /* the caller and the thread; the last one frees */
};

static void bounded_put(struct bounded *b)
{
    pthread_mutex_lock(&b->lock);
    bool last = --b->refs == 0;
    pthread_mutex_unlock(&b->lock);
    if (last) {
        pthread_cond_destroy(&b->cond);
        pthread_mutex_destroy(&b->lock);
        free(b);
    }
}

static void *bounded_main(void *p)
{
    struct bounded *b = p;
    int r = b->fn(b->arg);
    pthread_mutex_lock(&b->lock);
    b->result = r;
    b->done = true;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    bounded_put(b);
    return NULL;
}

void om_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

int om_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *mu, uint64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_cond_timedwait(c, mu, &ts);
}

int om_run_bounded(int (*fn)(void *), void *arg, uint64_t timeout_ms, uint64_t progress_ms,
                   void (*progress)(void *, uint64_t), void *pud, int *result)
{
    struct bounded *b = calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    pthread_mutex_init(&b->lock, NULL);
    om_cond_init_monotonic(&b->cond);
    b->fn = fn;
    b->arg = arg;
    b->refs = 2;
    pthread_t t;
    if (pthread_create(&t, NULL, bounded_main, b) != 0) {
        b->refs = 1;
        bounded_put(b);
        return -EAGAIN;
    }
    pthread_detach(t);
    uint64_t start = om_now_ms();
    bool told = !progress || !progress_ms;
    pthread_mutex_lock(&b->lock);
    while (!b->done) {
        uint64_t now = om_now_ms(), until = start + timeout_ms;
        if (now >= until)
            break;
        if (!told && now >= start + progress_ms) {
            told = true;
            pthread_mutex_unlock(&b->lock);
            progress(pud, now - start);
            pthread_mutex_lock(&b->lock);
            continue;
        }
        if (!told && start + progress_ms < until)
            until = start + progress_ms;
        om_cond_wait_ms(&b->cond, &b->lock, until - now);
    }
    bool done = b->done;
    if (done && result)
        *result = b->result;
    pthread_mutex_unlock(&b->lock);
    bounded_put(b);
    return done ? 0 : -ETIMEDOUT;
}
