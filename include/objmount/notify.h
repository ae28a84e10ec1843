/* The service manager's readiness protocol (sd_notify(3)) without libsystemd:
 * one datagram of "KEY=VALUE" lines to the Unix socket named by
 * $NOTIFY_SOCKET (a path, or "@name" for the abstract namespace). Used by
 * objmount@.service (Type=notify): READY=1 once the mount answers, STATUS=
 * lines, STOPPING=1 when it stops. */
#ifndef OBJMOUNT_NOTIFY_H
#define OBJMOUNT_NOTIFY_H

/* Send state (e.g. "READY=1\nSTATUS=mounted"). Returns 1 when sent, 0 when
 * $NOTIFY_SOCKET is unset (not run by a service manager), or a negative
 * errno. Thread-safe; never blocks for long (a non-blocking send). */
int om_notify(const char *state);

/* The same with printf formatting. */
int om_notifyf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
