"""Process helpers shared by the test servers, the fault proxy and the mounts.

REPO_ROOT              the repository's root
node_binary()          the node executable (the fault proxy runs on Node.js)
set_pdeathsig()        in a child: SIGTERM when the parent dies
kill_group(pid)        SIGTERM, then SIGKILL, the process group led by pid
free_ports(n)          n loopback ports the kernel calls free now
unlimited_retry_quota()  botocore retries each call up to its attempts
ServerError, ServerNotInstalled
"""

import os
import shutil
import signal
import socket
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ServerError(RuntimeError):
    pass


class ServerNotInstalled(ServerError):
    """A program the server needs is missing: starting again will not help."""


def node_binary():
    """The node executable: $OBJMOUNT_NODE, else `node` on PATH."""
    return os.environ.get("OBJMOUNT_NODE") or shutil.which("node") or "node"


def set_pdeathsig():
    """In the child: get SIGTERM when the parent dies (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except Exception:  # pragma: no cover - best effort
        pass


def kill_group(pid, timeout=5.0):
    """SIGTERM the process group led by pid, then SIGKILL after timeout."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                # reap if it is our child; otherwise just probe
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == pid:
                    return
            except ChildProcessError:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
            time.sleep(0.02)


def free_ports(n, host="127.0.0.1"):
    """n distinct ports the kernel calls free now on host (bound, then
    released): a server started on them may still lose one to another
    process in between, so its start is retried on fresh ports."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def unlimited_retry_quota():
    """botocore's standard retry mode gives each client a quota of 500
    tokens and takes 5 per retried error: a storm of 503s on a loaded machine
    (Swift answering "Please reduce your request rate" while 20,000 keys were
    seeded) emptied a session's client, and every later set-up call failed at
    its first 503 without a retry. Test clients retry each call up to their
    attempts, whatever came before."""
    from botocore.retries import quota
    quota.RetryQuota.__init__.__defaults__ = (1 << 40, None)
