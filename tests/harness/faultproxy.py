#!/usr/bin/python3
"""Python handle on tools/faultproxy/faultproxy.js.

    from harness.faultproxy import FaultProxy
    with FaultProxy(upstream=srv.endpoint) as fp:
        fp.set_faults(errors={"status": 503, "code": "SlowDown", "nth": 1})
        client = fp.client()               # boto3 through the plain proxy
        gw = fp.client(gateway=True)       # boto3 against the AIStore gateway
        fp.stats()["faults"]["errors"]

Endpoints: .endpoint (plain proxy), .gateway_endpoint (AIStore gateway,
with the /s3 path prefix), .target_endpoint (AIStore target, no prefix:
Location headers add /s3), .control_endpoint (JSON control API).

Fault modes (each a dict, None to switch off; all combinable):
  latency   first_byte_ms, per_mib_ms
  errors    status (500/502/503/504/400), code (SlowDown, RequestTimeout...)
  reset     after_bytes, direction ("response" default, or "request")
  truncate  bytes | fraction  (Content-Length still announces the full size)
  short_put bytes | fraction  (PUT/UploadPart body cut, re-signed, stored)
and for every mode the trigger and filters:
  nth (1-based, among matching requests) + count (default 1), or rate
  (seeded by "seed"), else every matching request; method, kind (S3
  operation: GetObject, UploadPart, ...), key (regex), query (parameter name
  or list that must be present), listener ("front", "gateway", "target").
aistore options: set_faults(aistore={"etag_non_md5": True,
  "multipart_etag": "aws", "drop_content_md5": False}).
set_faults(ignore_if_match=True): the plain proxy drops If-Match from GET
and HEAD (and re-signs), like a store that ignores it.
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
import weakref

from . import procs, servers

PROXY_JS = os.path.join(procs.REPO_ROOT, "tools", "faultproxy", "faultproxy.js")

_live = weakref.WeakSet()


class FaultProxy:
    def __init__(self, upstream, access_key=None, secret_key=None, region="us-east-1",
                 config=None, startup_timeout=15.0):
        # keys: given, else the upstream server's, else the selected server's
        access_key = access_key or getattr(upstream, "access_key", None) or servers.access_key()
        secret_key = secret_key or getattr(upstream, "secret_key", None) or servers.secret_key()
        self.server = upstream if hasattr(upstream, "endpoint") else None
        if self.server is not None:
            upstream = upstream.endpoint
        self.upstream = upstream
        # the proxy forwards paths unchanged: an upstream under a path
        # (AIStore's /s3) is reached under the same path through it
        self.path = urllib.parse.urlsplit(upstream).path.rstrip("/")
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.initial_config = config
        self.startup_timeout = startup_timeout
        self.proc = None
        self.dir = None
        self.ports = None

    # -- lifecycle -----------------------------------------------------------
    def start(self):
        self.dir = tempfile.mkdtemp(prefix="objmount-faultproxy-")
        port_file = os.path.join(self.dir, "ports.json")
        self.log_path = os.path.join(self.dir, "faultproxy.log")
        cmd = [procs.node_binary(), PROXY_JS, "--upstream", self.upstream,
               "--listen", "127.0.0.1:0", "--control", "127.0.0.1:0",
               "--gateway", "127.0.0.1:0", "--target", "127.0.0.1:0",
               "--port-file", port_file, "--access-key", self.access_key,
               "--secret-key", self.secret_key, "--region", self.region]
        if self.initial_config:
            cmd += ["--config", json.dumps(self.initial_config)]
        if self.server is not None and getattr(self.server, "redirects", False):
            # an AIStore that answers with 307s: its targets are reached
            # through the proxy too, so every fault reaches them
            cmd.append("--hop-redirects")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, preexec_fn=procs.set_pdeathsig)
        _live.add(self)
        deadline = time.monotonic() + self.startup_timeout
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = self.log_tail()
                self.stop()
                raise RuntimeError("faultproxy did not start:\n" + log)
            time.sleep(0.02)
        with open(port_file) as f:
            self.ports = json.load(f)
        self.port = self.ports["front"]
        self.endpoint = "http://127.0.0.1:%d%s" % (self.ports["front"], self.path)
        self.gateway_port = self.ports["gateway"]
        self.gateway_endpoint = "http://127.0.0.1:%d/s3" % self.ports["gateway"]
        self.target_port = self.ports["target"]
        self.target_endpoint = "http://127.0.0.1:%d" % self.ports["target"]
        self.control_endpoint = "http://127.0.0.1:%d" % self.ports["control"]
        return self

    def stop(self):
        if self.proc is not None:
            procs.kill_group(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        _live.discard(self)

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def log_tail(self, n=4000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except (OSError, AttributeError):
            return ""

    # -- control API ----------------------------------------------------------
    def _call(self, method, path, obj=None):
        data = None if obj is None else json.dumps(obj).encode()
        req = urllib.request.Request(self.control_endpoint + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def set_faults(self, **modes):
        """Merge fault modes into the running config (None switches one off)."""
        return self._call("PUT", "/config", modes)

    def replace_config(self, config):
        return self._call("PUT", "/config?replace=1", config)

    def config(self):
        return self._call("GET", "/config")

    def reset(self):
        """All faults off, counters zeroed, RNG re-seeded."""
        return self._call("POST", "/reset")

    def reset_stats(self):
        return self._call("POST", "/reset?what=stats")

    def stats(self):
        """Counters: requests {total, by_method, by_kind, by_listener}, faults
        {mode: n}, faults_by_kind, redirects, target_refused, bytes, ..."""
        return self._call("GET", "/stats")

    def faults_injected(self, mode=None):
        f = self.stats()["faults"]
        return f if mode is None else f[mode]

    def requests_seen(self, kind=None, method=None):
        r = self.stats()["requests"]
        if kind:
            return r["by_kind"].get(kind, 0)
        if method:
            return r["by_method"].get(method, 0)
        return r["total"]

    def key_requests(self, key, kind=None):
        """Requests of the one object key (of kind, when given) seen since
        the last reset; counted only for keys matching the regular expression
        given as set_faults(count_keys=...). On AIStore's native API the
        proxy sees /v1/objects/BUCKET/KEY: those count too."""
        n = 0
        for k, v in self.stats()["requests"].get("by_key", {}).items():
            kd, _, got = k.partition(" ")
            if (kind is None or kd == kind) and (got == key or got.endswith("/" + key)):
                n += v
        return n

    def redirects_issued(self):
        return self.stats()["redirects"]

    # -- clients -------------------------------------------------------------
    def client(self, gateway=False, retries=0, **config_kwargs):
        """boto3 client through the proxy (gateway=True: the AIStore gateway).
        retries=0 (default) makes every injected fault visible. Through
        the plain proxy, the client is the upstream server's kind (an
        AIStore's follows its 307s)."""
        if self.server is not None and not gateway:
            return self.server.client(endpoint=self.endpoint, retries=retries, **config_kwargs)
        import boto3
        from botocore.config import Config

        cfg = {"s3": {"addressing_style": "path"}, "signature_version": "s3v4"}
        if retries == 0:
            cfg["retries"] = {"total_max_attempts": 1}
        elif retries is not None:
            cfg["retries"] = {"max_attempts": retries, "mode": "standard"}
        cfg.update(config_kwargs)
        return boto3.session.Session().client(
            "s3", endpoint_url=self.gateway_endpoint if gateway else self.endpoint,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            region_name=self.region, config=Config(**cfg))


def _stop_all():
    for fp in list(_live):
        fp.stop()


import atexit  # noqa: E402

atexit.register(_stop_all)
