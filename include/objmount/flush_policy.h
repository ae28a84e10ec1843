/* What a FLUSH of a file open for writing does: a pure function of plain
 * facts (tests/unit/test_flush_policy.c has a case for each), executed by
 * the writer (om_writer_flush).
 *
 * The kernel sends a FLUSH for every close() of every descriptor: the
 * original after a dup2() (dd, `cmd > file` in a shell), a copy inherited
 * by a child at the child's exit, each thread's close. Committing at each
 * one stores halves: an empty object right after an O_TRUNC open, a torn
 * object at a child's exit. The rules (doc/decisions.md, "When a file is
 * committed"):
 *  - a failed write sticks: every flush returns its error, nothing is
 *    committed from the writer again;
 *  - a flush by a process other than the one that opened the handle (a
 *    child holding an inherited descriptor) commits nothing: the opener's
 *    own close, an fsync or the last release does;
 *  - when the only change since the last commit is the truncation an
 *    O_TRUNC open made of a stored object (dd and `>` before their first
 *    write), the flush commits nothing: the first write's flush, an fsync
 *    or the last release stores it, so a program that then fails leaves
 *    the old object;
 *  - otherwise the opener's flush commits, and close() returns the truth.
 * fsync always commits what is pending (it is asked for). */
#ifndef OBJMOUNT_FLUSH_POLICY_H
#define OBJMOUNT_FLUSH_POLICY_H

#include <stdbool.h>

/* Who sends the flush, compared with who opened the handle. */
enum om_flusher {
    OM_FLUSHER_OPENER,  /* the process (thread group) that opened it */
    OM_FLUSHER_OTHER,   /* another process: a child, or one handed the descriptor */
    OM_FLUSHER_UNKNOWN, /* no pid to compare (a process outside the daemon's pid
                         * namespace): treated as the opener, so close() tells
                         * the truth as before */
};

struct om_flush_facts {
    enum om_flusher flusher;
    bool write_error;  /* a write or truncate of this file failed */
    bool discarded;    /* unlinked while open: nothing to store */
    bool dirty;        /* changed since the last commit */
    bool trunc_only;   /* the only change: an O_TRUNC open emptied a stored object */
};

enum om_flush_action {
    OM_FLUSH_NOTHING, /* nothing pending: 0 */
    OM_FLUSH_ERROR,   /* return the failed write's error; commit nothing */
    OM_FLUSH_DEFER,   /* pending, but not this flush's to store: 0 */
    OM_FLUSH_COMMIT,  /* commit now; the result is the flush's */
};

enum om_flush_action om_flush_decide(const struct om_flush_facts *f);

const char *om_flush_action_name(enum om_flush_action a);

#endif
