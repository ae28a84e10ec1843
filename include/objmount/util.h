/* Small shared helpers: growable buffers, strings, times. */
#ifndef OBJMOUNT_UTIL_H
#define OBJMOUNT_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#define OM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define OM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define OM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* A growable byte buffer, always NUL-terminated when data is non-NULL.
 * Zero-initialise; release with om_buf_free(). Appends return 0 or -ENOMEM
 * (the buffer is unchanged on failure). */
struct om_buf {
    char *data;
    size_t len;
    size_t cap;
};

int om_buf_append(struct om_buf *b, const void *data, size_t len);
int om_buf_puts(struct om_buf *b, const char *s);
int om_buf_printf(struct om_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void om_buf_reset(struct om_buf *b);
void om_buf_free(struct om_buf *b);
/* Hand the data to the caller (who frees it); the buffer becomes empty.
 * Returns "" duplicated when empty, or NULL on allocation failure. */
char *om_buf_steal(struct om_buf *b);

/* snprintf into a fixed buffer; returns -ENAMETOOLONG when truncated. */
int om_strlcpy(char *dst, const char *src, size_t size);

/* Case-insensitive prefix test; returns the rest of s after the prefix or NULL. */
const char *om_str_skip_prefix_ci(const char *s, const char *prefix);

/* Trim ASCII whitespace at both ends in place; returns s. */
char *om_str_trim(char *s);

/* The one parser for a plain decimal number from a server or a user: digits
 * only (no sign, space or suffix), at most max and never above 2^63-1 (so it
 * fits off_t and time_t). Returns 0, -EINVAL (not a number) or -ERANGE (too
 * large); *out is untouched on failure. */
#define OM_UINT_MAX ((uint64_t)INT64_MAX)
int om_parse_uint(const char *s, uint64_t max, uint64_t *out);
/* The same for s[0..len) (not NUL-terminated). */
int om_parse_uint_n(const char *s, size_t len, uint64_t max, uint64_t *out);

/* Parse a decimal unsigned integer with optional size suffix
 * (k, m, g, t, with optional "i" and "b": 8M, 8MiB, 1g). Returns 0 or -EINVAL. */
int om_parse_size(const char *s, uint64_t *out);
/* Parse a duration: plain number = seconds; suffixes ms, s, m, h, d.
 * Result in milliseconds. Returns 0 or -EINVAL. */
int om_parse_duration_ms(const char *s, uint64_t *out);
/* Parse a boolean: 1/0, yes/no, true/false, on/off. */
int om_parse_bool(const char *s, bool *out);

/* ISO 8601 UTC as S3 writes it ("2009-10-12T17:50:30.000Z"). -EINVAL if not. */
int om_parse_iso8601(const char *s, time_t *out);
/* An HTTP date (IMF-fixdate, RFC 850 or asctime), via curl_getdate: no locale.
 * Returns 0 or -EINVAL. */
int om_parse_http_date(const char *s, time_t *out);

/* A condition variable on the monotonic clock, which om_cond_wait_ms needs. */
void om_cond_init_monotonic(pthread_cond_t *c);

/* Wait on c (made with om_cond_init_monotonic) for at most ms
 * milliseconds; caller holds mu. Returns pthread_cond_timedwait's result. */
int om_cond_wait_ms(pthread_cond_t *c, pthread_mutex_t *mu, uint64_t ms);

/* Run fn(arg) on a thread of its own and wait at most timeout_ms for it,
 * calling progress(pud, elapsed_ms) once when it is still running after
 * progress_ms (0 or progress NULL: never). Returns 0 when fn finished (its
 * return value in *result, which may be NULL), -ETIMEDOUT when it did not:
 * the thread then runs on, detached, with arg, which must stay valid for it
 * (the process typically exits). -ENOMEM or -EAGAIN when no thread starts. */
int om_run_bounded(int (*fn)(void *), void *arg, uint64_t timeout_ms, uint64_t progress_ms,
                   void (*progress)(void *, uint64_t), void *pud, int *result);

/* Monotonic clock in milliseconds and nanoseconds. */
uint64_t om_now_ms(void);
uint64_t om_now_ns(void);

/* Nothing is open for reading or writing any more: hand the pages the
 * allocator keeps free (spread over the heaps of every FUSE, engine and
 * worker thread that allocated them) back to the system, at most once a
 * second. Takes no lock of the caller's. */
void om_heap_idle(void);

/* The thread group (process) of thread id tid, from /proc/TID/status: 0
 * when tid is 0 or gone. A FUSE request carries the calling thread's id. */
pid_t om_tgid_of(pid_t tid);

#endif
