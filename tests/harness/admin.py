"""objmount's administration programs, driven from tests.

    from harness import admin
    p = admin.ctl(["stats", m.path, "--prometheus"])        # objmountctl, test credentials
    p = admin.ctl(["status"], user=65534)                   # the same as nobody (setpriv)
    line = admin.one_error_line(p, "objmountctl stats /tmp")  # rc != 0, one stderr line
    admin.socket_path(m.path)                               # /run/objmount/<hex>.sock (root)
    admin.wait_socket(m.path)                               # True once the daemon listens
    admin.write_credentials(path, mode=0o600)               # "ACCESS:SECRET" file
    with admin.installed_mount_helper():                    # /sbin/mount.objmount -> build
        admin.run_mount(["-t", "objmount", src, dir, "-o", opts])  # mount(8), empty env
    with admin.S3fs(bucket, endpoint) as s:                 # s3fs-fuse on the same bucket
        os.stat(s.join("key"))

ctl(args, env=None, user=None, timeout=60) runs build/tools/objmountctl with
the test credentials in its environment (env adds or, with None values,
removes variables) and returns a CompletedProcess with text output. user=UID
runs it through `setpriv --reuid=UID --regid=UID --clear-groups`.

installed_mount_helper() makes /sbin/mount.objmount a symlink to the built
helper for the duration of the block, so that mount(8) finds it. A symlink
that already points there is used and left alone; anything else found there
is moved aside and put back afterwards; a link we created is removed.

run_mount(argv) / run_umount(argv) run mount(8) / umount(8) the way init
systems do: with an empty environment (PATH only), so credentials must come
from a credentials= file, never from AWS_* variables.

S3fs(bucket, endpoint, opts="", mountpoint=None) mounts the bucket with
s3fs-fuse in the foreground (path-style requests, a 0600 passwd file with the
test keys, stat cache off) and unmounts it (fusermount3 -u, waiting for the
process) when the block ends; at interpreter exit too.
"""

import atexit
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from contextlib import contextmanager

from . import procs, servers
from .mount import _fusermount, _stop_pid, daemon_env, is_mounted
from .omtools import tool

HELPER_LINK = "/sbin/mount.objmount"
HELPER_LOCK = os.path.join(tempfile.gettempdir(), "objmount-test-mount-helper.lock")
CLEAN_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


# -- objmountctl -------------------------------------------------------------------
def ctl(args, env=None, user=None, timeout=60, input=None):
    """Run objmountctl once; CompletedProcess with text stdout/stderr."""
    cmd = [tool("objmountctl")] + [str(a) for a in args]
    if user is not None:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + cmd
    return subprocess.run(cmd, env=daemon_env(env), capture_output=True, text=True,
                          errors="replace", timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL)


def one_error_line(p, what):
    """p failed (non-zero exit) with exactly one non-empty line on stderr;
    returns that line. AssertionError (showing both streams) otherwise."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode != 0, "%s: exit status 0 for bad input\nstdout: %s\nstderr: %s" % (
        what, p.stdout, p.stderr)
    assert len(lines) == 1, "%s: want one line on stderr, got %d:\n%s" % (
        what, len(lines), p.stderr)
    return lines[0]


def stats_json(mountpoint):
    """`objmountctl stats --json MOUNTPOINT`: the object of that mount."""
    p = ctl(["stats", "--json", mountpoint])
    assert p.returncode == 0, p.stderr
    arr = json.loads(p.stdout)
    arr = arr if isinstance(arr, list) else [arr]
    found = [o for o in arr if o.get("mountpoint") == mountpoint]
    assert found, arr
    return found[0]


def socket_path(mountpoint, uid=0):
    """Where the daemon of mountpoint listens (root: /run/objmount/<hex>.sock,
    hex = the first 8 bytes of SHA-256 of the mount point path)."""
    import hashlib

    h = hashlib.sha256(mountpoint.encode()).hexdigest()[:16]
    if uid == 0:
        d = "/run/objmount"
    elif os.path.isdir("/run/user/%d" % uid):
        d = "/run/user/%d/objmount" % uid
    else:
        d = "/tmp/objmount-%d" % uid
    return os.path.join(d, h + ".sock")


def wait_socket(mountpoint, uid=0, timeout=10.0):
    """Wait until the daemon of mountpoint listens on its admin socket (a
    foreground daemon shows in the mount table a moment before). True/False."""
    from .mount import wait_for

    return wait_for(lambda: os.path.exists(socket_path(mountpoint, uid)), timeout)


# -- credentials ----------------------------------------------------------------------
def write_credentials(path, mode=0o600, access=None, secret=None):
    """An s3fs-style credentials file ("ACCESS:SECRET", or the AWSAccessKeyId=
    form when the key has a colon) with the given mode; the selected test
    server's keys by default."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(servers.credentials_line(access, secret))
    os.chmod(path, mode)
    return path


