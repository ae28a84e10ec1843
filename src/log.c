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

void om_log(enum om_log_level level, const char *fmt, ...)
{
    bool problem = level <= OM_LOG_WARN;
    if (!om_log_enabled(level) && !problem)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
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
