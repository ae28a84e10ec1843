#!/usr/bin/python3
"""Start and stop a private OpenStack Swift with the s3api middleware for tests.

The same interface as harness.s3server (library and command line):

    from harness.swiftserver import SwiftServer
    with SwiftServer(buckets=["data"]) as srv:
        s3 = srv.client()

    /usr/bin/python3 tests/harness/swiftserver.py start --state-file F [--bucket B ...]
    /usr/bin/python3 tests/harness/swiftserver.py stop --state-file F

An all-in-one Swift on 127.0.0.1: account, container and object servers and a
proxy (each `workers = 0`, `mount_check = false`, `disable_fallocate = true`),
plus memcached for the proxy's cache filter, on free ports, started by one
shell that records their pids (the servers call setsid, so a process group
does not hold them) and stops them on SIGTERM. The one-replica, one-device
rings are built in this Python process with RingBuilder (the
swift-ring-builder command takes seconds per call). Devices,
rings, configurations and logs live in one temporary directory that stop()
removes. /etc/swift/swift.conf from the package is used as it is.

Packages (Debian 12): swift swift-proxy swift-object swift-container
swift-account python3-swift memcached (tools/bootstrap.sh installs them).
Credentials: access key `test:tester` (it contains a colon), secret `testing`.
"""

import argparse
import atexit
import json
import os
import shlex
import signal
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from harness.s3server import S3Server, ServerNotInstalled, _set_pdeathsig, kill_group  # noqa: E402

ACCESS_KEY = "test:tester"
SECRET_KEY = "testing"
REGION = "us-east-1"
PYTHON = "/usr/bin/python3"
SERVERS = ("account", "container", "object", "proxy")

_live = weakref.WeakSet()

_COMMON = """[DEFAULT]
bind_ip = 127.0.0.1
bind_port = {port}
workers = 0
mount_check = false
disable_fallocate = true
devices = {devices}
swift_dir = {swift_dir}
log_name = {name}
log_level = WARNING
"""

_BACKEND = """
[pipeline:main]
pipeline = {name}-server

[app:{name}-server]
use = egg:swift#{name}
"""

_PROXY = """
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats bulk s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:catch_errors]
use = egg:swift#catch_errors

[filter:gatekeeper]
use = egg:swift#gatekeeper

[filter:healthcheck]
use = egg:swift#healthcheck

[filter:proxy-logging]
use = egg:swift#proxy_logging

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:{memcached}

[filter:listing_formats]
use = egg:swift#listing_formats

[filter:bulk]
use = egg:swift#bulk

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
max_upload_part_num = 10000

[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin

[filter:copy]
use = egg:swift#copy

[filter:slo]
use = egg:swift#slo
max_manifest_segments = 10000

[filter:dlo]
use = egg:swift#dlo
"""


