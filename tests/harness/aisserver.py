"""A private AIStore cluster for tests: one proxy and two targets of the
pinned aisnode (tools/go-servers.lock, built by tools/bootstrap.sh).

    from harness.aisserver import AisCluster
    with AisCluster(buckets=["data"]) as ais:
        s3 = ais.client()                 # boto3 on its S3 API, following 307s
        ais.native_put("data", "k", b"x") # its native API, no signing

Every node listens on loopback only: its public address is 127.0.0.1:PORT
and its intra-cluster (control and data) address 127.0.0.2:PORT, the same
port on another address. aisnode listens on every interface when the two
ports differ (ais/htrun.go, pubAddrAny), so the harness gives them the same
port, and puts 127.0.0.2 on the loopback device when it is not there
(`ip addr add 127.0.0.2/32 dev lo`; as root, once per boot).

Targets use one plain directory each as their mountpath (test_fspaths, as
AIStore's deploy/dev/local does), under the cluster's temporary directory,
which must be on a file system with user xattrs (ext4 or xfs: /tmp here).
The nodes start one after the other (two targets joining at once made the
primary retry its metasync for 8 s) with the shortest control-plane
timeouts aisnode accepts (1 s, keep-alive 2 s: the primary is ready after
about 2 s instead of 5 s of quiet time), and the primary skips its wait
for registrations (-skip_startup): the harness waits for both targets in
the cluster map itself. About 3 s from start to a healthy cluster.

Settings a test kind may choose:
  api          "s3": endpoint is http://127.0.0.1:PORT/s3 (the S3 API), or
               "native": endpoint is http://127.0.0.1:PORT (objmount mounts ais://BUCKET)
  reverse_proxy  the cluster feature S3-Reverse-Proxy: the proxy forwards S3
               requests to targets instead of answering 307
  checksum     the cluster's checksum type for new buckets: "xxhash2"
               (AIStore's default; ETags are "v1-<xxhash>-<time>") or "md5"
               (ETags are MD5s, as S3's)
AIStore's authentication stays off (its default): SigV4 is accepted and
ignored, so the access key and secret below are only what clients send.
"""

import http.client
import json
import os
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from . import gobin
from .procs import ServerError, kill_group, reserve_ports, set_pdeathsig
from .serverbase import Server

ACCESS_KEY = "objmount-ais-access"
SECRET_KEY = "objmount-ais-secret"
INTRA_HOST = "127.0.0.2"
FEATURE_S3_REVERSE_PROXY = 1 << 13  # cmn/feat: S3-Reverse-Proxy
NTARGETS = 2


