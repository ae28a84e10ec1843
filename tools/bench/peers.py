"""The filesystems bench.py compares, and the process bookkeeping around them.

A peer is either a FUSE filesystem (objmount, s3fs-fuse, rclone mount) that
bench.py mounts fresh for every measured run, or a reference (curl straight
at the S3 endpoint) that shows what the server itself can deliver.

Each mount peer runs in the foreground as one process that bench.py starts
(in its own session, with PR_SET_PDEATHSIG), so its CPU time and peak RSS
come from /proc/PID and it can always be stopped by its pid.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))

from harness import servers  # noqa: E402
from harness.procs import set_pdeathsig  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
BUCKET = "bench"
# The servers of tests/harness/servers.py that every peer can mount: the S3
# APIs (ais, AIStore's native API, is objmount's alone).
SERVER_KINDS = tuple(k for k in servers.KINDS if not servers.native(k))


# -- the server ----------------------------------------------------------------
def add_server_arg(ap, default=servers.DEFAULT, kinds=SERVER_KINDS):
    """--server KIND: the server of tests/harness/servers.py every peer reads."""
    ap.add_argument("--server", choices=kinds, default=default,
                    help="the server every peer reads from, started by tests/harness/servers.py: "
                         "%s (default %s)" % (", ".join(kinds), default))


def start_server(kind, base_dir, buckets=(BUCKET,), attempts=3):
    """Select kind (the peers' credentials follow) and start a private
    server of it with buckets, its directory under base_dir. A start that
    fails (a loaded machine misses a deadline; an AIStore target not yet
    answering its control port when the bucket is made) is tried again on
    fresh ports, as the tests' fixture does."""
    from harness.procs import ServerNotInstalled

    servers.select(kind)
    for attempt in range(1, attempts + 1):
        try:
            return servers.server_class(kind)(buckets=list(buckets), base_dir=base_dir).start()
        except Exception as e:  # noqa: BLE001 - raised when the last attempt fails
            if attempt == attempts or isinstance(e, ServerNotInstalled):
                raise
            print("%s did not start (attempt %d of %d): %s" % (
                kind, attempt, attempts, str(e).splitlines()[0][:200] if str(e) else e),
                file=sys.stderr, flush=True)
            time.sleep(attempt)


# -- /proc helpers -------------------------------------------------------------
def mountinfo():
    """{mountpoint: fstype} of the current mount namespace."""
    out = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            mp = fields[4].encode().decode("unicode_escape")
            out[mp] = fields[sep + 1]
    return out


def is_mounted(path):
    return os.path.realpath(path) in mountinfo()


def cpu_seconds(pid):
    """user + system CPU seconds of pid (all threads), or None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields after ")" start at field 3 (state); utime is 14, stime 15
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def peak_rss_kib(pid):
    """VmHWM of pid in KiB, or None when gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def tool_version(argv):
    try:
        p = subprocess.run(argv, capture_output=True, timeout=10, text=True)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    text = (p.stdout or p.stderr).strip().splitlines()
    return text[0].strip() if text else "unknown"


# -- signals ------------------------------------------------------------------
class Interrupted(BaseException):
    """SIGTERM or SIGHUP arrived (Ctrl-C stays KeyboardInterrupt)."""


def _on_signal(signum, frame):
    raise Interrupted("signal %d" % signum)


def catch_signals():
    """Ctrl-C raises KeyboardInterrupt (even if started with it ignored),
    SIGTERM and SIGHUP raise Interrupted, so cleanup code runs for each."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)


def start_run(log, needs_root):
    """The start of a benchmark's main: a warning when not root (saying what
    needs_root), then catch_signals()."""
    if os.geteuid() != 0:
        log("warning: not root: %s may fail" % needs_root)
    catch_signals()


def hold_signals():
    """Ignore them: a second Ctrl-C or a SIGTERM must not cut a cleanup short."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


# -- mounts ----------------------------------------------------------------------
class MountError(RuntimeError):
    pass


class Mount:
    """A running FUSE mount: the foreground daemon process and its mountpoint."""

    def __init__(self, peer, mountpoint, proc, log_path):
        self.peer = peer
        self.mountpoint = mountpoint
        self.proc = proc
        self.pid = proc.pid
        self.log_path = log_path

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""


