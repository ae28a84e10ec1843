"""What every test server of the harness has in common (versitygw, Swift,
AIStore): a private directory, processes in their own session stopped
together, a boto3 client with the server's keys, bucket creation that
waits out a server still coming up, and the command-line form

    /usr/bin/python3 tests/harness/servers.py start --kind KIND --state-file F [--bucket B ...]
    /usr/bin/python3 tests/harness/servers.py stop --state-file F

A subclass sets kind, access_key, secret_key, region and prefix (of its
temporary directory), and implements _launch() (start the processes, set
self.proc/self.pid, self.port, self.endpoint) and _wait_until_ready().
"""

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import time
import weakref

from .procs import ServerError, kill_group, set_pdeathsig, unlimited_retry_quota

_live = weakref.WeakSet()


class Server:
    kind = None
    prefix = "objmount-server-"
    access_key = secret_key = None
    region = "us-east-1"
    # What the server does where S3 servers differ (tests that meet it
    # check what objmount does about it; doc/aistore.md, doc/decisions.md):
    user_metadata = True  # keeps x-amz-meta-* (objmount's modes, owners, times)
    part_copy = True      # UploadPartCopy
    dir_markers = True    # stores "dir/" under that name
    redirects = False     # answers object requests with redirects
    # Refuses an object `a` beside an object `a/b` (objects kept as files:
    # versitygw, AIStore when one target holds both); Swift keeps both.
    file_dir_conflict = False

    def __init__(self, buckets=(), detached=False, startup_timeout=60.0, base_dir=None,
                 **_ignored):
        self.buckets = list(buckets)
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
        self.dir = tempfile.mkdtemp(prefix=self.prefix, dir=self.base_dir)
        self.log_path = os.path.join(self.dir, "server.log")
        _live.add(self)
        try:
            self._launch()
            self._wait_until_ready()
            for b in self.buckets:
                self.create_bucket(b)
        except BaseException:
            self.stop()
            raise
        return self

    def _popen(self, cmd, env=None, cwd=None):
        """Start cmd in a new session (its own process group), output to
        the log; it gets SIGTERM when this process dies unless detached."""
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=cwd or self.dir,
                env=env, start_new_session=True,
                preexec_fn=None if self.detached else set_pdeathsig)

    def _wait(self, ready, what):
        """Poll ready() (true, or raising OSError while not yet) until the
        start-up deadline; fail with the log's end if the server exits."""
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerError("%s exited with %s while %s:\n%s"
                                  % (self.kind, self.proc.returncode, what, self.log_tail()))
            try:
                if ready():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ServerError("%s: timed out %s:\n%s" % (self.kind, what, self.log_tail()))
            time.sleep(0.05)

    def _stop_processes(self):
        if self.pid is not None:
            kill_group(self.pid)
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
            self.pid = None

    def stop(self):
        """Stop every process and remove the directory. Idempotent."""
        with self._lock:
            self._stop_processes()
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
        except (OSError, TypeError):
            return ""

    def client(self, endpoint=None, retries=None, **config_kwargs):
        """A boto3 S3 client (path-style, SigV4, this server's keys).

        endpoint: defaults to this server's endpoint (pass a proxy's to
        go through it). retries: max_attempts (None keeps botocore's
        default; 0 disables retries so raw faults are visible)."""
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
        c = boto3.session.Session().client(
            "s3", endpoint_url=endpoint or self.endpoint,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            region_name=self.region, config=Config(**cfg))
        self._adapt_client(c)
        return c

    def _adapt_client(self, client):
        """A subclass's changes to every boto3 client (AIStore: follow 307)."""

    def create_bucket(self, name, timeout=30.0):
        """Create a bucket, retrying while the server comes up (the first
        requests after a start may answer 503)."""
        s3 = self.client(retries=0)
        deadline = time.monotonic() + timeout
        while True:
            try:
                s3.create_bucket(Bucket=name)
                return
            except Exception as e:
                resp = getattr(e, "response", None) or {}
                if resp.get("Error", {}).get("Code") in ("BucketAlreadyOwnedByYou",
                                                         "BucketAlreadyExists"):
                    return
                status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode", 503)
                if status < 500 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def store_objects(self, bucket, objects):
        """Store {key: bytes} by the cheapest path the server offers; the
        keys it could not store that way are returned for the caller to
        PUT. The default stores nothing."""
        return dict(objects)

    def state(self):
        return {"kind": self.kind, "endpoint": self.endpoint,
                "port": self.port, "pid": self.pid, "dir": self.dir, "data_dir": self.data_dir,
                "log": self.log_path, "access_key": self.access_key,
                "secret_key": self.secret_key, "region": self.region, "buckets": self.buckets}


@atexit.register
def _stop_all():
    for srv in list(_live):
        if not srv.detached:
            srv.stop()


def live_servers():
    return list(_live)