def ensure_intra_address():
    """127.0.0.2 on the loopback device, added when missing (root only)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", "lo"],
                         capture_output=True, text=True).stdout
    if " %s/" % INTRA_HOST in out:
        return
    p = subprocess.run(["ip", "addr", "add", INTRA_HOST + "/32", "dev", "lo"],
                       capture_output=True, text=True)
    if p.returncode != 0 and "File exists" not in p.stderr:
        raise ServerError(
            "AIStore's intra-cluster address %s is not on the loopback device and could not be "
            "added (%s): run `ip addr add %s/32 dev lo` as root" % (INTRA_HOST, p.stderr.strip(),
                                                                   INTRA_HOST))


def _cluster_config(primary_url, features, checksum):
    """The cluster (global) configuration; aisnode fills every section left out."""
    return {
        "backend": {},
        "timeout": {"cplane_operation": "1s", "max_keepalive": "2s", "cold_get_conflict": "5s",
                    "max_host_busy": "20s", "startup_time": "30s", "join_startup_time": "1m",
                    "send_file_time": "5m", "ec_streams_time": "10m", "object_md": "2h"},
        "proxy": {"primary_url": primary_url, "original_url": primary_url,
                  "discovery_url": "", "non_electable": False},
        "space": {"cleanupwm": 65, "lowwm": 75, "highwm": 90, "out_of_space": 95,
                  "batch_size": 32768, "dont_cleanup_time": "120m"},
        "memsys": {"min_free": "256mb", "default_buf": "32kb", "to_gc": "1gb", "hk_time": "3m",
                   "min_pct_total": 0, "min_pct_free": 0},
        "versioning": {"enabled": True, "validate_warm_get": False},
        # as a deployed cluster has them: a target that returns gets back
        # the objects written while it was away
        "rebalance": {"dest_retry_time": "2m", "compression": "never", "bundle_multiplier": 2,
                      "burst_buffer": 1024, "enabled": True},
        "resilver": {"enabled": True},
        # heartbeats every second: a dead target leaves the cluster map in
        # seconds, and a rebalance's waits between stages are seconds
        "keepalivetracker": {"proxy": {"interval": "1s", "name": "heartbeat", "factor": 3},
                             "target": {"interval": "1s", "name": "heartbeat", "factor": 3},
                             "num_retries": 3, "retry_factor": 2},
        # short idle times: a rebalance ends 2 s after its streams go quiet
        # (after 40 s with the deployed 4 s / 10 s)
        "transport": {"max_header": 4096, "burst_buffer": 512, "idle_teardown": "2s",
                      "quiescent": "8s", "lz4_block": "256kb", "lz4_frame_checksum": False},
        "checksum": {"type": checksum, "validate_cold_get": False, "validate_warm_get": False,
                     "validate_obj_move": False, "enable_read_range": False},
        "net": {"l4": {"proto": "tcp", "sndrcv_buf_size": 131072},
                "http": {"use_https": False, "server_crt": "server.crt",
                         "server_key": "server.key", "domain_tls": "", "client_ca_tls": "",
                         "client_auth_tls": 0, "idle_conn_time": "6s",
                         "idle_conns_per_host": 32, "idle_conns": 256,
                         "write_buffer_size": 65536, "read_buffer_size": 65536,
                         "chunked_transfer": True, "skip_verify": False},
                "use_ipv6": False},
        "auth": {},
        "features": str(features),
    }


class _Node:
    def __init__(self, cluster, index, role, port):
        self.cluster, self.index, self.role, self.port = cluster, index, role, port
        self.dir = os.path.join(cluster.dir, "%s%d" % (role, index))
        self.url = "http://127.0.0.1:%d" % port
        self.proc = None
        self.daemon_id = "%s%d%s" % (role[0], index, os.urandom(4).hex())

    def write_config(self, cluster_config):
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, "ais.json"), "w") as f:
            json.dump(cluster_config, f)
        local = {"confdir": self.dir, "log_dir": os.path.join(self.dir, "log"),
                 "host_net": {"hostname": "127.0.0.1", "hostname_intra_control": INTRA_HOST,
                              "hostname_intra_data": "", "port": str(self.port),
                              "port_intra_control": str(self.port), "port_intra_data": "0"},
                 "fspaths": {},
                 "test_fspaths": {"root": os.path.join(self.cluster.dir, "mountpaths"),
                                  "count": 1 if self.role == "target" else 0,
                                  "instance": self.index}}
        with open(os.path.join(self.dir, "ais_local.json"), "w") as f:
            json.dump(local, f)

    def start(self):
        cmd = [gobin.path("aisnode"), "-config=" + os.path.join(self.dir, "ais.json"),
               "-local_config=" + os.path.join(self.dir, "ais_local.json"), "-role=" + self.role]
        if self.role == "proxy":
            cmd.append("-skip_startup")
        else:
            # a node's ID stays across restarts, as a deployed target's does
            # (kept on its mountpaths; test_fspaths keep none, and a target
            # started again under a new ID hands its objects to the other)
            cmd.append("-daemon_id=" + self.daemon_id)
        with open(os.path.join(self.dir, "stdout.log"), "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=self.dir,
                start_new_session=True,
                preexec_fn=None if self.cluster.detached else set_pdeathsig)

    def stop(self, hard=False):
        if self.proc is None:
            return
        if hard:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
        kill_group(self.proc.pid)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def log_tail(self, n=1500):
        out = []
        logdir = os.path.join(self.dir, "log")
        for name in ("stdout.log",) + tuple(
                os.path.join("log", f) for f in sorted(os.listdir(logdir))
                if f.endswith(".ERROR")) if os.path.isdir(logdir) else ("stdout.log",):
            try:
                with open(os.path.join(self.dir, name), "rb") as f:
                    text = f.read()[-n:].decode("utf-8", "replace").strip()
            except OSError:
                continue
            if text:
                out.append("[%s%d %s]\n%s" % (self.role, self.index, name, text))
        return "\n".join(out)


class AisCluster(Server):
    kind = "aistore"
    prefix = "objmount-aistore-"
    access_key = ACCESS_KEY
    secret_key = SECRET_KEY

    def __init__(self, buckets=(), api="s3", reverse_proxy=False, checksum="xxhash2", **kw):
        super().__init__(buckets, **kw)
        if api not in ("s3", "native") or checksum not in ("xxhash2", "md5"):
            raise ValueError("AisCluster: api s3|native, checksum xxhash2|md5")
        self.api = api
        self.reverse_proxy = reverse_proxy
        self.checksum = checksum
        self.nodes = []
        self._ports = None
        self.proxy_url = None

    part_copy = False    # UploadPartCopy: 501 Not Implemented
    file_dir_conflict = True  # ErrMv, when one target holds both (target_port)
    dir_markers = False  # "dir/" is stored as "dir" (S3), refused (native)

    @property
    def user_metadata(self):
        """The S3 API stores no x-amz-meta-*; the native API keeps custom
        metadata (objmount's X-Amz-Meta-* keys, shown by the S3 API)."""
        return self.api == "native"

    @property
    def redirects(self):
        """Object requests are answered with redirects to the targets
        (always on the native API; on the S3 API unless S3-Reverse-Proxy)."""
        return self.api == "native" or not self.reverse_proxy

    # -- lifecycle ---------------------------------------------------------
    def _launch(self):
        ensure_intra_address()
        gobin.path("aisnode")  # ServerNotInstalled before anything starts
        # the same port on both addresses, held until stop(): a killed
        # target comes back on its port (see reserve_ports)
        self._ports = reserve_ports(1 + NTARGETS, hosts=("127.0.0.1", INTRA_HOST))
        ports = self._ports.ports
        self.port = ports[0]
        self.proxy_url = "http://127.0.0.1:%d" % self.port
        self.endpoint = self.proxy_url + ("/s3" if self.api == "s3" else "")
        self.data_dir = os.path.join(self.dir, "mountpaths")
        config = _cluster_config(self.proxy_url,
                                 FEATURE_S3_REVERSE_PROXY if self.reverse_proxy else 0,
                                 self.checksum)
        self.nodes = [_Node(self, 0, "proxy", ports[0])] + [
            _Node(self, i, "target", ports[i]) for i in range(1, 1 + NTARGETS)]
        for n in self.nodes:
            n.write_config(config)
        # The proxy stands for the cluster: stop() kills its group and
        # every target's.
        self.nodes[0].start()
        self.proc = self.nodes[0].proc
        self.pid = self.proc.pid

    def _wait_until_ready(self):
        self._wait(self._healthy, "waiting for the primary proxy at " + self.proxy_url)
        for n in self.nodes[1:]:
            n.start()
            self._wait(lambda n=n: self.targets_joined() >= n.index,
                       "waiting for target %d to join" % n.index)
        self._wait(self._healthy, "waiting for a healthy cluster")

    def _healthy(self):
        try:
            urllib.request.urlopen(self.proxy_url + "/v1/health?prr=true", timeout=2).read()
            return True
        except urllib.error.HTTPError:
            return False

    def _joined_all(self):
        try:
            return self.targets_joined() >= len(self.targets)
        except OSError:
            return False

    def _target_healthy(self, t):
        try:
            urllib.request.urlopen(t.url + "/v1/health", timeout=2).read()
            return True
        except (urllib.error.HTTPError, OSError):
            return False

    def targets_joined(self):
        """Targets in the primary's cluster map."""
        smap = json.loads(urllib.request.urlopen(
            self.proxy_url + "/v1/daemon?what=smap", timeout=5).read())
        return len(smap.get("tmap") or {})

    def _stop_processes(self):
        for n in reversed(self.nodes):
            n.stop()
        self.pid = None
        self.proc = None
        if self._ports is not None:
            self._ports.release()
            self._ports = None

    def log_tail(self, n=4000):
        return "\n".join(node.log_tail() for node in self.nodes)[-n:]

    # -- targets that go away ------------------------------------------------
    @property
    def targets(self):
        return self.nodes[1:]

    def stop_target(self, i, hard=True):
        """Stop target i (0-based) as a crash would (SIGKILL with hard)."""
        self.targets[i].stop(hard=hard)

    def rebalances(self):
        """{uuid: ended (or aborted)} of the cluster's rebalances, as its
        proxy tells."""
        status, body = self.native("GET", "/v1/cluster?what=status_all",
                                   json.dumps({"kind": "rebalance"}).encode(),
                                   {"Content-Type": "application/json"})
        if status != 200:
            raise ServerError("rebalance status: %d %s" % (status, body[:200]))
        return {x["uuid"]: bool(x.get("end_time") or x.get("aborted"))
                for x in json.loads(body) or []}

    def start_target(self, i, timeout=30.0):
        """Start target i again and wait until the cluster is healthy. Its
        return starts a rebalance (about 40 s here, whatever the data:
        AIStore's stages wait out idle times), and until that ends an
        object the target held may not be found (the map treats it as
        joining): wait_rebalanced()."""
        t = self.targets[i]
        t.start()
        deadline = time.monotonic() + timeout
        while not (self._joined_all() and self._healthy() and self._target_healthy(t)):
            if time.monotonic() > deadline:
                raise ServerError("cluster not healthy after target %d restarted:\n%s"
                                  % (i, self.log_tail()))
            time.sleep(0.1)

    def wait_rebalanced(self, since=(), timeout=90.0, start_within=10.0):
        """Wait until a rebalance that is not one of since (uuids taken
        from rebalances() before the event) has ended, and none runs; when
        no new one starts within start_within seconds, until none runs."""
        t0 = time.monotonic()
        while True:
            r = self.rebalances()
            new = set(r) - set(since)
            if r and all(r.values()) and (new or time.monotonic() > t0 + start_within):
                return
            if time.monotonic() > t0 + timeout:
                raise ServerError("a rebalance still runs after %.0f s: %s" % (timeout, r))
            time.sleep(0.5)

    def target_port(self, bucket, key):
        """The port of the target that holds (or would hold) key: where the
        proxy redirects a native HEAD of it."""
        u = urllib.parse.urlsplit(self.proxy_url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("HEAD", "/v1/objects/%s/%s" % (bucket, urllib.parse.quote(key, safe="/")))
            resp = conn.getresponse()
            resp.read()
        finally:
            conn.close()
        loc = resp.getheader("Location")
        if resp.status != 307 or not loc:
            raise ServerError("HEAD %s/%s: %d without a redirect" % (bucket, key, resp.status))
        return urllib.parse.urlsplit(loc).port

    # -- clients -----------------------------------------------------------
    def client(self, endpoint=None, retries=None, **config_kwargs):
        """boto3 on the S3 API (the native kind's too), following AIStore's
        307s: botocore does not (AIStore ships a patch of its own)."""
        if endpoint is None:
            endpoint = self.proxy_url + "/s3"
        return super().client(endpoint=endpoint, retries=retries, **config_kwargs)

    def _adapt_client(self, client):
        follow_redirects(client)
        # no Expect: 100-continue on bodies: botocore sends the body after
        # waiting a second for the 100; under load the proxy's late 100
        # (S3-Reverse-Proxy) was read as the start of the next response on
        # the connection, and a set-up PUT's 200 became the body of the next
        # call ("invalid XML received": 71 set-up errors in one run)
        from botocore import handlers
        client.meta.events.unregister("before-call.s3", handlers.add_expect_header)

    def create_bucket(self, name, timeout=30.0):
        """Create an ais:// bucket through the native API (every kind)."""
        deadline = time.monotonic() + timeout
        while True:
            status, body = self.native("POST", "/v1/buckets/" + name,
                                       json.dumps({"action": "create-bck"}).encode())
            if status == 200 or (status == 409 and b"already exists" in body):
                return
            # a target that has just joined may not take the proxy's
            # transaction yet ("failed to call t[...]: dial tcp"): 400
            # ErrFailedTo, tried again until the deadline
            again = status >= 500 or (status == 400 and b"ErrFailedTo" in body)
            if not again or time.monotonic() > deadline:
                raise ServerError("create bucket %s: %d %s" % (name, status, body[:200]))
            time.sleep(0.2)

    def native(self, method, path, body=None, headers=None, timeout=60):
        """One native API request, following redirects (same method and
        body); returns (status, body bytes, headers dict)[:2] as a tuple
        of status and body, the last response's headers in .last_headers."""
        url = self.proxy_url + path
        for _ in range(5):
            u = urllib.parse.urlsplit(url)
            conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
            try:
                conn.request(method, u.path + ("?" + u.query if u.query else ""), body=body,
                             headers=dict(headers or {}))
                resp = conn.getresponse()
                data = resp.read()
            finally:
                conn.close()
            if resp.status in (301, 302, 307, 308) and resp.getheader("Location"):
                url = location(resp.getheader("Location"))
                continue
            self.last_headers = dict(resp.getheaders())
            return resp.status, data
        raise ServerError("%s %s: too many redirects" % (method, path))

    def store_objects(self, bucket, objects, threads=8):
        """PUT {key: bytes} with the native API (no signing, no MD5 of
        every body): test set-up of thousands of small objects. Returns the
        keys left for the caller to PUT (directory markers)."""
        from concurrent.futures import ThreadPoolExecutor

        rest = {k: v for k, v in objects.items() if k.endswith("/")}

        def put(item):
            key, body = item
            for attempt in range(5):
                status, data = self.native("PUT", "/v1/objects/%s/%s" % (
                    bucket, urllib.parse.quote(key, safe="/")), body=body)
                if status == 200:
                    return
                if status < 500 or attempt == 4:
                    raise ServerError("native PUT %s: %d %s" % (key, status, data[:200]))
                time.sleep(0.2 * (attempt + 1))

        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(put, [kv for kv in objects.items() if kv[0] not in rest]))
        return rest

    def state(self):
        s = super().state()
        s.update({"proxy_url": self.proxy_url, "api": self.api,
                  "reverse_proxy": self.reverse_proxy, "checksum": self.checksum,
                  "pids": [n.proc.pid for n in self.nodes if n.proc]})
        return s


_redirect_lock = threading.Lock()


def location(value):
    """A Location header as a URL to request. AIStore puts a key's UTF-8
    bytes in it unencoded; Python's HTTP clients decode header bytes as
    Latin-1, so a name with non-ASCII characters would come back mangled
    (boto3 through a redirect stored `😀.bin` as `ð\x9f\x98\x80.bin`):
    the bytes are percent-encoded instead."""
    raw = value.encode("latin-1", "strict")
    return urllib.parse.quote(raw, safe=":/?#[]@!$&'()*+,;=%~")


def follow_redirects(client, hops=5):
    """Make a boto3 client follow 301/302/307/308 as AIStore expects of
    an S3 client: the same method and body to the Location, verbatim
    (botocore answers a 307 with an error). Registered on before-send, so
    signing, retries and parsing stay botocore's."""
    from botocore.awsrequest import AWSPreparedRequest

    session = client._endpoint.http_session

    def send(request, **_):
        resp = session.send(request)
        for _ in range(hops):
            if resp.status_code not in (301, 302, 307, 308) or "location" not in resp.headers:
                return resp
            request.reset_stream()
            request = AWSPreparedRequest(request.method, location(resp.headers["location"]),
                                         request.headers, request.body, request.stream_output)
            resp = session.send(request)
        return resp

    client.meta.events.register("before-send.s3", send)
