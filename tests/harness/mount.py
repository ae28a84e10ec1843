"""A real FUSE mount of objmount for tests, and helpers to check what it reads.

    from harness.mount import Mount
    with Mount("bucket", srv.endpoint, opts="part_size=5M") as m:
        data = open(m.join("dir/key"), "rb").read()
    # left the block: fusermount3 -u, the daemon waited for, exit status 0 checked

Mount(bucket, endpoint, opts="", prefix=None, mountpoint=None, env=None,
      foreground=True, fast_retries=True, timeout=20)
  start()       runs `objmount BUCKET[:PREFIX] MNT -f -o endpoint=URL,OPTS` and
                returns once MNT is in /proc/self/mountinfo; raises MountFailed
                (exit status + stderr) when the daemon exits first or the
                timeout passes, and leaves nothing mounted.
  path          the mount point; join(*parts) builds paths under it
  proc          the daemon's Popen (foreground=True only)
  log           the daemon's stderr so far (text)
  alive()       the daemon is still running (foreground) / still mounted
  unmount(check=True)
                `fusermount3 -u` (retried while busy, then `fusermount3 -uz`),
                waits for the daemon (SIGTERM, then SIGKILL, after a timeout)
                and, with check, raises AssertionError unless the daemon exited
                0 on its own after a clean unmount. Idempotent.
foreground=False runs the daemon without -f (it must daemonize once mounted).

Every mount made here is unmounted at interpreter exit too (atexit sweep:
lazy unmount, then SIGTERM/SIGKILL of the daemon found for that mount point
only), and a foreground daemon gets SIGTERM if the test process dies
(PR_SET_PDEATHSIG), so no mount outlives a run, even on Ctrl-C.

run(args, ...) runs the objmount binary once (for invocations that must fail).
is_mounted(path) reads /proc/self/mountinfo without touching the mount.

OBJMOUNT_TEST_MOUNT=s3fs makes Mount start s3fs-fuse instead (only the
options both understand are passed); it exists to check this harness and
the tests themselves against another implementation.

Data helpers: payload(name, size) is deterministic pseudo-random bytes;
check_bytes(got, want, what) fails with the first differing offset instead of
a diff of megabytes; read_checked(path, want) reads to EOF and accepts only
identical bytes or EIO; seed(s3client, bucket, {key: bytes}) uploads in
parallel; SIZES, SMALL_FILES, size_key() describe the session data set
(fixture data_bucket in tests/integration/conftest.py).

Objects checked with boto3, never through the mount: get_object(s3client,
bucket, key); check_object(s3client, bucket, key, want) compares the stored
bytes and the HEAD size with want; check_object_file(..., path) does the same
against a local file, streaming (for objects too big to hold twice).
random_file(path, size) writes size bytes of os.urandom quickly and returns
their MD5 hex; wait_for(pred, timeout) polls until pred() is true.
"""

import atexit
import errno
import functools
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

from . import procs, servers
from .omtools import BUILD_DIR

OBJMOUNT = os.path.join(BUILD_DIR, "objmount")
IMPL = os.environ.get("OBJMOUNT_TEST_MOUNT", "objmount")
FAST_RETRIES = "retry_base=0.02,retry_max=0.2"

MiB = 1024 * 1024

_created = {}  # mountpoint -> Mount, for the atexit sweep


class MountFailed(RuntimeError):
    """The daemon did not mount. returncode (None: still running at the
    timeout), stderr (its text), mounted (whether the mount point was in the
    mount table when the failure was seen, before the harness cleaned up)."""

    def __init__(self, msg, returncode=None, stderr="", mounted=False):
        super().__init__(msg)
        self.returncode = returncode
        self.stderr = stderr
        self.mounted = mounted


# -- mount table ---------------------------------------------------------------
def _unescape(field):
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts():
    """[(mountpoint, fstype, source)] from /proc/self/mountinfo."""
    rows = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            a, b = left.split(), right.split()
            rows.append((_unescape(a[4]), b[0] if b else "", _unescape(b[1]) if len(b) > 1 else ""))
    return rows


def is_mounted(path):
    """path (absolute, no symlinks) is a mount point; reads mountinfo and
    never touches the mount itself, so a hung or dead daemon cannot block it."""
    return any(mp == path for mp, _, _ in mounts())


def mount_entry(path):
    for row in mounts():
        if row[0] == path:
            return row
    return None


