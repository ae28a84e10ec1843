#!/usr/bin/python3
"""Start and stop a private OpenStack Swift with the s3api middleware for tests.

The interface of every server of the harness (harness.serverbase):

    from harness.swiftserver import SwiftServer
    with SwiftServer(buckets=["data"]) as srv:
        s3 = srv.client()

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

import os
import shlex
import shutil
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from harness.procs import ServerError, ServerNotInstalled, free_ports  # noqa: E402
from harness.serverbase import Server  # noqa: E402

ACCESS_KEY = "test:tester"
SECRET_KEY = "testing"
REGION = "us-east-1"
PYTHON = "/usr/bin/python3"
SERVERS = ("account", "container", "object", "proxy")


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


class SwiftServer(Server):
    """A private Swift (s3api) on 127.0.0.1:<free port>, fresh directory.

    Attributes once started: endpoint, port (the proxy's), pid (process
    group leader), dir, log_path, access_key, secret_key, region.
    """

    kind = "swift"
    prefix = "objmount-swift-"
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY

    def __init__(self, buckets=(), **kw):
        super().__init__(buckets, **kw)
        self.pids_path = None

    # -- lifecycle ---------------------------------------------------------
    def _launch(self):
        devices = os.path.join(self.dir, "node")
        self.data_dir = os.path.join(devices, "d0")
        os.makedirs(self.data_dir)
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
        mc = ["memcached", "-l", "127.0.0.1", "-p", str(ports["memcached"]),
              "-U", "0", "-m", "64"]
        if os.getuid() == 0:
            mc += ["-u", "root"]
        cmds = [mc] + [[PYTHON, "/usr/bin/swift-%s-server" % name,
                        os.path.join(self.dir, name + "-server.conf"), "-v"]
                       for name in SERVERS]
        self._spawn(cmds)

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
        self.proc = self._popen(["/bin/sh", "-c", script + "wait\n"])
        self.pid = self.proc.pid

    def _wait_until_ready(self):
        def ready():
            try:
                urllib.request.urlopen(self.endpoint + "/healthcheck", timeout=2).read()
                return True
            except urllib.error.HTTPError:
                return False
        self._wait(ready, "waiting for its health check on " + self.endpoint)

    def _stop_processes(self):
        pid = self.pid
        super()._stop_processes()
        if pid is not None:
            kill_pids(self.pids_path)

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
                    raise ServerError("object server PUT %s: %s" % (key, status))
                time.sleep(0.2 * (attempt + 1))

        from concurrent.futures import ThreadPoolExecutor
        rest = {k: v for k, v in objects.items() if k.endswith("/")}
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(put, [kv for kv in objects.items() if kv[0] not in rest]))
        return rest
