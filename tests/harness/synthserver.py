"""Start and stop tools/synthbucket.py (a synthetic bucket of N keys) for
tests and benchmarks.

    from harness.synthserver import SynthServer
    with SynthServer(keys=20000, per_dir=500, fanout=8) as srv:
        srv.endpoint            # http://127.0.0.1:PORT
        srv.layout              # {"keys", "fanout", "per_dir", "depth", "size", ...}
        srv.stats(reset=True)   # {"requests": {"total", "by_kind"}, ...}

    # pytest fixtures: a module's server, and objmount mounts of it
    with serving(tmp_path_factory, 20000, bucket="bench", per_dir=500) as srv: ...
    with mounts_of(srv, cache_dir) as mount: m = mount("profile=training,ro")

The server runs as a child process (its own session, SIGTERM when this
process dies) on a free loopback port; stop() kills it by its pid and waits.
Keyword arguments are synthbucket.py's options (per_dir -> --per-dir).
"""

import json
import os
from contextlib import contextmanager
import signal
import subprocess
import sys
import urllib.request

from .procs import set_pdeathsig as _set_pdeathsig

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "tools", "synthbucket.py")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


class SynthServer:
    def __init__(self, keys, log_path=None, **opts):
        self.argv = [PYTHON, SCRIPT, "--keys", str(keys)]
        for k, v in opts.items():
            if v is not None:
                self.argv += ["--" + k.replace("_", "-"), str(v)]
        self.log_path = log_path
        self.proc = None
        self.info = None

    def start(self, timeout=30.0):
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.PIPE, stderr=log,
                                         start_new_session=True, preexec_fn=_set_pdeathsig)
        finally:
            if self.log_path:
                log.close()
        line = self.proc.stdout.readline()
        if not line:
            rc = self.proc.wait(timeout=timeout)
            raise RuntimeError("synthbucket exited with %s before listening: %s"
                               % (rc, " ".join(self.argv)))
        self.info = json.loads(line)
        return self

    @property
    def endpoint(self):
        return self.info["endpoint"]

    @property
    def port(self):
        return self.info["port"]

    @property
    def pid(self):
        return self.proc.pid

    @property
    def layout(self):
        return self.info

    def stats(self, reset=False):
        url = self.endpoint + "/__stats" + ("?reset=1" if reset else "")
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        self.proc.stdout.close()
        self.proc = None

    def __enter__(self):
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


@contextmanager
def serving(tmp_path_factory, keys, **opts):
    """A SynthServer of keys (opts: synthbucket.py's options), its log in a
    fresh pytest temporary directory; stopped when the block ends."""
    log = tmp_path_factory.mktemp("synth") / "synthbucket.log"
    srv = SynthServer(keys, log_path=str(log), **opts).start()
    try:
        yield srv
    finally:
        srv.stop()


@contextmanager
def mounts_of(srv, cache_dir):
    """make(opts="") -> an objmount mount of srv's bucket with -o
    cache_dir=cache_dir and opts; every mount is unmounted when the block
    ends (harness.mount.MountFactory)."""
    from .mount import MountFactory
    factory = MountFactory(srv.endpoint)

    def make(opts=""):
        return factory(srv.layout["bucket"],
                       ",".join(o for o in ("cache_dir=" + cache_dir, opts) if o))
    try:
        yield make
    finally:
        factory.finish()
