#!/usr/bin/python3
"""Start and stop a pinned, patched s3rver for tests.

Library use (pytest fixtures, scripts):

    from harness.s3server import S3Server
    with S3Server(buckets=["data"]) as srv:
        s3 = srv.client()
        s3.put_object(Bucket="data", Key="a", Body=b"x")

Command-line use (C programs, shell scripts):

    /usr/bin/python3 tests/harness/s3server.py start --state-file F [--bucket B ...]
        prints one JSON line {"endpoint", "port", "pid", "dir", ...} and leaves
        the server running, detached, in its own process group.
    /usr/bin/python3 tests/harness/s3server.py stop --state-file F
        stops it (whole process group) and removes its directory.

The server listens on 127.0.0.1 on a port the kernel picks (``-p 0``), so
parallel runs never collide. It is started with
``NODE_OPTIONS=--openssl-legacy-provider`` because s3rver encrypts
ListObjectsV2 continuation tokens with DES, which Node 20's OpenSSL 3 refuses
otherwise (every truncated listing page would answer InternalError).

s3rver must be installed first: ``npm ci --prefix tools/node``.
"""

import argparse
import atexit
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_DIR = os.path.join(REPO_ROOT, "tools", "node")
S3RVER_BIN = os.path.join(NODE_DIR, "node_modules", "s3rver", "bin", "s3rver.js")

ACCESS_KEY = "S3RVER"
SECRET_KEY = "S3RVER"
REGION = "us-east-1"

_live = weakref.WeakSet()


def node_binary():
    """The node executable: $OBJMOUNT_NODE, else `node` on PATH."""
    return os.environ.get("OBJMOUNT_NODE") or shutil.which("node") or "node"


def node_env(extra=None):
    """Environment for starting s3rver (adds --openssl-legacy-provider)."""
    env = dict(os.environ)
    opts = env.get("NODE_OPTIONS", "")
    if "--openssl-legacy-provider" not in opts:
        opts = (opts + " --openssl-legacy-provider").strip()
    env["NODE_OPTIONS"] = opts
    if extra:
        env.update(extra)
    return env


def _set_pdeathsig():
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
        except ProcessLookupError:
            return
        except PermissionError:
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


def unlimited_retry_quota():
    """botocore's standard retry mode gives each client a quota of 500
    tokens and takes 5 per retried error: a storm of 503s on a loaded machine
    (Swift answering "Please reduce your request rate" while 20,000 keys were
    seeded) emptied a session's client, and every later set-up call failed at
    its first 503 without a retry. Test clients retry each call up to their
    attempts, whatever came before."""
    from botocore.retries import quota
    quota.RetryQuota.__init__.__defaults__ = (1 << 40, None)


class S3ServerError(RuntimeError):
    pass


class ServerNotInstalled(S3ServerError):
    """A program the server needs is missing: starting again will not help."""


