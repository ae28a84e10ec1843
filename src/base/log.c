/* Logging to stderr or syslog. */
#include "objmount/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>

#include "objmount/util.h"

static atomic_int log_level = OM_LOG_WARN;
static atomic_bool log_syslog = false;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_ident[32] = "objmount";

static char last_problem[512];
static time_t last_problem_time;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void om_log_init(const char *ident, enum om_log_level level, bool to_syslog)
{
    pthread_mutex_lock(&log_lock);
    if (ident)
        snprintf(log_ident, sizeof(log_ident), "%s", ident);
    if (to_syslog)
        openlog(log_ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
    pthread_mutex_unlock(&log_lock);
    atomic_store(&log_level, level);
    atomic_store(&log_syslog, to_syslog);
}

int om_log_level_parse(const char *s, enum om_log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum om_log_level)i;
            return 0;
        }
    }
    if (strcmp(s, "warning") == 0) {
        *out = OM_LOG_WARN;
        return 0;
    }
    return -EINVAL;
}

void om_log_set_level(enum om_log_level level)
{
    atomic_store(&log_level, level);
}

bool om_log_enabled(enum om_log_level level)
{
    return (int)level <= atomic_load(&log_level);
}

bool om_log_last_problem(char *buf, size_t n, time_t *when)
{
    pthread_mutex_lock(&log_lock);
    bool have = last_problem[0] != '\0';
    if (n)
        snprintf(buf, n, "%s", last_problem);
    if (when)
        *when = last_problem_time;
    pthread_mutex_unlock(&log_lock);
    return have;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k;
    unsigned cp;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        k = 2;
        cp = s[0] & 0x1f;
    } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        k = 3;
        cp = s[0] & 0x0f;
    } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        k = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    /* C1 controls (U+0080..U+009F) act as escapes on some terminals */
    if (k == 2 && cp < 0xa0)
        return 0;
    return k;
}

size_t om_log_escape(const char *s, size_t len, char *out, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < n)                                                                             \
            out[o] = (char)(c);                                                                    \
        o++;                                                                                       \
    } while (0)
    for (size_t i = 0; i < len;) {
        size_t k = p[i] < 0x80 ? 1 : utf8_len(p + i, len - i);
        if (k == 1 && p[i] >= 0x20 && p[i] != 0x7f && p[i] != '\\') {
            PUT(p[i]);
        } else if (k == 1 && p[i] == '\\') {
            PUT('\\');
            PUT('\\');
        } else if (k > 1) {
            for (size_t j = 0; j < k; j++)
                PUT(p[i + j]);
            i += k;
            continue;
        } else {
            PUT('\\');
            PUT('x');
            PUT(hex[p[i] >> 4]);
            PUT(hex[p[i] & 15]);
        }
        i++;
    }
#undef PUT
    if (n)
        out[o < n ? o : n - 1] = '\0';
    return o;
}

void om_log(enum om_log_level level, const char *fmt, ...)
{
    bool problem = level <= OM_LOG_WARN;
    if (!om_log_enabled(level) && !problem)
        return;
    char raw[2048], msg[4096];
    va_list ap;
    va_start(ap, fmt);
    int rn = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    size_t rlen = rn < 0 ? 0 : OM_MIN((size_t)rn, sizeof(raw) - 1);
    om_log_escape(raw, rlen, msg, sizeof(msg));
    if (problem) {
        pthread_mutex_lock(&log_lock);
        snprintf(last_problem, sizeof(last_problem), "%.511s", msg);
        last_problem_time = time(NULL);
        pthread_mutex_unlock(&log_lock);
    }
    if (!om_log_enabled(level))
        return;

    if (atomic_load(&log_syslog)) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        syslog(prio[level], "%s", msg);
        return;
    }
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s: %s\n", tm.tm_year + 1900,
            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
            log_ident, level_names[level], msg);
    pthread_mutex_unlock(&log_lock);
}