def daemon_pids(mountpoint):
    """Pids of processes whose argv names this exact mount point (our daemon)."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if mountpoint.encode() in argv and int(d) != os.getpid():
            pids.append(int(d))
    return pids


def _set_pdeathsig():
    """In the daemon: SIGTERM when the test process dies, and the default
    dispositions of the signals the tests send. A suite started in the
    background (`cmd &`, nohup) inherits SIGINT and SIGHUP ignored, and
    libfuse leaves ignored signals alone, so signal tests would hang."""
    procs.set_pdeathsig()
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _fusermount(path, lazy=False):
    cmd = ["fusermount3", "-uz" if lazy else "-u", path]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, -1, "", "fusermount3 timed out")


def stacks_of(pid, timeout=30):
    """Every thread's stack of a live process (gdb), for the report of a
    daemon that hangs; '' when gdb is missing or fails."""
    gdb = shutil.which("gdb")
    if not gdb:
        return ""
    try:
        r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                            "-ex", "thread apply all bt"],
                           capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return ""
    return "\n".join(l for l in r.stdout.splitlines() if l.startswith(("#", "Thread")))


def _stop_pid(pid, proc=None, timeout=5.0):
    """SIGTERM then SIGKILL one pid; returns True when it had to be killed."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return sig == signal.SIGKILL
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return True
            else:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return True
            time.sleep(0.02)
    return True


# -- environment -----------------------------------------------------------------
def daemon_env(extra=None):
    """The test credentials, no AWS/AIS variables inherited from the caller."""
    env = dict(os.environ)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AIS_AUTHN_TOKEN", "AWS_ENDPOINT_URL",
                "AIS_ENDPOINT", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
                "AWS_SHARED_CREDENTIALS_FILE"):
        env.pop(var, None)
    env.update({"AWS_ACCESS_KEY_ID": servers.access_key(),
                "AWS_SECRET_ACCESS_KEY": servers.secret_key()})
    if extra:
        for k, v in extra.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
    return env


def binary():
    if not os.path.exists(OBJMOUNT):
        import pytest

        pytest.fail("%s is not built (run: meson setup build && ninja -C build)" % OBJMOUNT)
    return OBJMOUNT


def _join_opts(*parts):
    return ",".join(p for p in parts if p)


def run(args, env=None, timeout=60):
    """Run objmount once with args (list); CompletedProcess with text output."""
    return subprocess.run([binary()] + list(args), env=daemon_env(env), capture_output=True,
                          text=True, errors="replace", timeout=timeout,
                          stdin=subprocess.DEVNULL)