# -- mount(8) and the helper ------------------------------------------------------------
def helper_binary():
    return tool("mount.objmount")


@contextmanager
def installed_mount_helper(link=HELPER_LINK):
    """/sbin/mount.objmount -> build/tools/mount.objmount inside the block.
    The link is the machine's: a test run beside this one (tools/test.sh
    runs the two servers' passes at once) waits for the block to end."""
    lock = open(HELPER_LOCK, "a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with _helper_link(link) as path:
            yield path
    finally:
        lock.close()


@contextmanager
def _helper_link(link):
    target = helper_binary()
    saved = None
    created = False
    if os.path.islink(link) and os.path.realpath(link) == os.path.realpath(target):
        pass  # already ours (another run put it there): use it, leave it
    else:
        if os.path.lexists(link):
            saved = link + ".objmount-test-saved-%d" % os.getpid()
            os.rename(link, saved)
        os.symlink(target, link)
        created = True
    try:
        yield link
    finally:
        if created:
            try:
                if os.path.islink(link) and os.readlink(link) == target:
                    os.unlink(link)
            except OSError:
                pass
        if saved:
            os.rename(saved, link)


def _clean_env():
    return {"PATH": CLEAN_PATH, "LC_ALL": "C"}


def run_mount(args, timeout=60):
    """mount(8) with args, as fstab/init would run it: no environment but PATH."""
    return subprocess.run(["mount"] + [str(a) for a in args], env=_clean_env(),
                          capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


def run_umount(args, timeout=60):
    return subprocess.run(["umount"] + [str(a) for a in args], env=_clean_env(),
                          capture_output=True, text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


def pids_serving(mountpoint):
    """Pids of objmount daemons whose argv names mountpoint."""
    from .mount import daemon_pids

    out = []
    for pid in daemon_pids(mountpoint):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                argv0 = f.read().split(b"\0")[0]
        except OSError:
            continue
        if os.path.basename(argv0) == b"objmount":
            out.append(pid)
    return out


def force_unmount(mountpoint):
    """Cleanup after a test that mounted with mount(8): lazy unmount and stop
    the daemon serving exactly this mount point."""
    if is_mounted(mountpoint):
        _fusermount(mountpoint, lazy=True)
    for pid in pids_serving(mountpoint):
        _stop_pid(pid)


# -- s3fs-fuse on the same bucket -----------------------------------------------------------
_s3fs_live = {}


class S3fs:
    def __init__(self, bucket, endpoint, opts="", mountpoint=None, timeout=20.0):
        self.bucket = bucket
        self.endpoint = endpoint
        self.opts = opts
        self.path = mountpoint
        self.timeout = timeout
        self.proc = None
        self.dir = None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="objmount-s3fs-")
        if self.path is None:
            self.path = os.path.join(self.dir, "mnt")
            os.mkdir(self.path)
        self.path = os.path.realpath(self.path)
        pw = os.path.join(self.dir, "passwd")
        write_credentials(pw)
        url = self.endpoint.rstrip("/")
        o = ",".join(x for x in ("url=" + url, "use_path_request_style", "passwd_file=" + pw,
                                 "max_stat_cache_size=0", "stat_cache_expire=1", self.opts) if x)
        self.log_path = os.path.join(self.dir, "s3fs.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(["s3fs", self.bucket, self.path, "-f", "-o", o],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         preexec_fn=procs.set_pdeathsig)
        _s3fs_live[self.path] = self
        deadline = time.monotonic() + self.timeout
        while not is_mounted(self.path):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log
                self.stop()
                raise RuntimeError("s3fs did not mount %s:\n%s" % (self.bucket, log[-4000:]))
            time.sleep(0.02)
        return self

    @property
    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, AttributeError):
            return ""

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    def stop(self):
        if self.path and is_mounted(self.path):
            for attempt in range(10):
                if _fusermount(self.path).returncode == 0 or not is_mounted(self.path):
                    break
                time.sleep(0.1 * (attempt + 1))
            if is_mounted(self.path):
                _fusermount(self.path, lazy=True)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _stop_pid(self.proc.pid, self.proc)
            self.proc = None
        _s3fs_live.pop(self.path, None)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


@atexit.register
def _sweep_s3fs():
    for s in list(_s3fs_live.values()):
        try:
            s.stop()
        except Exception:
            pass