def free_ports(n):
    """n distinct ports the kernel calls free now (bound, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def build_rings(swift_dir, ports, device="d0"):
    """One-replica rings with one device each: account, container, object."""
    from swift.common.ring import RingBuilder

    for kind in ("account", "container", "object"):
        b = RingBuilder(6, 1, 1)
        b.add_dev({"id": 0, "region": 1, "zone": 1, "ip": "127.0.0.1",
                   "port": ports[kind], "device": device, "weight": 100,
                   "meta": ""})
        b.rebalance()
        b.get_ring().save(os.path.join(swift_dir, kind + ".ring.gz"))


def kill_pids(path):
    """SIGKILL every process named in path (one pid a line) that is still
    alive after the process group was stopped."""
    try:
        with open(path) as f:
            pids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class SwiftServerError(RuntimeError):
    pass


class SwiftServer:
    """A private Swift (s3api) on 127.0.0.1:<free port>, fresh directory.

    Attributes once started: endpoint, port (the proxy's), pid (process
    group leader), dir, log_path, access_key, secret_key, region.
    """

    kind = "swift"
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY
    region = REGION

    def __init__(self, buckets=(), detached=False, startup_timeout=60.0,
                 base_dir=None, **_ignored):
        self.buckets = list(buckets)
        self.detached = detached
        self.startup_timeout = startup_timeout
        self.base_dir = base_dir
        self.proc = None
        self.pids_path = None
        self.pid = None
        self.port = None
        self.endpoint = None
        self.dir = None
        self.data_dir = None
        self.log_path = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="objmount-swift-", dir=self.base_dir)
        devices = os.path.join(self.dir, "node")
        self.data_dir = os.path.join(devices, "d0")
        os.makedirs(self.data_dir)
        self.log_path = os.path.join(self.dir, "swift.log")
        ports = dict(zip(SERVERS + ("memcached",), free_ports(5)))
        build_rings(self.dir, ports)
        for name in SERVERS:
            text = _COMMON.format(port=ports[name], devices=devices,
                                  swift_dir=self.dir, name=name)
            text += _PROXY.format(memcached=ports["memcached"]) if name == "proxy" \
                else _BACKEND.format(name=name)
            with open(os.path.join(self.dir, name + "-server.conf"), "w") as f:
                f.write(text)
        self.port = ports["proxy"]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        _live.add(self)
        try:
            mc = ["memcached", "-l", "127.0.0.1", "-p", str(ports["memcached"]),
                  "-U", "0", "-m", "64"]
            if os.getuid() == 0:
                mc += ["-u", "root"]
            cmds = [mc] + [[PYTHON, "/usr/bin/swift-%s-server" % name,
                            os.path.join(self.dir, name + "-server.conf"), "-v"]
                           for name in SERVERS]
            self._spawn(cmds)
            self._wait_until_healthy()
            for b in self.buckets:
                self.create_bucket(b)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, cmds):
        """Start every command under one shell that leads a new session
        (self.pid); stop() kills its group and then every recorded pid."""
        for c in cmds:
            prog = c[1] if c[0] == PYTHON else c[0]
            if not shutil.which(prog):
                raise ServerNotInstalled(
                    "%s is missing: install the Swift packages with tools/bootstrap.sh" % prog)
        # Swift servers call setsid() and so leave the group: the shell
        # records their pids, and on SIGTERM (stop, or PR_SET_PDEATHSIG when
        # the test process dies) terminates them and waits for them.
        self.pids_path = os.path.join(self.dir, "pids")
        script = 'pids=""\ntrap \'kill $pids 2>/dev/null; wait; exit 0\' TERM INT HUP\n'
        script += "".join('%s &\npids="$pids $!"; echo $! >>%s\n'
                          % (" ".join(shlex.quote(a) for a in c), shlex.quote(self.pids_path))
                          for c in cmds)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                ["/bin/sh", "-c", script + "wait\n"], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, cwd=self.dir, start_new_session=True,
                preexec_fn=None if self.detached else _set_pdeathsig)
        finally:
            log.close()
        self.pid = self.proc.pid

    def _wait_until_healthy(self):
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise SwiftServerError("Swift exited with %s:\n%s"
                                       % (self.proc.returncode, self.log_tail()))
            try:
                urllib.request.urlopen(self.endpoint + "/healthcheck", timeout=2).read()
                return
            except (OSError, urllib.error.HTTPError):
                if time.monotonic() > deadline:
                    raise SwiftServerError("Swift does not answer on %s:\n%s"
                                           % (self.endpoint, self.log_tail()))
                time.sleep(0.1)

    def stop(self):
        """Kill the process group and remove the directory. Idempotent."""
        with self._lock:
            if self.pid is not None:
                kill_group(self.pid)
                kill_pids(self.pids_path)
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
    # the same as s3rver's: a boto3 client with this server's keys, the log's end
    client = S3Server.client
    log_tail = S3Server.log_tail

    def create_bucket(self, name, timeout=30.0):
        """Create a bucket, retrying while the account and container servers
        come up (the first requests after start may answer 503)."""
        s3 = self.client(retries=0)
        deadline = time.monotonic() + timeout
        while True:
            try:
                s3.create_bucket(Bucket=name)
                return
            except Exception as e:
                resp = getattr(e, "response", None) or {}
                if resp.get("Error", {}).get("Code") == "BucketAlreadyOwnedByYou":
                    return
                status = resp.get("ResponseMetadata", {}).get("HTTPStatusCode", 503)
                if status < 500 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def store_objects(self, bucket, objects, threads=8):
        """PUT {key: bytes} straight to the object server, as the proxy
        does for an S3 PUT (the object server then updates the container
        listing): test set-up of thousands of small objects at a third of the
        CPU of signed PUTs through the proxy and s3api (7.2 against 20
        CPU-seconds for 2,000 objects). The bucket must exist. Returns the
        keys left for the caller to PUT: names ending in `/` (directory
        markers), so that they carry what an S3 PUT gives them."""
        import http.client
        import urllib.parse
        from swift.common.ring import Ring
        from swift.common.utils import Timestamp

        account = "AUTH_" + ACCESS_KEY.split(":")[0]
        objects_ring = Ring(self.dir, ring_name="object")
        cpart, cnodes = Ring(self.dir, ring_name="container").get_nodes(account, bucket)
        container = {"X-Container-Host": "%(ip)s:%(port)s" % cnodes[0],
                     "X-Container-Partition": str(cpart),
                     "X-Container-Device": cnodes[0]["device"],
                     "X-Backend-Storage-Policy-Index": "0",
                     "Content-Type": "binary/octet-stream"}
        local = threading.local()

        def put(item):
            key, body = item
            part, nodes = objects_ring.get_nodes(account, bucket, key)
            node = nodes[0]
            path = "/%s/%d/%s/%s/%s" % (node["device"], part, account,
                                        urllib.parse.quote(bucket),
                                        urllib.parse.quote(key))
            headers = dict(container, **{"X-Timestamp": Timestamp.now().internal,
                                         "Content-Length": str(len(body))})
            for attempt in range(5):
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(
                        node["ip"], node["port"], timeout=60)
                try:
                    conn.request("PUT", path, body=body, headers=headers)
                    resp = conn.getresponse()
                    resp.read()
                except (OSError, http.client.HTTPException):
                    conn.close()
                    local.conn = None
                    status = None
                else:
                    status = resp.status
                if status == 201:
                    return
                if attempt == 4:
                    raise SwiftServerError("object server PUT %s: %s" % (key, status))
                time.sleep(0.2 * (attempt + 1))

        from concurrent.futures import ThreadPoolExecutor
        rest = {k: v for k, v in objects.items() if k.endswith("/")}
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(put, [kv for kv in objects.items() if kv[0] not in rest]))
        return rest

    def state(self):
        return {"kind": self.kind, "endpoint": self.endpoint, "port": self.port,
                "pid": self.pid, "dir": self.dir, "data_dir": self.data_dir,
                "log": self.log_path, "access_key": self.access_key,
                "secret_key": self.secret_key, "region": self.region,
                "buckets": self.buckets}


@atexit.register
def _stop_all():
    for srv in list(_live):
        if not srv.detached:
            srv.stop()


# -- command line ------------------------------------------------------------
def _cmd_start(args):
    srv = SwiftServer(buckets=args.bucket, detached=True, base_dir=args.base_dir)
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
    if d:
        kill_pids(os.path.join(d, "pids"))
    if d and os.path.basename(d).startswith("objmount-swift-"):
        shutil.rmtree(d, ignore_errors=True)
    os.unlink(args.state_file)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("start", help="start a detached Swift, print JSON")
    ps.add_argument("--state-file", required=True)
    ps.add_argument("--bucket", action="append", default=[])
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