_live_mounts = []


def live_mounts():
    return list(_live_mounts)


def unmount(m, timeout=20.0):
    """Unmount and stop the daemon. Never raises; returns a list of problems.

    fusermount3 -u first (the daemon then exits by itself); if the daemon is
    stuck, SIGTERM then SIGKILL it (which aborts the FUSE connection) and
    detach the mountpoint lazily."""
    problems = []
    if is_mounted(m.mountpoint):
        for cmd in (["fusermount3", "-u", m.mountpoint], ["umount", m.mountpoint]):
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode == 0 or not is_mounted(m.mountpoint):
                break
            problems.append("%s: %s" % (" ".join(cmd[:2]), p.stderr.strip()))
    deadline = time.monotonic() + timeout
    while m.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if m.proc.poll() is not None:
            break
        problems.append("daemon still running: %s" % sig.name)
        try:
            os.killpg(m.pid, sig)
        except OSError:
            pass
        try:
            m.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
    if is_mounted(m.mountpoint):
        subprocess.run(["umount", "-l", m.mountpoint], capture_output=True)
        problems.append("lazy unmount needed")
    if m in _live_mounts:
        _live_mounts.remove(m)
    return problems


def unmount_all(log):
    """Cleanup on exit: unmount every mount still live; problems are logged."""
    for m in live_mounts():
        problems = unmount(m, timeout=10.0)
        if problems:
            log("cleanup %s: %s" % (m.mountpoint, "; ".join(problems)))


def end_run(work, keep, log):
    """The cleanup every benchmark ends with, on success, error or Ctrl-C:
    signals held (a second Ctrl-C or a SIGTERM must not cut it short),
    every mount still live unmounted, the work directory removed unless
    kept."""
    hold_signals()
    unmount_all(log)
    remove_work(work, keep, log)


def report(results, markdown, out):
    """Print the results' Markdown, write them as JSON to out (if given);
    the exit status: 1 when a run read other bytes than were stored."""
    print(markdown(results))
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any("MISMATCH" in (r.get("error") or "") for r in results["runs"]) else 0


def remove_work(work, keep, log):
    """Remove the work directory, unless keep or something is still mounted
    under it (rmtree would go into the mount)."""
    still = [mp for mp in mountinfo() if mp.startswith(work + os.sep)]
    if still:
        log("NOT removing %s: still mounted: %s" % (work, ", ".join(still)))
    elif not keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log("work directory kept: %s" % work)


def kill_mount(m):
    """Hard stop for a hung run: SIGKILL the daemon (aborts the FUSE
    connection, so blocked readers get ENOTCONN), then unmount."""
    try:
        os.killpg(m.pid, signal.SIGKILL)
    except OSError:
        pass
    return unmount(m, timeout=5.0)


class MountPeer:
    kind = "mount"
    name = "?"
    extra = []  # user-supplied extra options / flags

    def available(self):
        """None when usable, else the reason it is not."""
        return None

    def version(self):
        return "unknown"

    def settings(self):
        """One line describing the options used (for the report)."""
        return ""

    def command(self, endpoint, mountpoint, work, write=False):
        """(argv, extra environment) of the foreground daemon; write: the
        case writes (a peer may need other settings for that)."""
        raise NotImplementedError

    def after_unmount(self, write=False, keep_cache=False):
        """Clean up what a mount left behind: every local cache is emptied,
        so that the next run starts as cold as every other peer's, unless
        keep_cache (a row that measures a cache kept across mounts)."""

    def collect(self, m, logdir, label):
        """Peer-specific figures taken at the end of a measured run, before
        the unmount (objmount: its own stats)."""
        return {}

    def prepare(self, endpoint, work):
        """Write config files once per invocation."""

    def mount(self, endpoint, mountpoint, work, log_path, timeout=30.0, write=False):
        os.makedirs(mountpoint, exist_ok=True)
        if is_mounted(mountpoint):
            raise MountError("%s is already mounted" % mountpoint)
        argv, env_extra = self.command(endpoint, mountpoint, work, write)
        env = clean_env()
        env.update(env_extra)
        with open(log_path, "ab") as log:
            log.write(("\n== %s %s\n" % (time.strftime("%H:%M:%S"), " ".join(argv))).encode())
            log.flush()
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    env=env, start_new_session=True,
                                    preexec_fn=set_pdeathsig)
        m = Mount(self, mountpoint, proc, log_path)
        m.write = write
        _live_mounts.append(m)
        deadline = time.monotonic() + timeout
        while not is_mounted(mountpoint):
            if proc.poll() is not None:
                unmount(m)
                raise MountError("%s exited with %s before mounting: %s"
                                 % (self.name, proc.returncode, m.log_tail(800).strip()))
            if time.monotonic() > deadline:
                kill_mount(m)
                raise MountError("%s did not mount within %.0f s" % (self.name, timeout))
            time.sleep(0.02)
        try:
            os.stat(mountpoint)  # the root answers (getattr only, no listing)
        except OSError as e:
            kill_mount(m)
            raise MountError("%s mounted but its root fails: %s" % (self.name, e))
        return m


