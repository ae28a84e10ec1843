"""Process helpers shared by the test servers, the fault proxy and the mounts.

REPO_ROOT              the repository's root
node_binary()          the node executable (the fault proxy runs on Node.js)
set_pdeathsig()        in a child: SIGTERM when the parent dies
kill_group(pid)        SIGTERM, then SIGKILL, the process group led by pid
free_ports(n)          n loopback ports the kernel calls free now
reserve_ports(n, hosts)  n ports below the kernel's ephemeral range, held
                       for this process by lock files until released
unlimited_retry_quota()  botocore retries each call up to its attempts
ServerError, ServerNotInstalled
"""

import errno
import fcntl
import os
import random
import shutil
import signal
import socket
import tempfile
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


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class PortReservation:
    """Ports held for one server until release(): a lock file per port
    (flock, so a process that dies gives them back) in the temporary
    directory, shared by every pytest worker and benchmark."""

    def __init__(self, ports, fds):
        self.ports, self._fds = ports, fds

    def release(self):
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def reserve_ports(n, hosts=("127.0.0.1",), lo=20000):
    """n ports free on every one of hosts, from [lo, the kernel's ephemeral
    range): the kernel never hands them out for bind(0) or an outgoing
    connection, and the lock files keep another harness from choosing one.
    A server whose process dies and starts again on the same port (an
    AIStore target killed by a test) finds it still free: with free_ports a
    port released by a killed target was taken by another worker's server
    starting at that moment, and both clusters broke."""
    hi = _ephemeral_low()
    if hi - lo < 100:
        lo, hi = 10000, 20000
    lockdir = os.path.join(tempfile.gettempdir(), "objmount-port-locks")
    os.makedirs(lockdir, exist_ok=True)
    ports, fds = [], []
    for port in random.sample(range(lo, hi), hi - lo):
        if len(ports) == n:
            break
        fd = os.open(os.path.join(lockdir, str(port)), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                continue
            raise
        if all(_bindable(h, port) for h in hosts):
            ports.append(port)
            fds.append(fd)
        else:
            os.close(fd)
    if len(ports) < n:
        PortReservation(ports, fds).release()
        raise ServerError("no %d free ports in [%d, %d)" % (n, lo, hi))
    return PortReservation(ports, fds)


def _bindable(host, port):
    s = socket.socket()
    try:
        s.bind((host, port))
        return True
    except OSError:
        return False
    finally:
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
