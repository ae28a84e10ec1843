"""Which real S3 server the Python-driven tests and the benchmark run against.

    s3rver   the pinned, patched s3rver (harness.s3server), the default
    swift    OpenStack Swift with its s3api middleware (harness.swiftserver)

Selected by pytest's `--server NAME` (tests/conftest.py sets the variable) or
by $OBJMOUNT_TEST_SERVER. The credentials below are looked up at call time, so
code that runs after the selection gets the selected server's keys.
"""

import os

from . import s3server, swiftserver

KINDS = ("s3rver", "swift")
ENV = "OBJMOUNT_TEST_SERVER"


def selected():
    """The selected server's name; ValueError for an unknown name."""
    kind = os.environ.get(ENV) or "s3rver"
    if kind not in KINDS:
        raise ValueError("%s=%s: expected one of %s" % (ENV, kind, ", ".join(KINDS)))
    return kind


def select(kind):
    """Select kind for this process and the programs it starts."""
    if kind not in KINDS:
        raise ValueError("unknown test server %r (expected one of %s)" % (kind, ", ".join(KINDS)))
    os.environ[ENV] = kind


def server_class(kind=None):
    """S3Server or SwiftServer: same constructor keywords (buckets=,
    base_dir=, detached=), same start/stop/client/create_bucket/state."""
    return {"s3rver": s3server.S3Server, "swift": swiftserver.SwiftServer}[kind or selected()]


def live_server(endpoint):
    """The running S3Server or SwiftServer of this process at endpoint, or
    None (another process's server, a proxy, an external endpoint)."""
    for srv in list(s3server._live) + list(swiftserver._live):
        if srv.endpoint == endpoint and srv.dir:
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
