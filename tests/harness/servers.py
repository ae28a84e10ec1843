#!/usr/bin/python3
"""Which real server the Python-driven tests and the benchmarks run against.

    versitygw      Versity S3 Gateway (posix backend), the default
    swift          OpenStack Swift with its s3api middleware
    aistore        an AIStore cluster (1 proxy, 2 targets) through its S3 API:
                   307 redirects to the targets, xxhash2 checksums (its defaults)
    aistore-proxy  the same through its S3 API with the S3-Reverse-Proxy feature
                   (no redirects) and md5 checksums
    ais            the same cluster through its native API: objmount mounts
                   ais://BUCKET (redirects, xxhash2)

Selected by pytest's `--server NAME` (tests/conftest.py sets the variable) or
by $OBJMOUNT_TEST_SERVER; tests/matrix.py says which test files run on which.
The credentials below are looked up at call time, so code that runs after the
selection gets the selected server's keys.

Command line (C programs, shell scripts, benchmarks):

    /usr/bin/python3 tests/harness/servers.py start --kind KIND --state-file F [--bucket B ...]
        prints one JSON line (endpoint, pids, dir, keys, ...) and leaves the
        server running, detached, in its own sessions
    /usr/bin/python3 tests/harness/servers.py stop --state-file F
"""

import argparse
import json
import os
import shutil
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from harness import aisserver, serverbase, swiftserver, vgwserver  # noqa: E402
    from harness.procs import kill_group  # noqa: E402
else:
    from . import aisserver, serverbase, swiftserver, vgwserver
    from .procs import kill_group


class AisS3Proxy(aisserver.AisCluster):
    """AIStore's S3 API with S3-Reverse-Proxy and md5 checksums."""
    kind = "aistore-proxy"

    def __init__(self, buckets=(), **kw):
        kw.update(api="s3", reverse_proxy=True, checksum="md5")
        super().__init__(buckets, **kw)


class AisNative(aisserver.AisCluster):
    """AIStore's native API: objmount mounts ais://BUCKET."""
    kind = "ais"

    def __init__(self, buckets=(), **kw):
        kw.update(api="native")
        super().__init__(buckets, **kw)


_CLASSES = {
    "versitygw": vgwserver.VersityServer,
    "swift": swiftserver.SwiftServer,
    "aistore": aisserver.AisCluster,
    "aistore-proxy": AisS3Proxy,
    "ais": AisNative,
}
KINDS = tuple(_CLASSES)
DEFAULT = "versitygw"
ENV = "OBJMOUNT_TEST_SERVER"
AISTORE_KINDS = ("aistore", "aistore-proxy", "ais")


def selected():
    """The selected server's name; ValueError for an unknown name."""
    kind = os.environ.get(ENV) or DEFAULT
    if kind not in KINDS:
        raise ValueError("%s=%s: expected one of %s" % (ENV, kind, ", ".join(KINDS)))
    return kind


def select(kind):
    """Select kind for this process and the programs it starts."""
    if kind not in KINDS:
        raise ValueError("unknown test server %r (expected one of %s)" % (kind, ", ".join(KINDS)))
    os.environ[ENV] = kind


def server_class(kind=None):
    """The server class of kind (default: the selected one): the same
    constructor keywords (buckets=, base_dir=, detached=) and methods
    (start, stop, client, create_bucket, store_objects, state)."""
    return _CLASSES[kind or selected()]


def native(kind=None):
    """The kind is mounted through AIStore's native API (ais://BUCKET)."""
    return (kind or selected()) == "ais"


def mount_source(bucket, prefix=None, kind=None):
    """What objmount is given as BUCKET[:PREFIX] on the selected server."""
    src = ("ais://" + bucket) if native(kind) else bucket
    return src if prefix is None else "%s:%s" % (src, prefix)


def live_server(endpoint):
    """The running server of this process at endpoint, or None (another
    process's server, a proxy, an external endpoint)."""
    for srv in serverbase.live_servers():
        s3 = getattr(srv, "proxy_url", None)
        if srv.dir and endpoint in (srv.endpoint, s3 and s3 + "/s3"):
            return srv
    return None


def access_key():
    return server_class().access_key


def secret_key():
    return server_class().secret_key


def credentials_line(access=None, secret=None):
    """One credentials-file line. KEY:SECRET is ambiguous when the key has a
    colon (Swift's `test:tester`): then the s3fs-style two-line form
    AWSAccessKeyId=KEY / AWSSecretKey=SECRET that objmount and s3fs read."""
    access = access if access is not None else access_key()
    secret = secret if secret is not None else secret_key()
    if ":" in access:
        return "AWSAccessKeyId=%s\nAWSSecretKey=%s\n" % (access, secret)
    return "%s:%s\n" % (access, secret)


# -- command line ------------------------------------------------------------
def _cmd_start(args):
    srv = server_class(args.kind)(buckets=args.bucket, detached=True, base_dir=args.base_dir)
    srv.start()
    state = srv.state()
    tmp = args.state_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, args.state_file)
    print(json.dumps(state), flush=True)
    serverbase._live.discard(srv)  # leave it running
    return 0


def _cmd_stop(args):
    try:
        with open(args.state_file) as f:
            state = json.load(f)
    except FileNotFoundError:
        print("no state file %s" % args.state_file, file=sys.stderr)
        return 1
    for pid in state.get("pids") or [state.get("pid")]:
        if pid:
            kill_group(int(pid))
    d = state.get("dir")
    if d:
        swiftserver.kill_pids(os.path.join(d, "pids"))
        if os.path.basename(d).startswith("objmount-"):
            shutil.rmtree(d, ignore_errors=True)
    os.unlink(args.state_file)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    ps = sub.add_parser("start", help="start a detached server, print JSON")
    ps.add_argument("--kind", choices=KINDS, default=DEFAULT)
    ps.add_argument("--state-file", required=True)
    ps.add_argument("--bucket", action="append", default=[])
    ps.add_argument("--base-dir", default=None, help="where to create the temporary directory")
    pt = sub.add_parser("stop", help="stop the server named in the state file")
    pt.add_argument("--state-file", required=True)
    args = p.parse_args(argv)
    return _cmd_start(args) if args.cmd == "start" else _cmd_stop(args)


if __name__ == "__main__":
    sys.exit(main())