# -- the mount -------------------------------------------------------------------
class Mount:
    def __init__(self, bucket, endpoint, opts="", prefix=None, mountpoint=None, env=None,
                 foreground=True, fast_retries=True, timeout=20.0):
        self.bucket = bucket
        self.endpoint = endpoint
        self.opts = opts or ""
        self.prefix = prefix
        self.env = env
        self.foreground = foreground
        self.fast_retries = fast_retries
        self.timeout = timeout
        self._own_mountpoint = mountpoint is None
        self.path = mountpoint
        self.proc = None
        self.dir = None
        self.returncode = None
        self.killed = False
        self.stacks = ""
        self.lazy = False
        self._done = False
        self._daemon_out = ""

    # -- command line -------------------------------------------------------
    def source(self):
        return servers.mount_source(self.bucket, self.prefix)

    def options(self):
        o = "endpoint=" + self.endpoint
        if self.fast_retries and "retry_base" not in self.opts:
            o = _join_opts(o, FAST_RETRIES)
        return _join_opts(o, self.opts)

    def argv(self):
        if IMPL == "s3fs":
            return self._s3fs_argv()
        cmd = [binary(), self.source(), self.path]
        if self.foreground:
            cmd.append("-f")
        return cmd + ["-o", self.options()]

    def _s3fs_argv(self):
        pw = os.path.join(self.dir, "passwd")
        with open(os.open(pw, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write(servers.credentials_line())
        src = self.bucket if self.prefix is None else "%s:/%s" % (self.bucket,
                                                                  self.prefix.strip("/"))
        keep = []
        for o in self.opts.split(","):
            name = o.split("=", 1)[0]
            if name in ("ro", "uid", "gid", "umask", "allow_other"):
                keep.append(o)
        url, _, pfx = self.endpoint.partition("//")[2].partition("/")
        o = _join_opts("url=http://" + url, "use_path_request_style", "passwd_file=" + pw,
                       "stat_cache_expire=1", *keep)
        cmd = ["s3fs", src, self.path, "-o", o]
        if self.foreground:
            cmd.append("-f")
        return cmd

    # -- lifecycle ----------------------------------------------------------
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="objmount-mnt-")
        os.chmod(self.dir, 0o755)  # other users may reach an allow_other mount
        if self.path is None:
            self.path = os.path.join(self.dir, "mnt")
            os.mkdir(self.path)
        self.path = os.path.realpath(self.path) if os.path.isdir(self.path) else \
            os.path.abspath(self.path)
        self.log_path = os.path.join(self.dir, "daemon.stderr")
        self.out_path = os.path.join(self.dir, "daemon.stdout")
        argv = self.argv()
        _created[self.path] = self
        with open(self.log_path, "ab") as log, open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=log, env=daemon_env(self.env),
                start_new_session=True, preexec_fn=_set_pdeathsig if self.foreground else None)
        deadline = time.monotonic() + self.timeout
        while True:
            rc = self.proc.poll()  # first: once it has exited, the table is final
            mounted = is_mounted(self.path)
            if mounted and (self.foreground or rc == 0):
                break
            if rc is not None and (self.foreground or rc != 0):
                self._fail("%s exited with status %s before %s was mounted"
                           % (os.path.basename(argv[0]), _status(rc), self.path), rc, mounted)
            if rc == 0 and not self.foreground:
                self._fail("objmount (daemon mode) exited 0 but %s is not mounted"
                           % self.path, rc, mounted)
            if time.monotonic() > deadline:
                self._fail("%s not mounted after %.0f s" % (self.path, self.timeout), rc, mounted)
            time.sleep(0.01)
        if not self.foreground:
            self.returncode = self.proc.returncode
        return self

    def _fail(self, msg, rc, mounted):
        self.returncode = rc
        self.unmount(check=False)
        err = self._daemon_out
        raise MountFailed("%s:\n%s" % (msg, err), rc, err, mounted)

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, exc_type, *exc):
        self.unmount(check=exc_type is None)
        return False

    @property
    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except (OSError, AttributeError):
            return self._daemon_out

    stderr = log

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    def alive(self):
        if self.foreground:
            return self.proc is not None and self.proc.poll() is None
        return is_mounted(self.path) and bool(daemon_pids(self.path))

    def check_alive(self):
        """Raise AssertionError (with the log) when the daemon has died."""
        if not self.alive():
            rc = self.proc.poll() if self.proc else None
            raise AssertionError("the daemon for %s is gone (status %s):\n%s"
                                 % (self.path, _status(rc), self.log[-4000:]))

    def unmount(self, check=True, timeout=20.0):
        """Unmount and reap the daemon. With check, raise unless it exited 0
        by itself after an unmount that did not need -z."""
        if self._done:
            return self.returncode
        self._done = True
        died_before = self.proc is not None and self.foreground and self.proc.poll() is not None
        early_rc = self.proc.returncode if died_before else None
        notes = []
        if self.path and is_mounted(self.path):
            for attempt in range(10):
                r = _fusermount(self.path)
                if r.returncode == 0 or not is_mounted(self.path):
                    break
                notes.append(r.stderr.strip())
                time.sleep(0.1 * (attempt + 1))
            if is_mounted(self.path):
                self.lazy = True
                _fusermount(self.path, lazy=True)
        if self.foreground and self.proc is not None:
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.killed = True
                self.stacks = stacks_of(self.proc.pid)
                _stop_pid(self.proc.pid, self.proc)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self.returncode = self.proc.returncode
        elif self.path:
            # daemon mode: the daemon is not our child; find it by mount point
            deadline = time.monotonic() + timeout
            pids = daemon_pids(self.path)
            while pids and time.monotonic() < deadline:
                time.sleep(0.02)
                pids = [p for p in pids if _exists(p)]
            for p in pids:
                self.killed = True
                self.stacks = stacks_of(p)
                _stop_pid(p)
            if self.proc is not None:
                self.returncode = self.proc.wait()
        if self.path and is_mounted(self.path):
            _fusermount(self.path, lazy=True)
        _created.pop(self.path, None)
        if self.path and self._own_mountpoint and not is_mounted(self.path):
            try:
                os.rmdir(self.path)
            except OSError:
                pass
        if self.dir:
            self._daemon_out = self.log
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if check:
            problems = []
            if died_before:
                problems.append("the daemon died before unmount (status %s)" % _status(early_rc))
            if self.lazy:
                problems.append("mount point stayed busy; needed fusermount3 -uz (%s)"
                                % "; ".join(notes[-2:]))
            if self.killed:
                problems.append("the daemon did not exit within %.0f s of the unmount "
                                "and was killed" % timeout)
            elif self.foreground and self.returncode != 0 and not died_before:
                problems.append("the daemon exited with status %s after unmount"
                                % _status(self.returncode))
            if problems:
                stacks = ("\n--- the daemon's threads before it was killed ---\n%s"
                          % self.stacks[-12000:]) if self.stacks else ""
                raise AssertionError("%s: %s\n--- daemon log (tail) ---\n%s%s" % (
                    self.path, "; ".join(problems), self._daemon_out[-4000:], stacks))
        return self.returncode


