/* Logging: one line per event, to stderr (foreground) or syslog (daemon).
 *
 * Nothing secret is ever passed to these functions: callers log keys, status
 * codes and error codes, never Authorization, signatures, tokens or secrets.
 * All functions are thread-safe. */
#ifndef OBJMOUNT_LOG_H
#define OBJMOUNT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum om_log_level {
    OM_LOG_ERROR = 0,
    OM_LOG_WARN = 1,
    OM_LOG_INFO = 2,
    OM_LOG_DEBUG = 3,
};

/* Select the destination and threshold. ident names the program in syslog.
 * May be called again (e.g. after daemonizing). */
void om_log_init(const char *ident, enum om_log_level level, bool to_syslog);

/* Parse "error", "warn", "info" or "debug". Returns 0 or -EINVAL. */
int om_log_level_parse(const char *s, enum om_log_level *out);

void om_log_set_level(enum om_log_level level);
bool om_log_enabled(enum om_log_level level);

void om_log(enum om_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The last error or warning logged (whatever the threshold), for status
 * output. Returns false when there was none. */
bool om_log_last_problem(char *buf, size_t n, time_t *when);

/* Copy s[0..len) into out (size n, always NUL-terminated when n > 0) with
 * control bytes, DEL, backslash and bytes that are not valid UTF-8 written as
 * \xNN (backslash as \\), so a key or a server string cannot forge log lines
 * or terminal escapes. Returns the length the full escape needs (like
 * snprintf). Every log line goes through it (om_log). Pure. */
size_t om_log_escape(const char *s, size_t len, char *out, size_t n);

#define om_error(...) om_log(OM_LOG_ERROR, __VA_ARGS__)
#define om_warn(...) om_log(OM_LOG_WARN, __VA_ARGS__)
#define om_info(...) om_log(OM_LOG_INFO, __VA_ARGS__)
#define om_debug(...)                                                                              \
    do {                                                                                           \
        if (om_log_enabled(OM_LOG_DEBUG))                                                          \
            om_log(OM_LOG_DEBUG, __VA_ARGS__);                                                     \
    } while (0)

#endif