def clean_env():
    env = dict(os.environ)
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AIS_AUTHN_TOKEN", "AWS_ENDPOINT_URL",
                "AIS_ENDPOINT", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_CA_BUNDLE",
                "http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                "ALL_PROXY"):
        env.pop(var, None)
    return env


class S3fs(MountPeer):
    """s3fs-fuse, with its disk cache off and the read/upload parallelism
    set to objmount's part size and a comparable window (8 x 8 MiB). Writes
    go to a temporary file in tmpdir; close() uploads it (multipart, 8 parts
    of 8 MiB at a time) and returns when the upload is complete; no check of
    what the server stored."""

    name = "s3fs"
    options = ["use_path_request_style", "sigv4", "endpoint=us-east-1",
               "parallel_count=8", "multipart_size=8", "multireq_max=20",
               "enable_noobj_cache", "dbglevel=warn"]

    def available(self):
        return None if shutil.which("s3fs") else "s3fs not installed"

    def version(self):
        return tool_version(["s3fs", "--version"])

    def settings(self):
        return "-o " + ",".join(["url=PROXY", "passwd_file=F", "tmpdir=TMP"] + self.options + self.extra)

    def prepare(self, endpoint, work):
        self.passwd = os.path.join(work, "s3fs.passwd")
        fd = os.open(self.passwd, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(servers.credentials_line())  # AWSAccessKeyId= form for Swift's key
        self.tmpdir = os.path.join(work, "s3fs-tmp")
        os.makedirs(self.tmpdir, exist_ok=True)

    def command(self, endpoint, mountpoint, work, write=False):
        opts = ["url=" + endpoint, "passwd_file=" + self.passwd, "tmpdir=" + self.tmpdir]
        opts += self.options + self.extra
        return ["s3fs", BUCKET, mountpoint, "-f", "-o", ",".join(opts)], {}

    def after_unmount(self, write=False, keep_cache=False):
        """Its disk cache (use_cache=DIR, when a benchmark turns it on)
        and what its tmpdir kept."""
        if keep_cache:
            return
        for o in self.extra:
            if o.startswith("use_cache="):
                empty_dir(o.split("=", 1)[1])
        empty_dir(getattr(self, "tmpdir", None))


class Rclone(MountPeer):
    """rclone mount with no VFS cache for reads (reads stream from S3, as
    objmount's), read-only. For the write case: --vfs-cache-mode writes (rclone
    cannot open a file for writing without it, except strictly sequential
    O_WRONLY streams), upload started at close (--vfs-write-back 0s; the
    default waits 5 s), 8 MiB parts, 8 at a time as the others. rclone's
    close() returns when the file is in its local cache, before the upload."""

    name = "rclone"
    flags = ["--vfs-cache-mode", "off", "--use-server-modtime", "--read-only",
             "--log-level", "NOTICE"]
    write_flags = ["--vfs-cache-mode", "writes", "--vfs-write-back", "0s",
                   "--s3-chunk-size", "8M", "--s3-upload-concurrency", "8",
                   "--use-server-modtime", "--log-level", "NOTICE"]

    def available(self):
        return None if shutil.which("rclone") else "rclone not installed"

    def version(self):
        return tool_version(["rclone", "version"])

    def settings(self):
        return (" ".join(["rclone mount bench:bench MNT --config F --cache-dir TMP"]
                         + self.flags + self.extra)
                + "; checkpoint write: " + " ".join(self.write_flags + self.extra))

    def prepare(self, endpoint, work):
        self.config = os.path.join(work, "rclone.conf")
        fd = os.open(self.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("[bench]\ntype = s3\nprovider = Other\nenv_auth = false\n"
                    "access_key_id = %s\nsecret_access_key = %s\nregion = %s\n"
                    "endpoint = %s\nforce_path_style = true\n"
                    % (servers.access_key(), servers.secret_key(),
                       servers.server_class().region, endpoint))
        self.cache_dir = os.path.join(work, "rclone-cache")
        os.makedirs(self.cache_dir, exist_ok=True)

    def command(self, endpoint, mountpoint, work, write=False):
        return (["rclone", "mount", "bench:" + BUCKET, mountpoint, "--config", self.config,
                 "--cache-dir", self.cache_dir]
                + (self.write_flags if write else self.flags) + self.extra,
                {"RCLONE_CONFIG": self.config})

    def after_unmount(self, write=False, keep_cache=False):
        """The VFS cache keeps written files for an hour: empty it."""
        if not keep_cache:
            empty_dir(self.cache_dir)


class Objmount(MountPeer):
    """objmount with its defaults (plus any --objmount-opts), its staging
    and recovery directories (cache_dir) in the bench's work directory.
    Writes: staged, parts uploaded while writing, committed and verified
    (HEAD size + ETag, the default verify=etag) in close()."""

    name = "objmount"

    def __init__(self, binary=None, ctl=None):
        self.binary = binary or os.path.join(REPO_ROOT, "build", "objmount")
        self.ctl = ctl or os.path.join(REPO_ROOT, "build", "tools", "objmountctl")

    def available(self):
        if not os.access(self.binary, os.X_OK):
            return "%s is not built (ninja -C build)" % self.binary
        return None

    def prepare(self, endpoint, work):
        """Run a private copy: a rebuild of build/objmount during the run
        (others work in the same tree) must not change the binary measured."""
        import hashlib

        copy = os.path.join(work, "objmount")
        shutil.copy2(self.binary, copy)
        with open(copy, "rb") as f:
            self.sha256 = hashlib.sha256(f.read()).hexdigest()
        self.source = self.binary
        self.binary = copy
        if os.access(self.ctl, os.X_OK):
            ctl = os.path.join(work, "objmountctl")
            shutil.copy2(self.ctl, ctl)
            self.ctl = ctl
        else:
            self.ctl = None
        self.cache_dir = os.path.join(work, "objmount-cache")
        os.makedirs(self.cache_dir, exist_ok=True)

    def version(self):
        v = tool_version([self.binary, "-V"])
        try:
            commit = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
        except OSError:
            commit = "?"
        sha = getattr(self, "sha256", None)
        return "%s (tree %s%s)" % (v, commit, ", binary sha256 %s" % sha[:12] if sha else "")

    def settings(self):
        return ("-f -o " + ",".join(["endpoint=PROXY", "cache_dir=TMP"] + self.extra)
                + " (defaults otherwise)")

    def command(self, endpoint, mountpoint, work, write=False):
        opts = ",".join(["endpoint=" + endpoint, "cache_dir=" + self.cache_dir] + self.extra)
        return ([self.binary, servers.mount_source(BUCKET), mountpoint, "-f", "-o", opts],
                {"AWS_ACCESS_KEY_ID": servers.access_key(),
                 "AWS_SECRET_ACCESS_KEY": servers.secret_key()})

    def after_unmount(self, write=False, keep_cache=False):
        """Its cache_dir (the data cache when an option turns it on,
        staging, recovery), as rclone's is: no run reads what an earlier
        one left. A benchmark that counts recovery or staging entries does
        so before this."""
        if not keep_cache:
            empty_dir(self.cache_dir)

    def collect(self, m, logdir, label):
        """`objmountctl stats` (text into logs/, Prometheus figures returned):
        the read-buffer budget, the peak of the read buffers, S3 requests."""
        if not self.ctl:
            return {}
        out = {}
        try:
            txt = subprocess.run([self.ctl, "stats", m.mountpoint], capture_output=True,
                                 text=True, timeout=10)
            with open(os.path.join(logdir, "objmount-stats.txt"), "a") as f:
                f.write("== %s\n%s%s\n" % (label, txt.stdout, txt.stderr))
            for line in txt.stdout.splitlines():
                if line.startswith("memory:") and "peak" in line:
                    # memory: read buffers X MiB in use, peak Y MiB, limit Z MiB; ...
                    try:
                        out["buffers_peak_mib"] = float(line.split("peak")[1].split()[0])
                    except (IndexError, ValueError):
                        pass
            prom = subprocess.run([self.ctl, "stats", m.mountpoint, "--prometheus"],
                                  capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"stats_error": str(e)}
        ops = {}
        for line in prom.splitlines():
            if line.startswith("objmount_read_buffer_limit_bytes "):
                out["budget_mib"] = float(line.split()[1]) / (1 << 20)
            elif line.startswith("objmount_requests_total{"):
                op = line.split('op="', 1)[1].split('"', 1)[0]
                ops[op] = int(float(line.split()[-1]))
            elif line.startswith("objmount_request_retries_total{"):
                out["retries"] = out.get("retries", 0) + int(float(line.split()[-1]))
            elif line.startswith("objmount_request_failures_total{"):
                out["failed_requests"] = out.get("failed_requests", 0) + int(float(line.split()[-1]))
            elif line.startswith("objmount_connections_opened_total "):
                out["connections"] = int(float(line.split()[1]))
        if ops:
            out["own_requests"] = ops
        return out


def refuses_unsigned(srv):
    """srv answers unsigned requests with 403 (versitygw, Swift): curl needs
    presigned URLs. An AIStore (authentication off, its default) serves them."""
    return srv.kind not in servers.AISTORE_KINDS


def presigner(srv):
    """url -> the same GET presigned (SigV4 query string, 24 h) for srv's
    keys: curl's GETs on a server that refuses unsigned requests."""
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = S3SigV4QueryAuth(Credentials(srv.access_key, srv.secret_key), "s3", srv.region,
                            expires=86400)

    def presign(url):
        r = AWSRequest(method="GET", url=url)
        auth.add_auth(r)
        return r.prepare().url
    return presign


def empty_dir(path):
    """Remove everything in path (a cache directory), keeping path itself."""
    if not path or not os.path.isdir(path):
        return
    for name in os.listdir(path):
        full = os.path.join(path, name)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


class Curl:
    """Reference, not a filesystem: curl GETs straight at the endpoint.

    direct=False goes through the fault proxy (same path and latency as the
    mounts); direct=True goes to the server itself (no proxy, no latency)."""

    kind = "reference"

    def __init__(self, direct=False):
        self.direct = direct
        self.name = "curl-direct" if direct else "curl"

    def available(self):
        return None if shutil.which("curl") else "curl not installed"

    def version(self):
        return " ".join(tool_version(["curl", "--version"]).split()[:2])

    def settings(self):
        signed = " (presigned where the server refuses unsigned ones)"
        return ("GETs to the server itself, bypassing the proxy" if self.direct
                else "GETs through the proxy") + signed


MOUNT_PEERS = {"objmount": Objmount, "s3fs": S3fs, "rclone": Rclone}


def add_peer_args(ap):
    """The options epochs.py and scale.py share: the objmount binaries, each
    peer's extra options, --keep-work."""
    ap.add_argument("--objmount", default=os.path.join(REPO_ROOT, "build", "objmount"))
    ap.add_argument("--objmountctl", default=os.path.join(REPO_ROOT, "build", "tools",
                                                          "objmountctl"))
    ap.add_argument("--objmount-opts", default="", help="extra -o options for objmount")
    ap.add_argument("--s3fs-opts", default="", help="extra -o options for s3fs")
    ap.add_argument("--rclone-flags", default="", help="extra flags for rclone mount")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary directory")


def settings_of(name, peer):
    """The options a mount peer runs with, as one line for a report (its
    extra options included; epochs.py and scale.py)."""
    if name == "objmount":
        return "-o " + ",".join(peer.extra)
    if name == "s3fs":
        return "-o " + ",".join(peer.options + peer.extra)
    return " ".join(peer.flags + peer.extra)