def _exists(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _status(rc):
    if rc is None:
        return "running"
    if rc < 0:
        try:
            return "killed by %s" % signal.Signals(-rc).name
        except ValueError:
            return "signal %d" % -rc
    return str(rc)


class MountFactory:
    """The body of the `mount` fixtures: mount(bucket, opts="", prefix=None,
    endpoint=None, **kw) -> a started Mount; finish() unmounts all and raises
    if any daemon crashed or did not exit 0."""

    def __init__(self, default_endpoint):
        self.default_endpoint = default_endpoint
        self.mounts = []

    def __call__(self, bucket, opts="", prefix=None, endpoint=None, **kw):
        m = Mount(bucket, endpoint or self.default_endpoint, opts=opts, prefix=prefix, **kw)
        self.mounts.append(m)
        return m.start()

    def finish(self, check=True):
        errors = []
        for m in reversed(self.mounts):
            try:
                m.unmount(check=check)
            except AssertionError as e:
                errors.append(str(e))
        self.mounts = []
        if errors:
            raise AssertionError("\n\n".join(errors))


@atexit.register
def _sweep():
    for path, m in list(_created.items()):
        try:
            m.unmount(check=False, timeout=5)
        except Exception:
            pass
        if is_mounted(path):
            _fusermount(path, lazy=True)
            for p in daemon_pids(path):
                _stop_pid(p)


# -- data ------------------------------------------------------------------------
@functools.lru_cache(maxsize=32)
def payload(name, size):
    """size deterministic pseudo-random bytes, different for each name."""
    if size == 0:
        return b""
    return random.Random(zlib.crc32(name.encode()) ^ size).randbytes(size)


def first_difference(got, want):
    n = min(len(got), len(want))
    lo, step = 0, 1 << 20
    while lo < n:
        hi = min(n, lo + step)
        if got[lo:hi] != want[lo:hi]:
            for i in range(lo, hi):
                if got[i] != want[i]:
                    return i
        lo = hi
    return None if len(got) == len(want) else n


def check_bytes(got, want, what="data"):
    """AssertionError naming the first difference (never a megabyte diff)."""
    if got == want:
        return
    i = first_difference(got, want)
    raise AssertionError("%s: got %d bytes, want %d; first difference at offset %s "
                         "(got %r, want %r)" % (what, len(got), len(want), i,
                                                bytes(got[i:i + 8]), bytes(want[i:i + 8])))


def read_all(path, chunk=MiB):
    """Read with os.read; returns bytes. Raises OSError from the filesystem."""
    fd = os.open(path, os.O_RDONLY)
    try:
        parts = []
        while True:
            b = os.read(fd, chunk)
            if not b:
                break
            parts.append(b)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_checked(path, want, chunk=MiB, errnos=(errno.EIO,)):
    """Read path to EOF comparing every chunk with want at its offset.

    Returns None when all bytes came back identical, or the OSError when a
    read failed with one of errnos. Raises AssertionError on wrong bytes or a
    clean EOF before len(want) (short data) or after it."""
    fd = os.open(path, os.O_RDONLY)
    pos = 0
    try:
        while True:
            try:
                b = os.read(fd, chunk)
            except OSError as e:
                if e.errno in errnos:
                    return e
                raise
            if not b:
                if pos != len(want):
                    raise AssertionError("%s: clean EOF after %d of %d bytes (short data)"
                                         % (path, pos, len(want)))
                return None
            check_bytes(b, want[pos:pos + len(b)], "%s at offset %d" % (path, pos))
            pos += len(b)
    finally:
        os.close(fd)


# -- the seeded data set of the read tests (fixture data_bucket) ------------------
PART = 5 * MiB  # the part_size read tests mount with (-o part_size=5M)
PART_OPT = "part_size=5M"
DEFAULT_PART = 8 * MiB  # objmount's default part size
SIZES = [0, 1, 4096, MiB - 1, MiB, MiB + 1, PART - 1, PART, PART + 1, 2 * PART + 1, 100 * MiB]
DEFAULT_PART_SIZES = [DEFAULT_PART - 1, DEFAULT_PART, DEFAULT_PART + 1]
SMALL_FILES = ["small/img%03d.jpg" % i for i in range(64)]


def size_key(size):
    return "sizes/%d" % size


def small_size(i):
    return 90000 + 317 * i  # ~110 KB, the JPEG case


class DataBucket:
    """name, and objects: {key: bytes} as uploaded."""

    def __init__(self, name, objects):
        self.name = name
        self.objects = objects

    def __getitem__(self, key):
        return self.objects[key]


# From this many objects, seed() writes into the server's own store
STORE_DIRECTLY = 200


def seed(s3client, bucket, objects, threads=8):
    """Upload {key: bytes} in parallel with boto3. A set-up of at least
    STORE_DIRECTLY objects for a server this process started (the client's
    endpoint is the server's, not a proxy's) is written into the server's
    store instead (the server's store_objects: versitygw's directory,
    Swift's object server, AIStore's native API): the listing tests' thousands of small objects
    cost seconds, not minutes, of the test command's two cores. What they
    test is the mount; the signed PUT path keeps its own tests."""
    server = servers.live_server(s3client.meta.endpoint_url)
    if server is not None and len(objects) >= STORE_DIRECTLY:
        objects = server.store_objects(bucket, objects)
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(lambda kv: s3client.put_object(Bucket=bucket, Key=kv[0], Body=kv[1]),
                    objects.items()))