class S3Server:
    """A private s3rver on 127.0.0.1:<free port> with a fresh directory.

    Attributes once started: endpoint ("http://127.0.0.1:PORT"), port, pid,
    dir (temporary root; data under dir/data, log at dir/s3rver.log),
    access_key, secret_key, region.
    """

    kind = "s3rver"
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY
    region = REGION

    def __init__(self, buckets=(), extra_args=(), deny_anonymous=False,
                 allow_mismatched_signatures=False, detached=False,
                 startup_timeout=20.0, base_dir=None):
        self.buckets = list(buckets)
        self.extra_args = list(extra_args)
        self.deny_anonymous = deny_anonymous
        self.allow_mismatched_signatures = allow_mismatched_signatures
        self.detached = detached
        self.startup_timeout = startup_timeout
        self.base_dir = base_dir
        self.proc = None
        self.pid = None
        self.port = None
        self.endpoint = None
        self.dir = None
        self.data_dir = None
        self.log_path = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------
    def start(self):
        if not os.path.exists(S3RVER_BIN):
            raise ServerNotInstalled(
                "s3rver is not installed: run `npm ci --prefix tools/node` "
                "in the repository root (%s missing)" % S3RVER_BIN)
        self.dir = tempfile.mkdtemp(prefix="objmount-s3rver-", dir=self.base_dir)
        self.data_dir = os.path.join(self.dir, "data")
        os.mkdir(self.data_dir)
        self.log_path = os.path.join(self.dir, "s3rver.log")
        cmd = [node_binary(), S3RVER_BIN, "-d", self.data_dir,
               "-a", "127.0.0.1", "-p", "0", "--silent", "--no-vhost-buckets"]
        if self.deny_anonymous:
            cmd.append("--deny-anonymous")
        if self.allow_mismatched_signatures:
            cmd.append("--allow-mismatched-signatures")
        cmd += self.extra_args
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=self.dir, env=node_env(), start_new_session=True,
                preexec_fn=None if self.detached else _set_pdeathsig)
        finally:
            log.close()
        self.pid = self.proc.pid
        _live.add(self)
        try:
            self.port = self._wait_for_port()
            self.endpoint = "http://127.0.0.1:%d" % self.port
            self._wait_until_answers()
            for b in self.buckets:
                self.create_bucket(b)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for_port(self):
        deadline = time.monotonic() + self.startup_timeout
        needle = b"S3rver listening on "
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise S3ServerError("s3rver exited with %s:\n%s"
                                    % (self.proc.returncode, self.log_tail()))
            with open(self.log_path, "rb") as f:
                text = f.read()
            i = text.find(needle)
            if i >= 0 and b"\n" in text[i:]:
                line = text[i + len(needle):].split(b"\n", 1)[0].strip()
                return int(line.rsplit(b":", 1)[1])
            time.sleep(0.02)
        raise S3ServerError("s3rver did not report its port:\n" + self.log_tail())

    def _wait_until_answers(self):
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/", timeout=2).read()
                return
            except urllib.error.HTTPError:
                return  # any HTTP answer (e.g. 403 with --deny-anonymous) will do
            except OSError:
                if time.monotonic() > deadline:
                    raise S3ServerError("s3rver does not answer on " + self.endpoint)
                time.sleep(0.05)

    def stop(self):
        """Kill the process group and remove the directory. Idempotent."""
        with self._lock:
            if self.pid is not None:
                kill_group(self.pid)
                if self.proc is not None:
                    try:
                        self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                self.pid = None
            if self.dir and os.path.isdir(self.dir):
                shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        _live.discard(self)

    def __enter__(self):
        if self.pid is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # -- helpers -----------------------------------------------------------
    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def client(self, endpoint=None, retries=None, **config_kwargs):
        """A boto3 S3 client (path-style, SigV4, test credentials).

        endpoint: defaults to this server (pass a proxy's endpoint to go
        through it). retries: max_attempts (None keeps botocore's default;
        0 disables retries so raw faults are visible)."""
        import boto3
        from botocore.config import Config

        cfg = {"s3": {"addressing_style": "path"}, "signature_version": "s3v4"}
        if retries:
            unlimited_retry_quota()
        if retries == 0:
            cfg["retries"] = {"total_max_attempts": 1}
        elif retries is not None:
            cfg["retries"] = {"max_attempts": retries, "mode": "standard"}
        cfg.update(config_kwargs)
        return boto3.session.Session().client(
            "s3", endpoint_url=endpoint or self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region, config=Config(**cfg))

    def create_bucket(self, name):
        self.client().create_bucket(Bucket=name)

    def store_objects(self, bucket, objects):
        """Write {key: bytes} straight into s3rver's directory, as its
        FilesystemStore lays out a PUT (KEY._S3rver_object, .md5,
        ._S3rver_metadata.json): test set-up of thousands of small objects
        without thousands of signed PUTs. Returns the keys it could not
        store this way (names a file system cannot hold as they are: empty
        components, `.`/`..`, a trailing `/`, s3rver's own marker), for the
        caller to PUT. The bucket must exist."""
        root = os.path.join(self.data_dir, bucket)
        if not os.path.isdir(root):
            raise S3ServerError("store_objects: no bucket %s" % bucket)
        rest = {}
        for key, body in objects.items():
            parts = key.split("/")
            if "._S3rver_" in key or any(p in ("", ".", "..") for p in parts):
                rest[key] = body
                continue
            where = os.path.join(root, *parts[:-1])
            os.makedirs(where, exist_ok=True)
            base = os.path.join(where, parts[-1] + "._S3rver_")
            with open(base + "object", "wb") as f:
                f.write(body)
            with open(base + "object.md5", "w") as f:
                f.write(hashlib.md5(body).hexdigest())
            with open(base + "metadata.json", "w") as f:
                f.write('{\n  "content-type": "binary/octet-stream"\n}')
        return rest

    def state(self):
        return {"endpoint": self.endpoint, "port": self.port, "pid": self.pid,
                "dir": self.dir, "data_dir": self.data_dir, "log": self.log_path,
                "access_key": self.access_key, "secret_key": self.secret_key,
                "region": self.region, "buckets": self.buckets}


@atexit.register
def _stop_all():
    for srv in list(_live):
        if not srv.detached:
            srv.stop()


# -- command line ------------------------------------------------------------
def _cmd_start(args):
    srv = S3Server(buckets=args.bucket, deny_anonymous=args.deny_anonymous,
                   detached=True, base_dir=args.base_dir)
    srv.start()
    state = srv.state()
    tmp = args.state_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, args.state_file)
    print(json.dumps(state), flush=True)
    _live.discard(srv)  # leave it running


def _cmd_stop(args):
    try:
        with open(args.state_file) as f:
            state = json.load(f)
    except FileNotFoundError:
        print("no state file %s" % args.state_file, file=sys.stderr)
        return 1
    if state.get("pid"):
        kill_group(int(state["pid"]))
    d = state.get("dir")
    if d and os.path.basename(d).startswith("objmount-s3rver-"):
        shutil.rmtree(d, ignore_errors=True)
    os.unlink(args.state_file)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("start", help="start a detached s3rver, print JSON")
    ps.add_argument("--state-file", required=True)
    ps.add_argument("--bucket", action="append", default=[])
    ps.add_argument("--deny-anonymous", action="store_true",
                    help="answer AccessDenied to unsigned requests")
    ps.add_argument("--base-dir", default=None,
                    help="where to create the temporary directory")
    pt = sub.add_parser("stop", help="stop the server named in the state file")
    pt.add_argument("--state-file", required=True)
    args = p.parse_args(argv)
    if args.cmd == "start":
        return _cmd_start(args) or 0
    return _cmd_stop(args)


if __name__ == "__main__":
    sys.exit(main())