def new_bucket(s3client, tag="m"):
    name = "%s-%s" % (tag, uuid.uuid4().hex[:12])
    s3client.create_bucket(Bucket=name)
    return name


# -- objects, checked with boto3 (never through the mount) ------------------------
def get_object(s3client, bucket, key):
    """The stored bytes of bucket/key, fetched with boto3."""
    return s3client.get_object(Bucket=bucket, Key=key)["Body"].read()


def check_object(s3client, bucket, key, want, what=None):
    """AssertionError unless bucket/key holds exactly want (HEAD size and the
    bytes of a GET, the first differing offset named)."""
    what = what or "object %s" % key
    head = s3client.head_object(Bucket=bucket, Key=key)
    got = get_object(s3client, bucket, key)
    check_bytes(got, want, what)
    assert head["ContentLength"] == len(want), "%s: HEAD says %d bytes, want %d" % (
        what, head["ContentLength"], len(want))


def check_object_file(s3client, bucket, key, path, chunk=8 * MiB):
    """check_object against the bytes of a local file, streaming both sides,
    so a GiB object is never held in memory twice."""
    size = os.path.getsize(path)
    head = s3client.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == size, "object %s: HEAD says %d bytes, the file has %d" % (
        key, head["ContentLength"], size)
    body = s3client.get_object(Bucket=bucket, Key=key)["Body"]
    pos = 0
    with open(path, "rb") as f:
        while True:
            want = f.read(chunk)
            got = body.read(len(want)) if want else body.read(1)
            if not want:
                assert not got, "object %s: longer than the %d bytes of %s" % (key, size, path)
                return
            check_bytes(got, want, "object %s at offset %d" % (key, pos))
            pos += len(want)


def random_file(path, size, chunk=MiB):
    """Write size random bytes (os.urandom, ~1 GiB in a few seconds) to path;
    returns their MD5 as hex."""
    import hashlib

    h = hashlib.md5()
    with open(path, "wb") as f:
        left = size
        while left:
            b = os.urandom(min(chunk, left))
            h.update(b)
            f.write(b)
            left -= len(b)
    return h.hexdigest()


def wait_for(pred, timeout=10.0, interval=0.05):
    """Poll pred() until it returns true (returned) or timeout passes (False)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)
